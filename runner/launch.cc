// Launching and supervising one confined process: host facts (the only host reads before the
// plan), the pure plan, and Start/Run (memfd spec, pipes, fork, cgroup join, execve, pidfd loop).
#include "runner/launch.h"

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
#include "runner/host_probe.h"

#ifndef CORDON_BUILD_SHIM
#define CORDON_BUILD_SHIM ""
#endif

namespace cordon {
namespace {

constexpr int kSpecFd = 3, kStatusFd = 4, kJsonStatusFd = 5, kEnvArgsFd = 6;

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

// cordon's private runtime directory (0700): $XDG_RUNTIME_DIR/cordon or /tmp/cordon-UID.
std::string RuntimeDir() {
  std::string dir;
  if (const char* r = std::getenv("XDG_RUNTIME_DIR"); r != nullptr && r[0] == '/') {
    dir = std::string(r) + "/cordon";
  } else {
    dir = "/tmp/cordon-" + std::to_string(::getuid());
  }
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

void KillSandboxNamespace(pid_t init, int sig) {
  struct stat ns {};
  if (init <= 0 || ::stat(("/proc/" + std::to_string(init) + "/ns/pid").c_str(), &ns) != 0) return;
  UniqueDir d = UniqueDir::Open("/proc");
  if (!d.valid()) return;
  while (dirent* e = d.Next()) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    struct stat st {};
    std::string p = std::string("/proc/") + e->d_name + "/ns/pid";
    if (::stat(p.c_str(), &st) == 0 && st.st_ino == ns.st_ino && st.st_dev == ns.st_dev) {
      ::kill(static_cast<pid_t>(std::atoi(e->d_name)), sig);
    }
  }
}

}  // namespace

Json SandboxHost::ToJson() const {
  return {{"bwrap", bwrap.empty() ? Json(nullptr) : Json(bwrap)},
          {"landlock_abi", landlock_abi},
          {"weaker", weaker},
          {"weaker_reason", weaker_reason},
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
  h.landlock_abi = LandlockAbi();
  h.cgroups = ProbeCgroups();
  // For tests, and for a person who wants to see the fallback: no per-call cgroup, as on a host
  // without a delegated one. Memory and pids then fall back to rlimits, the sized /tmp, the
  // IPC namespace's shm limits and the memfd refusal (SECURITY.md, issue 9).
  if (const char* off = std::getenv("CORDON_TEST_NO_CGROUP"); off != nullptr && off[0] == '1') {
    h.cgroups = {CgroupMode::kNone, "CORDON_TEST_NO_CGROUP=1 is set", ""};
  }
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
  std::vector<std::string> names;
  {
    UniqueDir d = UniqueDir::Open(root.c_str());
    if (!d.valid()) return {};
    while (dirent* e = d.Next()) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
  }
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

namespace {

// The policy's paths, expanded: one pure function for gathering and planning, so that every
// path the plan looks up was described.
struct PolicyPaths {
  std::vector<std::string> read;   // outside the workspace
  std::vector<std::string> write;  // outside the workspace
  std::vector<std::string> deny;
  bool workspace_in_write = false;
};

PolicyPaths ExpandPolicyPaths(const Policy& policy, const std::string& workspace,
                              const std::string& home) {
  PolicyPaths pp;
  for (const auto& w : policy.filesystem.write) {
    std::string p = ExpandPath(w, workspace, home);
    if (p == workspace) {
      pp.workspace_in_write = true;
    } else if (!Under(p, workspace)) {
      pp.write.push_back(std::move(p));
    }
  }
  for (const auto& r : policy.filesystem.read) {
    std::string p = ExpandPath(r, workspace, home);
    if (!Under(p, workspace)) pp.read.push_back(std::move(p));
  }
  for (const auto& d : policy.filesystem.deny) pp.deny.push_back(ExpandPath(d, workspace, home));
  return pp;
}

Limits PlanLimits(const Policy& policy, const ProcessRequest& req) {
  Limits limits = policy.LimitsFor(req.tool);
  if (req.no_timeout) limits.timeout_secs = 100ll * 365 * 24 * 3600;
  if (req.timeout_secs) {
    // An agent may only shorten the policy's timeout; the person running cordon may set any.
    limits.timeout_secs = req.timeout_from_user ? *req.timeout_secs
                                                : std::min(*req.timeout_secs, limits.timeout_secs);
  }
  return limits;
}

// Which policy key decided a tool's limit: its [tools.NAME] override, or [limits].
std::string LimitKey(const Policy& policy, const std::string& tool, const std::string& key) {
  if (auto it = policy.tools.find(tool);
      it != policy.tools.end() && it->second.limits.count(key) > 0) {
    return "tools." + tool + "." + key;
  }
  return "limits." + key;
}

std::optional<TimeoutDecision> PlanTimeout(const Policy& policy, const ProcessRequest& req,
                                           const Limits& applied) {
  if (!req.timeout_secs || req.no_timeout) return std::nullopt;
  TimeoutDecision d;
  d.requested = *req.timeout_secs;
  d.applied = applied.timeout_secs;
  d.capped = d.applied < d.requested;
  if (d.capped) {
    d.capped_by = LimitKey(policy, req.tool, "timeout_secs");
    auto it = policy.provenance.find(d.capped_by);
    d.decided_by = it == policy.provenance.end() ? "built-in default" : it->second;
  }
  return d;
}

bool Masked(const HostPath& hp) {
  return hp.kind != PathKind::kMissing && hp.kind != PathKind::kSymlink;
}

// The binds that show host paths in the sandbox, and those of them a command may write.
std::vector<std::string> Binds(const SessionLaunch& s, bool writable_only) {
  std::vector<std::string> out;
  if (!writable_only || s.workspace_writable) out.push_back(s.workspace);
  for (const auto& w : s.write) out.push_back(w.path);
  if (writable_only) return out;
  for (const auto& r : s.read) {
    if (r.kind != PathKind::kSymlink) out.push_back(r.path);
  }
  return out;
}

// cordon's own files and (as root) root-only files join the deny masks, after every bind, so
// that no read, write or --read grant shows them. An own file that does not exist is covered
// where a command could create it: cordon's own directories are made in GatherHostFacts, and
// anything else missing there refuses the launch (a mount point would appear on the host).
Status PlanMasks(const HostFacts& facts, SessionLaunch& s) {
  const std::vector<std::string> binds = Binds(s, false);
  const std::vector<std::string> writable = Binds(s, true);
  // A path at or below a directory masked already needs no mount of its own (nor could bwrap
  // make its mount point in that read-only tmpfs).
  auto already = [&](const std::string& p) {
    return std::any_of(s.deny.begin(), s.deny.end(), [&](const HostPath& d) {
      return d.path == p || (d.kind == PathKind::kDir && PathUnder(p, d.path));
    });
  };
  for (const auto& own : facts.own) {
    if (PathUnder(s.workspace, own.path)) {
      return Fail(Code::kDeniedByPolicy,
                  "the workspace " + s.workspace + " lies inside cordon's own files (" + own.path +
                      "), which no confined process may read or write; choose another workspace",
                  0, s.workspace);
    }
    const bool shown = std::any_of(binds.begin(), binds.end(), [&](const std::string& b) {
      return PathUnder(own.path, b) || PathUnder(b, own.path);
    });
    if (!shown || already(own.path)) continue;
    if (own.kind == PathKind::kMissing) {
      const std::string parent = own.path.substr(0, std::max<std::size_t>(1, own.path.rfind('/')));
      if (UnderAny(parent, writable) == nullptr) continue;  // nothing can create it
      // A protected name (~/.cordon, ~/.thndrs in a workspace at $HOME): the workspace guard
      // sweeps one a process creates, as any other.
      if (own.path.size() > s.workspace.size() && PathUnder(own.path, s.workspace) &&
          IsProtectedPath(own.path.substr(s.workspace == "/" ? 1 : s.workspace.size() + 1))) {
        continue;
      }
      // Could not be made (see GatherHostFacts), or a file an option names that does not exist
      // yet: a mount point would create it on the host. Refuse rather than leave it open.
      return Fail(Code::kSandboxUnavailable,
                  "cordon's own path " + own.path +
                      " does not exist and lies where a confined process could create it; "
                      "create it, or choose a workspace that does not contain it",
                  0, own.path);
    } else if (own.kind != PathKind::kSymlink) {
      s.deny.push_back(own);
    } else {
      continue;  // own paths are canonical: a symlink here is the missing path's own leaf
    }
    ++s.own_masked;
  }
  if (facts.root_only) {
    for (const auto& r : facts.root_only->masked) {
      if (already(r.path)) continue;
      s.deny.push_back(r);
      ++s.root_only_masked;
    }
  }
  return {};
}

// A masked path below a writable root could be moved aside with its parent and recreated: each
// directory between the root and the mask becomes a mount point, which cannot be renamed.
void PinMaskAncestors(SessionLaunch& s) {
  const std::vector<std::string> writable = Binds(s, true);
  for (const auto& d : s.deny) {
    const std::string* root = UnderAny(d.path, writable);
    if (root == nullptr || d.path == *root) continue;
    for (std::size_t pos = d.path.find('/', root->size() + 1); pos != std::string::npos;
         pos = d.path.find('/', pos + 1)) {
      std::string pin = d.path.substr(0, pos);
      if (std::find(s.pins.begin(), s.pins.end(), pin) == s.pins.end())
        s.pins.push_back(std::move(pin));
    }
  }
}

}  // namespace

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
  if (req.program_files) {
    // A server's own program, where the policy's reads and the workspace do not show it already.
    std::string path_env = "/usr/local/bin:/usr/bin:/bin";
    for (char** e = host_env; e != nullptr && *e != nullptr; ++e) {
      if (std::strncmp(*e, "PATH=", 5) == 0) path_env = *e + 5;
    }
    const std::string home = CanonicalPath(f.home);
    for (auto& g : ProgramFileGrants(req.argv, req.cwd.empty() ? workspace : req.cwd, path_env,
                                     home, CanonicalPath(workspace))) {
      if (Under(g.path, workspace) || UnderAny(g.path, pp.read) != nullptr) continue;
      f.program.push_back(std::move(g));
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
    f.root_only = host.root_only->Get(roots, named);
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
      std::string dir = RuntimeDir() + "/tmp-XXXXXX";
      if (::mkdtemp(dir.data()) == nullptr)
        return SysFail(Code::kSandboxUnavailable, "mkdtemp", dir);
      acquired->private_tmp = OwnedTempDir(dir);
      f.private_tmp = dir;
    }
  }
  if (host.cgroups.mode != CgroupMode::kNone) {
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

Result<LaunchPlan> BuildLaunchPlan(const Policy& policy, const HostFacts& facts,
                                   const ProcessRequest& req) {
  if (req.argv.empty() || req.argv[0].empty()) return Fail(Code::kInvalidInput, "argv is empty");
  const SandboxHost& host = facts.host;
  const std::string& workspace = facts.workspace;
  LaunchPlan plan;
  SessionLaunch& s = plan.session;
  CallLaunch& c = plan.call;
  c.limits = PlanLimits(policy, req);
  c.timeout = PlanTimeout(policy, req, c.limits);
  c.tool = req.tool;
  if (auto it = policy.tools.find(req.tool); it != policy.tools.end()) {
    for (const auto& [k, v] : it->second.limits) c.tool_limit_overrides.insert(k);
  }
  s.network = req.network.value_or(policy.NetworkFor(req.tool));
  s.bwrap = host.weaker ? std::string() : host.bwrap;
  s.shim = host.shim;
  if (host.weaker) s.weaker_reason = host.weaker_reason;
  s.landlock_abi = host.landlock_abi;
  s.workspace = workspace;
  c.cwd = req.cwd.empty() ? workspace : req.cwd;
  c.env = facts.env;
  // Each preset's cache variables point at cordon's cache for it, over what was passed from the
  // caller (which names the host's own caches), under what the policy's [env] set or the request
  // (--env, a server's env) names explicitly: the person's own choice wins.
  for (const PresetCache& cache : req.preset_caches) {
    for (const auto& [k, v] : cache.env) {
      if (!policy.env.set.contains(k)) SetEnv(c.env, k, v);
    }
  }
  for (const auto& [k, v] : req.extra_env) SetEnv(c.env, k, v);
  if (s.network == NetworkMode::kProxy) {
    // The proxy is reached through the listener the shim opens in the sandbox's own network
    // namespace: without bwrap there is no such namespace, and nothing to keep the rest out.
    if (host.weaker) {
      return Fail(Code::kSandboxUnavailable,
                  "network mode proxy needs bwrap's network namespace, which the weaker mode "
                  "lacks (" +
                      host.weaker_reason + "); use --network none, or install bwrap");
    }
    s.egress = EgressFor(policy, req.tool, req.egress_extra);
    s.preset_caches = req.preset_caches;
    // Set last: a variable the caller passed cannot point the sandbox's clients elsewhere.
    for (const auto& [k, v] : ProxyEnvironment()) SetEnv(c.env, k, v);
    c.contain.proxy_port = kSandboxProxyPort;
  }
  c.inherit_stdio = req.inherit_stdio;
  c.pipe_stdin = req.pipe_stdin;
  c.max_output_bytes = req.max_output_bytes;
  auto described = [&](const std::string& p) {
    auto it = facts.paths.find(p);
    return it != facts.paths.end() ? it->second : HostPath{p, PathKind::kMissing, {}};
  };
  const PolicyPaths pp = ExpandPolicyPaths(policy, workspace, facts.home);
  for (const auto& w : pp.write) {
    HostPath hp = described(w);
    if (hp.kind != PathKind::kMissing) s.write.push_back(hp);
  }
  s.workspace_writable =
      pp.workspace_in_write && req.workspace_writable && facts.workspace_read_only.empty();
  const bool asked_writable = pp.workspace_in_write && req.workspace_writable;
  if (asked_writable) s.workspace_read_only = facts.workspace_read_only;
  // `/` or $HOME asked for writable is refused even where the user could not write it and the
  // call would fall back to read-only: the refusal does not depend on the host's permissions.
  if (asked_writable && facts.dangerous_workspace && !policy.allow_dangerous_workspace) {
    return std::unexpected(DangerousWorkspaceError(workspace, *facts.dangerous_workspace));
  }
  if (s.workspace_writable && !host.weaker && facts.workspace_stat) {
    // Inside bwrap's user namespace only cordon's own uid is mapped. A workspace owned by
    // another user is then not writable for the command, whatever root could do outside, and
    // bwrap could not bind it writable for the command: say so instead of failing halfway.
    const auto [owner, mode] = *facts.workspace_stat;
    if (owner != facts.euid && (mode & S_IWOTH) == 0) {
      return Fail(Code::kSandboxUnavailable,
                  "the workspace " + workspace + " belongs to uid " + std::to_string(owner) +
                      ", not to uid " + std::to_string(facts.euid) +
                      " that runs cordon: inside the sandbox's user namespace only " + "uid " +
                      std::to_string(facts.euid) +
                      " is mapped, so the command could not write there. " +
                      "Run cordon as its owner (e.g. runuser -u OWNER -- cordon ...) or chown the "
                      "workspace",
                  0, workspace);
    }
  }
  for (const auto& r : pp.read) {
    HostPath hp = described(r);
    if (hp.kind != PathKind::kMissing) s.read.push_back(hp);
  }
  // Grants inside the workspace add nothing: the workspace's own rules (writable or not, its
  // protected paths) decide there.
  for (const auto* list : {&req.grants, &facts.program}) {
    for (const auto& g : *list) {
      HostPath hp = described(g.path);
      if (hp.kind == PathKind::kMissing || Under(g.path, workspace)) continue;
      (g.write ? s.write : s.read).push_back(hp);
      s.grants.push_back(g);
    }
  }
  for (const auto& d : pp.deny) {
    HostPath hp = described(d);
    if (Masked(hp)) s.deny.push_back(hp);
  }
  TRY(PlanMasks(facts, s));
  // The command is found on the caller's PATH as far as the sandbox can see it, unless the
  // policy or the request set PATH itself.
  const bool path_set = policy.env.set.contains("PATH") ||
                        std::any_of(req.extra_env.begin(), req.extra_env.end(),
                                    [](const auto& kv) { return kv.first == "PATH"; });
  if (!path_set && !facts.caller_path.empty()) {
    std::vector<std::string> visible = {workspace}, hidden;
    for (const auto* list : {&s.read, &s.write}) {
      for (const auto& hp : *list) visible.push_back(hp.path);
    }
    for (const auto& hp : s.deny) hidden.push_back(hp.path);
    const std::string path = SandboxPath(facts.caller_path, visible, hidden);
    if (!path.empty()) SetEnv(c.env, "PATH", path);
  }
  if (s.workspace_writable && !facts.staged.empty()) {
    // Staged (docs/adr/0006-staged-workspace.md): the sandbox writes only overlays' upper
    // layers, and the commit decides what reaches the host. No read-only binds, pins or git
    // views: nothing the process does there is seen by the host before the rules are applied.
    s.staged = facts.staged;
  } else if (s.workspace_writable) {
    if (facts.protected_error) return std::unexpected(*facts.protected_error);
    if (!facts.protected_scan) {
      return Fail(Code::kInternal, "the protected paths of " + workspace + " were not scanned");
    }
    s.protect = facts.protected_scan->protect;
    s.pins = facts.protected_scan->pins;
    s.git_dirs = facts.protected_scan->git_dirs;
    s.git_views = facts.git_views;
    for (auto& pin : GitViewPins(workspace, s.git_views)) {
      if (std::find(s.pins.begin(), s.pins.end(), pin) == s.pins.end()) s.pins.push_back(pin);
    }
    // Shallow first: a pin is bound before the pins below it.
    std::stable_sort(s.pins.begin(), s.pins.end(), [](const std::string& a, const std::string& b) {
      return std::count(a.begin(), a.end(), '/') < std::count(b.begin(), b.end(), '/');
    });
  }
  PinMaskAncestors(s);
  LandlockInput ll;
  for (const auto& r : s.read) ll.read.push_back(r.path);
  // Listing "/" is harmless: bwrap's root holds only the binds above.
  ll.list_only.push_back("/");
  ll.read.push_back("/proc");
  ll.read.push_back("/run/cordon");
  ll.devices.push_back("/dev");
  ll.write.push_back("/tmp");
  (s.workspace_writable ? ll.write : ll.read).push_back(workspace);
  for (const auto& w : s.write) ll.write.push_back(w.path);
  ll.network = s.network;
  c.contain.landlock = BuildLandlockRules(ll, host.landlock_abi);
  if (host.landlock_abi < 1) c.contain.landlock.reset();
  if (host.weaker) {
    // Without namespaces and mounts Landlock is the only wall, and it sees the host itself: the
    // paths bwrap would mask (the policy's deny list) are left out of the read rules, and the
    // host's /tmp, /proc, /dev and / are not granted (a private temporary directory and a few
    // device files are).
    auto except = [&](const std::string& root) {
      auto it = facts.paths_except.find(root);
      return it != facts.paths_except.end() ? it->second : std::vector<std::string>{};
    };
    LandlockInput w;
    for (const auto& r : s.read) {
      for (auto& p : except(r.path)) w.read.push_back(std::move(p));
    }
    for (const char* dev :
         {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}) {
      w.devices.push_back(dev);
    }
    if (s.workspace_writable) {
      w.write.push_back(workspace);
    } else {
      for (auto& p : except(workspace)) w.read.push_back(std::move(p));
    }
    for (const auto& wr : s.write) w.write.push_back(wr.path);
    w.network = s.network;
    c.contain.landlock = BuildLandlockRules(w, host.landlock_abi);
    if (!facts.private_tmp.empty()) {
      c.private_tmp = facts.private_tmp;
      c.contain.landlock->paths.push_back(
          {c.private_tmp, landlock::FsAccessForAbi(c.contain.landlock->abi)});
      for (auto& [k, v] : c.env) {
        if (k == "TMPDIR" || k == "HOME") v = c.private_tmp;
      }
    }
  }
  const bool cgroup = facts.cgroup != CgroupMode::kNone;
  c.contain.seccomp =
      BuildSeccompRules(policy.seccomp_deny, s.network,
                        SeccompMemory{.cgroup = cgroup, .own_ipc_namespace = !host.weaker});
  // bwrap gives the sandbox its own IPC namespace: its SysV shm limits are the memory limit.
  if (!host.weaker) c.contain.ipc_shm_bytes = static_cast<std::uint64_t>(c.limits.memory_bytes);
  if (host.weaker) {
    // No pid namespace to end: the command's process group is what the shim kills at the end,
    // so nothing it starts may leave that group.
    c.contain.seccomp.push_back(
        {"setsid", EPERM, {}, "weaker mode: stay in the process group the shim ends"});
    c.contain.seccomp.push_back(
        {"setpgid", EPERM, {}, "weaker mode: stay in the process group the shim ends"});
  }
  c.cgroup = facts.cgroup;
  c.cgroup_error = facts.cgroup_error;
  c.contain.rlimits = BuildRlimits(c.limits, cgroup, cgroup);
  c.contain.argv = req.argv;
  c.contain.cwd = c.cwd;
  return plan;
}

std::vector<std::string> LaunchArgv(const LaunchPlan& plan) {
  const SessionLaunch& s = plan.session;
  if (s.weaker()) {
    return {s.shim, "--spec-fd", std::to_string(kSpecFd), "--status-fd", std::to_string(kStatusFd)};
  }
  SandboxLayout l;
  l.bwrap = s.bwrap;
  l.workspace = s.workspace;
  l.workspace_writable = s.workspace_writable;
  l.read = s.read;
  l.write = s.write;
  l.deny = s.deny;
  l.protect = s.protect;
  l.pins = s.pins;
  l.git_views = s.git_views;
  l.network = s.network;
  l.tmp_size_bytes = plan.call.limits.memory_bytes;
  l.shim = s.shim;
  l.cwd = plan.call.cwd;
  l.env = plan.call.env;
  l.spec_fd = kSpecFd;
  l.status_fd = kStatusFd;
  l.json_status_fd = kJsonStatusFd;
  l.env_args_fd = kEnvArgsFd;
  return BuildBwrapArgv(l);
}

std::string LaunchEnvArgs(const LaunchPlan& plan) {
  if (plan.session.weaker()) return {};
  SandboxLayout l;
  l.env = plan.call.env;
  return BwrapEnvArgs(l);
}

std::vector<std::string> LaunchEnv(const LaunchPlan& plan) {
  // bwrap gets a bare PATH and sets the command's environment itself (--clearenv, then the
  // --setenv pairs it reads from its --args fd).
  if (!plan.session.weaker()) return {"PATH=/usr/bin:/bin"};
  std::vector<std::string> env;
  for (const auto& [k, v] : plan.call.env) env.push_back(k + "=" + v);
  return env;
}

std::string LaunchSpec(const LaunchPlan& plan) { return ContainSpecJson(plan.call.contain).dump(); }

Json ConfinementJson(const LaunchPlan& plan) {
  const SessionLaunch& s = plan.session;
  const CallLaunch& c = plan.call;
  const bool weaker = s.weaker();
  Json ns = weaker ? Json::array() : Json{"user", "mount", "pid", "ipc", "uts", "cgroup"};
  if (!weaker && s.network != NetworkMode::kAllow) ns.push_back("net");
  Json j = {{"mode", weaker ? "weaker: landlock+seccomp only" : "bwrap"},
            {"namespaces", ns},
            {"network", NetworkModeName(s.network)},
            {"landlock_abi", c.contain.landlock ? s.landlock_abi : 0},
            {"seccomp_rules", c.contain.seccomp.size()},
            {"no_new_privs", true},
            {"capabilities", "none"},
            {"cgroup", std::string(Name(kCgroupModeNames, c.cgroup))},
            {"rlimits", RlimitsJson(c.contain.rlimits)},
            {"workspace", s.workspace_writable ? "read-write" : "read-only"},
            {"workspace_mode", !s.workspace_writable ? "read-only"
                               : s.staged.empty()    ? "direct"
                                                     : "staged"},
            {"protected_paths", s.protect.size()},
            {"git_views", s.git_views.size()},
            {"masked_own_files", s.own_masked},
            {"masked_root_only", s.root_only_masked}};
  if (weaker) j["weaker_reason"] = s.weaker_reason;
  if (!s.workspace_read_only.empty()) j["workspace_read_only_reason"] = s.workspace_read_only;
  if (!c.cgroup_error.empty()) j["cgroup_error"] = c.cgroup_error;
  if (!s.grants.empty()) {
    // What was shown beyond the policy, and why: --read/--write, a server's sandbox keys, or
    // the server's own program files.
    Json grants = Json::array();
    for (const auto& g : s.grants) {
      grants.push_back(
          {{"path", g.path}, {"access", g.write ? "write" : "read"}, {"from", g.from}});
    }
    j["grants"] = std::move(grants);
  }
  if (s.egress) {
    j["egress"] = EgressPolicyJson(*s.egress);
    Json caches = Json::array();
    for (const PresetCache& cache : s.preset_caches) {
      Json one = {{"preset", cache.preset}, {"path", cache.path}, {"exists", cache.exists}};
      if (cache.unavailable.empty()) {
        Json variables = Json::object();
        for (const auto& [k, v] : cache.env) variables[k] = v;
        one["variables"] = std::move(variables);
      } else {
        one["unavailable"] = cache.unavailable;
      }
      caches.push_back(std::move(one));
    }
    j["egress"]["caches"] = std::move(caches);
  }
  return j;
}

Json TimeoutDecision::ToJson() const {
  Json j = {{"requested", requested}, {"applied", applied}, {"capped", capped}};
  if (capped) {
    j["capped_by"] = capped_by;
    j["decided_by"] = decided_by;
  }
  return j;
}

namespace {
std::vector<std::string> SplitNul(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start < s.size();) {
    const std::size_t end = s.find('\0', start);
    out.push_back(s.substr(start, end - start));
    start = end == std::string::npos ? s.size() : end + 1;
  }
  return out;
}

// The --args fd's words as --plan prints them: the value of a secret-looking name (a wrapped
// server's GITHUB_TOKEN from its client, an --env API_KEY=...) is not shown; a plan is pasted
// into issues and CI logs, and the values are what the redactor keeps out of every record.
std::vector<std::string> PlanEnvArgs(const LaunchPlan& plan) {
  std::vector<std::string> words = SplitNul(LaunchEnvArgs(plan));
  for (std::size_t i = 0; i + 2 < words.size(); ++i) {
    if (words[i] == "--setenv" && Redactor::IsSecretName(words[i + 1])) {
      words[i + 2] = "(value not shown)";
      i += 2;
    }
  }
  return words;
}
}  // namespace

Json PlanJson(const LaunchPlan& plan) {
  const std::vector<std::string> argv = LaunchArgv(plan);
  Json j = {{"bwrap", plan.session.weaker() ? Json(nullptr) : Json(argv)},
            {"exec", {{"argv", argv}, {"env", LaunchEnv(plan)}}},
            // What bwrap reads from its --args fd (the command's environment), NUL-separated.
            {"bwrap_args_fd", PlanEnvArgs(plan)},
            {"spec_sha256", Sha256Hex(LaunchSpec(plan))},
            {"contain", ContainSpecJson(plan.call.contain)},
            {"confinement", ConfinementJson(plan)},
            {"git_dirs", plan.session.git_dirs},
            {"git_views", GitViewsJson(plan.session.git_views)}};
  if (!plan.session.staged.empty()) {
    Json staged = Json::array();
    for (const auto& r : plan.session.staged) {
      staged.push_back({{"root", r.root},
                        {"upper", r.upper},
                        {"work", r.work},
                        {"mount", "overlay " + OverlayOptions(r)}});
    }
    j["staged"] = std::move(staged);
  }
  return j;
}

Result<std::unique_ptr<ConfinedProcess>> ConfinedProcess::Start(const LaunchPlan& plan,
                                                                LaunchResources resources,
                                                                const ProcessRequest& req) {
  const CallLaunch& call = plan.call;
  auto proc = std::unique_ptr<ConfinedProcess>(new ConfinedProcess(call.max_output_bytes));
  proc->req_ = req;
  proc->workspace_ = plan.session.workspace;
  proc->confinement_ = ConfinementJson(plan);
  proc->env_names_ = PassedEnvNames(call.env);
  proc->timeout_ms_ = call.limits.timeout_secs * 1000;
  proc->timeout_ = call.timeout;
  LimitFacts& lf = proc->limit_facts_;
  lf.limits = call.limits;
  lf.tool = call.tool;
  lf.tool_overrides = call.tool_limit_overrides;
  if (req.timeout_secs && !(call.timeout && call.timeout->capped)) {
    lf.timeout_from = req.timeout_from_user ? "--timeout" : "the call's timeout_secs";
  }
  lf.memory_by_cgroup = lf.pids_by_cgroup = call.cgroup != CgroupMode::kNone;
  proc->private_tmp_ = std::move(resources.private_tmp);
  proc->kernel_audit_ = std::move(resources.kernel_audit);
  if (resources.cgroup) proc->cgroup_.emplace(std::move(*resources.cgroup));
  const bool weaker = plan.session.weaker();
  const std::string spec = LaunchSpec(plan);
  UniqueFd spec_fd(::memfd_create("cordon-spec", MFD_CLOEXEC));
  if (!spec_fd.valid() ||
      ::write(spec_fd.get(), spec.data(), spec.size()) != static_cast<ssize_t>(spec.size()) ||
      ::lseek(spec_fd.get(), 0, SEEK_SET) != 0) {
    return SysFail(Code::kSandboxUnavailable, "memfd spec", "");
  }
  // The command's environment goes to bwrap through a memfd (--args), never its argv.
  const std::string env_args = LaunchEnvArgs(plan);
  UniqueFd env_fd(::memfd_create("cordon-env", MFD_CLOEXEC));
  if (!env_fd.valid() ||
      ::write(env_fd.get(), env_args.data(), env_args.size()) !=
          static_cast<ssize_t>(env_args.size()) ||
      ::lseek(env_fd.get(), 0, SEEK_SET) != 0) {
    return SysFail(Code::kSandboxUnavailable, "memfd env", "");
  }
  // Each end is owned as soon as it exists: a failing pipe2 leaks none of the earlier ones.
  Pipe out = MakePipe(), err = MakePipe(), js = MakePipe(), in = MakePipe();
  for (const Pipe* p : {&out, &err, &js, &in}) {
    if (!p->valid()) return SysFail(Code::kSandboxUnavailable, "pipe2", "");
  }
  // The shim's status channel is a Unix socket that passes credentials: the kernel stamps each
  // write with the writer's pid as cordon sees it, across the sandbox's pid namespace. The
  // shim's child writes one line before it enforces Landlock, which tells cordon the pid the
  // kernel's Landlock audit records name (runner/kernel_audit.h).
  Pipe st;
  {
    int sv[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      return SysFail(Code::kSandboxUnavailable, "socketpair", "");
    st = {UniqueFd(sv[0]), UniqueFd(sv[1])};
    const int on = 1;
    if (::setsockopt(st.read.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
      return SysFail(Code::kSandboxUnavailable, "setsockopt(SO_PASSCRED)", "");
  }
  UniqueFd devnull_fd;
  if (!call.inherit_stdio && !call.pipe_stdin) {
    devnull_fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull_fd.valid()) return SysFail(Code::kSandboxUnavailable, "open", "/dev/null");
  }
  std::vector<std::string> argv = LaunchArgv(plan);
  std::vector<std::string> env_strings = LaunchEnv(plan);
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env_strings) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::vector<std::string> procs =
      proc->cgroup_ ? proc->cgroup_->procs_files() : std::vector<std::string>{};
  const std::string cwd = call.cwd;
  const bool inherit = call.inherit_stdio;
  const int stdin_src = inherit ? 0 : call.pipe_stdin ? in.read.get() : devnull_fd.get();
  proc->started_ms_ = NowMs();
  const pid_t parent = ::getpid();
  // Staged mode: the child mounts the overlays in its own mount namespace before it execs bwrap
  // (docs/adr/0006-staged-workspace.md), so no capability ever reaches the sandbox.
  const StageMountPlan stage_mounts =
      weaker ? StageMountPlan{} : PrepareStageMounts(plan.session.staged, ::geteuid(), ::getegid());
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
    // exec keeps the caller's terminal session (bwrap --new-session still isolates the
    // command), but in a process group of its own: Ctrl-C or a CI runner's signal to cordon's
    // group reaches cordon, which ends the sandbox and writes the records, instead of killing
    // bwrap under it.
    if (!inherit) {
      ::setsid();
    } else {
      ::setpgid(0, 0);
    }
    int hi[7] = {::fcntl(stdin_src, F_DUPFD_CLOEXEC, 64),
                 ::fcntl(inherit ? 1 : out.write.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(inherit ? 2 : err.write.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(spec_fd.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(st.write.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(js.write.get(), F_DUPFD_CLOEXEC, 64),
                 ::fcntl(env_fd.get(), F_DUPFD_CLOEXEC, 64)};
    const int fixed = weaker ? 6 : 7;  // the shim, exec'd directly, needs no --args fd
    for (int i = 0; i < fixed; ++i) {
      if (hi[i] < 0 || ::dup2(hi[i], i) < 0) _exit(126);
    }
    ::syscall(SYS_close_range, static_cast<unsigned>(fixed), ~0U, 0);
    if (!stage_mounts.empty()) {
      const char* step = "";
      if (const int e = MountStagesInChild(stage_mounts, &step); e != 0) {
        // On the command's stderr (the result shows it), with the errno's name; then the
        // sandbox never starts and the call fails closed.
        const char* name = ::strerrorname_np(e);
        (void)!::write(2, "cordon: staging the workspace failed: ", 38);
        (void)!::write(2, step, std::strlen(step));
        (void)!::write(2, ": ", 2);
        if (name != nullptr) (void)!::write(2, name, std::strlen(name));
        (void)!::write(2, "\n", 1);
        _exit(125);
      }
    }
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
  proc->out_fd_ = std::move(out.read);
  proc->err_fd_ = std::move(err.read);
  proc->status_fd_ = std::move(st.read);
  proc->json_fd_ = std::move(js.read);
  if (call.pipe_stdin) proc->in_fd_ = std::move(in.write);
  for (int fd :
       {proc->out_fd_.get(), proc->err_fd_.get(), proc->status_fd_.get(), proc->json_fd_.get()}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return proc;
}

ConfinedProcess::~ConfinedProcess() {
  if (!done_ && pid_ > 0) {
    Terminate(SIGTERM);
    ::waitpid(pid_, nullptr, 0);
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

void ConfinedProcess::Terminate(int sig) {
  if (sandbox_init_ > 0) {
    KillSandboxNamespace(sandbox_init_, sig);
  } else if (pid_ > 0) {
    ::kill(-pid_, sig);
  }
  // Grace period, then the whole sandbox goes: SIGKILL to the namespace's init takes every
  // process in it with it.
  const double until = NowMs() + req_.stop_grace_ms;
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

void ConfinedProcess::Run(const std::atomic<bool>* cancel, RunHooks* hooks) {
  bool extra_open = hooks != nullptr && hooks->extra_fd >= 0;
  char buf[65536];
  bool exited = false, out_open = !req_.inherit_stdio, err_open = !req_.inherit_stdio;
  int wstatus = 0;
  double drain_until = 0;
  std::optional<ProcessStatus> reason;  // timeout or cancelled, decided here
  std::optional<int> stop_signal;       // the termination signal cordon received, if any
  while (true) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({out_fd_.get(), POLLIN, 0});
    if (err_open) fds.push_back({err_fd_.get(), POLLIN, 0});
    if (status_fd_.valid()) fds.push_back({status_fd_.get(), POLLIN, 0});
    if (json_fd_.valid()) fds.push_back({json_fd_.get(), POLLIN, 0});
    if (!exited) fds.push_back({pidfd_.get(), POLLIN, 0});
    if (extra_open && !exited) fds.push_back({hooks->extra_fd, POLLIN, 0});
    if (exited && ((!out_open && !err_open) || NowMs() > drain_until)) {
      // The shim's child (its "confining" line) and the shim (its report) write separately, so
      // the poll that saw the exit may have read only the first: what the socket still holds is
      // read now. The sandbox is gone, so nothing writes any more and this ends.
      for (int reads = 0; reads < 64 && status_fd_.valid(); ++reads) {
        pollfd p{status_fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) break;
        OnStatusData(status_fd_.get());
      }
      break;
    }
    double now = NowMs();
    if (!exited && !reason) {
      // A termination signal to cordon ends every sandbox it runs: the command gets that very
      // signal (as it would have in the terminal), then SIGKILL after the grace period.
      const int stop = TerminationSignal();
      if ((cancel != nullptr && cancel->load()) || stop != 0) reason = ProcessStatus::kCancelled;
      if (!reason && now - started_ms_ > static_cast<double>(timeout_ms_))
        reason = ProcessStatus::kTimeout;
      if (reason) {
        if (stop != 0) stop_signal = stop;
        Terminate(stop != 0 ? stop : SIGTERM);
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
      if (p.fd == status_fd_.get()) {
        OnStatusData(p.fd);
        continue;
      }
      ssize_t n = ::read(p.fd, buf, sizeof buf);
      if (n > 0 && p.fd == out_fd_.get() && hooks != nullptr && hooks->on_stdout) {
        {
          // The process record's stdout_bytes counts what went to the hook too.
          std::lock_guard<std::mutex> lock(mu_);
          out_.CountPassedOn(static_cast<std::size_t>(n));
        }
        // Outside mu_: the hook may take its own locks and call back into this process.
        hooks->on_stdout({buf, static_cast<std::size_t>(n)});
      } else if (n > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        if (p.fd == out_fd_.get())
          out_.Append({buf, static_cast<std::size_t>(n)});
        else if (p.fd == err_fd_.get())
          err_.Append({buf, static_cast<std::size_t>(n)});
        else if (p.fd == json_fd_.get()) {
          OnJsonStatus({buf, static_cast<std::size_t>(n)});
        }
      } else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        if (p.fd == out_fd_.get())
          out_open = false;
        else if (p.fd == err_fd_.get())
          err_open = false;
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
  if (status.is_object() && status.contains("spec_sha256") && status["spec_sha256"].is_string()) {
    o.spec_sha256 = status["spec_sha256"].get<std::string>();
  }
  if (status.is_object() && status.contains("error")) {
    o.status = ProcessStatus::kFailed;
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
      o.status = ProcessStatus::kExited;
      o.exit_code = status["exit_code"].get<int>();
    } else if (status.contains("signal")) {
      o.status = ProcessStatus::kSignaled;
      o.signal = status["signal"].get<int>();
    }
    o.cpu_ms = status.value("cpu_ms", 0.0);
    o.max_rss_kb = status.value("max_rss_kb", 0);
    limit_facts_.command_cpu_ms = status.value("command_cpu_ms", -1.0);
    limit_facts_.command_max_rss_kb = status.value("command_max_rss_kb", std::int64_t{-1});
  } else if (!reason) {
    o.status = ProcessStatus::kFailed;
    std::string e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // bwrap's stderr can echo what it was given: the excerpt never ends inside a secret.
      e = Excerpt(err_.Text(), 500, redactor_);
    }
    o.error = Error{Code::kSandboxUnavailable,
                    "the sandbox did not start (bwrap exit " +
                        std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) + "): " + e,
                    0,
                    {}};
  }
  if (reason) o.status = *reason;
  {
    // The sandbox ran without its proxy: what its clients saw (refused connections) is this.
    std::lock_guard<std::mutex> lock(mu_);
    if (egress_error_ && !o.error) o.error = egress_error_;
  }
  o.stop_signal = stop_signal;
  if (cgroup_) {
    o.cgroup = cgroup_->Stats();
    const CgroupEvents ev = cgroup_->Events();
    limit_facts_.oom_kills = ev.oom_kills;
    limit_facts_.pids_refusals = ev.pids_max;
  }
  if (!o.error) {
    limit_facts_.timed_out = o.status == ProcessStatus::kTimeout;
    limit_facts_.signal = o.signal;
    limit_facts_.exit_code = o.exit_code;
    o.limit = LimitThatEnded(limit_facts_);
  }
  // What Landlock refused it, once the kernel has delivered it (bounded wait; see kernel_audit).
  if (kernel_audit_ && confined_pid_ > 0) o.denials = kernel_audit_->Collect(confined_pid_);
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

Json OutputCounts::ToJson() const {
  return {{"stdout_bytes", stdout_bytes},
          {"stderr_bytes", stderr_bytes},
          {"stdout_dropped_bytes", stdout_dropped_bytes},
          {"stderr_dropped_bytes", stderr_dropped_bytes},
          {"truncated", truncated}};
}

OutputCounts ConfinedProcess::Counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {out_.total(), err_.total(), out_.dropped(), err_.dropped(),
          out_.truncated() || err_.truncated()};
}

void ConfinedProcess::OnStatusData(int fd) {
  char data[65536];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(4 * sizeof(int))];
  iovec iov{data, sizeof data};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    status_fd_.Reset();
    return;
  }
  std::string_view got(data, static_cast<std::size_t>(n));
  // Descriptors are owned at once, whatever comes of them; only the proxy listener the shim
  // sends (its own line, its own write) is kept, and only when this process has a binding.
  std::vector<UniqueFd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int passed = -1;
      std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
      fds.emplace_back(passed);
    }
  }
  if (got.rfind(kProxyListenerLine, 0) == 0) {
    got.remove_prefix(kProxyListenerLine.size());
    if (fds.size() == 1 && req_.egress) {
      if (auto bound = req_.egress->Bind(std::move(fds[0])); !bound) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!egress_error_) egress_error_ = bound.error();
      }
    }
  }
  // The first line the shim's child writes, before Landlock: its pid, from the kernel (a stream
  // socket with SO_PASSCRED never merges writes of different processes into one read).
  if (confined_pid_ == 0 && got.rfind(kConfiningLine, 0) == 0) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred{};
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        confined_pid_ = cred.pid;
      }
    }
    if (confined_pid_ > 0 && kernel_audit_) kernel_audit_->Watch(confined_pid_);
    got.remove_prefix(kConfiningLine.size());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (status_buf_.size() < 65536) status_buf_.append(got);
}

void ConfinedProcess::OnJsonStatus(std::string_view data) {
  // bwrap writes one JSON object per line; only its first "child-pid" report counts.
  constexpr std::size_t kMaxLine = 4096;
  json_buf_.append(data);
  for (std::size_t nl = json_buf_.find('\n'); nl != std::string::npos; nl = json_buf_.find('\n')) {
    const std::string line = json_buf_.substr(0, nl);
    json_buf_.erase(0, nl + 1);
    if (sandbox_init_ >= 0) continue;
    auto j = ParseJsonBounded(line, ParseLimits{kMaxLine, 4});
    if (!j || !j->is_object() || !j->contains("child-pid") ||
        !(*j)["child-pid"].is_number_integer()) {
      continue;
    }
    const auto cand = (*j)["child-pid"].get<std::int64_t>();
    // Only a direct child of bwrap counts: nothing written later can point the kill at a
    // process outside this sandbox.
    sandbox_init_ = 0;
    if (cand <= 1 || cand > std::numeric_limits<pid_t>::max()) continue;
    std::ifstream ps("/proc/" + std::to_string(cand) + "/status");
    for (std::string l; std::getline(ps, l);) {
      if (l.rfind("PPid:", 0) == 0) {
        if (std::atol(l.c_str() + 5) == pid_) sandbox_init_ = static_cast<pid_t>(cand);
        break;
      }
    }
  }
  if (json_buf_.size() > kMaxLine) json_buf_.clear();  // no line that long is bwrap's
}

Json ConfinedProcess::OutputJson() const {
  Json j = Counts().ToJson();
  std::lock_guard<std::mutex> lock(mu_);
  j["stdout"] = out_.Text();
  j["stderr"] = err_.Text();
  return j;
}

std::string ConfinedProcess::Tail(std::size_t max_chars) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Each stream's tail already starts past any secret; the joined text's cut does too.
  return JoinTails(out_.Tail(max_chars), err_.Tail(max_chars), max_chars * 4, redactor_);
}

}  // namespace cordon
