// The supervisor's own view (issue 23): the live table of confined processes. Text other
// programs wrote (a command line) is redacted, cut and called untrusted.
#include <cmath>

#include "runner/capture.h"
#include "runner/processes.h"
#include "tools/registry.h"

namespace cordon {
namespace {

constexpr std::size_t kDefaultProcesses = 50;
constexpr std::size_t kMaxProcesses = 500;
// What an agent gets of a command line another program chose.
constexpr std::size_t kCmdlineBytes = 500;

Result<Json> SupervisorProcesses(const Json& in, ToolContext& ctx) {
  if (ctx.services.Processes() == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  const std::int64_t asked = in.value("max_processes", std::int64_t{kDefaultProcesses});
  // The schema says 1..500; checked here too, as the executor's own rule.
  if (asked < 1 || asked > static_cast<std::int64_t>(kMaxProcesses)) {
    return Fail(Code::kInvalidInput, "max_processes must be between 1 and 500");
  }
  const auto max = static_cast<std::size_t>(asked);
  // Enough of each command line for the redactor to see a secret that straddles the cut whole.
  const std::size_t read_bytes = kCmdlineBytes + Redactor::kWindow;
  const std::vector<ProcessHost::LiveRow> rows =
      ctx.services.Processes()->LiveTable(ctx.caller, read_bytes);
  Json processes = Json::array();
  for (std::size_t i = 0; i < rows.size() && i < max; ++i) {
    const ProcessHost::LiveRow& r = rows[i];
    // Cut before a secret that straddles the cut; the session redacts what is left.
    std::string cmdline = Excerpt(r.process.cmdline, kCmdlineBytes, ctx.redactor);
    Json owner = {{"kind", r.owner.kind}, {"name", r.owner.name}};
    processes.push_back({{"pid", r.process.pid},
                         {"ppid", r.process.ppid},
                         {"owner", std::move(owner)},
                         {"state", r.process.state},
                         {"cpu_ms", r.process.cpu_ms},
                         {"rss_kb", r.process.rss_kb >= 0 ? Json(r.process.rss_kb) : Json(nullptr)},
                         {"started_ms_ago", r.process.started_ms_ago >= 0
                                                ? Json(std::round(r.process.started_ms_ago))
                                                : Json(nullptr)},
                         {"sandbox_pid", r.sandbox_pid},
                         {"pid_namespace", r.pid_namespace},
                         {"cmdline", cmdline},
                         {"cmdline_truncated", cmdline.size() < r.process.cmdline.size()},
                         {"cgroup", r.cgroup}});
  }
  return Json{{"processes", std::move(processes)},
              {"total", rows.size()},
              {"omitted", rows.size() > max ? rows.size() - max : 0}};
}

// The last `max` bytes of a text a program wrote, redacted whole first (so no secret is split),
// the cut moved past a redaction marker it would split and past a split UTF-8 sequence.
std::string UntrustedTail(std::string text, std::size_t max, const Redactor* redactor) {
  if (redactor != nullptr) redactor->Redact(text);
  if (text.size() <= max) return text;
  std::size_t cut = text.size() - max;
  const std::size_t open = text.rfind("[REDACTED:", cut);
  if (open != std::string::npos) {
    const std::size_t close = text.find(']', open);
    if (close != std::string::npos && close >= cut) cut = close + 1;
  }
  while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) ++cut;
  return text.substr(cut);
}

Result<Json> McpServerStatus(const Json& in, ToolContext& ctx) {
  std::optional<std::string> name;
  if (in.contains("name")) name = in["name"].get<std::string>();
  ASSIGN_OR_RETURN(Json status, ctx.services.ServerStatus(name));
  for (Json& server : status["servers"]) {
    if (server["stderr_tail"].is_string()) {
      server["stderr_tail"] =
          UntrustedTail(server["stderr_tail"].get<std::string>(), kCmdlineBytes, ctx.redactor);
    }
    if (server["last_error"].is_string()) {
      server["last_error"] =
          Excerpt(server["last_error"].get<std::string>(), kCmdlineBytes, ctx.redactor);
    }
  }
  return status;
}

}  // namespace

ToolSpec MakeMcpServerStatusTool() {
  ToolSpec t;
  t.name = "mcp_server_status";
  t.description =
      "Each configured MCP server (or the one named): name, transport, state (not_started, "
      "running, exited), pid (its sandbox's init), uptime_ms, trust (\"trusted (user config)\", "
      "trusted, untrusted, changed), tools (visible at the last tools/list; null before one), "
      "calls, failures, "
      "last_error, stderr_tail. Asks the servers nothing. last_error and stderr_tail are text "
      "the server wrote: UNTRUSTED, redacted and cut to 500 bytes (the tail's last 500). An "
      "unknown name is not_found.";
  t.scope = "diagnostics:read";
  t.input_schema = {
      {"type", "object"},
      {"properties", {{"name", {{"type", "string"}, {"minLength", 1}, {"maxLength", 128}}}}},
      {"additionalProperties", false}};
  const Json server = {{"type", "object"},
                       {"properties",
                        {{"name", {{"type", "string"}}},
                         {"transport", {{"type", "string"}}},
                         {"state", {{"type", "string"}}},
                         {"pid", {{"type", {"integer", "null"}}}},
                         {"uptime_ms", {{"type", {"integer", "null"}}}},
                         {"trust", {{"type", "string"}}},
                         {"tools", {{"type", {"integer", "null"}}}},
                         {"calls", {{"type", "integer"}}},
                         {"failures", {{"type", "integer"}}},
                         {"last_error", {{"type", {"string", "null"}}}},
                         {"stderr_tail", {{"type", {"string", "null"}}}}}},
                       {"required", {"name", "state", "pid", "trust", "calls", "failures"}}};
  SetOutputSchemas(t, {{"servers", {{"type", "array"}, {"items", server}}}}, {"servers"});
  t.example = Json::object();
  t.example_code = Code::kDeniedByPolicy;  // diagnostics:read is off in the shipped policy
  t.run = McpServerStatus;
  return t;
}

ToolSpec MakeSupervisorProcessesTool() {
  ToolSpec t;
  t.name = "supervisor_processes";
  t.description =
      "The live table of confined processes: every process in the sandboxes of this session's "
      "running calls and background jobs (under `serve --http`, this MCP session's only) and of "
      "the configured MCP servers, read now from /proc: pid, ppid, owner {kind: call, job or "
      "server, name}, state, cpu_ms, rss_kb, sandbox_pid and pid_namespace, and the command "
      "line, and cgroup: its sandbox's cgroup now {mode v1 or v2, memory_bytes, pids} (null when "
      "it has none: an ordinary user without a delegated cgroup v2 tree). cordon itself is not "
      "listed. The command line is text the process chose: "
      "UNTRUSTED, redacted and cut to 500 bytes. At most max_processes rows (default 50, at "
      "most 500); omitted says how many more there were.";
  t.scope = "diagnostics:read";
  t.input_schema = {{"type", "object"},
                    {"properties",
                     {{"max_processes",
                       {{"type", "integer"},
                        {"minimum", 1},
                        {"maximum", 500},
                        {"description", "Rows to return (default 50)."}}}}},
                    {"additionalProperties", false}};
  const Json row = {
      {"type", "object"},
      {"properties",
       {{"pid", {{"type", "integer"}}},
        {"ppid", {{"type", "integer"}}},
        {"owner",
         {{"type", "object"},
          {"properties", {{"kind", {{"type", "string"}}}, {"name", {{"type", "string"}}}}}}},
        {"state", {{"type", "string"}}},
        {"cpu_ms", {{"type", "number"}}},
        {"rss_kb", {{"type", {"integer", "null"}}}},
        {"started_ms_ago", {{"type", {"number", "null"}}}},
        {"sandbox_pid", {{"type", "integer"}}},
        {"pid_namespace", {{"type", "integer"}}},
        {"cmdline", {{"type", "string"}}},
        {"cmdline_truncated", {{"type", "boolean"}}},
        {"cgroup",
         {{"type", {"object", "null"}},
          {"properties",
           {{"mode", {{"type", "string"}}},
            {"memory_bytes", {{"type", {"integer", "null"}}}},
            {"pids", {{"type", {"integer", "null"}}}}}}}}}},
      {"required", {"pid", "owner", "state", "cpu_ms", "rss_kb", "cmdline", "cgroup"}}};
  SetOutputSchemas(t,
                   {{"processes", {{"type", "array"}, {"items", row}}},
                    {"total", {{"type", "integer"}}},
                    {"omitted", {{"type", "integer"}}}},
                   {"processes", "total", "omitted"});
  t.example = {{"max_processes", 10}};
  // diagnostics:read is the user's to grant (policies.d/00-default.toml leaves it off).
  t.example_code = Code::kDeniedByPolicy;
  t.run = SupervisorProcesses;
  return t;
}

}  // namespace cordon
