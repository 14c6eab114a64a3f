// Ed25519 through OpenSSL's EVP API: key files, key ids, signing and checking checkpoints.
#include "audit/checkpoint.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/fs.h"
#include "core/hash.h"
#include "core/unique_fd.h"

namespace cordon {
namespace {

constexpr std::string_view kSignedPrefix = "cordon-checkpoint-v1\n";

std::string Hex(const unsigned char* p, std::size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

std::optional<std::string> Unhex(const std::string& hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    int hi = val(hex[i]), lo = val(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Code::kNotFound, "cannot read key file " + path, errno, path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

Status WriteNewFile(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return SysFail(Code::kInvalidInput, "create", path);
  UniqueFd guard(fd);
  if (::fchmod(fd, mode) != 0) return SysFail(Code::kInternal, "fchmod", path);
  TRY(WriteAll(fd, text, path));
  if (::fsync(fd) != 0) return SysFail(Code::kInternal, "fsync", path);
  return {};
}

}  // namespace

std::string CheckpointSignedText(const CheckpointPosition& pos, const std::string& key_id) {
  // nlohmann's object is a std::map: the keys come out sorted, so the text is canonical.
  Json j = {{"log_id", pos.log_id},
            {"key_id", key_id},
            {"lines", pos.lines},
            {"bytes", pos.bytes},
            {"head", pos.head}};
  return std::string(kSignedPrefix) + j.dump();
}

Json CheckpointJson(const CheckpointPosition& pos, const std::optional<std::string>& key_id,
                    const std::optional<std::string>& sig) {
  Json j = {{"log_id", pos.log_id}, {"lines", pos.lines}, {"bytes", pos.bytes}, {"head", pos.head}};
  if (key_id) j["key_id"] = *key_id;
  if (sig) j["sig"] = *sig;
  return j;
}

struct Ed25519Key::Impl {
  EVP_PKEY* pkey = nullptr;
  ~Impl() { EVP_PKEY_free(pkey); }
};

Ed25519Key::Ed25519Key() : impl_(std::make_unique<Impl>()) {}
Ed25519Key::~Ed25519Key() = default;
Ed25519Key::Ed25519Key(Ed25519Key&&) noexcept = default;
Ed25519Key& Ed25519Key::operator=(Ed25519Key&&) noexcept = default;

void Ed25519Key::ComputeKeyId() {
  unsigned char raw[32];
  std::size_t len = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(impl_->pkey, raw, &len) != 1) {
    key_id_.clear();
    return;
  }
  key_id_ = Sha256Hex(std::string_view(reinterpret_cast<const char*>(raw), len)).substr(0, 16);
}

Result<Ed25519Key> Ed25519Key::Generate() {
  Ed25519Key k;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  if (ctx == nullptr) return Fail(Code::kInternal, "Ed25519 is not available in OpenSSL");
  const bool ok = EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &k.impl_->pkey) == 1;
  EVP_PKEY_CTX_free(ctx);
  if (!ok) return Fail(Code::kInternal, "Ed25519 key generation failed");
  k.has_private_ = true;
  k.ComputeKeyId();
  return k;
}

Result<Ed25519Key> Ed25519Key::LoadPrivate(const std::string& path, std::string* pem_text) {
  ASSIGN_OR_RETURN(std::string text, ReadKeyFileChecked(path));
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  Ed25519Key k;
  k.impl_->pkey = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (k.impl_->pkey == nullptr || EVP_PKEY_get_id(k.impl_->pkey) != EVP_PKEY_ED25519) {
    return Fail(Code::kInvalidInput,
                "signing key " + path + " is not a PEM Ed25519 private key (cordon audit keygen)");
  }
  k.has_private_ = true;
  k.ComputeKeyId();
  if (pem_text != nullptr) *pem_text = std::move(text);
  return k;
}

Result<Ed25519Key> Ed25519Key::LoadPublic(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadText(path));
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  Ed25519Key k;
  k.impl_->pkey = PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
  if (k.impl_->pkey == nullptr && text.find("PRIVATE KEY-----") != std::string::npos) {
    // A private key file given for its public half is a key read like any other: refused when
    // others can read it.
    auto priv = LoadPrivate(path);
    if (priv || priv.error().code == Code::kDeniedByPolicy) return priv;
  }
  if (k.impl_->pkey == nullptr || EVP_PKEY_get_id(k.impl_->pkey) != EVP_PKEY_ED25519) {
    return Fail(Code::kInvalidInput, "public key " + path + " is not a PEM Ed25519 public key");
  }
  k.ComputeKeyId();
  return k;
}

std::string Ed25519Key::PrivatePem() const {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!has_private_ ||
      PEM_write_bio_PrivateKey(bio.get(), impl_->pkey, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return {};
  return BioText(bio.get());
}

std::string Ed25519Key::PublicPem() const {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PUBKEY(bio.get(), impl_->pkey) != 1) return {};
  return BioText(bio.get());
}

Result<std::string> Ed25519Key::Sign(std::string_view msg) const {
  if (!has_private_) return Fail(Code::kInternal, "no private key to sign with");
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned char sig[64];
  std::size_t len = sizeof sig;
  const bool ok = ctx != nullptr &&
                  EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, impl_->pkey) == 1 &&
                  EVP_DigestSign(ctx, sig, &len, reinterpret_cast<const unsigned char*>(msg.data()),
                                 msg.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) return Fail(Code::kInternal, "Ed25519 signing failed");
  return Hex(sig, len);
}

