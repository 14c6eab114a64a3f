// What confinement this host offers, probed without side effects (for session records/doctor).
#pragma once

#include <string>

#include "core/text.h"

namespace cordon {

struct ConfinementProbe {
  bool openat2 = false;
  int landlock_abi = 0;  // 0: unavailable
  bool seccomp = false;
  bool user_namespaces = false;
  std::string bwrap_path;  // empty when not found
};

ConfinementProbe ProbeConfinement();
Json ProbeConfinementJson(const ConfinementProbe& probe);
// Finds an executable on PATH; empty when absent.
std::string FindOnPath(const std::string& name);

}  // namespace cordon
