// What a tool is handed for one call (ToolContext), and what it may ask of the session that runs
// it (ToolServices): one interface instead of a callback per supervision tool. A new session
// service is one method here with the default a session without it gives, and one override in
// session/call.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/before_images.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/redact.h"
#include "core/unique_fd.h"
#include "policy/egress.h"
#include "policy/policy.h"

namespace cordon {

class ProcessHost;
struct ProcessRequest;
struct NetworkEvent;
struct ListenerStopOutcome;

// What a write did, for the session's file_write audit record (audit/records.h).
struct FileWriteReport {
  std::string op{};
  std::string path{};
  std::optional<std::string> sha256_before{};  // none for a new file
  std::uint64_t bytes_before = 0;
  std::optional<WriteOutcome> written{};  // none when the write failed
  std::optional<Code> code{};             // why it failed
  // [audit] before_images: what storing the old content did (none when off or a new file).
  std::optional<BeforeImageOutcome> before_image{};
};

// What one call used (session_usage): its tool, how it ended (empty while it runs), and the
// figures of the processes it started (foreground or background), each null while unknown.
struct CallUsage {
  std::string tool{};
  std::string status{};  // ok, error, cancelled; empty while the call runs
  std::string code{};    // the error code of a failed call
  std::optional<double> elapsed_ms{};
  int processes = 0;  // the processes it started that have ended
  std::optional<double> cpu_ms{};
  std::optional<std::int64_t> max_rss_kb{};
  // {read_bytes, write_bytes, rchar, wchar}: the sum over its processes; null when a process
  // had none (the kernel keeps no I/O counts, or the process failed to start).
  Json io{};
  bool io_unknown = false;
  std::string message{};                // a failure's message: redacted, cut to 500 bytes
  std::vector<std::string> warnings{};  // what went wrong short of failing the call
  void AddProcess(double cpu, std::int64_t rss_kb, const Json& process_io);
};
// session_usage's result from the caller's calls: by tool and status, per call, in total.
Json SessionUsageJson(const std::map<std::uint64_t, CallUsage>& calls);
// session_traces's: the 10 slowest finished calls, the failures and the warnings (the latest
// 50 of each, with how many more there were).
Json SessionTracesJson(const std::map<std::uint64_t, CallUsage>& calls);

// What a tool may ask of the session that runs it. Each method's default is what a session
// without that part gives (no processes, no proxy, no tags kept, no log to read): a unit test
// hands a tool `ToolServices{}`, or overrides the one method it needs. The session implements it
// per call (session/call.cc), so each method already knows the call's number and caller.
class ToolServices {
 public:
  virtual ~ToolServices() = default;
  // The session's confined processes. Null: none (tools that run processes refuse).
  virtual ProcessHost* Processes() { return nullptr; }
  // cordon serve's --network, --allow-domain, --env, --read, --write...: what every process
  // run_shell starts begins from (network, egress rules, extra env, grants). Null: nothing.
  virtual const ProcessRequest* ProcessTemplate() { return nullptr; }
  // [audit] before_images: where the write tools keep a file's old content. Null: off.
  virtual BeforeImageStore* BeforeImages() { return nullptr; }
  // Appends the call's durable file_write record (after its tool_started).
  virtual void RecordFileWrite(const FileWriteReport& report);
  // read_url's rules, to check a redirect's name before following it (the proxy decides
  // again). Null: the session has no proxy for read_url, which then refuses (denied_by_policy).
  // Approvals (issue 34): the path rules of [[approvals.rules]] for a file tool's write of
  // `path` (`op`: create, edit, replace), asked before anything is written or kept. An error
  // refuses the write. Without a session there are no rules to ask by.
  virtual Status ApproveWrite(const std::string& path, std::string_view op) {
    (void)path;
    (void)op;
    return {};
  }
  virtual const EgressPolicy* EgressRules() { return nullptr; }
  // A stream socket connected to the session's egress proxy and served under those rules.
  virtual Result<UniqueFd> ConnectEgress();
  // mcp_server_status: the configured servers' states, or the named one's. Default: no
  // configured servers (an empty list; a name is not_found).
  virtual Result<Json> ServerStatus(const std::optional<std::string>& name);
  // session_tag: adds (tagged) or removes a tag of the caller's and records it; returns the
  // caller's tags after the change. Default: this session keeps no tags (invalid_input).
  virtual Result<std::vector<std::string>> SetTag(const std::string& tag, bool tagged);
  // session_usage, session_traces: the caller's calls so far, by number. Nullopt: none kept.
  virtual std::optional<std::map<std::uint64_t, CallUsage>> Usage() { return std::nullopt; }
  // session_diff: the session's own log's changes, kept to the caller's calls in [from, to].
  virtual Result<Json> SessionDiff(std::uint64_t from, std::uint64_t to);
  // local_servers' probes: one network record each (protocol probe).
  virtual void RecordNetwork(const NetworkEvent& event);
  // stop_local_server: its local_server_stopped record, after the signals.
  virtual void RecordListenerStop(const std::string& job, const ListenerStopOutcome& stop);
};

// One call's context: what the tool works on, under which rules, for whom, and the services.
struct ToolContext {
  const Workspace& workspace;
  const Policy& policy;
  ToolServices& services;
  const std::atomic<bool>* cancel = nullptr;  // set when the caller cancels the call
  const Redactor* redactor = nullptr;         // line cuts move back so no secret is split
  // Who makes the call (ProcessRequest::owner): the MCP session under `serve --http`, empty
  // otherwise. The jobs tools see this caller's jobs only.
  std::string caller{};
  // The call's number in the session (ProcessRequest::call of what it starts).
  std::uint64_t call = 0;
  // The tool's input itself, when the tool may take values out of it (move them): set when the
  // caller gave the input up (Session::Call with an rvalue) and nothing reads it after the tool.
  // A megabyte of run_shell arguments is then held once, by the process, not also by the input.
  Json* input = nullptr;
};

}  // namespace cordon
