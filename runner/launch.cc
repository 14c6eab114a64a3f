// Launch step 3 (docs/adr/0002-launch-plan.md): ConfinedProcess::Start executes a plan (memfd
// spec, pipes, fork, cgroup join, the staged mounts, execve of bwrap) and Run supervises it
// (pidfd loop, output caps, timeout, termination, the shim's status protocol).
#include "runner/launch.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>
#include <utility>

#include "core/clock.h"
#include "core/fd_passing.h"
#include "core/hash.h"
#include "core/redact.h"
#include "core/signals.h"
#include "runner/environment.h"
#include "runner/host_probe.h"
#include "runner/launch_internal.h"
#include "runner/pidfd.h"
#include "runner/warm.h"

namespace cordon {
namespace {

using namespace launch_detail;

// An fd on the pid namespace of the process `pidfd` names (`pid` is its number as cordon sees
// it): held, so the namespace's inode cannot be given to another namespace while cordon compares
// against it. Invalid when the process is gone (its pid may name another process by now).
UniqueFd PidNamespaceOf(int pidfd, pid_t pid) {
  if (pidfd < 0 || pid <= 0) return {};
  UniqueFd ns(::open(("/proc/" + std::to_string(pid) + "/ns/pid").c_str(), O_RDONLY | O_CLOEXEC));
  // Still alive after the open: the pid was its own when the namespace was read.
  if (ns.valid() && !PidfdAlive(pidfd)) ns.Reset();
  return ns;
}

// Sends `sig` to every process in the pid namespace `ns` names. Each process is first pinned by
// a pidfd and only then matched by its namespace, and the signal goes through that pidfd: a pid
// reused between the scan and the signal names a process that is gone, never another one.
void KillSandboxNamespace(int ns, int sig) {
  struct stat want {};
  if (ns < 0 || ::fstat(ns, &want) != 0) return;
  UniqueDir d = UniqueDir::Open("/proc");
  if (!d.valid()) return;
  while (dirent* e = d.Next()) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const auto pid = static_cast<pid_t>(std::atol(e->d_name));
    UniqueFd pfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!pfd.valid()) continue;
    struct stat st {};
    std::string p = std::string("/proc/") + e->d_name + "/ns/pid";
    if (::stat(p.c_str(), &st) == 0 && st.st_ino == want.st_ino && st.st_dev == want.st_dev &&
        PidfdAlive(pfd.get())) {
      ::syscall(SYS_pidfd_send_signal, pfd.get(), sig, nullptr, 0);
    }
  }
}

