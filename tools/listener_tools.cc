// local_servers (issue 23): the TCP listeners of this session's jobs, read from /proc.
#include <set>

#include "runner/listeners.h"
#include "runner/processes.h"
#include "tools/registry.h"

namespace cordon {
namespace {

Result<Json> LocalServers(const Json& in, ToolContext& ctx) {
  if (ctx.processes == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  std::optional<std::string> job_id;
  if (in.contains("job_id")) {
    job_id = in["job_id"].get<std::string>();
    // Another MCP session's job is not_found, as process_output says it.
    bool known = false;
    for (const Json& j : ctx.processes->List(ctx.owner).value("jobs", Json::array())) {
      if (j.value("id", "") == *job_id) known = true;
    }
    if (!known) return Fail(Code::kNotFound, "no job \"" + *job_id + "\" in this session");
  }
  // Each running job's sandbox once (the live table has a row per process of it).
  std::set<std::pair<std::string, pid_t>> sandboxes;
  for (const ProcessHost::LiveRow& r : ctx.processes->LiveTable(ctx.owner, 0)) {
    if (r.owner.kind != "job" || r.owner.owner != ctx.owner) continue;
    if (job_id && r.owner.name != *job_id) continue;
    sandboxes.insert({r.owner.name, r.sandbox_pid});
  }
  Json servers = Json::array();
  for (const auto& [job, sandbox] : sandboxes) {
    for (const Listener& l : NamespaceListeners(sandbox)) {
      std::string comm = l.comm;
      if (ctx.redactor != nullptr) ctx.redactor->Redact(comm);
      servers.push_back(
          {{"job", job}, {"pid", l.pid}, {"address", l.address}, {"port", l.port}, {"comm", comm}});
    }
  }
  return Json{{"servers", std::move(servers)}};
}

ToolSpec MakeLocalServersTool() {
  ToolSpec t;
  t.name = "local_servers";
  t.description =
      "The TCP listeners of this session's running background jobs (under `serve --http`, this "
      "MCP session's; or of job_id only): job, pid (host pid), address, port, comm. Read from "
      "/proc: each job process's net/tcp and tcp6 (the job's own network namespace) mapped "
      "through its fd table's socket inodes. A job with network none has no inet sockets. comm "
      "is the name the process gave itself: UNTRUSTED. An unknown job_id (or another MCP "
      "session's) is not_found.";
  t.scope = "process:operate";
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"job_id",
         {{"type", "string"},
          {"minLength", 1},
          {"maxLength", 64},
          {"description", "A job id from run_shell with background (job-1, ...)."}}}}},
      {"additionalProperties", false}};
  const Json server = {{"type", "object"},
                       {"properties",
                        {{"job", {{"type", "string"}}},
                         {"pid", {{"type", "integer"}}},
                         {"address", {{"type", "string"}}},
                         {"port", {{"type", "integer"}}},
                         {"comm", {{"type", "string"}}}}},
                       {"required", {"job", "pid", "address", "port", "comm"}}};
  SetOutputSchemas(t, {{"servers", {{"type", "array"}, {"items", server}}}}, {"servers"});
  t.example = Json::object();
  t.run = LocalServers;
  return t;
}

}  // namespace

std::vector<ToolSpec> ListenerTools() { return {MakeLocalServersTool()}; }

}  // namespace cordon
