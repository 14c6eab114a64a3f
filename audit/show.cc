// The timeline: a verification header, then one line per record with its mark, the columns its
// type calls for (or the catalog's `show` columns), after the filters.
#include "audit/show.h"

#include <fnmatch.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include "audit/records.h"
#include "core/text.h"

namespace cordon {
namespace {

// Each line of `data` (a torn last one included), 1-based, with `fn(line_no, line)`.
template <typename Fn>
void ForEachLine(const std::string& data, Fn fn) {
  std::uint64_t n = 0;
  for (std::size_t pos = 0; pos < data.size();) {
    std::size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) nl = data.size();
    fn(++n, std::string_view(data.data() + pos, nl - pos));
    pos = nl + 1;
  }
}

bool Glob(const std::string& pattern, const std::string& path) {
  return ::fnmatch(pattern.c_str(), path.c_str(), 0) == 0;
}

// Every path a record names: its own, a change's (and where it came from), a denial's, the
// arguments' `path`.
std::vector<std::string> PathsOf(const Json& rec) {
  std::vector<std::string> out;
  if (auto p = JsonStringField(rec, "path"); !p.empty()) out.push_back(p);
  if (auto c = rec.find("changes"); c != rec.end() && c->is_object()) {
    for (const auto& e : c->value("entries", Json::array())) {
      if (!e.is_object()) continue;
      if (auto p = JsonStringField(e, "path"); !p.empty()) out.push_back(p);
      if (auto p = JsonStringField(e, "from"); !p.empty()) out.push_back(p);
    }
  }
  if (auto d = rec.find("denials"); d != rec.end() && d->is_array()) {
    for (const auto& e : *d) {
      if (e.is_object() && !JsonStringField(e, "path").empty())
        out.push_back(JsonStringField(e, "path"));
    }
  }
  if (auto a = rec.find("args");
      a != rec.end() && a->is_object() && !JsonStringField(*a, "path").empty()) {
    out.push_back(JsonStringField(*a, "path"));
  }
  return out;
}

bool HasChanges(const Json& rec) {
  auto c = rec.find("changes");
  if (c == rec.end() || !c->is_object()) return false;
  if (!c->value("entries", Json::array()).empty()) return true;
  // counts lists every kind, most of them 0.
  const Json counts = c->value("counts", Json::object());
  for (const auto& [kind, n] : counts.items()) {
    if (n.is_number() && n != Json(0)) return true;
  }
  return false;
}

// ts as ms since the epoch, or nullopt.
std::optional<std::int64_t> TsOf(const Json& rec) {
  auto t = ParseRfc3339(JsonStringField(rec, "ts"));
  if (!t) return std::nullopt;
  return *t;
}

std::string Mark(LineState s) {
  switch (s) {
    case LineState::kIntact:
      return "  ";
    case LineState::kUnproven:
      return "? ";
    case LineState::kAfterBreak:
      return "! ";
    case LineState::kTorn:
      return "~ ";
  }
  return "! ";
}

LineState StateOf(const VerifyReport& r, std::uint64_t line_no) {
  return line_no - 1 < r.line_states.size() ? r.line_states[line_no - 1] : LineState::kAfterBreak;
}

std::string Cut(std::string s, std::size_t max) {
  if (s.size() <= max) return s;
  s.resize(max);
  // Never end inside a UTF-8 sequence.
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
  if (!s.empty() && (static_cast<unsigned char>(s.back()) & 0x80) != 0) s.pop_back();
  return s + "...";
}

void Col(std::ostringstream& out, const Json& rec, const char* key) {
  if (auto it = rec.find(key); it != rec.end()) out << "  " << key << "=" << DumpJson(*it);
}

// The columns a type calls for; the catalog's `show` columns for the others.
void Columns(std::ostringstream& out, const std::string& type, const Json& rec) {
  if (type == "process") {
    Col(out, rec, "tool");
    std::string argv;
    for (const auto& a : rec.value("argv", Json::array())) {
      if (!argv.empty()) argv += ' ';
      argv += a.is_string() ? a.get<std::string>() : a.dump();
    }
    out << "  argv=" << DumpJson(Json(Cut(argv, 200)));
    Col(out, rec, "status");
    Col(out, rec, "exit_code");
    if (auto c = rec.find("changes"); c != rec.end() && c->is_object()) {
      // Its counts, without the kinds that did not happen.
      Json counts = Json::object();
      const Json all = c->value("counts", Json::object());
      for (const auto& [kind, n] : all.items()) {
        if (n != Json(0)) counts[kind] = n;
      }
      if (!counts.empty()) out << "  changes=" << DumpJson(counts);
    }
    Col(out, rec, "error");
    Col(out, rec, "elapsed_ms");
    return;
  }
  if (type == "file_write") {
    for (const char* k :
         {"tool", "op", "path", "status", "code", "sha256_before", "sha256_after", "bytes_after"}) {
      Col(out, rec, k);
    }
    return;
  }
  if (type == "policy_denied") {
    for (const char* k : {"tool", "scope", "rule", "decided_by"}) Col(out, rec, k);
    return;
  }
  if (type == "network") {
    Col(out, rec, "identity");
    out << "  to="
        << DumpJson(Json(JsonStringField(rec, "host") + ":" + rec.value("port", Json(0)).dump()));
    for (const char* k : {"decision", "rule", "reason", "error", "bytes_down"}) Col(out, rec, k);
    return;
  }
  if (type == "access_denied") {
    Col(out, rec, "tool");
    Json paths = Json::array();
    for (const auto& d : rec.value("denials", Json::array())) {
      if (!d.is_object()) continue;
      for (const char* k : {"path", "address", "object"}) {
        if (d.contains(k)) paths.push_back(d[k]);
      }
    }
    out << "  denied=" << DumpJson(paths);
    Col(out, rec, "total");
    return;
  }
  for (std::string_view key : AuditShowKeys()) Col(out, rec, std::string(key).c_str());
}

}  // namespace

