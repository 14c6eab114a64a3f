// The audit log: O_APPEND writes under flock, each line chained to the SHA-256 (or HMAC) of the
// line before it, so edits, reordering, cuts and a missing head are all detectable.
#include "audit/writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include "core/fs.h"
#include "core/hash.h"
#include "core/signals.h"

namespace cordon {
namespace {

const std::string kZeroHash(64, '0');

Status MkdirParents(const std::string& path) {
  std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return {};
  std::string dir = path.substr(0, slash);
  for (std::size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      std::string part = dir.substr(0, i);
      if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
        return SysFail(Code::kInternal, "mkdir", part);
      }
    }
  }
  return {};
}

class FileLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

// Newlines in [from, to) of the file.
Result<std::uint64_t> CountNewlines(int fd, std::int64_t from, std::int64_t to,
                                    const std::string& path) {
  std::uint64_t n = 0;
  std::string block(65536, '\0');
  while (from < to) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::int64_t>(65536, to - from));
    ssize_t got = ::pread(fd, block.data(), want, from);
    if (got <= 0) return SysFail(Code::kInternal, "pread", path);
    n += static_cast<std::uint64_t>(std::count(block.data(), block.data() + got, '\n'));
    from += got;
  }
  return n;
}

}  // namespace

Result<std::string> ReadKeyFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string key, ReadKeyFileChecked(path));
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  return key;
}

std::string NewSessionId() {
  unsigned char b[16];
  std::size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = ::getrandom(b + got, sizeof b - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();
    }
    got += static_cast<std::size_t>(n);
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  char out[37];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

std::string NowRfc3339() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

std::string DefaultAuditLogPath(const std::string& session_id) {
  std::string base;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/') {
    base = x;
  } else if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') {
    base = std::string(h) + "/.local/state";
  } else {
    base = "/tmp";
  }
  std::string ts = NowRfc3339();
  for (char& c : ts) {
    if (c == ':') c = '-';
  }
  return base + "/cordon/sessions/" + ts + "-" + session_id.substr(0, 8) + ".jsonl";
}

Result<AuditWriter> AuditWriter::Open(const std::string& path, std::string session_id,
                                      FsyncMode fsync, std::optional<std::string> hmac_key,
                                      const Redactor* redactor, CheckpointConfig checkpoints) {
  TRY(MkdirParents(path));
  int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return SysFail(Code::kInternal, "open audit log", path);
  AuditWriter w;
  w.fd_ = UniqueFd(fd);
  w.path_ = path;
  w.session_ = std::move(session_id);
  w.fsync_ = fsync;
  w.key_ = std::move(hmac_key);
  w.redactor_ = redactor;
  w.checkpoints_ = std::move(checkpoints);
  TRY(w.StartLog());
  return w;
}

// --- checkpoint: the log_started record of an empty file, or the id of a started one ---
Status AuditWriter::StartLog() {
  FileLock lock(fd_.get());
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return SysFail(Code::kInternal, "fstat", path_);
  if (st.st_size > 0) {
    // The id of the file from its first line, if that is a log_started record.
    std::string head(4096, '\0');
    ssize_t n = ::pread(fd_.get(), head.data(), head.size(), 0);
    head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    head = head.substr(0, head.find('\n'));
    Json first = Json::parse(head, nullptr, false);
    if (first.is_object() && first.value("type", "") == "log_started") {
      log_id_ = first.value("log_id", "");
    }
    return {};
  }
  log_id_ = RandomHex(16);
  LogStartedRecord started{.log_id = log_id_, .chain = key_ ? "hmac-sha256" : "sha256"};
  if (checkpoints_.key) started.key_id = checkpoints_.key->key_id();
  started.previous = checkpoints_.previous;
  prev_hash_ = kZeroHash;
  known_size_ = 0;
  lines_ = 0;
  // --- failclosed: a log that cannot take its first line is unavailable; nothing torn stays.
  if (auto wr = AppendOwnLocked(started.kType, started.ToJson(), NowRfc3339()); !wr) {
    return Fail(Code::kAuditUnavailable, wr.error().message, wr.error().err, path_);
  }
  return {};
}

