// The one-hour resource ring: a thread that samples once a second, and the pure bucketing.
#include "runner/resource_monitor.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "core/signals.h"
#include "runner/proc_usage.h"

namespace cordon {
namespace {

std::int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

double SelfCpuMs() {
  auto text = ReadProcFile("/proc/self/stat");
  auto st = text ? ParseProcStat(*text) : std::nullopt;
  static const long hz = ::sysconf(_SC_CLK_TCK);
  if (!st || hz <= 0) return -1;
  return static_cast<double>(st->utime + st->stime) * 1000.0 / static_cast<double>(hz);
}

std::int64_t SelfRssKb() {
  auto text = ReadProcFile("/proc/self/status");
  auto kb = text ? StatusKb(*text, "VmRSS") : std::nullopt;
  return kb ? *kb : -1;
}

ResourceMonitor::ResourceMonitor(Sampler sampler)
    : sampler_(std::move(sampler)), started_unix_ms_(UnixMs()) {
  thread_ = std::thread([this] {
    BlockTerminationSignals();
    Loop();
  });
}

ResourceMonitor::~ResourceMonitor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

MonitorSample ResourceMonitor::Take() {
  MonitorSample s;
  sampler_(s);
  if (s.processes.size() > kMaxProcessesPerSample) {
    s.processes_omitted = static_cast<int>(s.processes.size() - kMaxProcessesPerSample);
    s.processes.resize(kMaxProcessesPerSample);
  }
  if (s.cgroups.size() > kMaxProcessesPerSample) s.cgroups.resize(kMaxProcessesPerSample);
  s.cordon_cpu_ms = SelfCpuMs();
  s.cordon_rss_kb = SelfRssKb();
  if (auto cpu = ReadHostCpuTimes()) s.host_cpu = *cpu;
  if (auto mem = ReadHostMemory()) s.mem_available_kb = mem->available_kb;
  s.unix_ms = UnixMs();
  return s;
}

void ResourceMonitor::Loop() {
  auto next = std::chrono::steady_clock::now();
  int missed = 0;
  for (;;) {
    MonitorSample s = Take();
    s.missed_before = missed;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ring_.push_back(std::move(s));
      while (ring_.size() > kRing) ring_.pop_front();
      next += kInterval;
      if (stop_cv_.wait_until(lock, next, [this] { return stop_; })) return;
    }
    // A tick more than one interval late (a stopped machine, a starved thread) was missed.
    const auto now = std::chrono::steady_clock::now();
    missed = 0;
    while (now - next >= kInterval) {
      next += kInterval;
      ++missed;
    }
  }
}

std::vector<MonitorSample> ResourceMonitor::Since(std::int64_t since_unix_ms) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto first = std::find_if(ring_.begin(), ring_.end(),
                            [&](const MonitorSample& s) { return s.unix_ms >= since_unix_ms; });
  if (first != ring_.begin()) --first;  // the baseline
  return std::vector<MonitorSample>(first, ring_.end());
}