bool ShowFilter::Empty() const {
  return session.empty() && types.empty() && tool.empty() && path_glob.empty() && !since_ms &&
         !until_ms && !errors && !denied && !changes && tag.empty();
}

Result<std::set<std::string>> SessionsTagged(const std::string& path, const std::string& tag) {
  std::ifstream in(path);
  if (!in) return Fail(Code::kNotFound, "cannot read " + path);
  std::set<std::string> out;
  for (std::string line; std::getline(in, line);) {
    const Json rec = Json::parse(line, nullptr, false);
    if (!rec.is_object()) continue;
    const std::string type = JsonStringField(rec, "type");
    bool carries = false;
    if (type == "session_started" && rec.contains("tags") && rec["tags"].is_array()) {
      for (const Json& t : rec["tags"]) carries = carries || (t.is_string() && t == tag);
    }
    if (type == "session_tag" && JsonStringField(rec, "tag") == tag &&
        rec.value("tagged", false) == true)
      carries = true;
    if (carries) out.insert(JsonStringField(rec, "session"));
  }
  return out;
}

bool ShowFilter::Matches(const Json& rec) const {
  const std::string type = JsonStringField(rec, "type");
  if (!session.empty() && JsonStringField(rec, "session").rfind(session, 0) != 0) return false;
  if (!tag.empty() && !tagged_sessions.contains(JsonStringField(rec, "session"))) return false;
  if (!types.empty() && !types.contains(type)) return false;
  if (!tool.empty() && JsonStringField(rec, "tool") != tool &&
      JsonStringField(rec, "identity") != "tool " + tool) {
    return false;
  }
  if (!path_glob.empty()) {
    bool any = false;
    for (const auto& p : PathsOf(rec)) any = any || Glob(path_glob, p);
    if (!any) return false;
  }
  if (since_ms || until_ms) {
    auto ts = TsOf(rec);
    if (!ts || (since_ms && *ts < *since_ms) || (until_ms && *ts > *until_ms)) return false;
  }
  if (!errors && !denied && !changes) return true;
  // The three kinds: a record of any one of those asked for.
  const RecordKinds k = KindsOf(rec);
  return (errors && k.failed) || (denied && k.refused) || (changes && k.changed);
}

