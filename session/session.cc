// A session: its policy, workspace, audit log and processes, and the one call pipeline (Run).
#include "session/session.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "audit/diff.h"
#include "audit/knowledge.h"
#include "core/hash.h"
#include "core/version.h"
#include "runner/capture.h"
#include "runner/git_identity.h"
#include "runner/host_probe.h"
#include "runner/mask.h"
#include "session/call.h"
#include "tools/schema.h"
#include "workspace/credential_stores.h"
#include "workspace/secret_files.h"

namespace cordon {
namespace {

Result<std::string> ReadAuditKey(const std::string& path) {
  ASSIGN_OR_RETURN(std::string key, ReadKeyFile(path));
  if (key.size() < 16) {
    return Fail(Code::kInvalidInput, "audit key file " + path + " holds fewer than 16 bytes");
  }
  return key;
}

std::string HomeDir() {
  const char* home = std::getenv("HOME");
  return home != nullptr ? home : "/nonexistent";
}

std::string Octal(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%o", static_cast<unsigned>(mode));
  return buf;
}

AuditRecord GuardRecord(const GuardEvent& e) {
  std::optional<std::string> error;
  if (!e.error.empty()) error = e.error;
  if (e.kind == GuardEvent::Kind::kSetuidStripped) {
    return SetuidStrippedRecord{.path = e.path,
                                .mode_before = Octal(e.mode_before),
                                .mode_after = Octal(e.mode_after),
                                .when = e.when,
                                .error = error};
  }
  std::optional<std::string> reason;
  if (!e.reason.empty()) reason = e.reason;
  return ProtectedPathRemovedRecord{
      .path = e.path,
      .kind = e.entry_kind,
      .quarantine = e.quarantine,
      .when = e.when,
      .error = error,
      .reason = reason,
      .git = e.git.is_null() ? std::nullopt : std::optional<Json>(e.git)};
}

// --- checkpoint: the workspace repository's HEAD, read from .git without a git binary ---
std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  return text;
}

bool IsHexId(const std::string& s) {
  return (s.size() == 40 || s.size() == 64) &&
         s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::optional<Json> GitHead(const std::string& workspace) {
  std::string gitdir = workspace + "/.git";
  if (std::string link = ReadSmallFile(gitdir); link.rfind("gitdir: ", 0) == 0) {
    gitdir = link.substr(8);  // a worktree or submodule: .git is a file naming the real dir
    if (!gitdir.empty() && gitdir[0] != '/') gitdir = workspace + "/" + gitdir;
  }
  const std::string head = ReadSmallFile(gitdir + "/HEAD");
  if (head.empty()) return std::nullopt;
  if (IsHexId(head)) return Json{{"head", head}, {"branch", nullptr}};  // detached
  if (head.rfind("ref: ", 0) != 0) return std::nullopt;
  const std::string ref = head.substr(5);
  std::string common = gitdir;
  if (std::string c = ReadSmallFile(gitdir + "/commondir"); !c.empty()) {
    common = c[0] == '/' ? c : gitdir + "/" + c;
  }
  std::string id;
  for (const std::string& dir : {gitdir, common}) {
    if (std::string v = ReadSmallFile(dir + "/" + ref); IsHexId(v)) {
      id = v;
      break;
    }
  }
  if (id.empty()) {
    std::ifstream packed(common + "/packed-refs");
    std::string line;
    while (std::getline(packed, line)) {
      if (line.size() > 41 && line.substr(line.find(' ') + 1) == ref) {
        id = line.substr(0, line.find(' '));
        break;
      }
    }
  }
  Json j = {{"branch", ref.rfind("refs/heads/", 0) == 0 ? ref.substr(11) : ref}};
  j["head"] = IsHexId(id) ? Json(id) : Json(nullptr);  // null: a branch with no commit yet
  return j;
}

}  // namespace

namespace {

// The policy the session runs under: its layers, then serve --timeout over every tool's.
Result<Policy> LoadSessionPolicy(const SessionOptions& options, const PolicySources& sources) {
  ASSIGN_OR_RETURN(Policy policy, LoadPolicy(sources));
  if (options.tool_timeout_secs) {
    // The person running cordon (serve --timeout), as exec --timeout: any value, for every tool.
    const std::string t = std::to_string(*options.tool_timeout_secs);
    policy.limits.timeout_secs = *options.tool_timeout_secs;
    for (auto& [name, tool] : policy.tools) tool.limits.erase("timeout_secs");
    policy.provenance["limits.timeout_secs"] = "--timeout " + t;
    policy.notes.push_back("--timeout " + t + ": every tool's timeout is " + t +
                           " s (limits.timeout_secs, in place of [tools.NAME] timeout_secs)");
  }
  return policy;
}

}  // namespace

// What the redactor knows before anything is read or run: the policy's rules and values, the
// secret-looking environment, the named variables, the user's credential stores. (The
// workspace's secret files are scanned beside the session: Session::StartSecretScan.) Returns
// session_started's `redaction`.
Result<Json> SetUpRedactor(Redactor& redactor, const Policy& policy, char** envp) {
  redactor.SetRules(policy.compiled_redact_rules);
  redactor.AddSecretEnvironment(envp);
  for (const auto& v : policy.redact_values) redactor.AddValue("policy", v);
  for (const auto& [name, value] : policy.env.set) {
    if (Redactor::IsSecretName(name)) redactor.AddValue("env", value);
  }
  for (const auto& name : policy.redact_env_names) {
    for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      if (entry.size() > name.size() && entry.substr(0, name.size()) == name &&
          entry[name.size()] == '=') {
        redactor.AddValue("env", std::string(entry.substr(name.size() + 1)));
      }
    }
  }
  Json redaction_json = {
      {"rules", policy.compiled_redact_rules ? policy.compiled_redact_rules->size() : 0}};
  if (!policy.redact_credential_stores.empty()) {
    const CredentialScan stores = ReadCredentialStores(policy.redact_credential_stores, HomeDir());
    for (const auto& v : stores.values) redactor.AddCredential(v);
    redaction_json["credential_stores"] = stores.ToJson();
  }
  return redaction_json;
}

