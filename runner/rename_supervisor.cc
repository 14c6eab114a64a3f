// The rename supervisor of the staged workspace (runner/rename_supervisor.h, docs/adr/0013).
#include "runner/rename_supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "runner/seccomp.h"

namespace cordon {
namespace {

// RENAME_* of renameat2(2); glibc's <stdio.h> names them only with _GNU_SOURCE and a newer
// header, so they are spelled here as the kernel's uapi does.
constexpr unsigned kRenameNoreplace = 1U << 0;
constexpr unsigned kRenameExchange = 1U << 1;
constexpr unsigned kRenameWhiteout = 1U << 2;

int Seccomp(unsigned op, unsigned flags, void* args) {
  return static_cast<int>(::syscall(SYS_seccomp, op, flags, args));
}

// The caller's string at `addr`, read page by page (a path can end just before an unmapped
// page): 0, or the errno (EFAULT, ENAMETOOLONG, or EPERM/ESRCH when its memory is not ours to
// read).
int ReadCallerString(pid_t pid, std::uint64_t addr, std::string& out) {
  out.clear();
  static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  char buf[PATH_MAX];
  while (out.size() < PATH_MAX) {
    const std::size_t in_page = page - static_cast<std::size_t>(addr % page);
    const std::size_t want = std::min(in_page, PATH_MAX - out.size());
    iovec local{buf, want};
    iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(addr)), want};
    const ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) return n == 0 ? EFAULT : errno;
    const void* nul = std::memchr(buf, 0, static_cast<std::size_t>(n));
    if (nul != nullptr) {
      out.append(buf, static_cast<std::size_t>(static_cast<const char*>(nul) - buf));
      return 0;
    }
    out.append(buf, static_cast<std::size_t>(n));
    addr += static_cast<std::uint64_t>(n);
  }
  return ENAMETOOLONG;
}

// The directory a relative path of the caller starts from: its working directory (AT_FDCWD) or
// its descriptor, through /proc (an O_PATH open, which follows the magic link and checks
// ptrace access). -1 with errno: EBADF when the caller has no such descriptor.
int OpenCallerDir(pid_t pid, int dirfd) {
  const std::string base = "/proc/" + std::to_string(pid);
  const std::string path =
      dirfd == AT_FDCWD ? base + "/cwd" : base + "/fd/" + std::to_string(dirfd);
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && dirfd != AT_FDCWD) errno = EBADF;
  return fd;
}

