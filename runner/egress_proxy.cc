// The egress proxy engine (runner/egress_proxy.h, docs/adr/0005-egress-proxy.md): one accept
// thread over every listener, one thread per connection (getaddrinfo blocks, and a build opens
// tens of connections, not thousands), and a record for every connection or plain HTTP request,
// allowed or refused. What is read and written on the wire is runner/http_wire.h's and
// runner/socks5.h's; the bytes are moved by runner/egress_relay.h; what is allowed is
// policy/decision.h's Decide.
#include "runner/egress_proxy.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "policy/decision.h"
#include "runner/egress_relay.h"
#include "runner/http_wire.h"
#include "runner/socks5.h"

namespace cordon {
namespace {

using relay::Clock;
using relay::kBodyIdleMs;
using relay::kHeadIdleMs;
using relay::SendAll;

constexpr int kConnectMs = 10'000;  // per upstream address tried
// Open connections per listener: beyond it the accept thread stops accepting on that listener
// (the kernel's backlog holds the rest) until one ends, so a sandbox cannot exhaust threads.
constexpr std::size_t kMaxOpenPerListener = 256;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A sockaddr for an address and port.
socklen_t MakeSockaddr(const IpAddress& a, int port, sockaddr_storage* ss) {
  std::memset(ss, 0, sizeof *ss);
  if (a.v4) {
    auto* s4 = reinterpret_cast<sockaddr_in*>(ss);
    s4->sin_family = AF_INET;
    s4->sin_port = htons(static_cast<std::uint16_t>(port));
    std::memcpy(&s4->sin_addr, a.bytes.data() + 12, 4);
    return sizeof *s4;
  }
  auto* s6 = reinterpret_cast<sockaddr_in6*>(ss);
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(static_cast<std::uint16_t>(port));
  std::memcpy(&s6->sin6_addr, a.bytes.data(), 16);
  return sizeof *s6;
}

std::optional<IpAddress> FromSockaddr(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  } else {
    return std::nullopt;
  }
  return ParseIpAddress(buf);
}

}  // namespace

// One listener: its socket, its rules, and the connections open on it.
struct ListenerState;
struct Connection {
  ListenerState* listener = nullptr;
  int client = -1;    // valid while the connection thread runs (it owns the fd)
  int upstream = -1;  // set once connected, under Impl::mu
  bool cancelled = false;
};

struct ListenerState {
  std::uint64_t id = 0;
  UniqueFd fd;  // invalid for a Connect-only use after removal
  EgressPolicy policy;
  std::string identity;
  NetworkSink sink;
  std::shared_ptr<EgressActivity> activity;  // may be null
  bool removed = false;
  bool broken = false;         // accept failed for good (EINVAL, ENOTSOCK): no longer polled
  std::set<Connection*> open;  // guarded by Impl::mu
  int active = 0;              // connection threads that may still call `sink`
};

struct EgressProxy::Impl {
  std::vector<IpAddress> host_addresses;
  std::atomic<std::uint64_t> resolver_queries{0};
  UniqueFd wake;  // eventfd: the accept thread rebuilds its poll set

  std::mutex mu;
  std::condition_variable cv;  // `active` dropped, or the accept thread passed a generation
  std::map<std::uint64_t, std::shared_ptr<ListenerState>> listeners;
  std::uint64_t next_id = 1;
  std::uint64_t generation = 0;  // bumped by the accept thread each time it rebuilds
  bool stopping = false;
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::list<Worker> workers;  // guarded by mu
  std::thread acceptor;

  void Wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake.get(), &one, sizeof one);
  }
  void AcceptLoop();
  void Spawn(const std::shared_ptr<ListenerState>& l, UniqueFd client);  // mu held
  void ReapLocked();
  void Serve(ListenerState& l, Connection& c, UniqueFd client);
  void EndListener(const std::shared_ptr<ListenerState>& l, std::unique_lock<std::mutex>& lock);
};

namespace {

// One client connection: what it asks (HTTP CONNECT, a plain HTTP request, SOCKS5), the decision,
// the upstream connection, the relay and the record; apart from the bookkeeping of threads and
// listeners.
class ProxyConnection {
 public:
  ProxyConnection(const std::vector<IpAddress>& host_addresses, std::atomic<std::uint64_t>& queries,
                  ListenerState& l, Connection& c, std::mutex& mu)
      : host_addresses_(host_addresses),
        queries_(queries),
        l_(l),
        c_(c),
        mu_(mu),
        start_(Clock::now()) {
    ev_.identity = l.identity;
  }

