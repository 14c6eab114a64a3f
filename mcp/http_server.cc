// The HTTP side of cordon serve, on libmicrohttpd: POST /mcp carries one JSON-RPC message and
// gets a JSON response (202 for notifications); DELETE ends an MCP session; GET is 405.
#include "mcp/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/hash.h"
#include "core/signals.h"
#include "mcp/dynlib.h"
#include "mcp/http_gate.h"
#include "mcp/jsonrpc.h"
#include "mcp/server.h"

namespace cordon::mcp {
namespace {

// How long MHD_stop_daemon may take at the end before cordon goes on without it.
constexpr std::chrono::seconds kDaemonStopGrace{3};
// Connections libmicrohttpd serves at once (each past the gate: its headers were in).
constexpr unsigned kMaxAdmittedConnections = 256;

// Set by ServeHttp before the daemon starts; the request callbacks run only after that.
const MhdApi* g_mhd = nullptr;

struct Pending {
  std::string body;
  bool too_big = false;
  IdScanner scan;  // a body past kMaxMessageBytes is not kept, only scanned for its id
};

struct HttpState {
  Session* session;
  HttpServeOptions options;
  std::mutex mu;
  // shared: a request keeps its session's server alive while a DELETE removes it
  std::map<std::string, std::shared_ptr<McpServer>> sessions;
  // Each MCP session's label ("mcp-N"), which owns its jobs and is in its records. Not its
  // Mcp-Session-Id: that one lets a holder of the token act as the session, and stays out of
  // the log.
  std::map<std::string, std::string> labels;
  std::uint64_t next_label = 0;
  // Set at the stop: a request that comes in on an admitted connection after it is closed
  // unanswered, so that nothing starts while the calls are drained.
  bool stopping = false;
};

// The state of a daemon that did not stop in time (ServeHttp): kept reachable to the end.
HttpState* g_abandoned_state = nullptr;

// The messages of one tools/call: its progress notifications, then its response. Read as an
// SSE body (one `event: message` per message) or waited on for a JSON reply.
class EventStream {
 public:
  void Push(const Json& msg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (msg.contains("id") && (msg.contains("result") || msg.contains("error"))) answer_ = msg;
    events_.push_back("event: message\ndata: " + DumpJson(msg) + "\n\n");
    cv_.notify_all();
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  // The response, or null when the call ended without one (it was cancelled).
  Json WaitAnswer() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return closed_ || !answer_.is_null(); });
    return answer_;
  }
  // MHD's content reader: blocks (one thread per connection) until there is something to send.
  ssize_t Read(char* buf, std::size_t max) {
    std::unique_lock<std::mutex> lock(mu_);
    while (offset_ == current_.size()) {
      if (!events_.empty()) {
        current_ = std::move(events_.front());
        events_.pop_front();
        offset_ = 0;
      } else if (closed_) {
        return MHD_CONTENT_READER_END_OF_STREAM;
      } else {
        cv_.wait(lock);
      }
    }
    const std::size_t n = std::min(max, current_.size() - offset_);
    std::memcpy(buf, current_.data() + offset_, n);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> events_;
  std::string current_;
  std::size_t offset_ = 0;
  bool closed_ = false;
  Json answer_;
};

ssize_t ReadEvents(void* cls, uint64_t, char* buf, size_t max) {
  return (*static_cast<std::shared_ptr<EventStream>*>(cls))->Read(buf, max);
}

void FreeEvents(void* cls) { delete static_cast<std::shared_ptr<EventStream>*>(cls); }

bool ConstantTimeEqual(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

MHD_Result Reply(MHD_Connection* c, unsigned status, const std::string& body,
                 const std::map<std::string, std::string>& headers = {}) {
  MHD_Response* r = g_mhd->create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                       MHD_RESPMEM_MUST_COPY);
  if (!body.empty()) g_mhd->add_response_header(r, "Content-Type", "application/json");
  for (const auto& [k, v] : headers) g_mhd->add_response_header(r, k.c_str(), v.c_str());
  MHD_Result ret = g_mhd->queue_response(c, status, r);
  g_mhd->destroy_response(r);
  return ret;
}

MHD_Result ReplyRpcError(MHD_Connection* c, unsigned status, int code, const std::string& message) {
  return Reply(c, status, DumpJson(MakeError(nullptr, code, message)));
}

std::string Header(MHD_Connection* c, const char* name) {
  const char* v = g_mhd->lookup_connection_value(c, MHD_HEADER_KIND, name);
  return v != nullptr ? v : "";
}

// A JSON-RPC batch (MCP 2025-03-26): its responses as one JSON array, 202 when it held none.
MHD_Result HandleBatchPost(HttpState* st, MHD_Connection* c, const std::string& body,
                           const std::string& sid) {
  ParseLimits limits;
  limits.max_depth = kMaxMessageDepth;
  auto batch = ParseJsonBounded(body, limits);
  if (!batch) return Reply(c, 400, DumpJson(std::get<Json>(ParseMessage(body))));
  std::shared_ptr<McpServer> server;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    // Checked with the lookup, under one lock: a stop that began after the body arrived has
    // taken the sessions away, and nothing may start in one it is draining.
    if (st->stopping) return ReplyRpcError(c, 503, kInternalError, "the server is stopping");
    if (sid.empty())
      return ReplyRpcError(c, 400, kInvalidRequest, "Mcp-Session-Id header required");
    auto it = st->sessions.find(sid);
    if (it == st->sessions.end())
      return ReplyRpcError(c, 404, kInvalidRequest, "unknown or ended session");
    server = it->second;
  }
  auto answer = std::make_shared<std::promise<Json>>();
  auto ready = answer->get_future();
  server->HandleBatch(std::move(*batch), {},
                      [answer](Json out) { answer->set_value(std::move(out)); });
  const Json out = ready.get();
  if (out.is_array() && out.empty()) return Reply(c, 202, "", {{"Mcp-Session-Id", sid}});
  return Reply(c, out.is_array() ? 200 : 400, DumpJson(out), {{"Mcp-Session-Id", sid}});
}

