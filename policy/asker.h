// The Asker port (issue 34, docs/adr/0015-approvals.md): how a question an `ask` rule raised
// reaches a person. The call, the launch, the file tools (and, later, the commit and the proxy)
// ask through the session's one Asker; its implementations are the only code that knows how a
// person is reached (the terminal under exec and call, MCP elicitation under serve, nobody in
// CI). Pure: the interface and the names the records use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/enum_names.h"

namespace cordon {

enum class ApprovalAnswer { kOnce, kSession, kDeny, kDeclined, kCancelled, kTimeout, kNoClient };
inline constexpr EnumName<ApprovalAnswer> kApprovalAnswerNames[] = {
    {ApprovalAnswer::kOnce, "once"},           {ApprovalAnswer::kSession, "session"},
    {ApprovalAnswer::kDeny, "deny"},           {ApprovalAnswer::kDeclined, "declined"},
    {ApprovalAnswer::kCancelled, "cancelled"}, {ApprovalAnswer::kTimeout, "timeout"},
    {ApprovalAnswer::kNoClient, "no_client"},
};
inline bool Approves(ApprovalAnswer a) {
  return a == ApprovalAnswer::kOnce || a == ApprovalAnswer::kSession;
}

// How the answer came: a client's elicitation, the terminal, `cordon approvals` (a command run
// elsewhere), nobody (no one could be asked), or an earlier `session` answer that still holds.
enum class AskedVia { kElicitation, kTerminal, kCommand, kNone, kKept };
inline constexpr EnumName<AskedVia> kAskedViaNames[] = {
    {AskedVia::kElicitation, "elicitation"},
    {AskedVia::kTerminal, "terminal"},
    {AskedVia::kCommand, "command"},
    {AskedVia::kNone, "none"},
    {AskedVia::kKept, "kept"},
};

struct ApprovalQuestion {
  std::string kind{};               // "call", "launch", "write", "commit" (and later "connect")
  std::string tool{};               // the tool the call is to
  std::string subject{};            // one line: the tool name, the argv, the path and its operation
  std::vector<std::string> argv{};  // a launch's argv (the record keeps it, redacted)
  std::vector<std::string> paths{};
  std::string operation{};  // a write's: "create", "edit", "replace"
  // A commit's: what the held entries would change, a redacted unified diff (capped).
  std::string detail{};
  std::string rule_id{};
  std::string rule_source{};  // "file:line"
  std::string reason{};       // the rule's own reason, or a line saying what it guards
  std::int64_t timeout_secs = 300;
};

struct ApprovalReply {
  ApprovalAnswer answer = ApprovalAnswer::kNoClient;
  AskedVia via = AskedVia::kNone;
  std::string client{};      // who answered: a client's self-declared name, "terminal"
  std::string why_no_one{};  // with kNoClient: why no one could be asked
};

class Asker {
 public:
  virtual ~Asker() = default;
  // Blocks until answered, declined, timed out, or known unanswerable. Never throws.
  virtual ApprovalReply Ask(const ApprovalQuestion& question) = 0;
};

// Nobody to ask (CI=true, --non-interactive, a client without elicitation): every question is
// answered no_client at once, saying why.
class NobodyAsker final : public Asker {
 public:
  explicit NobodyAsker(std::string why) : why_(std::move(why)) {}
  ApprovalReply Ask(const ApprovalQuestion&) override {
    return {.answer = ApprovalAnswer::kNoClient, .via = AskedVia::kNone, .why_no_one = why_};
  }

 private:
  std::string why_;
};

}  // namespace cordon
