// cordon-probe: tries one escape per mode from inside the sandbox and reports what happened.
// Exit 0: the attempt SUCCEEDED (an escape); exit 1: it was refused; the errno is printed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int Report(bool ok, const char* what) {
  if (ok) {
    std::printf("ESCAPED: %s\n", what);
    return 0;
  }
  std::printf("refused: %s: errno=%d (%s)\n", what, errno, std::strerror(errno));
  return 1;
}

// One way of giving PATH a set-user-ID or set-group-ID bit, by raw syscall number (glibc would
// route chmod, open and creat through the *at calls). The chmod family makes a plain file first.
bool SetIdAttempt(const std::string& how, const char* path) {
  constexpr long kFchmodat2 = 452;  // not in every libc's headers yet
  auto plain = [&] {
    int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path, O_CREAT | O_WRONLY, 0755));
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  };
  if (how == "chmod-suid") return plain() && ::syscall(SYS_chmod, path, 04755) == 0;
  if (how == "chmod-sgid") return plain() && ::syscall(SYS_chmod, path, 02755) == 0;
  if (how == "fchmod") {
    int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path, O_CREAT | O_WRONLY, 0755));
    return fd >= 0 && ::syscall(SYS_fchmod, fd, 04755) == 0;
  }
  if (how == "fchmodat") return plain() && ::syscall(SYS_fchmodat, AT_FDCWD, path, 02755) == 0;
  if (how == "fchmodat2") {
    return plain() && ::syscall(kFchmodat2, AT_FDCWD, path, 04755, 0) == 0;
  }
  if (how == "open") return ::syscall(SYS_open, path, O_CREAT | O_WRONLY, 04755) >= 0;
  if (how == "openat") return ::syscall(SYS_openat, AT_FDCWD, path, O_CREAT | O_WRONLY, 02755) >= 0;
  if (how == "creat") return ::syscall(SYS_creat, path, 04755) >= 0;
  if (how == "mknod") return ::syscall(SYS_mknod, path, S_IFREG | 04755, 0) == 0;
  if (how == "mknodat") return ::syscall(SYS_mknodat, AT_FDCWD, path, S_IFREG | 02755, 0) == 0;
  if (how == "mkdir") return ::syscall(SYS_mkdir, path, 02755) == 0;
  if (how == "mkdirat") return ::syscall(SYS_mkdirat, AT_FDCWD, path, 02755) == 0;
  if (how == "openat2") {
    open_how oh{};
    oh.flags = O_CREAT | O_WRONLY;
    oh.mode = 04755;
    return ::syscall(SYS_openat2, AT_FDCWD, path, &oh, sizeof oh) >= 0;
  }
  errno = EINVAL;
  return false;
}

