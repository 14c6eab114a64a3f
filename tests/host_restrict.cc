// cordon-test-restrict: builds, for one program, the restricted hosts cordon must handle (a
// container's seccomp profile and masked /proc, no user namespaces, clone3 refused), then execs
// it. Nothing outside this process tree changes: each restriction lives in new namespaces or in
// filters only this process and its children carry. Exit 125: a restriction could not be made.
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <expected>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

// What failed: the restriction's flag, the step, and the errno (0: not a system call).
struct SetupError {
  std::string restriction;
  std::string step;
  int err = 0;
};
using Status = std::expected<void, SetupError>;

std::unexpected<SetupError> Fail(std::string restriction, std::string step, int err) {
  return std::unexpected(SetupError{std::move(restriction), std::move(step), err});
}

// ---- The profile as Docker 20.10 filters it (profiles/seccomp/seccomp_linux.go) ----

// Docker's default capability set (oci/caps/defaults.go): the bounding set includes/excludes
// are decided against. CAP_SYS_ADMIN is not in it.
const std::vector<std::string> kDockerDefaultCaps = {
    "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",
    "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",           "CAP_SETUID",
    "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
    "CAP_KILL",    "CAP_AUDIT_WRITE"};

struct Arg {
  unsigned index = 0;
  std::uint64_t value = 0;
  std::uint64_t value_two = 0;
  scmp_compare op = SCMP_CMP_EQ;
};

struct Rule {
  std::vector<std::string> names;
  std::uint32_t action = SCMP_ACT_ALLOW;
  std::vector<Arg> args;
};

struct Filter {
  std::uint32_t default_action = SCMP_ACT_ALLOW;
  std::vector<std::uint32_t> arches;  // libseccomp tokens; empty: native only, and no stub
  std::vector<Rule> rules;
};

// The kernel's "major.minor" compared as Docker's kernelGreaterEqualThan does.
std::pair<int, int> KernelVersion() {
  utsname u{};
  ::uname(&u);
  int major = 0, minor = 0;
  std::sscanf(u.release, "%d.%d", &major, &minor);
  return {major, minor};
}

bool KernelAtLeast(const std::string& v) {
  int major = 0, minor = 0;
  std::sscanf(v.c_str(), "%d.%d", &major, &minor);
  return KernelVersion() >= std::pair{major, minor};
}

std::optional<std::uint32_t> ArchToken(const std::string& name) {
  static const std::map<std::string, std::uint32_t> kArches = {
      {"SCMP_ARCH_X86_64", SCMP_ARCH_X86_64},
      {"SCMP_ARCH_X86", SCMP_ARCH_X86},
      {"SCMP_ARCH_X32", SCMP_ARCH_X32},
      {"SCMP_ARCH_AARCH64", SCMP_ARCH_AARCH64},
      {"SCMP_ARCH_ARM", SCMP_ARCH_ARM}};
  auto it = kArches.find(name);
  if (it == kArches.end()) return std::nullopt;
  return it->second;
}

// runc's getAction: ERRNO and TRACE take errnoRet, EPERM when it is absent.
std::expected<std::uint32_t, std::string> Action(const std::string& name,
                                                 std::optional<unsigned> errno_ret) {
  const unsigned e = errno_ret.value_or(EPERM);
  if (name == "SCMP_ACT_ALLOW") return SCMP_ACT_ALLOW;
  if (name == "SCMP_ACT_ERRNO") return SCMP_ACT_ERRNO(e);
  if (name == "SCMP_ACT_TRACE") return SCMP_ACT_TRACE(e);
  if (name == "SCMP_ACT_KILL" || name == "SCMP_ACT_KILL_THREAD") return SCMP_ACT_KILL;
  if (name == "SCMP_ACT_KILL_PROCESS") return SCMP_ACT_KILL_PROCESS;
  if (name == "SCMP_ACT_TRAP") return SCMP_ACT_TRAP;
  if (name == "SCMP_ACT_LOG") return SCMP_ACT_LOG;
  return std::unexpected("unsupported action " + name);
}

