// Change records: what a confined process created, modified, deleted, renamed, linked or
// chmod-ed in the writable roots, from two metadata snapshots (the launch's walk and the
// process-end sweep's walk, runner/workspace_guard.h), diffed by path and inode
// (docs/adr/0004-change-records.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
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
  bool git = false;  // inside (or is) a git directory: counted, not listed
};

struct RootSnapshot {
  std::string root;  // absolute
  std::vector<SnapEntry> entries;
};

// The writable roots as one walk saw them.
struct TreeSnapshot {
  std::vector<RootSnapshot> roots;
};

// Appends `name` (in `dir_fd`, at root-relative `rel`) to `out`; false when it is gone.
bool SnapshotAdd(std::vector<SnapEntry>& out, int dir_fd, const char* name, std::string rel,
                 bool git);

struct FileChange {
  std::string kind;  // created, modified, touched, deleted, renamed, linked, mode_changed
  std::string path;  // root-relative; the new name of a rename
  std::string from;  // renamed: the old name; linked: an existing name of the inode
  std::string type;  // file, dir, symlink, other
  std::optional<std::uint64_t> bytes_before, bytes_after;
  std::optional<std::uint32_t> mode_before, mode_after;  // permission bits, when they changed
  std::uint64_t below = 0;  // a deleted directory: the entries that went with it
  bool content = false;     // renamed: the content changed too
  bool git = false;
  // For hashing: the before and after identity.
  std::optional<SnapEntry> was, now;
};

// Pure: the changes between two snapshots of one root, sorted by path. A directory renamed is
// one `renamed` (what moved with it is compared under its new name); a deleted directory
// folds what was below it into `below`.
std::vector<FileChange> DiffRoot(const RootSnapshot& before, const RootSnapshot& after);

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
