// The accept side of `serve --http` (mcp/http_gate.h): bounded pending sockets, a header
// timeout, token-bearing requests admitted first. The parsing and the eviction rules are pure;
// the thread below only moves descriptors.
#include "mcp/http_gate.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>

#include "core/signals.h"

namespace cordon::mcp {

HeaderBlock ScanHeaderBlock(std::string_view peeked, std::size_t max_header_bytes) {
  const std::size_t end = peeked.find("\r\n\r\n");
  if (end != std::string_view::npos && end + 4 <= max_header_bytes) return HeaderBlock::kComplete;
  if (end != std::string_view::npos || peeked.size() >= max_header_bytes)
    return HeaderBlock::kTooLarge;
  return HeaderBlock::kIncomplete;
}

bool CarriesBearer(std::string_view headers, const std::string& token) {
  if (token.empty()) return true;
  const std::string want = "Bearer " + token;
  bool found = false;
  std::size_t pos = headers.find("\r\n");  // past the request line
  while (pos != std::string_view::npos && pos + 2 < headers.size()) {
    const std::size_t start = pos + 2;
    const std::size_t eol = headers.find("\r\n", start);
    const std::string_view line =
        headers.substr(start, (eol == std::string_view::npos ? headers.size() : eol) - start);
    pos = eol;
    constexpr std::string_view kName = "authorization:";
    if (line.size() < kName.size()) continue;
    bool name_ok = true;
    for (std::size_t i = 0; i < kName.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(line[i])) != kName[i]) name_ok = false;
    }
    if (!name_ok) continue;
    std::string_view value = line.substr(kName.size());
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    // Constant time in the value: the same comparison the request handler makes.
    unsigned char diff = value.size() == want.size() ? 0 : 1;
    for (std::size_t i = 0; i < want.size(); ++i)
      diff |= static_cast<unsigned char>((i < value.size() ? value[i] : 0) ^ want[i]);
    found = found || diff == 0;
  }
  return found;
}

std::vector<int> PendingSockets::Add(int id, std::uint32_t peer, Clock::time_point now) {
  std::vector<int> evicted;
  auto evict = [&](std::list<Entry>::iterator it) {
    evicted.push_back(it->id);
    Remove(it->id);
  };
  if (per_peer_[peer] >= limits_.pending_per_peer) {
    for (auto it = order_.begin(); it != order_.end(); ++it) {
      if (it->peer == peer) {
        evict(it);
        break;
      }
    }
  }
  if (order_.size() >= limits_.pending_total && !order_.empty()) evict(order_.begin());
  order_.push_back({id, peer, now});
  by_id_[id] = std::prev(order_.end());
  ++per_peer_[peer];
  return evicted;
}

void PendingSockets::Remove(int id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  auto count = per_peer_.find(it->second->peer);
  if (--count->second == 0) per_peer_.erase(count);
  order_.erase(it->second);
  by_id_.erase(it);
}

std::vector<int> PendingSockets::Expired(Clock::time_point now) const {
  std::vector<int> out;
  for (const Entry& e : order_) {
    if (now - e.since < limits_.header_timeout) break;  // oldest first
    out.push_back(e.id);
  }
  return out;
}

Result<std::unique_ptr<HttpGate>> HttpGate::Start(UniqueFd listener, std::string token,
                                                  GateLimits limits, Admit admit) {
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep.valid()) return SysFail(Code::kInternal, "epoll_create1", "serve --http");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener.get();
  if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, listener.get(), &ev) != 0)
    return SysFail(Code::kInternal, "epoll_ctl", "serve --http");
  std::unique_ptr<HttpGate> gate(
      new HttpGate(std::move(listener), std::move(ep), std::move(token), limits, std::move(admit)));
  gate->thread_ = std::thread([g = gate.get()] { g->Run(); });
  return gate;
}

HttpGate::~HttpGate() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void HttpGate::Drop(int fd) {
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  pending_.Remove(fd);
  conns_.erase(fd);  // closes it
}

void HttpGate::AnswerUnauthorized(int fd) {
  // What the request handler answers (mcp/http_server.cc Refusal), in one non-blocking send: a
  // peer that does not read it loses it, never the gate's time.
  static const std::string kBody =
      R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a bearer token is required"}})";
  static const std::string kResponse =
      "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nWWW-Authenticate: "
      "Bearer\r\nConnection: close\r\nContent-Length: " +
      std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
  (void)::send(fd, kResponse.data(), kResponse.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  // What the peer sent is read and dropped (bounded), so that the close does not reset the
  // connection under the answer while its request is still unread.
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
}

void HttpGate::AcceptAll() {
  // A bounded batch, so that the sockets already waiting are looked at between batches.
  for (int i = 0; i < 512; ++i) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    UniqueFd fd(::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &len,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if ((errno == EMFILE || errno == ENFILE) && pending_.Oldest() >= 0) {
        Drop(pending_.Oldest());  // out of descriptors: the oldest waiting socket makes room
        continue;
      }
      return;  // EAGAIN, or an error the next round retries
    }
    const int raw = fd.get();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    ev.data.fd = raw;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw, &ev) != 0) continue;  // fd closes
    for (int victim : pending_.Add(raw, peer.sin_addr.s_addr, PendingSockets::Clock::now())) {
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, victim, nullptr);
      conns_.erase(victim);
    }
    conns_[raw] = Conn{std::move(fd), peer};
  }
}

void HttpGate::Run() {
  BlockTerminationSignals();  // the serving loop handles SIGTERM/SIGINT/SIGHUP
  std::vector<epoll_event> events(256);
  std::string peeked(limits_.max_header_bytes, '\0');
  while (!stop_.load()) {
    const int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), 100);
    std::vector<int> authed, others;
    bool accept = false;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listener_.get()) {
        accept = true;
        continue;
      }
      if (!conns_.contains(fd)) continue;
      // Peeked, never consumed: libmicrohttpd reads the request from the start.
      const ssize_t got = ::recv(fd, peeked.data(), peeked.size(), MSG_PEEK);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (got <= 0) {
        Drop(fd);
        continue;
      }
      const std::string_view seen(peeked.data(), static_cast<std::size_t>(got));
      switch (ScanHeaderBlock(seen, limits_.max_header_bytes)) {
        case HeaderBlock::kIncomplete:
          break;
        case HeaderBlock::kTooLarge:
          Drop(fd);
          break;
        case HeaderBlock::kComplete:
          (CarriesBearer(seen.substr(0, seen.find("\r\n\r\n") + 2), token_) ? authed : others)
              .push_back(fd);
          break;
      }
    }
    // A request without the token is answered here, and closed: it never takes one of the
    // daemon's connections (a flood of complete headers holding half-sent bodies did, each until
    // its body came, and starved the token holder).
    for (int fd : others) {
      if (!conns_.contains(fd)) continue;
      AnswerUnauthorized(fd);
      Drop(fd);
    }
    // The authenticated requests (without a token, every request is one) go to the daemon.
    for (int fd : authed) {
      auto it = conns_.find(fd);
      if (it == conns_.end()) continue;
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
      pending_.Remove(fd);
      const sockaddr_in peer = it->second.peer;
      const int owned = it->second.fd.Release();
      conns_.erase(it);
      admit_(owned, peer);
    }
    if (accept) AcceptAll();
    for (int fd : pending_.Expired(PendingSockets::Clock::now())) Drop(fd);
  }
}

}  // namespace cordon::mcp
