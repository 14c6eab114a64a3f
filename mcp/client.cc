// Request/response over a confined server's pipes. The pump thread runs the process and routes
// its stdout lines; server-to-client requests are answered at once, never left hanging.
#include "mcp/client.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "core/version.h"
#include "mcp/diagnose.h"
#include "mcp/http_client.h"
#include "mcp/jsonrpc.h"
#include "policy/decision.h"
#include "runner/grants.h"
#include "runner/mask.h"

namespace cordon::mcp {

Json AnswerServerRequest(const Message& m, const std::string& workspace) {
  if (m.method == "ping") return MakeResult(m.id, Json::object());
  if (m.method == "roots/list") {
    return MakeResult(m.id, {{"roots", {{{"uri", "file://" + workspace}, {"name", "workspace"}}}}});
  }
  return MakeError(m.id, kMethodNotFound, "cordon does not offer " + m.method + " to servers");
}

Result<std::unique_ptr<McpConnection>> ConnectServer(Session& session, const ServerConfig& config) {
  if (config.transport == Transport::kStreamableHttp) {
    ASSIGN_OR_RETURN(auto http, HttpClient::Connect(session, config));
    return std::unique_ptr<McpConnection>(std::move(http));
  }
  ASSIGN_OR_RETURN(auto stdio, StdioClient::Connect(session, config));
  return std::unique_ptr<McpConnection>(std::move(stdio));
}

Result<std::unique_ptr<StdioClient>> StdioClient::Connect(Session& session,
                                                          const ServerConfig& config) {
  if (config.transport != Transport::kStdio) {
    return Fail(Code::kServerUnavailable, "server " + config.name + ": transport " +
                                              std::string(Name(kTransportNames, config.transport)) +
                                              " is not supported yet (stdio only)");
  }
  auto c = std::unique_ptr<StdioClient>(new StdioClient(session, config));
  ProcessRequest req;
  req.argv.push_back(config.command);
  req.argv.append(config.args.begin(), config.args.end());
  req.cwd = session.workspace().root();
  req.tool = "mcp__" + config.name;
  req.kind = ProcessKind::kMcpServer;
  req.pipe_stdin = true;
  req.no_timeout = true;
  req.network = config.network;
  // Its own allowlist ([servers.NAME.sandbox]): its listener on the proxy serves it alone.
  req.egress_extra = config.egress;
  req.egress_identity = "server " + config.name;
  req.program_files = true;  // its executable and its script's package, without a key
  req.resolve_shims = true;  // the person's own configuration: pyenv & co. resolved
  const std::string where = "server " + config.name + " (" + config.source + ")";
  if (config.project) {
    // A repository may not widen its own server's sandbox beyond the user's policy.
    const NetworkMode allowed = session.policy().NetworkFor(req.tool);
    if (config.network && NetworkStrictness(*config.network) < NetworkStrictness(allowed)) {
      const std::string message = where +
                                  ": a project's configuration cannot open the network; "
                                  "kept " +
                                  std::string(NetworkModeName(allowed));
      std::fprintf(stderr, "cordon: %s\n", message.c_str());
      session.Audit(McpDiagnosticRecord{.server = config.name,
                                        .reason = "project config cannot open the network; kept " +
                                                  std::string(NetworkModeName(allowed)),
                                        .source = config.source,
                                        .message = message},
                    true);
      req.network = allowed;
    }
  }
  {
    const char* home_env = std::getenv("HOME");
    const std::string home = CanonicalPath(home_env != nullptr ? home_env : "/nonexistent");
    const std::string ws = session.workspace().root();
    for (const auto& [list, write] :
         {std::pair{&config.read, false}, std::pair{&config.write, true}}) {
      const std::string key = write ? "sandbox.write" : "sandbox.read";
      for (const auto& p : *list) {
        // A project's grant outside the workspace is dropped, and said where the user looks
        // (stderr), not only in the log; a symlink inside that leads out counts as outside.
        auto outside = [&](const std::string& path) { return !PathUnder(CanonicalPath(path), ws); };
        if (config.project && outside(p)) {
          const std::string message =
              where + ": " + key + " " + p +
              " lies outside the workspace, and a project's configuration cannot grant it; it "
              "was dropped. Define the server in ~/.cordon/mcp.toml to grant it";
          std::fprintf(stderr, "cordon: %s\n", message.c_str());
          session.Audit(McpDiagnosticRecord{.server = config.name,
                                            .reason = "project config cannot expose " + p,
                                            .source = config.source,
                                            .message = message},
                        true);
          continue;
        }
        auto g = ResolveGrant(p, write, key, home);
        if (!g) {
          Error e = g.error();
          e.message = where + ": " + e.message;
          session.Audit(McpDiagnosticRecord{.server = config.name,
                                            .reason = "server not started",
                                            .source = config.source,
                                            .message = e.message},
                        true);
          return std::unexpected(e);
        }
        req.grants.push_back(std::move(*g));
      }
    }
  }
  // A server that downloads itself as it starts (npx -y, uvx, ...) would hang without the
  // network: refused at once, naming what is missing. Through the proxy it gets what its rules
  // allow, and a refused registry is a quick 403, not a hang.
  const NetworkMode network = req.network.value_or(session.policy().NetworkFor(req.tool));
  const std::string preset = LauncherPreset(req.argv);
  const std::string remedy = "sandbox.network = \"proxy\" with sandbox.presets = [\"" + preset +
                             "\"], or sandbox.network = \"allow\", under [servers." + config.name +
                             ".sandbox]";
  const Decision launch =
      Decide(session.policy(),
             LaunchAsk{.tool = req.tool,
                       .argv = req.argv,
                       .network = network,
                       .fetches_at_start =
                           network != NetworkMode::kAllow && network != NetworkMode::kProxy
                               ? FetchesPackageAtStart(req.argv, session.workspace().root())
                               : std::nullopt,
                       .preset = preset,
                       .who = where,
                       .remedy = remedy});
  if (!launch.allowed()) {
    session.Audit(McpDiagnosticRecord{.server = config.name,
                                      .reason = "server not started",
                                      .source = config.source,
                                      .message = launch.reason},
                  true);
    return std::unexpected(launch.ToError());
  }
  for (const auto& kv : config.env) req.extra_env.push_back(kv);
  StdioClient* raw = c.get();
  raw->pump_ = std::thread([raw, req] {
    BlockTerminationSignals();
    RunHooks hooks;
    hooks.on_stdout = [raw](std::string_view chunk) {
      raw->lines_.Feed(
          chunk, [raw](std::string_view line) { raw->OnLine(line); },
          [raw](const IdScanner& scan) { raw->OnOversized(scan); });
    };
    auto result = raw->session_.processes().RunWithHooks(
        req, hooks, &raw->cancel_, [raw](ConfinedProcess& p) {
          std::lock_guard<std::mutex> lock(raw->mu_);
          raw->proc_ = &p;
          if (p.request().egress) raw->activity_ = p.request().egress->activity();
          raw->started_ = true;
          raw->cv_.notify_all();
        });
    std::lock_guard<std::mutex> lock(raw->mu_);
    if (!result) raw->start_error_ = result.error();
    // Kept past the process: a server that exited is explained by what it wrote last.
    if (result) raw->final_stderr_ = (*result)->StderrText();
    raw->exited_ = true;
    raw->started_ = true;
    raw->proc_ = nullptr;
    raw->cv_.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(raw->mu_);
    raw->cv_.wait(lock, [raw] { return raw->started_; });
    if (raw->start_error_) return std::unexpected(*raw->start_error_);
  }
  auto init = raw->Request("initialize",
                           {{"protocolVersion", "2025-11-25"},
                            {"capabilities", {{"roots", {{"listChanged", false}}}}},
                            {"clientInfo", {{"name", "cordon"}, {"version", kCordonVersion}}}});
  if (!init) {
    const std::string tail = raw->StderrTail();
    std::shared_ptr<const EgressActivity> activity;
    {
      std::lock_guard<std::mutex> lock(raw->mu_);
      activity = raw->activity_;
    }
    // A server that has used the network (a launcher downloading it) is said to, rather than
    // "wrote nothing": the wait was the download, not a hang.
    const std::string busy =
        activity ? NetworkActivityNote(activity->accepted.load(), activity->finished.load()) : "";
    session.Audit(
        McpDiagnosticRecord{.server = config.name,
                            .reason = "initialize failed",
                            .message = init.error().message + (busy.empty() ? "" : "; " + busy),
                            .stderr_tail = tail},
        true);
    // Why, where the user looks (mcp test, mcp trust, a tool call's error): the network the
    // server was using, the stderr tail and hints (a path outside the sandbox, the network).
    Error e = init.error();
    if (!busy.empty()) {
      e.message += "; " + busy;
      if (e.code == Code::kTimeout)
        e.message += "; or let it take longer: timeout_secs under [servers." + config.name +
                     "] in " + config.source + " (now " + std::to_string(config.timeout_secs) + ")";
    }
    if (busy.empty() || !tail.empty())
      e.message += FailureDetail(tail, FailureContext{.wrapped = false,
                                                      .server = config.name,
                                                      .source = config.source,
                                                      .network = network,
                                                      .preset = LauncherPreset(req.argv)});
    return std::unexpected(e);
  }
  raw->init_ = *init;
  const std::string version = JsonStringField(*init, "protocolVersion");
  if (!IsSupportedVersion(version)) {
    session.Audit(McpDiagnosticRecord{.server = config.name,
                                      .reason = "protocol version mismatch",
                                      .protocol_version = version},
                  true);
  }
  raw->Send(MakeNotification("notifications/initialized", nullptr));
  return c;
}

StdioClient::~StdioClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (proc_ != nullptr) proc_->CloseStdin();
  }
  // A server gets 1 s to leave after EOF; then its sandbox is terminated (SIGTERM, then SIGKILL).
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return exited_; })) cancel_ = true;
  lock.unlock();
  if (pump_.joinable()) pump_.join();
}

