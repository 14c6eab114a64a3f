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

#include "core/before_images.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/redact.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "policy/egress.h"
#include "policy/policy.h"

namespace cordon {

class ProcessHost;
struct ProcessRequest;
struct NetworkEvent;
struct ListenerStopOutcome;

enum class Effect { kNone, kFileWrite, kProcess };
std::string_view EffectName(Effect effect);

// What a write did, for the session's file_write audit record (audit/records.h).
struct FileWriteReport {
  std::string op{};
  std::string path{};
  std::optional<std::string> sha256_before{};  // none for a new file
  std::uint64_t bytes_before = 0;
  std::optional<WriteOutcome> written{};  // none when the write failed
  std::optional<Code> code{};             // why it failed
  // [audit] before_images: what storing the old content did (none when off or a new file).
  std::optional<BeforeImageOutcome> before_image{};
};

// What one call used (session_usage): its tool, how it ended (empty while it runs), and the
// figures of the processes it started (foreground or background), each null while unknown.
struct CallUsage {
  std::string tool{};
  std::string status{};  // ok, error, cancelled; empty while the call runs
  std::string code{};    // the error code of a failed call
  std::optional<double> elapsed_ms{};
  int processes = 0;  // the processes it started that have ended
  std::optional<double> cpu_ms{};
  std::optional<std::int64_t> max_rss_kb{};
  // {read_bytes, write_bytes, rchar, wchar}: the sum over its processes; null when a process
  // had none (the kernel keeps no I/O counts, or the process failed to start).
  Json io{};
  bool io_unknown = false;
  std::string message{};                // a failure's message: redacted, cut to 500 bytes
  std::vector<std::string> warnings{};  // what went wrong short of failing the call
  void AddProcess(double cpu, std::int64_t rss_kb, const Json& process_io);
};
// session_usage's result from the caller's calls: by tool and status, per call, in total.
Json SessionUsageJson(const std::map<std::uint64_t, CallUsage>& calls);
// session_traces's: the 10 slowest finished calls, the failures and the warnings (the latest
// 50 of each, with how many more there were).
Json SessionTracesJson(const std::map<std::uint64_t, CallUsage>& calls);

struct ToolContext {
  const Workspace& workspace;
  const Policy& policy;
  // Appends a durable file_write audit record.
  std::function<void(const FileWriteReport& report)> record_file_write;
  ProcessHost* processes = nullptr;           // confined processes of this session
  const std::atomic<bool>* cancel = nullptr;  // set when the caller cancels the call
  const Redactor* redactor = nullptr;         // line cuts move back so no secret is split
  // [audit] before_images: where the write tools keep a file's old content. Null: off.
  BeforeImageStore* before_images = nullptr;
  // read_url: a stream socket connected to the session's egress proxy and served under
  // read_url's rules (EgressProxy::Connect on read_url's listener). Empty: the session has no
  // proxy for read_url, which then refuses (denied_by_policy).
  std::function<Result<UniqueFd>()> connect_egress{};
  // read_url's rules, to check a redirect's name before following it (the proxy decides again).
  const EgressPolicy* egress = nullptr;
  // cordon serve's --network, --allow-domain, --env, --read, --write...: what every process
  // run_shell starts begins from (network, egress rules, extra env, grants). Null: nothing.
  const ProcessRequest* process_template = nullptr;
  // mcp_server_status: the configured servers' states (ExternalTools::ServerStatus). Null:
  // this session has no configured servers.
  std::function<Result<Json>(const std::optional<std::string>& name)> server_status{};
  // session_tag: adds (tagged) or removes a tag of the caller's and records it; returns the
  // caller's tags after the change. Null: this session keeps no tags.
  std::function<Result<std::vector<std::string>>(const std::string& tag, bool tagged)> set_tag{};
  // Who makes the call (ProcessRequest::owner): the MCP session under `serve --http`, empty
  // otherwise. The jobs tools see this owner's jobs only.
  std::string owner{};
  // The call's number in the session (ProcessRequest::call of what it starts).
  std::uint64_t call = 0;
  // session_usage: the caller's calls so far (CallUsage by call number). Null: none kept.
  std::function<std::map<std::uint64_t, CallUsage>()> usage{};
  // session_diff: AuditSessionDiff (audit/diff.h) of this session's own log, kept to the
  // caller's calls in [from, to]. Null: this session has no log to read.
  std::function<Result<Json>(std::uint64_t from, std::uint64_t to)> session_diff{};
  // local_servers' probes: one network record each (protocol probe). Null: none written.
  std::function<void(const NetworkEvent& e)> record_network{};
  // stop_local_server: its local_server_stopped record, after the signals. Null: none written.
  std::function<void(const std::string& job, const ListenerStopOutcome& stop)>
      record_listener_stop{};
};

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
