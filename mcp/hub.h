// McpHub: the session's configured MCP servers as external tools mcp__{server}__{tool}. Servers
// start on demand, confined; project servers need trust; tools whose schema changed since they
// were pinned are hidden until trusted again.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "mcp/client.h"
#include "mcp/config.h"
#include "session/session.h"

namespace cordon::mcp {

// A tool that can be called only as an MCP task (execution.taskSupport "required", 2025-11-25).
bool RequiresTasks(const Json& tool);

class McpHub : public ExternalTools {
 public:
  McpHub(Session& session, McpConfig config);
  ~McpHub() override;

  std::optional<ExternalName> Resolve(std::string_view tool) override;
  std::vector<Json> Catalog() override;
  Result<Json> InputSchema(const ExternalName& name) override;
  Result<Json> Call(const ExternalName& name, const Json& input,
                    const std::atomic<bool>* cancel) override;
  Result<Json> ServerStatus(const std::optional<std::string>& name) override;

  const McpConfig& config() const { return config_; }
  // Set by serve: called when any server's tool set changes.
  std::function<void()> on_tools_changed;
  const ServerConfig* Find(std::string_view name) const;
  std::string TrustState(const ServerConfig& server) const;  // trusted | untrusted | changed
  Result<McpConnection*> Client(const ServerConfig& server);
  // The server's tools split into visible ones and ones hidden by a changed pin.
  Result<std::pair<Json, Json>> Tools(const ServerConfig& server);

 private:
  Session& session_;
  McpConfig config_;
  std::map<std::string, std::unique_ptr<McpConnection>> clients_;
  std::recursive_mutex mu_;            // serve may call tools concurrently
  std::set<std::string> noted_tasks_;  // servers whose task-only tools were reported once
  // mcp_server_status's figures, per server name (under stats_mu_: calls run concurrently).
  struct Stats {
    std::int64_t started_ms = 0;  // steady clock, when its connection was made
    std::uint64_t calls = 0, failures = 0;
    std::optional<std::size_t> tools;  // visible tools at the last tools/list
    std::string last_error;
  };
  std::mutex stats_mu_;
  std::map<std::string, Stats> stats_;
};

}  // namespace cordon::mcp
