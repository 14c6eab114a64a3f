// Configured MCP servers: ~/.thndrs/mcp.toml, ~/.cordon/mcp.toml (global), then the project's
// .mcp.json, .thndrs/mcp.toml and .cordon/mcp.toml; later files override earlier ones by name.
// A project-level server is a repository asking to run code: it needs the user's trust.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/text.h"
#include "policy/egress.h"
#include "policy/policy.h"

namespace cordon::mcp {

enum class Transport { kStdio, kStreamableHttp };
inline constexpr EnumName<Transport> kTransportNames[] = {
    {Transport::kStdio, "stdio"}, {Transport::kStreamableHttp, "streamable_http"}};
NLOHMANN_JSON_SERIALIZE_ENUM(Transport, {{Transport::kStdio, "stdio"},
                                         {Transport::kStreamableHttp, "streamable_http"}})

struct ServerConfig {
  std::string name;
  Transport transport = Transport::kStdio;
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string url;
  std::map<std::string, std::string> headers;
  bool enabled = true;
  std::int64_t timeout_secs = 20;
  std::optional<NetworkMode> network;  // [servers.NAME.sandbox] network
  std::vector<std::string> read;       // [servers.NAME.sandbox] read
  std::vector<std::string> write;      // [servers.NAME.sandbox] write
  // [servers.NAME.sandbox] allow_domains, deny_domains, presets (network = "proxy"): added to
  // the policy's rules for this server's sandbox (EgressFor(policy, "mcp__NAME", egress)), each
  // rule's source "servers.NAME.sandbox (FILE:LINE)". From a project file only deny_domains
  // stay: its allow_domains and presets are dropped with a diagnostic (tighten-only).
  EgressExtra egress;
  std::string source;             // the file that defined it
  bool project = false;           // defined inside the workspace
  std::string definition_sha256;  // what trust is recorded against
};

struct McpConfig {
  std::vector<ServerConfig> servers;  // enabled and resolved, in name order
  std::vector<Json> diagnostics;      // skipped servers and why (secrets redacted)
};

bool IsValidServerName(std::string_view name);

// Expands ${NAME} from the environment plus CORDON_WORKSPACE/THNDRS_WORKSPACE; nullopt (and
// the missing name in *missing) when a variable is unset.
std::optional<std::string> ExpandVars(std::string_view in, const std::string& workspace,
                                      std::string* missing);

struct ConfigSources {
  std::vector<std::pair<std::string, bool>> files;  // (path, is_project), lowest precedence first
};
ConfigSources DefaultConfigSources(const std::string& workspace);

Result<McpConfig> LoadMcpConfig(const ConfigSources& sources, const std::string& workspace);

// A JSON configuration file parsed; a syntax error names the file, line and column
// ("PATH:LINE:COL: malformed JSON: ...").
Result<Json> ParseJsonFile(std::string_view text, const std::string& path);

// Trust of project-level servers, stored outside the workspace.
std::string TrustStorePath();
bool IsTrusted(const std::string& workspace, const ServerConfig& server);
// Records the definition's hash and, per tool, the hash of its name, description and schemas.
Status Trust(const std::string& workspace, const ServerConfig& server, const Json& tools);
// tool name -> pinned hash, empty when the server's tools were never pinned.
std::map<std::string, std::string> PinnedTools(const std::string& workspace,
                                               const std::string& server);
std::string ToolHash(const Json& tool);

}  // namespace cordon::mcp
