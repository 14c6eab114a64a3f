// Table tests for the redactor: every rule, the count, and what must not be touched.
#include "core/redact.h"

#include <gtest/gtest.h>

namespace cordon {
namespace {

TEST(Redactor, TokenShapes) {
  Redactor r;
  struct Case {
    std::string in, out;
    std::size_t count;
  };
  const std::string gh = "ghp_" + std::string(36, 'A');
  const Case cases[] = {
      {"key AKIAIOSFODNN7EXAMPLE end", "key [REDACTED:aws_access_key] end", 1},
      {"t=" + gh + ";", "t=[REDACTED:github_token];", 1},
      {"github_pat_11ABCDEFG0123456789_abcdefghijk", "[REDACTED:github_token]", 1},
      {"xoxb-1234567890-abcdef", "[REDACTED:slack_token]", 1},
      {"Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [REDACTED:bearer]", 1},
      {"-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\nafter",
       "[REDACTED:private_key]\nafter", 1},
      {"-----BEGIN OPENSSH PRIVATE KEY-----\nunterminated", "[REDACTED:private_key]", 1},
      {"-----BEGIN CERTIFICATE-----\nMIIB", "-----BEGIN CERTIFICATE-----\nMIIB", 0},
      {"XAKIAIOSFODNN7EXAMPLE", "XAKIAIOSFODNN7EXAMPLE", 0},  // not at a word boundary
      {"bearer short", "bearer short", 0},
      {"nothing here", "nothing here", 0},
  };
  for (const auto& c : cases) {
    std::string s = c.in;
    EXPECT_EQ(r.Redact(s), c.count) << c.in;
    EXPECT_EQ(s, c.out) << c.in;
  }
}

TEST(Redactor, ExactValuesAndEnvironment) {
  Redactor r;
  std::string e1 = "MY_API_TOKEN=hunter2-very-secret";
  std::string e2 = "DB_PASSWORD=correct-horse";
  std::string e3 = "PATH=/usr/bin";
  std::string e4 = "SHORT_KEY=abc";  // too short to redact by exact match
  char* envp[] = {e1.data(), e2.data(), e3.data(), e4.data(), nullptr};
  r.AddSecretEnvironment(envp);
  r.AddValue("policy", "project-codename-zebra");
  std::string s = "a hunter2-very-secret b correct-horse c /usr/bin d project-codename-zebra abc";
  EXPECT_EQ(r.Redact(s), 3u);
  EXPECT_EQ(s, "a [REDACTED:env] b [REDACTED:env] c /usr/bin d [REDACTED:policy] abc");
}

TEST(Redactor, SecretNames) {
  EXPECT_TRUE(Redactor::IsSecretName("GITHUB_TOKEN"));
  EXPECT_TRUE(Redactor::IsSecretName("aws_secret_access_key"));
  EXPECT_TRUE(Redactor::IsSecretName("PGPASSWORD"));
  EXPECT_FALSE(Redactor::IsSecretName("HOME"));
}

TEST(Redactor, JsonStringsAndDeterminism) {
  Redactor r;
  r.AddValue("policy", "s3cr3t-value");
  Json j = {
      {"a", "x s3cr3t-value"}, {"b", {"s3cr3t-value", 1}}, {"c", {{"d", "AKIAIOSFODNN7EXAMPLE"}}}};
  Json k = j;
  EXPECT_EQ(r.RedactJson(j), 3u);
  EXPECT_EQ(r.RedactJson(k), 3u);
  EXPECT_EQ(j, k);
  EXPECT_EQ(j.dump().find("s3cr3t"), std::string::npos);
}

}  // namespace
}  // namespace cordon

namespace cordon {
namespace {

TEST(Redactor, PrivateKeyBlockSplitAcrossLines) {
  Redactor r;
  Json lines = {"before", "-----BEGIN RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA",
                "abcdef", "-----END RSA PRIVATE KEY-----",   "after"};
  EXPECT_EQ(r.RedactJson(lines), 4u);
  EXPECT_EQ(lines, Json({"before", "[REDACTED:private_key]", "[REDACTED:private_key]",
                         "[REDACTED:private_key]", "[REDACTED:private_key]", "after"}));
}

}  // namespace
}  // namespace cordon
