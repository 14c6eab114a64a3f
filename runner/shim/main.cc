// cordon-shim: started by bwrap inside the sandbox. Reads its spec from an inherited memfd,
// applies Contain() (rlimits, no_new_privs, capabilities, Landlock, seccomp), then forks: the
// child execs the command in a new session; the shim waits and reports the real exit status and
// resource use on the status fd, with the SHA-256 of the spec bytes it read (so a test can match
// them with `cordon exec --plan`). It never runs the command if any step fails.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/unique_fd.h"
#include "runner/contain.h"
#include "runner/kernel_audit.h"
#include "runner/shim/sha256.h"

namespace {

int g_status_fd = -1;
std::string g_spec_sha256;  // of the spec as read, before parsing

void Report(cordon::Json j) {
  if (g_status_fd < 0) return;
  if (!g_spec_sha256.empty()) j["spec_sha256"] = g_spec_sha256;
  std::string line = j.dump() + "\n";
  ssize_t n = ::write(g_status_fd, line.data(), line.size());
  (void)n;
}

[[noreturn]] void Die(const std::string& step, const cordon::Error& e) {
  Report({{"error",
           {{"step", step},
            {"code", cordon::CodeName(e.code)},
            {"message", e.message},
            {"errno", e.err}}}});
  std::fprintf(stderr, "cordon-shim: %s: %s\n", step.c_str(), e.message.c_str());
  _exit(125);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Network mode proxy (docs/adr/0005-egress-proxy.md): a listener on the sandbox's own loopback,
// opened here, inside its network namespace and before anything is confined, and sent to cordon,
// which accepts on it outside. The shim keeps no copy: the command cannot accept on it, and the
// port stays taken, so nothing in the sandbox can listen there in its place.
void SendProxyListener(int port) {
  cordon::UniqueFd ls(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!ls.valid()) Die("proxy", {cordon::Code::kSandboxUnavailable, "socket", errno, {}});
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(ls.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(ls.get(), 128) != 0) {
    Die("proxy",
        {cordon::Code::kSandboxUnavailable,
         std::string("listen on 127.0.0.1:") + std::to_string(port) + ": " + std::strerror(errno),
         errno,
         {}});
  }
  if (g_status_fd < 0) Die("proxy", {cordon::Code::kSandboxUnavailable, "no status fd", 0, {}});
  const std::string_view line = cordon::kProxyListenerLine;
  iovec iov{const_cast<char*>(line.data()), line.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int fd = ls.get();
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (::sendmsg(g_status_fd, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    Die("proxy", {cordon::Code::kSandboxUnavailable, "sendmsg of the proxy listener", errno, {}});
  }
}

}  // namespace

int main(int argc, char** argv) {
  int spec_fd = -1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--spec-fd") == 0) spec_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--status-fd") == 0) g_status_fd = std::atoi(argv[i + 1]);
  }
  if (g_status_fd >= 0) {
    // Keep the status fd out of reach of the command (CLOEXEC) and at a high number.
    int fd = ::fcntl(g_status_fd, F_DUPFD_CLOEXEC, 100);
    ::close(g_status_fd);
    g_status_fd = fd;
  }
  if (spec_fd < 0) Die("spec", {cordon::Code::kSandboxUnavailable, "no --spec-fd", 0, {}});
  std::string text = ReadAll(spec_fd);
  g_spec_sha256 = cordon::shim::Sha256Hex(text);
  // Nothing else cordon or bwrap passed down (the spec memfd included) is the command's business.
  if (g_status_fd >= 3) {
    ::close_range(3, static_cast<unsigned>(g_status_fd) - 1, 0);
    ::close_range(static_cast<unsigned>(g_status_fd) + 1, ~0U, 0);
  } else {
    ::close_range(3, ~0U, 0);
  }
  auto parsed = cordon::ParseJsonBounded(text);
  if (!parsed) Die("spec", parsed.error());
  auto spec = cordon::ContainSpecFromJson(*parsed);
  if (!spec) Die("spec", spec.error());

