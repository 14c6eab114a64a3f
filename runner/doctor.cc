// Preflight checks. Each probe is real: bwrap is run, a user namespace is made, a confined
// `true` is launched through the same path tool calls use.
#include "runner/doctor.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "core/fd_passing.h"
#include "core/unique_fd.h"
#include "runner/cgroup.h"
#include "runner/egress_binding.h"
#include "runner/git_reader.h"
#include "runner/host_capabilities.h"
#include "runner/host_probe.h"
#include "runner/kernel_audit.h"
#include "runner/landlock.h"
#include "runner/launch.h"
#include "runner/mask.h"
#include "runner/preset_cache.h"
#include "runner/rename_supervisor.h"
#include "runner/warm.h"
#include "workspace/changes.h"
#include "workspace/staging.h"

extern char** environ;

namespace cordon {
namespace {

// Runs argv (no shell) and returns exit status and combined output (bounded).
std::pair<int, std::string> Capture(const std::vector<std::string>& argv) {
  Pipe p = MakePipe();
  if (!p.valid()) return {-1, "pipe failed"};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p.write.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, p.write.get(), 2);
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  p.write.Reset();
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p.read.get(), buf, sizeof buf)) > 0 && out.size() < 8192)
    out.append(buf, static_cast<std::size_t>(n));
  p.read.Reset();
  if (rc != 0) return {-1, "cannot run " + argv[0]};
  int status = 0;
  ::waitpid(pid, &status, 0);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A wrapped or configured server as docs/clients.md sets it up: `interpreter --version` confined
