// Kernel-contained workspace I/O. No string-prefix check decides containment: openat2 does.
#include "core/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>

#include "core/hash.h"
#include "core/walk.h"

namespace cordon {
namespace {

constexpr std::uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

Result<UniqueFd> OpenBeneath(int dirfd, const std::string& rel, std::uint64_t flags,
                             std::uint64_t mode = 0) {
  struct open_how how {};
  // O_PATH admits no flags but O_CLOEXEC/O_DIRECTORY/O_NOFOLLOW.
  how.flags = flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY);
  how.mode = mode;
  how.resolve = kResolve;
  long fd;
  do {
    fd = ::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how);
  } while (fd < 0 && (errno == EINTR || errno == EAGAIN));
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  int e = errno;
  switch (e) {
    case ENOENT:
      return Fail(Code::kNotFound, "no such file or directory: " + rel, e, rel);
    case ENOTDIR:
      return Fail(Code::kNotFound, "a parent of " + rel + " is not a directory", e, rel);
    case EXDEV:
      return Fail(Code::kOutsideWorkspace, rel + " resolves outside the workspace", e, rel);
    case ELOOP:
      return Fail(Code::kInvalidInput,
                  rel + " goes through a symbolic link; cordon does not follow symlinks", e, rel);
    case EACCES:
    case EPERM:
      return Fail(Code::kDeniedByPolicy, "permission denied by the operating system: " + rel, e,
                  rel);
    case EISDIR:
      return Fail(Code::kUnsupportedFileType, rel + " is a directory", e, rel);
    case ENAMETOOLONG:  // a name over 255 bytes, or a path over PATH_MAX
      return Fail(Code::kInvalidInput,
                  "path too long: a name is at most 255 bytes, a path at most 4095 (" +
                      std::to_string(rel.size()) + " bytes given)",
                  e, rel.substr(0, 200));
    case ENOSYS:
      return Fail(Code::kSandboxUnavailable,
                  "openat2 is unavailable (kernel older than 5.6); cordon cannot contain paths", e,
                  rel);
    default:
      return SysFail(Code::kInternal, "openat2", rel, e);
  }
}

