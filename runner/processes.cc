// Foreground and background confined processes; each ended one is handed to the recorder.
#include "runner/processes.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "runner/git_reader.h"
#include "runner/host_capabilities.h"
#include "runner/preset_cache.h"
#include "workspace/git_content.h"
#include "workspace/repo_config.h"
#include "workspace/stage.h"

namespace cordon {

ProcessHost::ProcessHost(const Policy& policy, const Workspace& workspace, Result<SandboxHost> host,
                         char** envp, Recorder record)
    : policy_(policy),
      workspace_(workspace),
      host_(std::move(host)),
      envp_(envp),
      record_(std::move(record)) {}

ProcessHost::~ProcessHost() {
  {
    std::lock_guard<std::mutex> lock(monitor_mu_);
    monitor_.reset();  // its sampler reads the live table
  }
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs.swap(jobs_);
  }
  // Quitting reaps every owned child: cancel what still runs and wait for it.
  for (auto& [id, job] : jobs) job->cancel = true;
  for (auto& [id, job] : jobs) {
    if (job->thread.joinable()) job->thread.join();
  }
}

Result<const SandboxHost*> ProcessHost::Host() {
  if (!host_) return std::unexpected(host_.error());
  return &*host_;
}

namespace {

// A proxied sandbox's presets each get cordon's own cache (runner/preset_cache.h), granted
// writable, never the user's ~/.npm, ~/.cache/pip or ~/.cargo. A launch makes a missing one
// (0700, before the sandbox exists); `--plan` only shows what exists.
Result<ProcessRequest> WithPresetCaches(const Policy& policy, const ProcessRequest& req,
                                        const std::string& workspace, char** envp, bool create) {
  if (req.network.value_or(policy.NetworkFor(req.tool)) != NetworkMode::kProxy) return req;
  const EgressPolicy egress = EgressFor(policy, req.tool, req.egress_extra);
  if (egress.caches.empty()) return req;
  const char* home_env = std::getenv("HOME");
  const std::string home = home_env != nullptr ? home_env : "";
  ProcessRequest out = req;
  out.preset_caches = PresetCachesFor(egress, CanonicalPath(workspace), envp, create);
  for (const PresetCache& c : out.preset_caches) {
    if (!c.unavailable.empty() || !c.exists) continue;
    ASSIGN_OR_RETURN(PathGrant grant, ResolveGrant(c.path, true, c.source, home));
    out.grants.push_back(std::move(grant));
  }
  return out;
}

// The roots a staged launch mounts an overlay onto (docs/adr/0006-staged-workspace.md): the
// workspace, each policy `write` directory and each writable grant that is a directory (not a
// preset's cache: that is cordon's own). A root inside another is covered by the outer overlay.
// Empty with `why` set when one cannot be staged (it holds cordon's stage directory, where the
// upper layers live: overlayfs refuses overlapping layers).
std::vector<std::string> StageRoots(const Policy& policy, const std::string& workspace,
                                    const ProcessRequest& req, std::string* why) {
  const char* home_env = std::getenv("HOME");
  std::vector<std::string> roots =
      WritableRoots(policy, workspace, home_env != nullptr ? home_env : "/nonexistent");
  if (roots.empty()) return roots;
  for (const auto& g : req.grants) {
    if (!g.write || g.from.rfind("preset", 0) == 0) continue;
    if (DescribeHostPath(g.path).kind == PathKind::kDir) roots.push_back(g.path);
  }
  std::vector<std::string> out;
  const std::string stage_root = StagedWorkspace::StageRoot();
  for (const auto& r : roots) {
    if (PathUnder(stage_root, r)) {
      *why = r + " holds cordon's stage directory " + stage_root;
      return {};
    }
    bool nested = false;
    for (const auto& o : roots) {
      if (o != r && PathUnder(r, o)) nested = true;
    }
    if (!nested && std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
  return out;
}

// What a staged commit tells the caller, beside the record: refusals and conflicts the agent
// should know of, and the failure that fails the call.
// How much a refusal says about the tree: a protected name or a path the repository executes
// first, then git's metadata, then the rest (a special file, a set-id bit, ...).
int RefusalRank(std::string_view reason) {
  if (reason == "protected_path" || reason == "repo_executes") return 0;
  if (reason == "git_metadata" || reason == "new_git_dir" || reason == "masked_path") return 1;
  return 2;
}

// The refused entries as the result and exec show them: an entry below a refused directory is
// folded into it (`below` counts them), the most telling first (RefusalRank, then by path), at
// most 50 (the rest, with what is folded into it, counted in refused_omitted).
Json RefusedList(const CommitOutcome& o, std::size_t& omitted) {
  std::set<std::string_view> paths;
  for (const auto& r : o.refused) paths.insert(r.rel);
  std::map<std::string_view, std::size_t> below;  // refused directory -> entries folded in
  std::vector<const RefusedEntry*> shown;
  for (const auto& r : o.refused) {
    std::string_view up = r.rel;
    bool folded = false;
    for (std::size_t slash = up.rfind('/'); slash != std::string_view::npos && !folded;
         slash = up.rfind('/')) {
      up = up.substr(0, slash);
      if (paths.contains(up)) {
        ++below[up];
        folded = true;
      }
    }
    if (!folded) shown.push_back(&r);
  }
  std::stable_sort(shown.begin(), shown.end(), [](const RefusedEntry* a, const RefusedEntry* b) {
    const int ra = RefusalRank(a->reason), rb = RefusalRank(b->reason);
    return ra != rb ? ra < rb : a->rel < b->rel;
  });
  Json out = Json::array();
  for (std::size_t i = 0; i < shown.size() && i < 50; ++i) {
    Json e = {{"path", shown[i]->rel}, {"reason", shown[i]->reason}};
    if (auto it = below.find(shown[i]->rel); it != below.end()) e["below"] = it->second;
    out.push_back(std::move(e));
  }
  omitted = 0;  // the entries not listed, with those folded into them
  for (std::size_t i = 50; i < shown.size(); ++i) {
    const auto it = below.find(shown[i]->rel);
    omitted += 1 + (it != below.end() ? it->second : 0);
  }
  return out;
}

Json CommitSummary(const CommitOutcome& o) {
  Json conflicts = Json::array();
  std::size_t refused_omitted = 0;
  Json refused = RefusedList(o, refused_omitted);
  for (std::size_t i = 0; i < o.conflicts.size() && i < 50; ++i)
    conflicts.push_back(o.conflicts[i]);
  Json j = {{"mode", "staged"},
            {"changed", o.changes.size()},
            {"refused", std::move(refused)},
            {"conflicts", std::move(conflicts)}};
  if (refused_omitted > 0) j["refused_omitted"] = refused_omitted;
  if (o.conflicts.size() > 50) j["conflicts_omitted"] = o.conflicts.size() - 50;
  if (!o.refused.empty()) {
    j["note"] =
        "entries the workspace rules refuse were kept out of the tree (in cordon's quarantine); "
        "conflicts: the host changed the file meanwhile, its version was kept";
  }
  if (o.error) {
    j["error"] = o.error->message;
    Json nd = Json::array();
    for (std::size_t i = 0; i < o.not_done.size() && i < 200; ++i) nd.push_back(o.not_done[i]);
    j["not_done"] = std::move(nd);
  }
  return j;
}

}  // namespace

std::vector<GitContentFinding> ProcessHost::CheckGitView(const std::string& git_dir,
                                                         const std::string& view_dir,
                                                         const std::vector<std::string>& changed) {
  CommitRules rules;
  rules.extra_protected = policy_.filesystem.protected_names;
  rules.repo_protected = RepoProtectedPaths(workspace_.root());
  // The paths git would write into the tree, root-relative as the rules read them.
  const std::string& root = workspace_.root();
  std::string rel;
  if (git_dir.size() > root.size() && git_dir.compare(0, root.size(), root) == 0 &&
      git_dir[root.size()] == '/') {
    rel = git_dir.substr(root.size() + 1);
  }
  const std::string scratch = CordonStateDir() + "/git-check";
  std::error_code ec;
  std::filesystem::create_directories(scratch, ec);
  ::chmod(scratch.c_str(), 0700);
  return CheckGitDirContent({.host_git = git_dir,
                             .new_git = view_dir,
                             .worktree = rel.empty() ? std::string() : GitWorktreeOf(rel),
                             .changed = changed,
                             .entry_prefix = "",
                             .scratch = scratch},
                            rules, RunGitConfined);
}

void ProcessHost::ReportGitViewRefusals(const std::vector<GitViewRefusal>& refused,
                                        const char* when, ConfinedProcess* p) {
  if (refused.empty()) return;
  Json listed = Json::array();
  for (const auto& r : refused) {
    GuardEvent e;
    e.path = r.git_dir + "/" + r.name;
    e.entry_kind = "file";
    e.quarantine = r.quarantine;
    e.when = when;
    e.reason = "git_content";
    e.git = Json::array();
    for (const auto& f : r.why) {
      if (e.git.size() < 20) e.git.push_back(GitContentFindingJson(f));
    }
    if (stage_sink_) stage_sink_(e);
    if (listed.size() < 50) listed.push_back({{"path", e.path}, {"reason", "git_content"}});
  }
  if (p != nullptr) {
    p->SetWorkspaceCommit(
        {{"mode", "direct"},
         {"refused", std::move(listed)},
         {"note",
          "git content the workspace rules refuse (an index entry or a commit that adds such a "
          "path) stayed out of the host repository; the sandbox's copies are in cordon's "
          "quarantine"}});
  }
}

StagingSupport ProcessHost::Staging() {
  std::lock_guard<std::mutex> lock(staging_mu_);
  if (!staging_support_ && ForcedByTestSwitch("CORDON_TEST_NO_OVERLAY")) {
    staging_support_ = StagingSupport{};
    staging_support_->reason = "CORDON_TEST_NO_OVERLAY=1 is set";
  }
  if (!staging_support_) {
    staging_support_ = ProbeStaging(StagedWorkspace::StageRoot(), workspace_.root());
  }
  return *staging_support_;
}

Result<StagedWorkspace*> ProcessHost::StagingFor() {
  std::lock_guard<std::mutex> lock(staging_mu_);
  if (!staging_) {
    CommitRules rules;
    rules.extra_protected = policy_.filesystem.protected_names;
    rules.xattr_allow = policy_.filesystem.xattr_allow;
    // The path rules of [[approvals.rules]] (allow ones too: within a layer the first match
    // decides): what a commit holds for an answer or refuses (issue 34).
    for (const ApprovalRule& r : policy_.approval_rules) {
      if (r.matcher == ApprovalMatcher::kPath) rules.approval_paths.push_back(r);
    }
    if (auto it = policy_.entry_provenance.find("filesystem.protected_names");
        it != policy_.entry_provenance.end()) {
      for (const auto& name : rules.extra_protected) {
        if (auto w = it->second.find(name); w != it->second.end())
          rules.protected_from[name] = w->second;
      }
    }
    // An index or a moved ref is checked with the host's git, confined (runner/git_reader.h),
    // in this session's commits and in the recovery of a killed cordon's stages alike.
    staging_ = std::make_unique<StagedWorkspace>(
        stage_quarantine_.empty() ? CordonStateDir() + "/quarantine/unnamed" : stage_quarantine_,
        std::move(rules), stage_origin_, stage_sink_, stage_recovered_, RunGitConfined);
    staging_->SetBeforeImages(before_images_);
    // With no one set to ask, held entries are answered no at once (quarantined, recorded).
    staging_->SetHolding(
        hold_asker_ ? hold_asker_ : [](const HeldQuestion&) { return HeldAnswer{}; },
        policy_.approvals_held_days);
    staging_ready_ = staging_.get();
  }
  return staging_.get();
}

Result<std::vector<std::string>> ProcessHost::StagingRoots(const ProcessRequest& req,
                                                           const SandboxHost& host) {
  std::vector<std::string> roots;
  if (!req.workspace_writable || policy_.workspace_mode == WorkspaceMode::kDirect) return roots;
  std::string why;
  if (host.weaker) {
    why = "the weaker mode has no mount namespace";
  } else {
    roots = StageRoots(policy_, workspace_.root(), req, &why);
    if (!roots.empty()) {
      StagingSupport support = Staging();
      if (!support.available) {
        roots.clear();
        why = support.reason;
      }
    }
  }
  if (roots.empty() && policy_.workspace_mode != WorkspaceMode::kStaged &&
      why.find("holds cordon's stage directory") != std::string::npos) {
    // `auto` falls back to the direct mode, where the sandbox writes the host tree itself, when
    // the workspace holds cordon's state (--workspace ~/.local): never silently (once per
    // cordon, on stderr; each process record says workspace_mode "direct"). A host that cannot
    // stage at all is doctor's `workspace_staging` line.
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      std::fprintf(stderr,
                   "cordon: the workspace is not staged (%s): commands write it directly, and "
                   "what the rules refuse is swept after each one (SECURITY.md, \"Workspace "
                   "guard\"); [sandbox] workspace = \"staged\" refuses to run instead\n",
                   why.c_str());
    }
  }
  if (roots.empty() && !why.empty() && policy_.workspace_mode == WorkspaceMode::kStaged) {
    const auto where = policy_.provenance.find("sandbox.workspace");
    return Fail(Code::kSandboxUnavailable,
                "[sandbox] workspace = \"staged\" (" +
                    (where != policy_.provenance.end() ? where->second : std::string("policy")) +
                    ") requires a staged workspace, and " + why +
                    "; set it to \"auto\" to fall back to the direct mode");
  }
  return roots;
}

Result<LaunchPlan> ProcessHost::Plan(const ProcessRequest& request, LaunchResources* acquired,
                                     std::shared_ptr<TreeSnapshot>* before,
                                     std::shared_ptr<Stage>* stage,
                                     const std::vector<std::string>* stage_roots) {
  ASSIGN_OR_RETURN(const SandboxHost* host, Host());
  ASSIGN_OR_RETURN(ProcessRequest req, WithPresetCaches(policy_, request, workspace_.root(), envp_,
                                                        acquired != nullptr));
  std::vector<std::string> roots;
  if (stage_roots != nullptr) {
    roots = *stage_roots;  // preset caches' grants, added above, are never stage roots
  } else {
    ASSIGN_OR_RETURN(roots, StagingRoots(req, *host));
  }
  req.staged = !roots.empty();
  LaunchResources dropped;
  ASSIGN_OR_RETURN(HostFacts facts, GatherHostFacts(*host, policy_, workspace_.root(), req, envp_,
                                                    acquired != nullptr ? acquired : &dropped));
  facts.git_identity = git_identity_;
  if (req.staged && facts.workspace_read_only.empty()) {
    if (acquired != nullptr) {
      ASSIGN_OR_RETURN(StagedWorkspace * staging, StagingFor());
      ASSIGN_OR_RETURN(std::shared_ptr<Stage> made, staging->NewStage(roots));
      made->SetCaller(req.call, req.tool, req.owner);
      facts.staged = made->roots();
      if (stage != nullptr) *stage = std::move(made);
    } else {
      // `--plan`: nothing is made; the directories are named as a launch would make them.
      for (std::size_t i = 0; i < roots.size(); ++i) {
        const std::string dir = StagedWorkspace::StageRoot() + "/PID-RANDOM/N";
        facts.staged.push_back(
            {roots[i], dir + "/u" + std::to_string(i), dir + "/w" + std::to_string(i)});
      }
    }
  }
  if (facts.protected_scan && !host->weaker) {  // sync-in; `--plan` (no acquired) writes nothing
    ASSIGN_OR_RETURN(facts.git_views,
                     git_views_.Prepare(facts.protected_scan->git_dirs, acquired != nullptr));
  }
  if (before != nullptr && facts.protected_scan) *before = facts.protected_scan->snapshot;
  ASSIGN_OR_RETURN(LaunchPlan plan, BuildLaunchPlan(policy_, facts, req));
  // What the sandbox masks, the commit never writes or deletes either (CommitRules::masked).
  if (stage != nullptr && *stage) {
    std::vector<std::string> masked;
    for (const auto& d : plan.session.deny) masked.push_back(d.path);
    TRY((*stage)->SetMasked(std::move(masked)));
  }
  return plan;
}

Result<std::unique_ptr<ConfinedProcess>> ProcessHost::Launch(const ProcessRequest& req,
                                                             ChangeWatch* watch) {
  if (StagedWorkspace* s = staging_ready_.load()) {
    // A commit that could not complete stops the session (fail closed).
    if (auto poisoned = s->poisoned()) return std::unexpected(*poisoned);
  }
  if (launch_gate_) TRY(launch_gate_(req));
  // The direct mode's sweep runs before the plan's scan (what it moves must not be bound).
  ASSIGN_OR_RETURN(const SandboxHost* host, Host());
  ASSIGN_OR_RETURN(std::vector<std::string> staged_roots, StagingRoots(req, *host));
  return LaunchWithRoots(req, watch, std::move(staged_roots));
}

Result<std::unique_ptr<ConfinedProcess>> ProcessHost::LaunchWithRoots(
    const ProcessRequest& req, ChangeWatch* watch, std::vector<std::string> staged_roots) {
  LaunchResources resources;
  ASSIGN_OR_RETURN(const SandboxHost* host, Host());
  const std::string cold_reason = ColdReason(req, *host, staged_roots);
  if (cold_reason.empty() && !req.warm) {
    ProcessRequest warm_req = req;
    warm_req.warm = true;
    return LaunchWithRoots(warm_req, watch, std::move(staged_roots));
  }
  std::uint64_t token = 0;
  bool guarded = false;
  if (guard_ && staged_roots.empty()) {
    ASSIGN_OR_RETURN(token, guard_->BeforeLaunch());  // refused while a sweep is unfinished
    guarded = true;
  }
  ASSIGN_OR_RETURN(LaunchPlan plan,
                   Plan(req, &resources, &watch->before, &watch->stage, &staged_roots));
  if (!plan.session.staged.empty())
    return LaunchStaged(req, plan, std::move(resources), watch, cold_reason);
  if (req.warm && plan.session.workspace_writable) {
    // Only staged or read-only calls are warm; a plan that turned out otherwise fails closed
    // rather than letting a warm call write the host's tree.
    return Fail(Code::kSandboxUnavailable,
                "a warm call planned with a writable, unstaged workspace");
  }
  if (guard_ && !guarded) {
    ASSIGN_OR_RETURN(token, guard_->BeforeLaunch());
  }
  // Bound before anything else is acquired: a proxy that cannot start leaves nothing to undo.
  ProcessRequest launched = req;
  if (plan.session.egress) {
    if (!egress_) {
      return Fail(Code::kSandboxUnavailable, "network mode proxy: this session runs no proxy");
    }
    ASSIGN_OR_RETURN(launched.egress, egress_(*plan.session.egress, req));
  }
  if (!plan.session.workspace_writable) watch->before.reset();
  if (guard_)
    guard_->Launched(token, plan.session.workspace_writable, plan.session.protect,
                     plan.session.git_dirs);
  watch->concurrent = running_.fetch_add(1) > 0;
  watch->launch_no = ++launches_;
  // The statx pass of a large tree's before side runs beside the process: t0 is read (after the
  // clock ticks over) before the process starts, the pass starts once it has.
  if (watch->before && watch->before->Deferred() > 0)
    watch->fill = std::make_shared<SnapshotFill>(watch->before);
  auto proc = StartProcess(plan, std::move(resources), launched, cold_reason);
  if (watch->fill && proc) watch->fill->Start();
  if (proc) (*proc)->SetRedactor(redactor_);
  if (!proc) {
    --running_;
    if (guard_) (void)guard_->AfterProcess();  // a failure leaves the guard broken: later launches
  }                                            // are refused with it
  return proc;
}

Result<std::unique_ptr<ConfinedProcess>> ProcessHost::LaunchStaged(const ProcessRequest& req,
                                                                   const LaunchPlan& plan,
                                                                   LaunchResources resources,
                                                                   ChangeWatch* watch,
                                                                   const std::string& cold_reason) {
  ProcessRequest launched = req;
  if (plan.session.egress) {
    if (!egress_) {
      return Fail(Code::kSandboxUnavailable, "network mode proxy: this session runs no proxy");
    }
    ASSIGN_OR_RETURN(launched.egress, egress_(*plan.session.egress, req));
  }
  watch->before.reset();  // the commit is the change record
  watch->concurrent = running_.fetch_add(1) > 0;
  watch->launch_no = ++launches_;
  // A warm call's init waits for the window's clock tick in the sandbox, beside its clone and
  // mounts (runner/shim/serve.cc); a cold one's here, before bwrap starts.
  const std::int64_t t0 = watch->stage->OpenWindow(/*wait=*/!req.warm);
  if (req.warm) launched.window_start_ns = t0;
  auto proc = StartProcess(plan, std::move(resources), launched, cold_reason);
  if (!proc) {
    --running_;
    watch->stage.reset();  // nothing ran: nothing to commit, the stage goes
    return proc;
  }
  (*proc)->SetRedactor(redactor_);
  // A long-lived process is committed at every call boundary and by the timer, not only at its
  // end (docs/adr/0006-staged-workspace.md, decision 2).
  // An MCP server's commits also go to the call at whose boundary they happen (session_diff).
  if (req.kind != ProcessKind::kForeground)
    staging_->Watch(watch->stage, req.kind == ProcessKind::kMcpServer);
  return proc;
}

std::string ProcessHost::ColdReason(const ProcessRequest& req, const SandboxHost& host,
                                    const std::vector<std::string>& staged_roots) {
  if (!warm_enabled_) return "warm sandboxes serve `cordon serve` only";
  if (!policy_.warm) return "[sandbox] warm = \"off\"";
  if (req.kind != ProcessKind::kForeground) return "a long-lived process runs in its own sandbox";
  if (req.inherit_stdio || req.pipe_stdin) return "its stdio is cordon's";
  if (host.weaker) return "the weaker mode";
  if (host.host_proc) return "the bwrap-host-proc mode (a warm sandbox mounts a /proc per call)";
  if (host.landlock_abi <= 0) return "no Landlock";
  if (req.network.value_or(policy_.NetworkFor(req.tool)) == NetworkMode::kProxy)
    return "network mode proxy";
  if (req.workspace_writable && staged_roots.empty()) return "the direct workspace mode";
  return "";
}

Result<std::unique_ptr<ConfinedProcess>> ProcessHost::StartProcess(const LaunchPlan& plan,
                                                                   LaunchResources resources,
                                                                   const ProcessRequest& req,
                                                                   const std::string& cold_reason) {
  if (!req.warm) {
    auto proc = ConfinedProcess::Start(plan, std::move(resources), req);
    if (proc) (*proc)->SetLaunchInfo({{"kind", "cold"}, {"reason", cold_reason}});
    return proc;
  }
  // The session's stage directory is bound into every warm sandbox where staging works, so that
  // read-only and staged calls share one.
  std::string stage_dir;
  if (Staging().available) {
    ASSIGN_OR_RETURN(StagedWorkspace * staging, StagingFor());
    TRY(staging->EnsureDir());
    stage_dir = staging->dir();
  }
  const std::vector<std::string> argv = WarmServerArgv(plan, stage_dir);
  std::string key;
  for (const auto& a : argv) key.append(a).push_back('\0');
  const SandboxHost* host = &*host_;
  const Policy& policy = policy_;
  ASSIGN_OR_RETURN(
      std::shared_ptr<WarmSandbox> sandbox,
      warm_pool_.Get(key, [&](const std::string& id) -> Result<std::shared_ptr<WarmSandbox>> {
        std::optional<CgroupJob> cgroup;
        if (host->cgroups.mode != CgroupMode::kNone) {
          auto cg = CgroupJob::Create(host->cgroups, policy.LimitsFor(req.tool));
          if (cg && *cg) cgroup.emplace(std::move(**cg));
        }
        return WarmSandbox::Start(argv, id, std::move(cgroup));
      }));
  const std::uint64_t call = sandbox->TakeCallNumber();
  const std::string id = sandbox->id();
  auto proc = ConfinedProcess::StartWarm(plan, std::move(resources), req, sandbox, stage_dir);
  if (!proc) {
    warm_pool_.Drop(sandbox);  // a sandbox that failed a call takes no more
    return proc;
  }
  (*proc)->SetLaunchInfo({{"kind", "warm"}, {"sandbox", id}, {"call", call}});
  return proc;
}

void ProcessHost::Ended(ConfinedProcess& p, ChangeWatch& watch, const std::string& job_id,
                        bool cancel_requested) {
  if (watch.stage) {
    p.ReleaseEgress();
    --running_;
    staging_->Forget(watch.stage);
    const auto t0 = std::chrono::steady_clock::now();
    const CommitOutcome o = staging_->CommitFinal(*watch.stage);
    const double commit_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    p.SetWorkspaceCommit(CommitSummary(o));
    Json changes = nullptr;
    if (policy_.audit_file_changes) {
      changes = StagedChangesJson(o, 200);
      changes["concurrent"] = watch.concurrent || launches_.load() != watch.launch_no;
      changes["commit_ms"] = std::round(commit_ms * 1000) / 1000;
    }
    if (record_) record_(p, job_id, cancel_requested, changes);
    // Its directory goes after the call has its result (a failed commit's stays: ~Stage).
    staging_->Retire(std::move(watch.stage));
    return;
  }
  ReportGitViewRefusals(git_views_.SyncOut(), "process_end", &p);
  // Its connections' network records come before its process record.
  p.ReleaseEgress();
  --running_;
  // The process-end sweep walks every writable root anyway: that walk is the after snapshot,
  // so the tree is walked once at launch and once at the end (docs/adr/0004-change-records.md).
  TreeSnapshot after;
  // A sweep that could not complete fails the call (its record and result say why).
  if (guard_) {
    if (Status swept = guard_->AfterProcess(watch.before ? &after : nullptr); !swept)
      p.FailCommit(swept.error());
  }
  if (watch.fill) watch.fill->Finish();  // what it did not reach, the diff decides
  Json changes = nullptr;
  if (watch.before) {
    // Another process launched while this one ran, or was running when it started: the window
    // holds its changes too.
    const bool concurrent = watch.concurrent || launches_.load() != watch.launch_no;
    changes = changes_.Record(*watch.before, after, concurrent, policy_.own_paths);
    changes["workspace_mode"] = "direct";
  }
  if (record_) record_(p, job_id, cancel_requested, changes);
}

Json ProcessHost::ResultJson(const ConfinedProcess& p) {
  ProcessOutcome o = p.outcome();
  Json j = p.OutputJson();
  j["status"] = StatusName(o.status);
  j["exit_code"] = o.exit_code ? Json(*o.exit_code) : Json(nullptr);
  j["signal"] = o.signal ? Json(*o.signal) : Json(nullptr);
  const char* name = o.signal ? ::sigabbrev_np(*o.signal) : nullptr;
  j["signal_name"] = name != nullptr ? Json(std::string("SIG") + name) : Json(nullptr);
  j["timed_out"] = o.status == ProcessStatus::kTimeout;
  j["cancelled"] = o.status == ProcessStatus::kCancelled;
  j["elapsed_ms"] = o.elapsed_ms;
  j["cpu_ms"] = o.cpu_ms;
  j["max_rss_kb"] = o.max_rss_kb;
  j["limit"] = o.limit ? o.limit->ToJson() : Json(nullptr);
  if (p.timeout_decision()) {
    j["timeout"] = p.timeout_decision()->ToJson();
    // At the top, beside exit_code: an agent that asked for more time sees at once that it did
    // not get it, and which policy key decided.
    if (p.timeout_decision()->capped) j["timeout_capped"] = p.timeout_decision()->Note();
  }
  if (Json w = p.workspace_commit(); !w.is_null()) j["workspace"] = std::move(w);
  return j;
}

Result<std::unique_ptr<ConfinedProcess>> ProcessHost::RunForeground(
    const ProcessRequest& req, const std::atomic<bool>* cancel) {
  ChangeWatch watch;
  ASSIGN_OR_RETURN(auto proc, Launch(req, &watch));
  {
    LiveScope live{this, AddLive(OwnerOf(req, ""), *proc)};
    proc->Run(cancel);
  }
  Ended(*proc, watch, "", false);
  return proc;
}

Result<std::unique_ptr<ConfinedProcess>> ProcessHost::RunWithHooks(
    const ProcessRequest& req, RunHooks& hooks, const std::atomic<bool>* cancel,
    const std::function<void(ConfinedProcess&)>& started) {
  ChangeWatch watch;
  ASSIGN_OR_RETURN(auto proc, Launch(req, &watch));
  {
    LiveScope live{this, AddLive(OwnerOf(req, ""), *proc)};
    if (started) started(*proc);
    proc->Run(cancel, &hooks);
  }
  Ended(*proc, watch, "", false);
  return proc;
}

Result<Json> ProcessHost::StartBackground(const ProcessRequest& req) {
  // The job's own thread forks its sandbox: bwrap --die-with-parent (and the launch child's
  // PR_SET_PDEATHSIG) follow the thread that forked, not the process, so a sandbox forked by
  // the caller (an MCP worker, an HTTP connection's thread) was killed when that thread ended,
  // as the worker pool's do when `serve` stops, and the job was recorded as a sandbox that
  // did not start instead of as cancelled by the stop.
  if (OwnerEnded(req.owner))
    return Fail(Code::kCancelled, "the MCP session ended: no job of it starts");
  Monitor();  // a job's figures are kept from its start
  auto job = std::make_unique<Job>();
  Job* raw = job.get();
  // Shared: the thread may still be inside set_value when the caller has its result.
  auto launched = std::make_shared<std::promise<Result<std::unique_ptr<ConfinedProcess>>>>();
  std::promise<void> registered;
  auto launched_f = launched->get_future();
  auto registered_f = registered.get_future().share();
  raw->thread = std::thread([this, raw, &req, launched, registered_f] {
    BlockTerminationSignals();
    ChangeWatch watch;
    auto proc = Launch(req, &watch);
    const bool ok = proc.has_value();
    if (ok) raw->watch = std::move(watch);
    launched->set_value(std::move(proc));  // `req` is not touched after this
    if (!ok) return;
    registered_f.wait();  // the job has its id and is in jobs_
    {
      LiveScope live{this, AddLive(OwnerOf(raw->proc->request(), raw->id), *raw->proc)};
      raw->proc->Run(&raw->cancel);
    }
    Ended(*raw->proc, raw->watch, raw->id, raw->cancel.load());
  });
  auto proc = launched_f.get();
  if (!proc) {
    raw->thread.join();
    return std::unexpected(proc.error());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job->owner = req.owner;
    job->id = "job-" + std::to_string(++next_job_[req.owner]);
    job->proc = std::move(*proc);
    jobs_[{job->owner, job->id}] = std::move(job);
  }
  // Its session ended while it launched (a tools/call racing an HTTP DELETE): EndOwner's
  // cancel did not see it, so it is cancelled here, and joined, rather than left running with
  // no session to see or stop it.
  const bool orphan = OwnerEnded(req.owner);
  if (orphan) raw->cancel = true;
  registered.set_value();
  if (orphan) {
    raw->Join();
    return Fail(Code::kCancelled,
                "the MCP session ended while " + raw->id + " started: it was cancelled");
  }
  Json started = {
      {"id", raw->id}, {"status", "running"}, {"confinement", raw->proc->confinement()}};
  if (const auto& t = raw->proc->timeout_decision(); t && t->capped)
    started["timeout_capped"] = t->Note();
  return started;
}

Json ProcessHost::List(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  Json jobs = Json::array();
  for (auto it = jobs_.lower_bound({owner, ""}); it != jobs_.end() && it->first.first == owner;
       ++it) {
    const std::string& id = it->first.second;
    const ConfinedProcess& p = *it->second->proc;
    const bool finished = p.finished();
    ProcessOutcome o = p.outcome();
    Json j = {{"id", id},
              {"argv", p.request().argv},
              {"state", StatusName(finished ? o.status : ProcessStatus::kRunning)},
              {"exit_code", o.exit_code ? Json(*o.exit_code) : Json(nullptr)},
              {"signal", o.signal ? Json(*o.signal) : Json(nullptr)},
              {"elapsed_ms", o.elapsed_ms},
              {"cpu_ms", o.cpu_ms},
              {"max_rss_kb", o.max_rss_kb},
              {"cancel_requested", it->second->cancel.load()}};
    if (!finished) {
      // A running job's figures, live from /proc (the shim reports its own only at the end);
      // null when they cannot be read.
      const LiveUsage u = p.Live();
      j["elapsed_ms"] = std::round(p.ElapsedMs() * 1000) / 1000;
      j["cpu_ms"] = u.cpu_ms ? Json(*u.cpu_ms) : Json(nullptr);
      j["max_rss_kb"] = u.max_rss_kb ? Json(*u.max_rss_kb) : Json(nullptr);
      j["rss_kb"] = u.rss_kb ? Json(*u.rss_kb) : Json(nullptr);
      j["processes"] = u.processes;
    }
    jobs.push_back(std::move(j));
  }
  return Json{{"jobs", jobs}};
}

Result<ProcessHost::Job*> ProcessHost::FindJobLocked(const std::string& owner,
                                                     const std::string& id) {
  auto it = jobs_.find({owner, id});
  if (it == jobs_.end()) return Fail(Code::kNotFound, "no job " + id + " in this session");
  return it->second.get();
}

Result<Json> ProcessHost::Output(const std::string& owner, const std::string& id,
                                 std::size_t max_chars) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Job * job, FindJobLocked(owner, id));
  const auto& p = *job->proc;
  const bool finished = p.finished();
  std::string tail = p.Tail(max_chars);
  // A running job's last line may be a secret still being written: its unfinished tail is held
  // back until the line ends (\n or \r) or the job does, so no rule sees half a token. A line
  // longer than the redactor's window is released up to the window, cut where no secret is.
  std::size_t held = 0;
  if (!finished) {
    const std::size_t eol = tail.find_last_of("\n\r");
    std::size_t keep = eol == std::string::npos ? 0 : eol + 1;
    if (tail.size() - keep > Redactor::kWindow) {
      const std::size_t cut = tail.size() - Redactor::kWindow;
      keep = redactor_ != nullptr ? redactor_->CutBefore(tail, cut) : cut;
    }
    held = tail.size() - keep;
    tail.resize(keep);
  }
  Json j{{"id", id},
         {"state", StatusName(finished ? p.outcome().status : ProcessStatus::kRunning)},
         {"output", tail},
         {"chars", tail.size()}};
  if (held > 0) j["held_bytes"] = held;
  return j;
}

