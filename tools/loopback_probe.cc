// A loopback URL parsed, and one bounded HTTP/1.0 GET over a socket cordon was handed.
#include "tools/loopback_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>

#include "core/clock.h"
#include "core/text.h"

namespace cordon {
namespace {

constexpr std::size_t kMaxUrlBytes = 2048;
constexpr std::size_t kMaxResponseBytes = 65536;

// Waits for `events` on `fd` until `until` (MonotonicMs); whether they came.
bool WaitFor(int fd, short events, double until) {
  for (;;) {
    const double left = until - MonotonicMs();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left) + 1);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

}  // namespace

Result<LoopbackUrl> ParseLoopbackUrl(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return Fail(Code::kInvalidInput, "url \"" + std::string(url.substr(0, 200)) + "\": " + why);
  };
  if (url.size() > kMaxUrlBytes) return bad("longer than 2048 bytes");
  constexpr std::string_view kScheme = "http://";
  if (url.size() < kScheme.size() || AsciiLower(url.substr(0, kScheme.size())) != kScheme)
    return bad("only http:// URLs are probed (no TLS to a local server)");
  std::string_view rest = url.substr(kScheme.size());
  const std::size_t slash = std::min(rest.find_first_of("/?#"), rest.size());
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) return bad("a user name or password");
  LoopbackUrl out;
  std::string_view host;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("an unclosed [");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("text after ]");
      port = after.substr(1);
    }
    out.v6 = true;
  } else {
    const std::size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  out.host = AsciiLower(host);
  if (out.v6) {
    in6_addr a{};
    if (::inet_pton(AF_INET6, out.host.c_str(), &a) != 1 || !IN6_IS_ADDR_LOOPBACK(&a))
      return bad("the host is not loopback (localhost, 127.0.0.0/8 or [::1])");
    out.address = "::1";
  } else if (out.host == "localhost") {
    out.address = "127.0.0.1";
  } else {
    in_addr a{};
    if (::inet_pton(AF_INET, out.host.c_str(), &a) != 1 || (ntohl(a.s_addr) >> 24) != 127)
      return bad("the host is not loopback (localhost, 127.0.0.0/8 or [::1])");
    out.address = out.host;
  }
  if (!port.empty() ||
      authority.find(':', out.v6 ? authority.find(']') : 0) != std::string_view::npos) {
    int p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535)
      return bad("the port must be 1-65535");
    out.port = p;
  }
  // The fragment is the client's own; the rest goes on the request line as it is.
  path = path.substr(0, std::min(path.find('#'), path.size()));
  if (path.empty()) path = "/";
  if (path.front() == '?')
    out.path = "/" + std::string(path);
  else
    out.path = std::string(path);
  for (unsigned char c : out.path) {
    if (c <= 0x20 || c >= 0x7f) return bad("the path has a space, a control or a non-ASCII byte");
  }
  return out;
}

ProbeResult ProbeHttp(UniqueFd sock, const LoopbackUrl& url, int deadline_ms,
                      std::size_t max_body) {
  ProbeResult r;
  const double start = MonotonicMs();
  const double until = start + deadline_ms;
  auto done = [&](std::string error) {
    r.error = std::move(error);
    r.elapsed_ms = MonotonicMs() - start;
    return r;
  };
  // The socket came from the sandbox, which may hold a copy of it (and so may change its file
  // flags): every send and recv passes MSG_DONTWAIT, and a connect that blocks after all is
  // bounded by the send timeout.
  ::fcntl(sock.get(), F_SETFL, ::fcntl(sock.get(), F_GETFL) | O_NONBLOCK);
  const timeval bound{deadline_ms / 1000, (deadline_ms % 1000) * 1000};
  ::setsockopt(sock.get(), SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (url.v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<std::uint16_t>(url.port));
    ::inet_pton(AF_INET6, url.address.c_str(), &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<std::uint16_t>(url.port));
    ::inet_pton(AF_INET, url.address.c_str(), &a->sin_addr);
    len = sizeof *a;
  }
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    if (errno != EINPROGRESS) return done(std::string("connect: ") + std::strerror(errno));
    if (!WaitFor(sock.get(), POLLOUT, until)) return done("connect: timed out");
    int err = 0;
    socklen_t el = sizeof err;
    ::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &el);
    if (err != 0) return done(std::string("connect: ") + std::strerror(err));
  }
  r.connected = true;
  const std::string host = url.v6 ? "[" + url.host + "]" : url.host;
  const std::string req = "GET " + url.path + " HTTP/1.0\r\nHost: " + host + ":" +
                          std::to_string(url.port) +
                          "\r\nUser-Agent: cordon-local-servers\r\nAccept: */*\r\n"
                          "Connection: close\r\n\r\n";
  for (std::size_t sent = 0; sent < req.size();) {
    const ssize_t n =
        ::send(sock.get(), req.data() + sent, req.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      r.bytes_up += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!WaitFor(sock.get(), POLLOUT, until)) return done("send: timed out");
      continue;
    }
    return done(std::string("send: ") + std::strerror(errno));
  }
  std::string resp;
  char buf[8192];
  bool timed_out = false;
  while (resp.size() < kMaxResponseBytes) {
    const ssize_t n = ::recv(sock.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      const std::size_t take =
          std::min(static_cast<std::size_t>(n), kMaxResponseBytes - resp.size());
      resp.append(buf, take);
      r.bytes_down += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      if (WaitFor(sock.get(), POLLIN, until)) continue;
      timed_out = true;
      break;
    }
    break;  // reset: what arrived is what there is
  }
  // "HTTP/1.x NNN reason" CRLF headers CRLF CRLF body (a bare LF ends a line too).
  if (resp.rfind("HTTP/", 0) != 0) {
    return done(resp.empty() ? (timed_out ? "no response in time" : "closed without a response")
                             : "not an HTTP response");
  }
  const std::string_view all(resp);
  const std::size_t eol = std::min(all.find('\n'), all.size());
  const std::string_view status_line = all.substr(0, eol);
  const std::size_t sp = status_line.find(' ');
  int code = 0;
  if (sp != std::string_view::npos && sp + 4 <= status_line.size() &&
      (sp + 4 == status_line.size() || status_line[sp + 4] == ' ' || status_line[sp + 4] == '\r')) {
    const char* first = status_line.data() + sp + 1;
    auto [end, ec] = std::from_chars(first, first + 3, code);
    if (ec == std::errc() && end == first + 3 && code >= 100 && code <= 599 &&
        std::isdigit(static_cast<unsigned char>(first[0])) != 0) {
      r.http_status = code;
    }
  }
  if (!r.http_status) return done("not an HTTP response");
  // The headers, up to the first empty line; the first Content-Type counts.
  std::size_t at = eol + 1;
  std::size_t body_at = std::string_view::npos;
  bool have_type = false;
  while (at < all.size()) {
    const std::size_t nl = all.find('\n', at);
    if (nl == std::string_view::npos) break;  // the headers did not end within what arrived
    std::string_view line = all.substr(at, nl - at);
    at = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      body_at = at;
      break;
    }
    const std::size_t colon = line.find(':');
    if (have_type || colon == std::string_view::npos ||
        AsciiLower(line.substr(0, colon)) != "content-type")
      continue;
    std::string_view v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    r.content_type = RepairUtf8(v);
    have_type = true;
  }
  if (body_at != std::string_view::npos) {
    const std::string_view body = all.substr(body_at);
    r.body_bytes = body.size();
    r.body = RepairUtf8(body.substr(0, max_body));
  }
  return done(timed_out ? "the response did not end in time (what arrived is shown)" : "");
}

}  // namespace cordon
