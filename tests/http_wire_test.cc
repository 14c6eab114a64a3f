// runner/http_wire: the egress proxy's HTTP/1.x codec, table-tested without a socket. Each row is
// the bytes a client (or an upstream) sent and what must come out: the parsed value, "need more
// bytes", or the error code and the words of the message the client is told.
#include "runner/http_wire.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

namespace cordon {
namespace {

using namespace std::string_literals;

// The head at the start of `bytes`, found in one call (nothing scanned before).
Result<std::optional<std::size_t>> HeadEnd(std::string_view bytes,
                                           std::size_t max = kMaxRequestHead) {
  std::size_t scanned = 0;
  return FindHeadEnd(bytes, max, &scanned);
}

TEST(HttpWire, TheFirstByteTellsHttpFromSocksFromAnythingElse) {
  EXPECT_EQ(SniffProxyProtocol('G'), ProxyProtocol::kHttp);
  EXPECT_EQ(SniffProxyProtocol('C'), ProxyProtocol::kHttp);
  EXPECT_EQ(SniffProxyProtocol(0x05), ProxyProtocol::kSocks5);
  for (int c : {0x16, 0x00, 0x04, int{'g'}, int{' '}, int{'\r'}, 0xff}) {
    EXPECT_EQ(SniffProxyProtocol(static_cast<unsigned char>(c)), ProxyProtocol::kUnknown) << c;
  }
}

TEST(HttpWire, FindHeadEndNeedsTheBlankLineAndHoldsTheSizeLimit) {
  struct Row {
    std::string bytes;
    std::optional<std::size_t> end;  // nullopt: need more
    bool too_large = false;
  };
  const std::string big(kMaxRequestHead, 'a');
  const Row rows[] = {
      {"", std::nullopt},
      {"GET http://a/ HTTP/1.1\r\n", std::nullopt},  // truncated: no blank line yet
      {"GET http://a/ HTTP/1.1\r\n\r", std::nullopt},
      {"GET http://a/ HTTP/1.1\r\n\r\n", 26},
      {"GET http://a/ HTTP/1.1\n\n", 24},                 // bare LFs end it too
      {"GET http://a/ HTTP/1.1\r\n\r\nbody bytes", 26},   // the body is not part of it
      {"GET http://a/ HTTP/1.1\r\nA: b\r\n\r\nGET", 32},  // nor a pipelined request
      {"GET / HTTP/1.1\r\n\r\r\n", std::nullopt},         // "\r\r\n" is no blank line
      {big, std::nullopt, true},                          // the limit, no end in it
      {big + "\n\n", std::nullopt, true},                 // an end past the limit
      {std::string(kMaxRequestHead - 2, 'a') + "\n\n", kMaxRequestHead},  // exactly the limit
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.bytes.substr(0, 40));
    auto end = HeadEnd(r.bytes);
    if (r.too_large) {
      ASSERT_FALSE(end);
      EXPECT_EQ(end.error().code, Code::kTooLarge);
      EXPECT_EQ(end.error().message, "the request head is larger than 16 KiB");
      continue;
    }
    ASSERT_TRUE(end) << end.error().message;
    EXPECT_EQ(*end, r.end);
  }
  auto response = HeadEnd(std::string(kMaxResponseHead, 'x'), kMaxResponseHead);
  ASSERT_FALSE(response);
  EXPECT_NE(response.error().message.find("64 KiB"), std::string::npos);
}

TEST(HttpWire, FindHeadEndResumesWhereItStoppedAcrossSplitTerminators) {
  const std::string head = "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n";
  for (std::size_t cut = 0; cut <= head.size(); ++cut) {
    std::size_t scanned = 0;
    auto first = FindHeadEnd(std::string_view(head).substr(0, cut), kMaxRequestHead, &scanned);
    ASSERT_TRUE(first);
    if (cut == head.size()) {
      EXPECT_EQ(*first, head.size());
      continue;
    }
    EXPECT_FALSE(*first) << cut;
    auto second = FindHeadEnd(head, kMaxRequestHead, &scanned);
    ASSERT_TRUE(second && *second) << cut;
    EXPECT_EQ(**second, head.size()) << cut;
  }
}

TEST(HttpWire, ParseRequestHeadTakesALineAndHeadersAndRefusesWhatIsNotOne) {
  auto ok = ParseRequestHead(
      "POST http://api.example.test:8080/x?y=1 HTTP/1.0\r\nHost: api.example.test:8080\r\n"
      "X-Two:  spaced value \t\r\nEmpty:\r\n\r\n");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->method, "POST");
  EXPECT_EQ(ok->target, "http://api.example.test:8080/x?y=1");
  EXPECT_EQ(ok->version, "HTTP/1.0");
  ASSERT_EQ(ok->headers.size(), 3u);
  EXPECT_EQ(ok->headers[1].name, "X-Two");
  EXPECT_EQ(ok->headers[1].lower, "x-two");
  EXPECT_EQ(ok->headers[1].value, "spaced value");
  EXPECT_EQ(ok->headers[2].value, "");

