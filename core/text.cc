// UTF-8 repair and bounded JSON parsing; pure functions, table-tested in tests/text_test.cc.
#include "core/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// The one instantiation of nlohmann::json's members (core/text.h declares it extern).
template class nlohmann::basic_json<>;

namespace cordon {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid.
std::size_t ValidSeqLen(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xbf) return 0;
  }
  return n;
}

}  // namespace

std::string RepairUtf8(std::string_view in, bool* changed) {
  // Valid runs are copied whole (output is mostly ASCII: 8 bytes are checked at a time), so
  // a few MB of tool output cost a memcpy, not a call per byte.
  std::string out;
  out.reserve(in.size());
  bool any = false;
  std::size_t run = 0;  // start of the current valid run
  std::size_t i = 0;
  while (i < in.size()) {
    if (i + 8 <= in.size()) {
      std::uint64_t word;
      std::memcpy(&word, in.data() + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    std::size_t n = ValidSeqLen(in, i);
    if (n == 0) {
      out.append(in.substr(run, i - run));
      out += "\xef\xbf\xbd";
      any = true;
      run = ++i;
    } else {
      i += n;
    }
  }
  out.append(in.substr(run));
  if (changed != nullptr) *changed = any;
  return out;
}

bool CutLine(std::string& line, std::size_t max_chars) {
  std::size_t chars = 0;
  std::size_t cut_at = std::string::npos;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xc0) != 0x80) {
      if (chars == max_chars) {
        cut_at = i;
        break;
      }
      ++chars;
    }
  }
  if (cut_at == std::string::npos) return false;
  std::size_t dropped = 0;
  for (std::size_t i = cut_at; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xc0) != 0x80) ++dropped;
  }
  line.resize(cut_at);
  line += " [cordon: line cut, " + std::to_string(dropped) + " more characters]";
  return true;
}

namespace {

// Calls on_char(i) for each character of `text` outside JSON strings; on_char returns the index
// to go on from (i + 1, or past a token it consumed).
template <typename OnChar>
void ForEachOutsideStrings(std::string_view text, OnChar on_char) {
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      ++i;
    } else if (c == '"') {
      in_string = true;
      ++i;
    } else {
      i = on_char(i);
    }
  }
}

}  // namespace

std::size_t JsonNestingDepth(std::string_view text) {
  std::size_t depth = 0, max_depth = 0;
  ForEachOutsideStrings(text, [&](std::size_t i) {
    const char c = text[i];
    if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    return i + 1;
  });
  return max_depth;
}

Result<Json> ParseJsonBounded(std::string_view text, const ParseLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Fail(Code::kTooLarge, "JSON input is " + std::to_string(text.size()) +
                                     " bytes; the limit is " + std::to_string(limits.max_bytes));
  }
  if (std::size_t d = JsonNestingDepth(text); d > limits.max_depth) {
    return Fail(Code::kInvalidInput, "JSON input nests " + std::to_string(d) +
                                         " levels deep; the limit is " +
                                         std::to_string(limits.max_depth));
  }
  try {
    Json j = Json::parse(text);
    if (!limits.allow_inexact_integers && !JsonIntegersExact(text)) {
      return Fail(Code::kInvalidInput,
                  "JSON input holds an integer beyond 64 bits, which cordon cannot represent "
                  "exactly");
    }
    return j;
  } catch (const Json::out_of_range& e) {
    return Fail(Code::kInvalidInput, std::string("JSON number out of range: ") + e.what());
  } catch (const Json::exception& e) {
    // parse_error (syntax, invalid UTF-8) and any other refusal of the parser.
    return Fail(Code::kInvalidInput, std::string("malformed JSON: ") + e.what());
  }
}

namespace {

// Calls on_number(begin, end) for each number token outside strings; the callback may look at
// text[begin, end). Relies on JSON's grammar: outside strings, '-' and digits start numbers only.
template <typename OnNumber>
void ForEachNumber(std::string_view text, OnNumber on_number) {
  ForEachOutsideStrings(text, [&](std::size_t i) {
    const char c = text[i];
    if (c != '-' && (c < '0' || c > '9')) return i + 1;
    std::size_t end = i + 1;
    while (end < text.size() && std::strchr("0123456789+-.eE", text[end]) != nullptr &&
           text[end] != '\0') {
      ++end;
    }
    on_number(i, end);
    return end;
  });
}

bool Overflows(std::string_view token) {
  const std::string copy(token);
  return std::isinf(std::strtod(copy.c_str(), nullptr));
}

}  // namespace

