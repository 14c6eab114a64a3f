// Confinement plans as data, compared without a kernel: seccomp rules, Landlock per ABI,
// rlimits, the bwrap argv, the protected-path scan and the pure plan from hand-made facts; and
// one comparison of `cordon exec --plan` with what bwrap and the shim actually received.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <functional>
#include <regex>
#include <set>

#include "core/hash.h"
#include "runner/bwrap.h"
#include "runner/host_probe.h"
#include "runner/landlock.h"
#include "runner/launch.h"
#include "runner/limit_hit.h"
#include "runner/mask.h"
#include "runner/rlimits.h"
#include "runner/seccomp.h"
#include "runner/shim/sha256.h"
#include "tests/test_util.h"
#include "workspace/guard.h"

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
  LaunchResources acquired;
  auto facts = GatherHostFacts(host, policy, ws.path(), req, environ, &acquired);
  ASSERT_TRUE(facts) << facts.error().message;
  auto plan = BuildLaunchPlan(policy, *facts, req);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_TRUE(plan->call.contain.landlock);
  for (const auto& p : plan->call.contain.landlock->paths) {
    EXPECT_NE(p.path, "/tmp") << "the host's /tmp";
    EXPECT_NE(p.path, "/proc");
    EXPECT_NE(p.path, "/dev");
    EXPECT_NE(p.path, "/");
    EXPECT_NE(p.path, "/etc") << "/etc is granted entry by entry, without the deny list";
    EXPECT_NE(p.path, "/etc/shadow");
    EXPECT_NE(p.path.rfind("/etc/ssh", 0), 0u) << p.path;
  }
  bool setsid_denied = false;
  for (const auto& rule : plan->call.contain.seccomp)
    setsid_denied = setsid_denied || rule.syscall == "setsid";
  EXPECT_TRUE(setsid_denied);
  // The plan carries the filter compiled from exactly these rules: the shim only loads it.
  auto program = CompileSeccomp(plan->call.contain.seccomp);
  ASSERT_TRUE(program) << program.error().message;
  EXPECT_EQ(plan->call.contain.seccomp_program, *program);
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

TEST(SeccompPlan, SetIdModesAreRefusedOnEveryCallThatTakesAMode) {
  const auto rules = BuildSeccompRules({}, NetworkMode::kNone);
  struct Want {
    const char* syscall;
    unsigned index;
  };
  for (const Want& w :
       {Want{"chmod", 1}, Want{"fchmod", 1}, Want{"fchmodat", 2}, Want{"fchmodat2", 2},
        Want{"mknod", 1}, Want{"mknodat", 2}, Want{"mkdir", 1}, Want{"mkdirat", 2}, Want{"open", 2},
        Want{"openat", 3}, Want{"creat", 1}}) {
    for (std::uint64_t bit : {std::uint64_t{S_ISUID}, std::uint64_t{S_ISGID}}) {
      const bool found = std::any_of(rules.begin(), rules.end(), [&](const SeccompRule& r) {
        return r.syscall == w.syscall && r.errno_value == EPERM && r.args.size() == 1 &&
               r.args[0].index == w.index && r.args[0].op == SeccompArg::Op::kMaskedEq &&
               r.args[0].mask == bit && r.args[0].value == bit;
      });
      EXPECT_TRUE(found) << w.syscall << " bit " << std::oct << bit;
    }
  }
  const auto openat2 = std::find_if(rules.begin(), rules.end(),
                                    [](const SeccompRule& r) { return r.syscall == "openat2"; });
  ASSERT_NE(openat2, rules.end());
  EXPECT_EQ(openat2->errno_value, ENOSYS);
  EXPECT_TRUE(openat2->args.empty());
  // io_uring stays refused even when a policy layer removed it from the plain list.
  for (const char* ring : {"io_uring_setup", "io_uring_enter", "io_uring_register"})
    EXPECT_TRUE(HasRule(rules, ring)) << ring;
#if defined(__x86_64__) || defined(__aarch64__)
  // libseccomp 2.5.4 does not name fchmodat2; the applier uses the number.
  EXPECT_EQ(FallbackSyscallNumber("fchmodat2"), 452);
  EXPECT_EQ(FallbackSyscallNumber("openat2"), 437);
#endif
  EXPECT_EQ(FallbackSyscallNumber("no_such_call"), -1);
}

TEST(SeccompPlan, X32CallsAreKilled) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "x32 exists only on x86_64";
#else
  // An x32 call is an x86_64 call whose number has bit 30 set: the argument rules would not
  // match it. In a child, with the filter as the shim loads it, one kills the process (SIGSYS)
  // on every kernel, with or without x32 support.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(10);
    if (!ApplySeccomp(BuildSeccompRules({}, NetworkMode::kNone))) _exit(11);
    ::syscall(0x40000000L + SYS_fchmodat, AT_FDCWD, "/nonexistent", 04755);
    _exit(12);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status)
                                   << " (10: no_new_privs, 11: apply, 12: the x32 call returned)";
  EXPECT_EQ(WTERMSIG(status), SIGSYS);
#endif
}

// cordon compiles the filter and the shim only loads it (libseccomp's compile and kernel probes
// were ~1.4 ms of the shim's CPU per launch). Loaded, it refuses what the rules refuse; the
// spec's JSON carries it byte for byte; and a spec without one runs nothing (before, the shim
// compiled the rules itself and ran such a spec).
TEST(SeccompPlan, TheShimLoadsTheCompiledFilterAndRunsNothingWithoutOne) {
  const auto rules = BuildSeccompRules({"getppid"}, NetworkMode::kNone);
  auto program = CompileSeccomp(rules);
  ASSERT_TRUE(program) << program.error().message;
  ASSERT_FALSE(program->empty());
  EXPECT_EQ(program->size() % 8, 0u);  // struct sock_filter
  ASSERT_EQ(CompileSeccomp(rules).value(), *program) << "the same rules, the same program";
  auto in_child = [](const std::function<int()>& f) {
    pid_t pid = ::fork();
    if (pid == 0) _exit(f());
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
  };
  EXPECT_EQ(in_child([&] {
              if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 10;
              if (!LoadSeccompProgram(*program)) return 11;
              return ::syscall(SYS_getppid) == -1 && errno == EPERM ? 0 : 12;
            }),
            0)
      << "10: no_new_privs, 11: load, 12: getppid was not refused";
  EXPECT_FALSE(LoadSeccompProgram(program->substr(0, program->size() - 3)));
  ContainSpec spec;
  spec.argv = {"true"};
  spec.seccomp = rules;
  spec.seccomp_program = *program;
  auto back = ContainSpecFromJson(ContainSpecJson(spec));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->seccomp_program, *program);
  spec.seccomp_program.clear();
  EXPECT_EQ(in_child([&] {
              auto failure = Contain(spec);
              return failure && failure->step == "seccomp" ? 0 : 13;
            }),
            0)
      << "a spec without a compiled filter was applied";
}

