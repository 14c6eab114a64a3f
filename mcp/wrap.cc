// The wrap proxy. Client lines go to the server's stdin; server lines go to the client. Requests
// named tools/call open a tool_started record that the matching response closes; responses are
// redacted; non-JSON and oversized server output is dropped and recorded as a diagnostic.
#include "mcp/wrap.h"

#include <unistd.h>

#include <chrono>
#include <map>
#include <thread>

#include "core/fs.h"
#include "core/hash.h"
#include "mcp/jsonrpc.h"

namespace cordon::mcp {
namespace {

// A message again from its parts (after redaction or a cap changed them).
Json Rebuild(const Message& m) {
  Json out = {{"jsonrpc", "2.0"}};
  if (m.kind != Message::Kind::kNotification) out["id"] = m.id;
  if (m.kind == Message::Kind::kResponse) {
    if (!m.error.is_null()) {
      out["error"] = m.error;
    } else {
      out["result"] = m.result;
    }
    return out;
  }
  out["method"] = m.method;
  if (!m.params.is_null()) out["params"] = m.params;
  return out;
}

struct PendingCall {
  std::string tool;
  std::chrono::steady_clock::time_point started;
};

}  // namespace

int RunWrap(Session& session, ProcessRequest req, int client_in, int client_out) {
  req.kind = ProcessKind::kMcpServer;
  req.tool = "wrap";
  req.pipe_stdin = true;
  req.no_timeout = true;
  std::map<std::string, PendingCall> pending;  // request id (as JSON text) -> call
  LineSplitter from_client, from_server;
  ConfinedProcess* proc = nullptr;
  std::atomic<bool> cancel{false};
  std::thread reaper;

  // The tool_finished record of a pending call, which leaves the table.
  auto finish = [&](std::map<std::string, PendingCall>::iterator it, ToolFinishedRecord rec) {
    rec.server = "wrapped";
    rec.tool = it->second.tool;
    rec.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                               it->second.started)
                         .count();
    session.processes().SweepAtCallBoundary();  // before the response reaches the client
    session.Audit(rec, true);
    pending.erase(it);
  };
  auto to_client = [&](std::string_view line) {
    (void)WriteAll(client_out, std::string(line) + "\n", "MCP client");
  };

  RunHooks hooks;
  hooks.on_stdout = [&](std::string_view chunk) {
    from_server.Feed(
        chunk,
        [&](std::string_view line) {
          auto parsed = ParseMessage(line);
          if (std::holds_alternative<Json>(parsed)) {
            // Garbage on a server's stdout would break the client: drop it, say so.
            session.Audit(McpDiagnosticRecord{.server = "wrapped",
                                              .reason = "non-JSON-RPC line on stdout dropped",
                                              .bytes = line.size()},
                          false);
            return;
          }
          Message& m = std::get<Message>(parsed);
          // Caps and redaction change the message only when they apply; otherwise the line
          // goes through byte for byte.
          std::size_t redactions = session.redactor().RedactJson(m.params) +
                                   session.redactor().RedactJson(m.result) +
                                   session.redactor().RedactJson(m.error);
          bool truncated = false;
          auto it = m.kind == Message::Kind::kResponse ? pending.find(m.id.dump()) : pending.end();
          if (it != pending.end()) {
            const std::size_t cap =
                static_cast<std::size_t>(session.policy().limits.max_output_bytes);
            if (line.size() > cap && m.result.is_object()) truncated = CapToolResult(m.result, cap);
            const bool is_error =
                !m.error.is_null() || (m.result.is_object() && m.result.value("isError", false));
            ToolFinishedRecord rec{.status = is_error ? "error" : "ok",
                                   .output_bytes = line.size(),
                                   .truncated = truncated};
            if (redactions > 0) rec.output_redactions = redactions;
            finish(it, std::move(rec));
          }
          if (redactions > 0 || truncated) {
            to_client(DumpJson(Rebuild(m)));
          } else {
            to_client(line);
          }
        },
        [&](std::size_t bytes) {
          session.Audit(McpDiagnosticRecord{.server = "wrapped",
                                            .reason = "oversized message from the server dropped",
                                            .bytes = bytes},
                        false);
        });
  };
  hooks.extra_fd = client_in;
  hooks.on_extra_readable = [&]() -> bool {
    char buf[65536];
    ssize_t n = ::read(client_in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) {
      // The client left: EOF for the server, and a bounded wait for it to exit.
      if (proc != nullptr) proc->CloseStdin();
      reaper = std::thread([&cancel] {
        // Up to 3 s for the server to exit by itself; RunWrap sets `cancel` when it has.
        for (int i = 0; i < 30 && !cancel.load(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        cancel = true;
      });
      return false;
    }
    from_client.Feed(
        {buf, static_cast<std::size_t>(n)},
        [&](std::string_view line) {
          auto parsed = ParseMessage(line);
          if (std::holds_alternative<Json>(parsed)) {
            to_client(DumpJson(std::get<Json>(parsed)));  // answered here, never forwarded
            return;
          }
          const Message& m = std::get<Message>(parsed);
          if (m.kind == Message::Kind::kNotification && m.method == "notifications/cancelled" &&
              m.params.is_object() && m.params.contains("requestId")) {
            // The client gave up on a call: it is over for the audit trail, whatever the server
            // still does (the protocol says it sends no response).
            auto it = pending.find(m.params["requestId"].dump());
            if (it != pending.end()) {
              ToolFinishedRecord rec{.status = "cancelled"};
              if (m.params.contains("reason") && m.params["reason"].is_string()) {
                rec.reason = m.params["reason"].get<std::string>().substr(0, 200);
              }
              finish(it, std::move(rec));
            }
          }
          if (m.kind == Message::Kind::kRequest && m.method == "tools/call" &&
              m.params.is_object()) {
            std::string tool = m.params.value("name", "");
            const std::string args = m.params.value("arguments", Json::object()).dump();
            session.Audit(ToolStartedRecord{.tool = tool,
                                            .server = "wrapped",
                                            .args_bytes = args.size(),
                                            .args_sha256 = Sha256Hex(args)},
                          false);
            pending[m.id.dump()] = {tool, std::chrono::steady_clock::now()};
          }
          if (proc != nullptr && proc->stdin_fd() >= 0) {
            (void)WriteAll(proc->stdin_fd(), std::string(line) + "\n", "MCP server");
          }
        },
        [&](std::size_t bytes) {
          to_client(DumpJson(
              MakeError(nullptr, kInvalidRequest,
                        "message of " + std::to_string(bytes) + " bytes exceeds the limit")));
        });
    return true;
  };
  auto result =
      session.processes().RunWithHooks(req, hooks, &cancel, [&](ConfinedProcess& p) { proc = &p; });
  cancel = true;
  if (reaper.joinable()) reaper.join();
  if (!result) {
    std::fprintf(stderr, "cordon wrap: %s\n", result.error().ToString().c_str());
    return 125;
  }
  ProcessOutcome o = (*result)->outcome();
  std::string err = (*result)->StderrText();
  if (!err.empty()) (void)WriteAll(2, err, "stderr");
  if (o.error) {
    std::fprintf(stderr, "cordon wrap: %s\n", o.error->message.c_str());
    return 125;
  }
  if (o.signal) return 128 + *o.signal;
  return o.exit_code.value_or(0);
}

}  // namespace cordon::mcp
