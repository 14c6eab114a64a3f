// The rlimit layer: BuildRlimits turns limits into a plain list; ApplyRlimits sets them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/text.h"

namespace cordon {

struct RlimitSpec {
  std::string name;  // RLIMIT_CORE, ...
  int resource = 0;
  std::uint64_t value = 0;            // the hard limit
  std::optional<std::uint64_t> soft;  // below the hard limit when set; else soft = hard
  bool operator==(const RlimitSpec&) const = default;
};

// The soft stack limit the memory fallback leaves in place: glibc sizes each thread's stack by
// it, and every thread stack counts against RLIMIT_DATA.
inline constexpr std::uint64_t kDefaultStackSoft = 8ull << 20;

// `cgroup_memory`/`cgroup_pids`: a cgroup enforces these, so the rlimit fallback is left out
// (root ignores RLIMIT_NPROC). The memory fallback is RLIMIT_DATA, not RLIMIT_AS: RLIMIT_DATA
// counts private writable mappings and leaves PROT_NONE reservations alone, so runtimes that
// reserve address space (V8's WebAssembly memories, Go and Java heaps) still start; the stack,
// which RLIMIT_DATA does not count, gets the same hard limit. RLIMIT_CPU's soft limit is one
// second under the hard one, so the kernel's SIGXCPU names the limit before SIGKILL.
// The policy's process limits ([limits] in a policy file), as plain numbers: the plan fills it
// (RlimitValuesOf, runner/launch.h), so that this applier depends on core/ alone.
struct RlimitValues {
  std::int64_t open_files = 0;
  std::int64_t file_size_bytes = 0;
  std::int64_t cpu_secs = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t pids = 0;
};
std::vector<RlimitSpec> BuildRlimits(const RlimitValues& limits, bool cgroup_memory,
                                     bool cgroup_pids);
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
