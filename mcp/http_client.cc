// A deliberately small Streamable HTTP client: one request at a time, the response read from
// the POST (JSON, or an SSE stream in which server requests are answered and refused properly).
#include "mcp/http_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <mutex>

#include "core/signals.h"
#include "core/version.h"
#include "mcp/dynlib.h"
#include "mcp/jsonrpc.h"

namespace cordon::mcp {
namespace {

constexpr std::size_t kMaxBody = kMaxMessageBytes * 4;

struct Capture {
  std::string body;
  std::string content_type;
  std::string session_id;
  bool too_big = false;
  // With it, an SSE body is handed over event by event as it arrives instead of kept: a server
  // request in the stream is answered while the server waits for that answer.
  const std::function<void(const std::string&)>* on_message = nullptr;
};

std::vector<std::string> SseEvents(const std::string& body);

std::size_t OnBody(char* data, std::size_t size, std::size_t n, void* user) {
  auto* c = static_cast<Capture*>(user);
  if (c->on_message != nullptr && c->content_type.rfind("text/event-stream", 0) == 0) {
    for (std::size_t i = 0; i < size * n; ++i) {
      if (data[i] != '\r') c->body += data[i];  // JSON data never holds a raw CR
    }
    for (std::size_t end; (end = c->body.find("\n\n")) != std::string::npos;) {
      const std::string event = c->body.substr(0, end + 1);
      c->body.erase(0, end + 2);
      for (const std::string& payload : SseEvents(event)) (*c->on_message)(payload);
    }
    if (c->body.size() > kMaxMessageBytes) {
      c->too_big = true;
      return 0;  // an event too large to be one message
    }
    return size * n;
  }
  if (c->body.size() + size * n > kMaxBody) {
    c->too_big = true;
    return 0;  // aborts the transfer
  }
  c->body.append(data, size * n);
  return size * n;
}

std::size_t OnHeader(char* data, std::size_t size, std::size_t n, void* user) {
  auto* c = static_cast<Capture*>(user);
  std::string line(data, size * n);
  std::size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
      value.pop_back();
    if (name == "content-type") c->content_type = value;
    if (name == "mcp-session-id") c->session_id = value;
  }
  return size * n;
}

// The JSON payloads of an SSE body ("data:" lines joined per event).
std::vector<std::string> SseEvents(const std::string& body) {
  std::vector<std::string> events;
  std::string data;
  std::size_t pos = 0;
  while (pos <= body.size()) {
    std::size_t nl = body.find('\n', pos);
    std::string line = body.substr(pos, (nl == std::string::npos ? body.size() : nl) - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      if (!data.empty()) events.push_back(data);
      data.clear();
    } else if (line.rfind("data:", 0) == 0) {
      std::string d = line.substr(5);
      if (!d.empty() && d[0] == ' ') d.erase(0, 1);
      if (!data.empty()) data += "\n";
      data += d;
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  if (!data.empty()) events.push_back(data);
  return events;
}

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::Connect(Session& session,
                                                        const ServerConfig& config) {
  TRY(Curl());  // fails early, naming the missing package
  auto c = std::unique_ptr<HttpClient>(new HttpClient(session, config));
  ASSIGN_OR_RETURN(c->init_,
                   c->Request("initialize",
                              {{"protocolVersion", "2025-11-25"},
                               {"capabilities", {{"roots", {{"listChanged", false}}}}},
                               {"clientInfo", {{"name", "cordon"}, {"version", kCordonVersion}}}}));
  c->version_ = JsonStringField(c->init_, "protocolVersion");
  if (!IsSupportedVersion(c->version_)) {
    session.Audit(McpDiagnosticRecord{.server = config.name,
                                      .reason = "protocol version mismatch",
                                      .protocol_version = c->version_},
                  true);
  }
  TRY(c->Notify("notifications/initialized", nullptr));
  return c;
}

curl_slist* HttpClient::SessionHeaders(const CurlApi& api, curl_slist* headers) const {
  if (!session_id_.empty())
    headers = api.slist_append(headers, ("Mcp-Session-Id: " + session_id_).c_str());
  if (!version_.empty())
    headers = api.slist_append(headers, ("MCP-Protocol-Version: " + version_).c_str());
  for (const auto& [k, v] : config_.headers)
    headers = api.slist_append(headers, (k + ": " + v).c_str());
  return headers;
}

void HttpClient::Listen() {
  if (listener_.joinable() || session_id_.empty()) return;
  listener_ = std::thread([this] {
    ListenLoop();
    StreamReady();  // whichever way the GET ended, nobody waits for it any more
  });
  std::unique_lock<std::mutex> lock(ready_mu_);
  if (!ready_cv_.wait_for(lock, std::chrono::seconds(config_.timeout_secs),
                          [this] { return stream_ready_; })) {
    session_.Audit(McpDiagnosticRecord{.server = config_.name,
                                       .reason = "GET stream not answered within " +
                                                 std::to_string(config_.timeout_secs) +
                                                 " s; what the server sends there may be missed"},
                   false);
  }
}

void HttpClient::StreamReady() {
  {
    std::lock_guard<std::mutex> lock(ready_mu_);
    stream_ready_ = true;
  }
  ready_cv_.notify_all();
}

void HttpClient::OnStreamMessage(const std::string& payload) {
  auto parsed = ParseMessage(payload);
  if (std::holds_alternative<Json>(parsed)) return;
  const Message& m = std::get<Message>(parsed);
  ++stream_messages_;
  if (m.kind == Message::Kind::kRequest) {
    (void)Post(
        AnswerServerRequest(m, session_.workspace().root()));  // answered, never left hanging
  } else if (m.kind == Message::Kind::kNotification &&
             m.method == "notifications/tools/list_changed") {
    ToolsChanged();
  }
}

void HttpClient::ListenLoop() {
  BlockTerminationSignals();
  auto loaded = Curl();
  if (!loaded) return;
  const CurlApi* api = *loaded;
  CURL* curl = api->easy_init();
  if (curl == nullptr) return;
  curl_slist* headers =
      SessionHeaders(*api, api->slist_append(nullptr, "Accept: text/event-stream"));
  struct Stream {
    HttpClient* self;
    std::string buf;
    Capture cap;
    bool interim = false;  // in the headers of a 1xx response
  } stream{this, {}, {}, false};
  api->easy_setopt(curl, CURLOPT_URL, config_.url.c_str());
  api->easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  api->easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  api->easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(config_.timeout_secs));
  api->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  // The blank line that ends the final (non-1xx) response's headers: the SDK server registers
  // the stream before it sends them, so from here on nothing it sends there is dropped.
  api->easy_setopt(curl, CURLOPT_HEADERDATA, &stream);
  api->easy_setopt(
      curl, CURLOPT_HEADERFUNCTION,
      +[](char* data, std::size_t size, std::size_t n, void* user) -> std::size_t {
        auto* st = static_cast<Stream*>(user);
        const std::string_view line(data, size * n);
        if (line.starts_with("HTTP/")) {
          const std::size_t sp = line.find(' ');
          st->interim = sp != std::string_view::npos && line.substr(sp + 1).starts_with("1");
        } else if ((line == "\r\n" || line == "\n") && !st->interim) {
          st->self->StreamReady();
        }
        return OnHeader(data, size, n, &st->cap);
      });
  // SSE events as they arrive: blank-line separated, their data: lines joined.
  api->easy_setopt(curl, CURLOPT_WRITEDATA, &stream);
  api->easy_setopt(
      curl, CURLOPT_WRITEFUNCTION,
      +[](char* data, std::size_t size, std::size_t n, void* user) -> std::size_t {
        auto* st = static_cast<Stream*>(user);
        if (st->self->stop_.load()) return 0;
        st->buf.append(data, size * n);
        for (std::size_t end; (end = st->buf.find("\n\n")) != std::string::npos;) {
          std::string event = st->buf.substr(0, end + 1);
          st->buf.erase(0, end + 2);
          for (const std::string& payload : SseEvents(event)) st->self->OnStreamMessage(payload);
        }
        if (st->buf.size() > kMaxMessageBytes) return 0;  // an event too large to be one message
        return size * n;
      });
  // The socket is remembered so that the destructor can end the stream at once.
  api->easy_setopt(curl, CURLOPT_SOCKOPTDATA, this);
  api->easy_setopt(
      curl, CURLOPT_SOCKOPTFUNCTION, +[](void* self, curl_socket_t fd, curlsocktype) -> int {
        auto* c = static_cast<HttpClient*>(self);
        std::lock_guard<std::mutex> lock(c->socket_mu_);
        c->listen_socket_ = fd;
        return c->stop_.load() ? CURL_SOCKOPT_ERROR : CURL_SOCKOPT_OK;
      });
  api->easy_setopt(curl, CURLOPT_CLOSESOCKETDATA, this);
  api->easy_setopt(
      curl, CURLOPT_CLOSESOCKETFUNCTION, +[](void* self, curl_socket_t fd) -> int {
        auto* c = static_cast<HttpClient*>(self);
        std::lock_guard<std::mutex> lock(c->socket_mu_);
        if (c->listen_socket_ == fd) c->listen_socket_ = -1;
        return ::close(fd);
      });
  const CURLcode rc = api->easy_perform(curl);
  long status = 0;
  api->easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  api->slist_free_all(headers);
  api->easy_cleanup(curl);
  if (stop_.load() && status == 200) {
    session_.Audit(McpDiagnosticRecord{.server = config_.name,
                                       .reason = "GET stream closed by cordon",
                                       .messages = stream_messages_},
                   false);
  } else if (status == 405 || status == 404) {
    session_.Audit(McpDiagnosticRecord{.server = config_.name,
                                       .reason = "the server offers no GET stream (HTTP " +
                                                 std::to_string(status) + ")"},
                   false);
  } else {
    session_.Audit(McpDiagnosticRecord{.server = config_.name,
                                       .reason = "GET stream ended",
                                       .messages = stream_messages_,
                                       .http_status = status,
                                       .curl = api->easy_strerror(rc)},
                   false);
  }
}

HttpClient::~HttpClient() {
  if (listener_.joinable()) {
    stop_ = true;
    {
      std::lock_guard<std::mutex> lock(socket_mu_);
      if (listen_socket_ >= 0) ::shutdown(listen_socket_, SHUT_RDWR);
    }
    listener_.join();
  }
  if (session_id_.empty()) return;
  // Ends the server's session; failures here change nothing for the caller.
  auto loaded = Curl();
  if (!loaded) return;
  const CurlApi* api = *loaded;
  CURL* curl = api->easy_init();
  if (curl == nullptr) return;
  curl_slist* headers = api->slist_append(nullptr, ("Mcp-Session-Id: " + session_id_).c_str());
  api->easy_setopt(curl, CURLOPT_URL, config_.url.c_str());
  api->easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
  api->easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  api->easy_setopt(curl, CURLOPT_TIMEOUT, 2L);
  api->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  api->easy_perform(curl);
  api->slist_free_all(headers);
  api->easy_cleanup(curl);
}

Result<HttpClient::Reply> HttpClient::Post(
    const Json& message, const std::atomic<bool>* cancel,
    const std::function<void(const std::string&)>* on_message) {
  ASSIGN_OR_RETURN(const CurlApi* api, Curl());
  CURL* curl = api->easy_init();
  if (curl == nullptr) return Fail(Code::kInternal, "curl_easy_init failed");
  const std::string body = DumpJson(message);
  curl_slist* headers = nullptr;
  headers = api->slist_append(headers, "Content-Type: application/json");
  headers = SessionHeaders(
      *api, api->slist_append(headers, "Accept: application/json, text/event-stream"));
  Capture cap;
  cap.on_message = on_message;
  api->easy_setopt(curl, CURLOPT_URL, config_.url.c_str());
  api->easy_setopt(curl, CURLOPT_POST, 1L);
  api->easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  api->easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  api->easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  api->easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  api->easy_setopt(curl, CURLOPT_WRITEDATA, &cap);
  api->easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  api->easy_setopt(curl, CURLOPT_HEADERDATA, &cap);
  api->easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(config_.timeout_secs));
  api->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  if (cancel != nullptr) {
    // A cancelled call aborts its transfer.
    api->easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    api->easy_setopt(curl, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(cancel));
    api->easy_setopt(
        curl, CURLOPT_XFERINFOFUNCTION,
        +[](void* flag, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
          return static_cast<std::atomic<bool>*>(flag)->load() ? 1 : 0;
        });
  }
  CURLcode rc = api->easy_perform(curl);
  long status = 0;
  api->easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  api->slist_free_all(headers);
  api->easy_cleanup(curl);
  if (cap.too_big)
    return Fail(Code::kTooLarge, "server " + config_.name + ": response larger than " +
                                     std::to_string(kMaxBody) + " bytes");
  if (rc == CURLE_ABORTED_BY_CALLBACK)
    return Fail(Code::kCancelled, "server " + config_.name + ": cancelled");
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return Fail(Code::kTimeout, "server " + config_.name + ": no answer within " +
                                    std::to_string(config_.timeout_secs) + " s");
  }
  if (rc != CURLE_OK) {
    return Fail(Code::kServerUnavailable, "server " + config_.name + ": " + api->easy_strerror(rc));
  }
  // Set once, by the initialize reply; the GET stream's thread reads it afterwards.
  if (session_id_.empty() && !cap.session_id.empty()) session_id_ = cap.session_id;
  return Reply{status, cap.content_type, std::move(cap.body), cap.session_id};
}

