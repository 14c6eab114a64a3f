// Change records: what a confined process created, modified, deleted, renamed, linked or
// chmod-ed in the writable roots, from two metadata snapshots (the launch's walk and the
// process-end sweep's walk, workspace/guard.h), diffed by path and inode
// (docs/adr/0004-change-records.md).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "core/text.h"

namespace cordon {

// One directory entry as statx saw it (never following a symlink).
struct SnapEntry {
  std::string path;  // relative to its root
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  std::uint32_t mode = 0;  // type and permission bits
  std::uint32_t nlink = 0;
  std::int64_t btime_ns = 0;  // birth time, 0 where the filesystem keeps none: a reused inode
                              // number is another inode
  bool git = false;           // inside (or is) a git directory: counted, not listed
  // Deferred: only the name, the inode number (getdents' d_ino), the type and the directory's
  // device are known yet; the statx pass fills the rest (FillDeferred).
  bool deferred = false;
  // The statx pass came too late: the inode changed after the process started (its ctime is
  // at or after the launch), so its state before is unknown. Never equal to any entry.
  bool lost = false;
};

// The entries of one directory that a launch walk deferred: [first, end) in `entries`, all
// named below `dir` (root-relative, "" for the root), whose identity the walk saw as
// (dir_dev, dir_ino).
struct DeferredDir {
  std::size_t first = 0, end = 0;
  std::string dir;
  std::uint64_t dir_dev = 0, dir_ino = 0;
};

struct RootSnapshot {
  std::string root;  // absolute
  std::vector<SnapEntry> entries;
  std::vector<DeferredDir> deferred{};  // emptied by FillDeferred
  // A launch's before side: when the change window opened (ChangeWindowStart), 0 when no entry
  // was deferred past the launch. The diff decides an entry still deferred from it.
  std::int64_t window_start_ns = 0;
};

// The writable roots as one walk saw them.
struct TreeSnapshot {
  std::vector<RootSnapshot> roots;
  std::size_t Deferred() const;  // entries still waiting for their statx
};

// Appends `name` (in `dir_fd`, at root-relative `rel`) to `out`; false when it is gone.
bool SnapshotAdd(std::vector<SnapEntry>& out, int dir_fd, const char* name, std::string rel,
                 bool git);

// The statx pass over the deferred entries (docs/adr/0004-change-records.md, "the before side
// beside the process"). Without `t0_ns` (before the launch) each entry takes what statx sees now
// and a vanished one is dropped. With `t0_ns` (ChangeWindowStart(), taken before the process
// started) an entry whose inode changed at or after t0 (ctime, which
// no process can set back), whose name now holds another inode, or that is gone, keeps only its
// name, inode and type and is marked `lost`: what it was before is unknown, and the diff reports
// it changed. A directory opened again is checked against the identity the walk saw, and never
// through a symlink.
// With `stop`, returns early once it is set and leaves the rest deferred.
void FillDeferred(TreeSnapshot& snap, std::optional<std::int64_t> t0_ns,
                  const std::atomic<bool>* stop = nullptr);

// Runs FillDeferred beside the confined process, on idle CPU only: started just after it,
// stopped (not waited for) when it has ended and the sweep has walked the after side; what the
// pass did not reach stays deferred and the diff decides it (DiffRoot). Below kSyncFillEntries
// deferred entries the launch fills them itself (a fraction of a millisecond).
class SnapshotFill {
 public:
  static constexpr std::size_t kSyncFillEntries = 4096;
  // Opens the change window (ChangeWindowStart: at most one clock tick): construct it before the
  // process starts, and Start() once it has.
  explicit SnapshotFill(std::shared_ptr<TreeSnapshot> snap);
  ~SnapshotFill();  // Finish()
  SnapshotFill(const SnapshotFill&) = delete;
  SnapshotFill& operator=(const SnapshotFill&) = delete;
  void Start();
  // Stops the pass where it is and joins it. Not thread-safe against itself.
  void Finish();
  std::int64_t t0_ns() const { return t0_ns_; }

