// Pure text helpers: UTF-8 repair, code-point cuts, and bounded JSON parsing of untrusted input.
#pragma once

#include <charconv>
#include <cstddef>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

// nlohmann::json's members are compiled once, in core/text.cc, instead of in every file that
// uses them: about a fifth of a sanitizer build's compile time was spent instantiating them
// again in each file (measured in the commit that added this).
extern template class nlohmann::basic_json<>;

namespace cordon {

using Json = nlohmann::json;

// Replaces each invalid UTF-8 sequence with U+FFFD. Returns true in *changed when it did.
std::string RepairUtf8(std::string_view in, bool* changed = nullptr);

// Cuts `line` to at most `max_chars` code points; appends a visible marker naming what was cut.
// Returns true when it cut.
bool CutLine(std::string& line, std::size_t max_chars);
// A field of /proc/self/mountinfo with the kernel's octal escapes (\040 for a space) undone.
std::string UnescapeMountinfoField(std::string_view field);

// The deepest nesting of arrays/objects in a JSON text, counted without parsing it.
std::size_t JsonNestingDepth(std::string_view text);

struct ParseLimits {
  std::size_t max_bytes = 8u << 20;
  std::size_t max_depth = 64;
  // An integer beyond 64 bits becomes a double and loses digits: refused (invalid_input) unless
  // the caller keeps the original text for anything it passes on.
  bool allow_inexact_integers = false;
};

// Parses untrusted JSON: size and depth are checked first, errors are invalid_input/too_large.
// Never throws: malformed text, invalid UTF-8, numbers out of a double's range (1e400) and, by
// default, integers beyond 64 bits are invalid_input, with the reason in the message.
Result<Json> ParseJsonBounded(std::string_view text, const ParseLimits& limits = {});

// False when the JSON text holds an integer beyond 64 bits (123456789012345678901234567890):
// the parser keeps it as a double, so a re-serialized copy would not carry its digits.
bool JsonIntegersExact(std::string_view text);

// The JSON text with each number that overflows a double (1e400) replaced by null, so that the
// rest of a message (its id) can still be read to answer it.
std::string NullOverflowingNumbers(std::string_view text);

// obj[key] when obj is an object and that member is a string, else `fallback`. Never throws:
// for fields of JSON that came from outside, where .value() would throw on a wrong type.
std::string JsonStringField(const Json& obj, std::string_view key, std::string fallback = "");

// Serializes JSON, replacing invalid UTF-8 instead of throwing.
std::string DumpJson(const Json& j, int indent = -1);
// DumpJson, but in every object (at any depth) the `lead` keys it has come first, in the order
// given, and the rest in the usual sorted order after them: the first bytes a reader sees are
// the ones that matter (run_shell's exit_code, stdout, stderr).
std::string DumpJsonLeading(const Json& j, std::initializer_list<std::string_view> lead);
// DumpJsonLeading with a tool result's outcome and output first: exit_code, stdout, stderr. For
// a result's text and for what carries a result (the MCP response, `cordon call`).
std::string DumpResultJson(const Json& j);

// ASCII lower case (names, header names, hosts): bytes outside A-Z are kept as they are.
std::string AsciiLower(std::string_view s);

// `s`, all of it, as a decimal number of type T (no sign for unsigned T, no spaces, no trailing
// bytes); false leaves `out` unspecified.
template <typename T>
bool ParseWholeNumber(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Text for a terminal, from values an agent, a server or whoever edited a log chose: control
// characters but newline and tab (C0, DEL, and C1 as UTF-8), and the bidirectional marks,
// overrides and isolates (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069, which reorder
// what a reviewer reads), written as \u{XXXX}; everything else as it is. `one_line` (a name, a
// path, an argv element printed one a line): newline and tab escaped too, so no name can start a
// line that looks like cordon's own.
std::string TerminalSafe(std::string_view text, bool one_line = false);

}  // namespace cordon