Status AuditWriter::Checkpoint(bool force) {
  if (!checkpoints_.enabled()) return {};
  if (!force) {
    const bool by_count = since_checkpoint_ >= checkpoints_.every_records;
    const bool by_time =
        since_checkpoint_ > 0 && std::chrono::steady_clock::now() - last_checkpoint_ >=
                                     std::chrono::seconds(checkpoints_.every_seconds);
    if (!by_count && !by_time) return {};
  }
  FileLock lock(fd_.get());
  bool torn = false;
  std::string torn_line;
  if (auto st = SyncTail(&torn, &torn_line); !st) {
    known_size_ = -1;
    return Fail(Code::kAuditUnavailable, "checkpoint: " + st.error().message, st.error().err,
                path_);
  }
  // A torn last line is no whole-line position: the next append recovers it first.
  if (torn) return {};
  return CheckpointLocked(NowRfc3339());
}

// A checkpoint at known_size_ (just synced, under the log's lock), then to the witness.
Status AuditWriter::CheckpointLocked(const std::string& ts) {
  // A checkpoint never proves a log that still owes its gap record: the gap goes first.
  auto write_gap = [&]() -> Status {
    const GapRecord gap{.lost = lost_->count,
                        .types = lost_->types,
                        .calls = lost_->calls,
                        .err = lost_->err,
                        .error = lost_->error};
    bool gap_written = false;
    Status st = AppendOwnLocked(gap.kType, gap.ToJson(), ts, &gap_written);
    if (gap_written) {
      ++since_checkpoint_;
      lost_.reset();
    }
    return st;
  };
  if (lost_) {
    if (auto st = write_gap(); !st) {
      return Fail(Code::kAuditUnavailable,
                  "checkpoint: the gap record before it: " + st.error().message, st.error().err,
                  path_);
    }
  }
  const CheckpointPosition pos{.log_id = log_id_,
                               .lines = lines_,
                               .bytes = static_cast<std::uint64_t>(known_size_),
                               .head = prev_hash_};
  CheckpointRecord rec{
      .log_id = pos.log_id, .lines = pos.lines, .bytes = pos.bytes, .head = pos.head};
  if (checkpoints_.key) {
    rec.key_id = checkpoints_.key->key_id();
    auto sig = checkpoints_.key->Sign(CheckpointSignedText(pos, *rec.key_id));
    if (!sig) {
      return Fail(Code::kAuditUnavailable, "checkpoint not signed: " + sig.error().message,
                  sig.error().err, path_);
    }
    rec.sig = std::move(*sig);
  }
  // --- failclosed: a checkpoint the log cannot take is a record lost after its act (the records
  // it proves are already written): remembered for the gap record, which is written at once if
  // it fits, and the caller poisons the session.
  bool written = false;
  if (auto st = AppendOwnLocked(rec.kType, rec.ToJson(), ts, &written); !st) {
    if (!written) {
      const AuditRecord lost_record = rec;
      NoteLost(std::span<const AuditRecord>(&lost_record, 1), st.error());
      (void)write_gap();
    }
    return Fail(Code::kAuditUnavailable, "checkpoint: " + st.error().message, st.error().err,
                path_);
  }
  since_checkpoint_ = 0;
  last_checkpoint_ = std::chrono::steady_clock::now();
  if (checkpoints_.witness) {
    Json w = CheckpointJson(pos, rec.key_id, rec.sig);
    w["type"] = "checkpoint";
    w["ts"] = ts;
    if (auto st = checkpoints_.witness->Write(w.dump()); !st) {
      return Fail(Code::kAuditUnavailable,
                  "the audit witness " + checkpoints_.witness->spec() +
                      " could not take the checkpoint (" + st.error().message + ")",
                  st.error().err, path_);
    }
  }
  return {};
}

