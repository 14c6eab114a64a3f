// The per-session aggregation behind `audit summary`: one pass over the lines, grouping records
// by their session id, with each line's verification state from VerifyAuditLog.
#include "audit/summary.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "audit/show.h"

namespace cordon {
namespace {

std::uint64_t Count(const Json& rec, const char* key) {
  auto it = rec.find(key);
  return it != rec.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

std::optional<std::int64_t> Int(const Json& rec, const char* key) {
  auto it = rec.find(key);
  if (it == rec.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

// The array (or object) at `key`, or an empty one: read in place, never copied.
const Json& Items(const Json& rec, const char* key) {
  static const Json kNone = Json::array();
  auto it = rec.find(key);
  return it != rec.end() && (it->is_array() || it->is_object()) ? *it : kNone;
}

std::string CutUtf8(std::string s, std::size_t max) {
  if (s.size() <= max) return s;
  s.resize(max);
  // Never end inside a UTF-8 sequence.
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
  if (!s.empty() && (static_cast<unsigned char>(s.back()) & 0x80) != 0) s.pop_back();
  return s + "...";
}

// A session's running state: the summary, plus what only the pass needs.
struct Pending {
  SessionSummary s;
  std::map<std::string, std::uint64_t> started;  // tool -> tool_started count
  std::map<std::pair<std::string, std::string>, std::size_t> denial_at;  // (type, rule) -> index
  std::map<std::pair<std::string, std::string>, SummaryNetwork> network;
  std::optional<std::int64_t> first_ms, last_ms, finished_ms;
};

void AddDenial(Pending& p, const SummaryLimits& limits, const std::string& type,
               const std::string& rule, const std::string& subject, std::uint64_t n = 1) {
  auto key = std::make_pair(type, rule);
  auto it = p.denial_at.find(key);
  if (it == p.denial_at.end()) {
    it = p.denial_at.emplace(key, p.s.denials.size()).first;
    p.s.denials.push_back(SummaryDenial{type, rule, 0, {}, 0});
  }
  SummaryDenial& d = p.s.denials[it->second];
  d.count += n;
  p.s.denials_total += n;
  if (subject.empty() ||
      std::find(d.subjects.begin(), d.subjects.end(), subject) != d.subjects.end()) {
    return;
  }
  if (d.subjects.size() < limits.subjects) {
    d.subjects.push_back(subject);
  } else {
    ++d.subjects_omitted;
  }
}

// Whether one more changed file is listed (every one is counted).
bool FileListed(Pending& p, const SummaryLimits& limits) {
  ++p.s.files_total;
  return p.s.files.size() < limits.files;
}

void AddProcess(Pending& p, const SummaryLimits& limits, const Json& rec, std::uint64_t line) {
  SummaryCommand c;
  c.status = JsonStringField(rec, "status");
  c.exit_code = Int(rec, "exit_code");
  c.signal = Int(rec, "signal");
  if (auto e = rec.find("error"); e != rec.end() && e->is_object())
    c.error = JsonStringField(*e, "code");
  c.failed = c.status != "exited" || c.exit_code.value_or(0) != 0 || !c.error.empty();
  ++p.s.commands_total;
  if (c.failed) ++p.s.commands_failed;
  if (p.s.commands.size() < limits.commands) {
    c.line = line;
    c.tool = JsonStringField(rec, "tool");
    c.kind = JsonStringField(rec, "kind");
    std::string argv;
    for (const auto& a : Items(rec, "argv")) {
      if (!argv.empty()) argv += ' ';
      argv += a.is_string() ? a.get<std::string>() : a.dump();
    }
    c.argv = CutUtf8(std::move(argv), 200);
    p.s.commands.push_back(std::move(c));
  }

  auto ch = rec.find("changes");
  if (ch == rec.end() || !ch->is_object()) return;
  // counts holds every change, listed or not; entries the first of them.
  for (const auto& [kind, n] : Items(*ch, "counts").items()) {
    if (!n.is_number_unsigned() || n.get<std::uint64_t>() == 0) continue;
    p.s.file_counts[kind] += n.get<std::uint64_t>();
  }
  for (const auto& e : Items(*ch, "entries")) {
    if (!e.is_object() || !FileListed(p, limits)) continue;
    p.s.files.push_back(SummaryFile{line, JsonStringField(e, "path"), JsonStringField(e, "kind"),
                                    "process", JsonStringField(rec, "tool"),
                                    JsonStringField(e, "from"), ""});
  }
  // The changes beyond those listed are counted, never named.
  p.s.files_total += Count(*ch, "omitted");
  // changes.refused is not counted: each refusal has its own protected_path_removed record.
}

void AddRecord(Pending& p, const SummaryLimits& limits, const Json& rec, std::uint64_t line) {
  const std::string type = JsonStringField(rec, "type");
  const std::string ts = JsonStringField(rec, "ts");
  if (p.s.first_line == 0) p.s.first_line = line;
  p.s.last_line = line;
  ++p.s.records;
  if (p.s.first_ts.empty()) p.s.first_ts = ts;
  if (!ts.empty()) p.s.last_ts = ts;
  if (auto ms = ParseRfc3339(ts)) {
    if (!p.first_ms) p.first_ms = *ms;
    p.last_ms = *ms;
  }
  p.s.redactions += Count(rec, "redactions");

  if (type == "session_started") {
    p.s.started = true;
    p.s.client = JsonStringField(rec, "client");
    p.s.workspace = JsonStringField(rec, "workspace");
    p.s.policy_sha256 = JsonStringField(rec, "policy_sha256");
    p.s.cordon_version = JsonStringField(rec, "cordon_version");
    p.s.chain = JsonStringField(rec, "chain");
  } else if (type == "mcp_client") {
    const auto info = rec.find("clientInfo");
    if (info != rec.end() && p.s.client_info.is_null()) p.s.client_info = *info;
    if (p.s.mcp_clients.size() < 100) {
      p.s.mcp_clients.push_back(
          {{"mcp_session", rec.contains("mcp_session") ? rec["mcp_session"] : Json(nullptr)},
           {"clientInfo", info != rec.end() ? *info : Json(nullptr)}});
    } else {
      ++p.s.mcp_clients_omitted;
    }
  } else if (type == "session_finished") {
    p.s.finished = true;
    p.finished_ms = p.last_ms;
    p.s.finished_calls = Int(rec, "calls");
    p.s.finished_errors = Int(rec, "errors");
  } else if (type == "tool_started") {
    ++p.started[JsonStringField(rec, "tool")];
  } else if (type == "tool_finished") {
    ++p.s.calls[JsonStringField(rec, "tool")][JsonStringField(rec, "status")];
    ++p.s.calls_total;
    p.s.output_redactions += Count(rec, "output_redactions");
    if (auto it = rec.find("output_redactions_by_rule"); it != rec.end() && it->is_object()) {
      for (const auto& [rule, n] : it->items()) {
        if (n.is_number_unsigned()) p.s.output_redactions_by_rule[rule] += n.get<std::uint64_t>();
      }
    }
  } else if (type == "process") {
    AddProcess(p, limits, rec, line);
  } else if (type == "file_write") {
    // Counted in process.changes' kinds: a created file is created whichever way it came.
    const std::string op = JsonStringField(rec, "op");
    const std::string kind = JsonStringField(rec, "status") != "written"
                                 ? "failed"
                                 : (op == "create" ? "created" : "modified");
    ++p.s.file_counts[kind];
    if (FileListed(p, limits)) {
      p.s.files.push_back(SummaryFile{line, JsonStringField(rec, "path"), kind, "file_write",
                                      JsonStringField(rec, "tool"), "", op});
    }
  } else if (type == "policy_denied") {
    AddDenial(p, limits, type, JsonStringField(rec, "rule"),
              JsonStringField(rec, "tool") + " " + JsonStringField(rec, "scope"));
  } else if (type == "approval") {
    const std::string rule = JsonStringField(rec, "rule"), answer = JsonStringField(rec, "answer");
    ++p.s.approvals[rule][answer];
    ++p.s.approvals_total;
    // A question not answered yes refused what it asked about: a denial, under its rule.
    if (answer != "once" && answer != "session") {
      AddDenial(p, limits, type, rule,
                JsonStringField(rec, "tool") + " " + JsonStringField(rec, "subject"));
    }
  } else if (type == "network") {
    const std::string host = JsonStringField(rec, "host"),
                      decision = JsonStringField(rec, "decision");
    const std::int64_t port = Int(rec, "port").value_or(0);
    SummaryNetwork& n = p.network[{host, decision}];
    n.host = host;
    n.decision = decision;
    if (std::find(n.ports.begin(), n.ports.end(), port) == n.ports.end()) n.ports.push_back(port);
    ++n.connections;
    n.bytes_up += Count(rec, "bytes_up");
    n.bytes_down += Count(rec, "bytes_down");
    if (rec.contains("error")) ++n.errors;
    if (decision != "allowed") {
      // A refusal names its rule when one decided (a deny rule); none means nothing allowed it.
      std::string rule = JsonStringField(rec, "rule");
      AddDenial(p, limits, type, rule.empty() ? "not allowed" : rule,
                host + ":" + std::to_string(port));
    }
  } else if (type == "access_denied") {
    for (const auto& d : Items(rec, "denials")) {
      if (!d.is_object()) continue;
      std::string what = JsonStringField(d, "path");
      if (what.empty()) what = JsonStringField(d, "address");
      if (what.empty()) what = JsonStringField(d, "object");
      const std::uint64_t n = std::max<std::uint64_t>(Count(d, "count"), 1);
      AddDenial(p, limits, type,
                JsonStringField(rec, "layer") + " " + JsonStringField(d, "blockers"), what, n);
    }
    // Denials beyond the listed ones are counted under the layer.
    if (const std::uint64_t omitted = Count(rec, "omitted"); omitted > 0) {
      AddDenial(p, limits, type, JsonStringField(rec, "layer") + " (not listed)", "", omitted);
    }
  } else if (type == "protected_path_removed") {
    std::string rule = JsonStringField(rec, "reason");
    AddDenial(p, limits, type, rule.empty() ? "protected_path" : rule,
              JsonStringField(rec, "path"));
  } else if (type == "setuid_stripped") {
    AddDenial(p, limits, type, "setid_bits", JsonStringField(rec, "path"));
  } else if (type == "gap") {
    ++p.s.gaps;
    p.s.lost_records += Count(rec, "lost");
  }
}

SessionSummary Finish(Pending& p) {
  SessionSummary s = std::move(p.s);
  for (const auto& [tool, n] : p.started) {
    std::uint64_t done = 0;
    if (auto it = s.calls.find(tool); it != s.calls.end()) {
      for (const auto& [status, k] : it->second) done += k;
    }
    if (n > done) {
      s.calls[tool]["unfinished"] += n - done;
      s.calls_total += n - done;
    }
  }
  for (auto& [key, n] : p.network) s.network.push_back(std::move(n));
  const auto end = s.finished ? p.finished_ms : p.last_ms;
  if (p.first_ms && end) s.duration_ms = *end - *p.first_ms;
  return s;
}

}  // namespace

Json SessionSummary::ToJson() const {
  Json calls_by_tool = Json::object();
  for (const auto& [tool, by_status] : calls) calls_by_tool[tool] = by_status;
  Json cmds = Json::array();
  for (const auto& c : commands) {
    Json j = {{"line", c.line},       {"tool", c.tool},     {"kind", c.kind},
              {"argv", c.argv},       {"status", c.status}, {"failed", c.failed},
              {"exit_code", nullptr}, {"signal", nullptr}};
    if (c.exit_code) j["exit_code"] = *c.exit_code;
    if (c.signal) j["signal"] = *c.signal;
    if (!c.error.empty()) j["error"] = c.error;
    cmds.push_back(std::move(j));
  }
  Json file_list = Json::array();
  for (const auto& f : files) {
    Json j = {{"line", f.line},
              {"path", f.path},
              {"kind", f.kind},
              {"source", f.source},
              {"tool", f.tool}};
    if (!f.from.empty()) j["from"] = f.from;
    if (!f.op.empty()) j["op"] = f.op;
    file_list.push_back(std::move(j));
  }
  Json denial_list = Json::array();
  for (const auto& d : denials) {
    denial_list.push_back({{"type", d.type},
                           {"rule", d.rule},
                           {"count", d.count},
                           {"subjects", d.subjects},
                           {"subjects_omitted", d.subjects_omitted}});
  }
  Json net = Json::array();
  for (const auto& n : network) {
    net.push_back({{"host", n.host},
                   {"decision", n.decision},
                   {"ports", n.ports},
                   {"connections", n.connections},
                   {"bytes_up", n.bytes_up},
                   {"bytes_down", n.bytes_down},
                   {"errors", n.errors}});
  }
  Json j = {
      {"session", session},
      {"started", started},
      {"client", client},
      {"clientInfo", client_info},
      {"mcp_clients", mcp_clients},
      {"mcp_clients_omitted", mcp_clients_omitted},
      {"workspace", workspace},
      {"policy_sha256", policy_sha256},
      {"cordon_version", cordon_version},
      {"first_ts", first_ts},
      {"last_ts", last_ts},
      {"duration_ms", duration_ms ? Json(*duration_ms) : Json(nullptr)},
      {"finished", finished},
      {"verification",
       {{"verified", verified},
        {"records", records},
        {"first_line", first_line},
        {"last_line", last_line},
        {"lines", lines},
        {"gaps", gaps},
        {"lost_records", lost_records}}},
      {"calls", {{"total", calls_total}, {"by_tool", calls_by_tool}}},
      {"commands",
       {{"total", commands_total},
        {"failed", commands_failed},
        {"listed", cmds},
        {"omitted", commands_total - commands.size()}}},
      {"files",
       {{"total", files_total},
        {"counts", file_counts},
        {"listed", file_list},
        {"omitted", files_total - files.size()}}},
      {"denials", {{"total", denials_total}, {"by_rule", denial_list}}},
      {"network", net},
      {"approvals", {{"total", approvals_total}, {"by_rule", approvals}}},
      {"redactions",
       {{"records", redactions},
        {"output", output_redactions},
        {"output_by_rule", output_redactions_by_rule}}},
  };
  if (finished_calls) j["session_finished"] = {{"calls", *finished_calls}};
  if (finished_errors && j.contains("session_finished")) {
    j["session_finished"]["errors"] = *finished_errors;
  }
  return j;
}

Json LogSummary::ToJson() const {
  Json list = Json::array();
  for (const auto& s : sessions) list.push_back(s.ToJson());
  return {{"path", path},
          {"sessions", std::move(list)},
          {"unfinished_sessions", unfinished},
          {"unreadable_lines", unreadable_lines}};
}

LogSummary SummarizeAuditLines(const std::string& path, std::string_view data,
                               const VerifyReport* report, std::string_view session_prefix,
                               const SummaryLimits& limits) {
  LogSummary out;
  out.path = path;
  std::vector<Pending> pending;
  std::map<std::string, std::size_t, std::less<>> at;  // session id -> index in pending
  std::uint64_t n = 0;
  for (std::size_t pos = 0; pos < data.size();) {
    std::size_t nl = data.find('\n', pos);
    if (nl == std::string_view::npos) nl = data.size();
    const std::string_view line = data.substr(pos, nl - pos);
    pos = nl + 1;
    ++n;
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) {
      out.unreadable_lines.push_back(n);
      continue;
    }
    const std::string id = JsonStringField(rec, "session");
    if (!id.starts_with(session_prefix)) continue;
    auto it = at.find(id);
    if (it == at.end()) {
      it = at.emplace(id, pending.size()).first;
      pending.emplace_back();
      pending.back().s.session = id;
      pending.back().s.verified = report != nullptr;
    }
    Pending& p = pending[it->second];
    if (report != nullptr) {
      const LineState state =
          n - 1 < report->line_states.size() ? report->line_states[n - 1] : LineState::kAfterBreak;
      ++p.s.lines[std::string(LineStateName(state))];
    }
    AddRecord(p, limits, rec, n);
  }
  for (auto& p : pending) {
    out.sessions.push_back(Finish(p));
    if (!out.sessions.back().finished) out.unfinished.push_back(out.sessions.back().session);
  }
  return out;
}

Result<LogSummary> SummarizeAuditLog(const std::string& path, const VerifyReport* report,
                                     std::string_view session_prefix, const SummaryLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Code::kNotFound, "cannot open audit log " + path, errno, path);
  std::ostringstream data;
  data << in.rdbuf();
  return SummarizeAuditLines(path, data.str(), report, session_prefix, limits);
}

}  // namespace cordon
