// The accept side of `serve --http`: cordon accepts every connection itself and hands one to
// libmicrohttpd only once its request headers have arrived, token-bearing requests first. Idle
// or slow sockets wait here, bounded per peer and in all, and are closed after a header
// timeout, so that a token-less flood cannot hold the connections the real client needs.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"

namespace cordon::mcp {

// The bounds of the gate; the defaults are what `serve --http` uses (docs/cli.md).
struct GateLimits {
  std::size_t pending_per_peer = 64;  // sockets of one source address still sending headers
  std::size_t pending_total = 256;    // all such sockets
  std::chrono::milliseconds header_timeout{10000};
  std::size_t max_header_bytes = 16384;
};

// What the bytes a connection sent so far say (pure; peeked, never consumed).
enum class HeaderBlock { kIncomplete, kComplete, kTooLarge };
HeaderBlock ScanHeaderBlock(std::string_view peeked, std::size_t max_header_bytes);

// Whether a complete header block carries `Authorization: Bearer TOKEN` (the name matched
// without case, the value in constant time). An empty token (--no-auth) lets every request in.
bool CarriesBearer(std::string_view headers, const std::string& token);

// The sockets still sending their headers, oldest first, with the eviction rules: a newcomer
// past a peer's bound closes that peer's oldest socket, past the total bound the oldest of all.
// Pure: ids in, ids to close out.
class PendingSockets {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PendingSockets(GateLimits limits) : limits_(limits) {}
  // Adds `id` (from `peer`) and returns the ids to close to stay within the bounds.
  std::vector<int> Add(int id, std::uint32_t peer, Clock::time_point now);
  void Remove(int id);
  // The ids whose headers did not arrive within the timeout.
  std::vector<int> Expired(Clock::time_point now) const;
  // The oldest id, or -1: what goes when the process is out of descriptors.
  int Oldest() const { return order_.empty() ? -1 : order_.front().id; }
  std::size_t size() const { return order_.size(); }

 private:
  struct Entry {
    int id;
    std::uint32_t peer;
    Clock::time_point since;
  };
  GateLimits limits_;
  std::list<Entry> order_;
  std::map<int, std::list<Entry>::iterator> by_id_;
  std::map<std::uint32_t, std::size_t> per_peer_;
};

// The gate's thread: accepts on `listener`, peeks each socket's headers (epoll, edge-
// triggered, so a socket that sent part of its headers costs nothing until it sends more) and
// gives complete ones to `admit` (which owns the fd from then on), authenticated ones first.
class HttpGate {
 public:
  using Admit = std::function<void(int fd, const sockaddr_in& peer)>;
  static Result<std::unique_ptr<HttpGate>> Start(UniqueFd listener, std::string token,
                                                 GateLimits limits, Admit admit);
  ~HttpGate();  // stops the thread and closes what is still pending

 private:
  void AnswerUnauthorized(int fd);
  HttpGate(UniqueFd listener, UniqueFd epoll, std::string token, GateLimits limits, Admit admit)
      : listener_(std::move(listener)),
        epoll_(std::move(epoll)),
        token_(std::move(token)),
        limits_(limits),
        admit_(std::move(admit)),
        pending_(limits) {}
  void Run();
  void AcceptAll();
  void Drop(int fd);

  UniqueFd listener_;
  UniqueFd epoll_;
  std::string token_;
  GateLimits limits_;
  Admit admit_;
  PendingSockets pending_;
  struct Conn {
    UniqueFd fd;
    sockaddr_in peer;
  };
  std::map<int, Conn> conns_;  // the pending sockets, owned here until admitted
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cordon::mcp
