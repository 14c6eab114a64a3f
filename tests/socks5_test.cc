// runner/socks5: the egress proxy's SOCKS5 codec, table-tested without a socket. Each row is the
// bytes a client sent and what must come out: the parsed greeting or request, "need more bytes",
// or the error code (which decides the reply) and the words of the message.
#include "runner/socks5.h"

#include <gtest/gtest.h>

#include <string>

namespace cordon {
namespace {

using namespace std::string_literals;

std::string Port(int port) {
  return {static_cast<char>(port >> 8), static_cast<char>(port & 0xff)};
}

TEST(Socks5, TheGreetingIsServedOnlyWithNoAuthentication) {
  struct Row {
    std::string bytes;
    bool need_more = false;
    bool no_auth = false;
    std::size_t size = 0;
  };
  const Row rows[] = {
      {"", true},
      {"\x05"s, true},
      {"\x05\x02\x00"s, true},  // two methods announced, one sent
      {"\x05\x01\x00"s, false, true, 3},
      {"\x05\x00"s, false, false, 2},          // no method at all
      {"\x05\x01\x02"s, false, false, 3},      // username/password only
      {"\x05\x02\x01\x02"s, false, false, 4},  // GSSAPI and username/password
      {"\x05\x03\x02\x01\x00"s, false, true, 5},
      {"\x05\x01\x00\x05\x01\x00\x03"s, false, true, 3},  // the request follows: not consumed
      {"\x05\x02\x02\x02\x00"s, false, false, 4},         // the 0 after the methods is not one
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(testing::PrintToString(r.bytes));
    auto g = ParseSocks5Greeting(r.bytes);
    ASSERT_TRUE(g) << g.error().message;
    if (r.need_more) {
      EXPECT_FALSE(*g);
      continue;
    }
    ASSERT_TRUE(*g);
    EXPECT_EQ((*g)->no_auth, r.no_auth);
    EXPECT_EQ((*g)->size, r.size);
  }
  // 255 methods, all of them 0xff but the last: a full-length greeting.
  const std::string many = "\x05\xff"s + std::string(254, '\xff') + "\x00"s;
  auto g = ParseSocks5Greeting(many);
  ASSERT_TRUE(g && *g);
  EXPECT_TRUE((*g)->no_auth);
  EXPECT_EQ((*g)->size, 257u);
  auto truncated = ParseSocks5Greeting(std::string_view(many).substr(0, 256));
  ASSERT_TRUE(truncated);
  EXPECT_FALSE(*truncated);

  for (const std::string& bad : {"\x04\x01\x00"s, "\x00"s, "GET / HTTP/1.1\r\n\r\n"s}) {
    auto v = ParseSocks5Greeting(bad);
    ASSERT_FALSE(v);
    EXPECT_EQ(v.error().code, Code::kInvalidInput);
    EXPECT_NE(v.error().message.find("version other than 5"), std::string::npos);
  }
  EXPECT_EQ(Socks5MethodReply(true), "\x05\x00"s);
  EXPECT_EQ(Socks5MethodReply(false), "\x05\xff"s);
}

TEST(Socks5, ARequestNamesAnIpv4AnIpv6AddressOrANameAndAPort) {
  struct Row {
    std::string bytes;
    std::uint8_t command;
    std::uint8_t address_type;
    std::string host;
    int port;
  };
  const std::string v6 = "\x20\x01\x0d\xb8"s + std::string(11, '\0') + "\x01"s;
  const Row rows[] = {
      {"\x05\x01\x00\x01\x7f\x00\x00\x01"s + Port(8080), 1, 1, "127.0.0.1", 8080},
      {"\x05\x01\x00\x04"s + v6 + Port(443), 1, 4, "2001:db8::1", 443},
      {"\x05\x01\x00\x04"s + std::string(15, '\0') + "\x01"s + Port(1), 1, 4, "::1", 1},
      {"\x05\x01\x00\x03\x10"s + "api.example.test" + Port(80), 1, 3, "api.example.test", 80},
      {"\x05\x02\x00\x01\x0a\x00\x00\x01"s + Port(65535), 2, 1, "10.0.0.1", 65535},  // BIND
      {"\x05\x01\x00\x01\x7f\x00\x00\x01"s + Port(0), 1, 1, "127.0.0.1", 0},
      // A name's bytes are kept as sent, NUL and all: ParseEgressHost refuses it later.
      {"\x05\x01\x00\x03\x03"s + "a\0b"s + Port(80), 1, 3, "a\0b"s, 80},
      {"\x05\x01\x00\x03\x00"s + Port(80), 1, 3, "", 80},                     // an empty name
      {"\x05\x01\xff\x01\x01\x02\x03\x04"s + Port(80), 1, 1, "1.2.3.4", 80},  // RSV not read
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(testing::PrintToString(r.bytes));
    auto req = ParseSocks5Request(r.bytes + "early data");
    ASSERT_TRUE(req) << req.error().message;
    ASSERT_TRUE(*req);
    EXPECT_EQ((*req)->command, r.command);
    EXPECT_EQ((*req)->address_type, r.address_type);
    EXPECT_EQ((*req)->host, r.host);
    EXPECT_EQ((*req)->port, r.port);
    EXPECT_EQ((*req)->size, r.bytes.size());  // what follows is the tunnel's
    // Every prefix is "need more bytes", never an error or a read past the end.
    for (std::size_t cut = 0; cut < r.bytes.size(); ++cut) {
      auto part = ParseSocks5Request(std::string_view(r.bytes).substr(0, cut));
      ASSERT_TRUE(part) << cut;
      EXPECT_FALSE(*part) << cut;
    }
  }
  // The longest name: 255 bytes.
  const std::string name(255, 'n');
  auto longest = ParseSocks5Request("\x05\x01\x00\x03\xff"s + name + Port(443));
  ASSERT_TRUE(longest && *longest);
  EXPECT_EQ((*longest)->host, name);
  EXPECT_EQ((*longest)->size, 4u + 1 + 255 + 2);
}

TEST(Socks5, ABadVersionOrAddressTypeIsKnownFromTheFirstFiveBytes) {
  struct Row {
    std::string bytes;
    Code code;
    std::string message_has;
  };
  const Row rows[] = {
      {"\x04\x01\x00\x01\x7f"s, Code::kInvalidInput, "version other than 5"},
      {"\x00\x00\x00\x00\x00"s, Code::kInvalidInput, "version other than 5"},
      {"\x05\x01\x00\x05\x7f"s, Code::kUnsupported, "address type other than 1, 3 or 4"},
      {"\x05\x01\x00\x00\x7f"s, Code::kUnsupported, "address type other than 1, 3 or 4"},
      {"\x05\x01\x00\x02\x7f\x00\x00\x01\x00\x50"s, Code::kUnsupported, "address type"},
      {"\x05\x01\x00\xff\x00"s, Code::kUnsupported, "address type"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(testing::PrintToString(r.bytes));
    auto req = ParseSocks5Request(r.bytes);
    ASSERT_FALSE(req);
    EXPECT_EQ(req.error().code, r.code);
    EXPECT_NE(req.error().message.find(r.message_has), std::string::npos) << req.error().message;
  }
}

TEST(Socks5, OnlyConnectToAPortIsServedAndEachRefusalHasItsReply) {
  Socks5Request connect{1, 3, "a.test", 443, 0};
  EXPECT_TRUE(CheckSocks5Connect(connect));
  Socks5Request bind = connect;
  bind.command = 2;
  auto b = CheckSocks5Connect(bind);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, Code::kUnsupported);
  EXPECT_EQ(b.error().message, "the SOCKS5 command 2 is not served (only CONNECT)");
  Socks5Request udp = connect;
  udp.command = 3;
  EXPECT_FALSE(CheckSocks5Connect(udp));
  Socks5Request port0 = connect;
  port0.port = 0;
  auto p = CheckSocks5Connect(port0);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, Code::kInvalidInput);
  EXPECT_EQ(p.error().message, "the SOCKS5 request names port 0");

  EXPECT_EQ(Socks5ReplyBytes(Socks5Reply::kSucceeded), "\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00"s);
  EXPECT_EQ(Socks5ReplyBytes(Socks5Reply::kNotAllowed),
            "\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00"s);
  EXPECT_EQ(Socks5ReplyBytes(Socks5Reply::kAddressTypeNotSupported)[1], '\x08');
  EXPECT_EQ(Socks5ReplyBytes(Socks5Reply::kCommandNotSupported)[1], '\x07');
}

}  // namespace
}  // namespace cordon