bool Ed25519Key::Verify(std::string_view msg, const std::string& sig_hex) const {
  auto sig = Unhex(sig_hex);
  if (!sig || sig->size() != 64) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok =
      ctx != nullptr && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, impl_->pkey) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig->data()), sig->size(),
                       reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

Result<std::string> WriteNewKeyPair(const std::string& private_path,
                                    const std::string& public_path) {
  ASSIGN_OR_RETURN(Ed25519Key key, Ed25519Key::Generate());
  TRY(WriteNewFile(private_path, key.PrivatePem(), 0600));
  TRY(WriteNewFile(public_path, key.PublicPem(), 0644));
  return key.key_id();
}

}  // namespace cordon

#include <sys/file.h>
#include <syslog.h>

namespace cordon {

std::string AuditWitness::FilePath(const std::string& spec) {
  return spec == "syslog" || spec.rfind("fd:", 0) == 0 ? std::string() : spec;
}

Result<std::shared_ptr<AuditWitness>> AuditWitness::Open(const std::string& spec) {
  std::shared_ptr<AuditWitness> w(new AuditWitness());
  w->spec_ = spec;
  if (spec == "syslog") {
    w->syslog_ = true;
    return w;
  }
  if (spec.rfind("fd:", 0) == 0) {
    const std::string num = spec.substr(3);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 6) {
      return Fail(Code::kInvalidInput, "witness " + spec + ": fd:N needs a descriptor number");
    }
    w->fd_ = std::stoi(num);
    if (::fcntl(w->fd_, F_GETFD) < 0) {
      return Fail(Code::kInvalidInput, "witness " + spec + ": descriptor is not open", errno);
    }
    if (w->fd_ <= 2) {
      return Fail(Code::kInvalidInput, "witness " + spec +
                                           ": standard streams are not a witness (exec passes the "
                                           "command's standard error through)");
    }
    // A confined process must not inherit it.
    ::fcntl(w->fd_, F_SETFD, FD_CLOEXEC);
    return w;
  }
  if (spec.empty()) return Fail(Code::kInvalidInput, "empty witness");
  int fd = ::open(spec.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return SysFail(Code::kInvalidInput, "open witness", spec);
  w->fd_ = fd;
  w->own_fd_ = true;
  w->path_ = spec;
  return w;
}

AuditWitness::~AuditWitness() {
  if (own_fd_ && fd_ >= 0) ::close(fd_);
}

// --- failclosed: the witness file at the path must be the one open, holding every line this
// witness wrote. When it was deleted, moved or replaced, the file at the path is opened (created
// 0600); when it was cut in place, writing goes on in it. Either way the next line written there
// first repeats the last checkpoint this witness wrote, marked `restarted` (the link: audit verify
// warns that what the old witness held is gone, and the repeated checkpoint still proves the log
// up to it). A witness that cannot be reopened fails the checkpoint: the session stops.
Status AuditWitness::FollowPath() {
  struct stat fst {};
  if (::fstat(fd_, &fst) != 0) return SysFail(Code::kAuditUnavailable, "fstat witness", spec_);
  std::string reason;
  struct stat pst {};
  if (fst.st_nlink == 0) {
    reason = "deleted";
  } else if (::lstat(path_.c_str(), &pst) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) return {};  // cannot tell: write on
    reason = "moved";
  } else if (pst.st_dev != fst.st_dev || pst.st_ino != fst.st_ino) {
    reason = "replaced";
  }
  if (reason.empty()) return {};
  int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return SysFail(Code::kAuditUnavailable,
                   "the audit witness was " + reason + " and reopening it failed", path_);
  }
  ::close(fd_);
  fd_ = fd;
  restarted_ = Json{{"reason", reason},
                    {"bytes", static_cast<std::uint64_t>(written_end_)},
                    {"ino", static_cast<std::uint64_t>(fst.st_ino)}};
  written_end_ = 0;
  return {};
}

Status AuditWitness::Write(const std::string& line) {
  if (syslog_) {
    ::syslog(LOG_AUTHPRIV | LOG_NOTICE, "cordon-checkpoint %s", line.c_str());
    return {};
  }
  if (own_fd_) {
    TRY(FollowPath());
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
    // Others only append under the lock: a file shorter than this witness left it was cut.
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && st.st_size < written_end_) {
      restarted_ = Json{{"reason", "truncated"},
                        {"bytes", static_cast<std::uint64_t>(written_end_)},
                        {"ino", static_cast<std::uint64_t>(st.st_ino)}};
    }
  }
  std::string text;
  if (restarted_ && !last_line_.empty()) {
    Json again = Json::parse(last_line_, nullptr, false);
    if (again.is_object()) {
      again["restarted"] = *restarted_;
      text += again.dump() + "\n";
    }
  }
  text += line + "\n";
  Status st = WriteAll(fd_, text, spec_);
  if (st && own_fd_ && ::fdatasync(fd_) != 0) st = SysFail(Code::kInternal, "fdatasync", spec_);
  if (st) {
    restarted_.reset();
    last_line_ = line;
    struct stat after {};
    if (own_fd_ && ::fstat(fd_, &after) == 0) written_end_ = after.st_size;
  }
  if (own_fd_) ::flock(fd_, LOCK_UN);
  return st;
}

}  // namespace cordon
