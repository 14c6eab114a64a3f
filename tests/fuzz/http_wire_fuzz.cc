// libFuzzer target for runner/http_wire (scripts/fuzz.sh builds and runs it). The input is what a
// client (or an upstream) sent. Besides ASan and UBSan (no read past the input, no overflow), it
// checks the codec's promises: a head is found the same whether the bytes come at once or in two
// parts, within the limit; what parses re-encodes to a head that parses again to the same request,
// with no header the proxy drops and no line the client could inject; every error is a stable
// code with a message.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runner/http_wire.h"
#include "tests/fuzz/fuzz_check.h"

namespace cordon {
namespace {

bool IsError(const Error& e, Code code) { return e.code == code && !e.message.empty(); }
// Every refusal of a malformed input is invalid_input, with a message.
void CheckInvalid(const Error& e) { FUZZ_CHECK(IsError(e, Code::kInvalidInput)); }

bool HasControlButCrlf(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\r' && c != '\n' && c != '\t') || u == 0x7f;
  });
}

// A head the proxy writes is one head: its blank line is its end, and nothing precedes it.
void CheckOneHead(std::string_view out, std::size_t max) {
  std::size_t scanned = 0;
  auto end = FindHeadEnd(out, max, &scanned);
  FUZZ_CHECK(end && *end && **end == out.size());
  FUZZ_CHECK(out.ends_with("\r\n\r\n"));
  FUZZ_CHECK(out.find('\0') == std::string_view::npos);
}

// The head, found at once and resumed after `split` bytes, agrees; it is within the limit.
std::optional<std::size_t> CheckFindHeadEnd(std::string_view bytes, std::size_t split) {
  std::size_t scanned = 0;
  auto whole = FindHeadEnd(bytes, kMaxRequestHead, &scanned);
  FUZZ_CHECK(scanned <= bytes.size());
  std::size_t resumed_at = 0;
  auto part = FindHeadEnd(bytes.substr(0, split), kMaxRequestHead, &resumed_at);
  if (part && *part) {
    FUZZ_CHECK(whole && *whole && **whole == **part);
  } else if (part) {
    auto rest = FindHeadEnd(bytes, kMaxRequestHead, &resumed_at);
    FUZZ_CHECK(rest.has_value() == whole.has_value());
    if (rest) FUZZ_CHECK(*rest == *whole);
  } else {
    FUZZ_CHECK(!whole);  // too large in part: too large whole
  }
  if (!whole) {
    FUZZ_CHECK(IsError(whole.error(), Code::kTooLarge));
    FUZZ_CHECK(bytes.size() >= kMaxRequestHead);
    return std::nullopt;
  }
  if (!*whole) {
    FUZZ_CHECK(bytes.size() < kMaxRequestHead);
    return std::nullopt;
  }
  const std::size_t end = **whole;
  FUZZ_CHECK(end >= 2 && end <= bytes.size() && end <= kMaxRequestHead);
  FUZZ_CHECK(bytes[end - 1] == '\n');
  return end;
}

void CheckPlain(const RequestHead& request) {
  auto url = ParseAbsoluteUrl(request.target);
  if (!url) return CheckInvalid(url.error());
  FUZZ_CHECK(url->path.starts_with("/") && url->path.find('#') == std::string::npos);
  FUZZ_CHECK(url->authority.size() + url->path.size() <= request.target.size() + 1);
  auto authority = ParseUrlAuthority(url->authority);
  if (!authority) return CheckInvalid(authority.error());
  FUZZ_CHECK(authority->port >= 1 && authority->port <= 65535);
  FUZZ_CHECK(authority->host.find('@') == std::string::npos);
  auto host_header = SingleHostHeader(request.headers);
  if (!host_header) return CheckInvalid(host_header.error());
  auto framing = ParseBodyFraming(request.headers);
  if (!framing) return CheckInvalid(framing.error());
  FUZZ_CHECK(!(framing->chunked && framing->content_length));

  const std::string out =
      UpstreamRequestHead(request, url->path, *authority, host_header->has_value());
  CheckOneHead(out, SIZE_MAX);
  // Within limits: the client's head, less what was dropped, plus at most a Host line, a path
  // slash and the final "Connection: close".
  std::size_t head_size = request.method.size() + request.target.size() + request.version.size();
  for (const HttpHeader& h : request.headers) head_size += h.name.size() + h.value.size() + 4;
  FUZZ_CHECK(out.size() <= head_size + authority->host.size() + 64);
  auto again = ParseRequestHead(out);
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(again->method == request.method && again->version == request.version);
  FUZZ_CHECK(again->target == url->path);
  FUZZ_CHECK(!again->headers.empty() && again->headers.back().name == "Connection" &&
             again->headers.back().value == "close");
  std::size_t hosts = 0;
  for (std::size_t i = 0; i + 1 < again->headers.size(); ++i) {
    const HttpHeader& h = again->headers[i];
    for (std::string_view hop : {"connection", "proxy-connection", "proxy-authorization",
                                 "keep-alive", "te", "trailer", "upgrade", "expect"}) {
      FUZZ_CHECK(h.lower != hop);
    }
    if (h.lower == "host") ++hosts;
  }
  FUZZ_CHECK(hosts == 1);
  // The body's framing the upstream reads is the one the proxy forwards by.
  auto upstream_framing = ParseBodyFraming(again->headers);
  FUZZ_CHECK(upstream_framing.has_value());
  FUZZ_CHECK(upstream_framing->content_length == framing->content_length);
  FUZZ_CHECK(upstream_framing->chunked == framing->chunked);
}