std::string AuditWriter::ChainHash(std::string_view line) const {
  return key_ ? HmacSha256Hex(*key_, line) : Sha256Hex(line);
}

Status AuditWriter::SyncTail(bool* torn, std::string* torn_line) {
  *torn = false;
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return SysFail(Code::kInternal, "fstat", path_);
  if (st.st_size == known_size_) return {};
  // --- failclosed: lines this writer wrote are gone (cut in place after FollowPath looked):
  // this write fails; the next one follows the cut with a link record.
  if (st.st_size < written_end_) {
    return Fail(Code::kAuditUnavailable,
                "the audit log " + path_ + " was truncated in place (from " +
                    std::to_string(written_end_) + " to " + std::to_string(st.st_size) +
                    " bytes) while cordon wrote it",
                0, path_);
  }
  if (checkpoints_.enabled()) {
    // --- checkpoint: the file-wide line count, from what others appended since ---
    const bool grew = known_size_ >= 0 && st.st_size > known_size_;
    ASSIGN_OR_RETURN(std::uint64_t added,
                     CountNewlines(fd_.get(), grew ? known_size_ : 0, st.st_size, path_));
    lines_ = grew ? lines_ + added : added;
  }
  if (st.st_size == 0) {
    prev_hash_ = kZeroHash;
    known_size_ = 0;
    written_end_ = 0;
    return {};
  }
  // Read backwards until the start of the last line.
  std::string tail;
  off_t end = st.st_size;
  constexpr off_t kBlock = 65536;
  bool ends_with_newline = false;
  std::size_t line_start = std::string::npos;
  while (end > 0) {
    off_t start = end > kBlock ? end - kBlock : 0;
    std::string block(static_cast<std::size_t>(end - start), '\0');
    ssize_t n = ::pread(fd_.get(), block.data(), block.size(), start);
    if (n != static_cast<ssize_t>(block.size())) return SysFail(Code::kInternal, "pread", path_);
    tail = block + tail;
    if (end == st.st_size) ends_with_newline = !tail.empty() && tail.back() == '\n';
    std::size_t search_end = ends_with_newline ? tail.size() - 1 : tail.size();
    std::size_t nl = search_end == 0 ? std::string::npos : tail.rfind('\n', search_end - 1);
    end = start;
    if (nl != std::string::npos) {
      line_start = nl + 1;
      break;
    }
    if (start == 0) line_start = 0;
  }
  std::string last = tail.substr(line_start);
  if (ends_with_newline) {
    last.pop_back();
  } else {
    *torn = true;
    *torn_line = last;
  }
  prev_hash_ = ChainHash(last);
  known_size_ = st.st_size;
  written_end_ = st.st_size;
  return {};
}

std::string AuditWriter::RecordLine(std::string_view type, const Json& fields,
                                    std::size_t redactions, const std::string& ts) {
  // The common fields first, in a fixed order, then the record's own (sorted by key), then the
  // redaction count: built as text, not as a JSON object that would copy every field. No
  // catalog record has a field named like a common one (tests/audit_test.cc checks).
  constexpr auto kReplace = Json::error_handler_t::replace;
  std::string line = "{\"v\":1,\"seq\":" + std::to_string(++seq_) + ",\"ts\":\"" + ts +
                     "\",\"session\":" + Json(session_).dump(-1, ' ', false, kReplace) +
                     ",\"type\":" + Json(std::string(type)).dump(-1, ' ', false, kReplace) +
                     ",\"prev\":\"" + prev_hash_ + "\"";
  if (fields.is_object() && !fields.empty()) {
    std::string own = fields.dump(-1, ' ', false, kReplace);
    line += ',';
    line.append(own, 1, own.size() - 2);  // without its braces
  }
  if (redactions > 0) line += ",\"redactions\":" + std::to_string(redactions);
  line += '}';
  return line;
}