// The shim's status channel: a stream socket whose reading end (`read`) gets each write's
// credentials (SO_PASSCRED), for the pid of the "confining" line.
Result<Pipe> StatusChannel() {
  int sv[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return SysFail(Code::kSandboxUnavailable, "socketpair", "");
  Pipe st{UniqueFd(sv[0]), UniqueFd(sv[1])};
  const int on = 1;
  if (::setsockopt(st.read.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
    return SysFail(Code::kSandboxUnavailable, "setsockopt(SO_PASSCRED)", "");
  return st;
}

}  // namespace

std::unique_ptr<ConfinedProcess> ConfinedProcess::Prepare(const LaunchPlan& plan,
                                                          LaunchResources resources,
                                                          const ProcessRequest& req) {
  const CallLaunch& call = plan.call;
  auto proc = std::unique_ptr<ConfinedProcess>(new ConfinedProcess(call.max_output_bytes));
  proc->req_ = req;
  proc->workspace_ = plan.session.workspace;
  proc->confinement_ = PlanConfinementJson(plan);
  proc->env_names_ = PassedEnvNames(call.env);
  proc->timeout_ms_ = call.limits.timeout_secs * 1000;
  proc->timeout_ = call.timeout;
  LimitFacts& lf = proc->limit_facts_;
  lf.limits = call.limits;
  lf.tool = call.tool;
  lf.tool_overrides = call.tool_limit_overrides;
  if (req.timeout_secs && !(call.timeout && call.timeout->capped)) {
    lf.timeout_from = req.timeout_from_user ? "--timeout" : "the call's timeout_secs";
  }
  lf.memory_by_cgroup = lf.pids_by_cgroup = call.cgroup != CgroupMode::kNone;
  proc->private_tmp_ = std::move(resources.private_tmp);
  proc->kernel_audit_ = std::move(resources.kernel_audit);
  if (resources.cgroup) proc->cgroup_.emplace(std::move(*resources.cgroup));
  return proc;
}

Result<std::unique_ptr<ConfinedProcess>> ConfinedProcess::Start(const LaunchPlan& plan,
                                                                LaunchResources resources,
                                                                const ProcessRequest& req) {
  const CallLaunch& call = plan.call;
  auto proc = Prepare(plan, std::move(resources), req);
  const bool weaker = plan.session.weaker();
  const std::string spec = LaunchSpec(plan);
  UniqueFd spec_fd(::memfd_create("cordon-spec", MFD_CLOEXEC));
  if (!spec_fd.valid() ||
      ::write(spec_fd.get(), spec.data(), spec.size()) != static_cast<ssize_t>(spec.size()) ||
      ::lseek(spec_fd.get(), 0, SEEK_SET) != 0) {
    return SysFail(Code::kSandboxUnavailable, "memfd spec", "");
  }
  // The command's environment goes to bwrap through a memfd (--args), never its argv.
  const std::string env_args = LaunchEnvArgs(plan);
  UniqueFd env_fd(::memfd_create("cordon-env", MFD_CLOEXEC));
  if (!env_fd.valid() ||
      ::write(env_fd.get(), env_args.data(), env_args.size()) !=
          static_cast<ssize_t>(env_args.size()) ||
      ::lseek(env_fd.get(), 0, SEEK_SET) != 0) {
    return SysFail(Code::kSandboxUnavailable, "memfd env", "");
  }
  // Each end is owned as soon as it exists: a failing pipe2 leaks none of the earlier ones.
  Pipe out = MakePipe(), err = MakePipe(), js = MakePipe(), in = MakePipe();
  for (const Pipe* p : {&out, &err, &js, &in}) {
    if (!p->valid()) return SysFail(Code::kSandboxUnavailable, "pipe2", "");
  }
  // The shim's status channel is a Unix socket that passes credentials: the kernel stamps each
  // write with the writer's pid as cordon sees it, across the sandbox's pid namespace. The
  // shim's child writes one line before it enforces Landlock, which tells cordon the pid the
  // kernel's Landlock audit records name (runner/kernel_audit.h).
  ASSIGN_OR_RETURN(Pipe st, StatusChannel());
  UniqueFd devnull_fd;
  if (!call.inherit_stdio && !call.pipe_stdin) {
    devnull_fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull_fd.valid()) return SysFail(Code::kSandboxUnavailable, "open", "/dev/null");
  }
  std::vector<std::string> argv = LaunchArgv(plan);
  std::vector<std::string> env_strings = LaunchEnv(plan);
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env_strings) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::vector<std::string> procs =
      proc->cgroup_ ? proc->cgroup_->procs_files() : std::vector<std::string>{};
  const std::string cwd = call.cwd;
  const bool inherit = call.inherit_stdio;
  const int stdin_src = inherit ? 0 : call.pipe_stdin ? in.read.get() : devnull_fd.get();
  proc->started_ms_ = MonotonicMs();
  const pid_t parent = ::getpid();
  // Staged mode: the child mounts the overlays in its own mount namespace before it execs bwrap
  // (docs/adr/0006-staged-workspace.md), so no capability ever reaches the sandbox.
  const StageMountPlan stage_mounts =
      weaker ? StageMountPlan{} : PrepareStageMounts(plan.session.staged, ::geteuid(), ::getegid());
  pid_t pid = ::fork();
  if (pid < 0) return SysFail(Code::kSandboxUnavailable, "fork", "");
  if (pid == 0) {
    // Child: join the cgroup, wire the fds to fixed numbers, exec. Only async-signal-safe calls.
    // bwrap --die-with-parent arms itself only once it runs; until then this does, and a
    // cordon killed before this line leaves a child that sees the new parent and stops.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) _exit(126);
    for (const auto& f : procs) {
      int fd = ::open(f.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) _exit(126);
      ::close(fd);
    }
    // exec keeps the caller's terminal session (bwrap --new-session still isolates the
    // command), but in a process group of its own: Ctrl-C or a CI runner's signal to cordon's
    // group reaches cordon, which ends the sandbox and writes the records, instead of killing
    // bwrap under it.
    if (!inherit) {
      ::setsid();
    } else {
      ::setpgid(0, 0);
    }
    int hi[7] = {::fcntl(stdin_src, F_DUPFD_CLOEXEC, 64),
                 ::fcntl(inherit ? 1 : out.write.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(inherit ? 2 : err.write.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(spec_fd.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(st.write.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(js.write.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(env_fd.get(), F_DUPFD_CLOEXEC, 64)};
    const int fixed = weaker ? 6 : 7;  // the shim, exec'd directly, needs no --args fd
    for (int i = 0; i < fixed; ++i) {
      if (hi[i] < 0 || ::dup2(hi[i], i) < 0) _exit(126);
    }
    ::syscall(SYS_close_range, static_cast<unsigned>(fixed), ~0U, 0);
    if (!stage_mounts.empty()) {
      const char* step = "";
      if (const int e = MountStagesInChild(stage_mounts, &step); e != 0) {
        // On the command's stderr (the result shows it), with the errno's name; then the
        // sandbox never starts and the call fails closed.
        const char* name = ::strerrorname_np(e);
        (void)!::write(2, "cordon: staging the workspace failed: ", 38);
        (void)!::write(2, step, std::strlen(step));
        (void)!::write(2, ": ", 2);
        if (name != nullptr) (void)!::write(2, name, std::strlen(name));
        (void)!::write(2, "\n", 1);
        _exit(125);
      }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
    if (weaker && ::chdir(cwd.c_str()) != 0) _exit(126);
    ::execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  proc->pid_ = pid;
  int pfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pfd < 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return SysFail(Code::kSandboxUnavailable, "pidfd_open", "");
  }
  proc->pidfd_ = UniqueFd(pfd);
  proc->out_fd_ = std::move(out.read);
  proc->err_fd_ = std::move(err.read);
  proc->status_fd_ = std::move(st.read);
  proc->json_fd_ = std::move(js.read);
  if (call.pipe_stdin) proc->in_fd_ = std::move(in.write);
  for (int fd :
       {proc->out_fd_.get(), proc->err_fd_.get(), proc->status_fd_.get(), proc->json_fd_.get()}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return proc;
}

namespace {
// JSON written to `fd` as it is serialized, 64 KiB at a time: a call frame holds the call's
// argv, which can be a megabyte, and is never in memory twice over as its text.
class FdJsonOutput : public nlohmann::detail::output_adapter_protocol<char> {
 public:
  explicit FdJsonOutput(int fd) : fd_(fd) {}
  void write_character(char c) override { write_characters(&c, 1); }
  void write_characters(const char* s, std::size_t n) override {
    buf_.append(s, n);
    if (buf_.size() >= kChunk) Flush();
  }
  bool Flush() {
    for (std::size_t at = 0; ok_ && at < buf_.size();) {
      const ssize_t n = ::write(fd_, buf_.data() + at, buf_.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ok_ = false;
      at += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
    buf_.clear();
    return ok_;
  }

 private:
  static constexpr std::size_t kChunk = 64 << 10;
  int fd_;
  bool ok_ = true;
  std::string buf_;
};

bool WriteJsonTo(int fd, const Json& j) {
  auto out = std::make_shared<FdJsonOutput>(fd);
  nlohmann::detail::serializer<Json> s(out, ' ', Json::error_handler_t::strict);
  s.dump(j, false, false, 0);
  return out->Flush();
}
}  // namespace

Result<std::unique_ptr<ConfinedProcess>> ConfinedProcess::StartWarm(
    const LaunchPlan& plan, LaunchResources resources, const ProcessRequest& req,
    std::shared_ptr<WarmSandbox> sandbox, const std::string& stage_dir) {
  const CallLaunch& call = plan.call;
  auto proc = Prepare(plan, std::move(resources), req);
  Json frame_json = WarmCallFrame(plan, stage_dir);
  if (req.window_start_ns > 0) frame_json["window_start_ns"] = req.window_start_ns;
  UniqueFd frame_fd(::memfd_create("cordon-call", MFD_CLOEXEC));
  if (!frame_fd.valid() || !WriteJsonTo(frame_fd.get(), frame_json) ||
      ::lseek(frame_fd.get(), 0, SEEK_SET) != 0) {
    return SysFail(Code::kSandboxUnavailable, "memfd call frame", "");
  }
  Pipe out = MakePipe(), err = MakePipe(), in = MakePipe();
  for (const Pipe* p : {&out, &err, &in}) {
    if (!p->valid()) return SysFail(Code::kSandboxUnavailable, "pipe2", "");
  }
  // The status socket passes credentials as the cold path's does (the "confining" line's pid);
  // the reply socket brings the pidfd of the call's init.
  ASSIGN_OR_RETURN(Pipe st, StatusChannel());
  Pipe reply;
  {
    int sv[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      return SysFail(Code::kSandboxUnavailable, "socketpair", "");
    reply = {UniqueFd(sv[0]), UniqueFd(sv[1])};
  }
  UniqueFd devnull_fd;
  if (!call.pipe_stdin) {
    devnull_fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull_fd.valid()) return SysFail(Code::kSandboxUnavailable, "open", "/dev/null");
  }
  proc->started_ms_ = MonotonicMs();
  TRY(sandbox->Submit({frame_fd.get(), call.pipe_stdin ? in.read.get() : devnull_fd.get(),
                       out.write.get(), err.write.get(), st.write.get(), reply.write.get()}));
  // Only the sandbox holds the call's ends now: the pipes end when the call's processes do.
  out.write.Reset();
  err.write.Reset();
  st.write.Reset();
  reply.write.Reset();
  in.read.Reset();
  ASSIGN_OR_RETURN(proc->pidfd_, sandbox->AwaitReply(reply.read.get()));
  // The init's pid as cordon sees it (the pidfd's fdinfo), for the termination of every
  // process in its pid namespace; the final SIGKILL goes through the pidfd.
  {
    std::ifstream info("/proc/self/fdinfo/" + std::to_string(proc->pidfd_.get()));
    for (std::string l; std::getline(info, l);) {
      if (l.rfind("Pid:", 0) == 0)
        proc->sandbox_init_ = static_cast<pid_t>(std::atol(l.c_str() + 4));
    }
    proc->sandbox_ns_ = PidNamespaceOf(proc->pidfd_.get(), proc->sandbox_init_);
    proc->NoteNamespace();
    if (proc->sandbox_init_ > 0) proc->live_member_ = proc->sandbox_init_;
  }
  proc->warm_ = std::move(sandbox);
  proc->pid_ = 0;
  proc->out_fd_ = std::move(out.read);
  proc->err_fd_ = std::move(err.read);
  proc->status_fd_ = std::move(st.read);
  if (call.pipe_stdin) proc->in_fd_ = std::move(in.write);
  for (int fd : {proc->out_fd_.get(), proc->err_fd_.get(), proc->status_fd_.get()}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return proc;
}

ConfinedProcess::~ConfinedProcess() {
  if (!done_ && pid_ > 0) {
    Terminate(SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  } else if (!done_ && warm_) {
    Terminate(SIGKILL);
  }
}

void ConfinedProcess::NoteNamespace() {
  struct stat st {};
  if (!sandbox_ns_.valid() || ::fstat(sandbox_ns_.get(), &st) != 0) return;
  ns_dev_ = st.st_dev;
  ns_ino_ = st.st_ino;
}

double ConfinedProcess::ElapsedMs() const { return MonotonicMs() - started_ms_; }

bool ConfinedProcess::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

ProcessOutcome ConfinedProcess::outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outcome_;
}

void ConfinedProcess::Terminate(int sig) {
  AwaitSandboxInit();
  if (sandbox_ns_.valid()) {
    KillSandboxNamespace(sandbox_ns_.get(), sig);
  } else if (pid_ > 0) {
    ::kill(-pid_, sig);
  }
  // Grace period, then the whole sandbox goes: SIGKILL to the namespace's init takes every
  // process in it with it.
  const double until = MonotonicMs() + (force_stop_ ? 0 : req_.stop_grace_ms);
  while (MonotonicMs() < until && !force_stop_) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) break;
    char buf[65536];
    for (int fd : {out_fd_.get(), err_fd_.get()}) {
      while (::read(fd, buf, sizeof buf) > 0) {
      }
    }
  }
  if (warm_) {
    // The call's init: killing it ends its pid namespace (the pidfd names exactly it).
    ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  } else if (init_pidfd_.valid()) {
    ::syscall(SYS_pidfd_send_signal, init_pidfd_.get(), SIGKILL, nullptr, 0);
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::kill(-pid_, SIGKILL);
  }
}

void ConfinedProcess::AwaitSandboxInit() {
  if (warm_ || sandbox_init_ >= 0 || !json_fd_.valid()) return;
  const double until = MonotonicMs() + 5000;
  char buf[4096];
  bool bwrap_exited = false;
  while (sandbox_init_ < 0 && json_fd_.valid() && MonotonicMs() < until) {
    pollfd p[2] = {{json_fd_.get(), POLLIN, 0}, {pidfd_.get(), POLLIN, 0}};
    ::poll(p, bwrap_exited ? 1 : 2, 50);
    if (p[1].revents != 0) bwrap_exited = true;
    const ssize_t n = ::read(json_fd_.get(), buf, sizeof buf);
    if (n > 0) {
      OnJsonStatus({buf, static_cast<std::size_t>(n)});
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      json_fd_.Reset();  // bwrap and its children are gone, or closed it: nothing more comes
    } else if (bwrap_exited) {
      break;  // it wrote nothing before it ended
    }
  }
}

void ConfinedProcess::Run(const std::atomic<bool>* cancel, RunHooks* hooks) {
  bool extra_open = hooks != nullptr && hooks->extra_fd >= 0;
  char buf[65536];
  bool exited = false, out_open = !req_.inherit_stdio, err_open = !req_.inherit_stdio;
  int wstatus = 0;
  double drain_until = 0;
  std::optional<ProcessStatus> reason;  // timeout or cancelled, decided here
  std::optional<int> stop_signal;       // the termination signal cordon received, if any
  while (true) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({out_fd_.get(), POLLIN, 0});
    if (err_open) fds.push_back({err_fd_.get(), POLLIN, 0});
    if (status_fd_.valid()) fds.push_back({status_fd_.get(), POLLIN, 0});
    if (json_fd_.valid()) fds.push_back({json_fd_.get(), POLLIN, 0});
    if (!exited) fds.push_back({pidfd_.get(), POLLIN, 0});
    if (extra_open && !exited) fds.push_back({hooks->extra_fd, POLLIN, 0});
    if (exited && ((!out_open && !err_open) || MonotonicMs() > drain_until)) {
      // The shim's child (its "confining" line) and the shim (its report) write separately, so
      // the poll that saw the exit may have read only the first: what the socket still holds is
      // read now. The sandbox is gone, so nothing writes any more and this ends.
      for (int reads = 0; reads < 64 && status_fd_.valid(); ++reads) {
        pollfd p{status_fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) break;
        OnStatusData(status_fd_.get());
      }
      break;
    }
    double now = MonotonicMs();
    if (!exited && !reason) {
      // A termination signal to cordon ends every sandbox it runs: the command gets that very
      // signal (as it would have in the terminal), then SIGKILL after the grace period.
      const int stop = TerminationSignal();
      if ((cancel != nullptr && cancel->load()) || stop != 0) reason = ProcessStatus::kCancelled;
      if (!reason && now - started_ms_ > static_cast<double>(timeout_ms_))
        reason = ProcessStatus::kTimeout;
      if (reason) {
        if (stop != 0) stop_signal = stop;
        // process_cancel with force: SIGKILL at once, no grace.
        Terminate(stop != 0 ? stop : force_stop_ ? SIGKILL : SIGTERM);
        continue;
      }
    }
    ::poll(fds.data(), fds.size(), 100);
    for (const auto& p : fds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (extra_open && p.fd == hooks->extra_fd) {
        extra_open = hooks->on_extra_readable();
        continue;
      }
      if (p.fd == pidfd_.get()) {
        // A warm call's init is the server's child: its end is the pidfd's, its status the
        // report's.
        if (warm_ || ::waitpid(pid_, &wstatus, WNOHANG) == pid_) {
          exited = true;
          // The sandbox is gone; any writer left is outside it (weaker mode). Bound the drain.
          drain_until = MonotonicMs() + 2000;
        }
        continue;
      }
      if (p.fd == status_fd_.get()) {
        OnStatusData(p.fd);
        continue;
      }
      ssize_t n = ::read(p.fd, buf, sizeof buf);
      if (n > 0 && p.fd == out_fd_.get() && hooks != nullptr && hooks->on_stdout) {
        {
          // The process record's stdout_bytes counts what went to the hook too.
          std::lock_guard<std::mutex> lock(mu_);
          out_.CountPassedOn(static_cast<std::size_t>(n));
        }
        // Outside mu_: the hook may take its own locks and call back into this process.
        hooks->on_stdout({buf, static_cast<std::size_t>(n)});
      } else if (n > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        if (p.fd == out_fd_.get())
          out_.Append({buf, static_cast<std::size_t>(n)});
        else if (p.fd == err_fd_.get())
          err_.Append({buf, static_cast<std::size_t>(n)});
        else if (p.fd == json_fd_.get()) {
          OnJsonStatus({buf, static_cast<std::size_t>(n)});
        }
      } else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        if (p.fd == out_fd_.get())
          out_open = false;
        else if (p.fd == err_fd_.get())
          err_open = false;
        else if (p.fd == json_fd_.get())
          json_fd_.Reset();
      }
    }
  }
  if ((out_open || err_open) && pid_ > 0) {
    // Something outside a pid namespace still holds the pipes (weaker mode): end its group.
    ::kill(-pid_, SIGKILL);
  }
  ProcessOutcome o;
  o.elapsed_ms = MonotonicMs() - started_ms_;
  Json status = Json::parse(status_buf_.substr(0, status_buf_.find('\n')), nullptr, false);
  if (status.is_object() && status.contains("spec_sha256") && status["spec_sha256"].is_string()) {
    o.spec_sha256 = status["spec_sha256"].get<std::string>();
  }
  if (status.is_object() && status.contains("error")) {
    o.status = ProcessStatus::kFailed;
    o.error = Error{Code::kSandboxUnavailable,
                    "confinement step " + status["error"].value("step", "?") +
                        " failed: " + status["error"].value("message", ""),
                    0,
                    {}};
    if (status["error"].value("step", "") == "execve") {
      o.error->code =
          status["error"].value("errno", 0) == ENOENT ? Code::kNotFound : Code::kInvalidInput;
      o.error->message =
          "cannot execute " + req_.argv[0] + ": " + status["error"].value("message", "");
    }
  } else if (status.is_object()) {
    if (status.contains("exit_code")) {
      o.status = ProcessStatus::kExited;
      o.exit_code = status["exit_code"].get<int>();
    } else if (status.contains("signal")) {
      o.status = ProcessStatus::kSignaled;
      o.signal = status["signal"].get<int>();
    }
    o.cpu_ms = status.value("cpu_ms", 0.0);
    o.max_rss_kb = status.value("max_rss_kb", 0);
    if (status.contains("io") && status["io"].is_object()) {
      const Json& io = status["io"];
      Json parsed = Json::object();
      for (const char* k : {"read_bytes", "write_bytes", "rchar", "wchar"}) {
        if (io.contains(k) && io[k].is_number_unsigned()) parsed[k] = io[k];
      }
      if (parsed.size() == 4) o.io = std::move(parsed);
    }
    limit_facts_.command_cpu_ms = status.value("command_cpu_ms", -1.0);
    limit_facts_.command_max_rss_kb = status.value("command_max_rss_kb", std::int64_t{-1});
  } else if (!reason) {
    o.status = ProcessStatus::kFailed;
    std::string e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // bwrap's stderr can echo what it was given: the excerpt never ends inside a secret.
      e = Excerpt(err_.Text(), 500, redactor_);
    }
    // The host probe said the sandbox works, and it did not start: the cached probe goes, so that
    // the next session probes again (and names the cause) instead of trusting it.
    if (!warm_) ForgetHostProbe();
    if (e.empty()) e = "bwrap wrote nothing cordon captured";
    o.error = Error{
        Code::kSandboxUnavailable,
        (warm_ ? "the warm sandbox's call ended without a report: " + e
               : "the sandbox did not start (bwrap exit " +
                     std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) + "): " + e) +
            "; run `cordon doctor` to see which step this host refuses",
        0,
        {}};
  }
  if (reason) o.status = *reason;
  {
    // The sandbox ran without its proxy: what its clients saw (refused connections) is this.
    std::lock_guard<std::mutex> lock(mu_);
    if (egress_error_ && !o.error) o.error = egress_error_;
  }
  o.stop_signal = stop_signal;
  if (cgroup_) {
    o.cgroup = cgroup_->Stats();
    const CgroupEvents ev = cgroup_->Events();
    limit_facts_.oom_kills = ev.oom_kills;
    limit_facts_.pids_refusals = ev.pids_max;
  }
  if (!o.error) {
    limit_facts_.timed_out = o.status == ProcessStatus::kTimeout;
    limit_facts_.signal = o.signal;
    limit_facts_.exit_code = o.exit_code;
    o.limit = LimitThatEnded(limit_facts_);
  }
  // What Landlock refused it, once the kernel has delivered it (bounded wait; see kernel_audit).
  if (kernel_audit_ && confined_pid_ > 0) o.denials = kernel_audit_->Collect(confined_pid_);
  std::lock_guard<std::mutex> lock(mu_);
  outcome_ = o;
  done_ = true;
  probe_cv_.notify_all();
}

Result<UniqueFd> ConfinedProcess::ProbeSocket(int family, int timeout_ms) {
  if (family != AF_INET && family != AF_INET6)
    return Fail(Code::kInvalidInput, "a probe socket is AF_INET or AF_INET6");
  if (warm_) return Fail(Code::kUnsupported, "a warm call's sandbox makes no probe sockets");
  const pid_t init = live_member_.load();
  if (init <= 0 || !init_pidfd_.valid())
    return Fail(Code::kUnsupported, "the job's sandbox has no network namespace cordon holds");
  std::lock_guard<std::mutex> one(probe_mu_);
  UniqueFd sock;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (done_ || !status_fd_.valid()) return Fail(Code::kNotFound, "the job has ended");
    probe_fds_.clear();
    const int before = probe_answers_;
    const char req = family == AF_INET6 ? '6' : '4';
    if (::send(status_fd_.get(), &req, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
      return SysFail(Code::kSandboxUnavailable, "send", "the probe request");
    probe_waiting_ = true;
    probe_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                       [&] { return probe_answers_ != before || done_ || !status_fd_.valid(); });
    probe_waiting_ = false;
    if (probe_answers_ == before) {
      return Fail(done_ ? Code::kNotFound : Code::kTimeout,
                  done_ ? "the job has ended"
                        : "the job's sandbox did not answer the probe request in " +
                              std::to_string(timeout_ms) + " ms");
    }
    if (probe_fds_.empty()) {
      return Fail(Code::kSandboxUnavailable, std::string("the job's sandbox could not make an ") +
                                                 (family == AF_INET6 ? "IPv6" : "IPv4") +
                                                 " socket");
    }
    sock = std::move(probe_fds_.back());
    probe_fds_.clear();
  }
  int domain = 0, type = 0;
  socklen_t domain_len = sizeof domain, type_len = sizeof type;
  if (::getsockopt(sock.get(), SOL_SOCKET, SO_DOMAIN, &domain, &domain_len) != 0 ||
      ::getsockopt(sock.get(), SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || domain != family ||
      type != SOCK_STREAM) {
    return Fail(Code::kSandboxUnavailable, "the sandbox passed something other than a TCP socket");
  }
  // The sandbox's network namespace, read while the pinned init still lives (its pid is its own).
  struct stat want {};
  {
    UniqueFd ns(
        ::open(("/proc/" + std::to_string(init) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid() || !PidfdAlive(init_pidfd_.get()) || ::fstat(ns.get(), &want) != 0)
      return Fail(Code::kNotFound, "the job's sandbox has ended");
  }
  UniqueFd sock_ns(::ioctl(sock.get(), SIOCGSKNS));
  struct stat got {};
  if (sock_ns.valid()) {
    if (::fstat(sock_ns.get(), &got) != 0 || got.st_ino != want.st_ino ||
        got.st_dev != want.st_dev) {
      return Fail(Code::kSandboxUnavailable,
                  "the probe socket is not from the job's network namespace");
    }
  } else {
    // SIOCGSKNS needs CAP_NET_ADMIN over the namespace: an ordinary user has it in the sandbox's
    // own (its user namespace is theirs), not in the host's, which a network-allow job shares.
    struct stat own {};
    if (::stat("/proc/self/ns/net", &own) != 0 || own.st_ino != want.st_ino ||
        own.st_dev != want.st_dev) {
      return SysFail(Code::kSandboxUnavailable, "ioctl(SIOCGSKNS)", "the probe socket");
    }
  }
  return sock;
}

std::string ConfinedProcess::StdoutText() const {
  std::lock_guard<std::mutex> lock(mu_);
  return out_.Text();
}

std::string ConfinedProcess::StderrText() const {
  std::lock_guard<std::mutex> lock(mu_);
  return err_.Text();
}

Json OutputCounts::ToJson() const {
  return {{"stdout_bytes", stdout_bytes},
          {"stderr_bytes", stderr_bytes},
          {"stdout_dropped_bytes", stdout_dropped_bytes},
          {"stderr_dropped_bytes", stderr_dropped_bytes},
          {"truncated", truncated}};
}

OutputCounts ConfinedProcess::Counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {out_.total(), err_.total(), out_.dropped(), err_.dropped(),
          out_.truncated() || err_.truncated()};
}

void ConfinedProcess::OnStatusData(int fd) {
  char data[65536];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(4 * sizeof(int))];
  iovec iov{data, sizeof data};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    std::lock_guard<std::mutex> lock(mu_);  // ProbeSocket writes on it under mu_
    status_fd_.Reset();
    probe_cv_.notify_all();
    return;
  }
  std::string_view got(data, static_cast<std::size_t>(n));
  // Descriptors are owned at once, whatever comes of them; only the proxy listener the shim
  // sends (its own line, its own write) is kept, and only when this process has a binding.
  std::vector<UniqueFd> fds = TakePassedFds(msg);
  // A probe socket's answer (ProbeSocket). The kernel ends a read after a message that carries a
  // descriptor, not before one, so a report the shim wrote after an answer without one may
  // follow it in this read: only the line is taken here, the rest is status data.
  if (got.rfind(kProbeSocketLine, 0) == 0) {
    got.remove_prefix(kProbeSocketLine.size());
    std::lock_guard<std::mutex> lock(mu_);
    // Kept only while a probe waits, and only one: answers nobody asked for hold no descriptor.
    if (probe_waiting_) {
      ++probe_answers_;
      probe_fds_.clear();
      if (fds.size() == 1) probe_fds_.push_back(std::move(fds[0]));
      probe_cv_.notify_all();
    }
    if (got.empty()) return;
  }
  if (got.rfind(kProxyListenerLine, 0) == 0) {
    got.remove_prefix(kProxyListenerLine.size());
    if (fds.size() == 1 && req_.egress) {
      if (auto bound = req_.egress->Bind(std::move(fds[0])); !bound) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!egress_error_) egress_error_ = bound.error();
      }
    }
  }
  // The first line the shim's child writes, before Landlock: its pid, from the kernel (a stream
  // socket with SO_PASSCRED never merges writes of different processes into one read).
  if (confined_pid_ == 0 && got.rfind(kConfiningLine, 0) == 0) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred{};
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        confined_pid_ = cred.pid;
      }
    }
    if (confined_pid_ > 0 && kernel_audit_) kernel_audit_->Watch(confined_pid_);
    got.remove_prefix(kConfiningLine.size());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (status_buf_.size() < 65536) status_buf_.append(got);
}

