// The redaction corpora (issue 32 part 6): secret shapes in every context syntax, encoding and
// shipped vendor format that must not survive redaction, and ordinary strings (hashes, lockfile
// lines, digests, images, public keys, shell expansions, placeholders) that must not change.
// Every value here is invented: drawn from a seeded generator, never a real credential. The
// rules are the shipped policies.d, loaded as the binary loads them.
#include "tests/redact_corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/hash.h"
#include "core/redact.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using namespace corpus;  // NOLINT: the generators and the secret corpus

TEST(RedactCorpus, NoSecretShapeSurvives) {
  Redactor r(testing::ShippedRedactRules());
  const std::vector<Secret> corpus = SecretCorpus();
  EXPECT_GE(corpus.size(), 300u);
  std::map<std::string, std::pair<int, int>> by_class;  // leaked, total
  for (const Secret& s : corpus) {
    std::string out = s.text;
    r.Redact(out);
    bool leaked = false;
    for (const auto& part : s.parts) leaked = leaked || Survives(out, part);
    ++by_class[s.cls].second;
    if (leaked) {
      ++by_class[s.cls].first;
      ADD_FAILURE() << "[" << s.cls << "] leaked:\n" << s.text << "\n -> " << out;
    }
  }
  for (const auto& [cls, n] : by_class)
    std::printf("redact corpus: %s: %d of %d leaked\n", cls.c_str(), n.first, n.second);
}

// The whole corpus as one text (a file holding many secrets, cat of it): what a rule finds in an
// entry alone it finds beside the others. Windows that began where the last one ended cut every
// token that straddled the edge, so tokens within 96 bytes of another run were missed.
TEST(RedactCorpus, NoSecretShapeSurvivesBesideTheOthers) {
  Redactor r(testing::ShippedRedactRules());
  const std::vector<Secret> corpus = SecretCorpus();
  for (const char* sep : {"\n\n", "\n"}) {
    std::string out;
    for (const Secret& s : corpus) out += s.text + sep;
    r.Redact(out);
    int leaked = 0;
    for (const Secret& s : corpus) {
      bool l = false;
      for (const auto& part : s.parts) l = l || Survives(out, part);
      if (l && ++leaked <= 10)
        ADD_FAILURE() << "[" << s.cls << "] leaked beside the others (separator "
                      << ::testing::PrintToString(std::string(sep)) << "):\n"
                      << s.text;
    }
    EXPECT_EQ(leaked, 0) << "separator " << ::testing::PrintToString(std::string(sep));
  }
}

// Exact values (the environment's secrets, [redact] values) and secret-file lines in encodings:
// hex of a value, a key's body lines re-wrapped at another width with its first line cut off.
TEST(RedactCorpus, KnownValuesAndLinesSurviveNoEncoding) {
  Gen g(77);
  Redactor r(testing::ShippedRedactRules());
  std::vector<std::pair<std::string, std::string>> cases;  // text, part
  for (int i = 0; i < 6; ++i) {
    const std::string v = g.Token(10) + "x" + g.Password(8);
    r.AddValue("env", v);
    cases.emplace_back("dump: " + HexOf(v), HexOf(v));
    cases.emplace_back("DUMP: " + HexOf(v, true) + " end", HexOf(v, true));
    cases.emplace_back("b64b64: " + Base64(Base64(v)), Base64(Base64(v)));
  }
  SecretLines lines;
  std::vector<std::string> bodies;
  for (int i = 0; i < 3; ++i) {
    const std::string body = Base64(g.Bytes(1200)).substr(0, 1600);
    for (std::size_t k = 0; k < body.size(); k += 64) lines.Add(body.substr(k, 64));
    bodies.push_back(body);
  }
  r.AddSecretLines(lines);
  for (const std::string& body : bodies) {
    const std::string cut = body.substr(100);  // no line starts where the file's did
    cases.emplace_back(Wrap(cut, 76), cut.substr(500, 40));
    cases.emplace_back(Wrap(cut, 70, "\r\n"), cut.substr(800, 40));
    cases.emplace_back("\"" + Wrap(cut, 60, "\\n") + "\"", cut.substr(300, 40));
  }
  int leaked = 0;
  for (const auto& [text, part] : cases) {
    std::string out = text;
    r.Redact(out);
    if (Survives(out, part)) {
      ++leaked;
      ADD_FAILURE() << "leaked:\n" << text << "\n -> " << out;
    }
  }
  std::printf("redact corpus: known values in encodings: %d of %zu leaked\n", leaked, cases.size());
}

