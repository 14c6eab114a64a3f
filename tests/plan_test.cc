// Confinement plans as data, compared without a kernel: seccomp rules, Landlock per ABI,
// rlimits, the bwrap argv, and the protected-path scan.
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>

#include "runner/bwrap.h"
#include "runner/landlock.h"
#include "runner/launch.h"
#include "runner/rlimits.h"
#include "runner/seccomp.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

bool HasRule(const std::vector<SeccompRule>& rules, const std::string& name) {
  return std::any_of(rules.begin(), rules.end(), [&](const auto& r) { return r.syscall == name; });
}

TEST(WeakerPlan, PathsExceptOpensOnlyTheWayToHiddenPaths) {
  testing::TempDir d;
  const std::string r = d.path();
  testing::WriteFile(r + "/a.txt", "a");
  testing::WriteFile(r + "/b/secret/key", "k");
  testing::WriteFile(r + "/b/open.txt", "o");
  testing::WriteFile(r + "/c/deep/x", "x");
  std::filesystem::create_symlink(r + "/b/secret", r + "/alias");
  std::filesystem::create_symlink(r + "/a.txt", r + "/fine-link");
  auto got = PathsExcept(r, {r + "/b/secret"});
  std::sort(got.begin(), got.end());
  EXPECT_EQ(
      got, (std::vector<std::string>{r + "/a.txt", r + "/b/open.txt", r + "/c", r + "/fine-link"}));
  EXPECT_TRUE(PathsExcept(r + "/b/secret/key", {r + "/b/secret"}).empty());
  EXPECT_TRUE(PathsExcept(r, {r}).empty());
  EXPECT_EQ(PathsExcept(r + "/c", {r + "/b/secret"}), std::vector<std::string>{r + "/c"});
}

TEST(WeakerPlan, NoHostTmpProcOrDevicesAndTheDenyListIsLeftOut) {
  SandboxHost host;
  host.weaker = true;
  host.landlock_abi = 7;
  host.shim = "/nonexistent/cordon-shim";
  PolicySources sources;
  sources.dirs = {testing::ShippedPolicyDir()};
  auto loaded = LoadPolicy(sources);
  ASSERT_TRUE(loaded);
  const Policy& policy = *loaded;
  testing::TempDir ws;
  ProcessRequest req;
  req.argv = {"true"};
  auto plan = BuildLaunchPlan(host, policy, ws.path(), req, environ);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_TRUE(plan->contain.landlock);
  for (const auto& p : plan->contain.landlock->paths) {
    EXPECT_NE(p.path, "/tmp") << "the host's /tmp";
    EXPECT_NE(p.path, "/proc");
    EXPECT_NE(p.path, "/dev");
    EXPECT_NE(p.path, "/");
    EXPECT_NE(p.path, "/etc") << "/etc is granted entry by entry, without the deny list";
    EXPECT_NE(p.path, "/etc/shadow");
    EXPECT_NE(p.path.rfind("/etc/ssh", 0), 0u) << p.path;
  }
  bool setsid_denied = false;
  for (const auto& rule : plan->contain.seccomp)
    setsid_denied = setsid_denied || rule.syscall == "setsid";
  EXPECT_TRUE(setsid_denied);
}

TEST(SeccompPlan, DefaultDeniesAndArgumentRules) {
  auto rules = BuildSeccompRules({"ptrace", "bpf"}, NetworkMode::kNone);
  EXPECT_TRUE(HasRule(rules, "ptrace"));
  EXPECT_TRUE(HasRule(rules, "unshare"));
  EXPECT_TRUE(HasRule(rules, "clone3"));
  EXPECT_TRUE(HasRule(rules, "socket"));
  int tiocsti = 0, clone_ns = 0;
  for (const auto& r : rules) {
    if (r.syscall == "ioctl" && r.args.size() == 1 && r.args[0].value == TIOCSTI) {
      ++tiocsti;
      EXPECT_EQ(r.args[0].mask, 0xffffffffu) << "TIOCSTI must be compared on 32 bits";
    }
    if (r.syscall == "clone") ++clone_ns;
  }
  EXPECT_EQ(tiocsti, 1);
  EXPECT_EQ(clone_ns, 7);
  EXPECT_FALSE(HasRule(BuildSeccompRules({}, NetworkMode::kLoopback), "socket"));
  // Round trip through the shim's JSON spec.
  auto back = SeccompRulesFromJson(SeccompRulesJson(rules));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->size(), rules.size());
}