  struct Row {
    std::string head;
    std::string message_has;
  };
  const Row rows[] = {
      {"GE T http://a/ HTTP/1.1\r\n\r\n", "request line"},
      {"GET http://a/ HTTP/1.1 x\r\n\r\n", "request line"},
      {"GET http://a/\r\n\r\n", "request line"},
      {"GET  http://a/ HTTP/1.1\r\n\r\n", "request line"},
      {"GET http://a/ HTTP/2.0\r\n\r\n", "request line"},     // bad version
      {"GET http://a/ HTTP/1.1 \r\n\r\n", "request line"},    // trailing space
      {"GET http://a/ http/1.1\r\n\r\n", "request line"},     // version is case-sensitive
      {"get http://a/ HTTP/1.1\r\n\r\n", "capital letters"},  // lower case method
      {"G3T http://a/ HTTP/1.1\r\n\r\n", "capital letters"},  // digit in method
      {std::string(33, 'A') + " http://a/ HTTP/1.1\r\n\r\n", "capital letters"},  // 33 > 32
      {"GET http://a/\x01 HTTP/1.1\r\n\r\n", "control character"},
      {"GET http://a/\x7f HTTP/1.1\r\n\r\n", "control character"},
      {"GET http://a/\tx HTTP/1.1\r\n\r\n", "control character"},
      {"CONNECT a\0.x:443 HTTP/1.1\r\n\r\n"s, "NUL"},  // NUL in the request line
      {"GET http://a/ HTTP/1.1\r\nX: a\0b\r\n\r\n"s, "NUL"},
      {"GET http://a/ HTTP/1.1\rX: b\r\n\r\n", "stray carriage return"},
      {"GET http://a/ HTTP/1.1\r\nX: a\rb\r\n\r\n", "stray carriage return"},
      {"GET http://a/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", "folded"},
      {"GET http://a/ HTTP/1.1\r\nX: a\r\n\tfolded\r\n\r\n", "folded"},
      {"GET http://a/ HTTP/1.1\r\nno colon\r\n\r\n", "without a name"},
      {"GET http://a/ HTTP/1.1\r\n: empty name\r\n\r\n", "without a name"},
      {"GET http://a/ HTTP/1.1\r\nBad Name: x\r\n\r\n", "no header name has"},
      {"GET http://a/ HTTP/1.1\r\nBad(Name): x\r\n\r\n", "no header name has"},
      {"GET http://a/ HTTP/1.1\r\nN\xc3\xa4me: x\r\n\r\n", "no header name has"},
      {"GET http://a/ HTTP/1.1\r\nHost : a\r\n\r\n", "no header name has"},
      {"", "request line"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.head);
    auto parsed = ParseRequestHead(r.head);
    ASSERT_FALSE(parsed);
    EXPECT_EQ(parsed.error().code, Code::kInvalidInput);
    EXPECT_NE(parsed.error().message.find(r.message_has), std::string::npos)
        << parsed.error().message;
    EXPECT_EQ(HttpStatusFor(parsed.error()), 400);
  }
  // A line of the maximum head size is still one line: the size limit is FindHeadEnd's.
  const std::string long_target = "http://a/" + std::string(kMaxRequestHead, 'p');
  auto long_line = ParseRequestHead("GET " + long_target + " HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(long_line);
  EXPECT_EQ(long_line->target, long_target);
}

TEST(HttpWire, AuthoritiesNeedAPortOnlyForConnectAndBracketsForIpv6) {
  struct Row {
    std::string text;
    int default_port;
    std::string host;  // empty: refused
    int port;
    std::string message_has;
  };
  const Row rows[] = {
      {"api.example.test:443", 0, "api.example.test", 443, ""},
      {"[2001:db8::1]:8443", 0, "[2001:db8::1]", 8443, ""},
      {"api.example.test", 80, "api.example.test", 80, ""},
      {"[::1]", 80, "[::1]", 80, ""},
      {"a:1", 0, "a", 1, ""},
      {"a:65535", 0, "a", 65535, ""},
      {"a:00080", 0, "a", 80, ""},
      {"api.example.test", 0, "", 0, "has no port"},
      {"a:65536", 0, "", 0, "1..65535"},
      {"a:0", 0, "", 0, "1..65535"},
      {"a:", 0, "", 0, "1..65535"},
      {"a:-1", 0, "", 0, "1..65535"},
      {"a:+80", 0, "", 0, "1..65535"},
      {"a:123456", 0, "", 0, "1..65535"},
      {"a:99999", 0, "", 0, "1..65535"},
      {"2001:db8::1", 0, "", 0, "in brackets"},
      {"[2001:db8::1", 0, "", 0, "unclosed ["},
      {"[::1]x", 0, "", 0, "junk after ]"},
      {"[::1]:", 0, "", 0, "1..65535"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.text);
    auto a = ParseAuthority(r.text, r.default_port);
    if (r.host.empty()) {
      ASSERT_FALSE(a);
      EXPECT_EQ(a.error().code, Code::kInvalidInput);
      EXPECT_NE(a.error().message.find(r.message_has), std::string::npos) << a.error().message;
      continue;
    }
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->host, r.host);
    EXPECT_EQ(a->port, r.port);
  }
  EXPECT_EQ(AuthorityText("a.test", 80), "a.test");
  EXPECT_EQ(AuthorityText("[::1]", 8080), "[::1]:8080");
}

