// The staged commit's writing side: installs what PlanCommit allowed into the user's tree and
// keeps what it refused in the quarantine, through descriptors only (workspace/stage.h,
// docs/adr/0006-staged-workspace.md). Every directory is reached one component at a time from
// the root's fd with no symlink followed, so a host tree changed under the commit can make it
// fail, never write elsewhere.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/hash.h"
#include "policy/policy.h"
#include "workspace/stage.h"
#include "workspace/stage_fs.h"

namespace cordon {

const char* UpperTypeName(UpperKind k) {
  switch (k) {
    case UpperKind::kFile:
      return "file";
    case UpperKind::kDir:
      return "dir";
    case UpperKind::kSymlink:
      return "symlink";
    case UpperKind::kWhiteout:
      return "whiteout";
    case UpperKind::kOther:
      break;
  }
  return "other";
}
namespace {

using stage::LeafOf;
using stage::ParentOf;
using stage::SigOf;
using stage::StatAt;

// A deletion's walk stops here: the commit fails rather than walk without end.
constexpr std::uint64_t kMaxTreeEntries = 1u << 22;

const char* HostTypeName(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  return "other";
}

bool InGitDir(std::string_view rel) {
  for (std::string_view p : stage::SplitRel(rel)) {
    if (p == ".git") return true;
  }
  return false;
}

// git's own lock on a file it rewrites (`index.lock` beside `index`): held while the commit
// installs the file, so that a host `git status` refreshing the index meanwhile neither writes
// back the index it read before the install nor is overwritten halfway. Waits up to two seconds
// for a host git holding it; then installs anyway (the last writer wins, as without a lock).
class GitFileLock {
 public:
  GitFileLock(int dir_fd, const std::string& leaf) : dir_(dir_fd), name_(leaf + ".lock") {
    for (int i = 0; i < 400; ++i) {
      const int fd =
          ::openat(dir_, name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::close(fd);
        held_ = true;
        return;
      }
      if (errno != EEXIST) return;
      ::usleep(5000);
    }
  }
  ~GitFileLock() {
    if (held_) ::unlinkat(dir_, name_.c_str(), 0);
  }
  GitFileLock(const GitFileLock&) = delete;
  GitFileLock& operator=(const GitFileLock&) = delete;

