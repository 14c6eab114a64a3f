// ProcessHost: the session's owner of confined processes. Foreground calls run to completion;
// background jobs run on their own thread and are listed, read and cancelled by id. Every
// process ends in one `process` audit record.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "core/signals.h"
#include "runner/launch.h"
#include "runner/listeners.h"
#include "runner/resource_monitor.h"
#include "runner/warm.h"
#include "workspace/changes.h"
#include "workspace/git_view.h"
#include "workspace/guard.h"

namespace cordon {

class ProcessHost {
 public:
  // Called once per ended process, for its `process` audit record (built by the session, which
  // owns the record catalog); job_id is empty for a foreground process. `changes` is what it
  // changed in the writable roots (workspace/changes.h), or null when nothing was watched.
  using Recorder = std::function<void(const ConfinedProcess& p, const std::string& job_id,
                                      bool cancel_requested, const Json& changes)>;
  // `host` is the session's one probe (PrepareSandboxHost), failed or not.
  ProcessHost(const Policy& policy, const Workspace& workspace, Result<SandboxHost> host,
              char** envp, Recorder record);
  ~ProcessHost();
  ProcessHost(const ProcessHost&) = delete;
  ProcessHost& operator=(const ProcessHost&) = delete;

  Result<const SandboxHost*> Host();
  // Gathers the host facts and builds the plan. What gathering acquired goes to `acquired`,
  // or is released on return when it is null (`cordon exec --plan`).
  // `before` receives the launch walk's metadata snapshot, when it made one.
  // `stage` receives the launch's stage (staged mode, a real launch only).
  // `stage_roots`: the launch's StagingRoots when its caller computed them (once per launch);
  // null: Plan computes them.
  Result<LaunchPlan> Plan(const ProcessRequest& req, LaunchResources* acquired = nullptr,
                          std::shared_ptr<TreeSnapshot>* before = nullptr,
                          std::shared_ptr<Stage>* stage = nullptr,
                          const std::vector<std::string>* stage_roots = nullptr);

