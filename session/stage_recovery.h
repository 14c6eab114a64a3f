// What recovery did with the stages killed cordons left (workspace/staging.h Recover), recorded
// in the log of the session that staged each (audit/records.h RecoveryRecord).
#pragma once

#include <map>
#include <string>

#include "audit/records.h"
#include "audit/writer.h"
#include "core/error.h"
#include "core/redact.h"
#include "workspace/staging.h"

namespace cordon {

// The record of one recovered stage; each list is cut at `max_entries` with its omitted count.
RecoveryRecord RecoveryRecordOf(const StageRecovery& r, const std::string& recovered_by,
                                std::size_t max_entries = 1000);

// One line for stderr: what became of the stage (counts) and where its record went.
std::string RecoverySummary(const StageRecovery& r, const std::string& recorded_in);

// Appends recovery records to the logs of the sessions that staged, each under the recovering
// session's id (one writer per log, so that its seq runs on across stages). Only a log cordon can
// extend so that `cordon audit verify` still proves it: a plain SHA-256 chain, no checkpoints
// (a record after the last one would be unproven; cordon has not that session's signing key),
// intact or with a torn last line (the writer recovers it). An HMAC-chained log needs its key,
// which the recovering session does not have: refused, and said why.
class StageLogAppender {
 public:
  StageLogAppender(std::string session, const Redactor* redactor)
      : session_(std::move(session)), redactor_(redactor) {}
  Status Append(const std::string& path, const AuditRecord& record);

 private:
  std::string session_;
  const Redactor* redactor_;
  std::map<std::string, AuditWriter> writers_;
};

}  // namespace cordon
