// OpenSSL EVP wrappers; any OpenSSL failure aborts, since a wrong hash would corrupt the audit
// chain.
#include "core/hash.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
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

// HMAC goes through EVP, fetched once, without the system OpenSSL configuration (cordon needs
// none of it for hashing).
const EVP_MD* Sha256Md() {
  static const EVP_MD* md = [] {
    Check(OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr), "OPENSSL_init_crypto");
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
    if (fetched == nullptr) Check(0, "EVP_MD_fetch(SHA2-256)");
    return fetched;
  }();
  return md;
}

}  // namespace

// Plain SHA-256 uses OpenSSL's low-level functions on purpose: they run the same assembly
// (SHA-NI where the CPU has it) without OpenSSL 3's provider machinery, whose first fetch
// costs about 0.4 ms of every cordon start (a fifth of `cordon exec`'s own work). OpenSSL 3
// deprecates them but keeps them; the deprecation warning is silenced for these calls only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
struct Sha256Stream::State {
  SHA256_CTX ctx;
};

Sha256Stream::Sha256Stream() : state_(std::make_unique<State>()) {
  Check(SHA256_Init(&state_->ctx), "SHA256_Init");
}

Sha256Stream::~Sha256Stream() = default;

void Sha256Stream::Update(std::string_view data) {
  Check(SHA256_Update(&state_->ctx, data.data(), data.size()), "SHA256_Update");
}

std::string Sha256Stream::FinishHex() {
  unsigned char md[SHA256_DIGEST_LENGTH];
  Check(SHA256_Final(md, &state_->ctx), "SHA256_Final");
  return ToHex(md, SHA256_DIGEST_LENGTH);
}
#pragma GCC diagnostic pop

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
  return ToHex(reinterpret_cast<const unsigned char*>(raw.data()),
               static_cast<unsigned int>(raw.size()));
}

std::string Sha256Hex(std::string_view data) {
  Sha256Stream s;
  s.Update(data);
  return s.FinishHex();
}

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(Sha256Md(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len) == nullptr) {
    Check(0, "HMAC");
  }
  return ToHex(md, len);
}

}  // namespace cordon