 private:
  int dir_;
  std::string name_;
  bool held_ = false;
};

// SHA-256 of a regular file's first `size` bytes, read from offset 0; nullopt past the cap.
Result<std::optional<std::string>> HashFd(int fd, std::uint64_t size, std::uint64_t cap,
                                          const std::string& where) {
  if (size > cap) return std::optional<std::string>();
  Sha256Stream h;
  char buf[65536];
  off_t off = 0;
  for (;;) {
    const ssize_t r = ::pread(fd, buf, sizeof buf, off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return SysFail(Code::kInternal, "read", where);
    if (r == 0) break;
    h.Update(std::string_view(buf, static_cast<std::size_t>(r)));
    off += r;
  }
  return std::optional<std::string>(h.FinishHex());
}

// The names of `fd`'s extended attributes, read whole however long the process made the list:
// one that cannot be read fails the install. None on a filesystem without them.
Result<std::vector<std::string>> XattrNames(int fd, const std::string& where) {
  std::string names;
  bool read = false;
  for (int tries = 0; tries < 8 && !read; ++tries) {
    const ssize_t want = ::flistxattr(fd, nullptr, 0);
    if (want < 0 && errno == ENOTSUP) return std::vector<std::string>{};
    if (want < 0) return SysFail(Code::kInternal, "flistxattr", where);
    if (want == 0) return std::vector<std::string>{};
    names.resize(static_cast<std::size_t>(want));
    const ssize_t n = ::flistxattr(fd, names.data(), names.size());
    if (n < 0 && errno != ERANGE) return SysFail(Code::kInternal, "flistxattr", where);
    if (n >= 0) {
      names.resize(static_cast<std::size_t>(n));
      read = true;  // (ERANGE: it grew meanwhile, the size is read again)
    }
  }
  if (!read) return Fail(Code::kInternal, "its extended attributes kept changing", 0, where);
  std::vector<std::string> out;
  for (std::size_t at = 0; at < names.size();) {
    out.emplace_back(names.c_str() + at);
    at += out.back().size() + 1;
  }
  return out;
}

// Extended attributes of a file the process made stay in the sandbox (issue 33): the overlay's
// own marks (origin, impure, opaque) mean nothing outside it; `user.*` ones are the process's
// words, which the host's tools read (a desktop's metadata, a build tool's cache keys), so only
// those `allow` names (filesystem.xattr_allow, XattrAllowed) reach the host; and `trusted.*` and
// file capabilities (`security.capability`) are never the process's to give. ACLs (`system.*`,
// which a chmod could equal) and the security modules' labels (the kernel's) are kept.
Status StripXattrs(int fd, std::span<const std::string> allow, const std::string& where) {
  ASSIGN_OR_RETURN(const std::vector<std::string> names, XattrNames(fd, where));
  for (const std::string& name : names) {
    const bool strip = (name.starts_with("user.") && !XattrAllowed(name, allow)) ||
                       name.starts_with("trusted.") || name == "security.capability";
    if (!strip) continue;
    if (::fremovexattr(fd, name.c_str()) != 0 && errno != ENODATA)
      return SysFail(Code::kInternal, "fremovexattr " + name, where);
  }
  return {};
}

// A file installed by copy (a live overlay, another filesystem) gets the `allow` names of the
// upper's file, as one renamed out of the upper layer keeps them (StripXattrs). A host
// filesystem without user attributes takes none.
Status CopyAllowedXattrs(int src, int out, std::span<const std::string> allow,
                         const std::string& where) {
  if (allow.empty()) return {};
  ASSIGN_OR_RETURN(const std::vector<std::string> names, XattrNames(src, where));
  std::string value(65536, '\0');  // XATTR_SIZE_MAX
  for (const std::string& name : names) {
    if (!XattrAllowed(name, allow)) continue;
    const ssize_t n = ::fgetxattr(src, name.c_str(), value.data(), value.size());
    if (n < 0 && errno == ENODATA) continue;  // removed meanwhile
    if (n < 0) return SysFail(Code::kInternal, "fgetxattr " + name, where);
    if (::fsetxattr(out, name.c_str(), value.data(), static_cast<std::size_t>(n), 0) != 0) {
      if (errno == ENOTSUP) return {};
      return SysFail(WriteErrorCode(errno), "fsetxattr " + name, where);
    }
  }
  return {};
}

// Opens an upper-layer file for reading. A process may leave its own file unreadable (chmod 000),
// which stops an ordinary user's cordon: once the overlay is gone (`settled`) the upper layer is
// cordon's alone and nothing runs there, so it gets u+r and is opened again; the mode the
// process set is what the host gets (the listing's).
UniqueFd OpenUpperFile(int up, const std::string& leaf, bool settled) {
  constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  UniqueFd fd(::openat(up, leaf.c_str(), kFlags));
  if (fd.valid() || errno != EACCES || !settled) return fd;
  struct stat st {};
  if (::fstatat(up, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
    errno = EACCES;
    return fd;
  }
  if (::fchmodat(up, leaf.c_str(), (st.st_mode & 07777) | S_IRUSR, 0) != 0) return fd;
  return UniqueFd(::openat(up, leaf.c_str(), kFlags));
}

std::string TempName() { return ".cordon-tmp-" + std::to_string(::getpid()) + "-" + RandomHex(8); }

// Copies the open regular file `src` into `dir_fd` as `leaf`: a temporary name made with O_EXCL
// (never following), the data, the mode, fsync, then rename over `leaf`. Returns its SHA-256
// when it is at most `cap` bytes.
Result<std::optional<std::string>> CopyFileInto(int src, std::uint64_t size, int dir_fd,
                                                const std::string& leaf, mode_t mode, bool sync,
                                                std::uint64_t cap,
                                                std::span<const std::string> xattr_allow,
                                                const std::string& where) {
  const std::string tmp = TempName();
  UniqueFd out(::openat(dir_fd, tmp.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600));
  if (!out.valid()) return SysFail(WriteErrorCode(errno), "create temporary file", where);
  auto fail = [&](std::unexpected<Error> e) {
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return e;
  };
  Sha256Stream h;
  const bool hash = size <= cap;
  char buf[65536];
  off_t off = 0;
  for (;;) {
    const ssize_t r = ::pread(src, buf, sizeof buf, off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail(SysFail(Code::kInternal, "read", where));
    if (r == 0) break;
    const std::string_view chunk(buf, static_cast<std::size_t>(r));
    if (hash) h.Update(chunk);
    if (Status w = WriteAll(out.get(), chunk, where); !w) return fail(std::unexpected(w.error()));
    off += r;
  }
  if (Status x = CopyAllowedXattrs(src, out.get(), xattr_allow, where); !x)
    return fail(std::unexpected(x.error()));
  if (::fchmod(out.get(), mode) != 0) return fail(SysFail(Code::kInternal, "fchmod", where));
  if (sync && ::fsync(out.get()) != 0) return fail(SysFail(WriteErrorCode(errno), "fsync", where));
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, leaf.c_str()) != 0) {
    return fail(SysFail(Code::kInternal, "renameat", where));
  }
  if (!hash) return std::optional<std::string>();
  return std::optional<std::string>(h.FinishHex());
}

Result<std::string> ReadLinkAt(int dir_fd, const std::string& leaf, const std::string& where) {
  char buf[PATH_MAX + 1];
  const ssize_t n = ::readlinkat(dir_fd, leaf.c_str(), buf, sizeof buf);
  if (n < 0)
    return SysFail(errno == ENOENT ? Code::kNotFound : Code::kInternal, "readlinkat", where);
  if (static_cast<std::size_t>(n) >= sizeof buf) {
    return Fail(Code::kTooLarge, "symlink target too long", 0, where);
  }
  return std::string(buf, static_cast<std::size_t>(n));
}

// A symlink with `target` made in `dir_fd` under a temporary name, then renamed over `leaf`.
Status SymlinkInto(const std::string& target, int dir_fd, const std::string& leaf,
                   const std::string& where) {
  const std::string tmp = TempName();
  if (::symlinkat(target.c_str(), dir_fd, tmp.c_str()) != 0) {
    return SysFail(WriteErrorCode(errno), "symlinkat", where);
  }
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, leaf.c_str()) != 0) {
    const int e = errno;
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return SysFail(Code::kInternal, "renameat", where, e);
  }
  return {};
}

class Committer {
 public:
  Committer(int root_fd, int upper_fd, std::span<const UpperEntry> upper, const CommitOptions& opts,
            CommitLedger* ledger)
      : root_fd_(root_fd),
        upper_fd_(upper_fd),
        upper_(upper),
        opts_(opts),
        ledger_(ledger),
        host_(root_fd),
        up_(upper_fd),
        links_(root_fd) {}

  CommitOutcome Run(std::span<const CommitDecision> decisions);