std::vector<ResourceBucket> BucketSamples(
    const std::vector<MonitorSample>& samples, std::int64_t end_unix_ms, std::int64_t bucket_ms,
    int count, std::size_t max_processes,
    const std::function<bool(const std::string& kind, const std::string& owner)>& visible) {
  std::vector<ResourceBucket> buckets(static_cast<std::size_t>(count));
  const std::int64_t start = end_unix_ms - bucket_ms * count;
  for (int i = 0; i < count; ++i) {
    buckets[i].start_unix_ms = start + bucket_ms * i;
    buckets[i].end_unix_ms = buckets[i].start_unix_ms + bucket_ms;
  }
  // Per bucket: each process's CPU and peak RSS, keyed by (pid, kind, name).
  using Key = std::tuple<pid_t, std::string, std::string>;
  std::vector<std::map<Key, BucketProcess>> per(buckets.size());
  std::map<Key, double> last_cpu;
  using SandboxKey = std::pair<std::string, std::string>;  // kind, name
  std::vector<std::map<SandboxKey, BucketCgroup>> cgroups(buckets.size());
  const MonitorSample* prev = nullptr;
  for (const MonitorSample& s : samples) {
    std::map<Key, double> cpu_now;
    const bool in = s.unix_ms >= start && s.unix_ms < end_unix_ms;
    const std::size_t b = in ? static_cast<std::size_t>((s.unix_ms - start) / bucket_ms) : 0;
    std::int64_t rss_sum = 0;
    for (const MonitorProcess& p : s.processes) {
      if (!visible(p.kind, p.owner)) continue;
      Key key{p.pid, p.kind, p.name};
      cpu_now[key] = p.cpu_ms;
      if (!in) continue;
      // Unseen at the sample before: it started since (its whole CPU is new), unless there was
      // no sample before, when it is only the baseline.
      double delta = 0;
      if (auto it = last_cpu.find(key); it != last_cpu.end()) {
        delta = std::max(0.0, p.cpu_ms - it->second);
      } else if (prev != nullptr) {
        delta = p.cpu_ms;
      }
      BucketProcess& bp = per[b][key];
      bp.pid = p.pid;
      bp.kind = p.kind;
      bp.name = p.name;
      bp.comm = p.comm;
      bp.cpu_ms += delta;
      bp.rss_kb = std::max(bp.rss_kb, p.rss_kb);
      buckets[b].cpu_ms += delta;
      if (p.rss_kb > 0) rss_sum += p.rss_kb;
    }
    if (in) {
      for (const MonitorCgroup& c : s.cgroups) {
        if (!visible(c.kind, c.owner)) continue;
        BucketCgroup& bc = cgroups[b][SandboxKey{c.kind, c.name}];
        bc.kind = c.kind;
        bc.name = c.name;
        bc.mode = c.mode;
        bc.memory_bytes = std::max(bc.memory_bytes, c.memory_bytes);
        bc.pids = std::max(bc.pids, c.pids);
      }
      ResourceBucket& bk = buckets[b];
      ++bk.samples;
      bk.missed += s.missed_before;
      bk.processes_omitted = std::max(bk.processes_omitted, s.processes_omitted);
      bk.rss_kb = std::max(bk.rss_kb, rss_sum);
      bk.cordon_rss_kb = std::max(bk.cordon_rss_kb, s.cordon_rss_kb);
      if (s.mem_available_kb >= 0 &&
          (bk.mem_available_kb < 0 || s.mem_available_kb < bk.mem_available_kb)) {
        bk.mem_available_kb = s.mem_available_kb;
      }
      if (prev != nullptr) {
        if (s.cordon_cpu_ms >= 0 && prev->cordon_cpu_ms >= 0)
          bk.cordon_cpu_ms += std::max(0.0, s.cordon_cpu_ms - prev->cordon_cpu_ms);
      }
    }
    last_cpu = std::move(cpu_now);
    prev = &s;
  }
  // The host's busy share over each bucket: from the last sample before it (or its first) to
  // its last.
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const MonitorSample* from = nullptr;
    const MonitorSample* to = nullptr;
    for (const MonitorSample& s : samples) {
      if (!s.host_cpu) continue;
      if (s.unix_ms < buckets[i].start_unix_ms) from = &s;
      if (s.unix_ms >= buckets[i].start_unix_ms && s.unix_ms < buckets[i].end_unix_ms) {
        if (from == nullptr) from = &s;
        to = &s;
      }
    }
    if (from != nullptr && to != nullptr && from != to)
      buckets[i].host_busy_percent = BusyPercent(*from->host_cpu, *to->host_cpu);
  }
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    std::vector<BucketProcess> all;
    for (auto& [key, p] : per[i]) all.push_back(std::move(p));
    buckets[i].processes = static_cast<int>(all.size());
    std::stable_sort(all.begin(), all.end(), [](const BucketProcess& a, const BucketProcess& b) {
      return a.cpu_ms > b.cpu_ms;
    });
    if (all.size() > max_processes) all.resize(max_processes);
    buckets[i].top = std::move(all);
    for (auto& [key, c] : cgroups[i]) buckets[i].cgroups.push_back(std::move(c));
  }
  return buckets;
}

}  // namespace cordon