std::string DescribeType(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// A same-directory temporary file that is unlinked unless Installed() is called.
class TempFile {
 public:
  TempFile(int dirfd, std::string name, UniqueFd fd)
      : dirfd_(dirfd), name_(std::move(name)), fd_(std::move(fd)) {}
  ~TempFile() {
    if (!installed_) ::unlinkat(dirfd_, name_.c_str(), 0);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  static Result<TempFile> Create(int dirfd, const std::string& leaf, mode_t mode) {
    SweepStale(dirfd);
    for (int attempt = 0; attempt < 16; ++attempt) {
      // The writer's pid is in the name, so that a later writer can tell a dead one's leftover.
      std::string name = ".cordon-tmp-" + std::to_string(::getpid()) + "-" + leaf.substr(0, 64) +
                         "-" + RandomHex(6);
      int fd = ::openat(dirfd, name.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, mode);
      if (fd >= 0) return TempFile(dirfd, name, UniqueFd(fd));
      if (errno != EEXIST) {
        return SysFail(errno == EACCES || errno == EROFS ? Code::kDeniedByPolicy : Code::kInternal,
                       "create temporary file", name);
      }
    }
    return Fail(Code::kInternal, "could not pick a unique temporary file name");
  }

  TempFile(TempFile&& o) noexcept
      : dirfd_(o.dirfd_),
        name_(std::move(o.name_)),
        fd_(std::move(o.fd_)),
        installed_(std::exchange(o.installed_, true)) {}

  int fd() const { return fd_.get(); }
  const std::string& name() const { return name_; }
  void Installed() { installed_ = true; }

  // Removes the temporary files of writers that were killed mid-write (kill -9 leaves them):
  // `.cordon-tmp-PID-…` whose PID no longer exists and that were last written over 30 s ago
  // (the age guards a writer on another host that shares the directory).
  static void SweepStale(int dirfd) {
    UniqueDir d =
        UniqueDir::FromFd(UniqueFd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
    if (!d.valid()) return;
    const std::time_t now = std::time(nullptr);
    while (dirent* e = d.Next()) {
      if (!NamesDeadProcess(e->d_name, ".cordon-tmp-")) continue;
      struct stat st {};
      if (::fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        continue;
      if (now - st.st_mtime < 30) continue;
      ::unlinkat(dirfd, e->d_name, 0);
    }
  }

 private:
  int dirfd_;
  std::string name_;
  UniqueFd fd_;
  bool installed_ = false;
};

Status FsyncDir(int dirfd, const std::string& where) {
  if (::fsync(dirfd) != 0 && errno != EINVAL) return SysFail(Code::kInternal, "fsync dir", where);
  return {};
}

}  // namespace

bool NamesDeadProcess(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return false;
  std::string_view rest = name.substr(prefix.size());
  const std::size_t dash = rest.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 9) return false;
  pid_t pid = 0;
  for (char c : rest.substr(0, dash)) {
    if (c < '0' || c > '9') return false;
    pid = pid * 10 + (c - '0');
  }
  return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

Result<std::string> ReadKeyFileChecked(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    const int err = errno;
    return Fail(err == ENOENT ? Code::kNotFound : Code::kInvalidInput,
                "cannot read key file " + path + ": " + std::strerror(err), err, path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return SysFail(Code::kInternal, "fstat", path);
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return Fail(Code::kDeniedByPolicy,
                "key file " + path + " can be read or written by group or other users (mode " +
                    mode + "): whoever reads a key can forge what it protects; chmod 600 it",
                0, path);
  }
  constexpr std::size_t kMax = 1 << 20;
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysFail(Code::kInvalidInput, "read key file", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > kMax) {
      return Fail(Code::kInvalidInput, "key file " + path + " is larger than 1 MiB", 0, path);
    }
  }
  return out;
}

Status WriteAll(int fd, std::string_view data, const std::string& where) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysFail(WriteErrorCode(errno), "write", where);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

std::optional<std::string> ReadSmallFileAt(int dir_fd, const char* name, std::size_t max) {
  UniqueFd f(::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!f.valid() || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string out(max + 1, '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(f.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max) return std::nullopt;
  out.resize(got);
  return out;
}

FileIdentity IdentityOf(const struct stat& st) {
  return FileIdentity{
      st.st_dev,  st.st_ino,
      st.st_size, static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
      st.st_mode, st.st_uid,
      st.st_gid};
}

Result<std::string> NormalizeWorkspacePath(std::string_view root, std::string_view path) {
  if (path.find('\0') != std::string_view::npos) {
    return Fail(Code::kInvalidInput, "path contains a NUL byte");
  }
  if (path.empty()) return Fail(Code::kInvalidInput, "path is empty");
  if (path.size() > PATH_MAX) {
    return Fail(Code::kInvalidInput, "path is longer than " + std::to_string(PATH_MAX) + " bytes");
  }
  std::string_view rest = path;
  if (path.front() == '/') {
    // Only turns an absolute path into a relative one; openat2 decides containment.
    std::string_view r = root;
    while (r.size() > 1 && r.back() == '/') r.remove_suffix(1);
    if (path == r) {
      rest = {};
    } else if (r == "/") {
      rest = path.substr(1);
    } else if (path.size() > r.size() && path.substr(0, r.size()) == r && path[r.size()] == '/') {
      rest = path.substr(r.size() + 1);
    } else {
      return Fail(Code::kOutsideWorkspace, "absolute path " + std::string(path) +
                                               " is outside the workspace " + std::string(root));
    }
  }
  std::vector<std::string_view> parts;
  while (!rest.empty()) {
    std::size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part.size() > NAME_MAX) {  // openat2 and renameat2 would say ENAMETOOLONG
      return Fail(Code::kInvalidInput, "a name in the path is " + std::to_string(part.size()) +
                                           " bytes; a name is at most " + std::to_string(NAME_MAX));
    }
    if (part == "..") {
      if (parts.empty()) {
        return Fail(Code::kOutsideWorkspace,
                    "path " + std::string(path) + " climbs out of the workspace with ..");
      }
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  if (parts.empty()) return std::string(".");
  std::string out;
  for (auto p : parts) {
    if (!out.empty()) out += '/';
    out += p;
  }
  return out;
}

Result<Workspace> Workspace::Open(const std::string& dir) {
  char* real = ::realpath(dir.c_str(), nullptr);
  if (real == nullptr) return SysFail(Code::kNotFound, "workspace", dir);
  std::string root(real);
  std::free(real);
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return SysFail(Code::kNotFound, "open workspace", root);
  Workspace ws;
  ws.root_ = root;
  ws.fd_ = UniqueFd(fd);
  return ws;
}

Result<std::string> Workspace::Relative(std::string_view path) const {
  return NormalizeWorkspacePath(root_, path);
}

namespace {
// Resolves `rel` with O_PATH and checks that it is a regular file; *st receives its stat.
Result<UniqueFd> ProbeRegular(int dirfd, const std::string& rel, struct stat* st) {
  ASSIGN_OR_RETURN(UniqueFd probe, OpenBeneath(dirfd, rel, O_PATH));
  if (::fstat(probe.get(), st) != 0) return SysFail(Code::kInternal, "fstat", rel);
  if (!S_ISREG(st->st_mode)) {
    return Fail(Code::kUnsupportedFileType, rel + " is " + DescribeType(st->st_mode) +
                                                "; only regular files are read or written");
  }
  return probe;
}
}  // namespace

Result<std::uint64_t> Workspace::RegularSize(const std::string& rel) const {
  struct stat st {};
  ASSIGN_OR_RETURN(UniqueFd probe, ProbeRegular(fd(), rel, &st));
  return static_cast<std::uint64_t>(st.st_size);
}

Result<UniqueFd> Workspace::OpenRegular(const std::string& rel) const {
  struct stat st {};
  ASSIGN_OR_RETURN(UniqueFd probe, ProbeRegular(fd(), rel, &st));
  ASSIGN_OR_RETURN(UniqueFd file, OpenBeneath(fd(), rel, O_RDONLY | O_NONBLOCK));
  struct stat st2 {};
  if (::fstat(file.get(), &st2) != 0) return SysFail(Code::kInternal, "fstat", rel);
  if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
    return Fail(Code::kConflict, rel + " changed while it was being opened");
  }
  return file;
}

Result<FileContent> Workspace::ReadRegular(const std::string& rel, std::uint64_t max_bytes) const {
  ASSIGN_OR_RETURN(UniqueFd file, OpenRegular(rel));
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) return SysFail(Code::kInternal, "fstat", rel);
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return Fail(Code::kTooLarge, rel + " is " + std::to_string(st.st_size) +
                                     " bytes; the limit is " + std::to_string(max_bytes));
  }
  FileContent out;
  out.id = IdentityOf(st);
  out.data.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (true) {
    if (got == out.data.size()) {
      if (out.data.size() >= max_bytes + 1) break;
      out.data.resize(std::min<std::uint64_t>(out.data.size() + 65536, max_bytes + 1));
    }
    ssize_t n = ::read(file.get(), out.data.data() + got, out.data.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysFail(Code::kInternal, "read", rel);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_bytes) {
    return Fail(Code::kTooLarge, rel + " grew past the limit of " + std::to_string(max_bytes) +
                                     " bytes while it was read");
  }
  out.data.resize(got);
  return out;
}

Result<UniqueFd> Workspace::OpenParent(const std::string& rel, bool create_missing,
                                       std::string* leaf) const {
  if (rel == ".") return Fail(Code::kInvalidInput, "path names the workspace root itself");
  std::size_t slash = rel.find_last_of('/');
  *leaf = slash == std::string::npos ? rel : rel.substr(slash + 1);
  ASSIGN_OR_RETURN(UniqueFd dir, OpenBeneath(fd(), ".", O_RDONLY | O_DIRECTORY));
  if (slash == std::string::npos) return dir;
  std::string parents = rel.substr(0, slash);
  std::size_t start = 0;
  while (start <= parents.size()) {
    std::size_t end = parents.find('/', start);
    if (end == std::string::npos) end = parents.size();
    std::string comp = parents.substr(start, end - start);
    start = end + 1;
    auto next = OpenBeneath(dir.get(), comp, O_RDONLY | O_DIRECTORY);
    if (!next && next.error().err == ENOENT && create_missing) {
      if (::mkdirat(dir.get(), comp.c_str(), 0777) != 0 && errno != EEXIST) {
        return SysFail(errno == EACCES || errno == EROFS ? Code::kDeniedByPolicy : Code::kInternal,
                       "mkdirat", comp);
      }
      TRY(FsyncDir(dir.get(), comp));
      next = OpenBeneath(dir.get(), comp, O_RDONLY | O_DIRECTORY);
    }
    if (!next) {
      Error e = next.error();
      if (e.err == ENOTDIR) e.message = "a parent of " + rel + " is not a directory";
      if (e.err == ENOENT) e.message = "parent directory of " + rel + " does not exist";
      return std::unexpected(e);
    }
    dir = std::move(*next);
  }
  return dir;
}

Result<WriteOutcome> Workspace::CreateExclusive(const std::string& rel,
                                                std::string_view content) const {
  std::string leaf;
  ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(rel, /*create_missing=*/true, &leaf));
  struct stat st {};
  if (::fstatat(dir.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return Fail(Code::kAlreadyExists, rel + " already exists");
  }
  ASSIGN_OR_RETURN(TempFile tmp, TempFile::Create(dir.get(), leaf, 0666));
  TRY(WriteAll(tmp.fd(), content, rel));
  if (::fsync(tmp.fd()) != 0) return SysFail(WriteErrorCode(errno), "fsync", rel);
  if (::renameat2(dir.get(), tmp.name().c_str(), dir.get(), leaf.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST) return Fail(Code::kAlreadyExists, rel + " appeared while it was created");
    if (errno != EINVAL && errno != ENOSYS) return SysFail(Code::kInternal, "renameat2", rel);
    // The filesystem lacks RENAME_NOREPLACE: a hard link fails on an existing name too.
    if (::linkat(dir.get(), tmp.name().c_str(), dir.get(), leaf.c_str(), 0) != 0) {
      if (errno == EEXIST) {
        return Fail(Code::kAlreadyExists, rel + " appeared while it was created");
      }
      return SysFail(Code::kInternal, "linkat", rel);
    }
    ::unlinkat(dir.get(), tmp.name().c_str(), 0);
  }
  tmp.Installed();
  TRY(FsyncDir(dir.get(), rel));
  WriteOutcome out;
  out.sha256_after = Sha256Hex(content);
  out.bytes_after = content.size();
  return out;
}

Result<WriteOutcome> Workspace::AtomicReplace(const std::string& rel, std::string_view content,
                                              const FileContent& expected) const {
  std::string leaf;
  ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(rel, /*create_missing=*/false, &leaf));
  ASSIGN_OR_RETURN(TempFile tmp, TempFile::Create(dir.get(), leaf, 0600));
  TRY(WriteAll(tmp.fd(), content, rel));
  if (::fchmod(tmp.fd(), expected.id.mode & 07777) != 0) {
    return SysFail(Code::kInternal, "fchmod", rel);
  }
  if (::geteuid() == 0 || expected.id.uid == ::geteuid()) {
    // Keep the owner when we are allowed to; failure here only means we may not.
    (void)::fchown(tmp.fd(), expected.id.uid, expected.id.gid);
  }
  if (::fsync(tmp.fd()) != 0) return SysFail(WriteErrorCode(errno), "fsync", rel);
  struct stat now {};
  if (::fstatat(dir.get(), leaf.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) {
    return Fail(Code::kConflict, rel + " disappeared while it was being replaced");
  }
  if (!(IdentityOf(now) == expected.id)) {
    return Fail(Code::kConflict, rel + " changed while it was being replaced; nothing written");
  }
  if (::renameat(dir.get(), tmp.name().c_str(), dir.get(), leaf.c_str()) != 0) {
    return SysFail(Code::kInternal, "renameat", rel);
  }
  tmp.Installed();
  TRY(FsyncDir(dir.get(), rel));
  WriteOutcome out;
  out.existed = true;
  out.sha256_before = Sha256Hex(expected.data);
  out.bytes_before = expected.data.size();
  out.sha256_after = Sha256Hex(content);
  out.bytes_after = content.size();
  return out;
}

namespace {

constexpr std::size_t kMaxAgentsFiles = 32;
constexpr int kMaxAgentsDepth = 6;
constexpr std::size_t kMaxAgentsDirEntries = 20000;

}  // namespace

std::vector<std::string> FindAgentsFiles(const Workspace& ws) {
  std::vector<std::string> found;
  WalkOptions opts;
  opts.max_depth = kMaxAgentsDepth;
  opts.too_deep = TooDeep::kSkip;
  opts.max_entries = kMaxAgentsDirEntries;
  opts.too_many = TooDeep::kSkip;
  opts.sorted = true;
  opts.what = "the workspace";
  WalkHooks hooks;
  hooks.visit = [&](const WalkEntry& e) -> Result<Visit> {
    if (found.size() >= kMaxAgentsFiles) return Visit::kStop;
    const std::string_view name = e.name;
    if (e.type == DT_REG && name == "AGENTS.md") found.push_back(*e.rel);
    if (e.type == DT_DIR && name[0] != '.' && name != "node_modules") return Visit::kDescend;
    return Visit::kNext;
  };
  // A directory that cannot be read is left out: these files are guidance, not a check.
  hooks.unopenable = [](const WalkEntry&, int) -> Result<UniqueFd> { return UniqueFd(); };
  (void)WalkTree(ws.fd(), opts, hooks);
  // Root first (it is found first at depth 0 only if present; make it explicit), then by path.
  std::stable_sort(found.begin(), found.end(), [](const std::string& x, const std::string& y) {
    const bool xr = x == "AGENTS.md", yr = y == "AGENTS.md";
    if (xr != yr) return xr;
    return x < y;
  });
  if (found.size() > kMaxAgentsFiles) found.resize(kMaxAgentsFiles);
  return found;
}

std::string CordonStateDir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/') {
    return std::string(x) + "/cordon";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') {
    return std::string(h) + "/.local/state/cordon";
  }
  return "/tmp/cordon-state-" + std::to_string(::getuid());
}

std::string CordonCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/') {
    return std::string(x) + "/cordon";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/' && h[1] != '\0') {
    return std::string(h) + "/.cache/cordon";
  }
  return "/tmp/cordon-cache-" + std::to_string(::getuid());
}

}  // namespace cordon
