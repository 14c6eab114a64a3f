// Launch, in three steps (docs/adr/0002-launch-plan.md): GatherHostFacts reads the host and
// acquires what can fail, BuildLaunchPlan turns policy + facts + request into a frozen plan
// with no system call, and ConfinedProcess::Start executes it; Run then supervises it with a
// pidfd: output caps, timeout, termination of the whole sandbox, the shim's real exit status.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "core/fs.h"
#include "core/unique_fd.h"
#include "policy/policy.h"
#include "runner/bwrap.h"
#include "runner/capture.h"
#include "runner/cgroup.h"
#include "runner/contain.h"
#include "runner/egress_binding.h"
#include "runner/grants.h"
#include "runner/host_capabilities.h"
#include "runner/kernel_audit.h"
#include "runner/limit_hit.h"
#include "runner/mask.h"
#include "runner/preset_cache.h"
#include "runner/proc_usage.h"
#include "workspace/guard.h"
#include "workspace/staging.h"

namespace cordon {

class WarmSandbox;

// What this host can do, probed once per session.
struct SandboxHost {
  std::string bwrap;  // empty when bwrap is missing
  std::string shim;   // cordon-shim next to the cordon binary
  int landlock_abi = 0;
  // The mode the probe chose (runner/host_capabilities.h): bwrap, or a weaker mode the policy
  // allowed, with why and what it gives up.
  SandboxMode mode = SandboxMode::kBwrap;
  bool weaker = false;     // mode kLandlockOnly: no bwrap, Landlock + seccomp only
  bool host_proc = false;  // mode kBwrapHostProc: bwrap with the host's /proc bound
  std::string weaker_reason;
  std::vector<std::string> losses;
  bool clone3 = true;  // false: the shim's fork server uses clone
  Json probe;          // the host probe, for session_started
  CgroupSupport cgroups;
  // Root-only scans (runner/mask.h), shared by every launch of the session.
  std::shared_ptr<RootOnlyCache> root_only = std::make_shared<RootOnlyCache>();
  // Landlock denials (runner/kernel_audit.h): the session's reader, when cordon can read them,
  // and what the session records about them ("recorded", or why not).
  std::shared_ptr<KernelAudit> kernel_audit;
  std::string landlock_denials;
  Json ToJson() const;
};

// Fails closed with sandbox_unavailable unless the policy allows the weaker mode.
Result<SandboxHost> PrepareSandboxHost(const Policy& policy, const std::string& shim_path);
std::string DefaultShimPath();

enum class ProcessKind { kForeground, kBackground, kMcpServer };
inline constexpr EnumName<ProcessKind> kProcessKindNames[] = {
    {ProcessKind::kForeground, "foreground"},
    {ProcessKind::kBackground, "background"},
    {ProcessKind::kMcpServer, "mcp_server"}};

struct ProcessRequest {
  std::vector<std::string> argv;
  std::string cwd;  // absolute, inside the workspace
  // The tool call that started it (its number in the session; 0: none): session_usage adds
  // the process's figures to that call's.
  std::uint64_t call = 0;
  std::string tool;  // for [tools.NAME] limits and network
  ProcessKind kind = ProcessKind::kForeground;
  std::optional<std::int64_t> timeout_secs;
  bool timeout_from_user = false;  // set by the CLI user: may exceed the policy's timeout
  std::optional<NetworkMode> network;
  bool workspace_writable = true;
  std::size_t max_output_bytes = 65536;
  bool inherit_stdio = false;  // cordon exec: the command uses cordon's own stdin/out/err
  bool pipe_stdin = false;     // cordon wrap: cordon writes the command's stdin
  bool no_timeout = false;     // a long-lived server: its lifetime is not a call's
  // Paths outside the workspace the person running cordon granted (--read, --write, a configured
  // server's sandbox.read/write), checked by ResolveGrant.
  std::vector<PathGrant> grants;
  // A server: its own program files are readable without a flag (ProgramFileGrants).
  bool program_files = false;
  // A command the person running cordon gave (exec, wrap, a configured server), never an
  // agent's: a version manager's shim in argv[0] is resolved by the manager on the host
  // (runner/interpreter.h), and the interpreter it names runs, its prefix readable.
  bool resolve_shims = false;
  std::vector<std::pair<std::string, std::string>> extra_env;  // from the user's own config
  // cordon wrap: every variable of the caller's environment (minus env.deny), as the MCP client
  // gave it to cordon for the server (runner/environment.h).
  bool inherit_env = false;
  // From SIGTERM (or the signal cordon received) to SIGKILL when cordon ends the sandbox:
  // `wrap` keeps it short, so that its records are written before an MCP client, which sends
  // SIGTERM two seconds after closing stdin, gives up on it.
  int stop_grace_ms = 2000;
  // Network mode proxy (docs/adr/0005-egress-proxy.md): what this process's rules add to the
  // policy's for `tool` (--allow-domain, a configured server's [servers.NAME.sandbox]), and who
  // it is in the network records ("tool run_shell", "server github"; empty: "tool " + tool).
  EgressExtra egress_extra;
  std::string egress_identity;
  // Set by ProcessHost::Plan in network mode proxy: cordon's cache for each preset (granted in
  // `grants`, named by its variables in the environment).
  std::vector<PresetCache> preset_caches;
  // Set by ProcessHost::Launch: where the listener the shim sends goes.
  std::shared_ptr<EgressBinding> egress;
  // Set by ProcessHost::Launch: the call runs in a warm sandbox (docs/adr/0008-warm-sandbox.md),
  // which is in the cgroup: no cgroup of its own is made for it.
  bool warm = false;
  // Set by ProcessHost::Plan: the writable roots are staged (docs/adr/0006-staged-workspace.md),
  // so no walk finds protected names or git directories for read-only binds and views.
  bool staged = false;
  // Set by ProcessHost::LaunchStaged for a warm call: the start of its change window, read on
  // the fine clock (ChangeWindowT0). The call's init waits for the coarse clock to reach it
  // before the command starts (ChangeWindowStart's wait, run in the sandbox beside its clone and
  // mounts instead of before them on cordon's side).
  std::int64_t window_start_ns = 0;
  // Who the process belongs to: under `serve --http`, the MCP session that started it (its label,
  // "mcp-N"); empty for the one session of stdio serve, exec and call. A background job is seen,
  // read and cancelled by its owner only (ProcessHost).
  std::string owner;
};

// Hooks for a process whose stdout is a protocol rather than output to capture.
struct RunHooks {
  std::function<void(std::string_view)> on_stdout;  // stdout bypasses the capture when set
  int extra_fd = -1;                                // polled beside the process's fds
  std::function<bool()> on_extra_readable;          // false: stop polling extra_fd
};

// Everything the plan needs to know about the host, read before planning so that
// BuildLaunchPlan is a pure function (docs/adr/0002-launch-plan.md).
struct HostFacts {
  SandboxHost host;
  std::string workspace;
  std::string home;                                      // $HOME, or /nonexistent
  std::vector<std::pair<std::string, std::string>> env;  // BuildSandboxEnvironment of the host's
  std::string caller_path;  // the host's PATH, which the plan narrows to what the sandbox sees
  std::map<std::string, HostPath> paths;  // each policy path and grant
  std::vector<PathGrant> program;         // the server's program files not readable already
  std::string program_path;  // argv[0] resolved from a version manager's shim, or empty
  std::optional<std::pair<uid_t, mode_t>> workspace_stat;  // owner and mode, when stat worked
  // Why the user running cordon cannot write the workspace (a read-only mount, its mode), or
  // empty: a process then runs with the workspace read-only instead of failing to start.
  std::string workspace_read_only;
  uid_t euid = 0;
  std::optional<ProtectedScan> protected_scan;  // absent when the workspace is read-only
  std::optional<Error> protected_error;         // the scan refused the workspace
  std::vector<GitViewMount> git_views;          // the session's views of the scan's git dirs
  std::vector<StagedRoot> staged;               // the overlays the launch child mounts
  std::map<std::string, std::vector<std::string>> paths_except;  // weaker mode: PathsExcept
  // The cgroup as acquired: its mode, or kNone with the reason creating it failed (the plan
  // then falls back to rlimits for memory and pids).
  CgroupMode cgroup = CgroupMode::kNone;
  std::string cgroup_error;
  std::string private_tmp;  // weaker mode: this call's own temporary directory
  // Each of cordon's own files (policy.own_paths) as found: itself when it exists, else its
  // first missing component (kMissing), which the plan covers when a bind would let the
  // command create it.
  std::vector<HostPath> own;
  std::optional<std::string> dangerous_workspace;  // why the workspace is `/` or $HOME
  // Running as root: what ordinary users cannot read under the read binds (null otherwise).
  std::shared_ptr<const RootOnlyScan> root_only;
  // The user's git identity as GIT_AUTHOR_* and GIT_COMMITTER_* (runner/git_identity.h), read
  // once per session: set where nothing else (the caller's passed variables, [env] set, the
  // request's own) names the variable.
  std::vector<std::pair<std::string, std::string>> git_identity;
};

// A directory removed with everything in it when its owner goes (remove_all does not follow
// the symlinks a command left there).
class OwnedTempDir {
 public:
  OwnedTempDir() = default;
  explicit OwnedTempDir(std::string path) : path_(std::move(path)) {}
  OwnedTempDir(OwnedTempDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  OwnedTempDir& operator=(OwnedTempDir&& o) noexcept;
  OwnedTempDir(const OwnedTempDir&) = delete;
  OwnedTempDir& operator=(const OwnedTempDir&) = delete;
  ~OwnedTempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What gathering acquired for one launch; Start takes it over, and dropping it releases both.
struct LaunchResources {
  std::optional<CgroupJob> cgroup;
  OwnedTempDir private_tmp;
  std::shared_ptr<KernelAudit> kernel_audit;  // the session's reader of Landlock denials
};

// The roots a confined process may write, which the workspace guard walks: the workspace (none
// at all when the policy keeps it read-only) and each policy write path that is a directory.
std::vector<std::string> WritableRoots(const Policy& policy, const std::string& workspace,
                                       const std::string& home);

// Reads the host and acquires the cgroup and (weaker mode) the private TMPDIR. Fails only when
// an acquisition that has no fallback fails; a refused workspace is a fact the plan reports.
Result<HostFacts> GatherHostFacts(const SandboxHost& host, const Policy& policy,
                                  const std::string& workspace, const ProcessRequest& req,
                                  char** host_env, LaunchResources* acquired);

// The session-level part: what a warm sandbox would keep across calls (namespaces, mounts,
// the network mode as it shapes the namespaces).
struct SessionLaunch {
  std::string bwrap;  // empty: the weaker mode (the shim is exec'd directly)
  std::string shim;
  SandboxMode mode = SandboxMode::kBwrap;
  std::string weaker_reason;
  std::vector<std::string> losses;  // what the mode gives up (ModeLosses), in every record
  int landlock_abi = 0;
  std::string workspace;
  bool workspace_writable = true;
  std::string workspace_read_only;  // why it is read-only although the request asked to write
  std::vector<HostPath> read;
  std::vector<HostPath> write;    // beyond the workspace
  std::vector<PathGrant> grants;  // of read and write: those granted, and who asked for each
  std::vector<HostPath> deny;     // the policy's deny list, then cordon's own files, then root-only
  std::size_t own_masked = 0;     // of deny: cordon's own files
  std::size_t root_only_masked = 0;  // of deny: root-only files (cordon runs as root)
  std::vector<ProtectedEntry> protect;
  std::vector<std::string> pins;
  std::vector<std::string> git_dirs;    // every git dir in the writable roots (full walk)
  std::vector<GitViewMount> git_views;  // every git directory, shown through a view
  // Staged mode: each writable root is an overlay the launch child mounts before bwrap; empty in
  // direct mode (then protect, pins and git_views above keep the workspace).
  std::vector<StagedRoot> staged;
  NetworkMode network = NetworkMode::kNone;
  std::optional<EgressPolicy> egress;      // network mode proxy: the sandbox's rules
  std::vector<PresetCache> preset_caches;  // and its presets' caches
  bool weaker() const { return bwrap.empty(); }
};

// A timeout the call asked for, against the one it got: an agent's request above the policy's
// timeout is cut to it, and the result and the process record say so.
struct TimeoutDecision {
  std::int64_t requested = 0;
  std::int64_t applied = 0;
  bool capped = false;
  std::string capped_by;   // the policy key that capped it (limits.timeout_secs, ...)
  std::string decided_by;  // the file:line that set that key, or "built-in default"
  Json ToJson() const;
  // A capped request in one line, for the top of a result: "timeout_secs 3000 capped to 600 by
  // tools.run_shell.timeout_secs (FILE:LINE)". Empty when not capped.
  std::string Note() const;
};

// The per-call part: argv, environment, cwd, limits, the cgroup decision, stdio, and the spec
// the shim applies (rlimits, Landlock, seccomp).
struct CallLaunch {
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
  Limits limits;
  std::optional<TimeoutDecision> timeout;      // when the request named a timeout
  std::string tool;                            // whose [tools.NAME] limits applied
  std::set<std::string> tool_limit_overrides;  // the limit keys [tools.NAME] set
  CgroupMode cgroup = CgroupMode::kNone;
  std::string cgroup_error;  // why the cgroup the host offered could not be had
  std::string private_tmp;   // weaker mode
  ContainSpec contain;
  bool inherit_stdio = false;
  bool pipe_stdin = false;
  std::size_t max_output_bytes = 65536;
};

// The plan as data: everything needed to launch, comparable in tests without a kernel.
struct LaunchPlan {
  SessionLaunch session;
  CallLaunch call;
};

// `root` as paths that together cover it except the subtrees in `hidden` (and symlinks that
// lead into them): how the weaker mode leaves masked paths out of Landlock's allow rules.
std::vector<std::string> PathsExcept(const std::string& root,
                                     const std::vector<std::string>& hidden);

// Pure: no system call. The same facts and request give the same plan.
Result<LaunchPlan> BuildLaunchPlan(const Policy& policy, const HostFacts& facts,
                                   const ProcessRequest& req);

// What Start passes to execve, and nothing else does: bwrap's argv (or the shim's, in the
// weaker mode) and environment; the exact spec bytes the shim reads; the audit view.
std::vector<std::string> LaunchArgv(const LaunchPlan& plan);
std::vector<std::string> LaunchEnv(const LaunchPlan& plan);
// What bwrap reads from its --args fd: the command's environment (empty in the weaker mode).
std::string LaunchEnvArgs(const LaunchPlan& plan);
std::string LaunchSpec(const LaunchPlan& plan);
Json PlanConfinementJson(const LaunchPlan& plan);
// `cordon exec --plan`: the argv, environment and spec hash above, the spec, the confinement.
Json PlanJson(const LaunchPlan& plan);
// The warm sandbox's bwrap argv for a call planned as `plan` (docs/adr/0008-warm-sandbox.md):
// the plan's own argv without what is per call (--chdir, the /tmp size, the JSON status and
// --args fds, the command), its staged roots bound read-only (the overlays' lower layers), the
// server's three capabilities, the session's stage directory (when not empty) and the server.
// Calls whose argv is equal share a sandbox: it is the key.
std::vector<std::string> WarmServerArgv(const LaunchPlan& plan, const std::string& stage_dir);
// What one warm call hands the server (runner/shim/serve.cc): the spec exactly as the cold
// path writes it, the environment, the /tmp size, the overlays with their upper and work
// directories as the sandbox sees them, and what to cover.
Json WarmCallFrame(const LaunchPlan& plan, const std::string& stage_dir);

enum class ProcessStatus { kRunning, kExited, kSignaled, kTimeout, kCancelled, kFailed };
inline constexpr EnumName<ProcessStatus> kProcessStatusNames[] = {
    {ProcessStatus::kRunning, "running"},     {ProcessStatus::kExited, "exited"},
    {ProcessStatus::kSignaled, "signaled"},   {ProcessStatus::kTimeout, "timeout"},
    {ProcessStatus::kCancelled, "cancelled"}, {ProcessStatus::kFailed, "failed"}};
inline std::string StatusName(ProcessStatus s) { return std::string(Name(kProcessStatusNames, s)); }

struct ProcessOutcome {
  ProcessStatus status = ProcessStatus::kRunning;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<Error> error;  // sandbox failures (shim step, bwrap, exec)
  double elapsed_ms = 0;
  double cpu_ms = 0;
  std::int64_t max_rss_kb = 0;
  std::string spec_sha256;  // the shim's hash of the spec it read; empty if it did not report
  Json cgroup;
  // {read_bytes, write_bytes, rchar, wchar} of the command's reaped tree (the shim's
  // /proc/self/io); null when it did not report them.
  Json io;
  std::optional<DenialSummary> denials;  // Landlock denials, when the session reads them
  std::optional<LimitHit> limit;         // the limit that ended it (runner/limit_hit.h)
  // The termination signal cordon received (SIGINT, SIGTERM, SIGHUP) that made it end this
  // process (core/signals.h); the process itself got that signal, then SIGKILL after the grace.
  std::optional<int> stop_signal;
};

// Output sizes and truncation, without building the (possibly MB-long) texts.
struct OutputCounts {
  std::uint64_t stdout_bytes = 0;
  std::uint64_t stderr_bytes = 0;
  std::uint64_t stdout_dropped_bytes = 0;
  std::uint64_t stderr_dropped_bytes = 0;
  bool truncated = false;
  Json ToJson() const;
};

class ConfinedProcess {
 public:
  // Executes the plan as it is; `resources` are the ones gathered with its facts.
  static Result<std::unique_ptr<ConfinedProcess>> Start(const LaunchPlan& plan,
                                                        LaunchResources resources,
                                                        const ProcessRequest& req);
  // A call of a warm sandbox (docs/adr/0008-warm-sandbox.md): the same plan, handed to the
  // sandbox's server instead of a new bwrap; `stage_dir` is the session's stage directory the
  // sandbox binds (empty: none).
  static Result<std::unique_ptr<ConfinedProcess>> StartWarm(const LaunchPlan& plan,
                                                            LaunchResources resources,
                                                            const ProcessRequest& req,
                                                            std::shared_ptr<WarmSandbox> sandbox,
                                                            const std::string& stage_dir);
  ~ConfinedProcess();

  // How it was started, for its record: {kind: "warm", sandbox, call} or {kind: "cold", reason}.
  void SetLaunchInfo(Json info) { launch_info_ = std::move(info); }
  const Json& launch_info() const { return launch_info_; }

  // Pumps output until the process ends, the timeout passes, or *cancel becomes true.
  void Run(const std::atomic<bool>* cancel, RunHooks* hooks = nullptr);
  // A cancel from now on skips the grace: SIGKILL to every process of the sandbox at once (also
  // one already waiting out its grace). Set before the cancel flag.
  void ForceStop() { force_stop_ = true; }
  // The write end of the command's stdin (pipe_stdin), and closing it (EOF for the command).
  int stdin_fd() const { return in_fd_.get(); }
  void CloseStdin() { in_fd_.Reset(); }
  bool finished() const;
  ProcessOutcome outcome() const;
  std::string StdoutText() const;
  std::string StderrText() const;
  Json OutputJson() const;
  OutputCounts Counts() const;
  std::string Tail(std::size_t max_chars) const;  // combined tail, escapes stripped
  const ProcessRequest& request() const { return req_; }
  // Takes the sandbox's listener off the proxy and ends its open connections, whose network
  // records are written before this returns (ProcessHost calls it before the process record).
  void ReleaseEgress() { req_.egress.reset(); }
  const Json& confinement() const { return confinement_; }
  // The staged commit's summary for the result (mode, refused, conflicts, error), or null.
  void SetWorkspaceCommit(Json commit) {
    std::lock_guard<std::mutex> lock(mu_);
    workspace_commit_ = std::move(commit);
  }
  Json workspace_commit() const {
    std::lock_guard<std::mutex> lock(mu_);
    return workspace_commit_;
  }
  const std::optional<TimeoutDecision>& timeout_decision() const { return timeout_; }
  // What it uses now, read from /proc (runner/proc_usage.h) over every process in its sandbox's
  // pid namespace; null figures before that namespace is known, once it is gone, and in the
  // weaker mode (no namespace of its own).
  LiveUsage Live() const { return SumUsage(NamespaceProcessesIn(ns_dev_.load(), ns_ino_.load())); }
  // Its sandbox's pid namespace (st_dev, st_ino), held open while this object lives: {0, 0}
  // while unknown.
  std::pair<std::uint64_t, std::uint64_t> sandbox_namespace() const {
    return {ns_dev_.load(), ns_ino_.load()};
  }
  // Wall time since it started.
  double ElapsedMs() const;
  // A process of its sandbox's pid namespace (its init) as cordon sees it; 0 while unknown.
  pid_t sandbox_member() const { return live_member_.load(); }
  // Its cgroup's figures now (CgroupJob::Now), or null when it has no cgroup of its own (an
  // ordinary user without a delegated v2 tree; a warm call, in its sandbox's).
  Json CgroupNow() const { return cgroup_ ? cgroup_->Now() : Json(nullptr); }
  // The command's process group (the shim's child starts a session of its own) as cordon numbers
  // it; 0 while unknown.
  pid_t command_group() const { return confined_pid_.load(); }
  // local_servers' probe (issue 23): an unconnected TCP socket (`family` AF_INET or AF_INET6)
  // the shim made in the sandbox's network namespace and passed over the status socket
  // (kProbeSocketLine). Checked before it is returned: a stream socket of that family, in the
  // sandbox's network namespace (SIOCGSKNS) where cordon may ask. Fails when the process has
  // ended, is a warm call (unsupported), or the shim did not answer within `timeout_ms`.
  Result<UniqueFd> ProbeSocket(int family, int timeout_ms);
  // The commit after it (the direct mode's sweep) could not complete: the call fails with
  // this error (a sandbox failure already there keeps its code and gains the message).
  void FailCommit(const Error& e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (outcome_.error) {
      outcome_.error->message += "; " + e.message;
    } else {
      outcome_.error = e;
    }
  }
  // The names (never values) of the variables it got beyond the fixed ones, for its record.
  const std::vector<std::string>& env_names() const { return env_names_; }
  // The session's redactor: the output's cuts (head, tail, tails) never split a secret.
  void SetRedactor(const Redactor* redactor) {
    std::lock_guard<std::mutex> lock(mu_);
    redactor_ = redactor;
    out_.SetRedactor(redactor);
    err_.SetRedactor(redactor);
  }

 private:
  ConfinedProcess(std::size_t cap) : out_(cap), err_(cap) {}
  // What Start and StartWarm set alike: the request, the plan's limits, the resources.
  static std::unique_ptr<ConfinedProcess> Prepare(const LaunchPlan& plan, LaunchResources resources,
                                                  const ProcessRequest& req);
  void Terminate(int sig);
  // Until bwrap has said its sandbox's init (or exited, or 5 s), before every Terminate: a stop
  // as the process launches must reach the namespace, not only bwrap, whose child may not yet
  // die with it.
  void AwaitSandboxInit();
  std::shared_ptr<WarmSandbox> warm_;  // set: a warm call (pid_ is 0, pidfd_ its init's)
  Json launch_info_;
  ProcessRequest req_;
  const Redactor* redactor_ = nullptr;  // under mu_
  std::string workspace_;
  OwnedTempDir private_tmp_;  // weaker mode: the call's own temporary directory
  Json confinement_;
  std::vector<std::string> env_names_;
  pid_t pid_ = -1;
  UniqueFd pidfd_, out_fd_, err_fd_, status_fd_, json_fd_, in_fd_;
  pid_t sandbox_init_ = -1;  // -1 until bwrap reports it, 0 when its report was not usable
  // The sandbox's init pinned by a pidfd (cold calls; warm calls use pidfd_) and its pid
  // namespace held open: Terminate signals through descriptors, never a stored pid.
  UniqueFd init_pidfd_, sandbox_ns_;
  std::atomic<pid_t> live_member_{0};  // sandbox_init_ once known, for other threads' reads
  std::atomic<std::uint64_t> ns_dev_{0}, ns_ino_{0};  // sandbox_ns_'s, for other threads' reads
  void NoteNamespace();                               // sets them from sandbox_ns_
  std::atomic<bool> force_stop_{false};
  std::shared_ptr<KernelAudit> kernel_audit_;
  // host pid of the shim's child, which enforces Landlock and execs
  std::atomic<pid_t> confined_pid_{0};
  // ProbeSocket: one probe at a time; the answers OnStatusData takes (under mu_).
  std::mutex probe_mu_;
  std::condition_variable probe_cv_;
  std::vector<UniqueFd> probe_fds_;
  int probe_answers_ = 0;
  bool probe_waiting_ = false;
  void OnStatusData(int fd);
  std::string status_buf_, json_buf_;
  void OnJsonStatus(std::string_view data);
  std::optional<CgroupJob> cgroup_;
  std::int64_t timeout_ms_ = 0;
  std::optional<TimeoutDecision> timeout_;
  LimitFacts limit_facts_;  // the limits as planned; Run adds what the process reported
  double started_ms_ = 0;
  mutable std::mutex mu_;
  CappedStream out_, err_;
  ProcessOutcome outcome_;
  std::optional<Error> egress_error_;  // the proxy listener could not be bound (under mu_)
  Json workspace_commit_;              // under mu_
  bool done_ = false;
};

}  // namespace cordon
