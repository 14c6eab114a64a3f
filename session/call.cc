// One call's lifecycle (session/call.h) and what a tool may ask of the session during it
// (CallServices, the session's ToolServices for one call).
#include "session/call.h"

#include <algorithm>

#include "core/hash.h"
#include "runner/listeners.h"
#include "runner/processes.h"
#include "session/session.h"
#include "tools/registry.h"
#include "tools/schema.h"
#include "workspace/stage.h"

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

// Room above the cap for a built-in tool's own markers (run_shell keeps the head, the tail and
// up to 50 error lines of 400 bytes from what it dropped).
constexpr std::size_t kBuiltinMarkerRoom = 64 * 1024;

}  // namespace

// The session's services for one call: each method knows the call's number and its caller.
class CallServices final : public ToolServices {
 public:
  CallServices(Session& s, Call& call, std::shared_ptr<EgressBinding> egress)
      : s_(s), call_(call), egress_(std::move(egress)) {}
  ProcessHost* Processes() override { return s_.processes_.get(); }
  const ProcessRequest* ProcessTemplate() override { return &s_.tool_process_; }
  BeforeImageStore* BeforeImages() override { return s_.before_images_.get(); }
  void RecordFileWrite(const FileWriteReport& w) override {
    FileWriteRecord rec{.call = call_.number(),
                        .tool = call_.tool(),
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
      if (!w.before_image->error.empty()) rec.before_image_error = w.before_image->error;
    }
    (void)call_.WriteStarted();  // written before the tool ran
    (void)s_.Audit(rec, true);
  }
  Status ApproveWrite(const std::string& path, std::string_view op) override {
    const std::string paths[] = {path};
    const Decision d = Decide(s_.policy_, WriteAsk{.tool = call_.tool(), .paths = paths});
    if (d.allowed()) return {};
    TRY(call_.WriteStarted());  // tool_started precedes the question's record
    return s_.Settle(d,
                     ApprovalQuestion{.kind = "write",
                                      .tool = call_.tool(),
                                      .subject = std::string(op) + " " + path,
                                      .paths = {path},
                                      .operation = std::string(op)},
                     call_.number(), call_.caller().label());
  }
  const EgressPolicy* EgressRules() override { return egress_ ? &egress_->policy() : nullptr; }
  Result<UniqueFd> ConnectEgress() override {
    if (!egress_) return ToolServices::ConnectEgress();
    return egress_->Connect();
  }
  Result<Json> ServerStatus(const std::optional<std::string>& name) override {
    if (s_.external_ == nullptr) return ToolServices::ServerStatus(name);
    return s_.external_->ServerStatus(name);
  }
  Result<std::vector<std::string>> SetTag(const std::string& tag, bool tagged) override {
    Caller& caller = call_.caller();
    (void)call_.WriteStarted();  // tool_started precedes its session_tag record
    if (s_.processes_->OwnerEnded(caller.label())) {
      return Fail(Code::kCancelled, "the MCP session ended");
    }
    return caller.ChangeTags(tag, tagged, [&](const std::vector<std::string>& tags) -> Status {
      SessionTagRecord rec{.call = call_.number(), .tag = tag, .tagged = tagged, .tags = tags};
      if (!caller.label().empty()) rec.mcp_session = caller.label();
      return s_.Audit(rec, true);  // the record comes first: a tag the log lacks is not set
    });
  }
  std::optional<std::map<std::uint64_t, CallUsage>> Usage() override {
    return call_.caller().Usage();
  }
  Result<Json> SessionDiff(std::uint64_t from, std::uint64_t to) override {
    return s_.OwnDiff(call_.caller(), from, to);
  }
  void RecordNetwork(const NetworkEvent& e) override { s_.RecordNetwork(e); }
  void RecordListenerStop(const std::string& job, const ListenerStopOutcome& stop) override {
    LocalServerStoppedRecord rec{.call = call_.number(),
                                 .job = job,
                                 .pid = stop.pid,
                                 .port = stop.port,
                                 .comm = stop.comm,
                                 .group_by_number = stop.group_by_number,
                                 .signals = stop.signals,
                                 .stopped = stop.stopped,
                                 .elapsed_ms = stop.elapsed_ms};
    if (stop.group) rec.pgid = stop.pgid;
    if (!call_.caller().label().empty()) rec.mcp_session = call_.caller().label();
    // The signals were sent: a log that cannot take the record poisons the session.
    (void)s_.Audit(rec, true);
  }

 private:
  Session& s_;
  Call& call_;
  std::shared_ptr<EgressBinding> egress_;
};

