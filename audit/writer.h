// AuditWriter: appends catalog records (audit/records.h) to the hash-chained JSONL log.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "audit/arguments.h"
#include "audit/checkpoint.h"
#include "audit/records.h"
#include "core/error.h"
#include "core/fsync_mode.h"
#include "core/redact.h"
#include "core/text.h"
#include "core/unique_fd.h"

namespace cordon {

// Reads an HMAC key file (trailing newlines dropped) through ReadKeyFileChecked (core/fs.h).
Result<std::string> ReadKeyFile(const std::string& path);

std::string NewSessionId();
std::string NowRfc3339();
std::string DefaultAuditLogPath(const std::string& session_id);

// --- checkpoint: what the writer signs and where the checkpoints also go (docs/adr/0003) ---
struct CheckpointConfig {
  std::shared_ptr<const Ed25519Key> key;  // null: checkpoints unsigned
  std::shared_ptr<AuditWitness> witness;  // null: none
  std::uint64_t every_records = 1000;     // a checkpoint after this many records ...
  std::int64_t every_seconds = 60;        // ... or this many seconds (checked on write)
  std::optional<Json> previous;           // log_started.previous of a new file (rotate)
  bool enabled() const { return key != nullptr || witness != nullptr; }
};

// `cordon audit rotate`: LOG is renamed to LOG.<n> (the first free n) and a new LOG begins
// with a log_started linking the old file's id, lines, bytes and chain head. A writer that has
// the old file open closes LOG.<n> and continues in LOG at its next write (FollowPath). Returns
// the old file's new name.
Result<std::string> RotateAuditLog(const std::string& path, std::optional<std::string> hmac_key,
                                   const CheckpointConfig& checkpoints);

class AuditWriter {
 public:
  // Opens (creating with 0600 and parent dirs 0700) the log for appending. With a key, the
  // chain is HMAC-SHA-256 instead of SHA-256.
  // An empty file gets a log_started record first (under the log's lock).
  static Result<AuditWriter> Open(const std::string& path, std::string session_id, FsyncMode fsync,
                                  std::optional<std::string> hmac_key, const Redactor* redactor,
                                  CheckpointConfig checkpoints = {});

  AuditWriter(AuditWriter&&) = default;
  // No move assignment: the flusher thread of the old writer may still be syncing its fd.
  AuditWriter& operator=(AuditWriter&&) = delete;

  // Appends one record. Fields are redacted first. Durability: under kAlways every record is
  // fdatasync'ed before Append returns. Under kPerCall a `durable` record is handed to a
  // background flusher, which fdatasyncs it at once (one fdatasync covers every record written
  // before it: group commit), so the caller is not held up; Flush() waits for it. Under kNever
  // nothing is synced. The line itself is written (into the page cache, so it survives a crash
  // of cordon) before Append returns in every mode.
  //
  // --- failclosed: `when` says whether an act follows the records (kBeforeAct: tool_started of
  // an effectful call, session_started) or has already happened (kAfterAct). Before an act the
  // writer first makes sure kReserveBytes past the records are allocated to the file
  // (fallocate FALLOC_FL_KEEP_SIZE, re-checked under the lock on every such append, since other
  // writers' records consume it), so the act's later records fit on a full disk; if that or the
  // write fails, nothing is left in the file and the act must not start. A failed write never
  // leaves a torn line: the file is cut back to its size before the write, under the lock.
  // After an act, a failed write is remembered (count, types, calls, errno) and written as a
  // `gap` record at once if the log takes it, else by the next write that succeeds. Before
  // every write the writer checks that the file at the path is still the one it has open, with
  // every byte it wrote (FollowPath); if not, it continues in the file at the path with a link
  // record, and fails the write only when it cannot.
  enum class When { kAfterAct, kBeforeAct };
  static constexpr std::size_t kReserveBytes = 64 * 1024;
  Status Append(const AuditRecord& record, bool durable = false, When when = When::kAfterAct);
  // Appends several records with one lock and one write, in order.
  Status AppendAll(std::span<const AuditRecord> records, bool durable, When when = When::kAfterAct);
  // Whether records were lost after their act and no gap record says so yet.
  bool gap_pending() const { return lost_.has_value(); }
  // Whether the log was found deleted, moved, replaced or truncated and the writer could not
  // continue in the file at the path with a link record (the session must stop).
  bool detached() const { return detached_; }
  // Appends a checkpoint (and writes it to the witness) when one is configured and `force` is
  // set or the period (records or seconds) has passed. Taken under the log's lock.
  // --- failclosed: a checkpoint that the log or the witness cannot take fails with
  // audit_unavailable; one the log could not take is remembered for the gap record (written at
  // once if it fits, else by the next write that succeeds). The session poisons itself on it.
  Status Checkpoint(bool force);
  // Waits until every durable record appended so far is on disk (kPerCall), and reports a
  // failed background fdatasync.
  Status Flush();