  // Whatever path a connection took, its upstream is unregistered before it is closed, so that
  // RemoveListener never shuts down a reused descriptor number.
  ~ProxyConnection() { ReleaseUpstream(); }
  ProxyConnection(const ProxyConnection&) = delete;
  ProxyConnection& operator=(const ProxyConnection&) = delete;

  void Run(int client) {
    client_ = client;
    reader_.fd = client;
    reader_.deadline = start_ + std::chrono::milliseconds(kHeadIdleMs);
    if (!reader_.Need(1, kHeadIdleMs)) {
      ev_.protocol = "http";
      ev_.reason = reader_.timed_out ? "no request within 10 s"
                                     : "the client closed the connection before sending a request";
      ev_.status = 400;
      if (reader_.timed_out) SendAll(client_, ErrorResponse(400, ev_.reason));
      return Finish();
    }
    switch (SniffProxyProtocol(static_cast<unsigned char>(reader_.pending()[0]))) {
      case ProxyProtocol::kSocks5:
        return Socks();
      case ProxyProtocol::kHttp:
        return Http();
      case ProxyProtocol::kUnknown:
        ev_.protocol = "http";
        return RefuseHttp(400, std::string(kNotAProxyRequest));
    }
  }

 private:
  // The record goes out once, at the end, with the duration.
  void Finish() {
    ev_.duration_ms = MsSince(start_);
    if (l_.sink) l_.sink(ev_);
  }

  void RefuseHttp(int code, const std::string& reason, bool policy = false) {
    ev_.allowed = false;
    ev_.reason = reason;
    ev_.status = code;
    if (!policy) ev_.rule.clear();
    SendAll(client_, ErrorResponse(code, reason));
    Finish();
  }
  void RefuseHttp(const Error& error) { RefuseHttp(HttpStatusFor(error), error.message); }

  void UpstreamFailedHttp(const std::string& error) {
    ev_.allowed = true;
    ev_.error = error;
    ev_.status = 502;
    SendAll(client_, ErrorResponse(502, error));
    Finish();
  }