  // Runs to completion (or timeout/cancel) and writes the process record.
  Result<std::unique_ptr<ConfinedProcess>> RunForeground(const ProcessRequest& req,
                                                         const std::atomic<bool>* cancel);
  // A job of req.owner: its id (job-1, job-2, ... counted per owner) means nothing to another.
  Result<Json> StartBackground(const ProcessRequest& req);
  // Runs with protocol hooks (cordon wrap); `started` sees the process before it is pumped.
  Result<std::unique_ptr<ConfinedProcess>> RunWithHooks(
      const ProcessRequest& req, RunHooks& hooks, const std::atomic<bool>* cancel,
      const std::function<void(ConfinedProcess&)>& started);
  // Writes what the sandboxes changed in the git views back to the host (workspace/git_view.h):
  // after each process, and at each tool-call boundary while a long-lived one runs.
  // Git content a sync-out would land is checked like the tree first (docs/adr/0014): what is
  // refused is recorded (reason git_content) and stays out of the host repository.
  void SyncGitViews() { ReportGitViewRefusals(git_views_.SyncOut(), "call_boundary", nullptr); }
  // The session's workspace guard: it sweeps after each process and, while one runs, at each
  // call boundary (SweepAtCallBoundary).
  void SetGuard(std::unique_ptr<WorkspaceGuard> guard) { guard_ = std::move(guard); }
  // Network mode proxy: makes the binding a sandbox's listener goes to (the session's proxy,
  // its records). Without one, a proxy-mode launch fails with sandbox_unavailable.
  using EgressBinder = std::function<Result<std::shared_ptr<EgressBinding>>(
      const EgressPolicy& policy, const ProcessRequest& req)>;
  void SetEgress(EgressBinder binder) { egress_ = std::move(binder); }
  // Approvals (issue 34): asked before every launch, before anything is acquired or any time
  // limit starts; an error refuses the launch. The session's rules and its Asker decide.
  using LaunchGate = std::function<Status(const ProcessRequest& req)>;
  void SetLaunchGate(LaunchGate gate) { launch_gate_ = std::move(gate); }
  // The session's redactor, for the cuts of every process's output (it outlives the host).
  void SetRedactor(const Redactor* redactor) { redactor_ = redactor; }
  // Staged mode (docs/adr/0006-staged-workspace.md): where refused entries go and who records
  // them. Staging itself is probed at the first launch that could use it.
  // [audit] before_images: where staged commits keep the files they replace or delete.
  void SetBeforeImages(std::shared_ptr<BeforeImageStore> store) {
    before_images_ = std::move(store);
  }
  // How a final commit's held entries are asked about (issue 34): the session's Asker, through
  // Session::AskHeld. Without it they are quarantined (no one to ask).
  void SetHolding(HoldAsker asker) { hold_asker_ = std::move(asker); }
  // `origin`: this session, as every stage it makes carries it. `recovered`: what the session's
  // first staged launch recovered of the stages killed cordons left (StagedWorkspace::Recover).
  void SetStaging(std::string quarantine, StageOrigin origin, StagedWorkspace::Sink sink,
                  StagedWorkspace::RecoverySink recovered) {
    git_views_.SetCheck(
        [this](const std::string& git_dir, const std::string& view_dir,
               const std::vector<std::string>& changed) {
          return CheckGitView(git_dir, view_dir, changed);
        },
        quarantine);
    stage_quarantine_ = std::move(quarantine);
    stage_origin_ = std::move(origin);
    stage_sink_ = std::move(sink);
    stage_recovered_ = std::move(recovered);
  }
  // A call boundary: long-lived processes' staged changes are committed (staged mode), and what
  // they made meanwhile is swept (direct mode). Fails (sandbox_unavailable) when the sweep could
  // not complete: the call fails with it. `call_changes`: receives what MCP servers' stages
  // committed since the last boundary (the changes of the call that ends here).
  Status SweepAtCallBoundary(std::vector<FileChange>* call_changes = nullptr) {
    if (StagedWorkspace* s = staging_ready_.load()) s->CommitLive(call_changes);
    return guard_ ? guard_->AtCallBoundary() : Status{};
  }
  // serve: foreground processes run in warm sandboxes where they can
  // (docs/adr/0008-warm-sandbox.md); [sandbox] warm = "off" keeps them cold.
  void EnableWarm(bool on) { warm_enabled_ = on; }
  // The user's git identity, given to every process (HostFacts::git_identity).
  void SetGitIdentity(std::vector<std::pair<std::string, std::string>> vars) {
    git_identity_ = std::move(vars);
  }
  // Whether this session's launches are staged, and why not (cordon doctor, records).
  StagingSupport Staging();
  // The jobs of `owner` (ProcessRequest::owner). Another owner's job is not_found, with the
  // same message as an id that never existed: nothing says it exists.
  Json List(const std::string& owner);
  Result<Json> Output(const std::string& owner, const std::string& id, std::size_t max_chars);
  // SIGTERM to every process of the job's sandbox, SIGKILL after its grace (stop_grace_ms), and
  // waits for it; `force`: SIGKILL at once.
  Result<Json> Cancel(const std::string& owner, const std::string& id, bool force = false);
  // Cancels and reaps every running job of `owner` (its MCP session ended).
  void CancelOwned(const std::string& owner);
  // `owner`'s MCP session ended: no job of it starts from now on (a tools/call that raced the
  // session's end gets cancelled, its job ended at once), and its running jobs are cancelled.
  void EndOwner(const std::string& owner);
  bool OwnerEnded(const std::string& owner);

