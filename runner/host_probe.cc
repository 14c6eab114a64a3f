// Host probes: openat2, Landlock ABI, seccomp, user namespaces and bwrap on PATH.
#include "runner/host_probe.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "core/unique_fd.h"

namespace cordon {

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

ConfinementProbe ProbeConfinement() {
  ConfinementProbe p;
  struct open_how how {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH;
  UniqueFd fd(static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof how)));
  p.openat2 = fd.valid();
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  p.landlock_abi = abi > 0 ? static_cast<int>(abi) : 0;
  p.seccomp = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
  std::ifstream userns("/proc/sys/user/max_user_namespaces");
  long max_userns = 0;
  p.user_namespaces = (userns >> max_userns) && max_userns > 0;
  p.bwrap_path = FindOnPath("bwrap");
  return p;
}

Json ProbeConfinementJson(const ConfinementProbe& probe) {
  return {{"file_tools", probe.openat2 ? "openat2 RESOLVE_BENEATH|NO_SYMLINKS" : "unavailable"},
          {"landlock_abi", probe.landlock_abi},
          {"seccomp", probe.seccomp},
          {"user_namespaces", probe.user_namespaces},
          {"bwrap", probe.bwrap_path.empty() ? Json(nullptr) : Json(probe.bwrap_path)}};
}

}  // namespace cordon
