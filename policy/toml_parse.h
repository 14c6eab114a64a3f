// ParseToml: a TOML document, or invalid_input naming the file and line. Shared by the policy
// and MCP config loaders (both use toml++ header-only).
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>

#include "core/error.h"

namespace cordon {

inline Result<toml::table> ParseToml(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Fail(Code::kInvalidInput, source + ":" + std::to_string(e.source().begin.line) + ": " +
                                         std::string(e.description()));
  }
}

}  // namespace cordon
