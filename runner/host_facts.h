// The launch's first step (runner/host_facts.cc, docs/adr/0002-launch-plan.md): what a launch
// asks for (ProcessRequest), what the host can do (SandboxHost, probed once per session), and
// GatherHostFacts, which reads the host and acquires what can fail, so that the plan
// (runner/plan.h) is a pure function of policy, facts and request.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/argv.h"
#include "core/enum_names.h"
#include "core/fs.h"
#include "core/unique_fd.h"
#include "policy/policy.h"
#include "runner/bwrap.h"
#include "runner/cgroup.h"
#include "runner/egress_binding.h"
#include "runner/grants.h"
#include "runner/host_capabilities.h"
#include "runner/kernel_audit.h"
#include "runner/mask.h"
#include "runner/preset_cache.h"
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
  Argv argv;        // shared by the request's copies (core/argv.h)
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

}  // namespace cordon