// The last component of `path` and the directory before it ("" when there is none).
std::pair<std::string, std::string> SplitLast(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// An O_PATH descriptor of `dir` under `base` ("" is `base` itself), resolved as rename(2)
// resolves everything before a path's last component.
int OpenParent(int base, const std::string& dir) {
  return ::openat(base, dir.empty() ? "." : dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

int StatxNoFollow(int dir, const char* name, struct statx& sx) {
  return ::statx(dir, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
                 STATX_TYPE | STATX_MODE | STATX_INO | STATX_NLINK | STATX_ATIME | STATX_MTIME |
                     STATX_SIZE,
                 &sx) == 0
             ? 0
             : errno;
}

bool IsMountRoot(const struct statx& sx) {
  return (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 &&
         (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

// The mode the command itself could have set: cordon's filter refuses set-user-ID and
// set-group-ID bits.
mode_t CopiedMode(const struct statx& sx) {
  return static_cast<mode_t>(sx.stx_mode & 07777 & ~(S_ISUID | S_ISGID));
}

void TimesOf(const struct statx& sx, timespec out[2]) {
  out[0] = {sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec};
  out[1] = {sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec};
}

// The names in the directory `dir` (without . and ..): 0 or the errno.
int ListNames(int dir, std::vector<std::string>& names) {
  const int fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  UniqueDir d(::fdopendir(fd));
  if (d.get() == nullptr) {
    const int e = errno;
    ::close(fd);
    return e;
  }
  errno = 0;
  while (const dirent* e = ::readdir(d.get())) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
    errno = 0;
  }
  return errno;
}

int CopyFileData(int in, int out) {
  bool kernel_copy = true;
  char buf[65536];
  while (true) {
    if (kernel_copy) {
      const ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, 1U << 30, 0);
      if (n > 0) continue;
      if (n == 0) return 0;
      if (errno == EINTR) continue;
      if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return errno;
      kernel_copy = false;
    }
    const ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, buf + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return errno;
      done += w;
    }
  }
}

struct CopyState {
  int root = -1;  // the temporary copy's top directory
  // Files with more than one link, by inode: where their first copy is, under `root`.
  std::map<std::uint64_t, std::string> linked;
};

int CopyTree(int src, int dst, const std::string& rel, CopyState& state);

int CopyEntry(int src, int dst, const std::string& name, const std::string& rel, CopyState& state) {
  struct statx sx {};
  if (int e = StatxNoFollow(src, name.c_str(), sx); e != 0) return e;
  if (IsMountRoot(sx)) return EXDEV;  // a mask or a bind mount: rename(2) would not move it
  timespec times[2];
  TimesOf(sx, times);
  const std::string here = rel.empty() ? name : rel + "/" + name;
  const mode_t type = sx.stx_mode & S_IFMT;
  if (type == S_IFDIR) {
    if (::mkdirat(dst, name.c_str(), 0700) != 0) return errno;
    UniqueFd from(::openat(src, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!from.valid()) return errno;
    UniqueFd to(::openat(dst, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!to.valid()) return errno;
    if (int e = CopyTree(from.get(), to.get(), here, state); e != 0) return e;
    if (::fchmod(to.get(), CopiedMode(sx)) != 0 || ::futimens(to.get(), times) != 0) return errno;
    return 0;
  }
  if (type == S_IFREG) {
    if (sx.stx_nlink > 1) {
      auto it = state.linked.find(sx.stx_ino);
      if (it != state.linked.end())
        return ::linkat(state.root, it->second.c_str(), dst, name.c_str(), 0) == 0 ? 0 : errno;
    }
    UniqueFd in(::openat(src, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!in.valid()) return errno;
    UniqueFd out(
        ::openat(dst, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out.valid()) return errno;
    if (int e = CopyFileData(in.get(), out.get()); e != 0) return e;
    if (::fchmod(out.get(), CopiedMode(sx)) != 0 || ::futimens(out.get(), times) != 0) return errno;
    if (sx.stx_nlink > 1) state.linked.emplace(sx.stx_ino, here);
    return 0;
  }
  if (type == S_IFLNK) {
    std::string target(static_cast<std::size_t>(sx.stx_size) + 1, '\0');
    const ssize_t n = ::readlinkat(src, name.c_str(), target.data(), target.size());
    if (n < 0) return errno;
    if (static_cast<std::size_t>(n) >= target.size()) return EAGAIN;  // changed as it was read
    target.resize(static_cast<std::size_t>(n));
    if (::symlinkat(target.c_str(), dst, name.c_str()) != 0) return errno;
    return ::utimensat(dst, name.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
  }
  if (type == S_IFIFO || type == S_IFSOCK) {
    if (::mknodat(dst, name.c_str(), type | (CopiedMode(sx) & 0777), 0) != 0) return errno;
    return ::utimensat(dst, name.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
  }
  return EPERM;  // a device node: making one takes CAP_MKNOD, which the command has not
}

int CopyTree(int src, int dst, const std::string& rel, CopyState& state) {
  std::vector<std::string> names;
  if (int e = ListNames(src, names); e != 0) return e;
  for (const auto& name : names) {
    if (int e = CopyEntry(src, dst, name, rel, state); e != 0) return e;
  }
  return 0;
}

// Removes `name` under `parent` and everything below it, by descriptors: 0 or the first errno.
int RemoveTree(int parent, const std::string& name) {
  UniqueFd dir(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) {
    if (errno != ENOTDIR && errno != ELOOP) return errno;
    return ::unlinkat(parent, name.c_str(), 0) == 0 ? 0 : errno;
  }
  std::vector<std::string> names;
  if (int e = ListNames(dir.get(), names); e != 0) return e;
  for (const auto& n : names) {
    if (::unlinkat(dir.get(), n.c_str(), 0) == 0) continue;
    if (errno != EISDIR) return errno;
    if (int e = RemoveTree(dir.get(), n); e != 0) return e;
  }
  return ::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0 ? 0 : errno;
}

int EmptyDirectory(int parent, const std::string& name) {
  UniqueFd dir(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return errno;
  std::vector<std::string> names;
  if (int e = ListNames(dir.get(), names); e != 0) return e;
  return names.empty() ? 0 : ENOTEMPTY;
}

// A notification's answer: an error, a value, or "let the kernel do it" (CONTINUE).
struct Answer {
  int error = 0;  // errno; 0 for success
  bool let_through = false;
};

Answer RenameFor(pid_t pid, int old_dirfd, std::uint64_t old_addr, int new_dirfd,
                 std::uint64_t new_addr, unsigned flags, int listener, std::uint64_t id,
                 RenameCounts& counts, bool& stale) {
  std::string old_path, new_path;
  for (auto [addr, out] : {std::pair{old_addr, &old_path}, std::pair{new_addr, &new_path}}) {
    const int e = ReadCallerString(pid, addr, *out);
    if (e == EPERM || e == ESRCH || e == ENOSYS) return {0, true};  // not ours to read
    if (e != 0) return {e, false};
  }
  UniqueFd old_dir, new_dir;
  auto dir_for = [&](const std::string& path, int dirfd, UniqueFd& out) -> int {
    if (!path.empty() && path[0] == '/') {
      out.Reset(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
      return out.valid() ? 0 : errno;
    }
    if (dirfd < 0 && dirfd != AT_FDCWD) return EBADF;
    out.Reset(OpenCallerDir(pid, dirfd));
    return out.valid() ? 0 : errno;
  };
  for (auto [path, dirfd, out] :
       {std::tuple{&old_path, old_dirfd, &old_dir}, std::tuple{&new_path, new_dirfd, &new_dir}}) {
    const int e = dir_for(*path, dirfd, *out);
    if (e == EBADF) return {EBADF, false};
    if (e != 0) return {0, true};  // no /proc to find the caller's directory in
  }
  // What was read belongs to this call only if the caller still waits in it (a task that died
  // and whose id was reused would be another's).
  std::uint64_t check = id;
  if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &check) != 0) {
    stale = true;
    return {};
  }
  if (::syscall(SYS_renameat2, old_dir.get(), old_path.c_str(), new_dir.get(), new_path.c_str(),
                flags) == 0) {
    ++counts.renames;
    return {};
  }
  const int e = errno;
  if (e != EXDEV || (flags & (kRenameExchange | kRenameWhiteout)) != 0) return {e, false};
  const int moved = MoveDirectoryByCopy(old_dir.get(), old_path, new_dir.get(), new_path, flags);
  if (moved == 0) ++counts.directory_moves;
  return {moved, false};
}

}  // namespace

Result<std::string> CompileRenameNotifyFilter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Fail(Code::kSandboxUnavailable, "seccomp_init failed");
  struct Releaser {
    scmp_filter_ctx c;
    ~Releaser() { seccomp_release(c); }
  } releaser{ctx};
  // Another architecture's calls are cordon's filter's to kill; this one lets them by.
  seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ALLOW);
  for (const char* name : {"rename", "renameat", "renameat2"}) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // aarch64 has no rename(2)
    if (int rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0); rc != 0)
      return Fail(Code::kSandboxUnavailable, std::string("seccomp notify rule for ") + name, -rc);
  }
  return ExportSeccompBpf(ctx);
}

Result<UniqueFd> LoadSeccompListener(std::string_view program) {
  if (program.empty() || program.size() % sizeof(sock_filter) != 0 ||
      program.size() / sizeof(sock_filter) > BPF_MAXINSNS)
    return Fail(Code::kSandboxUnavailable, "the rename filter is not a whole program");
  std::vector<sock_filter> insns(program.size() / sizeof(sock_filter));
  std::memcpy(insns.data(), program.data(), program.size());
  sock_fprog prog{static_cast<unsigned short>(insns.size()), insns.data()};
  const int fd = Seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (fd < 0)
    return SysFail(Code::kSandboxUnavailable,
                   "seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER)", "");
  return UniqueFd(fd);
}

bool AnswerRenameNotification(int listener, RenameCounts& counts) {
  // The kernel's structures may be larger than this header's: sized as it says.
  static const seccomp_notif_sizes sizes = [] {
    seccomp_notif_sizes s{};
    if (Seccomp(SECCOMP_GET_NOTIF_SIZES, 0, &s) != 0) {
      s.seccomp_notif = sizeof(seccomp_notif);
      s.seccomp_notif_resp = sizeof(seccomp_notif_resp);
    }
    return s;
  }();
  std::vector<unsigned char> req_buf(
      std::max<std::size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
  std::vector<unsigned char> resp_buf(
      std::max<std::size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)));
  auto* req = reinterpret_cast<seccomp_notif*>(req_buf.data());
  auto* resp = reinterpret_cast<seccomp_notif_resp*>(resp_buf.data());
  if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) {
    // ENOENT: the caller went away between the poll and the receive.
    return errno == EINTR || errno == ENOENT;
  }
  const auto& a = req->data.args;
  const auto fd_arg = [](std::uint64_t v) {
    return static_cast<int>(static_cast<std::int32_t>(v));
  };
  Answer answer{0, true};
  bool stale = false;
  const pid_t pid = static_cast<pid_t>(req->pid);
  switch (req->data.nr) {
#ifdef __NR_rename
    case __NR_rename:
      answer = RenameFor(pid, AT_FDCWD, a[0], AT_FDCWD, a[1], 0, listener, req->id, counts, stale);
      break;
#endif
    case __NR_renameat:
      answer = RenameFor(pid, fd_arg(a[0]), a[1], fd_arg(a[2]), a[3], 0, listener, req->id, counts,
                         stale);
      break;
    case __NR_renameat2:
      answer = RenameFor(pid, fd_arg(a[0]), a[1], fd_arg(a[2]), a[3], static_cast<unsigned>(a[4]),
                         listener, req->id, counts, stale);
      break;
    default:
      break;  // not a call this filter hands over: the kernel does it
  }
  if (stale) return true;  // nobody waits for this answer
  resp->id = req->id;
  if (answer.let_through) {
    ++counts.let_through;
    resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  } else if (answer.error != 0) {
    ++counts.failed;
    resp->error = -answer.error;
  }
  (void)::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);  // ENOENT: the caller is gone
  return true;
}

int MoveDirectoryByCopy(int old_dir, const std::string& old_path, int new_dir,
                        const std::string& new_path, unsigned flags) {
  const auto [old_parent_path, old_name] = SplitLast(old_path);
  const auto [new_parent_path, new_name] = SplitLast(new_path);
  for (const std::string* n : {&old_name, &new_name}) {
    if (n->empty() || *n == "." || *n == ".." || *n == "/") return EXDEV;
  }
  UniqueFd old_parent(OpenParent(old_dir, old_parent_path));
  if (!old_parent.valid()) return errno;
  UniqueFd new_parent(OpenParent(new_dir, new_parent_path));
  if (!new_parent.valid()) return errno;
  struct statx source {};
  if (int e = StatxNoFollow(old_parent.get(), old_name.c_str(), source); e != 0) return e;
  if (!S_ISDIR(source.stx_mode) || IsMountRoot(source)) return EXDEV;
  // Only the overlay's own refusal is answered: a move to another mount stays EXDEV, as the
  // kernel said (a program that copies across filesystems does so itself).
  struct statx from_mount {
  }, to_mount{};
  if (::statx(old_parent.get(), "", AT_EMPTY_PATH, STATX_MNT_ID, &from_mount) != 0 ||
      ::statx(new_parent.get(), "", AT_EMPTY_PATH, STATX_MNT_ID, &to_mount) != 0)
    return errno;
  if ((from_mount.stx_mask & to_mount.stx_mask & STATX_MNT_ID) == 0 ||
      from_mount.stx_mnt_id != to_mount.stx_mnt_id)
    return EXDEV;
  struct statx target {};
  const int target_state = StatxNoFollow(new_parent.get(), new_name.c_str(), target);
  if (target_state == 0) {
    if (target.stx_ino == source.stx_ino && target.stx_dev_major == source.stx_dev_major &&
        target.stx_dev_minor == source.stx_dev_minor)
      return 0;
    if ((flags & kRenameNoreplace) != 0) return EEXIST;
    if (!S_ISDIR(target.stx_mode)) return ENOTDIR;
    if (int e = EmptyDirectory(new_parent.get(), new_name); e != 0) return e;
  } else if (target_state != ENOENT) {
    return target_state;
  }
  // The copy is made under a name of its own beside the target, and renamed into place whole.
  std::string temp;
  for (int attempt = 0;; ++attempt) {
    temp = ".cordon-rename." + std::to_string(::getpid()) + "." + std::to_string(attempt);
    if (::mkdirat(new_parent.get(), temp.c_str(), 0700) == 0) break;
    if (errno != EEXIST || attempt >= 100) return errno;
  }
  int result = 0;
  {
    UniqueFd from(::openat(old_parent.get(), old_name.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    UniqueFd to(
        ::openat(new_parent.get(), temp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!from.valid() || !to.valid()) {
      result = errno;
    } else {
      CopyState state;
      state.root = to.get();
      result = CopyTree(from.get(), to.get(), "", state);
      timespec times[2];
      TimesOf(source, times);
      if (result == 0 &&
          (::fchmod(to.get(), CopiedMode(source)) != 0 || ::futimens(to.get(), times) != 0))
        result = errno;
    }
  }
  if (result == 0 && ::syscall(SYS_renameat2, new_parent.get(), temp.c_str(), new_parent.get(),
                               new_name.c_str(), flags & kRenameNoreplace) != 0)
    result = errno;
  if (result != 0) {
    (void)RemoveTree(new_parent.get(), temp);
    return result;
  }
  // In place under the new name: the old one goes, as `mv` removes it after its copy.
  return RemoveTree(old_parent.get(), old_name);
}

}  // namespace cordon
