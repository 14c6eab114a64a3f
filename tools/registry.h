// The tool registry: every built-in tool's name, schemas, effect, scope, example and executor.
// The provider catalog is derived from it, so no tool is exposed without an executor.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/redact.h"
#include "core/text.h"
#include "policy/egress.h"
#include "policy/policy.h"
#include "tools/context.h"

namespace cordon {

enum class Effect { kNone, kFileWrite, kProcess };
std::string_view EffectName(Effect effect);

struct ToolSpec {
  std::string name;
  std::string description;
  std::string scope;
  Effect effect = Effect::kNone;
  Json input_schema;
  Json output_schema;   // what the catalog shows: success fields, or {"error":{...}}
  Json success_schema;  // the success shape alone, with its required fields
  Json example;
  // When the example cannot succeed under the shipped policy, the code it gets instead
  // (read_url: denied_by_policy, as net:read and allowed domains are the user's to grant).
  std::optional<Code> example_code;
  // Files the example expects in its workspace: (relative path, content).
  std::vector<std::pair<std::string, std::string>> example_files;
  // Anything else the example needs first (e.g. a background job to read or cancel).
  std::function<Status(ToolContext& ctx)> example_setup;
  std::function<Result<Json>(const Json& input, ToolContext& ctx)> run;
  // Whether this input is a few milliseconds of CPU work at most (no process, no network, no
  // fsync). `cordon serve` runs such a call on its reading thread instead of handing it to a
  // worker: the hand-off costs more than the call, and nothing would be left to cancel.
  std::function<bool(const Json& input, const Workspace& ws)> quick;
};

const std::vector<ToolSpec>& BuiltinTools();
const ToolSpec* FindTool(std::string_view name);
// The tools whose scopes `policy` grants: what tools/list and `cordon tools` show.
std::vector<const ToolSpec*> GrantedTools(const Policy& policy);

enum class CatalogFormat { kMcp, kOpenAi, kAnthropic };
Result<CatalogFormat> ParseCatalogFormat(std::string_view name);
Json CatalogEntry(const ToolSpec& spec, CatalogFormat format);

// The MCP CallToolResult shape, used everywhere: text is the JSON rendering of structured.
Json MakeCallToolResult(Json structured, bool is_error);
Json MakeErrorResult(const Error& error);

// Tool constructors, one per file.
ToolSpec MakeReadFileRangeTool();
ToolSpec MakeCreateFileTool();
ToolSpec MakeReplaceRangeTool();
ToolSpec MakeWritePatchTool();
ToolSpec MakeRunShellTool();
ToolSpec MakeProcessListTool();
ToolSpec MakeProcessOutputTool();
ToolSpec MakeProcessCancelTool();
ToolSpec MakeSearchTextTool();
ToolSpec MakeFindFilesTool();
ToolSpec MakeListSearchableFilesTool();
ToolSpec MakeReadUrlTool();
ToolSpec MakeSupervisorProcessesTool();
ToolSpec MakeSessionTagTool();
ToolSpec MakeMcpServerStatusTool();
ToolSpec MakeSessionUsageTool();
ToolSpec MakeSessionTracesTool();
ToolSpec MakeSessionDiffTool();
// host_resources and resource_history (tools/monitor_tools.cc).
std::vector<ToolSpec> MonitorTools();
// local_servers (tools/listener_tools.cc).
std::vector<ToolSpec> ListenerTools();

// A session tag as given (session_tag, --tag): trimmed of spaces and tabs; empty, holding a line
// break or another control character, or over 64 characters (code points) is invalid_input.
Result<std::string> NormalizeSessionTag(std::string_view tag);

// Shared by the write tools: normalizes `path`, refuses protected paths, cordon's own files,
// the policy's deny list and a dangerous workspace (/ or $HOME) (denied_by_policy).
Result<std::string> ResolveWritablePath(const ToolContext& ctx, const std::string& path);
// Shared by the read tools: normalizes `path`, refuses cordon's own files and the policy's
// deny list (denied_by_policy), as the sandbox masks them.
Result<std::string> ResolveReadablePath(const ToolContext& ctx, const std::string& path);
// What the file tools refuse, as the sandbox masks it: cordon's own files, then the policy's
// deny list, as canonical absolute paths.
std::vector<std::string> ToolMaskedRoots(const ToolContext& ctx);
// Whether a workspace-relative path that a search or listing returned must be left out.
bool HiddenFromTools(const ToolContext& ctx, const std::vector<std::string>& masked,
                     const std::string& rel);
// The error schema every tool's output schema admits.
Json ErrorOutputSchema();
// Sets spec.success_schema and spec.output_schema from the success properties.
void SetOutputSchemas(ToolSpec& spec, Json success_properties, Json required);

}  // namespace cordon
