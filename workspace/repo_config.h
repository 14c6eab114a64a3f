// The paths a host repository's own configuration executes from or reads as configuration
// (core.hooksPath, core.fsmonitor, include.path, command-valued keys: policy/git_rules.h), read
// from the host through descriptors beneath the workspace root. They are protected like
// `.git/hooks`: the file tools refuse them, the direct mode's guard binds and sweeps them, and the
// staged commit refuses them (CommitRules::repo_protected, workspace/stage.h).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "policy/git_rules.h"

namespace cordon {

// Reads the config of the repository at the workspace root and of every repository whose
// worktree is an ancestor directory of a path in `changed_rels` (workspace-relative): a `.git`
// directory's `config` and `config.worktree`; a `.git` file's `gitdir:` target's (and its
// commondir's) when it lies beneath the root; and the files they include that lie beneath the
// root (git's depth of 10). Every open is openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS beneath
// `root_fd`, every file is read up to 1 MiB, and each distinct ancestor costs one openat2 however
// many changed paths lie below it. What cannot be read is left out (git cannot read it either).
// The union of GitConfigExecutedEntries, sorted by path, one entry per path.
std::vector<GitConfigPath> RepoExecutedPaths(int root_fd,
                                             std::span<const std::string> changed_rels);
// The paths alone.
std::vector<std::string> RepoProtectedPaths(int root_fd, std::span<const std::string> changed_rels);
// The repository at the root of `workspace_root` only.
std::vector<std::string> RepoProtectedPaths(const std::string& workspace_root);

}  // namespace cordon
