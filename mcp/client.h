// A client for one configured stdio MCP server, which runs confined like any tool process.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "mcp/config.h"
#include "mcp/jsonrpc.h"
#include "runner/egress_proxy.h"
#include "session/session.h"

namespace cordon::mcp {

// One connection to a configured server, whatever its transport.
class McpConnection {
 public:
  virtual ~McpConnection() = default;
  // With `cancel`, a request whose flag turns true is abandoned and the server is sent
  // notifications/cancelled for it.
  virtual Result<Json> Request(const std::string& method, Json params,
                               const std::atomic<bool>* cancel = nullptr) = 0;
  virtual const Json& initialize_result() const = 0;
  virtual std::string StderrTail() { return {}; }
  // A stdio server's process: whether it still runs, and its sandbox's init pid (0: unknown).
  // Other transports: running, no pid.
  virtual bool Running() { return true; }
  virtual pid_t Pid() { return 0; }
  // What to call (from the transport's thread) when the server announces tools/list_changed.
  void SetOnToolsChanged(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(callback_mu_);
    on_tools_changed_ = std::move(fn);
  }
  // Starts listening for messages the server sends on its own.
  virtual void Listen() {}
  Result<Json> ListTools();  // all pages
  Result<Json> CallTool(const std::string& name, const Json& arguments,
                        const std::atomic<bool>* cancel = nullptr);

 protected:
  // For the transports: the server announced tools/list_changed.
  void ToolsChanged() {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(callback_mu_);
      fn = on_tools_changed_;
    }
    if (fn) fn();
  }

 private:
  std::mutex callback_mu_;  // the callback is set by the hub while a transport thread may run
  std::function<void()> on_tools_changed_;
};

// The answer to a request a server sends its client: ping and roots/list (the workspace) are
// answered, anything else (sampling, elicitation) is refused. Never left hanging.
Json AnswerServerRequest(const Message& request, const std::string& workspace);

// Connects with the server's transport (stdio, confined; or Streamable HTTP).
Result<std::unique_ptr<McpConnection>> ConnectServer(Session& session, const ServerConfig& config);

class StdioClient : public McpConnection {
 public:
  // Launches the server confined and completes the initialize handshake within its timeout.
  static Result<std::unique_ptr<StdioClient>> Connect(Session& session, const ServerConfig& config);
  ~StdioClient() override;
  StdioClient(const StdioClient&) = delete;
  StdioClient& operator=(const StdioClient&) = delete;

  Result<Json> Request(const std::string& method, Json params,
                       const std::atomic<bool>* cancel = nullptr) override;
  const Json& initialize_result() const override { return init_; }
  std::string StderrTail() override;
  bool Running() override;
  pid_t Pid() override;

 private:
  explicit StdioClient(Session& session, ServerConfig config)
      : session_(session), config_(std::move(config)) {}
  void OnLine(std::string_view line);
  void OnOversized(const IdScanner& scan);
  void Send(const Json& msg);

  void ReadLine(std::string_view line);  // OnLine's work; may throw Json::exception
  Session& session_;
  ServerConfig config_;
  std::thread pump_;
  std::mutex mu_;
  std::condition_variable cv_;
  ConfinedProcess* proc_ = nullptr;
  bool started_ = false, exited_ = false;
  std::optional<Error> start_error_;
  std::map<std::int64_t, Json> responses_;
  std::int64_t next_id_ = 0;
  LineSplitter lines_;
  std::string final_stderr_;  // the server's stderr once it has exited
  // Its proxy listener's connection counts (network proxy only): a server that is downloading
  // what it runs (npx, uvx) is told apart from one that is stuck. Set when it starts.
  std::shared_ptr<const EgressActivity> activity_;
  std::atomic<bool> cancel_{false};
  Json init_;
};

}  // namespace cordon::mcp
