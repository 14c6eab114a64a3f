// Launching and supervising one confined process. The plan is pure (BuildLaunchPlan); Start and
// Run do the syscalls: memfd spec, pipes, fork, cgroup join, execve(bwrap), pidfd poll loop.
#include "runner/launch.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/hash.h"
#include "runner/host_probe.h"

#ifndef CORDON_BUILD_SHIM
#define CORDON_BUILD_SHIM ""
#endif

namespace cordon {
namespace {

constexpr int kSpecFd = 3, kStatusFd = 4, kJsonStatusFd = 5;
constexpr int kGraceMs = 2000;

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Under(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

// A lock per workspace: held shared while a sandbox runs, so stubs are removed only when no
// sandbox (of any cordon process) might still have them mounted.
// cordon's private runtime directory (0700): $XDG_RUNTIME_DIR/cordon or /tmp/cordon-UID.
std::string StubLockDir() {
  std::string dir;
  if (const char* r = std::getenv("XDG_RUNTIME_DIR"); r != nullptr && r[0] == '/') {
    dir = std::string(r) + "/cordon";
  } else {
    dir = "/tmp/cordon-" + std::to_string(::getuid());
  }
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

std::string StubLockPath(const std::string& workspace) {
  return StubLockDir() + "/stubs-" + Sha256Hex(workspace).substr(0, 16) + ".lock";
}

int OpenStubLock(const std::string& workspace) {
  return ::open(StubLockPath(workspace).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

void KillSandboxNamespace(pid_t init, int sig) {
  struct stat ns {};
  if (init <= 0 || ::stat(("/proc/" + std::to_string(init) + "/ns/pid").c_str(), &ns) != 0) return;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    struct stat st {};
    std::string p = std::string("/proc/") + e->d_name + "/ns/pid";
    if (::stat(p.c_str(), &st) == 0 && st.st_ino == ns.st_ino && st.st_dev == ns.st_dev) {
      ::kill(static_cast<pid_t>(std::atoi(e->d_name)), sig);
    }
  }
  ::closedir(d);
}

}  // namespace

Json SandboxHost::ToJson() const {
  return {{"bwrap", bwrap.empty() ? Json(nullptr) : Json(bwrap)},
          {"landlock_abi", landlock_abi},
          {"weaker", weaker},
          {"weaker_reason", weaker_reason},
          {"cgroup", cgroups.mode},
          {"cgroup_reason", cgroups.reason}};
}

std::string DefaultShimPath() {
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string p(exe, static_cast<std::size_t>(n));
    p = p.substr(0, p.find_last_of('/')) + "/cordon-shim";
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return CORDON_BUILD_SHIM;
}

Result<SandboxHost> PrepareSandboxHost(const Policy& policy, const std::string& shim_path) {
  SandboxHost h;
  h.shim = shim_path.empty() ? DefaultShimPath() : shim_path;
  if (h.shim.empty() || ::access(h.shim.c_str(), X_OK) != 0) {
    return Fail(Code::kSandboxUnavailable, "cordon-shim not found next to cordon (" + h.shim + ")");
  }
  h.landlock_abi = LandlockAbi();
  h.cgroups = ProbeCgroups();
  h.bwrap = FindOnPath("bwrap");
  std::string why;
  if (h.bwrap.empty()) {
    why = "bwrap is not installed (apt-get install bubblewrap)";
  } else {
    std::ifstream userns("/proc/sys/user/max_user_namespaces");
    long max = 0;
    if (!(userns >> max) || max <= 0)
      why = "user namespaces are disabled (sysctl user.max_user_namespaces=0)";
  }
  if (!why.empty()) {
    if (!policy.allow_weaker_sandbox) {
      return Fail(Code::kSandboxUnavailable,
                  why +
                      "; cordon fails closed. Fix it, or set [sandbox] allow_weaker = true in your "
                      "policy to run with Landlock + seccomp only");
    }
    if (h.landlock_abi < 1) {
      return Fail(Code::kSandboxUnavailable,
                  why + ", and Landlock is unavailable: no weaker mode is possible");
    }
    h.weaker = true;
    h.weaker_reason = why;
    h.bwrap.clear();
  }
  return h;
}

// `root` as a list of paths that together cover it except the subtrees in `hidden`: only the
// directories on the way to a hidden path are opened up, into their other entries.
std::vector<std::string> PathsExcept(const std::string& root,
                                     const std::vector<std::string>& hidden) {
  bool covers_hidden = false;
  for (const auto& h : hidden) {
    if (Under(root, h)) return {};  // root itself is hidden
    if (Under(h, root)) covers_hidden = true;
  }
  if (!covers_hidden) return {root};
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {};
  std::vector<std::string> out;
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return {};
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const std::string child = root == "/" ? "/" + name : root + "/" + name;
    if (::lstat(child.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      // A rule on a symlink is a rule on its target: none for one that leads into a hidden path.
      char resolved[PATH_MAX];
      if (::realpath(child.c_str(), resolved) == nullptr) continue;
      bool leads_in = false;
      for (const auto& h : hidden) leads_in = leads_in || Under(resolved, h);
      if (!leads_in) out.push_back(child);
      continue;
    }
    for (auto& p : PathsExcept(child, hidden)) out.push_back(std::move(p));
  }
  return out;
}

Result<LaunchPlan> BuildLaunchPlan(const SandboxHost& host, const Policy& policy,
                                   const std::string& workspace, const ProcessRequest& req,
                                   char** host_env) {
  if (req.argv.empty() || req.argv[0].empty()) return Fail(Code::kInvalidInput, "argv is empty");
  LaunchPlan plan;
  plan.limits = policy.LimitsFor(req.tool);
  if (req.no_timeout) plan.limits.timeout_secs = 100ll * 365 * 24 * 3600;
  if (req.timeout_secs) {
    // An agent may only shorten the policy's timeout; the person running cordon may set any.
    plan.limits.timeout_secs = req.timeout_from_user
                                   ? *req.timeout_secs
                                   : std::min(*req.timeout_secs, plan.limits.timeout_secs);
  }
  plan.network = req.network.value_or(policy.NetworkFor(req.tool));
  const char* home_env = std::getenv("HOME");
  const std::string home = home_env != nullptr ? home_env : "/nonexistent";
  SandboxLayout& l = plan.layout;
  l.bwrap = host.bwrap;
  l.workspace = workspace;
  l.network = plan.network;
  l.shim = host.shim;
  l.cwd = req.cwd.empty() ? workspace : req.cwd;
  l.env = SandboxEnvironment(host_env, workspace);
  for (const auto& kv : req.extra_env) l.env.push_back(kv);
  l.spec_fd = kSpecFd;
  l.status_fd = kStatusFd;
  l.json_status_fd = kJsonStatusFd;
  bool ws_writable = false;
  for (const auto& w : policy.filesystem.write) {
    std::string p = ExpandPath(w, workspace, home);
    if (p == workspace) {
      ws_writable = true;
    } else if (!Under(p, workspace)) {
      HostPath hp = DescribeHostPath(p);
      if (hp.kind != PathKind::kMissing) l.write.push_back(hp);
    }
  }
  l.workspace_writable = ws_writable && req.workspace_writable;
  if (l.workspace_writable && !host.weaker) {
    // Inside bwrap's user namespace only cordon's own uid is mapped. A workspace owned by
    // another user is then not writable for the command, whatever root could do outside, and
    // bwrap cannot make the protected stubs in it: say so instead of failing halfway.
    struct stat st {};
    if (::stat(workspace.c_str(), &st) == 0 && st.st_uid != ::geteuid() &&
        (st.st_mode & S_IWOTH) == 0) {
      return Fail(Code::kSandboxUnavailable,
                  "the workspace " + workspace + " belongs to uid " + std::to_string(st.st_uid) +
                      ", not to uid " + std::to_string(::geteuid()) +
                      " that runs cordon: inside the sandbox's user namespace only " + "uid " +
                      std::to_string(::geteuid()) +
                      " is mapped, so the command could not write there. " +
                      "Run cordon as its owner (e.g. runuser -u OWNER -- cordon ...) or chown the "
                      "workspace",
                  0, workspace);
    }
  }
  for (const auto& r : policy.filesystem.read) {
    std::string p = ExpandPath(r, workspace, home);
    if (Under(p, workspace)) continue;
    HostPath hp = DescribeHostPath(p);
    if (hp.kind != PathKind::kMissing) l.read.push_back(hp);
  }
  for (const auto& r : req.extra_read) {
    HostPath hp = DescribeHostPath(r);
    if (hp.kind != PathKind::kMissing && !Under(r, workspace)) l.read.push_back(hp);
  }
  for (const auto& d : policy.filesystem.deny) {
    HostPath hp = DescribeHostPath(ExpandPath(d, workspace, home));
    if (hp.kind != PathKind::kMissing && hp.kind != PathKind::kSymlink) l.deny.push_back(hp);
  }
  if (l.workspace_writable) {
    ASSIGN_OR_RETURN(ProtectedScan scan, ScanProtectedPaths(workspace));
    l.protect = scan.protect;
    l.pins = scan.pins;
    for (const auto& p : scan.protect) {
      if (p.kind == PathKind::kMissing) plan.created_stubs.push_back(p.path);
    }
  }
  LandlockInput ll;
  for (const auto& r : l.read) ll.read.push_back(r.path);
  // Listing "/" is harmless: bwrap's root holds only the binds above.
  ll.list_only.push_back("/");
  ll.read.push_back("/proc");
  ll.read.push_back("/run/cordon");
  ll.devices.push_back("/dev");
  ll.write.push_back("/tmp");
  (l.workspace_writable ? ll.write : ll.read).push_back(workspace);
  for (const auto& w : l.write) ll.write.push_back(w.path);
  ll.network = plan.network;
  plan.contain.landlock = BuildLandlockRules(ll, host.landlock_abi);
  if (host.landlock_abi < 1) plan.contain.landlock.reset();
  if (host.weaker) {
    // Without namespaces and mounts Landlock is the only wall, and it sees the host itself: the
    // paths bwrap would mask (the policy's deny list) are left out of the read rules, and the
    // host's /tmp, /proc, /dev and / are not granted (a private temporary directory and a few
    // device files are, in ConfinedProcess::Start and here).
    std::vector<std::string> hidden;
    for (const auto& d : l.deny) hidden.push_back(d.path);
    LandlockInput w;
    for (const auto& r : l.read) {
      for (auto& p : PathsExcept(r.path, hidden)) w.read.push_back(std::move(p));
    }
    for (const char* dev :
         {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}) {
      w.devices.push_back(dev);
    }
    if (l.workspace_writable) {
      w.write.push_back(workspace);
    } else {
      for (auto& p : PathsExcept(workspace, hidden)) w.read.push_back(std::move(p));
    }
    for (const auto& wr : l.write) w.write.push_back(wr.path);
    w.network = plan.network;
    plan.contain.landlock = BuildLandlockRules(w, host.landlock_abi);
  }
  plan.contain.seccomp = BuildSeccompRules(policy.seccomp_deny, plan.network);
  if (host.weaker) {
    // No pid namespace to end: the command's process group is what the shim kills at the end,
    // so nothing it starts may leave that group.
    plan.contain.seccomp.push_back(
        {"setsid", EPERM, {}, "weaker mode: stay in the process group the shim ends"});
    plan.contain.seccomp.push_back(
        {"setpgid", EPERM, {}, "weaker mode: stay in the process group the shim ends"});
  }
  plan.contain.rlimits =
      BuildRlimits(plan.limits, host.cgroups.mode != "none", host.cgroups.mode != "none");
  plan.contain.argv = req.argv;
  plan.contain.cwd = l.cwd;
  Json ns = host.weaker ? Json::array() : Json{"user", "mount", "pid", "ipc", "uts", "cgroup"};
  if (!host.weaker && plan.network != NetworkMode::kAllow) ns.push_back("net");
  plan.confinement = {{"mode", host.weaker ? "weaker: landlock+seccomp only" : "bwrap"},
                      {"namespaces", ns},
                      {"network", NetworkModeName(plan.network)},
                      {"landlock_abi", plan.contain.landlock ? host.landlock_abi : 0},
                      {"seccomp_rules", plan.contain.seccomp.size()},
                      {"no_new_privs", true},
                      {"capabilities", "none"},
                      {"cgroup", host.cgroups.mode},
                      {"rlimits", RlimitsJson(plan.contain.rlimits)},
                      {"workspace", l.workspace_writable ? "read-write" : "read-only"},
                      {"protected_paths", l.protect.size()}};
  if (host.weaker) plan.confinement["weaker_reason"] = host.weaker_reason;
  return plan;
}

Result<std::unique_ptr<ConfinedProcess>> ConfinedProcess::Start(const LaunchPlan& plan_in,
                                                                const ProcessRequest& req,
                                                                const std::string& workspace) {
  LaunchPlan plan = plan_in;
  auto proc = std::unique_ptr<ConfinedProcess>(new ConfinedProcess(req.max_output_bytes));
  proc->req_ = req;
  proc->workspace_ = workspace;
  proc->confinement_ = plan.confinement;
  proc->timeout_ms_ = plan.limits.timeout_secs * 1000;
  // Shared stub lock first, before bwrap creates or relies on any stub.
  UniqueFd stub_lock(OpenStubLock(workspace));
  if (stub_lock.valid()) ::flock(stub_lock.get(), LOCK_SH);
  const bool weaker = plan.layout.bwrap.empty();
  if (weaker && plan.contain.landlock) {
    // No private /tmp without a mount namespace: a directory of this call's own, removed after.
    std::string dir = StubLockDir() + "/tmp-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) return SysFail(Code::kSandboxUnavailable, "mkdtemp", dir);
    proc->private_tmp_ = dir;
    plan.contain.landlock->paths.push_back(
        {dir, landlock::FsAccessForAbi(plan.contain.landlock->abi)});
    for (auto& [k, v] : plan.layout.env) {
      if (k == "TMPDIR" || k == "HOME") v = dir;
    }
  }
  if (plan.confinement["cgroup"] != "none") {
    SandboxHost probe_host;
    probe_host.cgroups.mode = plan.confinement["cgroup"].get<std::string>();
    auto cg = CgroupJob::Create(probe_host.cgroups, plan.limits);
    if (cg && *cg) {
      proc->cgroup_.emplace(std::move(**cg));
    } else {
      // No cgroup after all: fall back to rlimits for memory and pids, and say so.
      plan.contain.rlimits = BuildRlimits(plan.limits, false, false);
      proc->confinement_["cgroup"] = "none";
      proc->confinement_["cgroup_error"] = cg ? "unsupported" : cg.error().message;
      proc->confinement_["rlimits"] = RlimitsJson(plan.contain.rlimits);
    }
  }
  const std::string spec = ContainSpecJson(plan.contain).dump();
  UniqueFd spec_fd(::memfd_create("cordon-spec", MFD_CLOEXEC));
  if (!spec_fd.valid() ||
      ::write(spec_fd.get(), spec.data(), spec.size()) != static_cast<ssize_t>(spec.size()) ||
      ::lseek(spec_fd.get(), 0, SEEK_SET) != 0) {
    return SysFail(Code::kSandboxUnavailable, "memfd spec", "");
  }
  int out[2], err[2], st[2], js[2], in[2];
  if (::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC) || ::pipe2(st, O_CLOEXEC) ||
      ::pipe2(js, O_CLOEXEC) || ::pipe2(in, O_CLOEXEC)) {
    return SysFail(Code::kSandboxUnavailable, "pipe2", "");
  }
  UniqueFd out_r(out[0]), out_w(out[1]), err_r(err[0]), err_w(err[1]), st_r(st[0]), st_w(st[1]),
      js_r(js[0]), js_w(js[1]), in_r(in[0]), in_w(in[1]);
  const bool pipe_in = req.pipe_stdin;
  std::vector<std::string> argv =
      weaker ? std::vector<std::string>{plan.layout.shim, "--spec-fd", std::to_string(kSpecFd),
                                        "--status-fd", std::to_string(kStatusFd)}
             : BuildBwrapArgv(plan.layout);
  std::vector<std::string> env_strings;
  if (weaker) {
    for (const auto& [k, v] : plan.layout.env) env_strings.push_back(k + "=" + v);
  } else {
    env_strings = {"PATH=/usr/bin:/bin"};
  }
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env_strings) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::vector<std::string> procs =
      proc->cgroup_ ? proc->cgroup_->procs_files() : std::vector<std::string>{};
  const std::string cwd = plan.layout.cwd;
  const bool inherit = req.inherit_stdio;
  proc->started_ms_ = NowMs();
  const pid_t parent = ::getpid();
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
    if (!inherit) ::setsid();  // exec keeps the caller's terminal session; bwrap still isolates
    int devnull = inherit ? 0 : pipe_in ? in_r.get() : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    int hi[6] = {::fcntl(devnull, F_DUPFD_CLOEXEC, 64),
                 ::fcntl(inherit ? 1 : out_w.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(inherit ? 2 : err_w.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(spec_fd.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(st_w.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(js_w.get(), F_DUPFD_CLOEXEC, 64)};
    for (int i = 0; i < 6; ++i) {
      if (hi[i] < 0 || ::dup2(hi[i], i) < 0) _exit(126);
    }
    ::syscall(SYS_close_range, 6, ~0U, 0);
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
  proc->out_fd_ = std::move(out_r);
  proc->err_fd_ = std::move(err_r);
  proc->status_fd_ = std::move(st_r);
  proc->json_fd_ = std::move(js_r);
  if (req.pipe_stdin) proc->in_fd_ = std::move(in_w);
  proc->stubs_ = plan.created_stubs;
  proc->stub_lock_ = std::move(stub_lock);
  for (int fd :
       {proc->out_fd_.get(), proc->err_fd_.get(), proc->status_fd_.get(), proc->json_fd_.get()}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return proc;
}

ConfinedProcess::~ConfinedProcess() {
  if (!done_ && pid_ > 0) {
    Terminate();
    ::waitpid(pid_, nullptr, 0);
    CleanupStubs();
  }
  if (!private_tmp_.empty()) {
    std::error_code ec;  // remove_all does not follow symlinks the command left there
    std::filesystem::remove_all(private_tmp_, ec);
  }
}

bool ConfinedProcess::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

ProcessOutcome ConfinedProcess::outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outcome_;
}

void ConfinedProcess::Terminate() {
  if (sandbox_init_ > 0) {
    KillSandboxNamespace(sandbox_init_, SIGTERM);
  } else if (pid_ > 0) {
    ::kill(-pid_, SIGTERM);
  }
  // Grace period, then the whole sandbox goes: SIGKILL to the namespace's init takes every
  // process in it with it.
  const double until = NowMs() + kGraceMs;
  while (NowMs() < until) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) break;
    char buf[65536];
    for (int fd : {out_fd_.get(), err_fd_.get()}) {
      while (::read(fd, buf, sizeof buf) > 0) {
      }
    }
  }
  if (sandbox_init_ > 0) ::kill(sandbox_init_, SIGKILL);
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::kill(-pid_, SIGKILL);
  }
}

void ConfinedProcess::CleanupStubs() {
  stub_lock_.Reset();
  if (stubs_.empty()) return;
  UniqueFd lock(OpenStubLock(workspace_));
  if (!lock.valid() || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) return;  // another sandbox runs
  for (auto it = stubs_.rbegin(); it != stubs_.rend(); ++it) {
    struct stat st {};
    if (::lstat(it->c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode) && st.st_size == 0) ::unlink(it->c_str());
    if (S_ISDIR(st.st_mode)) ::rmdir(it->c_str());  // only if empty
  }
  stubs_.clear();
}

void ConfinedProcess::Run(const std::atomic<bool>* cancel, RunHooks* hooks) {
  bool extra_open = hooks != nullptr && hooks->extra_fd >= 0;
  char buf[65536];
  bool exited = false, out_open = !req_.inherit_stdio, err_open = !req_.inherit_stdio;
  int wstatus = 0;
  double drain_until = 0;
  std::string reason;
  while (true) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({out_fd_.get(), POLLIN, 0});
    if (err_open) fds.push_back({err_fd_.get(), POLLIN, 0});
    if (status_fd_.valid()) fds.push_back({status_fd_.get(), POLLIN, 0});
    if (json_fd_.valid()) fds.push_back({json_fd_.get(), POLLIN, 0});
    if (!exited) fds.push_back({pidfd_.get(), POLLIN, 0});
    if (extra_open && !exited) fds.push_back({hooks->extra_fd, POLLIN, 0});
    if (exited && ((!out_open && !err_open) || NowMs() > drain_until)) break;
    double now = NowMs();
    if (!exited && reason.empty()) {
      if (cancel != nullptr && cancel->load()) reason = "cancelled";
      if (now - started_ms_ > static_cast<double>(timeout_ms_)) reason = "timeout";
      if (!reason.empty()) {
        Terminate();
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
        if (::waitpid(pid_, &wstatus, WNOHANG) == pid_) {
          exited = true;
          // The sandbox is gone; any writer left is outside it (weaker mode). Bound the drain.
          drain_until = NowMs() + 2000;
        }
        continue;
      }
      ssize_t n = ::read(p.fd, buf, sizeof buf);
      if (n > 0 && p.fd == out_fd_.get() && hooks != nullptr && hooks->on_stdout) {
        // Outside mu_: the hook may take its own locks and call back into this process.
        hooks->on_stdout({buf, static_cast<std::size_t>(n)});
      } else if (n > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        if (p.fd == out_fd_.get())
          out_.Append({buf, static_cast<std::size_t>(n)});
        else if (p.fd == err_fd_.get())
          err_.Append({buf, static_cast<std::size_t>(n)});
        else if (p.fd == status_fd_.get())
          status_buf_.append(buf, static_cast<std::size_t>(n));
        else if (p.fd == json_fd_.get()) {
          json_buf_.append(buf, static_cast<std::size_t>(n));
          std::size_t k = json_buf_.find("\"child-pid\"");
          if (sandbox_init_ < 0 && k != std::string::npos &&
              json_buf_.find('}', k) != std::string::npos) {
            std::size_t colon = json_buf_.find(':', k);
            pid_t cand = colon == std::string::npos
                             ? -1
                             : static_cast<pid_t>(std::atol(json_buf_.c_str() + colon + 1));
            // Only bwrap's own first report counts, and only for a direct child of bwrap: nothing
            // written later can point the kill at a process outside this sandbox.
            std::ifstream ps("/proc/" + std::to_string(cand) + "/status");
            std::string line;
            while (cand > 1 && std::getline(ps, line)) {
              if (line.rfind("PPid:", 0) == 0) {
                if (std::atol(line.c_str() + 5) == pid_) sandbox_init_ = cand;
                break;
              }
            }
            if (sandbox_init_ < 0) sandbox_init_ = 0;
          }
        }
      } else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        if (p.fd == out_fd_.get())
          out_open = false;
        else if (p.fd == err_fd_.get())
          err_open = false;
        else if (p.fd == status_fd_.get())
          status_fd_.Reset();
        else if (p.fd == json_fd_.get())
          json_fd_.Reset();
      }
    }
  }
  if (out_open || err_open) {
    // Something outside a pid namespace still holds the pipes (weaker mode): end its group.
    ::kill(-pid_, SIGKILL);
  }
  ProcessOutcome o;
  o.elapsed_ms = NowMs() - started_ms_;
  Json status = Json::parse(status_buf_.substr(0, status_buf_.find('\n')), nullptr, false);
  if (status.is_object() && status.contains("error")) {
    o.status = "failed";
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
      o.status = "exited";
      o.exit_code = status["exit_code"].get<int>();
    } else if (status.contains("signal")) {
      o.status = "signaled";
      o.signal = status["signal"].get<int>();
    }
    o.cpu_ms = status.value("cpu_ms", 0.0);
    o.max_rss_kb = status.value("max_rss_kb", 0);
  } else if (reason.empty()) {
    o.status = "failed";
    std::string e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      e = err_.Text();
    }
    o.error = Error{Code::kSandboxUnavailable,
                    "the sandbox did not start (bwrap exit " +
                        std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) +
                        "): " + e.substr(0, 500),
                    0,
                    {}};
  }
  if (!reason.empty()) o.status = reason;
  if (cgroup_) o.cgroup = cgroup_->Stats();
  CleanupStubs();
  std::lock_guard<std::mutex> lock(mu_);
  outcome_ = o;
  done_ = true;
}

std::string ConfinedProcess::StdoutText() const {
  std::lock_guard<std::mutex> lock(mu_);
  return out_.Text();
}

std::string ConfinedProcess::StderrText() const {
  std::lock_guard<std::mutex> lock(mu_);
  return err_.Text();
}

Json ConfinedProcess::OutputCounts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {{"stdout_bytes", out_.total()},
          {"stderr_bytes", err_.total()},
          {"stdout_dropped_bytes", out_.dropped()},
          {"stderr_dropped_bytes", err_.dropped()},
          {"truncated", out_.truncated() || err_.truncated()}};
}

Json ConfinedProcess::OutputJson() const {
  Json j = OutputCounts();
  std::lock_guard<std::mutex> lock(mu_);
  j["stdout"] = out_.Text();
  j["stderr"] = err_.Text();
  return j;
}

std::string ConfinedProcess::Tail(std::size_t max_chars) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string o = out_.Tail(max_chars), e = err_.Tail(max_chars);
  std::string all =
      e.empty() ? o : o + (o.empty() || o.back() == '\n' ? "" : "\n") + "[stderr]\n" + e;
  if (all.size() > max_chars * 4) all.erase(0, all.size() - max_chars * 4);
  return RepairUtf8(all);
}

}  // namespace cordon
