// The user's credential stores by value (workspace/credential_stores.h): each store's format
// gives its secret values, placeholders and common passwords are skipped and counted, and the
// redactor finds a value and its encoded forms whatever surrounds it (core/redact.h).
#include "workspace/credential_stores.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "core/redact.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

bool Has(const StoreValues& got, const std::string& v) {
  return std::find(got.values.begin(), got.values.end(), v) != got.values.end();
}

std::string B64(std::string_view in) {
  static constexpr char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

struct StoreCase {
  std::string file, content;
  std::vector<std::string> want;      // values it must give
  std::vector<std::string> not_want;  // what it must not take for a secret
  std::size_t skipped = 0;            // values under secret keys below the floor
};

TEST(CredentialValuesOf, EachStoreFormatGivesItsValues) {
  const std::string docker_pass = "dk-Pa55w0rd-7fQ2zLx";
  const std::string kube_key_body =
      "MC4CAQAwBQYDK2VwBCIEIHq9mUo2w7ZGcR4ZyN2b5oVJ0x3T8kPzKx1YwLm8Qz3d";
  const std::string kube_key =
      "-----BEGIN PRIVATE KEY-----\n" + kube_key_body + "\n-----END PRIVATE KEY-----\n";
  const StoreCase cases[] = {
      {"credentials",
       "[default]\naws_access_key_id = AKIAZ7Q2WXLMN4P5R6T7\n"
       "aws_secret_access_key = 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\n"
       "aws_session_token=FwoGZXIvYXdzEJr//////////wEaDOk3q9Lm2Zx7Vb5Yw\n"
       "region = eu-west-1\ncredential_process = /usr/bin/aws-vault export\n",
       {"AKIAZ7Q2WXLMN4P5R6T7", "wJ8rXUtnFEMI/K7MDENG/bPxRfiCYq9Zk2LmN3oP",
        "FwoGZXIvYXdzEJr//////////wEaDOk3q9Lm2Zx7Vb5Yw"},
       {"eu-west-1", "/usr/bin/aws-vault export"}},
      {".netrc",
       "machine api.example.test login bob password Tr0ub4dor&3-horse\n"
       "machine db.example.test\n  login alice\n  password postgres\n",
       {"Tr0ub4dor&3-horse"},
       {"bob", "alice", "postgres"},
       1},
      {".pgpass",
       "localhost:5432:app:app:s3cr\\:et-Pg-2024x\n*:*:*:postgres:postgres\n",
       {"s3cr:et-Pg-2024x"},
       {"postgres"},
       1},
      {"config.json",
       R"({"auths":{"registry.example.test":{"auth":")" + B64("bob:" + docker_pass) +
           R"("}},"credsStore":"desktop","identitytoken":"eyJhbGciOi.Jh2kLq9-Zr4T"})",
       {B64("bob:" + docker_pass), docker_pass, "eyJhbGciOi.Jh2kLq9-Zr4T"},
       {"desktop"}},
      {".npmrc",
       "//registry.npmjs.org/:_authToken=npm_Q2w3E4r5T6y7U8i9O0pAsDfGhJkL\nalways-auth=true\n"
       "email=dev@example.test\n",
       {"npm_Q2w3E4r5T6y7U8i9O0pAsDfGhJkL"},
       {"dev@example.test"},
       1},
      {".vault-token",
       "hvs.CAESIJ9xk2LmQp7RtYw3Zv5Nb8Hc\n",
       {"hvs.CAESIJ9xk2LmQp7RtYw3Zv5Nb8Hc"},
       {},
       0},
      {".my.cnf",
       "[client]\nuser=app\npassword=\"My-Sql_Pw.9931x\"\nhost=db\n",
       {"My-Sql_Pw.9931x"},
       {"app", "db"}},
      {"hosts.yml",
       "github.com:\n    user: bob\n    oauth_token: gho_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA\n"
       "    git_protocol: https\n",
       {"gho_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA"},
       {"https", "bob"}},
      {"config",
       "users:\n- name: ci\n  user:\n    token: kube-tok-8Hq2Lm4Np6Rs8Tv0Xz\n"
       "    client-key-data: " +
           B64(kube_key) +
           "\n"
           "clusters:\n- cluster:\n    certificate-authority-data: " +
           B64("not a secret at all") + "\n    server: https://10.0.0.1:6443\n",
       {"kube-tok-8Hq2Lm4Np6Rs8Tv0Xz", kube_key_body},
       {B64("not a secret at all")}},
      {".git-credentials",
       "https://bob:gIt%2Fpw-88Zq7@git.example.test\n",
       {"gIt%2Fpw-88Zq7", "gIt/pw-88Zq7"},
       {"bob"}},
      {"settings.xml",
       "<settings><servers><server><id>central</id><username>bob</username>"
       "<password>mvn&amp;Pw-4412Qz</password></server></servers></settings>",
       {"mvn&Pw-4412Qz"},
       {"central", "bob"}},
      {"NuGet.Config",
       "<configuration><packageSourceCredentials><feed>"
       "<add key=\"Username\" value=\"bob\" />"
       "<add key=\"ClearTextPassword\" value=\"NuG3t-Feed-Pw_77\" />"
       "</feed></packageSourceCredentials></configuration>",
       {"NuG3t-Feed-Pw_77"},
       {"bob"}},
      {"credentials.toml",
       "[registry]\ntoken = \"cio_Ab12Cd34Ef56Gh78Ij90\"\n",
       {"cio_Ab12Cd34Ef56Gh78Ij90"},
       {},
       0},
      {"credentials",
       "---\n:rubygems_api_key: rubygems_0f9e8d7c6b5a49382716\n",
       {"rubygems_0f9e8d7c6b5a49382716"},
       {},
       0},
      {"credentials.tfrc.json",
       R"({"credentials":{"app.terraform.io":{"token":"tfp.atlasv1.Qw8Er7Ty6Ui5Op4"}}})",
       {"tfp.atlasv1.Qw8Er7Ty6Ui5Op4"},
       {},
       0},
      {"application_default_credentials.json",
       R"({"client_id":"764086051850-abc.apps.googleusercontent.com","client_secret":"d-FL95Q19q7MQmFpd7hHD0Ty","refresh_token":"1//0gLkQ9xYz-Ab3Cd","type":"authorized_user","token_uri":"https://oauth2.googleapis.com/token"})",
       {"d-FL95Q19q7MQmFpd7hHD0Ty", "1//0gLkQ9xYz-Ab3Cd"},
       {"authorized_user", "https://oauth2.googleapis.com/token"}},
      {"msal_token_cache.json",
       R"({"AccessToken":{"k":{"secret":"eyJ0eXAiOiJKV1Qi.azure-at-Q1w2E3r4","expires_on":"1700000000"}},"RefreshToken":{"r":{"secret":"0.AXEAazure-rt-Z9y8X7w6"}}})",
       {"eyJ0eXAiOiJKV1Qi.azure-at-Q1w2E3r4", "0.AXEAazure-rt-Z9y8X7w6"},
       {"1700000000"}},
      {"secrets.yaml",
       "db:\n  password: ${DB_PASSWORD:?set it}\n  token: <your-token>\n",
       {},
       {"${DB_PASSWORD:?set it}", "<your-token>"},
       2},
  };
  for (const auto& c : cases) {
    const StoreValues got = CredentialValuesOf(c.file, c.content);
    for (const auto& w : c.want) EXPECT_TRUE(Has(got, w)) << c.file << ": missing " << w;
    for (const auto& n : c.not_want) EXPECT_FALSE(Has(got, n)) << c.file << ": took " << n;
    EXPECT_EQ(got.skipped, c.skipped) << c.file;
  }
}

