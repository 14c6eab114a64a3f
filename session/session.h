// Session: one agent session's dispatch path (lookup, validate, policy, audit, execute, redact).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "audit/audit.h"
#include "core/fs.h"
#include "core/redact.h"
#include "policy/policy.h"
#include "runner/processes.h"
#include "tools/registry.h"

namespace cordon {

// Tools that come from outside the registry (configured MCP servers): mcp__{server}__{tool}.
class ExternalTools {
 public:
  virtual ~ExternalTools() = default;
  virtual bool Handles(std::string_view tool) = 0;
  // MCP-format entries of the visible (trusted, pinned) tools.
  virtual std::vector<Json> Catalog() = 0;
  // Returns the server's CallToolResult; *record gets {server, server_tool}.
  virtual Result<Json> Call(const std::string& tool, const Json& input, Json* record,
                            const std::atomic<bool>* cancel) = 0;
};

struct SessionOptions {
  std::string workspace = ".";
  std::string audit_log;  // empty: DefaultAuditLogPath
  std::optional<std::string> audit_key_file;
  std::vector<std::string> policy_files;  // --policy
  std::string shipped_policy_dir;         // the repo's / install's policies.d
  std::string client = "cli";             // who drives the session (cli, mcp, ...)
  std::string shim_path;                  // empty: next to the binary
};

// Caps a CallToolResult for the agent: text items cut at `cap` bytes with a marker, and a
// structuredContent over 4x the cap dropped. Returns whether anything was cut.
bool CapToolResult(Json& result, std::size_t cap);

class Session {
 public:
  static Result<std::unique_ptr<Session>> Start(const SessionOptions& options, char** envp);
  ~Session();

  // Runs one tool call; always returns a CallToolResult (errors are isError results).
  Json Call(const std::string& tool, const Json& input, const std::atomic<bool>* cancel = nullptr);
  // As Call, but parses the JSON text first (bounded: size, depth).
  Json CallJsonText(const std::string& tool, std::string_view input_text);

  // The tools whose scopes the policy grants.
  std::vector<const ToolSpec*> Catalog() const;

  const Policy& policy() const { return policy_; }
  const Workspace& workspace() const { return workspace_; }
  const std::string& audit_path() const { return audit_->path(); }
  const Redactor& redactor() const { return redactor_; }

  // Writes session_finished (also done by the destructor if not called).
  void Finish();
  ProcessHost& processes() { return *processes_; }
  void SetExternalTools(ExternalTools* external) { external_ = external; }
  // Adds a value (e.g. an MCP server's configured header) to redact from output and records.
  void AddRedaction(std::string rule, std::string value) {
    redactor_.AddValue(std::move(rule), std::move(value));
  }
  ExternalTools* external_tools() { return external_; }
  void Audit(std::string_view type, Json fields, bool durable);
  // Several records, written together in order.
  void AuditAll(std::span<AuditWriter::Record> records, bool durable);

 private:
  Session() = default;

  Policy policy_;
  Workspace workspace_;
  Redactor redactor_;
  std::optional<AuditWriter> audit_;
  std::mutex audit_mu_;
  std::unique_ptr<ProcessHost> processes_;
  ExternalTools* external_ = nullptr;
  Json CallExternal(const std::string& tool, const Json& input, std::uint64_t call_id,
                    const std::atomic<bool>* cancel);
  std::atomic<std::uint64_t> calls_{0};  // calls may run concurrently (cordon serve)
  std::atomic<std::uint64_t> errors_{0};
  bool finished_ = false;
};

}  // namespace cordon
