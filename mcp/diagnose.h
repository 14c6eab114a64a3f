// Saying why a server did not start or answer: the tail of its stderr (bounded, redacted) and
// hints read from it (a path outside the sandbox, the network it lacks), naming the flag or the
// configuration key that would fix it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/redact.h"
#include "policy/policy.h"

namespace cordon::mcp {

// Where the server came from, for the remedy the hints name.
struct FailureContext {
  bool wrapped = false;  // cordon wrap (flags) rather than a configured server (keys)
  std::string server{};  // the configured server's name
  std::string source{};  // the file that defines it
  NetworkMode network = NetworkMode::kNone;
};

// The last lines of `text` in at most `max_bytes` (never a cut secret), redacted.
std::string StderrTail(std::string_view text, const Redactor& redactor,
                       std::size_t max_bytes = 2000);

// Hints from a stderr tail: a file the server could not open (with the --read flag or the
// sandbox.read key that grants its directory), the network it tried to reach. Empty when the
// tail shows neither.
std::vector<std::string> FailureHints(std::string_view tail, const FailureContext& ctx);

// "; the server's stderr ends with: ...; hint: ..." for a message, or "" when there is nothing
// to add. `tail` is redacted already.
std::string FailureDetail(std::string_view tail, const FailureContext& ctx);

}  // namespace cordon::mcp
