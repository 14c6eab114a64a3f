// The MCP server side of cordon: exposes the session's granted tools over JSON-RPC (stdio).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "mcp/elicitation.h"
#include "mcp/jsonrpc.h"
#include "mcp/worker_pool.h"
#include "session/session.h"

namespace cordon::mcp {

// The version the server answers: the client's when supported on `wire`, else the latest.
std::string NegotiateVersion(const Json& requested, Wire wire = Wire::kStdio);

class McpServer {
 public:
  // Without `send`, tools/call runs inline and its result is returned from Handle. With it,
  // each tools/call runs on a pooled worker thread, can be cancelled (notifications/cancelled),
  // reports progress when the client sent a progressToken, and answers through `send`.
  // `owner`: under `serve --http`, this MCP session's label ("mcp-N"): its calls are made as it
  // (Session::Call), so its jobs are its own. Empty for stdio, where there is one session.
  explicit McpServer(Session& session, std::function<void(const Json&)> send = {},
                     Wire wire = Wire::kStdio, std::string owner = "")
      : session_(session), send_(std::move(send)), wire_(wire), owner_(std::move(owner)) {}
  ~McpServer();
  // Handles one line from the client; returns what to send back now (possibly nothing).
  std::vector<Json> HandleLine(std::string_view line);
  // Never throws: a field of the wrong type is answered as the client's error. A tools/call's
  // arguments are taken out of `m` (the call holds them until its tool takes them).
  std::optional<Json> Handle(Message& m);
  // Runs a tools/call request on a pooled worker, like the stdio server does, but delivers its
  // progress notifications and its response to `sink` and calls `done` at the end (also when
  // it was cancelled, in which case no response is delivered). notifications/cancelled handled
  // by this server reaches it. For Streamable HTTP, where each request has its own stream.
  void CallWithSink(Message& m, std::function<void(const Json&)> sink, std::function<void()> done);
  // Cancels every running call and waits for all of them.
  void Drain(bool cancel);
  // A JSON-RPC batch (2025-03-26 only; refused with -32600 otherwise): each element is handled
  // as on its own, tools/call on workers; `deliver` gets the array of responses once all are
  // in (an empty array when there are none), `notify` their progress notifications.
  void HandleBatch(Json batch, std::function<void(const Json&)> notify,
                   std::function<void(Json)> deliver);
  // Stdio: each answer of a pooled call is made into its bytes at once and handed to `write`,
  // which blocks while the client does not read; until written it is held only as those bytes.
  void SetLineWriter(std::function<void(std::string)> write) { write_line_ = std::move(write); }
  // Bytes the session owes the client: answers made and not yet written, plus each running
  // call's reservation (what it may still return, at its output cap). A tools/call that would
  // take it past limits.max_pending_output_bytes is refused with output_backlog.
  std::int64_t pending_output() const { return pending_output_.load(); }
  // The client is gone: questions put to it are answered cancelled (mcp/elicitation.h).
  void CloseAsker() {
    if (asker_) asker_->Close();
  }
  // The negotiated protocol version ("" before initialize).
  std::string version() const {
    std::lock_guard<std::mutex> lock(calls_mu_);
    return version_;
  }

 private:
  struct ActiveCall {
    std::atomic<bool> cancel{false};
    std::atomic<bool> done{false};
    std::function<void(const Json&)> sink;  // where progress and the answer go (send_ if empty)
    std::function<void()> on_end;
    std::int64_t reserved = 0;  // counted in pending_output_ until its answer is made
  };
  std::optional<Json> Dispatch(Message& m);
  Json Initialize(const Json& params);
  Json Instructions();
  void StartCall(const Message& m, Json args, std::function<void(const Json&)> sink = {},
                 std::function<void()> on_end = {});
  void RunCall(ActiveCall* call, const std::string& key, const Json& id, const std::string& name,
               Json args, const Json& token);
  // The refusal of a call while the client owes reading past the bound; nullopt to admit it.
  std::optional<Json> RefuseForBacklog(const Message& m, std::int64_t reserve);
  Session& session_;
  std::function<void(const Json&)> send_;
  std::function<void(std::string)> write_line_;
  std::atomic<std::int64_t> pending_output_{0};
  Wire wire_;
  const std::string owner_;
  bool initialized_ = false;
  std::string version_;  // written under calls_mu_: HTTP reads it from other connections
  mutable std::mutex calls_mu_;
  std::condition_variable calls_cv_;                          // signalled when a call leaves calls_
  std::map<std::string, std::unique_ptr<ActiveCall>> calls_;  // by request id (JSON text)
  // serve over stdio, a client that declared elicitation: approvals are asked through it.
  std::shared_ptr<ElicitationAsker> asker_;
  WorkerPool pool_{64};
};

// Serves until EOF on in_fd; logs only to stderr. Returns 0 on a clean EOF. `on_tools_changed`
// receives a function that sends notifications/tools/list_changed to the client.
int ServeStdio(Session& session, int in_fd, int out_fd,
               const std::function<void(std::function<void()>)>& on_tools_changed = {});

}  // namespace cordon::mcp
