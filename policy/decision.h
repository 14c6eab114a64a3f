// The one decision seam (issue 31): what is asked (a tool call, a launch, an egress connection)
// goes in, allow or deny comes out with the rule that decided and where that rule came from.
// Pure: no I/O, no kernel; the facts a decision needs (what a launcher fetches, a parsed host)
// are gathered by the caller and passed in, so every decision is table-tested
// (tests/decision_test.cc). The call's authorize step, the launch and the egress proxy all ask
// here; approval rules (policy/approvals.h) add the third verdict, `ask`: the caller then asks the
// session's Asker (policy/asker.h) and goes on only on an approving answer.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "policy/approvals.h"
#include "policy/egress.h"
#include "policy/policy.h"

namespace cordon {

enum class Verdict { kAllow, kAsk, kDeny };
std::string_view VerdictName(Verdict v);

struct Decision {
  Verdict verdict = Verdict::kDeny;
  std::string rule{};    // what decided: "scopes.grant", "network", a domain rule's text; "" none
  std::string source{};  // where that rule came from: "policies.d/00-base.toml:3", a flag, ...
  std::string reason{};  // one line, for the agent and the record (empty when allowed)
  Code code = Code::kDeniedByPolicy;  // the error code of a deny
  bool allowed() const { return verdict == Verdict::kAllow; }
  bool asks() const { return verdict == Verdict::kAsk; }
  // The deny as an Error (code and reason); for an allow, an internal error saying so.
  Error ToError() const;
};

// A tool call: built-in tools carry their own scope; a configured server's tool needs mcp:call.
struct CallAsk {
  std::string_view tool;
  std::string_view scope;
  bool builtin = true;
};
Decision Decide(const Policy& policy, const CallAsk& ask);

// A process launch (run_shell, exec, a configured or wrapped server): `fetches_at_start` is
// FetchesPackageAtStart's answer for its argv, `preset` the launcher's registry preset.
struct LaunchAsk {
  std::string_view tool;
  std::span<const std::string> argv;
  NetworkMode network = NetworkMode::kNone;
  std::optional<std::string> fetches_at_start{};
  std::string_view preset{};
  std::string_view who = "the server";  // how the refusal names what would not start
  // What would let it run, in the caller's terms (a configured server's keys); empty: the flags.
  std::string_view remedy{};
};
Decision Decide(const Policy& policy, const LaunchAsk& ask);

// A command about to run (run_shell, a background job, exec): the approval rules' argv matchers.
// `program` is argv[0] resolved on the sandbox's PATH and through symlinks ("" when unknown).
struct CommandAsk {
  std::string_view tool;
  std::span<const std::string> argv;
  std::string_view program{};
};
Decision Decide(const Policy& policy, const CommandAsk& ask);

// A file tool's write: every path it would change (workspace-relative), by the path matchers.
// The decision is the strictest over the paths; `rule` names the rule, `reason` the path.
struct WriteAsk {
  std::string_view tool;
  std::span<const std::string> paths;
};
Decision Decide(const Policy& policy, const WriteAsk& ask);

// An egress connection through the proxy, decided on the name before any DNS query (DecideName).
struct ConnectAsk {
  const EgressHost& host;
  int port = 0;
};
struct ConnectDecision : Decision {
  std::vector<IpAddress> pinned{};  // from a resolve entry: connect to these, ask no resolver
};
ConnectDecision Decide(const EgressPolicy& egress, const ConnectAsk& ask);

}  // namespace cordon
