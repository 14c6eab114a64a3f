// rlimits: core dumps off always; files, file size and CPU always; memory and process count
// only where no cgroup enforces them. Also the SysV shm limits of the sandbox's IPC namespace.
#include "runner/rlimits.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "core/unique_fd.h"

namespace cordon {

std::vector<RlimitSpec> BuildRlimits(const RlimitValues& l, bool cgroup_memory, bool cgroup_pids) {
  std::vector<RlimitSpec> out = {
      {"RLIMIT_CORE", RLIMIT_CORE, 0, std::nullopt},
      {"RLIMIT_NOFILE", RLIMIT_NOFILE, static_cast<std::uint64_t>(l.open_files), std::nullopt},
      {"RLIMIT_FSIZE", RLIMIT_FSIZE, static_cast<std::uint64_t>(l.file_size_bytes), std::nullopt},
      {"RLIMIT_CPU", RLIMIT_CPU, static_cast<std::uint64_t>(l.cpu_secs) + 1,
       static_cast<std::uint64_t>(l.cpu_secs)},
  };
  if (!cgroup_memory) {
    const auto mem = static_cast<std::uint64_t>(l.memory_bytes);
    out.push_back({"RLIMIT_DATA", RLIMIT_DATA, mem, std::nullopt});
    out.push_back({"RLIMIT_STACK", RLIMIT_STACK, mem, std::min(mem, kDefaultStackSoft)});
  }
  if (!cgroup_pids)
    out.push_back({"RLIMIT_NPROC", RLIMIT_NPROC, static_cast<std::uint64_t>(l.pids), std::nullopt});
  return out;
}

Json RlimitsJson(const std::vector<RlimitSpec>& specs) {
  Json out = Json::array();
  for (const auto& s : specs) {
    Json j = {{"name", s.name}, {"resource", s.resource}, {"value", s.value}};
    if (s.soft) j["soft"] = *s.soft;
    out.push_back(std::move(j));
  }
  return out;
}

Result<std::vector<RlimitSpec>> RlimitsFromJson(const Json& j) {
  std::vector<RlimitSpec> out;
  try {
    for (const auto& s : j) {
      RlimitSpec r{s.at("name").get<std::string>(), s.at("resource").get<int>(),
                   s.at("value").get<std::uint64_t>(), std::nullopt};
      if (s.contains("soft")) r.soft = s.at("soft").get<std::uint64_t>();
      out.push_back(std::move(r));
    }
  } catch (const std::exception& e) {
    return Fail(Code::kSandboxUnavailable, std::string("bad rlimit spec: ") + e.what());
  }
  return out;
}

Status ApplyRlimits(const std::vector<RlimitSpec>& specs) {
  for (const auto& s : specs) {
    struct rlimit rl {
      s.soft.value_or(s.value), s.value
    };
    struct rlimit cur {};
    if (::getrlimit(s.resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY &&
        cur.rlim_max < s.value) {
      rl.rlim_max = cur.rlim_max;  // never try to raise a hard limit
    }
    rl.rlim_cur = std::min(rl.rlim_cur, rl.rlim_max);
    if (::setrlimit(s.resource, &rl) != 0) {
      return SysFail(Code::kSandboxUnavailable, "setrlimit", s.name);
    }
  }
  return {};
}

IpcShmLimits BuildIpcShmLimits(std::uint64_t bytes, std::uint64_t page_size) {
  return {bytes, page_size > 0 ? bytes / page_size : 0};
}

namespace {

Status WriteSysctl(const char* path, std::uint64_t value) {
  UniqueFd fd(::open(path, O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return SysFail(Code::kSandboxUnavailable, "open", path);
  const std::string text = std::to_string(value) + "\n";
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return SysFail(Code::kSandboxUnavailable, "write", path);
  }
  return {};
}

}  // namespace

Status ApplyIpcShmLimits(std::uint64_t bytes) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const IpcShmLimits l =
      BuildIpcShmLimits(bytes, page > 0 ? static_cast<std::uint64_t>(page) : 4096);
  TRY(WriteSysctl("/proc/sys/kernel/shmmax", l.shmmax));
  TRY(WriteSysctl("/proc/sys/kernel/shmall", l.shmall_pages));
  return {};
}

}  // namespace cordon
