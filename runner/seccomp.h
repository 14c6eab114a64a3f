// The seccomp layer: BuildSeccompRules turns a policy into a plain rule list (tested without a
// kernel); ApplySeccomp installs it with libseccomp. It is the last step before execve.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "policy/policy.h"

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

std::vector<SeccompRule> BuildSeccompRules(const std::vector<std::string>& plain_denies,
                                           NetworkMode network);
Json SeccompRulesJson(const std::vector<SeccompRule>& rules);
Result<std::vector<SeccompRule>> SeccompRulesFromJson(const Json& j);

// Installs the filter: default allow, each rule returns its errno, foreign architectures are
// killed. Unknown syscall names on this architecture are skipped (they cannot be called).
Status ApplySeccomp(const std::vector<SeccompRule>& rules);

}  // namespace cordon
