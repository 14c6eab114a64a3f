// The before-images store (core/before_images.h): content-addressed raw bytes under cordon's
// state directory, written through the store directory's descriptor only.
#include "core/before_images.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/fs.h"
#include "core/hash.h"

namespace cordon {

bool IsBeforeImageName(std::string_view name) {
  return name.size() == 64 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
}

BeforeImageStore::BeforeImageStore(std::string dir, BeforeImageLimits limits)
    : dir_(std::move(dir)), limits_(limits) {}

std::string BeforeImageStore::DefaultDir() { return CordonStateDir() + "/before-images"; }

std::uint64_t BeforeImageStore::stored_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stored_;
}

Result<int> BeforeImageStore::DirFd() {
  if (dir_fd_.valid()) return dir_fd_.get();
  if (dir_.empty() || dir_[0] != '/') {
    return Fail(Code::kInvalidInput, "the before-images store must be an absolute path", 0, dir_);
  }
  // The state directory and what leads to it, each made 0700 where missing (as cordon's other
  // own directories are). The path is the user's (XDG_STATE_HOME or HOME), never the agent's.
  for (std::size_t slash = dir_.find('/', 1);; slash = dir_.find('/', slash + 1)) {
    const std::string part = dir_.substr(0, slash);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      return SysFail(Code::kInternal, "mkdir", part);
    if (slash == std::string::npos) break;
  }
  UniqueFd d(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d.valid()) return SysFail(Code::kInternal, "open", dir_);
  struct stat st {};
  if (::fstat(d.get(), &st) != 0) return SysFail(Code::kInternal, "fstat", dir_);
  if (st.st_uid != ::geteuid()) {
    return Fail(Code::kDeniedByPolicy, "the before-images store is owned by another user", 0, dir_);
  }
  if ((st.st_mode & 077) != 0 && ::fchmod(d.get(), 0700) != 0) {
    return SysFail(Code::kInternal, "fchmod", dir_);
  }
  dir_fd_ = std::move(d);
  return dir_fd_.get();
}

std::optional<BeforeImageOutcome> BeforeImageStore::Reserve(std::uint64_t size) {
  if (size > limits_.max_file_bytes) return BeforeImageOutcome{"over_file_cap", ""};
  if (stored_ + size > limits_.max_session_bytes) return BeforeImageOutcome{"over_session_cap", ""};
  return std::nullopt;
}

// Under mu_: the entry is written under a temporary name made with O_EXCL | O_NOFOLLOW in the
// store directory, then renamed onto its hash (an entry changed since it was stored is replaced
// by the right bytes). Not fsynced: an image a crash loses is reported missing by `audit diff`.
BeforeImageOutcome BeforeImageStore::Install(std::string_view content, const std::string& sha256) {
  auto failed = [this](const Error& e) {
    return BeforeImageOutcome{"failed", e.message + " (store " + dir_ + ")"};
  };
  auto dfd = DirFd();
  if (!dfd) return failed(dfd.error());
  struct stat st {};
  if (::fstatat(*dfd, sha256.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
      static_cast<std::uint64_t>(st.st_size) == content.size()) {
    return BeforeImageOutcome{"stored", ""};  // there already (read back only if it hashes)
  }
  if (auto refused = Reserve(content.size())) return *refused;
  const std::string tmp = ".tmp-" + std::to_string(::getpid()) + "-" + RandomHex(8);
  UniqueFd out(::openat(*dfd, tmp.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600));
  if (!out.valid()) return failed(SysFail(Code::kInternal, "create", tmp).error());
  if (Status w = WriteAll(out.get(), content, tmp); !w) {
    ::unlinkat(*dfd, tmp.c_str(), 0);
    return failed(w.error());
  }
  if (::renameat(*dfd, tmp.c_str(), *dfd, sha256.c_str()) != 0) {
    const Error e = SysFail(Code::kInternal, "renameat", sha256).error();
    ::unlinkat(*dfd, tmp.c_str(), 0);
    return failed(e);
  }
  stored_ += content.size();
  return BeforeImageOutcome{"stored", ""};
}

BeforeImageOutcome BeforeImageStore::Put(std::string_view content, const std::string& sha256) {
  if (!IsBeforeImageName(sha256) || Sha256Hex(content) != sha256) {
    return BeforeImageOutcome{"failed", "the content does not hash to " + sha256};
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (content.size() > limits_.max_file_bytes) return BeforeImageOutcome{"over_file_cap", ""};
  return Install(content, sha256);
}

BeforeImageOutcome BeforeImageStore::PutFd(int fd, std::uint64_t size, const std::string& sha256) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto refused = Reserve(size)) return *refused;
  }
  std::string content;
  content.resize(size);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t r = ::pread(fd, content.data() + got, size - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return BeforeImageOutcome{"failed", std::string("read: ") + std::strerror(errno)};
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  content.resize(got);
  return Put(content, sha256);
}

Result<std::string> ReadBeforeImage(const std::string& dir, const std::string& sha256,
                                    std::uint64_t max_bytes) {
  if (!IsBeforeImageName(sha256)) {
    return Fail(Code::kInvalidInput, "not a SHA-256 (64 lowercase hex digits)", 0, sha256);
  }
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.valid()) {
    return SysFail(errno == ENOENT ? Code::kNotFound : Code::kInternal, "open", dir);
  }
  UniqueFd f(
      ::openat(d.get(), sha256.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!f.valid()) {
    return SysFail(errno == ENOENT ? Code::kNotFound : Code::kInternal, "open", sha256);
  }
  struct stat st {};
  if (::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Fail(Code::kUnsupportedFileType, "not a regular file", 0, sha256);
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return Fail(Code::kTooLarge, "larger than " + std::to_string(max_bytes) + " bytes", 0, sha256);
  }
  std::string content;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(f.get(), buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return SysFail(Code::kInternal, "read", sha256);
    if (r == 0) break;
    content.append(buf, static_cast<std::size_t>(r));
    if (content.size() > max_bytes) {
      return Fail(Code::kTooLarge, "larger than " + std::to_string(max_bytes) + " bytes", 0,
                  sha256);
    }
  }
  if (Sha256Hex(content) != sha256) {
    return Fail(Code::kConflict,
                "its bytes no longer hash to its name (changed after it was stored)", 0, sha256);
  }
  return content;
}

}  // namespace cordon
