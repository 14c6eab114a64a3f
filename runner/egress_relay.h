// The egress proxy's byte shuttling (docs/adr/0005-egress-proxy.md): bounded reads from a client
// or an upstream, the splice(2) tunnel of CONNECT and SOCKS5, and the plain-HTTP body and
// response relay. The framing it reads by is runner/http_wire.h's; what is decided, and the
// record, stay with the connection (runner/egress_proxy.cc).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "runner/http_wire.h"

namespace cordon::relay {

using Clock = std::chrono::steady_clock;

inline constexpr int kHeadIdleMs = 10'000;  // the client must send its whole head by then
inline constexpr int kBodyIdleMs = 60'000;  // plain HTTP body and response, idle

// Writes to a peer that went away raise SIGPIPE, and splice(2) into a socket has no
// MSG_NOSIGNAL: every proxy thread blocks it, so it stays pending on that thread and is
// discarded when the thread ends, instead of killing cordon.
void BlockSigpipe();
// poll(2) on one descriptor: its revents, 0 on timeout, <0 on error (EINTR retried).
int PollOne(int fd, short events, int timeout_ms);
// Sends all of `data` on a non-blocking socket, waiting for room at most `idle_ms` each time.
bool SendAll(int fd, std::string_view data, int idle_ms = kBodyIdleMs);
// Closing a socket with unread bytes in it (a refused request's body, a pipelined second
// request) sends a reset, and the client may lose the answer it was sent. So this says it is done
// writing and reads what is left, for at most a second and 256 KiB, before the caller closes.
void LingerClose(int fd);
// Small writes (TLS handshakes, interactive protocols) go out at once: Nagle's algorithm on a
// relay adds a delayed-ACK stall per round trip. Fails harmlessly on a Unix socket.
void SetNoDelay(int fd);
void SetNonBlocking(int fd);

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
  bool More(int idle_ms);
  // At least `n` bytes pending, reading as needed.
  bool Need(std::size_t n, int idle_ms);
  std::string Take(std::size_t n);
  // Everything pending, taken.
  std::string TakeAll() { return Take(pending().size()); }
  // A line ending in "\n" (with its terminator), at most `max` bytes; nullopt on failure, with
  // `*too_long` set when it was the length.
  std::optional<std::string> Line(std::size_t max, int idle_ms, bool* too_long);
};

// Reads through the blank line that ends an HTTP head (FindHeadEnd): the head with its
// terminator, or why there is none (too large, the timeout, the peer's end).
Result<std::string> ReadHead(Reader& r, std::size_t max, int idle_ms);

// Both directions between `client` and `up` through a pipe each with splice(2), until both have
// ended; the bytes moved each way are added to the counters. An error other than a reset says
// which call failed.
Status Tunnel(int client, int up, std::uint64_t* bytes_up, std::uint64_t* bytes_down);

// A plain request's body, from the client's reader to `up`, by its framing; counted in
// `*bytes_up`. kInvalidInput when the chunked framing is bad (the request is refused with 400),
// kCancelled when the client stopped, kServerUnavailable when the upstream went away.
Status ForwardBody(Reader& client, int up, const BodyFraming& framing, std::uint64_t* bytes_up);

// The upstream's response to the client: each head (1xx ones, then the final one) as
// ClientResponseHead makes it, then the body by Content-Length or to the upstream's end. What
// fails is in `error`; when the client got nothing yet it gets a 502 and `status` says so.
struct ResponseRelay {
  int status = 0;
  std::string error;
  std::uint64_t bytes_down = 0;
};
void RelayResponse(int up, int client, bool head_request, ResponseRelay& out);

}  // namespace cordon::relay