  // The system resolver's addresses for an allowed name, each once; or why there are none.
  Result<std::vector<IpAddress>> Resolve(const std::string& name) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    ++queries_;
    const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
      return Fail(Code::kServerUnavailable, "cannot resolve " + name + ": " + ::gai_strerror(rc));
    }
    std::vector<IpAddress> addrs;
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      if (auto a = FromSockaddr(ai->ai_addr)) {
        if (std::find(addrs.begin(), addrs.end(), *a) == addrs.end()) addrs.push_back(*a);
      }
    }
    ::freeaddrinfo(res);
    if (addrs.empty()) {
      return Fail(Code::kServerUnavailable, "cannot resolve " + name + ": no IPv4 or IPv6 address");
    }
    return addrs;
  }

  // The decision (policy/decision.h), resolution and address checks; on success `candidates_`
  // holds the addresses that may be connected to. On failure: `bad_input_` (the host does not
  // parse), `refused_` (policy; `reason_` set) or `error_` (resolution failed).
  bool DecideTarget(std::string_view raw_host, int port) {
    ev_.port = port;
    auto host = ParseEgressHost(raw_host);
    if (!host) {
      ev_.host = OneLine(raw_host.substr(0, 255));
      bad_input_ = true;
      reason_ = host.error().message;
      return false;
    }
    ev_.host = host->name;
    ConnectDecision d = Decide(l_.policy, ConnectAsk{*host, port});
    if (!d.rule.empty()) {
      ev_.rule = d.rule;
      ev_.rule_source = d.source;
    }
    if (!d.allowed()) {
      reason_ = d.reason;
      refused_ = true;
      return false;
    }
    // Only now, with the name allowed, may a resolver hear of it.
    std::vector<IpAddress> addrs;
    if (host->address) {
      addrs.push_back(*host->address);
    } else if (!d.pinned.empty()) {
      addrs = d.pinned;
    } else {
      auto resolved = Resolve(host->name);
      if (!resolved) {
        error_ = resolved.error().message;
        return false;
      }
      addrs = std::move(*resolved);
    }
    // A literal was allowed by a rule naming it, and pinned addresses by the resolve entry of
    // this very name; a resolver's answer must be public and not this host's, or be named by an
    // allow rule for this port.
    return CheckAddresses(host->name, port, addrs, host->address.has_value() || !d.pinned.empty());
  }

  // Deny rules naming an address beat every allow; an address a resolver gave must be public
  // and not this host's unless `vouched` or an allow rule names it for this port.
  bool CheckAddresses(const std::string& name, int port, const std::vector<IpAddress>& addrs,
                      bool vouched) {
    std::string refused_text;
    const DomainRule* denied = nullptr;
    for (const IpAddress& a : addrs) {
      if (const DomainRule* r = AddressDeniedByRule(l_.policy, a, port)) {
        if (!denied) denied = r;
        continue;
      }
      const auto why =
          vouched ? std::nullopt : ResolvedAddressRefusal(l_.policy, host_addresses_, a, port);
      if (!why) {
        candidates_.push_back(a);
        continue;
      }
      if (!refused_text.empty()) refused_text += ", ";
      refused_text += a.Text() + " (" + *why + ")";
    }
    if (candidates_.empty() && denied != nullptr && refused_text.empty()) {
      reason_ = name + " resolves to an address denied by deny_domains rule " + denied->text +
                " (" + denied->source + ")";
      refused_ = true;
      ev_.rule = denied->text;
      ev_.rule_source = denied->source;
      return false;
    }
    if (candidates_.empty()) {
      reason_ = name + " resolves to " + refused_text +
                ", which no allow_domains rule names for port " + std::to_string(port) +
                " (a name may not lead into this host or a private network)";
      refused_ = true;
      ev_.rule.clear();
      ev_.rule_source.clear();
      return false;
    }
    return true;
  }

  // Connects to the first candidate that answers; the socket (owned by the connection: it stays
  // registered for RemoveListener until the connection ends), or -1 with `error_` set.
  int ConnectUpstream(int port) {
    std::string errors;
    for (const IpAddress& a : candidates_) {
      sockaddr_storage ss;
      const socklen_t len = MakeSockaddr(a, port, &ss);
      UniqueFd s(::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!s.valid()) {
        errors += (errors.empty() ? "" : "; ") + a.Text() + ": socket: " + std::strerror(errno);
        continue;
      }
      {
        // Registered before connecting, so that RemoveListener can interrupt the wait.
        std::lock_guard lock(mu_);
        if (c_.cancelled) {
          error_ = "the proxy listener was removed";
          return -1;
        }
        c_.upstream = s.get();
      }
      int err = 0;
      if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
          const int r = relay::PollOne(s.get(), POLLOUT, kConnectMs);
          if (r == 0) {
            err = ETIMEDOUT;
          } else {
            socklen_t el = sizeof err;
            if (::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
          }
        }
      }
      bool cancelled = false;
      {
        std::lock_guard lock(mu_);
        cancelled = c_.cancelled;
        if (err != 0 || cancelled) c_.upstream = -1;
      }
      if (cancelled) {
        error_ = "the proxy listener was removed";
        return -1;
      }
      if (err == 0) {
        ev_.address = a.Text();
        relay::SetNoDelay(s.get());
        up_ = std::move(s);
        return up_.get();
      }
      errors += (errors.empty() ? "" : "; ") + a.Text() + ":" + std::to_string(port) + ": " +
                (err == ETIMEDOUT ? std::string("no answer within 10 s") : std::strerror(err));
    }
    error_ = "cannot connect to " + ev_.host + ": " + errors;
    return -1;
  }

  void ReleaseUpstream() {
    std::lock_guard lock(mu_);
    c_.upstream = -1;
  }

  // Bytes the client sent after its request without waiting (a TLS ClientHello) go first, then
  // both directions until both end. A cut by RemoveListener (or the proxy's end) says so in the
  // record.
  void OpenTunnel(int up) {
    const std::string early = reader_.TakeAll();
    if (!early.empty()) {
      if (!SendAll(up, early)) {
        ev_.error = "the upstream went away";
        ReleaseUpstream();
        return Finish();
      }
      ev_.bytes_up += early.size();
    }
    if (auto t = relay::Tunnel(client_, up, &ev_.bytes_up, &ev_.bytes_down); !t) {
      ev_.error = t.error().message;
    }
    bool cancelled = false;
    {
      std::lock_guard lock(mu_);
      cancelled = c_.cancelled;
      c_.upstream = -1;
    }
    if (cancelled && ev_.error.empty()) ev_.error = "cut: the proxy listener was removed";
    Finish();
  }

  // ---- HTTP: CONNECT and absolute-form ----

  void Http() {
    ev_.protocol = "http";
    auto head = relay::ReadHead(reader_, kMaxRequestHead, kHeadIdleMs);
    if (!head) return RefuseHttp(400, head.error().message);
    reader_.deadline.reset();
    auto request = ParseRequestHead(*head);
    if (!request) return RefuseHttp(request.error());
    ev_.method = request->method;
    if (request->method == "CONNECT") {
      ev_.protocol = "connect";
      ev_.method.clear();
      return Connect(request->target);
    }
    return Plain(std::move(*request));
  }

  void Connect(const std::string& target) {
    auto authority = ParseAuthority(target, 0);
    if (!authority) {
      ev_.host = OneLine(std::string_view(target).substr(0, 255));
      return RefuseHttp(authority.error());
    }
    if (!DecideTarget(authority->host, authority->port)) return DecisionFailedHttp();
    const int up = ConnectUpstream(authority->port);
    if (up < 0) return UpstreamFailedHttp(error_);
    ev_.allowed = true;
    ev_.status = 200;
    if (!SendAll(client_, kConnectEstablished)) {
      ev_.error = "the client went away before the tunnel opened";
      ReleaseUpstream();
      return Finish();
    }
    OpenTunnel(up);
  }

  void DecisionFailedHttp() {
    if (bad_input_) return RefuseHttp(400, reason_);
    if (refused_) return RefuseHttp(403, reason_, true);
    return UpstreamFailedHttp(error_);
  }

  // Whether a Host header names the URL's host (`url_host`, when it parsed) and port, so that the
  // upstream (or a proxy in front of it) cannot be steered to a name the decision never saw.
  static bool HostHeaderNames(const std::string& value, const Result<EgressHost>& url_host,
                              int port) {
    auto authority = ParseAuthority(value, 80);
    if (!authority || !url_host) return false;
    auto parsed = ParseEgressHost(authority->host);
    return parsed && parsed->name == url_host->name && authority->port == port;
  }

  void Plain(RequestHead request) {
    auto url = ParseAbsoluteUrl(request.target);
    if (!url) return RefuseHttp(url.error());
    // Every refusal from here on names what the client asked for: a record with no host would
    // hide from the log which host a refused request tried to reach.
    ev_.host = OneLine(std::string_view(url->authority).substr(0, 255));
    auto authority = ParseUrlAuthority(url->authority);
    if (!authority) return RefuseHttp(authority.error());
    const std::string& host = authority->host;
    const int port = authority->port;
    auto url_host = ParseEgressHost(host);
    if (url_host) ev_.host = url_host->name;
    ev_.port = port;
    auto host_header = SingleHostHeader(request.headers);
    if (!host_header) return RefuseHttp(host_header.error());
    if (*host_header && !HostHeaderNames(**host_header, url_host, port)) {
      ev_.host = url_host ? url_host->name : OneLine(std::string_view(host).substr(0, 255));
      return RefuseHttp(403, "the Host header \"" +
                                 OneLine(std::string_view(**host_header).substr(0, 100)) +
                                 "\" does not name the URL's host " + AuthorityText(host, port));
    }
    // The body's framing, before anything is decided on the network.
    auto framing = ParseBodyFraming(request.headers);
    if (!framing) return RefuseHttp(framing.error());
    if (!DecideTarget(host, port)) return DecisionFailedHttp();
    const int up = ConnectUpstream(port);
    if (up < 0) return UpstreamFailedHttp(error_);
    ev_.allowed = true;
    if (!SendAll(up,
                 UpstreamRequestHead(request, url->path, *authority, host_header->has_value()))) {
      ReleaseUpstream();
      return UpstreamFailedHttp("the upstream closed the connection before taking the request");
    }
    if (framing->expect_continue) SendAll(client_, kContinueResponse);
    if (auto body = relay::ForwardBody(reader_, up, *framing, &ev_.bytes_up); !body) {
      ReleaseUpstream();
      if (body.error().code == Code::kInvalidInput) {
        return RefuseHttp(400, body.error().message, true);
      }
      ev_.error = body.error().message;
      return Finish();
    }
    // Whatever the client sent after the request (a pipelined second request) is dropped: the
    // upstream only ever sees the one request decided here.
    reader_.TakeAll();
    relay::ResponseRelay response;
    relay::RelayResponse(up, client_, request.method == "HEAD", response);
    ev_.status = response.status;
    ev_.error = std::move(response.error);
    ev_.bytes_down = response.bytes_down;
    ReleaseUpstream();
    Finish();
  }

  // ---- SOCKS5 (RFC 1928): no authentication, CONNECT, a name or an address ----

  void SocksReply(Socks5Reply reply) { SendAll(client_, Socks5ReplyBytes(reply)); }
  void SocksRefuse(Socks5Reply reply, const std::string& reason, bool policy = false) {
    ev_.allowed = false;
    ev_.reason = reason;
    ev_.status = static_cast<int>(reply);
    if (!policy) ev_.rule.clear();
    SocksReply(reply);
    Finish();
  }
  // A client that does not speak SOCKS5 as served gets no reply: it is cut.
  void SocksBad(const std::string& reason) {
    ev_.allowed = false;
    ev_.reason = reason;
    ev_.status = static_cast<int>(Socks5Reply::kGeneralFailure);
    Finish();
  }
  void SocksUpstreamFailed(Socks5Reply reply) {
    ev_.allowed = true;
    ev_.error = error_;
    ev_.status = static_cast<int>(reply);
    SocksReply(reply);
    Finish();
  }

  // Reads until `parse` has a whole frame and takes it; the parser's error, or `ended` when the
  // client stopped (or the head deadline passed) first.
  template <typename Frame>
  Result<Frame> ReadSocks(Result<std::optional<Frame>> (*parse)(std::string_view),
                          std::string_view ended) {
    while (true) {
      ASSIGN_OR_RETURN(std::optional<Frame> frame, parse(reader_.pending()));
      if (frame) {
        reader_.Take(frame->size);
        return *std::move(frame);
      }
      if (!reader_.More(kHeadIdleMs)) return Fail(Code::kCancelled, std::string(ended));
    }
  }

  void Socks() {
    ev_.protocol = "socks5";
    auto greeting = ReadSocks(&ParseSocks5Greeting, "the SOCKS5 greeting ended early");
    if (!greeting) return SocksBad(greeting.error().message);
    if (!greeting->no_auth) {
      SendAll(client_, Socks5MethodReply(false));
      return SocksBad(std::string(kSocks5NoAcceptableMethod));
    }
    if (!SendAll(client_, Socks5MethodReply(true))) {
      return SocksBad("the client went away during the SOCKS5 greeting");
    }
    auto request = ReadSocks(&ParseSocks5Request, "the SOCKS5 request ended early");
    if (!request) {
      if (request.error().code == Code::kUnsupported) {
        return SocksRefuse(Socks5Reply::kAddressTypeNotSupported, request.error().message);
      }
      return SocksBad(request.error().message);
    }
    reader_.deadline.reset();
    ev_.host = OneLine(std::string_view(request->host).substr(0, 255));
    ev_.port = request->port;
    if (auto served = CheckSocks5Connect(*request); !served) {
      return SocksRefuse(served.error().code == Code::kUnsupported
                             ? Socks5Reply::kCommandNotSupported
                             : Socks5Reply::kNotAllowed,
                         served.error().message);
    }
    if (!DecideTarget(request->host, request->port)) {
      if (bad_input_) return SocksRefuse(Socks5Reply::kNotAllowed, reason_);
      if (refused_) return SocksRefuse(Socks5Reply::kNotAllowed, reason_, true);
      return SocksUpstreamFailed(Socks5Reply::kHostUnreachable);
    }
    const int up = ConnectUpstream(request->port);
    if (up < 0) {
      return SocksUpstreamFailed(error_.find("refused") != std::string::npos
                                     ? Socks5Reply::kConnectionRefused
                                     : Socks5Reply::kHostUnreachable);
    }
    ev_.allowed = true;
    ev_.status = static_cast<int>(Socks5Reply::kSucceeded);
    SocksReply(Socks5Reply::kSucceeded);
    OpenTunnel(up);
  }

  const std::vector<IpAddress>& host_addresses_;
  std::atomic<std::uint64_t>& queries_;
  UniqueFd up_;  // closed only after ~ProxyConnection has unregistered it
  ListenerState& l_;
  Connection& c_;
  std::mutex& mu_;
  Clock::time_point start_;
  NetworkEvent ev_;
  int client_ = -1;
  relay::Reader reader_;
  std::vector<IpAddress> candidates_;
  bool refused_ = false;
  bool bad_input_ = false;
  std::string reason_;
  std::string error_;
};

}  // namespace

