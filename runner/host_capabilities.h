// What this host lets cordon do, found by trying (docs/adr/0011-host-probe.md): ProbeHost tries
// each step the sandbox needs in a throwaway child, reads the context that explains a refusal
// (AppArmor, a seccomp filter, a masked /proc, a container, Kubernetes, gVisor), and names the one
// cause and its one remedy. Classify and ChooseSandboxMode are pure and table-tested.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/text.h"

namespace cordon {

// The steps, in the order they are tried: each needs the ones before it.
enum class ProbeStep {
  kBwrap,          // bwrap is installed
  kUserNamespace,  // unshare(CLONE_NEWUSER) and its uid/gid maps
  kMount,          // a mount namespace in it, and a tmpfs mounted there
  kProc,           // a new pid namespace's own /proc
  kNetNamespace,   // a network namespace
  kBwrapRun,       // bwrap itself, as cordon runs it (its own message when it fails)
  kOverlay,        // an overlay mounted in a namespace of cordon's own (the staged workspace)
  kLandlock,
  kSeccomp,
  kClone3,
};
inline constexpr EnumName<ProbeStep> kProbeStepNames[] = {
    {ProbeStep::kBwrap, "bwrap"},
    {ProbeStep::kUserNamespace, "user_namespace"},
    {ProbeStep::kMount, "mount"},
    {ProbeStep::kProc, "proc"},
    {ProbeStep::kNetNamespace, "net_namespace"},
    {ProbeStep::kBwrapRun, "bwrap_run"},
    {ProbeStep::kOverlay, "overlay"},
    {ProbeStep::kLandlock, "landlock"},
    {ProbeStep::kSeccomp, "seccomp"},
    {ProbeStep::kClone3, "clone3"}};

struct StepResult {
  ProbeStep step = ProbeStep::kBwrap;
  bool tried = false;
  bool ok = false;
  int err = 0;         // errno of the call that failed
  std::string detail;  // which call, or bwrap's own message
};

// Facts that explain a refusal, read without side effects. Also the cache key.
// Test switches: each makes this cordon act as on a host without one facility, so that the
// escape tests run against each fallback (tests/CMakeLists.txt: escape_test_no_bwrap,
// escape_test_no_landlock, escape_test_no_overlay; SECURITY.md, "Test switches"). They are read
// from the environment of whoever starts cordon, never from a policy or from inside the sandbox
// (a sandboxed command cannot change its supervisor's environment); each only takes a layer
// away, the probe (context.test_switches) and each confinement record show it, and without bwrap
// cordon still fails closed unless the policy allows the weaker mode.
//   CORDON_TEST_NO_BWRAP=1     bwrap counts as not installed: mode landlock-seccomp
//   CORDON_TEST_NO_LANDLOCK=1  Landlock counts as unavailable: bwrap's namespaces alone
//   CORDON_TEST_NO_OVERLAY=1   the staged workspace counts as unavailable: the direct mode
// Like CORDON_TEST_NO_CGROUP (runner/host_facts.cc), a switch is on when its value is "1".
bool ForcedByTestSwitch(const char* name);

struct HostContext {
  std::optional<int> apparmor_restrict_userns;   // kernel.apparmor_restrict_unprivileged_userns
  std::optional<long> max_user_namespaces;       // user.max_user_namespaces; nullopt: no file
  std::optional<int> unprivileged_userns_clone;  // kernel.unprivileged_userns_clone (old Debian)
  int seccomp_mode = 0;                          // /proc/self/status Seccomp: 0, 1 or 2
  int seccomp_filters = 0;                       // Seccomp_filters:
  std::vector<std::string> proc_overmounts;      // mounts over paths under /proc (mountinfo)
  std::string container;                         // docker, podman, kubernetes, lxc, or empty
  std::string container_evidence;                // what said so
  bool kubernetes = false;                       // KUBERNETES_SERVICE_HOST
  bool gitlab_ci = false;                        // GITLAB_CI: a job of GitLab's runner
  bool gvisor = false;
  std::string kernel;  // uname release
  unsigned euid = 0;
  std::string namespaces;                  // user, mnt, pid and net namespace inodes
  std::string bwrap;                       // its path, empty when missing
  std::string bwrap_identity;              // its inode and mtime
  std::vector<std::string> test_switches;  // the CORDON_TEST_NO_* set (ForcedByTestSwitch)
  // The masked /proc entries that block a new /proc (not the empty-directory mounts, such as
  // binfmt_misc, that the kernel lets through).
  std::vector<std::string> MaskedProc() const;
  std::string Key() const;  // a hash of everything above
  Json ToJson() const;
};

enum class HostCause {
  kNone,
  kNoBwrap,
  kAppArmorUserns,  // Ubuntu 23.10+: kernel.apparmor_restrict_unprivileged_userns=1
  kSeccompUserns,   // a seccomp filter (a container's profile) refuses the namespace calls
  kUsernsDisabled,  // user.max_user_namespaces=0 or kernel.unprivileged_userns_clone=0
  kMountRefused,    // the namespace works, mounts in it do not (AppArmor's deny mount)
  kMaskedProc,      // a container's masked /proc: a new /proc cannot be mounted
  kProcRefused,     // a new /proc cannot be mounted, and no masked path explains it
  kNetnsRefused,
  kBwrapFailed,  // every step worked alone, bwrap did not
  kNoSeccomp,
  kGVisorNoLandlock,  // under gVisor, without the namespaces: no weaker mode is possible
  kUnknown,
};
inline constexpr EnumName<HostCause> kHostCauseNames[] = {
    {HostCause::kNone, "none"},
    {HostCause::kNoBwrap, "no_bwrap"},
    {HostCause::kAppArmorUserns, "apparmor_userns"},
    {HostCause::kSeccompUserns, "seccomp_userns"},
    {HostCause::kUsernsDisabled, "userns_disabled"},
    {HostCause::kMountRefused, "mount_refused"},
    {HostCause::kMaskedProc, "masked_proc"},
    {HostCause::kProcRefused, "proc_refused"},
    {HostCause::kNetnsRefused, "netns_refused"},
    {HostCause::kBwrapFailed, "bwrap_failed"},
    {HostCause::kNoSeccomp, "no_seccomp"},
    {HostCause::kGVisorNoLandlock, "gvisor_no_landlock"},
    {HostCause::kUnknown, "unknown"}};

// How a process is confined. kBwrap is the full sandbox; the other two are the weaker modes,
// chosen only where the probe says bwrap's full sandbox cannot run and the policy allows it.
enum class SandboxMode {
  kBwrap,          // bwrap's namespaces + Landlock + seccomp
  kBwrapHostProc,  // the same, but the host's /proc bound instead of a new one
  kLandlockOnly,   // no namespaces: Landlock + seccomp + no_new_privs + rlimits
};
inline constexpr EnumName<SandboxMode> kSandboxModeNames[] = {
    {SandboxMode::kBwrap, "bwrap"},
    {SandboxMode::kBwrapHostProc, "bwrap-host-proc"},
    {SandboxMode::kLandlockOnly, "landlock-seccomp"}};

struct HostCapabilities {
  HostContext context;
  std::vector<StepResult> steps;  // in ProbeStep order
  int landlock_abi = 0;
  bool clone3 = false;
  HostCause cause = HostCause::kNone;  // why the full sandbox cannot run
  std::string cause_text;              // that cause, in a sentence
  std::string remedy;                  // its one remedy, for this environment
  std::string cached;                  // the cache file it came from; empty: probed now
  const StepResult* Step(ProbeStep s) const;
  bool Ok(ProbeStep s) const;
  Json ToJson() const;
};

// Pure: the one cause the steps and the context show, its sentence and its remedy.
void Classify(HostCapabilities& caps);

// Pure: the mode a session runs in, or sandbox_unavailable naming the cause and the remedy (and
// `cordon doctor`). A weaker mode only with allow_weaker; never with the host-proc mode unless
// Landlock is there to keep other processes' /proc entries unreadable.
struct SandboxChoice {
  SandboxMode mode = SandboxMode::kBwrap;
  std::string reason;               // empty for kBwrap
  std::vector<std::string> losses;  // what this mode does not promise, for every record
};
Result<SandboxChoice> ChooseSandboxMode(const HostCapabilities& caps, bool allow_weaker);
// What each mode gives up against the full sandbox (SECURITY.md, "Weaker modes").
std::vector<std::string> ModeLosses(SandboxMode mode);

HostContext ReadHostContext();
// Tries every step now (a few forks and one bwrap run: about 10-30 ms) and writes the cache.
HostCapabilities ProbeHostNow();
// The cached result for this context when there is one this user wrote, else ProbeHostNow. The
// cache lives in cordon's runtime directory ($XDG_RUNTIME_DIR/cordon, else /tmp/cordon-UID,
// 0700), one file per context key: another context (a container, a seccomp filter, a changed
// sysctl, another mount namespace) has another key and is probed afresh.
HostCapabilities ProbeHost();
// Removes the cached result (a launch found the sandbox refused after all).
void ForgetHostProbe();
// cordon's private runtime directory (0700), made when missing.
std::string CordonRuntimeDir();

}  // namespace cordon
