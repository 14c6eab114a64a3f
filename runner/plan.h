// The launch's second step (runner/plan.cc, docs/adr/0002-launch-plan.md): BuildLaunchPlan
// turns policy + host facts + request into a frozen plan with no system call, and the views of
// it that Start executes and the audit log records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/contain.h"
#include "runner/host_facts.h"
#include "runner/limit_hit.h"

namespace cordon {

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
// The policy's process limits as the rlimit applier takes them (runner/rlimits.h).
RlimitValues RlimitValuesOf(const Limits& limits);
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

}  // namespace cordon