  // A cordon that died while bwrap was starting supervises nothing: run nothing for it.
  if (g_status_fd >= 0) {
    pollfd gone{g_status_fd, 0, 0};
    if (::poll(&gone, 1, 0) > 0 && (gone.revents & (POLLERR | POLLHUP)) != 0) _exit(125);
  }
  if (spec->proxy_port > 0) SendProxyListener(spec->proxy_port);
  // The command runs in a child that contains itself and execs; this process stays to report
  // the command's real status and resource use, and to end what it leaves behind.
  cordon::Pipe exec_pipe = cordon::MakePipe();
  if (!exec_pipe.valid()) Die("pipe", {cordon::Code::kInternal, "pipe2 failed", errno, {}});
  pid_t child = ::fork();
  if (child < 0) Die("fork", {cordon::Code::kInternal, std::strerror(errno), errno, {}});
  if (child == 0) {
    exec_pipe.read.Reset();
    // Its own session first (no controlling terminal to inject into, one process group that
    // holds everything it starts: the weaker mode's seccomp rules forbid leaving it), then
    // Contain() in its fixed order, then execve. Nothing runs unconfined after this point.
    ::setsid();
    // This process enforces Landlock and becomes the command: its pid, as cordon sees it, is
    // the one the kernel's Landlock audit records name. cordon reads it from the credentials
    // of this write (SO_PASSCRED on its end of the status socket).
    if (g_status_fd >= 0) {
      ssize_t n =
          ::write(g_status_fd, cordon::kConfiningLine.data(), cordon::kConfiningLine.size());
      (void)n;
    }
    if (auto failure = cordon::Contain(*spec)) {
      const int contain_failed = -1;
      ssize_t n = ::write(exec_pipe.write.get(), &contain_failed, sizeof contain_failed);
      (void)n;
      Die(failure->step, failure->error);
    }
    std::vector<char*> args;
    for (auto& a : spec->argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    int e = errno;
    ssize_t n = ::write(exec_pipe.write.get(), &e, sizeof e);
    (void)n;
    _exit(127);
  }
  exec_pipe.write.Reset();
  // The shim must outlive the command to report it; termination reaches it via the namespace.
  ::signal(SIGTERM, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  int exec_errno = 0;
  bool exec_failed =
      ::read(exec_pipe.read.get(), &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  // While the command runs, watch cordon's end of the status pipe: if cordon is gone (killed,
  // perhaps before bwrap's --die-with-parent was armed), nobody supervises this call any more,
  // so the command's group is killed and the shim leaves, which ends the pid namespace.
  const int child_fd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  while (child_fd >= 0 && g_status_fd >= 0) {
    pollfd fds[2] = {{child_fd, POLLIN, 0}, {g_status_fd, 0, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;  // the command ended
    if ((fds[1].revents & (POLLERR | POLLHUP)) != 0) {
      ::kill(-child, SIGKILL);
      ::kill(child, SIGKILL);
      _exit(125);
    }
  }
  int status = 0;
  struct rusage ru {};
  while (::wait4(child, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  // What the command left running in its process group ends with it (inside bwrap the pid
  // namespace goes too; in the weaker mode this is what ends background children).
  ::kill(-child, SIGKILL);
  if (exec_failed && exec_errno == -1) _exit(125);  // Contain() failed; the child reported it
  if (exec_failed) {
    Report({{"error",
             {{"step", "execve"},
              {"code", "not_found"},
              {"message", std::strerror(exec_errno)},
              {"errno", exec_errno}}}});
    _exit(127);
  }
  struct rusage all {};
  ::getrusage(RUSAGE_CHILDREN, &all);
  double cpu_ms = (all.ru_utime.tv_sec + all.ru_stime.tv_sec) * 1000.0 +
                  (all.ru_utime.tv_usec + all.ru_stime.tv_usec) / 1000.0;
  // The command's own usage (wait4: it and what it waited for), beside the whole tree's: the
  // CPU and memory limits are per process, and cordon names the one that ended the command
  // from these (runner/limit_hit.h).
  const double own_cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
                            (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
  cordon::Json report = {{"cpu_ms", cpu_ms},
                         {"max_rss_kb", all.ru_maxrss},
                         {"command_cpu_ms", own_cpu_ms},
                         {"command_max_rss_kb", ru.ru_maxrss}};
  if (WIFEXITED(status)) {
    report["exit_code"] = WEXITSTATUS(status);
    Report(report);
    _exit(WEXITSTATUS(status));
  }
  report["signal"] = WTERMSIG(status);
  report["core_dumped"] = WCOREDUMP(status) != 0;
  Report(report);
  _exit(128 + WTERMSIG(status));
}
