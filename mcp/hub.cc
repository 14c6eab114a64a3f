// Namespacing, trust and pinning for configured servers.
#include "mcp/hub.h"

#include <chrono>
#include <cstdio>

namespace cordon::mcp {

bool RequiresTasks(const Json& tool) {
  if (!tool.is_object() || !tool.contains("execution") || !tool["execution"].is_object())
    return false;
  return JsonStringField(tool["execution"], "taskSupport") == "required";
}

McpHub::McpHub(Session& session, McpConfig config) : session_(session), config_(std::move(config)) {
  for (const auto& d : config_.diagnostics) {
    McpDiagnosticRecord rec{.server = d.value("server", ""), .reason = d.value("reason", "")};
    if (d.contains("source")) rec.source = d.value("source", "");
    session_.Audit(rec, false);
  }
  session_.SetExternalTools(this);
}

McpHub::~McpHub() {
  session_.SetExternalTools(nullptr);
  clients_.clear();
}

const ServerConfig* McpHub::Find(std::string_view name) const {
  for (const auto& s : config_.servers) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string McpHub::TrustState(const ServerConfig& server) const {
  if (!server.project) return "trusted (user config)";
  if (IsTrusted(session_.workspace().root(), server)) return "trusted";
  return PinnedTools(session_.workspace().root(), server.name).empty() ? "untrusted" : "changed";
}

Result<McpConnection*> McpHub::Client(const ServerConfig& server) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!IsTrusted(session_.workspace().root(), server)) {
    return Fail(Code::kDeniedByPolicy,
                "server " + server.name + " is defined by the project (" + server.source +
                    ") and is not trusted; review it, then run: cordon mcp trust " + server.name);
  }
  auto it = clients_.find(server.name);
  if (it != clients_.end()) return it->second.get();
  ASSIGN_OR_RETURN(auto client, ConnectServer(session_, server));
  const std::string name = server.name;
  client->SetOnToolsChanged([this, name] {
    session_.Audit(
        McpDiagnosticRecord{.server = name, .reason = "server announced tools/list_changed"},
        false);
    if (on_tools_changed) on_tools_changed();
  });
  client->Listen();
  McpConnection* raw = client.get();
  clients_[server.name] = std::move(client);
  {
    std::lock_guard<std::mutex> stats_lock(stats_mu_);
    stats_[server.name].started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now().time_since_epoch())
                                         .count();
  }
  return raw;
}

Result<std::pair<Json, Json>> McpHub::Tools(const ServerConfig& server) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  ASSIGN_OR_RETURN(McpConnection * client, Client(server));
  ASSIGN_OR_RETURN(Json tools, client->ListTools());
  auto pins = PinnedTools(session_.workspace().root(), server.name);
  Json visible = Json::array(), hidden = Json::array();
  std::vector<std::string> need_tasks;
  for (auto& t : tools) {
    const std::string name = t.value("name", "");
    if (RequiresTasks(t)) {
      // cordon's client cannot create or poll MCP tasks (2025-11-25), so every call would fail:
      // the tool is left out of the catalog rather than listed as callable.
      need_tasks.push_back(name);
      continue;
    }
    auto pin = pins.find(name);
    if (!pins.empty() && (pin == pins.end() || pin->second != ToolHash(t))) {
      hidden.push_back(t);
      continue;
    }
    visible.push_back(t);
  }
  if (!need_tasks.empty() && noted_tasks_.insert(server.name).second) {
    std::string list;
    for (const auto& n : need_tasks) list += (list.empty() ? "" : ", ") + n;
    std::fprintf(stderr,
                 "cordon: server %s: not listed, since they require MCP tasks (execution."
                 "taskSupport \"required\"), which cordon does not support: %s\n",
                 server.name.c_str(), list.c_str());
    session_.Audit(McpDiagnosticRecord{.server = server.name,
                                       .reason = "tools require tasks, which cordon does not "
                                                 "support; not listed",
                                       .tools = need_tasks},
                   true);
  }
  if (!hidden.empty()) {
    std::vector<std::string> names;
    for (const auto& t : hidden) names.push_back(t.value("name", ""));
    session_.Audit(McpDiagnosticRecord{.server = server.name,
                                       .reason = "tools changed since they were trusted; hidden",
                                       .tools = std::move(names)},
                   true);
  }
  {
    std::lock_guard<std::mutex> stats_lock(stats_mu_);
    stats_[server.name].tools = visible.size();
  }
  return std::make_pair(visible, hidden);
}

