// Seccomp rules as data. The plain deny list comes from policy ([seccomp] deny); the rules that
// look at arguments are here, each with the reason it exists.
#include "runner/seccomp.h"

#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>

namespace cordon {

std::vector<SeccompRule> BuildSeccompRules(const std::vector<std::string>& plain_denies,
                                           NetworkMode network) {
  std::vector<SeccompRule> rules;
  for (const auto& name : plain_denies) {
    rules.push_back({name, EPERM, {}, "listed in [seccomp] deny"});
  }
  // New namespaces would let the process build its own mount table or user mapping inside the
  // sandbox; bwrap already made every namespace cordon wants.
  rules.push_back({"unshare", EPERM, {}, "no new namespaces inside the sandbox"});
  static constexpr std::uint64_t kNsFlags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                               CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                               CLONE_NEWCGROUP};
  for (std::uint64_t flag : kNsFlags) {
    rules.push_back({"clone",
                     EPERM,
                     {{0, SeccompArg::Op::kMaskedEq, flag, flag}},
                     "clone with a namespace flag"});
  }
  // clone3 passes its flags in memory seccomp cannot read; ENOSYS makes libc fall back to clone.
  rules.push_back({"clone3", ENOSYS, {}, "flags unreadable by seccomp; libc falls back to clone"});
  // TIOCSTI pushes input into the controlling terminal (CVE-2017-5226 class). The request is
  // compared on its low 32 bits, so a high-bit variant is caught too (CVE-2019-10063).
  rules.push_back({"ioctl",
                   EPERM,
                   {{1, SeccompArg::Op::kMaskedEq, 0xffffffffu, TIOCSTI}},
                   "TIOCSTI terminal input injection"});
  rules.push_back({"ioctl",
                   EPERM,
                   {{1, SeccompArg::Op::kMaskedEq, 0xffffffffu, TIOCLINUX}},
                   "TIOCLINUX console control"});
  if (network == NetworkMode::kNone) {
    rules.push_back({"socket",
                     EAFNOSUPPORT,
                     {{0, SeccompArg::Op::kNe, 0, AF_UNIX}},
                     "network none: only unix sockets"});
  }
  return rules;
}

Json SeccompRulesJson(const std::vector<SeccompRule>& rules) {
  Json out = Json::array();
  for (const auto& r : rules) {
    Json args = Json::array();
    for (const auto& a : r.args) {
      args.push_back({{"index", a.index},
                      {"op", a.op == SeccompArg::Op::kNe ? "ne" : "masked_eq"},
                      {"mask", a.mask},
                      {"value", a.value}});
    }
    out.push_back(
        {{"syscall", r.syscall}, {"errno", r.errno_value}, {"args", args}, {"why", r.why}});
  }
  return out;
}

Result<std::vector<SeccompRule>> SeccompRulesFromJson(const Json& j) {
  std::vector<SeccompRule> rules;
  try {
    for (const auto& r : j) {
      SeccompRule rule{
          r.at("syscall").get<std::string>(), r.at("errno").get<int>(), {}, r.value("why", "")};
      for (const auto& a : r.at("args")) {
        rule.args.push_back({a.at("index").get<unsigned>(),
                             a.at("op") == "ne" ? SeccompArg::Op::kNe : SeccompArg::Op::kMaskedEq,
                             a.at("mask").get<std::uint64_t>(),
                             a.at("value").get<std::uint64_t>()});
      }
      rules.push_back(std::move(rule));
    }
  } catch (const std::exception& e) {
    return Fail(Code::kSandboxUnavailable, std::string("bad seccomp spec: ") + e.what());
  }
  return rules;
}

Status ApplySeccomp(const std::vector<SeccompRule>& rules) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Fail(Code::kSandboxUnavailable, "seccomp_init failed");
  struct Releaser {
    scmp_filter_ctx c;
    ~Releaser() { seccomp_release(c); }
  } releaser{ctx};
  // Syscalls of another architecture (int 0x80 on x86_64) are killed, not allowed.
  seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  for (const auto& r : rules) {
    int nr = seccomp_syscall_resolve_name(r.syscall.c_str());
    if (nr == __NR_SCMP_ERROR) continue;
    std::vector<scmp_arg_cmp> cmps;
    for (const auto& a : r.args) {
      scmp_arg_cmp c{};
      c.arg = a.index;
      if (a.op == SeccompArg::Op::kNe) {
        c.op = SCMP_CMP_NE;
        c.datum_a = a.value;
      } else {
        c.op = SCMP_CMP_MASKED_EQ;
        c.datum_a = a.mask;
        c.datum_b = a.value;
      }
      cmps.push_back(c);
    }
    int rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(static_cast<std::uint32_t>(r.errno_value)),
                                    nr, static_cast<unsigned>(cmps.size()), cmps.data());
    if (rc != 0) {
      return Fail(Code::kSandboxUnavailable,
                  "seccomp rule for " + r.syscall + " rejected: " + std::to_string(-rc), -rc,
                  r.syscall);
    }
  }
  if (int rc = seccomp_load(ctx); rc != 0) {
    return Fail(Code::kSandboxUnavailable, "seccomp_load failed", -rc, "seccomp_load");
  }
  return {};
}

}  // namespace cordon