// with the server's program files granted (runner/grants.h), under the shipped read paths.
std::pair<bool, std::string> ConfinedServerProbe(const std::string& shim,
                                                 const std::string& interpreter,
                                                 bool allow_weaker) {
  const std::string found = FindOnPath(interpreter);
  if (found.empty()) return {false, interpreter + " is not on PATH"};
  std::string tmpl = (std::filesystem::temp_directory_path() / "cordon-doctor-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return {false, "mkdtemp failed"};
  Policy policy;
  policy.filesystem.read = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt"};
  policy.allow_weaker_sandbox = allow_weaker;
  auto host = PrepareSandboxHost(policy, shim);
  ProcessRequest req;
  // The interpreter found on cordon's own PATH, which is the one a client's `node` or `python3`
  // means (the sandbox's PATH may find another).
  req.argv = {found, "--version"};
  req.cwd = tmpl;
  req.tool = "doctor";
  req.kind = ProcessKind::kMcpServer;
  req.program_files = true;
  req.resolve_shims = true;
  std::pair<bool, std::string> out{false, ""};
  if (!host) {
    out.second = host.error().message;
  } else {
    LaunchResources resources;
    auto facts = GatherHostFacts(*host, policy, tmpl, req, environ, &resources);
    auto plan = facts ? BuildLaunchPlan(policy, *facts, req)
                      : Result<LaunchPlan>(std::unexpected(facts.error()));
    if (!plan) {
      out.second = plan.error().message;
    } else {
      std::string granted;
      for (const auto& g : plan->session.grants) granted += (granted.empty() ? "" : ", ") + g.path;
      auto proc = ConfinedProcess::Start(*plan, std::move(resources), req);
      if (!proc) {
        out.second = proc.error().message;
      } else {
        (*proc)->Run(nullptr);
        const ProcessOutcome o = (*proc)->outcome();
        out.first = o.exit_code && *o.exit_code == 0;
        std::string version = (*proc)->StdoutText();
        while (!version.empty() && (version.back() == '\n' || version.back() == '\r'))
          version.pop_back();
        out.second = out.first ? found + " (" + version + ") runs confined as a wrapped server; " +
                                     (granted.empty() ? "readable under the system paths"
                                                      : "its program files granted: " + granted)
                               : found + " does not run confined: " +
                                     (o.error ? o.error->message : StatusName(o.status)) + " " +
                                     (*proc)->StderrText().substr(0, 300);
      }
    }
  }
  std::filesystem::remove_all(tmpl);
  return out;
}

// Network mode proxy end to end (docs/adr/0005-egress-proxy.md): a confined bash opens the
// sandbox's own 127.0.0.1:3128 (the listener the shim handed to cordon) and asks for a name no
// rule allows; the proxy must answer 403 without resolving it, and record the refusal.
std::pair<bool, std::string> EgressProxyProbe(const std::string& shim) {
  const std::string bash = FindOnPath("bash");
  if (bash.empty()) return {false, "bash is not on PATH (the probe's client)"};
  std::string tmpl = (std::filesystem::temp_directory_path() / "cordon-doctor-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return {false, "mkdtemp failed"};
  std::pair<bool, std::string> out{false, ""};
  Policy policy;
  policy.filesystem.read = {"/usr", "/bin", "/lib", "/lib64", "/etc"};
  auto host = PrepareSandboxHost(policy, shim);
  auto proxy = EgressProxy::Start();
  if (!host || !proxy) {
    out.second = !host ? host.error().message : proxy.error().message;
  } else {
    std::mutex mu;
    std::vector<NetworkEvent> events;
    auto binding =
        std::make_shared<EgressBinding>(std::shared_ptr<EgressProxy>(std::move(*proxy)),
                                        EgressPolicy{}, "doctor", [&](const NetworkEvent& e) {
                                          std::lock_guard<std::mutex> lock(mu);
                                          events.push_back(e);
                                        });
    ProcessRequest req;
    req.argv = {bash, "-c",
                "exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT doctor-probe.invalid:443 "
                "HTTP/1.1\r\nHost: doctor-probe.invalid:443\r\n\r\n' >&3 && head -c 12 <&3"};
    req.cwd = tmpl;
    req.tool = "doctor";
    req.network = NetworkMode::kProxy;
    req.egress = binding;
    LaunchResources resources;
    auto facts = GatherHostFacts(*host, policy, tmpl, req, environ, &resources);
    auto plan = facts ? BuildLaunchPlan(policy, *facts, req)
                      : Result<LaunchPlan>(std::unexpected(facts.error()));
    if (!plan) {
      out.second = plan.error().message;
    } else if (auto proc = ConfinedProcess::Start(*plan, std::move(resources), req); !proc) {
      out.second = proc.error().message;
    } else {
      (*proc)->Run(nullptr);
      (*proc)->ReleaseEgress();
      binding.reset();  // every record is in before the listener leaves the proxy
      const std::string reply = (*proc)->StdoutText();
      std::lock_guard<std::mutex> lock(mu);
      const bool recorded = events.size() == 1 && !events[0].allowed;
      out.first = reply == "HTTP/1.1 403" && recorded;
      out.second = out.first ? "a confined client reached the proxy through the sandbox's own "
                               "127.0.0.1:" +
                                   std::to_string(kSandboxProxyPort) +
                                   "; a name no rule allows was refused (403) and recorded"
                             : "the proxy probe got \"" + reply.substr(0, 80) + "\" and " +
                                   std::to_string(events.size()) + " record(s); " +
                                   (*proc)->StderrText().substr(0, 200);
    }
  }
  std::filesystem::remove_all(tmpl);
  return out;
}

// The size of a preset cache, walked without following a symlink and at most `max_entries` deep
// into it: a warm npm cache holds tens of thousands of files, and doctor stays quick.
std::string CacheUsage(const std::string& dir, std::size_t max_entries) {
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(
      dir, std::filesystem::directory_options::skip_permission_denied, ec);
  std::uintmax_t bytes = 0;
  std::size_t entries = 0;
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (++entries > max_entries) {
      return "over " + std::to_string(bytes >> 20) + " MiB (stopped counting at " +
             std::to_string(max_entries) + " entries)";
    }
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) bytes += st.st_size;
  }
  return std::to_string(bytes >> 20) + " MiB in " + std::to_string(entries) + " entries";
}