RecordKinds KindsOf(const Json& rec) {
  const std::string type = JsonStringField(rec, "type");
  const std::string status = JsonStringField(rec, "status");
  RecordKinds k;
  k.failed =
      (type == "tool_finished" && status != "ok") ||
      (type == "process" && (status != "exited" || rec.value("exit_code", Json(0)) != Json(0) ||
                             rec.contains("error"))) ||
      (type == "file_write" && status == "failed") || type == "gap" ||
      ((type == "protected_path_removed" || type == "setuid_stripped") && rec.contains("error"));
  k.refused = type == "policy_denied" || type == "access_denied" ||
              (type == "approval" && JsonStringField(rec, "answer") != "once" &&
               JsonStringField(rec, "answer") != "session") ||
              (type == "network" && JsonStringField(rec, "decision") == "denied");
  k.changed = (type == "file_write" && status == "written") ||
              (type == "process" && HasChanges(rec)) || type == "protected_path_removed" ||
              type == "setuid_stripped";
  return k;
}

std::vector<std::string> RecordPaths(const Json& rec) { return PathsOf(rec); }

Result<std::int64_t> ParseRfc3339(std::string_view text) {
  auto bad = [&] {
    return Fail(Code::kInvalidInput,
                "\"" + std::string(text) +
                    "\" is not an RFC 3339 time: give 2026-01-02T03:04:05Z (a fraction and an "
                    "offset such as +02:00 may follow the seconds) or a date, 2026-01-02 "
                    "(midnight UTC)");
  };
  auto digits = [&](std::size_t at, std::size_t n, int* out) {
    if (at + n > text.size()) return false;
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      v = v * 10 + (text[i] - '0');
    }
    *out = v;
    return true;
  };
  std::tm tm{};
  int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0;
  if (!digits(0, 4, &year) || text.size() < 10 || text[4] != '-' || !digits(5, 2, &mon) ||
      text[7] != '-' || !digits(8, 2, &day) || mon < 1 || mon > 12 || day < 1 || day > 31) {
    return bad();
  }
  std::int64_t ms = 0, offset_s = 0;
  if (text.size() > 10) {
    if ((text[10] != 'T' && text[10] != 't' && text[10] != ' ') || !digits(11, 2, &hour) ||
        text.size() < 19 || text[13] != ':' || !digits(14, 2, &min) || text[16] != ':' ||
        !digits(17, 2, &sec) || hour > 23 || min > 59 || sec > 60) {
      return bad();
    }
    std::size_t at = 19;
    if (at < text.size() && text[at] == '.') {
      std::size_t n = 0;
      int scale = 100;
      for (++at; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, ++n) {
        ms += (text[at] - '0') * scale;
        scale /= 10;
      }
      if (n == 0) return bad();
    }
    if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
      ++at;
    } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
      int oh = 0, om = 0;
      if (!digits(at + 1, 2, &oh) || at + 3 >= text.size() || text[at + 3] != ':' ||
          !digits(at + 4, 2, &om) || oh > 23 || om > 59) {
        return bad();
      }
      offset_s = (text[at] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
      at += 6;
    } else {
      return bad();  // RFC 3339 requires the offset
    }
    if (at != text.size()) return bad();
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  const std::time_t t = ::timegm(&tm);
  return (static_cast<std::int64_t>(t) - offset_s) * 1000 + ms;
}

std::string ShowHeader(const std::string& path, const VerifyReport& r) {
  using V = VerifyReport::Verdict;
  std::ostringstream out;
  out << "# " << path << ": ";
  switch (r.verdict) {
    case V::kBroken:
      out << "BROKEN at line " << r.first_bad_line << ": " << r.problem << "; line "
          << r.first_marked_line << " and every line after it are marked !";
      break;
    case V::kCut:
      out << "CUT by the witness: " << r.problem;
      break;
    default:
      if (r.signed_checked) {
        out << "signed: checkpoints verified with key";
        out << (r.signed_by.size() > 1 ? "s" : "");
        for (const auto& k : r.signed_by) out << " " << k;
        out << "; complete up to line " << r.proven_lines;
      } else if (r.mode == "hmac-sha256") {
        out << "keyed: the HMAC-SHA-256 chain is intact";
      } else {
        out << "chain only: the SHA-256 chain is intact (anyone can rebuild it; sign it or key "
               "it to prove it)";
      }
      if (r.verdict == V::kTornTail) out << "; torn: " << r.problem;
      if (r.verdict == V::kUnprovenTail || r.verdict == V::kNoCheckpoint ||
          r.verdict == V::kWeakerMode) {
        out << "; " << r.problem;
      }
      break;
  }
  if (r.gaps > 0) out << "; GAP: " << r.gap_problem;
  out << "\n";
  bool unproven = false, torn = false;
  for (LineState s : r.line_states) {
    unproven = unproven || s == LineState::kUnproven;
    torn = torn || s == LineState::kTorn;
  }
  if (unproven) out << "# ? marks records after the last proven checkpoint\n";
  if (torn) out << "# ~ marks a line that is not a whole record\n";
  return out.str();
}