// The secret words are data: a project file adds one (and every rule that names the list then
// finds it), and cannot remove one; a rule that names the list with none is refused.
TEST(SecretWords, AProjectAddsWordsAndCannotRemoveOne) {
  testing::TempDir d;
  testing::WriteFile(d / "project.toml",
                     "[redact]\nsecret_words = [\"pin_code\", \"!password\"]\n");
  PolicySources sources;
  sources.dirs = {CORDON_POLICY_DIR};
  sources.project_file = d / "project.toml";
  auto p = LoadPolicy(sources);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_NE(std::find(p->redact_secret_words.begin(), p->redact_secret_words.end(), "pin_code"),
            p->redact_secret_words.end());
  EXPECT_NE(std::find(p->redact_secret_words.begin(), p->redact_secret_words.end(), "password"),
            p->redact_secret_words.end());
  Redactor with(p->compiled_redact_rules), without(testing::ShippedRedactRules());
  for (const std::string text : {"PIN_CODE=Xk9mP2vL7qRw", "--pin-code Xk9mP2vL7qRw",
                                 "<pinCode>Xk9mP2vL7qRw</pinCode>", "password: Xk9mP2vL7qRw"}) {
    std::string a = text, b = text;
    with.Redact(a);
    without.Redact(b);
    EXPECT_EQ(a.find("Xk9mP2vL7qRw"), std::string::npos) << text << " -> " << a;
    if (text.rfind("password", 0) != 0) {
      EXPECT_EQ(b, text) << "the shipped words alone do not name it";
    }
  }
  std::vector<RedactRule> rules(1);
  rules[0].id = "r";
  rules[0].where = "f.toml:3";
  rules[0].pattern = "{secret_words}=(x+)";
  EXPECT_FALSE(ExpandSecretWords(rules, {}));
  EXPECT_FALSE(ExpandSecretWords(rules, {"Bad Word"}));
  rules[0].keywords = {"{secret_words}"};
  ASSERT_TRUE(ExpandSecretWords(rules, {"api_key"}));
  EXPECT_EQ(rules[0].pattern, "(?:api[_.-]?key)=(x+)");
  EXPECT_EQ(rules[0].keywords,
            (std::vector<std::string>{"api_key", "api-key", "api.key", "apikey"}));
}

// --- the ordinary corpus ---

struct Ordinary {
  std::string cls, text;
};

