// One contained command, run to its end and reported (runner/shim/run.h).
#include "runner/shim/run.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include "runner/rename_supervisor.h"

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
// tree) reaped, as the kernel adds a reaped child's counts to its parent's. Read from a
// descriptor opened before this process restricted itself (a seq file: each read from offset 0
// is current). nullopt when the file is missing (no CONFIG_TASK_IO_ACCOUNTING) or unreadable.
std::optional<IoCounts> ReadSelfIo(int fd) {
  if (fd < 0) return std::nullopt;
  char text[1024];
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return std::nullopt;
  text[n] = 0;
  IoCounts c;
  int found = 0;
  for (const char* line = text; line != nullptr && *line != 0;) {
    char key[64];
    unsigned long long v = 0;
    if (std::sscanf(line, "%63[^:]: %llu", key, &v) == 2) {
      const std::string k = key;
      if (k == "rchar") c.rchar = v, ++found;
      if (k == "wchar") c.wchar = v, ++found;
      if (k == "read_bytes") c.read_bytes = v, ++found;
      if (k == "write_bytes") c.write_bytes = v, ++found;
    }
    line = std::strchr(line, '\n');
    if (line != nullptr) ++line;
  }
  if (found != 4) return std::nullopt;
  return c;
}

// The staged workspace's rename supervisor (runner/rename_supervisor.h): before the fork this
// process takes the command's Landlock ruleset and no_new_privs (so the command's domain is
// nested in its own, and it may read the command's memory), and sets the sandbox's SysV shm
// limits the command would have set (Landlock then keeps /proc/sys from both). A step that
// fails is reported and ends the call, as it would in the command.
void RestrictAsTheCommand(ContainSpec& spec, const StatusChannel& status) {
  if (spec.ipc_shm_bytes > 0) {
    if (auto st = ApplyIpcShmLimits(spec.ipc_shm_bytes); !st) status.Die("ipc_limits", st.error());
    spec.ipc_shm_bytes = 0;  // done for the namespace both share
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    status.Die("no_new_privs",
               {Code::kSandboxUnavailable, "prctl(PR_SET_NO_NEW_PRIVS)", errno, {}});
  if (auto st = ApplyLandlock(*spec.landlock); !st) status.Die("landlock", st.error());
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
  const UniqueFd self_io(::open("/proc/self/io", O_RDONLY | O_CLOEXEC));
  const std::optional<IoCounts> io_before = ReadSelfIo(self_io.get());
  Pipe exec_pipe = MakePipe();
  if (!exec_pipe.valid()) status.Die("pipe", {Code::kInternal, "pipe2 failed", errno, {}});
  // The staged workspace's renames (runner/rename_supervisor.h): the command sends its listener
  // on this pair before it execs.
  const bool supervise_renames = !spec.rename_notify_program.empty() && spec.landlock;
  UniqueFd listener_here, listener_there;
  if (supervise_renames) {
    int pair[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
      status.Die("socketpair", {Code::kInternal, std::strerror(errno), errno, {}});
    listener_here.Reset(pair[0]);
    listener_there.Reset(pair[1]);
    RestrictAsTheCommand(spec, status);
  }
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
    if (supervise_renames) {
      // After cordon's filter, so that its refusals come first. Where the kernel refuses a
      // listener, renames behave as they do without one (EXDEV for a lower directory).
      auto listener = LoadSeccompListener(spec.rename_notify_program);
      const int fd = listener ? listener->get() : -1;
      const std::string_view line = listener ? "listener" : "none";
      (void)SendWithFds(listener_there.get(), line,
                        listener ? std::span<const int>(&fd, 1) : std::span<const int>());
      listener_there.Reset();
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
  UniqueFd listener;
  RenameCounts renames;
  if (supervise_renames) {
    listener_there.Reset();
    // The command's side sends its listener (or "none") before it execs; an end of file means it
    // failed before that (and reports why on the exec pipe).
    listener = ReceiveOneFd(listener_here.get());
    listener_here.Reset();
    // The copies this process makes for the command are bounded as its own writes are, and
    // it holds no capability the command does not.
    for (const RlimitSpec& r : spec.rlimits) {
      if (r.resource != RLIMIT_FSIZE) continue;
      const rlimit rl{r.soft.value_or(r.value), r.value};
      (void)::setrlimit(RLIMIT_FSIZE, &rl);
    }
    ::signal(SIGXFSZ, SIG_IGN);  // a copy past the limit fails with EFBIG, as the command's would
    if (auto st = DropAllCapabilities(); !st) {
      ::kill(child, SIGKILL);
      status.Die("capabilities", st.error());
    }
  }
  int exec_errno = 0;
  bool exec_failed =
      ::read(exec_pipe.read.get(), &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  // While the command runs, watch cordon's end of the status pipe: if cordon is gone (killed,
  // perhaps before bwrap's --die-with-parent was armed), nobody supervises this call any more,
  // so the command's group is killed and this process leaves, which ends the pid namespace.
  // Renames the command hands over are answered as they come.
  const int child_fd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  // Without pidfds (Linux < 5.3) a command that renames is still answered: the loop then looks
  // for its end every 100 ms.
  while ((status.fd >= 0 || listener.valid()) && (child_fd >= 0 || listener.valid())) {
    pollfd fds[3] = {{child_fd, POLLIN, 0}, {status.fd, POLLIN, 0}, {listener.get(), POLLIN, 0}};
    if (opts.reap_orphans) ReapOthers(child);
    if (::poll(fds, 3, child_fd < 0 ? 100 : opts.reap_orphans ? 1000 : -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;  // the command ended
    siginfo_t ended{};
    if (child_fd < 0 &&
        ::waitid(P_PID, static_cast<id_t>(child), &ended, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        ended.si_pid == child)
      break;
    if ((fds[2].revents & POLLIN) != 0) {
      if (!AnswerRenameNotification(listener.get(), renames)) listener.Reset();
    } else if ((fds[2].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
      listener.Reset();  // nothing uses the filter any more
    }
    bool gone = status.fd >= 0 && (fds[1].revents & (POLLERR | POLLHUP)) != 0;
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
  const std::optional<IoCounts> io_after = ReadSelfIo(self_io.get());
  if (io_before && io_after) report["io"] = IoDelta(*io_before, *io_after);
  if (supervise_renames) {
    report["renames"] = {{"done", renames.renames},
                         {"directories_moved", renames.directory_moves},
                         {"left_to_the_kernel", renames.let_through},
                         {"failed", renames.failed}};
  }
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
