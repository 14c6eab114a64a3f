// What the host has and uses (issue 23's host_resources and the monitor): CPU times from
// /proc/stat, load averages, memory from /proc/meminfo, a filesystem's free space. Parsing is
// pure; the readers are thin.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/error.h"

namespace cordon {

// The aggregate "cpu" line of /proc/stat, in clock ticks, and how many "cpuN" lines follow.
struct HostCpuTimes {
  std::uint64_t total = 0;  // every field but guest time (already counted in user)
  std::uint64_t idle = 0;   // idle + iowait
  int cpus = 0;
};
std::optional<HostCpuTimes> ParseHostCpuTimes(std::string_view proc_stat);
// The busy share of the CPUs between two readings, 0..100; nullopt when no time passed.
std::optional<double> BusyPercent(const HostCpuTimes& before, const HostCpuTimes& after);

struct LoadAverages {
  double one = 0, five = 0, fifteen = 0;
};
std::optional<LoadAverages> ParseLoadAverages(std::string_view proc_loadavg);

struct HostMemory {
  std::int64_t total_kb = 0;
  std::int64_t available_kb = 0;
};
std::optional<HostMemory> ParseHostMemory(std::string_view proc_meminfo);

// The readers: /proc/stat, /proc/loadavg, /proc/meminfo (internal when unreadable or not as
// proc(5) says).
Result<HostCpuTimes> ReadHostCpuTimes();
Result<LoadAverages> ReadLoadAverages();
Result<HostMemory> ReadHostMemory();

// A filesystem's size and free space (fstatvfs on a descriptor of it), in bytes.
struct FilesystemSpace {
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;       // what root could still use
  std::uint64_t available_bytes = 0;  // what an ordinary user can still use
  std::uint64_t total_inodes = 0;
  std::uint64_t free_inodes = 0;
};
Result<FilesystemSpace> ReadFilesystemSpace(int fd);

}  // namespace cordon
