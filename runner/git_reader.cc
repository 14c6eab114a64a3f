// The staged commit's git, run read-only and confined (runner/git_reader.h).
#include "runner/git_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/clock.h"
#include "core/unique_fd.h"
#include "runner/host_probe.h"
#include "runner/landlock.h"

namespace cordon {
namespace {

constexpr std::size_t kOutputCap = 256u << 20;
constexpr double kWallMs = 120000;

}  // namespace

Result<std::string> RunGitConfined(const GitReadRequest& req) {
  static const std::string git = [] {
    const std::string found = FindOnPath("git");
    return found.empty() ? std::string("/usr/bin/git") : found;
  }();
  const int abi = LandlockAbi();
  if (abi < 1) return Fail(Code::kSandboxUnavailable, "Landlock is unavailable to confine git");
  LandlockInput in;
  in.read = req.readable;
  for (const char* sys : {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc"})
    in.read.push_back(sys);
  in.devices.push_back("/dev/null");
  in.network = NetworkMode::kNone;
  LandlockSpec spec = BuildLandlockRules(in, abi);
  spec.restrict_flags = 0;
  ASSIGN_OR_RETURN(UniqueFd ruleset, MakeLandlockRuleset(spec));

  // Everything the child needs is made here: after the fork it only makes system calls.
  std::vector<std::string> argv_s = {git};
  argv_s.insert(argv_s.end(), req.args.begin(), req.args.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = req.env;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  Pipe in_pipe = MakePipe(), out_pipe = MakePipe(), err_pipe = MakePipe();
  if (!in_pipe.valid() || !out_pipe.valid() || !err_pipe.valid())
    return SysFail(Code::kInternal, "pipe2", "git");
  const pid_t pid = ::fork();
  if (pid < 0) return SysFail(Code::kInternal, "fork", "git");
  if (pid == 0) {
    if (::dup2(in_pipe.read.get(), 0) < 0 || ::dup2(out_pipe.write.get(), 1) < 0 ||
        ::dup2(err_pipe.write.get(), 2) < 0)
      _exit(126);
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    const rlimit cpu{60, 60}, mem{4ull << 30, 4ull << 30}, fsize{0, 0}, core{0, 0}, files{256, 256};
    if (::setrlimit(RLIMIT_CPU, &cpu) != 0 || ::setrlimit(RLIMIT_AS, &mem) != 0 ||
        ::setrlimit(RLIMIT_FSIZE, &fsize) != 0 || ::setrlimit(RLIMIT_CORE, &core) != 0 ||
        ::setrlimit(RLIMIT_NOFILE, &files) != 0)
      _exit(126);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      _exit(126);
    if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) _exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  in_pipe.read.Reset();
  out_pipe.write.Reset();
  err_pipe.write.Reset();
  ruleset.Reset();
  // A git that exits before it read its input would raise SIGPIPE at the next write: blocked on
  // this thread while it writes, a pending one discarded before the mask is restored.
  sigset_t pipe_set, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  ::fcntl(in_pipe.write.get(), F_SETFL, O_NONBLOCK);
  std::string out, err;
  std::size_t fed = 0;
  if (req.input.empty()) in_pipe.write.Reset();
  const double deadline = MonotonicMs() + kWallMs;
  bool over = false, late = false;
  while (out_pipe.read.valid() || err_pipe.read.valid()) {
    pollfd fds[3] = {{out_pipe.read.get(), POLLIN, 0},
                     {err_pipe.read.get(), POLLIN, 0},
                     {in_pipe.write.get(), POLLOUT, 0}};
    const double left = deadline - MonotonicMs();
    if (left <= 0) {
      late = true;
      break;
    }
    if (::poll(fds, 3, static_cast<int>(left)) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    char buf[65536];
    for (int k = 0; k < 2; ++k) {
      if (fds[k].revents == 0) continue;
      UniqueFd& fd = k == 0 ? out_pipe.read : err_pipe.read;
      const ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        std::string& to = k == 0 ? out : err;
        if (k == 1 && to.size() > 4096) continue;  // enough of git's complaint
        to.append(buf, static_cast<std::size_t>(n));
        if (out.size() > kOutputCap) over = true;
      } else if (n == 0 || errno != EINTR) {
        fd.Reset();
      }
    }
    if (over) break;
    if (fds[2].revents != 0 && in_pipe.write.valid()) {
      const ssize_t n =
          ::write(in_pipe.write.get(), req.input.data() + fed, req.input.size() - fed);
      if (n > 0) fed += static_cast<std::size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || fed == req.input.size())
        in_pipe.write.Reset();
    }
  }
  in_pipe.write.Reset();
  const timespec no_wait{0, 0};
  while (::sigtimedwait(&pipe_set, nullptr, &no_wait) > 0) {
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (over || late) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string what = "git " + (req.args.empty() ? std::string() : req.args[0]);
  if (late) return Fail(Code::kTimeout, what + " did not finish in 120 s");
  if (over) return Fail(Code::kTooLarge, what + " wrote more than 256 MiB");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return Fail(
        Code::kInternal,
        what +
            (WIFEXITED(status) ? " exited " + std::to_string(WEXITSTATUS(status))
                               : " was killed by signal " + std::to_string(WTERMSIG(status))) +
            (err.empty() ? "" : ": " + err.substr(0, 500)));
  }
  return out;
}

}  // namespace cordon