TEST(HttpWire, AbsoluteUrlsGiveTheAuthorityAndTheOriginFormPath) {
  struct Row {
    std::string target;
    std::string authority;  // empty: refused
    std::string path;
  };
  const Row rows[] = {
      {"http://a.test/x/y?q=1", "a.test", "/x/y?q=1"},
      {"http://a.test:8080", "a.test:8080", "/"},
      {"http://a.test?q=1", "a.test", "/?q=1"},
      {"http://a.test#frag", "a.test", "/"},
      {"http://a.test/p#frag", "a.test", "/p"},
      {"http://a.test/p?q#f", "a.test", "/p?q"},
      {"http://[::1]:81/", "[::1]:81", "/"},
      {"http://", "", "/"},  // an empty authority is the host parser's to refuse
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.target);
    auto url = ParseAbsoluteUrl(r.target);
    ASSERT_TRUE(url) << url.error().message;
    EXPECT_EQ(url->authority, r.authority);
    EXPECT_EQ(url->path, r.path);
  }
  const std::pair<std::string, std::string> refused[] = {
      {"https://a.test/", "must go through CONNECT"},
      {"HTTPS://a.test/", "must go through CONNECT"},
      {"/path", "not an absolute http:// URL"},
      {"HTTP://a.test/", "not an absolute http:// URL"},
      {"ftp://a.test/", "not an absolute http:// URL"},
      {"", "not an absolute http:// URL"},
  };
  for (const auto& [target, message_has] : refused) {
    auto url = ParseAbsoluteUrl(target);
    ASSERT_FALSE(url) << target;
    EXPECT_EQ(url.error().code, Code::kInvalidInput);
    EXPECT_NE(url.error().message.find(message_has), std::string::npos) << url.error().message;
  }
  auto creds = ParseUrlAuthority("user:pw@a.test");
  ASSERT_FALSE(creds);
  EXPECT_NE(creds.error().message.find("credentials"), std::string::npos);
  auto plain = ParseUrlAuthority("a.test");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->port, 80);
}

std::vector<HttpHeader> Headers(std::initializer_list<std::pair<std::string, std::string>> list) {
  std::vector<HttpHeader> out;
  for (const auto& [name, value] : list) {
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.push_back({name, lower, value});
  }
  return out;
}

TEST(HttpWire, OneHostHeaderAtMost) {
  auto none = SingleHostHeader(Headers({{"Accept", "*/*"}}));
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  auto one = SingleHostHeader(Headers({{"HOST", "a.test:81"}}));
  ASSERT_TRUE(one && *one);
  EXPECT_EQ(**one, "a.test:81");
  auto two = SingleHostHeader(Headers({{"Host", "a.test"}, {"host", "b.test"}}));
  ASSERT_FALSE(two);
  EXPECT_EQ(two.error().code, Code::kInvalidInput);
  EXPECT_NE(two.error().message.find("more than one Host header"), std::string::npos);
}

