// The egress proxy engine (runner/egress_proxy.h, docs/adr/0005-egress-proxy.md): one accept
// thread over every listener, one thread per connection (getaddrinfo blocks, and a build opens
// tens of connections, not thousands), splice(2) tunnels, and a record for every connection or
// plain HTTP request, allowed or refused.
#include "runner/egress_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
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

#include "core/text.h"

namespace cordon {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxHead = 16 * 1024;          // a request head, or a SOCKS request
constexpr std::size_t kMaxResponseHead = 64 * 1024;  // an upstream's response head
constexpr int kHeadIdleMs = 10'000;  // the client must send its whole head by then (no drip)
constexpr int kConnectMs = 10'000;   // per upstream address tried
constexpr int kBodyIdleMs = 60'000;  // plain HTTP body and response, idle
constexpr std::size_t kMaxChunkLine = 1024;  // "1a2b;ext=...\r\n"
constexpr std::size_t kMaxTrailers = 16 * 1024;
constexpr std::size_t kSpliceChunk = 1 << 20;
constexpr int kPipeSize = 1 << 20;
// Open connections per listener: beyond it the accept thread stops accepting on that listener
// (the kernel's backlog holds the rest) until one ends, so a sandbox cannot exhaust threads.
constexpr std::size_t kMaxOpenPerListener = 256;

// Writes to a peer that went away raise SIGPIPE, and splice(2) into a socket has no
// MSG_NOSIGNAL: every proxy thread blocks it, so it stays pending on that thread and is
// discarded when the thread ends, instead of killing cordon.
void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A reason goes into a header and a one-line body: no control characters, bounded.
std::string OneLine(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 400)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int PollOne(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  while (true) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r;
    return p.revents;
  }
}

// Sends all of `data` on a non-blocking socket, waiting for room at most `idle_ms` each time.
bool SendAll(int fd, std::string_view data, int idle_ms = kBodyIdleMs) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int r = PollOne(fd, POLLOUT, idle_ms);
      if (r <= 0 || (r & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

// Buffered reads from a non-blocking socket, each wait bounded by an idle timeout.
struct Reader {
  int fd = -1;
  std::string buf;
  std::size_t pos = 0;
  bool eof = false;
  bool timed_out = false;
  bool failed = false;
  // While set, no wait goes past it: the head has a deadline, not only an idle timeout, so a
  // client dripping a byte at a time cannot hold a connection thread.
  std::optional<Clock::time_point> deadline;

  std::string_view pending() const { return std::string_view(buf).substr(pos); }
  // Reads more bytes; false on EOF, error or timeout (the flags say which).
  bool More(int idle_ms) {
    if (pos > 0 && pos == buf.size()) {
      buf.clear();
      pos = 0;
    }
    char tmp[16384];
    while (true) {
      const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
      if (n > 0) {
        buf.append(tmp, static_cast<std::size_t>(n));
        return true;
      }
      if (n == 0) {
        eof = true;
        return false;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        failed = true;
        return false;
      }
      int wait = idle_ms;
      if (deadline) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
        wait = static_cast<int>(std::clamp<long>(left.count(), 0, idle_ms));
      }
      const int r = wait > 0 ? PollOne(fd, POLLIN, wait) : 0;
      if (r == 0) {
        timed_out = true;
        return false;
      }
      if (r < 0 || (r & POLLNVAL)) {
        failed = true;
        return false;
      }
    }
  }
  // At least `n` bytes pending, reading as needed.
  bool Need(std::size_t n, int idle_ms) {
    while (buf.size() - pos < n) {
      if (!More(idle_ms)) return false;
    }
    return true;
  }
  std::string Take(std::size_t n) {
    std::string out = buf.substr(pos, n);
    pos += out.size();
    return out;
  }
  // A line ending in "\n" (with its terminator), at most `max` bytes; nullopt on failure.
  std::optional<std::string> Line(std::size_t max, int idle_ms, bool* too_long) {
    while (true) {
      const auto nl = pending().find('\n');
      if (nl != std::string_view::npos) return Take(nl + 1);
      if (pending().size() >= max) {
        *too_long = true;
        return std::nullopt;
      }
      if (!More(idle_ms)) return std::nullopt;
    }
  }
};

// Reads through the blank line that ends an HTTP head; the head with its terminator, or an
// empty string with `why` set.
std::string ReadHead(Reader& r, std::size_t max, int idle_ms, std::string* why) {
  std::size_t searched = 0;
  while (true) {
    const std::string_view p = r.pending();
    for (std::size_t i = searched; i < p.size(); ++i) {
      if (p[i] != '\n') continue;
      if (i >= 1 && p[i - 1] == '\n') return r.Take(i + 1);
      if (i >= 2 && p[i - 1] == '\r' && p[i - 2] == '\n') return r.Take(i + 1);
    }
    searched = p.size();
    if (p.size() > max) {
      *why = "the request head is larger than " + std::to_string(max / 1024) + " KiB";
      return {};
    }
    if (!r.More(idle_ms)) {
      if (r.timed_out) {
        *why = "no complete request head within " + std::to_string(idle_ms / 1000) + " s";
      } else if (r.eof && r.pending().empty()) {
        *why = "the client closed the connection before sending a request";
      } else {
        *why = "the connection ended inside the request head";
      }
      return {};
    }
  }
}

struct Header {
  std::string name;  // as sent
  std::string lower;
  std::string value;
};

// The lines of a head after the first: "Name: value", no obsolete line folding.
bool ParseHeaders(std::string_view head, std::string* first, std::vector<Header>* out,
                  std::string* why) {
  bool have_first = false;
  while (!head.empty()) {
    auto nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head = nl == std::string_view::npos ? std::string_view() : head.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\0') != std::string_view::npos || line.find('\r') != std::string_view::npos) {
      *why = "the request head has a NUL or a stray carriage return";
      return false;
    }
    if (!have_first) {
      *first = std::string(line);
      have_first = true;
      continue;
    }
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      *why = "the request head has a folded header line";
      return false;
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      *why = "the request head has a header line without a name";
      return false;
    }
    std::string_view name = line.substr(0, colon);
    for (char c : name) {
      const auto u = static_cast<unsigned char>(c);
      if (u <= 0x20 || u >= 0x7f || c == '(' || c == ')' || c == ',' || c == '/' || c == ':' ||
          c == ';' || c == '<' || c == '=' || c == '>' || c == '?' || c == '@' || c == '[' ||
          c == '\\' || c == ']' || c == '{' || c == '}' || c == '"') {
        *why = "the request head has a header name with a character no header name has";
        return false;
      }
    }
    out->push_back(
        {std::string(name), AsciiLower(name), std::string(Trim(line.substr(colon + 1)))});
  }
  return true;
}