  // [audit] arguments = "hashed" (audit/arguments.h): from now on tool_started.args and
  // process.argv keep each argument's SHA-256, length and shape, never its text.
  void HashArguments(std::string workspace) {
    arguments_ = std::make_shared<ArgumentHasher>(std::move(workspace));
  }

  const std::string& path() const { return path_; }
  const std::string& session() const { return session_; }
  bool keyed() const { return key_.has_value(); }
  std::uint64_t seq() const { return seq_; }
  const std::string& log_id() const { return log_id_; }

 private:
  AuditWriter() = default;
  std::string ChainHash(std::string_view line) const;
  // One record as a JSON line (no newline); takes the next seq.
  std::string RecordLine(std::string_view type, const Json& fields, std::size_t redactions,
                         const std::string& ts);
  // Reads the file's last line (under the lock) when another writer has appended since.
  Status SyncTail(bool* torn, std::string* torn_line);
  // --- failclosed
  // Why the path no longer names the file this writer appends to with all it wrote: deleted,
  // moved, replaced, truncated (in place), or "" when it does. Fills *fst with the open file's.
  Result<std::string> Detachment(struct stat* fst);
  // Before each write: on a detached log, closes the old file (log_detached, and a checkpoint
  // when checkpoints are on) and continues in the file now at the path with a link record
  // (log_started.previous in an empty file, else log_detached where new_file). Fails (and
  // sets detached_: the session stops) only when it cannot continue.
  Status FollowPath(const std::string& ts);
  Status CheckpointLocked(const std::string& ts);
  // Writes `text` at the end under the lock; on failure cuts the file back to `size_before`.
  Status WriteOrCutBack(const std::string& text, std::int64_t size_before);
  // Appends one record the writer makes itself, under the lock (see writer.cc).
  Status AppendOwnLocked(std::string_view type, const Json& fields, const std::string& ts,
                         bool* written = nullptr);
  // Remembers records lost after their act (for the gap record).
  void NoteLost(std::span<const AuditRecord> records, const Error& why);
  struct Lost {
    std::uint64_t count = 0;
    Json types = Json::array();
    Json calls = Json::array();
    int err = 0;
    std::string error;
  };
  std::optional<Lost> lost_;
  bool detached_ = false;

  std::string path_;
  std::string session_;
  FsyncMode fsync_ = FsyncMode::kPerCall;
  std::optional<std::string> key_;
  const Redactor* redactor_ = nullptr;
  std::shared_ptr<ArgumentHasher> arguments_;  // null: arguments are redacted, not hashed
  UniqueFd fd_;
  std::string prev_hash_;
  std::uint64_t seq_ = 0;
  std::int64_t known_size_ = -1;
  // The end of this writer's last line in the file (what a cut in place takes away).
  std::int64_t written_end_ = 0;
  // --- checkpoint ---
  CheckpointConfig checkpoints_;
  std::string log_id_;
  std::uint64_t lines_ = 0;  // '\n's in the first known_size_ bytes
  std::uint64_t since_checkpoint_ = 0;
  std::chrono::steady_clock::time_point last_checkpoint_ = std::chrono::steady_clock::now();
  Status StartLog();

  // The kPerCall flusher: a thread that fdatasyncs up to the highest requested offset.
  class Flusher {
   public:
    explicit Flusher(int fd) : fd_(fd) {}
    ~Flusher();
    void Request(std::int64_t upto);
    // Makes everything requested durable now (one fdatasync in the caller, unless the flusher
    // already covered it); returns the errno of any failed fdatasync, else 0.
    int SyncNow();

   private:
    void Run();
    // fdatasync without the lock held (it is retaken); afterwards everything up to `target` is
    // synced, and a failure is kept in error_.
    void SyncTo(std::unique_lock<std::mutex>& lock, std::int64_t target);
    int fd_;
    std::mutex mu_;
    std::condition_variable work_cv_;
    std::int64_t requested_ = 0, synced_ = 0;
    int error_ = 0;
    bool stop_ = false;
    bool idle_ = false;  // waiting for a request (not syncing, not pacing)
    static constexpr std::chrono::microseconds kMinSyncInterval{1000};
    std::chrono::steady_clock::time_point last_sync_{};
    std::thread thread_;
  };
  std::unique_ptr<Flusher> flusher_;  // after fd_: destroyed (and joined) before fd_ closes
};

}  // namespace cordon
