// Git content checked like the tree (workspace/git_content.h, docs/adr/0014).
#include "workspace/git_content.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "policy/policy.h"
#include "workspace/stage_fs.h"

namespace cordon {
namespace {

using stage::HasComponent;
using stage::IsBelow;
using stage::LeafOf;
using stage::ParentOf;

std::string JoinRel(std::string_view dir, std::string_view rel) {
  if (dir.empty()) return std::string(rel);
  return std::string(dir) + "/" + std::string(rel);
}

// Whether `dir` (root-relative) is a git directory whose content the check reads: a `.git`, a
// submodule's or a linked worktree's directory inside one, or a repository the rules know by its
// structure (CommitRules::git_dirs).
bool IsGitDirectory(std::string_view dir, const CommitRules& rules) {
  if (LeafOf(dir) == ".git") return true;
  if (std::find(rules.git_dirs.begin(), rules.git_dirs.end(), dir) != rules.git_dirs.end())
    return true;
  // .git/modules/NAME..., .git/worktrees/NAME
  const std::size_t at = std::string_view(dir).rfind(".git/");
  if (at == std::string_view::npos || (at != 0 && dir[at - 1] != '/')) return false;
  const std::string_view rest = dir.substr(at + 5);
  return rest.starts_with("modules/") || rest.starts_with("worktrees/");
}

// The git directory of an entry that lands git content, and what it is: "index", "HEAD",
// "packed-refs" or "refs/..." (the ref it moves). Empty when it is none of these.
std::pair<std::string, std::string> GitContentOf(std::string_view rel, const CommitRules& rules) {
  for (std::string_view leaf : {"index", "HEAD", "packed-refs"}) {
    if (LeafOf(rel) == leaf && IsGitDirectory(ParentOf(rel), rules))
      return {std::string(ParentOf(rel)), std::string(leaf)};
  }
  // The nearest "refs" component below a git directory.
  for (std::size_t at = rel.find("refs/"); at != std::string_view::npos;
       at = rel.find("refs/", at + 1)) {
    if (at != 0 && rel[at - 1] != '/') continue;
    const std::string_view dir = at == 0 ? std::string_view() : rel.substr(0, at - 1);
    if (IsGitDirectory(dir, rules)) return {std::string(dir), std::string(rel.substr(at))};
  }
  return {};
}

// The root-relative directory git writes a repository's tree into: a `.git`'s parent; for a
// submodule's directory (.git/modules/NAME) the superproject's NAME; otherwise the directory
// holding the first `.git` (a linked worktree's tree is elsewhere: its protected names are
// judged at any depth all the same) or the repository's own parent.
std::string WorktreeOf(const std::string& git_dir) {
  if (LeafOf(git_dir) == ".git") return std::string(ParentOf(git_dir));
  const std::size_t at = git_dir.rfind(".git/");
  if (at != std::string::npos && (at == 0 || git_dir[at - 1] == '/')) {
    const std::string top = git_dir.substr(0, at == 0 ? 0 : at - 1);
    const std::string rest = git_dir.substr(at + 5);
    if (rest.starts_with("modules/")) return JoinRel(top, rest.substr(8));
    return top;
  }
  return std::string(ParentOf(git_dir));
}

bool IsHex(std::string_view s) {
  return (s.size() == 40 || s.size() == 64) && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string ReadSmallFile(const std::string& path, std::size_t cap = 4096) {
  // O_NOFOLLOW: a symlink in place of a ref is not read through (the commit refuses those).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out(cap, '\0');
  const ssize_t n = ::read(fd, out.data(), cap);
  ::close(fd);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

std::string FirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// refname -> oid of a packed-refs file's text (peeled lines skipped).
std::map<std::string, std::string> PackedRefs(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line[0] == '^') continue;
    const std::size_t sp = line.find(' ');
    if (sp == std::string::npos || !IsHex(line.substr(0, sp))) continue;
    out[line.substr(sp + 1)] = line.substr(0, sp);
  }
  return out;
}

// Every oid the host's refs name (loose refs, packed-refs, a detached HEAD): what "the host's
// refs before the call" reach.
void HostTips(const std::string& git_dir, std::set<std::string>& tips) {
  std::error_code ec;
  const std::filesystem::path refs = git_dir + "/refs";
  for (auto it = std::filesystem::recursive_directory_iterator(
           refs, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string v = FirstLine(ReadSmallFile(it->path()));
    if (IsHex(v)) tips.insert(v);
  }
  for (const auto& [name, oid] : PackedRefs(ReadSmallFile(git_dir + "/packed-refs", 64u << 20)))
    tips.insert(oid);
  const std::string head = FirstLine(ReadSmallFile(git_dir + "/HEAD"));
  if (IsHex(head)) tips.insert(head);
}

// The entries "MODE OID STAGE\tPATH" of `git ls-files --stage -z`, by path and stage.
std::map<std::string, std::string> IndexEntries(const std::string& out) {
  std::map<std::string, std::string> entries;
  std::size_t start = 0;
  while (start < out.size()) {
    std::size_t end = out.find('\0', start);
    if (end == std::string::npos) end = out.size();
    const std::string_view rec(out.data() + start, end - start);
    const std::size_t tab = rec.find('\t');
    if (tab != std::string_view::npos) {
      const std::string_view head = rec.substr(0, tab);
      const std::string_view stage_no = head.substr(head.rfind(' ') + 1);
      entries[std::string(rec.substr(tab + 1)) + '\0' + std::string(stage_no)] = std::string(head);
    }
    start = end + 1;
  }
  return entries;
}

// The scratch git directory the checks read through: no configuration but what is written here
// (no hooks, no fsmonitor, no commit-graph or multi-pack index of the sandbox's making), the
// objects of the sandbox (its upper layer) and the host by alternates, and the host's shallow
// list and split-index parts.
Result<std::string> MakeScratchGitDir(const std::string& scratch, const std::string& host_git,
                                      const std::string& upper_git) {
  static std::uint64_t counter = 0;
  const std::string t =
      scratch + "/git-check-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  std::error_code ec;
  std::filesystem::remove_all(t, ec);
  std::filesystem::create_directories(t + "/objects/info", ec);
  if (!ec) std::filesystem::create_directories(t + "/refs", ec);
  if (ec) return Fail(Code::kInternal, "cannot make " + t + ": " + ec.message());
  const bool sha256 = [&] {
    const std::string config = ReadSmallFile(host_git + "/config", 1u << 20);
    std::string lower = config;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    return lower.find("objectformat = sha256") != std::string::npos ||
           lower.find("objectformat=sha256") != std::string::npos;
  }();
  std::ofstream(t + "/HEAD") << "ref: refs/heads/cordon-check\n";
  std::ofstream(t + "/config") << "[core]\n\trepositoryformatversion = " << (sha256 ? 1 : 0)
                               << "\n\tcommitGraph = false\n\tmultiPackIndex = false\n"
                               << (sha256 ? "[extensions]\n\tobjectformat = sha256\n" : "");
  {
    std::ofstream alt(t + "/objects/info/alternates");
    for (const std::string& dir : {upper_git + "/objects", host_git + "/objects"}) {
      struct stat st {};
      if (::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) alt << dir << "\n";
    }
    if (!alt) return Fail(Code::kInternal, "cannot write " + t + "/objects/info/alternates");
  }
  // git looks for these in its own directory: the upper layer's first (what lands), the host's.
  for (const std::string& from : {upper_git, host_git}) {
    DIR* d = ::opendir(from.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "shallow" && !name.starts_with("sharedindex.")) continue;
      (void)::symlink((from + "/" + name).c_str(), (t + "/" + name).c_str());  // EEXIST: upper's
    }
    ::closedir(d);
  }
  return t;
}

}  // namespace

std::string GitWorktreeOf(const std::string& git_dir) { return WorktreeOf(git_dir); }

Json GitContentFindingJson(const GitContentFinding& f) {
  Json why = {{"ref", EscapePathBytes(f.ref)}};
  if (!f.error.empty()) {
    why["error"] = EscapePathBytes(f.error);
  } else {
    if (!f.commit.empty()) why["commit"] = f.commit;
    why["path"] = EscapePathBytes(f.path);
    why["rule"] = f.rule;
  }
  return why;
}

const char* GitTreePathRule(std::string_view rel, const CommitRules& rules) {
  if (IsProtectedPath(rel, rules.extra_protected)) return "protected_path";
  if (std::any_of(rules.repo_protected.begin(), rules.repo_protected.end(),
                  [&](const std::string& p) { return rel == p || IsBelow(rel, p); }))
    return "repo_executes";
  if (HasComponent(rel, ".git")) return "git_dir_in_tree";
  const std::string_view base = LeafOf(rel);
  if (base == "HEAD" || base == "commondir" || base == "gitdir") return "bare_repository";
  // A path an approval rule asks about (or denies) lands through git's index or a commit only as
  // a work-tree write would: that needs an answer the commit cannot give a git object, so it is
  // refused (issue 34; the work-tree file itself is held).
  const ApprovalMatch m = EvaluatePath(rules.approval_paths, rel);
  if (m.rule != nullptr && m.decision != ApprovalDecision::kAllow) return "approval_path";
  return nullptr;
}

std::vector<std::size_t> GitContentEntries(std::span<const UpperEntry> upper,
                                           std::span<const CommitDecision> decisions,
                                           const CommitRules& rules) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < decisions.size(); ++i) {
    const CommitDecision& d = decisions[i];
    if (d.action != CommitAction::kInstall || d.entry >= upper.size()) continue;
    if (upper[d.entry].kind == UpperKind::kDir) continue;
    if (!GitContentOf(d.rel, rules).second.empty()) out.push_back(i);
  }
  return out;
}

