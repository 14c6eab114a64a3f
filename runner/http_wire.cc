// HTTP/1.x framing for the egress proxy (runner/http_wire.h): pure parsing and encoding.
#include "runner/http_wire.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/text.h"

namespace cordon {
namespace {

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool AllDigits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A control character other than a tab: what no chunk size line or trailer may carry.
bool HasControl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

bool IsTokenChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (u > 0x20 && u < 0x7f && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

// A character no header name has: a control, a space, DEL, non-ASCII or a separator.
bool BadHeaderNameChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u >= 0x7f || std::strchr("(),/:;<=>?@[\\]{}\"", c) != nullptr;
}

Status Invalid(std::string message) { return Fail(Code::kInvalidInput, std::move(message)); }

// The lines of a head: the first one, then "Name: value" up to the blank line.
struct HeadLines {
  std::string first;
  std::vector<HttpHeader> headers;
};

Result<HeadLines> SplitHead(std::string_view head) {
  HeadLines out;
  bool have_first = false;
  while (!head.empty()) {
    const auto nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head = nl == std::string_view::npos ? std::string_view() : head.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\0') != std::string_view::npos || line.find('\r') != std::string_view::npos) {
      return Fail(Code::kInvalidInput, "the request head has a NUL or a stray carriage return");
    }
    if (!have_first) {
      out.first = std::string(line);
      have_first = true;
      continue;
    }
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      return Fail(Code::kInvalidInput, "the request head has a folded header line");
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Fail(Code::kInvalidInput, "the request head has a header line without a name");
    }
    const std::string_view name = line.substr(0, colon);
    if (std::any_of(name.begin(), name.end(), BadHeaderNameChar)) {
      return Fail(Code::kInvalidInput,
                  "the request head has a header name with a character no header name has");
    }
    out.headers.push_back(
        {std::string(name), AsciiLower(name), std::string(TrimBlanks(line.substr(colon + 1)))});
  }
  return out;
}

std::string StatusText(int status) {
  switch (status) {
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

}  // namespace

ProxyProtocol SniffProxyProtocol(unsigned char first) {
  if (first == 0x05) return ProxyProtocol::kSocks5;
  if (first >= 'A' && first <= 'Z') return ProxyProtocol::kHttp;
  return ProxyProtocol::kUnknown;
}

std::string OneLine(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 400)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  return out;
}

Result<std::optional<std::size_t>> FindHeadEnd(std::string_view bytes, std::size_t max,
                                               std::size_t* scanned) {
  for (std::size_t i = std::min(*scanned, bytes.size()); i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    const bool end = (i >= 1 && bytes[i - 1] == '\n') ||
                     (i >= 2 && bytes[i - 1] == '\r' && bytes[i - 2] == '\n');
    if (!end) continue;
    *scanned = i + 1;
    if (i + 1 > max) break;
    return std::optional<std::size_t>(i + 1);
  }
  *scanned = std::max(*scanned, bytes.size());
  if (bytes.size() >= max) {
    return Fail(Code::kTooLarge,
                "the request head is larger than " + std::to_string(max / 1024) + " KiB");
  }
  return std::optional<std::size_t>();
}

Result<RequestHead> ParseRequestHead(std::string_view head) {
  ASSIGN_OR_RETURN(HeadLines lines, SplitHead(head));
  const std::string& first = lines.first;
  const auto sp1 = first.find(' ');
  const auto sp2 = sp1 == std::string::npos ? std::string::npos : first.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos ||
      first.find(' ', sp2 + 1) != std::string::npos) {
    return Fail(Code::kInvalidInput, "the request line is not \"METHOD TARGET HTTP/1.1\"");
  }
  RequestHead out;
  out.method = first.substr(0, sp1);
  out.target = first.substr(sp1 + 1, sp2 - sp1 - 1);
  out.version = first.substr(sp2 + 1);
  if (out.version != "HTTP/1.1" && out.version != "HTTP/1.0") {
    return Fail(Code::kInvalidInput, "the request line is not \"METHOD TARGET HTTP/1.1\"");
  }
  if (out.method.empty() || out.method.size() > kMaxMethod ||
      !std::all_of(out.method.begin(), out.method.end(),
                   [](char c) { return c >= 'A' && c <= 'Z'; })) {
    return Fail(Code::kInvalidInput, "the request method is not a token of capital letters");
  }
  if (std::any_of(out.target.begin(), out.target.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x21 || u == 0x7f;
      })) {
    return Fail(Code::kInvalidInput, "the request target has a control character");
  }
  out.headers = std::move(lines.headers);
  return out;
}