  // --- local_servers and stop_local_server (issue 23).
  struct JobListener {
    std::string job;
    Listener listener;
  };
  // The TCP listeners of `owner`'s running jobs (of job `id` only, when given: not_found for an
  // id that is not the owner's), read through each sandbox's held pid namespace.
  Result<std::vector<JobListener>> Listeners(const std::string& owner,
                                             const std::optional<std::string>& id);
  // Stops a listener job `id` of `owner` started (StopNamespaceListener, with the job's top
  // process group and stop_grace_ms).
  Result<ListenerStopOutcome> StopListener(const std::string& owner, const std::string& id,
                                           pid_t pid, int port);
  // A probe socket made in job `id`'s network namespace (ConfinedProcess::ProbeSocket).
  Result<UniqueFd> ProbeSocket(const std::string& owner, const std::string& id, int family);

  // The JSON every process result shares: exit, signal, timing, output, confinement.
  static Json ResultJson(const ConfinedProcess& p);

  // --- The live table (issue 23): every confined process this host runs now, with its owner.
  struct LiveOwner {
    std::string kind;   // "call" (a foreground call), "job", "server" (a stdio MCP server)
    std::string name;   // the tool, the job id, the server's configured name
    std::string owner;  // ProcessRequest::owner: the MCP session under serve --http
  };
  // One process of a sandbox in the table, as /proc shows it now.
  struct LiveRow {
    LiveOwner owner;
    pid_t sandbox_pid = 0;            // host pid of the sandbox's init
    std::uint64_t pid_namespace = 0;  // the inode of its pid namespace
    double sandbox_elapsed_ms = 0;    // since the sandbox started
    LiveProcess process;
    Json cgroup;  // its sandbox's cgroup now (ConfinedProcess::CgroupNow); null: none
  };
  // The rows `owner` may see: its own calls and jobs, and the configured servers (the
  // session's, shared by its MCP sessions). `cmdline_bytes` of each command line are read.
  std::vector<LiveRow> LiveTable(const std::string& owner, std::size_t cmdline_bytes);

  // The resource monitor (resource_history), started at its first use: a diagnostics call or a
  // job. It samples every owner's processes; readers pick what their owner may see.
  ResourceMonitor& Monitor();

 private:
  // What a change record needs from the launch: the before snapshot and the window.
  struct ChangeWatch {
    std::shared_ptr<Stage> stage;  // staged mode: what the process wrote, until its last commit
    std::shared_ptr<TreeSnapshot> before;
    // A large tree's before side is filled beside the process (docs/adr/0004-change-records.md).
    std::shared_ptr<SnapshotFill> fill;
    std::uint64_t launch_no = 0;
    bool concurrent = false;  // another process was running when this one started
  };
  struct Job {
    std::string owner;
    std::string id;
    ChangeWatch watch;
    std::unique_ptr<ConfinedProcess> proc;
    std::atomic<bool> cancel{false};
    std::thread thread;
    std::mutex join_mu;  // two cancels of one job (process_cancel, its session's end) join once
    void Join() {
      std::lock_guard<std::mutex> lock(join_mu);
      if (thread.joinable()) thread.join();
    }
  };
  Result<std::unique_ptr<ConfinedProcess>> Launch(const ProcessRequest& req, ChangeWatch* watch);
  // Launch, with the stage roots computed once by its first step (a warm retry reuses them).
  Result<std::unique_ptr<ConfinedProcess>> LaunchWithRoots(const ProcessRequest& req,
                                                           ChangeWatch* watch,
                                                           std::vector<std::string> staged_roots);
  // Why `req` runs cold (empty: it may run warm), decided before its plan.
  std::string ColdReason(const ProcessRequest& req, const SandboxHost& host,
                         const std::vector<std::string>& staged_roots);
  // Starts a planned process: in its warm sandbox when req.warm, else a new sandbox.
  Result<std::unique_ptr<ConfinedProcess>> StartProcess(const LaunchPlan& plan,
                                                        LaunchResources resources,
                                                        const ProcessRequest& req,
                                                        const std::string& cold_reason);
  Result<std::unique_ptr<ConfinedProcess>> LaunchStaged(const ProcessRequest& req,
                                                        const LaunchPlan& plan,
                                                        LaunchResources resources,
                                                        ChangeWatch* watch,
                                                        const std::string& cold_reason);
  // A process ended: the sweep (whose walk is the after snapshot), then its record.
  void Ended(ConfinedProcess& p, ChangeWatch& watch, const std::string& job_id,
             bool cancel_requested);