Call::Call(Session& session, std::shared_ptr<Caller> caller, std::string tool)
    : session_(session),
      caller_(std::move(caller)),
      tool_(std::move(tool)),
      number_(++session.calls_),
      t0_(std::chrono::steady_clock::now()) {
  started_.call = number_;
  started_.tool = tool_;
  if (!caller_->label().empty()) started_.mcp_session = caller_->label();
  finished_.call = number_;
  finished_.tool = tool_;
}

Call::~Call() {
  // Begun but never answered (a wrapped server that ended first): the log says so.
  if (started_written_ && !done_) {
    finished_.status = "cancelled";
    finished_.reason = "the call was never answered";
    Record(Json(), std::nullopt, Form::kPassThrough);
  }
}

Status Call::WriteStarted() {
  if (started_written_) return {};
  if (auto st = session_.Audit(started_, false, AuditWriter::When::kBeforeAct); !st) {
    started_failed_ = true;
    return st;
  }
  started_written_ = true;
  return {};
}

// The authorize step: the decision seam says; a deny is recorded (policy_denied after
// tool_started) and is the call's error.
Status Call::Authorize(const CallAsk& ask, bool builtin) {
  const Decision d = Decide(session_.policy_, ask);
  if (d.allowed()) return {};
  if (d.asks()) {  // a tool rule of [[approvals.rules]]: asked before anything runs
    TRY(WriteStarted());
    return session_.Approve(
        d, ApprovalQuestion{.kind = "call", .tool = tool_, .subject = "a call to " + tool_},
        number_, caller_->label());
  }
  PolicyDeniedRecord denied{
      .call = number_, .tool = tool_, .scope = std::string(ask.scope), .rule = d.rule};
  if (builtin) denied.decided_by = d.source;
  TRY(WriteStarted());
  (void)session_.Audit(denied, true);
  return std::unexpected(d.ToError());
}

Status Call::Begin(const CallAsk& ask) {
  // --- failclosed: a poisoned session takes no further calls (nothing is run or written).
  if (std::optional<Error> poison = session_.poisoned()) {
    done_ = true;
    ++session_.errors_;
    return std::unexpected(*poison);
  }
  external_ = true;
  started_.scope = std::string(ask.scope);
  started_.effect = EffectName(Effect::kProcess);
  if (Status st = Authorize(ask, false); !st) {
    Finish(std::unexpected(st.error()), Form::kPassThrough);
    return st;
  }
  if (Status st = WriteStarted(); !st) {
    done_ = true;
    ++session_.errors_;
    return st;
  }
  return {};
}

Json Call::Run(const Result<const Json*>& input, std::size_t input_bytes,
               const std::atomic<bool>* cancel, Json* consumable) {
  consumable_ = input && consumable == *input ? consumable : nullptr;
  // --- failclosed: a poisoned session takes no further calls (nothing is run or written).
  if (std::optional<Error> poison = session_.poisoned()) {
    done_ = true;
    ++session_.errors_;
    return MakeErrorResult(*poison);
  }
  if (input) {
    started_.args = SummarizeArgs(**input);
  } else {
    started_.input_bytes = input_bytes;
  }
  Result<Json> outcome =
      input ? Act(**input, cancel) : Result<Json>(std::unexpected(input.error()));
  return Finish(std::move(outcome), external_ ? Form::kToolResult : Form::kStructured);
}

// Lookup (a built-in tool, or a configured server's: no I/O yet), validate what can be checked
// without the server, authorize, execute.
Result<Json> Call::Act(const Json& args, const std::atomic<bool>* cancel) {
  const ToolSpec* spec = FindTool(tool_);
  std::optional<ExternalName> external;
  if (spec == nullptr && session_.external_ != nullptr)
    external = session_.external_->Resolve(tool_);
  if (spec == nullptr && !external) {
    return Fail(Code::kInvalidInput, "unknown tool \"" + tool_ + "\"");
  }
  external_ = external.has_value();
  const std::string scope = spec != nullptr ? spec->scope : "mcp:call";
  started_.scope = scope;
  started_.effect = EffectName(spec != nullptr ? spec->effect : Effect::kProcess);
  if (!args.is_object()) return Fail(Code::kInvalidInput, "tool input must be a JSON object");
  if (spec != nullptr) {
    if (std::string err = ValidateAgainstSchema(spec->input_schema, args); !err.empty()) {
      return Fail(Code::kInvalidInput, "input does not match the " + tool_ + " schema: " + err);
    }
  }
  TRY(Authorize(CallAsk{.tool = tool_, .scope = scope, .builtin = spec != nullptr},
                spec != nullptr));
  if (external) {
    finished_.server = external->server;
    finished_.server_tool = external->server_tool;
    return ActExternal(*external, args, cancel);
  }
  return ActBuiltin(*spec, args, cancel);
}

