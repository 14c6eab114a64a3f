// Landlock rules per ABI, and the three raw syscalls (glibc has no wrappers).
#include "runner/landlock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/unique_fd.h"

namespace cordon {
namespace landlock {

std::uint64_t FsAccessForAbi(int abi) {
  std::uint64_t all = (1ull << 13) - 1;  // v1
  if (abi >= 2) all |= kRefer;
  if (abi >= 3) all |= kTruncate;
  if (abi >= 5) all |= kIoctlDev;
  return abi >= 1 ? all : 0;
}

}  // namespace landlock

namespace {

struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};
struct PathBeneathAttr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
} __attribute__((packed));
constexpr int kRulePathBeneath = 1;
constexpr unsigned kCreateRulesetVersion = 1u << 0;

std::size_t AttrSizeForAbi(int abi) {
  if (abi >= 6) return sizeof(RulesetAttr);
  if (abi >= 4) return 2 * sizeof(std::uint64_t);
  return sizeof(std::uint64_t);
}

}  // namespace

int LandlockAbi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

LandlockSpec BuildLandlockRules(const LandlockInput& in, int abi) {
  using namespace landlock;
  LandlockSpec spec;
  spec.abi = abi;
  if (abi < 1) return spec;
  const std::uint64_t all = FsAccessForAbi(abi);
  spec.handled_fs = all;
  const std::uint64_t read = kExecute | kReadFile | kReadDir;
  for (const auto& p : in.list_only) spec.paths.push_back({p, kReadDir});
  for (const auto& p : in.read) spec.paths.push_back({p, read});
  std::uint64_t dev = read | kWriteFile;
  if (abi >= 3) dev |= kTruncate;
  if (abi >= 5) dev |= kIoctlDev;
  for (const auto& p : in.devices) spec.paths.push_back({p, dev});
  for (const auto& p : in.write) spec.paths.push_back({p, all});
  if (abi >= 4 && in.network == NetworkMode::kNone) {
    // Handled with no port rule: every TCP bind and connect is refused.
    spec.handled_net = kNetBindTcp | kNetConnectTcp;
  }
  if (abi >= 6) spec.scoped = kScopeAbstractUnix | kScopeSignal;
  // The shim always execs, and by default the kernel logs no denial after an execve: without
  // this flag nothing the command itself is refused reaches the audit stream. Denials before
  // the exec (the shim's own path search) stay logged too; nested domains the command makes
  // log as they choose.
  if (abi >= 7) spec.restrict_flags = kLogNewExecOn;
  return spec;
}

Json LandlockSpecJson(const LandlockSpec& spec) {
  Json paths = Json::array();
  for (const auto& p : spec.paths) paths.push_back({{"path", p.path}, {"access", p.access}});
  return {{"abi", spec.abi},
          {"handled_fs", spec.handled_fs},
          {"handled_net", spec.handled_net},
          {"scoped", spec.scoped},
          {"restrict_flags", spec.restrict_flags},
          {"paths", paths}};
}

Result<LandlockSpec> LandlockSpecFromJson(const Json& j) {
  LandlockSpec s;
  try {
    s.abi = j.at("abi").get<int>();
    s.handled_fs = j.at("handled_fs").get<std::uint64_t>();
    s.handled_net = j.at("handled_net").get<std::uint64_t>();
    s.scoped = j.at("scoped").get<std::uint64_t>();
    s.restrict_flags = j.value("restrict_flags", std::uint32_t{0});
    for (const auto& p : j.at("paths")) {
      s.paths.push_back({p.at("path").get<std::string>(), p.at("access").get<std::uint64_t>()});
    }
  } catch (const std::exception& e) {
    return Fail(Code::kSandboxUnavailable, std::string("bad landlock spec: ") + e.what());
  }
  return s;
}

Result<UniqueFd> MakeLandlockRuleset(const LandlockSpec& spec) {
  if (spec.abi < 1) return Fail(Code::kSandboxUnavailable, "Landlock is not available");
  RulesetAttr attr{spec.handled_fs, spec.handled_net, spec.scoped};
  long rfd = ::syscall(SYS_landlock_create_ruleset, &attr, AttrSizeForAbi(spec.abi), 0);
  if (rfd < 0) return SysFail(Code::kSandboxUnavailable, "landlock_create_ruleset", "");
  UniqueFd ruleset(static_cast<int>(rfd));
  for (const auto& p : spec.paths) {
    int fd = ::open(p.path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;
      return SysFail(Code::kSandboxUnavailable, "open for landlock", p.path);
    }
    UniqueFd path_fd(fd);
    std::uint64_t access = p.access & spec.handled_fs;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
      // Directory-only rights cannot be granted on a file.
      access &= landlock::kExecute | landlock::kWriteFile | landlock::kReadFile |
                landlock::kTruncate | landlock::kIoctlDev;
    }
    PathBeneathAttr rule{access, fd};
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), kRulePathBeneath, &rule, 0) != 0) {
      return SysFail(Code::kSandboxUnavailable, "landlock_add_rule", p.path);
    }
  }
  if (spec.restrict_flags != 0 && spec.abi < 7) {
    return Fail(Code::kSandboxUnavailable, "landlock_restrict_self flags need ABI 7");
  }
  return ruleset;
}

Status ApplyLandlock(const LandlockSpec& spec) {
  ASSIGN_OR_RETURN(UniqueFd ruleset, MakeLandlockRuleset(spec));
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), spec.restrict_flags) != 0) {
    return SysFail(Code::kSandboxUnavailable, "landlock_restrict_self", "");
  }
  return {};
}

}  // namespace cordon
