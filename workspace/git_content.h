// What lands through git is checked like the tree (issue 33, part 1; docs/adr/0014). A staged
// commit that installs a repository's index, or moves a ref (a loose ref, packed-refs, a detached
// HEAD), would hand host git content the tree rules refuse: `git add -f .envrc` puts .envrc in
// the index, and the user's next `git checkout -- .` writes it into the tree; a commit on a
// branch carries it to every clone. Before such entries land, cordon asks git (run confined and
// read-only by the caller's GitReader, with no configuration, hooks or lazy fetch, against a
// scratch git directory whose objects are the sandbox's and the host's) what they name:
// - an index entry that the host's index does not hold as it is (added, or another blob or
//   mode), at a path the tree rules refuse;
// - a commit reachable from a moved ref and from none of the host's refs, that adds or changes
//   such a path (against every parent: a merge of a branch the host has is not the merge's
//   change).
// The entry that would land it (the index, the ref's file) is refused instead (`git_content`):
// the host keeps its index and its ref; the sandbox's go to the quarantine.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "workspace/stage.h"

namespace cordon {

// One read-only git command: its arguments after `git`, its environment (the whole of it), the
// directories it may read, and what it reads on stdin. The reader runs it confined and returns
// its stdout, or an error (a failed or killed git, output past the reader's cap).
struct GitReadRequest {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::vector<std::string> readable;
  std::string input;
};
using GitReader = std::function<Result<std::string>(const GitReadRequest&)>;

// Why an entry was refused: the entry (root-relative, as the commit lists it), and what git
// content it would have landed.
struct GitContentFinding {
  std::string entry;   // e.g. ".git/index", ".git/refs/heads/main"
  std::string ref;     // the ref it moves ("index" for the index)
  std::string commit;  // the commit that adds the path (empty for the index)
  std::string path;    // root-relative path the rules refuse
  std::string rule;    // protected_path, repo_executes, git_dir_in_tree, bare_repository
  std::string error;   // set instead of commit/path when the check could not complete
};

// A finding as a record's `git` item: {ref, commit, path, rule} or {ref, error}, each name from
// the sandbox's git content escaped as record paths are.
Json GitContentFindingJson(const GitContentFinding& f);

// The entries of a commit's listing that land git content: a repository's index, a file below
// its refs/, its packed-refs, its HEAD. `decisions` are PlanCommit's; only installs count.
std::vector<std::size_t> GitContentEntries(std::span<const UpperEntry> upper,
                                           std::span<const CommitDecision> decisions,
                                           const CommitRules& rules);

// The check, for the entries GitContentEntries named. `root` and `upper` are the absolute paths
// of the host tree and of the (no longer mounted, unchanging) upper layer; `scratch` a directory
// of cordon's own for the scratch git directory. Every entry whose content the rules refuse, or
// that could not be checked (no reader, git failed: fail closed), has a finding.
std::vector<GitContentFinding> CheckGitContent(const std::string& root, const std::string& upper,
                                               const std::string& scratch,
                                               std::span<const CommitDecision> decisions,
                                               std::span<const std::size_t> entries,
                                               const CommitRules& rules, const GitReader& reader);

// One repository's git content as it would land: `new_git` holds the changed files under the
// names git gives them in `host_git` (index, HEAD, packed-refs, refs/...), `changed` names them,
// `worktree` is the root-relative directory git writes the repository's tree into. A finding's
// `entry` is `entry_prefix`/NAME. The staged commit (CheckGitContent, with the upper layer's
// copy of the git directory) and the direct mode's git view (its private copies) both check
// through it. `scratch`: a directory of cordon's own for the scratch git directory.
struct GitDirContent {
  std::string host_git;
  std::string new_git;
  std::string worktree;
  std::vector<std::string> changed;
  std::string entry_prefix;
  std::string scratch;
};
std::vector<GitContentFinding> CheckGitDirContent(const GitDirContent& in, const CommitRules& rules,
                                                  const GitReader& reader);

// The root-relative directory git writes the tree of the repository whose git directory is
// `git_dir` (root-relative) into: a `.git`'s parent, a submodule's directory for .git/modules/NAME.
std::string GitWorktreeOf(const std::string& git_dir);

// The tree rule for a path git would write into the tree (root-relative): the reason it is
// refused, or nullptr.
const char* GitTreePathRule(std::string_view rel, const CommitRules& rules);

}  // namespace cordon