TEST(SeccompPlan, APlainDenyIsNotDoubledByABuiltInRule) {
  // libseccomp refuses two rules with different actions for one call: a syscall the policy
  // already denies outright gets no second rule, and the filter still loads.
  const std::vector<std::string> plain = {"openat2", "memfd_create", "chmod", "shmget"};
  const auto rules = BuildSeccompRules(plain, NetworkMode::kNone);
  for (const auto& name : plain) {
    EXPECT_EQ(std::count_if(rules.begin(), rules.end(),
                            [&](const SeccompRule& r) { return r.syscall == name; }),
              1)
        << name;
  }
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(10);
    _exit(ApplySeccomp(rules) ? 0 : 11);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(SeccompPlan, MemfdAndShmgetAreRefusedOnlyWhereNothingElseBoundsThem) {
  struct Case {
    bool cgroup, own_ipc, memfd_refused, shmget_refused;
  };
  for (const Case& c : {Case{false, true, true, false}, Case{true, true, false, false},
                        Case{false, false, true, true}, Case{true, false, false, true}}) {
    const auto rules = BuildSeccompRules(
        {}, NetworkMode::kNone, SeccompMemory{.cgroup = c.cgroup, .own_ipc_namespace = c.own_ipc});
    EXPECT_EQ(HasRule(rules, "memfd_create"), c.memfd_refused) << c.cgroup << c.own_ipc;
    EXPECT_EQ(HasRule(rules, "memfd_secret"), c.memfd_refused) << c.cgroup << c.own_ipc;
    EXPECT_EQ(HasRule(rules, "shmget"), c.shmget_refused) << c.cgroup << c.own_ipc;
    for (const auto& r : rules) {
      if (r.syscall == "memfd_create" || r.syscall == "shmget") {
        EXPECT_EQ(r.errno_value, ENOSYS);
      }
    }
  }
}

TEST(RlimitPlan, IpcShmLimitsAreTheMemoryLimit) {
  EXPECT_EQ(BuildIpcShmLimits(128ull << 20, 4096), (IpcShmLimits{128ull << 20, 32768}));
  EXPECT_EQ(BuildIpcShmLimits(4095, 4096), (IpcShmLimits{4095, 0}));
  ContainSpec spec;
  spec.argv = {"true"};
  spec.ipc_shm_bytes = 1234567;
  auto back = ContainSpecFromJson(ContainSpecJson(spec));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ipc_shm_bytes, 1234567u);
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
  auto with = BuildRlimits(RlimitValuesOf(l), true, true);
  auto without = BuildRlimits(RlimitValuesOf(l), false, false);
  auto has = [](const std::vector<RlimitSpec>& v, int res) {
    return std::any_of(v.begin(), v.end(), [&](const auto& s) { return s.resource == res; });
  };
  EXPECT_TRUE(has(with, RLIMIT_CORE) && has(with, RLIMIT_NOFILE) && has(with, RLIMIT_FSIZE));
  EXPECT_FALSE(has(with, RLIMIT_NPROC));
  EXPECT_TRUE(has(without, RLIMIT_NPROC) && has(without, RLIMIT_DATA));
  EXPECT_EQ(with[0].value, 0u);  // no core dumps
}

// Issue 11: RLIMIT_AS broke runtimes that reserve address space (V8's WebAssembly memories);
// the memory fallback is RLIMIT_DATA, with the stack (which RLIMIT_DATA skips) capped as well,
// and RLIMIT_CPU's soft limit sits a second under the hard one so SIGXCPU names it.
TEST(RlimitPlan, MemoryFallbackIsDataNotAddressSpace) {
  Limits l;
  l.memory_bytes = 128ll << 20;
  l.cpu_secs = 7;
  auto find = [](const std::vector<RlimitSpec>& v, int res) -> const RlimitSpec* {
    for (const auto& s : v) {
      if (s.resource == res) return &s;
    }
    return nullptr;
  };
  for (bool cgroup : {false, true}) {
    auto specs = BuildRlimits(RlimitValuesOf(l), cgroup, cgroup);
    EXPECT_EQ(find(specs, RLIMIT_AS), nullptr) << "RLIMIT_AS breaks address-space reservations";
    const RlimitSpec* cpu = find(specs, RLIMIT_CPU);
    ASSERT_NE(cpu, nullptr);
    EXPECT_EQ(cpu->soft, std::optional<std::uint64_t>(7));
    EXPECT_EQ(cpu->value, 8u);
    if (cgroup) {
      EXPECT_EQ(find(specs, RLIMIT_DATA), nullptr);
      EXPECT_EQ(find(specs, RLIMIT_STACK), nullptr);
      continue;
    }
    const RlimitSpec* data = find(specs, RLIMIT_DATA);
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(data->value, 128u << 20);
    EXPECT_FALSE(data->soft.has_value());
    const RlimitSpec* stack = find(specs, RLIMIT_STACK);
    ASSERT_NE(stack, nullptr);
    EXPECT_EQ(stack->value, 128u << 20);
    EXPECT_EQ(stack->soft, std::optional<std::uint64_t>(kDefaultStackSoft));
    // The spec the shim reads keeps the soft limits.
    auto back = RlimitsFromJson(RlimitsJson(specs));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, specs);
  }
}

TEST(SeccompPlan, SharedAnonymousMemoryIsRefusedOnlyWithoutACgroup) {
  auto has_rule = [](const std::vector<SeccompRule>& rules) {
    return std::any_of(rules.begin(), rules.end(), [](const SeccompRule& r) {
      return r.syscall == "mmap" && r.errno_value == ENOMEM && r.args.size() == 1 &&
             r.args[0].index == 3 && r.args[0].mask == (MAP_SHARED | MAP_ANONYMOUS) &&
             r.args[0].value == (MAP_SHARED | MAP_ANONYMOUS);
    });
  };
  EXPECT_TRUE(has_rule(BuildSeccompRules({}, NetworkMode::kNone, SeccompMemory{.cgroup = false})));
  EXPECT_FALSE(has_rule(BuildSeccompRules({}, NetworkMode::kNone, SeccompMemory{.cgroup = true})));
}

// Which limit ended a process: the kernel's own evidence decides, never a signal alone.
TEST(LimitHitPlan, NamesTheLimitFromTheKernelsEvidence) {
  Limits l;
  l.cpu_secs = 2;
  l.memory_bytes = 100ll << 20;
  l.timeout_secs = 5;
  struct Case {
    const char* what;
    LimitFacts facts;
    const char* limit;  // nullptr: none
    const char* key;
  };
  auto facts = [&](auto edit) {
    LimitFacts f;
    f.limits = l;
    edit(f);
    return f;
  };
  const Case cases[] = {
      {"timeout", facts([](LimitFacts& f) { f.timed_out = true; }), "timeout",
       "limits.timeout_secs"},
      {"timeout from --timeout", facts([](LimitFacts& f) {
         f.timed_out = true;
         f.timeout_from = "--timeout";
       }),
       "timeout", "--timeout"},
      {"SIGXCPU", facts([](LimitFacts& f) { f.signal = SIGXCPU; }), "cpu", "limits.cpu_secs"},
      {"SIGKILL at the hard CPU limit", facts([](LimitFacts& f) {
         f.signal = SIGKILL;
         f.command_cpu_ms = 3000;
       }),
       "cpu", "limits.cpu_secs"},
      {"SIGKILL with little CPU is not the CPU limit", facts([](LimitFacts& f) {
         f.signal = SIGKILL;
         f.command_cpu_ms = 10;
       }),
       nullptr, nullptr},
      {"SIGXFSZ", facts([](LimitFacts& f) { f.signal = SIGXFSZ; }), "file_size",
       "limits.file_size_bytes"},
      {"cgroup OOM kill", facts([](LimitFacts& f) {
         f.memory_by_cgroup = true;
         f.signal = SIGKILL;
         f.oom_kills = 1;
       }),
       "memory", "limits.memory_bytes"},
      {"SIGKILL under a cgroup without an OOM kill", facts([](LimitFacts& f) {
         f.memory_by_cgroup = true;
         f.signal = SIGKILL;
       }),
       nullptr, nullptr},
      {"RLIMIT_DATA: out of memory at the limit", facts([](LimitFacts& f) {
         f.exit_code = 1;
         f.command_max_rss_kb = 98 * 1024;
       }),
       "memory", "limits.memory_bytes"},
      {"exit 1 far under the memory limit", facts([](LimitFacts& f) {
         f.exit_code = 1;
         f.command_max_rss_kb = 10 * 1024;
       }),
       nullptr, nullptr},
      {"a clean exit at the memory limit ended nothing", facts([](LimitFacts& f) {
         f.exit_code = 0;
         f.command_max_rss_kb = 99 * 1024;
       }),
       nullptr, nullptr},
      {"forks refused by pids.max", facts([](LimitFacts& f) {
         f.pids_by_cgroup = f.memory_by_cgroup = true;
         f.exit_code = 1;
         f.pids_refusals = 3;
       }),
       "pids", "limits.pids"},
      {"a tool's override names its key", facts([](LimitFacts& f) {
         f.signal = SIGXCPU;
         f.tool = "run_shell";
         f.tool_overrides = {"cpu_secs"};
       }),
       "cpu", "tools.run_shell.cpu_secs"},
      {"SIGTERM is no limit", facts([](LimitFacts& f) { f.signal = SIGTERM; }), nullptr, nullptr},
  };
  for (const Case& c : cases) {
    auto hit = LimitThatEnded(c.facts);
    if (c.limit == nullptr) {
      EXPECT_FALSE(hit.has_value()) << c.what << ": " << hit->Describe();
      continue;
    }
    ASSERT_TRUE(hit.has_value()) << c.what;
    EXPECT_EQ(hit->name, c.limit) << c.what;
    EXPECT_EQ(hit->key, c.key) << c.what;
    EXPECT_FALSE(hit->evidence.empty()) << c.what;
  }
}