std::string Uuid(Gen& g) {
  std::string h = g.Hex(32);
  h[12] = '4';
  h[16] = "89ab"[g.Next() % 4];
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

// An SSH public key blob: string type, then the key's fields, each with its 4-byte length.
std::string SshString(std::string_view s) {
  std::string out(4, '\0');
  out[0] = static_cast<char>(s.size() >> 24);
  out[1] = static_cast<char>(s.size() >> 16);
  out[2] = static_cast<char>(s.size() >> 8);
  out[3] = static_cast<char>(s.size());
  return out + std::string(s);
}

std::vector<Ordinary> OrdinaryCorpus() {
  Gen g(4242);
  std::vector<Ordinary> out;
  auto add = [&](std::string cls, std::string text) {
    out.push_back({std::move(cls), std::move(text)});
  };
  const char* pkgs[] = {"left-pad", "lodash", "react", "express", "chalk",     "debug", "semver",
                        "ms",       "yargs",  "zod",   "ajv",     "commander", "uuid",  "glob",
                        "minimist", "qs",     "tslib", "rxjs",    "axios",     "dotenv"};
  for (int i = 0; i < 20; ++i) {
    const std::string n = std::to_string(i);
    const std::string sha1 = Sha256Hex("commit " + n).substr(0, 40);
    const std::string sha256 = Sha256Hex("blob " + n);
    const std::string sha512_b64 = Base64(Bytes(Sha256Hex("a" + n) + Sha256Hex("b" + n)));
    const std::string sha384_b64 =
        Base64(Bytes(Sha256Hex("c" + n) + Sha256Hex("d" + n).substr(0, 32)));
    const std::string pkg = pkgs[i];
    const std::string ver =
        std::to_string(i % 5) + "." + std::to_string(i) + "." + std::to_string(i * 3 % 7);
    // git
    add("git", "commit " + sha1);
    add("git", sha1.substr(0, 7) + " Fix the parser's handling of empty input (#" + n + ")");
    add("git", "Merge: " + sha1.substr(0, 7) + " " + Sha256Hex("p" + n).substr(0, 7));
    add("git", "index " + sha1.substr(0, 7) + ".." + Sha256Hex("q" + n).substr(0, 7) + " 100644");
    // UUIDs
    add("uuid", "request_id=" + Uuid(g));
    add("uuid", "\"id\": \"" + Uuid(g) + "\",");
    // lockfiles
    add("package-lock", "      \"integrity\": \"sha512-" + sha512_b64 + "\",");
    add("package-lock", "      \"resolved\": \"https://registry.npmjs.org/" + pkg + "/-/" + pkg +
                            "-" + ver + ".tgz\",");
    add("yarn.lock", "  resolved \"https://registry.yarnpkg.com/" + pkg + "/-/" + pkg + "-" + ver +
                         ".tgz#" + sha1 + "\"");
    add("yarn.lock", "  integrity sha512-" + sha512_b64);
    add("yarn.lock", "  checksum: " + Sha256Hex("y" + n) + Sha256Hex("z" + n));
    add("pnpm-lock", "    resolution: {integrity: sha512-" + sha512_b64 + "}");
    add("Cargo.lock", "checksum = \"" + sha256 + "\"");
    add("poetry.lock", "    {file = \"" + pkg + "-" + ver +
                           "-py3-none-any.whl\", hash = \"sha256:" + sha256 + "\"},");
    add("Gemfile.lock", "  " + pkg + " (" + ver + ") sha256=" + sha256);
    add("go.sum", "github.com/example/" + pkg + " v" + ver + " h1:" + Base64(Bytes(sha256)));
    add("go.sum", "github.com/example/" + pkg + " v" + ver +
                      "/go.mod h1:" + Base64(Bytes(Sha256Hex("m" + n))));
    add("composer.lock", "                \"reference\": \"" + sha1 + "\"");
    add("composer.lock", "                \"url\": \"https://api.github.com/repos/example/" + pkg +
                             "/zipball/" + sha1 + "\",");
    add("composer.lock",
        "            \"content-hash\": \"" + Sha256Hex("h" + n).substr(0, 32) + "\",");
    // SRI and image digests
    add("sri", "<script src=\"https://cdn.example.org/" + pkg + ".min.js\" integrity=\"sha384-" +
                   sha384_b64 + "\" crossorigin=\"anonymous\"></script>");
    add("digest", "image: docker.io/library/" + pkg + "@sha256:" + sha256);
    add("digest", "Digest: sha256:" + sha256);
    add("digest", "FROM python:3.12-slim@sha256:" + Sha256Hex("f" + n));
  }
  // base64 images
  for (int i = 0; i < 10; ++i) {
    const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + g.Bytes(60 + 30 * i);
    add("image", "<img src=\"data:image/png;base64," + Base64(png) + "\">");
    add("image",
        "background: url(data:image/gif;base64," + Base64("GIF89a" + g.Bytes(40 + i)) + ");");
  }
  // minified JS and CSS, source maps
  const char* js[] = {
      "!function(e,t){\"object\"==typeof "
      "exports?module.exports=t():e.lib=t()}(this,function(){return{a:1}});",
      "var n=function(e){return "
      "e&&e.__esModule?e:{default:e}};exports.token=n(require(\"./token\"));",
      "const o=(e,t)=>e.split(\",\").map(r=>r.trim()).filter(Boolean).join(t);export{o as "
      "joinList};",
      "function a(t){var e=t.headers.authorization;if(!e)throw new Error(\"missing\");return "
      "e.slice(7)}",
      "e.exports={password:function(t){return "
      "t.length>=8},token:function(t){return/^[a-z]+$/.test(t)}};",
      ".btn{color:#fff;background:#1a73e8}.btn:hover{background:#1765cc}@media(max-width:600px){."
      "btn{width:100%}}",
      ":root{--primary:#3b82f6;--radius:4px}.card{border-radius:var(--radius);box-shadow:0 1px 2px "
      "rgba(0,0,0,.1)}",
      "input[type=password]{letter-spacing:.2em}.token-list>li{display:inline-block;margin:0 4px}",
      "{\"version\":3,\"file\":\"app.min.js\",\"sources\":[\"../src/"
      "app.ts\"],\"names\":[\"token\",\"secret\"],\"mappings\":\"AAAA,SAASA,EAAMC,GACb,OAAOA,EAAEC,"
      "MAAM\"}",
      "//# sourceMappingURL=app.min.js.map",
  };
  for (const char* s : js) add("minified", s);
  for (int i = 0; i < 10; ++i) {
    const std::string map = "{\"version\":3,\"sources\":[\"src/m" + std::to_string(i) +
                            ".ts\"],\"mappings\":\"AAAA,SAAS" +
                            g.From("ABCDEFGIKMOQSUWYacegikmoqsuwy", 40) + "\"}";
    add("sourcemap",
        "//# sourceMappingURL=data:application/json;charset=utf-8;base64," + Base64(map));
  }
  // certificates and public keys
  for (int i = 0; i < 6; ++i) {
    const std::string der = "MIID" + Base64(g.Bytes(700)).substr(0, 900);
    add("certificate",
        "-----BEGIN CERTIFICATE-----\n" + Wrap(der, 64) + "\n-----END CERTIFICATE-----");
    add("public_key", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA" +
                          Wrap(Base64(g.Bytes(270)).substr(0, 320), 64) +
                          "\n-----END PUBLIC KEY-----");
    add("public_key", "ssh-ed25519 " + Base64(SshString("ssh-ed25519") + SshString(g.Bytes(32))) +
                          " dev" + std::to_string(i) + "@laptop");
    add("public_key", "ssh-rsa " +
                          Base64(SshString("ssh-rsa") + SshString("\x01\x00\x01") +
                                 SshString(std::string(1, '\0') + g.Bytes(256))) +
                          " ci@build");
    add("public_key",
        "ecdsa-sha2-nistp256 " + Base64(SshString("ecdsa-sha2-nistp256") + SshString("nistp256") +
                                        SshString("\x04" + g.Bytes(64))));
  }
  // shell expansions and placeholders in every context syntax
  const char* refs[] = {
      "password: ${DB_PASSWORD}",
      "password: ${DB_PASSWORD:-postgres}",
      "token = \"${GITHUB_TOKEN:?set GITHUB_TOKEN first}\"",
      "API_KEY=$(cat /run/secrets/api_key)",
      "export TOKEN=\"$(vault read -field=token secret/ci)\"",
      "api_key: <your-api-key>",
      "token = \"<your-token>\"",
      "password: changeme-in-prod",
      "password: change-me",
      "PASSWORD=changeme",
      "api_key: YOUR_API_KEY_HERE",
      "token: xxxxxxxxxxxxxxxxxxxx",
      "secret: '********'",
      "mysql -u root -p",
      "mysql -u root -p\"$MYSQL_ROOT_PASSWORD\" app",
      "mysql -u root -p${MYSQL_PWD} app",
      "redis-cli -a \"$REDIS_PASSWORD\" ping",
      "docker login -u \"$USER\" -p \"$TOKEN\" registry",
      "docker login -u me --password-stdin",
      "curl -u \"$USER:$PASS\" https://example.org",
      "curl -H \"Authorization: Bearer $TOKEN\" https://api.example.org",
      "curl -H 'X-Api-Key: ${API_KEY}' https://api.example.org",
      "Authorization: Bearer {{token}}",
      "Authorization: Bearer <token>",
      "X-Request-Id: 5d3c7e8a-1b2f-4c3d-9e8f-0a1b2c3d4e5f",
      "X-Api-Version: 2024-01-01",
      "Cookie: theme=dark; lang=en-US",
      "CREATE USER app IDENTIFIED BY '<password>';",
      "ALTER ROLE app PASSWORD NULL;",
      "<password>${db.password}</password>",
      "<password></password>",
      "<add key=\"Password\" value=\"{0}\" />",
      "Server=db;Database=app;User Id=sa;Password=$(SA_PASSWORD);",
      "Password={password};",
      "https://example.org/search?q=token&page=2",
      "https://example.org/api?key=value",
      "https://example.org/docs?sig=v4",
      "deploy --token-file /run/secrets/token",
      "--password-file=/etc/app/pw",
      "ssh -p 2222 deploy@host",
      "docker run -p 8080:80 nginx",
      "mkdir -p /tmp/build/out",
      "openssl genrsa -out key.pem 2048",
      "password: |\n  ${DB_PASSWORD}\n",
      "client_secret: >-\n  <set in the vault>\n",
      "api_key = os.environ[\"API_KEY\"]",
      "const token = process.env.GITHUB_TOKEN;",
      "token = get_token()",
      "max_tokens: 4096",
      "password_reset_url: /accounts/reset",
      "tokenizer = AutoTokenizer.from_pretrained(\"bert-base-uncased\")",
      "secret_name: prod/db/credentials",
      "auth_method: oauth2",
      "--auth-type=basic",
      "pwd=/home/user/src",
      "PWD=/workspace/app",
      "key_id: 3",
      "keys: [\"a\", \"b\"]",
      "primary_key: id",
      "foreign_key: user_id",
  };
  for (const char* s : refs) add("reference", s);
  // prose and code that name the words
  const char* prose[] = {
      "The password must be at least 12 characters long.",
      "Set the token in your environment before running the tests.",
      "Use --api-key to pass the key, or set API_KEY.",
      "See RFC 6750 for the Bearer token usage.",
      "if (password.length < 8) return false;",
      "def check_token(token: str) -> bool:",
      "    assert secret is not None",
      "#define OPENSSL_NO_PSK 1",
      "static const char *token_names[] = {\"IDENT\", \"NUMBER\", \"STRING\"};",
      "int pthread_key_create(pthread_key_t *key, void (*destructor)(void *));",
  };
  for (const char* s : prose) add("prose", s);
  // ordinary hex and base64 that decode to nothing secret
  for (int i = 0; i < 10; ++i) {
    add("hex", "sha256sum: " + Sha256Hex("file" + std::to_string(i)) + "  dist/app.tar.gz");
    add("hex", "0x" + HexOf("Hello, world number " + std::to_string(i)));
    add("base64",
        "content: " + Base64("The quick brown fox jumps over the lazy dog " + std::to_string(i)));
    add("base64", "etag: \"" + Base64(g.Bytes(24)) + "\"");
  }
  return out;
}

TEST(RedactCorpus, OrdinaryStringsAreUnchanged) {
  Redactor r(testing::ShippedRedactRules());
  const std::vector<Ordinary> corpus = OrdinaryCorpus();
  EXPECT_GE(corpus.size(), 500u);
  // At most one may change, and that one is named in the README (redaction's false positives).
  const std::vector<std::string> named_in_readme = {};
  std::map<std::string, std::pair<int, int>> by_class;  // changed, total
  int changed = 0;
  for (const Ordinary& o : corpus) {
    std::string out = o.text;
    r.Redact(out);
    ++by_class[o.cls].second;
    if (out == o.text) continue;
    ++by_class[o.cls].first;
    ++changed;
    if (std::find(named_in_readme.begin(), named_in_readme.end(), o.text) == named_in_readme.end())
      ADD_FAILURE() << "[" << o.cls << "] changed:\n" << o.text << "\n -> " << out;
  }
  EXPECT_LE(changed, 1);
  for (const auto& [cls, n] : by_class)
    std::printf("ordinary corpus: %s: %d of %d changed\n", cls.c_str(), n.first, n.second);
  std::printf("ordinary corpus: %d of %zu changed\n", changed, corpus.size());
}

// Real files of this machine: lockfiles of the MCP peers' node_modules and C headers. Read at
// test time (their licences are theirs); a missing tree is a loud skip.
TEST(RedactCorpus, RealLockfilesAndHeadersAreUnchanged) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const char* p :
       {"/tmp/mcp-peers/package-lock.json", "/usr/include/stdio.h", "/usr/include/unistd.h",
        "/usr/include/openssl/evp.h", "/usr/include/openssl/ssl.h"}) {
    if (fs::exists(p)) files.emplace_back(p);
  }
  if (files.empty()) GTEST_SKIP() << "SKIPPED: no lockfile or header of this machine to read";
  Redactor r(testing::ShippedRedactRules());
  std::size_t lines = 0, changed = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      ++lines;
      std::string out = line;
      if (r.Redact(out) > 0) {
        ++changed;
        ADD_FAILURE() << f << ": " << line << "\n -> " << out;
      }
    }
  }
  std::printf("real files: %zu files, %zu lines, %zu changed\n", files.size(), lines, changed);
}

}  // namespace
}  // namespace cordon