Status HttpClient::Notify(const std::string& method, Json params) {
  ASSIGN_OR_RETURN(Reply r, Post(MakeNotification(method, std::move(params))));
  if (r.status != 202 && r.status != 200 && r.status != 204) {
    return Fail(Code::kServerUnavailable,
                "server " + config_.name + ": " + method + " got HTTP " + std::to_string(r.status));
  }
  return {};
}

Result<Json> HttpClient::Request(const std::string& method, Json params,
                                 const std::atomic<bool>* cancel) {
  const std::int64_t id = ++next_id_;
  std::optional<Message> answer;
  std::string refused;  // why the last unreadable payload was refused
  // Each message of the reply as it arrives: server requests are answered (or refused) at once,
  // on their own POST, since the server holds the rest of this stream until it has the answer.
  const std::function<void(const std::string&)> on_message = [&](const std::string& payload) {
    auto parsed = ParseMessage(payload);
    if (std::holds_alternative<Json>(parsed)) {
      refused = JsonStringField(std::get<Json>(parsed)["error"], "message");
      return;
    }
    Message& m = std::get<Message>(parsed);
    if (m.kind == Message::Kind::kRequest) {
      (void)Post(AnswerServerRequest(m, session_.workspace().root()));
    } else if (m.kind == Message::Kind::kNotification &&
               m.method == "notifications/tools/list_changed") {
      ToolsChanged();
    } else if (m.kind == Message::Kind::kResponse && m.id == id && !answer) {
      answer = std::move(m);
    }
  };
  auto posted =
      Post({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}},
           cancel, &on_message);
  if (!posted && posted.error().code == Code::kCancelled) {
    (void)Notify("notifications/cancelled",
                 {{"requestId", id}, {"reason", "cancelled by cordon's client"}});
    return std::unexpected(posted.error());
  }
  ASSIGN_OR_RETURN(Reply r, std::move(posted));
  if (r.status == 404 && !session_id_.empty()) {
    return Fail(Code::kServerUnavailable,
                "server " + config_.name + ": the session expired (HTTP 404)");
  }
  if (r.status < 200 || r.status >= 300) {
    session_.Audit(McpDiagnosticRecord{.server = config_.name,
                                       .reason = "HTTP " + std::to_string(r.status),
                                       .method = method,
                                       .body = r.body.substr(0, 500)},
                   true);
    return Fail(Code::kServerUnavailable,
                "server " + config_.name + ": " + method + " got HTTP " + std::to_string(r.status));
  }
  // A JSON reply (or what an SSE body left without a closing blank line) is read the same way.
  if (r.content_type.rfind("text/event-stream", 0) == 0) {
    for (const std::string& payload : SseEvents(r.body)) on_message(payload);
  } else if (!r.body.empty()) {
    on_message(r.body);
  }
  if (answer) {
    if (!answer->error.is_null()) {
      return Fail(Code::kServerUnavailable, "server " + config_.name + ": " + method + ": " +
                                                JsonStringField(answer->error, "message", "error"));
    }
    return answer->result;
  }
  return Fail(Code::kServerUnavailable, "server " + config_.name + ": no response to " + method +
                                            " in the HTTP reply" +
                                            (refused.empty() ? "" : " (refused: " + refused + ")"));
}

}  // namespace cordon::mcp