std::expected<scmp_compare, std::string> Compare(const std::string& op) {
  static const std::map<std::string, scmp_compare> kOps = {
      {"SCMP_CMP_NE", SCMP_CMP_NE},
      {"SCMP_CMP_LT", SCMP_CMP_LT},
      {"SCMP_CMP_LE", SCMP_CMP_LE},
      {"SCMP_CMP_EQ", SCMP_CMP_EQ},
      {"SCMP_CMP_GE", SCMP_CMP_GE},
      {"SCMP_CMP_GT", SCMP_CMP_GT},
      {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};
  auto it = kOps.find(op);
  if (it == kOps.end()) return std::unexpected("unsupported op " + op);
  return it->second;
}

bool In(const json& list, const std::string& s) {
  if (!list.is_array()) return false;
  return std::any_of(list.begin(), list.end(),
                     [&](const json& v) { return v.is_string() && v.get<std::string>() == s; });
}

// Docker's setupSeccomp for a native amd64 daemon and a process with `caps` in its bounding
// set: the archMap entry for SCMP_ARCH_X86_64 with its sub-architectures, and each block kept
// or dropped by its includes/excludes (arches are Go names: amd64, x32, x86).
std::expected<Filter, std::string> FilterFromProfile(const json& p,
                                                     const std::vector<std::string>& caps) {
  const std::string native_go = "amd64";
  const std::string native_scmp = "SCMP_ARCH_X86_64";
  Filter f;
  if (p.contains("architectures") && !p["architectures"].empty() && p.contains("archMap") &&
      !p["archMap"].empty())
    return std::unexpected("'architectures' and 'archMap' were both specified");
  std::vector<std::string> arches;
  for (const auto& a : p.value("architectures", json::array())) arches.push_back(a);
  for (const auto& m : p.value("archMap", json::array())) {
    if (m.value("architecture", "") != native_scmp) continue;
    arches.push_back(native_scmp);
    for (const auto& s : m.value("subArchitectures", json::array())) arches.push_back(s);
    break;
  }
  for (const auto& a : arches) {
    auto t = ArchToken(a);
    if (!t) return std::unexpected("unsupported architecture " + a);
    f.arches.push_back(*t);
  }
  std::optional<unsigned> default_errno;
  if (p.contains("defaultErrnoRet")) default_errno = p["defaultErrnoRet"].get<unsigned>();
  auto def = Action(p.value("defaultAction", ""), default_errno);
  if (!def) return std::unexpected(def.error());
  f.default_action = *def;

  const auto has_cap = [&](const std::string& c) {
    return std::find(caps.begin(), caps.end(), c) != caps.end();
  };
  for (const auto& call : p.value("syscalls", json::array())) {
    const json inc = call.value("includes", json::object());
    const json exc = call.value("excludes", json::object());
    if (In(exc.value("arches", json::array()), native_go)) continue;
    const json exc_caps = exc.value("caps", json::array());
    if (std::any_of(exc_caps.begin(), exc_caps.end(), [&](const json& c) { return has_cap(c); }))
      continue;
    if (exc.contains("minKernel") && KernelAtLeast(exc["minKernel"])) continue;
    if (inc.contains("arches") && !inc["arches"].empty() && !In(inc["arches"], native_go)) continue;
    const json inc_caps = inc.value("caps", json::array());
    if (!std::all_of(inc_caps.begin(), inc_caps.end(), [&](const json& c) { return has_cap(c); }))
      continue;
    if (inc.contains("minKernel") && !KernelAtLeast(inc["minKernel"])) continue;

    Rule r;
    if (call.contains("name") && call.contains("names"))
      return std::unexpected("'name' and 'names' were both specified");
    if (call.contains("name")) r.names.push_back(call["name"]);
    for (const auto& n : call.value("names", json::array())) r.names.push_back(n);
    std::optional<unsigned> errno_ret;
    if (call.contains("errnoRet")) errno_ret = call["errnoRet"].get<unsigned>();
    auto act = Action(call.value("action", ""), errno_ret);
    if (!act) return std::unexpected(act.error());
    r.action = *act;
    const json args =
        call.contains("args") && call["args"].is_array() ? call["args"] : json::array();
    for (const auto& a : args) {
      auto op = Compare(a.value("op", ""));
      if (!op) return std::unexpected(op.error());
      r.args.push_back({a.value("index", 0u), a.value("value", std::uint64_t{0}),
                        a.value("valueTwo", std::uint64_t{0}), *op});
    }
    f.rules.push_back(std::move(r));
  }
  return f;
}

// ---- Installing it as runc 1.1 does (libcontainer/seccomp, patchbpf) ----

// runc's patchbpf: per architecture of the filter, a syscall numbered above the largest one the
// profile names answers ENOSYS instead of the default action, so that a libc probing a newer
// call (clone3, landlock_*, ...) falls back. The stub runs before libseccomp's program.
std::vector<sock_filter> EnosysStub(const Filter& f) {
  std::map<std::uint32_t, long> last;  // libseccomp arch token -> largest syscall number
  for (std::uint32_t arch : f.arches)
    for (const auto& r : f.rules)
      for (const auto& n : r.names) {
        const int nr = seccomp_syscall_resolve_name_arch(arch, n.c_str());
        if (nr >= 0) last[arch] = std::max(last[arch], static_cast<long>(nr));
      }
  // Instructions with absolute targets; resolved to relative offsets at the end.
  struct Ins {
    std::uint16_t code;
    std::uint32_t k;
    int jt = -1, jf = -1;  // absolute targets; -1: next
  };
  std::vector<Ins> ins;
  constexpr int kEnosys = -2, kOriginal = -3;
  const auto section = [&](std::uint32_t audit_arch, std::vector<std::pair<bool, long>> cmps) {
    // ld arch; jeq audit_arch ? section : next section (patched below)
    ins.push_back({BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)});
    const std::size_t jeq = ins.size();
    ins.push_back({BPF_JMP | BPF_JEQ | BPF_K, audit_arch});
    ins.push_back({BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)});
    if (cmps.size() == 2) {
      // x86_64 and x32 share AUDIT_ARCH_X86_64; x32 numbers carry bit 30.
      ins.push_back({BPF_JMP | BPF_JSET | BPF_K, 0x40000000u});
      const std::size_t jset = ins.size() - 1;
      ins.push_back({BPF_JMP | BPF_JGT | BPF_K, static_cast<std::uint32_t>(cmps[1].second), kEnosys,
                     kOriginal});
      ins[jset].jf = static_cast<int>(ins.size());
      ins[jset].jt = static_cast<int>(ins.size()) - 1;
      ins.push_back({BPF_JMP | BPF_JGT | BPF_K, static_cast<std::uint32_t>(cmps[0].second), kEnosys,
                     kOriginal});
    } else {
      ins.push_back({BPF_JMP | BPF_JGT | BPF_K, static_cast<std::uint32_t>(cmps[0].second), kEnosys,
                     kOriginal});
    }
    ins[jeq].jf = static_cast<int>(ins.size());
  };
  if (last.contains(SCMP_ARCH_X86_64) || last.contains(SCMP_ARCH_X32)) {
    std::vector<std::pair<bool, long>> cmps;
    // Without an x86_64 bound (a profile for x32 alone) no x86_64 number answers ENOSYS.
    cmps.push_back({false, last.contains(SCMP_ARCH_X86_64) ? last[SCMP_ARCH_X86_64] : 0xffffffffL});
    if (last.contains(SCMP_ARCH_X32)) cmps.push_back({true, last[SCMP_ARCH_X32]});
    section(AUDIT_ARCH_X86_64, cmps);
  }
  if (last.contains(SCMP_ARCH_X86)) section(AUDIT_ARCH_I386, {{false, last[SCMP_ARCH_X86]}});
  if (ins.empty()) return {};
  // The last section's miss lands here: jump over the ENOSYS return into libseccomp's program.
  const int original_jump = static_cast<int>(ins.size());
  ins.push_back({BPF_JMP | BPF_JA, 1});
  const int enosys = static_cast<int>(ins.size());
  ins.push_back({BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)});
  std::vector<sock_filter> out;
  for (int i = 0; i < static_cast<int>(ins.size()); ++i) {
    const auto rel = [&](int target) -> std::uint8_t {
      if (target == -1) return 0;
      if (target == kEnosys) target = enosys;
      if (target == kOriginal) target = original_jump;
      return static_cast<std::uint8_t>(target - (i + 1));
    };
    const bool conditional = BPF_CLASS(ins[i].code) == BPF_JMP && BPF_OP(ins[i].code) != BPF_JA;
    out.push_back({ins[i].code, conditional ? rel(ins[i].jt) : std::uint8_t{0},
                   conditional ? rel(ins[i].jf) : std::uint8_t{0}, ins[i].k});
  }
  return out;
}

