// Secret redaction: exact values first, then token shapes scanned by hand (linear, no regex
// backtracking on hostile output).
#include "core/redact.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <string_view>

namespace cordon {
namespace {

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
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

bool StartsWithAt(std::string_view s, std::size_t i, std::string_view prefix) {
  return s.size() - i >= prefix.size() && s.compare(i, prefix.size(), prefix) == 0;
}

bool IEqualAt(std::string_view s, std::size_t i, std::string_view word) {
  if (s.size() - i < word.size()) return false;
  for (std::size_t k = 0; k < word.size(); ++k) {
    if (std::tolower(static_cast<unsigned char>(s[i + k])) != word[k]) return false;
  }
  return true;
}

struct Match {
  std::size_t keep;    // bytes at the start of the match that stay visible
  std::size_t length;  // total bytes matched
  const char* rule;
};

// Tries every token shape at position i; returns the first that matches.
std::optional<Match> MatchTokenAt(std::string_view s, std::size_t i) {
  const bool boundary = i == 0 || !IsAlnum(s[i - 1]);
  if (StartsWithAt(s, i, "-----BEGIN ")) {
    std::size_t eol = s.find('\n', i);
    std::string_view header = s.substr(i, (eol == std::string_view::npos ? s.size() : eol) - i);
    if (header.find("PRIVATE KEY-----") != std::string_view::npos) {
      std::size_t end = s.find("-----END ", i + 11);
      std::size_t stop = s.size();
      if (end != std::string_view::npos) {
        std::size_t tail = s.find("-----", end + 9);
        stop = tail == std::string_view::npos ? s.size() : tail + 5;
      }
      return Match{0, stop - i, "private_key"};
    }
  }
  if (boundary && (StartsWithAt(s, i, "AKIA") || StartsWithAt(s, i, "ASIA"))) {
    if (CountWhile(s, i + 4, IsUpperOrDigit) >= 16) return Match{0, 20, "aws_access_key"};
  }
  if (boundary && s.size() - i > 4 && s[i] == 'g' && s[i + 1] == 'h' &&
      std::strchr("pousr", s[i + 2]) != nullptr && s[i + 3] == '_') {
    std::size_t n = CountWhile(s, i + 4, IsAlnum);
    if (n >= 36) return Match{0, 4 + n, "github_token"};
  }
  if (boundary && StartsWithAt(s, i, "github_pat_")) {
    std::size_t n = CountWhile(s, i + 11, [](char c) { return IsAlnum(c) || c == '_'; });
    if (n >= 22) return Match{0, 11 + n, "github_token"};
  }
  if (boundary && s.size() - i > 5 && StartsWithAt(s, i, "xox") &&
      std::strchr("baprs", s[i + 3]) != nullptr && s[i + 4] == '-') {
    std::size_t n = CountWhile(s, i + 5, [](char c) { return IsAlnum(c) || c == '-'; });
    if (n >= 10) return Match{0, 5 + n, "slack_token"};
  }
  if (boundary && IEqualAt(s, i, "bearer")) {
    std::size_t ws = CountWhile(s, i + 6, [](char c) { return c == ' ' || c == '\t'; });
    if (ws > 0) {
      std::size_t n = CountWhile(s, i + 6 + ws, IsTokenChar);
      if (n >= 8) return Match{6 + ws, 6 + ws + n, "bearer"};
    }
  }
  return std::nullopt;
}

}  // namespace

bool Redactor::IsSecretName(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* word : {"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD"}) {
    if (upper.find(word) != std::string::npos) return true;
  }
  return false;
}

void Redactor::AddValue(std::string rule, std::string value) {
  if (value.size() < kMinExactValue) return;
  for (const auto& existing : values_) {
    if (existing.second == value) return;
  }
  values_.emplace_back(std::move(rule), std::move(value));
  std::stable_sort(values_.begin(), values_.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
}

void Redactor::AddSecretEnvironment(char** envp) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    if (IsSecretName(entry.substr(0, eq))) AddValue("env", std::string(entry.substr(eq + 1)));
  }
}

std::size_t Redactor::Redact(std::string& text) const {
  std::size_t count = 0;
  for (const auto& [rule, value] : values_) {
    const std::string marker = "[REDACTED:" + rule + "]";
    for (std::size_t pos = text.find(value); pos != std::string::npos;
         pos = text.find(value, pos + marker.size())) {
      text.replace(pos, value.size(), marker);
      ++count;
    }
  }
  std::string out;
  std::string_view s(text);
  std::size_t copied = 0;
  for (std::size_t i = 0; i < s.size();) {
    auto m = MatchTokenAt(s, i);
    if (!m) {
      ++i;
      continue;
    }
    out.append(s.substr(copied, i + m->keep - copied));
    out += "[REDACTED:";
    out += m->rule;
    out += "]";
    i += m->length;
    copied = i;
    ++count;
  }
  if (copied > 0) {
    out.append(s.substr(copied));
    text = std::move(out);
  }
  return count;
}

std::size_t Redactor::RedactJson(Json& j) const {
  std::size_t count = 0;
  if (j.is_string()) {
    count += Redact(j.get_ref<std::string&>());
  } else if (j.is_array()) {
    // A private key block split over consecutive strings (lines of a file) is redacted whole:
    // after an unterminated BEGIN, every string up to the END line is redacted.
    bool in_key_block = false;
    for (auto& item : j) {
      if (in_key_block && item.is_string()) {
        std::string& s = item.get_ref<std::string&>();
        bool ends = s.find("-----END ") != std::string::npos;
        s = "[REDACTED:private_key]";
        ++count;
        in_key_block = !ends;
        continue;
      }
      if (item.is_string()) {
        const std::string& before = item.get_ref<const std::string&>();
        std::size_t begin = before.find("-----BEGIN ");
        in_key_block = begin != std::string::npos &&
                       before.find("PRIVATE KEY-----", begin) != std::string::npos &&
                       before.find("-----END ", begin) == std::string::npos;
      }
      count += RedactJson(item);
    }
  } else if (j.is_object()) {
    for (auto& item : j) count += RedactJson(item);
  }
  return count;
}

}  // namespace cordon
