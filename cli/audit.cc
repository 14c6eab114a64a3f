// cordon audit verify | show | keygen | rotate: check a log's chain and completeness, print it
// as a verified timeline, make a checkpoint signing key, start a new log file linked to the old
// one.
#include "audit/audit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "audit/diff.h"
#include "audit/knowledge.h"
#include "audit/report.h"
#include "cli/common.h"
#include "core/before_images.h"
#include "core/fs.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "tools/registry.h"

namespace cordon::cli {
namespace {

struct VerifyFlags {
  std::vector<std::string> logs;
  std::string key_file, witness, require;
  std::vector<std::string> pubkeys;
  bool json = false;
};

int VerifyExit(VerifyReport::Verdict v) {
  using V = VerifyReport::Verdict;
  switch (v) {
    case V::kIntact:
      return kExitOk;
    case V::kTornTail:
      return kExitTornTail;
    case V::kBroken:
      return kExitToolError;
    case V::kUnprovenTail:
      return kExitUnprovenTail;
    case V::kCut:
      return kExitCut;
    case V::kWeakerMode:
      return kExitWeakerMode;
    case V::kNoCheckpoint:
      return kExitNoCheckpoint;
  }
  return kExitToolError;
}

const char* VerdictName(VerifyReport::Verdict v) {
  using V = VerifyReport::Verdict;
  switch (v) {
    case V::kIntact:
      return "intact";
    case V::kTornTail:
      return "torn";
    case V::kBroken:
      return "broken";
    case V::kUnprovenTail:
      return "unproven_tail";
    case V::kCut:
      return "cut";
    case V::kWeakerMode:
      return "weaker_mode";
    case V::kNoCheckpoint:
      return "no_checkpoint";
  }
  return "broken";
}

// With --json an error is a JSON object on stdout as well as the message on stderr, so a
// script reading stdout always gets JSON.
int Failed(bool json, const Error& e, int code) {
  std::fprintf(stderr, "cordon: %s\n", e.ToString().c_str());
  if (json) {
    std::cout << Json{{"error", {{"code", std::string(CodeName(e.code))}, {"message", e.message}}},
                      {"exit_code", code}}
                     .dump(2)
              << "\n";
  }
  return code;
}

Result<VerifyOptions> VerifyOptionsFrom(const VerifyFlags& f) {
  VerifyOptions options;
  if (!f.key_file.empty()) {
    ASSIGN_OR_RETURN(options.hmac_key, ReadKeyFile(f.key_file));
  }
  for (const auto& p : f.pubkeys) {
    ASSIGN_OR_RETURN(auto k, Ed25519Key::LoadPublic(p));
    options.pubkeys.push_back(std::move(k));
  }
  if (!f.witness.empty()) options.witness_path = f.witness;
  using Require = VerifyOptions::Require;
  if (f.require == "plain") options.require = Require::kPlain;
  if (f.require == "hmac") options.require = Require::kHmac;
  if (f.require == "signed") options.require = Require::kSigned;
  return options;
}

// One log's outcome: its exit code, its JSON report, and its one-line verdict.
struct VerifyOutcome {
  int code = kExitOk;
  bool gap = false;
  Json json;
  std::string verdict_line;
};

VerifyOutcome Outcome(const VerifyReport& r) {
  VerifyOutcome out;
  out.code = VerifyExit(r.verdict);
  // --- failclosed: a chain that is whole but records a gap is not complete.
  out.gap = r.gaps > 0 && r.verdict != VerifyReport::Verdict::kBroken &&
            r.verdict != VerifyReport::Verdict::kCut;
  if (out.gap) out.code = kExitGap;
  Json j = {{"verdict", out.gap ? "gap" : VerdictName(r.verdict)},
            {"exit_code", out.code},
            {"records", r.records},
            {"sessions", r.sessions},
            {"bytes", r.bytes},
            {"mode", r.mode},
            {"signed", r.signed_checked},
            {"log_id", r.log_id},
            {"checkpoints", r.checkpoints},
            {"proven_lines", r.proven_lines},
            {"proven_bytes", r.proven_bytes},
            {"unproven_records", r.unproven_records},
            {"witness_checkpoints", r.witness_checkpoints},
            {"unfinished_sessions", r.unfinished_sessions},
            {"warnings", r.warnings},
            {"gaps", r.gaps},
            {"lost_records", r.lost_records},
            {"detached", r.detached},
            {"unwalked", r.unwalked}};
  if (!r.problem.empty()) j["problem"] = r.problem;
  if (r.first_bad_line != 0) j["first_bad_line"] = r.first_bad_line;
  if (r.previous) j["previous"] = Json::parse(*r.previous, nullptr, false);
  if (!r.links.empty()) {
    j["continues"] = Json::array();
    for (const auto& l : r.links) j["continues"].push_back(Json::parse(l, nullptr, false));
  }
  out.json = std::move(j);
  std::ostringstream line;
  if (out.gap) {
    line << "GAP: " << r.lost_records << " record(s) lost in " << r.gaps << " gap(s); "
         << r.gap_problem << "; the chain of the " << r.records << " records present is unbroken";
  }
  switch (r.verdict) {
    case VerifyReport::Verdict::kIntact:
      if (out.gap) break;
      line << "ok: " << r.records << " records, " << r.sessions << " sessions, chain " << r.mode
           << " intact";
      break;
    case VerifyReport::Verdict::kTornTail:
      line << "torn: " << r.problem << "; the " << r.records << " records before it are intact";
      if (r.checkpoints > 0) line << ", " << r.unproven_records << " of them unproven";
      break;
    case VerifyReport::Verdict::kBroken:
      line << "BROKEN at line " << r.first_bad_line << ": " << r.problem;
      break;
    case VerifyReport::Verdict::kUnprovenTail:
      line << "unproven tail: " << r.problem;
      break;
    case VerifyReport::Verdict::kCut:
      line << "CUT: " << r.problem;
      break;
    case VerifyReport::Verdict::kWeakerMode:
      line << "weaker mode: " << r.problem;
      break;
    case VerifyReport::Verdict::kNoCheckpoint:
      line << "not proven: " << r.problem;
      break;
  }
  out.verdict_line = line.str();
  return out;
}

// How bad an exit code of `audit verify` is, for a directory's overall code: the per-log
// precedence of docs/cli.md (1, 6, 4, 7, 8, 5, 0) with a gap (9) after a cut and an unreadable
// file (3) after that. Lower is worse.
int Severity(int code) {
  static constexpr int kOrder[] = {kExitToolError,    kExitCut,          kExitGap,
                                   kExitStart,        kExitTornTail,     kExitWeakerMode,
                                   kExitNoCheckpoint, kExitUnprovenTail, kExitOk};
  for (std::size_t i = 0; i < std::size(kOrder); ++i) {
    if (kOrder[i] == code) return static_cast<int>(i);
  }
  return 0;
}

// An audit log's name: *.jsonl, or *.jsonl.N as `audit rotate` leaves the older files.
bool IsLogName(const std::string& name) {
  if (name.ends_with(".jsonl")) return true;
  const std::size_t at = name.rfind(".jsonl.");
  if (at == std::string::npos || at + 7 == name.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(at + 7), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// The *.jsonl (and rotated *.jsonl.N) regular files directly in `dir` (a link is not followed out
// of it), sorted by name, leaving out the witness when it sits beside the logs.
Result<std::vector<std::string>> LogsIn(const std::string& dir, const std::string& witness) {
  std::vector<std::string> out;
  std::error_code ec, other_ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!IsLogName(name) || e.symlink_status().type() != std::filesystem::file_type::regular)
      continue;
    if (!witness.empty() && std::filesystem::equivalent(e.path(), witness, other_ec)) continue;
    out.push_back(e.path().string());
  }
  if (ec) return Fail(Code::kNotFound, "cannot list " + dir + ": " + ec.message(), 0, dir);
  if (out.empty()) return Fail(Code::kNotFound, "no *.jsonl audit log in " + dir, 0, dir);
  std::sort(out.begin(), out.end());
  return out;
}

// The log_id of a file's log_started first line, or "".
std::string LogIdOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string first;
  if (!in || !std::getline(in, first)) return "";
  Json j = Json::parse(first, nullptr, false);
  return j.is_object() && j.value("type", "") == "log_started" ? j.value("log_id", "") : "";
}

// Several files (or a directory of them): each verified on its own, one line each, then every
// file that continues another after `audit rotate` checked against it. The exit code is the
// worst.
int VerifyMany(const VerifyFlags& f, VerifyOptions& options,
               const std::vector<std::string>& files) {
  int worst = kExitOk;
  auto worse = [&worst](int code) {
    if (Severity(code) < Severity(worst)) worst = code;
  };
  Json all = {{"files", Json::array()}, {"links", Json::array()}};
  if (f.logs.size() == 1) all["directory"] = f.logs[0];
  std::map<std::string, std::string> by_log_id;        // log_id -> file
  std::vector<std::pair<std::string, Json>> previous;  // file -> a link it holds
  // The files' own ids first: a link to one of them is checked against it below, rather than
  // taken for a log that is gone.
  for (const auto& path : files) {
    if (std::string id = LogIdOf(path); !id.empty()) options.logs_given.insert(id);
  }
  for (const auto& path : files) {
    auto report = VerifyAuditLog(path, options);
    VerifyOutcome o;
    if (!report) {
      o.code = kExitStart;
      o.verdict_line = "unreadable: " + report.error().message;
      o.json = {
          {"verdict", "unreadable"}, {"exit_code", o.code}, {"problem", report.error().message}};
    } else {
      o = Outcome(*report);
      if (!f.json && !report->warnings.empty()) {
        o.verdict_line += " (" + std::to_string(report->warnings.size()) + " warning(s))";
      }
      if (!report->log_id.empty()) by_log_id.emplace(report->log_id, path);
      for (const std::string& link : report->links) {
        previous.emplace_back(path, Json::parse(link, nullptr, false));
      }
    }
    worse(o.code);
    o.json["path"] = path;
    all["files"].push_back(std::move(o.json));
    if (!f.json) std::cout << TerminalSafe(path + ": " + o.verdict_line, true) << "\n";
  }
  for (const auto& [file, prev] : previous) {
    const std::string old_id =
        prev.is_object() && prev.contains("log_id") && prev["log_id"].is_string()
            ? prev["log_id"].get<std::string>()
            : "";
    auto it = by_log_id.find(old_id);
    Json link = {{"file", file}, {"previous_log_id", old_id}};
    if (it == by_log_id.end()) {
      link["checked"] = false;
      if (!f.json) {
        std::cout << "warning: " << file << " continues log " << old_id
                  << ", which is not among the files given: the link is not checked\n";
      }
    } else {
      const std::string why = CheckRotationLink(it->second, prev, options.hmac_key);
      link["checked"] = true;
      link["previous_file"] = it->second;
      link["ok"] = why.empty();
      if (!why.empty()) {
        link["problem"] = why;
        worse(kExitCut);
      }
      link["line"] = prev.value("line", 0);
      if (!f.json) {
        if (why.empty()) {
          std::cout << "ok: " << file << " continues " << it->second << " at its line "
                    << prev.value("lines", 0);
          if (prev.contains("reason")) {
            std::cout << " (line " << prev.value("line", 0) << ": the log was "
                      << prev.value("reason", "") << " under a writer)";
          }
          std::cout << "\n";
        } else {
          std::cout << "CUT: " << file << " continues " << it->second << ", but " << why << "\n";
        }
      }
    }
    all["links"].push_back(std::move(link));
  }
  all["exit_code"] = worst;
  if (f.json) {
    std::cout << all.dump(2) << "\n";
  } else {
    std::cout << files.size() << " log(s); exit " << worst << "\n";
  }
  return worst;
}

int Verify(const VerifyFlags& f) {
  auto options = VerifyOptionsFrom(f);
  if (!options) return Failed(f.json, options.error(), kExitStart);
  if (options->require == VerifyOptions::Require::kSigned && options->pubkeys.empty()) {
    return Failed(f.json, Error{Code::kInvalidInput, "--require signed needs --pubkey", 0, {}},
                  kExitUsage);
  }
  std::vector<std::string> files;
  bool many = f.logs.size() > 1;
  for (const auto& arg : f.logs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(arg, ec)) {
      files.push_back(arg);
      continue;
    }
    many = true;
    auto in_dir = LogsIn(arg, f.witness);
    if (!in_dir) return Failed(f.json, in_dir.error(), kExitStart);
    files.insert(files.end(), in_dir->begin(), in_dir->end());
  }
  if (many) return VerifyMany(f, *options, files);
  auto report = VerifyAuditLog(files[0], *options);
  if (!report) return Failed(f.json, report.error(), kExitStart);
  const VerifyReport& r = *report;
  VerifyOutcome o = Outcome(r);
  if (f.json) {
    std::cout << o.json.dump(2) << "\n";
    return o.code;
  }
  // What a log holds is whoever wrote it's: written out visibly, one line each.
  for (const auto& w : r.warnings) std::cout << "warning: " << TerminalSafe(w, true) << "\n";
  if (r.previous) std::cout << "continues: " << TerminalSafe(*r.previous, true) << "\n";
  for (const auto& s : r.unfinished_sessions) {
    std::cout << "unfinished: session " << TerminalSafe(s, true) << " has no session_finished\n";
  }
  if (r.checkpoints > 0) {
    std::cout << "checkpoints: " << r.checkpoints << (r.signed_checked ? " signed" : "")
              << ", complete up to line " << r.proven_lines << " (" << r.proven_bytes << " bytes)";
    if (r.witness_checkpoints > 0) std::cout << ", " << r.witness_checkpoints << " witnessed";
    std::cout << "\n";
  }
  std::cout << TerminalSafe(o.verdict_line, true) << "\n";
  return o.code;
}

