// What the host has and what the session's processes used (issue 23): host_resources and
// resource_history, read from /proc and the session's resource monitor.
#include <chrono>
#include <cmath>
#include <thread>

#include "runner/host_stats.h"
#include "runner/processes.h"
#include "runner/resource_monitor.h"
#include "tools/registry.h"

namespace cordon {
namespace {

constexpr std::int64_t kHourMs = 3600 * 1000;
constexpr std::int64_t kDefaultWindowMs = 15 * 60 * 1000;
constexpr std::int64_t kDefaultBuckets = 30;
constexpr std::int64_t kMaxBuckets = 120;
constexpr std::int64_t kDefaultTop = 5;
constexpr std::int64_t kMaxTop = 50;

Json Percent(std::optional<double> p) { return p ? Json(std::round(*p * 10) / 10) : Json(nullptr); }

Result<Json> HostResources(const Json&, ToolContext& ctx) {
  // The busy share: the monitor's last two samples when it has fresh ones, else two readings
  // of /proc/stat 250 ms apart. The first diagnostics call starts the monitor.
  std::optional<double> busy;
  std::int64_t busy_window_ms = 0;
  std::string busy_source = "sampled";
  if (ctx.services.Processes() != nullptr) {
    ResourceMonitor& monitor = ctx.services.Processes()->Monitor();
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const std::vector<MonitorSample> recent = monitor.Since(now - 3000);
    if (recent.size() >= 2 && recent.back().host_cpu && recent[recent.size() - 2].host_cpu &&
        now - recent.back().unix_ms < 3000) {
      const MonitorSample& a = recent[recent.size() - 2];
      const MonitorSample& b = recent.back();
      busy = BusyPercent(*a.host_cpu, *b.host_cpu);
      busy_window_ms = b.unix_ms - a.unix_ms;
      busy_source = "monitor";
    }
  }
  ASSIGN_OR_RETURN(HostCpuTimes cpu, ReadHostCpuTimes());
  if (!busy) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    ASSIGN_OR_RETURN(HostCpuTimes later, ReadHostCpuTimes());
    busy = BusyPercent(cpu, later);
    busy_window_ms = 250;
    busy_source = "sampled";
  }
  ASSIGN_OR_RETURN(LoadAverages load, ReadLoadAverages());
  ASSIGN_OR_RETURN(HostMemory mem, ReadHostMemory());
  ASSIGN_OR_RETURN(FilesystemSpace fs, ReadFilesystemSpace(ctx.workspace.fd()));
  return Json{{"cpus", cpu.cpus},
              {"cpu_busy_percent", Percent(busy)},
              {"cpu_busy_window_ms", busy_window_ms},
              {"cpu_busy_source", busy_source},
              {"load", {{"one", load.one}, {"five", load.five}, {"fifteen", load.fifteen}}},
              {"memory", {{"total_kb", mem.total_kb}, {"available_kb", mem.available_kb}}},
              {"workspace_filesystem",
               {{"total_bytes", fs.total_bytes},
                {"free_bytes", fs.free_bytes},
                {"available_bytes", fs.available_bytes},
                {"total_inodes", fs.total_inodes},
                {"free_inodes", fs.free_inodes}}}};
}

Result<std::int64_t> IntArg(const Json& in, const char* name, std::int64_t fallback) {
  if (!in.contains(name)) return fallback;
  if (!in[name].is_number_integer())
    return Fail(Code::kInvalidInput, std::string(name) + " must be an integer");
  return in[name].get<std::int64_t>();
}

// A figure, or null when it was never read (-1).
Json OrNull(std::int64_t v) { return v >= 0 ? Json(v) : Json(nullptr); }

Result<Json> ResourceHistory(const Json& in, ToolContext& ctx) {
  if (ctx.services.Processes() == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  ASSIGN_OR_RETURN(const std::int64_t window, IntArg(in, "window_ms", kDefaultWindowMs));
  if (window < 1000 || window > kHourMs)
    return Fail(Code::kInvalidInput, "window_ms must be between 1000 and 3600000 (one hour)");
  ASSIGN_OR_RETURN(const std::int64_t bucket, IntArg(in, "bucket_ms", window / kDefaultBuckets));
  if (bucket < 1000 || bucket > window)
    return Fail(Code::kInvalidInput, "bucket_ms must be between 1000 and window_ms");
  if ((window + bucket - 1) / bucket > kMaxBuckets) {
    return Fail(Code::kInvalidInput,
                "window_ms / bucket_ms makes more than 120 buckets; make bucket_ms larger");
  }
  ASSIGN_OR_RETURN(const std::int64_t top, IntArg(in, "max_processes", kDefaultTop));
  if (top < 1 || top > kMaxTop)
    return Fail(Code::kInvalidInput, "max_processes must be between 1 and 50");
  const int count = static_cast<int>((window + bucket - 1) / bucket);

  ResourceMonitor& monitor = ctx.services.Processes()->Monitor();
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  const std::vector<MonitorSample> samples = monitor.Since(now - bucket * count);
  // Under serve --http an MCP session sees its own calls and jobs, and the session's servers.
  const std::string& owner = ctx.caller;
  const std::vector<ResourceBucket> buckets =
      BucketSamples(samples, now, bucket, count, static_cast<std::size_t>(top),
                    [&owner](const std::string& kind, const std::string& of) {
                      return of == owner || kind == "server";
                    });
  Json out = Json::array();
  for (const ResourceBucket& b : buckets) {
    Json procs = Json::array();
    for (const BucketProcess& p : b.top) {
      procs.push_back({{"pid", p.pid},
                       {"owner", {{"kind", p.kind}, {"name", p.name}}},
                       {"comm", p.comm},
                       {"cpu_ms", std::round(p.cpu_ms)},
                       {"rss_kb", OrNull(p.rss_kb)}});
    }
    Json cgroups = Json::array();
    for (const BucketCgroup& c : b.cgroups) {
      cgroups.push_back({{"owner", {{"kind", c.kind}, {"name", c.name}}},
                         {"mode", c.mode},
                         {"memory_bytes", OrNull(c.memory_bytes)},
                         {"pids", OrNull(c.pids)}});
    }
    const bool seen = b.samples > 0;
    out.push_back({{"start_unix_ms", b.start_unix_ms},
                   {"end_unix_ms", b.end_unix_ms},
                   {"samples", b.samples},
                   {"missed", b.missed},
                   {"cpu_ms", seen ? Json(std::round(b.cpu_ms)) : Json(nullptr)},
                   {"rss_kb", seen ? OrNull(b.rss_kb) : Json(nullptr)},
                   {"cordon_cpu_ms", seen ? Json(std::round(b.cordon_cpu_ms)) : Json(nullptr)},
                   {"cordon_rss_kb", OrNull(b.cordon_rss_kb)},
                   {"host_cpu_busy_percent", Percent(b.host_busy_percent)},
                   {"mem_available_kb", OrNull(b.mem_available_kb)},
                   {"processes", b.processes},
                   {"processes_omitted", b.processes_omitted},
                   {"top_processes", std::move(procs)},
                   {"cgroups", std::move(cgroups)}});
  }
  return Json{{"monitor_started_unix_ms", monitor.started_unix_ms()},
              {"now_unix_ms", now},
              {"bucket_ms", bucket},
              {"buckets", std::move(out)}};
}

ToolSpec MakeHostResourcesTool() {
  ToolSpec t;
  t.name = "host_resources";
  t.description =
      "The host cordon runs on, read now: cpus (online), cpu_busy_percent of all of them (the "
      "resource monitor's last second, or two /proc/stat readings 250 ms apart: "
      "cpu_busy_source), load averages, memory (MemTotal and MemAvailable, kB) and the free "
      "space of the workspace's filesystem (fstatvfs). Starts the session's resource monitor "
      "(resource_history).";
  t.scope = "diagnostics:read";
  t.input_schema = {
      {"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
  const Json integer = {{"type", "integer"}};
  const Json number = {{"type", "number"}};
  const Json load = {{"type", "object"},
                     {"properties", {{"one", number}, {"five", number}, {"fifteen", number}}}};
  const Json memory = {{"type", "object"},
                       {"properties", {{"total_kb", integer}, {"available_kb", integer}}}};
  const Json filesystem = {{"type", "object"},
                           {"properties",
                            {{"total_bytes", integer},
                             {"free_bytes", integer},
                             {"available_bytes", integer},
                             {"total_inodes", integer},
                             {"free_inodes", integer}}}};
  SetOutputSchemas(t,
                   {{"cpus", integer},
                    {"cpu_busy_percent", {{"type", {"number", "null"}}}},
                    {"cpu_busy_window_ms", integer},
                    {"cpu_busy_source", {{"type", "string"}, {"enum", {"monitor", "sampled"}}}},
                    {"load", load},
                    {"memory", memory},
                    {"workspace_filesystem", filesystem}},
                   {"cpus", "cpu_busy_percent", "load", "memory", "workspace_filesystem"});
  t.example = Json::object();
  t.example_code = Code::kDeniedByPolicy;  // diagnostics:read is off in the shipped policy
  t.run = HostResources;
  return t;
}

ToolSpec MakeResourceHistoryTool() {
  ToolSpec t;
  t.name = "resource_history";
  t.description =
      "What this session's confined processes (under `serve --http`, this MCP session's calls "
      "and jobs, and the configured servers), the host and cordon itself used, from the "
      "session's resource monitor: one sample a second in a one-hour ring, started at the first "
      "diagnostics call or job (nothing before that is known: monitor_started_unix_ms). "
      "window_ms (default 15 minutes, at most one hour) ending now, in buckets of bucket_ms "
      "(default window_ms/30; at most 120 buckets, at least 1000 ms), oldest first: samples "
      "and missed ticks, cpu_ms and rss_kb of the confined processes, cordon_cpu_ms and "
      "cordon_rss_kb, host_cpu_busy_percent, mem_available_kb, and the max_processes (default "
      "5, at most 50) processes that used the most CPU in it. A process's comm is the name it "
      "gave itself: UNTRUSTED. cgroups: each sandbox with a cgroup of its own (a job, a call, a "
      "configured server; none for an ordinary user without a delegated cgroup v2 tree) and the "
      "most its cgroup held at one sample in the bucket, memory_bytes and pids, the whole "
      "sandbox together (null: the controller gives none). Figures of a bucket with no sample "
      "are null. A sample keeps at most 256 processes; processes_omitted says how many more a "
      "bucket's samples left out.";
  t.scope = "diagnostics:read";
  t.input_schema = {{"type", "object"},
                    {"properties",
                     {{"window_ms",
                       {{"type", "integer"},
                        {"minimum", 1000},
                        {"maximum", kHourMs},
                        {"description", "How far back, in ms (default 900000)."}}},
                      {"bucket_ms",
                       {{"type", "integer"},
                        {"minimum", 1000},
                        {"description", "The width of a bucket, in ms (default window_ms/30)."}}},
                      {"max_processes",
                       {{"type", "integer"},
                        {"minimum", 1},
                        {"maximum", kMaxTop},
                        {"description", "Processes per bucket (default 5)."}}}}},
                    {"additionalProperties", false}};
  const Json integer = {{"type", "integer"}};
  const Json nullable_int = {{"type", {"integer", "null"}}};
  const Json nullable_num = {{"type", {"number", "null"}}};
  const Json owner = {
      {"type", "object"},
      {"properties", {{"kind", {{"type", "string"}}}, {"name", {{"type", "string"}}}}}};
  const Json proc = {{"type", "object"},
                     {"properties",
                      {{"pid", integer},
                       {"owner", owner},
                       {"comm", {{"type", "string"}}},
                       {"cpu_ms", {{"type", "number"}}},
                       {"rss_kb", nullable_int}}},
                     {"required", {"pid", "owner", "cpu_ms"}}};
  const Json cgroup = {{"type", "object"},
                       {"properties",
                        {{"owner", owner},
                         {"mode", {{"type", "string"}, {"enum", {"v1", "v2"}}}},
                         {"memory_bytes", nullable_int},
                         {"pids", nullable_int}}},
                       {"required", {"owner", "mode", "memory_bytes", "pids"}}};
  const Json bucket = {{"type", "object"},
                       {"properties",
                        {{"start_unix_ms", integer},
                         {"end_unix_ms", integer},
                         {"samples", integer},
                         {"missed", integer},
                         {"cpu_ms", nullable_num},
                         {"rss_kb", nullable_int},
                         {"cordon_cpu_ms", nullable_num},
                         {"cordon_rss_kb", nullable_int},
                         {"host_cpu_busy_percent", nullable_num},
                         {"mem_available_kb", nullable_int},
                         {"processes", integer},
                         {"processes_omitted", integer},
                         {"top_processes", {{"type", "array"}, {"items", proc}}},
                         {"cgroups", {{"type", "array"}, {"items", cgroup}}}}},
                       {"required",
                        {"start_unix_ms", "end_unix_ms", "samples", "missed", "cpu_ms",
                         "cordon_cpu_ms", "top_processes", "cgroups"}}};
  SetOutputSchemas(t,
                   {{"monitor_started_unix_ms", integer},
                    {"now_unix_ms", integer},
                    {"bucket_ms", integer},
                    {"buckets", {{"type", "array"}, {"items", bucket}}}},
                   {"monitor_started_unix_ms", "now_unix_ms", "bucket_ms", "buckets"});
  t.example = {{"window_ms", 60000}, {"bucket_ms", 10000}, {"max_processes", 3}};
  t.example_code = Code::kDeniedByPolicy;  // diagnostics:read is off in the shipped policy
  t.run = ResourceHistory;
  return t;
}

}  // namespace

std::vector<ToolSpec> MonitorTools() {
  return {MakeHostResourcesTool(), MakeResourceHistoryTool()};
}

}  // namespace cordon