std::vector<GitContentFinding> CheckGitDirContent(const GitDirContent& in, const CommitRules& rules,
                                                  const GitReader& reader) {
  std::vector<GitContentFinding> findings;
  auto entry_of = [&](const std::string& what) { return JoinRel(in.entry_prefix, what); };
  auto fail_all = [&](const std::string& why) {
    for (const auto& what : in.changed) findings.push_back({entry_of(what), what, "", "", "", why});
    return findings;
  };
  if (in.changed.empty()) return findings;
  if (!reader) return fail_all("no git reader: git content cannot be checked here");
  const std::string& host_git = in.host_git;
  const std::string& upper_git = in.new_git;
  auto scratch_dir = MakeScratchGitDir(in.scratch, host_git, upper_git);
  if (!scratch_dir) return fail_all(scratch_dir.error().message);
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{*scratch_dir};
  const std::vector<std::string> env = {
      "PATH=/usr/bin:/bin",      "HOME=" + *scratch_dir,  "LC_ALL=C",
      "GIT_DIR=" + *scratch_dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
      "GIT_ATTR_NOSYSTEM=1",     "GIT_NO_LAZY_FETCH=1",   "GIT_NO_REPLACE_OBJECTS=1",
      "GIT_OPTIONAL_LOCKS=0",    "GIT_TERMINAL_PROMPT=0", "GIT_CEILING_DIRECTORIES=/"};
  const std::vector<std::string> readable = {*scratch_dir, host_git, upper_git};
  auto run = [&](std::vector<std::string> args, std::vector<std::string> extra_env,
                 std::string input) -> Result<std::string> {
    GitReadRequest req{std::move(args), env, readable, std::move(input)};
    for (auto& e : extra_env) req.env.push_back(std::move(e));
    return reader(req);
  };
  const std::string& worktree = in.worktree;

  // The index: each entry the host's index does not hold as it is.
  for (const auto& what : in.changed) {
    if (what != "index") continue;
    const std::string rel = entry_of(what);
    auto now = run({"ls-files", "--stage", "-z"}, {"GIT_INDEX_FILE=" + upper_git + "/index"}, "");
    if (!now) {
      findings.push_back({rel, "index", "", "", "", "git ls-files: " + now.error().message});
      continue;
    }
    std::map<std::string, std::string> before;
    struct stat st {};
    if (::lstat((host_git + "/index").c_str(), &st) == 0) {
      auto was = run({"ls-files", "--stage", "-z"}, {"GIT_INDEX_FILE=" + host_git + "/index"}, "");
      if (!was) {
        findings.push_back(
            {rel, "index", "", "", "", "git ls-files of the host's index: " + was.error().message});
        continue;
      }
      before = IndexEntries(*was);
    }
    for (const auto& [key, head] : IndexEntries(*now)) {
      auto it = before.find(key);
      if (it != before.end() && it->second == head) continue;
      const std::string path = JoinRel(worktree, key.substr(0, key.find('\0')));
      if (const char* rule = GitTreePathRule(path, rules))
        findings.push_back({rel, "index", "", path, rule, ""});
    }
  }

  // The refs: each moved ref's new commits, and what each adds or changes.
  std::set<std::string> host_tips;
  HostTips(host_git, host_tips);
  struct Moved {
    std::string rel, ref;
    std::vector<std::string> tips;
  };
  std::vector<Moved> moved;
  for (const auto& what : in.changed) {
    if (what == "index") continue;
    std::vector<std::string> tips;
    if (what == "packed-refs") {
      const auto now = PackedRefs(ReadSmallFile(upper_git + "/packed-refs", 64u << 20));
      const auto was = PackedRefs(ReadSmallFile(host_git + "/packed-refs", 64u << 20));
      for (const auto& [name, oid] : now) {
        auto it = was.find(name);
        if (it == was.end() || it->second != oid) tips.push_back(oid);
      }
    } else {
      const std::string v = FirstLine(ReadSmallFile(upper_git + "/" + what));
      if (IsHex(v)) tips.push_back(v);  // a symbolic ref moves nothing by itself
    }
    if (!tips.empty()) moved.push_back({entry_of(what), what, std::move(tips)});
  }
  if (!moved.empty()) {
    std::string not_host;  // "^OID" lines: git before 2.42 takes no --not on stdin
    for (const auto& t : host_tips) not_host += "^" + t + "\n";
    std::map<std::size_t, std::vector<std::string>> commits_of;  // moved[i] -> new commits
    std::set<std::string> all_commits;
    for (std::size_t m = 0; m < moved.size(); ++m) {
      std::string input;
      for (const auto& t : moved[m].tips) input += t + "\n";
      auto listed = run({"rev-list", "--stdin", "--ignore-missing"}, {}, input + not_host);
      if (!listed) {
        findings.push_back(
            {moved[m].rel, moved[m].ref, "", "", "", "git rev-list: " + listed.error().message});
        continue;
      }
      std::istringstream lines(*listed);
      for (std::string c; std::getline(lines, c);) {
        if (!IsHex(c)) continue;
        commits_of[m].push_back(c);
        all_commits.insert(c);
      }
    }
    if (!all_commits.empty()) {
      std::string input;
      for (const auto& c : all_commits) input += c + "\n";
      // -c: a merge's paths that differ from every parent (what the merge itself brings).
      auto diffs =
          run({"diff-tree", "--stdin", "-r", "-c", "-z", "--root", "--no-renames"}, {}, input);
      if (!diffs) {
        for (const auto& [m, commits] : commits_of)
          findings.push_back(
              {moved[m].rel, moved[m].ref, "", "", "", "git diff-tree: " + diffs.error().message});
      } else {
        std::map<std::string, std::vector<std::pair<std::string, const char*>>> bad;  // commit ->
        std::string commit;
        const std::string& out = *diffs;
        for (std::size_t start = 0; start < out.size();) {
          std::size_t end = out.find('\0', start);
          if (end == std::string::npos) end = out.size();
          const std::string token = out.substr(start, end - start);
          start = end + 1;
          if (IsHex(FirstLine(token))) {
            commit = FirstLine(token);
            continue;
          }
          if (token.empty() || token[0] != ':') continue;
          // The header's last field is the status, one letter per parent; the path follows.
          const std::string status = token.substr(token.rfind(' ') + 1);
          end = out.find('\0', start);
          if (end == std::string::npos) end = out.size();
          const std::string path =
              JoinRel(worktree, std::string_view(out).substr(start, end - start));
          start = end + 1;
          if (status.find_first_not_of('D') == std::string::npos) continue;  // deleted everywhere
          if (const char* rule = GitTreePathRule(path, rules)) bad[commit].push_back({path, rule});
        }
        for (const auto& [m, commits] : commits_of) {
          for (const auto& c : commits) {
            auto it = bad.find(c);
            if (it == bad.end()) continue;
            for (const auto& [path, rule] : it->second)
              findings.push_back({moved[m].rel, moved[m].ref, c, path, rule, ""});
          }
        }
      }
    }
  }
  // A HEAD that lands naming a branch whose move was refused would leave host git on a branch
  // the host does not have (or has elsewhere): it stays the host's too.
  for (const auto& what : in.changed) {
    if (what != "HEAD") continue;
    const std::string head = FirstLine(ReadSmallFile(upper_git + "/HEAD"));
    if (!head.starts_with("ref: ")) continue;
    const std::string target = head.substr(5);
    for (const GitContentFinding& f : std::vector<GitContentFinding>(findings)) {
      if (f.entry == entry_of(target) ||
          (f.entry == entry_of("packed-refs") && f.ref == "packed-refs")) {
        findings.push_back(
            {entry_of("HEAD"), "HEAD", "", "", "", "it names " + target + ", refused"});
        break;
      }
    }
  }
  return findings;
}

std::vector<GitContentFinding> CheckGitContent(const std::string& root, const std::string& upper,
                                               const std::string& scratch,
                                               std::span<const CommitDecision> decisions,
                                               std::span<const std::size_t> entries,
                                               const CommitRules& rules, const GitReader& reader) {
  std::vector<GitContentFinding> findings;
  // By repository: what of its index and refs the entries land.
  std::map<std::string, std::vector<std::string>> by_repo;
  for (std::size_t i : entries) {
    auto [git_dir, what] = GitContentOf(decisions[i].rel, rules);
    if (!what.empty()) by_repo[git_dir].push_back(what);
  }
  for (auto& [git_dir, changed] : by_repo) {
    GitDirContent in{.host_git = JoinRel(root, git_dir),
                     .new_git = JoinRel(upper, git_dir),
                     .worktree = WorktreeOf(git_dir),
                     .changed = std::move(changed),
                     .entry_prefix = git_dir,
                     .scratch = scratch};
    for (auto& f : CheckGitDirContent(in, rules, reader)) findings.push_back(std::move(f));
  }
  return findings;
}

}  // namespace cordon
