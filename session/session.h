// Session: one agent session's dispatch path (lookup, validate, policy, audit, execute, redact).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit.h"
#include "core/fs.h"
#include "core/redact.h"
#include "policy/asker.h"
#include "policy/decision.h"
#include "policy/policy.h"
#include "runner/git_identity.h"
#include "runner/processes.h"
#include "session/callers.h"
#include "tools/registry.h"
#include "workspace/secret_files.h"

namespace cordon {

// An external tool's name resolved to its server, without talking to the server.
struct ExternalName {
  std::string server;       // the configured server name
  std::string server_tool;  // the tool's own name on that server
};

// Tools that come from outside the registry (configured MCP servers): mcp__{server}__{tool}.
class ExternalTools {
 public:
  virtual ~ExternalTools() = default;
  // Which server a name means; nullopt when no configured server matches. No I/O.
  virtual std::optional<ExternalName> Resolve(std::string_view tool) = 0;
  // MCP-format entries of the visible (trusted, pinned) tools.
  virtual std::vector<Json> Catalog() = 0;
  // The tool's input schema as its server announces it (null when it gives none). Starts the
  // server if needed; refuses an untrusted server and a tool changed since it was pinned.
  virtual Result<Json> InputSchema(const ExternalName& name) = 0;
  // Returns the server's CallToolResult.
  virtual Result<Json> Call(const ExternalName& name, const Json& input,
                            const std::atomic<bool>* cancel) = 0;
  // mcp_server_status: each configured server's state, or the named one's (not_found for a
  // name no server has). Sends the servers nothing. Text a server wrote is not cut here.
  virtual Result<Json> ServerStatus(const std::optional<std::string>& name) = 0;
};

struct SessionOptions {
  std::string workspace = ".";
  std::string audit_log;  // empty: DefaultAuditLogPath
  std::optional<std::string> audit_key_file;
  // --- checkpoint: --audit-signing-key (else policy [audit] signing_key), --audit-witness ---
  std::optional<std::string> audit_signing_key;
  std::optional<std::string> audit_witness;  // FILE, fd:N or syslog
  std::vector<std::string> policy_files;     // --policy
  std::string shipped_policy_dir;            // the repo's / install's policies.d
  std::string client = "cli";                // who drives the session (cli, mcp, ...)
  std::string shim_path;                     // empty: next to the binary
  // --allow-dangerous-workspace: `/` or $HOME may be a writable workspace.
  bool allow_dangerous_workspace = false;
  // serve: foreground processes run in warm sandboxes (docs/adr/0008-warm-sandbox.md).
  bool warm = false;
  // Files of cordon's that other options name (serve's token file, the MCP trust store and user
  // configuration): masked like the audit log and key (runner/mask.h).
  std::vector<std::string> own_files;
  // serve's --network, --allow-domain, --allow-preset, --env, --read and --write: every process
  // run_shell starts begins from this request (ToolContext::process_template).
  ProcessRequest tool_process;
  // serve --timeout: the person running cordon sets every tool's timeout (limits.timeout_secs,
  // in place of each [tools.NAME] timeout_secs); the agent's timeout_secs is honoured below it.
  std::optional<std::int64_t> tool_timeout_secs;
  // --tag (serve, exec, call): the session's tags (NormalizeSessionTag'd), in session_started;
  // every owner's (MCP session's) tags start from them.
  std::vector<std::string> tags;
  // Who an `ask` of [[approvals.rules]] is put to (policy/asker.h): the terminal, the MCP
  // client, nobody. Null: nobody ("no one to ask in this command").
  std::shared_ptr<Asker> asker;
  // serve: an MCP client that declares elicitation in `initialize` is asked through it
  // (mcp/elicitation.h); false under CI=true and --non-interactive.
  bool ask_client = false;
};

// Caps a server's CallToolResult for the agent: text items cut at `cap` bytes with a marker,
// and a structuredContent over 4x the cap dropped. Returns whether anything was cut.
bool CapToolResult(Json& result, std::size_t cap);
// Caps a built-in tool's structured result before it is rendered: every string longer than
// `cap` bytes is cut with the same marker, so the text stays the JSON of structuredContent.
// Returns whether anything was cut.
bool CapStructuredResult(Json& structured, std::size_t cap);

// What a question about held entries says (session/approvals.cc), for the session's question
// and `cordon approvals` alike: the paths with their operations, one line each, cut at 2 KiB
// with how many more; and the unified diff of their contents (not redacted), ending once it has
// passed `stop_after` bytes, with *files the files it covers.
std::string HeldSubject(std::span<const HeldEntry> entries);
std::string HeldDiff(const HeldQuestion& held, std::size_t stop_after, std::size_t* files);

// What the redactor knows before anything is read or run: the policy's rules and values, the
// secret-looking environment, the named variables, the user's credential stores. Returns
// session_started's `redaction`. (Also `cordon approvals show`'s, for the diff it prints.)
Result<Json> SetUpRedactor(Redactor& redactor, const Policy& policy, char** envp);

class Session {
 public:
  // The MCP server's asker, once the client's capabilities are known (mcp/elicitation.h).
  void SetAsker(std::shared_ptr<Asker> asker) {
    std::lock_guard lock(ask_mu_);
    asker_ = std::move(asker);
  }
  bool ask_client() const { return ask_client_; }
  static Result<std::unique_ptr<Session>> Start(const SessionOptions& options, char** envp);
  ~Session();

