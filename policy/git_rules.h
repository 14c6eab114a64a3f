// The one definition of what may be written inside a git directory: what a commit, checkout,
// stash or rebase needs, and nothing that tells git what to run. The git view (workspace/git_view)
// and the file tools (tools/registry) both derive from it. Pure: names in, decisions out.
#pragma once

#include <string_view>

namespace cordon {

// Directories at the top of a git directory that are shared with the host read-write.
bool IsGitSharedDir(std::string_view name);
// Files at the top of a git directory that git rewrites by lock + rename (HEAD, index,
// packed-refs, COMMIT_EDITMSG, AUTO_MERGE, every *_HEAD): private copies synced to the host.
bool IsGitSyncedFile(std::string_view name);
// `rel` is relative to a git directory: true when it may be written (a shared directory's
// contents, a synced file, or git's lock file for one). modules/NAME/... and worktrees/NAME/...
// are git directories of their own and follow the same rule.
bool IsGitWritable(std::string_view rel);
// `rel` is relative to the workspace: false when it lies inside a directory named `.git` (at
// any depth) and IsGitWritable refuses what follows. A path that only names `.git` itself is
// left to IsProtectedPath.
bool GitRuleAllowsWrite(std::string_view rel);

}  // namespace cordon
