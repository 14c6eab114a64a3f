// The MCP server side of cordon: exposes the session's granted tools over JSON-RPC (stdio).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcp/jsonrpc.h"
#include "runner/session.h"

namespace cordon::mcp {

inline constexpr const char* kSupportedVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

// The version the server answers: the client's when supported, else the latest supported.
std::string NegotiateVersion(const Json& requested);

class McpServer {
 public:
  explicit McpServer(Session& session) : session_(session) {}
  // Handles one line from the client; returns what to send back (possibly nothing).
  std::vector<Json> HandleLine(std::string_view line);
  std::optional<Json> Handle(const Message& m);

 private:
  Json Initialize(const Json& params);
  Json Instructions();
  Session& session_;
  bool initialized_ = false;
  std::string version_;
};

// Serves until EOF on in_fd; logs only to stderr. Returns 0 on a clean EOF.
int ServeStdio(Session& session, int in_fd, int out_fd);

}  // namespace cordon::mcp
