// cordon approvals list|show|approve|deny (issue 34, docs/adr/0015-approvals.md): the changes a
// staged commit held for an answer that no one gave before that cordon ended (killed while its
// question was open, or recovered by a later start with no one to ask), answered from any
// terminal. The store is <state>/held; each held stage is answered by the rules it carries and
// recorded in the log of the session that staged it, the approval record before the act.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>

#include "cli/common.h"
#include "core/fs.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "runner/git_reader.h"
#include "session/session.h"
#include "session/stage_recovery.h"
#include "workspace/staging.h"

extern char** environ;

namespace cordon::cli {
namespace {

std::string Ago(std::int64_t ns) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const std::int64_t secs = now.tv_sec - ns / 1000000000LL;
  if (secs < 120) return std::to_string(secs) + " s ago";
  if (secs < 7200) return std::to_string(secs / 60) + " min ago";
  if (secs < 172800) return std::to_string(secs / 3600) + " h ago";
  return std::to_string(secs / 86400) + " days ago";
}

// A path as one line on a terminal: a name with a newline cannot start a line of its own.
std::string Shown(const std::string& path) { return TerminalSafe(EscapePathBytes(path), true); }

std::string Rules(const HeldManifest& m) {
  std::string out;
  for (const HeldEntry& h : m.entries) {
    const std::string one = h.rule + " (" + h.rule_source + ")";
    if (out.find(one) == std::string::npos) out += (out.empty() ? "" : ", ") + one;
  }
  return out;
}

Json HeldJson(const StagedWorkspace::HeldStage& h) {
  Json entries = Json::array();
  for (const HeldEntry& e : h.manifest.entries) {
    entries.push_back({{"path", EscapePathBytes(e.path)},
                       {"op", e.op},
                       {"type", e.type},
                       {"rule", e.rule},
                       {"rule_source", e.rule_source}});
  }
  Json j = {{"id", h.id}, {"dir", h.dir}, {"entries", std::move(entries)}};
  if (h.origin) {
    j["session"] = h.origin->session;
    j["audit_log"] = h.origin->audit_log;
  }
  if (!h.error.empty()) {
    j["error"] = h.error;
  } else {
    j["held_at_ns"] = h.manifest.held_at_ns;
    j["expires_at_ns"] = h.manifest.expires_at_ns;
    j["tool"] = h.manifest.tool;
    j["call"] = h.manifest.call;
  }
  return j;
}

const StagedWorkspace::HeldStage* Find(const std::vector<StagedWorkspace::HeldStage>& all,
                                       const std::string& id) {
  for (const auto& h : all) {
    if (h.id == id) return &h;
  }
  return nullptr;
}

int NotFound(const std::string& id) {
  std::fprintf(stderr,
               "cordon: approvals: no held change has the id %s (`cordon approvals list` shows "
               "them)\n",
               TerminalSafe(id, true).c_str());
  return kExitToolError;
}

int CmdList(bool json) {
  const auto all = StagedWorkspace::ListHeld();
  if (json) {
    Json list = Json::array();
    for (const auto& h : all) list.push_back(HeldJson(h));
    std::cout << DumpJson(Json{{"held", std::move(list)}}, 2) << std::endl;
    return kExitOk;
  }
  if (all.empty()) {
    std::cout << "cordon: no changes are held for an answer\n";
    return kExitOk;
  }
  for (const auto& h : all) {
    std::string text = h.id + "\n";
    if (!h.error.empty()) {
      text += "  unreadable: " + h.error + "\n";
    } else {
      text += "  held " + Ago(h.manifest.held_at_ns) + " from " + h.manifest.tool +
              (h.origin ? " of session " + h.origin->session : "") + " by " + Rules(h.manifest) +
              "\n";
      for (const HeldEntry& e : h.manifest.entries)
        text += "    " + e.op + " " + Shown(e.path) + "\n";
    }
    std::cout << TerminalSafe(text);
  }
  std::cout << "answer with: cordon approvals show ID | approve ID | deny ID\n";
  return kExitOk;
}

// The held stage, opened and locked for this command (flock on its directory: one answer).
struct Opened {
  UniqueFd lock;
  std::unique_ptr<Stage> stage;
  HeldManifest manifest;
};

Result<Opened> Open(const StagedWorkspace::HeldStage& h) {
  if (!h.error.empty())
    return Fail(Code::kInvalidInput, "the held change " + h.id + " cannot be read: " + h.error);
  Opened o;
  o.lock = UniqueFd(::open(h.dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!o.lock.valid()) return SysFail(Code::kInvalidInput, "open", h.dir);
  if (::flock(o.lock.get(), LOCK_EX | LOCK_NB) != 0)
    return Fail(Code::kConflict, "another cordon is answering " + h.id + " now");
  ASSIGN_OR_RETURN(
      o.stage,
      Stage::Reopen(h.dir, CordonStateDir() + "/quarantine/" + h.origin->session, RunGitConfined));
  o.manifest = h.manifest;
  return o;
}

// The held stage `id`, opened and locked, and a redactor set up as a session's is (the diff and
// the records are redacted as the session's were); nullopt, or the exit code after saying why.
struct Answering {
  std::vector<StagedWorkspace::HeldStage> all;
  const StagedWorkspace::HeldStage* held = nullptr;
  Opened opened;
  Redactor redactor;
};
std::optional<int> Prepare(const SessionFlags& session, const std::string& id, Answering& a) {
  a.all = StagedWorkspace::ListHeld();
  a.held = Find(a.all, id);
  if (a.held == nullptr) return NotFound(id);
  auto opened = Open(*a.held);
  if (!opened) {
    std::fprintf(stderr, "cordon: approvals: %s\n",
                 TerminalSafe(opened.error().ToString()).c_str());
    return kExitToolError;
  }
  a.opened = std::move(*opened);
  auto policy = LoadEffectivePolicy(SessionOptionsFrom(session, "cli"));
  if (!policy) {
    std::fprintf(stderr, "cordon: policy: %s\n", TerminalSafe(policy.error().ToString()).c_str());
    return kExitStart;
  }
  (void)SetUpRedactor(a.redactor, *policy, environ);
  return std::nullopt;
}

int CmdShow(const SessionFlags& session, const std::string& id) {
  Answering a;
  if (const auto exit = Prepare(session, id, a)) return *exit;
  const HeldQuestion q = a.opened.stage->Question();
  std::string text = a.held->id + ": held " + Ago(a.held->manifest.held_at_ns) + " from " + q.tool +
                     " by " + Rules(a.held->manifest) + "\n";
  for (const HeldEntry& e : q.entries) text += "  " + e.op + " " + Shown(e.path) + "\n";
  std::size_t files = 0;
  std::string diff = HeldDiff(q, SIZE_MAX, &files);
  if (files < q.entries.size())
    diff += "[cordon: the diff covers the first " + std::to_string(files) + " files of " +
            std::to_string(q.entries.size()) + " held paths]\n";
  a.redactor.Redact(diff);
  std::cout << TerminalSafe(text + diff);
  return kExitOk;
}

int CmdAnswer(const SessionFlags& session, const std::string& id, bool approve) {
  Answering a;
  if (const auto exit = Prepare(session, id, a)) return *exit;
  const StagedWorkspace::HeldStage* h = a.held;
  Opened* opened = &a.opened;
  const std::string self = NewSessionId();
  StageLogAppender appender(self, &a.redactor);
  const HeldManifest& m = opened->manifest;
  ApprovalRecord rec{.id = "ap-1",
                     .call = m.call,
                     .tool = m.tool,
                     .kind = "commit",
                     .subject = {},
                     .rule = m.entries.empty() ? "" : m.entries[0].rule,
                     .rule_source = m.entries.empty() ? "" : m.entries[0].rule_source};
  std::vector<std::string> paths;
  for (const HeldEntry& e : m.entries) paths.push_back(EscapePathBytes(e.path));
  rec.subject = HeldSubject(m.entries);  // as the session's own question says it
  rec.paths = paths;
  rec.asked_via = "command";
  rec.answer = approve ? "once" : "deny";
  rec.client = "cordon approvals";
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  rec.wait_ms = (now.tv_sec * 1000000000LL + now.tv_nsec - m.held_at_ns) / 1000000;
  // The approval is recorded in the staging session's log before anything it allows: a log that
  // cannot take it (gone, HMAC-chained, checkpointed) leaves the change held, and says why.
  if (Status st = appender.Append(h->origin->audit_log, rec); !st) {
    std::fprintf(stderr,
                 "cordon: approvals: the log of session %s (%s) cannot take the approval "
                 "record, so nothing was done: %s\n",
                 TerminalSafe(h->origin->session, true).c_str(),
                 TerminalSafe(h->origin->audit_log, true).c_str(),
                 TerminalSafe(st.error().message).c_str());
    return kExitToolError;
  }
  StageRecovery done;
  done.stage = h->dir;
  done.name = h->id;
  done.origin = h->origin;
  for (const auto& r : opened->stage->roots()) done.roots.push_back(r.root);
  done.commit = opened->stage->Answer({.approve = approve, .approval = rec.id});
  done.quarantine = CordonStateDir() + "/quarantine/" + h->origin->session + "/" +
                    h->dir.substr(h->dir.find_last_of('/') + 1);
  done.outcome = done.commit.error ? "kept" : "finished";
  if (done.commit.error) done.error = done.commit.error->message;
  const Status logged = appender.Append(h->origin->audit_log, RecoveryRecordOf(done, self));
  std::string text = std::string("cordon: ") + (approve ? "approved" : "denied") + " " + h->id +
                     ": " + std::to_string(done.commit.changes.size()) + " installed, " +
                     std::to_string(done.commit.refused.size()) + " in the quarantine, " +
                     std::to_string(done.commit.conflicts.size()) +
                     " kept the host's version (changed on the host since)";
  std::size_t printed = 0;
  for (const RefusedEntry& r : done.commit.refused) {
    if (++printed > 50) break;
    text += "\n  " + Shown(r.rel) + " (" + r.reason + ") -> " + Shown(r.quarantine);
  }
  for (const std::string& c : done.commit.conflicts) {
    if (++printed > 50) break;
    text += "\n  " + Shown(c) + " (conflict: the host's version is kept)";
  }
  if (printed > 50) text += "\n  ... (the record lists them all)";
  text += "\nrecorded in " + h->origin->audit_log;
  if (!logged)
    text += " (the commit's record could not be written: " + logged.error().message + ")";
  std::cout << TerminalSafe(text) << "\n";
  if (done.commit.error) {
    std::fprintf(stderr, "cordon: approvals: the commit could not complete: %s\n",
                 TerminalSafe(done.commit.error->message).c_str());
    return kExitToolError;
  }
  // The stage's directory goes when the stage does (nothing is held any more).
  opened->stage.reset();
  return logged ? kExitOk : kExitToolError;
}

}  // namespace

void AddApprovalsCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    SessionFlags session;
    bool json = false;
    std::string id;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = root.add_subcommand("approvals",
                                      "changes held for an answer: list, show, approve or deny "
                                      "them")
                      ->group("Commands")
                      ->require_subcommand(1);
  CLI::App* list = cmd->add_subcommand("list", "list the held changes")->group("Commands");
  list->add_flag("--json", f->json, "print JSON");
  ctx.run[list] = [f] { return CmdList(f->json); };
  CLI::App* show = cmd->add_subcommand("show", "print a held change's paths and its redacted diff")
                       ->group("Commands");
  show->add_option("ID", f->id, "the id `cordon approvals list` shows")->required();
  AddSessionFlags(show, &f->session);
  ctx.run[show] = [f] { return CmdShow(f->session, f->id); };
  for (const bool approve : {true, false}) {
    CLI::App* answer =
        cmd->add_subcommand(approve ? "approve" : "deny",
                            approve ? "install a held change (the host's own edits since win)"
                                    : "move a held change to the quarantine")
            ->group("Commands");
    answer->add_option("ID", f->id, "the id `cordon approvals list` shows")->required();
    AddSessionFlags(answer, &f->session);
    ctx.run[answer] = [f, approve] { return CmdAnswer(f->session, f->id, approve); };
  }
}

}  // namespace cordon::cli