void EgressProxy::Impl::Serve(ListenerState& l, Connection& c, UniqueFd client) {
  relay::BlockSigpipe();
  relay::SetNonBlocking(client.get());
  relay::SetNoDelay(client.get());
  ProxyConnection(host_addresses, resolver_queries, l, c, mu).Run(client.get());
  if (l.activity) ++l.activity->finished;
  relay::LingerClose(client.get());
  std::lock_guard lock(mu);
  // Unregistered before the descriptor closes, so RemoveListener never shuts down a reused
  // number; the sink is never called after this point.
  if (l.open.size() == kMaxOpenPerListener) Wake();  // the accept thread may take it again
  l.open.erase(&c);
  c.client = -1;
  --l.active;
  cv.notify_all();
}

// mu held.
void EgressProxy::Impl::Spawn(const std::shared_ptr<ListenerState>& l, UniqueFd client) {
  auto conn = std::make_shared<Connection>();
  conn->listener = l.get();
  conn->client = client.get();
  l->open.insert(conn.get());
  ++l->active;
  if (l->activity) ++l->activity->accepted;
  Worker& w = workers.emplace_back();
  w.thread = std::thread([this, l, conn, fd = client.Release(), &w]() mutable {
    Serve(*l, *conn, UniqueFd(fd));
    w.done = true;
  });
}

