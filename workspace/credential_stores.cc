// The user's credential stores, read by value (workspace/credential_stores.h).
#include "workspace/credential_stores.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <set>

#include "core/unique_fd.h"
#include "core/walk.h"

namespace cordon {

namespace {

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string_view Unquote(std::string_view s) {
  s = TrimSpace(s);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    s = s.substr(1, s.size() - 2);
  }
  return s;
}

bool Contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

int B64Digit(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// Decodes base64 (standard or URL-safe, padding and line breaks allowed); "" when `s` is not
// base64 throughout.
std::string DecodeBase64(std::string_view s) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : s) {
    if (c == '=' || c == '\n' || c == '\r') continue;
    const int v = B64Digit(c);
    if (v < 0) return {};
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

bool Printable(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\r' || c == '\t';
  });
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

class Collector {
 public:
  // A value under a secret-naming key: taken when usable, else counted as skipped. A value that
  // is base64 of a private key or of "user:pass" also gives what it encodes.
  void Secret(std::string_view raw) {
    const std::string_view v = Unquote(raw);
    if (v.empty()) return;
    if (Contains(v, "PRIVATE KEY")) {
      Pem(v);
      return;
    }
    if (UsableCredential(v)) {
      out_.values.emplace_back(v);
    } else {
      ++out_.skipped;
      return;
    }
    if (v.size() >= 12) {
      const std::string decoded = DecodeBase64(v);
      if (Contains(decoded, "PRIVATE KEY")) {
        Pem(decoded);
      } else if (Printable(decoded) && decoded.size() < 1024) {
        const std::size_t colon = decoded.find(':');
        if (colon != std::string::npos && colon + 1 < decoded.size()) {
          const std::string_view pass = std::string_view(decoded).substr(colon + 1);
          if (UsableCredential(pass)) out_.values.emplace_back(pass);
        }
      }
    }
  }

  // Every body line of each private key block, and the body joined (a key re-wrapped at another
  // width or without its armour still holds these runs).
  void Pem(std::string_view text) {
    std::size_t pos = 0;
    while ((pos = text.find("-----BEGIN", pos)) != std::string_view::npos) {
      const std::size_t header_end = text.find('\n', pos);
      if (header_end == std::string_view::npos) return;
      const std::size_t end = text.find("-----END", header_end);
      const std::string_view body = text.substr(
          header_end + 1, (end == std::string_view::npos ? text.size() : end) - header_end - 1);
      std::string joined;
      std::size_t line_start = 0;
      while (line_start < body.size()) {
        std::size_t nl = body.find('\n', line_start);
        if (nl == std::string_view::npos) nl = body.size();
        const std::string_view line = TrimSpace(body.substr(line_start, nl - line_start));
        line_start = nl + 1;
        if (line.empty() || Contains(line, ":")) continue;  // Proc-Type:, DEK-Info: headers
        joined += line;
        if (line.size() >= 12) out_.values.emplace_back(line);
      }
      if (joined.size() >= 12) out_.values.push_back(joined);
      if (end == std::string_view::npos) return;
      pos = end + 8;
    }
  }

  void JsonValue(const Json& j, std::string_view key) {
    if (j.is_object()) {
      for (const auto& [k, v] : j.items()) JsonValue(v, k);
    } else if (j.is_array()) {
      for (const auto& v : j) JsonValue(v, key);
    } else if (j.is_string()) {
      const std::string& s = j.get_ref<const std::string&>();
      if (Contains(s, "PRIVATE KEY")) {
        Pem(s);
      } else if (SecretNamingKey(key)) {
        Secret(s);
      } else {
        UrlPassword(s);
      }
    }
  }

  // scheme://user:password@host (git-credentials, a connection string, a proxy setting).
  void UrlPassword(std::string_view s) {
    for (std::size_t at = s.find("://"); at != std::string_view::npos; at = s.find("://", at + 3)) {
      const std::size_t start = at + 3;
      const std::size_t end = s.find_first_of("/ \t\"'", start);
      const std::string_view authority =
          s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      const std::size_t amp = authority.rfind('@');
      if (amp == std::string_view::npos) continue;
      const std::string_view userinfo = authority.substr(0, amp);
      const std::size_t colon = userinfo.find(':');
      if (colon == std::string_view::npos) {
        // A token as the user name (https://TOKEN@github.com).
        if (UsableCredential(userinfo) && userinfo.size() >= 20) out_.values.emplace_back(userinfo);
        continue;
      }
      const std::string_view pass = userinfo.substr(colon + 1);
      if (!UsableCredential(pass)) {
        if (!pass.empty()) ++out_.skipped;
        continue;
      }
      out_.values.emplace_back(pass);
      const std::string decoded = PercentDecode(pass);
      if (decoded != pass) out_.values.push_back(decoded);
    }
  }