void StdioClient::Send(const Json& msg) {
  std::string line = DumpJson(msg) + "\n";
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (proc_ != nullptr) fd = proc_->stdin_fd();
  }
  std::string_view rest(line);
  while (fd >= 0 && !rest.empty()) {
    ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

void StdioClient::OnOversized(const IdScanner& scan) {
  session_.Audit(
      McpDiagnosticRecord{
          .server = config_.name, .reason = "oversized message dropped", .bytes = scan.bytes()},
      false);
  // Refused, but not left to a timeout: the server's own request is answered under its id, and
  // cordon's request that this was the response to fails now.
  const Json id = scan.Id();
  if (id.is_null()) return;
  const Json refusal = OversizedError(id, scan.bytes());
  if (scan.has_method()) {
    Send(refusal);
  } else if (id.is_number_integer()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (id.get<std::int64_t>() > 0 && id.get<std::int64_t>() <= next_id_) {
      responses_[id.get<std::int64_t>()] = Json{{"error", refusal["error"]}};
      cv_.notify_all();
    }
  }
}

void StdioClient::OnLine(std::string_view line) {
  if (line.size() > kMaxMessageBytes) {  // a whole line in one read: the same refusal
    IdScanner scan;
    scan.Feed(line);
    OnOversized(scan);
    return;
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return;
  try {
    ReadLine(line);
  } catch (const Json::exception& e) {
    // A field of a type cordon did not expect: dropped and recorded; the reader goes on.
    session_.Audit(McpDiagnosticRecord{.server = config_.name,
                                       .reason = "unreadable message from the server dropped",
                                       .message = std::string(e.what()).substr(0, 500),
                                       .bytes = line.size()},
                   false);
  }
}

void StdioClient::ReadLine(std::string_view line) {
  // Integers beyond 64 bits are accepted here only to be refused below with the message's kind
  // and id known: cordon re-serializes what servers send, and would change their digits.
  auto parsed = ParseMessage(line, kMaxMessageBytes, BigIntegers::kAccept);
  std::optional<Message> refused;
  std::string why;
  if (std::holds_alternative<Json>(parsed)) {
    why = JsonStringField(std::get<Json>(parsed)["error"], "message");
    refused = ReadAroundOverflow(line);
    if (!refused) {
      session_.Audit(McpDiagnosticRecord{.server = config_.name,
                                         .reason = "non-JSON-RPC line on stdout",
                                         .message = why.substr(0, 500),
                                         .bytes = line.size()},
                     false);
      return;
    }
  } else if (!JsonIntegersExact(line)) {
    why = "the message holds an integer beyond 64 bits, which cordon cannot carry exactly";
    refused = std::get<Message>(parsed);
  }
  if (refused) {
    // Refused, not altered: a waiting request fails now, a server request is answered.
    session_.Audit(McpDiagnosticRecord{.server = config_.name,
                                       .reason = "message from the server refused",
                                       .message = why.substr(0, 500),
                                       .bytes = line.size()},
                   false);
    if (refused->kind == Message::Kind::kResponse && refused->id.is_number_integer()) {
      std::lock_guard<std::mutex> lock(mu_);
      responses_[refused->id.get<std::int64_t>()] = Json{{"error", {{"message", why}}}};
      cv_.notify_all();
    } else if (refused->kind == Message::Kind::kRequest) {
      Send(MakeError(refused->id, kInvalidRequest, why));
    }
    return;
  }
  const Message& m = std::get<Message>(parsed);
  if (m.kind == Message::Kind::kNotification && m.method == "notifications/tools/list_changed") {
    ToolsChanged();
    return;
  }
  if (m.kind == Message::Kind::kResponse && m.id.is_number_integer()) {
    std::lock_guard<std::mutex> lock(mu_);
    responses_[m.id.get<std::int64_t>()] =
        m.error.is_null() ? Json{{"result", m.result}} : Json{{"error", m.error}};
    cv_.notify_all();
    return;
  }
  if (m.kind == Message::Kind::kRequest) Send(AnswerServerRequest(m, session_.workspace().root()));
}

Result<Json> StdioClient::Request(const std::string& method, Json params,
                                  const std::atomic<bool>* cancel) {
  std::int64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = ++next_id_;
  }
  Send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(config_.timeout_secs);
  bool got = false;
  while (!got && std::chrono::steady_clock::now() < deadline) {
    got = cv_.wait_for(lock, std::chrono::milliseconds(100),
                       [&] { return responses_.count(id) > 0 || exited_; });
    if (!got && cancel != nullptr && cancel->load()) {
      lock.unlock();
      Send(MakeNotification("notifications/cancelled",
                            {{"requestId", id}, {"reason", "cancelled by cordon's client"}}));
      session_.Audit(
          McpDiagnosticRecord{
              .server = config_.name, .reason = "request cancelled", .method = method},
          false);
      return Fail(Code::kCancelled, "server " + config_.name + ": " + method + " was cancelled");
    }
  }
  if (responses_.count(id) == 0) {
    lock.unlock();
    const std::string why = got ? "the server exited"
                                : "no answer within " + std::to_string(config_.timeout_secs) + " s";
    session_.Audit(
        McpDiagnosticRecord{
            .server = config_.name, .reason = why, .method = method, .stderr_tail = StderrTail()},
        true);
    return Fail(got ? Code::kServerUnavailable : Code::kTimeout,
                "server " + config_.name + ": " + method + ": " + why);
  }
  Json r = std::move(responses_[id]);
  responses_.erase(id);
  if (r.contains("error")) {
    return Fail(Code::kServerUnavailable, "server " + config_.name + ": " + method + ": " +
                                              JsonStringField(r["error"], "message", "error"));
  }
  return r["result"];
}

Result<Json> McpConnection::ListTools() {
  Json all = Json::array();
  Json params = Json::object();
  for (int page = 0; page < 100; ++page) {
    ASSIGN_OR_RETURN(Json r, Request("tools/list", params));
    if (!r.is_object() || !r.value("tools", Json::array()).is_array()) {
      return Fail(Code::kServerUnavailable, "tools/list answered without a tools array");
    }
    // A tool entry of the wrong shape is left out: every later reader expects an object with
    // a string name and, when present, a string description.
    for (auto& t : r["tools"]) {
      if (t.is_object() && t.contains("name") && t["name"].is_string() &&
          (!t.contains("description") || t["description"].is_string())) {
        all.push_back(std::move(t));
      }
    }
    if (!r.contains("nextCursor") || !r["nextCursor"].is_string()) break;
    params["cursor"] = r["nextCursor"];
  }
  return all;
}

Result<Json> McpConnection::CallTool(const std::string& name, const Json& arguments,
                                     const std::atomic<bool>* cancel) {
  return Request("tools/call", {{"name", name}, {"arguments", arguments}}, cancel);
}

bool StdioClient::Running() {
  std::lock_guard<std::mutex> lock(mu_);
  return !exited_;
}

pid_t StdioClient::Pid() {
  std::lock_guard<std::mutex> lock(mu_);
  return proc_ != nullptr ? proc_->sandbox_member() : 0;
}

std::string StdioClient::StderrTail() {
  std::string e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = proc_ != nullptr ? proc_->StderrText() : final_stderr_;
  }
  return mcp::StderrTail(e, session_.redactor());
}

}  // namespace cordon::mcp
