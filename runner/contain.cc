// The confinement steps, in the order they must run. seccomp is last: once it is loaded the
// filter would refuse the syscalls the earlier steps need, and nothing runs between it and
// execve except fork.
#include "runner/contain.h"

#include <cap-ng.h>
#include <sys/prctl.h>

namespace cordon {

namespace {

std::string HexOf(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

Result<std::string> BytesOfHex(std::string_view hex) {
  auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0) return Fail(Code::kSandboxUnavailable, "seccomp_program: odd length");
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return Fail(Code::kSandboxUnavailable, "seccomp_program: not hex");
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

}  // namespace

Json ContainSpecJson(const ContainSpec& s) {
  return {{"rlimits", RlimitsJson(s.rlimits)},
          {"landlock", s.landlock ? LandlockSpecJson(*s.landlock) : Json(nullptr)},
          {"seccomp", SeccompRulesJson(s.seccomp)},
          {"seccomp_program", HexOf(s.seccomp_program)},
          {"rename_notify_program", HexOf(s.rename_notify_program)},
          {"ipc_shm_bytes", s.ipc_shm_bytes},
          {"proxy_port", s.proxy_port},
          {"argv", s.argv},
          {"cwd", s.cwd}};
}

Result<ContainSpec> ContainSpecFromJson(const Json& j) {
  ContainSpec s;
  if (!j.is_object()) return Fail(Code::kSandboxUnavailable, "spec is not an object");
  ASSIGN_OR_RETURN(s.rlimits, RlimitsFromJson(j.value("rlimits", Json::array())));
  if (j.contains("landlock") && !j["landlock"].is_null()) {
    ASSIGN_OR_RETURN(s.landlock, LandlockSpecFromJson(j["landlock"]));
  }
  ASSIGN_OR_RETURN(s.seccomp, SeccompRulesFromJson(j.value("seccomp", Json::array())));
  if (j.contains("seccomp_program")) {
    if (!j["seccomp_program"].is_string())
      return Fail(Code::kSandboxUnavailable, "seccomp_program is not a string");
    ASSIGN_OR_RETURN(s.seccomp_program, BytesOfHex(j["seccomp_program"].get<std::string>()));
  }
  if (j.contains("rename_notify_program")) {
    if (!j["rename_notify_program"].is_string())
      return Fail(Code::kSandboxUnavailable, "rename_notify_program is not a string");
    ASSIGN_OR_RETURN(s.rename_notify_program,
                     BytesOfHex(j["rename_notify_program"].get<std::string>()));
  }
  try {
    s.argv = j.at("argv").get<std::vector<std::string>>();
    s.cwd = j.value("cwd", "");
    s.ipc_shm_bytes = j.value("ipc_shm_bytes", std::uint64_t{0});
    s.proxy_port = j.value("proxy_port", 0);
  } catch (const std::exception& e) {
    return Fail(Code::kSandboxUnavailable, std::string("bad spec: ") + e.what());
  }
  if (s.argv.empty()) return Fail(Code::kSandboxUnavailable, "spec has an empty argv");
  return s;
}

Status DropAllCapabilities() {
  capng_clear(CAPNG_SELECT_ALL);
  if (capng_apply(CAPNG_SELECT_ALL) != 0) {
    return Fail(Code::kSandboxUnavailable, "capng_apply failed to drop capabilities");
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    return SysFail(Code::kSandboxUnavailable, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)", "");
  }
  // Verify rather than trust.
  if (capng_have_capabilities(CAPNG_SELECT_CAPS) != CAPNG_NONE) {
    return Fail(Code::kSandboxUnavailable, "capabilities remain after the drop");
  }
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1) continue;
    // Emptying the bounding set takes CAP_SETPCAP: inside bwrap's user namespace the shim has
    // it, so the set is always emptied there. An ordinary user without bwrap (the weaker mode)
    // cannot; the set is then inert, because no_new_privs (already set) stops every execve from
    // granting capabilities and the other sets are empty. Anything else is a failure.
    const bool inert = ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 &&
                       ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) != 1;
    if (!inert) {
      return Fail(Code::kSandboxUnavailable,
                  "capability " + std::to_string(cap) + " is still in the bounding set");
    }
  }
  return {};
}

std::optional<ContainFailure> Contain(const ContainSpec& spec) {
  // 1. Resource limits (core dumps off, files, file size, CPU; memory/pids without a cgroup).
  if (auto st = ApplyRlimits(spec.rlimits); !st) return ContainFailure{"rlimits", st.error()};
  // The SysV shm limits of the sandbox's own IPC namespace (Landlock then keeps /proc/sys
  // read-only, so the command cannot raise them back).
  if (spec.ipc_shm_bytes > 0) {
    if (auto st = ApplyIpcShmLimits(spec.ipc_shm_bytes); !st)
      return ContainFailure{"ipc_limits", st.error()};
  }
  // 2. no_new_privs: no setuid/file-capability gains across execve; Landlock needs it.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return ContainFailure{
        "no_new_privs",
        SysFail(Code::kSandboxUnavailable, "prctl(PR_SET_NO_NEW_PRIVS)", "").error()};
  }
  // 3. Every capability, the bounding and ambient sets included.
  if (auto st = DropAllCapabilities(); !st) return ContainFailure{"capabilities", st.error()};
  // 4. Landlock: filesystem, TCP and scoping, as far as the kernel's ABI goes.
  if (spec.landlock) {
    if (auto st = ApplyLandlock(*spec.landlock); !st) return ContainFailure{"landlock", st.error()};
  }
  // 5. seccomp, last: the filter cordon compiled from spec.seccomp (a spec without one runs
  // nothing).
  if (spec.seccomp_program.empty()) {
    return ContainFailure{
        "seccomp",
        Error{Code::kSandboxUnavailable, "the spec carries no compiled seccomp program", 0, {}}};
  }
  if (auto st = LoadSeccompProgram(spec.seccomp_program); !st)
    return ContainFailure{"seccomp", st.error()};
  return std::nullopt;
}

}  // namespace cordon