 private:
  Status Do(const CommitDecision& d, const UpperEntry& e);
  Status Dir(const CommitDecision& d, const UpperEntry& e);
  Status Install(const UpperEntry& e);
  // [audit] before_images: the host file about to be replaced or deleted, open as `fd`, into the
  // store (before the rename or unlink that ends it); the outcome goes into the change.
  void KeepBeforeImage(int fd, std::uint64_t size, FileChange& c) const {
    // Inside a git directory nothing is listed by path (only counted), so nothing would name
    // an image: the index and refs that change at every git command are not kept.
    if (opts_.before_images == nullptr || c.git) return;
    if (!c.sha256_before) {
      c.before_image = "over_file_cap";  // not hashed (past hash_cap): far past any image cap
      return;
    }
    const BeforeImageOutcome o = opts_.before_images->PutFd(fd, size, *c.sha256_before);
    c.before_image = o.status;
    c.before_image_error = o.error;
  }
  // Whether the upper layer names e's inode both inside and outside a `.git` directory.
  bool CrossesGit(const UpperEntry& e) {
    if (!link_sides_) {
      link_sides_.emplace();
      for (const UpperEntry& u : upper_) {
        if (u.kind != UpperKind::kFile || u.nlink < 2) continue;
        auto& sides = (*link_sides_)[{u.sig.dev, u.sig.ino}];
        (InGitDir(u.rel) ? sides.first : sides.second) = true;
      }
    }
    const auto it = link_sides_->find({e.sig.dev, e.sig.ino});
    return it != link_sides_->end() && it->second.first && it->second.second;
  }
  std::optional<std::map<std::pair<std::uint64_t, std::uint64_t>, std::pair<bool, bool>>>
      link_sides_;
  // Links the host file installed at `first` (still the inode `sig`) as `leaf` in `dir_fd`, by a
  // temporary name and a rename; false (nothing changed) when it is no longer that inode or a
  // step fails: the caller copies instead.
  Result<bool> LinkToInstalled(const std::string& first, const InodeSig& sig, int dir_fd,
                               const std::string& leaf);
  Status Delete(const UpperEntry& e);
  Status Refuse(const UpperEntry& e, const std::string& reason);
  Result<std::string> Keep(const UpperEntry& e);
  Result<int> QuarantineDir(std::string_view dir);
  Result<bool> ClearOpaque(const UpperEntry& e, int host_parent);
  Status OpaqueDone(const UpperEntry& e);
  Status SetDirMode(const std::string& rel, mode_t mode, std::optional<mode_t> before);
  // Removes the host's `leaf` (a directory with everything below it) and records the deletion;
  // false, with nothing removed, when that would take a protected entry with it or a file the
  // host changed while the process ran (block_reason_ says which).
  Result<bool> RemoveHost(int dir_fd, const std::string& leaf, const std::string& rel,
                          const struct statx& st);
  Result<std::optional<std::string>> ScanTree(int dir_fd, const std::string& rel,
                                              FileChange& count);
  Status DeleteTree(int dir_fd, const std::string& rel);

  // Inside a git directory the last writer wins, as git's own lock-and-rename does: host git
  // refreshes the index on every `git status`, which must not make the agent's commit a
  // conflict (and leave the host's index behind the objects and refs the commit installed).
  static bool LastWriterWins(std::string_view rel) {
    return rel.starts_with(".git/") || rel.find("/.git/") != std::string_view::npos;
  }
  // The host entry changed since the process started (or since this commit left it): the
  // process worked on a version the host no longer has. Judged on the host as it was when the
  // commit was planned (e.host_sig, read before its first step): the commit's own steps move
  // other entries' ctimes (installing d/x over a host file that y is a hard link of drops y's
  // link count), which is no host edit. Since the plan, only another inode, size, mtime or mode
  // is an edit (made while the commit ran).
  bool HostChanged(const UpperEntry& e, const struct statx& st) const {
    const std::string& rel = e.rel;
    if (LastWriterWins(rel)) return false;
    const InodeSig now = SigOf(st), &planned = e.host_sig;
    if (e.host == HostKind::kMissing || now.dev != planned.dev || now.ino != planned.ino ||
        now.size != planned.size || now.mtime_ns != planned.mtime_ns || now.mode != planned.mode)
      return true;
    if (ledger_ != nullptr) {
      auto it = ledger_->find(rel);
      if (it != ledger_->end()) return !(planned == it->second.host);
    }
    return opts_.window_start_ns > 0 && planned.ctime_ns >= opts_.window_start_ns;
  }
  // The same for a host entry the upper layer does not list (below a directory the commit
  // deletes or clears), which has no planned state: judged as it is now.
  bool HostChanged(const std::string& rel, const struct statx& st) const {
    if (LastWriterWins(rel)) return false;
    if (ledger_ != nullptr) {
      auto it = ledger_->find(rel);
      if (it != ledger_->end()) return !(SigOf(st) == it->second.host);
    }
    const std::int64_t ctime = st.stx_ctime.tv_sec * 1000000000LL + st.stx_ctime.tv_nsec;
    return opts_.window_start_ns > 0 && ctime >= opts_.window_start_ns;
  }
  // A live overlay's entry this commit already handled and the process has not touched since.
  // A directory's own times move with its entries: only its inode counts.
  bool UnchangedSinceLastCommit(const UpperEntry& e) const {
    if (ledger_ == nullptr) return false;
    auto it = ledger_->find(e.rel);
    if (it == ledger_->end()) return false;
    const InodeSig& s = it->second.upper;
    if (e.kind == UpperKind::kDir) return s.dev == e.sig.dev && s.ino == e.sig.ino;
    return s == e.sig;
  }
  void Remember(const std::string& rel, const InodeSig& upper, const InodeSig& host) {
    if (ledger_ != nullptr) (*ledger_)[rel] = {upper, host};
  }
  bool BelowRefused(std::string_view rel) const {
    for (std::string_view p = ParentOf(rel); !p.empty(); p = ParentOf(p)) {
      if (refused_dirs_.find(p) != refused_dirs_.end()) return true;
    }
    return false;
  }
  std::string QuarantinePath(const std::string& rel) const {
    return opts_.quarantine_dir + "/" + rel;
  }