Status AuditWriter::Append(const AuditRecord& record, bool durable, When when) {
  return AppendAll(std::span<const AuditRecord>(&record, 1), durable, when);
}

// --- failclosed: cut-back writes, lost-record bookkeeping, detachment.
Status AuditWriter::WriteOrCutBack(const std::string& text, std::int64_t size_before) {
  if (auto st = WriteAll(fd_.get(), text, path_); !st) {
    // A partial write would leave a torn line that the next writer takes for a crash: cut the
    // file back to where it ended (under the lock; ftruncate needs no free space).
    if (::ftruncate(fd_.get(), size_before) != 0) {
      std::fprintf(stderr, "cordon: could not cut the audit log %s back after a failed write\n",
                   path_.c_str());
    }
    return st;
  }
  return {};
}

// One record the writer makes itself (log_started, checkpoint, log_detached, a gap), appended
// under the log's lock at known_size_ (which the caller has just synced): chained, written whole
// or cut back, counted in the file-wide line count, and fdatasync'ed unless fsync = never. On a
// failed write nothing of it stays and seq and chain are as before (*written false); a failed
// fdatasync leaves the line in place (*written true) and fails.
Status AuditWriter::AppendOwnLocked(std::string_view type, const Json& fields,
                                    const std::string& ts, bool* written) {
  if (written != nullptr) *written = false;
  const std::uint64_t seq_before = seq_;
  const std::string line = RecordLine(type, fields, 0, ts);
  if (auto st = WriteOrCutBack(line + "\n", known_size_); !st) {
    seq_ = seq_before;
    return st;
  }
  if (written != nullptr) *written = true;
  prev_hash_ = ChainHash(line);
  known_size_ += static_cast<std::int64_t>(line.size() + 1);
  written_end_ = known_size_;
  ++lines_;
  if (fsync_ != FsyncMode::kNever && ::fdatasync(fd_.get()) != 0) {
    return SysFail(Code::kAuditUnavailable, "fdatasync", path_);
  }
  return {};
}

void AuditWriter::NoteLost(std::span<const AuditRecord> records, const Error& why) {
  if (!lost_) lost_.emplace();
  for (const AuditRecord& r : records) {
    ++lost_->count;
    const Json type = std::string(RecordType(r));
    if (std::find(lost_->types.begin(), lost_->types.end(), type) == lost_->types.end()) {
      lost_->types.push_back(type);
    }
    const Json fields = RecordFields(r);
    if (auto it = fields.find("call");
        it != fields.end() && it->is_number_unsigned() &&
        std::find(lost_->calls.begin(), lost_->calls.end(), *it) == lost_->calls.end()) {
      lost_->calls.push_back(*it);
    }
  }
  lost_->err = why.err;
  lost_->error = why.message;
}

// --- failclosed: whether the path still names the file this writer appends to, with every line
// it wrote: "" when it does, else deleted, moved, replaced or truncated.
Result<std::string> AuditWriter::Detachment(struct stat* fst) {
  if (::fstat(fd_.get(), fst) != 0) return SysFail(Code::kAuditUnavailable, "fstat", path_);
  struct stat pst {};
  if (fst->st_nlink == 0) return std::string("deleted");
  if (::lstat(path_.c_str(), &pst) != 0) {
    // No such name (or a parent is no longer a directory): the file was moved away. Any other
    // error (EACCES on a parent) cannot tell: write on.
    if (errno != ENOENT && errno != ENOTDIR) return std::string();
    return std::string("moved");
  }
  if (pst.st_dev != fst->st_dev || pst.st_ino != fst->st_ino) return std::string("replaced");
  // Others only append or cut back their own failed write (never below the end of this
  // writer's lines): a file shorter than what this writer wrote was cut by someone else. (A cut
  // after this look is found by SyncTail, under the lock, and fails that write.)
  if (fst->st_size < written_end_) return std::string("truncated");
  return std::string();
}