 private:
  std::shared_ptr<TreeSnapshot> snap_;
  std::int64_t t0_ns_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The coarsest timestamp step the root's filesystem could be using, from the ctimes its walk
// stat-ed (their greatest common divisor, at most 2 s): 1 ns on ext4, tmpfs, btrfs, xfs; 1 s on
// ext4 with 128-byte inodes. The window start is cut down to it (SnapshotFill).
std::int64_t TimestampGranularityNs(const RootSnapshot& root);

// The start of a change window: every inode change from the moment this returns has a ctime at
// or after the value returned, and every change before the call a ctime before it. Waits at
// most one clock tick.
std::int64_t ChangeWindowStart();
// The value ChangeWindowStart returns (CLOCK_REALTIME now), without its wait: the caller makes
// sure the coarse clock has reached it before the process it watches can change anything (a
// warm call's init waits for it in the sandbox, runner/shim/serve.cc).
std::int64_t ChangeWindowT0();

struct FileChange {
  std::string kind;  // created, modified, touched, deleted, renamed, linked, mode_changed
  std::string path;  // root-relative; the new name of a rename
  std::string from;  // renamed: the old name; linked: an existing name of the inode
  std::string type;  // file, dir, symlink, other
  std::optional<std::uint64_t> bytes_before, bytes_after;
  std::optional<std::uint32_t> mode_before, mode_after;  // permission bits, when they changed
  std::uint64_t below = 0;      // a deleted directory: the entries that went with it
  bool content = false;         // renamed: the content changed too
  bool before_unknown = false;  // the before side was `lost` (SnapEntry::lost)
  bool git = false;
  // A staged commit's hashes (workspace/stage.h), where it hashed the file.
  std::optional<std::string> sha256_before, sha256_after;
  // [audit] before_images: what storing the old content did (stored, over_file_cap,
  // over_session_cap, failed) and, failed, why. Empty when off or nothing was replaced.
  std::string before_image, before_image_error;
  // A change held for approval and installed on its answer: the approval record's id.
  std::string approval;
  // For hashing: the before and after identity.
  std::optional<SnapEntry> was, now;
};

// Pure: the changes between two snapshots of one root, sorted by path. A directory renamed is
// one `renamed` (what moved with it is compared under its new name); a deleted directory
// folds what was below it into `below`.
std::vector<FileChange> DiffRoot(const RootSnapshot& before, const RootSnapshot& after);

// Path order with '/' lowest, so that everything below a directory follows it directly (the
// order of the change records).
bool ChangePathLess(const FileChange& x, const FileChange& y);

// A file mode as the records show it: octal digits, no prefix ("100644").
std::string OctalMode(std::uint32_t mode);

// A path as a change record shows it, byte-exact and reversible: valid UTF-8 is kept, a
// backslash is written `\\`, and each byte that is not part of valid UTF-8 is written `\xHH`
// (two lower-case hex digits). Two names never collapse into one, as they would if the invalid
// bytes became U+FFFD (docs/audit.md, "Names that are not UTF-8").
std::string EscapeName(std::string_view name);

struct ChangeLimits {
  std::size_t max_entries = 200;          // listed; the rest are counted
  std::uint64_t hash_cap = 16u << 20;     // a file larger is not hashed ("over_cap")
  std::uint64_t hash_budget = 64u << 20;  // bytes hashed per record ("budget")
  std::size_t cache_entries = 1u << 16;   // the session's hash cache
};

// The session's change recorder: diffs, hashes what changed (after), and keeps a cache of the
// hashes it computed, keyed by (dev, ino, size, mtime, ctime), which gives a later record its
// `sha256_before`.
class ChangeRecorder {
 public:
  explicit ChangeRecorder(ChangeLimits limits = {}) : limits_(limits) {}
  // The `changes` field of a process record. Paths in the first root (the workspace) are
  // relative to it; other roots' are absolute. `concurrent`: another process ran in the window.
  // Nothing at or below an `exclude` path (cordon's own files: its log is written meanwhile)
  // is listed or counted.
  Json Record(const TreeSnapshot& before, const TreeSnapshot& after, bool concurrent,
              const std::vector<std::string>& exclude = {});

 private:
  using Key = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::int64_t, std::int64_t>;
  static Key KeyOf(const SnapEntry& e) { return {e.dev, e.ino, e.size, e.mtime_ns, e.ctime_ns}; }
  std::optional<std::string> Cached(const SnapEntry& e);
  void Remember(const SnapEntry& e, const std::string& sha);
  ChangeLimits limits_;
  std::mutex mu_;
  std::map<Key, std::string> cache_;
};

}  // namespace cordon