void EgressProxy::Impl::ReapLocked() {
  for (auto it = workers.begin(); it != workers.end();) {
    if (it->done) {
      it->thread.join();
      it = workers.erase(it);
    } else {
      ++it;
    }
  }
}

void EgressProxy::Impl::AcceptLoop() {
  relay::BlockSigpipe();
  while (true) {
    std::vector<std::shared_ptr<ListenerState>> ls;
    {
      std::lock_guard lock(mu);
      if (stopping) return;
      ReapLocked();
      for (auto& [id, l] : listeners) {
        if (l->fd.valid() && !l->broken && l->open.size() < kMaxOpenPerListener) {
          ls.push_back(l);
        }
      }
      ++generation;
      cv.notify_all();
    }
    std::vector<pollfd> p;
    p.push_back({wake.get(), POLLIN, 0});
    for (auto& l : ls) p.push_back({l->fd.get(), POLLIN, 0});
    // Also wakes now and then to join finished connection threads.
    const int r = ::poll(p.data(), p.size(), 5000);
    if (r < 0) {
      // Never give up: RemoveListener waits for this thread to come round again.
      if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (r == 0) continue;
    if (p[0].revents != 0) {
      std::uint64_t v;
      [[maybe_unused]] const ssize_t n = ::read(wake.get(), &v, sizeof v);
      continue;  // the listener set changed: rebuild before touching any descriptor
    }
    for (std::size_t i = 1; i < p.size(); ++i) {
      if (p[i].revents == 0) continue;
      UniqueFd c(::accept4(p[i].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!c.valid()) {
        const int err = errno;
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
          // Out of descriptors: the listener stays readable, so a retry at once would spin.
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        } else if (err == EINVAL || err == ENOTSOCK || err == EOPNOTSUPP || err == EBADF) {
          std::lock_guard lock(mu);
          ls[i - 1]->broken = true;  // not a listening socket (any more): stop polling it
        }
        continue;  // EAGAIN, ECONNABORTED: the next poll retries
      }
      std::lock_guard lock(mu);
      if (stopping || ls[i - 1]->removed) continue;
      Spawn(ls[i - 1], std::move(c));
      if (ls[i - 1]->open.size() >= kMaxOpenPerListener) break;  // rebuild without it
    }
  }
}

// Marks the listener removed, shuts its connections down and waits for their threads to be
// past their last sink call. `lock` holds mu.
void EgressProxy::Impl::EndListener(const std::shared_ptr<ListenerState>& l,
                                    std::unique_lock<std::mutex>& lock) {
  l->removed = true;
  // The accept thread may be polling this descriptor: wait until it has rebuilt its set
  // without it before closing, so the number is never polled or accepted on after reuse.
  if (acceptor.joinable() && !stopping) {
    const std::uint64_t seen = generation;
    Wake();
    cv.wait(lock, [&] { return generation != seen; });
  }
  l->fd.Reset();
  for (Connection* c : l->open) {
    c->cancelled = true;
    if (c->client >= 0) ::shutdown(c->client, SHUT_RDWR);
    if (c->upstream >= 0) ::shutdown(c->upstream, SHUT_RDWR);
  }
  cv.wait(lock, [&] { return l->active == 0; });
}

EgressProxy::EgressProxy() : impl_(std::make_unique<Impl>()) {}

Result<std::unique_ptr<EgressProxy>> EgressProxy::Start() {
  std::unique_ptr<EgressProxy> p(new EgressProxy());
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return SysFail(Code::kInternal, "getifaddrs", "");
  for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (auto a = FromSockaddr(i->ifa_addr)) {
      auto& v = p->impl_->host_addresses;
      if (std::find(v.begin(), v.end(), *a) == v.end()) v.push_back(*a);
    }
  }
  ::freeifaddrs(ifs);
  p->impl_->wake = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!p->impl_->wake.valid()) return SysFail(Code::kInternal, "eventfd", "");
  Impl* impl = p->impl_.get();
  p->impl_->acceptor = std::thread([impl] { impl->AcceptLoop(); });
  return p;
}