std::optional<ExternalName> McpHub::Resolve(std::string_view tool) {
  if (!tool.starts_with("mcp__")) return std::nullopt;
  // The longest server name that fits wins: "a__b" over "a" for mcp__a__b__t.
  const ServerConfig* server = nullptr;
  for (const auto& s : config_.servers) {
    if (tool.size() > 5 + s.name.size() + 2 && tool.substr(5, s.name.size()) == s.name &&
        tool.substr(5 + s.name.size(), 2) == "__" &&
        (server == nullptr || s.name.size() > server->name.size())) {
      server = &s;
    }
  }
  if (server == nullptr) return std::nullopt;
  return ExternalName{server->name, std::string(tool.substr(5 + server->name.size() + 2))};
}

std::vector<Json> McpHub::Catalog() {
  std::vector<Json> out;
  for (const auto& s : config_.servers) {
    auto tools = Tools(s);
    if (!tools) {
      session_.Audit(
          McpDiagnosticRecord{
              .server = s.name, .reason = "tools/list failed", .message = tools.error().message},
          true);
      continue;
    }
    for (auto t : tools->first) {
      t["name"] = "mcp__" + s.name + "__" + t.value("name", "");
      out.push_back(std::move(t));
    }
  }
  return out;
}

Result<Json> McpHub::InputSchema(const ExternalName& name) {
  const ServerConfig* server = Find(name.server);
  if (server == nullptr) return Fail(Code::kInvalidInput, "unknown server " + name.server);
  ASSIGN_OR_RETURN(auto tools, Tools(*server));
  for (const auto& t : tools.second) {
    if (t.value("name", "") == name.server_tool) {
      return Fail(Code::kDeniedByPolicy,
                  "tool " + name.server_tool + " of server " + name.server +
                      " changed since it was trusted; run cordon mcp trust " + name.server);
    }
  }
  for (const auto& t : tools.first) {
    if (t.value("name", "") == name.server_tool) return t.value("inputSchema", Json());
  }
  return Fail(Code::kInvalidInput,
              "server " + name.server + " has no tool \"" + name.server_tool + "\"");
}

Result<Json> McpHub::Call(const ExternalName& name, const Json& input,
                          const std::atomic<bool>* cancel) {
  const ServerConfig* server = Find(name.server);
  if (server == nullptr) return Fail(Code::kInvalidInput, "unknown server " + name.server);
  auto client = Client(*server);
  Result<Json> result = client ? (*client)->CallTool(name.server_tool, input, cancel)
                               : Result<Json>(std::unexpected(client.error()));
  std::lock_guard<std::mutex> lock(stats_mu_);
  Stats& st = stats_[name.server];
  ++st.calls;
  // A server's answer is untrusted: "isError": "true" or 1 is not an error flag, and must not
  // throw here (value<bool> would, on a worker thread, ending every session).
  const bool failed = !result || (result->is_object() && result->contains("isError") &&
                                  (*result)["isError"] == Json(true));
  if (failed) {
    ++st.failures;
    st.last_error = result ? "the tool returned isError" : result.error().message;
  }
  return result;
}

Result<Json> McpHub::ServerStatus(const std::optional<std::string>& name) {
  if (name && Find(*name) == nullptr) {
    return Fail(Code::kNotFound, "no configured server is named \"" + name->substr(0, 64) + "\"");
  }
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  Json servers = Json::array();
  std::lock_guard<std::recursive_mutex> lock(mu_);
  for (const auto& s : config_.servers) {
    if (name && s.name != *name) continue;
    Stats st;
    {
      std::lock_guard<std::mutex> stats_lock(stats_mu_);
      if (auto it = stats_.find(s.name); it != stats_.end()) st = it->second;
    }
    auto it = clients_.find(s.name);
    McpConnection* c = it != clients_.end() ? it->second.get() : nullptr;
    const bool running = c != nullptr && c->Running();
    const pid_t pid = c != nullptr ? c->Pid() : 0;
    Json j = {
        {"name", s.name},
        {"transport", s.transport == Transport::kStdio ? "stdio" : "streamable_http"},
        {"state", c == nullptr ? "not_started"
                  : running    ? "running"
                               : "exited"},
        {"pid", running && pid > 0 ? Json(pid) : Json(nullptr)},
        {"uptime_ms", running && st.started_ms > 0 ? Json(now - st.started_ms) : Json(nullptr)},
        {"trust", TrustState(s)},
        {"tools", st.tools ? Json(*st.tools) : Json(nullptr)},
        {"calls", st.calls},
        {"failures", st.failures},
        {"last_error", st.last_error.empty() ? Json(nullptr) : Json(st.last_error)},
        {"stderr_tail", c != nullptr ? Json(c->StderrTail()) : Json(nullptr)}};
    servers.push_back(std::move(j));
  }
  return Json{{"servers", std::move(servers)}};
}

}  // namespace cordon::mcp
