// The redaction corpora (issue 32 part 6): secret shapes in every context syntax, encoding and
// shipped vendor format that must not survive redaction, and ordinary strings (hashes, lockfile
// lines, digests, images, public keys, shell expansions, placeholders) that must not change.
// Every value here is invented: drawn from a seeded generator, never a real credential. The
// rules are the shipped policies.d, loaded as the binary loads them.
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

// --- generators (seeded: the corpus is the same on every run) ---

class Gen {
 public:
  explicit Gen(std::uint32_t seed) : rng_(seed) {}
  std::string From(std::string_view alphabet, std::size_t n) {
    std::string s;
    std::uniform_int_distribution<std::size_t> d(0, alphabet.size() - 1);
    for (std::size_t i = 0; i < n; ++i) s += alphabet[d(rng_)];
    return s;
  }
  // Mixed case and digits, each present (a random-looking token).
  std::string Token(std::size_t n) {
    for (;;) {
      std::string s = From(kAlnum, n);
      if (Has(s, 'A', 'Z') && Has(s, 'a', 'z') && Has(s, '0', '9')) return s;
    }
  }
  // A password as a person or a generator makes one: letters, digits and punctuation.
  std::string Password(std::size_t n) {
    for (;;) {
      std::string s =
          From("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789!%*+-._~^@", n);
      if (Has(s, 'A', 'Z') && Has(s, 'a', 'z') && Has(s, '0', '9') && std::isalnum(s[0]) &&
          std::isalnum(s.back()))
        return s;
    }
  }
  std::string Hex(std::size_t n) { return From("0123456789abcdef", n); }
  std::string Bytes(std::size_t n) {
    std::string s;
    std::uniform_int_distribution<int> d(0, 255);
    for (std::size_t i = 0; i < n; ++i) s += static_cast<char>(d(rng_));
    return s;
  }
  std::uint32_t Next() { return rng_(); }
  static constexpr std::string_view kAlnum =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

 private:
  static bool Has(std::string_view s, char lo, char hi) {
    return std::any_of(s.begin(), s.end(), [&](char c) { return c >= lo && c <= hi; });
  }
  std::mt19937 rng_;
};

