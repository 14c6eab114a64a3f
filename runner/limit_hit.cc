// LimitThatEnded: the limit named in results, process records and exec's message.
#include "runner/limit_hit.h"

#include <csignal>

namespace cordon {

Json LimitHit::ToJson() const {
  return {{"name", name},      {"value", value},       {"unit", unit},
          {"policy_key", key}, {"enforcer", enforcer}, {"evidence", evidence}};
}

std::string LimitHit::Describe() const {
  return "the " + name + " limit (" + std::to_string(value) + " " + unit + ", " + key + "; " +
         enforcer + ": " + evidence + ")";
}

std::optional<LimitHit> LimitThatEnded(const LimitFacts& f) {
  const Limits& l = f.limits;
  auto key = [&](const char* k) { return f.Key(k); };
  // cordon's own timer ended it: nothing is surer.
  if (f.timed_out) {
    return LimitHit{"timeout",        l.timeout_secs,
                    "seconds",        f.timeout_from.empty() ? key("timeout_secs") : f.timeout_from,
                    "cordon's timer", "the call ran past it"};
  }
  const bool abnormal = f.signal.has_value() || (f.exit_code && *f.exit_code != 0);
  if (!abnormal) return std::nullopt;
  // The kernel sends SIGXCPU at RLIMIT_CPU's soft limit and SIGKILL at its hard limit (one
  // second later, for a process that handles SIGXCPU): the signal and the CPU time agree.
  const double cpu_limit_ms = static_cast<double>(l.cpu_secs) * 1000.0;
  if (f.signal == SIGXCPU ||
      (f.signal == SIGKILL && f.command_cpu_ms >= 0 && f.command_cpu_ms >= cpu_limit_ms)) {
    return LimitHit{"cpu",
                    l.cpu_secs,
                    "seconds",
                    key("cpu_secs"),
                    "RLIMIT_CPU",
                    (f.signal == SIGXCPU ? std::string("SIGXCPU") : std::string("SIGKILL")) +
                        " after " + std::to_string(static_cast<long long>(f.command_cpu_ms)) +
                        " ms of CPU"};
  }
  // The kernel sends SIGXFSZ to a process whose write passes RLIMIT_FSIZE.
  if (f.signal == SIGXFSZ) {
    return LimitHit{"file_size",    l.file_size_bytes, "bytes", key("file_size_bytes"),
                    "RLIMIT_FSIZE", "SIGXFSZ"};
  }
  if (f.memory_by_cgroup && f.oom_kills > 0 && f.signal == SIGKILL) {
    return LimitHit{"memory",        l.memory_bytes,
                    "bytes",         key("memory_bytes"),
                    "cgroup memory", "SIGKILL; oom_kill " + std::to_string(f.oom_kills)};
  }
  if (!f.memory_by_cgroup && f.command_max_rss_kb >= 0 &&
      static_cast<double>(f.command_max_rss_kb) * 1024.0 >=
          kRlimitMemoryShare * static_cast<double>(l.memory_bytes)) {
    return LimitHit{"memory",
                    l.memory_bytes,
                    "bytes",
                    key("memory_bytes"),
                    "RLIMIT_DATA",
                    "peak resident memory " + std::to_string(f.command_max_rss_kb) +
                        " KiB reached the limit, then the command " +
                        (f.signal ? "died by signal " + std::to_string(*f.signal)
                                  : "exited " + std::to_string(*f.exit_code))};
  }
  if (f.pids_by_cgroup && f.pids_refusals > 0) {
    return LimitHit{
        "pids",        l.pids,
        "processes",   key("pids"),
        "cgroup pids", "pids.events max " + std::to_string(f.pids_refusals) + " (forks refused)"};
  }
  return std::nullopt;
}

}  // namespace cordon
