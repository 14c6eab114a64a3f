// Launch step 1 (docs/adr/0002-launch-plan.md): the host, read once per session
// (PrepareSandboxHost) and per launch (GatherHostFacts); the only host reads before the plan.
#include "runner/host_facts.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
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

#include "core/hash.h"
#include "core/redact.h"
#include "core/signals.h"
#include "runner/environment.h"
#include "runner/host_capabilities.h"
#include "runner/host_probe.h"
#include "runner/interpreter.h"
#include "runner/launch_internal.h"

#ifndef CORDON_BUILD_SHIM
#define CORDON_BUILD_SHIM ""
#endif

namespace cordon {
namespace {

using namespace launch_detail;

}  // namespace

Json SandboxHost::ToJson() const {
  return {{"bwrap", bwrap.empty() ? Json(nullptr) : Json(bwrap)},
          {"landlock_abi", landlock_abi},
          {"mode", std::string(Name(kSandboxModeNames, mode))},
          {"weaker", mode != SandboxMode::kBwrap},
          {"weaker_reason", weaker_reason},
          {"losses", losses},
          {"probe", probe},
          {"cgroup", std::string(Name(kCgroupModeNames, cgroups.mode))},
          {"cgroup_reason", cgroups.reason},
          {"landlock_denials", landlock_denials}};
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
  h.landlock_abi = ForcedByTestSwitch("CORDON_TEST_NO_LANDLOCK") ? 0 : LandlockAbi();
  h.cgroups = ProbeCgroups();
  // For tests, and for a person who wants to see the fallback: no per-call cgroup, as on a host
  // without a delegated one. Memory and pids then fall back to rlimits, the sized /tmp, the
  // IPC namespace's shm limits and the memfd refusal (SECURITY.md, issue 9).
  if (const char* off = std::getenv("CORDON_TEST_NO_CGROUP"); off != nullptr && off[0] == '1') {
    h.cgroups = {CgroupMode::kNone, "CORDON_TEST_NO_CGROUP=1 is set", ""};
  }
  // The host probe (runner/host_capabilities.h): what was tried, the one cause when the full
  // sandbox cannot run, and the mode that follows from it and the policy.
  const HostCapabilities caps = ProbeHost();
  h.probe = caps.ToJson();
  h.clone3 = caps.clone3;
  h.bwrap = caps.context.bwrap;
  ASSIGN_OR_RETURN(const SandboxChoice choice,
                   ChooseSandboxMode(caps, policy.allow_weaker_sandbox));
  h.mode = choice.mode;
  h.losses = choice.losses;
  h.weaker_reason = choice.reason;
  h.weaker = choice.mode == SandboxMode::kLandlockOnly;
  h.host_proc = choice.mode == SandboxMode::kBwrapHostProc;
  if (h.weaker) h.bwrap.clear();
  // Landlock denials: read from the kernel's audit stream only where cordon may (root) and the
  // host's audit is on; cordon never switches it on.
  if (auto ka = KernelAudit::Start(h.landlock_abi)) {
    h.kernel_audit = *ka;
    h.landlock_denials = "recorded";
  } else {
    h.landlock_denials = ka.error().message;
  }
  return h;
}

OwnedTempDir& OwnedTempDir::operator=(OwnedTempDir&& o) noexcept {
  if (this != &o) {
    OwnedTempDir old(std::exchange(path_, std::exchange(o.path_, {})));
  }
  return *this;
}

OwnedTempDir::~OwnedTempDir() {
  if (path_.empty()) return;
  std::error_code ec;  // remove_all does not follow symlinks the command left there
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::string> WritableRoots(const Policy& policy, const std::string& workspace,
                                       const std::string& home) {
  const PolicyPaths pp = ExpandPolicyPaths(policy, workspace, home);
  std::vector<std::string> roots;
  if (!pp.workspace_in_write) return roots;
  roots.push_back(workspace);
  for (const auto& w : pp.write) {
    if (DescribeHostPath(w).kind == PathKind::kDir) roots.push_back(w);
  }
  return roots;
}

Result<HostFacts> GatherHostFacts(const SandboxHost& host, const Policy& policy,
                                  const std::string& workspace, const ProcessRequest& req,
                                  char** host_env, LaunchResources* acquired) {
  HostFacts f;
  f.host = host;
  f.workspace = workspace;
  const char* home_env = std::getenv("HOME");
  f.home = home_env != nullptr ? home_env : "/nonexistent";
  f.env = BuildSandboxEnvironment(host_env, workspace, policy.env, req.inherit_env);
  for (char** e = host_env; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "PATH=", 5) == 0) {
      f.caller_path = *e + 5;
      break;  // the first, as getenv(3) finds it
    }
  }
  const PolicyPaths pp = ExpandPolicyPaths(policy, workspace, f.home);
  for (const auto* list : {&pp.read, &pp.write, &pp.deny}) {
    for (const auto& p : *list) f.paths.emplace(p, DescribeHostPath(p));
  }
  std::string path_env = "/usr/local/bin:/usr/bin:/bin";
  for (char** e = host_env; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "PATH=", 5) == 0) path_env = *e + 5;
  }
  const std::string canonical_home = CanonicalPath(f.home);
  std::vector<std::string> argv = req.argv;
  // An interpreter's prefix (the version or environment directory), read-only: its standard
  // library and site-packages or node_modules go with it. Never `/`, $HOME or above.
  auto grant_prefix = [&](const std::string& prefix, const std::string& from) {
    if (prefix.empty() || GrantRefusal(prefix, canonical_home) || Under(prefix, workspace) ||
        UnderAny(prefix, pp.read) != nullptr)
      return;
    for (const auto& g : f.program) {
      if (g.path == prefix) return;
    }
    f.program.push_back(PathGrant{prefix, false, from});
  };
  if (req.resolve_shims && !argv.empty()) {
    // pyenv, asdf, mise, volta: the shim would run what the manager selects for this directory;
    // so does the sandbox, by its path (the shim itself needs the manager, which stays out).
    ASSIGN_OR_RETURN(
        auto shim, ResolveShim(argv[0], req.cwd.empty() ? workspace : req.cwd, path_env, host_env));
    if (shim) {
      f.program_path = shim->program;
      argv[0] = shim->program;
      if (!shim->prefix.empty() && !GrantRefusal(shim->prefix, canonical_home)) {
        grant_prefix(shim->prefix, shim->how);
      } else if (!Under(shim->program, workspace) && UnderAny(shim->program, pp.read) == nullptr) {
        f.program.push_back(PathGrant{shim->program, false, shim->how});
      }
    }
  }
  if (req.program_files) {
    // A server's own program, where the policy's reads and the workspace do not show it already.
    for (auto& g : ProgramFileGrants(argv, req.cwd.empty() ? workspace : req.cwd, path_env,
                                     canonical_home, CanonicalPath(workspace))) {
      if (Under(g.path, workspace) || UnderAny(g.path, pp.read) != nullptr) continue;
      // nvm's and conda's interpreters are real files: their prefix is granted as a shim's is.
      struct stat link {};
      if (g.from == "executable" && ::lstat(g.path.c_str(), &link) == 0 && !S_ISLNK(link.st_mode))
        if (auto prefix = InterpreterPrefix(g.path)) grant_prefix(*prefix, "interpreter prefix");
      bool inside = false;
      for (const auto& p : f.program) inside |= !p.write && Under(g.path, p.path);
      if (!inside) f.program.push_back(std::move(g));
    }
  }
  std::vector<std::string> granted_read;  // the read grants, for the root-only and weaker walks
  for (const std::vector<PathGrant>* list : {&req.grants, &std::as_const(f.program)}) {
    for (const auto& g : *list) {
      f.paths.emplace(g.path, DescribeHostPath(g.path));
      if (!g.write) granted_read.push_back(g.path);
    }
  }
  struct stat st {};
  if (::stat(workspace.c_str(), &st) == 0) f.workspace_stat.emplace(st.st_uid, st.st_mode);
  f.euid = ::geteuid();
  const std::vector<std::string> own_dirs = CordonOwnDirectories();
  for (const auto& own : policy.own_paths) {
    HostPath hp = DescribeHostPath(own);
    if (hp.kind == PathKind::kMissing &&
        std::find(own_dirs.begin(), own_dirs.end(), own) != own_dirs.end()) {
      // cordon's own configuration or state directory, missing: made now (0700), so that a
      // confined process cannot make it first. A mount point would appear on the host anyway.
      std::error_code ec;
      std::filesystem::create_directories(own, ec);
      if (!ec) ::chmod(own.c_str(), 0700);
      hp = DescribeHostPath(own);
    }
    if (hp.kind == PathKind::kMissing) {
      // Its first missing component: the one a command could create.
      for (std::string up = own;;) {
        const std::size_t slash = up.find_last_of('/');
        if (slash == 0 || slash == std::string::npos) break;
        up.resize(slash);
        if (DescribeHostPath(up).kind != PathKind::kMissing) break;
        hp.path = up;
      }
    }
    f.own.push_back(std::move(hp));
  }
  f.dangerous_workspace = DangerousWorkspaceReason(workspace, CanonicalPath(f.home));
  if (f.euid == 0 && !host.weaker && host.root_only) {
    // As real root, sandbox uid 0 owns what host uid 0 owns: the files ordinary users cannot
    // read are found here, once per session (the cache), and masked by the plan.
    std::vector<std::string> roots, named = {workspace};
    for (const std::vector<std::string>* list : {&pp.read, &std::as_const(granted_read)}) {
      for (const auto& r : *list) {
        named.push_back(r);
        // /usr is package-managed and world-readable by convention: walking its ~160k entries
        // costs ~0.7 s per session as root, for one root-only entry found on the test host (a
        // polkit rules directory). It is left out; `cordon doctor` scans it and lists what the
        // sandbox would show, and SECURITY.md says so.
        if (PathUnder(r, "/usr")) continue;
        if (f.paths.at(r).kind == PathKind::kDir) roots.push_back(r);
      }
    }
    named.insert(named.end(), pp.write.begin(), pp.write.end());
    f.root_only = host.root_only->Get(roots, named, pp.deny);
  }
  if (pp.workspace_in_write && req.workspace_writable) {
    const int rc = ::faccessat(AT_FDCWD, workspace.c_str(), W_OK, AT_EACCESS);
    const int err = rc != 0 ? errno : 0;
    // The user running cordon cannot write it, so nothing confined could: run read-only
    // rather than fail to start (a workspace owned by another user that root could write is
    // the plan's own error below).
    if (err == EROFS) {
      f.workspace_read_only = "the workspace is on a read-only mount";
    } else if (err == EACCES || err == EPERM) {
      f.workspace_read_only = "uid " + std::to_string(f.euid) + " cannot write the workspace (" +
                              std::string(std::strerror(err)) + ")";
    }
  }
  const bool writable =
      pp.workspace_in_write && req.workspace_writable && f.workspace_read_only.empty();
  if (writable && !req.staged) {
    auto scan =
        ScanProtectedPaths(WritableRoots(policy, workspace, f.home), GuardOptions::From(policy));
    if (scan) {
      f.protected_scan = std::move(*scan);
    } else {
      f.protected_error = scan.error();
    }
  }
  if (host.weaker) {
    // Landlock sees the host itself: the listings that leave the masked paths out.
    std::vector<std::string> hidden;
    for (const auto& d : pp.deny) {
      if (Masked(f.paths.at(d))) hidden.push_back(d);
    }
    for (const auto& own : f.own) {
      if (own.kind != PathKind::kMissing) hidden.push_back(own.path);
    }
    std::vector<std::string> roots = pp.read;
    roots.insert(roots.end(), granted_read.begin(), granted_read.end());
    if (!writable) roots.push_back(workspace);
    for (const auto& r : roots) f.paths_except[r] = PathsExcept(r, hidden);
    if (host.landlock_abi >= 1) {
      // No private /tmp without a mount namespace: a directory of this call's own.
      std::string dir = CordonRuntimeDir() + "/tmp-XXXXXX";
      if (::mkdtemp(dir.data()) == nullptr)
        return SysFail(Code::kSandboxUnavailable, "mkdtemp", dir);
      acquired->private_tmp = OwnedTempDir(dir);
      f.private_tmp = dir;
    }
  }
  if (host.cgroups.mode != CgroupMode::kNone && req.warm) {
    f.cgroup_error = "a warm call: the sandbox's cgroup, and rlimits for memory and pids";
  } else if (host.cgroups.mode != CgroupMode::kNone) {
    auto cg = CgroupJob::Create(host.cgroups, PlanLimits(policy, req));
    if (cg && *cg) {
      f.cgroup = host.cgroups.mode;
      acquired->cgroup.emplace(std::move(**cg));
    } else {
      // No cgroup after all: the plan falls back to rlimits for memory and pids, and says so.
      f.cgroup = CgroupMode::kNone;
      f.cgroup_error = cg ? "unsupported" : cg.error().message;
    }
  }
  acquired->kernel_audit = host.kernel_audit;
  return f;
}

}  // namespace cordon
