// Launch step 2 (docs/adr/0002-launch-plan.md): policy + host facts + request -> a frozen plan,
// with no system call; and the plan as bwrap argv, shim spec and JSON (`exec --plan`).
#include "runner/plan.h"

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
#include "runner/launch_internal.h"
#include "runner/rename_supervisor.h"
#include "runner/shim/serve.h"
#include "runner/warm.h"

namespace cordon {
namespace launch_detail {

bool Under(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

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

bool Masked(const HostPath& hp) {
  return hp.kind != PathKind::kMissing && hp.kind != PathKind::kSymlink;
}

}  // namespace launch_detail

using namespace launch_detail;

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
    // A scan that could not finish (a tree deeper than it walks, descriptors exhausted) would
    // leave root-only files below that point readable by the sandbox's uid 0: fail closed.
    if (facts.root_only->incomplete) {
      Error e = *facts.root_only->incomplete;
      e.code = Code::kSandboxUnavailable;
      e.message =
          "cordon runs as root and looks for the files only root may read, to mask them; "
          "the search could not finish: " +
          e.message + ". Deny that directory ([filesystem] deny) or remove it";
      return std::unexpected(std::move(e));
    }
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
  s.mode = host.weaker ? SandboxMode::kLandlockOnly : host.mode;
  s.losses = host.losses;
  if (s.mode != SandboxMode::kBwrap) s.weaker_reason = host.weaker_reason;
  s.landlock_abi = host.landlock_abi;
  s.workspace = workspace;
  c.cwd = req.cwd.empty() ? workspace : req.cwd;
  c.env = facts.env;
  for (const auto& [k, v] : facts.git_identity) {
    if (std::none_of(c.env.begin(), c.env.end(), [&](const auto& e) { return e.first == k; }))
      SetEnv(c.env, k, v);
  }
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
  // A deny entry at or below a denied directory (~/.aws/credentials beside ~/.aws) needs no mask
  // of its own, and could not have one: bwrap cannot make its mount point in the read-only tmpfs
  // that masks the directory, and every launch would fail.
  std::vector<HostPath> outer;
  for (const auto& hp : s.deny) {
    const bool covered = std::any_of(s.deny.begin(), s.deny.end(), [&](const HostPath& d) {
      return d.kind == PathKind::kDir && d.path != hp.path && PathUnder(hp.path, d.path);
    });
    const bool twice = std::any_of(outer.begin(), outer.end(),
                                   [&](const HostPath& o) { return o.path == hp.path; });
    if (!covered && !twice) outer.push_back(hp);
  }
  s.deny = std::move(outer);
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
  const bool shm_limits = !host.weaker && !host.host_proc;
  c.contain.seccomp =
      BuildSeccompRules(policy.seccomp_deny, s.network,
                        SeccompMemory{.cgroup = cgroup, .own_ipc_namespace = shm_limits});
  // bwrap gives the sandbox its own IPC namespace: its SysV shm limits are the memory limit. With
  // the host's /proc (read-only) the shim cannot set them there, so shm is refused as without
  // bwrap.
  if (shm_limits) c.contain.ipc_shm_bytes = static_cast<std::uint64_t>(c.limits.memory_bytes);
  if (host.weaker) {
    // No pid namespace to end: the command's process group is what the shim kills at the end,
    // so nothing it starts may leave that group.
    c.contain.seccomp.push_back(
        {"setsid", EPERM, {}, "weaker mode: stay in the process group the shim ends"});
    c.contain.seccomp.push_back(
        {"setpgid", EPERM, {}, "weaker mode: stay in the process group the shim ends"});
  }
  // Compiled here, once, so that the shim only loads it. libseccomp compiles in memory; its only
  // system calls are its probes of the kernel's seccomp features and the memfd it exports to.
  ASSIGN_OR_RETURN(c.contain.seccomp_program, CompileSeccomp(c.contain.seccomp));
  // The staged workspace answers renames of lower directories (docs/adr/0013): only where the
  // shim can restrict itself as the command is (Landlock) before it answers for it.
  if (!s.staged.empty() && c.contain.landlock && !host.weaker) {
    ASSIGN_OR_RETURN(c.contain.rename_notify_program, CompileRenameNotifyFilter());
  }
  c.cgroup = facts.cgroup;
  c.cgroup_error = facts.cgroup_error;
  c.contain.rlimits = BuildRlimits(RlimitValuesOf(c.limits), cgroup, cgroup);
  c.contain.argv = req.argv;
  if (!facts.program_path.empty()) c.contain.argv[0] = facts.program_path;
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
  l.host_proc = s.mode == SandboxMode::kBwrapHostProc;
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

RlimitValues RlimitValuesOf(const Limits& l) {
  return {.open_files = l.open_files,
          .file_size_bytes = l.file_size_bytes,
          .cpu_secs = l.cpu_secs,
          .memory_bytes = l.memory_bytes,
          .pids = l.pids};
}

Json PlanConfinementJson(const LaunchPlan& plan) {
  const SessionLaunch& s = plan.session;
  const CallLaunch& c = plan.call;
  const bool weaker = s.weaker();
  Json ns = weaker ? Json::array() : Json{"user", "mount", "pid", "ipc", "uts", "cgroup"};
  if (!weaker && s.network != NetworkMode::kAllow) ns.push_back("net");
  Json j = {{"mode", std::string(Name(kSandboxModeNames, s.mode))},
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
  if (s.mode != SandboxMode::kBwrap) j["weaker_reason"] = s.weaker_reason;
  j["losses"] = s.losses;
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

std::string TimeoutDecision::Note() const {
  if (!capped) return {};
  return "timeout_secs " + std::to_string(requested) + " capped to " + std::to_string(applied) +
         " by " + capped_by + " (" + decided_by + ")";
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
            {"confinement", PlanConfinementJson(plan)},
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

std::vector<std::string> WarmServerArgv(const LaunchPlan& plan, const std::string& stage_dir) {
  const std::vector<std::string> argv = LaunchArgv(plan);
  std::vector<std::string> out;
  auto staged = [&](const std::string& p) {
    for (const auto& r : plan.session.staged) {
      if (r.root == p) return true;
    }
    return false;
  };
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") break;
    if (i + 1 < argv.size() &&
        (a == "--chdir" || a == "--size" || a == "--json-status-fd" || a == "--args")) {
      ++i;
      continue;
    }
    if (a == "--bind" && i + 2 < argv.size() && argv[i + 1] == argv[i + 2] && staged(argv[i + 1])) {
      out.insert(out.end(), {"--ro-bind", argv[i + 1], argv[i + 2]});
      i += 2;
      continue;
    }
    out.push_back(a);
  }
  out.insert(out.end(), {"--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_DAC_OVERRIDE", "--cap-add",
                         "CAP_SETPCAP"});
  if (!stage_dir.empty()) out.insert(out.end(), {"--bind", stage_dir, shim::kWarmStageDir});
  out.insert(out.end(),
             {"--", kShimInSandbox, "--serve", "--sock-fd", std::to_string(kWarmSockFd)});
  return out;
}

Json WarmCallFrame(const LaunchPlan& plan, const std::string& stage_dir) {
  Json env = Json::array();
  for (const auto& [k, v] : plan.call.env) env.push_back(k + "=" + v);
  Json overlays = Json::array();
  for (StagedRoot r : plan.session.staged) {
    for (std::string* p : {&r.upper, &r.work}) {
      if (!stage_dir.empty() && Under(*p, stage_dir))
        *p = shim::kWarmStageDir + p->substr(stage_dir.size());
    }
    overlays.push_back({{"target", r.root}, {"options", OverlayOptions(r)}});
  }
  Json cover = Json::array();
  if (!stage_dir.empty()) cover.push_back(shim::kWarmStageDir);
  return {{"spec", LaunchSpec(plan)},
          {"env", std::move(env)},
          {"tmp_size", plan.call.limits.memory_bytes > 0 ? plan.call.limits.memory_bytes : 0},
          {"overlays", std::move(overlays)},
          {"cover", std::move(cover)}};
}

}  // namespace cordon