TEST(CgroupPlan, KeyedValuesAreReadByWholeKey) {
  EXPECT_EQ(CgroupKeyedValue("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", "oom_kill"), 2u);
  EXPECT_EQ(CgroupKeyedValue("low 0\nhigh 0\nmax 5\noom 1\noom_kill 1", "max"), 5u);
  EXPECT_EQ(CgroupKeyedValue("oom_kill_disable 1", "oom_kill"), 0u);
  EXPECT_EQ(CgroupKeyedValue("", "max"), 0u);
}

SandboxLayout Layout() {
  SandboxLayout l;
  l.bwrap = "/usr/bin/bwrap";
  l.workspace = "/ws";
  l.read = {{"/usr", PathKind::kDir, {}}, {"/bin", PathKind::kSymlink, "usr/bin"}};
  l.deny = {{"/etc/shadow", PathKind::kFile, {}}, {"/etc/ssh", PathKind::kDir, {}}};
  l.protect = {{"/ws/.git/hooks", PathKind::kDir},
               {"/ws/.mcp.json", PathKind::kMissing},
               {"/ws/.vscode", PathKind::kMissing}};
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
  // A protected name that does not exist gets no mount point: bwrap would create it in the
  // user's workspace, where the host sees it (issue 9, promise 2).
  EXPECT_EQ(IndexOf(a, {"/ws/.mcp.json"}), std::string::npos);
  EXPECT_EQ(IndexOf(a, {"/ws/.vscode"}), std::string::npos);
  // The shim comes right after bwrap's "--"; the agent's argv is not on this command line.
  const auto dash = IndexOf(a, {"--", kShimInSandbox, "--spec-fd", "3"});
  EXPECT_EQ(dash + 4, a.size());
}

TEST(BwrapPlan, PrivateTmpIsSizedToTheMemoryLimit) {
  auto l = Layout();
  EXPECT_EQ(IndexOf(BuildBwrapArgv(l), {"--size"}), std::string::npos);
  l.tmp_size_bytes = 134217728;
  EXPECT_NE(IndexOf(BuildBwrapArgv(l), {"--size", "134217728", "--tmpfs", "/tmp"}),
            std::string::npos);
}

TEST(BwrapPlan, GitViewsAreBoundOverEachGitDirectoryWithTheSharedAndReadOnlyParts) {
  SandboxLayout l = Layout();
  l.protect.erase(l.protect.begin());  // no .git/hooks bind: the view covers it
  l.git_views = {{"/ws/.git/modules/sub",
                  "/st/views/7-ab/2",
                  {"objects", "refs"},
                  {"config"},
                  {"HEAD", "index"},
                  {}},
                 {"/ws/.git",
                  "/st/views/7-ab/1",
                  {"objects", "refs", "logs"},
                  {"config", "hooks", "modules"},
                  {"HEAD", "index", "ORIG_HEAD"},
                  {{"info", "../info-elsewhere"}}}};
  auto a = BuildBwrapArgv(l);
  const auto ws = IndexOf(a, {"--bind", "/ws", "/ws"});
  const auto view = IndexOf(a, {"--bind", "/st/views/7-ab/1", "/ws/.git"});
  const auto objects = IndexOf(a, {"--bind", "/ws/.git/objects", "/ws/.git/objects"});
  const auto logs = IndexOf(a, {"--bind", "/ws/.git/logs", "/ws/.git/logs"});
  const auto config = IndexOf(a, {"--ro-bind", "/ws/.git/config", "/ws/.git/config"});
  const auto modules = IndexOf(a, {"--ro-bind", "/ws/.git/modules", "/ws/.git/modules"});
  const auto sub = IndexOf(a, {"--bind", "/st/views/7-ab/2", "/ws/.git/modules/sub"});
  const auto sub_config =
      IndexOf(a, {"--ro-bind", "/ws/.git/modules/sub/config", "/ws/.git/modules/sub/config"});
  const auto hooks_protected = IndexOf(a, {"--ro-bind", "/ws/.git/hooks", "/ws/.git/hooks"});
  for (auto i : {ws, view, objects, logs, config, modules, sub, sub_config, hooks_protected}) {
    ASSERT_NE(i, std::string::npos);
  }
  EXPECT_LT(ws, view);
  EXPECT_EQ(IndexOf(a, {"/ws/.vscode"}), std::string::npos) << "a missing name gets no mount point";
  EXPECT_LT(view, objects);
  EXPECT_LT(objects, config);
  EXPECT_LT(modules, sub) << "a submodule's view is mounted over its parent's read-only modules/";
  EXPECT_LT(sub, sub_config);
  // Copied files and symlinks live in the view: no bind; nothing binds the old config/hooks.
  EXPECT_EQ(IndexOf(a, {"--ro-bind", "/ws/.git/HEAD", "/ws/.git/HEAD"}), std::string::npos);
  EXPECT_EQ(IndexOf(a, {"/ws/.git/info"}), std::string::npos);
  EXPECT_LT(view, IndexOf(a, {"--ro-bind", "/ws/.git/hooks", "/ws/.git/hooks"}));
  // A read-only workspace has no views.
  l.workspace_writable = false;
  EXPECT_EQ(IndexOf(BuildBwrapArgv(l), {"--bind", "/st/views/7-ab/1", "/ws/.git"}),
            std::string::npos);
}

