// What /proc says of running confined processes (CPU, memory, state, command line), read live:
// process_list's figures for a running job and the supervisor's live table. Parsing is pure;
// the readers are thin.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cordon {

// The fields of /proc/<pid>/stat cordon reads (proc(5)); times in clock ticks.
struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;  // its process group (the id as the reader's pid namespace numbers it)
  char state = '?';
  std::string comm;
  std::uint64_t utime = 0, stime = 0;    // its own CPU time
  std::uint64_t cutime = 0, cstime = 0;  // of the children it has reaped
  std::uint64_t starttime = 0;           // after boot
  std::int64_t rss_pages = 0;
};
// Up to `max` bytes of a /proc file (read in one go, as the kernel makes them); nullopt when it
// cannot be read.
std::optional<std::string> ReadProcFile(const std::string& path, std::size_t max = 16384);
// Parses one /proc/<pid>/stat line (comm may hold spaces and parentheses); nullopt when it is
// not one.
std::optional<ProcStat> ParseProcStat(std::string_view text);
// A "Key:   123 kB" line of /proc/<pid>/status (VmRSS, VmHWM), in kB; nullopt when absent.
std::optional<std::int64_t> StatusKb(std::string_view status, std::string_view key);
// /proc/<pid>/cmdline (NUL-separated) as one line: arguments joined by spaces, line breaks
// made spaces, invalid UTF-8 repaired. Not cut: the caller redacts it first, then cuts.
std::string CmdlineText(std::string_view raw);
// proc(5)'s state letter as a word: running, sleeping, disk_sleep, stopped, zombie, ...
std::string_view StateName(char state);

// One live process as /proc shows it now.
struct LiveProcess {
  pid_t pid = 0;  // host pid
  pid_t ppid = 0;
  std::string state;
  double cpu_ms = 0;           // its own and its reaped children's
  std::int64_t rss_kb = -1;    // -1: unreadable
  std::int64_t peak_kb = -1;   // VmHWM; -1: unreadable
  double started_ms_ago = -1;  // -1: unreadable
  std::string cmdline;         // CmdlineText of its first cmdline_bytes, when asked for
  std::string comm;            // the name it gave itself (16 bytes at most): untrusted
};
// The processes in the pid namespace of `member` (any process of it), found by the inode of
// their ns/pid; empty when `member` is gone, its namespace cannot be read, or it is cordon's own
// (no sandbox of its own: the weaker mode). `cmdline_bytes` > 0 reads that much of each one's
// command line.
std::vector<LiveProcess> NamespaceProcesses(pid_t member, std::size_t cmdline_bytes = 0);
// The same for the pid namespace (st_dev, st_ino of its ns/pid) itself: what a holder of the
// namespace's descriptor asks, so a pid reused by another process never names another one.
std::vector<LiveProcess> NamespaceProcessesIn(std::uint64_t ns_dev, std::uint64_t ns_ino,
                                              std::size_t cmdline_bytes = 0);

// A sandbox's totals now: CPU of every process in it (with what each reaped), the largest peak
// RSS of one of them (as wait4's ru_maxrss counts it), and how many run. Empty when unreadable.
struct LiveUsage {
  std::optional<double> cpu_ms;
  std::optional<std::int64_t> max_rss_kb;
  std::optional<std::int64_t> rss_kb;  // the sum of their current RSS
  int processes = 0;
};
LiveUsage SumUsage(const std::vector<LiveProcess>& procs);

}  // namespace cordon
