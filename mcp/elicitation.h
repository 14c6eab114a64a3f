// Approvals asked through the MCP client (issue 34, part c; docs/adr/0015-approvals.md): under
// `serve`, a client that declared the `elicitation` capability in `initialize` is sent an
// `elicitation/create` request, under cordon's own request id, for each question an `ask` rule
// raises; its answer comes back as a response to that id on the same connection. The call that
// asked waits (its progress notifications go on, so a client that resets its own request
// timeout on progress keeps waiting) until the answer, the timeout, or the client's end.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/text.h"
#include "policy/asker.h"

namespace cordon::mcp {

// The request the client is sent: `message` names the rule, its file:line, what would happen
// and the choices; `requestedSchema` is one enum `decision` (once, session, deny). `mode: form`
// only for clients of protocol 2025-11-25 (2025-06-18 has no mode).
Json ElicitationRequest(const Json& id, const ApprovalQuestion& q, const std::string& version);

// A client's response to it as an answer: accept with decision once or session approves, accept
// with deny (or anything else) is deny, decline and cancel are themselves, an error response is
// cancelled.
ApprovalAnswer ElicitationAnswer(const Json& result, const Json& error);

class ElicitationAsker final : public Asker {
 public:
  // `send` writes one message to the client; `version` is the negotiated protocol version;
  // `client` the client's self-declared name (clientInfo.name), for the record.
  ElicitationAsker(std::function<void(const Json&)> send, std::string version, std::string client)
      : send_(std::move(send)), version_(std::move(version)), client_(std::move(client)) {}
  ApprovalReply Ask(const ApprovalQuestion& question) override;
  // A response from the client: true when it answers one of cordon's questions (taken here),
  // false when it is someone else's.
  bool Deliver(const Json& id, const Json& result, const Json& error);
  // The client is gone (end of input): every waiting question is answered cancelled, and later
  // ones no_client.
  void Close();

 private:
  std::function<void(const Json&)> send_;
  const std::string version_, client_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Pending {
    bool answered = false;
    Json result, error;
  };
  std::map<std::string, Pending> waiting_;  // by the id's JSON text
  std::uint64_t next_ = 0;
  bool closed_ = false;
};

}  // namespace cordon::mcp