// What every request must pass before its body is read: the path, Host and Origin (DNS
// rebinding), and the bearer token. A refusal is answered at once and closes the connection,
// so that a token-less peer holds no connection (and no thread) past its answer.
std::optional<MHD_Result> Refusal(HttpState* st, MHD_Connection* c, const char* url) {
  const std::string port = std::to_string(st->options.port);
  const std::map<std::string, std::string> close = {{"Connection", "close"}};
  if (std::string(url) != "/mcp") {
    return Reply(c, 404, DumpJson(MakeError(nullptr, kInvalidRequest, "not found: use /mcp")),
                 close);
  }
  // DNS rebinding: a browser page on another origin must not reach this server.
  const std::string host = Header(c, "Host");
  if (host != "127.0.0.1:" + port && host != "localhost:" + port) {
    return Reply(c, 403, DumpJson(MakeError(nullptr, kInvalidRequest, "Host header not allowed")),
                 close);
  }
  const std::string origin = Header(c, "Origin");
  if (!origin.empty() && origin != "http://127.0.0.1:" + port &&
      origin != "http://localhost:" + port) {
    return Reply(c, 403, DumpJson(MakeError(nullptr, kInvalidRequest, "Origin not allowed")),
                 close);
  }
  if (!st->options.token.empty() &&
      !ConstantTimeEqual(Header(c, "Authorization"), "Bearer " + st->options.token)) {
    return Reply(c, 401,
                 DumpJson(MakeError(nullptr, kInvalidRequest, "a bearer token is required")),
                 {{"WWW-Authenticate", "Bearer"}, {"Connection", "close"}});
  }
  return std::nullopt;
}

