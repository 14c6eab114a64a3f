// The wrap proxy. Client lines go to the server's stdin; server lines go to the client. Requests
// named tools/call (and resources/read, prompts/get) are calls of the session (session/call.h):
// numbered, authorized, their tool_started written before the server sees them and their
// response finished as every call is (redacted, capped with the tool's limit, the boundary
// steps, tool_finished, usage); other messages are redacted; non-JSON and oversized server output
// is dropped and recorded as a diagnostic; a message cordon cannot read or represent is refused
// with a JSON-RPC error, never the proxy's end. Batches (MCP 2025-03-26 only, as the server's
// initialize result says) are split into single messages each way, so that every element meets the
// same checks and records.
#include "mcp/wrap.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/fs.h"
#include "core/hash.h"
#include "core/text.h"
#include "mcp/diagnose.h"
#include "mcp/jsonrpc.h"
#include "runner/grants.h"
#include "session/call.h"

namespace cordon::mcp {
namespace {

// A message again from its parts (after redaction or a cap changed them).
Json Rebuild(const Message& m) {
  Json out = {{"jsonrpc", "2.0"}};
  if (m.kind != Message::Kind::kNotification) out["id"] = m.id;
  if (m.kind == Message::Kind::kResponse) {
    if (!m.error.is_null()) {
      out["error"] = m.error;
    } else {
      out["result"] = m.result;
    }
    return out;
  }
  out["method"] = m.method;
  if (!m.params.is_null()) out["params"] = m.params;
  return out;
}

constexpr std::chrono::seconds kInitializeWait{10};

// A forwarded request the client waits on, as a call of the session (session/call.h).
struct PendingCall {
  std::unique_ptr<Call> call;
  bool is_read = false;  // resources/read or prompts/get: not a CallToolResult, never capped
};

// A client's batch (MCP 2025-03-26): its requests went to the server one line each; the answers
// (the server's, and any cordon made itself, such as a refusal) go back as one array when the
// last request has its answer.
struct ClientBatch {
  std::set<std::string> waiting;     // ids (as JSON text) of forwarded requests not yet answered
  std::vector<std::string> answers;  // each answer's exact text
};

constexpr std::string_view kBlank = " \t";

ParseLimits BatchLimits() {
  ParseLimits limits;
  limits.max_bytes = kMaxMessageBytes;
  limits.max_depth = kMaxMessageDepth;
  limits.allow_inexact_integers = true;  // the elements are forwarded as their original text
  return limits;
}

// One wrapped server's proxy: its state, and a method per kind of message each way.
class WrapProxy {
 public:
  WrapProxy(Session& session, ProcessRequest req, int client_in, int client_out)
      : session_(session),
        req_(std::move(req)),
        client_in_(client_in),
        client_out_(client_out),
        why_ctx_{.wrapped = true,
                 .network = req_.network.value_or(session.policy().NetworkFor(req_.tool)),
                 .preset = LauncherPreset(req_.argv)} {}
  int Run();

