// Signed checkpoints: Ed25519 keys (OpenSSL), key ids, and the signed text of a checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/text.h"

namespace cordon {

// A log position as a checkpoint states it: everything before the checkpoint line.
struct CheckpointPosition {
  std::string log_id;
  std::uint64_t lines = 0;  // whole lines before the checkpoint
  std::uint64_t bytes = 0;  // byte offset of the checkpoint line
  std::string head;         // chain hash of the last line before it (64 zeros for none)
};

// The text an Ed25519 signature covers: a fixed prefix and the sorted JSON of the fields.
std::string CheckpointSignedText(const CheckpointPosition& pos, const std::string& key_id);
// The fields of a checkpoint (record and witness line share them).
Json CheckpointJson(const CheckpointPosition& pos, const std::optional<std::string>& key_id,
                    const std::optional<std::string>& sig);

// An Ed25519 key, private (can sign) or public only.
class Ed25519Key {
 public:
  Ed25519Key();
  ~Ed25519Key();
  Ed25519Key(Ed25519Key&&) noexcept;
  Ed25519Key& operator=(Ed25519Key&&) noexcept;

  static Result<Ed25519Key> Generate();
  // PEM PKCS#8 private key; `pem_text` receives the file's text (for the redactor).
  static Result<Ed25519Key> LoadPrivate(const std::string& path, std::string* pem_text = nullptr);
  // PEM SubjectPublicKeyInfo, or a private key file (its public half).
  static Result<Ed25519Key> LoadPublic(const std::string& path);

  // First 16 hex digits of SHA-256 of the raw 32-byte public key.
  const std::string& key_id() const { return key_id_; }
  bool has_private() const { return has_private_; }
  std::string PrivatePem() const;
  std::string PublicPem() const;
  // Hex signature of `msg`.
  Result<std::string> Sign(std::string_view msg) const;
  bool Verify(std::string_view msg, const std::string& sig_hex) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string key_id_;
  bool has_private_ = false;
  void ComputeKeyId();
};

// Writes a new key pair: `private_path` (0600, PEM PKCS#8) and `public_path` (0644, PEM).
// Refuses to overwrite an existing file. Returns the key id.
Result<std::string> WriteNewKeyPair(const std::string& private_path,
                                    const std::string& public_path);

}  // namespace cordon

namespace cordon {

// Where checkpoints also go, outside the log: a file (appended, 0600), "fd:N" or "syslog"
// (syslog(3) LOG_AUTHPRIV|LOG_NOTICE, which journald keeps). Never standard error by default.
class AuditWitness {
 public:
  static Result<std::shared_ptr<AuditWitness>> Open(const std::string& spec);
  // The file a spec names ("" for fd:N and syslog), without opening it.
  static std::string FilePath(const std::string& spec);
  ~AuditWitness();
  AuditWitness(const AuditWitness&) = delete;
  AuditWitness& operator=(const AuditWitness&) = delete;
  // One JSON line per checkpoint.
  Status Write(const std::string& line);
  const std::string& spec() const { return spec_; }
  // The file path when the witness is a file (for SessionOptions::own_files), else empty.
  const std::string& path() const { return path_; }

 private:
  AuditWitness() = default;
  Status FollowPath();
  std::string spec_, path_;
  std::string last_line_;          // the last checkpoint line written (repeated after a restart)
  std::int64_t written_end_ = 0;   // the file's size after this witness's last line
  std::optional<Json> restarted_;  // the witness was lost: {reason, bytes, ino}, until written
  int fd_ = -1;
  bool own_fd_ = false;
  bool syslog_ = false;
};

}  // namespace cordon
