// The audit record catalog: one struct per record type, its JSON form, and the field table that
// `audit show`, the verifier and docs/audit.md are built from.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/text.h"

namespace cordon {

// The first record of a session: who runs it, on what, under which policy and confinement.
struct SessionStartedRecord {
  static constexpr std::string_view kType = "session_started";
  std::string cordon_version{};
  std::string client{};
  std::string workspace{};
  std::string chain{};  // sha256 | hmac-sha256
  std::string policy_sha256{};
  Json policy_files = Json::array();  // [{path, sha256, layer}]
  Json policy_notes = Json::array();
  Json scopes = Json::array();
  Json confinement = Json::object();
  Json sandbox = Json::object();
  std::optional<Json> git{};  // {head, branch} of the workspace's repository (checkpoint helper)
  std::optional<Json> env{};  // policy [env]: {pass, deny, set} names; never values
  // The user's git identity confined processes get (runner/git_identity.h): {source, name,
  // email, error, policy_env: the GIT_* variables the policy's [env] sets or denies instead}.
  std::optional<Json> git_identity{};
  std::optional<Json> redaction{};  // {rules, secret_files: {files, lines, ..., paths}}
  std::optional<std::vector<std::string>> tags{};  // --tag (serve, exec, call)
  Json ToJson() const;
};

struct ToolStartedRecord {
  static constexpr std::string_view kType = "tool_started";
  std::optional<std::uint64_t> call{};  // every call has one, cordon wrap's forwarded ones too
  std::string tool{};
  std::optional<std::string> scope{};
  std::optional<std::string> effect{};
  std::optional<Json> args{};                  // summarized: file contents become {bytes, sha256}
  std::optional<std::uint64_t> input_bytes{};  // input that was not JSON at all
  // Why the input was not checked against the tool's schema (a keyword cordon's validator
  // does not support); absent when it was checked.
  std::optional<std::string> unvalidated{};
  std::optional<std::string> server{};  // cordon wrap
  std::optional<std::uint64_t> args_bytes{};
  std::optional<std::string> args_sha256{};
  // cordon wrap: the client request when it is not tools/call (resources/read: `tool` is the
  // resource URI; prompts/get: the prompt name).
  std::optional<std::string> method{};
  // serve --http: the MCP session that made the call ("mcp-N", as in its mcp_client record).
  std::optional<std::string> mcp_session{};
  Json ToJson() const;
};

struct ToolFinishedRecord {
  static constexpr std::string_view kType = "tool_finished";
  std::optional<std::uint64_t> call{};
  std::string tool{};
  std::string status{};  // ok | error | cancelled
  std::optional<std::string> code{};
  std::optional<std::string> message{};
  std::optional<std::uint64_t> output_bytes{};
  std::optional<bool> truncated{};
  double elapsed_ms = 0;
  std::optional<std::string> server{};
  std::optional<std::string> server_tool{};
  std::optional<std::uint64_t> output_redactions{};
  std::optional<Json> output_redactions_by_rule{};
  std::optional<std::string> reason{};  // why the client cancelled (cordon wrap)
  std::optional<std::string> method{};  // cordon wrap: as in tool_started
  // What MCP servers' staged commits brought to the host since the last call's boundary (the
  // shape of process.changes): a wrapped or configured server's changes, by the call it answered.
  std::optional<Json> changes{};
  Json ToJson() const;
};

struct PolicyDeniedRecord {
  static constexpr std::string_view kType = "policy_denied";
  std::uint64_t call = 0;
  std::string tool{};
  std::string scope{};
  std::string rule{};
  std::optional<std::string> decided_by{};
  Json ToJson() const;
};

struct FileWriteRecord {
  static constexpr std::string_view kType = "file_write";
  std::uint64_t call = 0;
  std::string tool{};
  std::string op{};
  std::string path{};
  std::optional<std::string> sha256_before{};  // null for a new file
  std::uint64_t bytes_before = 0;
  std::optional<std::string> sha256_after{};
  std::optional<std::uint64_t> bytes_after{};
  std::string status{};  // written | failed
  std::optional<std::string> code{};
  // [audit] before_images: stored, over_file_cap, over_session_cap or failed (core/before_images.h)
  std::optional<std::string> before_image{};
  std::optional<std::string> before_image_error{};
  Json ToJson() const;
};

struct ProcessRecord {
  static constexpr std::string_view kType = "process";
  std::vector<std::string> argv{};
  std::string cwd{};
  std::string kind{};
  std::string tool{};
  std::string status{};
  std::optional<int> exit_code{};  // null when none
  std::optional<int> signal{};     // null when none
  double elapsed_ms = 0;
  double cpu_ms = 0;
  std::int64_t max_rss_kb = 0;
  Json confinement = Json::object();
  std::optional<Json> cgroup{};
  std::optional<std::uint64_t> call{};  // the tool call that started it (run_shell)
  std::optional<Json> io{};  // {read_bytes, write_bytes, rchar, wchar} (the shim's /proc/self/io)
  std::optional<std::string> job{};
  std::optional<std::string> mcp_session{};  // serve --http: the MCP session that started it
  std::optional<bool> cancel_requested{};
  std::optional<std::string> spec_sha256{};  // the shim's hash of the spec it applied
  std::optional<Json> launch{};              // {kind: warm, sandbox, call} or {kind: cold, reason}
  std::optional<Json> limit{};    // the limit that ended it: {name, value, unit, policy_key, ...}
  std::optional<Json> timeout{};  // {requested, applied, capped, capped_by, decided_by}
  std::optional<std::string> error_code{};  // with error_message: {"error": {code, message}}
  std::string error_message{};
  std::uint64_t stdout_bytes = 0;
  std::uint64_t stderr_bytes = 0;
  bool truncated = false;
  // --- changes: what the process changed in the writable roots (workspace/changes.h)
  std::optional<Json> changes{};
  // --- stop/env (issue 11): the termination signal cordon received that ended it, and the
  // names (never the values) of the variables it got beyond the fixed sandbox ones.
  std::optional<int> stop_signal{};
  std::optional<std::vector<std::string>> env{};
  Json ToJson() const;
};

struct McpDiagnosticRecord {
  static constexpr std::string_view kType = "mcp_diagnostic";
  std::string server{};
  std::string reason{};
  std::optional<std::string> source{};
  std::optional<std::string> message{};
  std::optional<std::string> method{};
  std::optional<std::string> stderr_tail{};       // "stderr"
  std::optional<std::string> protocol_version{};  // "protocolVersion"
  std::optional<std::uint64_t> bytes{};
  std::optional<std::uint64_t> messages{};
  std::optional<long> http_status{};
  std::optional<std::string> curl{};
  std::optional<std::string> body{};
  std::optional<std::vector<std::string>> tools{};
  Json ToJson() const;
};

struct McpTrustRecord {
  static constexpr std::string_view kType = "mcp_trust";
  std::string server{};
  std::string source{};
  std::string definition_sha256{};
  std::uint64_t tools = 0;
  Json ToJson() const;
};

struct McpClientRecord {
  static constexpr std::string_view kType = "mcp_client";
  Json client_info{};                        // "clientInfo"
  std::string protocol_version{};            // "protocolVersion"
  std::optional<std::string> mcp_session{};  // serve --http: the label its calls are recorded by
  Json ToJson() const;
};

struct InstructionsRecord {
  static constexpr std::string_view kType = "instructions";
  Json files = Json::array();  // [{path, sha256, bytes, truncated}]
  std::uint64_t bytes = 0;
  bool truncated = false;
  std::optional<std::string> path{};  // one file: its path and hash at the top level too
  std::optional<std::string> sha256{};
  Json ToJson() const;
};

struct SessionFinishedRecord {
  static constexpr std::string_view kType = "session_finished";
  std::uint64_t calls = 0;
  std::uint64_t errors = 0;
  std::optional<Json> git{};  // {head, branch} at the session's end (checkpoint helper)
  // The redaction knowledge at the end, when the session learned lines after session_started
  // (audit/knowledge.h): {sha256, hashes, rules_sha256} or {error}.
  std::optional<Json> knowledge{};
  Json ToJson() const;
};

// Written by the writer itself when it finds the log's last line torn by a crash.
struct LogRecoveredRecord {
  static constexpr std::string_view kType = "log_recovered";
  std::uint64_t torn_bytes = 0;
  Json ToJson() const;
};

// The workspace guard moved a protected name that a confined process created (a new .git, a
// .vscode/, an .envrc, ...) out of the workspace into cordon's quarantine.
struct ProtectedPathRemovedRecord {
  static constexpr std::string_view kType = "protected_path_removed";
  std::string path{};        // absolute, where it was
  std::string kind{};        // dir, file, symlink, other
  std::string quarantine{};  // where it is now
  std::string when{};        // process_end, call_boundary, launch, commit, recovery
  std::optional<std::string> error{};
  // Staged mode: the rule that refused it at commit (protected_path, git_metadata, conflict...).
  std::optional<std::string> reason{};
  // reason git_content: the git content it would have landed, each {ref, commit, path, rule}
  // (no commit for the index) or {ref, error} when it could not be checked.
  std::optional<Json> git{};
  Json ToJson() const;
};

// The workspace guard cleared set-user-ID/set-group-ID bits of a file in a writable root.
struct SetuidStrippedRecord {
  static constexpr std::string_view kType = "setuid_stripped";
  std::string path{};
  std::string mode_before{};  // octal, e.g. "4755"
  std::string mode_after{};
  std::string when{};
  std::optional<std::string> error{};
  Json ToJson() const;
};

// --- failclosed: records the writer writes when the log could not take records, or was
// deleted or replaced under it.
// Records were lost after the act they describe had happened (the session then took no
// further calls). Written by the writer itself, as soon as the log takes a write again.
struct GapRecord {
  static constexpr std::string_view kType = "gap";
  std::uint64_t lost = 0;      // records that never reached the log
  Json types = Json::array();  // their types, in order, without repeats
  Json calls = Json::array();  // the tool calls they belonged to
  int err = 0;                 // errno of the failed write
  std::string error{};         // the failure, as text
  Json ToJson() const;
};

// The log file was deleted or replaced while this writer had it open. Written to the old file
// (still readable through any other link to it) and as the first record this writer puts into
// the file now at the path, naming the chain head it left behind.
struct LogDetachedRecord {
  static constexpr std::string_view kType = "log_detached";
  std::string reason{};  // deleted, moved or replaced
  std::string path{};
  std::string previous_head{};      // the chain hash of the writer's last line in the old file
  std::uint64_t previous_size = 0;  // the old file's size then
  std::uint64_t previous_ino = 0;   // the old file's inode number
  std::string where{};              // old_file or new_file: which copy of the record this is
  // new_file: the link audit verify follows, {log_id, lines, bytes, head, reason, ino}: where
  // this writer's part of the old file ended.
  std::optional<Json> previous{};
  Json ToJson() const;
};

// --- checkpoint: the log's first record, and signed positions (docs/adr/0003) ---
// The first line of a log file: the file's id and chain mode, and the file it continues.
struct LogStartedRecord {
  static constexpr std::string_view kType = "log_started";
  std::string log_id{};                 // 128-bit random, hex
  std::string chain{};                  // sha256 | hmac-sha256
  std::optional<std::string> key_id{};  // the checkpoint signing key, when one is configured
  std::optional<Json> previous{};       // {log_id, lines, bytes, head} after a rotation
  Json ToJson() const;
};

// A signed statement of the file-wide position: every line before this one.
struct CheckpointRecord {
  static constexpr std::string_view kType = "checkpoint";
  std::string log_id{};
  std::uint64_t lines = 0;
  std::uint64_t bytes = 0;
  std::string head{};
  std::optional<std::string> key_id{};
  std::optional<std::string> sig{};
  Json ToJson() const;
};

// --- denials: what Landlock refused a confined process, from the kernel's audit stream.
// Written right after the process's own `process` record (same append), only when cordon reads
// the kernel's Landlock records (root, audit enabled) and there was something to say.
struct AccessDeniedRecord {
  static constexpr std::string_view kType = "access_denied";
  std::string tool{};
  std::string kind{};
  std::optional<std::string> job{};
  std::string layer{};           // "landlock"
  Json denials = Json::array();  // [{blockers, path | address | object, count}]
  std::uint64_t total = 0;       // the kernel's count when known, else the records received
  std::uint64_t omitted = 0;     // denials not listed (beyond the per-process bound)
  bool complete = true;
  std::optional<std::string> incomplete_reason{};
  Json ToJson() const;
};

// --- egress (docs/adr/0005-egress-proxy.md): one per connection through the egress proxy (one
// per request for plain HTTP), allowed or refused, written when it ends.
struct NetworkRecord {
  static constexpr std::string_view kType = "network";
  std::string identity{};  // whose sandbox: "tool run_shell", "server github", "read_url"
  std::string protocol{};  // connect, http, socks5
  std::optional<std::string> method{};
  std::string host{};
  int port = 0;
  std::optional<std::string> address{};  // the address connected to
  std::string decision{};                // allowed, denied
  std::optional<std::string> rule{};
  std::optional<std::string> rule_source{};
  std::optional<std::string> reason{};
  std::optional<std::string> error{};
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
  double duration_ms = 0;
  std::optional<int> http_status{};
  Json ToJson() const;
};

// A session tag added or removed (session_tag).
struct SessionTagRecord {
  static constexpr std::string_view kType = "session_tag";
  std::uint64_t call = 0;
  std::string tag{};
  bool tagged = false;
  std::vector<std::string> tags{};  // the tags after the change
  std::optional<std::string> mcp_session{};
  Json ToJson() const;
};

// stop_local_server stopped (or tried to stop) a listener a job started: written after the
// signals, with what they did (the call's tool_started, before them, names what was asked).
struct LocalServerStoppedRecord {
  static constexpr std::string_view kType = "local_server_stopped";
  std::uint64_t call = 0;
  std::string job{};
  std::int64_t pid = 0;  // host pid
  int port = 0;
  std::string comm{};                  // the name the process gave itself: untrusted, redacted
  std::optional<std::int64_t> pgid{};  // the process group signalled; absent: the listener alone
  bool group_by_number = false;        // kill(-pgid): a kernel without PIDFD_SIGNAL_PROCESS_GROUP
  std::vector<std::string> signals{};  // SIGTERM, then SIGKILL when the grace ran out
  bool stopped = false;                // the listener exited
  double elapsed_ms = 0;
  std::optional<std::string> mcp_session{};
  Json ToJson() const;
};

// A start of cordon finished or quarantined a stage that a killed cordon left (staged mode,
// docs/adr/0006-staged-workspace.md), by the rules that stage carries. Written to the log of the
// session that staged it; where that log is gone or cannot be appended to verifiably, to the
// recovering session's log, with a copy (JSON) in its quarantine.
struct RecoveryRecord {
  static constexpr std::string_view kType = "recovery";
  std::string stage{};                       // the stage directory as it was
  std::string outcome{};                     // finished | quarantined | kept | held | expired
  std::optional<std::string> reason{};       // quarantined: never_committed, recovery_died, ...
  std::optional<std::string> rules_error{};  // why the stage's rules file could not be read
  // The session that staged it, from the stage's rules file (absent when it was unreadable).
  std::optional<std::string> stage_session{};
  std::optional<std::string> stage_log{};
  std::optional<std::string> stage_policy_sha256{};
  std::string recovered_by{};  // the session that recovered it
  std::vector<std::string> roots{};
  std::optional<std::string> quarantine{};
  std::optional<Json> changes{};    // finished or kept: installed, refused and conflicts
  std::vector<std::string> left{};  // neither installed nor refused one by one: not in the tree
  std::uint64_t left_omitted = 0;
  std::optional<bool> left_escaped{};  // a path of `left` had its bytes escaped
  std::optional<std::string> error{};
  // Recorded here, not in stage_log: why that log could not take it, and where its copy is.
  std::optional<std::string> stage_log_error{};
  std::optional<std::string> copy{};
  std::optional<std::string> held{};  // held: its id in the held store
  Json ToJson() const;
};

// --- approvals (issue 34): one question an `ask` rule raised, and its answer. Written before
// what it allowed happens (or, for a refusal, before the call's error).
struct ApprovalRecord {
  static constexpr std::string_view kType = "approval";
  std::string id{};  // "ap-N", unique in the session; a later kept answer names it
  std::uint64_t call = 0;
  std::string tool{};
  std::string kind{};     // call | launch | write
  std::string subject{};  // one line, redacted
  std::optional<std::vector<std::string>> argv{};
  std::optional<std::vector<std::string>> paths{};
  std::optional<std::string> operation{};
  std::string rule{};
  std::string rule_source{};
  std::string asked_via{};  // elicitation | terminal | command | none | kept
  std::string answer{};     // once | session | deny | declined | cancelled | timeout | no_client
  std::optional<std::string> client{};  // who answered, as it named itself
  std::optional<std::string> why_no_one{};
  std::optional<std::string> kept_from{};  // asked_via kept: the approval whose answer held
  std::optional<std::string> mcp_session{};
  std::int64_t wait_ms = 0;
  Json ToJson() const;
};

using AuditRecord =
    std::variant<SessionStartedRecord, ToolStartedRecord, ToolFinishedRecord, PolicyDeniedRecord,
                 FileWriteRecord, ProcessRecord, McpDiagnosticRecord, McpTrustRecord,
                 McpClientRecord, InstructionsRecord, SessionFinishedRecord, LogRecoveredRecord,
                 ProtectedPathRemovedRecord, SetuidStrippedRecord,
                 // --- failclosed
                 GapRecord, LogDetachedRecord,
                 // --- checkpoint ---
                 LogStartedRecord, CheckpointRecord,
                 // --- denials
                 AccessDeniedRecord,
                 // --- egress
                 NetworkRecord,
                 // --- supervision (issue 23)
                 SessionTagRecord, LocalServerStoppedRecord,
                 // --- recovery (issue 33)
                 RecoveryRecord,
                 // --- approvals (issue 34)
                 ApprovalRecord>;

std::string_view RecordType(const AuditRecord& record);
Json RecordFields(const AuditRecord& record);

// The catalog as data. Every field has a JSON type; docs/audit-schema.json is generated from it.
enum class AuditKind : std::uint8_t {
  kUnset,  // no type given: the schema test fails on it
  kString,
  kInteger,
  kNumber,
  kBoolean,
  kObject,
  kArray,
  kAny,  // any JSON value (a tool's arguments, as the client sent them)
};
struct AuditShape;
struct AuditType {
  AuditKind kind = AuditKind::kUnset;
  AuditKind items = AuditKind::kUnset;  // kArray: the kind of its elements
  bool nullable = false;
  // kObject, or kArray of kObject: the defined fields (closed: no others); null: any object.
  const AuditShape* shape = nullptr;
};
struct AuditFieldInfo {
  std::string_view name;
  bool required;
  AuditType type;
  std::string_view about;
  int show = 0;  // position among `audit show`'s key=value columns; 0: not shown
};
// A nested object the docs define (process.changes, .limit, access_denied.denials[], ...).
struct AuditShape {
  std::string_view name;  // its definition's name in the schema
  std::span<const AuditFieldInfo> fields;
};
struct AuditRecordInfo {
  std::string_view type;
  std::string_view about;
  std::span<const AuditFieldInfo> fields;
};

// Every record type, in AuditRecord's order.
std::span<const AuditRecordInfo> AuditRecordCatalog();
const AuditRecordInfo* FindAuditRecordInfo(std::string_view type);
// The nested shapes the catalog's fields name.
std::span<const AuditShape* const> AuditShapes();
// The fields every record carries, ahead of its own.
std::span<const AuditFieldInfo> AuditCommonFields();
// The keys `audit show` prints after the type, in order.
const std::vector<std::string_view>& AuditShowKeys();
// The record table of docs/audit.md (Markdown), generated from the catalog.
std::string AuditRecordTableMarkdown();
// A field's type in words: "string", "array of string", "integer or null", "object (changes)".
std::string AuditTypeName(const AuditType& type);
// docs/audit-schema.json: a JSON Schema (2020-12) of every record, generated from the catalog.
Json AuditRecordSchema();

}  // namespace cordon