void ConfinedProcess::OnJsonStatus(std::string_view data) {
  // bwrap writes one JSON object per line; only its first "child-pid" report counts.
  constexpr std::size_t kMaxLine = 4096;
  json_buf_.append(data);
  for (std::size_t nl = json_buf_.find('\n'); nl != std::string::npos; nl = json_buf_.find('\n')) {
    const std::string line = json_buf_.substr(0, nl);
    json_buf_.erase(0, nl + 1);
    if (sandbox_init_ >= 0) continue;
    auto j = ParseJsonBounded(line, ParseLimits{kMaxLine, 4});
    if (!j || !j->is_object() || !j->contains("child-pid") ||
        !(*j)["child-pid"].is_number_integer()) {
      continue;
    }
    const auto cand = (*j)["child-pid"].get<std::int64_t>();
    // Only a direct child of bwrap counts: nothing written later can point the kill at a
    // process outside this sandbox.
    sandbox_init_ = 0;
    if (cand <= 1 || cand > std::numeric_limits<pid_t>::max()) continue;
    // Pinned first, then checked: bwrap (cordon's unreaped child) is its parent, so the pidfd
    // names the sandbox's init and no later process that took its pid.
    UniqueFd pfd(static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(cand), 0)));
    if (!pfd.valid()) continue;
    std::ifstream ps("/proc/" + std::to_string(cand) + "/status");
    for (std::string l; std::getline(ps, l);) {
      if (l.rfind("PPid:", 0) == 0) {
        if (std::atol(l.c_str() + 5) == pid_ && PidfdAlive(pfd.get())) {
          sandbox_init_ = static_cast<pid_t>(cand);
          sandbox_ns_ = PidNamespaceOf(pfd.get(), sandbox_init_);
          NoteNamespace();
          init_pidfd_ = std::move(pfd);
          live_member_ = sandbox_init_;
        }
        break;
      }
    }
  }
  if (json_buf_.size() > kMaxLine) json_buf_.clear();  // no line that long is bwrap's
}

Json ConfinedProcess::OutputJson() const {
  Json j = Counts().ToJson();
  std::lock_guard<std::mutex> lock(mu_);
  j["stdout"] = out_.Text();
  j["stderr"] = err_.Text();
  return j;
}

std::string ConfinedProcess::Tail(std::size_t max_chars) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Each stream's tail already starts past any secret; the joined text's cut does too.
  return JoinTails(out_.Tail(max_chars), err_.Tail(max_chars), max_chars * 4, redactor_);
}

}  // namespace cordon
