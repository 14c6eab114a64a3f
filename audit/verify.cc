// The verifier: walks the chain line by line and names the first line that breaks it.
#include "audit/verify.h"

#include <fstream>
#include <map>
#include <set>

#include "audit/records.h"
#include "core/hash.h"
#include "core/text.h"

namespace cordon {
namespace {

const std::string kZeroHash(64, '0');

}  // namespace

Result<VerifyReport> VerifyAuditLog(const std::string& path,
                                    const std::optional<std::string>& hmac_key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Code::kNotFound, "cannot open audit log " + path, errno, path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  VerifyReport r;
  r.bytes = data.size();
  auto chain = [&](std::string_view line) {
    return hmac_key ? HmacSha256Hex(*hmac_key, line) : Sha256Hex(line);
  };
  auto broken = [&](std::uint64_t line_no, std::string why) {
    r.verdict = VerifyReport::Verdict::kBroken;
    r.first_bad_line = line_no;
    r.problem = std::move(why);
    return r;
  };
  std::string expected_prev = kZeroHash;
  std::map<std::string, std::uint64_t> session_seq;
  std::set<std::string> unknown_types;
  std::uint64_t line_no = 0;
  std::size_t pos = 0;
  bool pending_torn = false;  // the previous line was torn and must be followed by log_recovered
  while (pos < data.size()) {
    ++line_no;
    std::size_t nl = data.find('\n', pos);
    const bool terminated = nl != std::string::npos;
    std::string_view line(data.data() + pos, (terminated ? nl : data.size()) - pos);
    pos = terminated ? nl + 1 : data.size();
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) {
      if (!terminated) {
        r.verdict = VerifyReport::Verdict::kTornTail;
        r.first_bad_line = line_no;
        r.problem = "line " + std::to_string(line_no) +
                    " is torn (no newline, not a whole record): the writer was interrupted";
        return r;
      }
      if (pending_torn) return broken(line_no, "two unreadable lines in a row");
      pending_torn = true;
      expected_prev = chain(line);
      continue;
    }
    if (!terminated) {
      r.verdict = VerifyReport::Verdict::kTornTail;
      r.first_bad_line = line_no;
      r.problem = "line " + std::to_string(line_no) + " has no final newline: torn write";
      return r;
    }
    auto str = [&](const char* k) -> std::string {
      auto it = rec.find(k);
      return it != rec.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (!rec.contains("v") || rec["v"] != 1) return broken(line_no, "missing or unknown \"v\"");
    std::string type = str("type"), session = str("session");
    if (type.empty() || session.empty() || str("ts").empty()) {
      return broken(line_no, "record lacks type, session or ts");
    }
    if (pending_torn) {
      if (type != "log_recovered") {
        return broken(line_no - 1, "line " + std::to_string(line_no - 1) +
                                       " is not a record and no log_recovered record follows");
      }
      r.warnings.push_back("line " + std::to_string(line_no - 1) +
                           " was torn by a crash and recovered at line " + std::to_string(line_no));
      pending_torn = false;
    }
    if (str("prev") != expected_prev) {
      if (line_no == 1) return broken(1, "first record does not start a chain (head cut off?)");
      return broken(line_no, hmac_key && line_no == 2 && rec.value("prev", "") != ""
                                 ? "chain mismatch (wrong key, or the line before was edited)"
                                 : "chain mismatch: the line before was edited, removed or "
                                   "reordered");
    }
    if (!rec.contains("seq") || !rec["seq"].is_number_unsigned()) {
      return broken(line_no, "record lacks seq");
    }
    std::uint64_t seq = rec["seq"].get<std::uint64_t>();
    auto [it, fresh] = session_seq.emplace(session, 0);
    if (fresh) ++r.sessions;
    // --- failclosed: a writer whose log was deleted or replaced continues its session in the
    // file now at the path, starting with log_detached: its seq goes on from the old file.
    if (fresh && type == "log_detached" && str("where") == "new_file" && seq > 0) {
      it->second = seq - 1;
    }
    if (type == "gap") {
      const std::uint64_t lost = rec.value("lost", std::uint64_t{0});
      ++r.gaps;
      r.lost_records += lost;
      std::string what = "line " + std::to_string(line_no) + ": gap: " + std::to_string(lost) +
                         " record(s) of session " + session + " were lost after their act (types " +
                         rec.value("types", Json()).dump() + ", calls " +
                         rec.value("calls", Json()).dump() + "): " + str("error");
      if (r.gap_problem.empty()) r.gap_problem = what;
      r.warnings.push_back(std::move(what));
    } else if (type == "log_detached") {
      ++r.detached;
      r.warnings.push_back("line " + std::to_string(line_no) + ": the log was " + str("reason") +
                           " while session " + session + " had it open (" + str("where") +
                           " copy; previous head " + str("previous_head") + ")");
    }
    if (seq != it->second + 1) {
      return broken(line_no, "seq " + std::to_string(seq) + " follows " +
                                 std::to_string(it->second) + " in session " + session);
    }
    it->second = seq;
    if (fresh && type != "session_started" && type != "log_recovered" && type != "log_detached") {
      r.warnings.push_back("session " + session + " has no session_started record");
    }
    if (rec.contains("chain") && rec["chain"] == "hmac-sha256" && !hmac_key) {
      return broken(line_no, "this log is HMAC-chained: pass --key-file");
    }
    // The catalog's required fields: a writer always sets them, so a record without one was
    // not written by cordon as it stands. A type the catalog does not know (a newer writer) is
    // reported, not refused.
    if (const AuditRecordInfo* info = FindAuditRecordInfo(type)) {
      for (const AuditFieldInfo& f : info->fields) {
        if (f.required && !rec.contains(f.name)) {
          return broken(line_no,
                        type + " record lacks its required field \"" + std::string(f.name) + "\"");
        }
      }
    } else if (unknown_types.insert(type).second) {
      r.warnings.push_back("line " + std::to_string(line_no) + ": unknown record type " + type);
    }
    expected_prev = chain(line);
    ++r.records;
  }
  if (pending_torn) {
    r.verdict = VerifyReport::Verdict::kTornTail;
    r.first_bad_line = line_no;
    r.problem = "last line " + std::to_string(line_no) + " is not a whole record: torn write";
  }
  return r;
}

}  // namespace cordon