  // The live table's entries; a process is in it from its launch until Run returns (it lives
  // past that: LiveTable reads it under live_mu_).
  struct LiveEntry {
    LiveOwner owner;
    const ConfinedProcess* proc = nullptr;
  };
  std::mutex live_mu_;
  std::map<std::uint64_t, LiveEntry> live_;
  std::uint64_t next_live_ = 0;
  std::uint64_t AddLive(LiveOwner owner, const ConfinedProcess& proc);
  void RemoveLive(std::uint64_t no);
  // Its table entry while a process runs: removed when this goes.
  struct LiveScope {
    ProcessHost* host;
    std::uint64_t no;
    ~LiveScope() { host->RemoveLive(no); }
  };
  LiveOwner OwnerOf(const ProcessRequest& req, const std::string& job_id) const;

  const Policy& policy_;
  const Workspace& workspace_;
  Result<SandboxHost> host_;
  char** envp_;
  Recorder record_;
  GitViews git_views_;  // outlives every job (members go after the destructor's joins)
  // The direct mode's check of what a git view's sync-out would land (GitViewCheck).
  std::vector<GitContentFinding> CheckGitView(const std::string& git_dir,
                                              const std::string& view_dir,
                                              const std::vector<std::string>& changed);
  // Records each refusal (the staged mode's sink, reason git_content) and, for a process's end,
  // puts them in its result's workspace object (exec exits 123 for them as for a staged one).
  void ReportGitViewRefusals(const std::vector<GitViewRefusal>& refused, const char* when,
                             ConfinedProcess* p);
  std::mutex mu_;
  // (owner, id): each owner has its own ids.
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Job>> jobs_;
  // The job of `owner` named `id`, or not_found; mu_ is held.
  Result<Job*> FindJobLocked(const std::string& owner, const std::string& id);
  std::unique_ptr<WorkspaceGuard> guard_;  // outlives the jobs: their threads end in a sweep
  std::map<std::string, int> next_job_;    // per owner
  // Owners whose MCP session ended (EndOwner): one label each, for the session's life.
  std::mutex ended_mu_;
  std::set<std::string> ended_owners_;
  ChangeRecorder changes_;  // the session's hash cache lives here
  std::atomic<std::uint64_t> launches_{0};
  std::atomic<int> running_{0};
  const Redactor* redactor_ = nullptr;
  EgressBinder egress_;
  LaunchGate launch_gate_;
  bool warm_enabled_ = false;
  std::vector<std::pair<std::string, std::string>> git_identity_;
  WarmPool warm_pool_;
  // Staged mode: probed once, made at the first staged launch.
  std::string stage_quarantine_;
  StagedWorkspace::Sink stage_sink_;
  StageOrigin stage_origin_;
  StagedWorkspace::RecoverySink stage_recovered_;
  HoldAsker hold_asker_;
  std::shared_ptr<BeforeImageStore> before_images_;
  std::mutex staging_mu_;
  std::optional<StagingSupport> staging_support_;
  std::unique_ptr<StagedWorkspace> staging_;
  std::atomic<StagedWorkspace*> staging_ready_{nullptr};
  // Made at its first use; stopped first when the host goes.
  std::mutex monitor_mu_;
  std::unique_ptr<ResourceMonitor> monitor_;
  Result<StagedWorkspace*> StagingFor();
  // The roots a launch of `req` stages (empty: the direct mode), or why a policy that requires
  // staging cannot have it.
  Result<std::vector<std::string>> StagingRoots(const ProcessRequest& req, const SandboxHost& host);
};

}  // namespace cordon
