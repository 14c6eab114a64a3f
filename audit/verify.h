// VerifyAuditLog: checks a log's hash chain, sequence numbers and each record's required fields
// (from the catalog, audit/records.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace cordon {

struct VerifyReport {
  enum class Verdict { kIntact, kTornTail, kBroken };
  Verdict verdict = Verdict::kIntact;
  std::uint64_t records = 0;
  std::uint64_t sessions = 0;
  std::uint64_t bytes = 0;
  std::uint64_t first_bad_line = 0;  // 1-based; 0 when none
  std::string problem;
  std::vector<std::string> warnings;
  // --- failclosed: `gap` records (records lost after their act; the chain itself is whole) and
  // `log_detached` records. A log with a gap is not complete: the CLI does not call it intact.
  std::uint64_t gaps = 0;
  std::uint64_t lost_records = 0;
  std::uint64_t detached = 0;
  std::string gap_problem;  // the first gap, in words
};

Result<VerifyReport> VerifyAuditLog(const std::string& path,
                                    const std::optional<std::string>& hmac_key);

}  // namespace cordon
