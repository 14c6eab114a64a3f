// Contain(): the ordered confinement steps the shim applies inside bwrap before execve.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/landlock.h"
#include "runner/rlimits.h"
#include "runner/seccomp.h"

namespace cordon {

struct ContainSpec {
  std::vector<RlimitSpec> rlimits;
  std::optional<LandlockSpec> landlock;  // nullopt only in the explicit weaker mode w/o Landlock
  std::vector<SeccompRule> seccomp;
  // CompileSeccomp(seccomp), filled by the plan: the filter the shim loads (it compiles nothing).
  std::string seccomp_program;
  // The staged workspace's rename filter (CompileRenameNotifyFilter, runner/rename_supervisor.h),
  // loaded by the command after seccomp_program; its listener is answered by the shim. Empty:
  // no supervisor (the direct mode, or no Landlock to restrict the supervisor with).
  std::string rename_notify_program;
  std::uint64_t ipc_shm_bytes = 0;  // SysV shm limits of the sandbox's own IPC namespace; 0: none
  // Network mode proxy: the shim listens on 127.0.0.1:proxy_port inside the sandbox's network
  // namespace and sends the listener to cordon (kProxyListenerLine); 0: no proxy.
  int proxy_port = 0;
  std::vector<std::string> argv;
  std::string cwd;
};

// The line the shim's child writes on its status socket before it enforces Landlock; cordon
// takes the writer's pid from the message's SCM_CREDENTIALS (the pid the kernel's Landlock audit
// records name, runner/kernel_audit.h).
inline constexpr std::string_view kConfiningLine = "{\"confining\":true}\n";
// The status line that carries the proxy listener (SCM_RIGHTS) from the shim to cordon.
inline constexpr std::string_view kProxyListenerLine = "cordon-proxy-listener\n";
// local_servers' probes (issue 23): cordon writes one byte on the status socket, '4' or '6', and
// the shim answers with this line carrying an unconnected TCP socket of that family made in the
// sandbox's network namespace (SCM_RIGHTS; the line alone when it could not make one). cordon
// connects it: a socket keeps the namespace it was made in.
inline constexpr std::string_view kProbeSocketLine = "cordon-probe-socket\n";

Json ContainSpecJson(const ContainSpec& spec);
Result<ContainSpec> ContainSpecFromJson(const Json& j);

// Applies rlimits, no_new_privs, the capability drop, Landlock and seccomp, in that order.
// Returns the step that failed; the caller must then not exec anything.
struct ContainFailure {
  std::string step;
  Error error;
};
std::optional<ContainFailure> Contain(const ContainSpec& spec);

// Drops every capability: effective, permitted, inheritable, ambient and the bounding set.
Status DropAllCapabilities();

}  // namespace cordon
