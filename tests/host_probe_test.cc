// The host probe's decisions, table-driven without a kernel (runner/host_capabilities.h): each
// environment's steps and context give one cause, one remedy for that environment and none of
// the others', and the mode the policy allows. The real restrictions are in host_env_test.
#include <gtest/gtest.h>

#include <cerrno>

#include "runner/host_capabilities.h"

namespace cordon {
namespace {

// A host where every step worked; each case below breaks one.
HostCapabilities Permissive() {
  HostCapabilities c;
  for (const auto& e : kProbeStepNames) c.steps.push_back(StepResult{e.value, true, true, 0, ""});
  c.landlock_abi = 7;
  c.clone3 = true;
  c.context.bwrap = "/usr/bin/bwrap";
  c.context.max_user_namespaces = 15000;
  c.context.kernel = "6.18.0";
  return c;
}

void Fails(HostCapabilities& c, ProbeStep s, int err, const char* what) {
  bool later = false;
  for (auto& r : c.steps) {
    if (r.step == s) {
      r = StepResult{s, true, false, err, what};
      later = true;
    } else if (later &&
               (r.step == ProbeStep::kMount || r.step == ProbeStep::kProc ||
                r.step == ProbeStep::kNetNamespace || r.step == ProbeStep::kOverlay) &&
               s == ProbeStep::kUserNamespace) {
      r = StepResult{r.step, false, false, 0, ""};  // not tried: it needs the namespace
    }
  }
}

// The remedies of every environment, so a case can say which must not appear.
struct Remedy {
  const char* name;
  const char* text;
};
constexpr Remedy kRemedies[] = {
    {"apparmor", "apparmor_restrict_unprivileged_userns=0"},
    {"max_userns", "user.max_user_namespaces=15000"},
    {"docker_seccomp", "--security-opt seccomp="},
    {"docker_systempaths", "systempaths=unconfined"},
    {"podman_unmask", "unmask=ALL"},
    {"k8s_procmount", "procMount: Unmasked"},
    {"k8s_seccomp", "type: Localhost"},
    {"runc", "runc instead of runsc"},
    {"bubblewrap", "apt-get install bubblewrap"},
    {"gitlab", "config.toml"},
    {"host_of_container", "on the host that runs the container"},
};

struct Case {
  const char* name;
  void (*setup)(HostCapabilities&);
  HostCause cause;
  std::vector<const char*> remedy_names;  // the remedies that must appear; every other must not
  std::optional<SandboxMode> weaker;      // the mode with allow_weaker; nullopt: none can run
};

TEST(HostProbe, EachEnvironmentHasOneCauseAndOnlyItsRemedy) {
  const std::vector<Case> cases = {
      {"permissive host", [](HostCapabilities&) {}, HostCause::kNone, {}, SandboxMode::kBwrap},
      {"Ubuntu 24.04: AppArmor refuses the uid map",
       [](HostCapabilities& c) {
         c.context.apparmor_restrict_userns = 1;
         Fails(c, ProbeStep::kUserNamespace, EACCES, "write /proc/self/uid_map");
       },
       HostCause::kAppArmorUserns,
       {"apparmor"},
       SandboxMode::kLandlockOnly},
      {"Docker's default seccomp profile",
       [](HostCapabilities& c) {
         c.context.seccomp_mode = 2;
         c.context.seccomp_filters = 1;
         c.context.container = "docker";
         c.context.container_evidence = "/.dockerenv";
         Fails(c, ProbeStep::kUserNamespace, EPERM, "unshare(CLONE_NEWUSER)");
       },
       HostCause::kSeccompUserns,
       {"docker_seccomp", "docker_systempaths"},
       SandboxMode::kLandlockOnly},
      {"Docker's seccomp on an Ubuntu host: the filter refuses unshare itself",
       [](HostCapabilities& c) {
         c.context.apparmor_restrict_userns = 1;
         c.context.seccomp_mode = 2;
         c.context.container = "docker";
         Fails(c, ProbeStep::kUserNamespace, EPERM, "unshare(CLONE_NEWUSER)");
       },
       HostCause::kSeccompUserns,
       {"docker_seccomp", "docker_systempaths"},
       SandboxMode::kLandlockOnly},
      {"GitLab's docker executor: the runner's config.toml, not docker run",
       [](HostCapabilities& c) {
         c.context.seccomp_mode = 2;
         c.context.container = "docker";
         c.context.gitlab_ci = true;
         Fails(c, ProbeStep::kUserNamespace, EPERM, "unshare(CLONE_NEWUSER)");
       },
       HostCause::kSeccompUserns,
       {"gitlab", "docker_systempaths"},
       SandboxMode::kLandlockOnly},
      {"AppArmor on an Ubuntu host, inside a container: the host's sysctl",
       [](HostCapabilities& c) {
         c.context.apparmor_restrict_userns = 1;
         c.context.container = "docker";
         Fails(c, ProbeStep::kUserNamespace, EPERM, "write /proc/self/uid_map");
       },
       HostCause::kAppArmorUserns,
       {"apparmor", "host_of_container"},
       SandboxMode::kLandlockOnly},
      {"Podman's seccomp",
       [](HostCapabilities& c) {
         c.context.seccomp_mode = 2;
         c.context.container = "podman";
         Fails(c, ProbeStep::kUserNamespace, EPERM, "unshare(CLONE_NEWUSER)");
       },
       HostCause::kSeccompUserns,
       {"docker_seccomp", "podman_unmask"},
       SandboxMode::kLandlockOnly},
      {"Kubernetes RuntimeDefault seccomp",
       [](HostCapabilities& c) {
         c.context.seccomp_mode = 2;
         c.context.container = "kubernetes";
         c.context.kubernetes = true;
         Fails(c, ProbeStep::kUserNamespace, EPERM, "unshare(CLONE_NEWUSER)");
       },
       HostCause::kSeccompUserns,
       {"k8s_seccomp", "k8s_procmount"},
       SandboxMode::kLandlockOnly},
      {"user.max_user_namespaces=0",
       [](HostCapabilities& c) {
         c.context.max_user_namespaces = 0;
         Fails(c, ProbeStep::kUserNamespace, ENOSPC, "unshare(CLONE_NEWUSER)");
       },
       HostCause::kUsernsDisabled,
       {"max_userns"},
       SandboxMode::kLandlockOnly},
      {"gVisor: no max_user_namespaces file is not 'disabled' when the namespace works",
       [](HostCapabilities& c) {
         c.context.max_user_namespaces.reset();
         c.context.gvisor = true;
       },
       HostCause::kNone,
       {},
       SandboxMode::kBwrap},
      {"gVisor without the namespace and without Landlock",
       [](HostCapabilities& c) {
         c.context.max_user_namespaces.reset();
         c.context.gvisor = true;
         c.landlock_abi = 0;
         Fails(c, ProbeStep::kUserNamespace, EPERM, "unshare(CLONE_NEWUSER)");
       },
       HostCause::kGVisorNoLandlock,
       {"runc"},
       std::nullopt},
      {"Docker's masked /proc",
       [](HostCapabilities& c) {
         c.context.container = "docker";
         c.context.proc_overmounts = {"/proc/acpi", "/proc/keys", "/proc/kcore"};
         Fails(c, ProbeStep::kProc, EPERM, "mount proc");
       },
       HostCause::kMaskedProc,
       {"docker_systempaths"},
       SandboxMode::kBwrapHostProc},
      {"Podman's masked /proc",
       [](HostCapabilities& c) {
         c.context.container = "podman";
         c.context.proc_overmounts = {"/proc/acpi", "/proc/keys"};
         Fails(c, ProbeStep::kProc, EPERM, "mount proc");
       },
       HostCause::kMaskedProc,
       {"podman_unmask"},
       SandboxMode::kBwrapHostProc},
      {"Kubernetes' masked /proc",
       [](HostCapabilities& c) {
         c.context.container = "kubernetes";
         c.context.kubernetes = true;
         c.context.proc_overmounts = {"/proc/acpi", "/proc/keys"};
         Fails(c, ProbeStep::kProc, EPERM, "mount proc");
       },
       HostCause::kMaskedProc,
       {"k8s_procmount"},
       SandboxMode::kBwrapHostProc},
      {"binfmt_misc under /proc is no mask",
       [](HostCapabilities& c) { c.context.proc_overmounts = {"/proc/sys/fs/binfmt_misc"}; },
       HostCause::kNone,
       {},
       SandboxMode::kBwrap},
      {"bwrap missing",
       [](HostCapabilities& c) {
         c.context.bwrap.clear();
         Fails(c, ProbeStep::kBwrap, ENOENT, "bwrap is not on PATH");
       },
       HostCause::kNoBwrap,
       {"bubblewrap"},
       SandboxMode::kLandlockOnly},
      {"clone3 refused alone: the full sandbox runs (the shim falls back to clone)",
       [](HostCapabilities& c) {
         c.clone3 = false;
         Fails(c, ProbeStep::kClone3, ENOSYS, "clone3 refused");
       },
       HostCause::kNone,
       {},
       SandboxMode::kBwrap},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    HostCapabilities c = Permissive();
    k.setup(c);
    Classify(c);
    EXPECT_EQ(Name(kHostCauseNames, c.cause), Name(kHostCauseNames, k.cause));
    for (const Remedy& r : kRemedies) {
      const bool wanted = std::find_if(k.remedy_names.begin(), k.remedy_names.end(), [&](auto n) {
                            return std::string_view(n) == r.name;
                          }) != k.remedy_names.end();
      EXPECT_EQ(c.remedy.find(r.text) != std::string::npos, wanted)
          << r.name << " in the remedy: " << c.remedy;
    }
    // Without allow_weaker, the one cause and remedy, and a pointer to doctor.
    auto strict = ChooseSandboxMode(c, false);
    if (k.cause == HostCause::kNone) {
      ASSERT_TRUE(strict.has_value());
      EXPECT_EQ(strict->mode, SandboxMode::kBwrap);
    } else {
      ASSERT_FALSE(strict.has_value());
      EXPECT_EQ(strict.error().code, Code::kSandboxUnavailable);
      EXPECT_NE(strict.error().message.find(c.cause_text), std::string::npos);
      EXPECT_NE(strict.error().message.find(c.remedy), std::string::npos);
      EXPECT_NE(strict.error().message.find("cordon doctor"), std::string::npos);
    }
    auto weaker = ChooseSandboxMode(c, true);
    ASSERT_EQ(weaker.has_value(), k.weaker.has_value()) << (weaker ? "" : weaker.error().message);
    if (weaker) {
      EXPECT_EQ(Name(kSandboxModeNames, weaker->mode), Name(kSandboxModeNames, *k.weaker));
      EXPECT_EQ(weaker->losses.empty(), *k.weaker == SandboxMode::kBwrap);
    }
  }
}

TEST(HostProbe, NoWeakerModeWithoutLandlock) {
  // The host-proc mode rests on Landlock to keep other processes' environ unreadable; the
  // namespace-free mode on Landlock as its only wall.
  for (ProbeStep s : {ProbeStep::kProc, ProbeStep::kUserNamespace}) {
    HostCapabilities c = Permissive();
    c.landlock_abi = 0;
    c.context.proc_overmounts = {"/proc/acpi"};
    c.context.max_user_namespaces = 0;
    Fails(c, s, s == ProbeStep::kProc ? EPERM : ENOSPC, "x");
    Classify(c);
    auto choice = ChooseSandboxMode(c, true);
    ASSERT_FALSE(choice.has_value()) << Name(kProbeStepNames, s);
    EXPECT_NE(choice.error().message.find("no weaker mode"), std::string::npos);
  }
}

TEST(HostProbe, TheCacheKeyChangesWithTheEnvironment) {
  HostContext base;
  base.kernel = "6.18";
  base.namespaces = "user:[1] mnt:[2]";
  const std::string key = base.Key();
  auto changed = [&](auto edit) {
    HostContext c = base;
    edit(c);
    return c.Key();
  };
  EXPECT_EQ(key, changed([](HostContext&) {}));
  EXPECT_NE(key, changed([](HostContext& c) { c.seccomp_filters = 1; }));
  EXPECT_NE(key, changed([](HostContext& c) { c.apparmor_restrict_userns = 1; }));
  EXPECT_NE(key, changed([](HostContext& c) { c.max_user_namespaces = 0; }));
  EXPECT_NE(key, changed([](HostContext& c) { c.namespaces = "user:[1] mnt:[3]"; }));
  EXPECT_NE(key, changed([](HostContext& c) { c.proc_overmounts = {"/proc/keys"}; }));
  EXPECT_NE(key, changed([](HostContext& c) { c.container = "docker"; }));
  EXPECT_NE(key, changed([](HostContext& c) { c.bwrap_identity = "other"; }));
  EXPECT_NE(key, changed([](HostContext& c) { c.euid = 1000; }));
}

TEST(HostProbe, NameTablesListEveryValue) {
  EXPECT_EQ(std::size(kProbeStepNames), static_cast<std::size_t>(ProbeStep::kClone3) + 1);
  EXPECT_EQ(std::size(kHostCauseNames), static_cast<std::size_t>(HostCause::kUnknown) + 1);
  EXPECT_EQ(std::size(kSandboxModeNames), static_cast<std::size_t>(SandboxMode::kLandlockOnly) + 1);
  for (const auto& e : kHostCauseNames) EXPECT_NE(Name(kHostCauseNames, e.value), "?");
}

}  // namespace
}  // namespace cordon