TEST(GitView, ListsCopiesAndSyncsOnlyTheAllowedFiles) {
  testing::TempDir d;
  const std::string git = d / "ws/.git";
  std::filesystem::create_directories(git + "/objects/ab");
  std::filesystem::create_directories(git + "/refs/heads");
  std::filesystem::create_directories(git + "/hooks");
  std::filesystem::create_directories(git + "/modules/libs/foo/objects");
  std::filesystem::create_directories(git + "/worktrees/wt");
  testing::WriteFile(git + "/HEAD", "ref: refs/heads/main\n");
  testing::WriteFile(git + "/refs/heads/main", std::string(40, '1') + "\n");
  testing::WriteFile(git + "/index", "INDEX1");
  testing::WriteFile(git + "/config", "[core]\n");
  testing::WriteFile(git + "/modules/libs/foo/HEAD", "ref: refs/heads/main\n");
  testing::WriteFile(git + "/worktrees/wt/HEAD", "abc\n");
  testing::WriteFile(git + "/worktrees/wt/commondir", "../..\n");
  ASSERT_EQ(::symlink("../elsewhere", (git + "/info").c_str()), 0);
  ::setenv("XDG_STATE_HOME", (d / "state").c_str(), 1);
  std::vector<GitViewMount> mounts;
  {
    GitViews views;
    auto dry = views.Prepare({git}, false);
    ASSERT_TRUE(dry) << dry.error().message;
    EXPECT_FALSE(testing::Exists(d / "state/cordon/views")) << "--plan writes nothing";
    auto made = views.Prepare({git}, true);
    ASSERT_TRUE(made) << made.error().message;
    mounts = *made;
    ASSERT_EQ(mounts.size(), 3u);  // .git, modules/libs/foo, worktrees/wt
    EXPECT_EQ(mounts[0].git_dir, git);
    EXPECT_EQ(mounts[1].git_dir, git + "/modules/libs/foo");
    EXPECT_EQ(mounts[2].git_dir, git + "/worktrees/wt");
    EXPECT_EQ(mounts[0].view_dir, (*dry)[0].view_dir) << "the plan names the view that runs";
    EXPECT_EQ(mounts[0].shared, (std::vector<std::string>{"objects"}));
    EXPECT_EQ(mounts[0].trees, (std::vector<std::string>{"refs"})) << "each ref is a copy";
    EXPECT_EQ(mounts[0].read_only,
              (std::vector<std::string>{"config", "hooks", "modules", "worktrees"}));
    EXPECT_EQ(mounts[0].copied, (std::vector<std::string>{"HEAD", "index"}));
    EXPECT_EQ(mounts[2].read_only, std::vector<std::string>{"commondir"});
    const std::string v = mounts[0].view_dir;
    struct stat st {};
    ASSERT_EQ(::stat(v.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_EQ(testing::ReadFile(v + "/index"), "INDEX1");
    EXPECT_TRUE(testing::Exists(v + "/config")) << "mount point";
    EXPECT_EQ(testing::ReadFile(v + "/config"), "");
    char buf[64] = {};
    ASSERT_GT(::readlink((v + "/info").c_str(), buf, sizeof buf - 1), 0);
    EXPECT_STREQ(buf, "../elsewhere");
    // What a sandbox does in the view: commit (index, HEAD), ORIG_HEAD, and forbidden names.
    testing::WriteFile(v + "/index.new", "INDEX2");
    ASSERT_EQ(::rename((v + "/index.new").c_str(), (v + "/index").c_str()), 0);
    testing::WriteFile(v + "/ORIG_HEAD", "deadbeef\n");
    testing::WriteFile(v + "/commondir", "/tmp/evil\n");
    testing::WriteFile(v + "/config.new", "[core]\n\tfsmonitor = touch /tmp/pwned\n");
    ASSERT_EQ(::symlink("/etc/shadow", (v + "/MERGE_HEAD").c_str()), 0);
    // Refs: the host's are copies in the view; a new branch below a new directory, a moved one,
    // and a symlink planted among them.
    EXPECT_EQ(testing::ReadFile(v + "/refs/heads/main"), std::string(40, '1') + "\n");
    std::filesystem::create_directories(v + "/refs/heads/topic");
    testing::WriteFile(v + "/refs/heads/topic/x", std::string(40, '2') + "\n");
    testing::WriteFile(v + "/refs/heads/main.new", std::string(40, '3') + "\n");
    ASSERT_EQ(::rename((v + "/refs/heads/main.new").c_str(), (v + "/refs/heads/main").c_str()), 0);
    ASSERT_EQ(::symlink("/etc/shadow", (v + "/refs/heads/evil").c_str()), 0);
    ASSERT_EQ(::symlink("/etc", (v + "/refs/tags").c_str()), 0);
    views.SyncOut();
    EXPECT_EQ(testing::ReadFile(git + "/refs/heads/topic/x"), std::string(40, '2') + "\n");
    EXPECT_EQ(testing::ReadFile(git + "/refs/heads/main"), std::string(40, '3') + "\n");
    EXPECT_FALSE(testing::Exists(git + "/refs/heads/evil")) << "a symlink is never followed";
    EXPECT_FALSE(testing::Exists(git + "/refs/tags")) << "nor one for a directory";
    EXPECT_EQ(testing::ReadFile(git + "/index"), "INDEX2");
    EXPECT_EQ(testing::ReadFile(git + "/ORIG_HEAD"), "deadbeef\n");
    EXPECT_FALSE(testing::Exists(git + "/commondir"));
    EXPECT_FALSE(testing::Exists(git + "/config.new"));
    EXPECT_FALSE(testing::Exists(git + "/MERGE_HEAD")) << "a symlink is never followed";
    EXPECT_EQ(testing::ReadFile(git + "/config"), "[core]\n");
    // Sync-in: the host moves HEAD; the view copy was unchanged, so it follows.
    testing::WriteFile(git + "/HEAD", "ref: refs/heads/other\n");
    ASSERT_TRUE(views.Prepare({git}, true));
    EXPECT_EQ(testing::ReadFile(v + "/HEAD"), "ref: refs/heads/other\n");
    // Deleted in the view (ORIG_HEAD, a branch): deleted on the host, which still had the
    // synced copy.
    ASSERT_EQ(::unlink((v + "/ORIG_HEAD").c_str()), 0);
    ASSERT_EQ(::unlink((v + "/refs/heads/topic/x").c_str()), 0);
    views.SyncOut();
    EXPECT_FALSE(testing::Exists(git + "/ORIG_HEAD"));
    EXPECT_FALSE(testing::Exists(git + "/refs/heads/topic/x"));
    // A ref the host deletes goes from the view at the next sync-in.
    ASSERT_EQ(::unlink((git + "/refs/heads/main").c_str()), 0);
    ASSERT_TRUE(views.Prepare({git}, true));
    EXPECT_FALSE(testing::Exists(v + "/refs/heads/main"));
    for (const auto& n : std::filesystem::directory_iterator(git)) {
      EXPECT_EQ(n.path().filename().string().rfind(".cordon-sync-", 0), std::string::npos);
    }
  }
  EXPECT_FALSE(testing::Exists(mounts[0].view_dir)) << "views go with the session";
  // A view directory of a cordon that is gone is removed by the next one.
  const std::string stale = d / "state/cordon/views/999999999-abc/1";
  std::filesystem::create_directories(stale);
  { GitViews next; }
  EXPECT_FALSE(testing::Exists(stale));
  ::unsetenv("XDG_STATE_HOME");
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
  EXPECT_FALSE(protects(".git/config")) << "missing: no placeholder (the sweep removes a new one)";
  EXPECT_TRUE(protects("third_party/lib/.git/hooks"));
  EXPECT_TRUE(protects("app/.vscode"));
  EXPECT_FALSE(protects(".mcp.json")) << "a missing name gets no placeholder";
  EXPECT_FALSE(protects(".git")) << "a .git dir stays writable (the git view decides inside)";
  EXPECT_EQ(scan->git_dirs,
            (std::vector<std::string>{d / "ws/.git", d / "ws/third_party/lib/.git"}));
  for (const char* pin :
       {".git", "third_party", "third_party/lib", "third_party/lib/.git", "app"}) {
    EXPECT_NE(std::find(scan->pins.begin(), scan->pins.end(), d / (std::string("ws/") + pin)),
              scan->pins.end())
        << pin;
  }
  // The ancestors of a viewed git directory are pinned by the plan.
  std::vector<GitViewMount> views = {{d / "ws/.git", "/v/1", {}, {}, {}, {}},
                                     {d / "ws/third_party/lib/.git", "/v/2", {}, {}, {}, {}}};
  EXPECT_EQ(GitViewPins(d / "ws", views),
            (std::vector<std::string>{d / "ws/third_party", d / "ws/third_party/lib"}));
  ASSERT_EQ(::symlink("/tmp", (d / "ws/.claude").c_str()), 0);
  auto bad = ScanProtectedPaths(d / "ws");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Code::kSandboxUnavailable);
}

TEST(ProtectedScan, AGitFileTargetInsideTheRootIsAGitDirAndItsConfigIsProtected) {
  testing::TempDir d;
  std::filesystem::create_directories(d / "ws/store/sub.git/hooks");
  testing::WriteFile(d / "ws/store/sub.git/config", "[core]\n");
  std::filesystem::create_directories(d / "ws/sub");
  testing::WriteFile(d / "ws/sub/.git", "gitdir: ../store/sub.git\n");
  auto scan = ScanProtectedPaths(d / "ws");
  ASSERT_TRUE(scan) << scan.error().message;
  EXPECT_EQ(scan->git_dirs, std::vector<std::string>{d / "ws/store/sub.git"});
  std::set<std::string> protect;
  for (const auto& p : scan->protect) protect.insert(p.path);
  EXPECT_TRUE(protect.count(d / "ws/sub/.git"));
  EXPECT_TRUE(protect.count(d / "ws/store/sub.git/config"));
  EXPECT_TRUE(protect.count(d / "ws/store/sub.git/hooks"));
}

TEST(ProtectedScan, TheWalkHasNoSilentBoundAndRefusesPastItsCap) {
  testing::TempDir d;
  std::filesystem::create_directories(d / "ws/big");
  for (int i = 0; i < 6000; ++i) testing::WriteFile(d / ("ws/big/f" + std::to_string(i)), "");
  std::filesystem::create_directories(d / "ws/1/2/3/4/5/6/7/8/node_modules/x/.git");
  auto scan = ScanProtectedPaths(d / "ws");
  ASSERT_TRUE(scan) << scan.error().message;
  EXPECT_EQ(scan->git_dirs, std::vector<std::string>{d / "ws/1/2/3/4/5/6/7/8/node_modules/x/.git"});
  EXPECT_GT(scan->scanned, 6000u);
  GuardOptions small;
  small.max_entries = 5000;
  auto refused = ScanProtectedPaths(d / "ws", small);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kSandboxUnavailable);
  EXPECT_NE(refused.error().message.find("sandbox.max_scan_entries"), std::string::npos);
}

