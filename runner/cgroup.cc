// cgroup discovery from /proc/self/cgroup and /proc/self/mountinfo; per-call directories are
// removed when the call ends (after the pid namespace, and so every process, is gone).
#include "runner/cgroup.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string_view>

#include "core/fs.h"
#include "core/unique_fd.h"

namespace cordon {
namespace {

std::string ReadSmall(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool WriteSmall(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
  out.flush();
  return static_cast<bool>(out);
}

// Removes the per-call directories that a cordon killed with SIGKILL left behind in `parent`:
// `cordon-PID-N` whose PID no longer exists. rmdir fails on a cgroup that still has processes,
// so a live job is never touched, whoever owns it.
void SweepStale(const std::string& parent) {
  UniqueDir d = UniqueDir::Open(parent.c_str());
  if (!d.valid()) return;
  while (dirent* e = d.Next()) {
    // rmdir refuses a cgroup that still has processes; "cordon-supervisor" holds no pid.
    if (NamesDeadProcess(e->d_name, "cordon-")) ::rmdir((parent + "/" + e->d_name).c_str());
  }
}

// controller ("memory", "pids", or "" for v2) -> mount point. Read once: mountinfo is long, and
// the cgroup mounts do not move under a running cordon (its own cgroup may; see Hierarchies).
const std::map<std::string, std::string>& CgroupMounts() {
  static const std::map<std::string, std::string> mounts = [] {
    std::map<std::string, std::string> out;
    std::ifstream mi("/proc/self/mountinfo");
    std::string line;
    while (std::getline(mi, line)) {
      std::size_t dash = line.find(" - ");
      if (dash == std::string::npos) continue;
      std::stringstream pre(line.substr(0, dash)), post(line.substr(dash + 3));
      std::string f[5], fstype, source, opts;
      for (auto& x : f) pre >> x;
      post >> fstype >> source >> opts;
      if (fstype == "cgroup2") out[""] = f[4];  // the last mount wins, as before
      if (fstype == "cgroup") {
        std::stringstream os(opts);
        for (std::string o; std::getline(os, o, ',');) {
          if (o == "memory" || o == "pids") out[o] = f[4];
        }
      }
    }
    return out;
  }();
  return mounts;
}

// controller ("memory", "pids", or "" for v2) -> (mount point, our path below it)
std::map<std::string, std::pair<std::string, std::string>> Hierarchies() {
  std::map<std::string, std::string> rel;
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (ctrls.empty()) {
      rel[""] = path;
      continue;
    }
    std::stringstream ss(ctrls);
    for (std::string c; std::getline(ss, c, ',');) rel[c] = path;
  }
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const auto& [ctrl, mnt] : CgroupMounts()) {
    if (rel.count(ctrl)) out[ctrl] = {mnt, rel[ctrl]};
  }
  return out;
}

bool HasWord(const std::string& list, const std::string& word) {
  std::stringstream ss(list);
  for (std::string w; ss >> w;) {
    if (w == word) return true;
  }
  return false;
}

std::atomic<int> g_counter{0};

}  // namespace

CgroupSupport ProbeCgroups() {
  CgroupSupport s;
  auto h = Hierarchies();
  if (auto it = h.find(""); it != h.end()) {
    std::string own = it->second.first + it->second.second;
    std::string ctrls = ReadSmall(own + "/cgroup.controllers");
    if (HasWord(ctrls, "pids") && HasWord(ctrls, "memory") && ::access(own.c_str(), W_OK) == 0 &&
        ::access((own + "/cgroup.subtree_control").c_str(), W_OK) == 0) {
      s.mode = CgroupMode::kV2;
      s.reason = "cgroup v2 delegated at " + own;
      return s;
    }
    s.reason = "cgroup v2 at " + own + " is not delegated with the pids and memory controllers (" +
               (ctrls.empty() ? std::string("no controllers") : "controllers: " + ctrls) + ")";
  }
  auto mem = h.find("memory"), pids = h.find("pids");
  if (mem != h.end() && pids != h.end()) {
    std::string m = mem->second.first + mem->second.second,
                p = pids->second.first + pids->second.second;
    if (::access(m.c_str(), W_OK) == 0 && ::access(p.c_str(), W_OK) == 0) {
      s.mode = CgroupMode::kV1;
      s.reason = "cgroup v1 memory and pids hierarchies are writable";
      return s;
    }
    s.reason += (s.reason.empty() ? "" : "; ") + std::string("cgroup v1 memory/pids not writable");
  }
  s.mode = CgroupMode::kNone;
  s.remedy =
      "run cordon in a delegated cgroup, e.g. `systemd-run --user --scope -p Delegate=yes cordon "
      "...`; "
      "until then memory and process counts are limited by RLIMIT_DATA and RLIMIT_NPROC";
  return s;
}

