// ParseToml: a TOML document, or invalid_input naming the file and line. Shared by the policy
// and MCP config loaders (both use toml++ header-only).
#pragma once

#include <toml++/toml.h>

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/error.h"

namespace cordon {

// toml++ parses a dotted key by recursion, one level per segment: a key of 200,000 segments
// (a file the agent writes: .cordon/policy.toml, a rule file in the workspace) overflows the
// stack. A line whose keys hold more than kMaxKeyDots dots outside strings (a dot between two
// digits is a float's) is refused before the parser sees it.
inline constexpr std::size_t kMaxKeyDots = 128;
inline std::size_t DeepKeyLine(std::string_view text) {
  std::size_t line = 1, dots = 0;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      dots = 0;
      continue;
    }
    if (quote != 0) {
      if (c == '\\' && quote == '"') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '.') {
      const bool digits = i > 0 && i + 1 < text.size() &&
                          std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
                          std::isdigit(static_cast<unsigned char>(text[i + 1]));
      if (!digits && ++dots > kMaxKeyDots) return line;
    }
  }
  return 0;
}

inline Result<toml::table> ParseToml(std::string_view text, const std::string& source) {
  if (const std::size_t line = DeepKeyLine(text); line != 0) {
    return Fail(Code::kInvalidInput, source + ":" + std::to_string(line) +
                                         ": a key with more than " + std::to_string(kMaxKeyDots) +
                                         " dotted parts");
  }
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Fail(Code::kInvalidInput, source + ":" + std::to_string(e.source().begin.line) + ": " +
                                         std::string(e.description()));
  }
}

}  // namespace cordon
