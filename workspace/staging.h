// The staged workspace's lifecycle (docs/adr/0006-staged-workspace.md): whether this host can
// stage, the stage of each confined process (an upper and a work directory per writable root,
// in cordon's state directory), the mount step the launch child runs before it execs bwrap, the
// commit points, and the recovery of stages a killed cordon left behind.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"
#include "workspace/git_content.h"
#include "workspace/guard.h"
#include "workspace/stage.h"

namespace cordon {

// One writable root staged for one process: plain data the launch plan carries.
struct StagedRoot {
  std::string root;   // the host tree (the lower layer), absolute; the overlay is mounted onto it
  std::string upper;  // cordon's: what the process writes lands here
  std::string work;   // overlayfs's work directory, on the upper's filesystem
  bool operator==(const StagedRoot&) const = default;
};

// The mount options of one staged root (raw mount(2) "overlay" data).
std::string OverlayOptions(const StagedRoot& r);

// What the launch child does between fork and exec, prepared before the fork so that the child
// makes only async-signal-safe system calls.
struct StageMountPlan {
  bool user_namespace =
      false;  // not root: a user namespace first, uid and gid mapped to themselves
  std::string uid_map, gid_map;
  std::vector<std::string> targets, options;
  // ProbeStaging's records that staging works for these roots: removed when a mount fails.
  std::vector<std::string> records;
  bool empty() const { return targets.empty(); }
};
StageMountPlan PrepareStageMounts(const std::vector<StagedRoot>& roots, uid_t euid, gid_t egid);
// In the launch child only: unshare (a user namespace when the plan says so, and a mount
// namespace), make every mount private, and mount each overlay onto its root with the raw
// mount(2), which never retries read-only. Returns 0, or the errno of the step named in *step.
int MountStagesInChild(const StageMountPlan& plan, const char** step);

// Whether this host can stage `root` with an upper layer under `stage_dir`: a real mount of an
// overlay of `root` (never written: the upper is empty and the mount is private to a child that
// exits at once) onto a scratch directory. `reason` says why not.
struct StagingSupport {
  bool available = false;
  std::string reason;
};
// A probe that passed is recorded in `stage_dir` (StagingRecordPath: keyed by the boot, the
// user, the file systems of both and the root) and not made again until a launch's mount fails.
StagingSupport ProbeStaging(const std::string& stage_dir, const std::string& root);
std::string StagingRecordPath(const std::string& stage_dir, const std::string& root);

// Whose a stage is: the session that staged it. Written into the stage with its rules
// (Stage::Create), so that recovery records what it did in that session's log.
struct StageOrigin {
  std::string session;        // the session id
  std::string audit_log;      // its audit log
  std::string policy_sha256;  // its effective policy's hash (session_started.policy_sha256)
};

// A change held for an answer (issue 34, docs/adr/0015-approvals.md): one entry of a stage's
// held manifest (<stage>/held.json).
struct HeldEntry {
  std::size_t root = 0;  // index into the stage's roots
  std::string rel;       // root-relative, as the commit names it
  std::string path;      // as records name it: the first root's relative, the others' absolute
  std::string op;        // created, modified, deleted, replaced (a directory in place of another)
  std::string type;      // file, dir, symlink, whiteout, other
  std::string rule, rule_source;
};

// What a stage asks about its held entries, once per commit, after the rest is installed.
struct HeldQuestion {
  std::string stage;  // the stage directory
  std::uint64_t call = 0;
  std::string tool, owner;  // the process's tool and MCP session (ProcessRequest)
  std::vector<HeldEntry> entries;
  // Up to 20 held regular files (and deleted ones): the host's bytes and the staged ones, each
  // read through descriptors and cut at 64 KiB (`cut` says so), for the question's diff.
  struct Content {
    std::string path, before, after;
    bool before_cut = false, after_cut = false;
  };
  std::vector<Content> contents;
};

struct HeldAnswer {
  bool approve = false;
  std::string approval;  // the approval record's id ("" when none was written)
};
// Asks; blocks until answered. Under CI and with no one to ask it answers no at once.
using HoldAsker = std::function<HeldAnswer(const HeldQuestion&)>;

// A stage's held manifest, as written when its entries were held (Stage::held_manifest()).
struct HeldManifest {
  std::int64_t held_at_ns = 0, expires_at_ns = 0;  // CLOCK_REALTIME
  std::uint64_t call = 0;
  std::string tool, owner;
  std::vector<HeldEntry> entries;
  // Set once an answer is given, before it is applied: a restart finishes it.
  std::optional<HeldAnswer> answer;
  std::string deny_reason = "approval_denied";
};
Result<HeldManifest> ReadHeldManifest(const std::string& stage_dir);

// What recovery did with one stage a killed cordon left (StagedWorkspace::Recover).
struct StageRecovery {
  std::string stage;  // the stage directory as it was
  std::string name;   // "<session dir>-<n>": unique among the stages of <state>/stage
  // From the stage's rules file; absent when it could not be read (the stage is quarantined).
  std::optional<StageOrigin> origin;
  std::vector<std::string> roots;
  // finished (committed by its own rules), quarantined (whole, never installed), kept (its
  // commit could not complete: left for the next start), held (entries wait for an answer in
  // the held store: `cordon approvals`), expired (held past approvals.held_days: quarantined).
  std::string outcome;
  std::string held;  // held: its id in the held store (StagedWorkspace::HeldRoot)
  // quarantined: never_committed, recovery_died, rules_unreadable (and rules_error says why).
  std::string reason, rules_error;
  std::string quarantine;  // quarantined: where the stage went; finished: its refusals' directory
  CommitOutcome commit;    // finished or kept: what was installed, refused, and not done
  // quarantined: the entries of its upper layers (paths as the commit's: the first root's
  // relative, the others' absolute), none of which reached the tree.
  std::vector<std::string> left;
  std::string error;  // the stage could not be moved, or its commit failed
};

// The stage of one confined process. Thread-safe: a long-lived process is committed from the
// call boundaries, its timer and its own end.
class Stage {
 public:
  // Makes <dir>/u<i> and <dir>/w<i> (0700) for each root and the phase file ("running"). Every
  // commit of this stage, recovery's included, decides by `rules`; they and `origin` go into its
  // rules file (StageRulesFile) durably, with the masked paths (SetMasked, before the process
  // starts) or, at the latest, before the first commit.
  static Result<std::unique_ptr<Stage>> Create(std::string dir,
                                               const std::vector<std::string>& roots,
                                               std::string quarantine, CommitRules rules = {},
                                               StageOrigin origin = {});
  ~Stage();  // removes the stage directory (what is left in it was committed or quarantined)
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  const std::vector<StagedRoot>& roots() const { return roots_; }
  // Opens the change window (a host entry changed from here on that the process also changed
  // is a conflict). Called just before the process starts. `wait` false: ChangeWindowT0 without
  // the wait for the coarse clock, which the caller then owes before the process runs (a warm
  // call's init). The window's start.
  std::int64_t OpenWindow(bool wait = true);
  // A commit point. `final`: the process and its overlay are gone, so entries are renamed out of
  // the upper layer; otherwise they are copied and the ledger remembers them. The outcome of
  // this commit; it is also merged into total().
  CommitOutcome Commit(bool final);
  // The absolute paths the launch masks (CommitRules::masked); writes the rules file (durably)
  // with them. Called once, before the process starts; fails when the file cannot be written (the
  // launch fails: a stage whose rules are not on disk would be quarantined whole at recovery).
  Status SetMasked(std::vector<std::string> paths);
  CommitOutcome total() const;
  // The changes committed since the last call of this (merged per path, as total() is), kept
  // only for a stage watched per call (StagedWorkspace::Watch): a call's boundary takes them.
  std::vector<FileChange> TakeUnreported();
  bool failed() const;
  const std::string& dir() const { return dir_; }
  // Who the process is, for the question about its held entries (issue 34).
  void SetCaller(std::uint64_t call, std::string tool, std::string owner);
  // The entries a final commit held that wait for an answer (empty: none wait). A stage with
  // such entries is kept on disk (~Stage) with its manifest and the phase `held`.
  std::vector<HeldEntry> held() const;
  // The answer for held entries: installs them through the same commit (approve; conflicts
  // measured from the window's start), or moves them to the quarantine with `deny_reason`. The
  // answer is written into the manifest before it is applied, so that a restart finishes it.
  CommitOutcome Answer(const HeldAnswer& answer,
                       const std::string& deny_reason = "approval_denied");
  // A stage a cordon left on disk, by its own rules file, roots and phase (the window's start),
  // and its held manifest when it has one: for recovery and `cordon approvals`.
  static Result<std::unique_ptr<Stage>> Reopen(const std::string& dir, std::string quarantine,
                                               GitReader git_reader = {});
  // The question about the held entries: their paths and operations, and the bytes of up to 20
  // of them on both sides, read through descriptors.
  HeldQuestion Question() const;
  const StageOrigin& origin() const { return origin_; }