Status AuditWriter::FollowPath(const std::string& ts) {
  struct stat fst {};
  ASSIGN_OR_RETURN(std::string reason, Detachment(&fst));
  if (reason.empty()) return {};
  // Where this writer's part of the old file ends: the link the new file names. A truncated
  // file cannot be read back for it, so it is the writer's own last position (the lines it
  // wrote, the chain head it left), which the cut file no longer holds.
  Json link;
  auto position = [&] {
    link = Json{{"log_id", log_id_},
                {"lines", lines_},
                {"bytes", static_cast<std::uint64_t>(std::max<std::int64_t>(written_end_, 0))},
                {"head", prev_hash_},
                {"reason", reason},
                {"ino", static_cast<std::uint64_t>(fst.st_ino)}};
  };
  LogDetachedRecord rec{.reason = reason,
                        .path = path_,
                        .previous_ino = static_cast<std::uint64_t>(fst.st_ino),
                        .where = "old_file"};
  const std::string what = "the audit log " + path_ + " was " + reason +
                           " while cordon had it open (old inode " + std::to_string(fst.st_ino) +
                           ")";
  if (reason == "truncated") {
    position();
  } else {
    // The old file is closed with log_detached (and a checkpoint, witnessed, when checkpoints
    // are on): whoever still holds a link to it reads a complete, proven end there.
    FileLock lock(fd_.get());
    bool torn = false;
    std::string torn_line;
    if (auto st = SyncTail(&torn, &torn_line); !st || torn) {
      detached_ = true;
      return Fail(Code::kAuditUnavailable,
                  what + "; its end could not be read for the link (" +
                      (st ? std::string("a torn last line") : st.error().message) +
                      "); this session takes no further calls",
                  0, path_);
    }
    rec.previous_head = prev_hash_;
    rec.previous_size = static_cast<std::uint64_t>(known_size_);
    bool written = false;
    (void)AppendOwnLocked(rec.kType, rec.ToJson(), ts, &written);
    if (written && checkpoints_.enabled()) {
      if (auto st = CheckpointLocked(ts); !st) {
        detached_ = true;
        return Fail(
            Code::kAuditUnavailable,
            what + "; closing it: " + st.error().message + "; this session takes no further calls",
            st.error().err, path_);
      }
    }
    // The file-wide line count is kept only with checkpoints: count it here for the link.
    auto lines = CountNewlines(fd_.get(), 0, known_size_, path_);
    if (!lines) {
      detached_ = true;
      return Fail(Code::kAuditUnavailable,
                  what + "; counting its lines: " + lines.error().message +
                      "; this session takes no further calls",
                  lines.error().err, path_);
    }
    lines_ = *lines;
    position();
  }
  rec.previous_head = link["head"].get<std::string>();
  rec.previous_size = link["bytes"].get<std::uint64_t>();
  if (flusher_) {
    (void)flusher_->SyncNow();
    flusher_.reset();  // joined before the old fd closes (or is synced again)
  }
  if (reason != "truncated") {
    auto cannot = [&](const std::string& why, int err) -> Status {
      // --- failclosed: no file to continue in: the session stops; its gap and end go to the
      // old file, the only place left.
      detached_ = true;
      return Fail(Code::kAuditUnavailable,
                  what + "; " + why + "; this session takes no further calls", err, path_);
    };
    if (auto st = MkdirParents(path_); !st) return cannot(st.error().message, st.error().err);
    int fd = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return cannot(std::string("reopening it failed: ") + std::strerror(errno), errno);
    fd_ = UniqueFd(fd);
  }
  known_size_ = -1;
  written_end_ = 0;
  since_checkpoint_ = 0;
  log_id_.clear();
  // The file now at the path continues this writer's part with a link record: an empty file
  // starts with log_started naming the old file's end (`previous`); a file with lines (audit
  // rotate's new file, another writer's, or what a cut left) gets log_detached (where new_file,
  // the same link in `previous`). audit verify follows both (docs/audit.md, "Rotation").
  {
    FileLock lock(fd_.get());
    bool torn = false;
    std::string torn_line;
    auto st = SyncTail(&torn, &torn_line);
    if (st && known_size_ == 0) {
      log_id_ = RandomHex(16);
      LogStartedRecord started{.log_id = log_id_, .chain = key_ ? "hmac-sha256" : "sha256"};
      if (checkpoints_.key) started.key_id = checkpoints_.key->key_id();
      started.previous = link;
      if (auto w = AppendOwnLocked(started.kType, started.ToJson(), ts); !w) {
        detached_ = true;
        return Fail(Code::kAuditUnavailable,
                    what + "; the new file could not take its first line (" + w.error().message +
                        "); this session takes no further calls",
                    w.error().err, path_);
      }
      return {};
    }
    // A torn end (a cut into a line) is recovered by the append below: it must read it again.
    if (torn) known_size_ = -1;
    if (st) {
      std::string head(4096, '\0');
      ssize_t n = ::pread(fd_.get(), head.data(), head.size(), 0);
      head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
      Json first = Json::parse(head.substr(0, head.find('\n')), nullptr, false);
      if (first.is_object() && first.value("type", "") == "log_started") {
        log_id_ = first.value("log_id", "");
      }
    }
  }
  rec.where = "new_file";
  rec.previous = link;
  if (auto st = Append(rec, true); !st) {
    detached_ = true;
    return Fail(
        Code::kAuditUnavailable,
        what + "; the link record: " + st.error().message + "; this session takes no further calls",
        st.error().err, path_);
  }
  return {};
}

