// AuditWriter and VerifyAuditLog: the hash-chained JSONL side-effect log and its checker.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/error.h"
#include "runner/redact.h"
#include "runner/text.h"
#include "runner/unique_fd.h"

namespace cordon {

enum class FsyncMode { kAlways, kPerCall, kNever };
Result<FsyncMode> ParseFsyncMode(std::string_view name);
std::string_view FsyncModeName(FsyncMode mode);

// Reads an HMAC key file (trailing newlines dropped).
Result<std::string> ReadKeyFile(const std::string& path);

std::string NewSessionId();
std::string NowRfc3339();
std::string DefaultAuditLogPath(const std::string& session_id);

class AuditWriter {
 public:
  // Opens (creating with 0600 and parent dirs 0700) the log for appending. With a key, the
  // chain is HMAC-SHA-256 instead of SHA-256.
  static Result<AuditWriter> Open(const std::string& path, std::string session_id,
                                  FsyncMode fsync, std::optional<std::string> hmac_key,
                                  const Redactor* redactor);

  AuditWriter(AuditWriter&&) = default;
  AuditWriter& operator=(AuditWriter&&) = default;

  // Appends one record. Fields are redacted first; `durable` asks for an fsync under kPerCall.
  Status Append(std::string_view type, Json fields, bool durable = false);

  const std::string& path() const { return path_; }
  const std::string& session() const { return session_; }
  bool keyed() const { return key_.has_value(); }
  std::uint64_t seq() const { return seq_; }

 private:
  AuditWriter() = default;
  std::string ChainHash(std::string_view line) const;
  // Reads the file's last line (under the lock) when another writer has appended since.
  Status SyncTail(bool* torn, std::string* torn_line);

  std::string path_;
  std::string session_;
  FsyncMode fsync_ = FsyncMode::kPerCall;
  std::optional<std::string> key_;
  const Redactor* redactor_ = nullptr;
  UniqueFd fd_;
  std::string prev_hash_;
  std::uint64_t seq_ = 0;
  std::int64_t known_size_ = -1;
};

struct VerifyReport {
  enum class Verdict { kIntact, kTornTail, kBroken };
  Verdict verdict = Verdict::kIntact;
  std::uint64_t records = 0;
  std::uint64_t sessions = 0;
  std::uint64_t bytes = 0;
  std::uint64_t first_bad_line = 0;  // 1-based; 0 when none
  std::string problem;
  std::vector<std::string> warnings;
};

Result<VerifyReport> VerifyAuditLog(const std::string& path,
                                    const std::optional<std::string>& hmac_key);

// A readable timeline, one line per record.
Result<std::string> ShowAuditLog(const std::string& path);

}  // namespace cordon