TEST(WorkspaceGuard, SweepQuarantinesWhatAppearedKeepsTheBaselineAndStripsSetuid) {
  testing::TempDir d;
  const std::string ws = d / "ws";
  std::filesystem::create_directories(ws + "/.git/hooks");
  std::filesystem::create_directories(ws + "/.vscode");
  std::filesystem::create_directories(ws + "/old/.git");
  auto scan = ScanProtectedPaths(ws);
  ASSERT_TRUE(scan);
  std::vector<GuardEvent> events;
  WorkspaceGuard guard({ws}, {}, d / "q", [&](const GuardEvent& e) { events.push_back(e); });
  auto token = guard.BeforeLaunch();
  ASSERT_TRUE(token) << token.error().message;
  guard.Launched(*token, true, scan->protect, scan->git_dirs);
  // What a process makes meanwhile.
  std::filesystem::create_directories(ws + "/sub/.git/hooks");
  testing::WriteFile(ws + "/sub/.git/hooks/post-checkout", "evil");
  testing::WriteFile(ws + "/a/.envrc", "evil");
  ASSERT_EQ(::symlink("/etc", (ws + "/.idea").c_str()), 0);
  testing::WriteFile(ws + "/tool", "#!/bin/sh\n");
  ASSERT_EQ(::chmod((ws + "/tool").c_str(), 06755), 0);
  auto swept = guard.AfterProcess();
  EXPECT_TRUE(swept) << swept.error().message;
  EXPECT_FALSE(testing::Exists(ws + "/sub/.git"));
  EXPECT_FALSE(testing::Exists(ws + "/a/.envrc"));
  struct stat st {};
  EXPECT_NE(::lstat((ws + "/.idea").c_str(), &st), 0);
  EXPECT_EQ(testing::ReadFile(d / "q/sub/.git/hooks/post-checkout"), "evil");
  ASSERT_EQ(::lstat((d / "q/.idea").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "a symlink is moved, never followed";
  EXPECT_TRUE(testing::Exists("/etc/passwd"));
  // The baseline stays.
  EXPECT_TRUE(testing::Exists(ws + "/.git/hooks"));
  EXPECT_TRUE(testing::Exists(ws + "/.vscode"));
  EXPECT_TRUE(testing::Exists(ws + "/old/.git"));
  ASSERT_EQ(::stat((ws + "/tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  std::set<std::string> removed, stripped;
  for (const auto& e : events) {
    EXPECT_EQ(e.error, "") << e.path;
    EXPECT_EQ(e.when, "process_end");
    (e.kind == GuardEvent::Kind::kSetuidStripped ? stripped : removed).insert(e.path);
  }
  EXPECT_EQ(removed, (std::set<std::string>{ws + "/sub/.git", ws + "/a/.envrc", ws + "/.idea"}));
  EXPECT_EQ(stripped, std::set<std::string>{ws + "/tool"});
  // The same name again keeps both copies.
  testing::WriteFile(ws + "/a/.envrc", "again");
  EXPECT_TRUE(guard.Sweep("call_boundary"));
  EXPECT_EQ(testing::ReadFile(d / "q/a/.envrc.1"), "again");
}

TEST(WorkspaceGuard, MoveAcrossFilesystemsCopiesWithoutFollowingSymlinks) {
  testing::TempDir d;
  const std::string shm = "/dev/shm/cordon-guard-test-" + std::to_string(::getpid());
  struct stat a {
  }, b{};
  if (::stat("/dev/shm", &b) != 0 || ::stat(d.path().c_str(), &a) != 0 || a.st_dev == b.st_dev) {
    GTEST_SKIP() << "no second filesystem at /dev/shm to move across";
  }
  std::filesystem::create_directories(d / "ws/x/.vscode/inner");
  testing::WriteFile(d / "ws/x/.vscode/inner/f", "data");
  ASSERT_EQ(::symlink("/etc/passwd", (d / "ws/x/.vscode/link").c_str()), 0);
  auto st = MoveBeneath(d / "ws", d / "ws/x/.vscode", shm + "/q/x/.vscode");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_FALSE(testing::Exists(d / "ws/x/.vscode"));
  EXPECT_EQ(testing::ReadFile(shm + "/q/x/.vscode/inner/f"), "data");
  struct stat l {};
  ASSERT_EQ(::lstat((shm + "/q/x/.vscode/link").c_str(), &l), 0);
  EXPECT_TRUE(S_ISLNK(l.st_mode));
  std::filesystem::remove_all(shm);
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

// Facts made by hand: the plan is a function of them and of the request, with no host access.
HostFacts HandFacts() {
  HostFacts f;
  f.host.bwrap = "/usr/bin/bwrap";
  f.host.shim = "/opt/cordon/cordon-shim";
  f.host.landlock_abi = 7;
  f.host.cgroups.mode = CgroupMode::kV2;
  f.workspace = "/nonexistent-ws";
  f.home = "/nonexistent-home";
  f.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/tmp/home"}, {"TMPDIR", "/tmp"}};
  f.paths["/usr"] = {"/usr", PathKind::kDir, {}};
  f.paths["/bin"] = {"/bin", PathKind::kSymlink, "usr/bin"};
  f.paths["/etc/shadow"] = {"/etc/shadow", PathKind::kFile, {}};
  f.workspace_stat.emplace(0, 0755);
  f.euid = 0;
  ProtectedScan scan;
  scan.protect = {{"/nonexistent-ws/.git/hooks", PathKind::kDir}};
  scan.pins = {"/nonexistent-ws/.git"};
  scan.git_dirs = {"/nonexistent-ws/.git"};
  f.protected_scan = scan;
  f.cgroup = CgroupMode::kV2;
  return f;
}

Policy HandPolicy() {
  Policy p;
  p.filesystem.read = {"/usr", "/bin", "/lib-missing"};
  p.filesystem.write = {"${WORKSPACE}"};
  p.filesystem.deny = {"/etc/shadow"};
  return p;
}

TEST(PurePlan, FactsDecideEverythingAndTheCgroupFallbackIsInThePlan) {
  const Policy policy = HandPolicy();
  HostFacts facts = HandFacts();
  ProcessRequest req;
  req.argv = {"make", "test"};
  auto plan = BuildLaunchPlan(policy, facts, req);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->session.read.size(), 2u) << "a path the facts call missing is not bound";
  EXPECT_EQ(plan->session.git_dirs, std::vector<std::string>{"/nonexistent-ws/.git"});
  EXPECT_EQ(plan->call.cwd, "/nonexistent-ws");
  EXPECT_EQ(plan->call.contain.argv, req.argv);
  const auto has_nproc = [](const std::vector<RlimitSpec>& v) {
    return std::any_of(v.begin(), v.end(),
                       [](const auto& r) { return r.resource == RLIMIT_NPROC; });
  };
  EXPECT_FALSE(has_nproc(plan->call.contain.rlimits)) << "a cgroup limits the pids";
  Json conf = PlanConfinementJson(*plan);
  EXPECT_EQ(conf["cgroup"], "v2");
  EXPECT_FALSE(conf.contains("cgroup_error"));
  // The same facts give the same plan, byte for byte.
  auto again = BuildLaunchPlan(policy, facts, req);
  ASSERT_TRUE(again);
  EXPECT_EQ(PlanJson(*plan).dump(), PlanJson(*again).dump());

  // A cgroup that could not be had is a fact; the plan falls back to rlimits and says why.
  facts.cgroup = CgroupMode::kNone;
  facts.cgroup_error = "mkdir cgroup: Permission denied";
  auto fallback = BuildLaunchPlan(policy, facts, req);
  ASSERT_TRUE(fallback);
  EXPECT_TRUE(has_nproc(fallback->call.contain.rlimits));
  conf = PlanConfinementJson(*fallback);
  EXPECT_EQ(conf["cgroup"], "none");
  EXPECT_EQ(conf["cgroup_error"], "mkdir cgroup: Permission denied");
  EXPECT_EQ(conf["rlimits"], RlimitsJson(fallback->call.contain.rlimits));
}

TEST(PurePlan, PinnedMemoryIsBoundedByTheMemoryLimit) {
  const Policy policy = HandPolicy();
  HostFacts facts = HandFacts();
  ProcessRequest req;
  req.argv = {"true"};
  const std::int64_t limit = policy.LimitsFor("").memory_bytes;
  const auto has = [](const LaunchPlan& p, const char* call) {
    return HasRule(p.call.contain.seccomp, call);
  };
  auto with_cgroup = BuildLaunchPlan(policy, facts, req);
  ASSERT_TRUE(with_cgroup) << with_cgroup.error().message;
  EXPECT_NE(IndexOf(LaunchArgv(*with_cgroup), {"--size", std::to_string(limit), "--tmpfs", "/tmp"}),
            std::string::npos);
  EXPECT_EQ(with_cgroup->call.contain.ipc_shm_bytes, static_cast<std::uint64_t>(limit));
  EXPECT_FALSE(has(*with_cgroup, "memfd_create")) << "the cgroup charges memfd pages";
  EXPECT_FALSE(has(*with_cgroup, "shmget")) << "bwrap's IPC namespace holds the segments";
  facts.cgroup = CgroupMode::kNone;
  auto without = BuildLaunchPlan(policy, facts, req);
  ASSERT_TRUE(without);
  EXPECT_TRUE(has(*without, "memfd_create"));
  EXPECT_EQ(without->call.contain.ipc_shm_bytes, static_cast<std::uint64_t>(limit));
  // The weaker mode has no IPC namespace of its own: the host's sysctls are left alone and
  // shmget is refused (a segment there would outlive the call).
  facts.host.weaker = true;
  facts.host.bwrap.clear();
  auto weaker = BuildLaunchPlan(policy, facts, req);
  ASSERT_TRUE(weaker);
  EXPECT_EQ(weaker->call.contain.ipc_shm_bytes, 0u);
  EXPECT_TRUE(has(*weaker, "shmget"));
}

TEST(PurePlan, RefusalsComeFromTheFacts) {
  const Policy policy = HandPolicy();
  ProcessRequest req;
  req.argv = {"true"};
  HostFacts foreign = HandFacts();
  foreign.workspace_stat.emplace(1234, 0755);
  auto owner = BuildLaunchPlan(policy, foreign, req);
  ASSERT_FALSE(owner);
  EXPECT_EQ(owner.error().code, Code::kSandboxUnavailable);
  EXPECT_NE(owner.error().message.find("uid 1234"), std::string::npos) << owner.error().message;
  HostFacts symlinked = HandFacts();
  symlinked.protected_scan.reset();
  symlinked.protected_error = Error{Code::kSandboxUnavailable, "protected path .claude", 0, {}};
  auto scan = BuildLaunchPlan(policy, symlinked, req);
  ASSERT_FALSE(scan);
  EXPECT_EQ(scan.error().message, "protected path .claude");
  ProcessRequest none;
  EXPECT_EQ(BuildLaunchPlan(policy, HandFacts(), none).error().code, Code::kInvalidInput);
}

TEST(PurePlan, OwnFilesRootOnlyFilesAndDangerousWorkspacesComeFromTheFacts) {
  const Policy policy = HandPolicy();
  ProcessRequest req;
  req.argv = {"true"};
  HostFacts facts = HandFacts();
  // An existing own file in the workspace, a missing one the command could not create (below
  // /usr), and one nothing shows.
  facts.own = {{"/nonexistent-ws/home/.local/state/cordon", PathKind::kDir, {}},
               {"/usr/cordon-missing", PathKind::kMissing, {}},
               {"/elsewhere/audit.key", PathKind::kFile, {}},
               {"/nonexistent-ws/home/.local/state/cordon/trust.json", PathKind::kFile, {}}};
  auto scan = std::make_shared<RootOnlyScan>();
  scan->masked = {{"/usr/share/secret", PathKind::kFile, {}},
                  {"/etc/shadow", PathKind::kFile, {}},
                  {"/nonexistent-ws/home/.local/state/cordon/key", PathKind::kFile, {}}};
  facts.root_only = scan;
  auto plan = BuildLaunchPlan(policy, facts, req);
  ASSERT_TRUE(plan) << plan.error().message;
  std::vector<std::string> deny;
  for (const auto& d : plan->session.deny) deny.push_back(d.path);
  EXPECT_EQ(deny,
            (std::vector<std::string>{"/etc/shadow", "/nonexistent-ws/home/.local/state/cordon",
                                      "/usr/share/secret"}));
  EXPECT_EQ(plan->session.own_masked, 1u);
  EXPECT_EQ(plan->session.root_only_masked, 1u) << "/etc/shadow is denied already";
  // A missing own path the command could create (GatherHostFacts makes cordon's own
  // directories; this one it could not) refuses the launch: a mount point would appear on the
  // host, and leaving it open would let the command plant cordon's configuration.
  HostFacts open_facts = facts;
  open_facts.own.push_back({"/nonexistent-ws/home/.config", PathKind::kMissing, {}});
  auto open_refused = BuildLaunchPlan(policy, open_facts, req);
  ASSERT_FALSE(open_refused);
  EXPECT_EQ(open_refused.error().code, Code::kSandboxUnavailable);
  // Every directory between the writable root and a mask is pinned.
  for (const char* pin : {"/nonexistent-ws/home", "/nonexistent-ws/home/.local",
                          "/nonexistent-ws/home/.local/state"}) {
    EXPECT_NE(std::find(plan->session.pins.begin(), plan->session.pins.end(), pin),
              plan->session.pins.end())
        << pin;
  }
  const std::vector<std::string> argv = LaunchArgv(*plan);
  std::string joined;
  for (const auto& a : argv) joined += (joined.empty() ? "" : " ") + a;
  EXPECT_NE(joined.find("--ro-bind /dev/null /usr/share/secret"), std::string::npos) << joined;
  EXPECT_NE(joined.find("--tmpfs /nonexistent-ws/home/.local/state/cordon --remount-ro"),
            std::string::npos)
      << joined;
  Json conf = PlanConfinementJson(*plan);
  EXPECT_EQ(conf["masked_own_files"], 1);
  EXPECT_EQ(conf["masked_root_only"], 1);

  // A workspace inside cordon's own files is refused; so is $HOME, writable, without the flag.
  HostFacts inside = HandFacts();
  inside.own = {{"/nonexistent-ws", PathKind::kDir, {}}};
  auto refused = BuildLaunchPlan(policy, inside, req);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kDeniedByPolicy);
  HostFacts home = HandFacts();
  home.dangerous_workspace = "it is your home directory";
  auto danger = BuildLaunchPlan(policy, home, req);
  ASSERT_FALSE(danger);
  EXPECT_EQ(danger.error().code, Code::kDeniedByPolicy);
  EXPECT_NE(danger.error().message.find("--allow-dangerous-workspace"), std::string::npos);
  req.workspace_writable = false;
  EXPECT_TRUE(BuildLaunchPlan(policy, home, req)) << "read-only use still works";
  req.workspace_writable = true;
  Policy allowed = policy;
  allowed.allow_dangerous_workspace = true;
  EXPECT_TRUE(BuildLaunchPlan(allowed, home, req));
}

TEST(RootOnlyScan, FindsWhatOthersCannotReadAndSparesNamedPaths) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "open/sub");
  std::filesystem::create_directories(dir / "closed/inner");
  std::filesystem::create_directories(dir / "named-parent/ws");
  testing::WriteFile(dir / "open/ok.txt", "x");
  testing::WriteFile(dir / "open/sub/secret.txt", "x");
  testing::WriteFile(dir / "closed/inner/x.txt", "x");
  ::chmod((dir / "open/sub/secret.txt").c_str(), 0640);
  ::chmod((dir / "closed").c_str(), 0750);
  ::chmod((dir / "named-parent").c_str(), 0700);
  const auto scan = ScanRootOnly({dir.path()}, {dir.path(), dir / "named-parent/ws"});
  std::vector<std::string> masked;
  for (const auto& m : scan.masked) masked.push_back(m.path);
  EXPECT_EQ(masked, (std::vector<std::string>{dir / "closed", dir / "open/sub/secret.txt"}));
  EXPECT_GE(scan.scanned, 7u);
  RootOnlyCache cache;
  auto a = cache.Get({dir.path()}, {dir.path()});
  testing::WriteFile(dir / "open/later.txt", "x");
  ::chmod((dir / "open/later.txt").c_str(), 0600);
  auto b = cache.Get({dir.path()}, {dir.path()});
  EXPECT_EQ(a.get(), b.get()) << "one scan per session: a file made later is not covered";
}

// A read root holding a tree deeper than the scan walks: the scan says it could not finish (a
// launch is then refused, runner/plan.cc) instead of leaving what lies below unmasked, and a
// depth that once cost 32 KiB of stack per level cannot crash cordon.
TEST(RootOnlyScan, ATreeTooDeepToSearchIsNamedNotSkipped) {
  testing::TempDir dir;
  UniqueFd fd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (int i = 0; i < 400; ++i) {
    ASSERT_EQ(::mkdirat(fd.get(), "d", 0755), 0);
    fd = UniqueFd(::openat(fd.get(), "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
  }
  const int secret = ::openat(fd.get(), "secret", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(secret, 0);
  ::close(secret);
  const auto scan = ScanRootOnly({dir.path()}, {dir.path()});
  ASSERT_TRUE(scan.incomplete.has_value())
      << "a root-only file 400 directories down was neither masked nor named";
  EXPECT_EQ(scan.incomplete->code, Code::kTooLarge);
  EXPECT_EQ(scan.incomplete->where.rfind(dir.path() + "/d/d/", 0), 0u) << scan.incomplete->where;
  // The remedy the refusal names works: a denied directory is masked whole, not searched.
  const auto denied = ScanRootOnly({dir.path()}, {dir.path()}, {dir / "d/d/d"});
  EXPECT_FALSE(denied.incomplete.has_value()) << denied.incomplete->ToString();
  // A shallow tree beside it is still searched whole.
  testing::TempDir shallow;
  testing::WriteFile(shallow / "a/b/c.key", "k");
  ::chmod((shallow / "a/b/c.key").c_str(), 0600);
  const auto ok = ScanRootOnly({shallow.path()}, {shallow.path()});
  EXPECT_FALSE(ok.incomplete.has_value());
  ASSERT_EQ(ok.masked.size(), 1u);
  EXPECT_EQ(ok.masked[0].path, shallow / "a/b/c.key");
}

TEST(OwnPaths, CanonicalPathsAndDangerousWorkspaces) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "real");
  std::filesystem::create_symlink(dir / "real", dir / "link");
  EXPECT_EQ(CanonicalPath(dir / "link/missing/x"), CanonicalPath(dir / "real") + "/missing/x");
  EXPECT_TRUE(DangerousWorkspaceReason("/", "/home/u"));
  EXPECT_TRUE(DangerousWorkspaceReason("/home/u", "/home/u"));
  EXPECT_TRUE(DangerousWorkspaceReason("/", "/"));
  EXPECT_FALSE(DangerousWorkspaceReason("/home/u/project", "/home/u"));
  EXPECT_FALSE(DangerousWorkspaceReason("/home", "/home/u"));
}

TEST(PurePlan, WeakerModeTmpdirIsDecidedInThePlan) {
  const Policy policy = HandPolicy();
  HostFacts facts = HandFacts();
  facts.host.weaker = true;
  facts.host.bwrap.clear();
  facts.host.weaker_reason = "bwrap is not installed";
  facts.private_tmp = "/run/cordon-test/tmp-abcdef";
  facts.paths_except["/usr"] = {"/usr"};
  ProcessRequest req;
  req.argv = {"true"};
  auto plan = BuildLaunchPlan(policy, facts, req);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->call.private_tmp, facts.private_tmp);
  for (const auto& [k, v] : plan->call.env) {
    if (k == "TMPDIR" || k == "HOME") {
      EXPECT_EQ(v, facts.private_tmp) << k;
    }
  }
  ASSERT_TRUE(plan->call.contain.landlock);
  const auto& paths = plan->call.contain.landlock->paths;
  EXPECT_TRUE(std::any_of(paths.begin(), paths.end(),
                          [&](const auto& p) { return p.path == facts.private_tmp; }));
  EXPECT_EQ(LaunchArgv(*plan), (std::vector<std::string>{"/opt/cordon/cordon-shim", "--spec-fd",
                                                         "3", "--status-fd", "4"}));
  const auto env = LaunchEnv(*plan);
  EXPECT_NE(std::find(env.begin(), env.end(), "TMPDIR=" + facts.private_tmp), env.end());
  EXPECT_EQ(PlanConfinementJson(*plan)["weaker_reason"], "bwrap is not installed");
}

TEST(ShimHash, MatchesOpenSsl) {
  for (std::string text : {std::string(), std::string("abc"), std::string(55, 'x'),
                           std::string(56, 'y'), std::string(64, 'z'), std::string(1000, '\x80')}) {
    EXPECT_EQ(shim::Sha256Hex(text), Sha256Hex(text)) << text.size();
  }
}

// The named rule for names that differ from one launch to the next: the weaker mode's private
// directory (mkdtemp's six characters) and per-call cgroup directories (cordon-PID-N).
std::string MaskRandomNames(std::string s) {
  static const std::regex kTmp("/tmp-[A-Za-z0-9]{6}"), kCgroup("cordon-[0-9]+-[0-9]+");
  s = std::regex_replace(s, kTmp, "/tmp-XXXXXX");
  return std::regex_replace(s, kCgroup, "cordon-PID-N");
}

std::vector<std::string> SplitNul(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t z = s.find('\0'); z != std::string::npos; z = s.find('\0', start)) {
    out.push_back(s.substr(start, z - start));
    start = z + 1;
  }
  return out;
}

TEST(PlanMatchesRun, BwrapArgvEnvironmentAndShimSpecAreWhatThePlanSays) {
  const std::string real_bwrap = FindOnPath("bwrap");
  if (real_bwrap.empty()) GTEST_SKIP() << "SKIPPED: bwrap is not installed";
  testing::TempDir d;
  std::filesystem::create_directories(d / "ws");
  std::filesystem::create_directories(d / "bin");
  // cordon finds bwrap on PATH: a recording wrapper first on PATH logs the argv and the
  // environment it was given (as execve passed them), then runs the real bwrap.
  const std::string wrapper = d / "bin/bwrap";
  testing::WriteFile(wrapper,
                     "#!/bin/sh\n"
                     "printf '%s\\0' \"$0\" \"$@\" > '" +
                         d / "argv.log" +
                         "'\n"
                         "cat /proc/$$/environ > '" +
                         d / "env.log" +
                         "'\n"
                         "exec '" +
                         real_bwrap + "' \"$@\"\n");
  ::chmod(wrapper.c_str(), 0755);
  const char* path = std::getenv("PATH");
  const std::vector<std::string> env = {
      "PATH=" + (d / "bin") + ":" + (path != nullptr ? path : "/usr/bin:/bin"),
      "XDG_CONFIG_HOME=" + (d / "config"), "XDG_STATE_HOME=" + (d / "state")};
  const std::vector<std::string> cmd = {"sh", "-c", "echo planned"};
  std::vector<std::string> args = {testing::CordonBin(), "exec",   "--plan",
                                   "--workspace",        d / "ws", "--audit-log",
                                   d / "plan.jsonl",     "--"};
  args.insert(args.end(), cmd.begin(), cmd.end());
  auto planned = testing::Run(args, env);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  // The host probe may run bwrap once (`true`, to learn whether it works here); the planned
  // command never runs.
  if (testing::Exists(d / "argv.log")) {
    EXPECT_EQ(testing::ReadFile(d / "argv.log").find("echo planned"), std::string::npos)
        << "--plan started the command";
    std::filesystem::remove(d / "argv.log");
  }
  Json plan = Json::parse(planned.out);
  args.erase(args.begin() + 2);  // the same command line without --plan
  args[5] = d / "run.jsonl";
  auto ran = testing::Run(args, env);
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "planned\n");

  std::vector<std::string> want_argv, want_env, got_argv, got_env;
  for (const auto& a : plan["exec"]["argv"]) want_argv.push_back(MaskRandomNames(a));
  for (const auto& e : plan["exec"]["env"]) want_env.push_back(MaskRandomNames(e));
  for (const auto& a : SplitNul(testing::ReadFile(d / "argv.log")))
    got_argv.push_back(MaskRandomNames(a));
  for (const auto& e : SplitNul(testing::ReadFile(d / "env.log")))
    got_env.push_back(MaskRandomNames(e));
  ASSERT_FALSE(got_argv.empty()) << "the wrapper did not run";
  EXPECT_EQ(got_argv, want_argv);
  EXPECT_EQ(got_env, want_env);
  EXPECT_EQ(got_argv[0], wrapper) << "the plan names the bwrap that cordon found";

  // The shim hashed the spec it read; the plan hashed the spec it would write.
  const std::string log = testing::ReadFile(d / "run.jsonl");
  Json process;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t nl = log.find('\n', pos);
    Json rec = Json::parse(log.substr(pos, nl - pos));
    if (rec["type"] == "process") process = rec;
    pos = nl + 1;
  }
  ASSERT_TRUE(process.is_object()) << log;
  ASSERT_TRUE(process.contains("spec_sha256")) << process.dump();
  EXPECT_EQ(process["spec_sha256"], plan["spec_sha256"]);
  EXPECT_EQ(plan["spec_sha256"], Sha256Hex(plan["contain"].dump()));
  EXPECT_EQ(MaskRandomNames(process["confinement"].dump()),
            MaskRandomNames(plan["confinement"].dump()));
}