TEST(CredentialValuesOf, APrivateKeyGivesEveryBodyLineAndABinaryCacheItsJson) {
  const std::string l1 = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz";
  const std::string l2 = "c2gtZWQyNTUxOQAAACBk8Qz3xW4mXk7pR0vT2bN9cLsY5aJ1hE6uF8gK3dM2oA";
  const StoreValues key =
      CredentialValuesOf("id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + l1 + "\n" + l2 +
                                           "\n-----END OPENSSH PRIVATE KEY-----\n");
  EXPECT_TRUE(Has(key, l1));
  EXPECT_TRUE(Has(key, l2));
  EXPECT_TRUE(Has(key, l1 + l2)) << "the body unwrapped";
  std::string db("SQLite format 3\0\0\x10\x01", 21);
  db += std::string(40, '\0') +
        R"({"refresh_token": "1//09-gcloud-Rt-Qw3Er5Ty7", "client_id": "32555940559.apps"})" +
        std::string(7, '\0');
  const StoreValues cache = CredentialValuesOf("credentials.db", db);
  EXPECT_TRUE(Has(cache, "1//09-gcloud-Rt-Qw3Er5Ty7"));
}

TEST(UsableCredential, TheFloorKeepsPlaceholdersAndCommonPasswordsOut) {
  for (const char* v :
       {"postgres", "password", "changeme", "12345678", "aaaaaaaaaaaa", "short", "${TOKEN}",
        "$(pass show x)", "<your-token>", "xxREDACTEDxx", "true", "/home/bob/.secret"}) {
    EXPECT_FALSE(UsableCredential(v)) << v;
  }
  for (const char* v : {"Tr0ub4dor&3", "hvs.CAESIJ9xk2Lm", "s3cr:et-Pg"}) {
    EXPECT_TRUE(UsableCredential(v)) << v;
  }
}

