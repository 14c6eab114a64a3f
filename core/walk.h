// One bounded walk of a directory tree through descriptors: every directory is opened beneath
// its parent's fd with O_NOFOLLOW (a symlink is an entry, never a way out), the walk keeps its
// own stack (a deep tree cannot exhaust the thread's stack), and every bound has a stated rule.
//
// The rules, for every caller:
// - depth: the root is at depth 0, its subdirectories at 1, and so on. A directory the visitor
//   descends into that lies deeper than `max_depth` is not opened: with TooDeep::kFail the walk
//   fails with too_large naming it, with TooDeep::kSkip it is left out and the report says
//   `truncated`.
// - entries: past `max_entries` entries in all, the walk fails (kFail, too_large) or stops
//   (kSkip, `truncated`).
// - xdev: a directory on another filesystem than the root's is not entered (as `find -xdev`).
// - open: a directory that cannot be opened goes to `unopenable`, which decides for every errno
//   (a listing that must fail closed when a directory is swapped for a symlink meanwhile sees
//   ELOOP/ENOTDIR there). Without the hook, one that vanished or became a non-directory
//   (ENOENT, ENOTDIR, ELOOP) is skipped, and any other error fails the walk.
// At most one descriptor per level is open, plus the root's (which the caller keeps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/unique_fd.h"

namespace cordon {

enum class TooDeep { kFail, kSkip };

struct WalkEntry {
  int dir_fd = -1;         // the directory holding the entry, open during the callback
  const char* name = "";   // one path component
  const std::string* rel;  // the entry's path relative to the root
  unsigned char type = 0;  // getdents' d_type (DT_UNKNOWN possible: fstatat the name)
  std::size_t depth = 0;   // of the directory holding the entry: 0 for the root's entries
};

enum class Visit {
  kNext,     // go on with the next entry
  kDescend,  // walk this directory's entries (depth first), then go on
  kStop,     // end the walk here (not an error)
};

struct WalkOptions {
  std::size_t max_depth = 256;
  TooDeep too_deep = TooDeep::kFail;
  std::size_t max_entries = std::numeric_limits<std::size_t>::max();
  TooDeep too_many = TooDeep::kFail;
  bool xdev = false;
  // Each directory's entries in byte order of name (else the order getdents gives).
  bool sorted = false;
  // What the messages call the tree ("the upper layer", "the workspace").
  std::string what = "the tree";
};

struct WalkReport {
  std::size_t entries = 0;
  std::size_t directories = 0;  // opened and listed, the root included
  bool truncated = false;       // a bound with TooDeep::kSkip left something out
};

struct WalkHooks {
  // Called for every entry ("." and ".." are never passed).
  std::function<Result<Visit>(const WalkEntry&)> visit;
  // After a directory the visitor descended into is opened, before it is listed: `e` is the
  // directory as an entry of its parent, `fd` the directory itself.
  std::function<Status(const WalkEntry& e, int fd)> enter;
  // After all of a directory's entries were walked (post-order), with its parent's fd open:
  // where a directory can be removed once it is empty.
  std::function<Status(const WalkEntry& e)> leave;
  // A directory that could not be opened (errno in `err`, whatever it is): return a fd opened
  // another way, an invalid fd to skip it, or an error to end the walk. Unset: see "open" above.
  std::function<Result<UniqueFd>(const WalkEntry& e, int err)> unopenable;
};

// Walks the directory `root_fd` (not closed). The visitor decides what is descended into.
Result<WalkReport> WalkTree(int root_fd, const WalkOptions& options, const WalkHooks& hooks);

// Opens `name` beneath `dir_fd` as a directory, never following a symlink.
UniqueFd OpenSubdir(int dir_fd, const char* name);

}  // namespace cordon