namespace {

// A weaker mode is never chosen silently: once per session, on stderr (MCP's stdout is
// untouched), and in every process record's confinement.
void SayWeakerMode(const Result<SandboxHost>& host) {
  if (!host || host->mode == SandboxMode::kBwrap) return;
  std::string losses;
  for (const auto& l : host->losses) losses += "\n  - " + l;
  std::fprintf(stderr,
               "cordon: the full sandbox cannot run here (%s); [sandbox] allow_weaker = true, "
               "so commands run in the weaker mode %s, which gives up:%s\n",
               host->weaker_reason.c_str(),
               std::string(Name(kSandboxModeNames, host->mode)).c_str(), losses.c_str());
}

// --- failclosed: cordon's audit files (log, keys, witness), refused at start when a confined
// process could reach them. Masks work by path: a second name (hard link) of one of them could
// lie inside a writable root, where no mask covers it: refused before anything is opened. (A key
// other users can read is refused by its one reader, ReadKeyFileChecked.) With bwrap, each own
// file is masked (a bind over it) wherever it lies, and the file tools refuse it. Without bwrap
// (the weaker mode), Landlock grants a writable root as a whole: an own file under one could be
// written, so the session does not start.
Status CheckAuditFiles(const std::vector<std::pair<std::string, std::string>>& audit_files,
                       const SessionOptions& options, const Policy& policy,
                       const Workspace& workspace, const Result<SandboxHost>& host) {
  for (const auto& [what, file] : audit_files) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (st.st_nlink > 1) {
      return Fail(Code::kDeniedByPolicy,
                  what + " " + file + " has " + std::to_string(st.st_nlink) +
                      " hard links: cordon masks its own files by path, so another name "
                      "for it could be reachable from the sandbox; remove the other links");
    }
  }
  if (!host || !host->weaker) return {};
  const std::vector<std::string> roots = WritableRoots(policy, workspace.root(), HomeDir());
  std::vector<std::pair<std::string, std::string>> named = audit_files;
  for (const auto& f : options.own_files) named.emplace_back("cordon's own file", f);
  for (const auto& [what, file] : named) {
    if (const std::string* root = UnderAny(CanonicalPath(file), roots)) {
      return Fail(Code::kDeniedByPolicy,
                  what + " " + file + " lies under the writable root " + *root +
                      ", and without bwrap (" + host->weaker_reason +
                      ") cordon cannot mask it from confined processes, which could write it; "
                      "put it outside the writable roots");
    }
  }
  return {};
}

