// session_tag and session_usage (issue 23): the caller's tags of this session, each change a
// record; what the caller's calls used.
#include <algorithm>

#include "core/text.h"
#include "tools/registry.h"

namespace cordon {
namespace {

Result<Json> SessionTag(const Json& in, ToolContext& ctx) {
  ASSIGN_OR_RETURN(std::string tag, NormalizeSessionTag(in["tag"].get<std::string>()));
  ASSIGN_OR_RETURN(std::vector<std::string> tags,
                   ctx.services.SetTag(tag, in["tagged"].get<bool>()));
  return Json{{"tag", tag}, {"tagged", in["tagged"].get<bool>()}, {"tags", tags}};
}

Result<Json> SessionTraces(const Json&, ToolContext& ctx) {
  auto usage = ctx.services.Usage();
  if (!usage) return Fail(Code::kInvalidInput, "this session keeps no usage");
  return SessionTracesJson(*usage);
}

Result<Json> SessionDiff(const Json& in, ToolContext& ctx) {
  const std::uint64_t from = in.value("from_call", std::uint64_t{1});
  const std::uint64_t to = in.value("to_call", UINT64_MAX);
  if (from > to) {
    return Fail(Code::kInvalidInput,
                "from_call " + std::to_string(from) + " is after to_call " + std::to_string(to));
  }
  return ctx.services.SessionDiff(from, to);
}

Result<Json> SessionUsage(const Json&, ToolContext& ctx) {
  auto usage = ctx.services.Usage();
  if (!usage) return Fail(Code::kInvalidInput, "this session keeps no usage");
  return SessionUsageJson(*usage);
}

constexpr const char* kIoKeys[] = {"read_bytes", "write_bytes", "rchar", "wchar"};
constexpr std::size_t kMaxUsageCalls = 200;

Json OrNullJson(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }
Json OrNullJson(const std::optional<std::int64_t>& v) { return v ? Json(*v) : Json(nullptr); }

// The io object as shown: the four counts, each null when unknown.
Json IoOrNulls(const Json& io, bool unknown) {
  Json out = Json::object();
  for (const char* k : kIoKeys)
    out[k] = (!unknown && io.is_object() && io.contains(k)) ? io[k] : Json(nullptr);
  return out;
}

}  // namespace

void CallUsage::AddProcess(double cpu, std::int64_t rss_kb, const Json& process_io) {
  ++processes;
  cpu_ms = cpu_ms.value_or(0) + cpu;
  max_rss_kb = std::max(max_rss_kb.value_or(0), rss_kb);
  if (!process_io.is_object()) {
    io_unknown = true;
    return;
  }
  if (!io.is_object()) io = Json{{"read_bytes", 0}, {"write_bytes", 0}, {"rchar", 0}, {"wchar", 0}};
  for (const char* k : kIoKeys)
    io[k] = io[k].get<std::uint64_t>() + process_io.value(k, std::uint64_t{0});
}

Json SessionUsageJson(const std::map<std::uint64_t, CallUsage>& calls) {
  Json by_tool = Json::object();
  Json rows = Json::array();
  std::optional<double> cpu, elapsed;
  std::optional<std::int64_t> rss;
  Json io_total = Json::object();
  bool io_any = false;
  std::size_t finished = 0;
  for (const auto& [call, u] : calls) {
    if (u.status.empty()) continue;  // still running (this call, a job's starter is finished)
    ++finished;
    Json& t = by_tool[u.tool];
    if (!t.is_object()) t = {{"calls", 0}, {"ok", 0}, {"error", 0}, {"cancelled", 0}};
    t["calls"] = t["calls"].get<int>() + 1;
    if (t.contains(u.status)) t[u.status] = t[u.status].get<int>() + 1;
    if (u.elapsed_ms) elapsed = elapsed.value_or(0) + *u.elapsed_ms;
    if (u.cpu_ms) cpu = cpu.value_or(0) + *u.cpu_ms;
    if (u.max_rss_kb) rss = std::max(rss.value_or(0), *u.max_rss_kb);
    if (u.io.is_object()) {
      io_any = true;
      for (const char* k : kIoKeys)
        io_total[k] = io_total.value(k, std::uint64_t{0}) + u.io[k].get<std::uint64_t>();
    }
    Json row = {{"call", call},
                {"tool", u.tool},
                {"status", u.status},
                {"elapsed_ms", OrNullJson(u.elapsed_ms)},
                {"processes", u.processes},
                {"cpu_ms", OrNullJson(u.cpu_ms)},
                {"max_rss_kb", OrNullJson(u.max_rss_kb)},
                {"io", IoOrNulls(u.io, u.io_unknown || !u.io.is_object())}};
    if (!u.code.empty()) row["code"] = u.code;
    rows.push_back(std::move(row));
  }
  // The latest calls when there are many; the totals count them all.
  std::size_t omitted = 0;
  if (rows.size() > kMaxUsageCalls) {
    omitted = rows.size() - kMaxUsageCalls;
    rows.erase(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(omitted));
  }
  return {{"calls", finished},
          {"by_tool", by_tool},
          {"per_call", rows},
          {"omitted", omitted},
          {"total",
           {{"elapsed_ms", OrNullJson(elapsed)},
            {"cpu_ms", OrNullJson(cpu)},
            {"max_rss_kb", OrNullJson(rss)},
            {"io", IoOrNulls(io_total, !io_any)}}}};
}

Json SessionTracesJson(const std::map<std::uint64_t, CallUsage>& calls) {
  constexpr std::size_t kSlowest = 10, kMaxRows = 50;
  std::vector<std::pair<double, std::uint64_t>> by_time;
  Json failures = Json::array(), warnings = Json::array();
  std::size_t failures_total = 0, warnings_total = 0;
  for (const auto& [call, u] : calls) {
    // A job's warnings may come after its starting call ended; a running call has no time.
    for (const std::string& w : u.warnings) {
      ++warnings_total;
      warnings.push_back({{"call", call}, {"tool", u.tool}, {"warning", w}});
    }
    if (u.status.empty()) continue;
    if (u.elapsed_ms) by_time.emplace_back(*u.elapsed_ms, call);
    if (u.status != "ok") {
      ++failures_total;
      failures.push_back({{"call", call},
                          {"tool", u.tool},
                          {"status", u.status},
                          {"code", u.code.empty() ? Json(nullptr) : Json(u.code)},
                          {"message", u.message}});
    }
  }
  std::stable_sort(by_time.begin(), by_time.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  Json slowest = Json::array();
  for (std::size_t i = 0; i < by_time.size() && i < kSlowest; ++i) {
    const CallUsage& u = calls.at(by_time[i].second);
    slowest.push_back({{"call", by_time[i].second},
                       {"tool", u.tool},
                       {"status", u.status},
                       {"elapsed_ms", by_time[i].first},
                       {"cpu_ms", OrNullJson(u.cpu_ms)}});
  }
  auto latest = [](Json& rows) {
    if (rows.size() > kMaxRows) rows.erase(rows.begin(), rows.end() - kMaxRows);
  };
  latest(failures);
  latest(warnings);
  return {{"slowest", slowest},
          {"failures", failures},
          {"failures_omitted", failures_total - failures.size()},
          {"warnings", warnings},
          {"warnings_omitted", warnings_total - warnings.size()}};
}

Result<std::string> NormalizeSessionTag(std::string_view tag) {
  while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
  while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
  if (tag.empty()) return Fail(Code::kInvalidInput, "a tag must not be empty");
  std::size_t chars = 0;
  for (unsigned char c : tag) {
    if (c < 0x20 || c == 0x7f) {
      return Fail(Code::kInvalidInput,
                  "a tag is one line: no line break or other control character");
    }
    if ((c & 0xc0) != 0x80) ++chars;
  }
  if (chars > 64) return Fail(Code::kInvalidInput, "a tag is at most 64 characters");
  bool repaired = false;
  std::string out = RepairUtf8(tag, &repaired);
  if (repaired) return Fail(Code::kInvalidInput, "a tag must be UTF-8");
  return out;
}

ToolSpec MakeSessionTagTool() {
  ToolSpec t;
  t.name = "session_tag";
  t.description =
      "Add (tagged: true) or remove (tagged: false) a tag of this session (under `serve --http`, "
      "of this MCP session; the --tag tags of `cordon serve` are every session's to start "
      "with). A tag is trimmed, one line, at most 64 characters. Returns the tags; each change "
      "is a session_tag record (`cordon audit show --tag` lists the sessions that carry one).";
  t.scope = "session:operate";
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"tag", {{"type", "string"}, {"maxLength", 1024}}}, {"tagged", {{"type", "boolean"}}}}},
      {"required", {"tag", "tagged"}},
      {"additionalProperties", false}};
  SetOutputSchemas(t,
                   {{"tag", {{"type", "string"}}},
                    {"tagged", {{"type", "boolean"}}},
                    {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}}},
                   {"tag", "tagged", "tags"});
  t.example = {{"tag", "refactor-auth"}, {"tagged", true}};
  t.run = SessionTag;
  return t;
}

}  // namespace cordon

