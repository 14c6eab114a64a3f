// OpenSSL EVP wrappers; any OpenSSL failure aborts, since a wrong hash would corrupt the audit chain.
#include "runner/hash.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace cordon {
namespace {

void Check(int ok, const char* what) {
  if (ok != 1) {
    std::fprintf(stderr, "cordon: fatal: OpenSSL %s failed\n", what);
    std::abort();
  }
}

std::string ToHex(const unsigned char* data, unsigned int len) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

}  // namespace

struct Sha256Stream::State {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256Stream::Sha256Stream() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  if (state_->ctx == nullptr) Check(0, "EVP_MD_CTX_new");
  Check(EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr), "EVP_DigestInit_ex");
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(state_->ctx); }

void Sha256Stream::Update(std::string_view data) {
  Check(EVP_DigestUpdate(state_->ctx, data.data(), data.size()), "EVP_DigestUpdate");
}

std::string Sha256Stream::FinishHex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  Check(EVP_DigestFinal_ex(state_->ctx, md, &len), "EVP_DigestFinal_ex");
  return ToHex(md, len);
}

std::string RandomHex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::size_t got = 0;
  while (got < raw.size()) {
    ssize_t n = ::getrandom(raw.data() + got, raw.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      Check(0, "getrandom");
    }
    got += static_cast<std::size_t>(n);
  }
  return ToHex(reinterpret_cast<const unsigned char*>(raw.data()), static_cast<unsigned int>(raw.size()));
}

std::string Sha256Hex(std::string_view data) {
  Sha256Stream s;
  s.Update(data);
  return s.FinishHex();
}

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len) == nullptr) {
    Check(0, "HMAC");
  }
  return ToHex(md, len);
}

}  // namespace cordon