// Where each egress preset's cache is (cordon's own, never the user's ~/.npm, ~/.cache/pip or
// ~/.cargo), whether it exists and this user can write it, and about how large it is.
std::pair<bool, std::string> PresetCachesReport() {
  bool pass = true;
  std::string detail;
  const char* home_env = std::getenv("HOME");
  const std::string home = home_env != nullptr && home_env[0] == '/' && home_env[1] != '\0'
                               ? CanonicalPath(home_env)
                               : std::string();
  const std::vector<std::string> host_paths = HostPackageCachePaths(home, environ);
  for (const EgressPreset& p : EgressPresets()) {
    std::string variables;
    for (const PresetCacheVariable& v : p.cache_variables)
      variables += (variables.empty() ? "" : ", ") + std::string(v.name);
    std::string path = PresetCacheDir(p.name), state;
    auto why = PresetCacheRefusal(CanonicalPath(path), {}, home, host_paths);
    if (!why) {
      if (auto dir = PreparePresetCacheDir(p.name, false)) {
        path = *dir;
        why = PresetCacheRefusal(path, {}, home, host_paths);
        if (!why && ::access(path.c_str(), W_OK) != 0)
          why = std::string("not writable: ") + std::strerror(errno);
        if (!why) state = "writable, " + CacheUsage(path, 20000);
      } else if (dir.error().code == Code::kNotFound) {
        state = "not made yet (the first launch with --allow-preset " + std::string(p.name) +
                " makes it, 0700)";
      } else {
        why = dir.error().message;
      }
    }
    if (why) {
      pass = false;
      state = "UNUSABLE, sandboxes run without it: " + *why;
    }
    detail += (detail.empty() ? "" : "; ") + std::string(p.name) + ": " + path + " (" + variables +
              ") " + state;
  }
  return {pass, detail};
}

}  // namespace

// The staged workspace's rename supervisor (runner/rename_supervisor.h), tried as the shim uses
// it: a child sets no_new_privs, loads the rename filter with a listener, passes the listener
// here and renames a directory of a scratch directory; this process answers the call (reading
// the child's memory and its working directory) and the child checks that the rename happened.
std::pair<bool, std::string> RenameSupervisorProbe() {
  auto program = CompileRenameNotifyFilter();
  if (!program) return {false, program.error().message};
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr && *tmp != 0 ? tmp : "/tmp") +
                    "/cordon-doctor-rename-" + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0700) != 0 || ::mkdir((dir + "/a").c_str(), 0700) != 0)
    return {false, "cannot make " + dir + ": " + std::strerror(errno)};
  int pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return {false, std::string("socketpair: ") + std::strerror(errno)};
  UniqueFd here(pair[0]), there(pair[1]);
  const pid_t pid = ::fork();
  if (pid == 0) {
    here.Reset();
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::chdir(dir.c_str()) != 0) _exit(10);
    auto listener = LoadSeccompListener(*program);
    if (!listener) _exit(11);
    const int fd = listener->get();
    if (SendWithFds(there.get(), "l", std::span<const int>(&fd, 1)) != 1) _exit(12);
    listener->Reset();
    if (::rename("a", "b") != 0) _exit(13);
    struct stat st {};
    _exit(::stat("b", &st) == 0 && S_ISDIR(st.st_mode) ? 0 : 14);
  }
  there.Reset();
  RenameCounts counts;
  if (pid > 0) {
    const UniqueFd listener = ReceiveOneFd(here.get());
    if (listener.valid()) {
      pollfd p{listener.get(), POLLIN, 0};
      // One call to answer; a child that never makes it is not waited for past 5 s.
      if (::poll(&p, 1, 5000) > 0 && (p.revents & POLLIN) != 0)
        (void)AnswerRenameNotification(listener.get(), counts);
    }
  }
  int status = -1;
  if (pid > 0) {
    if (counts.renames == 0) ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ::rmdir((dir + "/a").c_str());
  ::rmdir((dir + "/b").c_str());
  ::rmdir(dir.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0 && counts.renames == 1)
    return {true, "renames in the sandbox are answered by cordon-shim (seccomp user notification)"};
  if (code == 11)
    return {false, "the kernel refuses a seccomp listener (SECCOMP_FILTER_FLAG_NEW_LISTENER)"};
  if (counts.let_through > 0)
    return {false,
            "cordon-shim cannot read a confined process's memory or working directory "
            "(Yama ptrace_scope >= 2, or no /proc)"};
  return {false, "the probe child ended with status " + std::to_string(code)};
}