// --- checkpoint: the signing key (its PEM text joins the redactor) and the witness ---
Result<CheckpointConfig> LoadCheckpoints(const Policy& policy, const SessionOptions& options,
                                         const std::string& signing_key, Redactor& redactor) {
  CheckpointConfig checkpoints;
  checkpoints.every_records = static_cast<std::uint64_t>(policy.audit_checkpoint_records);
  checkpoints.every_seconds = policy.audit_checkpoint_seconds;
  if (!signing_key.empty()) {
    std::string pem;
    ASSIGN_OR_RETURN(Ed25519Key k, Ed25519Key::LoadPrivate(signing_key, &pem));
    redactor.AddValue("audit_signing_key", pem);
    std::istringstream lines(pem);
    for (std::string l; std::getline(lines, l);) {
      if (l.rfind("-----", 0) != 0) redactor.AddValue("audit_signing_key", l);
    }
    checkpoints.key = std::make_shared<const Ed25519Key>(std::move(k));
  }
  if (options.audit_witness) {
    ASSIGN_OR_RETURN(checkpoints.witness, AuditWitness::Open(*options.audit_witness));
  }
  return checkpoints;
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Start(const SessionOptions& options, char** envp) {
  auto s = std::unique_ptr<Session>(new Session());
  s->callers_ = std::make_unique<Callers>(options.tags);
  ASSIGN_OR_RETURN(s->workspace_, Workspace::Open(options.workspace));
  PolicySources sources = DefaultPolicySources(options.shipped_policy_dir, s->workspace_.root());
  sources.extra_files = options.policy_files;
  ASSIGN_OR_RETURN(s->policy_, LoadSessionPolicy(options, sources));
  s->tool_process_ = options.tool_process;
  s->asker_ = options.asker;
  s->ask_client_ = options.ask_client;
  ASSIGN_OR_RETURN(Json redaction_json, SetUpRedactor(s->redactor_, s->policy_, envp));
  if (s->policy_.redact_scan_files) s->StartSecretScan();
  std::optional<std::string> key;
  if (options.audit_key_file) {
    ASSIGN_OR_RETURN(key, ReadAuditKey(*options.audit_key_file));
  }
  const std::string session_id = NewSessionId();
  const std::string path =
      options.audit_log.empty() ? DefaultAuditLogPath(session_id) : options.audit_log;
  // The one host probe of the session: recorded in session_started, then used for every process.
  auto host = PrepareSandboxHost(s->policy_, options.shim_path);
  SayWeakerMode(host);
  const std::string signing_key = options.audit_signing_key.value_or(s->policy_.audit_signing_key);
  std::vector<std::pair<std::string, std::string>> audit_files = {{"the audit log", path}};
  if (options.audit_key_file) audit_files.emplace_back("the audit key", *options.audit_key_file);
  if (!signing_key.empty()) audit_files.emplace_back("the audit signing key", signing_key);
  if (options.audit_witness && !AuditWitness::FilePath(*options.audit_witness).empty()) {
    audit_files.emplace_back("the audit witness", *options.audit_witness);
  }
  TRY(CheckAuditFiles(audit_files, options, s->policy_, s->workspace_, host));
  ASSIGN_OR_RETURN(CheckpointConfig checkpoints,
                   LoadCheckpoints(s->policy_, options, signing_key, s->redactor_));
  // [audit] arguments: whether this session's log keeps argument text (redacted) or not.
  redaction_json["arguments"] = s->policy_.audit_arguments_hashed ? "hashed" : "redacted";
  const std::string witness_path = checkpoints.witness ? checkpoints.witness->path() : "";
  ASSIGN_OR_RETURN(AuditWriter writer,
                   AuditWriter::Open(path, session_id, s->policy_.audit_fsync, std::move(key),
                                     &s->redactor_, std::move(checkpoints)));
  s->audit_.emplace(std::move(writer));
  if (s->policy_.audit_arguments_hashed) s->audit_->HashArguments(s->workspace_.root());
  // cordon's own files, masked from every confined process and refused by the file tools:
  // the policy layers it read (the shipped ones excepted: they are part of the installation),
  // the audit log and its key, and whatever else the caller names.
  std::vector<std::string> own = options.own_files;
  own.push_back(path);
  if (options.audit_key_file) own.push_back(*options.audit_key_file);
  if (!signing_key.empty()) own.push_back(signing_key);
  if (!witness_path.empty()) own.push_back(witness_path);
  for (std::size_t i = 1; i < sources.dirs.size(); ++i) own.push_back(sources.dirs[i]);
  own.insert(own.end(), sources.extra_files.begin(), sources.extra_files.end());
  s->policy_.own_paths = CordonOwnPaths(own);
  if (options.allow_dangerous_workspace) s->policy_.allow_dangerous_workspace = true;
  const GitIdentity git_identity = ReadGitIdentity(envp);
  s->PrepareStarted(options, std::move(redaction_json), git_identity, host);
  // Once the scan is known (now, without a scan beside the session), session_started is
  // written: a log that cannot take it then refuses the session here.
  {
    std::lock_guard<std::mutex> lock(s->started_mu_);
    s->prepared_ = true;
    if (s->scan_done_) TRY(s->WriteStartedLocked());
  }
  s->StartProcessHost(std::move(host), envp, git_identity, options.warm, session_id);
  return s;
}

// --- failclosed: the workspace's secret files are scanned beside the session (issue 32,
// docs/adr/0012-secret-scan-beside-the-session.md). The redactor is held: anything it would
// show waits for the scan's lines (core/redact.h Redactor::Hold), and so does every record
// after session_started, which is written once the scan is known (EnsureStarted). The scan
// reads with its own redactor of the same rules: the session's is held.
void Session::StartSecretScan() {
  redactor_.Hold();
  auto scan = [this, shapes = Redactor(policy_.compiled_redact_rules)] {
    Result<SecretScan> r = Fail(Code::kInternal, "the scan gave no result");
    try {
      r = ScanSecretFiles(workspace_.fd(), shapes, SecretScanLimits{},
                          SecretScanCacheFile(workspace_.root()), &scan_stop_);
    } catch (const std::exception& e) {
      r = Fail(Code::kInternal, e.what());
    }
    if (r) {
      redactor_.Release(r->lines);
    } else {
      redactor_.ReleaseFailed();
    }
    // session_started (and the records waiting for it) as soon as both the scan and the start
    // are done: by this thread when the start finished first, else by the start.
    std::lock_guard<std::mutex> lock(started_mu_);
    scan_result_ = std::move(r);
    scan_done_ = true;
    started_cv_.notify_all();
    if (prepared_ && !started_written_.load()) (void)WriteStartedLocked();
  };
  scan_done_ = false;
  try {
    scan_thread_ = std::thread(scan);
  } catch (const std::system_error&) {
    scan();  // no thread to spare: the start waits for the scan, as it did before
  }
}

Status Session::EnsureStarted() {
  if (started_written_.load(std::memory_order_acquire)) return started_status_;
  std::unique_lock<std::mutex> lock(started_mu_);
  started_cv_.wait(lock, [&] { return scan_done_ && prepared_; });
  if (started_written_.load(std::memory_order_relaxed)) return started_status_;
  return WriteStartedLocked();
}

// session_started, once, with what the scan found and the redaction knowledge it completes;
// then the records that waited for it. started_mu_ is held.
Status Session::WriteStartedLocked() {
  Json& redaction = *pending_started_.redaction;
  std::optional<Error> scan_failed;
  if (scan_result_ && *scan_result_) {
    const SecretScan& scan = **scan_result_;
    // Nothing past the cap silently unknown: the record says `truncated`, and so does stderr.
    if (scan.truncated) {
      std::fprintf(stderr,
                   "cordon: the secret-file scan of %s stopped at a limit (%zu entries, %zu bytes "
                   "read): lines of the secret files beyond it are hidden only where a rule finds "
                   "them; deny or move the large trees it walked (SECURITY.md, \"Files the scan "
                   "does not reach\")\n",
                   workspace_.root().c_str(), scan.entries, scan.read_bytes);
    }
    redaction["secret_files"] = scan.ToJson();
  } else if (scan_result_) {
    scan_failed =
        Error{Code::kInternal,
              "the secret-file scan of " + workspace_.root() + " failed (" +
                  scan_result_->error().message + "): every output of this session is withheld",
              0, workspace_.root()};
    redaction["secret_files"] = Json{{"error", scan_failed->message}};
    std::fprintf(stderr, "cordon: %s\n", scan_failed->message.c_str());
  }
  // What the redactor now knows by value, kept (as hashes) for the readers that show file
  // content after the session (audit diff): they hide what it hid.
  if (auto known = StoreRedactionKnowledge(redactor_, RedactionKnowledgeDir())) {
    started_knowledge_ = (*known)["sha256"].get<std::string>();
    redaction["knowledge"] = std::move(*known);
  } else {
    redaction["knowledge"] = Json{{"error", known.error().message}};
    std::fprintf(stderr, "cordon: %s; `cordon audit diff` will withhold this session's diffs\n",
                 known.error().message.c_str());
  }
  pending_started_.git = GitHead(workspace_.root());
  const AuditRecord record = pending_started_;
  Status st = Append(std::span<const AuditRecord>(&record, 1), true, AuditWriter::When::kBeforeAct);
  started_in_log_ = st.has_value();
  if (st && !queued_.empty()) st = Append(queued_, false, AuditWriter::When::kAfterAct);
  queued_.clear();
  scan_failed_ = scan_failed;
  started_status_ = st;
  started_written_.store(true, std::memory_order_release);
  return st;
}

// session_started comes before anything the session does (exec runs its command right after):
// it makes the first reservation, and a log that cannot take it refuses the session. Built
// here; written by EnsureStarted.
void Session::PrepareStarted(const SessionOptions& options, Json redaction,
                             const GitIdentity& git_identity, const Result<SandboxHost>& host) {
  SessionStartedRecord started{.cordon_version = kCordonVersion,
                               .client = options.client,
                               .workspace = workspace_.root(),
                               .chain = audit_->keyed() ? "hmac-sha256" : "sha256",
                               .policy_sha256 = policy_.Sha256(),
                               .policy_notes = policy_.notes,
                               .scopes = policy_.scopes,
                               .confinement = ProbeConfinementJson(ProbeConfinement())};
  started.redaction = std::move(redaction);
  if (!options.tags.empty()) started.tags = options.tags;
  if (!policy_.env.empty()) {
    Json set = Json::array();
    for (const auto& [name, value] : policy_.env.set) set.push_back(name);
    started.env = Json{{"pass", policy_.env.pass}, {"deny", policy_.env.deny}, {"set", set}};
  }
  // Inside, HOME is the sandbox's: without the user's identity `git commit` fails.
  started.git_identity = GitIdentityJson(git_identity, policy_.env);
  for (const auto& f : policy_.files) {
    started.policy_files.push_back({{"path", f.path}, {"sha256", f.sha256}, {"layer", f.layer}});
  }
  started.sandbox =
      host ? host->ToJson() : Json{{"available", false}, {"error", host.error().message}};
  pending_started_ = std::move(started);
}

// The session's processes: their records, redaction, before-images, warm sandboxes, git
// identity, egress bindings, the workspace guard and staging's refusals.
void Session::StartProcessHost(Result<SandboxHost> host, char** envp,
                               const GitIdentity& git_identity, bool warm,
                               const std::string& session_id) {
  Session* raw = this;
  processes_ = std::make_unique<ProcessHost>(
      policy_, workspace_, std::move(host), envp,
      [raw](const ConfinedProcess& p, const std::string& job_id, bool cancel_requested,
            const Json& changes) { raw->RecordProcess(p, job_id, cancel_requested, changes); });
  processes_->SetRedactor(&redactor_);  // output cuts never split a secret
  if (policy_.audit_before_images) {
    before_images_ = std::make_shared<BeforeImageStore>(
        BeforeImageStore::DefaultDir(),
        BeforeImageLimits{.max_file_bytes = static_cast<std::uint64_t>(
                              policy_.audit_before_images_max_file_bytes),
                          .max_session_bytes = static_cast<std::uint64_t>(
                              policy_.audit_before_images_max_session_bytes)});
    processes_->SetBeforeImages(before_images_);
  }
  processes_->EnableWarm(warm);
  processes_->SetGitIdentity(GitIdentityVariables(git_identity, policy_.env));
  network_gate_->session = raw;
  processes_->SetLaunchGate([raw](const ProcessRequest& req) { return raw->GateLaunch(req); });
  processes_->SetHolding([raw](const HeldQuestion& q) { return raw->AskHeld(q); });
  processes_->SetEgress([raw](const EgressPolicy& policy, const ProcessRequest& req) {
    std::string identity = req.egress_identity.empty() ? "tool " + req.tool : req.egress_identity;
    return raw->BindEgress(policy, std::move(identity));
  });
  processes_->SetGuard(std::make_unique<WorkspaceGuard>(
      WritableRoots(policy_, workspace_.root(), HomeDir()), GuardOptions::From(policy_),
      CordonStateDir() + "/quarantine/" + session_id,
      [raw](const GuardEvent& e) { (void)raw->Audit(GuardRecord(e), true); }));
  // Staged mode's refusals are recorded the same way (docs/adr/0006-staged-workspace.md). Every
  // stage carries this session's rules and names it; what a later start recovers of a stage is
  // recorded in the log of the session that staged it.
  const std::string quarantine = CordonStateDir() + "/quarantine/" + session_id;
  // Absolute: the cordon that recovers a stage may run in another directory.
  std::string audit_log = audit_ ? audit_->path() : std::string();
  std::error_code ec;
  if (auto abs = std::filesystem::absolute(audit_log, ec); !ec && !audit_log.empty())
    audit_log = abs.string();
  processes_->SetStaging(
      quarantine,
      StageOrigin{.session = session_id, .audit_log = audit_log, .policy_sha256 = policy_.Sha256()},
      [raw](const GuardEvent& e) { (void)raw->Audit(GuardRecord(e), true); },
      [raw, quarantine](std::vector<StageRecovery> done) {
        raw->RecordRecoveries(std::move(done), quarantine);
      });
}

Session::~Session() {
  scan_stop_ = !prepared_;  // a session that never started (Start failed) stops its scan
  Finish();
  if (scan_thread_.joinable()) scan_thread_.join();
}

void Session::Finish() {
  if (finished_ || !audit_ || !prepared_) return;
  finished_ = true;
  // No session_finished for a session whose start is not in the log.
  if (Status st = EnsureStarted(); !st && !started_in_log_) return;
  processes_.reset();  // cancels and reaps background jobs; their records come first
  {
    // The proxy's last connections (read_url's) end now, and nothing is recorded after this.
    std::shared_ptr<EgressProxy> proxy;
    {
      std::lock_guard<std::mutex> lock(egress_mu_);
      proxy = std::move(egress_);
    }
    proxy.reset();
    std::lock_guard<std::mutex> lock(network_gate_->mu);
    network_gate_->session = nullptr;
  }
  SessionFinishedRecord finished{
      .calls = calls_.load(), .errors = errors_.load(), .git = GitHead(workspace_.root())};
  // What the redactor learned after session_started (the secrets the agent wrote through the
  // file tools, a server's header values), kept for audit diff as session_started's was.
  if (auto known = StoreRedactionKnowledge(redactor_, RedactionKnowledgeDir())) {
    if ((*known)["sha256"].get<std::string>() != started_knowledge_) finished.knowledge = *known;
  } else {
    finished.knowledge = Json{{"error", known.error().message}};
    std::fprintf(stderr, "cordon: %s; `cordon audit diff` will withhold this session's diffs\n",
                 known.error().message.c_str());
  }
  (void)Audit(finished, true);
  // --- checkpoint: every session's end is signed ---
  {
    std::lock_guard<std::mutex> lock(audit_mu_);
    if (auto st = audit_->Checkpoint(true); !st) PoisonLocked(st.error(), "a checkpoint");
  }
  // The session's end makes every durable record durable: nothing is left in flight.
  if (auto st = audit_->Flush(); !st) {
    std::fprintf(stderr, "cordon: audit write failed: %s\n", st.error().ToString().c_str());
  }
}

Status Session::Audit(const AuditRecord& record, bool durable, AuditWriter::When when) {
  return AuditAll(std::span<const AuditRecord>(&record, 1), durable, when);
}

Status Session::AuditAll(std::span<const AuditRecord> records, bool durable,
                         AuditWriter::When when) {
  if (!audit_) return {};
  if (!started_written_.load(std::memory_order_acquire)) {
    // Before session_started is written (the scan beside the session runs): a record of no act
    // that may be lost in a crash anyway (not durable: the MCP handshake's mcp_client) waits
    // in memory and is written right after it; any other waits for it here.
    std::unique_lock<std::mutex> lock(started_mu_);
    if (!started_written_.load(std::memory_order_relaxed) && !durable &&
        when == AuditWriter::When::kAfterAct) {
      queued_.insert(queued_.end(), records.begin(), records.end());
      return {};
    }
    lock.unlock();
    TRY(EnsureStarted());
  }
  TRY(started_status_);
  // --- failclosed: after a failed scan no act starts (every output would be withheld anyway).
  if (scan_failed_ && when == AuditWriter::When::kBeforeAct) return std::unexpected(*scan_failed_);
  return Append(records, durable, when);
}

Status Session::Append(std::span<const AuditRecord> records, bool durable, AuditWriter::When when) {
  std::lock_guard<std::mutex> lock(audit_mu_);
  auto st = audit_->AppendAll(records, durable, when);
  if (st) {
    // --- checkpoint: every N records or T seconds ---
    // --- failclosed: the records are in the log, so the act they record has happened; a
    // checkpoint that cannot be written poisons the session like any record after an act.
    if (auto c = audit_->Checkpoint(false); !c) PoisonLocked(c.error(), "a checkpoint");
    return {};
  }
  // --- failclosed: losing the audit trail must be loud, and must stop the session when an
  // act already happened (or the log was deleted or replaced under it).
  const Error& e = st.error();
  if (when == AuditWriter::When::kAfterAct || audit_->detached()) {
    return std::unexpected(PoisonLocked(e, "a record"));
  }
  std::string message = "the audit log " + audit_->path() + " could not take a record (" +
                        e.message + (e.err != 0 ? ", errno " + std::to_string(e.err) : "") + ")";
  std::fprintf(stderr, "cordon: audit write failed: %s\n", message.c_str());
  return std::unexpected(Error{Code::kAuditUnavailable, message, e.err, audit_->path()});
}

Error Session::PoisonLocked(const Error& e, const std::string& what) {
  std::string message = "the audit log " + audit_->path() + " could not take " + what + " (" +
                        e.message + (e.err != 0 ? ", errno " + std::to_string(e.err) : "") + ")";
  std::fprintf(stderr, "cordon: audit write failed: %s\n", message.c_str());
  if (!poisoned_) {
    poisoned_ = Error{Code::kAuditUnavailable,
                      message + " after an act had happened; this session takes no further calls",
                      e.err, audit_->path()};
  }
  return Error{Code::kAuditUnavailable, message, e.err, audit_->path()};
}

std::optional<Error> Session::poisoned() const {
  std::lock_guard<std::mutex> lock(audit_mu_);
  return poisoned_;
}

Result<std::shared_ptr<EgressBinding>> Session::ReadUrlEgress() {
  std::lock_guard<std::mutex> lock(read_url_mu_);
  if (!read_url_egress_) {
    ASSIGN_OR_RETURN(auto binding, BindEgress(EgressFor(policy_, "read_url", {}), "read_url"));
    TRY(binding->BindConnectOnly());
    read_url_egress_ = std::move(binding);
  }
  return read_url_egress_;
}

Result<std::shared_ptr<EgressProxy>> Session::Egress() {
  std::lock_guard<std::mutex> lock(egress_mu_);
  if (finished_) return Fail(Code::kSandboxUnavailable, "the session has ended");
  if (!egress_) {
    ASSIGN_OR_RETURN(std::unique_ptr<EgressProxy> started, EgressProxy::Start());
    egress_ = std::move(started);
  }
  return egress_;
}

Result<std::shared_ptr<EgressBinding>> Session::BindEgress(const EgressPolicy& policy,
                                                           std::string identity) {
  ASSIGN_OR_RETURN(std::shared_ptr<EgressProxy> proxy, Egress());
  std::weak_ptr<NetworkGate> gate = network_gate_;
  NetworkSink sink = [gate](const NetworkEvent& e) {
    auto g = gate.lock();
    if (!g) return;
    std::lock_guard<std::mutex> lock(g->mu);
    if (g->session != nullptr) g->session->RecordNetwork(e);
  };
  return std::make_shared<EgressBinding>(std::move(proxy), policy, std::move(identity),
                                         std::move(sink));
}

void Session::RecordNetwork(const NetworkEvent& e) {
  auto opt = [](const std::string& s) {
    return s.empty() ? std::nullopt : std::optional<std::string>(s);
  };
  NetworkRecord rec{.identity = e.identity,
                    .protocol = e.protocol,
                    .method = opt(e.method),
                    .host = e.host,
                    .port = e.port,
                    .address = opt(e.address),
                    .decision = e.allowed ? "allowed" : "denied",
                    .rule = opt(e.rule),
                    .rule_source = opt(e.rule_source),
                    .reason = opt(e.reason),
                    .error = opt(e.error),
                    .bytes_up = e.bytes_up,
                    .bytes_down = e.bytes_down,
                    .duration_ms = e.duration_ms,
                    .http_status = e.status != 0 ? std::optional<int>(e.status) : std::nullopt};
  // A connection has happened by now: a log that cannot take its record poisons the session.
  (void)Audit(rec, true);
}

void Session::RecordProcess(const ConfinedProcess& p, const std::string& job_id,
                            bool cancel_requested, const Json& changes) {
  const ProcessOutcome o = p.outcome();
  const ProcessRequest& r = p.request();
  const OutputCounts counts = p.Counts();
  ProcessRecord rec{.argv = r.argv,
                    .cwd = r.cwd,
                    .kind = std::string(Name(kProcessKindNames, r.kind)),
                    .tool = r.tool,
                    .status = StatusName(o.status),
                    .exit_code = o.exit_code,
                    .signal = o.signal,
                    .elapsed_ms = o.elapsed_ms,
                    .cpu_ms = o.cpu_ms,
                    .max_rss_kb = o.max_rss_kb,
                    .confinement = p.confinement(),
                    .stdout_bytes = counts.stdout_bytes,
                    .stderr_bytes = counts.stderr_bytes,
                    .truncated = counts.truncated};
  if (!o.cgroup.is_null()) rec.cgroup = o.cgroup;
  if (!o.io.is_null()) rec.io = o.io;
  if (r.call != 0) rec.call = r.call;
  // An ended MCP session's figures are freed (EndOwner); none is kept for it again.
  if (r.call != 0) {
    callers_->Get(r.owner)->UpdateUsage(r.call, [&](CallUsage& u) {
      if (u.tool.empty()) u.tool = r.tool;
      u.AddProcess(o.cpu_ms, o.max_rss_kb, o.io);
      // The process ended by a limit, or could not be confined: the call may still have
      // succeeded (a background job), so it is a warning of that call.
      std::string what = job_id.empty() ? r.tool : "job " + job_id;
      if (o.limit) u.warnings.push_back(what + " ended by a limit: " + o.limit->Describe());
      if (o.error)
        u.warnings.push_back(what + " failed: " + Excerpt(o.error->message, 500, &redactor_));
    });
  }
  if (!r.owner.empty()) rec.mcp_session = r.owner;
  if (!job_id.empty()) {
    rec.job = job_id;
    rec.cancel_requested = cancel_requested;
  }
  if (!o.spec_sha256.empty()) rec.spec_sha256 = o.spec_sha256;
  if (!p.launch_info().is_null()) rec.launch = p.launch_info();
  if (o.limit) rec.limit = o.limit->ToJson();
  if (p.timeout_decision()) rec.timeout = p.timeout_decision()->ToJson();
  if (!changes.is_null()) rec.changes = changes;  // --- changes: what it changed (issue 10)
  rec.stop_signal = o.stop_signal;                // --- stop/env (issue 11)
  if (!p.env_names().empty()) rec.env = p.env_names();
  if (o.error) {
    rec.error_code = std::string(CodeName(o.error->code));
    rec.error_message = o.error->message;
  }
  // --- denials: what Landlock refused it, in the same append, right after its record.
  if (o.denials && (o.denials->received > 0 || !o.denials->complete)) {
    const DenialSummary& d = *o.denials;
    AccessDeniedRecord denied{.tool = rec.tool,
                              .kind = rec.kind,
                              .job = rec.job,
                              .layer = "landlock",
                              .denials = d.ToJson()["denials"],
                              .total = d.kernel_total.value_or(d.received),
                              .omitted = d.omitted,
                              .complete = d.complete};
    if (!d.complete) denied.incomplete_reason = d.incomplete_reason;
    const AuditRecord both[] = {rec, denied};
    (void)AuditAll(both, true);
    return;
  }
  (void)Audit(rec, true);
}

void Session::EndOwner(const std::string& owner) {
  if (owner.empty()) return;
  processes_->EndOwner(owner);  // its jobs' records are written before this returns
  callers_->End(owner);
  std::lock_guard lock(approvals_mu_);
  kept_approvals_.erase(owner);  // its `session` answers end with it
}

std::shared_ptr<Caller> Session::CallerFor(const std::string& label) {
  return callers_->Get(label);
}

Result<Json> Session::OwnDiff(const Caller& caller, std::uint64_t from, std::uint64_t to) {
  const std::set<std::uint64_t> own = caller.CallNumbers();
  AuditDiffOptions opts;
  if (before_images_) opts.store_dir = before_images_->dir();
  opts.redactor = &redactor_;
  ASSIGN_OR_RETURN(Json diff, AuditSessionDiff(audit_->path(), audit_->session(), opts));
  // Another MCP session's changes share this log: only the caller's calls are kept.
  Json files = Json::array();
  std::size_t diffs = 0;
  for (Json& f : diff["files"]) {
    if (!f.contains("call") || !f["call"].is_number_unsigned()) continue;
    const std::uint64_t call = f["call"].get<std::uint64_t>();
    if (!own.count(call) || call < from || call > to) continue;
    if (f.contains("diff")) ++diffs;
    files.push_back(std::move(f));
  }
  return Json{{"from_call", from},
              {"to_call", to == UINT64_MAX ? Json(nullptr) : Json(to)},
              {"git_head", diff.value("git_head", Json(nullptr))},
              {"files", files},
              {"counts", {{"files", files.size()}, {"diffs", diffs}}}};
}

std::vector<const ToolSpec*> Session::Catalog() const { return GrantedTools(policy_); }

Json Session::McpToolList() {
  Json tools = Json::array();
  for (const ToolSpec* t : Catalog()) tools.push_back(CatalogEntry(*t, CatalogFormat::kMcp));
  if (external_ != nullptr && policy_.Grants("mcp:call")) {
    for (auto& t : external_->Catalog()) tools.push_back(std::move(t));
  }
  return tools;
}

bool Session::IsQuick(const std::string& tool, const Json& input) const {
  const ToolSpec* spec = FindTool(tool);
  return spec != nullptr && spec->quick && spec->quick(input, workspace_);
}

Json Session::Call(const std::string& tool, const Json& input, const std::atomic<bool>* cancel,
                   const std::string& owner) {
  return Run(tool, &input, 0, cancel, owner);
}

Json Session::Call(const std::string& tool, Json&& input, const std::atomic<bool>* cancel,
                   const std::string& owner) {
  Json given = std::move(input);
  return Run(tool, &given, 0, cancel, owner, &given);
}

Json Session::CallJsonText(const std::string& tool, std::string_view input_text) {
  ParseLimits limits;
  limits.max_bytes = static_cast<std::size_t>(policy_.limits.max_input_bytes);
  auto parsed = ParseJsonBounded(input_text, limits);
  if (!parsed) return Run(tool, std::unexpected(parsed.error()), input_text.size(), nullptr, "");
  return Run(tool, &*parsed, input_text.size(), nullptr, "");
}

namespace {

const std::string kDroppedMarker = " bytes of output dropped]";

// Cuts `text` at `cap` bytes (never inside a UTF-8 sequence) and says how much went. The text is
// redacted already (step 5 redacts before it cuts): a redaction marker is never cut in half, the
// cut moves back to its start.
void CutText(std::string& text, std::size_t cap) {
  constexpr std::string_view kMarker = "[REDACTED:";
  constexpr std::size_t kLongestMarker = 10 + 64 + 1;  // "[REDACTED:", a 64-byte id, "]"
  if (cap > 0) {
    std::size_t open = text.rfind(kMarker, cap - 1);
    if (open != std::string::npos && cap - open < kLongestMarker) {
      std::size_t close = text.find(']', open);
      if (close == std::string::npos || close >= cap) cap = open;
    }
  }
  const std::size_t dropped = text.size() - cap;
  text = RepairUtf8(std::string_view(text).substr(0, cap)) +
         "\n[cordon: " + std::to_string(dropped) + kDroppedMarker;
}

}  // namespace

bool CapToolResult(Json& result, std::size_t cap) {
  // Each text item is cut at the cap, and a structuredContent that is far larger than the cap
  // is dropped (it cannot be cut and stay valid against its schema).
  bool truncated = false;
  if (result.contains("content") && result["content"].is_array()) {
    for (auto& item : result["content"]) {
      if (JsonStringField(item, "type") == "text" && item.contains("text") &&
          item["text"].is_string()) {
        std::string& text = item["text"].get_ref<std::string&>();
        if (text.size() > cap) {
          CutText(text, cap);
          truncated = true;
        }
      }
    }
  }
  if (result.contains("structuredContent") && result["structuredContent"].dump().size() > cap * 4) {
    result.erase("structuredContent");
    truncated = true;
  }
  return truncated;
}

bool CapStructuredResult(Json& structured, std::size_t cap) {
  bool truncated = false;
  if (structured.is_string()) {
    std::string& text = structured.get_ref<std::string&>();
    if (text.size() > cap) {
      CutText(text, cap);
      truncated = true;
    }
  } else if (structured.is_structured()) {
    for (auto& v : structured) truncated = CapStructuredResult(v, cap) || truncated;
  }
  return truncated;
}

// The one call pipeline, for built-in and external (mcp__server__tool) tools alike
// (session/call.h): Lookup -> Validate -> Authorize -> Execute -> Redact + Cap -> Boundary ->
// Record. tool_started reaches the log before anything the call does or causes.
Json Session::Run(const std::string& tool, const Result<const Json*>& input,
                  std::size_t input_bytes, const std::atomic<bool>* cancel,
                  const std::string& owner, Json* consumable) {
  cordon::Call call(*this, callers_->Get(owner), tool);
  return call.Run(input, input_bytes, cancel, consumable);
}

}  // namespace cordon
