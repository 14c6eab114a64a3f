// The staged commit's reading side: the upper layer's listing and the host facts beside it, by
// descriptors only (workspace/stage.h, docs/adr/0006-staged-workspace.md).
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>

#include "core/fs.h"
#include "core/walk.h"
#include "policy/git_rules.h"
#include "workspace/stage.h"
#include "workspace/stage_fs.h"

namespace cordon {
namespace stage {

std::string_view ParentOf(std::string_view rel) {
  const std::size_t slash = rel.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : rel.substr(0, slash);
}

std::string_view LeafOf(std::string_view rel) {
  const std::size_t slash = rel.rfind('/');
  return slash == std::string_view::npos ? rel : rel.substr(slash + 1);
}

bool IsBelow(std::string_view path, std::string_view dir) {
  if (dir.empty()) return !path.empty();
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

std::vector<std::string_view> SplitRel(std::string_view rel) {
  std::vector<std::string_view> parts;
  while (!rel.empty()) {
    const std::size_t slash = rel.find('/');
    parts.push_back(rel.substr(0, slash));
    rel = slash == std::string_view::npos ? std::string_view() : rel.substr(slash + 1);
  }
  return parts;
}

bool HasComponent(std::string_view rel, std::string_view name) {
  for (std::string_view p : SplitRel(rel)) {
    if (p == name) return true;
  }
  return false;
}

Result<UniqueFd> OpenDirBeneath(int parent, std::string_view name, const std::string& where) {
  open_how how{};
  how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const std::string n(name);
  long fd;
  do {
    fd = ::syscall(SYS_openat2, parent, n.c_str(), &how, sizeof how);
  } while (fd < 0 && (errno == EINTR || errno == EAGAIN));
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  const int e = errno;
  if (e == ENOENT) return Fail(Code::kNotFound, "no such directory: " + where, e, where);
  if (e == ELOOP || e == ENOTDIR || e == EXDEV) {
    return Fail(Code::kConflict, where + " is not a directory (a symlink or another type now)", e,
                where);
  }
  return SysFail(Code::kInternal, "openat2", where, e);
}

Result<std::optional<struct statx>> StatAt(int dir_fd, const std::string& name,
                                           const std::string& where) {
  struct statx sx {};
  if (::statx(dir_fd, name.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) == 0) {
    return std::optional<struct statx>(sx);
  }
  if (errno == ENOENT) return std::optional<struct statx>();
  return SysFail(Code::kInternal, "statx", where);
}

InodeSig SigOf(const struct statx& sx) {
  InodeSig s;
  s.dev = (static_cast<std::uint64_t>(sx.stx_dev_major) << 32) | sx.stx_dev_minor;
  s.ino = sx.stx_ino;
  s.size = sx.stx_size;
  s.mtime_ns = sx.stx_mtime.tv_sec * 1000000000LL + sx.stx_mtime.tv_nsec;
  s.ctime_ns = sx.stx_ctime.tv_sec * 1000000000LL + sx.stx_ctime.tv_nsec;
  s.mode = sx.stx_mode;
  return s;
}

Result<std::vector<std::string>> ReadNames(int dir_fd, const std::string& where) {
  // A fresh open of "." for the stream: fdopendir takes the fd over, and dir_fd stays usable
  // for the *at calls that follow.
  UniqueDir d = UniqueDir::FromFd(
      UniqueFd(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)));
  if (!d.valid()) return SysFail(Code::kInternal, "open directory", where);
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    dirent* e = d.Next();
    if (e == nullptr) {
      if (errno != 0) return SysFail(Code::kInternal, "readdir", where);
      break;
    }
    const std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<int> DirChain::Open(std::string_view dir, std::optional<mode_t> create_mode) {
  const std::vector<std::string_view> parts = SplitRel(dir);
  std::size_t k = 0;
  while (k < parts.size() && k < names_.size() && names_[k] == parts[k]) ++k;
  names_.resize(k);
  fds_.resize(k);
  for (; k < parts.size(); ++k) {
    const int parent = k == 0 ? root_ : fds_[k - 1].get();
    std::string where;
    for (std::size_t i = 0; i <= k; ++i) where += (i ? "/" : "") + std::string(parts[i]);
    auto fd = OpenDirBeneath(parent, parts[k], where);
    if (!fd && fd.error().code == Code::kNotFound && create_mode) {
      const std::string n(parts[k]);
      if (::mkdirat(parent, n.c_str(), *create_mode) != 0 && errno != EEXIST) {
        return SysFail(Code::kInternal, "mkdirat", where);
      }
      fd = OpenDirBeneath(parent, parts[k], where);
    }
    if (!fd) return std::unexpected(std::move(fd).error());
    names_.emplace_back(parts[k]);
    fds_.push_back(std::move(*fd));
  }
  return parts.empty() ? root_ : fds_.back().get();
}

}  // namespace stage

namespace {

using stage::SigOf;

UpperKind KindOf(const struct statx& sx) {
  const mode_t m = sx.stx_mode;
  if (S_ISREG(m)) return UpperKind::kFile;
  if (S_ISDIR(m)) return UpperKind::kDir;
  if (S_ISLNK(m)) return UpperKind::kSymlink;
  // overlayfs's whiteout: a character device 0:0 (Documentation/filesystems/overlayfs.rst).
  if (S_ISCHR(m) && sx.stx_rdev_major == 0 && sx.stx_rdev_minor == 0) return UpperKind::kWhiteout;
  return UpperKind::kOther;
}

// overlayfs marks an opaque directory with the value "y". The value "x" (Linux 6.7) marks a
// lower-layer directory that may hold xattr whiteouts: it is not opaque, and overlayfs never
// writes it in an upper layer, so only "y" counts.
bool IsOpaque(int dir_fd, const char* xattr) {
  char buf[8];
  const ssize_t n = ::fgetxattr(dir_fd, xattr, buf, sizeof buf);
  return n == 1 && buf[0] == 'y';
}

// The upper layer, parents before children, each directory's names in byte order, through
// descriptors only (a live overlay's writer cannot redirect it): past max_depth or max_entries
// the listing fails, and so does the commit (fail closed).
Status ListTree(int upper_fd, const UpperLimits& limits, const char* xattr,
                std::vector<UpperEntry>& out) {
  WalkOptions opts;
  opts.max_depth = limits.max_depth;
  opts.too_deep = TooDeep::kFail;
  opts.sorted = true;
  opts.what = "the upper layer";
  std::optional<UpperEntry> dir;  // the directory just visited, listed once it is opened
  WalkHooks hooks;
  hooks.visit = [&](const WalkEntry& w) -> Result<Visit> {
    const std::string& rel = *w.rel;
    ASSIGN_OR_RETURN(auto sx, stage::StatAt(w.dir_fd, w.name, rel));
    if (!sx) return Visit::kNext;  // removed since the directory was read (a live overlay)
    if (out.size() >= limits.max_entries) {
      return Fail(Code::kTooLarge,
                  "the upper layer holds more than " + std::to_string(limits.max_entries) +
                      " entries; the commit cannot complete",
                  0, rel);
    }
    UpperEntry e;
    e.rel = rel;
    e.kind = KindOf(*sx);
    e.mode = sx->stx_mode;
    e.nlink = sx->stx_nlink;
    e.sig = SigOf(*sx);
    if (e.kind != UpperKind::kDir) {
      out.push_back(std::move(e));
      return Visit::kNext;
    }
    dir = std::move(e);
    return Visit::kDescend;
  };
  hooks.enter = [&](const WalkEntry&, int fd) -> Status {
    dir->opaque = IsOpaque(fd, xattr);
    out.push_back(std::move(*dir));
    dir.reset();
    return {};
  };
  hooks.unopenable = [&](const WalkEntry& w, int) -> Result<UniqueFd> {
    // The error of the resolving open (a symlink swapped in, a name that is no directory).
    auto fd = stage::OpenDirBeneath(w.dir_fd, w.name, *w.rel);
    if (!fd && fd.error().code == Code::kNotFound) return UniqueFd();  // gone meanwhile
    return fd;
  };
  TRY(WalkTree(upper_fd, opts, hooks));
  return {};
}

HostKind HostKindOf(mode_t m) {
  if (S_ISREG(m)) return HostKind::kFile;
  if (S_ISDIR(m)) return HostKind::kDir;
  if (S_ISLNK(m)) return HostKind::kSymlink;
  return HostKind::kOther;
}

}  // namespace

Result<std::vector<UpperEntry>> ListUpper(int upper_fd, const UpperLimits& limits,
                                          const char* opaque_xattr) {
  std::vector<UpperEntry> out;
  TRY(ListTree(upper_fd, limits, opaque_xattr, out));
  return out;
}

void ReadHostFacts(int root_fd, std::vector<UpperEntry>& entries) {
  stage::DirChain chain(root_fd);
  // A parent that could not be opened (missing, a symlink, not a directory) is remembered, so
  // that the thousand entries below a new directory cost nothing more. Its own entry came first
  // and says what the host has there; PlanCommit decides from that.
  std::string failed;
  bool have_failed = false;
  for (UpperEntry& e : entries) {
    e.host = HostKind::kMissing;
    e.host_sig = {};
    const std::string_view parent = stage::ParentOf(e.rel);
    if (have_failed && (parent == failed || stage::IsBelow(parent, failed))) continue;
    auto dir = chain.Open(parent);
    if (!dir) {
      failed = std::string(parent);
      have_failed = true;
      chain.Reset();
      continue;
    }
    const std::string leaf(stage::LeafOf(e.rel));
    auto sx = stage::StatAt(*dir, leaf, e.rel);
    if (!sx || !*sx) continue;
    e.host = HostKindOf((*sx)->stx_mode);
    e.host_sig = SigOf(**sx);
  }
}

void MarkHeldBelow(int root_fd, std::vector<UpperEntry>& entries, const CommitRules& rules) {
  if (rules.approval_paths.empty()) return;
  const auto stricter = [&](int a, int b) {
    if (a < 0) return b;
    if (b < 0) return a;
    return ApprovalStrictness(rules.approval_paths[b].decision) >
                   ApprovalStrictness(rules.approval_paths[a].decision)
               ? b
               : a;
  };
  for (UpperEntry& e : entries) {
    e.below_rule = -1;
    const bool takes_below = e.host == HostKind::kDir && (e.kind != UpperKind::kDir || e.opaque);
    if (!takes_below) continue;
    // The rules that could match below at all, strictest first found.
    int could = -1;
    for (std::size_t r = 0; r < rules.approval_paths.size(); ++r) {
      if (rules.approval_paths[r].decision == ApprovalDecision::kAllow) continue;
      if (RuleCouldMatchBelow(rules.approval_paths[r], e.rel)) could = stricter(could, int(r));
    }
    if (could < 0) continue;
    stage::DirChain chain(root_fd);
    auto dir = chain.Open(e.rel);
    if (!dir) {
      e.below_rule = could;  // cannot look: as if it matched
      continue;
    }
    int found = -1;
    WalkOptions opts;
    // As far as the deletion itself goes (ApplyCommit walks the same tree to delete it): a big
    // `rm -rf node_modules` is walked, not held for the want of a walk.
    opts.max_depth = 1024;
    opts.max_entries = 1u << 22;
    opts.too_deep = TooDeep::kFail;
    opts.too_many = TooDeep::kFail;
    opts.what = "the host directory " + e.rel;
    WalkHooks hooks;
    hooks.visit = [&](const WalkEntry& w) -> Result<Visit> {
      const std::string path = e.rel + "/" + *w.rel;
      const ApprovalMatch m = EvaluatePath(rules.approval_paths, path);
      if (m.rule != nullptr && m.decision != ApprovalDecision::kAllow) {
        found = stricter(found, int(m.rule - rules.approval_paths.data()));
        if (m.decision == ApprovalDecision::kDeny) return Visit::kStop;
      }
      return w.type == DT_DIR || w.type == DT_UNKNOWN ? Visit::kDescend : Visit::kNext;
    };
    const auto walked = WalkTree(*dir, opts, hooks);
    e.below_rule = walked ? found : could;
  }
}

void MarkUnreadableHeads(int upper_fd, std::vector<UpperEntry>& entries, const CommitRules& rules) {
  stage::DirChain chain(upper_fd);
  for (UpperEntry& e : entries) {
    if (e.kind != UpperKind::kFile || stage::LeafOf(e.rel) != "HEAD") continue;
    bool is_head = IsGitRepositoryStructure(e.rel);
    for (const auto& g : rules.git_dirs) {
      is_head = is_head ||
                (stage::IsBelow(e.rel, g) &&
                 IsGitDirStructure(std::string_view(e.rel).substr(g.empty() ? 0 : g.size() + 1)));
    }
    if (!is_head) continue;
    e.unreadable_head = true;
    if ((e.mode & S_IRUSR) == 0) continue;  // chmod 000 .git/HEAD: no git of its owner reads it
    auto dir = chain.Open(stage::ParentOf(e.rel));
    if (!dir) continue;
    const std::optional<std::string> head = ReadSmallFileAt(*dir, "HEAD", 511);
    e.unreadable_head = !head || !IsGitHeadContent(*head);
  }
}

void FindRepositoryDirs(int root_fd, std::span<const UpperEntry> upper, CommitRules& rules) {
  // What the upper layer holds, by path, for the half of the test the host does not answer.
  std::set<std::string_view> in_upper;
  std::set<std::string, std::less<>> dirs;
  for (const auto& e : upper) {
    if (e.kind != UpperKind::kWhiteout) in_upper.insert(e.rel);
    for (std::string_view p = stage::ParentOf(e.rel); !p.empty(); p = stage::ParentOf(p)) {
      if (!dirs.emplace(p).second) break;  // its ancestors are in already
    }
  }
  dirs.emplace("");  // the root itself (a --write grant that is a bare repository)
  stage::DirChain chain(root_fd);
  for (const auto& d : dirs) {
    if (stage::LeafOf(d) == ".git") continue;  // the `.git` rules cover these
    auto on_host = [&](const char* name) {
      auto fd = chain.Open(d);
      if (!fd) return false;
      struct stat st {};
      return ::fstatat(*fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    };
    auto in_up = [&](const char* name) {
      return in_upper.contains(d.empty() ? std::string(name) : d + "/" + name);
    };
    const bool host_head = on_host("HEAD");
    const bool head = host_head || in_up("HEAD");
    if (!head) continue;
    auto has = [&](const char* name) { return on_host(name) || in_up(name); };
    // git's own test (setup.c is_git_directory): HEAD, and objects/ and refs/ or a commondir.
    if (!((has("objects") && has("refs")) || has("commondir"))) continue;
    (host_head ? rules.git_dirs : rules.new_git_dirs).push_back(d);
  }
}

}  // namespace cordon
