// cordon-probe: tries one escape per mode from inside the sandbox and reports what happened.
// Exit 0: the attempt SUCCEEDED (an escape); exit 1: it was refused; the errno is printed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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
  if (mode == "rename") return Report(::rename(arg, argc > 3 ? argv[3] : "") == 0, "rename");
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