  // Runs one tool call through the pipeline (Run); always returns a CallToolResult (errors are
  // isError results). `owner`: the MCP session that makes the call under `serve --http` (its
  // label, in tool_started.mcp_session); it owns the jobs the call starts, and sees no other's.
  Json Call(const std::string& tool, const Json& input, const std::atomic<bool>* cancel = nullptr,
            const std::string& owner = "");
  // As Call, with the input given up: the tool may take its values (a run_shell's arguments are
  // then held once, by its process).
  Json Call(const std::string& tool, Json&& input, const std::atomic<bool>* cancel = nullptr,
            const std::string& owner = "");
  // As Call, but parses the JSON text first (bounded: size, depth).
  Json CallJsonText(const std::string& tool, std::string_view input_text);

  // The tools whose scopes the policy grants.
  std::vector<const ToolSpec*> Catalog() const;
  // tools/list's entries: the granted built-in tools, then the configured servers' visible
  // tools when mcp:call is granted.
  Json McpToolList();
  // Whether this call is a few milliseconds of CPU work at most (ToolSpec::quick): cordon serve
  // runs it on its reading thread. False for any tool that is not built in.
  bool IsQuick(const std::string& tool, const Json& input) const;

  const Policy& policy() const { return policy_; }
  const Workspace& workspace() const { return workspace_; }
  const std::string& audit_path() const { return audit_->path(); }
  const Redactor& redactor() const { return redactor_; }

  // Writes session_finished (also done by the destructor if not called).
  void Finish();
  ProcessHost& processes() { return *processes_; }
  // An MCP session of `serve --http` ended (`owner`, its label): its jobs are cancelled (and
  // none starts any more), and what the session kept for it (usage, traces, tags) is freed.
  void EndOwner(const std::string& owner);
  // The caller of this label (session/callers.h): what a call made outside Call (cordon wrap's
  // forwarded requests) is numbered and kept under.
  std::shared_ptr<Caller> CallerFor(const std::string& label);
  void SetExternalTools(ExternalTools* external) { external_ = external; }
  // Adds a value (e.g. an MCP server's configured header) to redact from output and records.
  void AddRedaction(std::string rule, std::string value) {
    redactor_.AddValue(std::move(rule), std::move(value));
  }
  ExternalTools* external_tools() { return external_; }
  // Appends a catalog record (audit/records.h). --- failclosed: a record written before an act
  // (kBeforeAct) that fails means the act must not start (audit_unavailable is returned). Any
  // other failed write poisons the session: every later call fails with audit_unavailable,
  // naming the log and the errno, and the writer records a `gap` as soon as it can.
  Status Audit(const AuditRecord& record, bool durable,
               AuditWriter::When when = AuditWriter::When::kAfterAct);
  // Several records, written together in order (one lock, one write).
  Status AuditAll(std::span<const AuditRecord> records, bool durable,
                  AuditWriter::When when = AuditWriter::When::kAfterAct);
  // Why the session takes no further calls, if it does not.
  std::optional<Error> poisoned() const;
  // The session's egress proxy (docs/adr/0005-egress-proxy.md), started on first use; every
  // proxied sandbox of the session has its own listener on it.
  Result<std::shared_ptr<EgressProxy>> Egress();
  // A binding for one sandbox (or read_url): its connections become `network` records.
  Result<std::shared_ptr<EgressBinding>> BindEgress(const EgressPolicy& policy,
                                                    std::string identity);

 private:
  friend class Call;
  friend class CallServices;
  Session() = default;