Status AuditWriter::AppendAll(std::span<const AuditRecord> records, bool durable, When when) {
  // The records of one write share one timestamp: they reach the log at one moment.
  const std::string ts = NowRfc3339();
  if (!detached_) {
    if (auto st = FollowPath(ts); !st) {
      if (when == When::kAfterAct) NoteLost(records, st.error());
      return st;
    }
  }
  FileLock lock(fd_.get());
  bool torn = false;
  std::string torn_line;
  if (auto st = SyncTail(&torn, &torn_line); !st) {
    known_size_ = -1;
    if (when == When::kAfterAct) NoteLost(records, st.error());
    return Fail(Code::kAuditUnavailable, st.error().message, st.error().err, path_);
  }
  const std::int64_t size_before = known_size_;
  const std::uint64_t seq_before = seq_;
  const std::string prev_before = prev_hash_;
  std::string text;
  if (torn) {
    // A crash tore the last line. Keep it as evidence, end it, and chain a record to it.
    text += '\n';
    const LogRecoveredRecord recovered{.torn_bytes = torn_line.size()};
    std::string line = RecordLine(recovered.kType, recovered.ToJson(), 0, ts);
    prev_hash_ = ChainHash(line);
    text += line;
    text += '\n';
  }
  // --- failclosed: records lost after their act are reported first, by a gap record.
  auto gap_line = [&] {
    const GapRecord gap{.lost = lost_->count,
                        .types = lost_->types,
                        .calls = lost_->calls,
                        .err = lost_->err,
                        .error = lost_->error};
    std::string line = RecordLine(gap.kType, gap.ToJson(), 0, ts);
    prev_hash_ = ChainHash(line);
    return line + '\n';
  };
  const bool had_gap = lost_.has_value();
  if (had_gap) text += gap_line();
  for (const AuditRecord& r : records) {
    Json fields = RecordFields(r);
    if (arguments_) arguments_->Apply(RecordType(r), fields);
    std::size_t redactions = redactor_ != nullptr ? redactor_->RedactJson(fields) : 0;
    std::string line = RecordLine(RecordType(r), fields, redactions, ts);
    prev_hash_ = ChainHash(line);
    text += line;
    text += '\n';
  }
  // Nothing of a failed write stays in the file, so the chain and seq go back to before it.
  auto fail = [&](const Error& e) -> Status {
    seq_ = seq_before;
    prev_hash_ = prev_before;
    if (when == When::kAfterAct) NoteLost(records, e);
    if (when == When::kAfterAct && !torn) {
      // The gap alone is small: it may fit where the records did not (the space a partial
      // write took is free again). Written now, it survives this process dying.
      known_size_ = size_before;
      const GapRecord gap{.lost = lost_->count,
                          .types = lost_->types,
                          .calls = lost_->calls,
                          .err = lost_->err,
                          .error = lost_->error};
      bool written = false;
      (void)AppendOwnLocked(gap.kType, gap.ToJson(), ts, &written);
      if (written) {
        ++since_checkpoint_;
        lost_.reset();
        return Fail(Code::kAuditUnavailable, e.message, e.err, path_);
      }
    }
    known_size_ = -1;  // the next SyncTail re-reads the chain's end
    return Fail(Code::kAuditUnavailable, e.message, e.err, path_);
  };
  if (when == When::kBeforeAct) {
    // Room for these records and for what the act will add (and a gap record), allocated now:
    // blocks already allocated past EOF (by an earlier reservation) cost nothing. A file
    // system without fallocate gets no reservation; the after-act path still fails closed.
    const off_t len = static_cast<off_t>(text.size() + kReserveBytes);
    if (::fallocate(fd_.get(), FALLOC_FL_KEEP_SIZE, size_before, len) != 0 && errno != EOPNOTSUPP) {
      return fail(SysFail(Code::kAuditUnavailable,
                          "fallocate (reserving room for the records after the act)", path_)
                      .error());
    }
  }
  if (auto st = WriteOrCutBack(text, size_before); !st) return fail(st.error());
  // Under the lock with O_APPEND, the file now ends where SyncTail saw it end plus these lines:
  // no second fstat needed.
  known_size_ = size_before + static_cast<std::int64_t>(text.size());
  written_end_ = known_size_;
  // --- checkpoint: the file-wide line count (the torn line's end and log_recovered, the gap)
  const std::uint64_t added = (torn ? 2 : 0) + (had_gap ? 1 : 0) + records.size();
  lines_ += added;
  since_checkpoint_ += added;
  if (had_gap) lost_.reset();
  if (fsync_ == FsyncMode::kAlways) {
    if (::fdatasync(fd_.get()) != 0) {
      return SysFail(Code::kAuditUnavailable, "fdatasync", path_);
    }
  } else if (fsync_ == FsyncMode::kPerCall && durable) {
    if (!flusher_) flusher_ = std::make_unique<Flusher>(fd_.get());
    flusher_->Request(known_size_);
  }
  return {};
}