EgressProxy::~EgressProxy() {
  std::unique_lock lock(impl_->mu);
  impl_->stopping = true;
  impl_->Wake();
  lock.unlock();
  if (impl_->acceptor.joinable()) impl_->acceptor.join();
  lock.lock();
  auto listeners = std::move(impl_->listeners);
  impl_->listeners.clear();
  for (auto& [id, l] : listeners) impl_->EndListener(l, lock);
  lock.unlock();
  for (auto& w : impl_->workers) {
    if (w.thread.joinable()) w.thread.join();
  }
}

std::uint64_t EgressProxy::AddListener(UniqueFd listener, EgressPolicy policy, std::string identity,
                                       NetworkSink sink, std::shared_ptr<EgressActivity> activity) {
  relay::SetNonBlocking(
      listener.get());  // a connection reset between poll and accept must not block
  auto l = std::make_shared<ListenerState>();
  l->fd = std::move(listener);
  l->policy = std::move(policy);
  l->identity = std::move(identity);
  l->sink = std::move(sink);
  l->activity = std::move(activity);
  std::lock_guard lock(impl_->mu);
  l->id = impl_->next_id++;
  impl_->listeners[l->id] = l;
  impl_->Wake();
  return l->id;
}

void EgressProxy::RemoveListener(std::uint64_t id) {
  std::unique_lock lock(impl_->mu);
  auto it = impl_->listeners.find(id);
  if (it == impl_->listeners.end()) return;
  auto l = it->second;
  impl_->listeners.erase(it);
  impl_->EndListener(l, lock);
}