std::expected<std::vector<sock_filter>, SetupError> Compile(const Filter& f,
                                                            const std::string& flag) {
  scmp_filter_ctx ctx = seccomp_init(f.default_action);
  if (ctx == nullptr) return Fail(flag, "seccomp_init", EINVAL);
  struct Release {
    scmp_filter_ctx c;
    ~Release() { seccomp_release(c); }
  } release{ctx};
  // no_new_privs is set by main, before any filter, as runc leaves it to the runtime.
  if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0); rc != 0)
    return Fail(flag, "seccomp_attr_set NNP", -rc);
  for (std::uint32_t arch : f.arches) {
    if (seccomp_arch_exist(ctx, arch) == 0) continue;
    if (int rc = seccomp_arch_add(ctx, arch); rc != 0) return Fail(flag, "seccomp_arch_add", -rc);
  }
  for (const auto& r : f.rules) {
    // libseccomp refuses a rule with the default action; runc skips it too.
    if (r.action == f.default_action) continue;
    for (const auto& name : r.names) {
      const int nr = seccomp_syscall_resolve_name(name.c_str());
      if (nr == __NR_SCMP_ERROR) continue;  // unknown to this libseccomp: runc skips it
      std::vector<scmp_arg_cmp> conds;
      std::map<unsigned, int> per_index;
      for (const auto& a : r.args) {
        conds.push_back({a.index, a.op, a.value, a.op == SCMP_CMP_MASKED_EQ ? a.value_two : 0});
        ++per_index[a.index];
      }
      const bool repeated = std::any_of(per_index.begin(), per_index.end(),
                                        [](const auto& kv) { return kv.second > 1; });
      int rc = 0;
      if (conds.empty()) {
        rc = seccomp_rule_add_array(ctx, r.action, nr, 0, nullptr);
      } else if (repeated) {
        // runc's "old behaviour": two conditions on one argument become one rule each.
        for (const auto& c : conds)
          if ((rc = seccomp_rule_add_array(ctx, r.action, nr, 1, &c)) != 0) break;
      } else {
        rc = seccomp_rule_add_array(ctx, r.action, nr, static_cast<unsigned>(conds.size()),
                                    conds.data());
      }
      if (rc != 0) return Fail(flag, "seccomp_rule_add " + name, -rc);
    }
  }
  const int mfd = ::memfd_create("seccomp-bpf", MFD_CLOEXEC);
  if (mfd < 0) return Fail(flag, "memfd_create", errno);
  struct CloseFd {
    int fd;
    ~CloseFd() { ::close(fd); }
  } close_mfd{mfd};
  if (int rc = seccomp_export_bpf(ctx, mfd); rc != 0) return Fail(flag, "seccomp_export_bpf", -rc);
  struct stat st {};
  if (::fstat(mfd, &st) != 0) return Fail(flag, "fstat", errno);
  std::vector<sock_filter> prog = EnosysStub(f);
  const std::size_t stub = prog.size();
  prog.resize(stub + static_cast<std::size_t>(st.st_size) / sizeof(sock_filter));
  if (::pread(mfd, prog.data() + stub, static_cast<std::size_t>(st.st_size), 0) != st.st_size)
    return Fail(flag, "read exported filter", errno);
  return prog;
}