void CheckRequest(std::string_view head) {
  auto request = ParseRequestHead(head);
  if (!request) return CheckInvalid(request.error());
  FUZZ_CHECK(!request->method.empty() && request->method.size() <= kMaxMethod);
  FUZZ_CHECK(request->version == "HTTP/1.1" || request->version == "HTTP/1.0");
  FUZZ_CHECK(request->target.find_first_of(" \r\n") == std::string::npos);
  for (const HttpHeader& h : request->headers) {
    FUZZ_CHECK(!h.name.empty() && h.name.size() == h.lower.size());
    FUZZ_CHECK(h.value.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos);
    FUZZ_CHECK(h.value.empty() || (h.value.front() != ' ' && h.value.back() != ' '));
  }
  if (request->method == "CONNECT") {
    auto authority = ParseAuthority(request->target, 0);
    if (authority) FUZZ_CHECK(authority->port >= 1 && authority->port <= 65535);
    return;
  }
  CheckPlain(*request);
}

void CheckResponse(std::string_view bytes) {
  std::size_t scanned = 0;
  auto end = FindHeadEnd(bytes, kMaxResponseHead, &scanned);
  if (!end || !*end) return;
  auto response = ParseResponseHead(bytes.substr(0, **end));
  if (!response) return CheckInvalid(response.error());
  const std::string out = ClientResponseHead(*response);
  CheckOneHead(out, SIZE_MAX);
  // Each kept line may gain a space and a CR; the status line a CR; then "Connection: close".
  FUZZ_CHECK(out.size() <= **end + 2 * (response->headers.size() + 1) + 21);
  auto again = ParseResponseHead(out);
  FUZZ_CHECK(again && again->status == response->status &&
             again->content_length == response->content_length);
}

void CheckLines(std::string_view bytes) {
  const auto nl = bytes.find('\n');
  const std::string_view line = nl == std::string_view::npos ? bytes : bytes.substr(0, nl + 1);
  if (auto size = ParseChunkSizeLine(line)) {
    FUZZ_CHECK(line.ends_with("\r\n") && !HasControlButCrlf(line.substr(0, line.size() - 2)));
    FUZZ_CHECK(line.find('\r') == line.size() - 2);
    FUZZ_CHECK(*size < (std::uint64_t{1} << 60));
  } else {
    FUZZ_CHECK(IsError(size.error(), Code::kInvalidInput));
  }
  if (auto trailer = CheckTrailerLine(line)) {
    FUZZ_CHECK(line.ends_with("\r\n") && line.find('\r') == line.size() - 2);
  } else {
    FUZZ_CHECK(IsError(trailer.error(), Code::kInvalidInput));
  }
}

void CheckErrorResponse(std::string_view bytes) {
  const std::string reason = OneLine(bytes);
  FUZZ_CHECK(reason.size() == std::min<std::size_t>(bytes.size(), 400));
  FUZZ_CHECK(!HasControlButCrlf(reason) && reason.find_first_of("\r\n") == std::string::npos);
  const std::string out = ErrorResponse(403, bytes);
  std::size_t scanned = 0;
  auto end = FindHeadEnd(out, SIZE_MAX, &scanned);
  FUZZ_CHECK(end && *end && out.substr(**end) == "cordon: " + reason + "\n");
}

}  // namespace
}  // namespace cordon

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace cordon;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::size_t split = size == 0 ? 0 : data[0] % (size + 1);
  if (auto end = CheckFindHeadEnd(bytes, split)) CheckRequest(bytes.substr(0, *end));
  CheckResponse(bytes);
  CheckLines(bytes);
  CheckErrorResponse(bytes);
  for (int default_port : {0, 80}) {
    if (auto a = ParseAuthority(bytes, default_port)) {
      FUZZ_CHECK(a->port >= 1 && a->port <= 65535 && a->host.size() <= size);
    }
  }
  return 0;
}