// An external tool's schema lives on its server: it is fetched only for an authorized call, and
// checked before the server sees the call. A schema beyond cordon's validator is passed
// through, and tool_started says the input went unchecked and why.
Result<Json> Call::ActExternal(const ExternalName& name, const Json& args,
                               const std::atomic<bool>* cancel) {
  ExternalTools& servers = *session_.external_;
  ASSIGN_OR_RETURN(Json schema, servers.InputSchema(name));
  std::string unsupported;
  if (schema.is_null()) {
    started_.unvalidated = "the server gives no input schema";
  } else if (!SchemaIsSupported(schema, &unsupported)) {
    started_.unvalidated = unsupported;
  } else if (std::string err = ValidateAgainstSchema(schema, args); !err.empty()) {
    return Fail(Code::kInvalidInput, "input does not match the " + tool_ + " schema: " + err);
  }
  TRY(WriteStarted());
  try {
    return servers.Call(name, args, cancel);
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("internal error in ") + tool_ + ": " + e.what());
  }
}

Result<Json> Call::ActBuiltin(const ToolSpec& spec, const Json& args,
                              const std::atomic<bool>* cancel) {
  // A quick call without side effects (read_file_range) keeps tool_started for the one write at
  // the end: nothing happens in between that a crash could hide.
  if (spec.effect != Effect::kNone || !spec.quick) TRY(WriteStarted());
  // A network tool (read_url) reaches the network only through the session's proxy, under its
  // own rules ([tools.read_url] or [network]), and only in network mode proxy.
  std::shared_ptr<EgressBinding> egress;
  if (spec.scope == "net:read" && session_.policy_.NetworkFor(tool_) == NetworkMode::kProxy) {
    ASSIGN_OR_RETURN(egress, session_.ReadUrlEgress());
  }
  CallServices services(session_, *this, std::move(egress));
  ToolContext ctx{.workspace = session_.workspace_,
                  .policy = session_.policy_,
                  .services = services,
                  .cancel = cancel,
                  .redactor = &session_.redactor_,
                  .caller = caller_->label(),
                  .call = number_,
                  .input = consumable_ == &args ? consumable_ : nullptr};
  try {
    return spec.run(args, ctx);
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("internal error in ") + tool_ + ": " + e.what());
  }
}

void Call::NoteRedactions(std::size_t count, std::size_t at_least) {
  redactions_ += count;
  min_redactions_ = std::max(min_redactions_, at_least);
}

// Redact, then cap (a secret cut in two would escape redaction).
Json Call::Shape(Result<Json> outcome, Form form, std::optional<Error>& error) {
  const Redactor& redactor = session_.redactor_;
  const std::size_t cap =
      static_cast<std::size_t>(session_.policy_.LimitsFor(tool_).max_output_bytes);
  Json result;
  if (outcome && (form == Form::kPassThrough || form == Form::kWrapped)) {
    // A wrapped server's answer goes to its client as the server shaped it: redacted, and a
    // tools/call result's text items cut at the tool's cap (the client judges the rest).
    result = std::move(*outcome);
    const std::size_t n = redactor.RedactJson(result, &by_rule_);
    redactions_ += n;
    if (form == Form::kWrapped && result.is_object()) truncated_ = CapToolResult(result, cap);
    altered_ = n > 0 || truncated_;
  } else if (outcome && form == Form::kToolResult) {
    // A server's result is read with its types checked: a wrong type is the server's error,
    // never an exception out of the pipeline.
    if (outcome->is_object() && outcome->contains("content") &&
        (!outcome->contains("isError") || (*outcome)["isError"].is_boolean())) {
      result = std::move(*outcome);
      redactions_ += redactor.RedactJson(result, &by_rule_);
      truncated_ = CapToolResult(result, cap);
      if (!result.contains("isError")) result["isError"] = false;
      altered_ = true;
    } else {
      error = Error{Code::kServerUnavailable, "the server returned no CallToolResult", 0, {}};
    }
  } else if (outcome) {
    Json structured = std::move(*outcome);
    const std::size_t n = redactor.RedactJson(structured, &by_rule_);
    redactions_ += n;
    // The agent is told: a range read or a search of a secret file returns redacted text.
    if (n > 0 && structured.is_object()) {
      structured["redactions"] = {{"count", n}, {"by_rule", by_rule_}};
    }
    // A built-in tool cuts its output in its own terms, with its own markers: the cap here is
    // the backstop for a tool that did not, with room for those markers.
    truncated_ = CapStructuredResult(structured, cap + kBuiltinMarkerRoom);
    truncated_ = structured.value("truncated", false) || truncated_;
    result = MakeCallToolResult(std::move(structured), false);
  } else {
    error = outcome.error();
  }
  if (error) {
    redactions_ += redactor.Redact(error->message, &by_rule_);
    result = MakeErrorResult(*error);
    altered_ = true;
  }
  return result;
}