 private:
  // --- to the peers
  void ToClient(std::string_view line) {
    (void)WriteAll(client_out_, std::string(line) + "\n", "MCP client");
  }
  void ToServer(std::string_view line) {
    if (proc_ != nullptr && proc_->stdin_fd() >= 0) {
      (void)WriteAll(proc_->stdin_fd(), std::string(line) + "\n", "MCP server");
    }
  }
  void DeliverBatch(const ClientBatch& b);
  bool SettleInBatch(const std::string& id, std::optional<std::string> answer);
  // An answer to the client's request `id`: into its batch when the request came in one.
  void AnswerClient(const Json& id, std::string text) {
    if (!SettleInBatch(id.dump(), text)) ToClient(text);
  }
  // A message cut for a record: the cut never splits a secret (the writer redacts the rest).
  std::string Clip(const std::string& text) const {
    return text.substr(0, session_.redactor().CutBefore(text, 500));
  }
  void Diagnostic(std::string reason, std::optional<std::string> message, std::size_t bytes,
                  std::optional<std::string> method = std::nullopt) {
    (void)session_.Audit(McpDiagnosticRecord{.server = "wrapped",
                                             .reason = std::move(reason),
                                             .message = std::move(message),
                                             .method = std::move(method),
                                             .bytes = bytes},
                         false);
  }
  // --- the calls: a pending call ends here, whatever ended it.
  void EndCall(std::map<std::string, PendingCall>::iterator it, Result<Json> outcome,
               std::size_t bytes);
  void CancelCall(const std::string& id, std::optional<std::string> reason);
  bool BeginCall(const Message& m, const std::function<void(std::string)>& reply);
  // --- from the server
  void RefuseFromServer(std::string_view line, const std::optional<Message>& m,
                        const std::string& why);
  void OversizedFromServer(const IdScanner& scan);
  void FromServerMessage(std::string_view line);
  void FromServerResponse(Message& m, std::string_view line);
  void FromServerLine(std::string_view line);
  void OnServerOutput(std::string_view chunk);
  // --- from the client
  void OversizedFromClient(const IdScanner& scan);
  void RefuseClient(const Json& error, std::size_t bytes) {
    Diagnostic("message from the client refused", Clip(JsonStringField(error["error"], "message")),
               bytes);
  }
  void FromClientMessage(std::string_view line, ClientBatch* batch);
  bool RefusedInBatch(const Message& m, std::string_view line, ClientBatch& batch);
  void FromClientLine(std::string_view line);
  bool OnClientReadable();
  // --- the server's start and end
  void WatchInitialize();
  int Ended(const Result<std::unique_ptr<ConfinedProcess>>& result);