Status Load(const std::vector<sock_filter>& prog, const std::string& flag) {
  sock_fprog fprog{static_cast<unsigned short>(prog.size()), const_cast<sock_filter*>(prog.data())};
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0)
    return Fail(flag, "prctl(PR_SET_SECCOMP)", errno);
  return {};
}

Status ApplyProfile(const std::string& path) {
  const std::string flag = "--seccomp-profile";
  std::ifstream in(path);
  if (!in) return Fail(flag, "open " + path, errno);
  json p = json::parse(in, nullptr, false);
  if (p.is_discarded()) return Fail(flag, path + ": not JSON", 0);
  auto f = FilterFromProfile(p, kDockerDefaultCaps);
  if (!f) return Fail(flag, path + ": " + f.error(), 0);
  auto prog = Compile(*f, flag);
  if (!prog) return std::unexpected(prog.error());
  return Load(*prog, flag);
}

Status ApplyClone3Enosys() {
  Filter f;
  f.default_action = SCMP_ACT_ALLOW;
  f.rules.push_back({{"clone3"}, SCMP_ACT_ERRNO(ENOSYS), {}});
  auto prog = Compile(f, "--clone3-enosys");
  if (!prog) return std::unexpected(prog.error());
  return Load(*prog, "--clone3-enosys");
}

