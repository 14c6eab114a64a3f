// The resource monitor (issue 23): one thread samples the live table's processes, the host and
// cordon itself each second into a one-hour ring; resource_history reads it in buckets. Started
// lazily (the first diagnostics call or job), so a plain `cordon call` pays nothing. Bucketing
// is pure.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runner/host_stats.h"

namespace cordon {

// One confined process at one sample.
struct MonitorProcess {
  pid_t pid = 0;
  std::string kind;   // the live table's owner kind: call, job, server
  std::string name;   // the tool, the job id, the server's name
  std::string owner;  // the MCP session (ProcessRequest::owner)
  std::string comm;   // the name it gave itself: untrusted
  double cpu_ms = 0;  // since it started (with what it reaped)
  std::int64_t rss_kb = -1;
};

// One sandbox's cgroup at one sample (sandboxes without a cgroup have none): what the cgroup
// files say, the whole sandbox together.
struct MonitorCgroup {
  std::string kind, name, owner;   // as MonitorProcess's
  std::string mode;                // v1 or v2
  std::int64_t memory_bytes = -1;  // memory.current (v1: memory.usage_in_bytes); -1: none
  std::int64_t pids = -1;          // pids.current; -1: none
};

struct MonitorSample {
  std::int64_t unix_ms = 0;
  int missed_before = 0;      // ticks that were due before this one and were not taken
  double cordon_cpu_ms = -1;  // cordon's own CPU since it started; -1: unreadable
  std::int64_t cordon_rss_kb = -1;
  std::optional<HostCpuTimes> host_cpu;
  std::int64_t mem_available_kb = -1;
  std::vector<MonitorProcess> processes;  // at most kMaxProcessesPerSample
  int processes_omitted = 0;              // past that cap
  std::vector<MonitorCgroup> cgroups;     // at most kMaxProcessesPerSample
};

class ResourceMonitor {
 public:
  // Fills a sample's processes and cgroups (the rest is the monitor's).
  using Sampler = std::function<void(MonitorSample&)>;
  static constexpr std::chrono::milliseconds kInterval{1000};
  static constexpr std::size_t kRing = 3600;  // one hour of samples
  // Bounds the ring's memory (3600 x 256 rows of ~200 bytes: ~180 MB at worst, ~1 MB an hour
  // for a few processes); the rest are counted in processes_omitted.
  static constexpr std::size_t kMaxProcessesPerSample = 256;

  explicit ResourceMonitor(Sampler sampler);
  ~ResourceMonitor();
  ResourceMonitor(const ResourceMonitor&) = delete;
  ResourceMonitor& operator=(const ResourceMonitor&) = delete;

  // The samples taken at or after `since_unix_ms`, with the one before them (a baseline).
  std::vector<MonitorSample> Since(std::int64_t since_unix_ms) const;
  std::int64_t started_unix_ms() const { return started_unix_ms_; }

 private:
  void Loop();
  MonitorSample Take();
  Sampler sampler_;
  std::int64_t started_unix_ms_ = 0;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::deque<MonitorSample> ring_;
  std::thread thread_;
};

// cordon's own CPU (all its threads) and RSS now, from /proc/self; -1 when unreadable.
double SelfCpuMs();
std::int64_t SelfRssKb();

// --- resource_history's buckets, pure.
struct BucketProcess {
  pid_t pid = 0;
  std::string kind, name, comm;
  double cpu_ms = 0;         // used within the bucket
  std::int64_t rss_kb = -1;  // the most seen in it
};
struct BucketCgroup {
  std::string kind, name, mode;
  std::int64_t memory_bytes = -1;  // the most seen in the bucket
  std::int64_t pids = -1;          // the most seen in the bucket
};
struct ResourceBucket {
  std::int64_t start_unix_ms = 0, end_unix_ms = 0;
  int samples = 0;
  int missed = 0;
  double cpu_ms = 0;  // of the confined processes shown, used within the bucket
  double cordon_cpu_ms = 0;
  std::optional<double> host_busy_percent;
  std::int64_t rss_kb = -1;  // the most the confined processes held together at one sample
  std::int64_t cordon_rss_kb = -1;
  std::int64_t mem_available_kb = -1;  // the least seen
  std::vector<BucketProcess> top;      // by CPU in the bucket, at most max_processes
  int processes = 0;                   // how many were seen in it
  int processes_omitted = 0;           // the most a sample of it left out (the cap)
  std::vector<BucketCgroup> cgroups;   // each sandbox's cgroup seen in it, by owner
};
// Buckets of `bucket_ms` covering [end - bucket_ms * count, end), oldest first. `samples` are in
// time order; the first one before the window, if given, is the baseline of the CPU deltas. A
// process that first shows up after the first sample counts all its CPU in its first bucket.
// `visible(kind, owner)` picks the processes and the sandboxes' cgroups the caller may see.
std::vector<ResourceBucket> BucketSamples(
    const std::vector<MonitorSample>& samples, std::int64_t end_unix_ms, std::int64_t bucket_ms,
    int count, std::size_t max_processes,
    const std::function<bool(const std::string& kind, const std::string& owner)>& visible);

}  // namespace cordon