  void Netrc(std::string_view text) {
    std::vector<std::string_view> words;
    std::size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      const std::size_t b = i;
      while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      if (i > b) words.push_back(text.substr(b, i - b));
    }
    for (std::size_t w = 0; w + 1 < words.size(); ++w) {
      if (words[w] == "password") Secret(words[w + 1]);
    }
  }

  void Pgpass(std::string_view text) {
    ForLines(text, [&](std::string_view line) {
      if (line.empty() || line[0] == '#') return;
      std::vector<std::string> fields(1);
      for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          fields.back().push_back(line[++i]);
        } else if (line[i] == ':') {
          fields.emplace_back();
        } else {
          fields.back().push_back(line[i]);
        }
      }
      if (fields.size() >= 5) Secret(fields[4]);
    });
  }

  // user:hash lines (Apache's htpasswd: bcrypt, $apr1$, {SHA}): the hash, which a guess
  // confirms offline.
  void Htpasswd(std::string_view text) {
    ForLines(text, [&](std::string_view line) {
      line = TrimSpace(line);
      if (line.empty() || line[0] == '#') return;
      const std::size_t colon = line.find(':');
      if (colon != std::string_view::npos) Secret(line.substr(colon + 1));
    });
  }

  // redis.conf: `requirepass V`, `masterauth V`, and an ACL line's `>password` words.
  void RedisConf(std::string_view text) {
    ForLines(text, [&](std::string_view line) {
      line = TrimSpace(line);
      if (line.empty() || line[0] == '#') return;
      std::vector<std::string_view> words;
      for (std::size_t i = 0; i < line.size();) {
        while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
        const std::size_t b = i;
        while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
        if (i > b) words.push_back(line.substr(b, i - b));
      }
      if (words.size() < 2) return;
      const std::string directive = AsciiLower(words[0]);
      if (directive == "requirepass" || directive == "masterauth") {
        Secret(words[1]);
      } else if (directive == "user") {
        for (std::size_t w = 2; w < words.size(); ++w) {
          if (words[w].size() > 1 && words[w][0] == '>') Secret(words[w].substr(1));
        }
      }
    });
  }

  void Xml(std::string_view text) {
    // <password>v</password>, <ns:clientSecret>v</ns:clientSecret>
    for (std::size_t lt = text.find('<'); lt != std::string_view::npos;
         lt = text.find('<', lt + 1)) {
      const std::size_t gt = text.find('>', lt);
      if (gt == std::string_view::npos) break;
      std::string_view tag = text.substr(lt + 1, gt - lt - 1);
      if (tag.empty() || tag[0] == '/' || tag[0] == '?' || tag[0] == '!') continue;
      const std::size_t sp = tag.find_first_of(" \t\r\n/");
      const std::string_view name = tag.substr(0, sp);
      if (sp != std::string_view::npos) Attributes(tag.substr(sp));
      if (tag.back() == '/' || !SecretNamingKey(name)) continue;
      const std::string close = "</" + std::string(name) + ">";
      const std::size_t end = text.find(close, gt + 1);
      if (end == std::string_view::npos) continue;
      const std::string_view value = text.substr(gt + 1, end - gt - 1);
      if (value.find('<') == std::string_view::npos) Secret(XmlUnescape(value));
    }
  }

  void Lines(std::string_view text) {
    std::string_view block_key;  // a YAML block scalar under a secret key: its lines
    std::size_t block_indent = 0;
    ForLines(text, [&](std::string_view raw) {
      const std::size_t indent = raw.find_first_not_of(" \t");
      std::string_view line = TrimSpace(raw);
      if (!block_key.empty()) {
        if (!line.empty() && indent != std::string_view::npos && indent > block_indent) {
          Secret(line);
          return;
        }
        block_key = {};
      }
      if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') return;
      if (line.rfind("- ", 0) == 0) line = TrimSpace(line.substr(2));
      if (line.rfind("export ", 0) == 0) line = TrimSpace(line.substr(7));
      UrlPassword(line);
      // `key = value` (INI, TOML, properties, .npmrc's "//host/:_authToken=v"), else
      // `key: value` (YAML, a gem's ":rubygems_api_key: v").
      std::string_view body = line;
      if (!body.empty() && body[0] == ':') body.remove_prefix(1);
      std::size_t sep = body.find('=');
      if (sep == std::string_view::npos ||
          (body.find(": ") != std::string_view::npos && body.find(": ") < sep && body[0] != '/')) {
        sep = body.find(':');
      }
      if (sep == std::string_view::npos || sep == 0) return;
      const std::string_view key = TrimSpace(body.substr(0, sep));
      const std::string_view value = TrimSpace(body.substr(sep + 1));
      if (!SecretNamingKey(key)) return;
      if (value == "|" || value == ">" || value == "|-" || value == ">-") {
        block_key = key;
        block_indent = indent == std::string_view::npos ? 0 : indent;
        return;
      }
      Secret(value);
    });
  }

  StoreValues Take() { return std::move(out_); }

 private:
  template <typename F>
  static void ForLines(std::string_view text, F&& f) {
    std::size_t start = 0;
    while (start <= text.size()) {
      std::size_t nl = text.find('\n', start);
      if (nl == std::string_view::npos) nl = text.size();
      std::string_view line = text.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      f(line);
      if (nl == text.size()) break;
      start = nl + 1;
    }
  }

  static std::string XmlUnescape(std::string_view s) {
    std::string out(TrimSpace(s));
    static constexpr std::array<std::pair<std::string_view, char>, 5> kEntities = {
        {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}}};
    for (const auto& [entity, c] : kEntities) {
      for (std::size_t p = out.find(entity); p != std::string::npos; p = out.find(entity, p + 1))
        out.replace(p, entity.size(), 1, c);
    }
    return out;
  }

  // key="ClearTextPassword" value="v" (NuGet, .NET configs), password="v".
  void Attributes(std::string_view attrs) {
    std::string_view named_key;
    std::size_t i = 0;
    while (i < attrs.size()) {
      const std::size_t eq = attrs.find('=', i);
      if (eq == std::string_view::npos) break;
      const std::string_view name = TrimSpace(attrs.substr(i, eq - i));
      std::size_t q = eq + 1;
      while (q < attrs.size() && std::isspace(static_cast<unsigned char>(attrs[q]))) ++q;
      if (q >= attrs.size() || (attrs[q] != '"' && attrs[q] != '\'')) break;
      const std::size_t close = attrs.find(attrs[q], q + 1);
      if (close == std::string_view::npos) break;
      const std::string_view value = attrs.substr(q + 1, close - q - 1);
      const std::string lname = AsciiLower(name);
      if (lname == "key" || lname == "name") {
        named_key = value;
      } else if (lname == "value" && !named_key.empty() && SecretNamingKey(named_key)) {
        Secret(XmlUnescape(value));
      } else if (SecretNamingKey(name)) {
        Secret(XmlUnescape(value));
      }
      i = close + 1;
    }
  }

  StoreValues out_;
};