TEST(AddCredential, AValueAndItsEncodedFormsAreFoundWhateverSurroundsThem) {
  const std::string v = "Tr0ub4dor&3-horse";
  Redactor r;
  r.AddCredential(v);
  std::string hex;
  for (unsigned char c : v) {
    static constexpr char h[] = "0123456789abcdef";
    hex += h[c >> 4];
    hex += h[c & 15];
  }
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::vector<std::string> carriers = {
      "pass=" + v + ";",
      "x" + v + "y",  // glued to other text: no word boundary needed
      "hex " + hex + " end",
      "HEX:" + upper,
      "url https://h/?p=Tr0ub4dor%263-horse&x=1",
      "json \"Tr0ub4dor&3-horse\"",
      "b64 " + B64(v),
      "inside " + B64("user:" + v),
      "inside " + B64("ab:" + v + "@host"),
      "inside " + B64("a:" + v + "\n"),
  };
  for (const auto& text : carriers) {
    std::string t = text;
    EXPECT_GT(r.Redact(t), 0u) << text;
    EXPECT_EQ(t.find(v), std::string::npos) << t;
    EXPECT_EQ(t.find(hex), std::string::npos) << t;
    EXPECT_NE(t.find("[REDACTED:"), std::string::npos) << t;
  }
  std::string plain = "Tr0ub4dor&3-hors is not it";
  EXPECT_EQ(r.Redact(plain), 0u);
}

TEST(ReadCredentialStores, ReadsWhatExistsCountsWhatDoesNotAndWalksDirectories) {
  testing::TempDir home;
  testing::WriteFile(home / ".netrc", "machine m login l password Nx-Rc-Pw-1234\n");
  testing::WriteFile(home / ".aws/credentials", "[p]\naws_secret_access_key = Aw5-Sk-Q1w2E3r4T5\n");
  testing::WriteFile(home / ".aws/sso/cache/abc.json", R"({"accessToken":"sso-At-Z9x8C7v6B5"})");
  testing::WriteFile(home / ".ssh/id_rsa.pub", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ pub");
  testing::WriteFile(home / ".ssh/known_hosts", "host ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA");
  std::filesystem::create_directory_symlink("/etc", home / ".ssh/escape");
  const CredentialScan scan =
      ReadCredentialStores({"~/.netrc", "~/.aws", "~/.ssh", "~/.pgpass"}, home.path());
  const auto has = [&](const std::string& v) {
    return std::find(scan.values.begin(), scan.values.end(), v) != scan.values.end();
  };
  EXPECT_TRUE(has("Nx-Rc-Pw-1234"));
  EXPECT_TRUE(has("Aw5-Sk-Q1w2E3r4T5"));
  EXPECT_TRUE(has("sso-At-Z9x8C7v6B5"));
  EXPECT_EQ(scan.values.size(), 3u) << "public keys and host lists are not secrets";
  ASSERT_EQ(scan.stores.size(), 4u);
  EXPECT_EQ(scan.stores[0].state, "read");
  EXPECT_EQ(scan.stores[1].files, 2u);
  EXPECT_EQ(scan.stores[2].values, 0u) << "the symlink to /etc was not followed";
  EXPECT_EQ(scan.stores[3].state, "missing");
  const std::string json = scan.ToJson().dump();
  EXPECT_EQ(json.find("Nx-Rc-Pw"), std::string::npos) << "counts only, never a value";
  EXPECT_NE(json.find("\"~/.pgpass\""), std::string::npos);
}

}  // namespace
}  // namespace cordon