  int root_fd_, upper_fd_;
  std::span<const UpperEntry> upper_;
  const CommitOptions& opts_;
  CommitLedger* ledger_;
  stage::DirChain host_, up_;
  std::optional<stage::DirChain> quarantine_;
  UniqueFd quarantine_root_;
  std::set<std::string, std::less<>> refused_dirs_;
  // Upper inodes with several links that this commit copied to the host: where, and as what.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::pair<std::string, InodeSig>> copied_links_;
  stage::DirChain links_;  // the first name's directory, opened apart from host_'s chain
  std::string block_reason_ = "protected_path";  // why the last RemoveHost removed nothing
  // Directory modes that would keep the commit from writing into them (no u+wx): set last,
  // deepest first.
  std::vector<std::pair<std::string, std::pair<mode_t, std::optional<mode_t>>>> late_modes_;
  CommitOutcome out_;
};

CommitOutcome Committer::Run(std::span<const CommitDecision> decisions) {
  // No decision (the call wrote nothing): nothing reaches the host tree, so there is nothing to
  // make durable. syncfs would flush the whole filesystem's dirty data, other programs' too: on
  // a shared disk that was most of a warm call's commit (bench/warm.py).
  if (decisions.empty()) return std::move(out_);
  // The process's writes reach the disk before a rename makes them the host's.
  if (opts_.rename_from_upper && opts_.fsync) (void)::syncfs(upper_fd_);
  std::size_t i = 0;
  for (; i < decisions.size(); ++i) {
    const CommitDecision& d = decisions[i];
    Status s = d.entry < upper_.size() && upper_[d.entry].rel == d.rel
                   ? Do(d, upper_[d.entry])
                   : Fail(Code::kInvalidInput, "a decision does not match the listing", 0, d.rel);
    if (!s) {
      out_.error = s.error();
      break;
    }
  }
  for (; i < decisions.size(); ++i) {
    const CommitDecision& d = decisions[i];
    if (d.action != CommitAction::kKeepDir || d.opaque) out_.not_done.push_back(d.rel);
  }
  for (auto it = late_modes_.rbegin(); it != late_modes_.rend(); ++it) {
    if (out_.error) {
      out_.not_done.push_back(it->first);
      continue;
    }
    auto dir = host_.Open(it->first);
    if (dir && ::fchmod(*dir, it->second.first) != 0)
      dir = SysFail(Code::kInternal, "fchmod", it->first);
    if (!dir) {
      out_.error = dir.error();
      out_.not_done.push_back(it->first);
      continue;
    }
    if (it->second.second) {
      FileChange c;
      c.kind = "mode_changed";
      c.path = it->first;
      c.type = "dir";
      c.git = InGitDir(c.path);
      c.mode_before = *it->second.second;
      c.mode_after = it->second.first;
      out_.changes.push_back(std::move(c));
    }
  }
  if (opts_.fsync && ::syncfs(root_fd_) != 0 && !out_.error) {
    out_.error = SysFail(WriteErrorCode(errno), "syncfs", ".").error();
  }
  std::stable_sort(out_.changes.begin(), out_.changes.end(), ChangePathLess);
  return std::move(out_);
}

Status Committer::Do(const CommitDecision& d, const UpperEntry& e) {
  // A directory refused while applying (a deletion that would take a protected entry with it,
  // a host directory replaced since the plan) refuses what is below it too.
  if (d.action != CommitAction::kRefuse && BelowRefused(d.rel)) return Refuse(e, "below_refused");
  switch (d.action) {
    case CommitAction::kRefuse:
      return Refuse(e, d.reason);
    case CommitAction::kKeepDir:
    case CommitAction::kMkdir:
    case CommitAction::kChmod:
      return Dir(d, e);
    case CommitAction::kInstall:
      return Install(e);
    case CommitAction::kDelete:
      return Delete(e);
  }
  return Fail(Code::kInternal, "unknown commit action", 0, d.rel);
}

Status Committer::SetDirMode(const std::string& rel, mode_t mode, std::optional<mode_t> before) {
  if ((mode & (S_IWUSR | S_IXUSR)) != (S_IWUSR | S_IXUSR)) {
    late_modes_.push_back({rel, {mode, before}});
    return {};
  }
  ASSIGN_OR_RETURN(int dir, host_.Open(rel));
  if (::fchmod(dir, mode) != 0) return SysFail(Code::kInternal, "fchmod", rel);
  if (before) {
    FileChange c;
    c.kind = "mode_changed";
    c.path = rel;
    c.type = "dir";
    c.git = InGitDir(rel);
    c.mode_before = *before;
    c.mode_after = mode;
    out_.changes.push_back(std::move(c));
  }
  return {};
}

Status Committer::Dir(const CommitDecision& d, const UpperEntry& e) {
  // A live overlay's directory an earlier commit refused while applying stays refused. (An
  // opaque directory's clearing leaves the S_IFDIR mark instead: done, not refused.)
  if (ledger_ != nullptr) {
    auto it = ledger_->find(e.rel);
    if (it != ledger_->end() && UnchangedSinceLastCommit(e) && it->second.host.mode != S_IFDIR) {
      return Refuse(e, "protected_path");
    }
  }
  const std::string leaf(LeafOf(e.rel));
  ASSIGN_OR_RETURN(int hp, host_.Open(ParentOf(e.rel)));
  ASSIGN_OR_RETURN(auto st, StatAt(hp, leaf, e.rel));
  const mode_t mode = e.mode & 0777;  // set-id and sticky bits are never installed
  if (st && !S_ISDIR(st->stx_mode)) {
    // The host has a non-directory: an opaque directory replaces it; a plain one means the host
    // changed after the plan read it.
    if (!d.opaque) return Refuse(e, "not_a_directory");
    ASSIGN_OR_RETURN(bool removed, RemoveHost(hp, leaf, e.rel, *st));
    if (!removed) return Refuse(e, block_reason_);
    st.reset();
  }
  if (!st) {
    if (::mkdirat(hp, leaf.c_str(), 0700) != 0) {
      return SysFail(WriteErrorCode(errno), "mkdirat", e.rel);
    }
    FileChange c;
    c.kind = "created";
    c.path = e.rel;
    c.type = "dir";
    c.git = InGitDir(e.rel);
    out_.changes.push_back(std::move(c));
    TRY(SetDirMode(e.rel, mode, std::nullopt));
  } else {
    if (d.opaque && !UnchangedSinceLastCommit(e)) {
      ASSIGN_OR_RETURN(bool cleared, ClearOpaque(e, hp));
      if (!cleared) return Refuse(e, "protected_path");
    }
    const mode_t host_mode = st->stx_mode & 0777;
    if ((d.action == CommitAction::kChmod || d.opaque) && host_mode != mode) {
      TRY(SetDirMode(e.rel, mode, host_mode));
    }
  }
  if (d.opaque) TRY(OpaqueDone(e));
  return {};
}

Result<bool> Committer::ClearOpaque(const UpperEntry& e, int host_parent) {
  ASSIGN_OR_RETURN(int up, up_.Open(e.rel));
  ASSIGN_OR_RETURN(std::vector<std::string> keep, stage::ReadNames(up, e.rel));
  ASSIGN_OR_RETURN(UniqueFd dir, stage::OpenDirBeneath(host_parent, LeafOf(e.rel), e.rel));
  ASSIGN_OR_RETURN(std::vector<std::string> names, stage::ReadNames(dir.get(), e.rel));
  struct Victim {
    std::string name, rel;
    struct statx st;
  };
  std::vector<Victim> victims;
  // All or nothing: every host entry the opaque directory hides is checked before one goes.
  for (const std::string& n : names) {
    if (std::binary_search(keep.begin(), keep.end(), n)) continue;
    std::string rel = e.rel + "/" + n;
    if (stage::DeletionTakesProtected(rel, opts_.rules)) return false;
    ASSIGN_OR_RETURN(auto st, StatAt(dir.get(), n, rel));
    if (!st) continue;
    if (HostChanged(rel, *st)) {  // the host changed it while the process ran: the host's stays
      out_.conflicts.push_back(rel);
      continue;
    }
    if (S_ISDIR(st->stx_mode)) {
      ASSIGN_OR_RETURN(UniqueFd sub, stage::OpenDirBeneath(dir.get(), n, rel));
      FileChange count;
      ASSIGN_OR_RETURN(auto blocked, ScanTree(sub.get(), rel, count));
      if (blocked && stage::DeletionTakesProtected(*blocked, opts_.rules)) return false;
      if (blocked) {  // a file below it the host changed while the process ran: it stays
        out_.conflicts.push_back(*blocked);
        continue;
      }
    }
    victims.push_back({n, std::move(rel), *st});
  }
  for (const Victim& v : victims) {
    ASSIGN_OR_RETURN(bool removed, RemoveHost(dir.get(), v.name, v.rel, v.st));
    if (!removed) return false;  // changed between the check and now
  }
  return true;
}

Status Committer::OpaqueDone(const UpperEntry& e) {
  if (!opts_.rename_from_upper) {
    InodeSig cleared;
    cleared.mode = S_IFDIR;
    Remember(e.rel, e.sig, cleared);
    return {};
  }
  // The clearing is done: a commit run again after an interruption must not clear the host
  // children this one installed since (they have left the upper layer by then).
  ASSIGN_OR_RETURN(int up, up_.Open(e.rel));
  if (::fremovexattr(up, opts_.opaque_xattr.c_str()) != 0 && errno != ENODATA) {
    return SysFail(Code::kInternal, "fremovexattr", e.rel);
  }
  return {};
}

Status Committer::Install(const UpperEntry& e) {
  if (UnchangedSinceLastCommit(e)) return {};
  const std::string leaf(LeafOf(e.rel));
  const std::string_view parent = ParentOf(e.rel);
  ASSIGN_OR_RETURN(int hp, host_.Open(parent));
  std::optional<GitFileLock> git_lock;
  if (e.kind == UpperKind::kFile && InGitDir(e.rel) && e.rel.find("/objects/") == std::string::npos)
    git_lock.emplace(hp, leaf);
  ASSIGN_OR_RETURN(auto st, StatAt(hp, leaf, e.rel));
  if (st && HostChanged(e, *st)) return Refuse(e, "conflict");
  ASSIGN_OR_RETURN(int up, up_.Open(parent));
  // The upper's version, as it is now. In a live overlay the process may have changed or
  // removed it since the listing: the next commit sees what it did.
  UniqueFd src;
  struct stat sst {};
  std::string target;
  if (e.kind == UpperKind::kFile) {
    src = OpenUpperFile(up, leaf, opts_.rename_from_upper);
    if (!src.valid() || ::fstat(src.get(), &sst) != 0 || !S_ISREG(sst.st_mode)) {
      if (!opts_.rename_from_upper) return {};
      return Fail(Code::kConflict, "the upper layer's file changed during the commit", errno,
                  e.rel);
    }
  } else {
    auto t = ReadLinkAt(up, leaf, e.rel);
    if (!t) {
      if (!opts_.rename_from_upper) return {};
      return std::unexpected(t.error());
    }
    target = std::move(*t);
  }
  FileChange c;
  c.path = e.rel;
  c.type = e.kind == UpperKind::kFile ? "file" : "symlink";
  c.git = InGitDir(e.rel);
  c.kind = "created";
  if (st) {
    if (S_ISDIR(st->stx_mode)) {
      ASSIGN_OR_RETURN(bool removed, RemoveHost(hp, leaf, e.rel, *st));
      if (!removed) return Refuse(e, block_reason_);
    } else if (HostTypeName(st->stx_mode) != std::string_view(c.type)) {
      FileChange gone;  // another type before: a deletion and a creation
      gone.kind = "deleted";
      gone.path = e.rel;
      gone.type = HostTypeName(st->stx_mode);
      gone.git = c.git;
      if (S_ISREG(st->stx_mode)) {
        // A file replaced by a link: its content is gone as much as a deleted file's.
        gone.bytes_before = st->stx_size;
        UniqueFd old(
            ::openat(hp, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
        if (old.valid()) {
          ASSIGN_OR_RETURN(gone.sha256_before,
                           HashFd(old.get(), st->stx_size, opts_.hash_cap, e.rel));
          KeepBeforeImage(old.get(), st->stx_size, gone);
        }
      }
      out_.changes.push_back(std::move(gone));
    } else {
      c.kind = "modified";
      if (S_ISREG(st->stx_mode)) {
        c.bytes_before = st->stx_size;
        UniqueFd old(
            ::openat(hp, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
        if (old.valid()) {
          ASSIGN_OR_RETURN(c.sha256_before, HashFd(old.get(), st->stx_size, opts_.hash_cap, e.rel));
          KeepBeforeImage(old.get(), st->stx_size, c);
        }
        const mode_t before = st->stx_mode & 07777,
                     after = (opts_.rename_from_upper ? e.mode : sst.st_mode) & 0777;
        if (before != after) {
          c.mode_before = before;
          c.mode_after = after;
        }
      }
    }
  }
  if (e.kind == UpperKind::kFile) {
    // Set-id and sticky bits are never installed. Renamed out of a settled upper layer, the mode
    // is the listing's (OpenUpperFile may have added u+r since).
    const mode_t mode = (opts_.rename_from_upper ? e.mode : sst.st_mode) & 0777;
    const auto size = static_cast<std::uint64_t>(sst.st_size);
    c.bytes_after = size;
    bool moved = false;
    const bool crosses_git = e.nlink > 1 && CrossesGit(e);
    if (opts_.rename_from_upper) {
      TRY(StripXattrs(src.get(), opts_.rules.xattr_allow, e.rel));
      if (::fchmod(src.get(), mode) != 0) return SysFail(Code::kInternal, "fchmod", e.rel);
      ASSIGN_OR_RETURN(c.sha256_after, HashFd(src.get(), size, opts_.hash_cap, e.rel));
      if (crosses_git) {
        // copied below, as across filesystems: the host gets a file of its own
      } else if (::renameat(up, leaf.c_str(), hp, leaf.c_str()) == 0) {
        moved = true;
      } else if (errno != EXDEV) {
        return SysFail(Code::kInternal, "renameat", e.rel);
      }
    }
    // A file with other links in the upper layer, one of which this commit installed by copy
    // (a live overlay's commit, another filesystem): linked to that copy, so the names stay one
    // file on the host as they were inside.
    const std::pair<std::uint64_t, std::uint64_t> inode{e.sig.dev, e.sig.ino};
    // Names of one inode on both sides of a `.git` (ln .git/HEAD h) never become one file on the
    // host: a write through the workspace name would change git's file past every git rule.
    if (!moved && e.nlink > 1 && !crosses_git) {
      if (auto it = copied_links_.find(inode); it != copied_links_.end()) {
        ASSIGN_OR_RETURN(moved, LinkToInstalled(it->second.first, it->second.second, hp, leaf));
        if (moved) {
          ASSIGN_OR_RETURN(c.sha256_after, HashFd(src.get(), size, opts_.hash_cap, e.rel));
        }
      }
    }
    if (!moved) {
      ASSIGN_OR_RETURN(c.sha256_after,
                       CopyFileInto(src.get(), size, hp, leaf, mode, opts_.fsync, opts_.hash_cap,
                                    opts_.rules.xattr_allow, e.rel));
      if (e.nlink > 1) {
        ASSIGN_OR_RETURN(auto copied, StatAt(hp, leaf, e.rel));
        if (copied) copied_links_[inode] = {e.rel, SigOf(*copied)};
      }
      // Across filesystems the upper's copy goes once the host has its own.
      if (opts_.rename_from_upper && ::unlinkat(up, leaf.c_str(), 0) != 0 && errno != ENOENT) {
        return SysFail(Code::kInternal, "unlinkat", e.rel);
      }
    }
  } else {
    bool moved = false;
    if (opts_.rename_from_upper) {
      if (::renameat(up, leaf.c_str(), hp, leaf.c_str()) == 0) {
        moved = true;
      } else if (errno != EXDEV) {
        return SysFail(Code::kInternal, "renameat", e.rel);
      }
    }
    if (!moved) {
      TRY(SymlinkInto(target, hp, leaf, e.rel));
      if (opts_.rename_from_upper && ::unlinkat(up, leaf.c_str(), 0) != 0 && errno != ENOENT) {
        return SysFail(Code::kInternal, "unlinkat", e.rel);
      }
    }
  }
  out_.changes.push_back(std::move(c));
  if (ledger_ != nullptr) {
    ASSIGN_OR_RETURN(auto now, StatAt(hp, leaf, e.rel));
    Remember(e.rel, e.sig, now ? SigOf(*now) : InodeSig{});
  }
  return {};
}

Result<bool> Committer::LinkToInstalled(const std::string& first, const InodeSig& sig, int dir_fd,
                                        const std::string& leaf) {
  links_.Reset();  // the commit's steps may have replaced a directory it held
  auto fp = links_.Open(ParentOf(first));
  if (!fp) return false;
  const std::string first_leaf(LeafOf(first));
  ASSIGN_OR_RETURN(auto st, StatAt(*fp, first_leaf, first));
  if (!st || !(SigOf(*st).dev == sig.dev && SigOf(*st).ino == sig.ino)) return false;
  const std::string tmp = TempName();
  if (::linkat(*fp, first_leaf.c_str(), dir_fd, tmp.c_str(), 0) != 0) return false;
  ASSIGN_OR_RETURN(auto linked, StatAt(dir_fd, tmp, first));
  if (!linked || SigOf(*linked).ino != sig.ino ||
      ::renameat(dir_fd, tmp.c_str(), dir_fd, leaf.c_str()) != 0) {
    (void)::unlinkat(dir_fd, tmp.c_str(), 0);
    return false;
  }
  return true;
}

Status Committer::Delete(const UpperEntry& e) {
  if (UnchangedSinceLastCommit(e)) return {};
  const std::string leaf(LeafOf(e.rel));
  ASSIGN_OR_RETURN(int hp, host_.Open(ParentOf(e.rel)));
  ASSIGN_OR_RETURN(auto st, StatAt(hp, leaf, e.rel));
  if (st) {
    if (HostChanged(e, *st)) return Refuse(e, "conflict");
    ASSIGN_OR_RETURN(bool removed, RemoveHost(hp, leaf, e.rel, *st));
    if (!removed) return Refuse(e, block_reason_);
  }
  Remember(e.rel, e.sig, {});
  return {};
}

Result<bool> Committer::RemoveHost(int dir_fd, const std::string& leaf, const std::string& rel,
                                   const struct statx& st) {
  FileChange c;
  c.kind = "deleted";
  c.path = rel;
  c.type = HostTypeName(st.stx_mode);
  c.git = InGitDir(rel);
  if (S_ISDIR(st.stx_mode)) {
    ASSIGN_OR_RETURN(UniqueFd sub, stage::OpenDirBeneath(dir_fd, leaf, rel));
    ASSIGN_OR_RETURN(auto blocked, ScanTree(sub.get(), rel, c));
    if (blocked) {
      block_reason_ =
          stage::DeletionTakesProtected(*blocked, opts_.rules) ? "protected_path" : "conflict";
      return false;
    }
    TRY(DeleteTree(sub.get(), rel));
    if (::unlinkat(dir_fd, leaf.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      return SysFail(Code::kInternal, "unlinkat", rel);
    }
  } else {
    if (S_ISREG(st.stx_mode)) {
      c.bytes_before = st.stx_size;
      UniqueFd old(::openat(dir_fd, leaf.c_str(),
                            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
      if (old.valid()) {
        ASSIGN_OR_RETURN(c.sha256_before, HashFd(old.get(), st.stx_size, opts_.hash_cap, rel));
        KeepBeforeImage(old.get(), st.stx_size, c);
      }
    }
    if (::unlinkat(dir_fd, leaf.c_str(), 0) != 0 && errno != ENOENT) {
      return SysFail(Code::kInternal, "unlinkat", rel);
    }
  }
  out_.changes.push_back(std::move(c));
  return true;
}

Result<std::optional<std::string>> Committer::ScanTree(int dir_fd, const std::string& rel,
                                                       FileChange& count) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, stage::ReadNames(dir_fd, rel));
  for (const std::string& n : names) {
    std::string crel = rel + "/" + n;
    if (stage::DeletionTakesProtected(crel, opts_.rules)) return std::optional<std::string>(crel);
    ASSIGN_OR_RETURN(auto st, StatAt(dir_fd, n, crel));
    if (!st) continue;
    // A file the host changed while the process ran: deleting the directory would lose that
    // edit, which the process never saw (a conflict; a directory's own ctime moves with its
    // entries, so only what is not one counts).
    if (!S_ISDIR(st->stx_mode) && HostChanged(crel, *st)) return std::optional<std::string>(crel);
    if (++count.below > kMaxTreeEntries) {
      return Fail(Code::kTooLarge, "a deleted directory holds too many entries", 0, rel);
    }
    if (S_ISREG(st->stx_mode)) count.bytes_before = count.bytes_before.value_or(0) + st->stx_size;
    if (S_ISDIR(st->stx_mode)) {
      ASSIGN_OR_RETURN(UniqueFd sub, stage::OpenDirBeneath(dir_fd, n, crel));
      ASSIGN_OR_RETURN(auto blocked, ScanTree(sub.get(), crel, count));
      if (blocked) return blocked;
    }
  }
  return std::optional<std::string>();
}

Status Committer::DeleteTree(int dir_fd, const std::string& rel) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, stage::ReadNames(dir_fd, rel));
  for (const std::string& n : names) {
    const std::string crel = rel + "/" + n;
    ASSIGN_OR_RETURN(auto st, StatAt(dir_fd, n, crel));
    if (!st) continue;
    if (S_ISDIR(st->stx_mode)) {
      ASSIGN_OR_RETURN(UniqueFd sub, stage::OpenDirBeneath(dir_fd, n, crel));
      TRY(DeleteTree(sub.get(), crel));
    }
    if (::unlinkat(dir_fd, n.c_str(), S_ISDIR(st->stx_mode) ? AT_REMOVEDIR : 0) != 0 &&
        errno != ENOENT) {
      return SysFail(Code::kInternal, "unlinkat", crel);
    }
  }
  return {};
}

Result<int> Committer::QuarantineDir(std::string_view dir) {
  if (!quarantine_) {
    // cordon's own state directory, not the agent's tree: made by path, then entered by fd.
    std::string at;
    for (std::string_view p : stage::SplitRel(opts_.quarantine_dir)) {
      if (p.empty()) continue;
      at += "/" + std::string(p);
      if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) {
        return SysFail(Code::kInternal, "mkdir", at);
      }
    }
    quarantine_root_ =
        UniqueFd(::open(opts_.quarantine_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!quarantine_root_.valid()) return SysFail(Code::kInternal, "open", opts_.quarantine_dir);
    quarantine_.emplace(quarantine_root_.get());
  }
  return quarantine_->Open(dir, 0700);
}

// Keeps the upper's version of a refused entry in the quarantine: renamed there from an upper
// layer that is no longer mounted, copied from a live one. A special file is not kept.
Result<std::string> Committer::Keep(const UpperEntry& e) {
  if (e.kind == UpperKind::kOther || opts_.quarantine_dir.empty()) return std::string();
  const std::string leaf(LeafOf(e.rel));
  const std::string_view parent = ParentOf(e.rel);
  ASSIGN_OR_RETURN(int up, up_.Open(parent));
  ASSIGN_OR_RETURN(int q, QuarantineDir(parent));
  if (e.kind == UpperKind::kSymlink) {
    if (opts_.rename_from_upper && ::renameat(up, leaf.c_str(), q, leaf.c_str()) == 0) {
      return QuarantinePath(e.rel);
    }
    auto target = ReadLinkAt(up, leaf, e.rel);
    if (!target && target.error().code == Code::kNotFound) return std::string();
    if (!target) return std::unexpected(target.error());
    TRY(SymlinkInto(*target, q, leaf, e.rel));
    if (opts_.rename_from_upper) (void)::unlinkat(up, leaf.c_str(), 0);
    return QuarantinePath(e.rel);
  }
  UniqueFd src = OpenUpperFile(up, leaf, opts_.rename_from_upper);
  struct stat st {};
  if (!src.valid() || ::fstat(src.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    if (!src.valid() && errno == ENOENT) return std::string();  // gone meanwhile
    return SysFail(Code::kInternal, "open", e.rel);
  }
  const mode_t mode = st.st_mode & 0700;  // the owner's, never set-id
  // A file with other links (a hard link the commit installed, or one beside it in the upper
  // layer) is copied: renamed, the quarantine would hold a link to a host file, and its fchmod
  // would change that file's mode.
  if (opts_.rename_from_upper && st.st_nlink == 1) {
    if (::fchmod(src.get(), mode) != 0) return SysFail(Code::kInternal, "fchmod", e.rel);
    if (::renameat(up, leaf.c_str(), q, leaf.c_str()) == 0) return QuarantinePath(e.rel);
    if (errno != EXDEV) return SysFail(Code::kInternal, "renameat", e.rel);
  }
  TRY(CopyFileInto(src.get(), static_cast<std::uint64_t>(st.st_size), q, leaf, mode, false, 0, {},
                   e.rel));
  if (opts_.rename_from_upper) (void)::unlinkat(up, leaf.c_str(), 0);
  return QuarantinePath(e.rel);
}

Status Committer::Refuse(const UpperEntry& e, const std::string& reason) {
  if (e.kind == UpperKind::kDir) refused_dirs_.insert(e.rel);
  if (UnchangedSinceLastCommit(e)) return {};  // a live overlay's entry kept once already
  RefusedEntry r{e.rel, reason, UpperTypeName(e.kind), ""};
  if (e.kind == UpperKind::kDir) {
    if (!opts_.quarantine_dir.empty()) {
      TRY(QuarantineDir(e.rel));
      r.quarantine = QuarantinePath(e.rel);
    }
  } else if (e.kind != UpperKind::kWhiteout) {
    ASSIGN_OR_RETURN(r.quarantine, Keep(e));
  }
  if (reason == "conflict") out_.conflicts.push_back(e.rel);
  out_.refused.push_back(std::move(r));
  if (ledger_ != nullptr) {
    // A conflict stays one: the host's version is kept as the ledger last saw it (or as never
    // seen), so a later change of the upper's is compared against the host's edit again.
    auto it = ledger_->find(e.rel);
    Remember(e.rel, e.sig, it != ledger_->end() ? it->second.host : InodeSig{});
  }
  return {};
}

}  // namespace

CommitOutcome ApplyCommit(int root_fd, int upper_fd, std::span<const UpperEntry> upper,
                          std::span<const CommitDecision> decisions, const CommitOptions& opts,
                          CommitLedger* ledger) {
  return Committer(root_fd, upper_fd, upper, opts, ledger).Run(decisions);
}

}  // namespace cordon