std::vector<int> OpenFds() {
  std::vector<int> fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    fds.push_back(std::atoi(e.path().filename().c_str()));
  }
  std::sort(fds.begin(), fds.end());
  return fds;
}

TEST(StartFds, RunningOutOfDescriptorsMidwayLeaksNone) {
#if defined(__SANITIZE_ADDRESS__)
  // UBSan's vptr check probes memory through a pipe(2); with the descriptor table deliberately
  // full that probe fails and every virtual call reads as "invalid vptr". The plain and Release
  // builds run this test.
  GTEST_SKIP() << "SKIPPED under sanitizers: the runtime needs free descriptors this test uses up";
#endif
  PolicySources sources;
  sources.dirs = {testing::ShippedPolicyDir()};
  auto policy = LoadPolicy(sources);
  ASSERT_TRUE(policy);
  auto host = PrepareSandboxHost(*policy, "");
  if (!host) GTEST_SKIP() << "SKIPPED: " << host.error().message;
  testing::TempDir ws;
  ProcessRequest req;
  req.argv = {"true"};
  LaunchResources acquired;
  auto facts = GatherHostFacts(*host, *policy, ws.path(), req, environ, &acquired);
  ASSERT_TRUE(facts) << facts.error().message;
  auto plan = BuildLaunchPlan(*policy, *facts, req);
  ASSERT_TRUE(plan) << plan.error().message;
  // Fill the holes in the fd table, so that RLIMIT_NOFILE decides exactly how many more opens
  // succeed; then let Start run out at every step in turn (stub lock, memfd, each pipe).
  std::vector<UniqueFd> fill;
  const std::vector<int> before_fill = OpenFds();
  while (true) {
    UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    const int n = fd.get();
    fill.push_back(std::move(fd));
    if (n > before_fill.back()) break;
  }
  const int next = fill.back().get() + 1;
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  int failures = 0;
  for (int extra = 0; extra < 16; ++extra) {
    const std::vector<int> before = OpenFds();
    struct rlimit low = old;
    low.rlim_cur = static_cast<rlim_t>(next + extra);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    auto proc = ConfinedProcess::Start(*plan, LaunchResources{}, req);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
    if (proc) {
      (*proc)->Run(nullptr);
      break;
    }
    ++failures;
    EXPECT_EQ(OpenFds(), before) << "a failed Start at limit +" << extra << " ("
                                 << proc.error().message << ") left descriptors open";
  }
  EXPECT_GE(failures, 5) << "the limit did not make the pipes fail";
}

