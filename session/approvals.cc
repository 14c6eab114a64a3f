// Approvals in the session (issue 34, docs/adr/0015-approvals.md): the one place an `ask` of
// [[approvals.rules]] is put to the session's Asker, a kept `session` answer is found, and the
// approval record is written before what it allows.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>

#include "core/line_diff.h"
#include "core/text.h"
#include "runner/host_probe.h"
#include "session/session.h"
#include "workspace/stage.h"

namespace cordon {
namespace {

// The command as one line for the question and the record: each word quoted when it needs it.
// Past 8 KiB it is cut, and says how much of it was not shown: a person is never asked about a
// command whose end they cannot see without being told so.
constexpr std::size_t kShownCommandBytes = 8192;
std::string CommandLine(std::span<const std::string> argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_./=:,@%+") == std::string::npos;
    out += plain ? a : Json(a).dump();
  }
  if (out.size() > kShownCommandBytes) {
    const std::size_t hidden = out.size() - kShownCommandBytes;
    out.resize(kShownCommandBytes);
    out += " ... [cordon: " + std::to_string(hidden) +
           " more bytes of this command are not shown; answer no unless you know them]";
  }
  return out;
}

// One argument for the record: whole up to 4 KiB, then cut with its size.
std::string RecordedWord(std::string a) {
  if (a.size() <= 4096) return a;
  const std::size_t total = a.size();
  a.resize(4096);
  return a + "... [cordon: " + std::to_string(total) + " bytes in all]";
}

// argv[0] as it will run, for the argv matchers: a path is taken from the working directory, a
// name from PATH, and either through its symlinks ("" when not found). A guide, not the
// boundary: what the command changes is checked at the commit whatever this finds.
std::string ProgramFor(const ProcessRequest& req) {
  if (req.argv.empty()) return "";
  std::string path = req.argv[0];
  if (path.find('/') == std::string::npos) {
    path = FindOnPath(path);
  } else if (path[0] != '/' && !req.cwd.empty()) {
    path = req.cwd + "/" + path;
  }
  if (path.empty()) return "";
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) return path;
  return real;
}

}  // namespace

Status Session::Settle(const Decision& d, ApprovalQuestion q, std::uint64_t call,
                       const std::string& owner) {
  if (d.allowed()) return {};
  if (d.asks()) return Approve(d, std::move(q), call, owner);
  PolicyDeniedRecord denied{.call = call, .tool = q.tool, .rule = "approvals.rules " + d.rule};
  denied.decided_by = d.source;
  TRY(Audit(denied, true, AuditWriter::When::kBeforeAct));
  return std::unexpected(d.ToError());
}

Status Session::Approve(const Decision& d, ApprovalQuestion q, std::uint64_t call,
                        const std::string& owner, std::string* approval_id) {
  q.rule_id = d.rule;
  q.rule_source = d.source;
  q.reason = d.reason;
  q.timeout_secs = policy_.approvals_timeout_secs;
  ApprovalRecord rec{.id = "ap-" + std::to_string(++approvals_),
                     .call = call,
                     .tool = q.tool,
                     .kind = q.kind,
                     .subject = q.subject,
                     .rule = d.rule,
                     .rule_source = d.source};
  // Redacted whole, then cut: a secret across the cut would not be found in either half.
  if (!q.argv.empty()) {
    std::vector<std::string> redacted = q.argv;
    for (std::string& a : redacted) redactor_.Redact(a);
    rec.subject = CommandLine(redacted);
    rec.argv.emplace();
    for (std::string& a : redacted) rec.argv->push_back(RecordedWord(std::move(a)));
  } else {
    redactor_.Redact(rec.subject);
  }
  if (!q.paths.empty()) rec.paths = q.paths;
  if (!q.operation.empty()) rec.operation = q.operation;
  if (!owner.empty()) rec.mcp_session = owner;
  // The question is shown as the record keeps it: a secret in an argument is never put on a
  // terminal or sent to a client.
  q.subject = rec.subject;
  if (rec.argv) q.argv = *rec.argv;
  std::optional<std::string> kept;
  {
    std::lock_guard lock(approvals_mu_);
    auto by_owner = kept_approvals_.find(owner);
    if (by_owner != kept_approvals_.end()) {
      if (auto it = by_owner->second.find(d.rule); it != by_owner->second.end()) kept = it->second;
    }
  }
  ApprovalReply reply;
  if (kept) {
    reply = {.answer = ApprovalAnswer::kSession, .via = AskedVia::kKept};
    rec.kept_from = *kept;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(ask_mu_);
      reply = asker_ ? asker_->Ask(q) : NobodyAsker("no one to ask in this command").Ask(q);
    }
    rec.wait_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
  }
  if (approval_id != nullptr) *approval_id = rec.id;
  rec.asked_via = std::string(Name(kAskedViaNames, reply.via));
  rec.answer = std::string(Name(kApprovalAnswerNames, reply.answer));
  if (!reply.client.empty()) rec.client = reply.client;
  if (!reply.why_no_one.empty()) rec.why_no_one = reply.why_no_one;
  // The record comes before what it allows: an approval the log lacks is not given.
  TRY(Audit(rec, true, AuditWriter::When::kBeforeAct));
  if (reply.answer == ApprovalAnswer::kSession && !kept) {
    std::lock_guard lock(approvals_mu_);
    kept_approvals_[owner].emplace(d.rule, rec.id);
  }
  if (Approves(reply.answer)) return {};
  const std::string allow_line =
      "to allow it without asking, a policy layer of yours (not the project's) can say "
      "[approvals] remove = [\"" +
      d.rule + "\"] (docs/policy.md, \"Approvals\")";
  switch (reply.answer) {
    case ApprovalAnswer::kDeny:
    case ApprovalAnswer::kDeclined:
      return Fail(Code::kDeniedByPolicy,
                  d.reason + "; the person asked refused it (" + rec.id + ", " + rec.answer + ")");
    case ApprovalAnswer::kCancelled:
      return Fail(Code::kCancelled, d.reason + "; the question was cancelled (" + rec.id + ")");
    case ApprovalAnswer::kTimeout:
      return Fail(Code::kApprovalRequired,
                  d.reason + "; no answer came within " + std::to_string(q.timeout_secs) +
                      " s (approvals.timeout_secs; " + rec.id + "); " + allow_line);
    default:
      break;
  }
  return Fail(Code::kApprovalRequired, d.reason + "; no one could be asked (" + reply.why_no_one +
                                           "; " + rec.id + "); " + allow_line);
}

