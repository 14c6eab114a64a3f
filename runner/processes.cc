// Foreground and background confined processes; each ended one is handed to the recorder.
#include "runner/processes.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

#include <filesystem>

namespace cordon {

ProcessHost::ProcessHost(const Policy& policy, const Workspace& workspace, Result<SandboxHost> host,
                         char** envp, Recorder record)
    : policy_(policy),
      workspace_(workspace),
      host_(std::move(host)),
      envp_(envp),
      record_(std::move(record)) {}

ProcessHost::~ProcessHost() {
  std::map<std::string, std::unique_ptr<Job>> jobs;
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

// A preset's cache directories (~/.npm, ...) are granted writable to a proxied sandbox; a launch
// creates a missing one (mode 0700, the user's own cache) so that the grant has something to
// bind, `--plan` only shows what exists.
Result<ProcessRequest> WithPresetGrants(const Policy& policy, const ProcessRequest& req,
                                        bool create) {
  if (req.network.value_or(policy.NetworkFor(req.tool)) != NetworkMode::kProxy) return req;
  const EgressPolicy egress = EgressFor(policy, req.tool, req.egress_extra);
  if (egress.write_paths.empty()) return req;
  const char* home_env = std::getenv("HOME");
  const std::string home = home_env != nullptr ? home_env : "";
  ProcessRequest out = req;
  for (const auto& [path, source] : egress.write_paths) {
    if (home.empty() || home == "/") continue;  // no HOME: no cache to grant
    const std::string full = ExpandPath(path, "", home);
    if (create) {
      std::error_code ec;
      std::filesystem::create_directories(full, ec);
      if (!ec) std::filesystem::permissions(full, std::filesystem::perms::owner_all, ec);
    }
    auto grant = ResolveGrant(full, true, source, home);
    if (grant) {
      out.grants.push_back(*grant);
    } else if (grant.error().code != Code::kNotFound) {
      return std::unexpected(grant.error());
    }
  }
  return out;
}

}  // namespace

Result<LaunchPlan> ProcessHost::Plan(const ProcessRequest& request, LaunchResources* acquired,
                                     std::shared_ptr<TreeSnapshot>* before) {
  ASSIGN_OR_RETURN(const SandboxHost* host, Host());
  ASSIGN_OR_RETURN(const ProcessRequest req,
                   WithPresetGrants(policy_, request, acquired != nullptr));
  LaunchResources dropped;
  ASSIGN_OR_RETURN(HostFacts facts, GatherHostFacts(*host, policy_, workspace_.root(), req, envp_,
                                                    acquired != nullptr ? acquired : &dropped));
  if (facts.protected_scan && !host->weaker) {  // sync-in; `--plan` (no acquired) writes nothing
    ASSIGN_OR_RETURN(facts.git_views,
                     git_views_.Prepare(facts.protected_scan->git_dirs, acquired != nullptr));
  }
  if (before != nullptr && facts.protected_scan) *before = facts.protected_scan->snapshot;
  return BuildLaunchPlan(policy_, facts, req);
}

Result<std::unique_ptr<ConfinedProcess>> ProcessHost::Launch(const ProcessRequest& req,
                                                             ChangeWatch* watch) {
  LaunchResources resources;
  std::uint64_t token = 0;
  if (guard_) {
    ASSIGN_OR_RETURN(token, guard_->BeforeLaunch());  // refused while a sweep is unfinished
  }
  ASSIGN_OR_RETURN(LaunchPlan plan, Plan(req, &resources, &watch->before));
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
  auto proc = ConfinedProcess::Start(plan, std::move(resources), launched);
  if (watch->fill && proc) watch->fill->Start();
  if (proc) (*proc)->SetRedactor(redactor_);
  if (!proc) {
    --running_;
    if (guard_) (void)guard_->AfterProcess();  // a failure leaves the guard broken: later launches
  }                                            // are refused with it
  return proc;
}

void ProcessHost::Ended(ConfinedProcess& p, const ChangeWatch& watch, const std::string& job_id,
                        bool cancel_requested) {
  git_views_.SyncOut();
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
  if (p.timeout_decision()) j["timeout"] = p.timeout_decision()->ToJson();
  return j;
}

Result<std::unique_ptr<ConfinedProcess>> ProcessHost::RunForeground(
    const ProcessRequest& req, const std::atomic<bool>* cancel) {
  ChangeWatch watch;
  ASSIGN_OR_RETURN(auto proc, Launch(req, &watch));
  proc->Run(cancel);
  Ended(*proc, watch, "", false);
  return proc;
}

Result<std::unique_ptr<ConfinedProcess>> ProcessHost::RunWithHooks(
    const ProcessRequest& req, RunHooks& hooks, const std::atomic<bool>* cancel,
    const std::function<void(ConfinedProcess&)>& started) {
  ChangeWatch watch;
  ASSIGN_OR_RETURN(auto proc, Launch(req, &watch));
  if (started) started(*proc);
  proc->Run(cancel, &hooks);
  Ended(*proc, watch, "", false);
  return proc;
}

Result<Json> ProcessHost::StartBackground(const ProcessRequest& req) {
  ChangeWatch watch;
  ASSIGN_OR_RETURN(auto proc, Launch(req, &watch));
  auto job = std::make_unique<Job>();
  Job* raw = job.get();
  job->watch = std::move(watch);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job->id = "job-" + std::to_string(++next_job_);
    job->proc = std::move(proc);
    jobs_[job->id] = std::move(job);
  }
  raw->thread = std::thread([this, raw] {
    BlockTerminationSignals();
    raw->proc->Run(&raw->cancel);
    Ended(*raw->proc, raw->watch, raw->id, raw->cancel.load());
  });
  return Json{{"id", raw->id}, {"status", "running"}, {"confinement", raw->proc->confinement()}};
}

Json ProcessHost::List() {
  std::lock_guard<std::mutex> lock(mu_);
  Json jobs = Json::array();
  for (const auto& [id, job] : jobs_) {
    ProcessOutcome o = job->proc->outcome();
    Json j = {{"id", id},
              {"argv", job->proc->request().argv},
              {"state", StatusName(job->proc->finished() ? o.status : ProcessStatus::kRunning)},
              {"exit_code", o.exit_code ? Json(*o.exit_code) : Json(nullptr)},
              {"signal", o.signal ? Json(*o.signal) : Json(nullptr)},
              {"elapsed_ms", o.elapsed_ms},
              {"cpu_ms", o.cpu_ms},
              {"max_rss_kb", o.max_rss_kb},
              {"cancel_requested", job->cancel.load()}};
    jobs.push_back(std::move(j));
  }
  return Json{{"jobs", jobs}};
}

Result<Json> ProcessHost::Output(const std::string& id, std::size_t max_chars) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Fail(Code::kNotFound, "no job " + id + " in this session");
  const auto& p = *it->second->proc;
  std::string tail = p.Tail(max_chars);
  return Json{{"id", id},
              {"state", StatusName(p.finished() ? p.outcome().status : ProcessStatus::kRunning)},
              {"output", tail},
              {"chars", tail.size()}};
}

Result<Json> ProcessHost::Cancel(const std::string& id) {
  Job* job = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return Fail(Code::kNotFound, "no job " + id + " in this session");
    job = it->second.get();
  }
  const bool was_running = !job->proc->finished();
  job->cancel = true;
  if (job->thread.joinable()) job->thread.join();
  ProcessOutcome o = job->proc->outcome();
  return Json{{"id", id}, {"was_running", was_running}, {"state", StatusName(o.status)}};
}

}  // namespace cordon