Result<Json> ProcessHost::Cancel(const std::string& owner, const std::string& id, bool force) {
  Job* job = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(job, FindJobLocked(owner, id));
  }
  const bool was_running = !job->proc->finished();
  if (force) job->proc->ForceStop();
  job->cancel = true;
  job->Join();
  ProcessOutcome o = job->proc->outcome();
  return Json{{"id", id},
              {"was_running", was_running},
              {"state", StatusName(o.status)},
              {"forced", force},
              {"signal", o.signal ? Json(*o.signal) : Json(nullptr)}};
}

void ProcessHost::EndOwner(const std::string& owner) {
  {
    std::lock_guard<std::mutex> lock(ended_mu_);
    ended_owners_.insert(owner);
  }
  CancelOwned(owner);
}

bool ProcessHost::OwnerEnded(const std::string& owner) {
  if (owner.empty()) return false;  // stdio serve, exec, call: the one session
  std::lock_guard<std::mutex> lock(ended_mu_);
  return ended_owners_.count(owner) > 0;
}

void ProcessHost::CancelOwned(const std::string& owner) {
  std::vector<Job*> owned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = jobs_.lower_bound({owner, ""}); it != jobs_.end() && it->first.first == owner;
         ++it)
      owned.push_back(it->second.get());
  }
  for (Job* job : owned) job->cancel = true;
  for (Job* job : owned) job->Join();
}