TEST(HttpWire, TheBodyFramingIsOneTheProxyAndEveryUpstreamReadAlike) {
  struct Row {
    std::vector<HttpHeader> headers;
    std::optional<std::uint64_t> length;
    bool chunked;
    bool expect;
    std::string message_has;  // non-empty: refused
  };
  const Row rows[] = {
      {Headers({}), std::nullopt, false, false, ""},
      {Headers({{"Content-Length", "5"}}), 5, false, false, ""},
      {Headers({{"Content-Length", "5"}, {"content-length", "5"}}), 5, false, false, ""},
      {Headers({{"Content-Length", "999999999999999999"}}), 999999999999999999ull, false, false,
       ""},
      {Headers({{"Transfer-Encoding", "Chunked"}}), std::nullopt, true, false, ""},
      {Headers({{"Expect", "100-Continue"}, {"Content-Length", "1"}}), 1, false, true, ""},
      {Headers({{"Content-Length", "-1"}}), {}, false, false, "is not a number"},
      {Headers({{"Content-Length", ""}}), {}, false, false, "is not a number"},
      {Headers({{"Content-Length", "1 2"}}), {}, false, false, "is not a number"},
      {Headers({{"Content-Length", "0x10"}}), {}, false, false, "is not a number"},
      {Headers({{"Content-Length", "1000000000000000000"}}), {}, false, false, "is not a number"},
      {Headers({{"Content-Length", "5"}, {"Content-Length", "6"}}),
       {},
       false,
       false,
       "two different Content-Length"},
      {Headers({{"Transfer-Encoding", "gzip, chunked"}}), {}, false, false, "only Transfer"},
      {Headers({{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}}),
       {},
       false,
       false,
       "only Transfer"},
      {Headers({{"Content-Length", "3"}, {"Transfer-Encoding", "chunked"}}),
       {},
       false,
       false,
       "both Content-Length and Transfer-Encoding"},
      {Headers({{"Transfer_Encoding", "chunked"}}), {}, false, false, "may read as transfer"},
      {Headers({{"Content_Length", "3"}}), {}, false, false, "may read as content-length"},
      {Headers({{"Expect", "something"}}), {}, false, false, "only Expect"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.message_has);
    auto f = ParseBodyFraming(r.headers);
    if (!r.message_has.empty()) {
      ASSERT_FALSE(f);
      EXPECT_EQ(f.error().code, Code::kInvalidInput);
      EXPECT_NE(f.error().message.find(r.message_has), std::string::npos) << f.error().message;
      continue;
    }
    ASSERT_TRUE(f) << f.error().message;
    EXPECT_EQ(f->content_length, r.length);
    EXPECT_EQ(f->chunked, r.chunked);
    EXPECT_EQ(f->expect_continue, r.expect);
  }
}

TEST(HttpWire, TheUpstreamGetsOriginFormWithoutHopByHopHeaders) {
  auto request = ParseRequestHead(
      "POST http://a.test:81/p HTTP/1.1\r\nConnection: keep-alive, X-Secret, Content-Length, "
      "Host\r\nProxy-Connection: x-other\r\nProxy-Authorization: Basic Zm9v\r\nKeep-Alive: 5\r\n"
      "TE: trailers\r\nTrailer: X\r\nUpgrade: h2c\r\nExpect: 100-continue\r\nX-Secret: 1\r\n"
      "X-Other: 2\r\nX-Kept: 3\r\nContent-Length: 4\r\n\r\n");
  ASSERT_TRUE(request) << request.error().message;
  const std::string out = UpstreamRequestHead(*request, "/p", {"a.test", 81}, false);
  EXPECT_EQ(out,
            "POST /p HTTP/1.1\r\nHost: a.test:81\r\nX-Kept: 3\r\nContent-Length: 4\r\n"
            "Connection: close\r\n\r\n");
  // The client's own Host header goes as sent, and none is added.
  auto with_host = ParseRequestHead("GET http://a.test/ HTTP/1.0\r\nHost: A.Test\r\n\r\n");
  ASSERT_TRUE(with_host);
  EXPECT_EQ(UpstreamRequestHead(*with_host, "/", {"a.test", 80}, true),
            "GET / HTTP/1.0\r\nHost: A.Test\r\nConnection: close\r\n\r\n");
}

