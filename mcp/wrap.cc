// The wrap proxy. Client lines go to the server's stdin; server lines go to the client. Requests
// named tools/call open a tool_started record that the matching response closes; responses are
// redacted; non-JSON and oversized server output is dropped and recorded as a diagnostic; a
// message cordon cannot read or represent is refused with a JSON-RPC error, never the proxy's end.
// Batches (MCP 2025-03-26 only, as the server's initialize result says) are split into single
// messages each way, so that every element meets the same checks and records.
#include "mcp/wrap.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/fs.h"
#include "core/hash.h"
#include "mcp/diagnose.h"
#include "mcp/jsonrpc.h"
#include "runner/grants.h"

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

struct PendingCall {
  std::string tool;
  std::chrono::steady_clock::time_point started;
  std::optional<std::string> method;  // resources/read or prompts/get; none for tools/call
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
  std::map<std::string, PendingCall> pending;  // request id (as JSON text) -> call
  LineSplitter from_client, from_server;
  ConfinedProcess* proc = nullptr;
  std::atomic<bool> cancel{false};
  std::thread reaper;
  // The client's initialize, until the server answers it: a server that does not answer in
  // kInitializeWait is described on cordon's stderr (the tail of its own, and hints).
  std::mutex init_mu;
  std::condition_variable init_cv;
  std::optional<std::string> init_id;  // the request's id as JSON text
  bool init_answered = false, wrap_done = false;
  // The protocolVersion of the server's initialize result: batches are carried only when it is
  // 2025-03-26, the one version whose spec has them. Read and written on the proxy's thread.
  std::string negotiated;
  std::map<std::uint64_t, ClientBatch> batches;   // client batches still waiting for answers
  std::map<std::string, std::uint64_t> batch_of;  // request id (as JSON text) -> its batch
  std::uint64_t next_batch = 0;
  FailureContext why_ctx{.wrapped = true,
                         .network = req.network.value_or(session.policy().NetworkFor(req.tool)),
                         .preset = LauncherPreset(req.argv)};
  std::atomic<ConfinedProcess*> watched{nullptr};
  // The proxy listener's connection counts (network proxy only), set with `watched`: a server
  // still downloading is told apart from one that wrote nothing. The counts only, never the
  // binding: the listener still leaves the proxy with the process.
  std::shared_ptr<const EgressActivity> activity;

