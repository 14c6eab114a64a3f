// Reads host repositories' config through descriptors and names the paths it executes from
// (workspace/repo_config.h).
#include "workspace/repo_config.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <string_view>
#include <unordered_set>

#include "core/unique_fd.h"
#include "workspace/stage_fs.h"

namespace cordon {
namespace {

constexpr std::size_t kMaxConfigBytes = 1u << 20;  // more than any real config
constexpr int kMaxIncludeDepth = 10;               // git's own limit (config.c)
constexpr std::size_t kMaxConfigFiles = 256;       // per call: includes cannot fan out

UniqueFd OpenBeneath(int dir_fd, std::string_view rel, std::uint64_t flags) {
  if (rel.empty()) rel = ".";
  const std::string path(rel);
  open_how how{};
  how.flags = flags | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return UniqueFd(static_cast<int>(::syscall(SYS_openat2, dir_fd, path.c_str(), &how, sizeof how)));
}

// A regular file beneath root_fd, up to `max` bytes; empty when it is not one.
std::string ReadBeneath(int root_fd, std::string_view rel, std::size_t max) {
  UniqueFd fd = OpenBeneath(root_fd, rel, O_RDONLY | O_NONBLOCK);
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  std::string out;
  out.resize(std::min<std::size_t>(max, static_cast<std::size_t>(st.st_size) + 1));
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string Join(std::string_view dir, std::string_view name) {
  return dir.empty() ? std::string(name) : std::string(dir) + "/" + std::string(name);
}

// The workspace-relative form of a path written in a repository file (a `.git` file's gitdir:,
// a commondir), relative to `base`; empty when it leaves the workspace.
std::string Beneath(std::string_view value, std::string_view base, std::string_view root_abs) {
  while (!value.empty() && (value.back() == '\n' || value.back() == '\r' || value.back() == ' '))
    value.remove_suffix(1);
  // Resolved as an include path would be: the same normalization and the same refusals.
  std::string cfg = "[include]\npath = \"";
  for (char c : value) {
    if (c == '"' || c == '\\') cfg += '\\';
    if (c == '\n') return {};
    cfg += c;
  }
  cfg += "\"\n";
  auto e = GitConfigExecutedEntries(
      cfg, {.worktree = base, .config_dir = base, .workspace_abs = root_abs});
  return e.size() == 1 ? e[0].path : std::string();
}

class Reader {
 public:
  Reader(int root_fd, std::string root_abs) : root_fd_(root_fd), root_abs_(std::move(root_abs)) {}

  // The repository whose worktree is `dir`, when it has a `.git`.
  void Repository(const std::string& dir) {
    const std::string dotgit = Join(dir, ".git");
    UniqueFd g = OpenBeneath(root_fd_, dotgit, O_PATH);
    struct stat st {};
    if (!g.valid() || ::fstat(g.get(), &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
      GitDir(dir, dotgit);
    } else if (S_ISREG(st.st_mode)) {
      // A `.git` file: `gitdir: X`, X relative to the worktree.
      const std::string text = ReadBeneath(root_fd_, dotgit, PATH_MAX + 16);
      if (text.rfind("gitdir:", 0) != 0) return;
      std::string_view target = std::string_view(text).substr(7);
      while (!target.empty() && (target.front() == ' ' || target.front() == '\t'))
        target.remove_prefix(1);
      const std::string x = Beneath(target, dir, root_abs_);
      if (!x.empty()) GitDir(dir, x);
    }
  }

  std::vector<GitConfigPath> Take() { return std::move(out_); }

 private:
  void GitDir(const std::string& worktree, const std::string& git_dir) {
    Config(worktree, Join(git_dir, "config"), 0);
    Config(worktree, Join(git_dir, "config.worktree"), 0);
    // A linked worktree's or a submodule's git dir may share its config with another one.
    const std::string common = ReadBeneath(root_fd_, Join(git_dir, "commondir"), PATH_MAX + 16);
    if (!common.empty()) {
      const std::string c = Beneath(common, git_dir, root_abs_);
      if (!c.empty()) Config(worktree, Join(c, "config"), 0);
    }
  }

  void Config(const std::string& worktree, const std::string& file, int depth) {
    if (depth > kMaxIncludeDepth || files_ >= kMaxConfigFiles) return;
    ++files_;
    const std::string text = ReadBeneath(root_fd_, file, kMaxConfigBytes);
    if (text.empty()) return;
    auto entries = GitConfigExecutedEntries(
        text,
        {.worktree = worktree, .config_dir = stage::ParentOf(file), .workspace_abs = root_abs_});
    for (auto& e : entries) {
      // An included file is configuration too: what it names is git's to run as well.
      if (e.key.rfind("include", 0) == 0) Config(worktree, e.path, depth + 1);
      out_.push_back(std::move(e));
    }
  }

  int root_fd_;
  std::string root_abs_;
  std::size_t files_ = 0;
  std::vector<GitConfigPath> out_;
};

std::string FdPath(int fd) {
  char buf[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0 || buf[0] != '/') return {};
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

std::vector<GitConfigPath> RepoExecutedPaths(int root_fd,
                                             std::span<const std::string> changed_rels) {
  Reader reader(root_fd, FdPath(root_fd));
  std::unordered_set<std::string> seen;
  seen.insert("");
  reader.Repository("");
  for (const auto& rel : changed_rels) {
    // Upwards from the parent; a directory seen before has had its ancestors seen too.
    for (std::string_view dir = stage::ParentOf(rel); !dir.empty(); dir = stage::ParentOf(dir)) {
      if (!seen.emplace(dir).second) break;
      reader.Repository(std::string(dir));
    }
  }
  std::vector<GitConfigPath> out = reader.Take();
  SortUniqueByPath(out);
  return out;
}

std::vector<std::string> RepoProtectedPaths(int root_fd,
                                            std::span<const std::string> changed_rels) {
  std::vector<std::string> out;
  for (auto& e : RepoExecutedPaths(root_fd, changed_rels)) out.push_back(std::move(e.path));
  return out;
}

std::vector<std::string> RepoProtectedPaths(const std::string& workspace_root) {
  UniqueFd root(::open(workspace_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return {};
  return RepoProtectedPaths(root.get(), {});
}

}  // namespace cordon
