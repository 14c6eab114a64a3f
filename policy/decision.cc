#include "policy/decision.h"

namespace cordon {

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kAllow:
      return "allow";
    case Verdict::kAsk:
      return "ask";
    case Verdict::kDeny:
      break;
  }
  return "deny";
}

Error Decision::ToError() const {
  if (allowed()) return Error{Code::kInternal, "an allowed decision is not an error", 0, {}};
  return Error{code, reason, 0, {}};
}

namespace {

Decision Allow(std::string rule, std::string source) {
  return Decision{.verdict = Verdict::kAllow, .rule = std::move(rule), .source = std::move(source)};
}

Decision Deny(std::string rule, std::string source, std::string reason) {
  return Decision{.verdict = Verdict::kDeny,
                  .rule = std::move(rule),
                  .source = std::move(source),
                  .reason = std::move(reason)};
}

// An approval rule's verdict: the rule's id and its file:line, and a reason naming what it
// guards. An allow rule that decided is named too (its line is why nothing was asked).
Decision FromApproval(const ApprovalMatch& m, const std::string& what) {
  if (m.rule == nullptr) return Allow("", "");
  Decision d{.rule = m.rule->id, .source = m.rule->where};
  const std::string why = m.rule->reason.empty() ? "" : " (" + m.rule->reason + ")";
  switch (m.decision) {
    case ApprovalDecision::kAllow:
      d.verdict = Verdict::kAllow;
      break;
    case ApprovalDecision::kAsk:
      d.verdict = Verdict::kAsk;
      d.code = Code::kApprovalRequired;
      d.reason = what + " needs approval by rule " + m.rule->id + " (" + m.rule->where + ")" + why;
      break;
    case ApprovalDecision::kDeny:
      d.verdict = Verdict::kDeny;
      d.reason = what + " is denied by rule " + m.rule->id + " (" + m.rule->where + ")" + why;
      break;
  }
  return d;
}

std::string ProvenanceOf(const Policy& policy, const std::string& key) {
  auto it = policy.provenance.find(key);
  return it != policy.provenance.end() ? it->second : "built-in default";
}

}  // namespace

Decision Decide(const Policy& policy, const CallAsk& ask) {
  const std::string scope(ask.scope);
  // A configured server's tool is decided by [servers] trust and pins, not by a policy file's
  // scope list alone: the source says where the grant would come from only for built-ins.
  const std::string source = ask.builtin ? ProvenanceOf(policy, "scopes.grant") : "";
  if (!policy.Grants(scope)) {
    return Deny(
        "scopes.grant", source,
        std::string(ask.tool) + " needs scope " + scope + ", which the policy does not grant");
  }
  // An approval rule on the tool's name comes after the scope: a tool the policy does not grant
  // is refused, never asked about.
  if (Decision a = FromApproval(EvaluateTool(policy.approval_rules, ask.tool),
                                "calling " + std::string(ask.tool));
      !a.allowed()) {
    return a;
  }
  // The line that granted this very scope, when the policy kept one.
  if (ask.builtin) {
    auto entries = policy.entry_provenance.find("scopes.grant");
    if (entries != policy.entry_provenance.end()) {
      if (auto it = entries->second.find(scope); it != entries->second.end()) {
        return Allow("scopes.grant", it->second);
      }
    }
  }
  return Allow("scopes.grant", source);
}

Decision Decide(const Policy& policy, const LaunchAsk& ask) {
  // A launcher that downloads its package as it starts (npx -y, uvx, ...) would hang without
  // the network it needs: refused at once, with what would let it run.
  if (ask.fetches_at_start && ask.network != NetworkMode::kAllow &&
      ask.network != NetworkMode::kProxy) {
    std::string remedy(ask.remedy);
    if (remedy.empty()) {
      remedy = (ask.preset.empty() ? std::string("--network proxy with --allow-domain")
                                   : "--allow-preset " + std::string(ask.preset)) +
               ", or --network allow";
    }
    return Deny("network", ProvenanceOf(policy, "network.mode"),
                std::string(ask.who) + " cannot start in this sandbox (network " +
                    std::string(NetworkModeName(ask.network)) + "): " + *ask.fetches_at_start +
                    " (" + remedy + ")");
  }
  if (ask.argv.empty()) {
    Decision d = Deny("argv", "", "nothing to run: the command is empty");
    d.code = Code::kInvalidInput;
    return d;
  }
  return Allow("", "");
}

Decision Decide(const Policy& policy, const CommandAsk& ask) {
  const ApprovalMatch m =
      EvaluateArgv(policy.approval_rules, ArgvSubject{.argv = ask.argv, .program = ask.program});
  // Named by the rule's own words: the command itself may be long, or hold a secret.
  std::string words;
  if (m.rule != nullptr) {
    for (const std::string& w : m.rule->argv) words += (words.empty() ? "" : " ") + w;
  }
  return FromApproval(m, std::string(ask.tool) + " running `" + words + "`");
}

Decision Decide(const Policy& policy, const WriteAsk& ask) {
  Decision out = Allow("", "");
  int strictest = -1;
  for (const std::string& path : ask.paths) {
    const ApprovalMatch m = EvaluatePath(policy.approval_rules, path);
    if (m.rule == nullptr || ApprovalStrictness(m.decision) <= strictest) continue;
    strictest = ApprovalStrictness(m.decision);
    out = FromApproval(m, std::string(ask.tool) + " writing " + path);
  }
  return out;
}

ConnectDecision Decide(const EgressPolicy& egress, const ConnectAsk& ask) {
  NameDecision d = DecideName(egress, ask.host, ask.port);
  ConnectDecision out;
  out.verdict = d.allowed ? Verdict::kAllow : Verdict::kDeny;
  if (d.rule) {
    out.rule = d.rule->text;
    out.source = d.rule->source;
  }
  if (!d.allowed) out.reason = d.reason;
  out.pinned = std::move(d.pinned);
  return out;
}

}  // namespace cordon
