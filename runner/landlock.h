// The Landlock layer: BuildLandlockRules turns paths and a network mode into a ruleset spec for
// a given ABI (v1..v7); ApplyLandlock installs it. Landlock only grants, never subtracts: the
// deny list and protected paths are enforced by bwrap's mounts (runner/bwrap).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/network_mode.h"
#include "core/text.h"
#include "core/unique_fd.h"

namespace cordon {

// Access bits from the kernel UAPI (linux/landlock.h), spelled here so that older headers build.
namespace landlock {
inline constexpr std::uint64_t kExecute = 1ull << 0, kWriteFile = 1ull << 1, kReadFile = 1ull << 2,
                               kReadDir = 1ull << 3, kRemoveDir = 1ull << 4,
                               kRemoveFile = 1ull << 5, kMakeChar = 1ull << 6, kMakeDir = 1ull << 7,
                               kMakeReg = 1ull << 8, kMakeSock = 1ull << 9, kMakeFifo = 1ull << 10,
                               kMakeBlock = 1ull << 11, kMakeSym = 1ull << 12,
                               kRefer = 1ull << 13,                                       // ABI 2
    kTruncate = 1ull << 14,                                                               // ABI 3
    kIoctlDev = 1ull << 15;                                                               // ABI 5
inline constexpr std::uint64_t kNetBindTcp = 1ull << 0, kNetConnectTcp = 1ull << 1;       // ABI 4
inline constexpr std::uint64_t kScopeAbstractUnix = 1ull << 0, kScopeSignal = 1ull << 1;  // ABI 6
// landlock_restrict_self() flags (ABI 7).
inline constexpr std::uint32_t kLogSameExecOff = 1u << 0, kLogNewExecOn = 1u << 1,
                               kLogSubdomainsOff = 1u << 2;
std::uint64_t FsAccessForAbi(int abi);
}  // namespace landlock

struct LandlockPath {
  std::string path;
  std::uint64_t access = 0;
};

struct LandlockSpec {
  int abi = 0;
  std::uint64_t handled_fs = 0;
  std::uint64_t handled_net = 0;
  std::uint64_t scoped = 0;
  // landlock_restrict_self() flags. ABI >= 7: kLogNewExecOn, so that what the command does after
  // the shim's execve is logged to the kernel's audit (runner/kernel_audit.h reads it).
  std::uint32_t restrict_flags = 0;
  std::vector<LandlockPath> paths;
  bool operator==(const LandlockSpec&) const = default;
};

struct LandlockInput {
  std::vector<std::string> read;       // read + execute
  std::vector<std::string> write;      // everything
  std::vector<std::string> devices;    // read + write files, ioctl (e.g. /dev)
  std::vector<std::string> list_only;  // READ_DIR only
  NetworkMode network = NetworkMode::kNone;
};

LandlockSpec BuildLandlockRules(const LandlockInput& in, int abi);
Json LandlockSpecJson(const LandlockSpec& spec);
Result<LandlockSpec> LandlockSpecFromJson(const Json& j);

// Installs the ruleset on the calling thread (inherited by children). Paths that do not exist
// are skipped. Requires no_new_privs (or CAP_SYS_ADMIN).
Status ApplyLandlock(const LandlockSpec& spec);
// ApplyLandlock's first half: the ruleset, ready for landlock_restrict_self (a child after fork
// then makes that one system call and nothing that allocates).
Result<UniqueFd> MakeLandlockRuleset(const LandlockSpec& spec);
int LandlockAbi();

}  // namespace cordon
