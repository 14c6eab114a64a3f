// SOCKS5 (RFC 1928) as the egress proxy serves it: "no authentication" and CONNECT, to a name, an
// IPv4 or an IPv6 address. A pure codec, bytes in, a parsed value or a typed error out, no socket
// and no system call; table-tested (tests/socks5_test.cc) and fuzzed (tests/fuzz/socks5_fuzz.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace cordon {

// The reply codes the proxy sends (RFC 1928, section 6).
enum class Socks5Reply : std::uint8_t {
  kSucceeded = 0,
  kGeneralFailure = 1,
  kNotAllowed = 2,
  kHostUnreachable = 4,
  kConnectionRefused = 5,
  kCommandNotSupported = 7,
  kAddressTypeNotSupported = 8,
};

// The greeting: version 5, the number of methods, the methods. `size` bytes long.
struct Socks5Greeting {
  bool no_auth = false;  // the client offers "no authentication" (0x00), the only method served
  std::size_t size = 0;
};
// nullopt: more bytes are needed. kInvalidInput when the version is not 5.
Result<std::optional<Socks5Greeting>> ParseSocks5Greeting(std::string_view bytes);
// The method selection: "no authentication", or "no acceptable method" (0xff) when not offered.
std::string Socks5MethodReply(bool no_auth);
inline constexpr std::string_view kSocks5NoAcceptableMethod =
    "the SOCKS5 client offers no method but username/password or GSSAPI (only \"no "
    "authentication\" is served)";

// A request: version 5, command, reserved, address type (1 IPv4, 3 a name, 4 IPv6), address,
// port. `host` is the address's text ("127.0.0.1", "2001:db8::1") or the name's bytes as sent
// (any byte: the caller's host parser judges them). `size` bytes long.
struct Socks5Request {
  std::uint8_t command = 0;
  std::uint8_t address_type = 0;
  std::string host;
  int port = 0;
  std::size_t size = 0;
};
// nullopt: more bytes are needed. kInvalidInput when the version is not 5, kUnsupported (reply
// kAddressTypeNotSupported) for an address type other than 1, 3 or 4, known from the first five
// bytes.
Result<std::optional<Socks5Request>> ParseSocks5Request(std::string_view bytes);
// Whether the proxy serves the request: kUnsupported (reply kCommandNotSupported) for a command
// other than CONNECT, kInvalidInput (reply kNotAllowed) for port 0.
Status CheckSocks5Connect(const Socks5Request& request);

// A reply: version 5, the code, and a zero IPv4 address and port as the bound address.
std::string Socks5ReplyBytes(Socks5Reply reply);

}  // namespace cordon
