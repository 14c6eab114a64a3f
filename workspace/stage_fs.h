// Descriptor helpers shared by the staged commit's listing and its apply step (workspace/stage.h):
// a chain of directory fds that resolves one component at a time, so no path string ever
// reaches the kernel whole (a path may exceed PATH_MAX) and no symlink is followed on the way.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"
#include "workspace/stage.h"

namespace cordon::stage {

// "a/b/c" -> "a/b"; "c" -> "".
std::string_view ParentOf(std::string_view rel);
// "a/b/c" -> "c".
std::string_view LeafOf(std::string_view rel);
// True when `path` lies strictly below `dir` ("" is the root: everything is below it).
bool IsBelow(std::string_view path, std::string_view dir);
std::vector<std::string_view> SplitRel(std::string_view rel);
// Whether one of `rel`'s components is `name`.
bool HasComponent(std::string_view rel, std::string_view name);

// Opens one directory entry `name` of `parent` as a directory: openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS with O_NOFOLLOW, so a symlink in its place (or a
// name that is not one component) fails instead of leading anywhere.
Result<UniqueFd> OpenDirBeneath(int parent, std::string_view name, const std::string& where);

// statx of `name` in `dir_fd`, never following it; nullopt when there is no such entry.
Result<std::optional<struct statx>> StatAt(int dir_fd, const std::string& name,
                                           const std::string& where);
InodeSig SigOf(const struct statx& sx);

// The names in a directory (without . and ..), in byte order. A read error fails.
Result<std::vector<std::string>> ReadNames(int dir_fd, const std::string& where);

// Whether deleting the host's `rel` (an entry below a directory a commit deletes or clears) would
// delete what the rules protect: a protected name, git metadata, a `.git` itself (a repository's
// history and config), or a path the repository's config executes. The pure rule of
// stage_plan.cc, applied by the apply step to what only the host tree shows.
bool DeletionTakesProtected(std::string_view rel, const CommitRules& rules);

// The directories along one path below a root, each opened from its parent (OpenDirBeneath).
// Entries arrive parents first and siblings together, so the next entry's directory is almost
// always the current one or a neighbour: a listing of N entries costs about N stats and one open
// per directory, not N openat2 chains.
class DirChain {
 public:
  explicit DirChain(int root_fd) : root_(root_fd) {}
  // The fd of directory `dir` ("" for the root). With `create_mode`, missing components are made
  // with mkdirat (the quarantine's tree); otherwise a missing one fails (kNotFound).
  Result<int> Open(std::string_view dir, std::optional<mode_t> create_mode = std::nullopt);
  // Forgets every open directory: after one was removed or replaced, a cached fd would lead into
  // a directory that is no longer in the tree.
  void Reset() {
    names_.clear();
    fds_.clear();
  }

 private:
  int root_;
  std::vector<std::string> names_;
  std::vector<UniqueFd> fds_;
};

}  // namespace cordon::stage