// ---- Namespaces ----

bool WriteFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

// Root's identity map over every id: only a process in the parent namespace may write a map
// of more than one id, so a child that stayed there writes it once this process has unshared.
Status UnshareWithFullMap(int flags, const std::string& flag, const char* what) {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return Fail(flag, "pipe2", errno);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) return Fail(flag, "fork", errno);
  if (child == 0) {
    ::close(go[1]);
    char c = 0;
    if (::read(go[0], &c, 1) != 1) ::_exit(0);  // the parent could not unshare: nothing to map
    const std::string dir = "/proc/" + std::to_string(parent);
    if (!WriteFile(dir + "/uid_map", "0 0 4294967295\n")) ::_exit(1);
    if (!WriteFile(dir + "/gid_map", "0 0 4294967295\n")) ::_exit(2);
    ::_exit(0);
  }
  ::close(go[0]);
  const int unshared = ::unshare(flags);
  const int saved = errno;
  if (unshared == 0) (void)!::write(go[1], "x", 1);
  ::close(go[1]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (unshared != 0) return Fail(flag, what, saved);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Fail(flag,
                WEXITSTATUS(status) == 2 ? "write gid_map from the parent namespace"
                                         : "write uid_map from the parent namespace",
                EPERM);
  return {};
}

// A user namespace in which this process keeps its own ids: root maps every id to itself (so
// files keep their owners), an ordinary user maps only its own uid and gid, from inside. After
// execve, an ordinary uid has no capabilities in it.
Status EnterUserNamespace(int extra_flags, const std::string& flag) {
  const char* what = extra_flags ? "unshare(CLONE_NEWUSER|CLONE_NEWNS)" : "unshare(CLONE_NEWUSER)";
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (uid == 0) return UnshareWithFullMap(CLONE_NEWUSER | extra_flags, flag, what);
  if (::unshare(CLONE_NEWUSER | extra_flags) != 0) return Fail(flag, what, errno);
  if (!WriteFile("/proc/self/setgroups", "deny"))
    return Fail(flag, "write /proc/self/setgroups", errno);
  if (!WriteFile("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n"))
    return Fail(flag, "write /proc/self/uid_map", errno);
  if (!WriteFile("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n"))
    return Fail(flag, "write /proc/self/gid_map", errno);
  return {};
}

bool Exists(const char* path, bool* is_dir) {
  struct stat st {};
  if (::lstat(path, &st) != 0) return false;
  *is_dir = S_ISDIR(st.st_mode);
  return true;
}

