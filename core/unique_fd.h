// UniqueFd and UniqueDir: move-only owners of a file descriptor and a DIR*; MakePipe returns a
// pipe whose two ends are owned from the moment they exist. No raw close() on any error path.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace cordon {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// A pipe's read and write ends; both invalid (errno kept) when pipe2 failed.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
  bool valid() const { return read.valid() && write.valid(); }
};

inline Pipe MakePipe(int flags = O_CLOEXEC) {
  int fds[2] = {-1, -1};
  if (::pipe2(fds, flags) != 0) return {};
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// The owner of an open directory stream (opendir / fdopendir).
class UniqueDir {
 public:
  UniqueDir() = default;
  explicit UniqueDir(DIR* dir) : dir_(dir) {}
  UniqueDir(const UniqueDir&) = delete;
  UniqueDir& operator=(const UniqueDir&) = delete;
  UniqueDir(UniqueDir&& other) noexcept : dir_(std::exchange(other.dir_, nullptr)) {}
  UniqueDir& operator=(UniqueDir&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.dir_, nullptr));
    return *this;
  }
  ~UniqueDir() { Reset(); }

  static UniqueDir Open(const char* path) { return UniqueDir(::opendir(path)); }
  // Takes `fd` over in every case: on failure it is closed here, errno preserved.
  static UniqueDir FromFd(UniqueFd fd) {
    DIR* d = ::fdopendir(fd.get());
    if (d == nullptr) {
      const int saved = errno;
      fd.Reset();
      errno = saved;
      return UniqueDir();
    }
    fd.Release();
    return UniqueDir(d);
  }

  DIR* get() const { return dir_; }
  bool valid() const { return dir_ != nullptr; }
  dirent* Next() { return ::readdir(dir_); }
  void Reset(DIR* dir = nullptr) {
    if (dir_ != nullptr) ::closedir(dir_);
    dir_ = dir;
  }

 private:
  DIR* dir_ = nullptr;
};

}  // namespace cordon
