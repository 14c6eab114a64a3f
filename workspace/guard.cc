// The workspace guard: the full walk behind the launch's protected binds and git directories,
// and the sweep that quarantines protected names a confined process created.
#include "workspace/guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/unique_fd.h"
#include "workspace/repo_config.h"
#include "workspace/stage_fs.h"

namespace cordon {
namespace {

// getdents64's record; glibc 2.36 has no wrapper.
struct Dirent64 {
  ino64_t d_ino;
  off64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

PathKind KindOfMode(mode_t m) {
  if (S_ISDIR(m)) return PathKind::kDir;
  if (S_ISREG(m)) return PathKind::kFile;
  if (S_ISLNK(m)) return PathKind::kSymlink;
  return PathKind::kOther;
}

// The file type bits of a getdents type (never DT_UNKNOWN here).
std::uint32_t ModeOfType(unsigned char t) {
  switch (t) {
    case DT_REG:
      return S_IFREG;
    case DT_LNK:
      return S_IFLNK;
    case DT_DIR:
      return S_IFDIR;
    case DT_FIFO:
      return S_IFIFO;
    case DT_SOCK:
      return S_IFSOCK;
    case DT_CHR:
      return S_IFCHR;
    case DT_BLK:
      return S_IFBLK;
    default:
      return 0;
  }
}

PathKind KindOfType(unsigned char t) {
  switch (t) {
    case DT_DIR:
      return PathKind::kDir;
    case DT_REG:
      return PathKind::kFile;
    case DT_LNK:
      return PathKind::kSymlink;
    default:
      return PathKind::kOther;
  }
}

const char* KindName(PathKind k) {
  switch (k) {
    case PathKind::kDir:
      return "dir";
    case PathKind::kFile:
      return "file";
    case PathKind::kSymlink:
      return "symlink";
    case PathKind::kMissing:
      return "missing";
    default:
      return "other";
  }
}

UniqueFd OpenDirAt(int parent, const char* name) {
  return UniqueFd(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// Opens `rel` (a path below root_fd) without following any symlink and without leaving root.
UniqueFd OpenBeneath(int root_fd, const std::string& rel, std::uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const char* p = rel.empty() ? "." : rel.c_str();
  return UniqueFd(static_cast<int>(::syscall(SYS_openat2, root_fd, p, &how, sizeof how)));
}

// fchmodat2 (Linux 6.6): glibc 2.36 has no wrapper; one number on every architecture.
constexpr long kSysFchmodat2 = 452;

// Changes the mode of the inode `fd` holds (an O_PATH descriptor opened O_NOFOLLOW included),
// never by name: a name the agent swaps for a symlink between two calls cannot redirect it.
Status ChmodFd(int fd, mode_t mode, const std::string& shown) {
  if (::syscall(kSysFchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0) return {};
  const int err = errno;
  if (err == ENOSYS || err == EINVAL) {
    // Before Linux 6.6: an fd opened for reading (not O_PATH) takes fchmod.
    if (::fchmod(fd, mode) == 0) return {};
  }
  return SysFail(Code::kSandboxUnavailable, "fchmodat2 (through a descriptor)", shown, err);
}

struct DirIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const DirIdentity&) const = default;
};

DirIdentity IdentityOf(const struct stat& st) { return {st.st_dev, st.st_ino}; }

// A sweep's hands: moves a protected name that appeared into the quarantine and strips set-id
// bits, each through the directory fd its walk holds (never by path, so no length limit and no
// symlink swapped in between). What it cannot do is kept in `failures`: the sweep fails.
class Sweeper {
 public:
  Sweeper(const std::string& root, const std::string& quarantine, int quarantine_fd,
          const std::set<std::string>& baseline, std::string when, const WorkspaceGuard::Sink& sink)
      : root_(root),
        quarantine_(quarantine),
        quarantine_fd_(quarantine_fd),
        baseline_(baseline),
        when_(std::move(when)),
        sink_(sink) {}
  // What existed when the session looked: kept.
  bool Baseline(const std::string& abs) const { return baseline_.count(abs) > 0; }
  // Moves `name` in `parent_fd` (at root-relative `rel`) into the quarantine.
  void Quarantine(int parent_fd, const std::string& name, const std::string& rel, PathKind kind);
  // Strips set-user-ID and set-group-ID from `name` in `parent_fd`, a regular file.
  void StripSetid(int parent_fd, const char* name, const std::string& rel);
  // A path the sweep could not handle, and why.
  void Failed(const std::string& abs, const std::string& why) {
    failures.push_back(abs + ": " + why);
  }
  std::vector<std::string> failures;

 private:
  std::string Abs(const std::string& rel) const {
    return root_ == "/" ? "/" + rel : root_ + "/" + rel;
  }
  Status Move(int parent_fd, const std::string& name, const std::string& rel, std::string* shown);
  const std::string& root_;
  const std::string& quarantine_;
  int quarantine_fd_;
  const std::set<std::string>& baseline_;
  std::string when_;
  const WorkspaceGuard::Sink& sink_;
};

class GuardWalker {
 public:
  // `sweep`: a sweep's walk, which acts on what it finds through the directory fds it holds
  // (Sweeper, below).
  GuardWalker(const std::string& root, const GuardOptions& opts, bool read_modes, bool scan_mode,
              bool snapshot = false, Sweeper* sweep = nullptr)
      : root_(root),
        opts_(opts),
        read_modes_(read_modes),
        scan_mode_(scan_mode),
        snapshot_(snapshot),
        sweep_(sweep) {}

  Result<WorkspaceWalk> Run() {
    UniqueFd fd(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return SysFail(Code::kSandboxUnavailable, "open", root_);
    buf_.resize(32768);
    // Depth first with an explicit stack (no recursion: a deep tree cannot exhaust the stack).
    // A pending directory holds its parent's fd, so at most one fd per level is open.
    std::vector<Pending> pending;
    TRY(Dir(fd.get(), "", 0, false, pending));
    while (!pending.empty()) {
      Pending next = std::move(pending.back());
      pending.pop_back();
      if (next.depth > kMaxDepth) {
        // Deeper than any real tree: in a sweep the whole subtree goes to quarantine; before a
        // launch cordon refuses rather than leave a part of the workspace unchecked.
        if (!scan_mode_) {
          TRY(Found(next.parent->get(), next.name, next.rel, PathKind::kDir, false));
          continue;
        }
        return Fail(Code::kSandboxUnavailable,
                    Abs(next.rel) + " lies more than " + std::to_string(kMaxDepth) +
                        " directories deep; cordon cannot check a tree that deep for git "
                        "directories and protected names: flatten or remove it",
                    0, Abs(next.rel));
      }
      UniqueFd sub = OpenDirAt(next.parent->get(), next.name.c_str());
      if (!sub.valid() && errno == EACCES && !scan_mode_) sub = GiveBackAccess(next);
      if (!sub.valid()) {
        TRY(Unopenable(next));
        continue;
      }
      TRY(Dir(sub.get(), next.rel, next.depth, next.in_git, pending));
    }
    return std::move(out_);
  }

 private:
  std::string Abs(const std::string& rel) const {
    return root_ == "/" ? "/" + rel : root_ + "/" + rel;
  }

  // `name` in `parent_fd` is at root-relative `rel`. A sweep moves it now, unless it is in the
  // baseline; while the walk lists `parent_fd` itself, once the listing is done (Dir).
  Status Found(int parent_fd, const std::string& name, const std::string& rel, PathKind kind,
               bool git) {
    if (sweep_ != nullptr && !sweep_->Baseline(Abs(rel))) {
      if (listing_ != nullptr && parent_fd == listing_fd_) {
        listing_->push_back({name, rel, kind});
      } else {
        sweep_->Quarantine(parent_fd, name, rel, kind);
      }
    }
    if (scan_mode_ && (kind == PathKind::kSymlink || kind == PathKind::kOther)) {
      return Fail(Code::kSandboxUnavailable,
                  "protected path " + Abs(rel) +
                      " is a symbolic link or special file; cordon will not run processes in "
                      "this workspace until it is a plain file or directory",
                  0, Abs(rel));
    }
    out_.found.push_back({Abs(rel), kind, git});
    return {};
  }

  // A git dir's own protected entries (config, hooks), when they exist.
  Status GitDirEntries(int git_fd, const std::string& git_rel) {
    for (const char* n : {"config", "hooks"}) {
      struct stat st {};
      if (::fstatat(git_fd, n, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        TRY(Found(git_fd, n, git_rel + "/" + n, KindOfMode(st.st_mode), false));
      }
    }
    return {};
  }

  // A `.git` file: its target, when it lies inside this root, is a git dir too.
  Status GitFile(int dir_fd, const std::string& rel) {
    UniqueFd f(::openat(dir_fd, ".git", O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!f.valid()) return {};
    char buf[PATH_MAX + 16];
    ssize_t n = ::read(f.get(), buf, sizeof buf - 1);
    if (n <= 0) return {};
    std::string text(buf, static_cast<std::size_t>(n));
    if (text.rfind("gitdir:", 0) != 0) return {};
    std::string target = text.substr(7);
    while (!target.empty() && (target.front() == ' ' || target.front() == '\t')) target.erase(0, 1);
    while (!target.empty() &&
           (target.back() == '\n' || target.back() == '\r' || target.back() == ' ')) {
      target.pop_back();
    }
    if (target.empty()) return {};
    if (target[0] != '/') {
      const std::string parent =
          rel.find('/') == std::string::npos ? std::string() : rel.substr(0, rel.rfind('/'));
      target = (parent.empty() ? root_ : Abs(parent)) + "/" + target;
    }
    std::unique_ptr<char, decltype(&std::free)> real(::realpath(target.c_str(), nullptr),
                                                     &std::free);
    if (real == nullptr) return {};
    const std::string t = real.get();
    if (t.size() <= root_.size() || t.compare(0, root_.size(), root_) != 0 ||
        (root_ != "/" && t[root_.size()] != '/')) {
      return {};  // outside this writable root: the sandbox cannot write it
    }
    out_.git_dirs.push_back(t);
    const std::string trel = t.substr(root_ == "/" ? 1 : root_.size() + 1);
    UniqueFd g = OpenBeneath(root_fd(), trel, O_RDONLY | O_DIRECTORY);
    if (g.valid()) TRY(GitDirEntries(g.get(), trel));
    return {};
  }

  int root_fd() {
    if (!root_fd_.valid())
      root_fd_ = UniqueFd(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    return root_fd_.get();
  }

  struct Pending {
    std::shared_ptr<UniqueFd> parent;
    std::string name;
    std::string rel;
    int depth = 0;
    bool in_git = false;  // below a `.git`: only repositories hidden there are looked for
  };
  static constexpr int kMaxDepth = 256;

  // In a sweep, a directory of this uid that a process made unreadable (chmod 000) to hide what
  // it holds: u+rwx is given back (the process had it, being this uid) and it is walked. The
  // mode changes through an O_PATH descriptor of the entry itself, opened without following a
  // symlink, and the directory then opened must be that inode: a process that swaps the name
  // for a symlink meanwhile changes nothing outside the tree.
  UniqueFd GiveBackAccess(const Pending& p) {
    UniqueFd entry(::openat(p.parent->get(), p.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!entry.valid() || ::fstat(entry.get(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::geteuid()) {
      errno = EACCES;
      return UniqueFd();
    }
    if (!ChmodFd(entry.get(), (st.st_mode & 07777) | S_IRWXU, Abs(p.rel))) {
      errno = EACCES;
      return UniqueFd();
    }
    UniqueFd fd = OpenDirAt(p.parent->get(), p.name.c_str());
    struct stat now {};
    if (fd.valid() && (::fstat(fd.get(), &now) != 0 || !(IdentityOf(now) == IdentityOf(st)))) {
      fd.Reset();  // another directory took the name meanwhile
    }
    if (!fd.valid()) errno = EACCES;
    return fd;
  }

  // A directory that could not be opened.
  Status Unopenable(const Pending& p) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR || err == ELOOP) return {};  // changed meanwhile
    struct stat st {};
    if (err == EACCES &&
        ::fstatat(p.parent->get(), p.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        st.st_uid != ::geteuid()) {
      return {};  // another user's: the sandbox (this uid, no capabilities) cannot open it
    }
    if (!scan_mode_) {
      // In a sweep: a directory made unreadable cannot be checked, so it goes to quarantine
      // whole rather than stop the sweep (and leave what else appeared in place).
      return Found(p.parent->get(), p.name, p.rel, PathKind::kDir, false);
    }
    errno = err;
    return SysFail(Code::kSandboxUnavailable,
                   "open (a directory cordon must search for git directories and protected "
                   "names)",
                   Abs(p.rel));
  }

  Status Dir(int fd, const std::string& rel, int depth, bool in_git,
             std::vector<Pending>& pending) {
    char* buf = buf_.data();
    std::shared_ptr<UniqueFd> self;  // this directory's fd, shared by its pending children
    std::vector<std::pair<std::string, unsigned char>> subdirs;
    std::vector<std::string> git_children;  // `.git` directories here, walked as in_git
    // git takes a directory holding HEAD, objects/ and refs/ for a (bare) git directory when it
    // is run there, and reads its config (core.pager, aliases...): not only `.git` is one.
    // As git's is_git_directory: HEAD (a file or a symlink), and objects/ and refs/ (followed
    // when symlinks) or a commondir file.
    bool has_head = false, has_objects = false, has_refs = false, has_commondir = false;
    PathKind head_kind = PathKind::kFile;
    // Deferring needs this directory's identity, so the pass can check it opened the same one.
    bool defer = snapshot_ && scan_mode_;
    std::uint64_t dir_dev = 0, dir_ino = 0;
    std::size_t deferred_here = 0;
    const std::size_t group_first = out_.snapshot.size();
    if (defer) {
      struct stat ds {};
      if (::fstat(fd, &ds) == 0) {
        dir_dev = (static_cast<std::uint64_t>(major(ds.st_dev)) << 32) | minor(ds.st_dev);
        dir_ino = ds.st_ino;
      } else {
        defer = false;
      }
    }
    // A sweep moves what it found here once the listing is done: entries renamed away under a
    // getdents that is still reading the directory could make it skip others.
    std::vector<Listed> listed;
    struct ListingScope {
      GuardWalker* w;
      ~ListingScope() { w->listing_ = nullptr; }
    } scope{this};
    listing_ = &listed;
    listing_fd_ = fd;
    while (true) {
      long n = ::syscall(SYS_getdents64, fd, buf, buf_.size());
      if (n < 0) return SysFail(Code::kSandboxUnavailable, "getdents64", Abs(rel));
      if (n == 0) break;
      for (long off = 0; off < n;) {
        auto* d = reinterpret_cast<Dirent64*>(buf + off);
        off += d->d_reclen;
        const char* name = d->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        if (++out_.entries > opts_.max_entries) {
          return Fail(Code::kSandboxUnavailable,
                      "the writable root " + root_ + " holds more than " +
                          std::to_string(opts_.max_entries) +
                          " entries, the most cordon walks to find every git directory and "
                          "protected name; raise sandbox.max_scan_entries in a policy file "
                          "(user or system layer) to run here",
                      0, root_);
        }
        unsigned char type = d->d_type;
        struct stat st {};
        bool have_stat = false;
        const std::string child = rel.empty() ? std::string(name) : rel + "/" + name;
        if (defer && type != DT_DIR && type != DT_UNKNOWN) {
          // The launch's walk: the statx of a non-directory waits for the pass that runs beside
          // the process (FillDeferred); getdents already gave its inode number and type.
          SnapEntry e;
          e.path = child;
          e.dev = dir_dev;
          e.ino = d->d_ino;
          e.mode = ModeOfType(type);
          e.git = in_git || std::strcmp(name, ".git") == 0;
          e.deferred = true;
          out_.snapshot.push_back(std::move(e));
          ++deferred_here;
        } else if (snapshot_) {
          // The change record's statx also answers the walk's own questions (type, set-id bits):
          // one stat per entry, not two.
          if (!SnapshotAdd(out_.snapshot, fd, name, child,
                           in_git || std::strcmp(name, ".git") == 0)) {
            continue;  // gone meanwhile
          }
          st.st_mode = out_.snapshot.back().mode;
          have_stat = true;
        } else if (type == DT_UNKNOWN || (read_modes_ && type == DT_REG)) {
          if (::fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
          have_stat = true;
        }
        if (have_stat) {
          type = S_ISDIR(st.st_mode)   ? DT_DIR
                 : S_ISREG(st.st_mode) ? DT_REG
                 : S_ISLNK(st.st_mode) ? DT_LNK
                                       : DT_FIFO;
        }
        if (std::strcmp(name, "HEAD") == 0 && (type == DT_REG || type == DT_LNK)) {
          has_head = true;
          head_kind = KindOfType(type);
        }
        if (std::strcmp(name, "objects") == 0) has_objects = DirOrLinkToDir(fd, name, type);
        if (std::strcmp(name, "refs") == 0) has_refs = DirOrLinkToDir(fd, name, type);
        if (std::strcmp(name, "commondir") == 0) has_commondir = type == DT_REG || type == DT_LNK;
        if (in_git) {
          if (type == DT_DIR) subdirs.emplace_back(name, type);
          continue;
        }
        if (std::strcmp(name, ".git") == 0) {
          const PathKind k = KindOfType(type);
          TRY(Found(fd, name, child, k, true));
          // A new `.git` goes to quarantine whole: nothing in it is looked at.
          if (sweep_ != nullptr && !sweep_->Baseline(Abs(child))) continue;
          if (k == PathKind::kDir) {
            out_.git_dirs.push_back(Abs(child));
            UniqueFd g = OpenDirAt(fd, name);
            if (g.valid()) TRY(GitDirEntries(g.get(), child));
            // The sandbox writes objects/, refs/ and logs/ (and submodules' through their
            // views): a repository hidden in there is looked for too.
            git_children.push_back(name);
          } else if (k == PathKind::kFile) {
            TRY(GitFile(fd, child));
          }
          continue;  // git's own tree is the git view's business, not a place for names
        }
        if (IsProtectedPath(child, opts_.extra_names)) {
          TRY(Found(fd, name, child, KindOfType(type), false));
          continue;
        }
        if (type == DT_DIR) {
          subdirs.emplace_back(name, type);
        } else if (read_modes_ && have_stat && type == DT_REG &&
                   (st.st_mode & (S_ISUID | S_ISGID)) != 0) {
          out_.setuid_files.push_back(Abs(child));
          if (sweep_ != nullptr) sweep_->StripSetid(fd, name, child);
        }
      }
    }
    listing_ = nullptr;
    for (const Listed& l : listed) sweep_->Quarantine(fd, l.name, l.rel, l.kind);
    if (deferred_here > 0)
      out_.deferred.push_back({group_first, out_.snapshot.size(), rel, dir_dev, dir_ino});
    if (has_head && ((has_objects && has_refs) || has_commondir) && !(in_git && depth == 1)) {
      // Its HEAD is what makes git take it for a repository: an existing one is held read-only
      // (and, below the root, the directory is shown through a git view like a `.git`); a new
      // one is swept, which moves HEAD, config and hooks into quarantine and leaves the rest.
      const std::string head = rel.empty() ? std::string("HEAD") : rel + "/HEAD";
      TRY(Found(fd, "HEAD", head, head_kind, false));
      if (!rel.empty() && !in_git) {
        out_.git_dirs.push_back(Abs(rel));
        TRY(GitDirEntries(fd, rel));
      }
    }
    if (!subdirs.empty() || !git_children.empty()) {
      self = std::make_shared<UniqueFd>(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
      if (!self->valid()) return SysFail(Code::kSandboxUnavailable, "dup", Abs(rel));
    }
    for (auto& [name, type] : subdirs) {
      std::string child = rel.empty() ? name : rel + "/" + name;
      pending.push_back(Pending{self, std::move(name), std::move(child), depth + 1, in_git});
    }
    for (auto& name : git_children) {
      std::string child = rel.empty() ? name : rel + "/" + name;
      pending.push_back(Pending{self, std::move(name), std::move(child), 1, true});
    }
    return {};
  }

  static bool DirOrLinkToDir(int fd, const char* name, unsigned char type) {
    if (type == DT_DIR) return true;
    if (type != DT_LNK) return false;
    struct stat st {};
    return ::fstatat(fd, name, &st, 0) == 0 && S_ISDIR(st.st_mode);
  }

  struct Listed {
    std::string name, rel;
    PathKind kind;
  };
  std::vector<char> buf_;
  std::vector<Listed>* listing_ = nullptr;  // while Dir lists listing_fd_
  int listing_fd_ = -1;
  std::string root_;
  const GuardOptions& opts_;
  bool read_modes_;
  bool scan_mode_;
  bool snapshot_;
  UniqueFd root_fd_;
  WorkspaceWalk out_;
  Sweeper* sweep_ = nullptr;
};

void Pin(std::set<std::string>& pins, const std::string& root, const std::string& path) {
  // Every directory strictly between root and path.
  for (std::size_t pos = path.find('/', root.size() + 1); pos != std::string::npos;
       pos = path.find('/', pos + 1)) {
    pins.insert(path.substr(0, pos));
  }
}

// Copies `name` in `from` to `dname` in `to`, without following symlinks; then removes it.
Status CopyTree(int from, const std::string& name, int to, const std::string& dname,
                const std::string& shown) {
  struct stat st {};
  if (::fstatat(from, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return SysFail(Code::kInternal, "fstatat", shown);
  if (S_ISDIR(st.st_mode)) {
    if (::mkdirat(to, dname.c_str(), 0700) != 0) return SysFail(Code::kInternal, "mkdirat", shown);
    UniqueFd src = OpenDirAt(from, name.c_str());
    UniqueFd dst = OpenDirAt(to, dname.c_str());
    if (!src.valid() || !dst.valid()) return SysFail(Code::kInternal, "open", shown);
    std::vector<std::string> names;
    {
      UniqueFd dup(::fcntl(src.get(), F_DUPFD_CLOEXEC, 0));
      UniqueDir d = UniqueDir::FromFd(std::move(dup));
      if (!d.valid()) return SysFail(Code::kInternal, "fdopendir", shown);
      while (dirent* e = d.Next()) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          names.emplace_back(e->d_name);
      }
    }
    for (const auto& n : names) TRY(CopyTree(src.get(), n, dst.get(), n, shown + "/" + n));
    if (::unlinkat(from, name.c_str(), AT_REMOVEDIR) != 0)
      return SysFail(Code::kInternal, "rmdir", shown);
    return {};
  }
  if (S_ISLNK(st.st_mode)) {
    char buf[PATH_MAX];
    ssize_t n = ::readlinkat(from, name.c_str(), buf, sizeof buf - 1);
    if (n < 0) return SysFail(Code::kInternal, "readlinkat", shown);
    buf[n] = 0;
    if (::symlinkat(buf, to, dname.c_str()) != 0)
      return SysFail(Code::kInternal, "symlinkat", shown);
  } else if (S_ISREG(st.st_mode)) {
    UniqueFd in(::openat(from, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    UniqueFd out(
        ::openat(to, dname.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!in.valid() || !out.valid()) return SysFail(Code::kInternal, "open", shown);
    char buf[65536];
    for (ssize_t r; (r = ::read(in.get(), buf, sizeof buf)) != 0;) {
      if (r < 0) return SysFail(Code::kInternal, "read", shown);
      if (::write(out.get(), buf, static_cast<std::size_t>(r)) != r)
        return SysFail(Code::kInternal, "write", shown);
    }
    // The copy keeps the permission bits, never set-user-ID or set-group-ID.
    ::fchmod(out.get(), st.st_mode & 0777);
  }
  // A FIFO, socket or device is not copied (its contents are not data); it is removed.
  if (::unlinkat(from, name.c_str(), 0) != 0) return SysFail(Code::kInternal, "unlink", shown);
  return {};
}

// The paths the configuration of the repositories a walk found executes from (core.hooksPath,
// core.fsmonitor, include.path, ...: workspace/repo_config.h) are protected like `.git/hooks`:
// each that exists joins the walk's found entries (bound read-only at a launch; swept when it
// was not there before). Only the config of a `.git` in `host_git` is read, when given: the
// sweep never takes orders from a repository the process planted.
Status FindRepoExecuted(const std::string& root, WorkspaceWalk& w,
                        const std::set<std::string>* host_git, bool scan_mode) {
  const std::size_t cut = root == "/" ? 1 : root.size() + 1;
  std::vector<std::string> git_rels;
  for (const auto& f : w.found) {
    if (f.git && (host_git == nullptr || host_git->count(f.path) != 0))
      git_rels.push_back(f.path.substr(cut));
  }
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return SysFail(Code::kSandboxUnavailable, "open", root);
  for (const auto& rel : RepoProtectedPaths(root_fd.get(), git_rels)) {
    const std::string abs = root == "/" ? "/" + rel : root + "/" + rel;
    if (std::any_of(w.found.begin(), w.found.end(), [&](const GuardFound& f) {
          return abs == f.path || abs.compare(0, f.path.size() + 1, f.path + "/") == 0;
        })) {
      continue;  // found already, or below something found (a .git)
    }
    UniqueFd p = OpenBeneath(root_fd.get(), rel, O_PATH);
    struct stat st {};
    if (!p.valid() && errno == ELOOP && scan_mode) {
      return Fail(Code::kSandboxUnavailable,
                  abs +
                      ", which a repository's git configuration runs or reads, lies below a "
                      "symbolic link; cordon will not run processes in this workspace until "
                      "the link is a plain directory",
                  0, abs);
    }
    if (!p.valid() || ::fstat(p.get(), &st) != 0) continue;  // missing: one made is swept
    const PathKind kind = KindOfMode(st.st_mode);
    if (scan_mode && (kind == PathKind::kSymlink || kind == PathKind::kOther)) {
      return Fail(Code::kSandboxUnavailable,
                  "protected path " + abs +
                      " (a repository's git configuration runs or reads it) is a symbolic link "
                      "or special file; cordon will not run processes in this workspace until "
                      "it is a plain file or directory",
                  0, abs);
    }
    std::erase_if(w.found, [&](const GuardFound& f) {
      return f.path.compare(0, abs.size() + 1, abs + "/") == 0;
    });
    w.found.push_back({abs, kind, false});
  }
  return {};
}

void MkdirAll(const std::string& path) {
  for (std::size_t pos = 1; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    ::mkdir(path.substr(0, pos).c_str(), 0700);
  }
}

// The directory `rel_dir` (root-relative, "" for the top) below the quarantine fd, made as
// needed one component at a time: no path string, so no PATH_MAX.
Result<UniqueFd> QuarantineDir(int quarantine_fd, const std::string& rel_dir,
                               const std::string& shown) {
  UniqueFd at(::fcntl(quarantine_fd, F_DUPFD_CLOEXEC, 0));
  if (!at.valid()) return SysFail(Code::kSandboxUnavailable, "dup", shown);
  for (std::size_t pos = 0; pos < rel_dir.size();) {
    std::size_t slash = rel_dir.find('/', pos);
    if (slash == std::string::npos) slash = rel_dir.size();
    const std::string comp = rel_dir.substr(pos, slash - pos);
    pos = slash + 1;
    if (::mkdirat(at.get(), comp.c_str(), 0700) != 0 && errno != EEXIST)
      return SysFail(Code::kSandboxUnavailable, "mkdirat (quarantine)", shown);
    UniqueFd next(
        ::openat(at.get(), comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) return SysFail(Code::kSandboxUnavailable, "open (quarantine)", shown);
    at = std::move(next);
  }
  return at;
}

// A mode change the move needed, undone (through the same descriptor) when it is done.
struct ModeRestore {
  UniqueFd fd;
  mode_t mode = 0;
  std::string shown;
  ~ModeRestore() {
    if (fd.valid()) (void)ChmodFd(fd.get(), mode, shown);
  }
};

// Gives this uid `add` on the inode `fd` holds when it owns it and lacks some of it; what to
// restore goes to `restore`. False when nothing could be given.
bool Widen(UniqueFd fd, mode_t add, const std::string& shown, ModeRestore& restore) {
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() ||
      (st.st_mode & add) == add) {
    return false;
  }
  if (!ChmodFd(fd.get(), (st.st_mode & 07777) | add, shown)) return false;
  restore.fd = std::move(fd);
  restore.mode = st.st_mode & 07777;
  restore.shown = shown;
  return true;
}

Status Sweeper::Move(int parent_fd, const std::string& name, const std::string& rel,
                     std::string* shown) {
  if (quarantine_fd_ < 0) {
    return Fail(Code::kSandboxUnavailable, "the quarantine " + quarantine_ + " cannot be opened", 0,
                Abs(rel));
  }
  const std::size_t slash = rel.rfind('/');
  const std::string rel_dir = slash == std::string::npos ? "" : rel.substr(0, slash);
  ASSIGN_OR_RETURN(UniqueFd dparent, QuarantineDir(quarantine_fd_, rel_dir, Abs(rel)));
  // The same name swept twice keeps both: NAME, NAME.1, NAME.2, ...
  ModeRestore parent_mode, entry_mode;
  bool widened = false;
  for (int n = 0; n < 1000;) {
    const std::string dest = n == 0 ? name : name + "." + std::to_string(n);
    *shown = quarantine_ + "/" + rel + (n == 0 ? "" : "." + std::to_string(n));
    if (::syscall(SYS_renameat2, parent_fd, name.c_str(), dparent.get(), dest.c_str(),
                  RENAME_NOREPLACE) == 0) {
      return {};
    }
    const int err = errno;
    if (err == EEXIST) {
      ++n;
      continue;
    }
    if ((err == EACCES || err == EPERM) && !widened) {
      // A process of this uid may take write permission from the directory holding the name
      // (chmod 555 on it, or on the workspace root), or from a directory it planted (a rename
      // to another directory rewrites its `..`). cordon owns both: it gives itself u+wx through
      // the descriptors, moves, and gives the modes back.
      widened = true;
      bool any = Widen(UniqueFd(::fcntl(parent_fd, F_DUPFD_CLOEXEC, 0)), S_IWUSR | S_IXUSR,
                       Abs(rel_dir), parent_mode);
      UniqueFd entry(::openat(parent_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
      struct stat st {};
      if (entry.valid() && ::fstat(entry.get(), &st) == 0 && S_ISDIR(st.st_mode))
        any = Widen(std::move(entry), S_IWUSR, Abs(rel), entry_mode) || any;
      if (any) continue;
    }
    if (err == EXDEV) {
      // Across filesystems: a copy that never follows a symlink, then the original is removed.
      return CopyTree(parent_fd, name, dparent.get(), dest, Abs(rel));
    }
    return SysFail(Code::kSandboxUnavailable, "renameat2 (into the quarantine)", Abs(rel), err);
  }
  return Fail(Code::kSandboxUnavailable, "1000 earlier copies of it are in the quarantine", 0,
              Abs(rel));
}

void Sweeper::Quarantine(int parent_fd, const std::string& name, const std::string& rel,
                         PathKind kind) {
  GuardEvent e{
      .kind = GuardEvent::Kind::kProtectedRemoved, .path = Abs(rel), .entry_kind = KindName(kind)};
  e.when = when_;
  if (auto st = Move(parent_fd, name, rel, &e.quarantine); !st) {
    e.error = st.error().message;
    Failed(e.path, "not moved to the quarantine: " + e.error);
  }
  if (sink_) sink_(e);
}

void Sweeper::StripSetid(int parent_fd, const char* name, const std::string& rel) {
  GuardEvent e{.kind = GuardEvent::Kind::kSetuidStripped, .path = Abs(rel), .entry_kind = "file"};
  e.when = when_;
  // An O_PATH descriptor of the entry itself, never following a symlink: the mode changes on
  // the inode it holds, whatever the name becomes meanwhile.
  UniqueFd f(::openat(parent_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!f.valid() && errno == ENOENT) return;  // gone: nothing set-id is left at the name
  if (!f.valid() || ::fstat(f.get(), &st) != 0) {
    e.error = std::string("not stripped: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode) || (st.st_mode & (S_ISUID | S_ISGID)) == 0) {
    return;  // no longer a set-id file
  } else {
    e.mode_before = st.st_mode & 07777;
    e.mode_after = e.mode_before & ~static_cast<mode_t>(S_ISUID | S_ISGID);
    if (auto done = ChmodFd(f.get(), e.mode_after, e.path); !done) e.error = done.error().message;
  }
  if (!e.error.empty()) Failed(e.path, "set-id bits not stripped: " + e.error);
  if (sink_) sink_(e);
}

}  // namespace

GuardOptions GuardOptions::From(const Policy& policy) {
  GuardOptions o;
  o.max_entries = static_cast<std::size_t>(policy.max_scan_entries);
  o.extra_names = policy.filesystem.protected_names;
  o.snapshot = policy.audit_file_changes;
  return o;
}

Result<WorkspaceWalk> WalkWritableRoot(const std::string& root, const GuardOptions& opts,
                                       bool read_modes, bool snapshot) {
  return GuardWalker(root, opts, read_modes, false, snapshot).Run();
}

Result<ProtectedScan> ScanProtectedPaths(const std::vector<std::string>& roots,
                                         const GuardOptions& opts) {
  ProtectedScan scan;
  std::set<std::string> pins;
  std::shared_ptr<TreeSnapshot> snapshot;
  if (opts.snapshot) snapshot = std::make_shared<TreeSnapshot>();
  for (const auto& root : roots) {
    ASSIGN_OR_RETURN(WorkspaceWalk w, GuardWalker(root, opts, false, true, opts.snapshot).Run());
    TRY(FindRepoExecuted(root, w, nullptr, true));
    scan.scanned += w.entries;
    if (snapshot) snapshot->roots.push_back({root, std::move(w.snapshot), std::move(w.deferred)});
    for (const auto& f : w.found) {
      // A `.git` dir stays writable (the git view decides what inside it is); its config and
      // hooks, a `.git` file and every other protected entry are bound read-only onto
      // themselves.
      if (!(f.git && f.kind == PathKind::kDir)) scan.protect.push_back({f.path, f.kind});
      Pin(pins, root, f.path);
    }
    for (const auto& g : w.git_dirs) {
      scan.git_dirs.push_back(g);
      Pin(pins, root, g + "/x");  // the git dir itself and its ancestors
    }
  }
  // Sorted, so that the same tree gives the same plan whatever order getdents returned.
  std::sort(scan.git_dirs.begin(), scan.git_dirs.end());
  std::sort(scan.protect.begin(), scan.protect.end(),
            [](const ProtectedEntry& a, const ProtectedEntry& b) { return a.path < b.path; });
  scan.pins.assign(pins.begin(), pins.end());
  // A small tree is filled now (well under a millisecond); a large one beside the process
  // (SnapshotFill, started by the launch).
  if (snapshot && snapshot->Deferred() <= opts.sync_fill_entries)
    FillDeferred(*snapshot, std::nullopt);
  scan.snapshot = std::move(snapshot);
  // Outer directories first: bwrap mounts in order, and a pin must not hide an inner one.
  std::sort(scan.pins.begin(), scan.pins.end(), [](const std::string& a, const std::string& b) {
    const auto da = std::count(a.begin(), a.end(), '/'), db = std::count(b.begin(), b.end(), '/');
    return da < db || (da == db && a < b);
  });
  return scan;
}

Result<ProtectedScan> ScanProtectedPaths(const std::string& workspace, const GuardOptions& opts) {
  return ScanProtectedPaths(std::vector<std::string>{workspace}, opts);
}

Status MoveBeneath(const std::string& root, const std::string& path, const std::string& dest) {
  if (path.size() <= root.size() + 1 || path.compare(0, root.size() + 1, root + "/") != 0) {
    return Fail(Code::kInternal, path + " is not below " + root);
  }
  const std::string rel = path.substr(root.size() + 1);
  const std::size_t slash = rel.rfind('/');
  const std::string parent_rel = slash == std::string::npos ? "" : rel.substr(0, slash);
  const std::string leaf = slash == std::string::npos ? rel : rel.substr(slash + 1);
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return SysFail(Code::kInternal, "open", root);
  // The parent as it is now, reached without a symlink: a swapped component cannot redirect
  // the move to a directory outside the workspace.
  UniqueFd parent = OpenBeneath(root_fd.get(), parent_rel, O_RDONLY | O_DIRECTORY);
  if (!parent.valid()) return SysFail(Code::kInternal, "open (no symlink)", path);
  const std::size_t dslash = dest.rfind('/');
  MkdirAll(dest.substr(0, dslash));
  UniqueFd dparent(::open(dest.substr(0, dslash).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dparent.valid()) return SysFail(Code::kInternal, "open", dest.substr(0, dslash));
  if (::syscall(SYS_renameat2, parent.get(), leaf.c_str(), dparent.get(),
                dest.substr(dslash + 1).c_str(), RENAME_NOREPLACE) == 0) {
    return {};
  }
  if (errno != EXDEV) return SysFail(Code::kInternal, "renameat2", path);
  // Across filesystems: a copy that never follows a symlink, then the original is removed.
  return CopyTree(parent.get(), leaf, dparent.get(), dest.substr(dslash + 1), path);
}

WorkspaceGuard::WorkspaceGuard(std::vector<std::string> roots, GuardOptions opts,
                               std::string quarantine_dir, Sink sink)
    : roots_(std::move(roots)),
      opts_(std::move(opts)),
      quarantine_(std::move(quarantine_dir)),
      sink_(std::move(sink)) {}

Result<std::uint64_t> WorkspaceGuard::BeforeLaunch() {
  bool running = false, broken = false;
  std::uint64_t token = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running = active_ > 0;
    broken = broken_.has_value();
    token = generation_;
  }
  // A sweep that could not complete left the workspace unchecked: nothing launches until one
  // completes (the operator fixed what it named).
  if (running || broken) {
    if (auto st = Sweep("launch"); !st) {
      return Fail(Code::kSandboxUnavailable,
                  "cordon launches nothing more in this session: " + st.error().message, 0,
                  st.error().where);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return running ? token + 1 : generation_;  // a sweep while one runs: never adopt
}

void WorkspaceGuard::Launched(std::uint64_t token, bool scanned,
                              const std::vector<ProtectedEntry>& protect,
                              const std::vector<std::string>& git_dirs) {
  std::lock_guard<std::mutex> lock(mu_);
  // Adopt what the launch's own walk saw only when no confined process ran since BeforeLaunch
  // looked: then everything there was made on the host, not by a sandbox. A launch that did
  // not walk (a read-only workspace) has nothing to adopt.
  if (scanned && (!have_baseline_ || (token == generation_ && active_ == 0))) {
    baseline_.clear();
    for (const auto& p : protect) baseline_.insert(p.path);
    for (const auto& g : git_dirs) baseline_.insert(g);
    have_baseline_ = true;
  }
  ++active_;
  ++generation_;
}

Status WorkspaceGuard::AfterProcess(TreeSnapshot* after) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_ > 0) --active_;
    ++generation_;
  }
  return Sweep("process_end", after);
}

Status WorkspaceGuard::AtCallBoundary() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_ == 0) return {};  // a broken guard is tried again at the next launch
  }
  return Sweep("call_boundary");
}

std::optional<Error> WorkspaceGuard::broken() {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

Status WorkspaceGuard::Sweep(const std::string& when, TreeSnapshot* after) {
  std::lock_guard<std::mutex> sweeping(sweep_mu_);
  std::set<std::string> baseline;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!have_baseline_) return {};
    baseline = baseline_;
  }
  std::vector<std::string> failures;
  for (std::size_t i = 0; i < roots_.size(); ++i) {
    const std::string& root = roots_[i];
    const std::string qbase = quarantine_ + (i == 0 ? "" : "/.roots" + root);
    MkdirAll(qbase);  // cordon's own state directory, not the agent's tree
    UniqueFd qfd(::open(qbase.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!qfd.valid()) {
      // Still walked: each name that appeared is named, as not moved.
      failures.push_back(qbase + ": the quarantine cannot be opened: " + std::strerror(errno));
    }
    Sweeper sweeper(root, qbase, qfd.get(), baseline, when, sink_);
    auto walk = GuardWalker(root, opts_, true, false, after != nullptr, &sweeper).Run();
    failures.insert(failures.end(), sweeper.failures.begin(), sweeper.failures.end());
    if (!walk) {
      // Never a partial sweep: a walk that stopped (the entry cap, an unreadable directory)
      // leaves the rest of the root unchecked, and the call fails.
      GuardEvent e{.kind = GuardEvent::Kind::kProtectedRemoved, .path = root, .entry_kind = "dir"};
      e.error = "the sweep could not walk " + root + ": " + walk.error().message;
      e.when = when;
      if (sink_) sink_(e);
      failures.push_back(root + ": the walk stopped: " + walk.error().message);
      continue;
    }
    if (after != nullptr) after->roots.push_back({root, std::move(walk->snapshot)});
    // The paths the host repositories' configuration executes (workspace/repo_config.h) are
    // swept like .git/hooks when they were not there before; only repositories the baseline
    // holds are asked, never one the process planted.
    const std::size_t walked = walk->found.size();
    if (auto st = FindRepoExecuted(root, *walk, &baseline, false); !st) {
      failures.push_back(root +
                         ": the repositories' git config could not be read: " + st.error().message);
      continue;
    }
    UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    stage::DirChain chain(root_fd.get());
    const std::size_t failed_before = sweeper.failures.size();
    for (std::size_t k = walked; k < walk->found.size(); ++k) {
      const GuardFound& f = walk->found[k];
      if (baseline.count(f.path) || f.path.size() <= root.size() + 1) continue;
      const std::string rel = f.path.substr(root == "/" ? 1 : root.size() + 1);
      auto parent = chain.Open(stage::ParentOf(rel));
      if (!parent) {
        sweeper.Failed(f.path, "its directory cannot be opened: " + parent.error().message);
        continue;
      }
      sweeper.Quarantine(*parent, std::string(stage::LeafOf(rel)), rel, f.kind);
    }
    failures.insert(failures.end(), sweeper.failures.begin() + failed_before,
                    sweeper.failures.end());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (failures.empty()) {
    broken_.reset();  // a whole sweep found nothing it could not handle
    return {};
  }
  // Every path named; the audit log has one record per path as well.
  constexpr std::size_t kNamed = 20;
  std::string list;
  for (std::size_t i = 0; i < failures.size() && i < kNamed; ++i)
    list += (i == 0 ? "" : "; ") + failures[i];
  if (failures.size() > kNamed)
    list += "; and " + std::to_string(failures.size() - kNamed) + " more (see the audit log)";
  Error err{Code::kSandboxUnavailable,
            "the workspace sweep (" + when +
                ") could not complete, so what a confined process made under a protected name "
                "may still be in place: " +
                list +
                ". Fix or remove what it names; until a sweep completes this session launches "
                "no process",
            0, failures.front().substr(0, failures.front().find(": "))};
  broken_ = err;
  return std::unexpected(std::move(err));
}

}  // namespace cordon
