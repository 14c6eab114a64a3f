// Table tests for the redactor: every rule, the count, and what must not be touched; keys; and
// sweeps of every cut offset across a secret (capture, line caps, result caps), unit and end to
// end (cordon call run_shell, read_file_range, cordon wrap).
#include "core/redact.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <sstream>
#include <thread>

#include "core/hash.h"
#include "core/unique_fd.h"
#include "runner/capture.h"
#include "session/session.h"
#include "tests/test_util.h"
#include "workspace/secret_files.h"

namespace cordon {
namespace {

TEST(Redactor, TokenShapes) {
  Redactor r(testing::ShippedRedactRules());
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
      // Glued to a letter, a digit, "-" or "_": still found (issue 19).
      {"XAKIAIOSFODNN7EXAMPLE", "X[REDACTED:aws_access_key]", 1},
      {"missing-glpat-AbCdEfGhIjKlMnOpQrStUv", "missing-[REDACTED:gitlab_token]", 1},
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
  Redactor r(testing::ShippedRedactRules());
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

// What a session knew, carried as hashes to a later reader: the reader hides the same text
// under the same markers, without ever holding a secret's text.
TEST(Redactor, KnowledgeCarriesEveryValueAsHashesOnly) {
  Redactor session;
  session.AddValue("env", "short1");                            // 6 bytes: the floor
  session.AddValue("policy", "a-policy-value-of-some-length");  // 12 or more
  session.AddCredential("cred-pw-x81q");                        // and its forms
  SecretLines lines;
  lines.Add("LINE_FROM_A_SECRET_FILE=zzqq1199");
  session.AddSecretLines(lines);
  const Json k = session.Knowledge();
  const std::string dumped = k.dump();
  for (const char* secret : {"short1", "a-policy-value", "cred-pw-x81q", "LINE_FROM"}) {
    EXPECT_EQ(dumped.find(secret), std::string::npos) << secret << " kept as text";
  }
  Redactor reader;
  ASSERT_TRUE(reader.AddKnowledge(k));
  EXPECT_EQ(reader.KnowledgeSize(), session.KnowledgeSize());
  std::string text =
      "a short1 b a-policy-value-of-some-length c cred-pw-x81q d 637265642d70772d78383171 e "
      "LINE_FROM_A_SECRET_FILE=zzqq1199 f shorter1";
  std::string expected = text;
  session.Redact(expected);
  reader.Redact(text);
  EXPECT_EQ(text, expected);
  EXPECT_EQ(text,
            "a [REDACTED:env] b [REDACTED:policy] c [REDACTED:credential] d "
            "[REDACTED:credential] e [REDACTED:secret_file] f shorter1");
  // Bad knowledge is refused whole.
  Redactor bad;
  EXPECT_FALSE(bad.AddKnowledge(Json{{"version", 2}, {"hashes", Json::object()}}));
  EXPECT_FALSE(bad.AddKnowledge(Json{{"version", 1}, {"hashes", {{"env", {"12:zz:00"}}}}}));
  EXPECT_FALSE(bad.AddKnowledge(
      Json{{"version", 1}, {"hashes", {{"env", {"3:0000000000000000:0000000000000000"}}}}}));
  EXPECT_EQ(bad.KnowledgeSize(), 0u);
}

// The scan beside the session (Redactor::Hold): while it runs, nothing the redactor would show
// passes, in any copy of it (the copies a session hands out are made before the scan ends);
// once released, the scan's lines are hidden everywhere; a failed scan hides every text whole.
TEST(Redactor, AHeldRedactorShowsNothingUntilTheScanReleasesIt) {
  const std::string line = "DEPLOY_PASSPHRASE=vq83-kk2m-a1za";
  for (const bool fails : {false, true}) {
    Redactor session;
    session.AddValue("env", "an-env-secret-991");
    const Redactor copy = session;
    session.Hold();
    EXPECT_TRUE(copy.held());
    std::atomic<int> done{0};
    std::string outs[3];
    std::thread readers[3] = {
        std::thread([&] {
          outs[0] = "cat: " + line + "\n";
          copy.Redact(outs[0]);
          ++done;
        }),
        std::thread([&] {
          Json j = {{"text", line}};
          session.RedactJson(j);
          outs[1] = j.begin().value().get<std::string>();  // its key is redacted too
          ++done;
        }),
        std::thread([&] {
          outs[2] = session.Knowledge().dump();
          ++done;
        })};
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(done.load(), 0) << "a reader passed the held gate";
    if (fails) {
      session.ReleaseFailed();
    } else {
      SecretLines scanned;
      scanned.Add(line);
      session.Release(scanned);
    }
    for (auto& t : readers) t.join();
    EXPECT_FALSE(copy.held());
    if (fails) {
      EXPECT_EQ(outs[0], "[REDACTED:secret_scan_failed]");
      EXPECT_EQ(outs[1], "[REDACTED:secret_scan_failed]");
    } else {
      EXPECT_EQ(outs[0], "cat: [REDACTED:secret_file]\n");
      EXPECT_EQ(outs[1], "[REDACTED:secret_file]");
      // The knowledge (audit diff's) holds the scan's line: a reader of it hides the line too.
      Redactor reader;
      ASSERT_TRUE(reader.AddKnowledge(Json::parse(outs[2])));
      std::string later = "diff: +" + line;
      reader.Redact(later);
      EXPECT_EQ(later, "diff: +[REDACTED:secret_file]");
    }
    // A redactor never held is never stopped.
    Redactor plain;
    std::string t = "plain text";
    plain.Redact(t);
    EXPECT_EQ(t, "plain text");
  }
}

// A value hidden whole is hidden inside base64 too (an env secret in a basic-auth header).
TEST(Redactor, AnExactValueInsideBase64IsHidden) {
  Redactor r;
  r.AddValue("env", "Pa55-w0rd-in-env");
  std::string text = "Authorization: Basic dXNlcjpQYTU1LXcwcmQtaW4tZW52";  // user:Pa55-w0rd-in-env
  r.Redact(text);
  EXPECT_EQ(text.find("dXNlcjpQYTU1"), std::string::npos) << text;
}

TEST(Redactor, SecretNames) {
  EXPECT_TRUE(Redactor::IsSecretName("GITHUB_TOKEN"));
  EXPECT_TRUE(Redactor::IsSecretName("aws_secret_access_key"));
  EXPECT_TRUE(Redactor::IsSecretName("PGPASSWORD"));
  EXPECT_FALSE(Redactor::IsSecretName("HOME"));
  // Whole parts of a name (issue 32's review: these values showed in a .env and the env).
  for (const char* name : {"DB_PASS", "MYSQL_PWD", "SMTP_PASS", "DB_PW", "SESSION_COOKIE",
                           "SIGNING_SALT", "PASS", "db.pass", "GPG_PASSPHRASE", "AZURE_CREDS"}) {
    EXPECT_TRUE(Redactor::IsSecretName(name)) << name;
  }
  for (const char* name : {"PWD", "OLDPWD", "PASSENGER_ROOT", "BYPASS_CACHE", "COMPASS_HOME",
                           "SALTSTACK_DIR", "PATH", "LANG"}) {
    EXPECT_FALSE(Redactor::IsSecretName(name)) << name;
  }
}

TEST(Redactor, JsonStringsAndDeterminism) {
  Redactor r(testing::ShippedRedactRules());
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
  Redactor r(testing::ShippedRedactRules());
  Json lines = {"before", "-----BEGIN RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA",
                "abcdef", "-----END RSA PRIVATE KEY-----",   "after"};
  EXPECT_EQ(r.RedactJson(lines), 4u);
  EXPECT_EQ(lines, Json({"before", "[REDACTED:private_key]", "[REDACTED:private_key]",
                         "[REDACTED:private_key]", "[REDACTED:private_key]", "after"}));
}

// --- Issue 10: redaction gaps -----------------------------------------------------------------

TEST(Redactor, JwtUrlPasswordAndSkKeys) {
  Redactor r(testing::ShippedRedactRules());
  struct Case {
    std::string in, out;
    std::size_t count;
  };
  const std::string jwt =
      "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
      "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
  const Case cases[] = {
      {"token: " + jwt + " end", "token: [REDACTED:jwt] end", 1},
      {"\"" + jwt + "\"", "\"[REDACTED:jwt]\"", 1},
      {"postgres://app:hunter2@db:5432/x", "postgres://app:[REDACTED:url_password]@db:5432/x", 1},
      {"https://user:p:a%40ss@example.com/", "https://user:[REDACTED:url_password]@example.com/",
       1},
      {"redis://:onlypw@cache", "redis://:[REDACTED:url_password]@cache", 1},
      {"key=sk-proj-AbCdEf0123456789GhIjKlMn", "key=[REDACTED:api_key]", 1},
      {"sk-ant-api03-abcdefghij0123456789_XYZ-abc rest", "[REDACTED:api_key] rest", 1},
      {"sk-0123456789abcdefghijKLMN", "[REDACTED:api_key]", 1},
      // Not secrets: no password, a port, a short or digit-free sk- word, a lone JWT header.
      {"http://example.com:8080/path", "http://example.com:8080/path", 0},
      {"ssh://git@github.com/x", "ssh://git@github.com/x", 0},
      {"mailto:user:x@y", "mailto:user:x@y", 0},
      {"sk-learn-pipeline-options-and-more", "sk-learn-pipeline-options-and-more", 0},
      {"sk-abc123", "sk-abc123", 0},
      // Glued to a word: found (issue 19). The match starts at the first "sk-", the one that
      // ends "task-", so that "sk-" is hidden with the key.
      {"task-sk-0123456789abcdefghijKLMN", "ta[REDACTED:api_key]", 1},
      {"missing-sk-0123456789abcdefghijKLMN", "missing-[REDACTED:api_key]", 1},
      {"eyJhbGciOiJIUzI1NiJ9 alone", "eyJhbGciOiJIUzI1NiJ9 alone", 0},
  };
  for (const auto& c : cases) {
    std::string s = c.in;
    EXPECT_EQ(r.Redact(s), c.count) << c.in;
    EXPECT_EQ(s, c.out) << c.in;
  }
}

TEST(Redactor, ShapesScanInLinearTime) {
  // Hostile output: near-secrets everywhere on one line. A quadratic scan takes minutes here.
  Redactor r(testing::ShippedRedactRules());
  r.AddValue("env", "an-env-secret-value");
  const std::string unit = "-----BEGIN eyJabcdefghij.x sk-0 ://u:p Bearer x AKIA ghp_ xoxb- ";
  std::string text;
  while (text.size() < (4u << 20)) text += unit;
  const auto t0 = std::chrono::steady_clock::now();
  std::string copy = text;
  EXPECT_EQ(r.Redact(copy), 0u);
  const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10.0);
  EXPECT_EQ(copy, text);
}

// The agent chooses the lines the redactor learns (Redactor::Learn): thousands sharing their
// first 8 bytes, each of its own length, made every position of an output that starts with them
// hash them all (100 KB took 53.7 s in an adversarial review). Now a position costs at most
// SecretLines::kBucketBytes of hashing; past that the prefix hides more, never less: every
// learned line is still hidden, tracked or not, and other text is untouched.
TEST(Redactor, LinesSharingAPrefixCannotSlowItDownOrShowOne) {
  Redactor r;
  std::vector<std::string> learned;
  for (int len = 20; len < 3020; ++len) {
    std::string l = "TOKENPRE" + std::to_string(len) + "-";  // no line begins another
    for (int k = 0; static_cast<int>(l.size()) < len; ++k)
      l += static_cast<char>('a' + (len * 7 + k * 13) % 26);
    learned.push_back(l);
  }
  r.Learn(learned);
  std::string text;
  while (text.size() < 300000) text += "TOKENPRE-not-a-learned-line-but-close\n";
  const std::string plain = "(plain output that starts otherwise)\n";
  text += plain + learned[3] + "\n" + learned[2990] + "\n" + plain;
  const auto t0 = std::chrono::steady_clock::now();
  r.Redact(text);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 5.0) << "300 KB of output took " << secs << " s";
  EXPECT_EQ(text.find(learned[3]), std::string::npos);
  EXPECT_EQ(text.find(learned[2990]), std::string::npos);
  EXPECT_EQ(text.find(learned[2990].substr(0, 40)), std::string::npos);
  // Other text is untouched.
  EXPECT_NE(text.find(plain + "[REDACTED:secret_file]\n[REDACTED:secret_file]\n" + plain),
            std::string::npos)
      << text.substr(text.size() > 300 ? text.size() - 300 : 0);
}

TEST(Redactor, JsonKeysAreRedactedAndNeverCollide) {
  Redactor r(testing::ShippedRedactRules());
  r.AddValue("env", "hunter2-very-secret");
  Json j = {{"hunter2-very-secret", 1},
            {"sk-proj-AbCdEf0123456789GhIjKlMn", {{"x", "hunter2-very-secret"}}},
            {"sk-proj-ZyXwVu9876543210TsRqPoNm", 3},
            {"[REDACTED:api_key]", "an original key of that name"},
            {"plain", "postgres://u:pw123@h"}};
  EXPECT_EQ(r.RedactJson(j), 5u) << j.dump();
  const std::string dump = j.dump();
  EXPECT_EQ(dump.find("hunter2"), std::string::npos) << dump;
  EXPECT_EQ(dump.find("sk-proj"), std::string::npos) << dump;
  EXPECT_EQ(dump.find("pw123"), std::string::npos) << dump;
  // Nothing lost: five keys still, the redacted ones told apart by a suffix.
  EXPECT_EQ(j.size(), 5u) << dump;
  EXPECT_EQ(j["[REDACTED:env]"], 1);
  EXPECT_EQ(j["[REDACTED:api_key]"], "an original key of that name");
  EXPECT_TRUE(j.contains("[REDACTED:api_key]#2")) << dump;
  EXPECT_TRUE(j.contains("[REDACTED:api_key]#3")) << dump;
  // Deterministic: the same input gives the same output.
  Json k = {{"sk-proj-AbCdEf0123456789GhIjKlMn", {{"x", "hunter2-very-secret"}}},
            {"sk-proj-ZyXwVu9876543210TsRqPoNm", 3},
            {"hunter2-very-secret", 1},
            {"[REDACTED:api_key]", "an original key of that name"},
            {"plain", "postgres://u:pw123@h"}};
  r.RedactJson(k);
  EXPECT_EQ(j, k);
}

TEST(SecretFiles, ANameThatIsNotUtf8IsEscapedInTheScanAndItsCache) {
  // A file name holding a byte that is not UTF-8 (0xff) made the scan's JSON (the cache, the
  // session_started record) throw: `cordon exec --workspace /` ended in an internal error.
  testing::TempDir dir;
  const std::string ws = dir / "ws";
  const std::string key_body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC";
  testing::WriteFile(ws + "/k\xff.pem",
                     "-----BEGIN PRIVATE KEY-----\n" + key_body + "\n-----END PRIVATE KEY-----\n");
  testing::WriteFile(ws + "/.env", "API_KEY=zq81vbn4mmc7plk2\n");
  UniqueFd root(::open(ws.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root.valid());
  Redactor shapes(testing::ShippedRedactRules());
  const std::string cache = dir / "state/secret-files/x.json";
  for (int round = 0; round < 2; ++round) {  // the second is served from the cache
    SecretScanLimits limits;
    limits.cache_from_entries = 0;  // cache even this small tree
    auto scan = ScanSecretFiles(root.get(), shapes, limits, cache);
    ASSERT_TRUE(scan) << scan.error().message;
    std::vector<std::string> files = scan->files;
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files, (std::vector<std::string>{".env", "k\\xff.pem"})) << round;
    EXPECT_EQ(scan->cached_files, round == 0 ? 0u : 2u);
    EXPECT_NO_THROW((void)scan->ToJson().dump());
    Redactor r(testing::ShippedRedactRules());
    r.AddSecretLines(scan->lines);
    std::string out = "3:" + key_body + "\n";
    EXPECT_EQ(r.Redact(out), 1u);
    EXPECT_EQ(out, "3:[REDACTED:secret_file]\n");
  }
}

// Files in a credential store's format are secret files by their name, wherever they are in
// the workspace, and each value their format holds is hidden whatever its shape.
TEST(SecretFiles, FilesInACredentialStoresFormatAreSecretFilesByName) {
  testing::TempDir dir;
  const std::string ws = dir / "ws";
  struct Case {
    std::string path, content, value;
  };
  const std::vector<Case> cases = {
      {"db/.pgpass", "db.internal:5432:app:svc:Lq7-pgpass\\:value-01\n", "Lq7-pgpass:value-01"},
      {"conf/.my.cnf", "[client]\nuser=svc\npassword=Rt4-mycnf-value-02\n", "Rt4-mycnf-value-02"},
      {"ci/settings.xml",
       "<settings><servers><server><id>r</id><username>u</username>"
       "<password>Wb9.maven.value.03</password></server></servers></settings>\n",
       "Wb9.maven.value.03"},
      {"src/NuGet.Config",
       "<configuration><packageSourceCredentials><feed>"
       "<add key=\"Username\" value=\"u\" />"
       "<add key=\"ClearTextPassword\" value=\"Hn3_nuget_value_04\" />"
       "</feed></packageSourceCredentials></configuration>\n",
       "Hn3_nuget_value_04"},
      {"web/.htpasswd", "admin:$apr1$Xy7kQ2$Zp0wq9eRtY1uI3oP5aS7d.\n",
       "$apr1$Xy7kQ2$Zp0wq9eRtY1uI3oP5aS7d."},
      {"deploy/redis.conf", "port 6379\nrequirepass Kd5~redis~value~05\n", "Kd5~redis~value~05"},
      {"tf/credentials.tfrc.json",
       "{\"credentials\": {\"app.terraform.io\": {\"token\": \"Pm2 tfrc value 0006\"}}}\n",
       "Pm2 tfrc value 0006"},
      {"ops/.vault-token", "Vt8.vault.value.0007\n", "Vt8.vault.value.0007"},
  };
  for (const auto& c : cases) testing::WriteFile(ws + "/" + c.path, c.content);
  UniqueFd root(::open(ws.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root.valid());
  Redactor shapes(testing::ShippedRedactRules());
  for (int round = 0; round < 2; ++round) {  // the second is served from the cache
    SecretScanLimits limits;
    limits.cache_from_entries = 0;
    auto scan = ScanSecretFiles(root.get(), shapes, limits, dir / "state/cache");
    ASSERT_TRUE(scan) << scan.error().message;
    EXPECT_EQ(scan->files.size(), cases.size()) << scan->ToJson().dump();
    Redactor r(testing::ShippedRedactRules());
    r.AddSecretLines(scan->lines);
    for (const auto& c : cases) {
      std::string out = "seen: " + c.value + " (end)";
      r.Redact(out);
      EXPECT_EQ(out.find(c.value), std::string::npos) << c.path << ": " << out;
    }
  }
}

// The cache never answers for a file that changed: a file edited in place (its directory
// unchanged) is read again, a secret file deleted is no longer reported, and a file renamed over
// another is read as the new file.
TEST(SecretFiles, TheCacheNeverAnswersForAFileThatChanged) {
  testing::TempDir dir;
  const std::string ws = dir / "ws";
  for (int i = 0; i < 300; ++i)
    testing::WriteFile(ws + "/src/f" + std::to_string(i) + ".txt", "x\n");
  testing::WriteFile(ws + "/conf/.env", "API_TOKEN=Qm4-deleted-secret-77\n");
  UniqueFd root(::open(ws.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root.valid());
  Redactor shapes(testing::ShippedRedactRules());
  const std::string cache = dir / "state/cache";
  auto scan = [&] {
    auto s = ScanSecretFiles(root.get(), shapes, SecretScanLimits{}, cache);
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : SecretScan{};
  };
  auto hides = [&](const SecretScan& s, const std::string& value) {
    Redactor r(testing::ShippedRedactRules());
    r.AddSecretLines(s.lines);
    std::string out = "> " + value + " <";
    r.Redact(out);
    return out.find(value) == std::string::npos;
  };
  const SecretScan first = scan();
  EXPECT_EQ(first.files, std::vector<std::string>{"conf/.env"});
  const SecretScan warm = scan();
  EXPECT_GE(warm.cached_files, 300u);
  EXPECT_EQ(warm.read_files, 0u);
  // In place: same inode, same directory; its content now holds a key block.
  const std::string body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7";
  {
    std::ofstream f(ws + "/src/f7.txt", std::ios::trunc);
    f << "-----BEGIN PRIVATE KEY-----\n" << body << "\n-----END PRIVATE KEY-----\n";
  }
  ::unlink((ws + "/conf/.env").c_str());
  const SecretScan after = scan();
  EXPECT_EQ(after.files, std::vector<std::string>{"src/f7.txt"});
  EXPECT_TRUE(hides(after, body));
  EXPECT_FALSE(hides(after, "Qm4-deleted-secret-77"));
  // Renamed over another file: the new file's content, not the cached one's.
  testing::WriteFile(ws + "/tmp.txt", "PASSWORD=Zr8-renamed-secret-31\n");
  ASSERT_EQ(::rename((ws + "/tmp.txt").c_str(), (ws + "/src/f8.txt").c_str()), 0);
  testing::WriteFile(ws + "/src/.env", "PASSWORD=Zr8-renamed-secret-31\n");
  const SecretScan renamed = scan();
  EXPECT_TRUE(hides(renamed, "Zr8-renamed-secret-31"));
  EXPECT_TRUE(hides(renamed, body));
}

// A scan a limit stops (an agent can make one: a flood of empty files) does not forget what
// earlier scans found in the files it did not reach.
TEST(SecretFiles, AScanStoppedByALimitKeepsWhatItDidNotReach) {
  testing::TempDir dir;
  const std::string ws = dir / "ws";
  testing::WriteFile(ws + "/zzz/.env", "API_TOKEN=Aq8vN3kLmP2xR7tWq9\n");
  for (int i = 0; i < 300; ++i) testing::WriteFile(ws + "/a/f" + std::to_string(i), "x\n");
  UniqueFd root(::open(ws.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root.valid());
  Redactor shapes(testing::ShippedRedactRules());
  const std::string cache = dir / "state/cache";
  SecretScanLimits all;
  all.cache_from_entries = 0;
  ASSERT_TRUE(ScanSecretFiles(root.get(), shapes, all, cache));
  SecretScanLimits small = all;
  small.max_entries = 1;  // stops at the root's first entry: zzz/.env is not reached
  for (int round = 0; round < 2; ++round) {
    auto scan = ScanSecretFiles(root.get(), shapes, small, cache);
    ASSERT_TRUE(scan);
    EXPECT_TRUE(scan->truncated);
    Redactor r(testing::ShippedRedactRules());
    r.AddSecretLines(scan->lines);
    std::string out = "cat: Aq8vN3kLmP2xR7tWq9";
    r.Redact(out);
    EXPECT_EQ(out.find("Aq8vN3kLmP2xR7tWq9"), std::string::npos) << round << ": " << out;
  }
}

// A cache another user could have written (group- or world-writable: the /tmp fallback state
// directory) is not believed: the scan reads the files again.
TEST(SecretFiles, ACacheOthersCanWriteIsNotBelieved) {
  testing::TempDir dir;
  const std::string ws = dir / "ws";
  testing::WriteFile(ws + "/.env", "API_KEY=zq81vbn4mmc7plk2\n");
  UniqueFd root(::open(ws.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root.valid());
  Redactor shapes(testing::ShippedRedactRules());
  const std::string cache = dir / "state/secret-files/x.v1";
  SecretScanLimits limits;
  limits.cache_from_entries = 0;
  ASSERT_TRUE(ScanSecretFiles(root.get(), shapes, limits, cache));
  auto again = ScanSecretFiles(root.get(), shapes, limits, cache);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cached_files, 1u);  // its own cache, 0600: believed
  ASSERT_EQ(::chmod(cache.c_str(), 0666), 0);
  auto planted = ScanSecretFiles(root.get(), shapes, limits, cache);
  ASSERT_TRUE(planted);
  EXPECT_EQ(planted->cached_files, 0u);
  EXPECT_EQ(planted->read_files, 1u);
  EXPECT_EQ(planted->files, std::vector<std::string>{".env"});
}

// The secrets every cut is swept across: an environment value, a JWT, a URL password, an sk- key
// and a PEM private key block (about 3 KiB). `secret` is what must not survive in part.
struct SweepCase {
  std::string name, text, secret;
};

std::string PemBlock() {
  std::string body;
  std::uint32_t x = 12345;
  const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int line = 0; line < 50; ++line) {
    for (int i = 0; i < 64; ++i) {
      x = x * 1103515245u + 12345u;
      body += b64[(x >> 16) % 64];
    }
    body += '\n';
  }
  return "-----BEGIN RSA PRIVATE KEY-----\n" + body + "-----END RSA PRIVATE KEY-----";
}

const std::string kEnvSecret = "Env-Secret-0123456789-abcdefghijklmnop";

std::vector<SweepCase> SweepCases() {
  const std::string jwt =
      "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
      "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
  return {
      {"env", "TOKEN=" + kEnvSecret, kEnvSecret},
      {"jwt", "auth " + jwt, jwt},
      {"url", "postgres://app:Sup3rSecretPassw0rd@db:5432/app", "Sup3rSecretPassw0rd"},
      {"sk", "key sk-proj-AbCdEf0123456789GhIjKlMnOpQr", "sk-proj-AbCdEf0123456789GhIjKlMnOpQr"},
      {"pem", PemBlock(), PemBlock()}};
}

Redactor SweepRedactor() {
  Redactor r(testing::ShippedRedactRules());
  r.AddValue("env", kEnvSecret);
  return r;
}

// No prefix and no suffix of the secret of 6 bytes or more, and no 8-byte piece of it.
void ExpectNoPartOf(const std::string& out, const std::string& secret, const std::string& what) {
  ASSERT_GE(secret.size(), 8u);
  EXPECT_EQ(out.find(secret.substr(0, 6)), std::string::npos) << what << ": a prefix survived";
  EXPECT_EQ(out.find(secret.substr(secret.size() - 6)), std::string::npos)
      << what << ": a suffix survived";
  for (std::size_t i = 0; i + 8 <= secret.size(); ++i) {
    if (out.find(secret.substr(i, 8)) != std::string::npos) {
      ADD_FAILURE() << what << ": bytes " << i << "..+8 of the secret survived";
      return;
    }
  }
}

std::string Filler(std::size_t n, char c) {
  std::string s;
  while (s.size() < n) s += std::string(std::min<std::size_t>(79, n - s.size()), c) + "\n";
  return s.substr(0, n);
}

std::string Captured(const std::string& text, std::size_t cap, const Redactor& r,
                     std::size_t chunk) {
  CappedStream cs(cap);
  cs.SetRedactor(&r);
  for (std::size_t i = 0; i < text.size(); i += chunk) {
    cs.Append(std::string_view(text).substr(i, chunk));
  }
  EXPECT_TRUE(cs.truncated());
  std::string out = cs.Text();
  r.Redact(out);  // what the session's step 5 does with it
  return out;
}

TEST(RedactCut, CaptureHeadCutSweepsEveryOffset) {
  const Redactor r = SweepRedactor();
  for (const auto& c : SweepCases()) {
    const std::string before = Filler(200, 'a');
    const std::string text = before + c.text + "\n" + Filler(40000, 'b');
    const std::size_t s = before.size() + c.text.find(c.secret), e = s + c.secret.size();
    for (std::size_t cut = s - 1; cut <= e + 1; ++cut) {
      const std::string out = Captured(text, 2 * cut, r, cut % 2 ? 4093 : 65536);
      ExpectNoPartOf(out, c.secret, c.name + " head cut at " + std::to_string(cut));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(RedactCut, CaptureTailStartSweepsEveryOffset) {
  const Redactor r = SweepRedactor();
  for (const auto& c : SweepCases()) {
    const std::string before = Filler(40000, 'a') + "\n";
    const std::string after = "\n" + Filler(100, 'b');
    const std::string text = before + c.text + after;
    const std::size_t s = before.size() + c.text.find(c.secret), e = s + c.secret.size();
    // The tail keeps cap - cap/2 = keep bytes: it starts at text.size() - keep.
    for (std::size_t start = s - 1; start <= e + 1; ++start) {
      const std::size_t keep = text.size() - start;
      const std::string out = Captured(text, 2 * keep, r, start % 2 ? 4093 : 65536);
      ExpectNoPartOf(out, c.secret, c.name + " tail start at " + std::to_string(start));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(RedactCut, CaptureErrorLineCutSweepsEveryOffset) {
  // Error lines from the dropped middle are kept to 400 bytes each: the secret starts at every
  // offset from before that cut to past it.
  const Redactor r = SweepRedactor();
  for (const auto& c : SweepCases()) {
    if (c.name == "pem") continue;  // several lines: not one error line
    const std::size_t at = c.text.find(c.secret), len = c.secret.size();
    for (std::size_t p = 400 - len - 1; p <= 401; ++p) {
      if (p < 7 + at) continue;
      const std::string line = "error: " + std::string(p - 7 - at, 'x') + c.text + " tail";
      const std::string text = Filler(3000, 'a') + "\n" + line + "\n" + Filler(40000, 'b');
      const std::string out = Captured(text, 1000, r, 4093);
      ASSERT_NE(out.find("  error: "), std::string::npos) << c.name << " at " << p << ":\n" << out;
      ExpectNoPartOf(out, c.secret, c.name + " error line, secret at " + std::to_string(p));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(RedactCut, CaptureTailOfCharsSweepsEveryOffset) {
  // process_output and the timeout message show the last max_chars characters.
  const Redactor r = SweepRedactor();
  for (const auto& c : SweepCases()) {
    const std::string text = Filler(300, 'a') + "\n" + c.text + "\n" + Filler(50, 'b');
    const std::size_t s = 301 + c.text.find(c.secret), e = s + c.secret.size();
    CappedStream cs(1u << 20);
    cs.SetRedactor(&r);
    cs.Append(text);
    for (std::size_t start = s - 1; start <= e + 1; ++start) {
      std::string out = cs.Tail(text.size() - start);
      r.Redact(out);
      ExpectNoPartOf(out, c.secret, c.name + " tail of chars from " + std::to_string(start));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(RedactCut, JoinedTailSweepsEveryOffset) {
  // process_output and the timeout message join the stdout and stderr tails and keep the last
  // 4 x max_chars bytes of the two: the secret, in the stdout tail, starts at every offset
  // around that cut.
  const Redactor r = SweepRedactor();
  for (const auto& c : SweepCases()) {
    const std::string out = Filler(300, 'a') + "\n" + c.text + "\n" + Filler(50, 'b');
    const std::string err = "warning: x\n";
    const std::size_t s = 301 + c.text.find(c.secret), e = s + c.secret.size();
    const std::size_t joined = out.size() + std::string("[stderr]\n").size() + err.size();
    for (std::size_t start = s - 1; start <= e + 1; ++start) {
      std::string tail = JoinTails(out, err, joined - start, &r);
      r.Redact(tail);
      ExpectNoPartOf(tail, c.secret, c.name + " joined tail from " + std::to_string(start));
      EXPECT_NE(tail.find("[stderr]\nwarning: x"), std::string::npos) << tail;
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(RedactCut, SandboxStartExcerptSweepsEveryOffset) {
  // "the sandbox did not start" quotes the first 500 bytes of bwrap's stderr.
  const Redactor r = SweepRedactor();
  for (const auto& c : SweepCases()) {
    if (c.name == "pem") continue;  // longer than the excerpt: it is dropped whole or kept whole
    const std::size_t at = c.text.find(c.secret), len = c.secret.size();
    for (std::size_t p = 500 - len - 1; p <= 501; ++p) {
      if (p < at) continue;
      const std::string text = std::string(p - at, 'x') + c.text + "\n" + Filler(2000, 'b');
      std::string cut = Excerpt(text, 500, &r);
      EXPECT_LE(cut.size(), 500u);
      r.Redact(cut);
      ExpectNoPartOf(cut, c.secret, c.name + " excerpt, secret at " + std::to_string(p));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(RedactCut, LineCutSweepsEveryOffset) {
  // read_file_range and search_text cut a long line at max_line_chars characters.
  const Redactor r = SweepRedactor();
  for (const auto& c : SweepCases()) {
    if (c.name == "pem") continue;  // lines of a file: the array rule takes a block whole
    const std::string line = std::string(300, 'a') + " " + c.text + " " + std::string(300, 'b');
    const std::size_t s = 301 + c.text.find(c.secret), e = s + c.secret.size();
    for (std::size_t max = s - 1; max <= e + 1; ++max) {
      const std::size_t at = r.LineCut(line, max);
      ASSERT_NE(at, std::string::npos);
      std::string out = line.substr(0, at);
      r.Redact(out);
      ExpectNoPartOf(out, c.secret, c.name + " line cut at " + std::to_string(max));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(RedactCut, ResultCapNeverCutsAMarkerInHalf) {
  // The session redacts, then caps (CapStructuredResult, and wrap's CapToolResult): a cut that
  // falls inside a marker moves back to its start.
  const Redactor r = SweepRedactor();
  for (const auto& c : SweepCases()) {
    std::string text = std::string(300, 'a') + " " + c.text + " " + std::string(300, 'b');
    r.Redact(text);
    const std::size_t m = text.find("[REDACTED:");
    ASSERT_NE(m, std::string::npos) << c.name;
    const std::size_t m_end = text.find(']', m) + 1;
    for (std::size_t cap = m - 1; cap <= m_end + 1; ++cap) {
      Json structured = text;
      ASSERT_TRUE(CapStructuredResult(structured, cap));
      const std::string out = structured.get<std::string>();
      const std::string marker = text.substr(m, m_end - m);
      const std::size_t open = out.find("[RED");
      if (open != std::string::npos) {
        EXPECT_EQ(out.compare(open, marker.size(), marker), 0)
            << c.name << " cap " << cap << ": " << out.substr(open);
      }
      Json result = {{"content", {{{"type", "text"}, {"text", text}}}}};
      ASSERT_TRUE(CapToolResult(result, cap));
      const std::string wrapped = result["content"][0]["text"].get<std::string>();
      const std::size_t wopen = wrapped.find("[RED");
      if (wopen != std::string::npos) {
        EXPECT_EQ(wrapped.compare(wopen, marker.size(), marker), 0)
            << c.name << " cap " << cap << ": " << wrapped.substr(wopen);
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// --- End to end: the real binary --------------------------------------------------------------

class RedactEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFile(dir_ / "ws/a.txt", "alpha\n");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "E2E_API_TOKEN=" + kEnvSecret};
  }
  testing::RunResult Cordon(std::vector<std::string> args, const std::string& stdin_data = {}) {
    args.insert(args.begin(), testing::CordonBin());
    return testing::Run(args, env_, stdin_data);
  }
  std::string log() { return dir_ / "audit.jsonl"; }
  testing::TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(RedactEndToEnd, RunShellOutputCutInsideASecretShowsNoPartOfIt) {
  // run_shell prints filler, then a secret, then much more: the head cut (cap / 2) falls inside
  // the secret. Before the fix the head kept the secret's first part, unredacted.
  for (const auto& c : SweepCases()) {
    if (c.name == "jwt" || c.name == "url") continue;  // the unit sweeps cover every shape
    const std::string before(1000, 'a');
    const std::size_t s = before.size() + c.text.find(c.secret);
    for (std::size_t cut : {s + 1, s + c.secret.size() / 2, s + c.secret.size() - 1}) {
      testing::WriteFile(dir_ / "cap.toml",
                         "[limits]\nmax_output_bytes = " + std::to_string(2 * cut) + "\n");
      const Json input = {{"program", "sh"},
                          {"args",
                           {"-c", "printf '%s' \"$1\"; head -c 200000 /dev/zero | tr '\\000' b",
                            "sh", before + c.text}}};
      auto r = Cordon({"call", "run_shell", "--workspace", dir_ / "ws", "--policy",
                       dir_ / "cap.toml", "--audit-log", log(), "--json", input.dump()});
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
      const Json out = Json::parse(r.out);
      ASSERT_TRUE(out["structuredContent"]["truncated"].get<bool>()) << r.out.substr(0, 300);
      ExpectNoPartOf(r.out, c.secret, c.name + " run_shell cut at " + std::to_string(cut));
      ExpectNoPartOf(testing::ReadFile(log()), c.secret, c.name + " audit log");
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_EQ(Cordon({"audit", "verify", log()}).exit_code, 0);
}

TEST_F(RedactEndToEnd, ReadFileRangeLineCutInsideASecretShowsNoPartOfIt) {
  for (const auto& c : SweepCases()) {
    if (c.name == "pem") continue;
    const std::string before(100, 'a');
    const std::size_t s = before.size() + 1 + c.text.find(c.secret);
    testing::WriteFile(dir_ / "ws/long.txt", before + " " + c.text + " " + std::string(100, 'b'));
    for (std::size_t cut : {s + 1, s + c.secret.size() / 2, s + c.secret.size() - 1}) {
      testing::WriteFile(dir_ / "cap.toml",
                         "[limits]\nmax_line_chars = " + std::to_string(cut) + "\n");
      auto r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--policy",
                       dir_ / "cap.toml", "--audit-log", log(), "--json",
                       R"({"path":"long.txt","start_line":1})"});
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
      ASSERT_NE(r.out.find("line cut"), std::string::npos) << r.out;
      ExpectNoPartOf(r.out, c.secret, c.name + " read_file_range cut at " + std::to_string(cut));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST_F(RedactEndToEnd, SecretKeysInToolArgumentsNeverReachTheLog) {
  const Json input = {{"path", "a.txt"},
                      {"start_line", 1},
                      {kEnvSecret, 1},
                      {"sk-proj-AbCdEf0123456789GhIjKlMnOpQr", 2}};
  auto r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(),
                   "--json", input.dump()});
  const std::string audit = testing::ReadFile(log());
  EXPECT_NE(audit.find("tool_started"), std::string::npos) << audit;
  ExpectNoPartOf(audit, kEnvSecret, "env secret as a key");
  ExpectNoPartOf(audit, "sk-proj-AbCdEf0123456789GhIjKlMnOpQr", "sk- key as a key");
  EXPECT_NE(audit.find("[REDACTED:env]"), std::string::npos) << audit;
  EXPECT_EQ(Cordon({"audit", "verify", log()}).exit_code, 0);
}

// Issue 32 part 2: a secret only a team's gitleaks-format rule file knows is hidden from the
// agent and the log when the real binary runs a command that prints it.
TEST_F(RedactEndToEnd, ASecretOnlyAGitleaksRuleFileKnowsIsHidden) {
  const std::string secret = "TKT-7Q2M9X4K8V3N6B1Z";
  testing::WriteFile(dir_ / "rules/team.gitleaks.toml",
                     "[[rules]]\nid = \"intranet-ticket\"\nregex = '''TKT-[A-Z0-9]{16}'''\n"
                     "keywords = [\"tkt-\"]\n");
  testing::WriteFile(dir_ / "team.toml", "[redact]\nrule_files = [\"rules/team.gitleaks.toml\"]\n");
  const Json input = {{"program", "sh"}, {"args", {"-c", "echo \"ticket: $1\"", "sh", secret}}};
  auto r = Cordon({"call", "run_shell", "--workspace", dir_ / "ws", "--policy", dir_ / "team.toml",
                   "--audit-log", log(), "--json", input.dump()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ticket: [REDACTED:intranet-ticket]"), std::string::npos) << r.out;
  ExpectNoPartOf(r.out, secret, "gitleaks rule, run_shell");
  ExpectNoPartOf(testing::ReadFile(log()), secret, "gitleaks rule, audit log");
}

// Issue 32, part 1: the user's credential stores are known by value. Each value, in a shape no
// rule knows and without the key that named it, reaches neither the agent nor the log through
// a file read, a search, a command's output or its argv; session_started says which stores gave
// how many values, and never a value.
TEST_F(RedactEndToEnd, TheUsersCredentialStoresAreHiddenByValueInEveryChannel) {
  const std::string home = dir_ / "home";
  const std::vector<std::pair<std::string, std::string>> secrets = {
      {".netrc", "Tr0ub4dor&3-horse"},
      {".pgpass", "s3cr:et-Pg-2024x"},
      {".my.cnf", "My-Sql_Pw.9931x"},
      {".vault-token", "hvs.CAESIJ9xk2LmQp7RtYw3Zv5Nb8Hc"},
      {".aws/credentials", "wJ8rXUtnFEMI/K7MDENG/bPxRfiCYq9Zk2LmN3oP"},
      {".git-credentials", "gIt-pw-88Zq7Lm"},
      {".kube/config", "kube-tok-8Hq2Lm4Np6Rs8Tv0Xz"},
  };
  testing::WriteFile(home + "/.netrc",
                     "machine api.example.test login bob password " + secrets[0].second + "\n");
  testing::WriteFile(home + "/.pgpass",
                     "localhost:5432:app:app:s3cr\\:et-Pg-2024x\n"
                     "*:*:*:postgres:postgres\n");
  testing::WriteFile(home + "/.my.cnf", "[client]\npassword=" + secrets[2].second + "\n");
  testing::WriteFile(home + "/.vault-token", secrets[3].second + "\n");
  testing::WriteFile(home + "/.aws/credentials",
                     "[default]\naws_secret_access_key = " + secrets[4].second + "\n");
  testing::WriteFile(home + "/.git-credentials",
                     "https://bob:" + secrets[5].second + "@git.example.test\n");
  testing::WriteFile(home + "/.kube/config",
                     "users:\n- user:\n    token: " + secrets[6].second + "\n");
  std::string notes, hexed;
  for (const auto& [store, v] : secrets) notes += "from " + store + ": " + v + " (end)\n";
  for (unsigned char c : secrets[0].second) {
    static constexpr char h[] = "0123456789abcdef";
    hexed += h[c >> 4];
    hexed += h[c & 15];
  }
  notes += "hex " + hexed + "\n";
  testing::WriteFile(dir_ / "ws/notes.txt", notes);
  env_.push_back("HOME=" + home);
  std::vector<testing::RunResult> runs;
  runs.push_back(Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log",
                         log(), "--json", Json{{"path", "notes.txt"}}.dump()}));
  runs.push_back(Cordon({"call", "search_text", "--workspace", dir_ / "ws", "--audit-log", log(),
                         "--json", Json{{"pattern", "from"}}.dump()}));
  Json argv = Json::array(
      {"-c", "cat notes.txt; for a; do echo \"arg $a\"; echo \"err $a\" >&2; done", "sh"});
  for (const auto& [store, v] : secrets) argv.push_back(v);
  runs.push_back(Cordon({"call", "run_shell", "--workspace", dir_ / "ws", "--audit-log", log(),
                         "--json", Json{{"program", "sh"}, {"args", argv}}.dump()}));
  const std::string audit = testing::ReadFile(log());
  for (const auto& r : runs) {
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("[REDACTED:credential]"), std::string::npos) << r.out;
  }
  for (const auto& [store, v] : secrets) {
    for (const auto& r : runs) {
      EXPECT_EQ(r.out.find(v), std::string::npos) << store << " reached the agent: " << r.out;
      EXPECT_EQ(r.err.find(v), std::string::npos) << store << " reached stderr: " << r.err;
    }
    EXPECT_EQ(audit.find(v), std::string::npos) << store << " reached the log";
  }
  EXPECT_EQ(runs[0].out.find(hexed), std::string::npos) << "its hex form reached the agent";
  // session_started names the stores and their counts (the .pgpass's "postgres" is below the
  // floor: skipped, counted).
  Json started;
  std::istringstream lines(audit);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    Json rec = Json::parse(line);
    if (rec.value("type", "") == "session_started") started = rec;
  }
  const Json stores = started["redaction"]["credential_stores"]["stores"];
  ASSERT_TRUE(stores.is_array()) << started.dump();
  bool saw_pgpass = false;
  for (const auto& st : stores) {
    if (st["path"] == "~/.pgpass") {
      saw_pgpass = true;
      EXPECT_EQ(st["state"], "read");
      EXPECT_EQ(st.value("values", 0), 1);
      EXPECT_EQ(st.value("skipped", 0), 1);
    }
  }
  EXPECT_TRUE(saw_pgpass) << stores.dump();
  EXPECT_EQ(Cordon({"audit", "verify", log()}).exit_code, 0);
}

TEST_F(RedactEndToEnd, WrappedServerStderrIsRedactedOnCordonsStderr) {
  // The wrapped server's standard error reaches cordon's (a terminal, a CI log): redacted like
  // everything else the server says. Before the fix the key passed as written.
  const std::string key = "sk-proj-AbCdEf0123456789GhIjKlMnOpQr";
  testing::WriteFile(dir_ / "ws/server.sh",
                     "printf 'using key %s\\n' '" + key + "' >&2\nread line || exit 0\n");
  auto r = Cordon(
      {"wrap", "--workspace", dir_ / "ws", "--audit-log", log(), "--", "sh", dir_ / "ws/server.sh"},
      "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("using key [REDACTED"), std::string::npos) << r.err;
  ExpectNoPartOf(r.err, key, "wrap stderr");
}

TEST_F(RedactEndToEnd, WrapRewritesEveryServerMessageWithASecretKey) {
  // A server whose tools/call result has secrets as keys (two that redact alike), and which
  // sends a notification with a secret as a key. Before the fix both reached the client as sent.
  const std::string k1 = "sk-proj-AbCdEf0123456789GhIjKlMnOpQr";
  const std::string k2 = "sk-proj-ZyXwVu9876543210TsRqPoNmLkJi";
  testing::WriteFile(
      dir_ / "ws/server.sh",
      "read line\n"
      "printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":"
      "\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"k\",\"version\":\"1\"}}}'\n"
      "read line\n"
      "printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":"
      "{\"level\":\"info\",\"data\":{\"" +
          kEnvSecret +
          "\":true}}}'\n"
          "printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":"
          "\"text\",\"text\":\"ok\"}],\"structuredContent\":{\"" +
          k1 + "\":1,\"" + k2 +
          "\":2}}}'\n"
          "read line || exit 0\n");
  const std::string input =
      std::string(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})") + "\n" +
      R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{}}})" +
      "\n";
  auto r = Cordon(
      {"wrap", "--workspace", dir_ / "ws", "--audit-log", log(), "--", "sh", dir_ / "ws/server.sh"},
      input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<Json> out;
  for (std::size_t pos = 0, nl; (nl = r.out.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    out.push_back(Json::parse(r.out.substr(pos, nl - pos)));
  }
  ASSERT_EQ(out.size(), 3u) << r.out;
  ExpectNoPartOf(r.out, kEnvSecret, "notification key");
  ExpectNoPartOf(r.out, k1, "result key 1");
  ExpectNoPartOf(r.out, k2, "result key 2");
  EXPECT_EQ(out[1]["params"]["data"], Json({{"[REDACTED:env]", true}})) << r.out;
  const Json& sc = out[2]["result"]["structuredContent"];
  // server.sh, in the workspace, holds both keys: they are its secret lines.
  EXPECT_EQ(sc, Json({{"[REDACTED:secret_file]", 1}, {"[REDACTED:secret_file]#2", 2}})) << r.out;
  const std::string audit = testing::ReadFile(log());
  ExpectNoPartOf(audit, kEnvSecret, "log");
  ExpectNoPartOf(audit, k1, "log");
  EXPECT_NE(audit.find("\"output_redactions\":2"), std::string::npos) << audit;
  EXPECT_NE(audit.find("message from the server redacted"), std::string::npos) << audit;
  EXPECT_EQ(Cordon({"audit", "verify", log()}).exit_code, 0);
}

// --- Issue 19: rules as data, secret lines, base64, the secret-file scan ----------------------

// A rule that does not do what its author meant does not load: the error names its file:line.
TEST(RedactRules, EveryExampleIsCheckedWhenThePolicyLoads) {
  struct Case {
    std::string rule, needle;
  };
  const Case cases[] = {
      {"id = \"t\"\npattern = 'tok_[0-9]{8}'\nmatch = [\"tok_123\"]",
       "r.toml:2: redact rule \"t\": example does not match: tok_123"},
      {"id = \"t\"\npattern = 'tok_[0-9]{4,}'\nmatch = [\"tok_1234\"]\nnot_match = "
       "[\"tok_56789\"]",
       "r.toml:2: redact rule \"t\": not_match example matches: tok_56789 (hides \"tok_56789\")"},
      {"id = \"t\"\npattern = 'tok_([0-9]+'\nmatch = [\"tok_1\"]",
       "r.toml:2: redact rule \"t\": pattern:"},
      {"id = \"t\"\npattern = 'tok_[0-9]+'\ngroup = 1\nmatch = [\"tok_1\"]",
       "r.toml:2: redact rule \"t\": group 1 is not a capture group of the pattern"},
      {"id = \"t\"\npattern = 'tok_[0-9]+'",
       "r.toml:2: redact rule \"t\" needs at least one match"},
      {"id = \"T-1\"\npattern = 'tok_[0-9]+'\nmatch = [\"tok_1\"]",
       "r.toml:2: redact rule \"T-1\": id must be"},
      {"id = \"t\"\npattern = 'tok_[0-9]+'\nmatch = [\"tok_1\"]\nentrpy = 3",
       "r.toml:6: unknown key \"redact.rules.entrpy\""},
      // The checks run on the rule alone: another rule's match does not satisfy an example.
      {"id = \"t\"\npattern = 'tok_[0-9]+'\nkeywords = [\"tok_\"]\nmin_length = 10\n"
       "match = [\"AKIAIOSFODNN7EXAMPLE tok_12\"]",
       "r.toml:2: redact rule \"t\": example does not match: AKIAIOSFODNN7EXAMPLE tok_12"},
  };
  for (const auto& c : cases) {
    testing::TempDir d;
    testing::WriteFile(d / "user/r.toml", "\n[[redact.rules]]\n" + c.rule + "\n");
    PolicySources sources;
    sources.dirs = {CORDON_POLICY_DIR, d / "user"};
    auto p = LoadPolicy(sources);
    ASSERT_FALSE(p) << c.rule;
    EXPECT_EQ(p.error().code, Code::kInvalidInput);
    const std::string want = d / ("user/" + c.needle);
    EXPECT_NE(p.error().message.find(want), std::string::npos)
        << c.rule << "\n -> " << p.error().message;
  }
}

// A set that passed its checks is recorded in the state directory, and the next start of the
// same binary compiles its patterns on first use without running the examples again (most of
// `cordon exec`'s own CPU time went there). The record names the rules it vouches for, and only
// one this user wrote, in a directory only this user can change, is believed.
TEST(RedactRules, ACheckedSetIsNotCheckedAgainAndOnlyItsOwnersRecordIsBelieved) {
  testing::TempDir d;
  const std::string dir = d / "state/redact-checked";
  RedactRule rule;
  rule.id = "tok";
  rule.pattern = "tok_[0-9]{8}";
  rule.keywords = {"tok_"};
  rule.match = {"a tok_12345678 b"};
  rule.not_match = {"tok_1234"};
  auto redacted = [](const std::shared_ptr<const RedactRules>& rules) {
    Redactor r(rules);
    std::string text = "x tok_12345678 y tok_1 z";
    r.Redact(text);
    return text;
  };
  auto first = RedactRules::Compile({rule}, dir);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_FALSE((*first)->checked_before());
  auto again = RedactRules::Compile({rule}, dir);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_TRUE((*again)->checked_before());
  EXPECT_EQ(redacted(*again), "x [REDACTED:tok] y tok_1 z");
  EXPECT_EQ(redacted(*again), redacted(*first));
  // Another set (here: an example that no longer matches) is checked, and refused.
  RedactRule changed = rule;
  changed.match = {"tok_1234567"};
  auto bad = RedactRules::Compile({changed}, dir);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("example does not match: tok_1234567"), std::string::npos)
      << bad.error().message;
  // A record that others can write, or in a directory others can write, is not believed.
  std::vector<std::string> records;
  for (const auto& e : std::filesystem::directory_iterator(dir)) records.push_back(e.path());
  ASSERT_EQ(records.size(), 1u);
  ASSERT_EQ(::chmod(records[0].c_str(), 0666), 0);
  auto writable = RedactRules::Compile({rule}, dir);
  ASSERT_TRUE(writable);
  EXPECT_FALSE((*writable)->checked_before());
  ASSERT_EQ(::chmod(records[0].c_str(), 0600), 0);
  ASSERT_TRUE(RedactRules::Compile({rule}, dir).value()->checked_before());
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto open_dir = RedactRules::Compile({rule}, dir);
  ASSERT_TRUE(open_dir);
  EXPECT_FALSE((*open_dir)->checked_before());
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  // Without a directory nothing is recorded or believed.
  EXPECT_FALSE(RedactRules::Compile({rule}).value()->checked_before());
}

// Layering: a later layer replaces a rule by its id; a project file only adds ids, and cannot
// turn the secret-file scan off.
TEST(RedactRules, LaterLayersReplaceByIdAndAProjectFileOnlyAddsIds) {
  testing::TempDir d;
  testing::WriteFile(
      d / "user/50-mine.toml",
      "[[redact.rules]]\nid = \"jwt\"\npattern = 'JWT-[0-9]{6}'\nmatch = "
      "[\"JWT-123456\"]\n\n[[redact.rules]]\nid = \"acme_token\"\npattern = "
      "'acme_[a-z0-9]{16}'\nkeywords = [\"acme_\"]\nmatch = [\"acme_0123456789abcdef\"]\n");
  testing::WriteFile(d / "ws/.cordon/policy.toml",
                     "[redact]\nscan_files = false\n\n[[redact.rules]]\nid = \"api_key\"\npattern "
                     "= 'x{9}'\nmatch = [\"xxxxxxxxx\"]\n\n[[redact.rules]]\nid = "
                     "\"project_token\"\npattern = 'prj_[0-9]{10}'\nkeywords = [\"prj_\"]\nmatch = "
                     "[\"prj_0123456789\"]\n");
  PolicySources sources;
  sources.dirs = {CORDON_POLICY_DIR, d / "user"};
  sources.project_file = d / "ws/.cordon/policy.toml";
  auto p = LoadPolicy(sources);
  ASSERT_TRUE(p) << p.error().message;
  std::map<std::string, std::string> where;
  for (const auto& r : p->compiled_redact_rules->rules()) where[r.id] = r.where;
  EXPECT_EQ(where["jwt"], d / "user/50-mine.toml:1");                 // replaced by id
  EXPECT_EQ(where["acme_token"], d / "user/50-mine.toml:6");          // added
  EXPECT_EQ(where["project_token"], d / "ws/.cordon/policy.toml:9");  // added by the project
  EXPECT_EQ(where["api_key"].find(std::string(CORDON_POLICY_DIR) + "/10-secrets.toml:"), 0u)
      << where["api_key"];  // the project's replacement is refused
  EXPECT_TRUE(p->redact_scan_files);
  std::string notes;
  for (const auto& n : p->notes) notes += n + "\n";
  EXPECT_NE(notes.find("cannot replace the redact rule \"api_key\"; it adds new ids only"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("cannot turn off redact.scan_files"), std::string::npos) << notes;
  Redactor r(p->compiled_redact_rules);
  std::string text = "JWT-123456 sk-proj-AbCdEf0123456789GhIjKlMn prj_0123456789";
  EXPECT_EQ(r.Redact(text), 3u);
  EXPECT_EQ(text, "[REDACTED:jwt] [REDACTED:api_key] [REDACTED:project_token]");
}

// --- Issue 32 part 2: gitleaks-format rule files ([redact] rule_files) -----------------------

// Each text, redacted by `r`, is its expected result.
struct RedactCase {
  std::string in, out;
};
void ExpectRedactedAs(const Redactor& r, std::span<const RedactCase> cases) {
  for (const auto& c : cases) {
    std::string text = c.in;
    r.Redact(text);
    EXPECT_EQ(text, c.out) << c.in;
  }
}

// A team's rule file in the gitleaks format (written here, not gitleaks' own): what cordon can
// honour loads (secretGroup, entropy, keywords, a rule's and the file's allowlists), and what
// it cannot is skipped with a note naming the file, the line and the id.
constexpr std::string_view kTeamGitleaks = R"(title = "team rules"

[allowlist]
description = "test fixtures, for every rule of this file"
stopwords = ["fixture"]

[[rules]]
id = "acme-deploy-key"
description = "Acme deploy key, hidden after its name"
regex = '''acme_deploy\s*[:=]\s*["']?([A-Za-z0-9]{24,40})'''
secretGroup = 1
entropy = 3.5
keywords = ["acme_deploy"]

[[rules]]
id = "zeta-token"
regex = '''zt-[a-z0-9]{20}'''
keywords = ["zt-"]
tags = ["zeta"]

[[rules]]
id = "orbit-secret"
regex = '''orbit_ref=([A-Za-z0-9_]{16,})'''
keywords = ["orbit_ref"]
[rules.allowlist]
regexes = ['''^EXAMPLE''']
stopwords = ["placeholder"]

[[rules]]
id = "pem-file"
path = '''\.pem$'''

[[rules]]
id = "repeat-token"
regex = '''rt_([a-z]{4})\1'''
keywords = ["rt_"]

[[rules]]
id = "jwt"
regex = '''jw_[0-9]{12}'''
keywords = ["jw_"]
)";

TEST(RedactRuleFiles, AGitleaksFileLoadsWhatCordonHonoursAndNamesWhatItSkips) {
  testing::TempDir d;
  const std::string file = d / "team/.gitleaks.toml";
  testing::WriteFile(file, std::string(kTeamGitleaks));
  // Named relative to the policy file that names it.
  testing::WriteFile(d / "user/50-team.toml",
                     "[redact]\nrule_files = [\"../team/.gitleaks.toml\"]\n");
  PolicySources sources;
  sources.dirs = {CORDON_POLICY_DIR, d / "user"};
  auto p = LoadPolicy(sources);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->redact_rule_files, std::vector<std::string>{file});
  ASSERT_EQ(p->redact_rule_file_counts.size(), 1u);
  EXPECT_EQ(p->redact_rule_file_counts[0].path, file);
  EXPECT_EQ(p->redact_rule_file_counts[0].loaded, 4u);
  EXPECT_EQ(p->redact_rule_file_counts[0].skipped, 2u);
  std::string notes;
  for (const auto& n : p->notes) notes += n + "\n";
  EXPECT_NE(notes.find(file + ":29: gitleaks rule \"pem-file\" skipped: it tests a file's path"),
            std::string::npos)
      << notes;
  // RE2 has no backreferences: the rule is named with its file, line and id, and RE2's reason.
  EXPECT_NE(notes.find(file + ":33: gitleaks rule \"repeat-token\" skipped: pattern: invalid "
                              "escape sequence: \\1"),
            std::string::npos)
      << notes;
  // An id a shipped rule has is taken with a prefix: the file adds, it never replaces.
  EXPECT_NE(notes.find(file + ":38: gitleaks rule \"jwt\": that id is taken, so its marker is "
                              "[REDACTED:gitleaks:jwt]"),
            std::string::npos)
      << notes;
  std::map<std::string, std::string> where;
  for (const auto& r : p->compiled_redact_rules->rules()) where[r.id] = r.where;
  EXPECT_EQ(where["acme-deploy-key"], file + ":7");
  EXPECT_EQ(where["gitleaks:jwt"], file + ":38");
  EXPECT_EQ(where["jwt"].find(std::string(CORDON_POLICY_DIR)), 0u) << where["jwt"];
  EXPECT_EQ(where.count("pem-file") + where.count("repeat-token"), 0u);

  const RedactCase cases[] = {
      // secretGroup: only the group is hidden; entropy: a value below 3.5 bits is not a secret.
      {"acme_deploy = \"Xy7pQ2mK9vL4nB8cR3tW6zA1\"",
       "acme_deploy = \"[REDACTED:acme-deploy-key]\""},
      {"acme_deploy = aaaaaaaaaabbbbbbbbbbcccc", "acme_deploy = aaaaaaaaaabbbbbbbbbbcccc"},
      // keywords: found in any case, then the regex decides; no group: the whole match.
      {"got ZT-abcdefghij0123456789 back", "got ZT-abcdefghij0123456789 back"},
      {"got zt-abcdefghij0123456789 back", "got [REDACTED:zeta-token] back"},
      // The rule's allowlist (a regex on the secret, a stopword in it) and the file's stopword.
      {"orbit_ref=Q8wE4rT6yU2iO0pA", "orbit_ref=[REDACTED:orbit-secret]"},
      {"orbit_ref=EXAMPLEq8wE4rT6yU2", "orbit_ref=EXAMPLEq8wE4rT6yU2"},
      {"orbit_ref=my_PLACEHOLDER_value1", "orbit_ref=my_PLACEHOLDER_value1"},
      {"orbit_ref=a_fixture_Q8wE4rT6y", "orbit_ref=a_fixture_Q8wE4rT6y"},
      // The skipped rule hides nothing; the renamed one has its own marker.
      {"rt_abcdabcd", "rt_abcdabcd"},
      {"id jw_123456789012 end", "id [REDACTED:gitleaks:jwt] end"},
  };
  ExpectRedactedAs(Redactor(p->compiled_redact_rules), cases);
}

// A project file (written by the agent) may add a rule file inside its workspace, and cannot
// remove one a user layer named, nor name one outside its workspace.
TEST(RedactRuleFiles, AProjectFileOnlyAddsRuleFilesOfItsWorkspace) {
  testing::TempDir d;
  const std::string team = d / "team.toml";
  testing::WriteFile(team, std::string(kTeamGitleaks));
  testing::WriteFile(d / "ws/.gitleaks.toml",
                     "[[rules]]\nid = \"ws-token\"\nregex = '''wst_[0-9]{10}'''\n"
                     "keywords = [\"wst_\"]\n");
  testing::WriteFile(d / "outside.toml", "[[rules]]\nid = \"o\"\nregex = 'o_[0-9]{10}'\n");
  testing::WriteFile(d / "user/50-team.toml", "[redact]\nrule_files = [\"" + team + "\"]\n");
  testing::WriteFile(d / "ws/.cordon/policy.toml", "[redact]\nrule_files = [\"!" + team +
                                                       "\", \"../.gitleaks.toml\", \"" +
                                                       (d / "outside.toml") + "\"]\n");
  PolicySources sources;
  sources.dirs = {CORDON_POLICY_DIR, d / "user"};
  sources.project_file = d / "ws/.cordon/policy.toml";
  auto p = LoadPolicy(sources);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->redact_rule_files, (std::vector<std::string>{team, d / "ws/.gitleaks.toml"}));
  std::string notes;
  for (const auto& n : p->notes) notes += n + "\n";
  EXPECT_NE(notes.find("a project file cannot remove \"" + team + "\" from redact.rule_files"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("a project file names rule files inside its workspace only; \"" +
                       (d / "outside.toml") + "\" ignored"),
            std::string::npos)
      << notes;
  Redactor r(p->compiled_redact_rules);
  std::string text = "zt-abcdefghij0123456789 wst_0123456789 o_0123456789";
  r.Redact(text);
  EXPECT_EQ(text, "[REDACTED:zeta-token] [REDACTED:ws-token] o_0123456789");
}

// What cannot be read as a rule file fails the load, naming the file (and the rule's line and
// id where there is one), as a bad policy file does: a rule file that is named and silently
// missing would leave its secrets shown.
TEST(RedactRuleFiles, ABadRuleFileFailsTheLoadNamingItAndTheRule) {
  struct Case {
    std::string name, text, needle;
  };
  const Case cases[] = {
      {"missing.toml", "", "cannot read redact rule file {F} (redact.rule_files, {P}:2)"},
      {"not.toml", "this is = not [toml", "{F}:1: "},
      {"no-regex.toml", "[[rules]]\nid = \"lonely\"\nkeywords = [\"x\"]\n",
       "{F}:1: gitleaks rule \"lonely\" has neither regex nor path"},
      {"no-id.toml", "[[rules]]\nregex = 'x_[0-9]+'\n", "{F}:1: a [[rules]] entry needs an id"},
      {"bad-group.toml", "[[rules]]\nid = \"g\"\nregex = 'x_[0-9]+'\nsecretGroup = \"one\"\n",
       "{F}:1: gitleaks rule \"g\": secretGroup must be an integer"},
  };
  for (const auto& c : cases) {
    testing::TempDir d;
    const std::string file = d / c.name;
    if (!c.text.empty()) testing::WriteFile(file, c.text);
    const std::string policy = d / "user/50-rules.toml";
    testing::WriteFile(policy, "[redact]\nrule_files = [\"" + file + "\"]\n");
    PolicySources sources;
    sources.dirs = {CORDON_POLICY_DIR, d / "user"};
    auto p = LoadPolicy(sources);
    ASSERT_FALSE(p) << c.name;
    std::string want = c.needle;
    want.replace(want.find("{F}"), 3, file);
    if (auto at = want.find("{P}"); at != std::string::npos) want.replace(at, 3, policy);
    EXPECT_NE(p.error().message.find(want), std::string::npos)
        << c.name << "\n -> " << p.error().message << "\n want " << want;
  }
}

// A secret file's lines are found inside longer lines (prefixes of grep -n, cat -n, diff), from
// 12 bytes; base64 of text that holds a secret is hidden whole.
TEST(Redactor, SecretLinesAndBase64Runs) {
  Redactor r(testing::ShippedRedactRules());
  SecretLines lines;
  lines.Add(std::string_view("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"));
  lines.Add(std::string_view("short-line1"));  // 11 bytes: not kept
  r.AddSecretLines(lines);
  const RedactCase cases[] = {
      {"3:MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "3:[REDACTED:secret_file]"},
      {"     3\tMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n", "     3\t[REDACTED:secret_file]\n"},
      {"+MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "+[REDACTED:secret_file]"},
      {"short-line1", "short-line1"},
      // base64 of a GitHub token ("ghp_" and 36 characters), and of the secret line.
      {"echo Z2hwX0FBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQQ== | base64 -d",
       "echo [REDACTED:base64] | base64 -d"},
      {"TUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0M=", "[REDACTED:base64]"},
      // base64 that decodes to ordinary text stays.
      {"aGVsbG8gd29ybGQsIHRoaXMgaXMgZmluZQ==", "aGVsbG8gd29ybGQsIHRoaXMgaXMgZmluZQ=="},
  };
  ExpectRedactedAs(r, cases);
}

// The session-start scan: bounded in entries and bytes, skips dependency and cache directories
// and git's object store (but reads .git/config), and finds a secret file by name or content.
TEST(SecretFiles, TheScanIsBoundedAndSkipsDependencyDirectories) {
  testing::TempDir d;
  const std::string ws = d / "ws";
  const std::string pem =
      "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAx4Ad0Lw1n2Jkq9\n"
      "-----END RSA PRIVATE KEY-----\n";
  testing::WriteFile(ws + "/.env", "DB_PASSWORD=hunter2-correct-horse\nDEBUG=1\n");
  testing::WriteFile(ws + "/notes/key.txt", pem);  // found by its content
  testing::WriteFile(ws + "/.git/config",
                     "[remote \"o\"]\n\turl = https://me:Sup3rSecretPassw0rd@host/r.git\n");
  for (const char* skipped : {"node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache",
                              ".cache", ".git/objects"}) {
    testing::WriteFile(ws + "/" + skipped + "/.env", "API_TOKEN=never-read-0123456789\n");
  }
  Redactor shapes(testing::ShippedRedactRules());
  UniqueFd root(::open(ws.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root.valid());
  auto scan = ScanSecretFiles(root.get(), shapes, SecretScanLimits{}, "");
  ASSERT_TRUE(scan) << scan.error().message;
  std::set<std::string> files(scan->files.begin(), scan->files.end());
  EXPECT_EQ(files, (std::set<std::string>{".env", ".git/config", "notes/key.txt"}));
  EXPECT_FALSE(scan->truncated);
  Redactor r(testing::ShippedRedactRules());
  r.AddSecretLines(scan->lines);
  std::string out =
      "x hunter2-correct-horse; MIIEpAIBAAKCAQEAx4Ad0Lw1n2Jkq9; never-read-0123456789";
  r.Redact(out);
  EXPECT_EQ(out, "x [REDACTED:secret_file]; [REDACTED:secret_file]; never-read-0123456789");
  // Past a limit the scan stops and says so.
  SecretScanLimits few;
  few.max_entries = 2;
  auto cut = ScanSecretFiles(root.get(), shapes, few, "");
  ASSERT_TRUE(cut);
  EXPECT_TRUE(cut->truncated);
  SecretScanLimits small;
  small.max_total_bytes = 16;
  cut = ScanSecretFiles(root.get(), shapes, small, "");
  ASSERT_TRUE(cut);
  EXPECT_TRUE(cut->truncated);
  EXPECT_LE(cut->read_bytes, 16u);
}

// audit diff runs after the session, when the secrets' sources may have changed or gone (a
// rotated token, a deleted .env, another environment): it hides what the session hid, from the
// knowledge the session kept, and withholds the diffs when that knowledge is gone.
TEST_F(RedactEndToEnd, AuditDiffHidesWhatTheSessionHidAfterItsSourcesAreGone) {
  const std::string home = dir_ / "home";
  const std::string netrc_pw = "Gq7-pl4inW0rd-nrc";    // a credential store's, no shape
  const std::string dotenv_pw = "Hx2-env-file-pw-99";  // a workspace secret file's
  const std::string short_env = "Qz7x9w";              // an environment secret of 6 bytes
  testing::WriteFile(home + "/.netrc",
                     "machine h.example.test login u password " + netrc_pw + "\n");
  testing::WriteFile(dir_ / "ws/.env", "SERVICE_PASSWORD=" + dotenv_pw + "\n");
  env_.push_back("HOME=" + home);
  env_.push_back("MY_SECRET=" + short_env);
  const std::string all = netrc_pw + " " + dotenv_pw + " " + kEnvSecret + " " + short_env;
  auto created =
      Cordon({"call", "create_file", "--workspace", dir_ / "ws", "--audit-log", log(), "--json",
              Json{{"path", "made.txt"}, {"content", "x " + all + "\n"}}.dump()});
  ASSERT_EQ(created.exit_code, 0) << created.out << created.err;
  auto shell = Cordon(
      {"call", "run_shell", "--workspace", dir_ / "ws", "--audit-log", log(), "--json",
       Json{{"program", "sh"}, {"args", {"-c", "printf '%s\\n' \"$1\" > shell.txt", "sh", all}}}
           .dump()});
  ASSERT_EQ(shell.exit_code, 0) << shell.out << shell.err;
  std::vector<std::string> sessions;
  {
    std::istringstream lines(testing::ReadFile(log()));
    for (std::string line; std::getline(lines, line);) {
      const Json rec = Json::parse(line);
      if (rec.value("type", "") == "session_started") sessions.push_back(rec["session"]);
    }
  }
  ASSERT_EQ(sessions.size(), 2u);
  // The sources gone: the store rotated, the .env deleted, another environment.
  testing::WriteFile(home + "/.netrc", "machine h.example.test login u password rotated-pw-0\n");
  std::filesystem::remove(dir_ / "ws/.env");
  env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
          "HOME=" + home};
  for (const auto& id : sessions) {
    auto d = Cordon({"audit", "diff", log(), "--session", id});
    EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
    EXPECT_NE(
        d.out.find("[REDACTED:credential] [REDACTED:secret_file] [REDACTED:env] [REDACTED:env]"),
        std::string::npos)
        << d.out;
    for (const auto& s : {netrc_pw, dotenv_pw, kEnvSecret, short_env}) {
      EXPECT_EQ(d.out.find(s), std::string::npos) << s << " shown by audit diff:\n" << d.out;
      EXPECT_EQ(d.err.find(s), std::string::npos) << s << " on audit diff's stderr";
    }
  }
  // The knowledge gone: no diff is shown, and the output says why; --rules-only shows them.
  std::filesystem::remove_all(dir_ / "state/cordon/redaction-knowledge");
  auto withheld = Cordon({"audit", "diff", log(), "--session", sessions[0]});
  EXPECT_EQ(withheld.exit_code, 0) << withheld.err;
  EXPECT_NE(withheld.out.find("NO DIFF SHOWN"), std::string::npos) << withheld.out;
  EXPECT_NE(withheld.out.find("made.txt"), std::string::npos) << withheld.out;
  for (const auto& s : {netrc_pw, dotenv_pw, kEnvSecret, short_env}) {
    EXPECT_EQ(withheld.out.find(s), std::string::npos) << s << " shown:\n" << withheld.out;
  }
  auto rules_only = Cordon({"audit", "diff", log(), "--session", sessions[0], "--rules-only"});
  EXPECT_EQ(rules_only.exit_code, 0) << rules_only.err;
  EXPECT_NE(rules_only.out.find("+x "), std::string::npos) << rules_only.out;
  EXPECT_NE(rules_only.out.find("not used (--rules-only)"), std::string::npos) << rules_only.out;
}

// [audit] arguments = "hashed": the log keeps each argument's SHA-256, length and shape, and no
// argument's text anywhere: not in tool_started.args, process.argv, an error message that
// echoes one, nor a search's rg command line. A project file cannot turn it back.
// The secret-file scan runs beside the session (docs/adr/0012): serve answers the handshake
// while it walks, and the first call that would show what it finds waits for it. A key file at
// the far end of a 20,000-file tree, whose body lines no rule can tell from other base64, is read
// by line range (the BEGIN line left out) in calls sent right after initialize: no body line
// reaches the agent or the log, and session_started, first in the log, names the file.
TEST_F(RedactEndToEnd, TheFirstCallsWaitForTheScanBesideTheSession) {
  const std::string ws = dir_ / "big";
  for (int d = 0; d < 400; ++d) {
    for (int f = 0; f < 50; ++f) {
      testing::WriteFile(ws + "/aa/d" + std::to_string(d) + "/f" + std::to_string(f) + ".txt",
                         "line " + std::to_string(d * 50 + f) + "\n");
    }
  }
  std::string body_lines[3];
  std::string key = "-----BEGIN PRIVATE KEY-----\n";
  for (int i = 0; i < 3; ++i) {
    std::string l;
    for (int k = 0; l.size() < 64; ++k)
      l += Sha256Hex("scan-beside-" + std::to_string(i * 100 + k));
    // base64's alphabet, no shape a rule knows: only the scan can know these lines
    for (char& c : l) c = c == 'a' ? 'Q' : c == '0' ? '+' : c;
    body_lines[i] = l.substr(0, 64);
    key += body_lines[i] + "\n";
  }
  key += "-----END PRIVATE KEY-----\n";
  testing::WriteFile(ws + "/zz/keys/deploy.pem", key);
  testing::LinePeer serve({testing::CordonBin(), "serve", "--workspace", ws, "--audit-log", log()},
                          env_);
  auto request = [&](int id, const std::string& method, const Json& params) {
    serve.Send(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump());
    for (std::string line = serve.Line(120); !line.empty(); line = serve.Line(120)) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.value("id", Json()) == Json(id)) return j;
    }
    return Json();
  };
  ASSERT_TRUE(request(1, "initialize",
                      {{"protocolVersion", "2025-06-18"},
                       {"capabilities", Json::object()},
                       {"clientInfo", {{"name", "scan-beside"}, {"version", "1"}}}})
                  .is_object());
  serve.Send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  std::vector<Json> answers;
  for (int id = 2; id < 5; ++id) {
    answers.push_back(
        request(id, "tools/call",
                {{"name", "read_file_range"},
                 {"arguments", {{"path", "zz/keys/deploy.pem"}, {"start_line", id}}}}));
  }
  serve.CloseInput();
  EXPECT_EQ(serve.Wait(), 0);
  for (const Json& a : answers) {
    ASSERT_TRUE(a.is_object());
    const std::string text = a.dump();
    EXPECT_NE(text.find("[REDACTED:secret_file]"), std::string::npos) << text;
    for (const auto& l : body_lines) EXPECT_EQ(text.find(l), std::string::npos) << text;
  }
  const std::string written = testing::ReadFile(log());
  for (const auto& l : body_lines) EXPECT_EQ(written.find(l), std::string::npos);
  std::vector<Json> records;
  std::istringstream lines(written);
  for (std::string l; std::getline(lines, l);) records.push_back(Json::parse(l));
  // session_started comes first (after the log's own log_started), then the rest.
  std::size_t at = 0;
  while (at < records.size() && records[at].value("type", "") == "log_started") ++at;
  ASSERT_LT(at, records.size());
  ASSERT_EQ(records[at].value("type", ""), "session_started");
  const Json scan = records[at]["redaction"]["secret_files"];
  EXPECT_FALSE(scan.value("truncated", true)) << scan.dump();
  EXPECT_EQ(scan.value("paths", Json::array()), Json::array({"zz/keys/deploy.pem"})) << scan.dump();
  std::size_t tool_started = 0, mcp_client = 0;
  for (const Json& r : records) {
    tool_started += r.value("type", "") == "tool_started";
    mcp_client += r.value("type", "") == "mcp_client";
    EXPECT_FALSE(r.value("type", "") == "session_started" && &r != &records[at]);
  }
  EXPECT_EQ(tool_started, 3u);
  EXPECT_EQ(mcp_client, 1u);  // the handshake's record waited for session_started, not lost
}

// What the session learned after it started is kept at its end (session_finished.knowledge),
// and audit diff hides it too. The agent writes a YAML block scalar under a secret key (its
// lines are learned), then copies the value's lines alone into another file in the same
// session: the diff shows them without the key, which no rule and no scan knows.
TEST_F(RedactEndToEnd, AuditDiffHidesWhatTheSessionLearnedAfterItStarted) {
  const std::string lines[3] = {"Wq81vbn4mmc7plk2Rs9x", "Pt63hjd8kkw2zmq5Lv7c",
                                "Yb40fgs1nnq9xwe3Jm2d"};
  std::string yaml = "db_password: |\n";
  for (const auto& l : lines) yaml += "  " + l + "\n";
  yaml += "other: 1\n";
  testing::LinePeer serve(
      {testing::CordonBin(), "serve", "--workspace", dir_ / "ws", "--audit-log", log()}, env_);
  int next_id = 1;
  auto call = [&](const std::string& tool, const Json& args) {
    const int id = next_id++;
    serve.Send(Json{{"jsonrpc", "2.0"},
                    {"id", id},
                    {"method", "tools/call"},
                    {"params", {{"name", tool}, {"arguments", args}}}}
                   .dump());
    for (std::string line = serve.Line(120); !line.empty(); line = serve.Line(120)) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.value("id", Json()) == Json(id)) return j;
    }
    return Json();
  };
  serve.Send(Json{{"jsonrpc", "2.0"},
                  {"id", 0},
                  {"method", "initialize"},
                  {"params",
                   {{"protocolVersion", "2025-06-18"},
                    {"capabilities", Json::object()},
                    {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}}
                 .dump());
  ASSERT_FALSE(serve.Line(120).empty());
  serve.Send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  const Json made = call("create_file", {{"path", "conf/app.yml"}, {"content", yaml}});
  ASSERT_FALSE(made.value("result", Json::object()).value("isError", true)) << made.dump();
  std::string copied = "values:\n";
  for (const auto& l : lines) copied += "  " + l + "\n";
  const Json copy = call("create_file", {{"path", "notes.txt"}, {"content", copied}});
  ASSERT_FALSE(copy.value("result", Json::object()).value("isError", true)) << copy.dump();
  // The session hides them in a line view of the copy.
  const std::string seen = call("read_file_range", {{"path", "notes.txt"}}).dump();
  for (const auto& l : lines) EXPECT_EQ(seen.find(l), std::string::npos) << seen;
  serve.CloseInput();
  ASSERT_EQ(serve.Wait(), 0);
  Json finished;
  for (const auto& rec : [&] {
         std::vector<Json> v;
         std::istringstream in(testing::ReadFile(log()));
         for (std::string l; std::getline(in, l);) v.push_back(Json::parse(l));
         return v;
       }()) {
    if (rec.value("type", "") == "session_finished") finished = rec;
  }
  const std::string session = finished.value("session", "");
  auto d = Cordon({"audit", "diff", log(), "--session", session});
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_NE(d.out.find("notes.txt"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("+values:"), std::string::npos) << d.out;
  for (const auto& l : lines) {
    EXPECT_EQ(d.out.find(l), std::string::npos) << l << " shown by audit diff:\n" << d.out;
  }
  // That knowledge gone, the diffs are withheld, not shown without it.
  std::filesystem::remove_all(dir_ / "state/cordon/redaction-knowledge");
  auto withheld = Cordon({"audit", "diff", log(), "--session", session});
  EXPECT_NE(withheld.out.find("NO DIFF SHOWN"), std::string::npos) << withheld.out;
  for (const auto& l : lines) EXPECT_EQ(withheld.out.find(l), std::string::npos) << withheld.out;
}

TEST_F(RedactEndToEnd, HashedArgumentsLeaveNoArgumentTextInTheLog) {
  testing::WriteFile(dir_ / "hashed.toml", "[audit]\narguments = \"hashed\"\n");
  testing::WriteFile(dir_ / "ws/.cordon/policy.toml", "[audit]\narguments = \"redacted\"\n");
  // Arguments no rule knows the shape of.
  const std::string shell_arg = "Zq8 unknown shape argument 4471";
  const std::string missing = "no-such-program-Kx83q";
  const std::string needle = "Pw-needle-5512v";
  const std::string flag = "--db-pass=Mv72lrTq0";
  const std::string policy = dir_ / "hashed.toml";
  auto run = [&](const std::string& tool, const Json& in) {
    return Cordon({"call", tool, "--workspace", dir_ / "ws", "--policy", policy, "--audit-log",
                   log(), "--json", in.dump()});
  };
  auto shell = run("run_shell", {{"program", "sh"},
                                 {"args", {"-c", "echo \"$1\"; exit 3", "sh", shell_arg, flag}}});
  EXPECT_NE(shell.out.find(shell_arg), std::string::npos) << "the agent sees its output";
  auto absent = run("run_shell", {{"program", missing}});
  EXPECT_NE(absent.out.find(missing), std::string::npos) << "the agent's error names it";
  auto search = run("search_text", {{"pattern", needle}});
  EXPECT_EQ(search.exit_code, 0) << search.out << search.err;
  // Copies changed on the way to a message: a path normalized, an unknown key named, a cwd
  // below the workspace that does not exist.
  const std::string dotted = "Yx5dir/../Yx5secret-file.txt";
  const std::string key = "Kq9UnknownKeySecret";
  const std::string cwd = "./Cw7-no-such-dir/./x";
  run("read_file_range", {{"path", dotted}});
  run("run_shell", {{"program", "sh"}, {key, "x"}});
  run("run_shell", {{"program", "sh"}, {"args", {"-c", "true"}}, {"cwd", cwd}});
  const std::string text = testing::ReadFile(log());
  for (const auto& s : {shell_arg, missing, needle, flag, std::string("Mv72lrTq0"),
                        std::string("unknown shape"), std::string("Yx5secret-file"),
                        std::string("Yx5dir"), key, std::string("Cw7-no-such-dir")}) {
    EXPECT_EQ(text.find(s), std::string::npos) << s << " in the log:\n" << text;
  }
  // What stays: the digest, length and shape of each argument.
  bool saw_started = false, saw_argv = false, saw_mode = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const Json rec = Json::parse(line);
    const std::string type = rec.value("type", "");
    if (type == "session_started") {
      saw_mode = rec["redaction"].value("arguments", "") == "hashed";
    } else if (type == "tool_started" && rec.value("tool", "") == "run_shell" &&
               rec["args"].contains("args") && rec["args"]["args"].size() == 5) {
      const Json& a = rec["args"]["args"][3];
      EXPECT_EQ(a.value("sha256", ""), Sha256Hex(shell_arg)) << rec.dump();
      EXPECT_EQ(a.value("bytes", 0u), shell_arg.size()) << rec.dump();
      EXPECT_EQ(a.value("shape", ""), "text") << rec.dump();
      EXPECT_EQ(rec["args"]["args"][4].value("shape", ""), "flag") << rec.dump();
      saw_started = true;
    } else if (type == "process" && rec.value("tool", "") == "run_shell" &&
               rec["argv"].size() == 6) {  // sh -c SCRIPT sh ARG FLAG
      EXPECT_EQ(rec["argv"][4].value("sha256", ""), Sha256Hex(shell_arg)) << rec.dump();
      saw_argv = true;
    }
  }
  EXPECT_TRUE(saw_started && saw_argv && saw_mode) << text;
  EXPECT_EQ(Cordon({"audit", "verify", log()}).exit_code, 0);
  auto shown = Cordon({"audit", "show", log()});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(shown.out.find(shell_arg), std::string::npos);
}

}  // namespace
}  // namespace cordon