Result<Authority> ParseAuthority(std::string_view a, int default_port) {
  std::string_view host = a;
  std::optional<std::string_view> port;
  if (!a.empty() && a.front() == '[') {
    const auto close = a.find(']');
    if (close == std::string_view::npos) {
      return Fail(Code::kInvalidInput, "the target has an unclosed [");
    }
    host = a.substr(0, close + 1);
    const std::string_view rest = a.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Fail(Code::kInvalidInput, "the target has junk after ]");
      port = rest.substr(1);
    }
  } else if (const auto colon = a.rfind(':'); colon != std::string_view::npos) {
    if (a.find(':') != colon) {
      return Fail(Code::kInvalidInput, "an IPv6 target must be in brackets");
    }
    host = a.substr(0, colon);
    port = a.substr(colon + 1);
  }
  Authority out{std::string(host), default_port};
  if (port) {
    if (port->empty() || port->size() > 5 || !AllDigits(*port) ||
        (out.port = std::atoi(std::string(*port).c_str())) < 1 || out.port > 65535) {
      return Fail(Code::kInvalidInput, "the target's port is not a number 1..65535");
    }
  } else if (default_port == 0) {
    return Fail(Code::kInvalidInput, "the CONNECT target has no port (write host:port)");
  }
  return out;
}

std::string AuthorityText(const std::string& host, int port) {
  return port == 80 ? host : host + ":" + std::to_string(port);
}

Result<AbsoluteUrl> ParseAbsoluteUrl(std::string_view target) {
  if (!target.starts_with("http://")) {
    if (AsciiLower(target.substr(0, 8)) == "https://") {
      return Fail(Code::kInvalidInput,
                  "an https:// URL must go through CONNECT, not as a plain request");
    }
    return Fail(Code::kInvalidInput,
                "the request target is not an absolute http:// URL (this is a proxy: send \"GET "
                "http://host/path\", or CONNECT host:port)");
  }
  const std::string_view rest = target.substr(7);
  const auto path_at = rest.find_first_of("/?#");
  AbsoluteUrl out;
  out.authority = std::string(rest.substr(0, path_at));
  out.path = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
  if (out.path.front() == '?') out.path = "/" + out.path;
  if (const auto hash = out.path.find('#'); hash != std::string::npos) out.path.resize(hash);
  // "http://host#frag" leaves nothing: the upstream must still get a request line it can read.
  if (out.path.empty()) out.path = "/";
  return out;
}

Result<Authority> ParseUrlAuthority(std::string_view authority) {
  if (authority.find('@') != std::string_view::npos) {
    return Fail(Code::kInvalidInput,
                "the URL has credentials in it (user@host); send them in a header");
  }
  return ParseAuthority(authority, 80);
}

Result<std::optional<std::string>> SingleHostHeader(std::span<const HttpHeader> headers) {
  std::optional<std::string> out;
  for (const HttpHeader& h : headers) {
    if (h.lower != "host") continue;
    if (out) return Fail(Code::kInvalidInput, "the request has more than one Host header");
    out = h.value;
  }
  return out;
}

Result<BodyFraming> ParseBodyFraming(std::span<const HttpHeader> headers) {
  BodyFraming out;
  for (const HttpHeader& h : headers) {
    // CGI-style servers (WSGI, PHP) turn "_" into "-" in header names: a "Transfer_Encoding"
    // passed on as an ordinary header would frame the body there differently from here, and a
    // body could carry a request the proxy never decided.
    std::string folded = h.lower;
    std::replace(folded.begin(), folded.end(), '_', '-');
    if (folded != h.lower && (folded == "content-length" || folded == "transfer-encoding")) {
      return Fail(Code::kInvalidInput, "the request has a header \"" + OneLine(h.name) +
                                           "\" that a server may read as " + folded);
    }
    if (h.lower == "content-length") {
      if (h.value.empty() || h.value.size() > 18 || !AllDigits(h.value)) {
        return Fail(Code::kInvalidInput, "the Content-Length header is not a number");
      }
      const std::uint64_t v = std::strtoull(h.value.c_str(), nullptr, 10);
      if (out.content_length && *out.content_length != v) {
        return Fail(Code::kInvalidInput, "the request has two different Content-Length headers");
      }
      out.content_length = v;
    } else if (h.lower == "transfer-encoding") {
      if (AsciiLower(h.value) != "chunked" || out.chunked) {
        return Fail(Code::kInvalidInput,
                    "the only Transfer-Encoding a request may have is \"chunked\"");
      }
      out.chunked = true;
    } else if (h.lower == "expect") {
      if (AsciiLower(h.value) != "100-continue") {
        return Fail(Code::kInvalidInput, "the only Expect a request may have is \"100-continue\"");
      }
      out.expect_continue = true;
    }
  }
  if (out.chunked && out.content_length) {
    return Fail(Code::kInvalidInput, "the request has both Content-Length and Transfer-Encoding");
  }
  return out;
}

