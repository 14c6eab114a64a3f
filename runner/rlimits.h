// The rlimit layer: BuildRlimits turns limits into a plain list; ApplyRlimits sets them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "policy/policy.h"

namespace cordon {

struct RlimitSpec {
  std::string name;  // RLIMIT_CORE, ...
  int resource = 0;
  std::uint64_t value = 0;  // soft = hard
  bool operator==(const RlimitSpec&) const = default;
};

// `cgroup_memory`/`cgroup_pids`: a cgroup enforces these, so the rlimit fallback is left out
// (RLIMIT_AS breaks runtimes that reserve address space, and root ignores RLIMIT_NPROC).
std::vector<RlimitSpec> BuildRlimits(const Limits& limits, bool cgroup_memory, bool cgroup_pids);
Json RlimitsJson(const std::vector<RlimitSpec>& specs);
Result<std::vector<RlimitSpec>> RlimitsFromJson(const Json& j);
Status ApplyRlimits(const std::vector<RlimitSpec>& specs);

// The SysV shared memory of an IPC namespace the sandbox owns: no segment larger than `bytes`
// (kernel.shmmax) and no more than `bytes` in all segments together (kernel.shmall, in pages).
// Only for a private namespace: on the host's it would change the host.
struct IpcShmLimits {
  std::uint64_t shmmax = 0;
  std::uint64_t shmall_pages = 0;
  bool operator==(const IpcShmLimits&) const = default;
};
IpcShmLimits BuildIpcShmLimits(std::uint64_t bytes, std::uint64_t page_size);
Status ApplyIpcShmLimits(std::uint64_t bytes);

}  // namespace cordon