// The call's boundary: long-lived processes' git writes go out, and what they made meanwhile is
// swept before the call returns. A sweep that could not complete fails the call (and the session
// launches nothing more).
void Call::Boundary(Json& result, std::optional<Error>& error) {
  session_.processes_->SyncGitViews();
  // What an MCP server (wrapped or configured) committed since the last boundary is this call's:
  // tool_finished carries it, and session_diff and `audit diff` attribute it to this call.
  std::vector<FileChange> changes;
  Status swept = session_.processes_->SweepAtCallBoundary(&changes);
  if (!changes.empty()) {
    CommitOutcome committed;
    committed.changes = std::move(changes);
    finished_.changes = StagedChangesJson(committed, 200);
  }
  if (!swept) {
    Error e = swept.error();
    redactions_ += session_.redactor_.Redact(e.message, &by_rule_);
    error = e;
    result = MakeErrorResult(e);
    boundary_failed_ = true;
    altered_ = true;
  }
}

Json Call::Finish(Result<Json> outcome, Form form) {
  std::optional<Error> error;
  Json result = Shape(std::move(outcome), form, error);
  Boundary(result, error);
  Record(result, error, form);
  return result;
}

void Call::FinishRpcError(const std::string& message) {
  std::optional<Error> error;
  Json result = {{"isError", true}};
  Boundary(result, error);
  if (!error) {
    finished_.message = message.substr(0, session_.redactor_.CutBefore(message, 500));
  }
  Record(result, error, Form::kPassThrough);
}

void Call::Cancel(std::optional<std::string> reason) {
  if (done_) return;
  finished_.status = "cancelled";
  if (reason) finished_.reason = reason->substr(0, 200);
  Json result;
  std::optional<Error> error;
  Boundary(result, error);  // whatever the server does next, the call's boundary is now
  if (error) {
    finished_.status = "error";
    Record(result, error, Form::kPassThrough);
    return;
  }
  Record(result, std::nullopt, Form::kPassThrough);
}

// tool_finished, then the caller's usage. A call whose tool_started could not be written left
// nothing in the log: no tool_finished without its tool_started.
void Call::Record(const Json& result, const std::optional<Error>& error, Form form) {
  if (done_) return;
  done_ = true;
  // A server's isError of another type than boolean counts as an error, as the old proxy read
  // it; nothing here may throw (the call would never be finished).
  const bool is_error =
      result.is_object() && result.contains("isError") && result["isError"] != Json(false);
  redactions_ = std::max(redactions_, min_redactions_);
  if (finished_.status.empty()) finished_.status = is_error ? "error" : "ok";
  if (finished_.status == "error") ++session_.errors_;
  finished_.truncated = truncated_;
  finished_.elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  if (finished_.output_bytes) {
    // The origin knows what the agent received (wrap: the line it forwarded).
  } else if (form == Form::kStructured) {
    finished_.output_bytes = result["content"][0]["text"].get_ref<const std::string&>().size();
  } else if (!result.is_null()) {
    // What the agent receives from a server is the whole result, not one text item.
    finished_.output_bytes = DumpJson(result).size();
  }
  if (error) {
    finished_.code = std::string(CodeName(error->code));
    finished_.message = error->message;
  } else if (is_error && result.contains("structuredContent") &&
             result["structuredContent"].is_object() &&
             result["structuredContent"].contains("error") &&
             result["structuredContent"]["error"].is_object()) {
    finished_.code = JsonStringField(result["structuredContent"]["error"], "code");
  }
  if (redactions_ > 0) {
    finished_.output_redactions = redactions_;
    if (!by_rule_.empty()) finished_.output_redactions_by_rule = by_rule_;
  }
  if (!started_failed_) {
    caller_->UpdateUsage(number_, [&](CallUsage& u) {
      u.tool = tool_;
      u.status = finished_.status;
      u.code = finished_.code.value_or("");
      u.elapsed_ms = finished_.elapsed_ms;
      if (finished_.message) u.message = Excerpt(*finished_.message, 500, &session_.redactor_);
      if (truncated_) u.warnings.push_back("the result was cut to the output cap");
      if (redactions_ > 0)
        u.warnings.push_back(std::to_string(redactions_) + " secret(s) redacted from the result");
    });
  }
  if (started_failed_) return;
  if (!started_written_) {
    const AuditRecord both[] = {started_, finished_};
    (void)session_.AuditAll(both, true);
  } else {
    (void)session_.Audit(finished_, true);
  }
}

}  // namespace cordon