  // The tool_finished record of a pending call, which leaves the table.
  auto finish = [&](std::map<std::string, PendingCall>::iterator it, ToolFinishedRecord rec) {
    rec.server = "wrapped";
    rec.tool = it->second.tool;
    rec.method = it->second.method;
    rec.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                               it->second.started)
                         .count();
    // Before the response reaches the client. A sweep that could not complete fails the call
    // and ends the server: nothing launched in this session may go on writing unchecked.
    if (Status swept = session.processes().SweepAtCallBoundary(); !swept) {
      rec.status = "error";
      rec.code = std::string(CodeName(swept.error().code));
      rec.message = swept.error().message;
      cancel = true;
    }
    session.Audit(rec, true);
    session.processes().SyncGitViews();  // a tool-call boundary of the wrapped server
    pending.erase(it);
  };
  // A message cut for a record: the cut never splits a secret (the writer redacts the rest).
  auto clip = [&](const std::string& text) {
    return text.substr(0, session.redactor().CutBefore(text, 500));
  };
  auto to_client = [&](std::string_view line) {
    (void)WriteAll(client_out, std::string(line) + "\n", "MCP client");
  };
  auto to_server = [&](std::string_view line) {
    if (proc != nullptr && proc->stdin_fd() >= 0) {
      (void)WriteAll(proc->stdin_fd(), std::string(line) + "\n", "MCP server");
    }
  };
  // A finished batch goes to the client as one array of the answers' exact texts; a batch that
  // held no request gets nothing back, as JSON-RPC says.
  auto deliver_batch = [&](const ClientBatch& b) {
    if (b.answers.empty()) return;
    std::string out = "[";
    for (std::size_t i = 0; i < b.answers.size(); ++i) {
      if (i > 0) out += ',';
      out += b.answers[i];
    }
    to_client(out + "]");
  };
  // The request `id` of a pending batch is settled, by `answer` or, when cancelled, by none.
  auto settle_in_batch = [&](const std::string& id, std::optional<std::string> answer) -> bool {
    auto k = batch_of.find(id);
    if (k == batch_of.end()) return false;
    auto b = batches.find(k->second);
    batch_of.erase(k);
    if (b == batches.end()) return true;
    b->second.waiting.erase(id);
    if (answer) b->second.answers.push_back(std::move(*answer));
    if (b->second.waiting.empty()) {
      deliver_batch(b->second);
      batches.erase(b);
    }
    return true;
  };
  // An answer to the client's request `id`: into its batch when the request came in one.
  auto answer_client = [&](const Json& id, std::string text) {
    if (!settle_in_batch(id.dump(), text)) to_client(text);
  };
  // A server message cordon must read but cannot represent (a number out of range, or an
  // integer beyond 64 bits in a message it must change) is refused, never forwarded altered:
  // a request's refusal goes back to the server, and a client waiting for a response gets an
  // error under its id instead of waiting forever. The proxy goes on; the record says why.
  auto refuse_from_server = [&](std::string_view line, const std::optional<Message>& m,
                                const std::string& why) {
    session.Audit(McpDiagnosticRecord{.server = "wrapped",
                                      .reason = "message from the server refused",
                                      .message = clip(why),
                                      .bytes = line.size()},
                  false);
    if (m && m->kind == Message::Kind::kResponse && !m->id.is_null()) {
      auto it = pending.find(m->id.dump());
      if (it != pending.end()) {
        finish(it, ToolFinishedRecord{.status = "error",
                                      .code = std::string(CodeName(Code::kServerUnavailable)),
                                      .message = clip(why),
                                      .output_bytes = line.size()});
      }
      answer_client(m->id, DumpJson(MakeError(m->id, kInternalError,
                                              "cordon refused the server's response: " + why)));
    } else if (m && m->kind == Message::Kind::kRequest) {
      to_server(DumpJson(MakeError(m->id, kInvalidRequest, why)));
    } else {
      to_server(DumpJson(MakeError(nullptr, kInvalidRequest, why)));
    }
  };
  auto oversized_from_server = [&](const IdScanner& scan) {
    session.Audit(McpDiagnosticRecord{.server = "wrapped",
                                      .reason = "oversized message from the server dropped",
                                      .bytes = scan.bytes()},
                  false);
    // Whoever waits for it hears why, under its id: the server for its own request, the
    // client (and the call's record) for a response.
    const Json id = scan.Id();
    if (id.is_null()) return;
    const Json refusal = OversizedError(id, scan.bytes());
    if (scan.has_method()) {
      to_server(DumpJson(refusal));
      return;
    }
    if (auto it = pending.find(id.dump()); it != pending.end()) {
      finish(it, ToolFinishedRecord{.status = "error",
                                    .code = std::string(CodeName(Code::kTooLarge)),
                                    .message = JsonStringField(refusal["error"], "message"),
                                    .output_bytes = scan.bytes()});
    }
    answer_client(id, DumpJson(refusal));
  };
  auto from_server_message = [&](std::string_view line) {
    if (line.size() > kMaxMessageBytes) {  // a whole line in one read: the same refusal
      IdScanner scan;
      scan.Feed(line);
      oversized_from_server(scan);
      return;
    }
    auto parsed = ParseMessage(line, kMaxMessageBytes, BigIntegers::kAccept);
    if (std::holds_alternative<Json>(parsed)) {
      const std::string why = JsonStringField(std::get<Json>(parsed)["error"], "message");
      if (auto around = ReadAroundOverflow(line)) {
        refuse_from_server(line, around, why);
        return;
      }
      if (line.find_first_not_of(" \t") != std::string_view::npos &&
          line[line.find_first_not_of(" \t")] == '{') {
        // Too deep for the parser (or bad UTF-8) but its envelope readable: whoever waits for
        // it hears why under its id, a client waiting for a response included.
        IdScanner scan;
        scan.Feed(line);
        std::optional<Message> envelope;
        if (!scan.Id().is_null()) {
          envelope.emplace();
          envelope->kind = scan.has_method() ? Message::Kind::kRequest : Message::Kind::kResponse;
          envelope->id = scan.Id();
        }
        refuse_from_server(line, envelope, why);
        return;
      }
      // Garbage on a server's stdout would break the client: drop it, say so.
      session.Audit(McpDiagnosticRecord{.server = "wrapped",
                                        .reason = "non-JSON-RPC line on stdout dropped",
                                        .bytes = line.size()},
                    false);
      return;
    }
    Message& m = std::get<Message>(parsed);
    if (m.kind == Message::Kind::kResponse) {
      std::lock_guard<std::mutex> lock(init_mu);
      if (init_id && *init_id == m.id.dump()) {
        if (!init_answered) negotiated = JsonStringField(m.result, "protocolVersion");
        init_answered = true;
        init_cv.notify_all();
      }
    }
    auto it = m.kind == Message::Kind::kResponse ? pending.find(m.id.dump()) : pending.end();
    // Caps and redaction change the message only when they apply; otherwise the line goes
    // through byte for byte (integers beyond 64 bits and "1.0" keep their spelling). Redaction
    // wins over passing a message unchanged, whatever its kind: values and keys of params,
    // result and error, the id and the method. A secret the line holds elsewhere (a member
    // cordon does not read) forces the rewrite too, which leaves that member out.
    const Redactor& redactor = session.redactor();
    std::size_t redactions = redactor.RedactJson(m.params) + redactor.RedactJson(m.result) +
                             redactor.RedactJson(m.error) + redactor.RedactJson(m.id) +
                             redactor.Redact(m.method);
    if (redactions == 0) redactions = redactor.Find(line).size();
    bool truncated = false;
    if (it != pending.end() && !it->second.method) {  // the cap is for tool results
      const std::size_t cap = static_cast<std::size_t>(session.policy().limits.max_output_bytes);
      if (line.size() > cap && m.result.is_object()) truncated = CapToolResult(m.result, cap);
    }
    const bool changed = redactions > 0 || truncated;
    if (changed && !JsonIntegersExact(line)) {
      refuse_from_server(line, m,
                         "the message holds an integer beyond 64 bits and must be redacted or "
                         "cut; cordon cannot re-serialize it exactly");
      return;
    }
    if (it != pending.end()) {
      const bool is_error = !m.error.is_null() || (m.result.is_object() &&
                                                   m.result.value("isError", Json(false)) != false);
      ToolFinishedRecord rec{
          .status = is_error ? "error" : "ok", .output_bytes = line.size(), .truncated = truncated};
      if (redactions > 0) rec.output_redactions = redactions;
      finish(it, std::move(rec));
    } else if (redactions > 0) {
      // Not a tool call's response (a notification, a request, another response): the record
      // says the client received it rewritten.
      session.Audit(
          McpDiagnosticRecord{.server = "wrapped",
                              .reason = "message from the server redacted",
                              .message = std::to_string(redactions) +
                                         " secret(s) replaced before the client saw it",
                              .method = m.method.empty() ? std::nullopt : std::optional(m.method),
                              .bytes = line.size()},
          false);
    }
    std::string out = changed ? DumpJson(Rebuild(m)) : std::string(line);
    if (m.kind == Message::Kind::kResponse) {
      answer_client(m.id, std::move(out));
    } else {
      to_client(out);
    }
  };
  // A server's batch (2025-03-26 only) is split and each message handled as if it came alone;
  // they reach the client one line each (responses to a client batch inside its array).
  auto from_server_line = [&](std::string_view line) {
    const std::size_t first = line.find_first_not_of(kBlank);
    if (VersionHasBatches(negotiated) && first != std::string_view::npos && line[first] == '[' &&
        line.size() <= kMaxMessageBytes) {
      auto whole = ParseJsonBounded(line, BatchLimits());
      if (whole && whole->is_array() && !whole->empty() && whole->size() <= kMaxBatchElements) {
        if (auto parts = SplitJsonArray(line)) {
          for (std::string_view part : *parts) from_server_message(part);
          return;
        }
      }
    }
    from_server_message(line);
  };

  RunHooks hooks;
  hooks.on_stdout = [&](std::string_view chunk) {
    from_server.Feed(
        chunk,
        [&](std::string_view line) {
          try {
            from_server_line(line);
          } catch (const Json::exception& e) {
            // A field of a type cordon did not expect: the message is dropped, the proxy lives.
            session.Audit(
                McpDiagnosticRecord{.server = "wrapped",
                                    .reason = "unreadable message from the server dropped",
                                    .message = clip(e.what()),
                                    .bytes = line.size()},
                false);
          }
        },
        oversized_from_server);
  };
  auto oversized_from_client = [&](const IdScanner& scan) {
    // A request is refused to the client under its id; a response the client sent to a
    // server request is refused to the server, which waits for it.
    const Json refusal = OversizedError(scan.Id(), scan.bytes());
    if (!scan.has_method() && !scan.Id().is_null()) {
      to_server(DumpJson(refusal));
    } else {
      to_client(DumpJson(refusal));
    }
  };
  auto refuse_client = [&](const Json& error, std::size_t bytes) {
    session.Audit(McpDiagnosticRecord{.server = "wrapped",
                                      .reason = "message from the client refused",
                                      .message = clip(JsonStringField(error["error"], "message")),
                                      .bytes = bytes},
                  false);
  };
  // One client message, alone or an element of a batch (`batch` set): cordon's own answers go
  // into the batch instead of straight to the client, and a forwarded request joins its wait.
  auto from_client_message = [&](std::string_view line, ClientBatch* batch) {
    auto reply = [&](std::string text) {
      if (batch != nullptr) {
        batch->answers.push_back(std::move(text));
      } else {
        to_client(text);
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
      refuse_client(error, line.size());
      if (error["id"].is_null() && batch == nullptr) {
        // A response the client sent to a server request, unreadable (too deep, bad UTF-8):
        // refused to the server, which waits for it, as an oversized one is.
        IdScanner scan;
        scan.Feed(line);
        if (!scan.has_method() && !scan.Id().is_null()) {
          Json refusal = error;
          refusal["id"] = scan.Id();
          to_server(DumpJson(refusal));
          return;
        }
      }
      reply(DumpJson(error));  // answered here, never forwarded
      return;
    }
    const Message& m = std::get<Message>(parsed);
    if (batch != nullptr && m.kind == Message::Kind::kRequest) {
      // An id the batch or an earlier one still waits on could not be told apart in the
      // answers; initialize is never batched (the spec says so).
      const std::string id = m.id.dump();
      std::optional<std::string> why;
      if (m.method == "initialize") {
        why = "initialize must not be part of a batch";
      } else if (batch->waiting.contains(id) || batch_of.contains(id)) {
        why = "id " + id + " is already waiting for an answer";
      }
      if (why) {
        const Json error = MakeError(m.id, kInvalidRequest, *why);
        refuse_client(error, line.size());
        reply(DumpJson(error));
        return;
      }
    }
    if (m.kind == Message::Kind::kRequest && m.method == "initialize") {
      std::lock_guard<std::mutex> lock(init_mu);
      if (!init_id) {
        init_id = m.id.dump();
        init_cv.notify_all();
      }
    }
    // --- failclosed: a poisoned session sends the server nothing but cancellations; a request
    // is answered audit_unavailable here, anything else is dropped.
    if (auto poisoned = session.poisoned(); poisoned && m.method != "notifications/cancelled") {
      if (m.kind == Message::Kind::kRequest) {
        reply(DumpJson(MakeResult(m.id, MakeErrorResult(*poisoned))));
      }
      return;
    }
    // A tools/call without an id cannot be answered, so it cannot be recorded as a call that
    // ended: it never reaches the server.
    if (m.kind == Message::Kind::kNotification &&
        (m.method == "tools/call" || m.method == "resources/read" || m.method == "prompts/get")) {
      (void)session.Audit(
          McpDiagnosticRecord{.server = "wrapped",
                              .reason = "message from the client refused",
                              .message = m.method + " sent as a notification (no id): not "
                                                    "forwarded",
                              .bytes = line.size()},
          false);
      return;
    }
    if (m.kind == Message::Kind::kNotification && m.method == "notifications/cancelled" &&
        m.params.is_object() && m.params.contains("requestId")) {
      // The client gave up on a call: it is over for the audit trail, whatever the server
      // still does (the protocol says it sends no response).
      const std::string cancelled = m.params["requestId"].dump();
      // A cancelled request gets no response: its batch no longer waits for one.
      if (batch == nullptr || batch->waiting.erase(cancelled) == 0) {
        (void)settle_in_batch(cancelled, std::nullopt);
      }
      auto it = pending.find(cancelled);
      if (it != pending.end()) {
        ToolFinishedRecord rec{.status = "cancelled"};
        if (m.params.contains("reason") && m.params["reason"].is_string()) {
          rec.reason = m.params["reason"].get<std::string>().substr(0, 200);
        }
        finish(it, std::move(rec));
      }
    }
    // Requests that ask the server for something on the agent's behalf are recorded as calls:
    // tools/call, and resources/read and prompts/get (a server may act on those too).
    const bool is_tool = m.method == "tools/call";
    const bool is_read = m.method == "resources/read" || m.method == "prompts/get";
    // (A read without params is recorded too: the server, not cordon, says it is invalid.)
    if (m.kind == Message::Kind::kRequest && ((is_tool && m.params.is_object()) || is_read)) {
      std::string tool = JsonStringField(m.params, m.method == "resources/read" ? "uri" : "name");
      const std::string args =
          is_tool ? DumpJson(m.params.value("arguments", Json::object())) : DumpJson(m.params);
      // --- failclosed: the call reaches the server only when its tool_started is in the log
      // (and the session is not poisoned); otherwise the client hears audit_unavailable.
      Status logged =
          session.poisoned()
              ? Status(std::unexpected(*session.poisoned()))
              : session.Audit(
                    ToolStartedRecord{.tool = tool,
                                      .server = "wrapped",
                                      .args_bytes = args.size(),
                                      .args_sha256 = Sha256Hex(args),
                                      .method = is_read ? std::optional(m.method) : std::nullopt},
                    false, AuditWriter::When::kBeforeAct);
      if (!logged) {
        reply(DumpJson(MakeResult(m.id, MakeErrorResult(logged.error()))));
        return;
      }
      pending[m.id.dump()] = {tool, std::chrono::steady_clock::now(),
                              is_read ? std::optional(m.method) : std::nullopt};
    }
    if (batch != nullptr && m.kind == Message::Kind::kRequest) batch->waiting.insert(m.id.dump());
    to_server(line);
  };
  auto from_client_line = [&](std::string_view line) {
    if (line.size() > kMaxMessageBytes) {  // a whole line in one read: the same refusal
      IdScanner scan;
      scan.Feed(line);
      oversized_from_client(scan);
      return;
    }
    const std::size_t first = line.find_first_not_of(kBlank);
    if (VersionHasBatches(negotiated) && first != std::string_view::npos && line[first] == '[') {
      auto whole = ParseJsonBounded(line, BatchLimits());
      auto parts = whole && whole->is_array() ? SplitJsonArray(line) : std::nullopt;
      if (parts) {  // otherwise not readable as a batch: ParseMessage gives the standard error
        std::optional<Json> refusal;
        if (parts->empty()) {
          refusal = MakeError(nullptr, kInvalidRequest, "an empty JSON-RPC batch");
        } else if (parts->size() > kMaxBatchElements) {
          refusal = MakeError(nullptr, kInvalidRequest,
                              "a batch of " + std::to_string(parts->size()) +
                                  " messages; the limit is " + std::to_string(kMaxBatchElements));
        }
        if (refusal) {
          refuse_client(*refusal, line.size());
          to_client(DumpJson(*refusal));
          return;
        }
        ClientBatch batch;
        for (std::string_view part : *parts) {
          try {
            from_client_message(part, &batch);
          } catch (const Json::exception& e) {
            const Json error =
                MakeError(nullptr, kInvalidRequest, std::string("unreadable message: ") + e.what());
            refuse_client(error, part.size());
            batch.answers.push_back(DumpJson(error));
          }
        }
        if (batch.waiting.empty()) {
          deliver_batch(batch);
          return;
        }
        const std::uint64_t n = next_batch++;
        for (const std::string& id : batch.waiting) batch_of[id] = n;
        batches.emplace(n, std::move(batch));
        return;
      }
    }
    from_client_message(line, nullptr);
  };
  hooks.extra_fd = client_in;
  hooks.on_extra_readable = [&]() -> bool {
    char buf[65536];
    ssize_t n = ::read(client_in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) {
      // The client left: EOF for the server, and a bounded wait for it to exit.
      if (proc != nullptr) proc->CloseStdin();
      reaper = std::thread([&cancel] {
        // Up to 0.8 s for the server to exit by itself; RunWrap sets `cancel` when it has.
        for (int i = 0; i < 8 && !cancel.load(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        cancel = true;
      });
      return false;
    }
    from_client.Feed(
        {buf, static_cast<std::size_t>(n)},
        [&](std::string_view line) {
          try {
            from_client_line(line);
          } catch (const Json::exception& e) {
            // Refused, not forwarded: the client hears why, the record keeps it.
            session.Audit(
                McpDiagnosticRecord{.server = "wrapped",
                                    .reason = "unreadable message from the client refused",
                                    .message = clip(e.what()),
                                    .bytes = line.size()},
                false);
            to_client(DumpJson(MakeError(nullptr, kInvalidRequest,
                                         std::string("unreadable message: ") + e.what())));
          }
        },
        oversized_from_client);
    return true;
  };
  // A server silent on initialize: said once, while the client still waits, with what its
  // stderr shows so far. The watch ends with the proxy.
  std::thread init_watch([&] {
    std::unique_lock<std::mutex> lock(init_mu);
    init_cv.wait(lock, [&] { return init_id.has_value() || wrap_done; });
    if (wrap_done) return;
    if (init_cv.wait_for(lock, kInitializeWait, [&] { return init_answered || wrap_done; })) return;
    lock.unlock();
    ConfinedProcess* p = watched.load();
    std::shared_ptr<const EgressActivity> activity_now;
    {
      std::lock_guard<std::mutex> relock(init_mu);
      activity_now = activity;
    }
    const std::string tail = p != nullptr ? StderrTail(p->StderrText(), session.redactor()) : "";
    std::string message = "the server has not answered initialize after " +
                          std::to_string(kInitializeWait.count()) + " s";
    const std::string busy = activity_now ? NetworkActivityNote(activity_now->accepted.load(),
                                                                activity_now->finished.load())
                                          : "";
    if (busy.empty()) {
      message += FailureDetail(tail, why_ctx);
    } else {
      // Downloading, not stuck: said so, and the stderr only when there is some.
      message += "; " + busy;
      if (!tail.empty()) message += FailureDetail(tail, why_ctx);
    }
    std::fprintf(stderr, "cordon wrap: %s\n", message.c_str());
    session.Audit(McpDiagnosticRecord{.server = "wrapped",
                                      .reason = "no answer to initialize",
                                      .message = busy.empty() ? std::nullopt
                                                              : std::optional<std::string>(busy),
                                      .method = "initialize",
                                      .stderr_tail = tail},
                  true);
  });
  auto result = session.processes().RunWithHooks(req, hooks, &cancel, [&](ConfinedProcess& p) {
    proc = &p;
    {
      std::lock_guard<std::mutex> lock(init_mu);
      if (p.request().egress) activity = p.request().egress->activity();
    }
    watched = &p;
  });
  cancel = true;
  if (reaper.joinable()) reaper.join();
  bool answered = false;  // or never asked: a client that sent no initialize hears no claim
  {
    std::lock_guard<std::mutex> lock(init_mu);
    wrap_done = true;
    answered = init_answered || !init_id;
    init_cv.notify_all();
  }
  init_watch.join();
  if (!result) {
    std::fprintf(stderr, "cordon wrap: %s\n", result.error().ToString().c_str());
    return 125;
  }
  ProcessOutcome o = (*result)->outcome();
  // The server's stderr was captured (not passed through, so that it is capped and redacted):
  // its tail goes to cordon's stderr, redacted, and, when the server failed, into the record
  // with the hints it supports.
  const std::string tail = StderrTail((*result)->StderrText(), session.redactor(), 8192);
  const bool failed = o.error || o.signal || o.exit_code.value_or(0) != 0 || !answered;
  if (!failed) {
    if (!tail.empty()) (void)WriteAll(2, tail + "\n", "stderr");
  } else if (o.status != ProcessStatus::kCancelled || !answered) {
    const std::string how =
        o.error    ? o.error->message
        : o.signal ? "the server was killed by signal " + std::to_string(*o.signal)
                   : "the server exited with code " + std::to_string(o.exit_code.value_or(0));
    const std::string when = answered ? "" : " before it answered initialize";
    const std::string message = how + when + FailureDetail(tail, why_ctx);
    std::fprintf(stderr, "cordon wrap: %s\n", message.c_str());
    session.Audit(McpDiagnosticRecord{.server = "wrapped",
                                      .reason = "server exited" + when,
                                      .message = how,
                                      .stderr_tail = tail},
                  true);
  }
  if (o.error) return 125;
  if (o.signal) return 128 + *o.signal;
  return o.exit_code.value_or(0);
}

}  // namespace cordon::mcp
