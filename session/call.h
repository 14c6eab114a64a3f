// One tool call (issue 31): its number, its caller, the tool_started record written before the
// act, the poison check, then Decide (policy/decision.h) -> Execute -> Finish. Finish runs one
// fixed order: redact, cap with the tool's limit, the boundary steps (sweep, git sync),
// tool_finished, usage. A call that is never finished (a wrapped call whose answer never came)
// records `cancelled` from its destructor. serve and call go through Run; wrap's forwarded
// tools/call, resources/read and prompts/get go through Begin and Finish: every call of the
// session has a number, the tool's cap, the authorize step and the same records.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "audit/records.h"
#include "core/error.h"
#include "policy/decision.h"
#include "session/callers.h"

namespace cordon {

class Session;
struct ExternalName;
struct ToolSpec;

class Call {
 public:
  // What the act gave back, as Finish treats it.
  enum class Form {
    kStructured,   // a built-in tool's structured result: rendered as a CallToolResult
    kToolResult,   // a server's CallToolResult: its type checked, its items capped
    kWrapped,      // a wrapped server's tools/call result: forwarded as it is, its items capped
    kPassThrough,  // a wrapped server's other answer (resources/read, prompts/get): not capped
  };

  // Numbers the call. Nothing is written yet.
  Call(Session& session, std::shared_ptr<Caller> caller, std::string tool);
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  std::uint64_t number() const { return number_; }
  const std::string& tool() const { return tool_; }
  Caller& caller() { return *caller_; }
  // The records' fields the origin fills in before Begin (scope, args, server, method...).
  ToolStartedRecord& started() { return started_; }
  ToolFinishedRecord& finished() { return finished_; }

  // The whole pipeline of a call made through cordon's own server (serve, call): lookup,
  // validate, authorize, execute, finish. Always a CallToolResult (errors are isError results).
  // `consumable`: the input itself (equal to *input) when the caller gives it up: the built-in
  // tool may take values out of it (ToolContext::input).
  Json Run(const Result<const Json*>& input, std::size_t input_bytes,
           const std::atomic<bool>* cancel, Json* consumable = nullptr);

  // A call whose act happens elsewhere (wrap): the poison check, the authorize step under
  // `ask`, then tool_started before the act. An error means the act must not start (the
  // client is answered with it); the call then needs no Finish.
  Status Begin(const CallAsk& ask);

  // Redact, cap, the boundary steps, tool_finished and usage, once. Returns the CallToolResult
  // the agent receives (for kPassThrough: the redacted result as it was).
  Json Finish(Result<Json> outcome, Form form);
  // A wrapped call the server answered with a JSON-RPC error: recorded as an error with its
  // message; the error object itself is redacted by the caller with the rest of the message.
  void FinishRpcError(const std::string& message);
  // The client gave up (notifications/cancelled): tool_finished says cancelled, with why.
  void Cancel(std::optional<std::string> reason);
  // Secrets the origin replaced in parts of the answer Finish does not see (a wrapped
  // response's id or error), counted in tool_finished; `at_least`: the secrets the answer's
  // text holds, the count's floor whatever Finish finds in the parts it reads.
  void NoteRedactions(std::size_t count, std::size_t at_least = 0);
  // Whether Finish changed what the agent receives (a redaction, a cut, an error in its place):
  // a proxy that forwards the original bytes otherwise must forward the changed result.
  bool altered() const { return altered_; }

  bool truncated() const { return truncated_; }
  std::size_t redactions() const { return redactions_; }
  // The boundary sweep could not complete: the call failed, and nothing more may launch.
  bool boundary_failed() const { return boundary_failed_; }

 private:
  friend class CallServices;
  Status WriteStarted();
  Status Authorize(const CallAsk& ask, bool builtin);
  Result<Json> Act(const Json& args, const std::atomic<bool>* cancel);
  Result<Json> ActExternal(const ExternalName& name, const Json& args,
                           const std::atomic<bool>* cancel);
  Result<Json> ActBuiltin(const ToolSpec& spec, const Json& args, const std::atomic<bool>* cancel);
  // Redact and cap the outcome into the agent's result; the error that replaced it, if any.
  Json Shape(Result<Json> outcome, Form form, std::optional<Error>& error);
  void Boundary(Json& result, std::optional<Error>& error);
  void Record(const Json& result, const std::optional<Error>& error, Form form);

  Session& session_;
  Json* consumable_ = nullptr;  // Run's `consumable`
  std::shared_ptr<Caller> caller_;
  const std::string tool_;
  const std::uint64_t number_;
  const std::chrono::steady_clock::time_point t0_;
  ToolStartedRecord started_;
  ToolFinishedRecord finished_;
  bool started_written_ = false;
  bool started_failed_ = false;  // the record before the act failed: nothing happened
  bool done_ = false;            // tool_finished written (or nothing of the call is in the log)
  bool external_ = false;
  bool truncated_ = false;
  bool boundary_failed_ = false;
  bool altered_ = false;
  std::size_t redactions_ = 0;
  std::size_t min_redactions_ = 0;
  std::map<std::string, std::size_t> by_rule_;
};

}  // namespace cordon
