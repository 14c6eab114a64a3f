// Which limit ended a process, decided from what the kernel reports (the signal it sent for an
// rlimit, the cgroup's OOM and pids events, the shim's rusage, the supervisor's own timeout),
// never from a signal alone where a better source exists. Pure: tested without a kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "core/text.h"
#include "policy/policy.h"

namespace cordon {

struct LimitHit {
  std::string name;        // timeout | cpu | file_size | memory | pids
  std::int64_t value = 0;  // the configured value, in `unit`
  std::string unit;        // seconds | bytes | processes
  std::string key;         // the limit's policy key: limits.cpu_secs, ...
  std::string enforcer;    // what enforced it: RLIMIT_CPU, cgroup memory, cordon's timer, ...
  std::string evidence;    // what showed it: SIGXCPU, memory.events oom_kill 1, ...
  Json ToJson() const;
  // "the memory limit (4294967296 bytes, limits.memory_bytes; cgroup memory: oom_kill 1)"
  std::string Describe() const;
};

// What the supervisor knows about an ended process.
struct LimitFacts {
  bool timed_out = false;
  std::optional<int> signal;     // the command's own terminating signal
  std::optional<int> exit_code;  // its exit code, when it exited
  double command_cpu_ms = -1;    // the command's CPU time (wait4); -1 when unknown
  std::int64_t command_max_rss_kb = -1;
  Limits limits;
  bool memory_by_cgroup = false;  // a cgroup enforced memory and pids; else rlimits did
  bool pids_by_cgroup = false;
  std::uint64_t oom_kills = 0;      // the cgroup's OOM kills (memory.events / oom_control)
  std::uint64_t pids_refusals = 0;  // forks the cgroup refused (pids.events max)
  // The policy keys: "limits.K", or "tools.TOOL.K" for each K in `tool_overrides`.
  std::string tool;
  std::set<std::string> tool_overrides;
  // Where the applied timeout came from when not from the policy ("--timeout", "the call's
  // timeout_secs"); empty: the policy key.
  std::string timeout_from;
  std::string Key(const std::string& k) const {
    return tool_overrides.count(k) > 0 ? "tools." + tool + "." + k : "limits." + k;
  }
};

std::optional<LimitHit> LimitThatEnded(const LimitFacts& facts);

// The share of the memory limit the command's peak resident memory must reach before an
// abnormal end under RLIMIT_DATA is put down to it: resident memory also holds shared library
// text, which RLIMIT_DATA does not count, so the peak stays a little under the limit.
inline constexpr double kRlimitMemoryShare = 0.9;

}  // namespace cordon
