// The seccomp layer: BuildSeccompRules turns a policy into a plain rule list (tested without a
// kernel); ApplySeccomp installs it with libseccomp. It is the last step before execve.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/network_mode.h"
#include "core/text.h"

namespace cordon {

struct SeccompArg {
  enum class Op { kMaskedEq, kNe };
  unsigned index = 0;
  Op op = Op::kMaskedEq;
  std::uint64_t mask = 0;
  std::uint64_t value = 0;
};

struct SeccompRule {
  std::string syscall;
  int errno_value = 1;           // EPERM
  std::vector<SeccompArg> args;  // all must match (AND)
  std::string why;
};

// What the rest of the sandbox already bounds, so that the filter refuses only what nothing
// else does. The defaults are the strict answers.
struct SeccompMemory {
  bool cgroup = false;             // a memory cgroup charges memfd and shm pages to the call
  bool own_ipc_namespace = false;  // SysV segments die with the sandbox (bwrap --unshare-ipc)
};

std::vector<SeccompRule> BuildSeccompRules(const std::vector<std::string>& plain_denies,
                                           NetworkMode network, SeccompMemory memory = {});

// The number of a syscall that this libseccomp (2.5.4) may not name yet, on the architecture
// the shim runs on; -1 when the table has no such entry. ApplySeccomp uses it when
// seccomp_syscall_resolve_name does not know the name.
int FallbackSyscallNumber(const std::string& name);
Json SeccompRulesJson(const std::vector<SeccompRule>& rules);
Result<std::vector<SeccompRule>> SeccompRulesFromJson(const Json& j);

// The filter as the kernel loads it (struct sock_filter instructions, as bytes): default allow,
// each rule returns its errno, foreign architectures are killed. A name neither libseccomp nor
// FallbackSyscallNumber knows on this architecture is skipped (it cannot be called there).
// cordon compiles it once per launch (runner/plan.cc) and the shim only loads it: libseccomp's
// compile and its kernel probes were ~1.4 ms of the shim's CPU per launch.
Result<std::string> CompileSeccomp(const std::vector<SeccompRule>& rules);
// The BPF program of a libseccomp filter context (a scmp_filter_ctx), as CompileSeccomp returns it.
Result<std::string> ExportSeccompBpf(void* ctx);
// Installs a compiled filter with seccomp(SECCOMP_SET_MODE_FILTER, 0), as libseccomp's
// seccomp_load does with its default attributes; no_new_privs must already be set.
Status LoadSeccompProgram(std::string_view program);
// CompileSeccomp, then LoadSeccompProgram.
Status ApplySeccomp(const std::vector<SeccompRule>& rules);

}  // namespace cordon
