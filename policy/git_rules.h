// The one definition of what may be written inside a git directory: what a commit, checkout,
// stash or rebase needs, and nothing that tells git what to run. The git view (workspace/git_view)
// and the file tools (tools/registry) both derive from it. And the paths outside a git directory
// that a repository's own configuration executes or reads as configuration (core.hooksPath,
// core.fsmonitor, include.path, command-valued keys), read from its git-config text. Pure: names
// and text in, decisions out.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cordon {

// Directories at the top of a git directory that are shared with the host read-write.
bool IsGitSharedDir(std::string_view name);
// Files at the top of a git directory that git rewrites by lock + rename (HEAD, index,
// packed-refs, COMMIT_EDITMSG, AUTO_MERGE, every *_HEAD): private copies synced to the host.
// sharedindex.<40 or 64 hex> (git update-index --split-index) is one too: the index names it.
bool IsGitSyncedFile(std::string_view name);
// `rel` is relative to a git directory: true when it may be written (a shared directory's
// contents, a synced file, or git's lock file for one). modules/NAME/... and worktrees/NAME/...
// are git directories of their own and follow the same rule.
bool IsGitWritable(std::string_view rel);
// `rel` is relative to the workspace: true when it lies inside a directory named `.git` and
// names git content (a ref below any refs/, an index, a HEAD, a packed-refs, or git's lock file
// for one). What it names is checked against the tree rules only when git writes it in a
// sandbox (workspace/git_content.h): the file tools never write it.
bool IsGitContentPath(std::string_view rel);
// `rel` is relative to the workspace: false when it lies inside a directory named `.git` (at
// any depth) and IsGitWritable refuses what follows. A path that only names `.git` itself is
// left to IsProtectedPath.
bool GitRuleAllowsWrite(std::string_view rel);
// `rel` is relative to the workspace: true when it names a part of a repository's minimum
// structure inside a directory named `.git`: a git directory's HEAD, objects/ or refs/ (the top
// one's, a submodule's under modules/, a linked worktree's HEAD under worktrees/). Without one,
// git takes the directory for no repository and falls through to a parent directory's: it is
// never deleted, and a HEAD is replaced only by one git reads (IsGitHeadContent).
bool IsGitRepositoryStructure(std::string_view rel);
// `rel` is relative to a git directory (one not named `.git`, CommitRules::git_dirs): the same.
bool IsGitDirStructure(std::string_view rel);
// Whether `content` is a HEAD git reads: "ref: refs/NAME" or an object id (40 or 64 lower-case
// hex digits), then a newline or the end.
bool IsGitHeadContent(std::string_view content);

// A path that a repository's configuration makes git execute, or read as more configuration.
struct GitConfigPath {
  std::string path;  // workspace-relative, normalized, never empty, never outside the workspace
  std::string key;   // the key that names it, as git's documentation spells it: core.hooksPath
};

// Sorted by path, one entry per path (the first key that names it, in key order).
void SortUniqueByPath(std::vector<GitConfigPath>& paths);

// Where one config file lies, all relative to the workspace root ("" for the root itself).
struct GitConfigPlace {
  std::string_view worktree;    // the repository's worktree: hooks, commands and aliases run there
  std::string_view config_dir;  // the config file's directory: relative include paths resolve there
  // When not empty, the workspace's absolute path: an absolute value beneath it is taken too.
  std::string_view workspace_abs = {};
};

// Parses git-config text (sections, "subsections", legacy [section.sub], quotes, escapes,
// continuation lines, ; and # comments, case-insensitive section and key names; a line git would
// refuse is skipped) and returns, sorted and without duplicates, the paths in the workspace that
// git executes or reads as configuration because of it:
//  - core.hooksPath (relative to the worktree; a hooks directory that is the worktree itself or
//    above it gives its hook names instead; husky's `.husky/_` also gives `.husky`, which its
//    `_/h` runs hooks from);
//  - core.fsmonitor when it is not a boolean;
//  - include.path and includeIf.*.path (relative to config_dir, so `../x` is in the worktree);
//  - for command-valued keys (core.editor, core.pager, core.sshCommand, core.askPass,
//    core.gitProxy, diff.external, diff.*.command|textconv, filter.*.clean|smudge|process,
//    merge.*.driver, credential[.*].helper starting with `!`, gpg[.*].program, sequence.editor,
//    alias.* and submodule.*.update starting with `!`, uploadpack.packObjectsHook, pager.*,
//    interactive.diffFilter, mergetool|difftool|browser|man.*.cmd|path, trailer.*.cmd|command,
//    tar.*.command, guitool.*.cmd, remote.*.uploadpack|receivepack, sendemail.*cmd,
//    gpg.ssh.defaultKeyCommand, init.templateDir) the program when it looks like a path in the
//    worktree (`./x`, `scripts/hook.sh`; a bare name like `less` is looked up on PATH), and the
//    script an interpreter runs (`node scripts/x.js`, `sh -c './x'`).
// Absolute paths outside workspace_abs, `~` and `$VAR` paths, and anything that leaves the
// workspace are dropped. Linear in the text; never throws on any input (NUL bytes, unterminated
// quotes, megabytes of one line).
std::vector<GitConfigPath> GitConfigExecutedEntries(std::string_view config_text,
                                                    const GitConfigPlace& place);
// The paths alone, for the repository whose worktree is `repo_root_rel` and whose config is in
// `repo_root_rel/.git`.
std::vector<std::string> GitConfigExecutedPaths(std::string_view config_text,
                                                std::string_view repo_root_rel);
// The entry of `paths` that `rel` (workspace-relative, normalized) is or lies below; none: null.
const GitConfigPath* RepoExecutedPathOf(std::string_view rel, std::span<const GitConfigPath> paths);
// Whether `rel` is one of `paths` or lies below one.
bool IsUnderAnyPath(std::string_view rel, std::span<const std::string> paths);

}  // namespace cordon
