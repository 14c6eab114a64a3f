// SummarizeAuditLog: a log's sessions (interleaved in a file, grouped by session id) as numbers an
// auditor reads first: who ran what under which policy, calls, commands, files changed, denials,
// network, redactions, and how much of each session the verification proved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "audit/verify.h"
#include "core/error.h"
#include "core/text.h"

namespace cordon {

struct SummaryLimits {
  std::size_t files = 50;     // changed files listed per session (all are counted)
  std::size_t commands = 50;  // commands listed per session (all are counted)
  std::size_t subjects = 10;  // what a denial rule refused, listed per rule
};

struct SummaryCommand {
  std::uint64_t line = 0;
  std::string tool;  // run_shell, exec, ...; for a configured server's process, its kind
  std::string kind;  // foreground, background, mcp_server
  std::string argv;  // joined with spaces, cut to 200 bytes
  std::string status;
  std::optional<std::int64_t> exit_code, signal;
  std::string error;  // error.code when the launch or the wait failed
  bool failed = false;
};

struct SummaryFile {
  std::uint64_t line = 0;
  std::string path;
  // process: the change's kind (created, modified, deleted, renamed, ...); file_write: created
  // (op create), modified (replace, edit) or failed.
  std::string kind;
  std::string source;  // file_write or process
  std::string tool;
  std::string from;  // a rename's old path
  std::string op;    // file_write: its op
};

struct SummaryDenial {
  std::string type;  // policy_denied, network, access_denied, protected_path_removed,
                     // setuid_stripped
  std::string rule;  // the rule that decided (policy key, network rule, Landlock blockers, ...)
  std::uint64_t count = 0;
  std::vector<std::string> subjects;  // what it refused: scope, host:port, path (first few)
  std::uint64_t subjects_omitted = 0;
};

struct SummaryNetwork {
  std::string host;
  std::string decision;  // allowed, denied
  std::vector<std::int64_t> ports;
  std::uint64_t connections = 0, bytes_up = 0, bytes_down = 0, errors = 0;
};

struct SessionSummary {
  std::string session;
  // session_started (empty when the log holds none of it: a log that starts mid-session).
  bool started = false;
  std::string client, workspace, policy_sha256, cordon_version, chain;
  Json client_info;  // the first mcp_client's clientInfo; null when no client said who it is
  // Every mcp_client of the session (serve --http: one per MCP session): {mcp_session (null under
  // stdio), clientInfo}, the first 100; how many more there were.
  Json mcp_clients = Json::array();
  std::uint64_t mcp_clients_omitted = 0;
  std::string first_ts, last_ts;
  std::optional<std::int64_t> duration_ms;  // first record to session_finished, or to the last
  bool finished = false;                    // a session_finished record
  std::optional<std::int64_t> finished_calls, finished_errors;  // what session_finished says
  // Verification: the session's lines by state (LineStateName), and where they are.
  std::uint64_t records = 0, first_line = 0, last_line = 0;
  std::map<std::string, std::uint64_t> lines;  // intact, unproven, after_break (only seen states)
  bool verified = false;
  // Calls: tool -> status (ok, error, cancelled; "unfinished" for a tool_started without its
  // tool_finished) -> count.
  std::map<std::string, std::map<std::string, std::uint64_t>> calls;
  std::uint64_t calls_total = 0;
  std::vector<SummaryCommand> commands;  // the first SummaryLimits::commands
  std::uint64_t commands_total = 0, commands_failed = 0;
  // Files: counts by kind (process change kinds; file_write's created, modified, failed), and the
  // first SummaryLimits::files of them.
  std::map<std::string, std::uint64_t> file_counts;
  std::uint64_t files_total = 0;
  std::vector<SummaryFile> files;
  std::vector<SummaryDenial> denials;  // by (type, rule), in order of first appearance
  std::uint64_t denials_total = 0;
  std::vector<SummaryNetwork> network;  // by (host, decision), sorted
  // approval records (issue 34): rule id -> answer -> count.
  std::map<std::string, std::map<std::string, std::uint64_t>> approvals;
  std::uint64_t approvals_total = 0;
  // Secrets redacted: sums of the records' `redactions` and tool_finished's `output_redactions`
  // (and its per-rule counts). Counts only: a summary never holds a value.
  std::uint64_t redactions = 0, output_redactions = 0;
  std::map<std::string, std::uint64_t> output_redactions_by_rule;
  std::uint64_t gaps = 0, lost_records = 0;  // gap records, and the records they lost
  Json ToJson() const;
};

struct LogSummary {
  std::string path;
  std::vector<SessionSummary> sessions;         // in order of their first line
  std::vector<std::string> unfinished;          // sessions without session_finished
  std::vector<std::uint64_t> unreadable_lines;  // lines that are not a JSON record
  Json ToJson() const;
};

// Summarizes the log at `path`. With `report` (VerifyAuditLog's), each session counts its lines
// by state; without, they are not counted (`verified` false). `session_prefix` keeps the sessions
// whose id starts with it.
Result<LogSummary> SummarizeAuditLog(const std::string& path, const VerifyReport* report,
                                     std::string_view session_prefix = {},
                                     const SummaryLimits& limits = {});

// The same, over a log's text (each line of `data`, a torn last one included).
LogSummary SummarizeAuditLines(const std::string& path, std::string_view data,
                               const VerifyReport* report, std::string_view session_prefix = {},
                               const SummaryLimits& limits = {});

}  // namespace cordon
