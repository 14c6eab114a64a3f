// The redactor as it was before issue 19 (commit 27ffb59, core/redact.cc): hand-written
// scanners for nine shapes and the exact values. Kept here only as the benchmark's baseline
// (bench/redact_bench.cc measures the rule set beside it in the same run).
#include "bench/redact_legacy.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <optional>

namespace cordon::legacy {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsUpperOrDigit(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool IsTokenChar(char c) {
  return IsAlnum(c) || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=' ||
         c == '-';
}

std::size_t CountWhile(std::string_view s, std::size_t from, bool (*pred)(char)) {
  std::size_t n = 0;
  while (from + n < s.size() && pred(s[from + n])) ++n;
  return n;
}

bool IEqualAt(std::string_view s, std::size_t i, std::string_view word) {
  if (s.size() - i < word.size()) return false;
  for (std::size_t k = 0; k < word.size(); ++k) {
    char c = s[i + k];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != word[k]) return false;
  }
  return true;
}

bool IsB64Url(char c) { return IsAlnum(c) || c == '-' || c == '_'; }
bool IsKeyChar(char c) { return IsAlnum(c) || c == '-' || c == '_'; }
// The end of the userinfo or password part of a URL: what may not appear in it unescaped.
bool IsUrlUserChar(char c) {
  return c > ' ' && c != ':' && c != '@' && c != '/' && c != '?' && c != '#' && c != '"' &&
         c != '\'' && c != '<' && c != '>' && c != '\\' && c != 0x7f;
}
bool IsUrlPasswordChar(char c) { return c == ':' || IsUrlUserChar(c); }

struct Match {
  std::size_t keep;    // bytes at the start of the match that stay visible
  std::size_t length;  // total bytes matched
  const char* rule;
};

// The first bytes a token shape can start with: every other byte is skipped with one lookup.
constexpr auto kStarts = [] {
  std::array<bool, 256> t{};
  for (unsigned char c : std::string_view("-AgxbBes:")) t[c] = true;
  return t;
}();

// A literal at s[i]: the length is a constant, so the comparison is inlined.
template <std::size_t N>
bool At(std::string_view s, std::size_t i, const char (&lit)[N]) {
  return s.size() - i >= N - 1 && std::memcmp(s.data() + i, lit, N - 1) == 0;
}

std::optional<Match> MatchPrivateKey(std::string_view s, std::size_t i) {
  if (!At(s, i, "-----BEGIN ")) return std::nullopt;
  // The header line is short: looking further for it on a long line would be quadratic.
  std::string_view header = s.substr(i, 80);
  header = header.substr(0, header.find('\n'));
  if (header.find("PRIVATE KEY-----") == std::string_view::npos) return std::nullopt;
  std::size_t end = s.find("-----END ", i + 11);
  std::size_t stop = s.size();
  if (end != std::string_view::npos) {
    std::size_t tail = s.find("-----", end + 9);
    stop = tail == std::string_view::npos ? s.size() : tail + 5;
  }
  return Match{0, stop - i, "private_key"};
}

std::optional<Match> MatchAws(std::string_view s, std::size_t i) {
  if ((At(s, i, "AKIA") || At(s, i, "ASIA")) && CountWhile(s, i + 4, IsUpperOrDigit) >= 16) {
    return Match{0, 20, "aws_access_key"};
  }
  return std::nullopt;
}

std::optional<Match> MatchGithub(std::string_view s, std::size_t i) {
  if (s.size() - i > 4 && s[i + 1] == 'h' && std::strchr("pousr", s[i + 2]) != nullptr &&
      s[i + 2] != '\0' && s[i + 3] == '_') {
    std::size_t n = CountWhile(s, i + 4, IsAlnum);
    if (n >= 36) return Match{0, 4 + n, "github_token"};
  }
  if (At(s, i, "github_pat_")) {
    std::size_t n = CountWhile(s, i + 11, [](char c) { return IsAlnum(c) || c == '_'; });
    if (n >= 22) return Match{0, 11 + n, "github_token"};
  }
  return std::nullopt;
}

std::optional<Match> MatchSlack(std::string_view s, std::size_t i) {
  if (s.size() - i > 5 && At(s, i, "xox") && std::strchr("baprs", s[i + 3]) != nullptr &&
      s[i + 3] != '\0' && s[i + 4] == '-') {
    std::size_t n = CountWhile(s, i + 5, [](char c) { return IsAlnum(c) || c == '-'; });
    if (n >= 10) return Match{0, 5 + n, "slack_token"};
  }
  return std::nullopt;
}

std::optional<Match> MatchBearer(std::string_view s, std::size_t i) {
  if (!IEqualAt(s, i, "bearer")) return std::nullopt;
  std::size_t ws = CountWhile(s, i + 6, [](char c) { return c == ' ' || c == '\t'; });
  if (ws == 0) return std::nullopt;
  std::size_t n = CountWhile(s, i + 6 + ws, IsTokenChar);
  if (n >= 8) return Match{6 + ws, 6 + ws + n, "bearer"};
  return std::nullopt;
}

// A JWT: header.payload.signature, base64url, the header a JSON object ("eyJ" is "{\"").
std::optional<Match> MatchJwt(std::string_view s, std::size_t i) {
  if (!At(s, i, "eyJ")) return std::nullopt;
  std::size_t header = CountWhile(s, i, IsB64Url);
  std::size_t at = i + header;
  if (header < 10 || at >= s.size() || s[at] != '.') return std::nullopt;
  std::size_t payload = CountWhile(s, at + 1, IsB64Url);
  at += 1 + payload;
  if (payload < 2 || at >= s.size() || s[at] != '.') return std::nullopt;
  std::size_t signature = CountWhile(s, at + 1, IsB64Url);
  return Match{0, at + 1 + signature - i, "jwt"};
}

// scheme://user:password@host: the password goes, the scheme, user and host stay. The scheme
// itself is not needed (a cut may have taken it).
std::optional<Match> MatchUrlPassword(std::string_view s, std::size_t i) {
  if (!At(s, i, "://")) return std::nullopt;
  std::size_t user = CountWhile(s, i + 3, IsUrlUserChar);
  std::size_t at = i + 3 + user;
  if (at >= s.size() || s[at] != ':') return std::nullopt;
  std::size_t pw = CountWhile(s, at + 1, IsUrlPasswordChar);
  if (pw == 0 || at + 1 + pw >= s.size() || s[at + 1 + pw] != '@') return std::nullopt;
  return Match{3 + user + 1, 3 + user + 1 + pw, "url_password"};
}

// sk-..., sk-ant-..., sk-proj-...: 20 or more key characters, one of them a digit (words joined
// by hyphens, such as sk-learn-pipeline-options, are not keys).
std::optional<Match> MatchSkKey(std::string_view s, std::size_t i) {
  if (!At(s, i, "sk-")) return std::nullopt;
  std::size_t n = CountWhile(s, i + 3, IsKeyChar);
  std::string_view key = s.substr(i + 3, n);
  std::size_t rest = n;
  for (std::string_view kind : {"ant-", "proj-"}) {
    if (key.starts_with(kind)) rest = n - kind.size();
  }
  if (rest >= 20 &&
      std::any_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Match{0, 3 + n, "api_key"};
  }
  return std::nullopt;
}

// The token shape that can start with s[i], if it matches there. Each shape's scan is bounded by
// what it consumes or by a run inside which no later start is at a boundary again, so the whole
// scan stays linear.
std::optional<Match> MatchTokenAt(std::string_view s, std::size_t i) {
  const bool word_start = i == 0 || !IsAlnum(s[i - 1]);
  const bool b64_start = i == 0 || !IsB64Url(s[i - 1]);
  switch (s[i]) {
    case '-':
      return MatchPrivateKey(s, i);
    case 'A':
      return word_start ? MatchAws(s, i) : std::nullopt;
    case 'g':
      return word_start ? MatchGithub(s, i) : std::nullopt;
    case 'x':
      return word_start ? MatchSlack(s, i) : std::nullopt;
    case 'b':
    case 'B':
      return word_start ? MatchBearer(s, i) : std::nullopt;
    case 'e':
      return b64_start ? MatchJwt(s, i) : std::nullopt;
    case ':':
      return MatchUrlPassword(s, i);
    case 's':
      return b64_start ? MatchSkKey(s, i) : std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace

void Redactor::AddValue(std::string rule, std::string value) {
  if (value.size() < 6) return;
  for (const auto& existing : values_) {
    if (existing.second == value) return;
  }
  values_.emplace_back(std::move(rule), std::move(value));
  std::stable_sort(values_.begin(), values_.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
}

std::vector<Redactor::Span> Redactor::Find(std::string_view s) const {
  // Exact values: every occurrence, then the earliest (and at one place the longest) wins.
  std::vector<Span> exact;
  for (const auto& [rule, value] : values_) {
    for (std::size_t pos = s.find(value); pos != std::string_view::npos;
         pos = s.find(value, pos + value.size())) {
      exact.push_back(Span{pos, pos + value.size(), 0, rule});
    }
  }
  std::sort(exact.begin(), exact.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<Span> out;
  std::size_t gap = 0;  // where the text not yet covered starts
  auto scan_gap = [&](std::size_t to) {
    std::string_view g = s.substr(gap, to - gap);
    for (std::size_t i = 0; i < g.size();) {
      if (!kStarts[static_cast<unsigned char>(g[i])]) {
        ++i;
        continue;
      }
      auto m = MatchTokenAt(g, i);
      if (!m) {
        ++i;
        continue;
      }
      out.push_back(Span{gap + i, gap + i + m->length, m->keep, m->rule});
      i += m->length;
    }
  };
  for (const Span& e : exact) {
    if (e.begin < gap) continue;  // overlaps one already taken
    scan_gap(e.begin);
    out.push_back(e);
    gap = e.end;
  }
  scan_gap(s.size());
  return out;
}

std::size_t Redactor::Redact(std::string& text) const {
  const std::vector<Span> spans = Find(text);
  if (spans.empty()) return 0;
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;
  for (const Span& sp : spans) {
    out.append(text, copied, sp.begin + sp.keep - copied);
    out += "[REDACTED:";
    out += sp.rule;
    out += ']';
    copied = sp.end;
  }
  out.append(text, copied, std::string::npos);
  text = std::move(out);
  return spans.size();
}

}  // namespace cordon::legacy
