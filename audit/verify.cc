// The verifier: walks the chain line by line and names the first line that breaks it.
#include "audit/verify.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "audit/records.h"
#include "core/hash.h"
#include "core/text.h"

namespace cordon {
namespace {

const std::string kChainStart(64, '0');

}  // namespace

Result<VerifyReport> VerifyAuditLog(const std::string& path,
                                    const std::optional<std::string>& hmac_key) {
  VerifyOptions options;
  options.hmac_key = hmac_key;
  return VerifyAuditLog(path, options);
}

namespace {

// --- checkpoint: the witness file's checkpoint lines ---
// A line that is not a checkpoint (torn by a crash or a full disk, or edited) is named in
// `warnings`: it may have been the witness's latest checkpoint, which then proves nothing.
Result<std::vector<Json>> ReadWitness(const std::string& path, std::vector<std::string>* warnings) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Code::kNotFound, "cannot open witness " + path, errno, path);
  std::vector<Json> out;
  std::string line;
  std::uint64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const bool terminated = !in.eof();
    // A syslog export carries a prefix before the JSON, and other messages between.
    const std::size_t brace = line.find('{');
    if (brace == std::string::npos) {
      if (!terminated && !line.empty()) {
        warnings->push_back("witness line " + std::to_string(line_no) +
                            " is torn (no newline, no record); ignored");
      }
      continue;
    }
    Json j = Json::parse(line.substr(brace), nullptr, false);
    if (j.is_object() && j.value("type", "") == "checkpoint") {
      if (!terminated) {
        warnings->push_back("witness line " + std::to_string(line_no) +
                            " has no final newline (a torn write?); its checkpoint is used");
      }
      if (auto it = j.find("restarted"); it != j.end() && it->is_object()) {
        warnings->push_back("witness line " + std::to_string(line_no) + ": the witness was " +
                            it->value("reason", "") + " while a session wrote it (it had " +
                            std::to_string(it->value("bytes", std::uint64_t{0})) +
                            " bytes): checkpoints it held before are gone; the writer's last "
                            "one is repeated here");
      }
      out.push_back(std::move(j));
    } else if (!j.is_object()) {
      warnings->push_back("witness line " + std::to_string(line_no) + " is " +
                          (terminated ? "not a whole JSON record" : "torn (no newline)") +
                          " and is ignored: a checkpoint it held proves nothing");
    }
  }
  // --- failclosed: a witness that proves nothing is not a pass.
  if (out.empty()) {
    return Fail(Code::kInvalidInput,
                "witness " + path + " holds no checkpoint (" +
                    (line_no == 0 ? std::string("it is empty")
                                  : std::to_string(line_no) + " lines, none a checkpoint") +
                    "): it proves nothing; give the witness the log's writer wrote",
                0, path);
  }
  return out;
}

const Ed25519Key* FindKey(const std::vector<Ed25519Key>& keys, const std::string& id) {
  for (const auto& k : keys) {
    if (k.key_id() == id) return &k;
  }
  return nullptr;
}

// "" when the checkpoint's signature verifies with one of `keys`, else why not.
std::string CheckSignature(const Json& cp, const std::vector<Ed25519Key>& keys) {
  const std::string key_id = cp.value("key_id", ""), sig = cp.value("sig", "");
  if (key_id.empty() || sig.empty()) return "is not signed";
  const Ed25519Key* key = FindKey(keys, key_id);
  if (key == nullptr) return "is signed by key " + key_id + ", which no --pubkey names";
  if (!cp.contains("lines") || !cp["lines"].is_number_unsigned() || !cp.contains("bytes") ||
      !cp["bytes"].is_number_unsigned()) {
    return "lacks its position";
  }
  const CheckpointPosition pos{.log_id = cp.value("log_id", ""),
                               .lines = cp["lines"].get<std::uint64_t>(),
                               .bytes = cp["bytes"].get<std::uint64_t>(),
                               .head = cp.value("head", "")};
  if (!key->Verify(CheckpointSignedText(pos, key_id), sig)) {
    return "has a signature that does not verify with key " + key_id;
  }
  return "";
}

