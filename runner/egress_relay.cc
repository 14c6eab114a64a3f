// The egress proxy's byte shuttling (runner/egress_relay.h): sockets, poll and splice, with the
// framing taken from runner/http_wire.h.
#include "runner/egress_relay.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"

namespace cordon::relay {
namespace {

constexpr std::size_t kSpliceChunk = 1 << 20;
constexpr int kPipeSize = 1 << 20;

// One direction of a tunnel: from one socket into its pipe, from the pipe into the other socket.
struct Direction {
  int from, to;
  Pipe pipe;
  std::uint64_t* count;
  std::size_t in_pipe = 0;
  bool eof = false, done = false;
  std::size_t cap = 65536;
  // The pipe refused more (EAGAIN with the source readable): its slots can fill up before its
  // byte capacity does, with many small segments. Until some drains, the source is not polled,
  // or a slow reader on the other side would make the tunnel spin.
  bool full = false;
};

// One round of splices for a direction, after poll said `readable` / `writable`. An error
// ends the tunnel: a reset (how a peer aborts) or a closed reader silently.
Status Step(Direction& d, bool readable, bool writable) {
  if (readable) {
    const ssize_t got = ::splice(d.from, nullptr, d.pipe.write.get(), nullptr, kSpliceChunk,
                                 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (got > 0) {
      d.in_pipe += static_cast<std::size_t>(got);
    } else if (got == 0) {
      d.eof = true;
    } else if (errno == EAGAIN) {
      d.full = d.in_pipe > 0;  // with an empty pipe it was a spurious wake-up
    } else if (errno != EINTR) {
      if (errno == ECONNRESET) return Fail(Code::kCancelled, "");
      return SysFail(Code::kInternal, "splice", "");
    }
  }
  if (d.in_pipe > 0 && writable) {
    const ssize_t put = ::splice(d.pipe.read.get(), nullptr, d.to, nullptr, d.in_pipe,
                                 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (put > 0) {
      d.in_pipe -= static_cast<std::size_t>(put);
      *d.count += static_cast<std::uint64_t>(put);
      d.full = false;
    } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
      if (errno == EPIPE || errno == ECONNRESET) return Fail(Code::kCancelled, "");
      return SysFail(Code::kInternal, "splice", "");
    }
  }
  if (d.eof && d.in_pipe == 0) {
    ::shutdown(d.to, SHUT_WR);
    d.done = true;
  }
  return {};
}

}  // namespace

void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
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

bool SendAll(int fd, std::string_view data, int idle_ms) {
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

void SetNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void SetNonBlocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

bool Reader::More(int idle_ms) {
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

bool Reader::Need(std::size_t n, int idle_ms) {
  while (buf.size() - pos < n) {
    if (!More(idle_ms)) return false;
  }
  return true;
}

std::string Reader::Take(std::size_t n) {
  std::string out = buf.substr(pos, n);
  pos += out.size();
  return out;
}

std::optional<std::string> Reader::Line(std::size_t max, int idle_ms, bool* too_long) {
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

Result<std::string> ReadHead(Reader& r, std::size_t max, int idle_ms) {
  std::size_t scanned = 0;
  while (true) {
    ASSIGN_OR_RETURN(const std::optional<std::size_t> end, FindHeadEnd(r.pending(), max, &scanned));
    if (end) return r.Take(*end);
    if (!r.More(idle_ms)) {
      if (r.timed_out) {
        return Fail(Code::kTimeout,
                    "no complete request head within " + std::to_string(idle_ms / 1000) + " s");
      }
      if (r.eof && r.pending().empty()) {
        return Fail(Code::kCancelled, "the client closed the connection before sending a request");
      }
      return Fail(Code::kCancelled, "the connection ended inside the request head");
    }
  }
}

Status Tunnel(int client, int up, std::uint64_t* bytes_up, std::uint64_t* bytes_down) {
  Direction dirs[2] = {{client, up, MakePipe(O_CLOEXEC | O_NONBLOCK), bytes_up},
                       {up, client, MakePipe(O_CLOEXEC | O_NONBLOCK), bytes_down}};
  for (Direction& d : dirs) {
    if (!d.pipe.valid()) return SysFail(Code::kInternal, "pipe2", "");
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
      Direction& d = dirs[i];
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
    if (::poll(p, n, -1) < 0) {
      if (errno == EINTR) continue;
      return SysFail(Code::kInternal, "poll", "");
    }
    for (int i = 0; i < 2; ++i) {
      Direction& d = dirs[i];
      if (d.done) continue;
      const bool readable = idx[i][0] >= 0 && p[idx[i][0]].revents != 0;
      const bool writable = idx[i][1] < 0 || p[idx[i][1]].revents != 0;
      auto step = Step(d, readable, writable);
      if (!step) {
        if (step.error().code == Code::kCancelled) return {};
        return step;
      }
    }
  }
  return {};
}

namespace {

Status SendBody(int up, std::string_view bytes, std::uint64_t* bytes_up) {
  if (!SendAll(up, bytes)) {
    return Fail(Code::kServerUnavailable, "the upstream went away while taking the request body");
  }
  *bytes_up += bytes.size();
  return {};
}

Status ForwardExact(Reader& client, int up, std::uint64_t n, std::uint64_t* bytes_up) {
  while (n > 0) {
    if (client.pending().empty() && !client.More(kBodyIdleMs)) {
      return Fail(Code::kCancelled,
                  "the client stopped before the end of the request body (Content-Length)");
    }
    const std::string part =
        client.Take(static_cast<std::size_t>(std::min<std::uint64_t>(n, client.pending().size())));
    TRY(SendBody(up, part, bytes_up));
    n -= part.size();
  }
  return {};
}

// The trailers after the last chunk, each forwarded as sent, through the final empty line.
Status ForwardTrailers(Reader& client, int up, std::uint64_t* bytes_up) {
  std::size_t trailer_bytes = 0;
  while (true) {
    bool too_long = false;
    auto t = client.Line(kMaxTrailerLine, kBodyIdleMs, &too_long);
    if (!t) {
      if (too_long) return Fail(Code::kInvalidInput, "a trailer line is too long");
      return Fail(Code::kCancelled, "the client stopped inside the chunked request's trailers");
    }
    trailer_bytes += t->size();
    if (trailer_bytes > kMaxTrailers)
      return Fail(Code::kInvalidInput, "the trailers are too large");
    TRY(CheckTrailerLine(*t));
    TRY(SendBody(up, *t, bytes_up));
    if (*t == "\r\n") return {};
  }
}

// Chunked framing, parsed and forwarded as received: size line, data, CRLF ... the last chunk
// and its trailers.
Status ForwardChunked(Reader& client, int up, std::uint64_t* bytes_up) {
  while (true) {
    bool too_long = false;
    auto line = client.Line(kMaxChunkLine, kBodyIdleMs, &too_long);
    if (!line) {
      if (too_long) return Fail(Code::kInvalidInput, "a chunk size line is longer than 1 KiB");
      return Fail(Code::kCancelled, "the client stopped inside the chunked request body");
    }
    ASSIGN_OR_RETURN(const std::uint64_t size, ParseChunkSizeLine(*line));
    TRY(SendBody(up, *line, bytes_up));
    if (size == 0) return ForwardTrailers(client, up, bytes_up);
    TRY(ForwardExact(client, up, size, bytes_up));
    if (!client.Need(2, kBodyIdleMs)) {
      return Fail(Code::kCancelled, "the client stopped inside the chunked request body");
    }
    if (client.pending().substr(0, 2) != "\r\n") {
      return Fail(Code::kInvalidInput, "a chunk's data is not followed by CRLF");
    }
    TRY(SendBody(up, client.Take(2), bytes_up));
  }
}

// The body of a final response: by Content-Length, or to the upstream's end.
void RelayResponseBody(Reader& ur, int client, std::optional<std::uint64_t> length,
                       ResponseRelay& out) {
  std::string body = ur.TakeAll();
  std::uint64_t left = length ? *length : UINT64_MAX;
  while (left > 0) {
    if (body.empty()) {
      if (!ur.More(kBodyIdleMs)) {
        if (length && !ur.eof) out.error = "the upstream stopped sending the response";
        if (length && ur.eof) out.error = "the upstream closed before the end of the body";
        return;
      }
      body = ur.TakeAll();
    }
    if (body.size() > left) body.resize(static_cast<std::size_t>(left));
    if (!SendAll(client, body)) {
      out.error = "the client went away";
      return;
    }
    out.bytes_down += body.size();
    if (left != UINT64_MAX) left -= body.size();
    body.clear();
  }
}

}  // namespace

Status ForwardBody(Reader& client, int up, const BodyFraming& framing, std::uint64_t* bytes_up) {
  if (framing.chunked) return ForwardChunked(client, up, bytes_up);
  if (framing.content_length) return ForwardExact(client, up, *framing.content_length, bytes_up);
  return {};
}

void RelayResponse(int up, int client, bool head_request, ResponseRelay& out) {
  Reader ur;
  ur.fd = up;
  while (true) {
    auto head = ReadHead(ur, kMaxResponseHead, kBodyIdleMs);
    if (!head) {
      out.error = ur.eof && ur.pending().empty()
                      ? "the upstream closed without a response"
                      : "the upstream's response head is bad: " + head.error().message;
      if (out.bytes_down == 0) {
        out.status = 502;
        SendAll(client, ErrorResponse(502, out.error));
      }
      return;
    }
    auto response = ParseResponseHead(*head);
    if (!response) {
      out.error = response.error().message;
      out.status = 502;
      if (out.bytes_down == 0) SendAll(client, ErrorResponse(502, out.error));
      return;
    }
    out.status = response->status;
    const std::string to_client = ClientResponseHead(*response);
    if (!SendAll(client, to_client)) {
      out.error = "the client went away";
      return;
    }
    out.bytes_down += to_client.size();
    const int status = response->status;
    if (status >= 100 && status < 200) continue;  // 100 Continue, 103: the final one follows
    if (head_request || status == 204 || status == 304) return;
    return RelayResponseBody(ur, client, response->content_length, out);
  }
}

}  // namespace cordon::relay