Status AuditWriter::Flush() {
  if (!flusher_) return {};
  if (int err = flusher_->SyncNow(); err != 0) {
    return Fail(Code::kInternal,
                std::string("fdatasync of the audit log failed: ") + std::strerror(err), err,
                path_);
  }
  return {};
}

AuditWriter::Flusher::~Flusher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();                   // from the idle wait or the pacing wait
  if (thread_.joinable()) thread_.join();  // Run() syncs what is pending before it returns
}

void AuditWriter::Flusher::Request(std::int64_t upto) {
  std::lock_guard<std::mutex> lock(mu_);
  if (upto <= requested_) return;
  requested_ = upto;
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  // Wake the flusher only when it sleeps for want of work: while it syncs or paces, it will
  // see the new offset by itself, and a wake-up per record would cost a context switch each.
  if (idle_) work_cv_.notify_one();
}

int AuditWriter::Flusher::SyncNow() {
  std::unique_lock<std::mutex> lock(mu_);
  const std::int64_t target = requested_;
  if (synced_ >= target) return error_;
  // Sync here rather than wait for the flusher, which may be pacing itself or syncing an older
  // offset: a session's end costs one fdatasync, not a pacing interval on top.
  SyncTo(lock, target);
  return error_;
}

void AuditWriter::Flusher::SyncTo(std::unique_lock<std::mutex>& lock, std::int64_t target) {
  lock.unlock();
  const int rc = ::fdatasync(fd_);
  const int err = rc == 0 ? 0 : errno;
  lock.lock();
  if (err != 0) error_ = err;
  synced_ = std::max(synced_, target);
}

