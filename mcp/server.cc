// MCP requests: initialize (version negotiation, AGENTS.md instructions), ping, tools/list,
// tools/call (through Session::Call, so limits, redaction and audit apply), logging/setLevel.
#include "mcp/server.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <functional>
#include <future>

#include "core/fs.h"
#include "core/hash.h"
#include "core/signals.h"
#include "core/version.h"

namespace cordon::mcp {
namespace {

constexpr std::size_t kMaxInstructionBytes = 16384;

bool WriteLine(int fd, const Json& j) {
  return WriteAll(fd, DumpResultJson(j) + "\n", "MCP output").has_value();
}

}  // namespace

std::string NegotiateVersion(const Json& requested, Wire wire) {
  if (requested.is_string() && IsSupportedVersion(requested.get_ref<const std::string&>(), wire)) {
    return requested.get<std::string>();
  }
  return kSupportedVersions[0];
}

namespace {}  // namespace

Json McpServer::Instructions() {
  // AGENTS.md files guide the agent; they change neither the catalog nor the limits. All of
  // them together are bounded by kMaxInstructionBytes; each is recorded with its hash.
  std::string text;
  Json files = Json::array();
  bool any_truncated = false;
  for (const std::string& rel : FindAgentsFiles(session_.workspace())) {
    auto file = session_.workspace().OpenRegular(rel);
    if (!file) continue;
    const std::string header =
        rel == "AGENTS.md" ? "" : (text.empty() ? "" : "\n\n") + std::string("# ") + rel + "\n\n";
    const std::size_t room = kMaxInstructionBytes > text.size() + header.size()
                                 ? kMaxInstructionBytes - text.size() - header.size()
                                 : 0;
    std::string body(room + 1, '\0');
    std::size_t got = 0;
    while (got < body.size()) {
      ssize_t n = ::read(file->get(), body.data() + got, body.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    body.resize(got);
    const bool truncated = got > room;
    if (truncated) body.resize(room);
    body = RepairUtf8(body);
    files.push_back({{"path", rel},
                     {"sha256", Sha256Hex(body)},
                     {"bytes", body.size()},
                     {"truncated", truncated}});
    if (!body.empty() || rel == "AGENTS.md") text += header + body;
    if (truncated) {
      any_truncated = true;
      break;  // the budget is spent: later files are not read
    }
  }
  if (files.empty()) return nullptr;
  InstructionsRecord rec{.files = files, .bytes = text.size(), .truncated = any_truncated};
  if (files.size() == 1) {
    // One file: its fields at the top level too, as before nested files were read.
    rec.path = files[0]["path"].get<std::string>();
    rec.sha256 = files[0]["sha256"].get<std::string>();
  }
  session_.Audit(rec, true);
  return any_truncated ? Json(text + "\n[cordon: AGENTS.md cut at " +
                              std::to_string(kMaxInstructionBytes) + " bytes]")
                       : Json(text);
}

Json McpServer::Initialize(const Json& params) {
  const std::string version = NegotiateVersion(
      params.is_object() ? params.value("protocolVersion", Json()) : Json(), wire_);
  {
    std::lock_guard<std::mutex> lock(calls_mu_);
    version_ = version;
  }
  Json result = {{"protocolVersion", version},
                 {"capabilities",
                  {{"tools", {{"listChanged", session_.external_tools() != nullptr}}},
                   {"logging", Json::object()}}},
                 {"serverInfo", {{"name", "cordon"}, {"version", kCordonVersion}}}};
  Json instructions = Instructions();
  if (!instructions.is_null()) result["instructions"] = instructions;
  // Approvals (issue 34): over stdio, a client that declares elicitation is asked through it;
  // one that does not makes every `ask` an approval_required at once, saying so.
  if (session_.ask_client() && wire_ == Wire::kStdio && send_ && !asker_) {
    const Json caps = params.is_object() ? params.value("capabilities", Json()) : Json();
    std::string client = "the MCP client";
    if (params.is_object() && params.contains("clientInfo") && params["clientInfo"].is_object())
      client = params["clientInfo"].value("name", client);
    if (caps.is_object() && caps.contains("elicitation") && caps["elicitation"].is_object()) {
      asker_ = std::make_shared<ElicitationAsker>(send_, version, client);
      session_.SetAsker(asker_);
    } else {
      session_.SetAsker(std::make_shared<NobodyAsker>(
          client.substr(0, 64) + " did not declare the elicitation capability in initialize"));
    }
  }
  if (params.is_object() && params.contains("clientInfo")) {
    McpClientRecord rec{.client_info = params["clientInfo"], .protocol_version = version};
    if (!owner_.empty()) rec.mcp_session = owner_;
    session_.Audit(rec, false);
  }
  return result;
}

McpServer::~McpServer() { Drain(true); }

void McpServer::Drain(bool cancel) {
  std::unique_lock<std::mutex> lock(calls_mu_);
  if (cancel) {
    for (auto& [id, c] : calls_) c->cancel = true;
  }
  calls_cv_.wait(lock, [this] { return calls_.empty(); });
  lock.unlock();
  pool_.Stop();  // joins the workers, so the last answers have been sent
}

namespace {
// A tools/call request's arguments, taken out of `m` (they can be a megabyte: never copied);
// `error` is set instead when its params are malformed.
struct CallArgs {
  Json args;
  Json error;
};
CallArgs CheckCallParams(Message& m) {
  Json& p = m.params;
  if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) {
    return {nullptr, MakeError(m.id, kInvalidParams, "tools/call needs params.name (a string)")};
  }
  Json args = Json::object();
  if (const auto it = p.find("arguments"); it != p.end()) args = std::move(*it);
  if (!args.is_object())
    return {nullptr, MakeError(m.id, kInvalidParams, "params.arguments must be an object")};
  return {std::move(args), nullptr};
}
}  // namespace

void McpServer::CallWithSink(Message& m, std::function<void(const Json&)> sink,
                             std::function<void()> done) {
  CallArgs checked = CheckCallParams(m);
  if (!checked.error.is_null()) {
    sink(checked.error);
    done();
    return;
  }
  StartCall(m, std::move(checked.args), std::move(sink), std::move(done));
}

namespace {
// What a running call may still return, on the wire: its text and its structuredContent, each
// up to the tool's output cap, JSON-escaped, plus the envelope.
std::int64_t ReservationFor(const Session& session, const std::string& tool) {
  return 3 * session.policy().LimitsFor(tool).max_output_bytes + 4096;
}
}  // namespace

std::optional<Json> McpServer::RefuseForBacklog(const Message& m, std::int64_t reserve) {
  const std::int64_t bound = session_.policy().limits.max_pending_output_bytes;
  const std::int64_t owed = pending_output_.load();
  // With nothing owed, one call is always taken, whatever its cap.
  if (owed == 0 || owed + reserve <= bound) return std::nullopt;
  Error e{Code::kOutputBacklog,
          "the session holds " + std::to_string(owed) +
              " bytes of answers the client has not read yet or running calls may still "
              "return; this call may add " +
              std::to_string(reserve) + " and the bound is " + std::to_string(bound) +
              " (limits.max_pending_output_bytes): read the answers, or wait for running "
              "calls to end, and send it again",
          0,
          {}};
  return MakeResult(m.id, MakeErrorResult(e));
}

void McpServer::StartCall(const Message& m, Json args, std::function<void(const Json&)> sink,
                          std::function<void()> on_end) {
  std::string key = m.id.dump();
  Json token = ProgressToken(m.params);
  const std::int64_t reserve = ReservationFor(session_, m.params["name"].get<std::string>());
  ActiveCall* raw = nullptr;
  std::optional<Json> refusal;
  {
    std::lock_guard<std::mutex> lock(calls_mu_);
    if (calls_.count(key)) {
      refusal = MakeError(m.id, kInvalidRequest, "a request with this id is still running");
    } else if (!(refusal = RefuseForBacklog(m, reserve))) {
      raw = (calls_[key] = std::make_unique<ActiveCall>()).get();
      raw->sink = std::move(sink);
      raw->on_end = std::move(on_end);
      raw->reserved = reserve;
      pending_output_ += reserve;  // under calls_mu_: admissions are decided one at a time
    }
  }
  if (refusal) {
    // Outside calls_mu_: on stdio this write blocks while the client does not read.
    (sink ? sink : send_)(*refusal);
    if (on_end) on_end();
    return;
  }
  const bool taken =
      pool_.Submit([this, raw, key, id = m.id, name = m.params["name"].get<std::string>(),
                    args = std::move(args), token = std::move(token)]() mutable {
        RunCall(raw, key, id, name, std::move(args), token);
      });
  if (taken) return;
  // The server is being drained (serve is stopping): the call never starts, and its client
  // is answered rather than left waiting on a job nobody runs.
  std::function<void(const Json&)> out;
  std::function<void()> end;
  {
    std::lock_guard<std::mutex> lock(calls_mu_);
    out = raw->sink ? std::move(raw->sink) : send_;
    end = std::move(raw->on_end);
    pending_output_ -= raw->reserved;
    calls_.erase(key);
  }
  calls_cv_.notify_all();
  if (out) out(MakeError(m.id, kInternalError, "the server is stopping; the call was not started"));
  if (end) end();
}

void McpServer::RunCall(ActiveCall* call, const std::string& key, const Json& id,
                        const std::string& name, Json args, const Json& token) {
  const std::function<void(const Json&)> out = call->sink ? call->sink : send_;
  std::function<void()> on_end = std::move(call->on_end);
  std::thread ticker;
  if (!token.is_null()) {
    // A long call reports progress about once a second until it ends.
    ticker = std::thread([call, token, out] {
      BlockTerminationSignals();
      for (int tick = 1; !call->done.load(); ++tick) {
        for (int i = 0; i < 10 && !call->done.load(); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (call->done.load()) break;
        out(MakeNotification(
            "notifications/progress",
            {{"progressToken", token}, {"progress", tick}, {"message", "running"}}));
      }
    });
  }
  Json result = session_.Call(name, std::move(args), &call->cancel, owner_);
  call->done = true;
  if (ticker.joinable()) ticker.join();
  bool cancelled = false;
  const std::int64_t reserved = call->reserved;
  const bool to_line = !call->sink && write_line_;
  {
    // The id is free again once the call has left the table; Drain waits for the table to empty
    // and then joins the pool, so this answer is sent before Drain returns.
    std::lock_guard<std::mutex> lock(calls_mu_);
    cancelled = call->cancel.load();
    calls_.erase(key);
  }
  calls_cv_.notify_all();
  // A cancelled request gets no response, as the protocol asks.
  if (cancelled) {
    pending_output_ -= reserved;
  } else if (to_line) {
    // Held once, as the bytes that will be sent: the result's JSON is gone before the write,
    // which blocks for as long as the client does not read.
    // A result's structuredContent leads with exit_code, stdout and stderr, as its text does.
    std::string bytes = DumpResultJson(MakeResult(id, std::move(result)));
    result = Json();
    bytes += '\n';
    const auto size = static_cast<std::int64_t>(bytes.size());
    pending_output_ += size - reserved;
    write_line_(std::move(bytes));
    pending_output_ -= size;
  } else {
    out(MakeResult(id, std::move(result)));
    pending_output_ -= reserved;
  }
  if (on_end) on_end();
}

std::optional<Json> McpServer::Handle(Message& m) {
  // nlohmann throws when a field has another type than the one read; that is the client's
  // error, answered under its id, and the server goes on with the next message.
  try {
    return Dispatch(m);
  } catch (const Json::exception& e) {
    if (m.kind != Message::Kind::kRequest) return std::nullopt;
    return MakeError(m.id, kInvalidParams, std::string("malformed params: ") + e.what());
  }
}

std::optional<Json> McpServer::Dispatch(Message& m) {
  if (m.kind == Message::Kind::kResponse) {
    // An answer to one of cordon's questions (elicitation/create); any other is dropped.
    if (asker_) (void)asker_->Deliver(m.id, m.result, m.error);
    return std::nullopt;
  }
  if (m.kind == Message::Kind::kNotification) {
    if (m.method == "notifications/initialized") initialized_ = true;
    if (m.method == "notifications/cancelled" && m.params.is_object() &&
        m.params.contains("requestId")) {
      std::lock_guard<std::mutex> lock(calls_mu_);
      auto it = calls_.find(m.params["requestId"].dump());
      if (it != calls_.end()) it->second->cancel = true;
    }
    return std::nullopt;  // progress/roots notifications need no answer
  }
  const Json& p = m.params;
  if (m.method == "initialize") return MakeResult(m.id, Initialize(p));
  if (m.method == "ping") return MakeResult(m.id, Json::object());
  if (m.method == "logging/setLevel") {
    // The eight syslog levels of the spec; anything else is the client's error (-32602).
    static constexpr std::string_view kLevels[] = {"debug", "info",     "notice", "warning",
                                                   "error", "critical", "alert",  "emergency"};
    const std::string level = JsonStringField(p, "level");
    if (std::find(std::begin(kLevels), std::end(kLevels), level) == std::end(kLevels)) {
      return MakeError(m.id, kInvalidParams,
                       "logging/setLevel: params.level must be one of debug, info, notice, "
                       "warning, error, critical, alert, emergency");
    }
    return MakeResult(m.id, Json::object());
  }
  if (m.method == "tools/list") {
    return MakeResult(m.id, {{"tools", session_.McpToolList()}});
  }
  if (m.method == "tools/call") {
    CallArgs checked = CheckCallParams(m);
    if (!checked.error.is_null()) return std::move(checked.error);
    Json args = std::move(checked.args);
    // Unknown or ungranted tools come back as isError results, as the tool contract says.
    const bool wants_progress = !ProgressToken(p).is_null();
    // A call that may ask its client never runs on the reading thread: the answer comes in on it.
    const bool quick = !wants_progress && !asker_ &&
                       session_.IsQuick(p["name"].get_ref<const std::string&>(), args);
    if (send_ && !quick) {
      StartCall(m, std::move(args));
      return std::nullopt;
    }
    return MakeResult(
        m.id, session_.Call(p["name"].get<std::string>(), std::move(args), nullptr, owner_));
  }
  return MakeError(m.id, kMethodNotFound, "method not found: " + m.method);
}

namespace {
// A batch's responses as they come in; the last element to finish delivers them all.
struct BatchState {
  std::mutex mu;
  Json responses = Json::array();
  int outstanding = 1;  // the batch itself, until every element has been started
  std::function<void(Json)> deliver;
  void Add(Json response) {
    std::lock_guard<std::mutex> lock(mu);
    responses.push_back(std::move(response));
  }
  void Start() {
    std::lock_guard<std::mutex> lock(mu);
    ++outstanding;
  }
  void Done() {
    Json out;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (--outstanding > 0) return;
      out = std::move(responses);
    }
    deliver(std::move(out));
  }
};
}  // namespace

void McpServer::HandleBatch(Json batch, std::function<void(const Json&)> notify,
                            std::function<void(Json)> deliver) {
  const std::string version = this->version();
  if (!VersionHasBatches(version)) {
    deliver(MakeError(nullptr, kInvalidRequest,
                      "JSON-RPC batches are accepted only when MCP 2025-03-26 was negotiated "
                      "(this session: " +
                          (version.empty() ? std::string("not initialized") : version) + ")"));
    return;
  }
  if (!batch.is_array() || batch.empty()) {
    deliver(MakeError(nullptr, kInvalidRequest, "an empty JSON-RPC batch"));
    return;
  }
  auto state = std::make_shared<BatchState>();
  state->deliver = std::move(deliver);
  for (Json& element : batch) {
    auto parsed = ParseMessageJson(std::move(element));
    if (std::holds_alternative<Json>(parsed)) {
      state->Add(std::get<Json>(std::move(parsed)));
      continue;
    }
    Message& m = std::get<Message>(parsed);
    if (m.kind == Message::Kind::kRequest && m.method == "initialize") {
      state->Add(MakeError(m.id, kInvalidRequest, "initialize must not be part of a batch"));
      continue;
    }
    if (m.kind == Message::Kind::kRequest && m.method == "tools/call") {
      CallArgs checked = CheckCallParams(m);
      if (!checked.error.is_null()) {
        state->Add(std::move(checked.error));
        continue;
      }
      // On a worker like any call, so that notifications/cancelled reaches it; a cancelled
      // call has no entry in the batch's answer.
      state->Start();
      StartCall(
          m, std::move(checked.args),
          [state, notify](const Json& out) {
            if (out.contains("method")) {
              if (notify) notify(out);
            } else {
              state->Add(out);
            }
          },
          [state] { state->Done(); });
      continue;
    }
    if (auto reply = Handle(m)) state->Add(std::move(*reply));
  }
  state->Done();
}

std::vector<Json> McpServer::HandleLine(std::string_view line) {
  const std::size_t first = line.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && line[first] == '[' && line.size() <= kMaxMessageBytes &&
      VersionHasBatches(version())) {
    ParseLimits limits;
    limits.max_depth = kMaxMessageDepth;
    auto batch = ParseJsonBounded(line, limits);
    if (batch) {
      if (send_) {
        // Answered in order with the lines around it when every element finished before
        // HandleBatch returned; otherwise through send_ when the last call ends.
        struct Delivery {
          std::mutex mu;
          bool returned = false;
          std::optional<Json> early;
        };
        auto d = std::make_shared<Delivery>();
        HandleBatch(std::move(*batch), send_, [this, d](Json out) {
          std::lock_guard<std::mutex> lock(d->mu);
          if (!d->returned) {
            d->early = std::move(out);
          } else if (!out.empty()) {
            send_(out);
          }
        });
        std::lock_guard<std::mutex> lock(d->mu);
        d->returned = true;
        if (d->early && !d->early->empty()) return {std::move(*d->early)};
        return {};
      }
      auto answer = std::make_shared<std::promise<Json>>();
      auto ready = answer->get_future();
      HandleBatch(std::move(*batch), {}, [answer](Json out) { answer->set_value(std::move(out)); });
      Json out = ready.get();
      if (out.empty()) return {};
      return {std::move(out)};
    }
    // Not readable as a batch: ParseMessage gives the standard error.
  }
  auto parsed = ParseMessage(line);
  if (std::holds_alternative<Json>(parsed)) return {std::get<Json>(parsed)};
  auto reply = Handle(std::get<Message>(parsed));
  if (!reply) return {};
  return {std::move(*reply)};
}

int ServeStdio(Session& session, int in_fd, int out_fd,
               const std::function<void(std::function<void()>)>& on_tools_changed) {
  // SIGTERM/SIGINT/SIGHUP end the loop (read gets EINTR: no SA_RESTART) so that servers and
  // background jobs are stopped and recorded before cordon exits (core/signals.h).
  InstallTerminationHandler();
  std::mutex out_mu;
  bool out_ok = true;
  auto send = [&](const Json& msg) {
    std::lock_guard<std::mutex> lock(out_mu);
    if (out_ok) out_ok = WriteLine(out_fd, msg);
  };
  McpServer server(session, send);
  server.SetLineWriter([&](std::string bytes) {
    std::lock_guard<std::mutex> lock(out_mu);
    if (out_ok) out_ok = WriteAll(out_fd, bytes, "MCP output").has_value();
  });
  if (on_tools_changed) {
    on_tools_changed(
        [send] { send(MakeNotification("notifications/tools/list_changed", nullptr)); });
  }
  std::string pending;
  auto flush = [&] {
    if (pending.empty()) return true;
    std::lock_guard<std::mutex> lock(out_mu);
    const bool ok = WriteAll(out_fd, pending, "MCP output").has_value();
    pending.clear();
    return ok;
  };
  LineSplitter lines;
  bool failed = false;  // the client's end is gone
  char chunk[65536];
  while (!failed) {
    if (TerminationSignal() != 0) break;
    ssize_t n = ::read(in_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    lines.Feed(
        {chunk, static_cast<std::size_t>(n)},
        [&](std::string_view line) {
          if (failed) return;
          // Answers made here are sent together at the end of the chunk (or every 64 KiB): a
          // pipe write per answer costs the client a wake-up each when requests arrive in batches.
          for (const Json& out : server.HandleLine(line)) {
            pending += DumpResultJson(out);
            pending += '\n';
          }
          if (pending.size() >= 65536 && !flush()) failed = true;
        },
        [&](const IdScanner& scan) {
          if (!flush()) failed = true;  // answers to the lines before it go first
          std::lock_guard<std::mutex> lock(out_mu);
          WriteLine(out_fd, OversizedError(scan.Id(), scan.bytes()));
        });
    if (failed || !flush()) return 1;
  }
  // EOF: running calls finish and answer; a termination signal cancels them. A question put to
  // the client can no longer be answered: it ends as cancelled.
  server.CloseAsker();
  server.Drain(TerminationSignal() != 0);
  return 0;
}

}  // namespace cordon::mcp
