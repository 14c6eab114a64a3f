// [audit] arguments = "hashed" (issue 32, part 4): for teams that cannot accept that a redaction
// rule will miss a shape, the log keeps no argument's text. `tool_started.args` keeps its keys
// and structure with every string replaced by {sha256, bytes, shape}; `process.argv` becomes a
// list of those. Any other text of the same call (a tool_finished message, a policy_denied
// reason, a process's cwd) that holds one of the call's arguments (4 bytes or more) has it
// replaced by "[ARGUMENT:<first 12 hex of its sha256>]"; every `message` (which may quote an
// argument changed: a path normalized, a key named) becomes "[MESSAGE:<12 hex>]"; a process's
// cwd below the workspace is the workspace root and "[ARGUMENT:…]"; the keys of arguments that
// failed validation (any key, chosen by the agent) are "#<12 hex>". The paths of what a call
// changed (file_write.path, changes entries) stay: they are the record of the side effect, and
// audit diff and the change records read them.
//
// The digest is plain SHA-256, so an argument short or common enough to guess can be confirmed
// by whoever reads the log (SECURITY.md, "Redaction").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/text.h"

namespace cordon {

enum class ArgumentsMode : std::uint8_t { kRedacted, kHashed };

// The shape class of one argument, from its bytes: "empty", "binary" (control bytes or not
// UTF-8), "flag" (starts with '-'), "url" (has "://"), "path" (has '/'), "number" (digits),
// "hex" (8 or more hex digits), "token" (16 or more of [A-Za-z0-9+/=_.-] with letters and
// digits), "word" ([A-Za-z0-9_.:@-]), else "text".
std::string_view ArgumentShape(std::string_view arg);
// {sha256, bytes, shape} of one argument.
Json HashedArgument(std::string_view arg);
// `args` with every string (at any depth) replaced by HashedArgument and every key that is not
// a lower-case identifier of at most 32 bytes by "#<12 hex>"; numbers, booleans and null stay,
// and so does a file content already replaced by {bytes, sha256}.
Json HashArguments(const Json& args);

// Applies the mode to each record's fields as the writer writes them (audit/writer.cc): hashes
// tool_started.args and process.argv, remembers a call's argument strings until its
// tool_finished, and replaces them in the call's other records. Thread-safe.
class ArgumentHasher {
 public:
  // `workspace`: the session's workspace root, the one cwd kept as text.
  explicit ArgumentHasher(std::string workspace) : workspace_(std::move(workspace)) {}
  void Apply(std::string_view type, Json& fields);

 private:
  std::string workspace_;
  std::mutex mu_;
  std::map<std::string, std::vector<std::string>> by_call_;  // call id -> its argument strings
};

}  // namespace cordon