 private:
  friend class StagedWorkspace;  // recovery rebuilds a stage a killed cordon left
  enum class Pass { kFirst, kApprove, kDeny };
  // One commit over every root: kFirst holds what the path rules ask about (in *held when
  // final); kApprove and kDeny apply an answer to the manifest's entries only.
  CommitOutcome CommitRoots(bool final, Pass pass, std::vector<HeldEntry>* held,
                            const std::string& approval, const std::string& deny_reason);
  CommitOutcome AnswerLocked(const HeldAnswer& answer, const std::string& deny_reason);
  Status WriteHeld();  // mu_ held: the manifest, durably
  struct RootState {
    UniqueFd root_fd, upper_fd;
    bool same_fs = false;
    CommitLedger ledger;
  };
  // Opens a staged root's host tree and upper layer, and sees whether they share a filesystem
  // (a final commit then renames out of the upper layer). A failure is reported as `code`.
  static Result<RootState> OpenRoot(const StagedRoot& r, Code code);
  Stage() = default;
  void WritePhase(const char* phase);
  Status WriteRules();  // mu_ held
  bool rules_written_ = false;
  std::string dir_, quarantine_;
  CommitRules rules_;
  StageOrigin origin_;
  std::vector<StagedRoot> roots_;
  std::vector<RootState> state_;
  std::vector<std::string> masked_;
  std::int64_t t0_ns_ = 0;
  std::shared_ptr<BeforeImageStore> before_images_;  // [audit] before_images; null: off
  GitReader git_reader_;  // git content's check (workspace/git_content.h); none: fail closed
  mutable std::mutex mu_;
  CommitOutcome total_;
  bool per_call_ = false;
  std::vector<FileChange> unreported_;
  std::uint64_t commits_ = 0;
  // Held entries (issue 34).
  HoldAsker hold_asker_;
  std::int64_t held_days_ = 7;
  HeldManifest manifest_;
  bool holding_ = false;  // manifest_ names entries that wait for an answer
  std::uint64_t call_ = 0;
  std::string tool_, owner_;
};

// A stage's rules file, <dir>/rules.json: {version, session, audit_log, policy_sha256, rules
// (CommitRulesJson), masked (absolute paths)}, written by a temporary file, fsync, rename and
// fsync of the directory.
std::string StageRulesFile(const std::string& stage_dir);

// The session's staging: its own directory under <state>/stage, the stages of its processes,
// the live ones (committed at every call boundary and by a one-second timer), and the recovery
// of what a killed cordon left in <state>/stage.
class StagedWorkspace {
 public:
  using Sink = std::function<void(const GuardEvent&)>;
  // Receives what recovery did with the stages killed cordons left (one entry per stage), once,
  // from the constructor: the session records each in the log of the session that staged it.
  using RecoverySink = std::function<void(std::vector<StageRecovery>)>;
  // `rules` and `origin` go into every stage this session makes (Stage::Create). `git_reader`:
  // how every stage's final commit, and the recovery of a killed cordon's stages, reads the git
  // content it would land (workspace/git_content.h); without one, an index or a moved ref is
  // refused (fail closed).
  StagedWorkspace(std::string quarantine, CommitRules rules, StageOrigin origin, Sink sink,
                  const RecoverySink& recovered = {}, GitReader git_reader = {});
  ~StagedWorkspace();
  StagedWorkspace(const StagedWorkspace&) = delete;
  StagedWorkspace& operator=(const StagedWorkspace&) = delete;

