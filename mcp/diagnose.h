// Saying why a server did not start or answer: the tail of its stderr (bounded, redacted) and
// hints read from it (a path outside the sandbox, the network it lacks), naming the flag or the
// configuration key that would fix it.
#pragma once

#include <cstdint>
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
  std::string preset{};  // the egress preset its launcher installs from (LauncherPreset), or ""
};

// The last lines of `text` in at most `max_bytes` (never a cut secret), redacted.
std::string StderrTail(std::string_view text, const Redactor& redactor,
                       std::size_t max_bytes = 2000);

// Hints from a stderr tail: a module the interpreter could not import (Python's
// ModuleNotFoundError and ImportError, Node's "Cannot find module"/"Cannot find package"), a file
// or directory the server could not open (with the --read flag or the sandbox.read key that
// grants its directory), the network it tried to reach (with the preset of its launcher). Causes
// match on whole words ("enotfound" is not inside "modulenotfounderror"), and a line that is a
// module error is never also read as a network one. Empty when the tail shows none of these.
std::vector<std::string> FailureHints(std::string_view tail, const FailureContext& ctx);

// While a server has not answered initialize: what its proxy listener has seen so far, when it
// has used the network (`accepted` connections, `finished` of them closed), as "it is using the
// network: ..."; "" when it has opened no connection.
std::string NetworkActivityNote(std::uint64_t accepted, std::uint64_t finished);

// "; the server's stderr ends with: ...; hint: ..." for a message, or "" when there is nothing
// to add. `tail` is redacted already.
std::string FailureDetail(std::string_view tail, const FailureContext& ctx);

}  // namespace cordon::mcp