// runc's maskPath and readonlyPath over Docker's defaults (oci/defaults.go): a read-only tmpfs
// on each masked directory, /dev/null on each masked file, and the read-only /proc paths.
Status MaskProc() {
  const std::string flag = "--masked-proc";
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return Fail(flag, "mount --make-rprivate /", errno);
  int masked = 0;
  for (const char* p : {"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys",
                        "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                        "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}) {
    bool dir = false;
    if (!Exists(p, &dir)) continue;
    if (dir) {
      if (::mount("tmpfs", p, "tmpfs", MS_RDONLY, nullptr) != 0)
        return Fail(flag, std::string("mount read-only tmpfs on ") + p, errno);
    } else if (::mount("/dev/null", p, nullptr, MS_BIND, nullptr) != 0) {
      return Fail(flag, std::string("bind /dev/null on ") + p, errno);
    }
    ++masked;
  }
  if (masked == 0) return Fail(flag, "none of Docker's masked /proc paths exists here", 0);
  for (const char* p : {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}) {
    bool dir = false;
    if (!Exists(p, &dir)) continue;
    if (::mount(p, p, nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
        ::mount(p, p, nullptr, MS_BIND | MS_REC | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
      return Fail(flag, std::string("bind read-only ") + p, errno);
  }
  return {};
}

Status DenyUserNamespaces() {
  // Counted per user namespace: 0 here forbids a nested one, and the host's value is untouched.
  if (!WriteFile("/proc/sys/user/max_user_namespaces", "0"))
    return Fail("--no-userns", "write 0 to /proc/sys/user/max_user_namespaces", errno);
  return {};
}

struct Options {
  std::string profile;
  bool masked_proc = false;
  bool no_userns = false;
  bool clone3_enosys = false;
  char** argv = nullptr;
};

constexpr const char* kUsage =
    "usage: cordon-test-restrict [--seccomp-profile FILE.json] [--masked-proc] [--no-userns]\n"
    "                            [--clone3-enosys] -- PROGRAM ARGS...\n";

std::optional<Options> Parse(int argc, char** argv) {
  Options o;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--seccomp-profile" && i + 1 < argc) {
      o.profile = argv[++i];
    } else if (a == "--masked-proc") {
      o.masked_proc = true;
    } else if (a == "--no-userns") {
      o.no_userns = true;
    } else if (a == "--clone3-enosys") {
      o.clone3_enosys = true;
    } else {
      return std::nullopt;
    }
  }
  if (i >= argc) return std::nullopt;
  o.argv = argv + i;
  return o;
}

// The restrictions in the order they can be made: namespaces while this process still holds
// the capabilities its new user namespace gave it, then no_new_privs, then the filters, last
// (a filter could refuse the calls the earlier steps make).
Status Restrict(const Options& o) {
  const bool root = ::geteuid() == 0;
  const bool userns = o.no_userns || (o.masked_proc && !root);
  if (userns) {
    const std::string flag = o.no_userns ? "--no-userns" : "--masked-proc";
    if (auto s = EnterUserNamespace(o.masked_proc ? CLONE_NEWNS : 0, flag); !s) return s;
  } else if (o.masked_proc && ::unshare(CLONE_NEWNS) != 0) {
    return Fail("--masked-proc", "unshare(CLONE_NEWNS)", errno);
  }
  if (o.no_userns)
    if (auto s = DenyUserNamespaces(); !s) return s;
  if (o.masked_proc)
    if (auto s = MaskProc(); !s) return s;
  if (!o.profile.empty() || o.clone3_enosys) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      return Fail(o.profile.empty() ? "--clone3-enosys" : "--seccomp-profile",
                  "prctl(PR_SET_NO_NEW_PRIVS)", errno);
  }
  if (!o.profile.empty())
    if (auto s = ApplyProfile(o.profile); !s) return s;
  if (o.clone3_enosys)
    if (auto s = ApplyClone3Enosys(); !s) return s;
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> o = Parse(argc, argv);
  if (!o) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (auto s = Restrict(*o); !s) {
    const SetupError& e = s.error();
    if (e.err != 0)
      std::fprintf(stderr, "cordon-test-restrict: cannot set up %s: %s: %s (errno %d)\n",
                   e.restriction.c_str(), e.step.c_str(), std::strerror(e.err), e.err);
    else
      std::fprintf(stderr, "cordon-test-restrict: cannot set up %s: %s\n", e.restriction.c_str(),
                   e.step.c_str());
    return 125;
  }
  ::execvp(o->argv[0], o->argv);
  std::fprintf(stderr, "cordon-test-restrict: execvp %s: %s (errno %d)\n", o->argv[0],
               std::strerror(errno), errno);
  return 127;
}