  // How held entries are asked about, and how long they wait unanswered (issue 34): given to
  // every later stage.
  void SetHolding(HoldAsker asker, std::int64_t held_days) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_asker_ = std::move(asker);
    held_days_ = held_days;
  }
  // [audit] before_images: the store every later stage's commits keep replaced files in.
  void SetBeforeImages(std::shared_ptr<BeforeImageStore> store) {
    std::lock_guard<std::mutex> lock(mu_);
    before_images_ = std::move(store);
  }
  // <state>/stage, where every session's stages live.
  static std::string StageRoot();
  // <state>/held: stages whose held entries wait for an answer after their cordon ended, one
  // directory each, named by its id (`cordon approvals`). Beside `stage_root`.
  static std::string HeldRoot(const std::string& stage_root = StageRoot());
  // Moves the stages of sessions that are gone whose phase is `held` (their question was open
  // when cordon was killed) into the held store; the ids moved.
  static std::vector<std::string> CollectHeld(const std::string& stage_root = StageRoot());
  // The held store's stages (after CollectHeld), by id.
  struct HeldStage {
    std::string id, dir;
    std::optional<StageOrigin> origin;
    HeldManifest manifest;
    std::string error;  // why its manifest or its rules could not be read
  };
  static std::vector<HeldStage> ListHeld(const std::string& stage_root = StageRoot());
  // This session's directory there (made with its first stage, or by EnsureDir).
  const std::string& dir() const { return dir_; }
  Status EnsureDir();
  Result<std::shared_ptr<Stage>> NewStage(const std::vector<std::string>& roots);
  // A long-lived process's stage: committed at each CommitLive until Forget. `per_call`: what
  // it commits is also kept for the call boundary that takes it (an MCP server's changes belong
  // to the calls it answers; a background job's only to its own process record).
  void Watch(std::shared_ptr<Stage> stage, bool per_call = false);
  void Forget(const std::shared_ptr<Stage>& stage);
  // A commit point for every long-lived process (a call boundary, the timer). `per_call`, given
  // at a call boundary: receives the changes the stages watched per call committed since the
  // last boundary (this one's and the timer's), merged per path.
  void CommitLive(std::vector<FileChange>* per_call = nullptr);
  // The final commit of an ended process; its refusals are reported to the sink.
  CommitOutcome CommitFinal(Stage& stage);
  // A stage whose final commit is done: removed (~Stage) by the session's reaper thread, after
  // the call has its result (on a busy disk each unlink of a stage's five entries waits for the
  // journal). The session's end waits for the reaper, then removes its whole directory.
  void Retire(std::shared_ptr<Stage> stage);
  // The first commit failure stops the session's launches (fail closed), with this message.
  std::optional<Error> poisoned() const;
  // Finishes or quarantines the stages of cordon processes that are gone (phase file), each by
  // the rules it carries (StageRulesFile), never the caller's: a stage whose rules file is
  // missing or unreadable goes to the quarantine whole. What it did, one entry per stage.
  // Called once per session, before its first stage.
  static std::vector<StageRecovery> Recover(const std::string& stage_root,
                                            const std::string& quarantine,
                                            const GitReader& git_reader = {});

 private:
  void Report(const CommitOutcome& o, const Stage& stage, const char* when);
  std::string dir_, quarantine_;
  CommitRules rules_;
  StageOrigin origin_;
  Sink sink_;
  mutable std::mutex mu_;
  std::uint64_t next_ = 0;
  std::vector<std::shared_ptr<Stage>> live_;
  std::shared_ptr<BeforeImageStore> before_images_;
  GitReader git_reader_;
  HoldAsker hold_asker_;
  std::int64_t held_days_ = 7;
  std::optional<Error> poisoned_;
  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool stop_ = false;
  std::thread timer_;
  std::mutex reap_mu_;
  std::condition_variable reap_cv_;
  std::vector<std::shared_ptr<Stage>> retired_;
  bool reap_stop_ = false;
  std::thread reaper_;
};

}  // namespace cordon