MHD_Result Handle(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                  const char* upload, size_t* upload_size, void** con_cls) {
  auto* st = static_cast<HttpState*>(cls);
  if (*con_cls == nullptr) {
    if (auto refused = Refusal(st, c, url)) return *refused;
    *con_cls = new Pending();
    return MHD_YES;
  }
  auto* pending = static_cast<Pending*>(*con_cls);
  if (*upload_size == 0) {
    std::lock_guard<std::mutex> lock(st->mu);
    if (st->stopping) return MHD_NO;  // closes the connection
  }
  if (*upload_size > 0) {
    if (pending->too_big) {
      pending->scan.Feed({upload, *upload_size});
    } else if (pending->body.size() + *upload_size > kMaxMessageBytes) {
      pending->too_big = true;
      pending->scan.Feed(pending->body);
      pending->scan.Feed({upload, *upload_size});
      std::string().swap(pending->body);
    } else {
      pending->body.append(upload, *upload_size);
    }
    *upload_size = 0;
    return MHD_YES;
  }
  const std::string m = method;
  const std::string sid = Header(c, "Mcp-Session-Id");
  if (m == "DELETE") {
    std::string label;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (st->sessions.erase(sid) == 0)
        return ReplyRpcError(c, 404, kInvalidRequest, "unknown session");
      label = st->labels[sid];
      st->labels.erase(sid);
    }
    // Its jobs are its own: nobody else can see or stop them, so they end with it, and what the
    // session kept for it goes too.
    if (!label.empty()) st->session->EndOwner(label);
    return Reply(c, 200, "");
  }
  if (m != "POST") return Reply(c, 405, "", {{"Allow", "POST, DELETE"}});
  if (pending->too_big) {
    return Reply(c, 413, DumpJson(OversizedError(pending->scan.Id(), pending->scan.bytes())));
  }
  // MCP-Protocol-Version (2025-06-18): a version cordon does not speak over HTTP is 400, as the
  // spec requires; a request without the header is taken as 2025-03-26, as it says too. A
  // supported version other than the session's is served, as the SDK's server does (the
  // conformance suite sends 2025-03-26 in a 2025-11-25 session).
  const std::string header_version = Header(c, "MCP-Protocol-Version");
  if (!header_version.empty() && !IsSupportedVersion(header_version, Wire::kHttp)) {
    return ReplyRpcError(c, 400, kInvalidRequest,
                         "unsupported MCP-Protocol-Version: " + header_version.substr(0, 64));
  }
  const std::size_t first = pending->body.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && pending->body[first] == '[') {
    return HandleBatchPost(st, c, pending->body, sid);
  }
  auto parsed = ParseMessage(pending->body);
  if (std::holds_alternative<Json>(parsed)) return Reply(c, 400, DumpJson(std::get<Json>(parsed)));
  Message& msg = std::get<Message>(parsed);
  std::shared_ptr<McpServer> server;
  std::string session_id = sid;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    // As for a batch: no session is made, and none found, once the stop has begun.
    if (st->stopping) return ReplyRpcError(c, 503, kInternalError, "the server is stopping");
    if (msg.kind == Message::Kind::kRequest && msg.method == "initialize") {
      session_id = RandomHex(16);
      const std::string label = "mcp-" + std::to_string(++st->next_label);
      st->labels[session_id] = label;
      st->sessions[session_id] =
          std::make_shared<McpServer>(*st->session, nullptr, Wire::kHttp, label);
    } else if (sid.empty()) {
      return ReplyRpcError(c, 400, kInvalidRequest, "Mcp-Session-Id header required");
    }
    auto it = st->sessions.find(session_id);
    if (it == st->sessions.end())
      return ReplyRpcError(c, 404, kInvalidRequest, "unknown or ended session");
    server = it->second;
  }
  if (msg.kind == Message::Kind::kRequest && msg.method == "tools/call") {
    // On a worker, so that notifications/cancelled (another POST) reaches it. With a progress
    // token and a client that accepts SSE, the answer is an event stream: progress
    // notifications about once a second, then the response.
    auto events = std::make_shared<EventStream>();
    server->CallWithSink(
        msg, [events](const Json& out) { events->Push(out); }, [events] { events->Close(); });
    const bool wants_progress = !ProgressToken(msg.params).is_null();
    if (wants_progress && Header(c, "Accept").find("text/event-stream") != std::string::npos) {
      MHD_Response* r = g_mhd->create_response_from_callback(
          MHD_SIZE_UNKNOWN, 16384, &ReadEvents, new std::shared_ptr<EventStream>(events),
          &FreeEvents);
      g_mhd->add_response_header(r, "Content-Type", "text/event-stream");
      g_mhd->add_response_header(r, "Cache-Control", "no-cache");
      g_mhd->add_response_header(r, "Mcp-Session-Id", session_id.c_str());
      MHD_Result ret = g_mhd->queue_response(c, 200, r);
      g_mhd->destroy_response(r);
      return ret;
    }
    Json answer = events->WaitAnswer();
    if (answer.is_null()) {
      // Cancelled: the protocol says no response follows, so the POST ends with no JSON-RPC
      // message at all (204), never a synthesized answer.
      return Reply(c, 204, "", {{"Mcp-Session-Id", session_id}});
    }
    return Reply(c, 200, DumpJson(answer), {{"Mcp-Session-Id", session_id}});
  }
  std::optional<Json> reply = server->Handle(msg);
  if (!reply) return Reply(c, 202, "", {{"Mcp-Session-Id", session_id}});
  return Reply(c, 200, DumpJson(*reply), {{"Mcp-Session-Id", session_id}});
}

void Completed(void*, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
  delete static_cast<Pending*>(*con_cls);
  *con_cls = nullptr;
}

}  // namespace

Result<HttpServeOptions> ParseListenAddress(const std::string& spec) {
  std::size_t colon = spec.rfind(':');
  if (colon == std::string::npos) return Fail(Code::kInvalidInput, "--http takes 127.0.0.1:PORT");
  HttpServeOptions o;
  o.host = spec.substr(0, colon);
  if (o.host == "localhost") o.host = "127.0.0.1";
  if (o.host != "127.0.0.1") {
    return Fail(Code::kInvalidInput, "--http binds to 127.0.0.1 only (got " + o.host + ")");
  }
  char* end = nullptr;
  long port = std::strtol(spec.c_str() + colon + 1, &end, 10);
  if (end == nullptr || *end != '\0' || port < 1 || port > 65535) {
    return Fail(Code::kInvalidInput, "--http: bad port in " + spec);
  }
  o.port = static_cast<int>(port);
  return o;
}