template <typename E, std::size_t N>
void ExpectTableCovers(const EnumName<E> (&table)[N], std::initializer_list<E> all,
                       const char* what) {
  EXPECT_EQ(N, all.size()) << what;
  for (E v : all) {
    const std::string_view name = Name(table, v);
    EXPECT_NE(name, "?") << what;
    auto back = ParseName(table, name, what);
    ASSERT_TRUE(back) << what;
    EXPECT_EQ(*back, v) << what;
  }
  EXPECT_EQ(ParseName(table, "nonsense", what).error().code, Code::kInvalidInput);
}

TEST(EnumTables, StatusKindAndCgroupModeNameEveryValue) {
  ExpectTableCovers(kProcessStatusNames,
                    {ProcessStatus::kRunning, ProcessStatus::kExited, ProcessStatus::kSignaled,
                     ProcessStatus::kTimeout, ProcessStatus::kCancelled, ProcessStatus::kFailed},
                    "process status");
  ExpectTableCovers(kProcessKindNames,
                    {ProcessKind::kForeground, ProcessKind::kBackground, ProcessKind::kMcpServer},
                    "process kind");
  ExpectTableCovers(kCgroupModeNames, {CgroupMode::kNone, CgroupMode::kV1, CgroupMode::kV2},
                    "cgroup mode");
  // The names the records have always used.
  EXPECT_EQ(StatusName(ProcessStatus::kTimeout), "timeout");
  EXPECT_EQ(Name(kProcessKindNames, ProcessKind::kMcpServer), "mcp_server");
}

}  // namespace
}  // namespace cordon
