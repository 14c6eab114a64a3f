// Launch, in three steps (docs/adr/0002-launch-plan.md): GatherHostFacts reads the host and
// acquires what can fail, BuildLaunchPlan turns policy + facts + request into a frozen plan
// with no system call, and ConfinedProcess::Start executes it; Run then supervises it with a
// pidfd: output caps, timeout, termination of the whole sandbox, the shim's real exit status.
// One header per step: runner/host_facts.h, runner/plan.h, and this one (runner/launch.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "runner/capture.h"
#include "runner/host_facts.h"
#include "runner/plan.h"
#include "runner/proc_usage.h"

namespace cordon {

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