bool LooksBinary(std::string_view content) {
  return content.substr(0, 4096).find('\0') != std::string_view::npos;
}

}  // namespace

bool SecretNamingKey(std::string_view key) {
  const std::string k = AsciiLower(key);
  // What a key names beside a secret: a file or command that holds or makes one, where to
  // send it, when it expires, what kind it is. Their values are not secrets.
  static constexpr std::string_view kNotSecret[] = {
      "file",    "path",   "cmd",    "command", "helper", "process",  "type",       "url",
      "uri",     "expir",  "public", "author",  "method", "provider", "_id_format", "store",
      "enabled", "length", "policy", "mode",    "scope",  "endpoint", "region",     "format"};
  for (std::string_view n : kNotSecret) {
    if (Contains(k, n)) return false;
  }
  static constexpr std::string_view kSecret[] = {
      "password", "passwd",    "pwd",   "passphrase", "secret",    "token",
      "auth",     "key",       "cred",  "cookie",     "private",   "refresh",
      "apikey",   "signature", "_pass", "pass_",      "sessionid", "session_id"};
  for (std::string_view n : kSecret) {
    if (Contains(k, n)) return true;
  }
  return k == "pass" || k == "pw";
}

bool UsableCredential(std::string_view v) {
  if (v.size() < 8 || v.size() > 16384) return false;
  std::set<char> distinct(v.begin(), v.end());
  if (distinct.size() < 5) return false;
  if (v.find_first_of(" \t") != std::string_view::npos && v.size() < 24) return false;
  // References and placeholders, not values: ${X}, $(cmd), %(x)s, {{ x }}, <your-token>.
  if (v.rfind("${", 0) == 0 || v.rfind("$(", 0) == 0 || v.rfind("%(", 0) == 0 ||
      v.rfind("{{", 0) == 0 || (v.front() == '<' && v.back() == '>') || v.front() == '/' ||
      v.rfind("~/", 0) == 0) {
    return false;
  }
  const std::string l = AsciiLower(v);
  static constexpr std::string_view kCommon[] = {
      "password",     "password1",     "passw0rd",      "changeme",   "changeit",    "postgres",
      "example",      "12345678",      "123456789",     "1234567890", "qwertyuiop",  "letmein",
      "welcome1",     "admin123",      "administrator", "default",    "placeholder", "redacted",
      "yourpassword", "your-password", "your_password", "your-token", "your_token",  "mysecret",
      "secret123",    "test1234",      "testtest",      "notasecret", "none",        "null",
      "true",         "false"};
  for (std::string_view c : kCommon) {
    if (l == c) return false;
  }
  return !Contains(l, "redacted") && !Contains(l, "changeme") && !Contains(l, "placeholder");
}

