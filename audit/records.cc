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
  Put(j, "tags", tags);
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
  Put(j, "mcp_session", mcp_session);
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
  Put(j, "changes", changes);
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
  Put(j, "before_image", before_image);
  Put(j, "before_image_error", before_image_error);
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
  Put(j, "io", io);
  Put(j, "call", call);
  Put(j, "job", job);
  Put(j, "mcp_session", mcp_session);
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
  if (git) j["git"] = *git;
  return j;
}

Json RecoveryRecord::ToJson() const {
  Json j = {{"stage", stage}, {"outcome", outcome}, {"recovered_by", recovered_by},
            {"roots", roots}, {"left", left},       {"left_omitted", left_omitted}};
  Put(j, "reason", reason);
  Put(j, "rules_error", rules_error);
  Put(j, "stage_session", stage_session);
  Put(j, "stage_log", stage_log);
  Put(j, "stage_policy_sha256", stage_policy_sha256);
  Put(j, "quarantine", quarantine);
  Put(j, "changes", changes);
  Put(j, "left_escaped", left_escaped);
  Put(j, "error", error);
  Put(j, "stage_log_error", stage_log_error);
  Put(j, "copy", copy);
  Put(j, "held", held);
  return j;
}

Json ApprovalRecord::ToJson() const {
  Json j = {{"id", id},
            {"call", call},
            {"tool", tool},
            {"kind", kind},
            {"subject", subject},
            {"rule", rule},
            {"rule_source", rule_source},
            {"asked_via", asked_via},
            {"answer", answer},
            {"wait_ms", wait_ms}};
  Put(j, "argv", argv);
  Put(j, "paths", paths);
  Put(j, "operation", operation);
  Put(j, "client", client);
  Put(j, "why_no_one", why_no_one);
  Put(j, "kept_from", kept_from);
  Put(j, "mcp_session", mcp_session);
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
  Json j = {{"clientInfo", client_info}, {"protocolVersion", protocol_version}};
  Put(j, "mcp_session", mcp_session);
  return j;
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
  Put(j, "knowledge", knowledge);
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

Json SessionTagRecord::ToJson() const {
  Json j = {{"call", call}, {"tag", tag}, {"tagged", tagged}, {"tags", tags}};
  Put(j, "mcp_session", mcp_session);
  return j;
}

Json LocalServerStoppedRecord::ToJson() const {
  Json j = {{"call", call},       {"job", job},         {"pid", pid},
            {"port", port},       {"comm", comm},       {"group_by_number", group_by_number},
            {"signals", signals}, {"stopped", stopped}, {"elapsed_ms", elapsed_ms}};
  Put(j, "pgid", pgid);
  Put(j, "mcp_session", mcp_session);
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

// The JSON types of the catalog's fields (docs/audit-schema.json).
constexpr AuditType kStr{AuditKind::kString};
constexpr AuditType kInt{AuditKind::kInteger};
constexpr AuditType kNum{AuditKind::kNumber};
constexpr AuditType kBool{AuditKind::kBoolean};
constexpr AuditType kObj{AuditKind::kObject};  // an open object: its keys are data
constexpr AuditType kAnyValue{AuditKind::kAny};
constexpr AuditType kStrOrNull{AuditKind::kString, AuditKind::kUnset, true};
constexpr AuditType kIntOrNull{AuditKind::kInteger, AuditKind::kUnset, true};
constexpr AuditType kStrs{AuditKind::kArray, AuditKind::kString};
constexpr AuditType kInts{AuditKind::kArray, AuditKind::kInteger};
constexpr AuditType ObjectOf(const AuditShape& shape) {
  return {AuditKind::kObject, AuditKind::kUnset, false, &shape};
}
constexpr AuditType ArrayOf(const AuditShape& shape) {
  return {AuditKind::kArray, AuditKind::kObject, false, &shape};
}

// The nested shapes the docs define; their fields are closed like a record's.
constexpr AuditFieldInfo kGitFields[] = {
    {"head", true, kStr, "commit id"},
    {"branch", true, kStrOrNull, "branch name; null when detached"},
};
constexpr AuditShape kGitShape{"git_head", kGitFields};

constexpr AuditFieldInfo kPolicyEnvFields[] = {
    {"pass", true, kStrs, "names passed from the caller"},
    {"deny", true, kStrs, "names never passed"},
    {"set", true, kStrs, "names the policy sets"},
};
constexpr AuditShape kPolicyEnvShape{"policy_env", kPolicyEnvFields};

constexpr AuditFieldInfo kPolicyFileFields[] = {
    {"path", true, kStr, "the layer's file"},
    {"sha256", true, kStr, "its hash"},
    {"layer", true, kStr, "built-in, system, user, project, extra, ..."},
};
constexpr AuditShape kPolicyFileShape{"policy_file", kPolicyFileFields};

constexpr AuditFieldInfo kLaunchFields[] = {
    {"kind", true, kStr, "warm or cold"},
    {"sandbox", false, kStr, "warm: the sandbox's id"},
    {"call", false, kInt, "warm: the call's number in that sandbox"},
    {"reason", false, kStr, "cold: why no warm sandbox served it"},
};
constexpr AuditShape kLaunchShape{"launch", kLaunchFields};

constexpr AuditFieldInfo kErrorFields[] = {
    {"code", true, kStr, "error code (docs/errors.md)"},
    {"message", true, kStr, "error message"},
};
constexpr AuditShape kErrorShape{"error", kErrorFields};

constexpr AuditFieldInfo kLimitFields[] = {
    {"name", true, kStr, "timeout, cpu, file_size, memory or pids"},
    {"value", true, kNum, "the limit"},
    {"unit", true, kStr, "its unit"},
    {"policy_key", true, kStr, "the policy key that set it"},
    {"enforcer", true, kStr, "what enforced it"},
    {"evidence", true, kStr, "what showed it was hit"},
};
constexpr AuditShape kLimitShape{"limit", kLimitFields};

constexpr AuditFieldInfo kTimeoutFields[] = {
    {"requested", true, kNum, "the timeout the call asked for"},
    {"applied", true, kNum, "the timeout applied"},
    {"capped", true, kBool, "whether the policy cut it"},
    {"capped_by", false, kStr, "the policy key that cut it"},
    {"decided_by", false, kStr, "that key's file:line"},
};
constexpr AuditShape kTimeoutShape{"timeout", kTimeoutFields};

constexpr AuditFieldInfo kChangeFields[] = {
    {"kind", true, kStr, "created, modified, touched, deleted, renamed, mode_changed, ..."},
    {"path", true, kStr, "the path (workspace-relative, or absolute outside it)"},
    {"type", true, kStr, "file, dir, symlink or other"},
    {"from", false, kStr, "renamed: the old path"},
    {"bytes_before", false, kInt, "size before"},
    {"bytes_after", false, kInt, "size after"},
    {"mode_before", false, kStr, "mode before, octal"},
    {"mode_after", false, kStr, "mode after, octal"},
    {"below", false, kInt, "entries below a created or deleted directory"},
    {"content_changed", false, kBool, "renamed file: whether its content changed too"},
    {"before_unknown", false, kBool, "the before state was not recorded"},
    {"sha256_before", false, kStr, "hash before"},
    {"sha256_after", false, kStr, "hash after"},
    {"hash_skipped", false, kStr, "why a hash was not taken (too large, changing, ...)"},
    {"path_escaped", false, kBool, "the path's bytes were escaped"},
    {"before_image", false, kStr,
     "[audit] before_images: stored, over_file_cap, over_session_cap or failed"},
    {"before_image_error", false, kStr, "why the before-image was not stored (failed)"},
    {"approval", false, kStr,
     "a change held for approval and installed on its answer: the approval record's id"},
};
constexpr AuditShape kChangeShape{"change", kChangeFields};

constexpr AuditFieldInfo kGitContentFields[] = {
    {"ref", true, kStr, "the ref it moves (refs/heads/NAME, packed-refs, HEAD), or index"},
    {"commit", false, kStr, "the commit (reachable from the ref, from no host ref) that adds it"},
    {"path", false, kStr, "the path the tree rules refuse (root-relative)"},
    {"rule", false, kStr, "protected_path, repo_executes, git_dir_in_tree or bare_repository"},
    {"error", false, kStr, "why the check could not complete (the entry was refused: fail closed)"},
};
constexpr AuditShape kGitContentShape{"git_content", kGitContentFields};

constexpr AuditFieldInfo kRefusedFields[] = {
    {"reason", true, kStr, "the rule that kept it out of the tree"},
    {"type", true, kStr, "file, dir, symlink or other"},
    {"path", true, kStr, "workspace-relative path"},
    {"quarantine", true, kStr, "where it went"},
    {"path_escaped", false, kBool, "the path's bytes were escaped"},
    {"git", false, ArrayOf(kGitContentShape),
     "reason git_content: what the index or ref would have landed"},
    {"approval", false, kStr,
     "reason approval_denied (or a conflict found when approved): the approval record's id"},
};
constexpr AuditShape kRefusedShape{"refused_change", kRefusedFields};

constexpr AuditFieldInfo kChangesFields[] = {
    {"entries", true, ArrayOf(kChangeShape), "the changes listed"},
    {"counts", true, kObj, "{kind: n} of every change, listed or not"},
    {"omitted", true, kInt, "changes beyond the ones listed"},
    {"concurrent", true, kBool, "another process ran in the same window"},
    {"git", false, kObj, "{kind: n} of changes inside .git"},
    {"unwalked", false, kStrs, "roots the sweep could not walk"},
    {"workspace_mode", false, kStr, "direct or staged"},
    {"commit_ms", false, kNum, "staged: time the commit took"},
    {"refused", false, ArrayOf(kRefusedShape), "staged: changes the commit refused"},
    {"refused_omitted", false, kInt, "refusals beyond the ones listed"},
    {"conflicts", false, kStrs, "staged: paths changed on the host meanwhile"},
    {"conflicts_omitted", false, kInt, "conflicts beyond the ones listed"},
};
constexpr AuditShape kChangesShape{"changes", kChangesFields};

constexpr AuditFieldInfo kInstructionFileFields[] = {
    {"path", true, kStr, "the file"},
    {"sha256", true, kStr, "its hash"},
    {"bytes", true, kInt, "its size"},
    {"truncated", true, kBool, "whether the budget cut it"},
};
constexpr AuditShape kInstructionFileShape{"instruction_file", kInstructionFileFields};

constexpr AuditFieldInfo kLogLinkFields[] = {
    {"log_id", true, kStr, "the older file's id"},
    {"lines", true, kInt, "its lines at the link"},
    {"bytes", true, kInt, "its size at the link"},
    {"head", true, kStr, "its chain head at the link"},
    {"path", false, kStr, "audit rotate: where the older file went"},
    {"reason", false, kStr, "deleted, moved, replaced or truncated"},
    {"ino", false, kInt, "the older file's inode number"},
};
constexpr AuditShape kLogLinkShape{"log_link", kLogLinkFields};

constexpr AuditFieldInfo kDenialFields[] = {
    {"blockers", true, kStr, "Landlock's access rights, e.g. fs.make_reg"},
    {"count", true, kInt, "how many times"},
    {"path", false, kStr, "fs.*: the path as the sandbox names it"},
    {"address", false, kStr, "net.*: host:port"},
    {"object", false, kStr, "other fields"},
};
constexpr AuditShape kDenialShape{"denial", kDenialFields};

constexpr AuditFieldInfo kIoFields[] = {
    {"read_bytes", true, kInt, "bytes it caused to be fetched from storage"},
    {"write_bytes", true, kInt, "bytes it caused to be sent to storage (page cache dirtied)"},
    {"rchar", true, kInt, "bytes read(2)-like calls returned, from files, pipes and sockets"},
    {"wchar", true, kInt, "bytes write(2)-like calls were given, to files, pipes and sockets"},
};
constexpr AuditShape kIoShape{"io", kIoFields};

constexpr const AuditShape* kShapes[] = {
    &kGitShape,    &kPolicyEnvShape, &kPolicyFileShape,      &kLaunchShape,
    &kErrorShape,  &kLimitShape,     &kTimeoutShape,         &kChangesShape,
    &kChangeShape, &kRefusedShape,   &kInstructionFileShape, &kLogLinkShape,
    &kDenialShape, &kIoShape,        &kGitContentShape,
};

// `show` numbers give `audit show`'s column order; a name keeps one number across types.
constexpr AuditFieldInfo kCommon[] = {
    {"v", true, kInt, "record format version, 1"},
    {"seq", true, kInt, "1-based position of the record in its session"},
    {"ts", true, kStr, "UTC time of writing, RFC 3339 with milliseconds"},
    {"session", true, kStr, "session id (UUID v4)"},
    {"type", true, kStr, "record type (this table)"},
    {"prev", true, kStr, "SHA-256 (or HMAC-SHA-256) of the previous line; 64 zeros for the first"},
    {"redactions", false, kInt, "number of secrets replaced in this record's fields", 14},
};

constexpr AuditFieldInfo kSessionStarted[] = {
    {"cordon_version", true, kStr, "cordon's version"},
    {"client", true, kStr, "who drives the session: cli, mcp, ..."},
    {"workspace", true, kStr, "the workspace root", 13},
    {"chain", true, kStr, "sha256 or hmac-sha256"},
    {"policy_sha256", true, kStr, "hash of the merged policy"},
    {"policy_files", true, ArrayOf(kPolicyFileShape), "policy layers: [{path, sha256, layer}]"},
    {"policy_notes", true, kStrs, "notes the policy loader made"},
    {"scopes", true, kStrs, "granted scopes"},
    {"confinement", true, kObj, "what the kernel offers (Landlock ABI, seccomp, user namespaces)"},
    {"sandbox", true, kObj, "the sandbox host, or {available: false, error}"},
    {"git", false, ObjectOf(kGitShape),
     "{head, branch} of the workspace's git repository; absent when not a repo"},
    {"env", false, ObjectOf(kPolicyEnvShape),
     "policy [env]: {pass, deny, set}: the variable names it passes, denies and sets (never "
     "values); absent when the section is empty"},
    {"git_identity", false, kObj,
     "the git identity confined processes get as GIT_AUTHOR_* and GIT_COMMITTER_*: {source: "
     "\"git config --global\" or \"none\", name, email, error (why git could not be asked), "
     "policy_env (the variables policy [env] sets or denies instead)}"},
    {"redaction", false, kObj,
     "{rules: the redaction rules loaded, secret_files: the workspace scan (files, lines, "
     "entries, read_files, read_bytes, cached_files, truncated, ms, paths), credential_stores: "
     "the user's credential stores read by value (stores: [{path, state, files, values, "
     "skipped}], values, ms; never a value), knowledge: the session's redaction knowledge, "
     "hashes only, that audit diff redacts with (sha256, hashes, rules_sha256; or error), "
     "arguments: \"redacted\" or \"hashed\" ([audit] arguments)}"},
    {"tags", false, kStrs,
     "the session's tags (--tag on serve, exec, call): trimmed, one line, at most 64 "
     "characters each"},
};

constexpr AuditFieldInfo kToolStarted[] = {
    {"call", false, kInt, "call number in the session (cordon wrap's forwarded calls too)"},
    {"tool", true, kStr, "tool name; mcp__{server}__{tool} for an MCP server's tool", 1},
    {"scope", false, kStr, "scope the tool needs", 6},
    {"effect", false, kStr, "none, file_write or process"},
    {"args", false, kAnyValue,
     "the input, with file contents replaced by {bytes, sha256}; with [audit] arguments = "
     "\"hashed\", every string replaced by {sha256, bytes, shape}"},
    {"input_bytes", false, kInt, "size of an input that was not valid JSON"},
    {"unvalidated", false, kStr,
     "present when the input was passed on unchecked: the tool's schema uses what cordon's "
     "validator does not support (the reason)"},
    {"server", false, kStr, "MCP server (configured name, or \"wrapped\")"},
    {"args_bytes", false, kInt, "size of the arguments (cordon wrap)"},
    {"args_sha256", false, kStr, "hash of the arguments (cordon wrap)"},
    {"method", false, kStr,
     "cordon wrap: resources/read (tool is the URI) or prompts/get (tool is the prompt name); "
     "absent for tools/call"},
    {"mcp_session", false, kStr,
     "serve --http: the MCP session that made the call (\"mcp-N\", as in its mcp_client "
     "record); it owns the jobs the call starts. Absent for stdio, exec and call"},
};

constexpr AuditFieldInfo kToolFinished[] = {
    {"call", false, kInt, "call number in the session"},
    {"tool", true, kStr, "tool name", 1},
    {"status", true, kStr, "ok, error or cancelled", 2},
    {"code", false, kStr, "error code (docs/errors.md)", 3},
    {"message", false, kStr, "error message, redacted"},
    {"output_bytes", false, kInt, "size of the result sent to the agent", 9},
    {"truncated", false, kBool, "whether the output cap cut the result", 10},
    {"elapsed_ms", true, kNum, "wall time of the call", 8},
    {"server", false, kStr, "MCP server"},
    {"server_tool", false, kStr, "the tool's own name on its server"},
    {"output_redactions", false, kInt, "secrets replaced in the result"},
    {"output_redactions_by_rule", false, kObj, "{rule id: count} of output_redactions"},
    {"reason", false, kStr, "why the client cancelled (cordon wrap)", 7},
    {"method", false, kStr, "cordon wrap: as in tool_started"},
    {"changes", false, ObjectOf(kChangesShape),
     "staged mode: what MCP servers (the wrapped server, a configured one) committed to the host "
     "since the previous call's boundary, in the shape of process.changes; the server's process "
     "record repeats it in its total, and `audit diff` and session_diff count it once, under "
     "this call"},
};

constexpr AuditFieldInfo kPolicyDenied[] = {
    {"call", true, kInt, "call number"},
    {"tool", true, kStr, "tool name", 1},
    {"scope", true, kStr, "scope the policy does not grant", 6},
    {"rule", true, kStr, "the policy key that decided"},
    {"decided_by", false, kStr, "the policy file that set it, or built-in default"},
};

constexpr AuditFieldInfo kFileWrite[] = {
    {"call", true, kInt, "call number"},
    {"tool", true, kStr, "tool name", 1},
    {"op", true, kStr, "create, replace, edit, ...", 4},
    {"path", true, kStr, "workspace-relative path", 5},
    {"sha256_before", true, kStrOrNull, "hash of the old content; null for a new file"},
    {"bytes_before", true, kInt, "size of the old content", 11},
    {"sha256_after", false, kStr, "hash of the new content (when written)"},
    {"bytes_after", false, kInt, "size of the new content (when written)", 12},
    {"status", true, kStr, "written or failed", 2},
    {"code", false, kStr, "error code when failed", 3},
    {"before_image", false, kStr,
     "[audit] before_images: stored, over_file_cap, over_session_cap or failed (the old "
     "content in the store; absent when off or for a new file)"},
    {"before_image_error", false, kStr, "why the before-image was not stored (failed)"},
};

constexpr AuditFieldInfo kProcess[] = {
    {"argv", true, AuditType{AuditKind::kArray, AuditKind::kAny},
     "the command: strings, or with [audit] arguments = \"hashed\" a {sha256, bytes, shape} "
     "object per argument"},
    {"cwd", true, kStr, "its working directory"},
    {"kind", true, kStr, "run_command, job, mcp_server, exec, ..."},
    {"tool", true, kStr, "the tool that ran it", 1},
    {"status", true, kStr, "exited, signaled, timeout, cancelled or failed", 2},
    {"exit_code", true, kIntOrNull, "exit code, or null"},
    {"signal", true, kIntOrNull, "signal number, or null"},
    {"elapsed_ms", true, kNum, "wall time", 8},
    {"cpu_ms", true, kNum, "CPU time"},
    {"max_rss_kb", true, kInt, "peak resident memory"},
    {"confinement", true, kObj, "the layers that confined it"},
    {"cgroup", false, kObj, "cgroup limits and usage"},
    {"call", false, kInt,
     "the call that started it (run_shell, foreground or background; as in tool_started)"},
    {"io", false, ObjectOf(kIoShape),
     "bytes the command read and wrote (/proc/<pid>/io of the shim after it reaped the "
     "command): {read_bytes, write_bytes, rchar, wchar}; the command and every process of its "
     "tree reaped by the command or its descendants, not an orphan the sandbox's init reaped "
     "after its parent ended; absent when the kernel has no I/O accounting"},
    {"job", false, kStr, "background job id (counted per MCP session under serve --http)"},
    {"mcp_session", false, kStr,
     "serve --http: the MCP session that started it (as in tool_started)"},
    {"cancel_requested", false, kBool, "whether the job was cancelled (background jobs)"},
    {"spec_sha256", false, kStr,
     "SHA-256 of the confinement spec the shim applied, as the shim computed it (equals "
     "`cordon exec --plan`'s `spec_sha256`)"},
    {"launch", false, ObjectOf(kLaunchShape),
     "how it was started (docs/adr/0008-warm-sandbox.md): {kind: \"warm\", sandbox, call (its "
     "number in that sandbox)} or {kind: \"cold\", reason}"},
    {"error", false, ObjectOf(kErrorShape), "sandbox failure: {code, message}"},
    {"limit", false, ObjectOf(kLimitShape),
     "the limit that ended it: {name (timeout, cpu, file_size, memory, pids), value, unit, "
     "policy_key, enforcer, evidence}"},
    {"timeout", false, ObjectOf(kTimeoutShape),
     "the timeout the call asked for: {requested, applied, capped, capped_by (the policy key), "
     "decided_by (its file:line)}"},
    {"stdout_bytes", true, kInt, "bytes written to stdout"},
    {"stderr_bytes", true, kInt, "bytes written to stderr"},
    {"truncated", true, kBool, "whether captured output was cut", 10},
    // --- changes: issue 10
    {"changes", false, ObjectOf(kChangesShape),
     "what it changed in the writable roots (absent when none was writable, or "
     "audit.file_changes is off): {entries: [{kind, path, type, from, bytes_before, "
     "bytes_after, mode_before, mode_after, below, content_changed, sha256_before, "
     "sha256_after, hash_skipped, before_unknown}], counts: {kind: n}, omitted, concurrent, "
     "git, unwalked, workspace_mode (direct: the sandbox wrote the workspace itself)}; paths "
     "keep their bytes (invalid UTF-8 as `\\xHH`, a backslash as `\\\\`)"},
    {"stop_signal", false, kInt,
     "the signal (SIGINT 2, SIGTERM 15, SIGHUP 1) cordon received that made it end the process"},
    {"env", false, kStrs,
     "names (never values) of the variables it got beyond the fixed sandbox ones (PATH, HOME, "
     "TMPDIR, CORDON_*): passed from the caller, set by policy, --env or the server's config"},
};

constexpr AuditFieldInfo kMcpDiagnostic[] = {
    {"server", true, kStr, "MCP server"},
    {"reason", true, kStr, "what happened", 7},
    {"source", false, kStr, "the config file"},
    {"message", false, kStr, "error message"},
    {"stderr", false, kStr, "tail of the server's stderr"},
    {"method", false, kStr, "the JSON-RPC method concerned"},
    {"protocolVersion", false, kStr, "the version the server offered"},
    {"bytes", false, kInt, "size of a dropped message"},
    {"messages", false, kInt, "messages received on a GET stream"},
    {"http_status", false, kInt, "HTTP status"},
    {"curl", false, kStr, "libcurl's error"},
    {"body", false, kStr, "start of an HTTP error body"},
    {"tools", false, kStrs, "names of tools hidden because they changed"},
};

constexpr AuditFieldInfo kMcpTrust[] = {
    {"server", true, kStr, "MCP server"},
    {"source", true, kStr, "the config file"},
    {"definition_sha256", true, kStr, "hash of the server's definition"},
    {"tools", true, kInt, "number of tools pinned"},
};

constexpr AuditFieldInfo kMcpClient[] = {
    {"clientInfo", true, kObj, "the MCP client's clientInfo"},
    {"protocolVersion", true, kStr, "the negotiated protocol version"},
    {"mcp_session", false, kStr,
     "serve --http: this MCP session's label (\"mcp-N\"), which its tool_started records carry"},
};

constexpr AuditFieldInfo kInstructions[] = {
    {"files", true, ArrayOf(kInstructionFileShape),
     "[{path, sha256, bytes, truncated}] of AGENTS.md and its includes"},
    {"bytes", true, kInt, "size of the instructions sent"},
    {"truncated", true, kBool, "whether the budget cut them", 10},
    {"path", false, kStr, "the file, when there is one", 5},
    {"sha256", false, kStr, "its hash, when there is one file"},
};

constexpr AuditFieldInfo kSessionFinished[] = {
    {"calls", true, kInt, "tool calls in the session"},
    {"errors", true, kInt, "calls that ended in an error"},
    {"git", false, ObjectOf(kGitShape),
     "{head, branch} of the workspace's git repository at the end"},
    {"knowledge", false, kObj,
     "the redaction knowledge at the end, when the session learned secret lines after "
     "session_started (what the agent wrote through the file tools): {sha256, hashes, "
     "rules_sha256} or {error}; audit diff loads it with session_started's"},
};

constexpr AuditFieldInfo kLogRecovered[] = {
    {"torn_bytes", true, kInt, "size of the torn line before this record"},
};

constexpr AuditFieldInfo kProtectedPathRemoved[] = {
    {"path", true, kStr, "where the protected name was (absolute)", 5},
    {"kind", true, kStr, "dir, file, symlink or other"},
    {"quarantine", true, kStr, "where cordon moved it: <state>/quarantine/<session>/..."},
    {"when", true, kStr,
     "process_end, call_boundary or launch: which sweep found it; commit: a staged commit "
     "refused it (a recovery's refusals are in its `recovery` record)"},
    {"error", false, kStr, "why it could not be moved (it is still there)"},
    {"reason", false, kStr,
     "the rule that kept it out of the tree: staged mode (protected_path, git_metadata, "
     "new_git_dir, repo_executes, special_file, setid_bits, masked_path, below_refused, "
     "not_a_directory, conflict, git_content); direct mode, git_content only (a git view's "
     "index, HEAD, packed-refs or ref)"},
    {"git", false, ArrayOf(kGitContentShape),
     "reason git_content: what the index or ref would have landed (at most 20 per entry; "
     "docs/adr/0014-git-content-at-the-commit.md)"},
};

constexpr AuditFieldInfo kSetuidStripped[] = {
    {"path", true, kStr, "the file (absolute)", 5},
    {"mode_before", true, kStr, "its mode before, octal"},
    {"mode_after", true, kStr, "its mode after, octal"},
    {"when", true, kStr, "process_end, call_boundary or launch: which sweep found it"},
    {"error", false, kStr, "why the bits could not be cleared"},
};

// --- failclosed: gap, log_detached
constexpr AuditFieldInfo kGap[] = {
    {"lost", true, kInt, "records that could not be written after their act had happened", 5},
    {"types", true, kStrs, "their types, in order, without repeats"},
    {"calls", true, kInts, "the tool calls they belonged to"},
    {"errno", true, kInt, "errno of the failed write", 6},
    {"error", true, kStr, "the failure, as text"},
};

constexpr AuditFieldInfo kLogDetached[] = {
    {"reason", true, kStr,
     "deleted, moved, replaced or truncated (cut in place): what happened to the file at the path",
     5},
    {"path", true, kStr, "the log's path"},
    {"previous_head", true, kStr, "chain hash of this writer's last line in the old file"},
    {"previous_size", true, kInt,
     "where this writer's part of the old file ended (for truncated: what it had written)"},
    {"previous_ino", true, kInt, "the old file's inode number"},
    {"where", true, kStr,
     "old_file (closing the old file) or new_file (the link: the writer continues here)", 6},
    {"previous", false, ObjectOf(kLogLinkShape),
     "new_file: the link audit verify follows: {log_id, lines, bytes, head, reason, ino} of the "
     "old file's end"},
};

// --- checkpoint ---
constexpr AuditFieldInfo kLogStarted[] = {
    {"log_id", true, kStr, "the file's id: 128 random bits, hex"},
    {"chain", true, kStr, "sha256 or hmac-sha256: the chain mode of every line of the file"},
    {"key_id", false, kStr,
     "id of the checkpoint signing key (16 hex of SHA-256 of the public key)"},
    {"previous", false, ObjectOf(kLogLinkShape),
     "the file this one continues: {log_id, lines, bytes, head, path} after `cordon audit "
     "rotate`; {log_id, lines, bytes, head, reason, ino} when a writer found its log deleted, "
     "moved, replaced or truncated and started this file"},
};

constexpr AuditFieldInfo kCheckpoint[] = {
    {"log_id", true, kStr, "the log_started id of this file (empty when the file has none)"},
    {"lines", true, kInt, "whole lines in the file before this record"},
    {"bytes", true, kInt, "byte offset of this record"},
    {"head", true, kStr, "chain hash of the line before this record (equals this record's prev)"},
    {"key_id", false, kStr,
     "the signing key's id; absent for an unsigned (witness-only) checkpoint"},
    {"sig", false, kStr, "Ed25519 signature (hex) of the signed text (docs/audit.md)"},
};

// --- denials
constexpr AuditFieldInfo kAccessDenied[] = {
    {"tool", true, kStr, "the tool that ran the process (as in its `process` record)", 1},
    {"kind", true, kStr, "the process's kind (as in its `process` record)"},
    {"job", false, kStr, "background job id"},
    {"layer", true, kStr, "the kernel layer that refused: landlock"},
    {"denials", true, ArrayOf(kDenialShape),
     "up to 32 distinct refusals: [{blockers (Landlock's access rights, e.g. fs.make_reg), path "
     "(fs.*; as the sandbox names it), address (net.*, host:port) or object (other fields), "
     "count}]"},
    {"total", true, kInt,
     "denials in all: the kernel's own count (the domain's deallocated record) when it arrived, "
     "else the records cordon received"},
    {"omitted", true, kInt, "denials in entries beyond the 32 listed"},
    {"complete", true, kBool,
     "false when some denials may be missing (incomplete_reason says why)"},
    {"incomplete_reason", false, kStr, "why the list may be missing denials"},
};

constexpr AuditFieldInfo kSessionTag[] = {
    {"call", true, kInt, "the session_tag call"},
    {"tag", true, kStr, "the tag (trimmed, one line, at most 64 characters)"},
    {"tagged", true, kBool, "true: added; false: removed"},
    {"tags", true, kStrs, "the caller's tags after the change (--tag ones included)"},
    {"mcp_session", false, kStr, "serve --http: the MCP session whose tags these are"},
};

constexpr AuditFieldInfo kLocalServerStopped[] = {
    {"call", true, kInt, "the stop_local_server call"},
    {"job", true, kStr, "the job whose sandbox the listener was in"},
    {"pid", true, kInt, "the listener's host pid"},
    {"port", true, kInt, "the port it listened on"},
    {"comm", true, kStr, "the name the process gave itself: untrusted, redacted"},
    {"pgid", false, kInt,
     "the process group signalled (through its leader's pidfd); absent: the listener alone, its "
     "group's leader having left or ended"},
    {"group_by_number", true, kBool,
     "the group was signalled by kill(-pgid): the kernel has no PIDFD_SIGNAL_PROCESS_GROUP"},
    {"signals", true, kStrs, "what was sent: SIGTERM, then SIGKILL when the grace ran out"},
    {"stopped", true, kBool, "the listener exited"},
    {"elapsed_ms", true, kNum, "from the first signal's checks to the listener's end"},
    {"mcp_session", false, kStr, "serve --http: the MCP session that asked"},
};

constexpr AuditFieldInfo kRecovery[] = {
    {"stage", true, kStr, "the stage directory a killed cordon left (<state>/stage/PID-RANDOM/N)"},
    {"outcome", true, kStr,
     "finished (committed by the rules the stage carries), quarantined (whole: nothing of it "
     "reached the tree), kept (its commit could not complete; the next start tries again), held "
     "(changes an approval rule held wait for an answer in the held store: `cordon approvals`; "
     "none is in the tree) or expired (held past approvals.held_days: moved to the quarantine)",
     21},
    {"held", false, kStr, "held: its id in the held store (`cordon approvals show ID`)"},
    {"reason", false, kStr,
     "quarantined: never_committed (it was killed before its commit), recovery_died (a recovery "
     "of it crashed) or rules_unreadable (its rules file is missing or torn: an older cordon's)",
     7},
    {"rules_error", false, kStr, "why the stage's rules file could not be read"},
    {"stage_session", false, kStr, "the session that staged it (from its rules file)"},
    {"stage_log", false, kStr, "that session's audit log"},
    {"stage_policy_sha256", false, kStr, "that session's policy hash (its session_started's)"},
    {"recovered_by", true, kStr, "the session that recovered it"},
    {"roots", true, kStrs, "the staged roots, the workspace first"},
    {"quarantine", false, kStr,
     "quarantined: where the whole stage went; else the directory of its refused entries"},
    {"changes", false, ObjectOf(kChangesShape),
     "finished or kept: what was installed (entries), refused (with the rule) and kept for the "
     "host (conflicts), as a process record's"},
    {"left", true, kStrs,
     "paths neither installed nor refused one by one (a quarantined stage's entries, a kept "
     "stage's not-done paths): none is in the tree"},
    {"left_omitted", true, kInt, "paths of `left` beyond the ones listed"},
    {"left_escaped", false, kBool, "a path of `left` had its bytes escaped"},
    {"error", false, kStr, "the stage could not be moved, or its commit failed", 19},
    {"stage_log_error", false, kStr,
     "written to the recovering session's log: why the stage's log could not take it"},
    {"copy", false, kStr, "written to the recovering session's log: the record's JSON copy"},
};

constexpr AuditFieldInfo kNetwork[] = {
    {"identity", true, kStr, "whose sandbox: tool NAME, server NAME, read_url, job ID (a probe)",
     15},
    {"protocol", true, kStr,
     "connect (HTTP CONNECT), http (one plain HTTP request), socks5, probe (local_servers' GET "
     "of a loopback URL inside a job's network namespace)"},
    {"method", false, kStr, "plain HTTP: the request method"},
    {"host", true, kStr, "the name (or address) the client asked for, normalised", 17},
    {"port", true, kInt, "the port it asked for", 18},
    {"address", false, kStr, "the address connected to (after the proxy resolved and checked it)"},
    {"decision", true, kStr, "allowed or denied (a probe: allowed)", 16},
    {"rule", false, kStr, "the allow or deny rule that decided"},
    {"rule_source", false, kStr,
     "where that rule came from (file:line, --allow-domain, preset NAME)"},
    {"reason", false, kStr, "why it was refused: the one line the client was told", 7},
    {"error", false, kStr, "allowed, but the upstream failed (resolution, connect, timeout)", 19},
    {"bytes_up", true, kInt, "bytes from the client to the upstream (after the request head)"},
    {"bytes_down", true, kInt, "bytes from the upstream to the client", 20},
    {"duration_ms", true, kNum, "from accept to close"},
    {"http_status", false, kInt, "plain HTTP: the upstream's status; a refusal: 403"},
};

constexpr AuditFieldInfo kApproval[] = {
    {"id", true, kStr, "the approval's id in the session (ap-N)", 9},
    {"call", true, kInt, "the call that caused the question"},
    {"tool", true, kStr, "tool name", 1},
    {"kind", true, kStr,
     "what was asked about: call (a tool rule), launch (an argv rule), write (a path rule)", 2},
    {"subject", true, kStr, "what the rule matched, on one line, redacted", 5},
    {"argv", false, kStrs, "launch: the command's argv, redacted"},
    {"paths", false, kStrs, "write: the workspace-relative paths"},
    {"operation", false, kStr, "write: create, edit or replace"},
    {"rule", true, kStr, "the [[approvals.rules]] id that asked", 3},
    {"rule_source", true, kStr, "where that rule is: file:line"},
    {"asked_via", true, kStr,
     "elicitation (the MCP client), terminal, command (cordon approvals), none (no one could be "
     "asked), kept (an earlier `session` answer held)",
     6},
    {"answer", true, kStr, "once, session, deny, declined, cancelled, timeout or no_client", 4},
    {"client", false, kStr, "who answered, as it named itself (self-declared)"},
    {"why_no_one", false, kStr, "no_client: why no one could be asked", 7},
    {"kept_from", false, kStr, "kept: the id of the approval whose `session` answer held"},
    {"mcp_session", false, kStr, "serve --http: the MCP session that made the call"},
    {"wait_ms", true, kInt, "how long the question waited for its answer", 8},
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
    // --- supervision (issue 23)
    {SessionTagRecord::kType, "session_tag added or removed a tag", kSessionTag},
    {LocalServerStoppedRecord::kType,
     "stop_local_server signalled a listener a job started (written after the signals)",
     kLocalServerStopped},
    // --- recovery (issue 33)
    {RecoveryRecord::kType,
     "a start of cordon finished or quarantined a stage a killed cordon left, by that stage's own "
     "rules",
     kRecovery},
    // --- approvals (issue 34)
    {ApprovalRecord::kType,
     "an approval rule asked about a call, a launch or a write, and how it was answered; written "
     "before what it allowed",
     kApproval},
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

std::span<const AuditShape* const> AuditShapes() { return kShapes; }

namespace {

std::string_view KindName(AuditKind kind) {
  switch (kind) {
    case AuditKind::kString:
      return "string";
    case AuditKind::kInteger:
      return "integer";
    case AuditKind::kNumber:
      return "number";
    case AuditKind::kBoolean:
      return "boolean";
    case AuditKind::kObject:
      return "object";
    case AuditKind::kArray:
      return "array";
    case AuditKind::kAny:
      return "any";
    case AuditKind::kUnset:
      break;
  }
  return "(no type)";
}

}  // namespace

std::string AuditTypeName(const AuditType& type) {
  std::string out;
  if (type.kind == AuditKind::kArray) {
    out = "array of " + std::string(KindName(type.items));
  } else {
    out = std::string(KindName(type.kind));
  }
  if (type.shape != nullptr) out += " (" + std::string(type.shape->name) + ")";
  if (type.nullable) out += " or null";
  return out;
}

std::string AuditRecordTableMarkdown() {
  std::string out = "| record | field | type | required | meaning |\n|---|---|---|---|---|\n";
  auto rows = [&](std::string_view type, std::string_view about,
                  std::span<const AuditFieldInfo> fields) {
    out += "| **" + std::string(type) + "** | | | | " + std::string(about) + " |\n";
    for (const auto& f : fields) {
      out += "| | `" + std::string(f.name) + "` | " + AuditTypeName(f.type) + " | " +
             (f.required ? "yes" : "no") + " | " + std::string(f.about) + " |\n";
    }
  };
  rows("(every record)", "fields ahead of the record's own", kCommon);
  for (const auto& info : kCatalog) rows(info.type, info.about, info.fields);
  out += "\n| shape | field | type | required | meaning |\n|---|---|---|---|---|\n";
  for (const AuditShape* shape : kShapes) {
    out += "| *" + std::string(shape->name) + "* | | | | |\n";
    for (const auto& f : shape->fields) {
      out += "| | `" + std::string(f.name) + "` | " + AuditTypeName(f.type) + " | " +
             (f.required ? "yes" : "no") + " | " + std::string(f.about) + " |\n";
    }
  }
  return out;
}

namespace {

Json KindSchema(AuditKind kind, const AuditShape* shape) {
  if (shape != nullptr && kind == AuditKind::kObject) {
    return {{"$ref", "#/$defs/" + std::string(shape->name)}};
  }
  if (kind == AuditKind::kAny) return Json::object();
  return {{"type", KindName(kind)}};
}

Json FieldSchema(const AuditFieldInfo& f) {
  const AuditType& t = f.type;
  Json j;
  if (t.kind == AuditKind::kArray) {
    j = {{"type", "array"}, {"items", KindSchema(t.items, t.shape)}};
  } else {
    j = KindSchema(t.kind, t.shape);
  }
  if (t.nullable) {
    if (j.contains("type")) {
      j["type"] = Json::array({j["type"], "null"});
    } else {
      j = {{"anyOf", Json::array({j, {{"type", "null"}}})}};
    }
  }
  j["description"] = f.about;
  return j;
}

Json ObjectSchema(std::span<const AuditFieldInfo> fields, Json properties = Json::object(),
                  Json required = Json::array()) {
  for (const auto& f : fields) {
    properties[std::string(f.name)] = FieldSchema(f);
    if (f.required) required.push_back(f.name);
  }
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}

}  // namespace

Json AuditRecordSchema() {
  Json defs = Json::object(), one_of = Json::array();
  for (const auto& info : kCatalog) {
    Json common = Json::object(), required = Json::array();
    for (const auto& f : kCommon) {
      common[std::string(f.name)] = FieldSchema(f);
      if (f.required) required.push_back(f.name);
    }
    common["v"]["const"] = 1;
    common["type"]["const"] = info.type;
    Json def = ObjectSchema(info.fields, std::move(common), std::move(required));
    def["description"] = info.about;
    defs[std::string(info.type)] = std::move(def);
    one_of.push_back({{"$ref", "#/$defs/" + std::string(info.type)}});
  }
  for (const AuditShape* shape : kShapes)
    defs[std::string(shape->name)] = ObjectSchema(shape->fields);
  return {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
          {"title", "cordon audit record, format v 1"},
          {"description",
           "One line of a cordon audit log (JSONL). Generated from audit/records.cc by "
           "CORDON_UPDATE_DOCS=1 build/tests/audit_test; docs/audit.md says what each field "
           "means and what bumps v."},
          {"oneOf", std::move(one_of)},
          {"$defs", std::move(defs)}};
}

}  // namespace cordon
