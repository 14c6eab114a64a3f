// Pure text helpers: UTF-8 repair, code-point cuts, and bounded JSON parsing of untrusted input.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace cordon {

using Json = nlohmann::json;

// Replaces each invalid UTF-8 sequence with U+FFFD. Returns true in *changed when it did.
std::string RepairUtf8(std::string_view in, bool* changed = nullptr);

// Cuts `line` to at most `max_chars` code points; appends a visible marker naming what was cut.
// Returns true when it cut.
bool CutLine(std::string& line, std::size_t max_chars);

// The deepest nesting of arrays/objects in a JSON text, counted without parsing it.
std::size_t JsonNestingDepth(std::string_view text);

struct ParseLimits {
  std::size_t max_bytes = 8u << 20;
  std::size_t max_depth = 64;
};

// Parses untrusted JSON: size and depth are checked first, errors are invalid_input/too_large.
Result<Json> ParseJsonBounded(std::string_view text, const ParseLimits& limits = {});

// Serializes JSON, replacing invalid UTF-8 instead of throwing.
std::string DumpJson(const Json& j, int indent = -1);

}  // namespace cordon