struct ShowFlags {
  VerifyFlags verify;  // the inputs, as verify's: files, a directory, keys, the witness
  std::string session, tool, path, since, until, tag;
  std::vector<std::string> types;
  bool errors = false, denied = false, changes = false, jsonl = false, json = false;
};

// The flags as a filter; bad input names what is accepted (exit 2).
Result<ShowFilter> ShowFilterFrom(const ShowFlags& f) {
  ShowFilter filter;
  filter.session = f.session;
  filter.tool = f.tool;
  filter.path_glob = f.path;
  for (const auto& list : f.types) {
    std::vector<std::string> names;
    for (std::size_t at = 0; at <= list.size();) {
      std::size_t comma = list.find(',', at);
      if (comma == std::string::npos) comma = list.size();
      names.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
    for (const auto& t : names) {
      if (FindAuditRecordInfo(t) == nullptr) {
        std::string known;
        for (const auto& info : AuditRecordCatalog()) {
          known += (known.empty() ? "" : ", ") + std::string(info.type);
        }
        return Fail(Code::kInvalidInput,
                    "--type: unknown record type \"" + t + "\"; the types are " + known);
      }
      filter.types.insert(t);
    }
  }
  if (!f.since.empty()) {
    auto t = ParseRfc3339(f.since);
    if (!t) return Fail(Code::kInvalidInput, "--since: " + t.error().message);
    filter.since_ms = *t;
  }
  if (!f.until.empty()) {
    auto t = ParseRfc3339(f.until);
    if (!t) return Fail(Code::kInvalidInput, "--until: " + t.error().message);
    filter.until_ms = *t;
  }
  filter.errors = f.errors;
  filter.denied = f.denied;
  filter.changes = f.changes;
  if (!f.tag.empty()) {
    auto tag = NormalizeSessionTag(f.tag);
    if (!tag) return Fail(Code::kInvalidInput, "--tag: " + tag.error().message);
    filter.tag = *tag;
  }
  return filter;
}

// The logs verify, show, summary and report read: each argument, or the logs in a directory.
Result<std::vector<std::string>> LogFiles(const VerifyFlags& v) {
  std::vector<std::string> files;
  for (const auto& arg : v.logs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(arg, ec)) {
      files.push_back(arg);
      continue;
    }
    ASSIGN_OR_RETURN(std::vector<std::string> in_dir, LogsIn(arg, v.witness));
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  return files;
}

// Each log verified, then printed with its header and marks; the exit code is verify's (for
// several logs, the worst).
int Show(const ShowFlags& f) {
  auto filter = ShowFilterFrom(f);
  if (!filter) return Failed(false, filter.error(), kExitUsage);
  auto options = VerifyOptionsFrom(f.verify);
  if (!options) return Failed(false, options.error(), kExitStart);
  auto expanded = LogFiles(f.verify);
  if (!expanded) return Failed(false, expanded.error(), kExitStart);
  std::vector<std::string> files = std::move(*expanded);
  for (const auto& path : files) {
    if (std::string id = LogIdOf(path); !id.empty()) options->logs_given.insert(id);
  }
  // --tag: a session's tag may be added in one file and its records go on in the next.
  if (!filter->tag.empty()) {
    for (const auto& path : files) {
      auto tagged = SessionsTagged(path, filter->tag);
      if (tagged) filter->tagged_sessions.insert(tagged->begin(), tagged->end());
    }
  }
  int worst = kExitOk;
  for (const auto& path : files) {
    auto report = VerifyAuditLog(path, *options);
    if (!report) {
      Failed(false, report.error(), kExitStart);
      if (Severity(kExitStart) < Severity(worst)) worst = kExitStart;
      continue;
    }
    const VerifyOutcome o = Outcome(*report);
    if (Severity(o.code) < Severity(worst)) worst = o.code;
    if (f.json) {
      auto records = ShowAuditLogJson(path);
      if (!records) return Failed(true, records.error(), kExitStart);
      (*records)["verification"] = o.json;
      std::cout << records->dump(2) << "\n";
      continue;
    }
    auto body =
        f.jsonl ? ShowAuditLogJsonl(path, *report, *filter) : ShowAuditLog(path, *report, *filter);
    if (!body) return Failed(false, body.error(), kExitStart);
    // --jsonl: records only on stdout; the verdict goes to stderr.
    (f.jsonl ? std::cerr : std::cout) << ShowHeader(path, *report);
    std::cout << *body;
  }
  return worst;
}

// --- summary: `audit summary LOG...`, per session, each log verified first.
struct SummaryFlags {
  VerifyFlags verify;  // the inputs, as verify's: files, a directory, keys, the witness
  std::string session;
  bool json = false;
};

std::string Bytes(std::uint64_t n) {
  if (n < 10 * 1024) return std::to_string(n) + " B";
  if (n < 10 * 1024 * 1024) return std::to_string(n / 1024) + " KiB";
  return std::to_string(n / (1024 * 1024)) + " MiB";
}

std::string Duration(const std::optional<std::int64_t>& ms) {
  if (!ms) return "?";
  char buf[64];
  if (*ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(*ms) / 1000.0);
  } else {
    std::snprintf(buf, sizeof buf, "%lld min %lld s", static_cast<long long>(*ms / 60'000),
                  static_cast<long long>((*ms % 60'000) / 1000));
  }
  return buf;
}

// A value from the log, bare when it is plain text, else JSON-quoted: a name the agent chose
// (a tool, a host, a rule) cannot start a line of its own in the text summary.
std::string Plain(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') return DumpJson(Json(s));
  }
  return s;
}

// "k1 n1, k2 n2" of a count map.
std::string Counts(const std::map<std::string, std::uint64_t>& m) {
  std::string out;
  for (const auto& [k, n] : m) {
    out += (out.empty() ? "" : ", ") + Plain(k) + " " + std::to_string(n);
  }
  return out;
}

void PrintSessionSummary(const SessionSummary& s) {
  std::ostringstream o;
  o << "\nsession " << Plain(s.session) << "  lines " << s.first_line << "-" << s.last_line << ", "
    << s.records << " records";
  if (s.verified) o << " (" << Counts(s.lines) << ")";
  o << "\n";
  if (!s.started) o << "  (no session_started in this log: it starts mid-session)\n";
  o << "  client      " << (s.client.empty() ? "?" : Plain(s.client));
  if (s.client_info.is_object()) {
    o << "  " << s.client_info.value("name", Json("?")).dump();
    if (s.client_info.contains("version")) o << " " << s.client_info["version"].dump();
  }
  // serve --http: each MCP session's own client (names and versions the clients chose).
  if (s.mcp_clients.size() > 1) {
    o << "\n  mcp clients " << s.mcp_clients.size() + s.mcp_clients_omitted << ":";
    for (const Json& c : s.mcp_clients) {
      o << " " << (c["mcp_session"].is_string() ? Plain(c["mcp_session"].get<std::string>()) : "-");
      if (c["clientInfo"].is_object()) {
        o << "=" << c["clientInfo"].value("name", Json("?")).dump();
        if (c["clientInfo"].contains("version")) o << " " << c["clientInfo"]["version"].dump();
      }
    }
    if (s.mcp_clients_omitted > 0) o << " (and " << s.mcp_clients_omitted << " more)";
  }
  o << "\n  workspace   " << Plain(s.workspace) << "\n  policy      sha256 "
    << Plain(s.policy_sha256) << "\n  time        " << Plain(s.first_ts) << " .. "
    << Plain(s.last_ts) << "  (" << Duration(s.duration_ms)
    << (s.finished ? "" : ", UNFINISHED: no session_finished") << ")\n";
  if (s.gaps > 0) {
    o << "  GAP         " << s.lost_records << " record(s) lost in " << s.gaps << " gap(s)\n";
  }
  o << "  calls       " << s.calls_total << "\n";
  for (const auto& [tool, by_status] : s.calls) {
    o << "    " << Plain(tool) << ": " << Counts(by_status) << "\n";
  }
  o << "  commands    " << s.commands_total << " (" << s.commands_failed << " failed)\n";
  for (const auto& c : s.commands) {
    std::string outcome = Plain(c.status);
    if (c.exit_code) outcome = "exit " + std::to_string(*c.exit_code);
    if (c.signal) outcome = "signal " + std::to_string(*c.signal);
    if (!c.error.empty()) outcome = "error " + Plain(c.error);
    o << "    " << (c.failed ? "! " : "  ") << outcome << "  " << Plain(c.tool) << "  "
      << DumpJson(Json(c.argv)) << "  (line " << c.line << ")\n";
  }
  if (s.commands.size() < s.commands_total) {
    o << "    ... " << s.commands_total - s.commands.size() << " more\n";
  }
  o << "  files       " << s.files_total << " changed";
  if (!s.file_counts.empty()) o << " (" << Counts(s.file_counts) << ")";
  o << "\n";
  for (const auto& f : s.files) {
    o << "    " << Plain(f.kind) << "  " << DumpJson(Json(f.path));
    if (!f.from.empty()) o << " from " << DumpJson(Json(f.from));
    o << "  " << Plain(f.tool) << " (" << Plain(f.source) << ", line " << f.line << ")\n";
  }
  if (s.files.size() < s.files_total) {
    o << "    ... " << s.files_total - s.files.size() << " more\n";
  }
  o << "  denials     " << s.denials_total << "\n";
  for (const auto& d : s.denials) {
    o << "    " << Plain(d.type) << "  " << Plain(d.rule) << "  " << d.count;
    if (!d.subjects.empty()) {
      o << "  ";
      for (std::size_t i = 0; i < d.subjects.size(); ++i) {
        o << (i ? ", " : "") << DumpJson(Json(d.subjects[i]));
      }
      if (d.subjects_omitted > 0) o << ", ... " << d.subjects_omitted << " more";
    }
    o << "\n";
  }
  o << "  approvals   " << s.approvals_total << " question(s)\n";
  for (const auto& [rule, answers] : s.approvals) {
    o << "    " << Plain(rule) << "  " << Counts(answers) << "\n";
  }
  o << "  network     " << s.network.size() << " host(s)\n";
  for (const auto& n : s.network) {
    o << "    " << Plain(n.host) << "  " << Plain(n.decision) << "  " << n.connections
      << " connection(s)  " << Bytes(n.bytes_up) << " up, " << Bytes(n.bytes_down) << " down";
    if (n.errors > 0) o << ", " << n.errors << " error(s)";
    o << "\n";
  }
  o << "  redacted    " << s.redactions << " in records, " << s.output_redactions << " in results";
  if (!s.output_redactions_by_rule.empty()) o << " (" << Counts(s.output_redactions_by_rule) << ")";
  o << "\n";
  std::cout << TerminalSafe(o.str());
}

// Each log verified, then summarized per session; the exit code is verify's (for several logs,
// the worst).
int Summary(const SummaryFlags& f) {
  auto options = VerifyOptionsFrom(f.verify);
  if (!options) return Failed(f.json, options.error(), kExitStart);
  auto expanded = LogFiles(f.verify);
  if (!expanded) return Failed(f.json, expanded.error(), kExitStart);
  std::vector<std::string> files = std::move(*expanded);
  for (const auto& path : files) {
    if (std::string id = LogIdOf(path); !id.empty()) options->logs_given.insert(id);
  }
  int worst = kExitOk;
  Json logs = Json::array();
  for (const auto& path : files) {
    auto report = VerifyAuditLog(path, *options);
    auto summary = report ? SummarizeAuditLog(path, &*report, f.session)
                          : Result<LogSummary>(std::unexpected(report.error()));
    if (!summary) {
      if (Severity(kExitStart) < Severity(worst)) worst = kExitStart;
      std::fprintf(stderr, "cordon: %s\n", summary.error().ToString().c_str());
      logs.push_back({{"path", path},
                      {"verification",
                       {{"verdict", "unreadable"},
                        {"exit_code", kExitStart},
                        {"problem", summary.error().message}}}});
      continue;
    }
    const VerifyOutcome o = Outcome(*report);
    if (Severity(o.code) < Severity(worst)) worst = o.code;
    if (f.json) {
      Json j = summary->ToJson();
      j["verification"] = o.json;
      logs.push_back(std::move(j));
      continue;
    }
    std::cout << "# " << TerminalSafe(path + ": " + o.verdict_line, true) << "\n";
    for (const auto& w : report->warnings)
      std::cout << "# warning: " << TerminalSafe(w, true) << "\n";
    std::cout << "# " << summary->sessions.size() << " session(s)";
    if (!summary->unfinished.empty()) {
      std::cout << ", " << summary->unfinished.size() << " unfinished:";
      for (const auto& id : summary->unfinished) std::cout << " " << Plain(id);
    }
    if (!summary->unreadable_lines.empty()) {
      std::cout << "; " << summary->unreadable_lines.size() << " line(s) not a record:";
      for (auto n : summary->unreadable_lines) std::cout << " " << n;
    }
    std::cout << "\n";
    for (const auto& s : summary->sessions) PrintSessionSummary(s);
  }
  if (f.json) std::cout << Json{{"logs", std::move(logs)}, {"exit_code", worst}}.dump(2) << "\n";
  return worst;
}

int Keygen(const std::string& out_dir, std::string priv, std::string pub, bool json) {
  if (!out_dir.empty()) {
    if (::mkdir(out_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return Failed(json, SysFail(Code::kInvalidInput, "mkdir", out_dir).error(), kExitStart);
    }
    if (priv.empty()) priv = out_dir + "/audit-signing.key";
    if (pub.empty()) pub = out_dir + "/audit-signing.pub";
  }
  if (priv.empty() || pub.empty()) {
    return Failed(
        json, Error{Code::kInvalidInput, "give --out DIR, or both --private and --public", 0, {}},
        kExitUsage);
  }
  auto id = WriteNewKeyPair(priv, pub);
  if (!id) return Failed(json, id.error(), kExitStart);
  if (json) {
    std::cout << Json{{"key_id", *id}, {"private", priv}, {"public", pub}}.dump(2) << "\n";
  } else {
    std::cout << "key id " << *id << "\nprivate " << priv << "\npublic " << pub << "\n";
  }
  return kExitOk;
}

int Rotate(const std::string& log, const std::string& key_file, const std::string& signing_key,
           bool json) {
  std::optional<std::string> key;
  if (!key_file.empty()) {
    auto k = ReadKeyFile(key_file);
    if (!k) return Failed(json, k.error(), kExitStart);
    key = *k;
  }
  CheckpointConfig cp;
  if (!signing_key.empty()) {
    auto k = Ed25519Key::LoadPrivate(signing_key);
    if (!k) return Failed(json, k.error(), kExitStart);
    cp.key = std::make_shared<const Ed25519Key>(std::move(*k));
  }
  auto rotated = RotateAuditLog(log, key, cp);
  if (!rotated) return Failed(json, rotated.error(), kExitStart);
  if (json) {
    std::cout << Json{{"log", log}, {"rotated_to", *rotated}}.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "rotated: " << log << " -> " << *rotated << "; " << log
            << " starts a new log linked to it\n";
  return kExitOk;
}

// --- audit diff: one session's changed files, with their diffs (audit/diff.h) ---
struct DiffFlags {
  std::string log, session, key_file, store;
  bool json = false, no_git = false, rules_only = false;
};

// The session's redactor: the redaction rules of the layers the user controls (shipped,
// system, user; never a project file), their values, the secrets in this environment, and what
// the session knew by value (its redaction knowledge, audit/knowledge.h: the secrets of its
// environment, its workspace's secret files and the user's credential stores as they were).
// Without that knowledge the diffs are withheld, unless --rules-only. `about` says what was used.
Result<const Redactor*> DiffRedactor(const DiffFlags& f, char** envp, const Json& started,
                                     const Json& finished, Json& about,
                                     std::optional<Redactor>& held) {
  ASSIGN_OR_RETURN(Policy policy, LoadPolicy(DefaultPolicySources(ShippedPolicyDir(), "")));
  Redactor& r = held.emplace();
  r.SetRules(policy.compiled_redact_rules);
  for (const auto& v : policy.redact_values) r.AddValue("policy", v);
  r.AddSecretEnvironment(envp);
  const Json redaction = started.value("redaction", Json::object());
  const Json named = redaction.is_object() ? redaction.value("knowledge", Json()) : Json();
  about = Json::object();
  // Loads one knowledge the log names into `r`; `key` is its line in `about`.
  auto load = [&](const Json& knowledge, const std::string& key,
                  const std::string& what) -> Status {
    if (Status loaded = LoadRedactionKnowledge(knowledge, RedactionKnowledgeDir(), r); !loaded) {
      if (!f.rules_only) {
        return Fail(loaded.error().code,
                    loaded.error().message + ": without it " + what +
                        " could show; --rules-only shows the diffs redacted by the rules and "
                        "this environment only");
      }
      about[key] = "not used (--rules-only): " + loaded.error().message;
    } else {
      about[key] = knowledge["sha256"].get<std::string>() + ", " +
                   std::to_string(knowledge.value("hashes", 0)) + " hashes";
    }
    return {};
  };
  TRY(load(named, "knowledge", "a secret the session hid by value"));
  // What the session learned after it started (the lines of secrets the agent wrote through
  // the file tools), kept at its end: session_finished.knowledge. A session that learned
  // nothing names none; one that names a knowledge now gone withholds the diffs as above.
  const Json at_end = finished.is_object() ? finished.value("knowledge", Json()) : Json();
  if (!at_end.is_null()) {
    TRY(load(at_end, "knowledge_at_end", "a secret the agent wrote (what the session learned)"));
  }
  const Json session_rules = named.is_object() ? named.value("rules_sha256", Json()) : Json();
  const std::string now =
      policy.compiled_redact_rules ? policy.compiled_redact_rules->digest() : std::string();
  if (session_rules.is_string() && session_rules.get<std::string>() != now) {
    about["rules"] =
        "differ from the session's (its project's rules, or changed since): a shape only the "
        "session's rules know may show";
  } else if (session_rules.is_string()) {
    about["rules"] = "the session's";
  }
  return &r;
}

// The log verified (its verdict heads the output and is the exit code, as for show), then the
// session's diff. A session id that matches none or several is bad input (2), naming them.
int Diff(const DiffFlags& f, char** envp) {
  VerifyFlags vf;
  vf.key_file = f.key_file;
  auto options = VerifyOptionsFrom(vf);
  if (!options) return Failed(f.json, options.error(), kExitStart);
  auto report = VerifyAuditLog(f.log, *options);
  if (!report) return Failed(f.json, report.error(), kExitStart);
  const VerifyOutcome verified = Outcome(*report);
  AuditDiffOptions o;
  o.store_dir = f.store.empty() ? BeforeImageStore::DefaultDir() : f.store;
  if (f.no_git) o.git_path.clear();
  std::optional<Redactor> held;
  o.redactor_for = [&](const Json& started, const Json& finished, Json& about) {
    return DiffRedactor(f, envp, started, finished, about, held);
  };
  auto diff = AuditSessionDiff(f.log, f.session, o);
  if (!diff) {
    const int code = diff.error().code == Code::kNotFound && !diff.error().where.empty()
                         ? kExitStart  // the log itself
                         : kExitUsage;
    return Failed(f.json, diff.error(), code);
  }
  if (f.json) {
    (*diff)["verification"] = verified.json;
    std::cout << DumpJson(*diff, 2) << "\n";  // a file's bytes need not be UTF-8
  } else {
    std::cout << "# " << f.log << ": " << verified.verdict_line << "\n"
              << AuditSessionDiffText(*diff);
  }
  return verified.code;
}

// The inputs verify, show, summary and report take alike: logs or a directory, the HMAC key,
// checkpoint public keys and the witness.
void AddLogInputs(CLI::App* cmd, VerifyFlags& v) {
  cmd->add_option("LOG", v.logs, "the audit log(s), or a directory of them")
      ->required()
      ->type_name("FILE|DIR");
  cmd->add_option("--key-file", v.key_file, "the key of an HMAC-SHA-256 chain")->type_name("FILE");
  cmd->add_option("--pubkey", v.pubkeys, "a checkpoint public key (repeatable)")->type_name("FILE");
  cmd->add_option("--witness", v.witness, "the checkpoints written outside the log")
      ->type_name("FILE");
}

void AddAuditDiffCommand(CLI::App* audit, Context& ctx) {
  auto df = std::make_shared<DiffFlags>();
  CLI::App* diff = audit
                       ->add_subcommand("diff",
                                        "one session's changed files: before and after hashes "
                                        "and, where the content is proven, a unified diff")
                       ->group("Commands");
  diff->add_option("LOG", df->log, "the audit log")->required()->type_name("FILE");
  diff->add_option("--session", df->session, "the session (its id, or a prefix of one)")
      ->required()
      ->type_name("ID");
  diff->add_option("--key-file", df->key_file, "the key of an HMAC-SHA-256 chain")
      ->type_name("FILE");
  diff->add_option("--store", df->store,
                   "the before-images store ([audit] before_images; default "
                   "<state>/before-images)")
      ->type_name("DIR");
  diff->add_flag("--no-git", df->no_git, "never read the before content from git HEAD");
  diff->add_flag("--rules-only", df->rules_only,
                 "show the diffs even when the session's redaction knowledge is gone, redacted "
                 "by the rules and this environment only");
  diff->add_flag("--json", df->json, "print the files, sources and diffs as JSON");
  diff->footer(
      "before content: the store (verified by its hash), else the blob at the session's git "
      "HEAD when it hashes to sha256_before (without one: marked HEAD, unverified), else hashes "
      "only. after content: the store or the file on disk, only when it hashes to sha256_after. "
      "Diffs are redacted with what the session knew (its redaction knowledge); without it "
      "they are withheld. exit codes: as audit verify's for the log (0 intact, 1 broken, ...); "
      "2 a session that matches none or several; 3 unreadable log");
  ctx.run[diff] = [df, &ctx] { return Diff(*df, ctx.envp); };
}

struct ReportFlags {
  VerifyFlags verify;  // the inputs, as verify's
  std::string out;
};

// The report's bytes to `out`: "-" is stdout. A file is created 0600, as the log is (the page
// holds what the log holds), under a fresh name beside its final one (O_EXCL: never through a
// link planted there), written whole, and renamed over it: no reader sees half a page, and a
// failed run leaves no stale one.
Status WriteReport(const std::string& out, const std::string& html) {
  if (out == "-") {
    std::cout << html << std::flush;
    if (!std::cout) return Fail(Code::kInternal, "cannot write the report to stdout");
    return {};
  }
  const std::string tmp = out + ".tmp." + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) return SysFail(Code::kInvalidInput, "open", tmp);
  Status written = WriteAll(fd.get(), html, tmp);
  if (written && ::fsync(fd.get()) != 0) written = SysFail(Code::kInvalidInput, "fsync", tmp);
  fd.Reset();
  if (written && std::rename(tmp.c_str(), out.c_str()) != 0) {
    written = SysFail(Code::kInvalidInput, "rename", out);
  }
  if (!written) std::remove(tmp.c_str());
  return written;
}

// Each log verified (inputs as verify's), then all of them as one HTML page; the exit code is
// verify's (for several logs, the worst), whatever the page shows. The page is written even when
// verification fails: its red banner is the point.
int Report(const ReportFlags& f) {
  if (f.out.empty()) {
    return Failed(
        false,
        Error{Code::kInvalidInput,
              "audit report needs -o FILE (or -o - for stdout): the page is one HTML file",
              0,
              {}},
        kExitUsage);
  }
  auto options = VerifyOptionsFrom(f.verify);
  if (!options) return Failed(false, options.error(), kExitStart);
  auto expanded = LogFiles(f.verify);
  if (!expanded) return Failed(false, expanded.error(), kExitStart);
  std::vector<std::string> files = std::move(*expanded);
  // The page never replaces the evidence it reads.
  std::vector<std::string> inputs = files;
  if (!f.verify.witness.empty()) inputs.push_back(f.verify.witness);
  for (const auto& path : inputs) {
    std::error_code ec;
    if (f.out != "-" && std::filesystem::equivalent(f.out, path, ec)) {
      return Failed(false,
                    Error{Code::kInvalidInput,
                          "-o " + f.out + " is an input (" + path +
                              "): the report never "
                              "replaces a log or the witness",
                          0,
                          {}},
                    kExitUsage);
    }
  }
  for (const auto& path : files) {
    if (std::string id = LogIdOf(path); !id.empty()) options->logs_given.insert(id);
  }
  int worst = kExitOk;
  std::vector<ReportLog> logs;
  for (const auto& path : files) {
    ReportLog log;
    log.path = path;
    auto report = VerifyAuditLog(path, *options);
    if (!report) {
      std::fprintf(stderr, "cordon: %s\n", report.error().ToString().c_str());
      log.readable = false;
      log.verification = {{"verdict", "unreadable"},
                          {"exit_code", kExitStart},
                          {"problem", report.error().message}};
    } else {
      log.report = std::move(*report);
      log.verification = Outcome(log.report).json;
    }
    const int code = log.verification.value("exit_code", kExitStart);
    if (Severity(code) < Severity(worst)) worst = code;
    logs.push_back(std::move(log));
  }
  // The rotation links among the files given, checked as verify checks them.
  std::map<std::string, std::string> by_log_id;
  for (const auto& log : logs) {
    if (log.readable && !log.report.log_id.empty()) by_log_id.emplace(log.report.log_id, log.path);
  }
  for (auto& log : logs) {
    if (!log.readable) continue;
    for (const std::string& text : log.report.links) {
      const Json prev = Json::parse(text, nullptr, false);
      const std::string old_id =
          prev.is_object() && prev.contains("log_id") && prev["log_id"].is_string()
              ? prev["log_id"].get<std::string>()
              : "";
      Json link = {{"previous_log_id", old_id}, {"checked", false}};
      if (auto it = by_log_id.find(old_id); it != by_log_id.end()) {
        const std::string why = CheckRotationLink(it->second, prev, options->hmac_key);
        link["checked"] = true;
        link["previous_file"] = it->second;
        link["ok"] = why.empty();
        if (!why.empty()) {
          link["problem"] = why;
          if (Severity(kExitCut) < Severity(worst)) worst = kExitCut;
        }
      }
      log.links.push_back(std::move(link));
    }
  }
  auto html = AuditReportHtml(logs, worst);
  if (!html) return Failed(false, html.error(), kExitStart);
  if (auto w = WriteReport(f.out, *html); !w) return Failed(false, w.error(), kExitStart);
  if (f.out != "-") {
    std::cout << "report: " << f.out << " (" << logs.size() << " log(s), " << html->size()
              << " bytes); verification exit " << worst << "\n";
  }
  return worst;
}

// `audit report`: its flags are verify's inputs and -o.
void AddReportCommand(CLI::App* audit, Context& ctx) {
  auto rf = std::make_shared<ReportFlags>();
  CLI::App* report =
      audit
          ->add_subcommand("report",
                           "verify logs and write them as one self-contained HTML page: the "
                           "verdict at the top, a timeline per session, files changed, commands, "
                           "denials, network, and a chart")
          ->group("Commands");
  AddLogInputs(report, rf->verify);
  report->add_option("-o,--output", rf->out, "the HTML file to write; - for stdout (required)")
      ->type_name("FILE");
  report->footer(
      "The page is written whatever the verdict (a red banner unless every log is intact and "
      "proven complete by a signed checkpoint); the same logs give the same bytes. exit codes: "
      "as audit verify's (0 intact, 1 broken, 4 torn, 5 unproven tail, 6 cut, 8 no checkpoint, "
      "9 gap; 3 unreadable input, or the report could not be written); 2 bad input");
  ctx.run[report] = [rf] { return Report(*rf); };
}

}  // namespace

void AddAuditCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    std::string log, key_file, out, priv, pub, signing_key;
    bool json = false;
    VerifyFlags verify;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* audit = root.add_subcommand("audit", "check or read an audit log")
                        ->group("Commands")
                        ->require_subcommand(1);
  CLI::App* verify = audit->add_subcommand("verify", "check a log's hash chain and completeness")
                         ->group("Commands");
  verify
      ->add_option("LOG", f->verify.logs,
                   "the audit log; several files, or a directory (every *.jsonl in it), are "
                   "verified each on its own, one line each, and their rotation links checked")
      ->required()
      ->type_name("FILE|DIR");
  verify->add_option("--key-file", f->verify.key_file, "the key of an HMAC-SHA-256 chain")
      ->type_name("FILE");
  verify
      ->add_option("--pubkey", f->verify.pubkeys,
                   "a checkpoint public key (repeat for rotated keys)")
      ->type_name("FILE");
  verify
      ->add_option("--witness", f->verify.witness,
                   "the checkpoints written outside the log (--audit-witness)")
      ->type_name("FILE");
  WithChoices(ctx, verify->add_option("--require", f->verify.require, "the weakest mode to accept"),
              {"plain", "hmac", "signed"}, [](const std::string& v) -> Status {
                if (v == "plain" || v == "hmac" || v == "signed") return {};
                return Fail(Code::kInvalidInput, "--require takes plain, hmac or signed");
              });
  verify->add_flag("--json", f->verify.json, "print the report as JSON");
  verify->footer(
      "exit codes: 0 intact (and complete up to the last checkpoint), 1 broken (the first bad "
      "line is named), 3 unreadable log or key, 4 intact but for a torn last line, 5 records "
      "after the last checkpoint are unproven, 6 cut or replaced (the witness is ahead), 7 mode "
      "weaker than --require, 8 empty or no checkpoint, 9 a gap record. For a directory, the "
      "worst code of its logs, in the order 1, 6, 9, 3, 4, 7, 8, 5, 0");
  ctx.run[verify] = [f] { return Verify(f->verify); };
  auto sf = std::make_shared<ShowFlags>();
  CLI::App* show = audit
                       ->add_subcommand("show",
                                        "verify a log and print it as a timeline: a header with "
                                        "the verdict, every record after a break marked")
                       ->group("Commands");
  AddLogInputs(show, sf->verify);
  show->add_option("--session", sf->session, "records of sessions whose id starts with this")
      ->type_name("PREFIX");
  show->add_option("--type", sf->types, "records of these types (repeatable, or comma-separated)")
      ->type_name("TYPE");
  show->add_option("--tool", sf->tool, "records of this tool")->type_name("NAME");
  show->add_option("--tag", sf->tag,
                   "records of the sessions that carry this tag (session_started.tags, or a "
                   "session_tag record that added it)")
      ->type_name("TAG");
  show->add_option("--path", sf->path, "records naming a path that matches (fnmatch)")
      ->type_name("GLOB");
  show->add_option("--since", sf->since, "records at or after this time (RFC 3339)")
      ->type_name("TIME");
  show->add_option("--until", sf->until, "records at or before this time (RFC 3339)")
      ->type_name("TIME");
  show->add_flag("--errors", sf->errors,
                 "failed calls, commands (non-zero exit, signal, timeout) and writes; gaps");
  show->add_flag("--denied", sf->denied, "policy_denied, refused network, access_denied");
  show->add_flag("--changes", sf->changes,
                 "file writes, commands that changed files, quarantined names, stripped bits");
  show->add_flag("--json", sf->json,
                 "print {path, records, unreadable, verification} (every record; no filter)");
  show->add_flag("--jsonl", sf->jsonl,
                 "print each record as written, plus \"_line\" and \"_verified\" (intact, "
                 "unproven, after_break, torn); the header goes to stderr");
  show->footer(
      "marks: ! at or after the first bad line, ? after the last proven checkpoint, ~ not a "
      "whole record. exit codes: as audit verify's (0 intact, 1 broken, 4 torn, 5 unproven "
      "tail, 6 cut, 8 no checkpoint, 9 gap; 3 unreadable); 2 bad input");
  ctx.run[show] = [sf] { return Show(*sf); };
  auto mf = std::make_shared<SummaryFlags>();
  CLI::App* summary =
      audit
          ->add_subcommand("summary",
                           "verify a log and summarize each session: client, workspace, policy, "
                           "duration, calls, commands, files changed, denials, network, redactions")
          ->group("Commands");
  AddLogInputs(summary, mf->verify);
  summary->add_option("--session", mf->session, "sessions whose id starts with this")
      ->type_name("PREFIX");
  summary->add_flag("--json", mf->json,
                    "print {logs: [{path, verification, sessions, unfinished_sessions, "
                    "unreadable_lines}], exit_code}");
  summary->footer(
      "exit codes: as audit verify's (0 intact, 1 broken, 4 torn, 5 unproven tail, 6 cut, 8 no "
      "checkpoint, 9 gap; 3 unreadable)");
  ctx.run[summary] = [mf] { return Summary(*mf); };
  AddAuditDiffCommand(audit, ctx);
  AddReportCommand(audit, ctx);
  CLI::App* keygen = audit->add_subcommand("keygen", "make an Ed25519 checkpoint signing key pair")
                         ->group("Commands");
  keygen->add_option("--out", f->out, "write audit-signing.key (0600) and audit-signing.pub here")
      ->type_name("DIR");
  keygen->add_option("--private", f->priv, "the private key file (PEM PKCS#8, 0600)")
      ->type_name("FILE");
  keygen->add_option("--public", f->pub, "the public key file (PEM)")->type_name("FILE");
  keygen->add_flag("--json", f->json, "print the key id and paths as JSON");
  ctx.run[keygen] = [f] { return Keygen(f->out, f->priv, f->pub, f->json); };
  CLI::App* rotate =
      audit->add_subcommand("rotate", "rename LOG to LOG.N and start a new LOG linked to it")
          ->group("Commands");
  rotate->add_option("LOG", f->log, "the audit log")->required()->type_name("FILE");
  rotate->add_option("--key-file", f->key_file, "the key of an HMAC-SHA-256 chain")
      ->type_name("FILE");
  rotate->add_option("--audit-signing-key", f->signing_key, "the checkpoint key the new file names")
      ->type_name("FILE");
  rotate->add_flag("--json", f->json, "print the old and new paths as JSON");
  ctx.run[rotate] = [f] { return Rotate(f->log, f->key_file, f->signing_key, f->json); };
}

}  // namespace cordon::cli
