// local_servers' probes (issue 23): a loopback URL checked and parsed, and one HTTP/1.0 GET sent
// over a socket cordon was given (made inside a job's network namespace), bounded in time and
// bytes. Parsing is pure; the probe is a thin blocking exchange with a deadline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/unique_fd.h"

namespace cordon {

// A URL a probe may fetch: http only, a loopback host (localhost, 127.0.0.0/8, [::1]), no user
// name or password, a path of printable ASCII.
struct LoopbackUrl {
  bool v6 = false;
  std::string host;     // as written (localhost, 127.0.0.1, ::1)
  std::string address;  // what is connected to (localhost is 127.0.0.1)
  int port = 80;
  std::string path = "/";  // with the query, never a fragment
};
// invalid_input naming what is wrong: another scheme, a name that is not loopback, a bad port,
// a path with spaces or controls, more than 2048 bytes.
Result<LoopbackUrl> ParseLoopbackUrl(std::string_view url);

// What one probe got.
struct ProbeResult {
  bool connected = false;
  std::optional<int> http_status;  // the status line's code
  std::string content_type;        // the first Content-Type header's value, whole: untrusted
  std::string body;                // the body's first max_bytes, UTF-8 repaired: untrusted
  std::uint64_t body_bytes = 0;    // what arrived of the body in all (up to the byte cap)
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
  double elapsed_ms = 0;
  std::string error;  // connect refused, timed out, not HTTP ... (empty: a response arrived)
};
// Connects `sock` (unconnected, of the URL's family) to the URL's address and port, sends
// `GET path HTTP/1.0` and reads the response until the peer closes, 64 KiB, or `deadline_ms`
// from the start. Never fails: what went wrong is ProbeResult::error.
ProbeResult ProbeHttp(UniqueFd sock, const LoopbackUrl& url, int deadline_ms, std::size_t max_body);

}  // namespace cordon