  Policy policy_;
  Workspace workspace_;
  Redactor redactor_;
  std::optional<AuditWriter> audit_;
  mutable std::mutex audit_mu_;
  std::optional<Error> poisoned_;  // --- failclosed: set by a failed after-act write
  // Says on stderr that the log could not take `what` (a record, a checkpoint) and poisons the
  // session; returns the error for the caller. audit_mu_ is held.
  Error PoisonLocked(const Error& e, const std::string& what);
  // Before processes_: the bindings of its processes release their listeners on it.
  std::mutex egress_mu_;
  std::shared_ptr<EgressProxy> egress_;
  // What the proxy's threads write records through; Finish closes it before session_finished.
  struct NetworkGate {
    std::mutex mu;
    Session* session = nullptr;
  };
  std::shared_ptr<NetworkGate> network_gate_ = std::make_shared<NetworkGate>();
  void RecordNetwork(const NetworkEvent& e);
  // read_url's binding (its rules: EgressFor "read_url"), made on its first call.
  std::mutex read_url_mu_;
  std::shared_ptr<EgressBinding> read_url_egress_;
  Result<std::shared_ptr<EgressBinding>> ReadUrlEgress();
  std::unique_ptr<ProcessHost> processes_;
  // [audit] before_images: the file tools' and staged commits' store. Null: off.
  std::shared_ptr<BeforeImageStore> before_images_;
  ProcessRequest tool_process_;  // SessionOptions::tool_process
  ExternalTools* external_ = nullptr;
  // --- approvals (issue 34, session/approvals.cc) ---
  std::shared_ptr<Asker> asker_;
  bool ask_client_ = false;
  std::mutex ask_mu_;  // one question at a time: a terminal has one reader
  std::mutex approvals_mu_;
  // Per caller (MCP session) label: rule id -> the approval whose `session` answer holds.
  std::map<std::string, std::map<std::string, std::string>> kept_approvals_;
  std::atomic<std::uint64_t> approvals_{0};
  // Puts the question an `ask` decision raised to the Asker (or finds a kept `session` answer),
  // writes the approval record before anything it allows, and says whether to go on: an error
  // names the rule, who could not be asked and the line that allows it.
  Status Approve(const Decision& d, ApprovalQuestion q, std::uint64_t call,
                 const std::string& owner, std::string* approval_id = nullptr);
  // A final commit's held entries (workspace/staging.h): one question with the paths, their
  // operations and a redacted diff; the answer the stage applies.
  HeldAnswer AskHeld(const HeldQuestion& q);
  // A decision of the approval rules (allow, ask or deny) for a launch or a write: a deny is
  // recorded as policy_denied, an ask goes to Approve.
  Status Settle(const Decision& d, ApprovalQuestion q, std::uint64_t call,
                const std::string& owner);
  // ProcessHost's launch gate: the argv rules for run_shell, its jobs and exec.
  Status GateLaunch(const ProcessRequest& req);
  // The pipeline for one call (session/call.h): `input` is the parsed input, or why it could
  // not be parsed.
  Json Run(const std::string& tool, const Result<const Json*>& input, std::size_t input_bytes,
           const std::atomic<bool>* cancel, const std::string& owner, Json* consumable = nullptr);
  void RecordProcess(const ConfinedProcess& p, const std::string& job_id, bool cancel_requested,
                     const Json& changes);
  // Each caller's tags, usage and ended flag (session/callers.h), from options' tags.
  std::unique_ptr<Callers> callers_;
  // Start's last steps: session_started (built, then written by EnsureStarted), then the
  // process host.
  void PrepareStarted(const SessionOptions& options, Json redaction, const GitIdentity& identity,
                      const Result<SandboxHost>& host);
  // The workspace's secret-file scan, on its own thread beside the session: the redactor is
  // held until it ends (docs/adr/0012-secret-scan-beside-the-session.md).
  void StartSecretScan();
  // Writes session_started once the scan is known (waiting for it); every record comes after.
  // The error of that write, or of the scan, for every record the session would write.
  Status EnsureStarted();
  Status WriteStartedLocked();
  // AuditAll's write, without EnsureStarted.
  Status Append(std::span<const AuditRecord> records, bool durable, AuditWriter::When when);
  void StartProcessHost(Result<SandboxHost> host, char** envp, const GitIdentity& identity,
                        bool warm, const std::string& session_id);
  // Records what recovery did with each stage killed cordons left (session/stage_recovery.cc):
  // in the log of the session that staged it, or, where that log cannot take it, in this one
  // with a copy in `quarantine`; one line on stderr per stage.
  void RecordRecoveries(std::vector<StageRecovery> done, const std::string& quarantine);
  // session_diff: this log's changes made by `caller`'s calls numbered from..to.
  Result<Json> OwnDiff(const Caller& caller, std::uint64_t from, std::uint64_t to);
  std::atomic<std::uint64_t> calls_{0};  // calls may run concurrently (cordon serve)
  std::atomic<std::uint64_t> errors_{0};
  bool finished_ = false;
  // After workspace_ and policy_, which the scan's thread reads; joined by EnsureStarted, or by
  // the destructor (a Start that failed: scan_stop_ ends it early).
  SessionStartedRecord pending_started_;
  std::mutex started_mu_;  // guards what follows, up to scan_result_
  std::condition_variable started_cv_;
  bool prepared_ = false;            // Start built session_started
  bool scan_done_ = true;            // no scan, or it ended
  std::vector<AuditRecord> queued_;  // records that wait for session_started (AuditAll)
  std::atomic<bool> started_written_{false};
  Status started_status_;             // set before started_written_
  std::optional<Error> scan_failed_;  // likewise
  bool started_in_log_ = false;
  std::string started_knowledge_;  // the SHA-256 session_started names
  std::atomic<bool> scan_stop_{false};
  std::optional<Result<SecretScan>> scan_result_;  // written by the scan's thread
  std::thread scan_thread_;
};

}  // namespace cordon
