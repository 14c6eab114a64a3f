// What may be written inside a git directory (policy/git_rules.h).
#include "policy/git_rules.h"

#include <algorithm>
#include <string>
#include <vector>

namespace cordon {
namespace {

std::vector<std::string_view> Split(std::string_view rel) {
  std::vector<std::string_view> parts;
  while (!rel.empty()) {
    std::size_t slash = rel.find('/');
    std::string_view p = rel.substr(0, slash);
    if (!p.empty() && p != ".") parts.push_back(p);
    rel = slash == std::string_view::npos ? std::string_view() : rel.substr(slash + 1);
  }
  return parts;
}

// Entries at the top of a git directory that git reads for configuration, commands or the
// location of other git directories.
bool TellsGitWhatToDo(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "config",  "config.worktree", "commondir", "gitdir",  "hooks",  "info",
      "modules", "worktrees",       "branches",  "remotes", "shallow"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

bool WritableParts(const std::vector<std::string_view>& parts, std::size_t from) {
  if (from >= parts.size()) return false;  // the git directory itself
  const std::string_view first = parts[from];
  if (std::find(parts.begin() + static_cast<std::ptrdiff_t>(from), parts.end(), "..") !=
      parts.end()) {
    return false;
  }
  if (from + 1 == parts.size()) {
    if (IsGitSyncedFile(first)) return true;
    constexpr std::string_view kLock = ".lock";
    return first.size() > kLock.size() && first.ends_with(kLock) &&
           IsGitSyncedFile(first.substr(0, first.size() - kLock.size()));
  }
  if (IsGitSharedDir(first)) return true;
  if (first == "worktrees") return WritableParts(parts, from + 2);
  if (first == "modules") {
    // A submodule's name may hold slashes (modules/libs/foo/). Read with a one-component name
    // the path must be writable, and no longer reading of the name may land on an entry git
    // takes instructions from (modules/a/objects/config is the config of submodule a/objects).
    if (!WritableParts(parts, from + 2)) return false;
    for (std::size_t end = from + 3; end < parts.size(); ++end) {
      if (TellsGitWhatToDo(parts[end])) return false;
    }
    return true;
  }
  return false;
}

}  // namespace

bool IsGitSharedDir(std::string_view name) {
  return name == "objects" || name == "refs" || name == "logs";
}

bool IsGitSyncedFile(std::string_view name) {
  if (name == "HEAD" || name == "index" || name == "packed-refs" || name == "COMMIT_EDITMSG" ||
      name == "AUTO_MERGE") {
    return true;
  }
  // ORIG_HEAD, FETCH_HEAD, MERGE_HEAD, CHERRY_PICK_HEAD, REVERT_HEAD, REBASE_HEAD, BISECT_HEAD...
  constexpr std::string_view kSuffix = "_HEAD";
  if (name.size() <= kSuffix.size() || !name.ends_with(kSuffix)) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || c == '_'; });
}

bool IsGitWritable(std::string_view rel) { return WritableParts(Split(rel), 0); }

bool GitRuleAllowsWrite(std::string_view rel) {
  const std::vector<std::string_view> parts = Split(rel);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == ".git" && i + 1 < parts.size()) return WritableParts(parts, i + 1);
  }
  return true;
}

}  // namespace cordon