namespace {
// A path as one line: a name with a newline in it must not draw a line of the question.
std::string ShownPath(const std::string& p) { return TerminalSafe(EscapePathBytes(p), true); }
}  // namespace

std::string HeldSubject(std::span<const HeldEntry> entries) {
  std::string subject;
  std::size_t listed = 0;
  for (const HeldEntry& h : entries) {
    if (subject.size() >= 2048) continue;
    subject += (subject.empty() ? "" : ", ") + ShownPath(h.path) + " (" + h.op + ")";
    ++listed;
  }
  if (listed < entries.size())
    subject += " and " + std::to_string(entries.size() - listed) + " more";
  return "change " + std::to_string(entries.size()) + " held path" +
         (entries.size() == 1 ? "" : "s") + ": " + subject;
}

std::string HeldDiff(const HeldQuestion& held, std::size_t stop_after, std::size_t* files) {
  std::string diff;
  *files = 0;
  for (const HeldQuestion::Content& c : held.contents) {
    if (diff.size() > stop_after) break;
    diff += UnifiedDiff(c.before, c.after, "a/" + ShownPath(c.path), "b/" + ShownPath(c.path));
    if (c.before_cut || c.after_cut)
      diff += "[cordon: " + ShownPath(c.path) + " is longer than shown]\n";
    ++*files;
  }
  return diff;
}

HeldAnswer Session::AskHeld(const HeldQuestion& held) {
  HeldAnswer out;
  if (held.entries.empty()) return out;
  // One question per commit. Its rule is the first held entry's; entries held by other rules
  // are named in the question and asked about with it.
  Decision d{.verdict = Verdict::kAsk,
             .rule = held.entries[0].rule,
             .source = held.entries[0].rule_source};
  std::vector<std::string> rules;
  for (const HeldEntry& h : held.entries) {
    if (std::find(rules.begin(), rules.end(), h.rule) == rules.end()) rules.push_back(h.rule);
  }
  if (rules.size() > 1) {
    d.rule.clear();
    for (const std::string& r : rules) d.rule += (d.rule.empty() ? "" : ",") + r;
  }
  for (const ApprovalRule& r : policy_.approval_rules) {
    if (r.id == held.entries[0].rule) d.reason = r.reason;
  }
  if (d.reason.empty())
    d.reason = "the changes of " + held.tool + " to paths that rule " + d.rule + " holds";
  ApprovalQuestion q{.kind = "commit", .tool = held.tool};
  for (const HeldEntry& h : held.entries) q.paths.push_back(h.path);
  q.subject = HeldSubject(held.entries);
  // The diff, redacted, cut at 4 KiB: a person sees what would land, never a secret in it, and
  // is told how much of it is not shown.
  std::size_t diffed = 0;
  std::string diff = HeldDiff(held, 4096, &diffed);
  redactor_.Redact(diff);
  if (diff.size() > 4096) {
    diff.resize(4096);
    diff += "\n[cordon: the rest of the diff is not shown]\n";
  }
  if (diffed < held.entries.size()) {
    diff += "[cordon: the diff above covers " + std::to_string(diffed) + " of the " +
            std::to_string(held.entries.size()) +
            " held paths; `cordon approvals` cannot show the others before this answer: answer "
            "no unless you know them]\n";
  }
  q.detail = std::move(diff);
  const Status st = Approve(d, std::move(q), held.call, held.owner, &out.approval);
  out.approve = st.has_value();
  return out;
}

Status Session::GateLaunch(const ProcessRequest& req) {
  // argv rules are for the commands an agent or a person starts (run_shell, its jobs, exec);
  // a configured or wrapped server is decided by its own keys.
  if (req.tool != "run_shell" && req.tool != "exec") return {};
  const std::string program = ProgramFor(req);
  const Decision d =
      Decide(policy_, CommandAsk{.tool = req.tool, .argv = req.argv, .program = program});
  if (d.allowed()) return {};
  ApprovalQuestion q{.kind = "launch", .tool = req.tool, .argv = req.argv};
  return Settle(d, std::move(q), req.call, req.owner);
}

}  // namespace cordon
