// Streamable HTTP transport for configured servers (libcurl): POST with Accept JSON and SSE,
// Mcp-Session-Id and MCP-Protocol-Version headers, 202 for notifications, DELETE at the end.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "mcp/client.h"
#include "mcp/dynlib.h"

namespace cordon::mcp {

class HttpClient : public McpConnection {
 public:
  static Result<std::unique_ptr<HttpClient>> Connect(Session& session, const ServerConfig& config);
  ~HttpClient() override;
  Result<Json> Request(const std::string& method, Json params,
                       const std::atomic<bool>* cancel = nullptr) override;
  const Json& initialize_result() const override { return init_; }
  // Opens the optional GET stream on which the server may send requests and notifications
  // that belong to no POST (tools/list_changed, roots/list, ping...). A 405 is fine. Returns
  // once the server has answered the GET (or it failed, or timeout_secs passed): a server drops
  // what it sends while no GET stream is open, and an SDK server sends the roots/list of a tool
  // it is running there, so a call made before the stream is open could wait for an answer to a
  // request cordon never saw.
  void Listen() override;

 private:
  HttpClient(Session& session, ServerConfig config)
      : session_(session), config_(std::move(config)) {}
  struct Reply {
    long status = 0;
    std::string content_type;
    std::string body;
    std::string session_id;
  };
  // With on_message, an SSE reply is handed over message by message as it arrives (and not
  // kept in the Reply's body).
  Result<Reply> Post(const Json& message, const std::atomic<bool>* cancel = nullptr,
                     const std::function<void(const std::string&)>* on_message = nullptr);
  Status Notify(const std::string& method, Json params);
  // Appends the session's headers (Mcp-Session-Id, MCP-Protocol-Version, the configured ones).
  curl_slist* SessionHeaders(const CurlApi& api, curl_slist* headers) const;
  void ListenLoop();
  // The GET's response headers have arrived (the server has registered the stream), or the GET
  // is over: Listen() may return.
  void StreamReady();
  // A message on the GET stream: requests are answered, tools/list_changed is passed on.
  void OnStreamMessage(const std::string& payload);
  Session& session_;
  ServerConfig config_;
  std::string session_id_;
  std::string version_;
  std::int64_t next_id_ = 0;
  Json init_;
  std::thread listener_;
  std::atomic<bool> stop_{false};
  std::mutex socket_mu_;
  int listen_socket_ = -1;  // the GET stream's socket, shut down to end the stream at once
  std::uint64_t stream_messages_ = 0;
  std::mutex ready_mu_;
  std::condition_variable ready_cv_;
  bool stream_ready_ = false;
};

}  // namespace cordon::mcp
