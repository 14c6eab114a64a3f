// The host's CPU, load, memory and free space: pure parsers of /proc text, then thin readers.
#include "runner/host_stats.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <charconv>
#include <string>
#include <vector>

#include "core/text.h"
#include "runner/proc_usage.h"

namespace cordon {
namespace {

std::vector<std::string_view> SpaceFields(std::string_view line) {
  std::vector<std::string_view> f;
  while (!line.empty()) {
    const std::size_t b = line.find_first_not_of(" \t");
    if (b == std::string_view::npos) break;
    line.remove_prefix(b);
    const std::size_t e = std::min(line.find_first_of(" \t"), line.size());
    f.push_back(line.substr(0, e));
    line.remove_prefix(e);
  }
  return f;
}

}  // namespace

std::optional<HostCpuTimes> ParseHostCpuTimes(std::string_view text) {
  HostCpuTimes t;
  bool aggregate = false;
  while (!text.empty()) {
    const std::size_t nl = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(std::min(nl + 1, text.size()));
    const std::vector<std::string_view> f = SpaceFields(line);
    if (f.empty() || f[0].substr(0, 3) != "cpu") continue;
    if (f[0] != "cpu") {
      ++t.cpus;
      continue;
    }
    // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already
    // in user and nice, so the first eight are the total.
    if (f.size() < 5) return std::nullopt;
    std::uint64_t v[8] = {};
    for (std::size_t i = 1; i < f.size() && i <= 8; ++i) {
      if (!ParseWholeNumber(f[i], v[i - 1])) return std::nullopt;
    }
    for (std::uint64_t x : v) t.total += x;
    t.idle = v[3] + v[4];
    aggregate = true;
  }
  if (!aggregate || t.cpus == 0) return std::nullopt;
  return t;
}

std::optional<double> BusyPercent(const HostCpuTimes& before, const HostCpuTimes& after) {
  if (after.total <= before.total || after.idle < before.idle) return std::nullopt;
  const double total = static_cast<double>(after.total - before.total);
  const double idle = static_cast<double>(after.idle - before.idle);
  const double busy = (total - idle) * 100.0 / total;
  return busy < 0 ? 0 : (busy > 100 ? 100 : busy);
}

std::optional<LoadAverages> ParseLoadAverages(std::string_view text) {
  const std::vector<std::string_view> f = SpaceFields(text.substr(0, text.find('\n')));
  LoadAverages l;
  if (f.size() < 3 || !ParseWholeNumber(f[0], l.one) || !ParseWholeNumber(f[1], l.five) ||
      !ParseWholeNumber(f[2], l.fifteen)) {
    return std::nullopt;
  }
  return l;
}

std::optional<HostMemory> ParseHostMemory(std::string_view text) {
  auto total = StatusKb(text, "MemTotal");
  auto available = StatusKb(text, "MemAvailable");
  if (!total || !available) return std::nullopt;
  return HostMemory{*total, *available};
}

Result<HostCpuTimes> ReadHostCpuTimes() {
  auto text = ReadProcFile("/proc/stat", 1 << 20);
  auto t = text ? ParseHostCpuTimes(*text) : std::nullopt;
  if (!t) return Fail(Code::kInternal, "cannot read the CPU times in /proc/stat");
  return *t;
}

Result<LoadAverages> ReadLoadAverages() {
  auto text = ReadProcFile("/proc/loadavg", 256);
  auto l = text ? ParseLoadAverages(*text) : std::nullopt;
  if (!l) return Fail(Code::kInternal, "cannot read /proc/loadavg");
  return *l;
}

Result<HostMemory> ReadHostMemory() {
  auto text = ReadProcFile("/proc/meminfo", 1 << 16);
  auto m = text ? ParseHostMemory(*text) : std::nullopt;
  if (!m) return Fail(Code::kInternal, "cannot read MemTotal and MemAvailable in /proc/meminfo");
  return *m;
}

Result<FilesystemSpace> ReadFilesystemSpace(int fd) {
  struct statvfs v {};
  if (::fstatvfs(fd, &v) != 0) return Fail(Code::kInternal, "fstatvfs on the workspace", errno);
  FilesystemSpace s;
  s.total_bytes = static_cast<std::uint64_t>(v.f_blocks) * v.f_frsize;
  s.free_bytes = static_cast<std::uint64_t>(v.f_bfree) * v.f_frsize;
  s.available_bytes = static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
  s.total_inodes = v.f_files;
  s.free_inodes = v.f_ffree;
  return s;
}

}  // namespace cordon
