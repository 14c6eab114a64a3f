// Each record's JSON form and the catalog table. A record's field names here, in its struct and
// in the table below are kept equal by tests/audit_test.cc (CatalogMatchesRecords).
#include "audit/records.h"

#include <algorithm>
#include <map>

namespace cordon {
namespace {

template <typename T>
void Put(Json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <typename T>
Json OrNull(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace

Json SessionStartedRecord::ToJson() const {
  Json j = {{"cordon_version", cordon_version}, {"client", client},
            {"workspace", workspace},           {"chain", chain},
            {"policy_sha256", policy_sha256},   {"policy_files", policy_files},
            {"policy_notes", policy_notes},     {"scopes", scopes},
            {"confinement", confinement},       {"sandbox", sandbox}};
  Put(j, "git", git);
  Put(j, "env", env);
  Put(j, "git_identity", git_identity);
  Put(j, "redaction", redaction);
  return j;
}

Json ToolStartedRecord::ToJson() const {
  Json j = {{"tool", tool}};
  Put(j, "call", call);
  Put(j, "scope", scope);
  Put(j, "effect", effect);
  Put(j, "args", args);
  Put(j, "input_bytes", input_bytes);
  Put(j, "unvalidated", unvalidated);
  Put(j, "server", server);
  Put(j, "args_bytes", args_bytes);
  Put(j, "args_sha256", args_sha256);
  Put(j, "method", method);
  return j;
}

Json ToolFinishedRecord::ToJson() const {
  Json j = {{"tool", tool}, {"status", status}, {"elapsed_ms", elapsed_ms}};
  Put(j, "call", call);
  Put(j, "code", code);
  Put(j, "message", message);
  Put(j, "output_bytes", output_bytes);
  Put(j, "truncated", truncated);
  Put(j, "server", server);
  Put(j, "server_tool", server_tool);
  Put(j, "output_redactions", output_redactions);
  Put(j, "output_redactions_by_rule", output_redactions_by_rule);
  Put(j, "reason", reason);
  Put(j, "method", method);
  return j;
}

Json PolicyDeniedRecord::ToJson() const {
  Json j = {{"call", call}, {"tool", tool}, {"scope", scope}, {"rule", rule}};
  Put(j, "decided_by", decided_by);
  return j;
}

Json FileWriteRecord::ToJson() const {
  Json j = {{"call", call},
            {"tool", tool},
            {"op", op},
            {"path", path},
            {"sha256_before", OrNull(sha256_before)},
            {"bytes_before", bytes_before},
            {"status", status}};
  Put(j, "sha256_after", sha256_after);
  Put(j, "bytes_after", bytes_after);
  Put(j, "code", code);
  return j;
}

Json ProcessRecord::ToJson() const {
  Json j = {{"argv", argv},
            {"cwd", cwd},
            {"kind", kind},
            {"tool", tool},
            {"status", status},
            {"exit_code", OrNull(exit_code)},
            {"signal", OrNull(signal)},
            {"elapsed_ms", elapsed_ms},
            {"cpu_ms", cpu_ms},
            {"max_rss_kb", max_rss_kb},
            {"confinement", confinement},
            {"stdout_bytes", stdout_bytes},
            {"stderr_bytes", stderr_bytes},
            {"truncated", truncated}};
  Put(j, "cgroup", cgroup);
  Put(j, "job", job);
  Put(j, "cancel_requested", cancel_requested);
  Put(j, "spec_sha256", spec_sha256);
  Put(j, "launch", launch);
  Put(j, "limit", limit);
  Put(j, "timeout", timeout);
  if (error_code) j["error"] = {{"code", *error_code}, {"message", error_message}};
  Put(j, "changes", changes);  // --- changes
  Put(j, "stop_signal", stop_signal);
  Put(j, "env", env);
  return j;
}

Json ProtectedPathRemovedRecord::ToJson() const {
  Json j = {{"path", path}, {"kind", kind}, {"quarantine", quarantine}, {"when", when}};
  Put(j, "error", error);
  Put(j, "reason", reason);
  return j;
}

Json SetuidStrippedRecord::ToJson() const {
  Json j = {
      {"path", path}, {"mode_before", mode_before}, {"mode_after", mode_after}, {"when", when}};
  Put(j, "error", error);
  return j;
}

Json McpDiagnosticRecord::ToJson() const {
  Json j = {{"server", server}, {"reason", reason}};
  Put(j, "source", source);
  Put(j, "message", message);
  Put(j, "stderr", stderr_tail);
  Put(j, "method", method);
  Put(j, "protocolVersion", protocol_version);
  Put(j, "bytes", bytes);
  Put(j, "messages", messages);
  Put(j, "http_status", http_status);
  Put(j, "curl", curl);
  Put(j, "body", body);
  Put(j, "tools", tools);
  return j;
}

Json McpTrustRecord::ToJson() const {
  return {{"server", server},
          {"source", source},
          {"definition_sha256", definition_sha256},
          {"tools", tools}};
}

Json McpClientRecord::ToJson() const {
  return {{"clientInfo", client_info}, {"protocolVersion", protocol_version}};
}

Json InstructionsRecord::ToJson() const {
  Json j = {{"files", files}, {"bytes", bytes}, {"truncated", truncated}};
  Put(j, "path", path);
  Put(j, "sha256", sha256);
  return j;
}

Json SessionFinishedRecord::ToJson() const {
  Json j = {{"calls", calls}, {"errors", errors}};
  Put(j, "git", git);
  return j;
}

Json LogRecoveredRecord::ToJson() const { return {{"torn_bytes", torn_bytes}}; }

// --- failclosed: gap, log_detached
Json GapRecord::ToJson() const {
  return {{"lost", lost}, {"types", types}, {"calls", calls}, {"errno", err}, {"error", error}};
}

Json LogDetachedRecord::ToJson() const {
  Json j = {{"reason", reason},
            {"path", path},
            {"previous_head", previous_head},
            {"previous_size", previous_size},
            {"previous_ino", previous_ino},
            {"where", where}};
  Put(j, "previous", previous);
  return j;
}

// --- checkpoint ---
Json LogStartedRecord::ToJson() const {
  Json j = {{"log_id", log_id}, {"chain", chain}};
  Put(j, "key_id", key_id);
  Put(j, "previous", previous);
  return j;
}

Json CheckpointRecord::ToJson() const {
  Json j = {{"log_id", log_id}, {"lines", lines}, {"bytes", bytes}, {"head", head}};
  Put(j, "key_id", key_id);
  Put(j, "sig", sig);
  return j;
}

// --- denials
Json AccessDeniedRecord::ToJson() const {
  Json j = {{"tool", tool},   {"kind", kind},       {"layer", layer},      {"denials", denials},
            {"total", total}, {"omitted", omitted}, {"complete", complete}};
  Put(j, "job", job);
  Put(j, "incomplete_reason", incomplete_reason);
  return j;
}

Json NetworkRecord::ToJson() const {
  Json j = {{"identity", identity},
            {"protocol", protocol},
            {"host", host},
            {"port", port},
            {"decision", decision},
            {"bytes_up", bytes_up},
            {"bytes_down", bytes_down},
            {"duration_ms", duration_ms}};
  Put(j, "method", method);
  Put(j, "address", address);
  Put(j, "rule", rule);
  Put(j, "rule_source", rule_source);
  Put(j, "reason", reason);
  Put(j, "error", error);
  Put(j, "http_status", http_status);
  return j;
}

std::string_view RecordType(const AuditRecord& record) {
  return std::visit([](const auto& r) { return std::decay_t<decltype(r)>::kType; }, record);
}

Json RecordFields(const AuditRecord& record) {
  return std::visit([](const auto& r) { return r.ToJson(); }, record);
}

namespace {

// `show` numbers give `audit show`'s column order; a name keeps one number across types.
constexpr AuditFieldInfo kCommon[] = {
    {"v", true, "record format version, 1"},
    {"seq", true, "1-based position of the record in its session"},
    {"ts", true, "UTC time of writing, RFC 3339 with milliseconds"},
    {"session", true, "session id (UUID v4)"},
    {"type", true, "record type (this table)"},
    {"prev", true, "SHA-256 (or HMAC-SHA-256) of the previous line; 64 zeros for the first"},
    {"redactions", false, "number of secrets replaced in this record's fields", 14},
};

constexpr AuditFieldInfo kSessionStarted[] = {
    {"cordon_version", true, "cordon's version"},
    {"client", true, "who drives the session: cli, mcp, ..."},
    {"workspace", true, "the workspace root", 13},
    {"chain", true, "sha256 or hmac-sha256"},
    {"policy_sha256", true, "hash of the merged policy"},
    {"policy_files", true, "policy layers: [{path, sha256, layer}]"},
    {"policy_notes", true, "notes the policy loader made"},
    {"scopes", true, "granted scopes"},
    {"confinement", true, "what the kernel offers (Landlock ABI, seccomp, user namespaces)"},
    {"sandbox", true, "the sandbox host, or {available: false, error}"},
    {"git", false, "{head, branch} of the workspace's git repository; absent when not a repo"},
    {"env", false,
     "policy [env]: {pass, deny, set}: the variable names it passes, denies and sets (never "
     "values); absent when the section is empty"},
    {"git_identity", false,
     "the git identity confined processes get as GIT_AUTHOR_* and GIT_COMMITTER_*: {source: "
     "\"git config --global\" or \"none\", name, email, error (why git could not be asked), "
     "policy_env (the variables policy [env] sets or denies instead)}"},
    {"redaction", false,
     "{rules: the redaction rules loaded, secret_files: the workspace scan (files, lines, "
     "entries, read_files, read_bytes, cached_files, truncated, ms, paths)}"},
};

constexpr AuditFieldInfo kToolStarted[] = {
    {"call", false, "call number in the session (absent under cordon wrap)"},
    {"tool", true, "tool name; mcp__{server}__{tool} for an MCP server's tool", 1},
    {"scope", false, "scope the tool needs", 6},
    {"effect", false, "none, file_write or process"},
    {"args", false, "the input, with file contents replaced by {bytes, sha256}"},
    {"input_bytes", false, "size of an input that was not valid JSON"},
    {"unvalidated", false,
     "present when the input was passed on unchecked: the tool's schema uses what cordon's "
     "validator does not support (the reason)"},
    {"server", false, "MCP server (configured name, or \"wrapped\")"},
    {"args_bytes", false, "size of the arguments (cordon wrap)"},
    {"args_sha256", false, "hash of the arguments (cordon wrap)"},
    {"method", false,
     "cordon wrap: resources/read (tool is the URI) or prompts/get (tool is the prompt name); "
     "absent for tools/call"},
};

constexpr AuditFieldInfo kToolFinished[] = {
    {"call", false, "call number (absent under cordon wrap)"},
    {"tool", true, "tool name", 1},
    {"status", true, "ok, error or cancelled", 2},
    {"code", false, "error code (docs/errors.md)", 3},
    {"message", false, "error message, redacted"},
    {"output_bytes", false, "size of the result sent to the agent", 9},
    {"truncated", false, "whether the output cap cut the result", 10},
    {"elapsed_ms", true, "wall time of the call", 8},
    {"server", false, "MCP server"},
    {"server_tool", false, "the tool's own name on its server"},
    {"output_redactions", false, "secrets replaced in the result"},
    {"output_redactions_by_rule", false, "{rule id: count} of output_redactions"},
    {"reason", false, "why the client cancelled (cordon wrap)", 7},
    {"method", false, "cordon wrap: as in tool_started"},
};

constexpr AuditFieldInfo kPolicyDenied[] = {
    {"call", true, "call number"},
    {"tool", true, "tool name", 1},
    {"scope", true, "scope the policy does not grant", 6},
    {"rule", true, "the policy key that decided"},
    {"decided_by", false, "the policy file that set it, or built-in default"},
};

constexpr AuditFieldInfo kFileWrite[] = {
    {"call", true, "call number"},
    {"tool", true, "tool name", 1},
    {"op", true, "create, replace, edit, ...", 4},
    {"path", true, "workspace-relative path", 5},
    {"sha256_before", true, "hash of the old content; null for a new file"},
    {"bytes_before", true, "size of the old content", 11},
    {"sha256_after", false, "hash of the new content (when written)"},
    {"bytes_after", false, "size of the new content (when written)", 12},
    {"status", true, "written or failed", 2},
    {"code", false, "error code when failed", 3},
};

constexpr AuditFieldInfo kProcess[] = {
    {"argv", true, "the command"},
    {"cwd", true, "its working directory"},
    {"kind", true, "run_command, job, mcp_server, exec, ..."},
    {"tool", true, "the tool that ran it", 1},
    {"status", true, "exited, signaled, timeout, cancelled or failed", 2},
    {"exit_code", true, "exit code, or null"},
    {"signal", true, "signal number, or null"},
    {"elapsed_ms", true, "wall time", 8},
    {"cpu_ms", true, "CPU time"},
    {"max_rss_kb", true, "peak resident memory"},
    {"confinement", true, "the layers that confined it"},
    {"cgroup", false, "cgroup limits and usage"},
    {"job", false, "background job id"},
    {"cancel_requested", false, "whether the job was cancelled (background jobs)"},
    {"spec_sha256", false,
     "SHA-256 of the confinement spec the shim applied, as the shim computed it (equals "
     "`cordon exec --plan`'s `spec_sha256`)"},
    {"launch", false,
     "how it was started (docs/adr/0008-warm-sandbox.md): {kind: \"warm\", sandbox, call (its "
     "number in that sandbox)} or {kind: \"cold\", reason}"},
    {"error", false, "sandbox failure: {code, message}"},
    {"limit", false,
     "the limit that ended it: {name (timeout, cpu, file_size, memory, pids), value, unit, "
     "policy_key, enforcer, evidence}"},
    {"timeout", false,
     "the timeout the call asked for: {requested, applied, capped, capped_by (the policy key), "
     "decided_by (its file:line)}"},
    {"stdout_bytes", true, "bytes written to stdout"},
    {"stderr_bytes", true, "bytes written to stderr"},
    {"truncated", true, "whether captured output was cut", 10},
    // --- changes: issue 10
    {"changes", false,
     "what it changed in the writable roots (absent when none was writable, or "
     "audit.file_changes is off): {entries: [{kind, path, type, from, bytes_before, "
     "bytes_after, mode_before, mode_after, below, content_changed, sha256_before, "
     "sha256_after, hash_skipped, before_unknown}], counts: {kind: n}, omitted, concurrent, "
     "git, unwalked, workspace_mode (direct: the sandbox wrote the workspace itself)}; paths "
     "keep their bytes (invalid UTF-8 as `\\xHH`, a backslash as `\\\\`)"},
    {"stop_signal", false,
     "the signal (SIGINT 2, SIGTERM 15, SIGHUP 1) cordon received that made it end the process"},
    {"env", false,
     "names (never values) of the variables it got beyond the fixed sandbox ones (PATH, HOME, "
     "TMPDIR, CORDON_*): passed from the caller, set by policy, --env or the server's config"},
};

constexpr AuditFieldInfo kMcpDiagnostic[] = {
    {"server", true, "MCP server"},
    {"reason", true, "what happened", 7},
    {"source", false, "the config file"},
    {"message", false, "error message"},
    {"stderr", false, "tail of the server's stderr"},
    {"method", false, "the JSON-RPC method concerned"},
    {"protocolVersion", false, "the version the server offered"},
    {"bytes", false, "size of a dropped message"},
    {"messages", false, "messages received on a GET stream"},
    {"http_status", false, "HTTP status"},
    {"curl", false, "libcurl's error"},
    {"body", false, "start of an HTTP error body"},
    {"tools", false, "names of tools hidden because they changed"},
};

constexpr AuditFieldInfo kMcpTrust[] = {
    {"server", true, "MCP server"},
    {"source", true, "the config file"},
    {"definition_sha256", true, "hash of the server's definition"},
    {"tools", true, "number of tools pinned"},
};

constexpr AuditFieldInfo kMcpClient[] = {
    {"clientInfo", true, "the MCP client's clientInfo"},
    {"protocolVersion", true, "the negotiated protocol version"},
};

constexpr AuditFieldInfo kInstructions[] = {
    {"files", true, "[{path, sha256, bytes, truncated}] of AGENTS.md and its includes"},
    {"bytes", true, "size of the instructions sent"},
    {"truncated", true, "whether the budget cut them", 10},
    {"path", false, "the file, when there is one", 5},
    {"sha256", false, "its hash, when there is one file"},
};

constexpr AuditFieldInfo kSessionFinished[] = {
    {"calls", true, "tool calls in the session"},
    {"errors", true, "calls that ended in an error"},
    {"git", false, "{head, branch} of the workspace's git repository at the end"},
};

constexpr AuditFieldInfo kLogRecovered[] = {
    {"torn_bytes", true, "size of the torn line before this record"},
};

constexpr AuditFieldInfo kProtectedPathRemoved[] = {
    {"path", true, "where the protected name was (absolute)", 5},
    {"kind", true, "dir, file, symlink or other"},
    {"quarantine", true, "where cordon moved it: <state>/quarantine/<session>/..."},
    {"when", true,
     "process_end, call_boundary or launch: which sweep found it; commit or recovery: a staged "
     "commit refused it"},
    {"error", false, "why it could not be moved (it is still there)"},
    {"reason", false,
     "staged mode: the rule that kept it out of the tree (protected_path, git_metadata, "
     "new_git_dir, repo_executes, special_file, setid_bits, masked_path, below_refused, "
     "not_a_directory, "
     "conflict)"},
};

constexpr AuditFieldInfo kSetuidStripped[] = {
    {"path", true, "the file (absolute)", 5},
    {"mode_before", true, "its mode before, octal"},
    {"mode_after", true, "its mode after, octal"},
    {"when", true, "process_end, call_boundary or launch: which sweep found it"},
    {"error", false, "why the bits could not be cleared"},
};

// --- failclosed: gap, log_detached
constexpr AuditFieldInfo kGap[] = {
    {"lost", true, "records that could not be written after their act had happened", 5},
    {"types", true, "their types, in order, without repeats"},
    {"calls", true, "the tool calls they belonged to"},
    {"errno", true, "errno of the failed write", 6},
    {"error", true, "the failure, as text"},
};

constexpr AuditFieldInfo kLogDetached[] = {
    {"reason", true,
     "deleted, moved, replaced or truncated (cut in place): what happened to the file at the path",
     5},
    {"path", true, "the log's path"},
    {"previous_head", true, "chain hash of this writer's last line in the old file"},
    {"previous_size", true,
     "where this writer's part of the old file ended (for truncated: what it had written)"},
    {"previous_ino", true, "the old file's inode number"},
    {"where", true,
     "old_file (closing the old file) or new_file (the link: the writer continues here)", 6},
    {"previous", false,
     "new_file: the link audit verify follows: {log_id, lines, bytes, head, reason, ino} of the "
     "old file's end"},
};

// --- checkpoint ---
constexpr AuditFieldInfo kLogStarted[] = {
    {"log_id", true, "the file's id: 128 random bits, hex"},
    {"chain", true, "sha256 or hmac-sha256: the chain mode of every line of the file"},
    {"key_id", false, "id of the checkpoint signing key (16 hex of SHA-256 of the public key)"},
    {"previous", false,
     "the file this one continues: {log_id, lines, bytes, head, path} after `cordon audit "
     "rotate`; {log_id, lines, bytes, head, reason, ino} when a writer found its log deleted, "
     "moved, replaced or truncated and started this file"},
};

constexpr AuditFieldInfo kCheckpoint[] = {
    {"log_id", true, "the log_started id of this file (empty when the file has none)"},
    {"lines", true, "whole lines in the file before this record"},
    {"bytes", true, "byte offset of this record"},
    {"head", true, "chain hash of the line before this record (equals this record's prev)"},
    {"key_id", false, "the signing key's id; absent for an unsigned (witness-only) checkpoint"},
    {"sig", false, "Ed25519 signature (hex) of the signed text (docs/audit.md)"},
};

// --- denials
constexpr AuditFieldInfo kAccessDenied[] = {
    {"tool", true, "the tool that ran the process (as in its `process` record)", 1},
    {"kind", true, "the process's kind (as in its `process` record)"},
    {"job", false, "background job id"},
    {"layer", true, "the kernel layer that refused: landlock"},
    {"denials", true,
     "up to 32 distinct refusals: [{blockers (Landlock's access rights, e.g. fs.make_reg), path "
     "(fs.*; as the sandbox names it), address (net.*, host:port) or object (other fields), "
     "count}]"},
    {"total", true,
     "denials in all: the kernel's own count (the domain's deallocated record) when it arrived, "
     "else the records cordon received"},
    {"omitted", true, "denials in entries beyond the 32 listed"},
    {"complete", true, "false when some denials may be missing (incomplete_reason says why)"},
    {"incomplete_reason", false, "why the list may be missing denials"},
};

constexpr AuditFieldInfo kNetwork[] = {
    {"identity", true, "whose sandbox: tool NAME, server NAME, read_url", 15},
    {"protocol", true, "connect (HTTP CONNECT), http (one plain HTTP request), socks5"},
    {"method", false, "plain HTTP: the request method"},
    {"host", true, "the name (or address) the client asked for, normalised", 17},
    {"port", true, "the port it asked for", 18},
    {"address", false, "the address connected to (after the proxy resolved and checked it)"},
    {"decision", true, "allowed or denied", 16},
    {"rule", false, "the allow or deny rule that decided"},
    {"rule_source", false, "where that rule came from (file:line, --allow-domain, preset NAME)"},
    {"reason", false, "why it was refused: the one line the client was told", 7},
    {"error", false, "allowed, but the upstream failed (resolution, connect, timeout)", 19},
    {"bytes_up", true, "bytes from the client to the upstream (after the request head)"},
    {"bytes_down", true, "bytes from the upstream to the client", 20},
    {"duration_ms", true, "from accept to close"},
    {"http_status", false, "plain HTTP: the upstream's status; a refusal: 403"},
};

constexpr AuditRecordInfo kCatalog[] = {
    {SessionStartedRecord::kType, "a session began", kSessionStarted},
    {ToolStartedRecord::kType, "a tool call was received", kToolStarted},
    {ToolFinishedRecord::kType, "a tool call ended", kToolFinished},
    {PolicyDeniedRecord::kType, "the policy refused a call", kPolicyDenied},
    {FileWriteRecord::kType, "a tool wrote (or failed to write) a file", kFileWrite},
    {ProcessRecord::kType, "a confined process ended", kProcess},
    {McpDiagnosticRecord::kType, "something about an MCP server worth knowing", kMcpDiagnostic},
    {McpTrustRecord::kType, "cordon mcp trust pinned a server's tools", kMcpTrust},
    {McpClientRecord::kType, "an MCP client initialized", kMcpClient},
    {InstructionsRecord::kType, "AGENTS.md was sent to the client", kInstructions},
    {SessionFinishedRecord::kType, "a session ended", kSessionFinished},
    {LogRecoveredRecord::kType, "the writer found the last line torn by a crash", kLogRecovered},
    {ProtectedPathRemovedRecord::kType,
     "a protected name a confined process created went to the quarantine (the direct mode's sweep "
     "moved it, or a staged commit kept it out of the tree)",
     kProtectedPathRemoved},
    {SetuidStrippedRecord::kType,
     "the workspace guard cleared set-user-ID/set-group-ID bits of a file in a writable root",
     kSetuidStripped},
    // --- failclosed
    {GapRecord::kType,
     "records were lost after their act happened; the session took no further calls", kGap},
    {LogDetachedRecord::kType,
     "the log file was deleted, moved, replaced or truncated while the writer had it open",
     kLogDetached},
    // --- checkpoint ---
    {LogStartedRecord::kType, "the first line of a log file", kLogStarted},
    {CheckpointRecord::kType, "a signed statement of the log's position", kCheckpoint},
    // --- denials
    {AccessDeniedRecord::kType,
     "Landlock refused a confined process something; follows that process's `process` record "
     "(root with the kernel's audit on only)",
     kAccessDenied},
    // --- egress
    {NetworkRecord::kType,
     "a connection (or plain HTTP request) through the egress proxy, allowed or refused", kNetwork},
};
static_assert(std::size(kCatalog) == std::variant_size_v<AuditRecord>);

}  // namespace

std::span<const AuditRecordInfo> AuditRecordCatalog() { return kCatalog; }

const AuditRecordInfo* FindAuditRecordInfo(std::string_view type) {
  for (const auto& info : kCatalog) {
    if (info.type == type) return &info;
  }
  return nullptr;
}

std::span<const AuditFieldInfo> AuditCommonFields() { return kCommon; }

const std::vector<std::string_view>& AuditShowKeys() {
  static const std::vector<std::string_view> keys = [] {
    std::map<int, std::string_view> by_rank;
    auto add = [&](std::span<const AuditFieldInfo> fields) {
      for (const auto& f : fields) {
        if (f.show > 0) by_rank.emplace(f.show, f.name);
      }
    };
    for (const auto& info : kCatalog) add(info.fields);
    add(kCommon);
    std::vector<std::string_view> out;
    for (const auto& [rank, name] : by_rank) out.push_back(name);
    return out;
  }();
  return keys;
}

std::string AuditRecordTableMarkdown() {
  std::string out = "| record | field | required | meaning |\n|---|---|---|---|\n";
  auto rows = [&](std::string_view type, std::string_view about,
                  std::span<const AuditFieldInfo> fields) {
    out += "| **" + std::string(type) + "** | | | " + std::string(about) + " |\n";
    for (const auto& f : fields) {
      out += "| | `" + std::string(f.name) + "` | " + (f.required ? "yes" : "no") + " | " +
             std::string(f.about) + " |\n";
    }
  };
  rows("(every record)", "fields ahead of the record's own", kCommon);
  for (const auto& info : kCatalog) rows(info.type, info.about, info.fields);
  return out;
}

}  // namespace cordon
