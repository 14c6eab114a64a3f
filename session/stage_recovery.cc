// Recovery's records (session/stage_recovery.h): the record of a recovered stage, and appending
// it to the log of the session that staged it.
#include "session/stage_recovery.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "audit/verify.h"
#include "core/fs.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "session/session.h"

namespace cordon {

RecoveryRecord RecoveryRecordOf(const StageRecovery& r, const std::string& recovered_by,
                                std::size_t max_entries) {
  RecoveryRecord rec;
  rec.stage = r.stage;
  rec.outcome = r.outcome;
  if (!r.reason.empty()) rec.reason = r.reason;
  if (!r.rules_error.empty()) rec.rules_error = r.rules_error;
  if (r.origin) {
    rec.stage_session = r.origin->session;
    rec.stage_log = r.origin->audit_log;
    rec.stage_policy_sha256 = r.origin->policy_sha256;
  }
  rec.recovered_by = recovered_by;
  rec.roots = r.roots;
  if (!r.quarantine.empty()) rec.quarantine = r.quarantine;
  if (r.outcome != "quarantined") rec.changes = StagedChangesJson(r.commit, max_entries);
  const std::vector<std::string>& left = r.outcome == "quarantined" ? r.left : r.commit.not_done;
  for (const auto& p : left) {
    if (rec.left.size() >= max_entries) {
      ++rec.left_omitted;
      continue;
    }
    bool escaped = false;
    rec.left.push_back(EscapePathBytes(p, &escaped));
    if (escaped) rec.left_escaped = true;
  }
  if (!r.error.empty()) rec.error = r.error;
  if (!r.held.empty()) rec.held = r.held;
  return rec;
}

std::string RecoverySummary(const StageRecovery& r, const std::string& recorded_in) {
  const std::string who = r.origin ? "session " + r.origin->session : "an unknown session";
  std::string what;
  if (r.outcome == "quarantined") {
    what = "quarantined whole (" + r.reason + "): " + std::to_string(r.left.size()) +
           " entries, none installed, in " + r.quarantine;
  } else if (r.outcome == "held") {
    what = std::to_string(r.left.size()) +
           " changes an approval rule held wait for an answer, none installed (cordon approvals "
           "show " +
           r.held + ")";
  } else if (r.outcome == "expired") {
    what = "held past approvals.held_days, unanswered: " + std::to_string(r.commit.refused.size()) +
           " entries moved to the quarantine";
  } else {
    what = std::string(r.outcome == "finished" ? "finished" : "not finished") +
           " by its own rules: " + std::to_string(r.commit.changes.size()) + " installed, " +
           std::to_string(r.commit.refused.size()) + " refused, " +
           std::to_string(r.commit.not_done.size()) + " left";
  }
  return TerminalSafe("cordon: recovered a stage of " + who + " a killed cordon left (" + r.stage +
                          "): " + what + (r.error.empty() ? "" : "; " + r.error) +
                          "; recorded in " + recorded_in,
                      true);
}

Status StageLogAppender::Append(const std::string& path, const AuditRecord& record) {
  auto it = writers_.find(path);
  if (it == writers_.end()) {
    // Never a new file: a log that is gone is not made again here.
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return SysFail(Code::kAuditUnavailable, "stat", path);
    if (!S_ISREG(st.st_mode)) return Fail(Code::kAuditUnavailable, path + " is not a regular file");
    ASSIGN_OR_RETURN(VerifyReport v, VerifyAuditLog(path, VerifyOptions{}));
    if (v.verdict != VerifyReport::Verdict::kIntact &&
        v.verdict != VerifyReport::Verdict::kTornTail)
      return Fail(Code::kAuditUnavailable, path + " does not verify as a plain SHA-256 chain (" +
                                               v.problem +
                                               "): a record appended there would not be proven");
    if (v.checkpoints > 0)
      return Fail(Code::kAuditUnavailable,
                  path + " has checkpoints: a record after the last one would be unproven");
    ASSIGN_OR_RETURN(AuditWriter w, AuditWriter::Open(path, session_, FsyncMode::kAlways,
                                                      std::nullopt, redactor_));
    it = writers_.emplace(path, std::move(w)).first;
  }
  return it->second.Append(record, true);
}

namespace {

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// The record's copy beside the quarantine: a new file (0600), synced.
Status WriteCopy(const std::string& dir, const std::string& path, const std::string& text) {
  for (std::size_t pos = 1; pos != std::string::npos; pos = dir.find('/', pos + 1)) {
    (void)::mkdir(dir.substr(0, pos).c_str(), 0700);
  }
  (void)::mkdir(dir.c_str(), 0700);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return SysFail(Code::kAuditUnavailable, "create", path);
  TRY(WriteAll(fd.get(), text, path));
  if (::fsync(fd.get()) != 0) return SysFail(Code::kAuditUnavailable, "fsync", path);
  return {};
}

}  // namespace

void Session::RecordRecoveries(std::vector<StageRecovery> done, const std::string& quarantine) {
  if (!audit_) return;
  const std::string self = audit_->session();
  StageLogAppender appender(self, &redactor_);
  for (const StageRecovery& r : done) {
    RecoveryRecord rec = RecoveryRecordOf(r, self);
    std::string recorded_in;
    Status to_stage = Fail(Code::kAuditUnavailable,
                           "the stage carries no readable rules file: whose it is is unknown");
    if (r.origin && SameFile(r.origin->audit_log, audit_->path())) {
      // The session that staged it wrote this same log: the record goes in with this session's.
      if (Audit(rec, true)) {
        std::fprintf(stderr, "%s\n", RecoverySummary(r, audit_->path()).c_str());
        continue;
      }
      to_stage = Fail(Code::kAuditUnavailable, "this session's log did not take it");
    } else if (r.origin && !r.origin->audit_log.empty()) {
      to_stage = appender.Append(r.origin->audit_log, rec);
    }
    if (to_stage) {
      std::fprintf(stderr, "%s\n", RecoverySummary(r, r.origin->audit_log).c_str());
      continue;
    }
    // That log is gone, or cannot be extended verifiably: this session's log takes the record,
    // naming the stage's session and log, and a copy goes beside the quarantine.
    rec.stage_log_error = to_stage.error().message;
    const std::string copy = quarantine + "/recovery-" + r.name + ".json";
    rec.copy = copy;
    Json j = RecordFields(rec);
    j["type"] = std::string(RecoveryRecord::kType);
    j["session"] = self;
    redactor_.RedactJson(j);
    std::string where = audit_->path();
    if (Status st = WriteCopy(quarantine, copy, DumpJson(j) + "\n"); !st) {
      rec.copy.reset();
      rec.error = (rec.error ? *rec.error + "; " : std::string()) +
                  "its copy could not be written: " + st.error().message;
    } else {
      where += " and " + copy;
    }
    (void)Audit(rec, true);
    std::fprintf(stderr, "%s\n", RecoverySummary(r, where).c_str());
  }
}

}  // namespace cordon
