// SHA-256 and HMAC-SHA-256 through OpenSSL's EVP API, returned as lowercase hex.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace cordon {

std::string Sha256Hex(std::string_view data);
std::string HmacSha256Hex(std::string_view key, std::string_view data);
// `bytes` random bytes from getrandom(2), as lowercase hex (tokens, ids, temp names).
std::string RandomHex(std::size_t bytes);

// Incremental SHA-256 for data that arrives in pieces (file hashing).
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void Update(std::string_view data);
  std::string FinishHex();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cordon
