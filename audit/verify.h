// VerifyAuditLog: checks a log's hash chain, sequence numbers and each record's required fields
// (from the catalog, audit/records.h); with checkpoints, public keys and a witness, whether the
// log is complete (docs/audit.md, "Verify outcomes").
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "audit/checkpoint.h"
#include "core/error.h"

namespace cordon {

struct VerifyOptions {
  std::optional<std::string> hmac_key;
  std::vector<Ed25519Key> pubkeys;          // checkpoint signatures are checked against these
  std::optional<std::string> witness_path;  // checkpoints kept outside the log
  // --- failclosed: the log ids of the other files verified together: a link to a log
  // deleted or cut under its writer is a cut unless that log is among them.
  std::set<std::string> logs_given;
  enum class Require { kNone, kPlain, kHmac, kSigned };
  Require require = Require::kNone;
};

// A line's standing after verification (`audit show` marks each record with it).
enum class LineState : std::uint8_t {
  kIntact,      // chained and checked; proven by a checkpoint when the log is expected to have one
  kUnproven,    // chained and checked, but after the last proven checkpoint
  kAfterBreak,  // the first bad line or any after it: nothing from there on is proven
  kTorn,        // not a whole record (a crash's torn line, recovered or at the end)
};
std::string_view LineStateName(LineState state);

struct VerifyReport {
  // In order of precedence: the first that applies is the verdict.
  enum class Verdict {
    kIntact,        // intact (and, with checkpoints, complete up to the last one)
    kTornTail,      // intact but for a torn last line
    kBroken,        // the chain, a record or a checkpoint is wrong
    kUnprovenTail,  // intact, but records follow the last checkpoint
    kCut,           // the witness holds a checkpoint the log does not: cut or replaced
    kWeakerMode,    // the log's mode is weaker than --require
    kNoCheckpoint,  // empty, or no checkpoint where one is expected
  };
  Verdict verdict = Verdict::kIntact;
  std::uint64_t records = 0;
  std::uint64_t sessions = 0;
  std::uint64_t bytes = 0;
  std::uint64_t first_bad_line = 0;  // 1-based; 0 when none
  // Broken: the first line the chain does not prove; the line before first_bad_line when that
  // line's hash is what broke (it was edited, or lines after it removed).
  std::uint64_t first_marked_line = 0;
  std::uint64_t lines = 0;  // lines in the file, a torn last one included
  // One per line of the file (line N at N - 1).
  std::vector<LineState> line_states;
  std::string problem;
  std::vector<std::string> warnings;
  // --- failclosed: `gap` records (records lost after their act; the chain itself is whole) and
  // `log_detached` records. A log with a gap is not complete: the CLI does not call it intact.
  std::uint64_t gaps = 0;
  std::uint64_t lost_records = 0;
  std::uint64_t detached = 0;
  std::string gap_problem;  // the first gap, in words
  // --- checkpoint ---
  std::string mode;                     // sha256 | hmac-sha256
  bool signed_checked = false;          // at least one checkpoint signature verified
  std::set<std::string> signed_by;      // the key ids of the signatures that verified
  std::string log_id;                   // from log_started; empty when the log has none
  std::optional<std::string> previous;  // log_started.previous, as JSON text
  // --- failclosed: every link to another file (log_started.previous, and log_detached's in a
  // file a writer continued in), as JSON text with its `line`: the set's check follows them.
  std::vector<std::string> links;
  std::uint64_t checkpoints = 0;   // checkpoint records that passed (signature when keys given)
  std::uint64_t proven_lines = 0;  // lines up to and including the last such checkpoint
  std::uint64_t proven_bytes = 0;
  std::uint64_t unproven_records = 0;            // records after it
  std::uint64_t witness_checkpoints = 0;         // witness entries of this log that matched
  std::vector<std::string> unfinished_sessions;  // session_started without session_finished
  // process records whose `changes` has `unwalked` roots: what they changed there is unknown.
  std::uint64_t unwalked = 0;
};

Result<VerifyReport> VerifyAuditLog(const std::string& path, const VerifyOptions& options);

// `cordon audit rotate` links files: the newer file's log_started.previous names the older
// file's id, line count, size and chain head at the rotation. "" when the older file (which may
// have grown since: a session that held it open appends there) still holds exactly that prefix;
// otherwise why not (cut, replaced or another log).
std::string CheckRotationLink(const std::string& older_path, const Json& previous,
                              const std::optional<std::string>& hmac_key);
Result<VerifyReport> VerifyAuditLog(const std::string& path,
                                    const std::optional<std::string>& hmac_key);

}  // namespace cordon