TEST(SeccompPlan, ShippedPolicyListsTheIssueDenies) {
  PolicySources s;
  s.dirs = {testing::ShippedPolicyDir()};
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p);
  for (const char* call : {"ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "mount",
                           "umount2",
                           "pivot_root",
                           "move_mount",
                           "open_tree",
                           "fsopen",
                           "kexec_load",
                           "kexec_file_load",
                           "init_module",
                           "finit_module",
                           "bpf",
                           "perf_event_open",
                           "userfaultfd",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "setns",
                           "personality"}) {
    EXPECT_NE(std::find(p->seccomp_deny.begin(), p->seccomp_deny.end(), call),
              p->seccomp_deny.end())
        << call;
  }
}

TEST(LandlockPlan, RightsFollowTheAbi) {
  LandlockInput in;
  in.read = {"/usr"};
  in.write = {"/ws"};
  in.network = NetworkMode::kNone;
  struct Case {
    int abi;
    bool refer, truncate, ioctl, net, scoped;
  };
  for (const Case& c :
       {Case{1, false, false, false, false, false}, Case{2, true, false, false, false, false},
        Case{3, true, true, false, false, false}, Case{4, true, true, false, true, false},
        Case{5, true, true, true, true, false}, Case{6, true, true, true, true, true},
        Case{7, true, true, true, true, true}}) {
    LandlockSpec s = BuildLandlockRules(in, c.abi);
    EXPECT_EQ((s.handled_fs & landlock::kRefer) != 0, c.refer) << c.abi;
    EXPECT_EQ((s.handled_fs & landlock::kTruncate) != 0, c.truncate) << c.abi;
    EXPECT_EQ((s.handled_fs & landlock::kIoctlDev) != 0, c.ioctl) << c.abi;
    EXPECT_EQ(s.handled_net != 0, c.net) << c.abi;
    EXPECT_EQ(s.scoped != 0, c.scoped) << c.abi;
    ASSERT_EQ(s.paths.size(), 2u);
    EXPECT_EQ(s.paths[0].access & landlock::kWriteFile, 0u) << "read paths must not be writable";
    EXPECT_EQ(s.paths[1].access, s.handled_fs);
  }
  in.network = NetworkMode::kLoopback;
  EXPECT_EQ(BuildLandlockRules(in, 7).handled_net, 0u);
  EXPECT_EQ(BuildLandlockRules(in, 0).handled_fs, 0u);
}

TEST(RlimitPlan, CgroupDecidesTheFallbacks) {
  Limits l;
  auto with = BuildRlimits(l, true, true);
  auto without = BuildRlimits(l, false, false);
  auto has = [](const std::vector<RlimitSpec>& v, int res) {
    return std::any_of(v.begin(), v.end(), [&](const auto& s) { return s.resource == res; });
  };
  EXPECT_TRUE(has(with, RLIMIT_CORE) && has(with, RLIMIT_NOFILE) && has(with, RLIMIT_FSIZE));
  EXPECT_FALSE(has(with, RLIMIT_NPROC));
  EXPECT_TRUE(has(without, RLIMIT_NPROC) && has(without, RLIMIT_AS));
  EXPECT_EQ(with[0].value, 0u);  // no core dumps
}

SandboxLayout Layout() {
  SandboxLayout l;
  l.bwrap = "/usr/bin/bwrap";
  l.workspace = "/ws";
  l.read = {{"/usr", PathKind::kDir, {}}, {"/bin", PathKind::kSymlink, "usr/bin"}};
  l.deny = {{"/etc/shadow", PathKind::kFile, {}}, {"/etc/ssh", PathKind::kDir, {}}};
  l.protect = {{"/ws/.git/hooks", PathKind::kDir, true},
               {"/ws/.mcp.json", PathKind::kMissing, false},
               {"/ws/.vscode", PathKind::kMissing, true}};
  l.pins = {"/ws/.git"};
  l.shim = "/opt/cordon/cordon-shim";
  l.cwd = "/ws";
  l.spec_fd = 3;
  return l;
}

std::size_t IndexOf(const std::vector<std::string>& v, const std::vector<std::string>& seq) {
  auto it = std::search(v.begin(), v.end(), seq.begin(), seq.end());
  return it == v.end() ? std::string::npos : static_cast<std::size_t>(it - v.begin());
}

