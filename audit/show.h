// ShowAuditLog: a log as a readable timeline, verified as it is read: a header with the verdict,
// every record after a break marked, per-type columns, and filters.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "audit/verify.h"
#include "core/error.h"
#include "core/text.h"

namespace cordon {

// Which records `audit show` prints. An empty filter passes every line.
struct ShowFilter {
  std::string session;          // a prefix of the session id
  std::set<std::string> types;  // record types from the catalog
  std::string tool;             // the record's tool (network: its identity "tool NAME")
  std::string path_glob;        // fnmatch(3) on the paths a record names
  std::optional<std::int64_t> since_ms, until_ms;  // ts within [since, until]
  // The kinds (a record of any one asked for passes): failed calls, commands and writes, gaps;
  // policy_denied, refused network, access_denied; written files, process changes,
  // quarantined names, stripped bits.
  bool errors = false;
  bool denied = false;
  bool changes = false;
  // --tag: records of the sessions that carry it (tagged_sessions, from SessionsTagged).
  std::string tag;
  std::set<std::string> tagged_sessions;
  bool Empty() const;
  bool Matches(const Json& rec) const;
};

// What a record is for --errors, --denied and --changes (the report's filters use the same).
struct RecordKinds {
  bool failed = false;   // a failed call, command or write; a gap
  bool refused = false;  // policy_denied, refused network, access_denied
  bool changed = false;  // a written file, a process's changes, a quarantined name, stripped bits
};
RecordKinds KindsOf(const Json& rec);
// Every path a record names (what --path matches): its own, a change's, a denial's, args.path.
std::vector<std::string> RecordPaths(const Json& rec);

// A log file's bytes, whole (show, report); not_found naming it when it cannot be opened.
Result<std::string> ReadAuditLogFile(const std::string& path);

// TerminalSafe (core/text.h) writes what these print.
// The ids of the sessions in the log at `path` that carry `tag`: session_started.tags holds it,
// or a session_tag record added it (tagged: true; under serve --http, any MCP session's). A line
// that is not a record is skipped; an unreadable file is an error.
Result<std::set<std::string>> SessionsTagged(const std::string& path, const std::string& tag);

// RFC 3339 ("2026-01-02T03:04:05Z", a fraction, an offset; or a date alone, midnight UTC) as
// milliseconds since the epoch; an error naming the accepted forms.
Result<std::int64_t> ParseRfc3339(std::string_view text);

// The header: what the verification proved (signed with key ids, keyed, chain only, broken at
// line N, cut by the witness), and what the marks mean.
std::string ShowHeader(const std::string& path, const VerifyReport& report);

// One line per record that passes `filter`, marked by its line's state; a line that is not a
// record is named, never dumped (printed only with an empty filter).
Result<std::string> ShowAuditLog(const std::string& path, const VerifyReport& report,
                                 const ShowFilter& filter);
// The same records as written, each with "_line" and "_verified" (LineStateName) added.
Result<std::string> ShowAuditLogJsonl(const std::string& path, const VerifyReport& report,
                                      const ShowFilter& filter);

// An unverified timeline of every line (kept for the tests of the show columns).
Result<std::string> ShowAuditLog(const std::string& path);

// The same log as JSON: {"path", "records": [each record as written], "unreadable": [{"line",
// "bytes"}]} (a line that is not a record is named, never dumped).
Result<Json> ShowAuditLogJson(const std::string& path);

}  // namespace cordon