void AuditWriter::Flusher::Run() {
  BlockTerminationSignals();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    idle_ = true;
    work_cv_.wait(lock, [this] { return stop_ || requested_ > synced_; });
    idle_ = false;
    if (requested_ <= synced_) return;  // stopping with nothing pending
    // Under a stream of calls, one fdatasync per millisecond at most (each costs a device
    // round trip); an idle log is synced at once.
    const auto next = last_sync_ + kMinSyncInterval;
    if (!stop_ && std::chrono::steady_clock::now() < next) {
      work_cv_.wait_until(lock, next, [this] { return stop_; });
    }
    last_sync_ = std::chrono::steady_clock::now();
    SyncTo(lock, requested_);
  }
}

// --- checkpoint: rotation ---
Result<std::string> RotateAuditLog(const std::string& path, std::optional<std::string> hmac_key,
                                   const CheckpointConfig& checkpoints) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return SysFail(Code::kNotFound, "open audit log", path);
  UniqueFd old(fd);
  FileLock lock(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return SysFail(Code::kInternal, "fstat", path);
  std::string data(static_cast<std::size_t>(st.st_size), '\0');
  if (!data.empty() && ::pread(fd, data.data(), data.size(), 0) != st.st_size) {
    return SysFail(Code::kInternal, "pread", path);
  }
  if (!data.empty() && data.back() != '\n') {
    return Fail(Code::kInvalidInput, "audit log " + path +
                                         " ends in a torn line; write a record first "
                                         "(any session recovers it) before rotating");
  }
  std::string log_id, head = kZeroHash;
  const std::size_t first_nl = data.find('\n');
  if (first_nl != std::string::npos) {
    Json first = Json::parse(std::string_view(data.data(), first_nl), nullptr, false);
    if (first.is_object() && first.value("type", "") == "log_started") {
      log_id = first.value("log_id", "");
    }
    const std::size_t start =
        data.size() < 2 ? std::string::npos : data.rfind('\n', data.size() - 2);
    const std::string_view last(data.data() + (start == std::string::npos ? 0 : start + 1),
                                data.size() - 1 - (start == std::string::npos ? 0 : start + 1));
    head = hmac_key ? HmacSha256Hex(*hmac_key, last) : Sha256Hex(last);
  }
  std::string rotated;
  for (int n = 1; n < 100000; ++n) {
    rotated = path + "." + std::to_string(n);
    if (::link(path.c_str(), rotated.c_str()) == 0) break;
    if (errno != EEXIST) return SysFail(Code::kInternal, "link", rotated);
    rotated.clear();
  }
  if (rotated.empty()) return Fail(Code::kInternal, "no free rotation name for " + path);
  CheckpointConfig next = checkpoints;
  next.previous =
      Json{{"log_id", log_id},
           {"lines", static_cast<std::uint64_t>(std::count(data.begin(), data.end(), '\n'))},
           {"bytes", data.size()},
           {"head", head},
           {"path", rotated}};
  const std::string tmp = path + ".rotating-" + RandomHex(4);
  {
    ASSIGN_OR_RETURN(AuditWriter w, AuditWriter::Open(tmp, NewSessionId(), FsyncMode::kAlways,
                                                      std::move(hmac_key), nullptr, next));
  }
  // LOG is replaced in one step: no moment without a LOG a writer could create afresh.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    ::unlink(rotated.c_str());
    return SysFail(Code::kInternal, "rename", tmp);
  }
  return rotated;
}

}  // namespace cordon