namespace cordon {

ToolSpec MakeSessionUsageTool() {
  ToolSpec t;
  t.name = "session_usage";
  t.description =
      "What this session's finished calls used (under `serve --http`, this MCP session's only): "
      "calls by tool and status (ok, error, cancelled); per call (the latest 200; omitted says "
      "how many earlier ones are left out) its elapsed_ms and, over the processes it started "
      "that have ended (run_shell, foreground or background), cpu_ms, max_rss_kb (the largest "
      "peak of one) and io {read_bytes, write_bytes (what reached storage), rchar, wchar (what "
      "read and write calls moved)}; and the totals. Unknown is null: a call that started no "
      "process has no CPU, memory or bytes; an orphan the sandbox's init reaped is not counted.";
  t.scope = "diagnostics:read";
  t.input_schema = {
      {"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
  const Json count = {{"type", "integer"}};
  const Json null_int = {{"type", {"integer", "null"}}};
  const Json null_num = {{"type", {"number", "null"}}};
  const Json io = {{"type", "object"},
                   {"properties",
                    {{"read_bytes", null_int},
                     {"write_bytes", null_int},
                     {"rchar", null_int},
                     {"wchar", null_int}}},
                   {"required", {"read_bytes", "write_bytes", "rchar", "wchar"}}};
  const Json row = {
      {"type", "object"},
      {"properties",
       {{"call", count},
        {"tool", {{"type", "string"}}},
        {"status", {{"type", "string"}}},
        {"code", {{"type", "string"}}},
        {"elapsed_ms", null_num},
        {"processes", count},
        {"cpu_ms", null_num},
        {"max_rss_kb", null_int},
        {"io", io}}},
      {"required",
       {"call", "tool", "status", "elapsed_ms", "processes", "cpu_ms", "max_rss_kb", "io"}}};
  const Json total = {
      {"type", "object"},
      {"properties",
       {{"elapsed_ms", null_num}, {"cpu_ms", null_num}, {"max_rss_kb", null_int}, {"io", io}}},
      {"required", {"elapsed_ms", "cpu_ms", "max_rss_kb", "io"}}};
  SetOutputSchemas(t,
                   {{"calls", count},
                    {"by_tool", {{"type", "object"}}},
                    {"per_call", {{"type", "array"}, {"items", row}}},
                    {"omitted", count},
                    {"total", total}},
                   {"calls", "by_tool", "per_call", "omitted", "total"});
  t.example = Json::object();
  // diagnostics:read is the user's to grant (policies.d/00-default.toml leaves it off).
  t.example_code = Code::kDeniedByPolicy;
  t.run = SessionUsage;
  return t;
}

}  // namespace cordon

namespace cordon {

ToolSpec MakeSessionTracesTool() {
  ToolSpec t;
  t.name = "session_traces";
  t.description =
      "Where this session's time went and what went wrong (under `serve --http`, this MCP "
      "session's calls only): slowest, the 10 finished calls with the longest elapsed_ms; "
      "failures, each failed call's tool, status, code and message; warnings, what went wrong "
      "short of failing a call (a result cut to the output cap, secrets redacted from it, a "
      "process ended by a limit or that failed to start). The latest 50 failures and warnings, "
      "with how many more there were. A message may quote text a program wrote: UNTRUSTED, "
      "redacted and cut to 500 bytes.";
  t.scope = "diagnostics:read";
  t.input_schema = {
      {"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
  const Json count = {{"type", "integer"}};
  const Json str = {{"type", "string"}};
  const Json slow = {{"type", "object"},
                     {"properties",
                      {{"call", count},
                       {"tool", str},
                       {"status", str},
                       {"elapsed_ms", {{"type", "number"}}},
                       {"cpu_ms", {{"type", {"number", "null"}}}}}},
                     {"required", {"call", "tool", "status", "elapsed_ms", "cpu_ms"}}};
  const Json failure = {{"type", "object"},
                        {"properties",
                         {{"call", count},
                          {"tool", str},
                          {"status", str},
                          {"code", {{"type", {"string", "null"}}}},
                          {"message", str}}},
                        {"required", {"call", "tool", "status", "code", "message"}}};
  const Json warning = {{"type", "object"},
                        {"properties", {{"call", count}, {"tool", str}, {"warning", str}}},
                        {"required", {"call", "tool", "warning"}}};
  SetOutputSchemas(t,
                   {{"slowest", {{"type", "array"}, {"items", slow}}},
                    {"failures", {{"type", "array"}, {"items", failure}}},
                    {"failures_omitted", count},
                    {"warnings", {{"type", "array"}, {"items", warning}}},
                    {"warnings_omitted", count}},
                   {"slowest", "failures", "failures_omitted", "warnings", "warnings_omitted"});
  t.example = Json::object();
  // diagnostics:read is the user's to grant (policies.d/00-default.toml leaves it off).
  t.example_code = Code::kDeniedByPolicy;
  t.run = SessionTraces;
  return t;
}

}  // namespace cordon

namespace cordon {

ToolSpec MakeSessionDiffTool() {
  ToolSpec t;
  t.name = "session_diff";
  t.description =
      "The files this session changed (under `serve --http`, by this MCP session's calls only), "
      "read back from the session's own audit log by the code of `cordon audit diff`: each "
      "file's call, tool, op, path, hashes before and after, where the before and after "
      "content came from and whether it was verified against the recorded hash (before: the "
      "before-images store or the blob at the session's git HEAD; after: the store or the "
      "disk), and a unified diff where both could be had, redacted. Changes by the file tools "
      "and by run_shell commands (a `sed -i`, from the process record's changes). from_call "
      "and to_call (call numbers, inclusive) narrow it; from_call after to_call is "
      "invalid_input. Diffs show file content: UNTRUSTED.";
  t.scope = "fs:read";
  t.input_schema = {{"type", "object"},
                    {"properties",
                     {{"from_call", {{"type", "integer"}, {"minimum", 1}}},
                      {"to_call", {{"type", "integer"}, {"minimum", 1}}}}},
                    {"additionalProperties", false}};
  const Json file = {{"type", "object"},
                     {"properties",
                      {{"call", {{"type", "integer"}}},
                       {"tool", {{"type", "string"}}},
                       {"op", {{"type", "string"}}},
                       {"path", {{"type", "string"}}},
                       {"sha256_before", {{"type", {"string", "null"}}}},
                       {"sha256_after", {{"type", {"string", "null"}}}},
                       {"before", {{"type", "object"}}},
                       {"after", {{"type", "object"}}},
                       {"diff", {{"type", "string"}}}}},
                     {"required", {"call", "tool", "op", "path", "before", "after"}}};
  SetOutputSchemas(t,
                   {{"from_call", {{"type", "integer"}}},
                    {"to_call", {{"type", {"integer", "null"}}}},
                    {"git_head", {{"type", {"string", "null"}}}},
                    {"files", {{"type", "array"}, {"items", file}}},
                    {"counts", {{"type", "object"}}}},
                   {"from_call", "to_call", "files", "counts"});
  t.example = {{"from_call", 1}};
  t.run = SessionDiff;
  return t;
}

}  // namespace cordon
