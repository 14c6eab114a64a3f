// A session: its policy, workspace, audit log and processes, and the one call pipeline (Run).
#include "session/session.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "audit/diff.h"
#include "core/hash.h"
#include "core/version.h"
#include "runner/capture.h"
#include "runner/git_identity.h"
#include "runner/host_probe.h"
#include "runner/mask.h"
#include "tools/schema.h"
#include "workspace/secret_files.h"

namespace cordon {
namespace {

// Summarizes tool arguments for the audit log: file contents never enter a record.
Json SummarizeArgs(const Json& args) {
  if (args.is_string()) {
    const auto& s = args.get_ref<const std::string&>();
    if (s.size() <= 256) return args;
    return {{"bytes", s.size()}, {"sha256", Sha256Hex(s)}};
  }
  if (args.is_array()) {
    Json out = Json::array();
    for (const auto& a : args) out.push_back(SummarizeArgs(a));
    return out;
  }
  if (args.is_object()) {
    Json out = Json::object();
    for (const auto& [k, v] : args.items()) {
      if ((k == "content" || k == "old_string" || k == "new_string") && v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        out[k] = {{"bytes", s.size()}, {"sha256", Sha256Hex(s)}};
      } else {
        out[k] = SummarizeArgs(v);
      }
    }
    return out;
  }
  return args;
}

// The writer's key: the shared reader, plus a minimum length a keyed chain needs.
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
  return ProtectedPathRemovedRecord{.path = e.path,
                                    .kind = e.entry_kind,
                                    .quarantine = e.quarantine,
                                    .when = e.when,
                                    .error = error,
                                    .reason = reason};
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

Result<std::unique_ptr<Session>> Session::Start(const SessionOptions& options, char** envp) {
  auto s = std::unique_ptr<Session>(new Session());
  ASSIGN_OR_RETURN(s->workspace_, Workspace::Open(options.workspace));
  PolicySources sources = DefaultPolicySources(options.shipped_policy_dir, s->workspace_.root());
  sources.extra_files = options.policy_files;
  ASSIGN_OR_RETURN(s->policy_, LoadPolicy(sources));
  if (options.tool_timeout_secs) {
    // The person running cordon (serve --timeout), as exec --timeout: any value, for every tool.
    const std::string t = std::to_string(*options.tool_timeout_secs);
    s->policy_.limits.timeout_secs = *options.tool_timeout_secs;
    for (auto& [name, tool] : s->policy_.tools) tool.limits.erase("timeout_secs");
    s->policy_.provenance["limits.timeout_secs"] = "--timeout " + t;
    s->policy_.notes.push_back("--timeout " + t + ": every tool's timeout is " + t +
                               " s (limits.timeout_secs, in place of [tools.NAME] timeout_secs)");
  }
  s->tool_process_ = options.tool_process;
  s->redactor_.SetRules(s->policy_.compiled_redact_rules);
  s->redactor_.AddSecretEnvironment(envp);
  for (const auto& v : s->policy_.redact_values) s->redactor_.AddValue("policy", v);
  for (const auto& [name, value] : s->policy_.env.set) {
    if (Redactor::IsSecretName(name)) s->redactor_.AddValue("env", value);
  }
  for (const auto& name : s->policy_.redact_env_names) {
    for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      if (entry.size() > name.size() && entry.substr(0, name.size()) == name &&
          entry[name.size()] == '=') {
        s->redactor_.AddValue("env", std::string(entry.substr(name.size() + 1)));
      }
    }
  }
  // The workspace's secret files, known by their content (workspace/secret_files.h): their
  // secret lines join the redactor before anything is read or run.
  Json redaction_json = {
      {"rules", s->policy_.compiled_redact_rules ? s->policy_.compiled_redact_rules->size() : 0}};
  if (s->policy_.redact_scan_files) {
    const std::string cache =
        CordonStateDir() + "/secret-files/" + Sha256Hex(s->workspace_.root()).substr(0, 32) + ".v1";
    auto scan = ScanSecretFiles(s->workspace_.fd(), s->redactor_, SecretScanLimits{}, cache);
    if (!scan) return std::unexpected(scan.error());
    s->redactor_.AddSecretLines(scan->lines);
    redaction_json["secret_files"] = scan->ToJson();
  }
  std::optional<std::string> key;
  if (options.audit_key_file) {
    ASSIGN_OR_RETURN(key, ReadAuditKey(*options.audit_key_file));
  }
  const std::string session_id = NewSessionId();
  const std::string path =
      options.audit_log.empty() ? DefaultAuditLogPath(session_id) : options.audit_log;
  // The one host probe of the session: recorded in session_started, then used for every process.
  auto host = PrepareSandboxHost(s->policy_, options.shim_path);
  if (host && host->mode != SandboxMode::kBwrap) {
    // A weaker mode is never chosen silently: once per session, on stderr (MCP's stdout is
    // untouched), and in every process record's confinement.
    std::string losses;
    for (const auto& l : host->losses) losses += "\n  - " + l;
    std::fprintf(stderr,
                 "cordon: the full sandbox cannot run here (%s); [sandbox] allow_weaker = true, "
                 "so commands run in the weaker mode %s, which gives up:%s\n",
                 host->weaker_reason.c_str(),
                 std::string(Name(kSandboxModeNames, host->mode)).c_str(), losses.c_str());
  }
  // --- failclosed: cordon's audit files (log, keys, witness), refused at start when a confined
  // process could reach them.
  const std::string signing_key = options.audit_signing_key.value_or(s->policy_.audit_signing_key);
  std::vector<std::pair<std::string, std::string>> audit_files = {{"the audit log", path}};
  if (options.audit_key_file) audit_files.emplace_back("the audit key", *options.audit_key_file);
  if (!signing_key.empty()) audit_files.emplace_back("the audit signing key", signing_key);
  if (options.audit_witness && !AuditWitness::FilePath(*options.audit_witness).empty()) {
    audit_files.emplace_back("the audit witness", *options.audit_witness);
  }
  // Masks work by path: a second name (hard link) of one of them could lie inside a writable
  // root, where no mask covers it: refused before anything is opened. (A key other users can
  // read is refused by its one reader, ReadKeyFileChecked.)
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
  // With bwrap, each own file is masked (a bind over it) wherever it lies, and the file tools
  // refuse it. Without bwrap (the weaker mode), Landlock grants a writable root as a whole: an
  // own file under one could be written, so the session does not start.
  if (host && host->weaker) {
    const std::vector<std::string> roots =
        WritableRoots(s->policy_, s->workspace_.root(), HomeDir());
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
  }
  // --- checkpoint: the signing key (its PEM text joins the redactor) and the witness ---
  CheckpointConfig checkpoints;
  checkpoints.every_records = static_cast<std::uint64_t>(s->policy_.audit_checkpoint_records);
  checkpoints.every_seconds = s->policy_.audit_checkpoint_seconds;
  if (!signing_key.empty()) {
    std::string pem;
    ASSIGN_OR_RETURN(Ed25519Key k, Ed25519Key::LoadPrivate(signing_key, &pem));
    s->redactor_.AddValue("audit_signing_key", pem);
    std::istringstream lines(pem);
    for (std::string l; std::getline(lines, l);) {
      if (l.rfind("-----", 0) != 0) s->redactor_.AddValue("audit_signing_key", l);
    }
    checkpoints.key = std::make_shared<const Ed25519Key>(std::move(k));
  }
  if (options.audit_witness) {
    ASSIGN_OR_RETURN(checkpoints.witness, AuditWitness::Open(*options.audit_witness));
  }
  const std::string witness_path = checkpoints.witness ? checkpoints.witness->path() : "";
  ASSIGN_OR_RETURN(AuditWriter writer,
                   AuditWriter::Open(path, session_id, s->policy_.audit_fsync, std::move(key),
                                     &s->redactor_, std::move(checkpoints)));
  s->audit_.emplace(std::move(writer));
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
  SessionStartedRecord started{.cordon_version = kCordonVersion,
                               .client = options.client,
                               .workspace = s->workspace_.root(),
                               .chain = s->audit_->keyed() ? "hmac-sha256" : "sha256",
                               .policy_sha256 = s->policy_.Sha256(),
                               .policy_notes = s->policy_.notes,
                               .scopes = s->policy_.scopes,
                               .confinement = ConfinementJson(ProbeConfinement())};
  started.git = GitHead(s->workspace_.root());
  started.redaction = std::move(redaction_json);
  if (!options.tags.empty()) started.tags = options.tags;
  s->start_tags_ = options.tags;
  if (!s->policy_.env.empty()) {
    Json set = Json::array();
    for (const auto& [name, value] : s->policy_.env.set) set.push_back(name);
    started.env = Json{{"pass", s->policy_.env.pass}, {"deny", s->policy_.env.deny}, {"set", set}};
  }
  // Inside, HOME is the sandbox's: without the user's identity `git commit` fails.
  const GitIdentity git_identity = ReadGitIdentity(envp);
  started.git_identity = GitIdentityJson(git_identity, s->policy_.env);
  for (const auto& f : s->policy_.files) {
    started.policy_files.push_back({{"path", f.path}, {"sha256", f.sha256}, {"layer", f.layer}});
  }
  started.sandbox =
      host ? host->ToJson() : Json{{"available", false}, {"error", host.error().message}};
  // session_started comes before anything the session does (exec runs its command right after):
  // it makes the first reservation, and a log that cannot take it refuses the session.
  if (auto st = s->Audit(started, true, AuditWriter::When::kBeforeAct); !st) {
    s->finished_ = true;  // no session_finished for a session whose start is not in the log
    return std::unexpected(st.error());
  }
  Session* raw = s.get();
  s->processes_ = std::make_unique<ProcessHost>(
      s->policy_, s->workspace_, std::move(host), envp,
      [raw](const ConfinedProcess& p, const std::string& job_id, bool cancel_requested,
            const Json& changes) { raw->RecordProcess(p, job_id, cancel_requested, changes); });
  s->processes_->SetRedactor(&s->redactor_);  // output cuts never split a secret
  if (s->policy_.audit_before_images) {
    s->before_images_ = std::make_shared<BeforeImageStore>(
        BeforeImageStore::DefaultDir(),
        BeforeImageLimits{.max_file_bytes = static_cast<std::uint64_t>(
                              s->policy_.audit_before_images_max_file_bytes),
                          .max_session_bytes = static_cast<std::uint64_t>(
                              s->policy_.audit_before_images_max_session_bytes)});
    s->processes_->SetBeforeImages(s->before_images_);
  }
  s->processes_->EnableWarm(options.warm);
  s->processes_->SetGitIdentity(GitIdentityVariables(git_identity, s->policy_.env));
  s->network_gate_->session = raw;
  s->processes_->SetEgress([raw](const EgressPolicy& policy, const ProcessRequest& req) {
    std::string identity = req.egress_identity.empty() ? "tool " + req.tool : req.egress_identity;
    return raw->BindEgress(policy, std::move(identity));
  });
  s->processes_->SetGuard(std::make_unique<WorkspaceGuard>(
      WritableRoots(s->policy_, s->workspace_.root(), HomeDir()), GuardOptions::From(s->policy_),
      CordonStateDir() + "/quarantine/" + session_id,
      [raw](const GuardEvent& e) { (void)raw->Audit(GuardRecord(e), true); }));
  // Staged mode's refusals are recorded the same way (docs/adr/0006-staged-workspace.md).
  s->processes_->SetStaging(CordonStateDir() + "/quarantine/" + session_id,
                            [raw](const GuardEvent& e) { (void)raw->Audit(GuardRecord(e), true); });
  return s;
}

Session::~Session() { Finish(); }

void Session::Finish() {
  if (finished_ || !audit_) return;
  finished_ = true;
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
  (void)Audit(
      SessionFinishedRecord{
          .calls = calls_.load(), .errors = errors_.load(), .git = GitHead(workspace_.root())},
      true);
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
  std::unique_lock<std::mutex> usage_lock(usage_mu_, std::defer_lock);
  if (r.call != 0) usage_lock.lock();
  // Checked under usage_mu_, where EndOwner marks the owner ended as it erases its figures.
  if (r.call != 0 && !ended_owners_.contains(r.owner)) {
    CallUsage& u = usage_[r.owner][r.call];
    if (u.tool.empty()) u.tool = r.tool;
    u.AddProcess(o.cpu_ms, o.max_rss_kb, o.io);
    // The process ended by a limit, or could not be confined: the call may still have
    // succeeded (a background job), so it is a warning of that call.
    std::string what = job_id.empty() ? r.tool : "job " + job_id;
    if (o.limit) u.warnings.push_back(what + " ended by a limit: " + o.limit->Describe());
    if (o.error)
      u.warnings.push_back(what + " failed: " + Excerpt(o.error->message, 500, &redactor_));
  }
  if (usage_lock.owns_lock()) usage_lock.unlock();
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
  {
    std::lock_guard<std::mutex> lock(usage_mu_);
    ended_owners_.insert(owner);
    usage_.erase(owner);
  }
  std::lock_guard<std::mutex> lock(tags_mu_);
  tags_.erase(owner);
}

Result<std::vector<std::string>> Session::SetTag(std::uint64_t call, const std::string& owner,
                                                 const std::string& tag, bool tagged) {
  std::lock_guard<std::mutex> lock(tags_mu_);
  // Under tags_mu_: EndOwner marks the owner ended before it takes the lock to erase.
  if (processes_->OwnerEnded(owner)) return Fail(Code::kCancelled, "the MCP session ended");
  auto [it, fresh] = tags_.try_emplace(owner, start_tags_);
  std::vector<std::string> tags = it->second;
  auto at = std::find(tags.begin(), tags.end(), tag);
  // Bounded: every session_tag record carries the whole set, so an unbounded set would grow the
  // log with the square of the calls.
  constexpr std::size_t kMaxTags = 32;
  if (tagged && at == tags.end() && tags.size() >= kMaxTags) {
    return Fail(Code::kInvalidInput, "a session holds at most " + std::to_string(kMaxTags) +
                                         " tags; remove one first (tagged: false)");
  }
  if (tagged && at == tags.end()) tags.push_back(tag);
  if (!tagged && at != tags.end()) tags.erase(at);
  SessionTagRecord rec{.call = call, .tag = tag, .tagged = tagged, .tags = tags};
  if (!owner.empty()) rec.mcp_session = owner;
  // The record comes first: a tag the log does not have is not set.
  TRY(Audit(rec, true));
  it->second = std::move(tags);
  return it->second;
}

Result<Json> Session::OwnDiff(const std::string& owner, std::uint64_t from, std::uint64_t to) {
  std::set<std::uint64_t> own;
  {
    std::lock_guard<std::mutex> lock(usage_mu_);
    if (auto it = usage_.find(owner); it != usage_.end())
      for (const auto& [call, u] : it->second) own.insert(call);
  }
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

Json Session::Call(const std::string& tool, const Json& input, const std::atomic<bool>* cancel,
                   const std::string& owner) {
  return Run(tool, &input, 0, cancel, owner);
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
constexpr std::size_t kBuiltinMarkerRoom = 64 * 1024;

// Cuts `text` at `cap` bytes (never inside a UTF-8 sequence) and says how much went. The text is
// redacted already (step 5 redacts before it cuts): a redaction marker is never cut in half, the
// cut moves back to its start.
void CutText(std::string& text, std::size_t cap) {
  constexpr std::string_view kMarker = "[REDACTED:";
  constexpr std::size_t kLongestMarker = 64;
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

// The one call pipeline, for built-in and external (mcp__server__tool) tools alike:
//   Lookup -> Validate -> Authorize -> Execute (built-in | external) -> Redact + Cap -> Record.
// tool_started reaches the log before anything the call does or causes (policy_denied, a file
// write, a process, a request to a server). A call that causes nothing (invalid input, unknown
// tool, a quick read) writes tool_started and tool_finished together, in one write.
Json Session::Run(const std::string& tool, const Result<const Json*>& input,
                  std::size_t input_bytes, const std::atomic<bool>* cancel,
                  const std::string& owner) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t call_id = ++calls_;
  // --- failclosed: a poisoned session takes no further calls (nothing is run or written).
  if (std::optional<Error> poison = poisoned()) {
    ++errors_;
    return MakeErrorResult(*poison);
  }
  ToolStartedRecord started{.call = call_id, .tool = tool};
  if (!owner.empty()) started.mcp_session = owner;
  if (input) {
    started.args = SummarizeArgs(**input);
  } else {
    started.input_bytes = input_bytes;
  }
  bool started_written = false;
  bool started_failed = false;  // the record before the act failed: nothing happened
  // tool_started precedes the act: if it cannot be written (or the reservation for the act's
  // later records cannot be made), the call fails with audit_unavailable and does nothing.
  auto write_started = [&]() -> Status {
    if (started_written) return {};
    if (auto st = Audit(started, false, AuditWriter::When::kBeforeAct); !st) {
      started_failed = true;
      return st;
    }
    started_written = true;
    return {};
  };
  const ToolSpec* spec = nullptr;
  std::optional<ExternalName> external;

  Result<Json> outcome = [&]() -> Result<Json> {
    if (!input) return std::unexpected(input.error());
    const Json& args = **input;

    // 1. Lookup: a built-in tool, or a configured server's (no I/O yet).
    spec = FindTool(tool);
    if (spec == nullptr && external_ != nullptr) external = external_->Resolve(tool);
    if (spec == nullptr && !external) {
      return Fail(Code::kInvalidInput, "unknown tool \"" + tool + "\"");
    }
    const std::string scope = spec != nullptr ? spec->scope : "mcp:call";
    started.scope = scope;
    started.effect = EffectName(spec != nullptr ? spec->effect : Effect::kProcess);

    // 2. Validate what can be checked without the server.
    if (!args.is_object()) return Fail(Code::kInvalidInput, "tool input must be a JSON object");
    if (spec != nullptr) {
      if (std::string err = ValidateAgainstSchema(spec->input_schema, args); !err.empty()) {
        return Fail(Code::kInvalidInput, "input does not match the " + tool + " schema: " + err);
      }
    }

    // 3. Authorize.
    if (!policy_.Grants(scope)) {
      PolicyDeniedRecord denied{
          .call = call_id, .tool = tool, .scope = scope, .rule = "scopes.grant"};
      if (spec != nullptr) {
        auto it = policy_.provenance.find("scopes.grant");
        denied.decided_by = it != policy_.provenance.end() ? it->second : "built-in default";
      }
      TRY(write_started());
      (void)Audit(denied, true);
      return Fail(Code::kDeniedByPolicy,
                  tool + " needs scope " + scope + ", which the policy does not grant");
    }

    // 4. Execute.
    if (external) {
      // An external tool's schema lives on its server: it is fetched only for an authorized
      // call, and checked before the server sees the call. A schema beyond cordon's validator
      // is passed through, and tool_started says the input went unchecked and why.
      ASSIGN_OR_RETURN(Json schema, external_->InputSchema(*external));
      std::string unsupported;
      if (schema.is_null()) {
        started.unvalidated = "the server gives no input schema";
      } else if (!SchemaIsSupported(schema, &unsupported)) {
        started.unvalidated = unsupported;
      } else if (std::string err = ValidateAgainstSchema(schema, args); !err.empty()) {
        return Fail(Code::kInvalidInput, "input does not match the " + tool + " schema: " + err);
      }
      TRY(write_started());
      try {
        return external_->Call(*external, args, cancel);
      } catch (const std::exception& e) {
        return Fail(Code::kInternal, std::string("internal error in ") + tool + ": " + e.what());
      }
    }
    // A quick call without side effects (read_file_range) keeps tool_started for the one
    // write at the end: nothing happens in between that a crash could hide.
    if (spec->effect != Effect::kNone || !spec->quick) TRY(write_started());
    ToolContext ctx{workspace_,
                    policy_,
                    [&](const FileWriteReport& w) {
                      FileWriteRecord rec{.call = call_id,
                                          .tool = tool,
                                          .op = w.op,
                                          .path = w.path,
                                          .sha256_before = w.sha256_before,
                                          .bytes_before = w.bytes_before,
                                          .status = w.written ? "written" : "failed"};
                      if (w.written) {
                        rec.sha256_after = w.written->sha256_after;
                        rec.bytes_after = w.written->bytes_after;
                      }
                      if (w.code) rec.code = std::string(CodeName(*w.code));
                      if (w.before_image) {
                        rec.before_image = w.before_image->status;
                        if (!w.before_image->error.empty()) {
                          rec.before_image_error = w.before_image->error;
                        }
                      }
                      (void)write_started();  // written before the tool ran
                      (void)Audit(rec, true);
                    },
                    processes_.get(),
                    cancel,
                    &redactor_};
    ctx.process_template = &tool_process_;
    ctx.before_images = before_images_.get();
    ctx.owner = owner;
    ctx.call = call_id;
    ctx.usage = [this, &owner]() {
      std::lock_guard<std::mutex> lock(usage_mu_);
      auto it = usage_.find(owner);
      return it != usage_.end() ? it->second : std::map<std::uint64_t, CallUsage>{};
    };
    ctx.session_diff = [this, &owner](std::uint64_t from, std::uint64_t to) -> Result<Json> {
      return OwnDiff(owner, from, to);
    };
    if (external_ != nullptr) {
      ctx.server_status = [this](const std::optional<std::string>& name) {
        return external_->ServerStatus(name);
      };
    }
    ctx.record_network = [this](const NetworkEvent& e) { RecordNetwork(e); };
    ctx.record_listener_stop = [this, call_id, &owner](const std::string& job,
                                                       const ListenerStopOutcome& stop) {
      LocalServerStoppedRecord rec{.call = call_id,
                                   .job = job,
                                   .pid = stop.pid,
                                   .port = stop.port,
                                   .comm = stop.comm,
                                   .group_by_number = stop.group_by_number,
                                   .signals = stop.signals,
                                   .stopped = stop.stopped,
                                   .elapsed_ms = stop.elapsed_ms};
      if (stop.group) rec.pgid = stop.pgid;
      if (!owner.empty()) rec.mcp_session = owner;
      // The signals were sent: a log that cannot take the record poisons the session.
      (void)Audit(rec, true);
    };
    ctx.set_tag = [this, call_id, &owner, &write_started](const std::string& tag, bool tagged) {
      (void)write_started();  // tool_started precedes its session_tag record
      return SetTag(call_id, owner, tag, tagged);
    };
    // A network tool (read_url) reaches the network only through the session's proxy, under its
    // own rules ([tools.read_url] or [network]), and only in network mode proxy.
    std::shared_ptr<EgressBinding> egress;
    if (spec->scope == "net:read" && policy_.NetworkFor(tool) == NetworkMode::kProxy) {
      ASSIGN_OR_RETURN(egress, ReadUrlEgress());
      ctx.egress = &egress->policy();
      ctx.connect_egress = [egress]() { return egress->Connect(); };
    }
    try {
      return spec->run(args, ctx);
    } catch (const std::exception& e) {
      return Fail(Code::kInternal, std::string("internal error in ") + tool + ": " + e.what());
    }
  }();

  // 5. Redact, then cap (a secret cut in two would escape redaction).
  const std::size_t cap = static_cast<std::size_t>(policy_.LimitsFor(tool).max_output_bytes);
  Json result;
  std::size_t redactions = 0;
  std::map<std::string, std::size_t> by_rule;
  bool truncated = false;
  std::optional<Error> error;
  if (outcome && external) {
    // A server's result is read with its types checked: a wrong type is the server's error,
    // never an exception out of the pipeline.
    if (outcome->is_object() && outcome->contains("content") &&
        (!outcome->contains("isError") || (*outcome)["isError"].is_boolean())) {
      result = std::move(*outcome);
      redactions = redactor_.RedactJson(result, &by_rule);
      truncated = CapToolResult(result, cap);
      if (!result.contains("isError")) result["isError"] = false;
    } else {
      error = Error{Code::kServerUnavailable, "the server returned no CallToolResult", 0, {}};
    }
  } else if (outcome) {
    Json structured = std::move(*outcome);
    redactions = redactor_.RedactJson(structured, &by_rule);
    // The agent is told: a range read or a search of a secret file returns redacted text.
    if (redactions > 0 && structured.is_object()) {
      structured["redactions"] = {{"count", redactions}, {"by_rule", by_rule}};
    }
    // A built-in tool cuts its output in its own terms, with its own markers (run_shell keeps
    // the head, the tail and up to 50 error lines of 400 bytes from what it dropped): the cap
    // here is the backstop for a tool that did not, with room for those markers.
    truncated = CapStructuredResult(structured, cap + kBuiltinMarkerRoom);
    truncated = structured.value("truncated", false) || truncated;
    result = MakeCallToolResult(std::move(structured), false);
  } else {
    error = outcome.error();
  }
  if (error) {
    redactions += redactor_.Redact(error->message, &by_rule);
    result = MakeErrorResult(*error);
  }
  processes_->SyncGitViews();  // a tool-call boundary: long-lived processes' git writes go out
  // The call's boundary: what a long-lived process made meanwhile is swept before it returns.
  // A sweep that could not complete fails the call (and the session launches nothing more).
  if (Status swept = processes_->SweepAtCallBoundary(); !swept) {
    Error e = swept.error();
    redactions += redactor_.Redact(e.message, &by_rule);
    error = e;
    result = MakeErrorResult(e);
  }
  const bool is_error = result["isError"].get<bool>();
  if (is_error) ++errors_;

  // 6. Record.
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ToolFinishedRecord finished{.call = call_id,
                              .tool = tool,
                              .status = is_error ? "error" : "ok",
                              .truncated = truncated,
                              .elapsed_ms = static_cast<double>(elapsed) / 1000.0};
  if (external) {
    // What the agent receives from a server is the whole result, not one text item.
    finished.output_bytes = DumpJson(result).size();
    finished.server = external->server;
    finished.server_tool = external->server_tool;
  } else {
    finished.output_bytes = result["content"][0]["text"].get_ref<const std::string&>().size();
  }
  if (error) {
    finished.code = std::string(CodeName(error->code));
    finished.message = error->message;
  } else if (is_error && result.contains("structuredContent") &&
             result["structuredContent"].is_object() &&
             result["structuredContent"].contains("error") &&
             result["structuredContent"]["error"].is_object()) {
    finished.code = JsonStringField(result["structuredContent"]["error"], "code");
  }
  if (redactions > 0) {
    finished.output_redactions = redactions;
    finished.output_redactions_by_rule = by_rule;
  }
  std::unique_lock<std::mutex> usage_lock(usage_mu_);
  if (!started_failed && !ended_owners_.contains(owner)) {
    CallUsage& u = usage_[owner][call_id];
    u.tool = tool;
    u.status = finished.status;
    u.code = finished.code.value_or("");
    u.elapsed_ms = finished.elapsed_ms;
    if (finished.message) u.message = Excerpt(*finished.message, 500, &redactor_);
    if (truncated) u.warnings.push_back("the result was cut to the output cap");
    if (redactions > 0)
      u.warnings.push_back(std::to_string(redactions) + " secret(s) redacted from the result");
  }
  usage_lock.unlock();
  if (started_failed) {
    // Nothing happened and nothing of the call is in the log: no tool_finished without its
    // tool_started.
  } else if (!started_written) {
    const AuditRecord both[] = {std::move(started), std::move(finished)};
    (void)AuditAll(both, true);
  } else {
    (void)Audit(std::move(finished), true);
  }
  return result;
}

}  // namespace cordon