Result<std::string> ReadAuditLogFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Code::kNotFound, "cannot open audit log " + path, errno, path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Result<std::string> ShowAuditLog(const std::string& path, const VerifyReport& report,
                                 const ShowFilter& filter) {
  ASSIGN_OR_RETURN(std::string data, ReadAuditLogFile(path));
  std::ostringstream out;
  const bool all = filter.Empty();
  ForEachLine(data, [&](std::uint64_t n, std::string_view line) {
    const std::string mark = Mark(StateOf(report, n));
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) {
      if (all) out << mark << n << "  (not a record, " << line.size() << " bytes)\n";
      return;
    }
    if (!filter.Matches(rec)) return;
    const std::string type = JsonStringField(rec, "type");
    out << mark << n << "  " << JsonStringField(rec, "ts") << "  "
        << JsonStringField(rec, "session").substr(0, 8) << "  #" << rec.value("seq", Json(0)).dump()
        << "  " << type;
    Columns(out, type, rec);
    out << "\n";
  });
  return TerminalSafe(out.str());
}

Result<std::string> ShowAuditLogJsonl(const std::string& path, const VerifyReport& report,
                                      const ShowFilter& filter) {
  ASSIGN_OR_RETURN(std::string data, ReadAuditLogFile(path));
  std::string out;
  const bool all = filter.Empty();
  ForEachLine(data, [&](std::uint64_t n, std::string_view line) {
    const std::string_view state = LineStateName(StateOf(report, n));
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) {
      if (all) {
        out += Json{{"_line", n}, {"_verified", state}, {"_unreadable_bytes", line.size()}}.dump() +
               "\n";
      }
      return;
    }
    if (!filter.Matches(rec)) return;
    // The record as written (its bytes, its key order), then the two fields.
    std::string_view body = line;
    while (!body.empty() && body.back() != '}') body.remove_suffix(1);
    body.remove_suffix(1);
    out += std::string(body) + (rec.empty() ? "" : ",") + "\"_line\":" + std::to_string(n) +
           ",\"_verified\":\"" + std::string(state) + "\"}\n";
  });
  return out;
}

Result<std::string> ShowAuditLog(const std::string& path) {
  ASSIGN_OR_RETURN(std::string data, ReadAuditLogFile(path));
  std::ostringstream out;
  ForEachLine(data, [&](std::uint64_t n, std::string_view line) {
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) {
      out << "line " << n << ": (not a record, " << line.size() << " bytes)\n";
      return;
    }
    const std::string type = JsonStringField(rec, "type");
    out << JsonStringField(rec, "ts") << "  " << JsonStringField(rec, "session").substr(0, 8)
        << "  #" << rec.value("seq", Json(0)).dump() << "  " << type;
    for (std::string_view key : AuditShowKeys()) Col(out, rec, std::string(key).c_str());
    out << "\n";
  });
  return TerminalSafe(out.str());
}

Result<Json> ShowAuditLogJson(const std::string& path) {
  ASSIGN_OR_RETURN(std::string data, ReadAuditLogFile(path));
  Json records = Json::array(), unreadable = Json::array();
  ForEachLine(data, [&](std::uint64_t n, std::string_view line) {
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) {
      unreadable.push_back({{"line", n}, {"bytes", line.size()}});
      return;
    }
    records.push_back(std::move(rec));
  });
  return Json{
      {"path", path}, {"records", std::move(records)}, {"unreadable", std::move(unreadable)}};
}

}  // namespace cordon