int ServeHttp(Session& session, const HttpServeOptions& options) {
  auto loaded = Mhd();
  if (!loaded) {
    std::fprintf(stderr, "cordon: %s\n", loaded.error().message.c_str());
    return 3;
  }
  g_mhd = *loaded;
  // On the heap: when the daemon cannot be stopped (below), its threads may still hold it, and it
  // is left to them.
  auto* state = new HttpState{&session, options, {}, {}, {}, 0, false};
  std::unique_ptr<HttpState> owned_state(state);
  HttpState& st = *state;
  // cordon listens and accepts; libmicrohttpd gets a connection only once its headers are in
  // (mcp/http_gate.h), so idle or slow sockets never hold one of its threads.
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int on = 1;
  if (!listener.valid() ||
      ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener.get(), 4096) != 0) {
    std::fprintf(stderr, "cordon: cannot listen on 127.0.0.1:%d: %s\n", options.port,
                 std::strerror(errno));
    return 3;
  }
  InstallTerminationHandler();  // core/signals.h: the signal decides cordon's exit code
  // Worker threads inherit a mask without these signals, so the main thread receives them.
  BlockTerminationSignals();
  // A thread per connection: an SSE body blocks its thread until the call has news. poll, not
  // select: a connection's descriptor may be past FD_SETSIZE.
  MHD_Daemon* d = g_mhd->start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
          MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC | MHD_USE_ERROR_LOG,
      0, nullptr, nullptr, &Handle, &st, MHD_OPTION_NOTIFY_COMPLETED, &Completed, nullptr,
      MHD_OPTION_CONNECTION_TIMEOUT, 300u, MHD_OPTION_CONNECTION_LIMIT, kMaxAdmittedConnections,
      MHD_OPTION_END);
  std::unique_ptr<HttpGate> gate;
  if (d != nullptr) {
    auto started = HttpGate::Start(
        std::move(listener), options.token, GateLimits{}, [d](int fd, const sockaddr_in& peer) {
          // Refused past the daemon's limit: it closes the fd then.
          (void)g_mhd->add_connection(d, fd, reinterpret_cast<const sockaddr*>(&peer), sizeof peer);
        });
    if (!started) {
      std::fprintf(stderr, "cordon: %s\n", started.error().message.c_str());
      g_mhd->stop_daemon(d);
      return 3;
    }
    gate = std::move(*started);
  }
  sigset_t unblock;
  sigemptyset(&unblock);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&unblock, sig);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  if (d == nullptr) {
    std::fprintf(stderr, "cordon: cannot start the HTTP server on 127.0.0.1:%d\n", options.port);
    return 3;
  }
  std::fprintf(stderr, "cordon: listening on http://127.0.0.1:%d/mcp%s\n", options.port,
               options.token.empty() ? " (WITHOUT a bearer token: --no-auth)" : "");
  // A signal interrupts the wait; the timeout covers one that lands between check and wait.
  while (TerminationSignal() == 0) ::poll(nullptr, 0, 250);
  // Cancel and finish every call first: their streams end, so the connection threads that
  // stop_daemon waits for can return.
  std::map<std::string, std::shared_ptr<McpServer>> sessions;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.stopping = true;
    sessions.swap(st.sessions);
  }
  gate.reset();  // nothing new is admitted
  for (auto& [id, server] : sessions) server->Drain(true);
  // libmicrohttpd 0.9.75 can hang for good in MHD_stop_daemon (thread per connection, sockets
  // added with MHD_add_connection: its listen thread waited on a mutex it held, after a flood).
  // The stop gets a bounded time; past it the session is finished and recorded and the process
  // exits without it (its connection threads end with it).
  auto stopped = std::make_shared<std::promise<void>>();
  std::future<void> done = stopped->get_future();
  std::thread([d, stopped] {
    g_mhd->stop_daemon(d);
    stopped->set_value();
  }).detach();
  if (done.wait_for(kDaemonStopGrace) != std::future_status::ready) {
    std::fprintf(stderr, "cordon: the HTTP server did not stop within %lld s; exiting without it\n",
                 static_cast<long long>(kDaemonStopGrace.count()));
    // Its threads may still be inside a request, holding the session, the hub's clients and
    // the MCP sessions: none of them may be torn down under them. The session is finished here
    // and the process ends at once, with the signal's exit code (what serve would have returned).
    g_abandoned_state = owned_state.release();
    session.Finish();
    std::fflush(nullptr);
    std::_Exit(128 + TerminationSignal());
  }
  return 0;
}

}  // namespace cordon::mcp