namespace {

// A job's sandbox pid namespace, waited for up to `ms` after its start (bwrap reports its init a
// few milliseconds in); {0, 0} in the weaker mode, which has none, or when it never came.
std::pair<std::uint64_t, std::uint64_t> AwaitNamespace(const ConfinedProcess& p, int ms) {
  const bool bwrap = p.confinement().value("mode", "") != "landlock-seccomp";
  for (int waited = 0;; waited += 10) {
    const auto ns = p.sandbox_namespace();
    if (ns.second != 0 || !bwrap || p.finished() || waited >= ms) return ns;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

Result<std::vector<ProcessHost::JobListener>> ProcessHost::Listeners(
    const std::string& owner, const std::optional<std::string>& id) {
  std::vector<Job*> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (id) {
      ASSIGN_OR_RETURN(Job * job, FindJobLocked(owner, *id));
      jobs.push_back(job);
    } else {
      for (auto it = jobs_.lower_bound({owner, ""}); it != jobs_.end() && it->first.first == owner;
           ++it)
        jobs.push_back(it->second.get());
    }
  }
  // Jobs are never erased from jobs_ while the host lives: the pointers stay valid.
  std::vector<JobListener> out;
  for (Job* job : jobs) {
    if (job->proc->finished()) continue;
    const auto [dev, ino] = AwaitNamespace(*job->proc, 2000);
    for (Listener& l : NamespaceListenersIn(dev, ino)) out.push_back({job->id, std::move(l)});
  }
  return out;
}

Result<ListenerStopOutcome> ProcessHost::StopListener(const std::string& owner,
                                                      const std::string& id, pid_t pid, int port) {
  Job* job = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(job, FindJobLocked(owner, id));
  }
  if (job->proc->finished()) {
    return Fail(Code::kNotFound, id + " has ended: nothing of it listens any more");
  }
  ListenerStopTarget target;
  std::tie(target.ns_dev, target.ns_ino) = AwaitNamespace(*job->proc, 2000);
  target.top_group = job->proc->command_group();
  target.grace_ms = job->proc->request().stop_grace_ms;
  return StopNamespaceListener(target, pid, port);
}

Result<UniqueFd> ProcessHost::ProbeSocket(const std::string& owner, const std::string& id,
                                          int family) {
  Job* job = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(job, FindJobLocked(owner, id));
  }
  AwaitNamespace(*job->proc, 2000);
  return job->proc->ProbeSocket(family, 2000);
}

