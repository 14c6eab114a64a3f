// One contained command, run to its end and reported (runner/shim/run.h).
#include "runner/shim/run.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "core/fd_passing.h"
#include "core/unique_fd.h"
#include "runner/contain.h"

extern char** environ;

namespace cordon::shim {
namespace {

// cordon's requests on the status socket: one byte per probe socket wanted ('4' or '6', see
// kProbeSocketLine), each answered with a socket made here, in the sandbox's network namespace.
// False when cordon's end is closed (nobody supervises this call any more).
bool AnswerProbes(int fd) {
  char req[16];
  const ssize_t n = ::recv(fd, req, sizeof req, MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  for (ssize_t i = 0; i < n; ++i) {
    if (req[i] != '4' && req[i] != '6') continue;
    UniqueFd sock(::socket(req[i] == '4' ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int passed = sock.get();
    std::span<const int> fds;
    if (sock.valid()) fds = std::span<const int>(&passed, 1);
    (void)SendWithFds(fd, kProbeSocketLine, fds);
  }
  return true;
}

// Reaps every ended child but `keep`, whose status and rusage the report needs.
void ReapOthers(pid_t keep) {
  while (true) {
    siginfo_t si{};
    if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) return;
    if (si.si_pid == keep) return;
    ::waitpid(si.si_pid, nullptr, WNOHANG);
  }
}

// This process's /proc/self/io: its own I/O plus that of every child it (and they, down the
// tree) reaped, as the kernel adds a reaped child's counts to its parent's. nullopt when the
// file is missing (no CONFIG_TASK_IO_ACCOUNTING) or unreadable.
std::optional<IoCounts> ReadSelfIo() {
  std::FILE* f = std::fopen("/proc/self/io", "re");
  if (f == nullptr) return std::nullopt;
  IoCounts c;
  int found = 0;
  char key[64];
  unsigned long long v = 0;
  while (std::fscanf(f, "%63[^:]: %llu ", key, &v) == 2) {
    const std::string k = key;
    if (k == "rchar") c.rchar = v, ++found;
    if (k == "wchar") c.wchar = v, ++found;
    if (k == "read_bytes") c.read_bytes = v, ++found;
    if (k == "write_bytes") c.write_bytes = v, ++found;
  }
  std::fclose(f);
  if (found != 4) return std::nullopt;
  return c;
}

}  // namespace

Json IoDelta(const IoCounts& before, const IoCounts& after) {
  auto d = [](std::uint64_t a, std::uint64_t b) { return a >= b ? a - b : 0; };
  return {{"read_bytes", d(after.read_bytes, before.read_bytes)},
          {"write_bytes", d(after.write_bytes, before.write_bytes)},
          {"rchar", d(after.rchar, before.rchar)},
          {"wchar", d(after.wchar, before.wchar)}};
}

void StatusChannel::Report(Json j) const {
  if (fd < 0) return;
  if (!spec_sha256.empty()) j["spec_sha256"] = spec_sha256;
  std::string line = j.dump() + "\n";
  ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
}

void StatusChannel::Die(const std::string& step, const Error& e) const {
  Report(
      {{"error",
        {{"step", step}, {"code", CodeName(e.code)}, {"message", e.message}, {"errno", e.err}}}});
  std::fprintf(stderr, "cordon-shim: %s: %s\n", step.c_str(), e.message.c_str());
  _exit(125);
}

void RunCommand(ContainSpec& spec, const StatusChannel& status, const RunOptions& opts) {
  // The command runs in a child that contains itself and execs; this process stays to report
  // the command's real status and resource use, and to end what it leaves behind.
  // What this process itself read and wrote so far (the spec, the status line) is not the
  // command's: the report gives the difference across the command's life.
  const std::optional<IoCounts> io_before = ReadSelfIo();
  Pipe exec_pipe = MakePipe();
  if (!exec_pipe.valid()) status.Die("pipe", {Code::kInternal, "pipe2 failed", errno, {}});
  pid_t child = ::fork();
  if (child < 0) status.Die("fork", {Code::kInternal, std::strerror(errno), errno, {}});
  if (child == 0) {
    exec_pipe.read.Reset();
    // Its own session first (no controlling terminal to inject into, one process group that
    // holds everything it starts: the weaker mode's seccomp rules forbid leaving it), then
    // Contain() in its fixed order, then execve. Nothing runs unconfined after this point.
    ::setsid();
    // This process enforces Landlock and becomes the command: its pid, as cordon sees it, is
    // the one the kernel's Landlock audit records name. cordon reads it from the credentials
    // of this write (SO_PASSCRED on its end of the status socket).
    if (status.fd >= 0) {
      ssize_t n = ::write(status.fd, kConfiningLine.data(), kConfiningLine.size());
      (void)n;
    }
    if (opts.chdir_to_cwd && !spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) {
      const int contain_failed = -1;
      ssize_t n = ::write(exec_pipe.write.get(), &contain_failed, sizeof contain_failed);
      (void)n;
      status.Die("chdir", {Code::kNotFound, "chdir " + spec.cwd + ": " + std::strerror(errno),
                           errno, spec.cwd});
    }
    if (auto failure = Contain(spec)) {
      const int contain_failed = -1;
      ssize_t n = ::write(exec_pipe.write.get(), &contain_failed, sizeof contain_failed);
      (void)n;
      status.Die(failure->step, failure->error);
    }
    std::vector<char*> args;
    for (auto& a : spec.argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (opts.envp != nullptr) environ = opts.envp;  // execvp looks PATH up in it
    ::execvp(args[0], args.data());
    int e = errno;
    ssize_t n = ::write(exec_pipe.write.get(), &e, sizeof e);
    (void)n;
    _exit(127);
  }
  exec_pipe.write.Reset();
  // This process must outlive the command to report it; termination reaches it via the
  // namespace.
  ::signal(SIGTERM, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  int exec_errno = 0;
  bool exec_failed =
      ::read(exec_pipe.read.get(), &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  // While the command runs, watch cordon's end of the status pipe: if cordon is gone (killed,
  // perhaps before bwrap's --die-with-parent was armed), nobody supervises this call any more,
  // so the command's group is killed and this process leaves, which ends the pid namespace.
  const int child_fd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  while (child_fd >= 0 && status.fd >= 0) {
    pollfd fds[2] = {{child_fd, POLLIN, 0}, {status.fd, POLLIN, 0}};
    if (opts.reap_orphans) ReapOthers(child);
    if (::poll(fds, 2, opts.reap_orphans ? 1000 : -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;  // the command ended
    bool gone = (fds[1].revents & (POLLERR | POLLHUP)) != 0;
    if (!gone && (fds[1].revents & POLLIN) != 0) gone = !AnswerProbes(status.fd);
    if (gone) {
      ::kill(-child, SIGKILL);
      ::kill(child, SIGKILL);
      _exit(125);
    }
  }
  int wstatus = 0;
  struct rusage ru {};
  while (::wait4(child, &wstatus, 0, &ru) < 0 && errno == EINTR) {
  }
  // What the command left running in its process group ends with it (inside bwrap the pid
  // namespace goes too; in the weaker mode this is what ends background children).
  ::kill(-child, SIGKILL);
  if (exec_failed && exec_errno == -1) _exit(125);  // Contain() failed; the child reported it
  if (exec_failed) {
    status.Report({{"error",
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
  Json report = {{"cpu_ms", cpu_ms},
                 {"max_rss_kb", all.ru_maxrss},
                 {"command_cpu_ms", own_cpu_ms},
                 {"command_max_rss_kb", ru.ru_maxrss}};
  // The command and every process of its tree that was reaped by the command or its
  // descendants. An orphan the sandbox's init reaped (after its parent ended) is not in it.
  const std::optional<IoCounts> io_after = ReadSelfIo();
  if (io_before && io_after) report["io"] = IoDelta(*io_before, *io_after);
  if (WIFEXITED(wstatus)) {
    report["exit_code"] = WEXITSTATUS(wstatus);
    status.Report(report);
    _exit(WEXITSTATUS(wstatus));
  }
  report["signal"] = WTERMSIG(wstatus);
  report["core_dumped"] = WCOREDUMP(wstatus) != 0;
  status.Report(report);
  _exit(128 + WTERMSIG(wstatus));
}

}  // namespace cordon::shim
