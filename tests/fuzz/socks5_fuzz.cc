// libFuzzer target for runner/socks5 (scripts/fuzz.sh builds and runs it). The input is what a
// client sent: a greeting, then a request, as the proxy reads them. Besides ASan and UBSan (no
// read past the input), it checks the codec's promises: a frame never claims more bytes than it
// was given, one byte fewer is "need more", never an error; a parsed request encodes back to the
// very bytes it came from; an error is known from the bytes that decide it, with a stable code.
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runner/socks5.h"
#include "tests/fuzz/fuzz_check.h"

namespace cordon {
namespace {

unsigned char At(std::string_view s, std::size_t i) { return static_cast<unsigned char>(s[i]); }

// The greeting's frame is exactly its announced length; a shorter input needs more.
std::size_t CheckGreeting(std::string_view bytes) {
  auto g = ParseSocks5Greeting(bytes);
  if (!g) {
    FUZZ_CHECK(g.error().code == Code::kInvalidInput && !bytes.empty() && At(bytes, 0) != 5);
    return 0;
  }
  if (!*g) {
    FUZZ_CHECK(bytes.size() < 2 || bytes.size() < 2u + At(bytes, 1));
    return 0;
  }
  const Socks5Greeting& greeting = **g;
  FUZZ_CHECK(greeting.size == 2u + At(bytes, 1) && greeting.size <= bytes.size());
  const std::string_view methods = bytes.substr(2, greeting.size - 2);
  FUZZ_CHECK(greeting.no_auth == (methods.find('\0') != std::string_view::npos));
  auto shorter = ParseSocks5Greeting(bytes.substr(0, greeting.size - 1));
  FUZZ_CHECK(shorter && !*shorter);
  FUZZ_CHECK(Socks5MethodReply(greeting.no_auth).size() == 2);
  return greeting.size;
}

// The request's bytes again, from what was parsed (the reserved byte as sent).
std::string Encode(const Socks5Request& r, unsigned char reserved) {
  std::string out = {5, static_cast<char>(r.command), static_cast<char>(reserved),
                     static_cast<char>(r.address_type)};
  unsigned char addr[16] = {};
  if (r.address_type == 1) {
    FUZZ_CHECK(::inet_pton(AF_INET, r.host.c_str(), addr) == 1);
    out.append(reinterpret_cast<const char*>(addr), 4);
  } else if (r.address_type == 4) {
    FUZZ_CHECK(::inet_pton(AF_INET6, r.host.c_str(), addr) == 1);
    out.append(reinterpret_cast<const char*>(addr), 16);
  } else {
    FUZZ_CHECK(r.address_type == 3 && r.host.size() <= 255);
    out += static_cast<char>(r.host.size());
    out += r.host;
  }
  out += static_cast<char>(r.port >> 8);
  out += static_cast<char>(r.port & 0xff);
  return out;
}

void CheckRequest(std::string_view bytes) {
  auto req = ParseSocks5Request(bytes);
  if (!req) {
    FUZZ_CHECK(bytes.size() >= 5 && !req.error().message.empty());
    if (req.error().code == Code::kInvalidInput) {
      FUZZ_CHECK(At(bytes, 0) != 5);
    } else {
      FUZZ_CHECK(req.error().code == Code::kUnsupported && At(bytes, 0) == 5);
      const unsigned char atyp = At(bytes, 3);
      FUZZ_CHECK(atyp != 1 && atyp != 3 && atyp != 4);
    }
    return;
  }
  if (!*req) return;
  const Socks5Request& r = **req;
  FUZZ_CHECK(r.size <= bytes.size() && r.size >= 4 + 1 + 2);
  FUZZ_CHECK(r.port >= 0 && r.port <= 65535);
  FUZZ_CHECK(Encode(r, At(bytes, 2)) == bytes.substr(0, r.size));
  auto shorter = ParseSocks5Request(bytes.substr(0, r.size - 1));
  FUZZ_CHECK(shorter && !*shorter);
  auto served = CheckSocks5Connect(r);
  FUZZ_CHECK(served.has_value() == (r.command == 1 && r.port != 0));
  if (!served) {
    const Code expect = r.command != 1 ? Code::kUnsupported : Code::kInvalidInput;
    FUZZ_CHECK(served.error().code == expect);
  }
}

}  // namespace
}  // namespace cordon

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace cordon;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // As the proxy reads them: the greeting, then the request in the bytes after it; and the whole
  // input as a request, so that request bytes need no greeting in front to be reached.
  if (const std::size_t used = CheckGreeting(bytes); used > 0) CheckRequest(bytes.substr(used));
  CheckRequest(bytes);
  for (Socks5Reply reply : {Socks5Reply::kSucceeded, Socks5Reply::kAddressTypeNotSupported}) {
    const std::string out = Socks5ReplyBytes(reply);
    FUZZ_CHECK(out.size() == 10 && out[0] == 5 && out[1] == static_cast<char>(reply));
  }
  return 0;
}