StoreValues CredentialValuesOf(std::string_view file_name, std::string_view content) {
  Collector c;
  if (LooksBinary(content)) {
    // A token cache in SQLite or another binary format: its printable runs, each read as text
    // (a JSON object inside one is parsed whole).
    StoreValues all;
    std::size_t i = 0;
    while (i < content.size()) {
      while (i < content.size() && !(content[i] >= 0x20 && content[i] < 0x7f)) ++i;
      const std::size_t b = i;
      while (i < content.size() && content[i] >= 0x20 && content[i] < 0x7f) ++i;
      if (i - b < 16) continue;
      std::string_view run = content.substr(b, i - b);
      const std::size_t open = run.find('{'), close = run.rfind('}');
      if (open != std::string_view::npos && close != std::string_view::npos && close > open)
        run = run.substr(open, close - open + 1);
      StoreValues inner = CredentialValuesOf(file_name, run);  // printable: not binary again
      all.values.insert(all.values.end(), inner.values.begin(), inner.values.end());
      all.skipped += inner.skipped;
    }
    return all;
  }
  const std::string name = AsciiLower(file_name);
  const std::string_view t = TrimSpace(content);
  if (Contains(content, "PRIVATE KEY") && !(t.empty() || t[0] == '{')) {
    c.Pem(content);
    return c.Take();
  }
  if (!t.empty() && (t[0] == '{' || t[0] == '[')) {
    ParseLimits limits;
    limits.max_bytes = 16 << 20;
    limits.allow_inexact_integers = true;  // only strings are read
    if (auto j = ParseJsonBounded(t, limits)) {
      c.JsonValue(*j, "");
      return c.Take();
    }
  }
  if (!t.empty() && t[0] == '<') {
    c.Xml(t);
    return c.Take();
  }
  if (Contains(name, "netrc")) {
    c.Netrc(content);
    return c.Take();
  }
  if (Contains(name, "pgpass")) {
    c.Pgpass(content);
    return c.Take();
  }
  if (Contains(name, "htpasswd")) {
    c.Htpasswd(content);
    return c.Take();
  }
  if (Contains(name, "redis") && name.ends_with(".conf")) {
    c.RedisConf(content);
    return c.Take();
  }
  // A bare token (~/.vault-token): one line, one word.
  if (!t.empty() && t.find_first_of(" \t\r\n=:") == std::string_view::npos) {
    c.Secret(t);
    return c.Take();
  }
  c.Lines(content);
  return c.Take();
}

Json CredentialScan::ToJson() const {
  Json list = Json::array();
  for (const auto& s : stores) {
    Json j = {{"path", s.path}, {"state", s.state}};
    if (s.files > 0) j["files"] = s.files;
    if (s.values > 0) j["values"] = s.values;
    if (s.skipped > 0) j["skipped"] = s.skipped;
    list.push_back(std::move(j));
  }
  return {{"stores", std::move(list)},
          {"values", values.size()},
          {"ms", static_cast<double>(static_cast<long>(ms * 10)) / 10}};
}