// The chain, the records and the checkpoints, line by line; stops at the first bad line.
// line_states holds the lines it passed; VerifyAuditLog completes it.
Result<VerifyReport> VerifyLines(const std::string& path, const VerifyOptions& options) {
  const std::optional<std::string>& hmac_key = options.hmac_key;
  VerifyReport r;
  std::optional<std::vector<Json>> witness;
  if (options.witness_path) {
    ASSIGN_OR_RETURN(witness, ReadWitness(*options.witness_path, &r.warnings));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Code::kNotFound, "cannot open audit log " + path, errno, path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  r.bytes = data.size();
  r.lines = static_cast<std::uint64_t>(std::count(data.begin(), data.end(), '\n')) +
            (!data.empty() && data.back() != '\n' ? 1 : 0);
  auto chain = [&](std::string_view line) {
    return hmac_key ? HmacSha256Hex(*hmac_key, line) : Sha256Hex(line);
  };
  auto broken = [&](std::uint64_t line_no, std::string why) {
    r.verdict = VerifyReport::Verdict::kBroken;
    r.first_bad_line = line_no;
    r.problem = std::move(why);
    return r;
  };
  r.mode = hmac_key ? "hmac-sha256" : "sha256";
  std::string expected_prev = kChainStart;
  // --- checkpoint: per whole line, its end offset and chain hash (for the witness) ---
  std::vector<std::pair<std::uint64_t, std::string>> line_ends;
  bool any_checkpoint = false, has_log_started = false, warned_unchecked = false;
  std::uint64_t last_proven_record = 0;  // r.records at the last proven checkpoint
  std::string link_cut;                  // a link record that shows records were cut
  std::uint64_t resume_line = 0;         // a log_recovered whose seq jumps: a link must follow
  std::string resume_session, resume_problem;
  std::set<std::string> open_sessions;
  std::vector<std::string> open_order;
  std::map<std::string, std::uint64_t> session_seq;
  std::set<std::string> unknown_types;
  std::uint64_t line_no = 0;
  std::size_t pos = 0;
  bool pending_torn = false;  // the previous line was torn and must be followed by log_recovered
  bool torn_tail = false;
  while (pos < data.size()) {
    const std::size_t line_start = pos;
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
        torn_tail = true;
        break;
      }
      if (pending_torn) return broken(line_no, "two unreadable lines in a row");
      pending_torn = true;
      r.line_states.push_back(LineState::kTorn);
      expected_prev = chain(line);
      line_ends.emplace_back(pos, expected_prev);
      continue;
    }
    if (!terminated) {
      r.verdict = VerifyReport::Verdict::kTornTail;
      r.first_bad_line = line_no;
      r.problem = "line " + std::to_string(line_no) + " has no final newline: torn write";
      torn_tail = true;
      break;
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
      // The line before is not what was chained (edited), or lines between are gone: from it
      // on, nothing is proven.
      r.first_marked_line = line_no - 1;
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
    // So does one that found its log detached and started the (empty) file at the path: its
    // log_started carries the link in `previous`.
    if (fresh && seq > 0 &&
        ((type == "log_detached" && str("where") == "new_file") ||
         (type == "log_started" && rec.contains("previous") && rec["previous"].is_object() &&
          rec["previous"].contains("reason")))) {
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
    // --- failclosed: a link record (a writer continued here after its log was rotated,
    // deleted, moved, replaced or truncated): followed at once when it names this same file,
    // else kept for the set's check (CheckRotationLink) and reported.
    const Json* link = nullptr;
    if ((type == "log_detached" && str("where") == "new_file") || type == "log_started") {
      if (auto p = rec.find("previous"); p != rec.end() && p->is_object()) link = &*p;
    }
    if (link != nullptr) {
      const std::string link_id = link->value("log_id", "");
      const std::string reason = link->value("reason", "rotate");
      const auto lines = link->value("lines", std::uint64_t{0});
      const auto bytes = link->value("bytes", std::uint64_t{0});
      const std::string head = link->value("head", "");
      const std::string at = "line " + std::to_string(line_no) + ": ";
      if (!link_id.empty() && link_id == r.log_id && type == "log_detached") {
        // The same file, cut or copied under the writer: its own prefix must be what it wrote.
        const bool holds =
            lines <= line_ends.size() && (lines == 0 ? bytes == 0 && head == kChainStart
                                                     : line_ends[lines - 1].first == bytes &&
                                                           line_ends[lines - 1].second == head);
        if (!holds && link_cut.empty()) {
          link_cut = at + "session " + session + " had written " + std::to_string(lines) +
                     " lines (" + std::to_string(bytes) + " bytes) of this log when it found it " +
                     reason + "; the file before the link record holds " +
                     std::to_string(line_ends.size()) + " lines (" + std::to_string(line_start) +
                     " bytes) that do not end there: records were cut";
        }
      } else {
        // A log deleted (no name left) or cut in place under the writer is gone, unless a copy
        // of it is among the files verified together (the set's check then follows the link).
        if ((reason == "truncated" || reason == "deleted") && link_cut.empty() &&
            !options.logs_given.contains(link_id)) {
          link_cut = at + "session " + session + " found log " + link_id + " " +
                     (reason == "deleted" ? "deleted" : "truncated in place") +
                     " under it (it had written " + std::to_string(lines) + " lines, " +
                     std::to_string(bytes) + " bytes): those records are gone";
        }
        Json kept = *link;
        kept["line"] = line_no;
        r.links.push_back(kept.dump());
        if (type == "log_detached") {
          r.warnings.push_back(at + "session " + session + " continues log " + link_id + " (" +
                               reason + ") at its line " + std::to_string(lines) +
                               ": give that file too to check the link");
        }
      }
    }
    // --- failclosed: a writer that found its log cut into a line recovers the torn end first
    // (log_recovered), then writes its link: its seq may jump at that log_recovered only when
    // its link record comes next.
    if (resume_line != 0) {
      if (type != "log_detached" || str("where") != "new_file" || session != resume_session) {
        return broken(resume_line, resume_problem);
      }
      resume_line = 0;
    }
    if (seq != it->second + 1) {
      std::string why = "seq " + std::to_string(seq) + " follows " + std::to_string(it->second) +
                        " in session " + session;
      if (type != "log_recovered") return broken(line_no, why);
      resume_line = line_no;
      resume_session = session;
      resume_problem = why + " (and no link record follows its log_recovered)";
    }
    it->second = seq;
    // A `recovery` record opens no session: a later cordon wrote it into the log of the session
    // whose stage it recovered (RecoveryRecord).
    if (fresh && type != "session_started" && type != "log_recovered" && type != "log_started" &&
        type != "checkpoint" && type != "log_detached" && type != "recovery") {
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
    // --- checkpoint: the log's id, its checkpoints, and which sessions ended ---
    if (type == "log_started") {
      if (line_no != 1) return broken(line_no, "log_started is not the first line (spliced?)");
      has_log_started = true;
      r.log_id = str("log_id");
      if (rec.value("chain", "") == "hmac-sha256" && !hmac_key) {
        return broken(line_no, "this log is HMAC-chained: pass --key-file");
      }
      if (rec.contains("previous")) r.previous = rec["previous"].dump();
      if (!str("key_id").empty() && options.pubkeys.empty()) {
        r.warnings.push_back("log_started names the checkpoint signing key " + str("key_id") +
                             ": pass --pubkey (and --require signed) to prove the log complete");
      }
    } else if (type == "checkpoint") {
      any_checkpoint = true;
      if (!rec["lines"].is_number_unsigned() || rec["lines"].get<std::uint64_t>() != line_no - 1 ||
          !rec["bytes"].is_number_unsigned() || rec["bytes"].get<std::uint64_t>() != line_start ||
          str("head") != expected_prev || str("log_id") != r.log_id) {
        return broken(line_no, "checkpoint states a position that is not its own (lines " +
                                   rec["lines"].dump() + ", bytes " + rec["bytes"].dump() +
                                   "; it is at line " + std::to_string(line_no) + ", byte " +
                                   std::to_string(line_start) + ")");
      }
      bool proven = true;
      if (!options.pubkeys.empty()) {
        if (std::string why = CheckSignature(rec, options.pubkeys); !why.empty()) {
          if (why == "is not signed") {
            proven = false;
            r.warnings.push_back("line " + std::to_string(line_no) + ": checkpoint is not signed");
          } else {
            return broken(line_no, "checkpoint " + why);
          }
        } else {
          r.signed_checked = true;
          r.signed_by.insert(str("key_id"));
        }
      } else if (rec.contains("sig") && !warned_unchecked) {
        warned_unchecked = true;
        r.warnings.push_back("checkpoint signatures not checked: pass --pubkey");
      }
      if (proven) {
        ++r.checkpoints;
        r.proven_lines = line_no;
        r.proven_bytes = pos;
        last_proven_record = r.records + 1;
      }
    } else if (type == "process" && rec.contains("changes") && rec["changes"].is_object() &&
               rec["changes"].contains("unwalked")) {
      // What the process changed under these roots is unknown: the record claims nothing there.
      ++r.unwalked;
      r.warnings.push_back("line " + std::to_string(line_no) + ": process " +
                           rec.value("argv", Json::array()).dump() + " of session " + session +
                           ": its changes are unknown under " + rec["changes"]["unwalked"].dump() +
                           " (the end-of-process walk could not read them)");
    } else if (type == "session_started") {
      if (open_sessions.insert(session).second) open_order.push_back(session);
    } else if (type == "session_finished") {
      open_sessions.erase(session);
    }
    expected_prev = chain(line);
    line_ends.emplace_back(pos, expected_prev);
    r.line_states.push_back(LineState::kIntact);
    ++r.records;
  }
  if (resume_line != 0) return broken(resume_line, resume_problem);
  if (pending_torn && !torn_tail) {
    r.verdict = VerifyReport::Verdict::kTornTail;
    r.first_bad_line = line_no;
    r.problem = "last line " + std::to_string(line_no) + " is not a whole record: torn write";
  }
  for (const auto& s : open_order) {
    if (open_sessions.contains(s)) r.unfinished_sessions.push_back(s);
  }
  r.unproven_records = r.records - last_proven_record;
  if (!has_log_started && !data.empty()) {
    r.warnings.push_back("no log_started: log id unknown, completeness cannot be proven");
  }
  std::function<VerifyReport(VerifyReport::Verdict, std::string)> set = [&](VerifyReport::Verdict v,
                                                                            std::string why) {
    r.verdict = v;
    r.problem = std::move(why);
    return r;
  };
  // The witness: each of its checkpoints of this log must be in the log, at the same place.
  if (witness) {
    std::uint64_t other = 0;
    for (const Json& w : *witness) {
      if (w.value("log_id", "") != r.log_id) {
        ++other;
        continue;
      }
      if (!options.pubkeys.empty()) {
        if (std::string why = CheckSignature(w, options.pubkeys); !why.empty()) {
          r.warnings.push_back("a witness checkpoint " + why + "; ignored");
          continue;
        }
      }
      if (!w["lines"].is_number_unsigned() || !w["bytes"].is_number_unsigned()) continue;
      const std::uint64_t lines = w["lines"].get<std::uint64_t>();
      const std::uint64_t bytes = w["bytes"].get<std::uint64_t>();
      // The checkpoint line itself (line lines+1) must be whole in the log too.
      if (lines + 1 > line_ends.size()) {
        return set(VerifyReport::Verdict::kCut,
                   "the witness holds a checkpoint at line " + std::to_string(lines + 1) +
                       " (byte " + std::to_string(bytes) + ") but the log has " +
                       std::to_string(line_ends.size()) + " whole lines: the log was cut");
      }
      const std::uint64_t at_bytes = lines == 0 ? 0 : line_ends[lines - 1].first;
      const std::string& at_head = lines == 0 ? kChainStart : line_ends[lines - 1].second;
      if (at_bytes != bytes || at_head != w.value("head", "")) {
        return set(VerifyReport::Verdict::kCut,
                   "the witness checkpoint at line " + std::to_string(lines + 1) +
                       " does not match the log's content there: the log was replaced");
      }
      ++r.witness_checkpoints;
    }
    if (r.witness_checkpoints == 0 && !witness->empty()) {
      return set(VerifyReport::Verdict::kCut,
                 "the witness holds " + std::to_string(other) +
                     " checkpoints, none of this log (id " +
                     (r.log_id.empty() ? std::string("unknown") : r.log_id) +
                     "): the log was replaced, or the witness is another log's");
    }
  }
  if (!link_cut.empty()) return set(VerifyReport::Verdict::kCut, link_cut);
  // A torn last line does not hide a failed requirement: a rebuilt, unsigned log with a torn
  // tail is "weaker mode" (7) or "no checkpoint" (8), not "intact but for a crash" (4).
  const bool torn = r.verdict == VerifyReport::Verdict::kTornTail;
  if (torn) {
    const std::string torn_problem = r.problem;
    set = [&, torn_problem](VerifyReport::Verdict v, std::string why) {
      r.verdict = v;
      r.problem = std::move(why) + "; and " + torn_problem;
      return r;
    };
  }
  using Require = VerifyOptions::Require;
  if (options.require == Require::kHmac && !hmac_key) {
    return set(VerifyReport::Verdict::kWeakerMode,
               "the log is a plain SHA-256 chain; --require hmac wants an HMAC chain "
               "(pass --key-file)");
  }
  if (options.require == Require::kSigned && !r.signed_checked) {
    return set(VerifyReport::Verdict::kWeakerMode,
               "no checkpoint signature verified; --require signed wants a signed log");
  }
  if (data.empty()) {
    return set(VerifyReport::Verdict::kNoCheckpoint,
               "the log is empty: nothing proves it was not emptied");
  }
  if (!any_checkpoint && !options.pubkeys.empty()) {
    return set(VerifyReport::Verdict::kNoCheckpoint,
               "the log has no checkpoint: nothing proves it complete");
  }
  if (torn) return r;
  if ((any_checkpoint || !options.pubkeys.empty()) && r.unproven_records > 0) {
    return set(VerifyReport::Verdict::kUnprovenTail,
               std::to_string(r.unproven_records) +
                   " records after the last checkpoint are not proven (cut or replaced "
                   "records there would not show)");
  }
  return r;
}

}  // namespace

std::string_view LineStateName(LineState state) {
  switch (state) {
    case LineState::kIntact:
      return "intact";
    case LineState::kUnproven:
      return "unproven";
    case LineState::kAfterBreak:
      return "after_break";
    case LineState::kTorn:
      return "torn";
  }
  return "after_break";
}

Result<VerifyReport> VerifyAuditLog(const std::string& path, const VerifyOptions& options) {
  ASSIGN_OR_RETURN(VerifyReport r, VerifyLines(path, options));
  // The lines the walk did not reach: after a break, or the torn tail.
  std::vector<LineState>& states = r.line_states;
  if (r.verdict == VerifyReport::Verdict::kBroken && r.first_bad_line > 0) {
    if (r.first_marked_line == 0 || r.first_marked_line > r.first_bad_line) {
      r.first_marked_line = r.first_bad_line;
    }
    states.resize(std::min<std::uint64_t>(states.size(), r.first_marked_line - 1));
  } else {
    r.first_marked_line = 0;
  }
  const LineState rest =
      r.verdict == VerifyReport::Verdict::kBroken ? LineState::kAfterBreak : LineState::kTorn;
  states.resize(r.lines, rest);
  // With checkpoints (or keys that expect them), what follows the last proven one is unproven.
  if (r.checkpoints > 0 || !options.pubkeys.empty()) {
    for (std::uint64_t i = r.proven_lines; i < states.size(); ++i) {
      if (states[i] == LineState::kIntact) states[i] = LineState::kUnproven;
    }
  }
  return r;
}

// --- checkpoint: a rotated file against the newer file's log_started.previous ---
std::string CheckRotationLink(const std::string& older_path, const Json& previous,
                              const std::optional<std::string>& hmac_key) {
  std::ifstream in(older_path, std::ios::binary);
  if (!in) return "cannot open " + older_path;
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!previous.is_object() || !previous.contains("lines") ||
      !previous["lines"].is_number_unsigned() || !previous.contains("bytes") ||
      !previous["bytes"].is_number_unsigned()) {
    return "the link states no position";
  }
  const std::uint64_t lines = previous["lines"].get<std::uint64_t>();
  const std::uint64_t bytes = previous["bytes"].get<std::uint64_t>();
  const std::string head = previous.value("head", "");
  const std::size_t first_nl = data.find('\n');
  Json first = first_nl == std::string::npos
                   ? Json()
                   : Json::parse(std::string_view(data.data(), first_nl), nullptr, false);
  const std::string log_id = first.is_object() && first.value("type", "") == "log_started"
                                 ? first.value("log_id", "")
                                 : "";
  if (log_id != previous.value("log_id", "")) {
    return older_path + " is log " + (log_id.empty() ? std::string("(no id)") : log_id) +
           ", not the " + previous.value("log_id", "") + " the newer file continues";
  }
  if (data.size() < bytes) {
    return older_path + " has " + std::to_string(data.size()) + " bytes, fewer than the " +
           std::to_string(bytes) + " the newer file says it had at the rotation: it was cut";
  }
  if (bytes > 0 && data[bytes - 1] != '\n') {
    return "byte " + std::to_string(bytes) + " of " + older_path +
           " does not end a line: it was replaced or rewritten";
  }
  const auto nls = static_cast<std::uint64_t>(
      std::count(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(bytes), '\n'));
  std::string at_head = kChainStart;
  if (bytes > 0) {
    const std::size_t start = bytes < 2 ? std::string::npos : data.rfind('\n', bytes - 2);
    const std::size_t from = start == std::string::npos ? 0 : start + 1;
    const std::string_view last(data.data() + from, bytes - 1 - from);
    at_head = hmac_key ? HmacSha256Hex(*hmac_key, last) : Sha256Hex(last);
  }
  if (nls != lines || at_head != head) {
    return "the first " + std::to_string(bytes) + " bytes of " + older_path +
           " are not what the newer file linked (" + std::to_string(nls) + " lines, not " +
           std::to_string(lines) + (at_head != head ? "; another chain head" : "") +
           "): it was replaced or rewritten";
  }
  return "";
}

}  // namespace cordon
