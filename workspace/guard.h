// The workspace guard: one full walk of each writable root finds every git directory and every
// protected name (for the launch's read-only binds), and the sweep moves the protected names
// that appeared while a confined process ran into cordon's quarantine and strips set-user-ID
// and set-group-ID bits. Nothing here ever creates a placeholder in the workspace.
#pragma once

#include <sys/types.h>

#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "policy/policy.h"
#include "workspace/changes.h"
#include "workspace/protected.h"

namespace cordon {

struct GuardOptions {
  // Past this many directory entries the walk refuses (sandbox_unavailable): it never gives
  // up silently and lets a repository through.
  std::size_t max_entries = static_cast<std::size_t>(kDefaultMaxScanEntries);
  std::vector<std::string> extra_names;  // filesystem.protected_names
  // The launch's scan also keeps a metadata snapshot (workspace/changes.h): audit.file_changes.
  bool snapshot = false;
  // Up to this many deferred entries the launch's scan runs the statx pass itself; above, the
  // launch runs it beside the process (SnapshotFill).
  std::size_t sync_fill_entries = SnapshotFill::kSyncFillEntries;
  static GuardOptions From(const Policy& policy);
};

// One protected entry a walk found: a `.git` (dir, file or anything else), `.git/config` and
// `.git/hooks` of a git dir, or a name IsProtectedPath covers. Nothing below one is walked.
// ScanProtectedPaths and the sweep add the paths a host repository's config executes from
// (core.hooksPath, ...: workspace/repo_config.h) that exist.
struct GuardFound {
  std::string path;  // absolute
  PathKind kind = PathKind::kOther;
  bool git = false;  // a `.git` entry itself
};

struct WorkspaceWalk {
  std::vector<GuardFound> found;
  std::vector<std::string> git_dirs;      // absolute
  std::vector<std::string> setuid_files;  // absolute; only when the walk read modes
  std::size_t entries = 0;
  std::vector<SnapEntry> snapshot;    // only when asked for (change records)
  std::vector<DeferredDir> deferred;  // the launch's walk: entries whose statx is deferred
};

// A full getdents64 walk of `root`: every depth, node_modules/target/.venv included, DT_UNKNOWN
// resolved with fstatat, symlinks never followed. `read_modes` stats every regular file to
// find set-user-ID/set-group-ID bits. Fails with sandbox_unavailable past the cap, or when a
// directory the sandbox could open up cannot be read.
// `snapshot` also statx-es every entry it visits into WorkspaceWalk::snapshot.
Result<WorkspaceWalk> WalkWritableRoot(const std::string& root, const GuardOptions& opts,
                                       bool read_modes, bool snapshot = false);

// What a launch binds: the walk of each writable root, refusing a protected symlink or special
// file (the sandbox could write through it).
Result<ProtectedScan> ScanProtectedPaths(const std::vector<std::string>& roots,
                                         const GuardOptions& opts);
Result<ProtectedScan> ScanProtectedPaths(const std::string& workspace,
                                         const GuardOptions& opts = {});

// Something the sweep did, for the audit log (the session turns each into a record).
struct GuardEvent {
  enum class Kind { kProtectedRemoved, kSetuidStripped };
  Kind kind = Kind::kProtectedRemoved;
  std::string path{};        // absolute, as it was in the workspace
  std::string entry_kind{};  // dir, file, symlink, other
  std::string quarantine{};  // where it went (kProtectedRemoved)
  mode_t mode_before = 0;    // kSetuidStripped
  mode_t mode_after = 0;     // kSetuidStripped
  std::string error{};       // non-empty when the move or chmod failed
  std::string when{};        // process_end, call_boundary, launch; staged: commit
  std::string reason{};      // staged: the rule that refused it (workspace/stage.h)
  Json git = nullptr;        // reason git_content: what it would have landed (RefusedEntry::git)
};

// Moves `path` (never following a symlink, through fds opened beneath `root`) to `dest`,
// copying and removing when the two lie on different filesystems. Exposed for tests.
Status MoveBeneath(const std::string& root, const std::string& path, const std::string& dest);

// The session's guard. Protected entries that existed when the session (or, after a quiet
// moment with no process running, the next launch) looked are the baseline; whatever else a
// walk finds under a protected name was made by a confined process, and is swept.
class WorkspaceGuard {
 public:
  using Sink = std::function<void(const GuardEvent&)>;
  WorkspaceGuard(std::vector<std::string> roots, GuardOptions opts, std::string quarantine_dir,
                 Sink sink);

  // Before planning a launch: sweeps when a process runs, or when an earlier sweep could not
  // complete (then the launch is refused, sandbox_unavailable, until a sweep completes).
  // Returns a token for Launched.
  Result<std::uint64_t> BeforeLaunch();
  // After the plan: the launch's scan (when it made one: `scanned`) becomes the baseline when no
  // process ran in between.
  void Launched(std::uint64_t token, bool scanned, const std::vector<ProtectedEntry>& protect,
                const std::vector<std::string>& git_dirs);
  // A launched process ended (or failed to start): sweep. With `after`, the sweep's walk also
  // fills it (the change record's after side); it stays empty when the sweep did not walk.
  // Fails (sandbox_unavailable) when the sweep could not complete: the call fails with it.
  Status AfterProcess(TreeSnapshot* after = nullptr);
  // A tool call ended: sweep while a long-lived process runs.
  Status AtCallBoundary();
  // Sweeps now; `when` is recorded. Fails closed: a walk that stops (the entry cap, an unreadable
  // directory) or an entry it cannot move or strip fails it, names every such path, and leaves
  // the guard broken (every launch refused) until a later sweep completes.
  Status Sweep(const std::string& when, TreeSnapshot* after = nullptr);
  // Why the last sweep failed, while no sweep has completed since.
  std::optional<Error> broken();
  const std::string& quarantine_dir() const { return quarantine_; }

 private:
  std::vector<std::string> roots_;
  GuardOptions opts_;
  std::string quarantine_;
  Sink sink_;
  std::mutex mu_;        // state below
  std::mutex sweep_mu_;  // one sweep at a time
  std::set<std::string> baseline_;
  int active_ = 0;
  std::uint64_t generation_ = 0;
  bool have_baseline_ = false;
  std::optional<Error> broken_;
};

}  // namespace cordon