Result<std::optional<CgroupJob>> CgroupJob::Create(const CgroupSupport& support,
                                                   const Limits& limits) {
  if (support.mode == CgroupMode::kNone) return std::optional<CgroupJob>();
  auto h = Hierarchies();
  CgroupJob job;
  job.mode_ = support.mode;
  const std::string name =
      "cordon-" + std::to_string(::getpid()) + "-" + std::to_string(++g_counter);
  static std::once_flag swept;
  std::call_once(swept, [&] {
    if (support.mode == CgroupMode::kV2) {
      std::string own = h[""].first + h[""].second;
      const std::string leaf = "/cordon-supervisor";
      if (own.ends_with(leaf)) own.resize(own.size() - leaf.size());
      SweepStale(own);
    } else {
      SweepStale(h["memory"].first + h["memory"].second);
      SweepStale(h["pids"].first + h["pids"].second);
    }
  });
  auto make = [&](const std::string& dir) -> Status {
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return SysFail(Code::kSandboxUnavailable, "mkdir cgroup", dir);
    }
    job.dirs_.push_back(dir);
    return {};
  };
  if (support.mode == CgroupMode::kV2) {
    std::string own = h[""].first + h[""].second;
    const std::string leaf = "/cordon-supervisor";
    if (own.size() > leaf.size() && own.compare(own.size() - leaf.size(), leaf.size(), leaf) == 0) {
      own.resize(own.size() - leaf.size());  // already moved by an earlier call
    } else {
      // Processes may only live in leaves: move ourselves into one, then enable controllers.
      std::string sup = own + leaf;
      if (::mkdir(sup.c_str(), 0755) != 0 && errno != EEXIST) {
        return SysFail(Code::kSandboxUnavailable, "mkdir", sup);
      }
      if (!WriteSmall(sup + "/cgroup.procs", "0"))
        return SysFail(Code::kSandboxUnavailable, "join", sup);
    }
    if (!WriteSmall(own + "/cgroup.subtree_control", "+pids +memory")) {
      return SysFail(Code::kSandboxUnavailable, "enable controllers", own);
    }
    std::string dir = own + "/" + name;
    TRY(make(dir));
    if (!WriteSmall(dir + "/pids.max", std::to_string(limits.pids)) ||
        !WriteSmall(dir + "/memory.max", std::to_string(limits.memory_bytes))) {
      return SysFail(Code::kSandboxUnavailable, "set limits", dir);
    }
    WriteSmall(dir + "/memory.swap.max", "0");
    job.procs_files_.push_back(dir + "/cgroup.procs");
  } else {
    std::string mem = h["memory"].first + h["memory"].second + "/" + name;
    std::string pids = h["pids"].first + h["pids"].second + "/" + name;
    TRY(make(mem));
    TRY(make(pids));
    if (!WriteSmall(pids + "/pids.max", std::to_string(limits.pids)) ||
        !WriteSmall(mem + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes))) {
      return SysFail(Code::kSandboxUnavailable, "set limits", name);
    }
    job.procs_files_ = {mem + "/cgroup.procs", pids + "/cgroup.procs"};
  }
  return std::optional<CgroupJob>(std::move(job));
}

CgroupJob::CgroupJob(CgroupJob&& o) noexcept
    : mode_(std::move(o.mode_)),
      dirs_(std::move(o.dirs_)),
      procs_files_(std::move(o.procs_files_)) {
  o.dirs_.clear();
}

CgroupJob::~CgroupJob() {
  for (const auto& d : dirs_) ::rmdir(d.c_str());
}

std::uint64_t CgroupKeyedValue(const std::string& text, const std::string& key) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ' ') {
      return std::strtoull(std::string(line.substr(key.size() + 1)).c_str(), nullptr, 10);
    }
    at = end + 1;
  }
  return 0;
}

CgroupEvents CgroupJob::Events() const {
  CgroupEvents e;
  for (const auto& d : dirs_) {
    for (const char* f : {"memory.events", "memory.oom_control"}) {
      e.oom_kills = std::max(e.oom_kills, CgroupKeyedValue(ReadSmall(d + "/" + f), "oom_kill"));
    }
    e.pids_max = std::max(e.pids_max, CgroupKeyedValue(ReadSmall(d + "/pids.events"), "max"));
  }
  return e;
}

Json CgroupJob::Now() const {
  Json now = {{"mode", std::string(Name(kCgroupModeNames, mode_))},
              {"memory_bytes", nullptr},
              {"pids", nullptr}};
  auto number = [](const std::string& text) -> Json {
    std::uint64_t v = 0;
    std::string_view t = text;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return nullptr;
    return v;
  };
  for (const auto& d : dirs_) {
    for (const char* f : {"memory.current", "memory.usage_in_bytes"}) {
      if (Json v = number(ReadSmall(d + "/" + f)); !v.is_null()) now["memory_bytes"] = v;
    }
    if (Json v = number(ReadSmall(d + "/pids.current")); !v.is_null()) now["pids"] = v;
  }
  return now;
}

Json CgroupJob::Stats() const {
  Json s = {{"mode", std::string(Name(kCgroupModeNames, mode_))}};
  for (const auto& d : dirs_) {
    for (const char* f : {"memory.peak", "memory.max_usage_in_bytes", "pids.events",
                          "memory.events", "memory.oom_control"}) {
      std::string v = ReadSmall(d + "/" + f);
      if (!v.empty()) s[f] = v;
    }
  }
  return s;
}

}  // namespace cordon