std::string StatusText(int code) {
  switch (code) {
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 405:
      return "Method Not Allowed";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    default:
      return "Error";
  }
}

std::string ErrorResponse(int code, const std::string& reason) {
  const std::string line = OneLine(reason);
  const std::string body = "cordon: " + line + "\n";
  return "HTTP/1.1 " + std::to_string(code) + " " + StatusText(code) +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\nX-Cordon-Reason: " + line +
         "\r\n\r\n" + body;
}

// "host:port" of a CONNECT target or an absolute-form authority. `default_port` 0: required.
bool SplitAuthority(std::string_view a, int default_port, std::string* host, int* port,
                    std::string* why) {
  std::string_view h = a;
  std::optional<std::string_view> p;
  if (!a.empty() && a.front() == '[') {
    const auto close = a.find(']');
    if (close == std::string_view::npos) {
      *why = "the target has an unclosed [";
      return false;
    }
    h = a.substr(0, close + 1);
    std::string_view rest = a.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        *why = "the target has junk after ]";
        return false;
      }
      p = rest.substr(1);
    }
  } else if (const auto colon = a.rfind(':'); colon != std::string_view::npos) {
    if (a.find(':') != colon) {
      *why = "an IPv6 target must be in brackets";
      return false;
    }
    h = a.substr(0, colon);
    p = a.substr(colon + 1);
  }
  if (p) {
    if (p->empty() || p->size() > 5 ||
        !std::all_of(p->begin(), p->end(), [](char c) { return c >= '0' && c <= '9'; })) {
      *why = "the target's port is not a number 1..65535";
      return false;
    }
    *port = std::stoi(std::string(*p));
    if (*port < 1 || *port > 65535) {
      *why = "the target's port is not a number 1..65535";
      return false;
    }
  } else if (default_port == 0) {
    *why = "the CONNECT target has no port (write host:port)";
    return false;
  } else {
    *port = default_port;
  }
  *host = std::string(h);
  return true;
}

// A control character other than a tab: what no chunk size line or trailer may carry.
bool HasControl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

// Why a line of a chunked body's trailer section (with its terminator) is not one an upstream
// reads as the proxy does: it must end in CRLF, and be the final empty line or "name: value"
// with a token for a name and no control character.
std::optional<std::string> TrailerProblem(std::string_view line) {
  if (line.size() < 2 || line.substr(line.size() - 2) != "\r\n") {
    return "a trailer line does not end in CRLF";
  }
  line.remove_suffix(2);
  if (line.empty()) return std::nullopt;
  if (HasControl(line)) return "a trailer line has a control character";
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return "a trailer line is not \"name: value\"";
  for (char c : line.substr(0, colon)) {
    const auto u = static_cast<unsigned char>(c);
    const bool token = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       (u > 0x20 && u < 0x7f && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
    if (!token) return "a trailer line is not \"name: value\"";
  }
  return std::nullopt;
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

// Closing a socket with unread bytes in it (a refused request's body, a pipelined second
// request) sends a reset, and the client may lose the answer it was sent. So the proxy says it
// is done writing and reads what is left, for at most a second and 256 KiB, before closing.
void LingerClose(int fd) {
  ::shutdown(fd, SHUT_WR);
  char buf[16384];
  std::size_t total = 0;
  const auto end = Clock::now() + std::chrono::seconds(1);
  while (total < 256 * 1024) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0) break;
    const int r = PollOne(fd, POLLIN, static_cast<int>(left.count()));
    if (r <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) break;
    if (n > 0) total += static_cast<std::size_t>(n);
  }
}