bool JsonIntegersExact(std::string_view text) {
  bool exact = true;
  ForEachNumber(text, [&](std::size_t begin, std::size_t end) {
    const std::string_view token = text.substr(begin, end - begin);
    if (!exact || token.find_first_of(".eE") != std::string_view::npos) return;
    // nlohmann keeps negative integers as int64 and the others as uint64; beyond, a double.
    std::from_chars_result r;
    if (token.front() == '-') {
      std::int64_t v;
      r = std::from_chars(token.data(), token.data() + token.size(), v);
    } else {
      std::uint64_t v;
      r = std::from_chars(token.data(), token.data() + token.size(), v);
    }
    if (r.ec == std::errc::result_out_of_range) exact = false;
  });
  return exact;
}

std::string NullOverflowingNumbers(std::string_view text) {
  std::string out;
  std::size_t copied = 0;
  ForEachNumber(text, [&](std::size_t begin, std::size_t end) {
    if (!Overflows(text.substr(begin, end - begin))) return;
    out.append(text.substr(copied, begin - copied));
    out += "null";
    copied = end;
  });
  out.append(text.substr(copied));
  return out;
}

std::string JsonStringField(const Json& obj, std::string_view key, std::string fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(std::string(key));
  if (it == obj.end() || !it->is_string()) return fallback;
  return it->get<std::string>();
}

std::string DumpJson(const Json& j, int indent) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

namespace {
// Appends j's JSON to `out`, with DumpJson's escaping and its handling of invalid UTF-8.
void AppendJson(std::string& out, const Json& j) {
  nlohmann::detail::serializer<Json> s(nlohmann::detail::output_adapter<char, std::string>(out),
                                       ' ', Json::error_handler_t::replace);
  s.dump(j, false, false, 0);
}

// DumpJsonLeading into one string: a nested value is written in place, never dumped on its own
// and copied into its parent (a megabyte value three levels down was four megabytes at once).
void AppendJsonLeading(std::string& out, const Json& j,
                       std::initializer_list<std::string_view> lead) {
  if (j.is_array()) {
    out += '[';
    bool first = true;
    for (const Json& v : j) {
      if (!first) out += ',';
      first = false;
      AppendJsonLeading(out, v, lead);
    }
    out += ']';
    return;
  }
  if (!j.is_object()) {
    AppendJson(out, j);
    return;
  }
  out += '{';
  bool first = true;
  auto add = [&](const std::string& key, const Json& value) {
    if (!first) out += ',';
    first = false;
    AppendJson(out, Json(key));
    out += ':';
    AppendJsonLeading(out, value, lead);
  };
  for (std::string_view k : lead) {
    if (auto it = j.find(std::string(k)); it != j.end()) add(it.key(), it.value());
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(lead.begin(), lead.end(), std::string_view(it.key())) == lead.end())
      add(it.key(), it.value());
  }
  out += '}';
}
}  // namespace

std::string DumpJsonLeading(const Json& j, std::initializer_list<std::string_view> lead) {
  std::string out;
  AppendJsonLeading(out, j, lead);
  return out;
}

std::string DumpResultJson(const Json& j) {
  return DumpJsonLeading(j, {"exit_code", "stdout", "stderr"});
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string UnescapeMountinfoField(std::string_view field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        std::isdigit(static_cast<unsigned char>(field[i + 1]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(field.substr(i + 1, 3)), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

namespace {

// Code points a terminal does not show as themselves: C1 controls (0x9B is CSI), and the
// invisible and reordering format characters (zero-width ones, line and paragraph separators,
// bidirectional marks, overrides and isolates, the byte-order mark).
bool Invisible(unsigned cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2064) ||
         (cp >= 0x2066 && cp <= 0x206F) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB);
}

}  // namespace

std::string TerminalSafe(std::string_view s, bool one_line) {
  std::string out;
  out.reserve(s.size());
  auto escape = [&out](unsigned cp) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u{%04X}", cp);
    out += buf;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && (one_line || (c != '\n' && c != '\t'))) || c == 0x7f) {
        escape(c);
      } else {
        out += static_cast<char>(c);
      }
      continue;
    }
    // A well-formed UTF-8 sequence (no overlong form, no surrogate, at most U+10FFFF) is
    // decoded; any other byte (a lone 0x9B, which some terminals take for CSI, a cut or
    // overlong sequence) is written as \x{HH}.
    std::size_t n = 0;
    unsigned cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      cp = c & 0x07;
    }
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xC0) == 0x80;
      cp = cp << 6 | (b & 0x3F);
    }
    if (ok && ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
               (cp >= 0xD800 && cp <= 0xDFFF)))
      ok = false;
    if (!ok) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\x{%02X}", static_cast<unsigned>(c));
      out += buf;
      continue;
    }
    if (Invisible(cp)) {
      escape(cp);
    } else {
      out.append(s.substr(i, n));
    }
    i += n - 1;
  }
  return out;
}

}  // namespace cordon
