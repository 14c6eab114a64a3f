// Live figures of confined processes from /proc: pure parsers, then thin readers.
#include "runner/proc_usage.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>

#include "core/text.h"
#include "core/unique_fd.h"

namespace cordon {
std::optional<std::string> ReadProcFile(const std::string& path, std::size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string text(max, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

namespace {

double TicksToMs(std::uint64_t ticks) {
  static const long hz = ::sysconf(_SC_CLK_TCK);
  return hz > 0 ? static_cast<double>(ticks) * 1000.0 / static_cast<double>(hz) : 0;
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  // "pid (comm) state ppid ...": comm is whatever the process named itself, so its end is the
  // last ')' of the line.
  const std::size_t open = text.find('(');
  const std::size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::nullopt;
  ProcStat st;
  std::string_view pid = text.substr(0, open);
  while (!pid.empty() && pid.back() == ' ') pid.remove_suffix(1);
  if (!ParseWholeNumber(pid, st.pid)) return std::nullopt;
  st.comm = std::string(text.substr(open + 1, close - open - 1));
  // The fields after comm, numbered from 3 (state) as proc(5) numbers them.
  std::vector<std::string_view> f;
  std::string_view rest = text.substr(close + 1);
  while (!rest.empty()) {
    const std::size_t b = rest.find_first_not_of(" \n");
    if (b == std::string_view::npos) break;
    rest.remove_prefix(b);
    const std::size_t e = std::min(rest.find_first_of(" \n"), rest.size());
    f.push_back(rest.substr(0, e));
    rest.remove_prefix(e);
  }
  auto field = [&](std::size_t n) { return f[n - 3]; };
  if (f.size() < 24 - 2 || field(3).size() != 1) return std::nullopt;
  st.state = field(3)[0];
  if (!ParseWholeNumber(field(4), st.ppid) || !ParseWholeNumber(field(5), st.pgrp) ||
      !ParseWholeNumber(field(14), st.utime) || !ParseWholeNumber(field(15), st.stime) ||
      !ParseWholeNumber(field(16), st.cutime) || !ParseWholeNumber(field(17), st.cstime) ||
      !ParseWholeNumber(field(22), st.starttime) || !ParseWholeNumber(field(24), st.rss_pages)) {
    return std::nullopt;
  }
  return st;
}

std::optional<std::int64_t> StatusKb(std::string_view status, std::string_view key) {
  for (std::size_t at = 0; at < status.size();) {
    const std::size_t nl = std::min(status.find('\n', at), status.size());
    std::string_view line = status.substr(at, nl - at);
    at = nl + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') {
      continue;
    }
    line.remove_prefix(key.size() + 1);
    const std::size_t b = line.find_first_not_of(" \t");
    if (b == std::string_view::npos) return std::nullopt;
    line.remove_prefix(b);
    const std::size_t e = line.find(' ');
    std::int64_t kb = 0;
    if (!ParseWholeNumber(line.substr(0, e), kb)) return std::nullopt;
    return kb;
  }
  return std::nullopt;
}

std::string CmdlineText(std::string_view raw) {
  while (!raw.empty() && raw.back() == '\0') raw.remove_suffix(1);
  std::string line(raw);
  for (char& c : line) {
    if (c == '\0' || c == '\n' || c == '\r') c = ' ';
  }
  return RepairUtf8(line);
}

std::string_view StateName(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "disk_sleep";
    case 'T':
      return "stopped";
    case 't':
      return "traced";
    case 'Z':
      return "zombie";
    case 'X':
      return "dead";
    case 'I':
      return "idle";
    default:
      return "unknown";
  }
}

std::vector<LiveProcess> NamespaceProcesses(pid_t member, std::size_t cmdline_bytes) {
  struct stat ns {};
  if (member <= 0 || ::stat(("/proc/" + std::to_string(member) + "/ns/pid").c_str(), &ns) != 0)
    return {};
  return NamespaceProcessesIn(ns.st_dev, ns.st_ino, cmdline_bytes);
}

std::vector<LiveProcess> NamespaceProcessesIn(std::uint64_t ns_dev, std::uint64_t ns_ino,
                                              std::size_t cmdline_bytes) {
  std::vector<LiveProcess> out;
  struct stat own {};
  if (ns_ino == 0) return out;
  // A process in cordon's own pid namespace (the weaker mode has none of its own) is no sandbox:
  // its namespace is the host's, and every process of the host would be counted.
  if (::stat("/proc/self/ns/pid", &own) != 0 || (own.st_ino == ns_ino && own.st_dev == ns_dev))
    return out;
  UniqueDir d = UniqueDir::Open("/proc");
  if (!d.valid()) return out;
  timespec now{};
  ::clock_gettime(CLOCK_BOOTTIME, &now);
  const double now_ms = static_cast<double>(now.tv_sec) * 1000.0 + now.tv_nsec / 1e6;
  const long page_kb = ::sysconf(_SC_PAGESIZE) / 1024;
  const pid_t self = ::getpid();
  while (dirent* e = d.Next()) {
    pid_t pid = 0;
    if (!ParseWholeNumber(std::string_view(e->d_name), pid) || pid == self) continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    struct stat st {};
    if (::stat((dir + "/ns/pid").c_str(), &st) != 0 || st.st_ino != ns_ino || st.st_dev != ns_dev) {
      continue;
    }
    auto text = ReadProcFile(dir + "/stat");
    auto stat = text ? ParseProcStat(*text) : std::nullopt;
    if (!stat) continue;  // it ended meanwhile
    LiveProcess p;
    p.pid = pid;
    p.ppid = stat->ppid;
    p.state = std::string(StateName(stat->state));
    p.comm = stat->comm;
    p.cpu_ms = TicksToMs(stat->utime + stat->stime + stat->cutime + stat->cstime);
    p.rss_kb = stat->rss_pages * page_kb;
    p.started_ms_ago = now_ms - TicksToMs(stat->starttime);
    if (auto status = ReadProcFile(dir + "/status")) {
      if (auto hwm = StatusKb(*status, "VmHWM")) p.peak_kb = *hwm;
    }
    if (cmdline_bytes > 0) {
      if (auto raw = ReadProcFile(dir + "/cmdline", cmdline_bytes)) p.cmdline = CmdlineText(*raw);
    }
    out.push_back(std::move(p));
  }
  return out;
}

LiveUsage SumUsage(const std::vector<LiveProcess>& procs) {
  LiveUsage u;
  if (procs.empty()) return u;
  double cpu = 0;
  std::int64_t rss = 0, peak = 0;
  for (const auto& p : procs) {
    cpu += p.cpu_ms;
    if (p.rss_kb > 0) rss += p.rss_kb;
    peak = std::max({peak, p.peak_kb, p.rss_kb});
  }
  u.cpu_ms = cpu;
  u.rss_kb = rss;
  u.max_rss_kb = peak;
  u.processes = static_cast<int>(procs.size());
  return u;
}

}  // namespace cordon
