// Launch: builds the confinement plan for one process (bwrap argv, Landlock, seccomp, rlimits,
// environment) and supervises it with a pidfd: output caps, timeout, termination of the whole
// sandbox, and the real exit status reported by the shim.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/unique_fd.h"
#include "policy/policy.h"
#include "runner/bwrap.h"
#include "runner/capture.h"
#include "runner/cgroup.h"
#include "runner/contain.h"

namespace cordon {

// What this host can do, probed once per session.
struct SandboxHost {
  std::string bwrap;  // empty when bwrap is missing
  std::string shim;   // cordon-shim next to the cordon binary
  int landlock_abi = 0;
  bool weaker = false;  // no bwrap: Landlock + seccomp only (policy allowed it)
  std::string weaker_reason;
  CgroupSupport cgroups;
  Json ToJson() const;
};

// Fails closed with sandbox_unavailable unless the policy allows the weaker mode.
Result<SandboxHost> PrepareSandboxHost(const Policy& policy, const std::string& shim_path);
std::string DefaultShimPath();

struct ProcessRequest {
  std::vector<std::string> argv;
  std::string cwd;                  // absolute, inside the workspace
  std::string tool;                 // for [tools.NAME] limits and network
  std::string kind = "foreground";  // foreground | background | mcp_server
  std::optional<std::int64_t> timeout_secs;
  bool timeout_from_user = false;  // set by the CLI user: may exceed the policy's timeout
  std::optional<NetworkMode> network;
  bool workspace_writable = true;
  std::size_t max_output_bytes = 65536;
  bool inherit_stdio = false;           // cordon exec: the command uses cordon's own stdin/out/err
  bool pipe_stdin = false;              // cordon wrap: cordon writes the command's stdin
  bool no_timeout = false;              // a long-lived server: its lifetime is not a call's
  std::vector<std::string> extra_read;  // read-only paths the CLI user added (--read)
  std::vector<std::pair<std::string, std::string>> extra_env;  // from the user's own config
};

// Hooks for a process whose stdout is a protocol rather than output to capture.
struct RunHooks {
  std::function<void(std::string_view)> on_stdout;  // stdout bypasses the capture when set
  int extra_fd = -1;                                // polled beside the process's fds
  std::function<bool()> on_extra_readable;          // false: stop polling extra_fd
};

// The plan as data: everything needed to launch, comparable in tests without a kernel.
struct LaunchPlan {
  SandboxLayout layout;
  ContainSpec contain;
  Limits limits;
  NetworkMode network = NetworkMode::kNone;
  std::vector<std::string> created_stubs;  // protected stubs bwrap will create on the host
  Json confinement;                        // what the audit record says was applied
};

// `root` as paths that together cover it except the subtrees in `hidden` (and symlinks that
// lead into them): how the weaker mode leaves masked paths out of Landlock's allow rules.
std::vector<std::string> PathsExcept(const std::string& root,
                                     const std::vector<std::string>& hidden);

Result<LaunchPlan> BuildLaunchPlan(const SandboxHost& host, const Policy& policy,
                                   const std::string& workspace, const ProcessRequest& req,
                                   char** host_env);

struct ProcessOutcome {
  std::string status = "running";  // exited | signaled | timeout | cancelled | failed
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<Error> error;  // sandbox failures (shim step, bwrap, exec)
  double elapsed_ms = 0;
  double cpu_ms = 0;
  std::int64_t max_rss_kb = 0;
  Json cgroup;
};

class ConfinedProcess {
 public:
  static Result<std::unique_ptr<ConfinedProcess>> Start(const LaunchPlan& plan,
                                                        const ProcessRequest& req,
                                                        const std::string& workspace);
  ~ConfinedProcess();

  // Pumps output until the process ends, the timeout passes, or *cancel becomes true.
  void Run(const std::atomic<bool>* cancel, RunHooks* hooks = nullptr);
  // The write end of the command's stdin (pipe_stdin), and closing it (EOF for the command).
  int stdin_fd() const { return in_fd_.get(); }
  void CloseStdin() { in_fd_.Reset(); }
  bool finished() const;
  ProcessOutcome outcome() const;
  std::string StdoutText() const;
  std::string StderrText() const;
  Json OutputJson() const;
  // The byte counts and truncation of OutputJson, without building the (possibly MB-long) texts.
  Json OutputCounts() const;                      // stdout/stderr text, truncation, dropped bytes
  std::string Tail(std::size_t max_chars) const;  // combined tail, escapes stripped
  const ProcessRequest& request() const { return req_; }
  const Json& confinement() const { return confinement_; }

 private:
  ConfinedProcess(std::size_t cap) : out_(cap), err_(cap) {}
  void Terminate();
  void CleanupStubs();
  ProcessRequest req_;
  std::string workspace_;
  std::vector<std::string> stubs_;
  UniqueFd stub_lock_;
  std::string private_tmp_;  // weaker mode: the call's own temporary directory
  Json confinement_;
  pid_t pid_ = -1;
  UniqueFd pidfd_, out_fd_, err_fd_, status_fd_, json_fd_, in_fd_;
  pid_t sandbox_init_ = -1;
  std::string status_buf_, json_buf_;
  std::optional<CgroupJob> cgroup_;
  std::int64_t timeout_ms_ = 0;
  double started_ms_ = 0;
  mutable std::mutex mu_;
  CappedStream out_, err_;
  ProcessOutcome outcome_;
  bool done_ = false;
};

}  // namespace cordon