// Writes `total` bytes to fd in 1 MiB pieces; prints how far it got.
bool FillFd(int fd, long long total, const char* what) {
  static char chunk[1 << 20];
  std::memset(chunk, 'x', sizeof chunk);
  long long done = 0;
  while (done < total) {
    ssize_t n = ::write(fd, chunk, sizeof chunk);
    if (n <= 0) break;
    done += n;
  }
  int e = errno;
  std::printf("%s: wrote %lld of %lld\n", what, done, total);
  errno = e;
  return done >= total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cordon-probe MODE [ARGS]\n");
    return 2;
  }
  std::string mode = argv[1];
  const char* arg = argc > 2 ? argv[2] : "";
  if (mode == "privs") {
    // What the process holds, without /proc: no_new_privs, seccomp mode, effective capabilities.
    struct {
      std::uint32_t version, pid;
    } hdr{0x20080522, 0};
    struct {
      std::uint32_t effective, permitted, inheritable;
    } data[2]{};
    const long caps = ::syscall(SYS_capget, &hdr, data);
    std::printf("no_new_privs=%d seccomp=%d cap_eff=%u,%u\n",
                ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0),
                caps == 0 ? data[0].effective : 99u, caps == 0 ? data[1].effective : 99u);
    return 0;
  }
  if (mode == "read") {
    int fd = ::open(arg, O_RDONLY);
    char buf[64];
    return Report(fd >= 0 && ::read(fd, buf, sizeof buf) >= 0, "read");
  }
  if (mode == "write") {
    int fd = ::open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    return Report(fd >= 0 && ::write(fd, "pwned\n", 6) == 6, "write");
  }
  if (mode == "connect") {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return Report(false, "socket(AF_INET)");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(std::atoi(arg)));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return Report(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "connect");
  }
  if (mode == "ptrace") {
    return Report(
        ::ptrace(PTRACE_ATTACH, static_cast<pid_t>(std::atoi(arg)), nullptr, nullptr) == 0,
        "ptrace");
  }
  if (mode == "tiocsti" || mode == "tiocsti-high") {
    char c = 'x';
    unsigned long req = TIOCSTI;
    if (mode == "tiocsti-high") req |= 0x100000000ul;
    int rc = static_cast<int>(::syscall(SYS_ioctl, 0, req, &c));
    // Allowed-but-not-a-tty would be ENOTTY; the filter answers EPERM.
    if (rc != 0 && errno == EPERM) return Report(false, "TIOCSTI");
    std::printf("ESCAPED: TIOCSTI was not filtered (rc=%d errno=%d)\n", rc, errno);
    return 0;
  }
  if (mode == "unshare") return Report(::unshare(CLONE_NEWUSER) == 0, "unshare(CLONE_NEWUSER)");
  if (mode == "clone-newns") {
    long pid = ::syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) _exit(0);
    if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return Report(pid > 0, "clone(CLONE_NEWNS)");
  }
  if (mode == "kill")
    return Report(::kill(static_cast<pid_t>(std::atoi(arg)), 0) == 0, "kill -0 host pid");
  if (mode == "fork-flood") {
    int made = 0;
    for (int i = 0; i < 100000; ++i) {
      pid_t p = ::fork();
      if (p < 0) break;
      if (p == 0) {
        ::pause();
        _exit(0);
      }
      ++made;
    }
    std::printf("forked %d\n", made);
    return made >= 100000 ? 0 : 1;
  }
  if (mode == "setid") {
    const char* path = argc > 3 ? argv[3] : "";
    return Report(SetIdAttempt(arg, path), ("setid " + std::string(arg)).c_str());
  }
  if (mode == "setcap") {
    // A file capability (security.capability, revision 2) granting CAP_NET_RAW, effective.
    int fd = ::open(arg, O_CREAT | O_WRONLY, 0755);
    if (fd >= 0) ::close(fd);
    const std::uint32_t cap[5] = {0x02000000u | 1u, 1u << 13, 0, 0, 0};
    return Report(::setxattr(arg, "security.capability", cap, sizeof cap, 0) == 0,
                  "setxattr security.capability");
  }
  if (mode == "io_uring") {
    unsigned char params[120] = {};  // struct io_uring_params
    return Report(::syscall(SYS_io_uring_setup, 4, params) >= 0, "io_uring_setup");
  }
  if (mode == "fill") {
    // Writes BYTES into a new file at PATH (a tmpfs is RAM).
    const long long total = argc > 3 ? std::atoll(argv[3]) : 0;
    int fd = ::open(arg, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0) return Report(false, "open");
    return Report(FillFd(fd, total, "fill"), "fill");
  }
  if (mode == "memfd") {
    // COUNT memfds of BYTES each, written (or ftruncate'd and touched), all kept open.
    const long long bytes = std::atoll(arg);
    const int count = argc > 3 ? std::atoi(argv[3]) : 1;
    const bool by_truncate = argc > 4 && std::string(argv[4]) == "ftruncate";
    for (int i = 0; i < count; ++i) {
      int fd = static_cast<int>(::syscall(SYS_memfd_create, "probe", 0));
      if (fd < 0) return Report(false, "memfd_create");
      if (by_truncate) {
        if (::ftruncate(fd, bytes) != 0) return Report(false, "ftruncate memfd");
        // Touch each page through pwrite, so the pages exist without mapping them.
        for (long long off = 0; off < bytes; off += 4096) {
          if (::pwrite(fd, "x", 1, off) != 1) return Report(false, "touch memfd");
        }
      } else if (!FillFd(fd, bytes, "memfd")) {
        return Report(false, "write memfd");
      }
    }
    return Report(true, "memfd");
  }
  if (mode == "shm") {
    // COUNT SysV segments of BYTES each, touched through a mapping that is dropped again (the
    // segments stay: no IPC_RMID).
    const long long bytes = std::atoll(arg);
    const int count = argc > 3 ? std::atoi(argv[3]) : 1;
    long long made = 0;
    for (int i = 0; i < count; ++i) {
      int id = ::shmget(IPC_PRIVATE, static_cast<std::size_t>(bytes), IPC_CREAT | 0600);
      if (id < 0) {
        std::printf("shm: made %lld bytes\n", made);
        return Report(false, "shmget");
      }
      void* p = ::shmat(id, nullptr, 0);
      if (p == reinterpret_cast<void*>(-1)) return Report(false, "shmat");
      std::memset(p, 'x', static_cast<std::size_t>(bytes));
      ::shmdt(p);
      made += bytes;
    }
    std::printf("shm: made %lld bytes\n", made);
    return Report(true, "shm");
  }
  if (mode == "balloon") {
    // A real balloon: private memory in 1 MiB pieces, every page touched, never freed, up to
    // BYTES. Past the limit malloc fails (RLIMIT_DATA: exit 1, as a program out of memory
    // does) or the cgroup's OOM killer ends it (SIGKILL).
    const long long total = std::atoll(arg);
    long long touched = 0;
    while (touched < total) {
      char* p = static_cast<char*>(std::malloc(1 << 20));
      if (p == nullptr) break;
      for (std::size_t i = 0; i < (1u << 20); i += 4096) p[i] = 'x';
      touched += 1 << 20;
    }
    std::printf("balloon: touched %lld of %lld\n", touched, total);
    std::fflush(stdout);
    if (touched < total) errno = ENOMEM;
    return Report(touched >= total, "balloon");
  }
  if (mode == "shared-anon") {
    // BYTES of shared anonymous memory (shmem that RLIMIT_DATA does not count), touched.
    const auto bytes = static_cast<std::size_t>(std::atoll(arg));
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Report(false, "mmap(MAP_SHARED|MAP_ANONYMOUS)");
    std::memset(p, 'x', bytes);
    return Report(true, "mmap(MAP_SHARED|MAP_ANONYMOUS)");
  }
  if (mode == "spin") {
    // Burns CPU until a limit ends it.
    volatile unsigned long long spins = 0;
    while (true) spins = spins + 1;
  }
  if (mode == "rename") return Report(::rename(arg, argc > 3 ? argv[3] : "") == 0, "rename");
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
