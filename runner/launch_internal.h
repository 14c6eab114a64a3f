// What the three launch steps (runner/host_facts.cc, runner/plan.cc, runner/launch.cc) share and
// no one else needs: the policy's paths as expanded for both gathering and planning.
#pragma once

#include <string>
#include <vector>

#include "runner/plan.h"

namespace cordon::launch_detail {

inline constexpr int kSpecFd = 3, kStatusFd = 4, kJsonStatusFd = 5, kEnvArgsFd = 6;

// `path` is `root` or below it.
bool Under(const std::string& path, const std::string& root);

// The policy's paths, expanded: one pure function for gathering and planning, so that every
// path the plan looks up was described.
struct PolicyPaths {
  std::vector<std::string> read;   // outside the workspace
  std::vector<std::string> write;  // outside the workspace
  std::vector<std::string> deny;
  bool workspace_in_write = false;
};
PolicyPaths ExpandPolicyPaths(const Policy& policy, const std::string& workspace,
                              const std::string& home);
Limits PlanLimits(const Policy& policy, const ProcessRequest& req);
bool Masked(const HostPath& hp);

}  // namespace cordon::launch_detail