ProcessHost::LiveOwner ProcessHost::OwnerOf(const ProcessRequest& req,
                                            const std::string& job_id) const {
  if (!job_id.empty()) return {"job", job_id, req.owner};
  if (req.kind == ProcessKind::kMcpServer) {
    // A configured server's tool prefix is mcp__NAME (mcp/client.cc); cordon wrap's is its own.
    const std::string name = req.tool.rfind("mcp__", 0) == 0 ? req.tool.substr(5) : req.tool;
    return {"server", name, req.owner};
  }
  return {"call", req.tool, req.owner};
}

std::uint64_t ProcessHost::AddLive(LiveOwner owner, const ConfinedProcess& proc) {
  std::lock_guard<std::mutex> lock(live_mu_);
  const std::uint64_t no = ++next_live_;
  live_[no] = LiveEntry{std::move(owner), &proc};
  return no;
}

void ProcessHost::RemoveLive(std::uint64_t no) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_.erase(no);
}

std::vector<ProcessHost::LiveRow> ProcessHost::LiveTable(const std::string& owner,
                                                         std::size_t cmdline_bytes) {
  std::vector<LiveRow> rows;
  std::lock_guard<std::mutex> lock(live_mu_);
  for (const auto& [no, e] : live_) {
    if (e.owner.owner != owner && e.owner.kind != "server") continue;
    const pid_t init = e.proc->sandbox_member();
    // By the namespace the process holds open, never by the stored pid (which another process
    // may have taken once the sandbox's init was reaped).
    const auto [ns_dev, ns] = e.proc->sandbox_namespace();
    const double elapsed = e.proc->ElapsedMs();
    const Json cgroup = e.proc->CgroupNow();
    for (LiveProcess& p : NamespaceProcessesIn(ns_dev, ns, cmdline_bytes)) {
      rows.push_back(LiveRow{e.owner, init, ns, elapsed, std::move(p), cgroup});
    }
  }
  return rows;
}

ResourceMonitor& ProcessHost::Monitor() {
  std::lock_guard<std::mutex> lock(monitor_mu_);
  if (!monitor_) {
    monitor_ = std::make_unique<ResourceMonitor>([this](MonitorSample& s) {
      auto figure = [](const Json& v) {
        return v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>())
                                      : std::int64_t{-1};
      };
      std::lock_guard<std::mutex> live_lock(live_mu_);
      for (const auto& [no, e] : live_) {
        for (LiveProcess& p : NamespaceProcesses(e.proc->sandbox_member())) {
          s.processes.push_back(MonitorProcess{p.pid, e.owner.kind, e.owner.name, e.owner.owner,
                                               std::move(p.comm), p.cpu_ms, p.rss_kb});
        }
        // The sandbox's cgroup as a whole (where it has one): two small files.
        if (const Json cg = e.proc->CgroupNow(); cg.is_object()) {
          s.cgroups.push_back(MonitorCgroup{e.owner.kind, e.owner.name, e.owner.owner,
                                            cg.value("mode", ""), figure(cg["memory_bytes"]),
                                            figure(cg["pids"])});
        }
      }
    });
  }
  return *monitor_;
}

}  // namespace cordon