  Session& session_;
  ProcessRequest req_;
  const int client_in_, client_out_;
  FailureContext why_ctx_;
  std::map<std::string, PendingCall> pending_;  // request id (as JSON text) -> call
  LineSplitter from_client_, from_server_;
  ConfinedProcess* proc_ = nullptr;
  std::atomic<bool> cancel_{false};
  std::thread reaper_;
  // The client's initialize, until the server answers it: a server that does not answer in
  // kInitializeWait is described on cordon's stderr (the tail of its own, and hints).
  std::mutex init_mu_;
  std::condition_variable init_cv_;
  std::optional<std::string> init_id_;  // the request's id as JSON text
  bool init_answered_ = false, wrap_done_ = false;
  // The protocolVersion of the server's initialize result: batches are carried only when it is
  // 2025-03-26, the one version whose spec has them. Read and written on the proxy's thread.
  std::string negotiated_;
  std::map<std::uint64_t, ClientBatch> batches_;   // client batches still waiting for answers
  std::map<std::string, std::uint64_t> batch_of_;  // request id (as JSON text) -> its batch
  std::uint64_t next_batch_ = 0;
  std::atomic<ConfinedProcess*> watched_{nullptr};
  // The proxy listener's connection counts (network proxy only), set with `watched_`: a server
  // still downloading is told apart from one that wrote nothing. The counts only, never the
  // binding: the listener still leaves the proxy with the process.
  std::shared_ptr<const EgressActivity> activity_;
};

// A finished batch goes to the client as one array of the answers' exact texts; a batch that
// held no request gets nothing back, as JSON-RPC says.
void WrapProxy::DeliverBatch(const ClientBatch& b) {
  if (b.answers.empty()) return;
  std::string out = "[";
  for (std::size_t i = 0; i < b.answers.size(); ++i) {
    if (i > 0) out += ',';
    out += b.answers[i];
  }
  ToClient(out + "]");
}

// The request `id` of a pending batch is settled, by `answer` or, when cancelled, by none.
bool WrapProxy::SettleInBatch(const std::string& id, std::optional<std::string> answer) {
  auto k = batch_of_.find(id);
  if (k == batch_of_.end()) return false;
  auto b = batches_.find(k->second);
  batch_of_.erase(k);
  if (b == batches_.end()) return true;
  b->second.waiting.erase(id);
  if (answer) b->second.answers.push_back(std::move(*answer));
  if (b->second.waiting.empty()) {
    DeliverBatch(b->second);
    batches_.erase(b);
  }
  return true;
}

// The call's Finish (session/call.h), before the response reaches the client. A boundary sweep
// that could not complete fails the call and ends the server: nothing launched in this session
// may go on writing unchecked.
void WrapProxy::EndCall(std::map<std::string, PendingCall>::iterator it, Result<Json> outcome,
                        std::size_t bytes) {
  Call& call = *it->second.call;
  call.finished().output_bytes = bytes;
  (void)call.Finish(std::move(outcome), Call::Form::kPassThrough);
  if (call.boundary_failed()) cancel_ = true;
  pending_.erase(it);
}

void WrapProxy::CancelCall(const std::string& id, std::optional<std::string> reason) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  it->second.call->Cancel(std::move(reason));
  if (it->second.call->boundary_failed()) cancel_ = true;
  pending_.erase(it);
}

// A server message cordon must read but cannot represent (a number out of range, or an integer
// beyond 64 bits in a message it must change) is refused, never forwarded altered: a request's
// refusal goes back to the server, and a client waiting for a response gets an error under its
// id instead of waiting forever. The proxy goes on; the record says why.
void WrapProxy::RefuseFromServer(std::string_view line, const std::optional<Message>& m,
                                 const std::string& why) {
  Diagnostic("message from the server refused", Clip(why), line.size());
  if (m && m->kind == Message::Kind::kResponse && !m->id.is_null()) {
    auto it = pending_.find(m->id.dump());
    if (it != pending_.end()) {
      EndCall(it, Fail(Code::kServerUnavailable, Clip(why)), line.size());
    }
    AnswerClient(m->id, DumpJson(MakeError(m->id, kInternalError,
                                           "cordon refused the server's response: " + why)));
  } else if (m && m->kind == Message::Kind::kRequest) {
    ToServer(DumpJson(MakeError(m->id, kInvalidRequest, why)));
  } else {
    ToServer(DumpJson(MakeError(nullptr, kInvalidRequest, why)));
  }
}

void WrapProxy::OversizedFromServer(const IdScanner& scan) {
  Diagnostic("oversized message from the server dropped", std::nullopt, scan.bytes());
  // Whoever waits for it hears why, under its id: the server for its own request, the client
  // (and the call's record) for a response.
  const Json id = scan.Id();
  if (id.is_null()) return;
  const Json refusal = OversizedError(id, scan.bytes());
  if (scan.has_method()) {
    ToServer(DumpJson(refusal));
    return;
  }
  if (auto it = pending_.find(id.dump()); it != pending_.end()) {
    EndCall(it, Fail(Code::kTooLarge, JsonStringField(refusal["error"], "message")), scan.bytes());
  }
  AnswerClient(id, DumpJson(refusal));
}

void WrapProxy::FromServerMessage(std::string_view line) {
  if (line.size() > kMaxMessageBytes) {  // a whole line in one read: the same refusal
    IdScanner scan;
    scan.Feed(line);
    OversizedFromServer(scan);
    return;
  }
  auto parsed = ParseMessage(line, kMaxMessageBytes, BigIntegers::kAccept);
  if (std::holds_alternative<Json>(parsed)) {
    const std::string why = JsonStringField(std::get<Json>(parsed)["error"], "message");
    if (auto around = ReadAroundOverflow(line)) {
      RefuseFromServer(line, around, why);
      return;
    }
    const std::size_t first = line.find_first_not_of(kBlank);
    if (first != std::string_view::npos && line[first] == '{') {
      // Too deep for the parser (or bad UTF-8) but its envelope readable: whoever waits for it
      // hears why under its id, a client waiting for a response included.
      IdScanner scan;
      scan.Feed(line);
      std::optional<Message> envelope;
      if (!scan.Id().is_null()) {
        envelope.emplace();
        envelope->kind = scan.has_method() ? Message::Kind::kRequest : Message::Kind::kResponse;
        envelope->id = scan.Id();
      }
      RefuseFromServer(line, envelope, why);
      return;
    }
    // Garbage on a server's stdout would break the client: drop it, say so.
    Diagnostic("non-JSON-RPC line on stdout dropped", std::nullopt, line.size());
    return;
  }
  Message& m = std::get<Message>(parsed);
  if (m.kind == Message::Kind::kResponse) {
    std::lock_guard<std::mutex> lock(init_mu_);
    if (init_id_ && *init_id_ == m.id.dump()) {
      if (!init_answered_) negotiated_ = JsonStringField(m.result, "protocolVersion");
      init_answered_ = true;
      init_cv_.notify_all();
    }
  }
  FromServerResponse(m, line);
}

// Caps and redaction change the message only when they apply; otherwise the line goes through
// byte for byte (integers beyond 64 bits and "1.0" keep their spelling). Redaction wins over
// passing a message unchanged, whatever its kind: values and keys of params, result and error,
// the id and the method. A secret the line holds elsewhere (a member cordon does not read)
// forces the rewrite too, which leaves that member out. A call's result is finished by its Call
// (redacted, capped with the tool's limit); the rest of the message is redacted here.
void WrapProxy::FromServerResponse(Message& m, std::string_view line) {
  auto it = m.kind == Message::Kind::kResponse ? pending_.find(m.id.dump()) : pending_.end();
  const bool call_result = it != pending_.end() && m.error.is_null();
  const Redactor& redactor = session_.redactor();
  std::size_t redactions = redactor.RedactJson(m.params) + redactor.RedactJson(m.error) +
                           redactor.RedactJson(m.id) + redactor.Redact(m.method);
  if (!call_result) redactions += redactor.RedactJson(m.result);
  const std::size_t secrets_in_line = redactor.Find(line).size();
  // A call's result is redacted and cut by its Call. tools/call results are cut at the tool's
  // cap; resources/read and prompts/get answers are not.
  const Call::Form form =
      call_result && it->second.is_read ? Call::Form::kPassThrough : Call::Form::kWrapped;
  // A message that holds an integer beyond 64 bits cannot be re-serialized exactly: refused
  // when anything in it must change. What the Call would change is tried on a copy first (rare:
  // only such messages pay for it), so the refusal comes before the call is finished.
  if (!JsonIntegersExact(line)) {
    bool must_change = redactions > 0 || secrets_in_line > 0;
    if (call_result && !must_change) {
      Json probe = m.result;
      const std::size_t cap = static_cast<std::size_t>(
          session_.policy().LimitsFor(it->second.call->tool()).max_output_bytes);
      must_change =
          redactor.RedactJson(probe) > 0 ||
          (form == Call::Form::kWrapped && probe.is_object() && CapToolResult(probe, cap));
    }
    if (must_change) {
      RefuseFromServer(line, m,
                       "the message holds an integer beyond 64 bits and must be redacted or cut; "
                       "cordon cannot re-serialize it exactly");
      return;
    }
  }
  bool changed = redactions > 0 || secrets_in_line > 0;
  if (it != pending_.end()) {
    Call& call = *it->second.call;
    call.finished().output_bytes = line.size();
    // A secret in a member cordon does not read is dropped with it (the rewrite below), and
    // counted.
    call.NoteRedactions(redactions, secrets_in_line);
    if (call_result) {
      Json result = call.Finish(std::move(m.result), form);
      changed = changed || call.altered();
      m.result = std::move(result);
    } else {
      // The server answered the call with a JSON-RPC error: the call failed, with its message.
      call.FinishRpcError(JsonStringField(m.error, "message"));
    }
    if (call.boundary_failed()) cancel_ = true;
    pending_.erase(it);
  } else if (changed) {
    // Not a call's response (a notification, a request, another response): the record says the
    // client received it rewritten.
    const std::size_t n = redactions > 0 ? redactions : secrets_in_line;
    Diagnostic("message from the server redacted",
               std::to_string(n) + " secret(s) replaced before the client saw it", line.size(),
               m.method.empty() ? std::nullopt : std::optional(m.method));
  }
  std::string out = changed ? DumpJson(Rebuild(m)) : std::string(line);
  if (m.kind == Message::Kind::kResponse) {
    AnswerClient(m.id, std::move(out));
  } else {
    ToClient(out);
  }
}

// A server's batch (2025-03-26 only) is split and each message handled as if it came alone; they
// reach the client one line each (responses to a client batch inside its array).
void WrapProxy::FromServerLine(std::string_view line) {
  const std::size_t first = line.find_first_not_of(kBlank);
  if (VersionHasBatches(negotiated_) && first != std::string_view::npos && line[first] == '[' &&
      line.size() <= kMaxMessageBytes) {
    auto whole = ParseJsonBounded(line, BatchLimits());
    if (whole && whole->is_array() && !whole->empty() && whole->size() <= kMaxBatchElements) {
      if (auto parts = SplitJsonArray(line)) {
        for (std::string_view part : *parts) FromServerMessage(part);
        return;
      }
    }
  }
  FromServerMessage(line);
}

void WrapProxy::OnServerOutput(std::string_view chunk) {
  from_server_.Feed(
      chunk,
      [&](std::string_view line) {
        try {
          FromServerLine(line);
        } catch (const Json::exception& e) {
          // A field of a type cordon did not expect: the message is dropped, the proxy lives.
          Diagnostic("unreadable message from the server dropped", Clip(e.what()), line.size());
        }
      },
      [&](const IdScanner& scan) { OversizedFromServer(scan); });
}

void WrapProxy::OversizedFromClient(const IdScanner& scan) {
  // A request is refused to the client under its id; a response the client sent to a server
  // request is refused to the server, which waits for it.
  const Json refusal = OversizedError(scan.Id(), scan.bytes());
  if (!scan.has_method() && !scan.Id().is_null()) {
    ToServer(DumpJson(refusal));
  } else {
    ToClient(DumpJson(refusal));
  }
}

// An id the batch or an earlier one still waits on could not be told apart in the answers;
// initialize is never batched (the spec says so).
bool WrapProxy::RefusedInBatch(const Message& m, std::string_view line, ClientBatch& batch) {
  const std::string id = m.id.dump();
  std::optional<std::string> why;
  if (m.method == "initialize") {
    why = "initialize must not be part of a batch";
  } else if (batch.waiting.contains(id) || batch_of_.contains(id)) {
    why = "id " + id + " is already waiting for an answer";
  }
  if (!why) return false;
  const Json error = MakeError(m.id, kInvalidRequest, *why);
  RefuseClient(error, line.size());
  batch.answers.push_back(DumpJson(error));
  return true;
}

// Requests that ask the server for something on the agent's behalf are calls of the session:
// tools/call, and resources/read and prompts/get (a server may act on those too). --- failclosed:
// the request reaches the server only when the call is authorized and its tool_started is in the
// log; otherwise the client hears why, and the server nothing.
bool WrapProxy::BeginCall(const Message& m, const std::function<void(std::string)>& reply) {
  const bool is_read = m.method == "resources/read" || m.method == "prompts/get";
  std::string tool = JsonStringField(m.params, m.method == "resources/read" ? "uri" : "name");
  const std::string args =
      is_read ? DumpJson(m.params) : DumpJson(m.params.value("arguments", Json::object()));
  // An id still waiting for its answer could not be told apart in the answers: refused, as in
  // a batch.
  if (pending_.contains(m.id.dump())) {
    const Json error =
        MakeError(m.id, kInvalidRequest, "id " + m.id.dump() + " is already waiting for an answer");
    RefuseClient(error, DumpJson(m.params).size());
    reply(DumpJson(error));
    return false;
  }
  auto call = std::make_unique<Call>(session_, session_.CallerFor(""), tool);
  call->started().server = "wrapped";
  call->started().args_bytes = args.size();
  call->started().args_sha256 = Sha256Hex(args);
  call->finished().server = "wrapped";
  if (is_read) {
    call->started().method = m.method;
    call->finished().method = m.method;
  }
  if (Status begun = call->Begin(CallAsk{.tool = tool, .scope = "mcp:call", .builtin = false});
      !begun) {
    if (call->boundary_failed()) cancel_ = true;  // nothing more may launch unchecked
    reply(DumpJson(MakeResult(m.id, MakeErrorResult(begun.error()))));
    return false;
  }
  pending_[m.id.dump()] = PendingCall{std::move(call), is_read};
  return true;
}

// One client message, alone or an element of a batch (`batch` set): cordon's own answers go into
// the batch instead of straight to the client, and a forwarded request joins its wait.
void WrapProxy::FromClientMessage(std::string_view line, ClientBatch* batch) {
  auto reply = [&](std::string text) {
    if (batch != nullptr) {
      batch->answers.push_back(std::move(text));
    } else {
      ToClient(text);
    }
  };
  // Client messages are read, never changed: what goes to the server is the original line.
  auto parsed = ParseMessage(line, kMaxMessageBytes, BigIntegers::kAccept);
  if (batch != nullptr && std::holds_alternative<Json>(parsed) &&
      line.find_first_not_of(kBlank) != std::string_view::npos &&
      line[line.find_first_not_of(kBlank)] == '[') {
    parsed = MakeError(nullptr, kInvalidRequest, "a batch must not hold a batch");
  }
  if (std::holds_alternative<Json>(parsed)) {
    const Json& error = std::get<Json>(parsed);
    RefuseClient(error, line.size());
    if (error["id"].is_null() && batch == nullptr) {
      // A response the client sent to a server request, unreadable (too deep, bad UTF-8):
      // refused to the server, which waits for it, as an oversized one is.
      IdScanner scan;
      scan.Feed(line);
      if (!scan.has_method() && !scan.Id().is_null()) {
        Json refusal = error;
        refusal["id"] = scan.Id();
        ToServer(DumpJson(refusal));
        return;
      }
    }
    reply(DumpJson(error));  // answered here, never forwarded
    return;
  }
  const Message& m = std::get<Message>(parsed);
  if (batch != nullptr && m.kind == Message::Kind::kRequest && RefusedInBatch(m, line, *batch)) {
    return;
  }
  if (m.kind == Message::Kind::kRequest && m.method == "initialize") {
    std::lock_guard<std::mutex> lock(init_mu_);
    if (!init_id_) {
      init_id_ = m.id.dump();
      init_cv_.notify_all();
    }
  }
  // --- failclosed: a poisoned session sends the server nothing but cancellations; a request is
  // answered audit_unavailable here, anything else is dropped.
  if (auto poisoned = session_.poisoned(); poisoned && m.method != "notifications/cancelled") {
    if (m.kind == Message::Kind::kRequest) {
      reply(DumpJson(MakeResult(m.id, MakeErrorResult(*poisoned))));
    }
    return;
  }
  const bool is_tool = m.method == "tools/call";
  const bool is_read = m.method == "resources/read" || m.method == "prompts/get";
  // A call without an id cannot be answered, so it cannot be recorded as a call that ended: it
  // never reaches the server.
  if (m.kind == Message::Kind::kNotification && (is_tool || is_read)) {
    Diagnostic("message from the client refused",
               m.method + " sent as a notification (no id): not forwarded", line.size());
    return;
  }
  if (m.kind == Message::Kind::kNotification && m.method == "notifications/cancelled" &&
      m.params.is_object() && m.params.contains("requestId")) {
    // The client gave up on a call: it is over for the audit trail, whatever the server still
    // does (the protocol says it sends no response).
    const std::string cancelled = m.params["requestId"].dump();
    // A cancelled request gets no response: its batch no longer waits for one.
    if (batch == nullptr || batch->waiting.erase(cancelled) == 0) {
      (void)SettleInBatch(cancelled, std::nullopt);
    }
    std::optional<std::string> reason;
    if (m.params.contains("reason") && m.params["reason"].is_string()) {
      reason = m.params["reason"].get<std::string>();
    }
    CancelCall(cancelled, std::move(reason));
  }
  // (A read without params is a call too: the server, not cordon, says it is invalid.)
  if (m.kind == Message::Kind::kRequest && ((is_tool && m.params.is_object()) || is_read)) {
    if (!BeginCall(m, reply)) return;
  }
  if (batch != nullptr && m.kind == Message::Kind::kRequest) batch->waiting.insert(m.id.dump());
  ToServer(line);
}

void WrapProxy::FromClientLine(std::string_view line) {
  if (line.size() > kMaxMessageBytes) {  // a whole line in one read: the same refusal
    IdScanner scan;
    scan.Feed(line);
    OversizedFromClient(scan);
    return;
  }
  const std::size_t first = line.find_first_not_of(kBlank);
  if (!VersionHasBatches(negotiated_) || first == std::string_view::npos || line[first] != '[') {
    FromClientMessage(line, nullptr);
    return;
  }
  auto whole = ParseJsonBounded(line, BatchLimits());
  auto parts = whole && whole->is_array() ? SplitJsonArray(line) : std::nullopt;
  if (!parts) {  // not readable as a batch: ParseMessage gives the standard error
    FromClientMessage(line, nullptr);
    return;
  }
  std::optional<Json> refusal;
  if (parts->empty()) {
    refusal = MakeError(nullptr, kInvalidRequest, "an empty JSON-RPC batch");
  } else if (parts->size() > kMaxBatchElements) {
    refusal = MakeError(nullptr, kInvalidRequest,
                        "a batch of " + std::to_string(parts->size()) + " messages; the limit is " +
                            std::to_string(kMaxBatchElements));
  }
  if (refusal) {
    RefuseClient(*refusal, line.size());
    ToClient(DumpJson(*refusal));
    return;
  }
  ClientBatch batch;
  for (std::string_view part : *parts) {
    try {
      FromClientMessage(part, &batch);
    } catch (const Json::exception& e) {
      const Json error =
          MakeError(nullptr, kInvalidRequest, std::string("unreadable message: ") + e.what());
      RefuseClient(error, part.size());
      batch.answers.push_back(DumpJson(error));
    }
  }
  if (batch.waiting.empty()) {
    DeliverBatch(batch);
    return;
  }
  const std::uint64_t n = next_batch_++;
  for (const std::string& id : batch.waiting) batch_of_[id] = n;
  batches_.emplace(n, std::move(batch));
}

bool WrapProxy::OnClientReadable() {
  char buf[65536];
  ssize_t n = ::read(client_in_, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    // The client left: EOF for the server, and a bounded wait for it to exit.
    if (proc_ != nullptr) proc_->CloseStdin();
    reaper_ = std::thread([this] {
      // Up to 0.8 s for the server to exit by itself; Run sets `cancel_` when it has.
      for (int i = 0; i < 8 && !cancel_.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      cancel_ = true;
    });
    return false;
  }
  from_client_.Feed(
      {buf, static_cast<std::size_t>(n)},
      [&](std::string_view line) {
        try {
          FromClientLine(line);
        } catch (const Json::exception& e) {
          // Refused, not forwarded: the client hears why, the record keeps it.
          Diagnostic("unreadable message from the client refused", Clip(e.what()), line.size());
          ToClient(DumpJson(
              MakeError(nullptr, kInvalidRequest, std::string("unreadable message: ") + e.what())));
        }
      },
      [&](const IdScanner& scan) { OversizedFromClient(scan); });
  return true;
}

// A server silent on initialize: said once, while the client still waits, with what its stderr
// shows so far. The watch ends with the proxy.
void WrapProxy::WatchInitialize() {
  std::unique_lock<std::mutex> lock(init_mu_);
  init_cv_.wait(lock, [&] { return init_id_.has_value() || wrap_done_; });
  if (wrap_done_) return;
  if (init_cv_.wait_for(lock, kInitializeWait, [&] { return init_answered_ || wrap_done_; })) {
    return;
  }
  std::shared_ptr<const EgressActivity> activity_now = activity_;
  lock.unlock();
  ConfinedProcess* p = watched_.load();
  const std::string tail = p != nullptr ? StderrTail(p->StderrText(), session_.redactor()) : "";
  std::string message = "the server has not answered initialize after " +
                        std::to_string(kInitializeWait.count()) + " s";
  const std::string busy = activity_now ? NetworkActivityNote(activity_now->accepted.load(),
                                                              activity_now->finished.load())
                                        : "";
  if (busy.empty()) {
    message += FailureDetail(tail, why_ctx_);
  } else {
    // Downloading, not stuck: said so, and the stderr only when there is some.
    message += "; " + busy;
    if (!tail.empty()) message += FailureDetail(tail, why_ctx_);
  }
  std::fprintf(stderr, "cordon wrap: %s\n", TerminalSafe(message).c_str());
  (void)session_.Audit(
      McpDiagnosticRecord{.server = "wrapped",
                          .reason = "no answer to initialize",
                          .message = busy.empty() ? std::nullopt : std::optional<std::string>(busy),
                          .method = "initialize",
                          .stderr_tail = tail},
      true);
}

int WrapProxy::Run() {
  RunHooks hooks;
  hooks.on_stdout = [this](std::string_view chunk) { OnServerOutput(chunk); };
  hooks.extra_fd = client_in_;
  hooks.on_extra_readable = [this]() { return OnClientReadable(); };
  std::thread init_watch([this] { WatchInitialize(); });
  auto result = session_.processes().RunWithHooks(req_, hooks, &cancel_, [&](ConfinedProcess& p) {
    proc_ = &p;
    {
      std::lock_guard<std::mutex> lock(init_mu_);
      if (p.request().egress) activity_ = p.request().egress->activity();
    }
    watched_ = &p;
  });
  cancel_ = true;
  if (reaper_.joinable()) reaper_.join();
  {
    std::lock_guard<std::mutex> lock(init_mu_);
    wrap_done_ = true;
    init_cv_.notify_all();
  }
  init_watch.join();
  // Calls the server never answered end with it: their records say so (Call's destructor).
  pending_.clear();
  return Ended(result);
}

// The server's end: its stderr was captured (not passed through, so that it is capped and
// redacted): its tail goes to cordon's stderr, redacted, and, when the server failed, into the
// record with the hints it supports.
int WrapProxy::Ended(const Result<std::unique_ptr<ConfinedProcess>>& result) {
  if (!result) {
    std::fprintf(stderr, "cordon wrap: %s\n", result.error().ToString().c_str());
    return 125;
  }
  bool answered = false;  // or never asked: a client that sent no initialize hears no claim
  {
    std::lock_guard<std::mutex> lock(init_mu_);
    answered = init_answered_ || !init_id_;
  }
  ProcessOutcome o = (*result)->outcome();
  const std::string tail = StderrTail((*result)->StderrText(), session_.redactor(), 8192);
  const bool failed = o.error || o.signal || o.exit_code.value_or(0) != 0 || !answered;
  if (!failed) {
    // The server's words, for a terminal or a client's log: no escape sequence or bidi
    // control of its choosing reaches either (core/text.h).
    if (!tail.empty()) (void)WriteAll(2, TerminalSafe(tail) + "\n", "stderr");
  } else if (o.status != ProcessStatus::kCancelled || !answered) {
    const std::string how =
        o.error    ? o.error->message
        : o.signal ? "the server was killed by signal " + std::to_string(*o.signal)
                   : "the server exited with code " + std::to_string(o.exit_code.value_or(0));
    const std::string when = answered ? "" : " before it answered initialize";
    const std::string message = how + when + FailureDetail(tail, why_ctx_);
    std::fprintf(stderr, "cordon wrap: %s\n", TerminalSafe(message).c_str());
    (void)session_.Audit(McpDiagnosticRecord{.server = "wrapped",
                                             .reason = "server exited" + when,
                                             .message = how,
                                             .stderr_tail = tail},
                         true);
  }
  if (o.error) return 125;
  if (o.signal) return 128 + *o.signal;
  return o.exit_code.value_or(0);
}

}  // namespace

int RunWrap(Session& session, ProcessRequest req, int client_in, int client_out) {
  req.kind = ProcessKind::kMcpServer;
  req.tool = "wrap";
  req.pipe_stdin = true;
  req.no_timeout = true;
  // An MCP client closes stdin, then sends SIGTERM two seconds later: 0.8 s for the server to
  // leave by itself and 0.5 s from SIGTERM to SIGKILL leave time for the records (the CI's
  // AddressSanitizer build under load took 2 s with 1 s here).
  req.stop_grace_ms = 500;
  WrapProxy proxy(session, std::move(req), client_in, client_out);
  return proxy.Run();
}

}  // namespace cordon::mcp