bool RunDoctor(Json* report, const std::string& shim_path, bool deep, bool allow_weaker) {
  Json checks = Json::array();
  bool ok = true;
  auto add = [&](std::string name, bool pass, bool required, std::string detail,
                 std::string remedy) {
    if (required && !pass) ok = false;
    checks.push_back({{"name", std::move(name)},
                      {"ok", pass},
                      {"required", required},
                      {"detail", std::move(detail)},
                      {"remedy", pass ? std::string() : std::move(remedy)}});
  };
  // The host probe (runner/host_capabilities.h), made now and not read from the cache: each step
  // the sandbox needs, tried; the one cause when the full sandbox cannot run, and its one remedy.
  const HostCapabilities caps = ProbeHostNow();
  const std::string& bwrap = caps.context.bwrap;
  if (bwrap.empty()) {
    add("bwrap", false, !allow_weaker, "bwrap is not on PATH", "apt-get install bubblewrap");
  } else {
    auto [rc, ver] = Capture({bwrap, "--version"});
    add("bwrap", rc == 0, true, ver + " (" + bwrap + ")", "reinstall bubblewrap");
  }
  {
    std::string steps;
    for (const StepResult& r : caps.steps) {
      if (!r.tried) continue;
      steps += (steps.empty() ? "" : ", ") + std::string(Name(kProbeStepNames, r.step)) +
               (r.ok ? " ok" : " FAILED");
    }
    const auto choice = ChooseSandboxMode(caps, allow_weaker);
    std::string context;
    if (!caps.context.container.empty())
      context =
          "; context: " + caps.context.container + " (" + caps.context.container_evidence + ")";
    if (caps.context.seccomp_mode == 2)
      context += "; cordon runs under " + std::to_string(caps.context.seccomp_filters) +
                 " seccomp filter(s)";
    if (caps.cause == HostCause::kNone) {
      add("sandbox_host", true, true,
          "every step the sandbox needs works here (" + steps + ")" + context, "");
    } else {
      // Required unless the policy's allow_weaker lets a weaker mode run.
      add("sandbox_host", false, !choice,
          caps.cause_text + " [" + std::string(Name(kHostCauseNames, caps.cause)) +
              "; steps: " + steps + "]" + context,
          caps.remedy);
      if (choice) {
        std::string losses;
        for (const auto& l : choice->losses) losses += (losses.empty() ? "" : "; ") + l;
        add("weaker_mode", false, false,
            "[sandbox] allow_weaker = true: commands run in mode " +
                std::string(Name(kSandboxModeNames, choice->mode)) + ", which gives up: " + losses,
            "the remedy of sandbox_host above restores the full sandbox");
      }
    }
    add("clone3", caps.clone3, false,
        caps.clone3 ? "clone3 works"
                    : "clone3 is refused (" + caps.Step(ProbeStep::kClone3)->detail +
                          "): the warm sandbox's fork server uses clone",
        "nothing to do: cordon falls back to clone");
  }
  const int abi = ForcedByTestSwitch("CORDON_TEST_NO_LANDLOCK") ? 0 : LandlockAbi();
  add("landlock", abi >= 1, false,
      abi >= 1 ? "ABI " + std::to_string(abi) + (abi >= 4 ? " (filesystem + TCP" : " (filesystem") +
                     (abi >= 6 ? " + scoping)" : ")")
               : "Landlock is unavailable",
      "boot a kernel >= 5.13 with CONFIG_SECURITY_LANDLOCK=y and landlock in the lsm= list");
  {
    // Landlock denials in the audit log: from the kernel's audit stream, which only root
    // (CAP_AUDIT_READ) may read, and only while the host's audit is on.
    const KernelAuditStatus denials = ProbeKernelAudit(abi);
    std::string remedy;
    if (!denials.available && denials.reason.find("CAP_AUDIT_READ") != std::string::npos) {
      remedy =
          "run cordon as root to record what Landlock refuses confined commands; as an "
          "ordinary user the kernel's records of those refusals go only to the host's audit "
          "log (when it is on), which only root reads";
    } else if (!denials.available && denials.reason.find("disabled") != std::string::npos) {
      remedy =
          "enable the kernel's audit (auditctl -e 1, or boot with audit=1): cordon does not "
          "switch it on for the host by itself";
    } else if (!denials.available) {
      remedy = "Landlock ABI 7 (Linux 6.15) with CONFIG_AUDIT=y";
    }
    add("landlock_denials", denials.available, false, "Landlock denials: " + denials.reason,
        remedy);
  }
  const bool seccomp = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
  std::string mode;
  {
    std::ifstream st("/proc/self/status");
    for (std::string line; std::getline(st, line);) {
      if (line.rfind("Seccomp:", 0) == 0) mode = line;
    }
  }
  add("seccomp", seccomp, true,
      seccomp ? "available (" + mode + ")" : "prctl(PR_GET_SECCOMP) failed",
      "boot a kernel with CONFIG_SECCOMP_FILTER=y");
  CgroupSupport cg = ProbeCgroups();
  add("cgroup", cg.mode != CgroupMode::kNone, false,
      std::string(Name(kCgroupModeNames, cg.mode)) + ": " + cg.reason, cg.remedy);
  {
    // stop_local_server signals a listener's process group through its leader's pidfd
    // (PIDFD_SIGNAL_PROCESS_GROUP, 1 << 2, Linux 6.9); signal 0 to this process's own "group"
    // tells a kernel that knows the flag (0, or ESRCH when this process leads no group) from
    // one that does not (EINVAL).
    UniqueFd self(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
    const bool pidfds = self.valid();
    const bool group =
        pidfds &&
        (::syscall(SYS_pidfd_send_signal, self.get(), 0, nullptr, 1U << 2) == 0 || errno == ESRCH);
    add("pidfd_process_group", group, false,
        group ? "stop_local_server signals a listener's process group through its leader's pidfd"
        : pidfds
            ? "the kernel has pidfds but no PIDFD_SIGNAL_PROCESS_GROUP: stop_local_server "
              "signals a group by number right after its leader was seen alive (a reused group "
              "id in that instant is a race that remains)"
            : "the kernel has no pidfd_open: stop_local_server refuses (unsupported)",
        "a kernel >= 6.9");
  }
  {
    // Without a cgroup the memory limit is RLIMIT_DATA: it must refuse private writable memory
    // past the limit (a kernel booted with ignore_rlimit_data only warns) and leave PROT_NONE
    // reservations alone (V8 reserves its WebAssembly memories so). A child tries both.
    int status = -1;
    const pid_t pid = ::fork();
    if (pid == 0) {
      const rlimit rl{64ul << 20, 64ul << 20};
      if (::setrlimit(RLIMIT_DATA, &rl) != 0) _exit(4);
      void* reserved =
          ::mmap(nullptr, 1ul << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      void* written =
          ::mmap(nullptr, 128ul << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      _exit((reserved == MAP_FAILED ? 1 : 0) | (written == MAP_FAILED ? 0 : 2));
    }
    if (pid > 0) ::waitpid(pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    add("memory_rlimit", code == 0, false,
        code == 0   ? "RLIMIT_DATA refuses private memory past the limit and leaves reserved "
                      "address space alone (the memory limit where no cgroup applies)"
        : code == 2 ? "RLIMIT_DATA is not enforced: without a cgroup memory is unbounded"
        : code == 1 ? "RLIMIT_DATA refuses PROT_NONE reservations: runtimes that reserve "
                      "address space would fail"
                    : "could not probe RLIMIT_DATA",
        code == 0 ? ""
                  : "boot without ignore_rlimit_data (Linux >= 4.7), or run cordon where it gets a "
                    "cgroup");
  }
  {
    // Change records on large trees (workspace/changes.h, ChangeWindowStart) rest on this: an inode
    // changed after the window opens has a ctime at or after it, one changed before, a ctime
    // before it. Checked on the temporary directory's filesystem, with the fine-grained stamps a
    // stat between two writes provokes (multigrain timestamps, Linux 6.13).
    const char* tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp != nullptr && *tmp != 0 ? tmp : "/tmp") +
                       "/cordon-doctor-ctime-" + std::to_string(::getpid());
    auto stamp = [&](const char* text) -> std::optional<std::int64_t> {
      UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (!fd.valid() || ::write(fd.get(), text, std::strlen(text)) < 0) return std::nullopt;
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) return std::nullopt;
      return st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
    };
    bool pass = true, ran = true;
    for (int i = 0; i < 5 && pass && ran; ++i) {
      const auto before = stamp("a"), again = stamp("b");
      const std::int64_t t0 = ChangeWindowStart();
      const auto after = stamp("c");
      ran = before && again && after;
      pass = ran && *again < t0 && *after >= t0;
    }
    struct statx sx {};
    const bool btime =
        ::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BTIME, &sx) == 0 &&
        (sx.stx_mask & STATX_BTIME) != 0;
    ::unlink(path.c_str());
    add("change_window", pass, false,
        !ran   ? "could not write a probe file in " + path
        : pass ? std::string("inode changes are ordered against the change window's start; ") +
                     (btime ? "birth times kept (a reused inode number is told apart)"
                            : "no birth times on this filesystem (inode numbers alone)")
               : "an inode changed after the window opened was stamped before it: change "
                 "records of large trees may miss what a command changed",
        pass ? "" : "keep the host clock from being stepped back; report the kernel version");
  }
  {
    // The staged workspace (docs/adr/0006-staged-workspace.md): an overlay of the current
    // directory (the workspace cordon would use here) with its upper layer in cordon's state
    // directory, mounted for real in a child that exits at once; nothing is written to the tree.
    char cwd[4096];
    const std::string here = ::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "/";
    StagingSupport st;
    if (ForcedByTestSwitch("CORDON_TEST_NO_OVERLAY")) {
      st.reason = "CORDON_TEST_NO_OVERLAY=1 is set";
    } else {
      st = ProbeStaging(StagedWorkspace::StageRoot(), here);
    }
    add("workspace_staging", st.available, false,
        st.available ? "staged: the sandbox writes an overlay's upper layer in " +
                           StagedWorkspace::StageRoot() +
                           "; each commit installs what the workspace rules allow into " + here
                     : "direct mode (the fallback: a sweep after each process): " + st.reason,
        st.available ? ""
        : caps.cause != HostCause::kNone
            ? "the remedy of sandbox_host above"
            : "put cordon's state directory ($XDG_STATE_HOME or ~/.local/state) on a "
              "filesystem with user xattrs (ext4, xfs, btrfs, tmpfs >= 6.6), and allow "
              "unprivileged user namespaces; [sandbox] workspace = \"staged\" refuses "
              "to run without it");
  }
  {
    const auto [works, detail] = RenameSupervisorProbe();
    add("staged_renames", works, false,
        works ? detail +
                    ": a directory that existed before the call can be renamed (git mv, "
                    "os.rename, fs.renameSync)"
              : detail +
                    ": in the staged workspace, renaming a directory that existed before "
                    "the call fails with EXDEV (only mv, which copies, works)",
        "a kernel >= 5.5 with seccomp user notification; Yama's ptrace_scope at 0 or 1");
  }
  {
    // Git content (issue 33, docs/adr/0014): what a staged commit or a git view's sync would land
    // through git (an index, a ref) is read by the host's git, confined. Without it every such
    // change is refused (fail closed): commits made inside never reach the host.
    GitReadRequest version{.args = {"--version"},
                           .env = {"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LC_ALL=C",
                                   "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
                           .readable = {},
                           .input = ""};
    const Result<std::string> git = RunGitConfined(version);
    std::string line = git ? git->substr(0, git->find('\n')) : git.error().message;
    add("git_content_check", git.has_value(), false,
        git ? line +
                  ", confined: an index or ref a commit or a git view's sync would land is "
                  "checked against the workspace rules first"
            : "the host's git cannot run confined (" + line +
                  "): every index or ref change made inside is refused, so git commits made "
                  "in the sandbox never reach the host",
        "install git (apt-get install git); the check also needs Landlock (the landlock check)");
  }
  const std::string rg = FindOnPath("rg");
  add("ripgrep", !rg.empty(), false,
      rg.empty() ? "rg not on PATH"
                 : Capture({rg, "--version"})
                       .second.substr(0, Capture({rg, "--version"}).second.find('\n')),
      "apt-get install ripgrep (search_text needs it)");
  std::string fd = FindOnPath("fd");
  if (fd.empty()) fd = FindOnPath("fdfind");
  add("fd", !fd.empty(), false, fd.empty() ? "fd/fdfind not on PATH: find is the fallback" : fd,
      "apt-get install fd-find (find_files falls back to find without it)");
  std::string shim = shim_path.empty() ? DefaultShimPath() : shim_path;
  add("cordon-shim", ::access(shim.c_str(), X_OK) == 0, true, shim,
      "reinstall cordon: cordon-shim must sit next to cordon");
  // Protections that need no kernel feature: which are active, and what they cover.
  {
    std::string list;
    for (const auto& p : CordonOwnPaths({})) list += (list.empty() ? "" : ", ") + p;
    add("own_files", true, false,
        "cordon's own files are masked in every sandbox and refused by the file tools: " + list +
            ", plus the audit log, audit key, --policy layers and serve's token file of each "
            "session",
        "");
    {
      auto [pass, detail] = PresetCachesReport();
      add("preset_caches", pass, false,
          "cordon's own caches for --allow-preset (never your ~/.npm, ~/.cache/pip or "
          "~/.cargo), shared by your sandboxes: " +
              detail,
          "remove the directory named in the detail, or set XDG_CACHE_HOME elsewhere; cordon "
          "makes the cache again (0700) at the next launch with that preset");
    }
    const char* home = std::getenv("HOME");
    add("dangerous_workspace", true, false,
        "/ and your home directory (" + CanonicalPath(home != nullptr ? home : "/nonexistent") +
            ") are refused as writable workspaces unless --allow-dangerous-workspace is given",
        "");
    if (::geteuid() == 0 && !deep) {
      // The walk of /etc, /usr and /opt takes 1-2 s on an idle host (and many more under load):
      // it stays out of the quick preflight, and each session makes its own scan anyway.
      add("root_only_files", true, false,
          "cordon runs as root: entries that ordinary users cannot read are masked under the "
          "read binds outside /usr, from a scan each session makes once; cordon doctor --deep "
          "counts them and names any under /usr (those are not masked)",
          "");
    } else if (::geteuid() == 0) {
      std::vector<std::string> roots;
      for (const char* r : {"/etc", "/usr", "/opt"}) {
        if (std::filesystem::is_directory(r)) roots.emplace_back(r);
      }
      const RootOnlyScan scan = ScanRootOnly(roots, roots);
      if (scan.incomplete) {
        add("root_only_files", false, false,
            "cordon runs as root and could not finish the search for root-only files (" +
                scan.incomplete->ToString() +
                "): a session whose read binds hold that directory is refused",
            "deny that directory in a policy file ([filesystem] deny) or remove it");
      }
      std::string root_list, in_usr;
      for (const auto& r : roots) root_list += " " + r;
      std::size_t usr_count = 0;
      for (const auto& m : scan.masked) {
        if (m.path.rfind("/usr/", 0) != 0) continue;
        if (++usr_count <= 5) in_usr += (in_usr.empty() ? "" : ", ") + m.path;
      }
      add("root_only_files", true, false,
          "cordon runs as root: entries that ordinary users cannot read are masked under the "
          "read binds outside /usr (scan of" +
              root_list + ": " + std::to_string(scan.masked.size()) + " such entries among " +
              std::to_string(scan.scanned) + " in " + std::to_string(static_cast<long>(scan.ms)) +
              " ms; sessions scan all but /usr, once per session); files created after a "
              "session's scan are not covered" +
              (usr_count == 0
                   ? std::string("; /usr holds none")
                   : "; NOT masked, under /usr (" + std::to_string(usr_count) + "): " + in_usr),
          "");
    } else {
      add("root_only_files", true, false,
          "cordon runs as uid " + std::to_string(::geteuid()) +
              ": inside the sandbox it is the same uid, and the kernel refuses what it cannot "
              "read outside; no scan is needed",
          "");
    }
  }
  // End to end: a confined `true` through the same path every tool call takes.
  if (ok) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cordon-doctor-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) {
      Policy policy;
      policy.filesystem.read = {"/usr", "/bin", "/lib", "/lib64", "/etc"};
      policy.filesystem.write = {"${WORKSPACE}"};
      policy.allow_weaker_sandbox = allow_weaker;
      auto host = PrepareSandboxHost(policy, shim);
      ProcessRequest req;
      req.argv = {"true"};
      req.cwd = tmpl;
      req.tool = "doctor";
      bool pass = false;
      std::string detail;
      if (host) {
        LaunchResources resources;
        auto facts = GatherHostFacts(*host, policy, tmpl, req, environ, &resources);
        auto plan = facts ? BuildLaunchPlan(policy, *facts, req)
                          : Result<LaunchPlan>(std::unexpected(facts.error()));
        if (plan) {
          auto proc = ConfinedProcess::Start(*plan, std::move(resources), req);
          if (proc) {
            (*proc)->Run(nullptr);
            ProcessOutcome o = (*proc)->outcome();
            pass = o.exit_code && *o.exit_code == 0;
            detail = pass ? "a confined `true` ran (" +
                                std::to_string(static_cast<int>(o.elapsed_ms)) + " ms)"
                          : (o.error ? o.error->message : StatusName(o.status));
          } else {
            detail = proc.error().message;
          }
        } else {
          detail = plan.error().message;
        }
      } else {
        detail = host.error().message;
      }
      add("sandbox_smoke_test", pass, true, detail, "see the failed checks above");
      // The warm sandbox (docs/adr/0008-warm-sandbox.md): the same plan handed to a fork
      // server in one bwrap, which runs `true` in new pid and mount namespaces of its own.
      bool warm_pass = false;
      std::string warm_detail;
      if (host && host->landlock_abi > 0 && !host->weaker) {
        req.warm = true;
        LaunchResources wres;
        auto facts = GatherHostFacts(*host, policy, tmpl, req, environ, &wres);
        auto plan = facts ? BuildLaunchPlan(policy, *facts, req)
                          : Result<LaunchPlan>(std::unexpected(facts.error()));
        auto sandbox = plan ? WarmSandbox::Start(WarmServerArgv(*plan, ""), "doctor", std::nullopt)
                            : Result<std::shared_ptr<WarmSandbox>>(std::unexpected(plan.error()));
        if (sandbox) {
          auto proc = ConfinedProcess::StartWarm(*plan, std::move(wres), req, *sandbox, "");
          if (proc) {
            (*proc)->Run(nullptr);
            ProcessOutcome o = (*proc)->outcome();
            warm_pass = o.exit_code && *o.exit_code == 0;
            warm_detail = warm_pass ? "serve's calls run warm: a `true` in the fork server's own "
                                      "pid and mount namespaces took " +
                                          std::to_string(static_cast<int>(o.elapsed_ms)) + " ms"
                                    : (o.error ? o.error->message : StatusName(o.status));
          } else {
            warm_detail = proc.error().message;
          }
        } else {
          warm_detail = sandbox.error().message;
        }
      } else {
        warm_detail =
            host ? "no Landlock or the weaker mode: serve's calls run cold" : host.error().message;
      }
      std::filesystem::remove_all(tmpl);
      add("warm_sandbox", warm_pass, false, warm_detail,
          "serve's calls fail with sandbox_unavailable; set [sandbox] warm = \"off\" to run "
          "them cold, and report the detail");
    }
    {
      auto [pass, detail] = EgressProxyProbe(shim);
      add("egress_proxy", pass, false, detail,
          "network mode proxy (--allow-domain, --allow-preset) will not work; see the detail");
    }
    // What docs/clients.md relies on beyond the sandbox: MCP servers run by node or python3,
    // with their own program files readable without --read.
    for (const char* interpreter : {"node", "python3"}) {
      auto [pass, detail] = ConfinedServerProbe(shim, interpreter, allow_weaker);
      add(std::string("mcp_server_") + interpreter, pass, false, detail,
          std::string("install ") + interpreter +
              " where the sandbox can read it (under /usr, or a directory you grant with "
              "--read), for servers docs/clients.md runs with it");
    }
  }
  *report = {{"ok", ok}, {"checks", checks}};
  return ok;
}

}  // namespace cordon