// Small writes (TLS handshakes, interactive protocols) go out at once: Nagle's algorithm on a
// relay adds a delayed-ACK stall per round trip. Fails harmlessly on a Unix socket.
void SetNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void SetNonBlocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
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

// The per-connection work, apart from the bookkeeping of threads and listeners.
class Session {
 public:
  Session(const std::vector<IpAddress>& host_addresses, std::atomic<std::uint64_t>& queries,
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
  ~Session() { ReleaseUpstream(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

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
    const char first = reader_.pending()[0];
    if (first == 0x05) return Socks();
    // Every HTTP method starts with a capital letter: anything else (TLS sent straight at the
    // proxy, a stray protocol) is refused at once rather than after the head timeout.
    if (first < 'A' || first > 'Z') {
      ev_.protocol = "http";
      return RefuseHttp(400,
                        "this is not an HTTP request or a SOCKS5 greeting (a proxy port: "
                        "send CONNECT host:port, GET http://host/path, or SOCKS5)");
    }
    return Http();
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

  void UpstreamFailedHttp(const std::string& error) {
    ev_.allowed = true;
    ev_.error = error;
    ev_.status = 502;
    SendAll(client_, ErrorResponse(502, error));
    Finish();
  }

  // The name decision, resolution and address checks; on success `candidates_` holds the
  // addresses that may be connected to. On failure: `refused_` (policy, reason set) or
  // `error_` (resolution failed).
  bool Decide(std::string_view raw_host, int port) {
    ev_.port = port;
    auto host = ParseEgressHost(raw_host);
    if (!host) {
      ev_.host = OneLine(raw_host.substr(0, 255));
      bad_input_ = true;
      reason_ = host.error().message;
      return false;
    }
    ev_.host = host->name;
    NameDecision d = DecideName(l_.policy, *host, port);
    if (d.rule) {
      ev_.rule = d.rule->text;
      ev_.rule_source = d.rule->source;
    }
    if (!d.allowed) {
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
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* res = nullptr;
      ++queries_;
      const int rc = ::getaddrinfo(host->name.c_str(), nullptr, &hints, &res);
      if (rc != 0) {
        error_ = "cannot resolve " + host->name + ": " + ::gai_strerror(rc);
        return false;
      }
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        if (auto a = FromSockaddr(ai->ai_addr)) {
          if (std::find(addrs.begin(), addrs.end(), *a) == addrs.end()) addrs.push_back(*a);
        }
      }
      ::freeaddrinfo(res);
      if (addrs.empty()) {
        error_ = "cannot resolve " + host->name + ": no IPv4 or IPv6 address";
        return false;
      }
    }
    // A literal was allowed by a rule naming it, and pinned addresses by the resolve entry of
    // this very name; a resolver's answer must be public and not this host's, or be named by an
    // allow rule for this port. Deny rules naming an address beat all of these.
    const bool vouched = host->address.has_value() || !d.pinned.empty();
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
      reason_ = host->name + " resolves to an address denied by deny_domains rule " + denied->text +
                " (" + denied->source + ")";
      refused_ = true;
      ev_.rule = denied->text;
      ev_.rule_source = denied->source;
      return false;
    }
    if (candidates_.empty()) {
      reason_ = host->name + " resolves to " + refused_text +
                ", which no allow_domains rule names for port " + std::to_string(port) +
                " (a name may not lead into this host or a private network)";
      refused_ = true;
      ev_.rule.clear();
      ev_.rule_source.clear();
      return false;
    }
    return true;
  }

  // Connects to the first candidate that answers; the socket (owned by the session: it stays
  // registered for RemoveListener until the session ends), or -1 with `error_` set.
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
          const int r = PollOne(s.get(), POLLOUT, kConnectMs);
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
        SetNoDelay(s.get());
        up_ = std::move(s);
        return up_.get();
      }
      errors += (errors.empty() ? "" : "; ") + a.Text() + ":" + std::to_string(port) + ": " +
                (err == ETIMEDOUT ? std::string("no answer within 10 s") : std::strerror(err));
    }
    error_ = "cannot connect to " + ev_.host + ": " + errors;
    return -1;
  }

  // The tunnel is over: a cut by RemoveListener (or the proxy's end) says so in the record.
  void EndTunnel() {
    bool cancelled = false;
    {
      std::lock_guard lock(mu_);
      cancelled = c_.cancelled;
      c_.upstream = -1;
    }
    if (cancelled && ev_.error.empty()) ev_.error = "cut: the proxy listener was removed";
    Finish();
  }

  void ReleaseUpstream() {
    std::lock_guard lock(mu_);
    c_.upstream = -1;
  }

  // Both directions through a pipe each with splice(2): the bytes never enter user space.
  // A side's EOF becomes a shutdown(SHUT_WR) of the other once its pipe is drained; the tunnel
  // ends when both directions are done, or on an error.
  void Tunnel(int up) {
    struct Dir {
      int from, to;
      Pipe pipe;
      std::size_t in_pipe = 0;
      bool eof = false, done = false;
      std::uint64_t* count;
      std::size_t cap = 65536;
      // The pipe refused more (EAGAIN with the source readable): its slots can fill up before
      // its byte capacity does, with many small segments. Until some drains, the source is not
      // polled, or a slow reader on the other side would make this loop spin.
      bool full = false;
    };
    Dir dirs[2] = {
        {client_, up, MakePipe(O_CLOEXEC | O_NONBLOCK), 0, false, false, &ev_.bytes_up},
        {up, client_, MakePipe(O_CLOEXEC | O_NONBLOCK), 0, false, false, &ev_.bytes_down}};
    for (Dir& d : dirs) {
      if (!d.pipe.valid()) {
        ev_.error = std::string("pipe2: ") + std::strerror(errno);
        return;
      }
      // A larger pipe moves more per splice; the default (64 KiB) still works if refused.
      ::fcntl(d.pipe.write.get(), F_SETPIPE_SZ, kPipeSize);
      const int cap = ::fcntl(d.pipe.write.get(), F_GETPIPE_SZ);
      if (cap > 0) d.cap = static_cast<std::size_t>(cap);
    }
    while (!(dirs[0].done && dirs[1].done)) {
      pollfd p[4];
      int idx[2][2] = {{-1, -1}, {-1, -1}};
      nfds_t n = 0;
      for (int i = 0; i < 2; ++i) {
        Dir& d = dirs[i];
        if (d.done) continue;
        // A full pipe takes nothing more: polling the source then would spin.
        if (!d.eof && !d.full && d.in_pipe < d.cap) {
          idx[i][0] = static_cast<int>(n);
          p[n++] = {d.from, POLLIN, 0};
        }
        if (d.in_pipe > 0) {
          idx[i][1] = static_cast<int>(n);
          p[n++] = {d.to, POLLOUT, 0};
        }
      }
      const int r = ::poll(p, n, -1);
      if (r < 0) {
        if (errno == EINTR) continue;
        ev_.error = std::string("poll: ") + std::strerror(errno);
        return;
      }
      for (int i = 0; i < 2; ++i) {
        Dir& d = dirs[i];
        if (d.done) continue;
        if (idx[i][0] >= 0 && p[idx[i][0]].revents != 0) {
          const ssize_t got = ::splice(d.from, nullptr, d.pipe.write.get(), nullptr, kSpliceChunk,
                                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
          if (got > 0) {
            d.in_pipe += static_cast<std::size_t>(got);
          } else if (got == 0) {
            d.eof = true;
          } else if (errno == EAGAIN) {
            d.full = d.in_pipe > 0;  // with an empty pipe it was a spurious wake-up
          } else if (errno != EINTR) {
            // A reset from one side ends the tunnel (ECONNRESET is how a peer aborts).
            if (errno != ECONNRESET) ev_.error = std::string("splice: ") + std::strerror(errno);
            return;
          }
        }
        if (d.in_pipe > 0 && (idx[i][1] < 0 || p[idx[i][1]].revents != 0)) {
          const ssize_t put = ::splice(d.pipe.read.get(), nullptr, d.to, nullptr, d.in_pipe,
                                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
          if (put > 0) {
            d.in_pipe -= static_cast<std::size_t>(put);
            *d.count += static_cast<std::uint64_t>(put);
            d.full = false;
          } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
            if (errno != EPIPE && errno != ECONNRESET) {
              ev_.error = std::string("splice: ") + std::strerror(errno);
            }
            return;
          }
        }
        if (d.eof && d.in_pipe == 0) {
          ::shutdown(d.to, SHUT_WR);
          d.done = true;
        }
      }
    }
  }

  // ---- HTTP: CONNECT and absolute-form ----

  void Http() {
    ev_.protocol = "http";
    std::string why;
    const std::string head = ReadHead(reader_, kMaxHead, kHeadIdleMs, &why);
    if (head.empty()) return RefuseHttp(400, why);
    reader_.deadline.reset();
    std::string first;
    std::vector<Header> headers;
    if (!ParseHeaders(head, &first, &headers, &why)) return RefuseHttp(400, why);
    // "METHOD SP TARGET SP HTTP/1.x"
    const auto sp1 = first.find(' ');
    const auto sp2 = sp1 == std::string::npos ? std::string::npos : first.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos ||
        first.find(' ', sp2 + 1) != std::string::npos) {
      return RefuseHttp(400, "the request line is not \"METHOD TARGET HTTP/1.1\"");
    }
    const std::string method = first.substr(0, sp1);
    const std::string target = first.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string version = first.substr(sp2 + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") {
      return RefuseHttp(400, "the request line is not \"METHOD TARGET HTTP/1.1\"");
    }
    if (method.empty() || method.size() > 32 ||
        !std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      return RefuseHttp(400, "the request method is not a token of capital letters");
    }
    if (std::any_of(target.begin(), target.end(), [](char c) {
          const auto u = static_cast<unsigned char>(c);
          return u < 0x21 || u == 0x7f;
        })) {
      return RefuseHttp(400, "the request target has a control character");
    }
    ev_.method = method;
    if (method == "CONNECT") {
      ev_.protocol = "connect";
      ev_.method.clear();
      return Connect(target);
    }
    return Plain(method, target, version, std::move(headers));
  }

  void Connect(const std::string& target) {
    std::string host, why;
    int port = 0;
    if (!SplitAuthority(target, 0, &host, &port, &why)) {
      ev_.host = OneLine(target.substr(0, 255));
      return RefuseHttp(400, why);
    }
    if (!Decide(host, port)) return DecisionFailedHttp();
    const int up = ConnectUpstream(port);
    if (up < 0) return UpstreamFailedHttp(error_);
    ev_.allowed = true;
    ev_.status = 200;
    if (!SendAll(client_, "HTTP/1.1 200 Connection established\r\n\r\n")) {
      ev_.error = "the client went away before the tunnel opened";
      ReleaseUpstream();
      return Finish();
    }
    // Bytes the client sent after the head without waiting (a TLS ClientHello) go first.
    const std::string early(reader_.pending());
    reader_.pos = reader_.buf.size();
    if (!early.empty()) {
      if (!SendAll(up, early)) {
        ev_.error = "the upstream went away";
        ReleaseUpstream();
        return Finish();
      }
      ev_.bytes_up += early.size();
    }
    Tunnel(up);
    EndTunnel();
  }

  void DecisionFailedHttp() {
    if (bad_input_) return RefuseHttp(400, reason_);
    if (refused_) return RefuseHttp(403, reason_, true);
    return UpstreamFailedHttp(error_);
  }

  void Plain(const std::string& method, const std::string& target, const std::string& version,
             std::vector<Header> headers) {
    if (target.rfind("http://", 0) != 0) {
      if (AsciiLower(target.substr(0, 8)) == "https://") {
        return RefuseHttp(400, "an https:// URL must go through CONNECT, not as a plain request");
      }
      return RefuseHttp(400,
                        "the request target is not an absolute http:// URL (this is a proxy: "
                        "send \"GET http://host/path\", or CONNECT host:port)");
    }
    std::string_view rest = std::string_view(target).substr(7);
    const auto path_at = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, path_at);
    std::string path = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
    if (path.front() == '?') path = "/" + path;
    if (const auto hash = path.find('#'); hash != std::string::npos) path.resize(hash);
    // "http://host#frag" leaves nothing: the upstream must still get a request line it can read.
    if (path.empty()) path = "/";
    // Every refusal from here on names what the client asked for: a record with no host would
    // hide from the log which host a refused request tried to reach.
    ev_.host = OneLine(authority.substr(0, 255));
    if (authority.find('@') != std::string_view::npos) {
      return RefuseHttp(400, "the URL has credentials in it (user@host); send them in a header");
    }
    std::string host, why;
    int port = 0;
    if (!SplitAuthority(authority, 80, &host, &port, &why)) return RefuseHttp(400, why);
    auto url_host = ParseEgressHost(host);
    if (url_host) ev_.host = url_host->name;
    ev_.port = port;
    // The Host header must name the same host and port, so that the upstream (or a proxy in
    // front of it) cannot be steered to a name the decision never saw.
    const Header* host_header = nullptr;
    for (const Header& h : headers) {
      if (h.lower != "host") continue;
      if (host_header) return RefuseHttp(400, "the request has more than one Host header");
      host_header = &h;
    }
    if (host_header) {
      std::string hh, hwhy;
      int hport = 0;
      auto parsed = SplitAuthority(host_header->value, 80, &hh, &hport, &hwhy)
                        ? ParseEgressHost(hh)
                        : Result<EgressHost>(Fail(Code::kInvalidInput, hwhy));
      if (!url_host || !parsed || parsed->name != url_host->name || hport != port) {
        ev_.host = url_host ? url_host->name : OneLine(host.substr(0, 255));
        ev_.port = port;
        return RefuseHttp(403, "the Host header \"" + OneLine(host_header->value.substr(0, 100)) +
                                   "\" does not name the URL's host " + AuthorityText(host, port));
      }
    }
    // The body's framing, before anything is decided on the network.
    std::optional<std::uint64_t> content_length;
    bool chunked = false;
    bool expect_continue = false;
    for (const Header& h : headers) {
      // CGI-style servers (WSGI, PHP) turn "_" into "-" in header names: a
      // "Transfer_Encoding" the proxy passes as an ordinary header would frame the body there
      // differently from here, and a body could carry a request the proxy never decided.
      std::string folded = h.lower;
      std::replace(folded.begin(), folded.end(), '_', '-');
      if (folded != h.lower && (folded == "content-length" || folded == "transfer-encoding")) {
        return RefuseHttp(400, "the request has a header \"" + OneLine(h.name) +
                                   "\" that a server may read as " + folded);
      }
      if (h.lower == "content-length") {
        if (h.value.empty() || h.value.size() > 18 ||
            !std::all_of(h.value.begin(), h.value.end(),
                         [](char c) { return c >= '0' && c <= '9'; })) {
          return RefuseHttp(400, "the Content-Length header is not a number");
        }
        const std::uint64_t v = std::stoull(h.value);
        if (content_length && *content_length != v) {
          return RefuseHttp(400, "the request has two different Content-Length headers");
        }
        content_length = v;
      } else if (h.lower == "transfer-encoding") {
        if (AsciiLower(h.value) != "chunked" || chunked) {
          return RefuseHttp(400, "the only Transfer-Encoding a request may have is \"chunked\"");
        }
        chunked = true;
      } else if (h.lower == "expect") {
        if (AsciiLower(h.value) != "100-continue") {
          return RefuseHttp(400, "the only Expect a request may have is \"100-continue\"");
        }
        expect_continue = true;
      }
    }
    if (chunked && content_length) {
      return RefuseHttp(400, "the request has both Content-Length and Transfer-Encoding");
    }
    if (!Decide(host, port)) return DecisionFailedHttp();
    const int up = ConnectUpstream(port);
    if (up < 0) return UpstreamFailedHttp(error_);
    ev_.allowed = true;

    // Origin-form, hop-by-hop headers dropped (and those the Connection header names).
    std::set<std::string> drop = {"connection",
                                  "proxy-connection",
                                  "proxy-authorization",
                                  "keep-alive",
                                  "te",
                                  "trailer",
                                  "upgrade",
                                  "expect"};
    for (const Header& h : headers) {
      if (h.lower != "connection" && h.lower != "proxy-connection") continue;
      std::string_view v = h.value;
      while (!v.empty()) {
        const auto comma = v.find(',');
        const std::string token = AsciiLower(Trim(v.substr(0, comma)));
        // Never let a Connection token strip the framing of the body being forwarded.
        if (token != "content-length" && token != "transfer-encoding" && token != "host") {
          drop.insert(token);
        }
        v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
      }
    }
    std::string out = method + " " + path + " " + version + "\r\n";
    if (!host_header) out += "Host: " + AuthorityText(host, port) + "\r\n";
    for (const Header& h : headers) {
      if (drop.contains(h.lower)) continue;
      out += h.name + ": " + h.value + "\r\n";
    }
    out += "Connection: close\r\n\r\n";
    if (!SendAll(up, out)) {
      ReleaseUpstream();
      return UpstreamFailedHttp("the upstream closed the connection before taking the request");
    }
    if (expect_continue) SendAll(client_, "HTTP/1.1 100 Continue\r\n\r\n");
    std::string body_error;
    const bool body_ok = chunked          ? ForwardChunked(up, &body_error)
                         : content_length ? ForwardExact(up, *content_length, &body_error)
                                          : true;
    if (!body_ok) {
      ReleaseUpstream();
      if (body_bad_framing_) {
        return RefuseHttp(400, body_error, true);
      }
      ev_.error = body_error;
      return Finish();
    }
    // Whatever the client sent after the request (a pipelined second request) is dropped: the
    // upstream only ever sees the one request decided here.
    reader_.pos = reader_.buf.size();
    RelayResponse(up, method == "HEAD");
    ReleaseUpstream();
    Finish();
  }

  static std::string AuthorityText(const std::string& host, int port) {
    return port == 80 ? host : host + ":" + std::to_string(port);
  }

  bool ForwardExact(int up, std::uint64_t n, std::string* error) {
    while (n > 0) {
      if (reader_.pending().empty() && !reader_.More(kBodyIdleMs)) {
        *error = "the client stopped before the end of the request body (Content-Length)";
        return false;
      }
      const std::string part = reader_.Take(
          static_cast<std::size_t>(std::min<std::uint64_t>(n, reader_.pending().size())));
      if (!SendAll(up, part)) {
        *error = "the upstream went away while taking the request body";
        return false;
      }
      n -= part.size();
      ev_.bytes_up += part.size();
    }
    return true;
  }

  // Chunked framing, parsed and forwarded as received: size line, data, CRLF ... the last
  // chunk and its trailers. Anything malformed ends the request with 400.
  bool ForwardChunked(int up, std::string* error) {
    auto fail_framing = [&](const std::string& why) {
      *error = why;
      body_bad_framing_ = true;
      return false;
    };
    auto forward = [&](const std::string& bytes) {
      if (!SendAll(up, bytes)) {
        *error = "the upstream went away while taking the request body";
        return false;
      }
      ev_.bytes_up += bytes.size();
      return true;
    };
    while (true) {
      bool too_long = false;
      auto line = reader_.Line(kMaxChunkLine, kBodyIdleMs, &too_long);
      if (!line) {
        if (too_long) return fail_framing("a chunk size line is longer than 1 KiB");
        *error = "the client stopped inside the chunked request body";
        return false;
      }
      std::string_view sz = *line;
      if (sz.size() < 2 || sz.substr(sz.size() - 2) != "\r\n") {
        return fail_framing("a chunk size line does not end in CRLF");
      }
      sz.remove_suffix(2);
      // The line goes upstream as sent: a bare CR or another control character in it (in an
      // extension, say) is where a lenient upstream would end the line and read what follows
      // as data or as a second request the proxy never decided.
      if (HasControl(sz)) return fail_framing("a chunk size line has a control character");
      sz = sz.substr(0, sz.find(';'));
      sz = Trim(sz);
      if (sz.empty() || sz.size() > 15) return fail_framing("a chunk size is not hexadecimal");
      std::uint64_t size = 0;
      for (char ch : sz) {
        int d = -1;
        if (ch >= '0' && ch <= '9') d = ch - '0';
        if (ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
        if (d < 0) return fail_framing("a chunk size is not hexadecimal");
        size = size * 16 + static_cast<std::uint64_t>(d);
      }
      if (!forward(*line)) return false;
      if (size == 0) {
        std::size_t trailer_bytes = 0;
        while (true) {
          auto t = reader_.Line(kMaxChunkLine * 8, kBodyIdleMs, &too_long);
          if (!t) {
            if (too_long) return fail_framing("a trailer line is too long");
            *error = "the client stopped inside the chunked request's trailers";
            return false;
          }
          trailer_bytes += t->size();
          if (trailer_bytes > kMaxTrailers) return fail_framing("the trailers are too large");
          // Trailers go upstream as sent, so each must be a header line the upstream reads the
          // way the proxy does: a bare "\n" ends the trailers for a lenient upstream, and what
          // the proxy took for more trailers would be a second request it never decided.
          if (auto problem = TrailerProblem(*t)) return fail_framing(*problem);
          if (!forward(*t)) return false;
          if (*t == "\r\n") return true;
        }
      }
      if (!ForwardExact(up, size, error)) return false;
      if (!reader_.Need(2, kBodyIdleMs)) {
        *error = "the client stopped inside the chunked request body";
        return false;
      }
      if (reader_.pending().substr(0, 2) != "\r\n") {
        return fail_framing("a chunk's data is not followed by CRLF");
      }
      if (!forward(reader_.Take(2))) return false;
    }
  }

  // The response head with Connection replaced by "Connection: close", then the body (by
  // Content-Length, or to the upstream's EOF), then the end.
  void RelayResponse(int up, bool head_request) {
    Reader ur;
    ur.fd = up;
    while (true) {
      std::string why;
      std::string head = ReadHead(ur, kMaxResponseHead, kBodyIdleMs, &why);
      if (head.empty()) {
        ev_.error = ur.eof && ur.pending().empty() ? "the upstream closed without a response"
                                                   : "the upstream's response head is bad: " + why;
        if (ev_.bytes_down == 0) {
          ev_.status = 502;
          SendAll(client_, ErrorResponse(502, ev_.error));
        }
        return;
      }
      std::string first;
      std::vector<Header> headers;
      if (!ParseHeaders(head, &first, &headers, &why) || first.rfind("HTTP/1.", 0) != 0 ||
          first.size() < 12) {
        ev_.error = "the upstream's response is not HTTP/1.x";
        ev_.status = 502;
        if (ev_.bytes_down == 0) SendAll(client_, ErrorResponse(502, ev_.error));
        return;
      }
      const int status = std::atoi(first.substr(9, 3).c_str());
      ev_.status = status;
      std::optional<std::uint64_t> length;
      std::string out = first + "\r\n";
      for (const Header& h : headers) {
        if (h.lower == "connection" || h.lower == "keep-alive" || h.lower == "proxy-connection") {
          continue;
        }
        if (h.lower == "content-length") {
          bool digits = !h.value.empty() && h.value.size() <= 18 &&
                        std::all_of(h.value.begin(), h.value.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
          if (digits) length = std::stoull(h.value);
        }
        out += h.name + ": " + h.value + "\r\n";
      }
      out += "Connection: close\r\n\r\n";
      if (!SendAll(client_, out)) {
        ev_.error = "the client went away";
        return;
      }
      ev_.bytes_down += out.size();
      if (status >= 100 && status < 200) continue;  // 100 Continue, 103: the final one follows
      if (head_request || status == 204 || status == 304) return;
      std::string body(ur.pending());
      ur.pos = ur.buf.size();
      std::uint64_t left = length ? *length : UINT64_MAX;
      while (left > 0) {
        if (body.empty()) {
          if (!ur.More(kBodyIdleMs)) {
            if (length && !ur.eof) ev_.error = "the upstream stopped sending the response";
            if (length && ur.eof) ev_.error = "the upstream closed before the end of the body";
            return;
          }
          body = ur.Take(ur.pending().size());
        }
        if (body.size() > left) body.resize(static_cast<std::size_t>(left));
        if (!SendAll(client_, body)) {
          ev_.error = "the client went away";
          return;
        }
        ev_.bytes_down += body.size();
        if (left != UINT64_MAX) left -= body.size();
        body.clear();
      }
      return;
    }
  }

  // ---- SOCKS5 (RFC 1928): no authentication, CONNECT, a name or an address ----

  void SocksReply(unsigned char rep) {
    const unsigned char r[10] = {5, rep, 0, 1, 0, 0, 0, 0, 0, 0};
    SendAll(client_, std::string_view(reinterpret_cast<const char*>(r), sizeof r));
  }
  void SocksRefuse(unsigned char rep, const std::string& reason, bool policy = false) {
    ev_.allowed = false;
    ev_.reason = reason;
    ev_.status = rep;
    if (!policy) ev_.rule.clear();
    SocksReply(rep);
    Finish();
  }
  void SocksBad(const std::string& reason) {
    ev_.allowed = false;
    ev_.reason = reason;
    ev_.status = 1;
    Finish();
  }

  void Socks() {
    ev_.protocol = "socks5";
    if (!reader_.Need(2, kHeadIdleMs)) return SocksBad("the SOCKS5 greeting ended early");
    const auto nmethods = static_cast<unsigned char>(reader_.pending()[1]);
    if (!reader_.Need(2 + nmethods, kHeadIdleMs)) {
      return SocksBad("the SOCKS5 greeting ended early");
    }
    const std::string greeting = reader_.Take(2 + nmethods);
    if (greeting.find('\0', 2) == std::string::npos) {
      const unsigned char no[2] = {5, 0xff};
      SendAll(client_, std::string_view(reinterpret_cast<const char*>(no), 2));
      return SocksBad(
          "the SOCKS5 client offers no method but username/password or GSSAPI "
          "(only \"no authentication\" is served)");
    }
    const unsigned char ok[2] = {5, 0};
    if (!SendAll(client_, std::string_view(reinterpret_cast<const char*>(ok), 2))) {
      return SocksBad("the client went away during the SOCKS5 greeting");
    }
    if (!reader_.Need(5, kHeadIdleMs)) return SocksBad("the SOCKS5 request ended early");
    const std::string_view req = reader_.pending();
    const auto ver = static_cast<unsigned char>(req[0]);
    const auto cmd = static_cast<unsigned char>(req[1]);
    const auto atyp = static_cast<unsigned char>(req[3]);
    if (ver != 5) return SocksBad("the SOCKS5 request has a version other than 5");
    std::size_t addr_len = 0;
    if (atyp == 1) {
      addr_len = 4;
    } else if (atyp == 4) {
      addr_len = 16;
    } else if (atyp == 3) {
      addr_len = 1 + static_cast<unsigned char>(req[4]);
    } else {
      return SocksRefuse(8, "the SOCKS5 request has an address type other than 1, 3 or 4");
    }
    if (!reader_.Need(4 + addr_len + 2, kHeadIdleMs)) {
      return SocksBad("the SOCKS5 request ended early");
    }
    const std::string r = reader_.Take(4 + addr_len + 2);
    reader_.deadline.reset();
    const int port = (static_cast<unsigned char>(r[4 + addr_len]) << 8) |
                     static_cast<unsigned char>(r[4 + addr_len + 1]);
    std::string host;
    char buf[INET6_ADDRSTRLEN] = {};
    if (atyp == 1) {
      ::inet_ntop(AF_INET, r.data() + 4, buf, sizeof buf);
      host = buf;
    } else if (atyp == 4) {
      ::inet_ntop(AF_INET6, r.data() + 4, buf, sizeof buf);
      host = buf;
    } else {
      host = r.substr(5, addr_len - 1);
    }
    ev_.host = OneLine(host.substr(0, 255));
    ev_.port = port;
    if (cmd != 1) {
      return SocksRefuse(
          7, "the SOCKS5 command " + std::to_string(cmd) + " is not served (only CONNECT)");
    }
    if (port == 0) return SocksRefuse(2, "the SOCKS5 request names port 0");
    if (!Decide(host, port)) {
      if (bad_input_) return SocksRefuse(2, reason_);
      if (refused_) return SocksRefuse(2, reason_, true);
      ev_.allowed = true;
      ev_.error = error_;
      ev_.status = 4;
      SocksReply(4);
      return Finish();
    }
    const int up = ConnectUpstream(port);
    if (up < 0) {
      ev_.allowed = true;
      ev_.error = error_;
      ev_.status = error_.find("refused") != std::string::npos ? 5 : 4;
      SocksReply(static_cast<unsigned char>(ev_.status));
      return Finish();
    }
    ev_.allowed = true;
    ev_.status = 0;
    SocksReply(0);
    const std::string early(reader_.pending());
    reader_.pos = reader_.buf.size();
    if (!early.empty()) {
      if (!SendAll(up, early)) {
        ev_.error = "the upstream went away";
        ReleaseUpstream();
        return Finish();
      }
      ev_.bytes_up += early.size();
    }
    Tunnel(up);
    EndTunnel();
  }

  const std::vector<IpAddress>& host_addresses_;
  std::atomic<std::uint64_t>& queries_;
  UniqueFd up_;  // closed only after ~Session has unregistered it
  ListenerState& l_;
  Connection& c_;
  std::mutex& mu_;
  Clock::time_point start_;
  NetworkEvent ev_;
  int client_ = -1;
  Reader reader_;
  std::vector<IpAddress> candidates_;
  bool refused_ = false;
  bool bad_input_ = false;
  bool body_bad_framing_ = false;
  std::string reason_;
  std::string error_;
};

}  // namespace

void EgressProxy::Impl::Serve(ListenerState& l, Connection& c, UniqueFd client) {
  BlockSigpipe();
  SetNonBlocking(client.get());
  SetNoDelay(client.get());
  Session(host_addresses, resolver_queries, l, c, mu).Run(client.get());
  if (l.activity) ++l.activity->finished;
  LingerClose(client.get());
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
  BlockSigpipe();
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
  SetNonBlocking(listener.get());  // a connection reset between poll and accept must not block
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