namespace {

// Reads one regular file beneath `dir_fd` (never following a symlink when `nofollow`), up to
// `max` bytes; nullopt when it is not a readable regular file.
std::optional<std::string> ReadStoreFile(int dir_fd, const char* name, bool nofollow,
                                         std::size_t max, int* err) {
  UniqueFd fd(
      ::openat(dir_fd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0)));
  if (!fd.valid()) {
    *err = errno;
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *err = EINVAL;
    return std::nullopt;
  }
  std::string out(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), max), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string Basename(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace

CredentialScan ReadCredentialStores(const std::vector<std::string>& stores, const std::string& home,
                                    const CredentialStoreLimits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  CredentialScan scan;
  std::set<std::string> seen;
  std::size_t total = 0;
  auto add = [&](StoreReport& r, const StoreValues& got) {
    r.skipped += got.skipped;
    for (const auto& v : got.values) {
      ++r.values;
      if (seen.insert(v).second) scan.values.push_back(v);
    }
  };
  for (const std::string& configured : stores) {
    StoreReport r;
    r.path = configured;
    std::string path = configured;
    if (path == "~" || path.rfind("~/", 0) == 0) {
      if (home.empty()) {
        r.state = "missing";
        scan.stores.push_back(std::move(r));
        continue;
      }
      path = home + path.substr(1);
    }
    // The store itself may be a symlink (a dotfiles manager's); what lies below a directory
    // store is walked by descriptors, never following one.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      r.state = errno == EACCES ? "unreadable" : "missing";
      scan.stores.push_back(std::move(r));
      continue;
    }
    if (total >= limits.max_total_bytes) {
      r.state = "cut";
      scan.stores.push_back(std::move(r));
      continue;
    }
    r.state = "read";
    if (S_ISREG(st.st_mode)) {
      int err = 0;
      auto content =
          ReadStoreFile(AT_FDCWD, path.c_str(), false,
                        std::min(limits.max_file_bytes, limits.max_total_bytes - total), &err);
      if (!content) {
        r.state = "unreadable";
      } else {
        total += content->size();
        ++r.files;
        add(r, CredentialValuesOf(Basename(path), *content));
      }
    } else if (S_ISDIR(st.st_mode)) {
      UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!dir.valid()) {
        r.state = "unreadable";
        scan.stores.push_back(std::move(r));
        continue;
      }
      WalkOptions opts;
      opts.max_depth = limits.max_depth;
      opts.too_deep = TooDeep::kSkip;
      opts.max_entries = limits.max_files * 4;
      opts.too_many = TooDeep::kSkip;
      opts.sorted = true;
      opts.what = configured;
      WalkHooks hooks;
      bool cut = false;
      hooks.visit = [&](const WalkEntry& e) -> Result<Visit> {
        const std::string_view n = e.name;
        if (e.type == DT_DIR) return n == "logs" ? Visit::kNext : Visit::kDescend;
        if (e.type != DT_REG && e.type != DT_UNKNOWN) return Visit::kNext;
        // Public halves and host lists hold nothing secret.
        if (n.ends_with(".pub") || n.rfind("known_hosts", 0) == 0 || n == "authorized_keys" ||
            n.ends_with(".log")) {
          return Visit::kNext;
        }
        if (r.files >= limits.max_files || total >= limits.max_total_bytes) {
          cut = true;
          return Visit::kStop;
        }
        int err = 0;
        auto content =
            ReadStoreFile(e.dir_fd, e.name, true,
                          std::min(limits.max_file_bytes, limits.max_total_bytes - total), &err);
        if (!content) return Visit::kNext;
        total += content->size();
        ++r.files;
        add(r, CredentialValuesOf(e.name, *content));
        return Visit::kNext;
      };
      hooks.unopenable = [](const WalkEntry&, int) -> Result<UniqueFd> { return UniqueFd(); };
      auto walked = WalkTree(dir.get(), opts, hooks);
      if (cut || !walked || walked->truncated) r.state = "cut";
    } else {
      r.state = "unreadable";
    }
    scan.stores.push_back(std::move(r));
  }
  scan.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return scan;
}

}  // namespace cordon