Result<UniqueFd> EgressProxy::Connect(std::uint64_t id) {
  int sv[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return SysFail(Code::kInternal, "socketpair", "");
  }
  UniqueFd ours(sv[0]);
  UniqueFd theirs(sv[1]);
  std::lock_guard lock(impl_->mu);
  auto it = impl_->listeners.find(id);
  if (it == impl_->listeners.end() || impl_->stopping) {
    return Fail(Code::kNotFound, "no egress proxy listener " + std::to_string(id));
  }
  impl_->Spawn(it->second, std::move(ours));
  return theirs;
}

const std::vector<IpAddress>& EgressProxy::host_addresses() const { return impl_->host_addresses; }

std::uint64_t EgressProxy::resolver_queries() const { return impl_->resolver_queries.load(); }

std::vector<std::pair<std::string, std::string>> ProxyEnvironment() {
  const std::string http = "http://127.0.0.1:" + std::to_string(kSandboxProxyPort);
  const std::string socks = "socks5h://127.0.0.1:" + std::to_string(kSandboxProxyPort);
  return {{"HTTP_PROXY", http},
          {"HTTPS_PROXY", http},
          {"http_proxy", http},
          {"https_proxy", http},
          {"ALL_PROXY", socks},
          {"all_proxy", socks},
          {"NO_PROXY", std::string(kDefaultNoProxy)},
          {"no_proxy", std::string(kDefaultNoProxy)},
          {"NODE_USE_ENV_PROXY", "1"}};
}

}  // namespace cordon