TEST(BwrapPlan, NamespacesMountsAndOrder) {
  auto a = BuildBwrapArgv(Layout());
  for (const char* f :
       {"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--unshare-net", "--die-with-parent", "--new-session", "--clearenv"}) {
    EXPECT_NE(IndexOf(a, {f}), std::string::npos) << f;
  }
  EXPECT_NE(IndexOf(a, {"--symlink", "usr/bin", "/bin"}), std::string::npos);
  EXPECT_NE(IndexOf(a, {"--ro-bind", "/dev/null", "/etc/shadow"}), std::string::npos);
  EXPECT_NE(IndexOf(a, {"--tmpfs", "/etc/ssh", "--remount-ro", "/etc/ssh"}), std::string::npos);
  EXPECT_NE(IndexOf(a, {"--tmpfs", "/tmp"}), std::string::npos);
  const auto ws = IndexOf(a, {"--bind", "/ws", "/ws"});
  const auto pin = IndexOf(a, {"--bind", "/ws/.git", "/ws/.git"});
  const auto hooks = IndexOf(a, {"--ro-bind", "/ws/.git/hooks", "/ws/.git/hooks"});
  ASSERT_NE(ws, std::string::npos);
  EXPECT_LT(ws, pin);
  EXPECT_LT(pin, hooks) << "protected binds must come after the writable workspace and pins";
  EXPECT_NE(IndexOf(a, {"--ro-bind", "/dev/null", "/ws/.mcp.json"}), std::string::npos);
  EXPECT_NE(IndexOf(a, {"--tmpfs", "/ws/.vscode", "--remount-ro", "/ws/.vscode"}),
            std::string::npos);
  // The shim comes right after bwrap's "--"; the agent's argv is not on this command line.
  const auto dash = IndexOf(a, {"--", kShimInSandbox, "--spec-fd", "3"});
  EXPECT_EQ(dash + 4, a.size());
}

TEST(BwrapPlan, NetworkAllowSharesTheHostNetworkAndReadOnlyWorkspaceSkipsProtection) {
  auto l = Layout();
  l.network = NetworkMode::kAllow;
  l.workspace_writable = false;
  auto a = BuildBwrapArgv(l);
  EXPECT_EQ(IndexOf(a, {"--unshare-net"}), std::string::npos);
  EXPECT_NE(IndexOf(a, {"--ro-bind", "/ws", "/ws"}), std::string::npos);
  EXPECT_EQ(IndexOf(a, {"--bind", "/ws/.git", "/ws/.git"}), std::string::npos);
}

TEST(ProtectedScan, FindsNestedRepositoriesAndRefusesSymlinks) {
  testing::TempDir d;
  std::filesystem::create_directories(d / "ws/.git/hooks");
  std::filesystem::create_directories(d / "ws/third_party/lib/.git/hooks");
  std::filesystem::create_directories(d / "ws/app/.vscode");
  auto scan = ScanProtectedPaths(d / "ws");
  ASSERT_TRUE(scan) << scan.error().message;
  auto protects = [&](const std::string& rel) {
    return std::any_of(scan->protect.begin(), scan->protect.end(),
                       [&](const auto& p) { return p.path == d / ("ws/" + rel); });
  };
  EXPECT_TRUE(protects(".git/hooks"));
  EXPECT_TRUE(protects(".git/config"));
  EXPECT_TRUE(protects("third_party/lib/.git/hooks"));
  EXPECT_TRUE(protects("app/.vscode"));
  EXPECT_TRUE(protects(".mcp.json"));
  for (const char* pin :
       {".git", "third_party", "third_party/lib", "third_party/lib/.git", "app"}) {
    EXPECT_NE(std::find(scan->pins.begin(), scan->pins.end(), d / (std::string("ws/") + pin)),
              scan->pins.end())
        << pin;
  }
  ASSERT_EQ(::symlink("/tmp", (d / "ws/.claude").c_str()), 0);
  auto bad = ScanProtectedPaths(d / "ws");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Code::kSandboxUnavailable);
}

TEST(Environment, AllowlistOnly) {
  std::string a = "PATH=/evil", b = "GITHUB_TOKEN=x", c = "LANG=C.UTF-8", d = "LD_PRELOAD=/x.so";
  char* env[] = {a.data(), b.data(), c.data(), d.data(), nullptr};
  auto out = SandboxEnvironment(env, "/ws");
  for (const auto& [k, v] : out) {
    EXPECT_NE(k, "GITHUB_TOKEN");
    EXPECT_NE(k, "LD_PRELOAD");
    if (k == "PATH") {
      EXPECT_NE(v, "/evil");
    }
  }
}

}  // namespace
}  // namespace cordon