std::string UpstreamRequestHead(const RequestHead& request, std::string_view path,
                                const Authority& authority, bool has_host_header) {
  std::set<std::string, std::less<>> drop = {"connection",
                                             "proxy-connection",
                                             "proxy-authorization",
                                             "keep-alive",
                                             "te",
                                             "trailer",
                                             "upgrade",
                                             "expect"};
  for (const HttpHeader& h : request.headers) {
    if (h.lower != "connection" && h.lower != "proxy-connection") continue;
    std::string_view v = h.value;
    while (!v.empty()) {
      const auto comma = v.find(',');
      std::string token = AsciiLower(TrimBlanks(v.substr(0, comma)));
      // Never let a Connection token strip the framing of the body being forwarded.
      if (token != "content-length" && token != "transfer-encoding" && token != "host") {
        drop.insert(std::move(token));
      }
      v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
    }
  }
  std::string out = request.method + " " + std::string(path) + " " + request.version + "\r\n";
  if (!has_host_header) out += "Host: " + AuthorityText(authority.host, authority.port) + "\r\n";
  for (const HttpHeader& h : request.headers) {
    if (drop.contains(h.lower)) continue;
    out += h.name + ": " + h.value + "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

Result<std::uint64_t> ParseChunkSizeLine(std::string_view line) {
  if (line.size() < 2 || line.substr(line.size() - 2) != "\r\n") {
    return Fail(Code::kInvalidInput, "a chunk size line does not end in CRLF");
  }
  line.remove_suffix(2);
  // The line goes upstream as sent: a bare CR or another control character in it (in an
  // extension, say) is where a lenient upstream would end the line and read what follows as data
  // or as a second request the proxy never decided.
  if (HasControl(line)) {
    return Fail(Code::kInvalidInput, "a chunk size line has a control character");
  }
  const std::string_view size = TrimBlanks(line.substr(0, line.find(';')));
  if (size.empty() || size.size() > 15) {
    return Fail(Code::kInvalidInput, "a chunk size is not hexadecimal");
  }
  std::uint64_t value = 0;
  for (char ch : size) {
    int d = -1;
    if (ch >= '0' && ch <= '9') d = ch - '0';
    if (ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
    if (d < 0) return Fail(Code::kInvalidInput, "a chunk size is not hexadecimal");
    value = value * 16 + static_cast<std::uint64_t>(d);
  }
  return value;
}

// Trailers go upstream as sent, so each must be a header line the upstream reads the way the
// proxy does: a bare "\n" ends the trailers for a lenient upstream, and what the proxy took for
// more trailers would be a second request it never decided.
Status CheckTrailerLine(std::string_view line) {
  if (line.size() < 2 || line.substr(line.size() - 2) != "\r\n") {
    return Invalid("a trailer line does not end in CRLF");
  }
  line.remove_suffix(2);
  if (line.empty()) return {};
  if (HasControl(line)) return Invalid("a trailer line has a control character");
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0 ||
      !std::all_of(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(colon), IsTokenChar)) {
    return Invalid("a trailer line is not \"name: value\"");
  }
  return {};
}

Result<ResponseHead> ParseResponseHead(std::string_view head) {
  auto lines = SplitHead(head);
  if (!lines || !lines->first.starts_with("HTTP/1.") || lines->first.size() < 12) {
    return Fail(Code::kInvalidInput, "the upstream's response is not HTTP/1.x");
  }
  ResponseHead out;
  out.status_line = std::move(lines->first);
  out.status = std::atoi(out.status_line.substr(9, 3).c_str());
  out.headers = std::move(lines->headers);
  for (const HttpHeader& h : out.headers) {
    if (h.lower == "content-length" && !h.value.empty() && h.value.size() <= 18 &&
        AllDigits(h.value)) {
      out.content_length = std::strtoull(h.value.c_str(), nullptr, 10);
    }
  }
  return out;
}

std::string ClientResponseHead(const ResponseHead& response) {
  std::string out = response.status_line + "\r\n";
  for (const HttpHeader& h : response.headers) {
    if (h.lower == "connection" || h.lower == "keep-alive" || h.lower == "proxy-connection") {
      continue;
    }
    out += h.name + ": " + h.value + "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

int HttpStatusFor(const Error& error) { return error.code == Code::kDeniedByPolicy ? 403 : 400; }

std::string ErrorResponse(int status, std::string_view reason) {
  const std::string line = OneLine(reason);
  const std::string body = "cordon: " + line + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + StatusText(status) +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\nX-Cordon-Reason: " + line +
         "\r\n\r\n" + body;
}

}  // namespace cordon