std::string Base64(std::string_view in, bool url = false, bool pad = true) {
  const char* t = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                      : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const std::uint32_t v = static_cast<unsigned char>(in[i]) << 16 |
                            static_cast<unsigned char>(in[i + 1]) << 8 |
                            static_cast<unsigned char>(in[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += t[(v >> k) & 63];
  }
  if (i + 1 == in.size()) {
    const std::uint32_t v = static_cast<unsigned char>(in[i]) << 16;
    out += t[(v >> 18) & 63];
    out += t[(v >> 12) & 63];
    if (pad) out += "==";
  } else if (i + 2 == in.size()) {
    const std::uint32_t v =
        static_cast<unsigned char>(in[i]) << 16 | static_cast<unsigned char>(in[i + 1]) << 8;
    out += t[(v >> 18) & 63];
    out += t[(v >> 12) & 63];
    out += t[(v >> 6) & 63];
    if (pad) out += "=";
  }
  return out;
}

std::string HexOf(std::string_view in, bool upper = false) {
  const char* d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (unsigned char c : in) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string Bytes(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

std::string Wrap(std::string_view s, std::size_t width, std::string_view nl = "\n") {
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += width) {
    if (i > 0) out += nl;
    out += s.substr(i, width);
  }
  return out;
}

std::string Replace(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// --- the secret corpus ---

struct Secret {
  std::string cls;                 // context, encoding, vendor
  std::string text;                // what a tool shows
  std::vector<std::string> parts;  // what must not survive
};

// A context template: {V} is the value. `kinds` says which value shapes the syntax carries:
// t token, p password (punctuation), h hex.
struct Context {
  const char* tmpl;
  const char* kinds;
};

const Context kContexts[] = {
    // assignments: =, :, =>, in every file format a user meets
    {"password = {V}", "tph"},
    {"DB_PASSWORD={V}", "tph"},
    {"export API_TOKEN='{V}'", "tph"},
    {"\"client_secret\": \"{V}\"", "tph"},
    {"'secret_key' => '{V}',", "tph"},
    {":password => \"{V}\"", "tph"},
    {"password: {V}", "tph"},
    {"  api_key: \"{V}\"", "tph"},
    {"$db_password = \"{V}\";", "tph"},
    {"const apiKey = \"{V}\";", "tph"},
    {"self.auth_token = '{V}'", "tph"},
    {"spring.datasource.password={V}", "tph"},
    {"ENV API_TOKEN={V}", "tph"},
    {"ENV DB_PASSWORD {V}", "tph"},
    {"ARG NPM_TOKEN={V}", "tph"},
    {"//registry.npmjs.org/:_authToken={V}", "th"},
    {"PGPASSWORD={V} psql -h db -U app", "tph"},
    {"kubectl create secret generic app --from-literal=password={V}", "tph"},
    {"{\"apiKey\":\"{V}\"}", "tph"},
    {"settings = {'access_token': '{V}'}", "tph"},
    {"SECRET = \"{V}\"", "tph"},
    {"private_key_passphrase: '{V}'", "tph"},
    {"db_password = \"|{V}\"", "tp"},  // "|" starts a value here, not a YAML block
    // CLI flags
    {"mysql -u root -p{V} app", "tph"},
    {"mysqldump -uroot -p'{V}' shop > shop.sql", "tph"},
    {"mysql --password={V} -h db", "tph"},
    {"psql \"host=db user=app password={V} dbname=app\"", "tph"},
    {"curl -u admin:{V} https://ci.example.org/api", "tph"},
    {"curl --user deploy:{V} https://ci.example.org/api", "tph"},
    {"curl -H 'X-Api-Key: {V}' https://api.example.org/v2/items", "tph"},
    {"curl --header \"X-Auth-Token: {V}\" https://api.example.org", "tph"},
    {"redis-cli -a {V} ping", "tph"},
    {"redis-cli -h cache -p 6379 -a '{V}' info", "tph"},
    {"docker login -u me -p {V} registry.example.org", "tph"},
    {"docker login --password {V} registry.example.org", "tph"},
    {"sshpass -p '{V}' ssh deploy@host", "tph"},
    {"deploy-tool --api-key {V} --region eu", "tph"},
    {"deploy-tool --apikey={V}", "tph"},
    {"oauth-cli --client-secret {V} --client-id app", "tph"},
    {"gh-sync --token={V}", "tph"},
    {"backup --password \"{V}\" /srv", "tph"},
    {"vault-agent --secret {V}", "tph"},
    {"runner register --auth-token {V}", "tph"},
    {"app --db-password={V}", "tph"},
    {"openssl pkcs12 -export -passout pass:{V} -out a.p12", "tph"},
    {"wget --http-password={V} https://example.org/f", "tph"},
    {"az login -u me@example.org -p {V}", "tph"},
    // HTTP headers
    {"Authorization: Token {V}", "tph"},
    {"Authorization: ApiKey {V}", "tph"},
    {"Authorization: SSWS {V}", "tph"},
    {"authorization: Bearer {V}", "tph"},
    {"Authorization: {V}", "th"},
    {"Proxy-Authorization: Basic {V}", "th"},
    {"X-Api-Key: {V}", "tph"},
    {"X-Auth-Token: {V}", "tph"},
    {"X-Vault-Token: {V}", "tph"},
    {"x-goog-api-key: {V}", "tph"},
    {"Ocp-Apim-Subscription-Key: {V}", "th"},
    {"X-RapidAPI-Key: {V}", "th"},
    {"Api-Key: {V}", "tph"},
    {"X-Access-Token: {V}", "tph"},
    {"Private-Token: {V}", "tph"},
    {"Cookie: sessionid={V}; csrftoken=abc", "th"},
    {"Cookie: theme=dark; session={V}", "th"},
    {"Set-Cookie: connect.sid={V}; Path=/; HttpOnly", "th"},
    {"Cookie: JSESSIONID={V}", "th"},
    {"cookie: PHPSESSID={V}; lang=en", "th"},
    // SQL
    {"CREATE USER app IDENTIFIED BY '{V}';", "tph"},
    {"ALTER USER 'app'@'%' IDENTIFIED BY '{V}';", "tph"},
    {"CREATE ROLE app WITH LOGIN PASSWORD '{V}';", "tph"},
    {"ALTER ROLE app PASSWORD '{V}'", "tph"},
    {"CREATE LOGIN app WITH PASSWORD = '{V}';", "tph"},
    // XML
    {"<password>{V}</password>", "tph"},
    {"<dbPassword>{V}</dbPassword>", "tph"},
    {"<add key=\"SmtpPassword\" value=\"{V}\" />", "tph"},
    {"<add key=\"ApiToken\" value=\"{V}\"/>", "tph"},
    {"<property name=\"password\" value=\"{V}\"/>", "tph"},
    {"<secret>{V}</secret>", "tph"},
    // connection strings
    {"Server=db;Database=app;User Id=sa;Password={V};", "tph"},
    {"Data Source=db;Uid=app;Pwd={V};", "tph"},
    {"Host=db;Username=app;Password={V}", "tph"},
    // URL query parameters
    {"https://api.example.org/v1/data?token={V}&page=2", "th"},
    {"https://maps.example.org/api?key={V}", "th"},
    {"GET /search?q=x&api_key={V} HTTP/1.1", "th"},
    {"https://cdn.example.org/f.zip?expires=1700000000&sig={V}", "th"},
    {"https://store.example.org/o?signature={V}&x=1", "th"},
    {"https://graph.example.org/me?access_token={V}", "th"},
    {"https://hooks.example.org/in?secret={V}", "th"},
    {"https://auth.example.org/token?client_secret={V}&grant_type=x", "th"},
    // YAML block scalars under a secret key
    {"password: |\n  {V}\nuser: app", "tph"},
    {"db:\n  token: >-\n    {V}\n  host: x", "tph"},
    {"client_secret: |-\n    {V}\n", "tph"},
};

std::vector<Secret> SecretCorpus() {
  Gen g(20250101);
  std::vector<Secret> out;
  for (const Context& c : kContexts) {
    for (const char* k = c.kinds; *k != '\0'; ++k) {
      const std::string v = *k == 't' ? g.Token(24) : *k == 'p' ? g.Password(16) : g.Hex(32);
      out.push_back({"context", Replace(c.tmpl, "{V}", v), {v}});
    }
  }

  // --- encodings ---
  auto add = [&](std::string text, std::vector<std::string> parts) {
    out.push_back({"encoding", std::move(text), std::move(parts)});
  };
  for (int i = 0; i < 4; ++i) {
    const std::string gh = "ghp_" + g.Token(36);
    add("blob: " + HexOf(gh), {HexOf(gh)});
    add("0x" + HexOf(gh, true), {HexOf(gh, true)});
    const std::string pw = "password=" + g.Password(18);
    add("echo " + HexOf(pw) + " | xxd -r -p", {HexOf(pw)});
    const std::string once = Base64(gh), twice = Base64(once);
    add("data: " + twice, {twice});
    const std::string cfg = "DB_PASSWORD=" + g.Token(20) + "\n";
    add("env_b64: " + Base64(Base64(cfg)), {Base64(Base64(cfg))});
    const std::string sk = "sk_live_" + g.Token(24);
    add("x-payload: " + Base64(Base64(sk), true, false), {Base64(Base64(sk), true, false)});
  }
  // Private key bodies: JSON-escaped (a service-account file), re-wrapped, without armour.
  for (int i = 0; i < 4; ++i) {
    const std::string body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ" +
                             Base64(g.Bytes(1150)).substr(0, 1550);
    const std::string pem64 = Wrap(body, 64);
    const std::string chunk = body.substr(300, 64);
    add("{\"type\": \"service_account\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\\n" +
            Wrap(body, 64, "\\n") + "\\n-----END PRIVATE KEY-----\\n\"}",
        {chunk});
    add("{\"private_key\":\"-----BEGIN PRIVATE KEY-----\\n" +
            Replace(Wrap(body, 64, "\\n"), "/", "\\/") + "\\n-----END PRIVATE KEY-----\\n\"}",
        {Replace(chunk, "/", "\\/")});
    add("-----BEGIN PRIVATE KEY-----\n" + Wrap(body, 76) + "\n-----END PRIVATE KEY-----", {chunk});
    add("key material:\n" + Wrap(body, 76) + "\n", {body.substr(300, 40), body.substr(1200, 40)});
    add("KEY=" + body, {chunk});
    add("\"key\": \"" + Wrap(body, 64, "\\n") + "\"", {chunk});
    (void)pem64;
  }
  // A PKCS#1 and an EC body without armour.
  for (int i = 0; i < 2; ++i) {
    const std::string rsa = "MIIEowIBAAKCAQEA" + Base64(g.Bytes(900)).substr(0, 1180);
    add(Wrap(rsa, 64), {rsa.substr(100, 40)});
    const std::string ec = "MHcCAQEEI" + Base64(g.Bytes(90)).substr(0, 110);
    add(Wrap(ec, 64), {ec.substr(9, 40)});
  }
  // JWTs folded across lines.
  for (int i = 0; i < 4; ++i) {
    const std::string jwt =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." +
        Base64("{\"sub\":\"" + g.Token(12) + "\",\"iat\":1700000000}", true, false) + "." +
        Base64(g.Bytes(32), true, false);
    const std::string sig = jwt.substr(jwt.rfind('.') + 1);
    add("token:\n" + Wrap(jwt, 40) + "\n", {sig.substr(0, 16), sig.substr(sig.size() - 16)});
    std::string split = jwt;
    split = Replace(split, ".", "\n.");
    add(split, {sig});
    add("  jwt: >\n    " + Wrap(jwt, 50, "\n    ") + "\n", {sig.substr(sig.size() - 16)});
  }

  // --- vendors of policies.d/10-secrets.toml ---
  auto vendor = [&](std::string text, std::string secret) {
    out.push_back({"vendor", std::move(text), {std::move(secret)}});
  };
  const std::string aws_prefixes[] = {"AKIA", "ASIA", "AROA", "AIDA"};
  for (const auto& p : aws_prefixes) {
    const std::string id = p + g.From("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16);
    vendor("aws_access_key_id = " + id, id);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string s = g.From(std::string(Gen::kAlnum) + "/+", 40);
    vendor("aws_secret_access_key = " + s, s);
    vendor("\"SecretAccessKey\": \"" + s + "\"", s);
  }
  for (const char* p : {"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}) {
    const std::string t = p + g.Token(36);
    vendor("GITHUB_TOKEN " + t, t);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string t = "github_pat_11" + g.Token(20) + "_" + g.Token(59);
    vendor("pat: " + t, t);
  }
  for (const char* p : {"glpat-", "gldt-", "glrt-", "glptt-"}) {
    const std::string t = p + g.Token(20);
    vendor("using " + t, t);
  }
  for (const char* p : {"xoxb-", "xoxp-", "xoxa-"}) {
    const std::string t = p + std::to_string(g.Next()) + "-" + g.Token(24);
    vendor("SLACK=" + t, t);
  }
  for (int i = 0; i < 2; ++i) {
    const std::string t = "T" + g.From("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 8) + "/B" +
                          g.From("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 8) + "/" + g.Token(24);
    vendor("https://hooks.slack.com/services/" + t, t.substr(t.rfind('/') + 1));
  }
  for (int i = 0; i < 3; ++i) {
    const std::string t = "AIza" + g.From(std::string(Gen::kAlnum) + "_-", 35);
    vendor("maps_key: " + t, t);
  }
  for (const char* p : {"sk_live_", "rk_live_", "sk_test_"}) {
    const std::string t = p + g.Token(24);
    vendor("Stripe.api_key = " + t, t);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string t = "npm_" + g.Token(36);
    vendor("npm config set //r/:_authToken " + t, t);
  }
  for (int i = 0; i < 2; ++i) {
    const std::string t = "pypi-AgEIcHlwaS5vcmc" + g.Token(60);
    vendor("twine upload -p " + t, t);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string t = "SG." + g.Token(22) + "." + g.Token(43);
    vendor("SENDGRID " + t, t);
  }
  for (int i = 0; i < 2; ++i) {
    const std::string t = "SK" + g.Hex(32);
    vendor("twilio sid " + t, t);
    const std::string a = g.Hex(32);
    vendor("Client(\"AC" + g.Hex(32) + "\", \"" + a + "\")", a);
  }
  for (int i = 0; i < 2; ++i) {
    const std::string k = Base64(g.Bytes(64));
    vendor("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + k +
               ";EndpointSuffix=core.windows.net",
           k);
  }
  for (int i = 0; i < 2; ++i) {
    const std::string a = Base64("me:" + g.Token(30));
    vendor("{\"auths\": {\"ghcr.io\": {\"auth\": \"" + a + "\"}}}", a);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string t = "hf_" + g.Token(34);
    vendor("HF_TOKEN " + t, t);
  }
  for (int i = 0; i < 2; ++i) {
    const std::string t = "AGE-SECRET-KEY-1" + g.From("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58);
    vendor("# " + t, t);
  }
  for (int i = 0; i < 2; ++i) {
    const std::string t = "MT" + g.Token(22) + "." + g.Token(6) + "." + g.Token(30);
    vendor("bot.run('" + t + "')", t);
  }
  for (int i = 0; i < 2; ++i) {
    const std::string u =
        g.Hex(8) + "-" + g.Hex(4) + "-" + g.Hex(4) + "-" + g.Hex(4) + "-" + g.Hex(12);
    vendor("HEROKU_API_KEY=" + u, u);
    const std::string t = "HRKU-" + g.From(std::string(Gen::kAlnum) + "_-", 60);
    vendor("heroku: " + t, t);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string t = "eyJhbGciOiJSUzI1NiJ9." +
                          Base64("{\"sub\":\"" + g.Token(10) + "\"}", true, false) + "." +
                          Base64(g.Bytes(40), true, false);
    vendor("id_token=" + t, t);
  }
  for (const char* p : {"sk-proj-", "sk-ant-api03-", "sk-svcacct-", "sk-"}) {
    const std::string t = p + g.Token(40);
    vendor("OPENAI " + t, t);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string t = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" +
                          Base64(g.Bytes(300)).substr(0, 300) +
                          "\n-----END OPENSSH PRIVATE KEY-----";
    vendor(t, t.substr(40, 60));
  }
  for (int i = 0; i < 2; ++i) {
    const std::string p = g.Token(18);
    vendor("postgres://app:" + p + "@db.internal:5432/app", p);
    vendor("Authorization: Basic " + Base64("admin:" + p), Base64("admin:" + p));
  }
  return out;
}

// The parts of `part` that may not survive: the whole, and every window of 16 characters.
bool Survives(std::string_view out, std::string_view part) {
  if (out.find(part) != std::string_view::npos) return true;
  constexpr std::size_t kWindow = 16;
  for (std::size_t i = 0; part.size() > kWindow && i + kWindow <= part.size(); ++i) {
    if (out.find(part.substr(i, kWindow)) != std::string_view::npos) return true;
  }
  return false;
}

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
