// HTTP/1.x as the egress proxy reads and writes it (docs/adr/0005-egress-proxy.md): a pure codec,
// bytes in, a parsed value or a typed error out, no socket and no system call. The proxy's
// connection (runner/egress_proxy.cc) reads, decides and relays; everything it takes apart or
// builds on the wire is here, table-tested (tests/http_wire_test.cc) and fuzzed
// (tests/fuzz/http_wire_fuzz.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace cordon {

inline constexpr std::size_t kMaxRequestHead = 16 * 1024;   // a client's request head
inline constexpr std::size_t kMaxResponseHead = 64 * 1024;  // an upstream's response head
inline constexpr std::size_t kMaxMethod = 32;
inline constexpr std::size_t kMaxChunkLine = 1024;        // "1a2b;ext=...\r\n"
inline constexpr std::size_t kMaxTrailerLine = 8 * 1024;  // one trailer line
inline constexpr std::size_t kMaxTrailers = 16 * 1024;    // the whole trailer section

// What the first byte a client sends says it speaks: SOCKS5 starts with its version (5), and
// every HTTP method with a capital letter; anything else (TLS sent straight at the proxy, a stray
// protocol) is refused at once rather than after the head timeout.
enum class ProxyProtocol { kHttp, kSocks5, kUnknown };
ProxyProtocol SniffProxyProtocol(unsigned char first);
inline constexpr std::string_view kNotAProxyRequest =
    "this is not an HTTP request or a SOCKS5 greeting (a proxy port: send CONNECT host:port, GET "
    "http://host/path, or SOCKS5)";

// A reason goes into a header and a one-line body: no control characters, at most 400 bytes.
std::string OneLine(std::string_view s);

// The length of the head at the start of `bytes`, through the blank line that ends it ("\n\n" or
// "\n\r\n"); nullopt while it has not ended and is within `max`. Scanning resumes at `*scanned`
// (bytes already searched; updated), so a head that arrives a byte at a time costs O(n). A head
// longer than `max` with its terminator, or `max` bytes without one, is kTooLarge.
Result<std::optional<std::size_t>> FindHeadEnd(std::string_view bytes, std::size_t max,
                                               std::size_t* scanned);

struct HttpHeader {
  std::string name;  // as sent
  std::string lower;
  std::string value;  // without the spaces and tabs around it
};

// A request head: "METHOD SP TARGET SP HTTP/1.x", then "Name: value" lines, no obsolete line
// folding, no NUL and no carriage return but before a line feed. The method is 1..32 capital
// letters, the target has no control character or space.
struct RequestHead {
  std::string method;
  std::string target;
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<HttpHeader> headers;
};
Result<RequestHead> ParseRequestHead(std::string_view head);

// "host:port" of a CONNECT target or a URL's authority; an IPv6 host keeps its brackets.
// `default_port` 0: the port is required.
struct Authority {
  std::string host;
  int port = 0;
};
Result<Authority> ParseAuthority(std::string_view text, int default_port);
// "host", "host:port" or "[v6]:port" as a Host header or the upstream's request writes it: the
// port only when it is not 80.
std::string AuthorityText(const std::string& host, int port);

// An absolute-form http:// target: its authority as sent, and the origin-form path the upstream
// gets ("/" when there is none, a query kept, a fragment dropped).
struct AbsoluteUrl {
  std::string authority;
  std::string path;
};
Result<AbsoluteUrl> ParseAbsoluteUrl(std::string_view target);
// The authority of an absolute URL: no credentials (user@host), the port 80 by default.
Result<Authority> ParseUrlAuthority(std::string_view authority);

// The value of the one Host header, if there is one; more than one is refused.
Result<std::optional<std::string>> SingleHostHeader(std::span<const HttpHeader> headers);

// How a request's body is framed, refused unless the proxy and any upstream read it alike: one
// Content-Length (decimal, at most 18 digits; repeated only with the same value) or
// "Transfer-Encoding: chunked", never both; Expect only "100-continue"; and no
// "Content_Length" or "Transfer_Encoding", which CGI-style servers read as the real thing.
struct BodyFraming {
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool expect_continue = false;
};
Result<BodyFraming> ParseBodyFraming(std::span<const HttpHeader> headers);

// The head the upstream gets for a plain request: origin-form, the client's headers less the
// hop-by-hop ones (Connection, Proxy-Connection, Proxy-Authorization, Keep-Alive, TE, Trailer,
// Upgrade, Expect, and those a Connection header names, but never the body's framing or Host), a
// Host header when the client sent none, and "Connection: close".
std::string UpstreamRequestHead(const RequestHead& request, std::string_view path,
                                const Authority& authority, bool has_host_header);

// One line of a chunked body (with its terminator): the size line's value, or why it is refused
// (no CRLF, a control character anywhere in it, a size that is not 1..15 hex digits).
Result<std::uint64_t> ParseChunkSizeLine(std::string_view line);
// A trailer line (with its terminator): the final empty line or "name: value" with a token for a
// name and no control character, ending in CRLF.
Status CheckTrailerLine(std::string_view line);

// An upstream's response head, and what the client gets of it: the status line as sent, the
// headers less Connection, Keep-Alive and Proxy-Connection, then "Connection: close".
struct ResponseHead {
  std::string status_line;
  int status = 0;
  std::vector<HttpHeader> headers;
  std::optional<std::uint64_t> content_length;  // a well-formed one, if any
};
Result<ResponseHead> ParseResponseHead(std::string_view head);
std::string ClientResponseHead(const ResponseHead& response);

// The status a refused request gets: 403 for kDeniedByPolicy, 400 for the rest.
int HttpStatusFor(const Error& error);
// What a refused request gets: the status, the reason in X-Cordon-Reason and a one-line body,
// "Connection: close". The reason is made one line (OneLine).
std::string ErrorResponse(int status, std::string_view reason);

inline constexpr std::string_view kConnectEstablished =
    "HTTP/1.1 200 Connection established\r\n\r\n";
inline constexpr std::string_view kContinueResponse = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace cordon
