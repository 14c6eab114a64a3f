// local_servers and stop_local_server (issue 23): the TCP listeners of this session's jobs, read
// from /proc, probed over sockets made inside their network namespaces, and stopped through
// pidfds.
#include <sys/socket.h>

#include <chrono>
#include <cmath>

#include "core/clock.h"
#include "runner/capture.h"
#include "runner/egress_proxy.h"
#include "runner/listeners.h"
#include "runner/processes.h"
#include "tools/loopback_probe.h"
#include "tools/registry.h"

namespace cordon {
namespace {

constexpr std::size_t kMaxUrls = 32;
constexpr std::size_t kBodyBytes = 500;  // what an agent gets of a body a program wrote
constexpr int kProbeDeadlineMs = 3000;   // one probe, connect to close
constexpr double kAllProbesMs = 20000;   // every probe of one call

std::string Untrusted(std::string text, const Redactor* redactor) {
  if (redactor != nullptr) redactor->Redact(text);
  return text;
}

Json ListenerJson(const std::string& job, const Listener& l, const Redactor* redactor) {
  return {{"job", job},
          {"pid", l.pid},
          {"address", l.address},
          {"port", l.port},
          {"comm", Untrusted(l.comm, redactor)}};
}

// A listener on the URL's port that a connection to its address reaches: a wildcard or the same
// address, of the URL's family (a v6 wildcard takes v4 too, unless IPV6_V6ONLY: the probe says).
bool Serves(const Listener& l, const LoopbackUrl& u) {
  if (l.port != u.port) return false;
  if (l.address == "0.0.0.0") return !u.v6;
  if (l.address == "::") return true;
  return l.address == u.address;
}

Json ProbeOne(const std::string& url_text, const LoopbackUrl& url,
              const std::optional<std::string>& asked_job,
              const std::vector<ProcessHost::JobListener>& listeners, double until,
              ToolContext& ctx) {
  // The namespace it is probed in: the job asked for, else the job whose listener serves it.
  const ProcessHost::JobListener* owner = nullptr;
  for (const auto& jl : listeners) {
    if ((!asked_job || jl.job == *asked_job) && Serves(jl.listener, url)) {
      owner = &jl;
      break;
    }
  }
  Json out = {{"url", url_text},
              {"job", nullptr},
              {"owner", owner != nullptr ? ListenerJson(owner->job, owner->listener, ctx.redactor)
                                         : Json(nullptr)},
              {"probed", false},
              {"http_status", nullptr},
              {"content_type", nullptr},
              {"body", nullptr},
              {"body_bytes", nullptr},
              {"body_truncated", false},
              {"elapsed_ms", nullptr},
              {"error", nullptr}};
  const std::string job = asked_job ? *asked_job : owner != nullptr ? owner->job : "";
  if (job.empty()) {
    out["error"] = "no listener of this session's jobs serves port " + std::to_string(url.port) +
                   ": nothing was probed (give job_id to probe a job's network namespace anyway)";
    return out;
  }
  out["job"] = job;
  if (MonotonicMs() >= until || (ctx.cancel != nullptr && ctx.cancel->load())) {
    out["error"] = "not probed: the call's 20 s for probes ran out (or it was cancelled)";
    return out;
  }
  auto sock = ctx.services.Processes()->ProbeSocket(ctx.caller, job, url.v6 ? AF_INET6 : AF_INET);
  if (!sock) {
    out["error"] = "not probed: " + sock.error().message;
    return out;
  }
  const int deadline = static_cast<int>(std::min<double>(kProbeDeadlineMs, until - MonotonicMs()));
  // All of what arrived (64 KiB at most) comes back: it is redacted whole before any cut, so no
  // secret that a cut would split escapes its rule.
  const ProbeResult r = ProbeHttp(std::move(*sock), url, std::max(deadline, 1), 65536);
  out["probed"] = true;
  out["elapsed_ms"] = std::round(r.elapsed_ms * 10) / 10;
  if (r.http_status) out["http_status"] = *r.http_status;
  if (r.http_status) {
    out["content_type"] = Excerpt(Untrusted(r.content_type, ctx.redactor), 200, ctx.redactor);
    // Redacted whole first, then cut (the cut moves back before a marker it would split).
    const std::string body = Excerpt(Untrusted(r.body, ctx.redactor), kBodyBytes, ctx.redactor);
    out["body"] = body;
    out["body_bytes"] = r.body_bytes;
    out["body_truncated"] = r.body_bytes > body.size();
  }
  if (!r.error.empty()) out["error"] = r.error;
  {
    NetworkEvent e;
    e.identity = "job " + job;
    e.protocol = "probe";
    e.method = "GET";
    e.host = url.host;
    e.port = url.port;
    if (r.connected) e.address = url.address;
    e.allowed = true;
    e.rule = "local_servers";
    e.error = r.error;
    e.bytes_up = r.bytes_up;
    e.bytes_down = r.bytes_down;
    e.duration_ms = r.elapsed_ms;
    e.status = r.http_status.value_or(0);
    ctx.services.RecordNetwork(e);
  }
  return out;
}

Result<Json> LocalServers(const Json& in, ToolContext& ctx) {
  if (ctx.services.Processes() == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  std::optional<std::string> job_id;
  if (in.contains("job_id")) job_id = in["job_id"].get<std::string>();
  // Every URL is checked before anything is probed: one bad URL fails the call.
  std::vector<std::pair<std::string, LoopbackUrl>> urls;
  if (in.contains("urls")) {
    if (in["urls"].size() > kMaxUrls) return Fail(Code::kInvalidInput, "at most 32 urls");
    for (const Json& u : in["urls"]) {
      ASSIGN_OR_RETURN(LoopbackUrl parsed, ParseLoopbackUrl(u.get<std::string>()));
      urls.emplace_back(u.get<std::string>(), std::move(parsed));
    }
  }
  // Another MCP session's job is not_found, with the message of one that never existed.
  ASSIGN_OR_RETURN(std::vector<ProcessHost::JobListener> listeners,
                   ctx.services.Processes()->Listeners(ctx.caller, job_id));
  Json servers = Json::array();
  for (const auto& jl : listeners)
    servers.push_back(ListenerJson(jl.job, jl.listener, ctx.redactor));
  Json out = {{"servers", std::move(servers)}};
  if (!urls.empty()) {
    const double until = MonotonicMs() + kAllProbesMs;
    Json probes = Json::array();
    for (const auto& [text, url] : urls)
      probes.push_back(ProbeOne(text, url, job_id, listeners, until, ctx));
    out["probes"] = std::move(probes);
  }
  return out;
}

Json JobIdSchema() {
  return {{"type", "string"},
          {"minLength", 1},
          {"maxLength", 64},
          {"description", "A job id from run_shell with background (job-1, ...)."}};
}

ToolSpec MakeLocalServersTool() {
  ToolSpec t;
  t.name = "local_servers";
  t.description =
      "The TCP listeners of this session's running background jobs (under `serve --http`, this "
      "MCP session's; or of job_id only): job, pid (host pid), address, port, comm. Read from "
      "/proc: each job process's net/tcp and tcp6 (the job's own network namespace) mapped "
      "through its fd table's socket inodes. A job with network none has no inet sockets. "
      "urls (at most 32; http only, host localhost, 127.0.0.0/8 or [::1]) are each fetched "
      "with one GET inside a job's network namespace: job_id's, or else the job whose listener "
      "serves the port (owner; null when no job's does, and then nothing is probed). The socket "
      "is made by the job's sandbox and connected by cordon, so a probe reaches what the job "
      "itself can (a job with network allow shares the host's loopback). Each probe is a "
      "`network` record (protocol probe). 3 s per probe, 20 s in all. comm, content_type and "
      "body (the first 500 bytes, redacted) come from programs the agent ran: UNTRUSTED. An "
      "unknown job_id (or another MCP session's) is not_found.";
  t.scope = "process:operate";
  t.input_schema = {{"type", "object"},
                    {"properties",
                     {{"job_id", JobIdSchema()},
                      {"urls",
                       {{"type", "array"},
                        {"maxItems", kMaxUrls},
                        {"items", {{"type", "string"}, {"minLength", 1}, {"maxLength", 2048}}},
                        {"description",
                         "Loopback http URLs to GET inside a job's network namespace, e.g. "
                         "http://127.0.0.1:8000/health."}}}}},
                    {"additionalProperties", false}};
  const Json server = {{"type", "object"},
                       {"properties",
                        {{"job", {{"type", "string"}}},
                         {"pid", {{"type", "integer"}}},
                         {"address", {{"type", "string"}}},
                         {"port", {{"type", "integer"}}},
                         {"comm", {{"type", "string"}}}}},
                       {"required", {"job", "pid", "address", "port", "comm"}}};
  Json nullable_server = server;
  nullable_server["type"] = {"object", "null"};
  const Json nullable_int = {{"type", {"integer", "null"}}};
  const Json nullable_str = {{"type", {"string", "null"}}};
  const Json probe = {{"type", "object"},
                      {"properties",
                       {{"url", {{"type", "string"}}},
                        {"job", nullable_str},
                        {"owner", nullable_server},
                        {"probed", {{"type", "boolean"}}},
                        {"http_status", nullable_int},
                        {"content_type", nullable_str},
                        {"body", nullable_str},
                        {"body_bytes", nullable_int},
                        {"body_truncated", {{"type", "boolean"}}},
                        {"elapsed_ms", {{"type", {"number", "null"}}}},
                        {"error", nullable_str}}},
                      {"required",
                       {"url", "job", "owner", "probed", "http_status", "content_type", "body",
                        "body_bytes", "body_truncated", "elapsed_ms", "error"}}};
  SetOutputSchemas(t,
                   {{"servers", {{"type", "array"}, {"items", server}}},
                    {"probes", {{"type", "array"}, {"items", probe}}}},
                   {"servers"});
  t.example = {{"urls", {"http://127.0.0.1:8000/"}}};
  t.run = LocalServers;
  return t;
}

Result<Json> StopLocalServer(const Json& in, ToolContext& ctx) {
  if (ctx.services.Processes() == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  const std::string job = in["job_id"].get<std::string>();
  const auto pid = in["pid"].get<std::int64_t>();
  const auto port = in["port"].get<std::int64_t>();
  if (pid < 1 || pid > 4194304) return Fail(Code::kInvalidInput, "pid must be 1-4194304");
  if (port < 1 || port > 65535) return Fail(Code::kInvalidInput, "port must be 1-65535");
  ASSIGN_OR_RETURN(ListenerStopOutcome stop,
                   ctx.services.Processes()->StopListener(ctx.caller, job, static_cast<pid_t>(pid),
                                                          static_cast<int>(port)));
  stop.comm = Untrusted(stop.comm, ctx.redactor);
  ctx.services.RecordListenerStop(job, stop);
  return Json{{"job_id", job},
              {"pid", stop.pid},
              {"port", stop.port},
              {"comm", stop.comm},
              {"pgid", stop.group ? Json(stop.pgid) : Json(nullptr)},
              {"group_by_number", stop.group_by_number},
              {"signals", stop.signals},
              {"stopped", stop.stopped},
              {"elapsed_ms", std::round(stop.elapsed_ms * 10) / 10}};
}

ToolSpec MakeStopLocalServerTool() {
  ToolSpec t;
  t.name = "stop_local_server";
  t.description =
      "Stops a TCP listener a background job of this session started (local_servers lists "
      "them): SIGTERM to its process group, then SIGKILL after the job's stop grace "
      "(stop_grace_ms). The process must be in the job's own pid namespace: another job's, a "
      "server's or the host's is not_owned; a pid that does not listen on port is not_found. A "
      "listener in the job's top process group (the job's command, or a child it did not put in "
      "a group of its own: start the server with setsid) is shared_group: stopping it would "
      "stop the job, so use process_cancel. Every process is pinned by a pidfd before its "
      "namespace is checked and is signalled through it; the group through its leader's pidfd "
      "(PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9). On an older kernel the group is signalled by "
      "number right after its leader was seen alive, and a group that ends and whose id is "
      "reused in that instant is a race that remains (group_by_number says so). A job with no "
      "pid namespace of its own (the weaker mode) is unsupported. Writes a "
      "`local_server_stopped` record. comm is the name the process gave itself: UNTRUSTED.";
  t.scope = "process:operate";
  t.effect = Effect::kProcess;
  t.input_schema = {{"type", "object"},
                    {"properties",
                     {{"job_id", JobIdSchema()},
                      {"pid",
                       {{"type", "integer"},
                        {"minimum", 1},
                        {"maximum", 4194304},
                        {"description", "The listener's pid, as local_servers gives it."}}},
                      {"port", {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}}}}},
                    {"required", {"job_id", "pid", "port"}},
                    {"additionalProperties", false}};
  SetOutputSchemas(t,
                   {{"job_id", {{"type", "string"}}},
                    {"pid", {{"type", "integer"}}},
                    {"port", {{"type", "integer"}}},
                    {"comm", {{"type", "string"}}},
                    {"pgid", {{"type", {"integer", "null"}}}},
                    {"group_by_number", {{"type", "boolean"}}},
                    {"signals", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                    {"stopped", {{"type", "boolean"}}},
                    {"elapsed_ms", {{"type", "number"}}}},
                   {"job_id", "pid", "port", "comm", "pgid", "group_by_number", "signals",
                    "stopped", "elapsed_ms"});
  // pid 1 is never in a job's sandbox as cordon numbers it: the example shows the refusal.
  t.example = {{"job_id", "job-1"}, {"pid", 1}, {"port", 8000}};
  t.example_code = Code::kNotOwned;
  t.example_setup = MakeProcessOutputTool().example_setup;  // a running job-1
  t.run = StopLocalServer;
  return t;
}

}  // namespace

std::vector<ToolSpec> ListenerTools() {
  return {MakeLocalServersTool(), MakeStopLocalServerTool()};
}

}  // namespace cordon
