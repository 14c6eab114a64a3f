// Per-call cgroups: memory and pids limits plus accounting where a cgroup can be had (v2 when
// delegated to us, v1 as root on hybrid hosts); otherwise callers fall back to rlimits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/text.h"
#include "policy/policy.h"

namespace cordon {

enum class CgroupMode { kNone, kV1, kV2 };
inline constexpr EnumName<CgroupMode> kCgroupModeNames[] = {
    {CgroupMode::kNone, "none"}, {CgroupMode::kV1, "v1"}, {CgroupMode::kV2, "v2"}};

struct CgroupSupport {
  CgroupMode mode = CgroupMode::kNone;
  std::string reason;  // why, for doctor and session records
  std::string remedy;
};

CgroupSupport ProbeCgroups();

// What the controllers counted, for naming the limit that ended a process.
struct CgroupEvents {
  std::uint64_t oom_kills = 0;  // memory.events (v2) / memory.oom_control (v1): oom_kill
  std::uint64_t pids_max = 0;   // pids.events: max (forks refused at pids.max)
};
// The value of `key` in a flat-keyed cgroup file ("oom_kill 1\n..."); 0 when absent.
std::uint64_t CgroupKeyedValue(const std::string& text, const std::string& key);

class CgroupJob {
 public:
  // Creates a cgroup for one call with memory and pids limits. nullopt when unsupported.
  static Result<std::optional<CgroupJob>> Create(const CgroupSupport& support,
                                                 const Limits& limits);
  CgroupJob(CgroupJob&&) noexcept;
  CgroupJob& operator=(CgroupJob&&) = delete;
  CgroupJob(const CgroupJob&) = delete;
  ~CgroupJob();

  // Files a child writes "0" into (from the child, before exec) to join.
  const std::vector<std::string>& procs_files() const { return procs_files_; }
  // Peak memory and pids events, as far as the controller reports them.
  Json Stats() const;
  CgroupEvents Events() const;
  // What the cgroup holds now (the live table): {mode, memory_bytes (memory.current, v1's
  // memory.usage_in_bytes), pids (pids.current)}; a figure the controller does not give is null.
  Json Now() const;
  CgroupMode mode() const { return mode_; }

 private:
  CgroupJob() = default;
  CgroupMode mode_ = CgroupMode::kNone;
  std::vector<std::string> dirs_;
  std::vector<std::string> procs_files_;
};

}  // namespace cordon
