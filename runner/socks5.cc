// SOCKS5 framing for the egress proxy (runner/socks5.h): pure parsing and encoding.
#include "runner/socks5.h"

#include <arpa/inet.h>

namespace cordon {
namespace {

constexpr unsigned char kVersion = 5;

unsigned char Byte(std::string_view s, std::size_t i) { return static_cast<unsigned char>(s[i]); }

// inet_ntop only formats bytes (no system call): the address as its canonical text.
std::string AddressText(int family, const char* bytes) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(family, bytes, buf, sizeof buf);
  return buf;
}

}  // namespace

Result<std::optional<Socks5Greeting>> ParseSocks5Greeting(std::string_view bytes) {
  if (bytes.empty()) return std::optional<Socks5Greeting>();
  if (Byte(bytes, 0) != kVersion) {
    return Fail(Code::kInvalidInput, "the SOCKS5 greeting has a version other than 5");
  }
  if (bytes.size() < 2) return std::optional<Socks5Greeting>();
  const std::size_t size = 2 + Byte(bytes, 1);
  if (bytes.size() < size) return std::optional<Socks5Greeting>();
  Socks5Greeting out;
  out.size = size;
  out.no_auth = bytes.substr(2, size - 2).find('\0') != std::string_view::npos;
  return out;
}

std::string Socks5MethodReply(bool no_auth) {
  return std::string{static_cast<char>(kVersion), static_cast<char>(no_auth ? 0x00 : 0xff)};
}

Result<std::optional<Socks5Request>> ParseSocks5Request(std::string_view bytes) {
  if (bytes.size() < 5) return std::optional<Socks5Request>();
  if (Byte(bytes, 0) != kVersion) {
    return Fail(Code::kInvalidInput, "the SOCKS5 request has a version other than 5");
  }
  Socks5Request out;
  out.command = Byte(bytes, 1);
  out.address_type = Byte(bytes, 3);
  std::size_t address_size = 0;
  if (out.address_type == 1) {
    address_size = 4;
  } else if (out.address_type == 4) {
    address_size = 16;
  } else if (out.address_type == 3) {
    address_size = 1 + Byte(bytes, 4);
  } else {
    return Fail(Code::kUnsupported, "the SOCKS5 request has an address type other than 1, 3 or 4");
  }
  out.size = 4 + address_size + 2;
  if (bytes.size() < out.size) return std::optional<Socks5Request>();
  out.port = (Byte(bytes, 4 + address_size) << 8) | Byte(bytes, 4 + address_size + 1);
  if (out.address_type == 1) {
    out.host = AddressText(AF_INET, bytes.data() + 4);
  } else if (out.address_type == 4) {
    out.host = AddressText(AF_INET6, bytes.data() + 4);
  } else {
    out.host = std::string(bytes.substr(5, address_size - 1));
  }
  return out;
}

Status CheckSocks5Connect(const Socks5Request& request) {
  if (request.command != 1) {
    return Fail(Code::kUnsupported, "the SOCKS5 command " + std::to_string(request.command) +
                                        " is not served (only CONNECT)");
  }
  if (request.port == 0) return Fail(Code::kInvalidInput, "the SOCKS5 request names port 0");
  return {};
}

std::string Socks5ReplyBytes(Socks5Reply reply) {
  std::string out(10, '\0');
  out[0] = static_cast<char>(kVersion);
  out[1] = static_cast<char>(reply);
  out[3] = 1;
  return out;
}

}  // namespace cordon