TEST(HttpWire, ChunkSizeLinesAndTrailersAreReadAsTheUpstreamWould) {
  struct Row {
    std::string line;
    std::optional<std::uint64_t> size;  // nullopt: refused
    std::string message_has;
  };
  const Row rows[] = {
      {"5\r\n", 5, ""},
      {"1a2B\r\n", 0x1a2b, ""},
      {"0\r\n", 0, ""},
      {"6;ext=1\r\n", 6, ""},
      {" 6 ;ext\r\n", 6, ""},
      {"fffffffffffffff\r\n", 0xfffffffffffffffull, ""},
      {"5\n", std::nullopt, "does not end in CRLF"},
      {"5", std::nullopt, "does not end in CRLF"},
      {"", std::nullopt, "does not end in CRLF"},
      {"5;x\rGET / HTTP/1.1\r\n", std::nullopt, "control character"},
      {"5\0\r\n"s, std::nullopt, "control character"},
      {"zz\r\n", std::nullopt, "not hexadecimal"},
      {"\r\n", std::nullopt, "not hexadecimal"},
      {"-5\r\n", std::nullopt, "not hexadecimal"},
      {"0x5\r\n", std::nullopt, "not hexadecimal"},
      {"1000000000000000\r\n", std::nullopt, "not hexadecimal"},  // 16 digits
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.line);
    auto size = ParseChunkSizeLine(r.line);
    if (!r.size) {
      ASSERT_FALSE(size);
      EXPECT_EQ(size.error().code, Code::kInvalidInput);
      EXPECT_NE(size.error().message.find(r.message_has), std::string::npos)
          << size.error().message;
      continue;
    }
    ASSERT_TRUE(size) << size.error().message;
    EXPECT_EQ(*size, *r.size);
  }
  const std::pair<std::string, std::string> trailers[] = {
      {"\r\n", ""},
      {"X-Checksum: 1\r\n", ""},
      {"X-Empty:\r\n", ""},
      {"\n", "does not end in CRLF"},
      {"X: 1\n", "does not end in CRLF"},
      {"GET /smuggled HTTP/1.1\r\n", "is not \"name: value\""},
      {": v\r\n", "is not \"name: value\""},
      {"Bad Name: v\r\n", "is not \"name: value\""},
      {"X: a\x01\r\n", "control character"},
      {"X: a\0\r\n"s, "control character"},
  };
  for (const auto& [line, message_has] : trailers) {
    SCOPED_TRACE(line);
    auto ok = CheckTrailerLine(line);
    if (message_has.empty()) {
      EXPECT_TRUE(ok) << ok.error().message;
      continue;
    }
    ASSERT_FALSE(ok);
    EXPECT_NE(ok.error().message.find(message_has), std::string::npos) << ok.error().message;
  }
}

TEST(HttpWire, AResponseHeadKeepsItsStatusLineAndLosesItsConnectionHeaders) {
  auto r = ParseResponseHead(
      "HTTP/1.1 200 OK\r\nContent-Length: 20\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\n"
      "Proxy-Connection: x\r\nX-A: b\r\n\r\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->content_length, 20u);
  EXPECT_EQ(ClientResponseHead(*r),
            "HTTP/1.1 200 OK\r\nContent-Length: 20\r\nX-A: b\r\nConnection: close\r\n\r\n");
  auto no_length = ParseResponseHead("HTTP/1.0 204 No Content\r\nContent-Length: x\r\n\r\n");
  ASSERT_TRUE(no_length);
  EXPECT_EQ(no_length->status, 204);
  EXPECT_FALSE(no_length->content_length);
  for (const std::string& bad :
       {"HTTP/2 200 OK\r\n\r\n"s, "HTTP/1.1 20\r\n\r\n"s, "ICY 200 OK\r\n\r\n"s,
        "HTTP/1.1 200 OK\r\nBad Header\r\n\r\n"s, "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n"s}) {
    auto parsed = ParseResponseHead(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().message, "the upstream's response is not HTTP/1.x");
  }
}

TEST(HttpWire, AnErrorResponseIsOneLineInAHeaderAndTheBody) {
  const std::string out = ErrorResponse(403, "denied\r\nX-Injected: 1\x7f");
  EXPECT_EQ(out,
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
            "31\r\nConnection: close\r\nX-Cordon-Reason: denied??X-Injected: 1?\r\n\r\n"
            "cordon: denied??X-Injected: 1?\n");
  EXPECT_NE(ErrorResponse(400, "x").find("400 Bad Request"), std::string::npos);
  EXPECT_NE(ErrorResponse(502, "x").find("502 Bad Gateway"), std::string::npos);
  EXPECT_EQ(OneLine(std::string(1000, 'r')).size(), 400u);
  EXPECT_EQ(HttpStatusFor(Error{Code::kDeniedByPolicy, "x", 0, {}}), 403);
  EXPECT_EQ(HttpStatusFor(Error{Code::kTooLarge, "x", 0, {}}), 400);
}

}  // namespace
}  // namespace cordon
