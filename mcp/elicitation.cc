// Approvals asked through the MCP client's elicitation (mcp/elicitation.h).
#include "mcp/elicitation.h"

#include <chrono>

namespace cordon::mcp {

Json ElicitationRequest(const Json& id, const ApprovalQuestion& q, const std::string& version) {
  // The question as the terminal shows it: every value in it was redacted by the session.
  std::string message = "cordon: approval needed: " + q.reason + "\n";
  if (q.kind == "launch") {
    message += q.tool + " would run: " + q.subject;
  } else if (q.kind == "write" || q.kind == "commit") {
    message += q.tool + " would " + q.subject;
  } else {
    message += q.subject;
  }
  if (!q.detail.empty()) message += "\n\n" + q.detail;
  message += "\n\nRule " + q.rule_id + " (" + q.rule_source +
             "). Answer once, session (this rule, for the rest of this MCP session) or deny.";
  Json params = {{"message", message},
                 {"requestedSchema",
                  {{"type", "object"},
                   {"properties",
                    {{"decision",
                      {{"type", "string"},
                       {"title", "Decision"},
                       {"description",
                        "once: allow this time; session: allow this rule for the rest of "
                        "the session; deny: refuse"},
                       {"enum", {"once", "session", "deny"}},
                       {"enumNames", {"Allow once", "Allow for this session", "Deny"}}}}}},
                   {"required", {"decision"}}}}};
  if (version >= "2025-11-25") params["mode"] = "form";
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", "elicitation/create"}, {"params", params}};
}

ApprovalAnswer ElicitationAnswer(const Json& result, const Json& error) {
  if (!error.is_null() || !result.is_object()) return ApprovalAnswer::kCancelled;
  const auto action = result.find("action");
  if (action == result.end() || !action->is_string()) return ApprovalAnswer::kCancelled;
  if (*action == "decline") return ApprovalAnswer::kDeclined;
  if (*action != "accept") return ApprovalAnswer::kCancelled;
  const auto content = result.find("content");
  if (content == result.end() || !content->is_object()) return ApprovalAnswer::kDeny;
  const auto decision = content->find("decision");
  if (decision == content->end() || !decision->is_string()) return ApprovalAnswer::kDeny;
  if (*decision == "once") return ApprovalAnswer::kOnce;
  if (*decision == "session") return ApprovalAnswer::kSession;
  return ApprovalAnswer::kDeny;
}

ApprovalReply ElicitationAsker::Ask(const ApprovalQuestion& q) {
  ApprovalReply reply{.via = AskedVia::kElicitation, .client = client_};
  std::string key;
  Json id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      return {.answer = ApprovalAnswer::kNoClient,
              .via = AskedVia::kNone,
              .why_no_one = "the MCP client has gone"};
    }
    // cordon's own ids: a string no client request id of this session can be mistaken for.
    id = "cordon-approval-" + std::to_string(++next_);
    key = id.dump();
    waiting_[key] = {};
  }
  send_(ElicitationRequest(id, q, version_));
  std::unique_lock<std::mutex> lock(mu_);
  const bool answered = cv_.wait_for(lock, std::chrono::seconds(q.timeout_secs),
                                     [&] { return waiting_[key].answered || closed_; });
  const Pending got = waiting_[key];
  waiting_.erase(key);
  if (!answered) {
    reply.answer = ApprovalAnswer::kTimeout;
  } else if (!got.answered) {
    reply.answer = ApprovalAnswer::kCancelled;  // the client went away while it was asked
  } else {
    reply.answer = ElicitationAnswer(got.result, got.error);
  }
  return reply;
}

bool ElicitationAsker::Deliver(const Json& id, const Json& result, const Json& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiting_.find(id.dump());
    if (it == waiting_.end() || it->second.answered) return false;
    it->second = {.answered = true, .result = result, .error = error};
  }
  cv_.notify_all();
  return true;
}

void ElicitationAsker::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

}  // namespace cordon::mcp
