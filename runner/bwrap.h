// The bwrap layer: BuildBwrapArgv turns a sandbox layout (decisions plus host facts) into the
// argv of bwrap; nothing here touches the kernel, so plans compare in unit tests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "policy/policy.h"
#include "workspace/git_view.h"
#include "workspace/protected.h"

namespace cordon {

struct SandboxLayout {
  std::string bwrap = "bwrap";
  std::string workspace;
  bool workspace_writable = true;
  std::vector<HostPath> read;
  std::vector<HostPath> write;  // beyond the workspace
  std::vector<HostPath> deny;
  std::vector<ProtectedEntry> protect;
  std::vector<std::string> pins;        // ancestors of protected paths: bound onto themselves
  std::vector<GitViewMount> git_views;  // after the protected paths (workspace/git_view.h)
  NetworkMode network = NetworkMode::kNone;
  // The bwrap-host-proc mode: the host's /proc bound read-only where a new one is refused (a
  // container's masked /proc); Landlock keeps other processes' entries unreadable.
  bool host_proc = false;
  // The private /tmp's size (bwrap >= 0.8.0 --size); 0 leaves tmpfs's default, half the RAM.
  std::int64_t tmp_size_bytes = 0;
  std::string shim;  // host path of cordon-shim
  std::string cwd;
  std::vector<std::pair<std::string, std::string>> env;
  // When set, the --setenv pairs reach bwrap through this fd (--args FD, BwrapEnvArgs) and not
  // its argv: any user on the host can read a process's argv (/proc/PID/cmdline), and the
  // values include what a wrapped server's client configured for it (GITHUB_TOKEN, ...).
  int env_args_fd = -1;
  int spec_fd = -1;
  int status_fd = -1;
  int json_status_fd = -1;
};

inline constexpr const char* kShimInSandbox = "/run/cordon/cordon-shim";

std::vector<std::string> BuildBwrapArgv(const SandboxLayout& layout);
// The NUL-separated "--setenv NAME VALUE" arguments bwrap reads from env_args_fd.
std::string BwrapEnvArgs(const SandboxLayout& layout);

// The environment a confined process gets under an empty [env] policy: a fixed allowlist, never
// a secret-looking name (runner/environment.h has the general one).
std::vector<std::pair<std::string, std::string>> SandboxEnvironment(char** host_env,
                                                                    const std::string& workspace);

HostPath DescribeHostPath(const std::string& path);

}  // namespace cordon
