// The secret corpus of issue 32 part 6, shared by the redaction corpus test (the rules alone) and
// the leak matrix (every channel, root and an ordinary user): secret shapes in every context
// syntax, encoding and shipped vendor format, each with the parts that must not survive. Every
// value is invented, drawn from a seeded generator: the corpus is the same on every run.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace cordon::corpus {

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

inline std::string Base64(std::string_view in, bool url = false, bool pad = true) {
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

inline std::string HexOf(std::string_view in, bool upper = false) {
  const char* d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (unsigned char c : in) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

inline std::string Bytes(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

inline std::string Wrap(std::string_view s, std::size_t width, std::string_view nl = "\n") {
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += width) {
    if (i > 0) out += nl;
    out += s.substr(i, width);
  }
  return out;
}

inline std::string Replace(std::string s, std::string_view from, std::string_view to) {
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

inline const Context kContexts[] = {
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

inline std::vector<Secret> SecretCorpus() {
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
inline bool Survives(std::string_view out, std::string_view part) {
  if (out.find(part) != std::string_view::npos) return true;
  constexpr std::size_t kWindow = 16;
  for (std::size_t i = 0; part.size() > kWindow && i + kWindow <= part.size(); ++i) {
    if (out.find(part.substr(i, kWindow)) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace cordon::corpus
