// Seccomp rules as data. The plain deny list comes from policy ([seccomp] deny); the rules that
// look at arguments are here, each with the reason it exists.
#include "runner/seccomp.h"

#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"

namespace cordon {

namespace {

// Syscalls newer than libseccomp 2.5.4's table. From 424 on, every architecture but alpha, ia64
// and the mips ABIs shares one number, so x86_64 and aarch64 use the same column.
struct SyscallNumber {
  const char* name;
  int number;
};
constexpr SyscallNumber kFallbackNumbers[] = {
    {"io_uring_setup", 425}, {"io_uring_enter", 426}, {"io_uring_register", 427}, {"clone3", 435},
    {"openat2", 437},        {"memfd_secret", 447},   {"fchmodat2", 452},
};

// The calls that take a file mode in a register, and which argument holds it. For open and
// openat the mode matters only with O_CREAT or O_TMPFILE; glibc and musl pass 0 otherwise.
struct ModeArgument {
  const char* syscall;
  unsigned index;
};
constexpr ModeArgument kModeArguments[] = {
    {"chmod", 1}, {"fchmod", 1},  {"fchmodat", 2}, {"fchmodat2", 2}, {"mknod", 1}, {"mknodat", 2},
    {"mkdir", 1}, {"mkdirat", 2}, {"open", 2},     {"openat", 3},    {"creat", 1},
};

}  // namespace

int FallbackSyscallNumber(const std::string& name) {
#if defined(__x86_64__) || defined(__aarch64__)
  for (const auto& s : kFallbackNumbers) {
    if (name == s.name) return s.number;
  }
#endif
  (void)name;
  return -1;
}

std::vector<SeccompRule> BuildSeccompRules(const std::vector<std::string>& plain_denies,
                                           NetworkMode network, SeccompMemory memory) {
  std::vector<SeccompRule> rules;
  for (const auto& name : plain_denies) {
    rules.push_back({name, EPERM, {}, "listed in [seccomp] deny"});
  }
  auto denied_plainly = [&](const char* name) {
    return std::find(plain_denies.begin(), plain_denies.end(), name) != plain_denies.end();
  };
  // A set-user-ID or set-group-ID file in a writable root outlives the sandbox, and nosuid on
  // the sandbox's mounts does not travel with it: a host user who runs it later becomes its
  // owner (root, when cordon runs as root). Every call that carries a mode in a register is
  // refused when the mode has either bit, for files and directories alike (issue 9).
  for (const auto& m : kModeArguments) {
    if (denied_plainly(m.syscall)) continue;  // already refused whatever the mode
    for (std::uint64_t bit : {std::uint64_t{S_ISUID}, std::uint64_t{S_ISGID}}) {
      rules.push_back(
          {m.syscall,
           EPERM,
           {{m.index, SeccompArg::Op::kMaskedEq, bit, bit}},
           bit == S_ISUID ? "mode with the set-user-ID bit" : "mode with the set-group-ID bit"});
    }
  }
  // openat2 passes its mode inside struct open_how, which seccomp cannot read; ENOSYS makes
  // callers fall back to openat, whose mode the rules above see.
  if (!denied_plainly("openat2")) {
    rules.push_back(
        {"openat2", ENOSYS, {}, "mode unreadable by seccomp; callers fall back to openat"});
  }
  // io_uring performs opens (with a mode), and much else, without passing through this filter.
  // The shipped policy denies it too; here it stays denied whatever a policy layer removes.
  for (const char* ring : {"io_uring_setup", "io_uring_enter", "io_uring_register"}) {
    if (!denied_plainly(ring)) {
      rules.push_back({ring, EPERM, {}, "io_uring does I/O this filter never sees"});
    }
  }
  // Without a memory cgroup the memory limit is RLIMIT_DATA, which counts private writable
  // mappings only: a shared anonymous mapping is shmem no limit counts. ENOMEM, what a mapping
  // past the limit answers; programs that share memory between processes use a file in $TMPDIR
  // (the bounded /tmp) instead, as multiprocessing does.
  if (!memory.cgroup && !denied_plainly("mmap")) {
    constexpr std::uint64_t kSharedAnon = MAP_SHARED | MAP_ANONYMOUS;  // MAP_SHARED_VALIDATE too
    rules.push_back({"mmap",
                     ENOMEM,
                     {{3, SeccompArg::Op::kMaskedEq, kSharedAnon, kSharedAnon}},
                     "shared anonymous memory without a memory cgroup: RLIMIT_DATA skips it"});
  }
  // Without a memory cgroup nothing counts the pages of a memfd: they are not in the private
  // /tmp (sized to the memory limit), not in RLIMIT_DATA (a shared mapping), and RLIMIT_FSIZE
  // bounds one memfd, not how many a process keeps open or passes on. ENOSYS is what an old kernel
  // answers, and callers fall back to a file in $TMPDIR, the bounded /tmp.
  if (!memory.cgroup) {
    for (const char* mfd : {"memfd_create", "memfd_secret"}) {
      if (denied_plainly(mfd)) continue;
      rules.push_back(
          {mfd, ENOSYS, {}, "no memory cgroup counts its pages; callers fall back to $TMPDIR"});
    }
  }
  // Nor does anything count an O_TMPFILE file's pages on a tmpfs that is not sized: bwrap's
  // /dev is an unsized tmpfs, and Landlock does not see O_TMPFILE (it makes no name). Without a
  // cgroup, O_TMPFILE answers EOPNOTSUPP ("the filesystem does not support it"), on which
  // callers (glibc's tmpfile, among others) fall back to a named file, in the sized /tmp.
  if (!memory.cgroup) {
    constexpr std::uint64_t kTmpfileBit = 020000000;  // __O_TMPFILE, without O_DIRECTORY
    for (const auto& [call, index] : {std::pair{"open", 1u}, std::pair{"openat", 2u}}) {
      if (denied_plainly(call)) continue;
      rules.push_back({call,
                       EOPNOTSUPP,
                       {{index, SeccompArg::Op::kMaskedEq, kTmpfileBit, kTmpfileBit}},
                       "O_TMPFILE without a memory cgroup: nothing would count its pages"});
    }
  }
  // Without an IPC namespace of the sandbox's own (the weaker mode), a SysV segment lives in the
  // host's namespace and outlives the call.
  if (!memory.own_ipc_namespace && !denied_plainly("shmget")) {
    rules.push_back(
        {"shmget", ENOSYS, {}, "no private IPC namespace: a segment would outlive the call"});
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

Result<std::string> CompileSeccomp(const std::vector<SeccompRule>& rules) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Fail(Code::kSandboxUnavailable, "seccomp_init failed");
  struct Releaser {
    scmp_filter_ctx c;
    ~Releaser() { seccomp_release(c); }
  } releaser{ctx};
  // Syscalls of another architecture (int 0x80 on x86_64) are killed, not allowed; so are x32
  // calls (x86_64 numbers with bit 30 set), which the argument rules would not match.
  seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  for (const auto& r : rules) {
    int nr = seccomp_syscall_resolve_name(r.syscall.c_str());
    if (nr == __NR_SCMP_ERROR) nr = FallbackSyscallNumber(r.syscall);
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
  return ExportSeccompBpf(ctx);
}

Result<std::string> ExportSeccompBpf(void* ctx) {
  // libseccomp 2.5 exports only to a descriptor.
  UniqueFd fd(::memfd_create("cordon-seccomp", MFD_CLOEXEC));
  if (!fd.valid()) return SysFail(Code::kSandboxUnavailable, "memfd_create", "seccomp program");
  if (int rc = seccomp_export_bpf(ctx, fd.get()); rc != 0) {
    return Fail(Code::kSandboxUnavailable, "seccomp_export_bpf failed", -rc, "seccomp_export_bpf");
  }
  const off_t size = ::lseek(fd.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0 ||
      size / static_cast<off_t>(sizeof(sock_filter)) > BPF_MAXINSNS) {
    return Fail(Code::kSandboxUnavailable,
                "seccomp_export_bpf wrote " + std::to_string(size) + " bytes, not a filter");
  }
  std::string program(static_cast<std::size_t>(size), '\0');
  if (::pread(fd.get(), program.data(), program.size(), 0) != size)
    return SysFail(Code::kSandboxUnavailable, "pread", "seccomp program");
  return program;
}

Status LoadSeccompProgram(std::string_view program) {
  if (program.empty() || program.size() % sizeof(sock_filter) != 0 ||
      program.size() / sizeof(sock_filter) > BPF_MAXINSNS) {
    return Fail(
        Code::kSandboxUnavailable,
        "the seccomp program is " + std::to_string(program.size()) + " bytes, not a whole filter");
  }
  // The instructions are copied to aligned storage: the kernel reads them through the pointer.
  std::vector<sock_filter> insns(program.size() / sizeof(sock_filter));
  std::memcpy(insns.data(), program.data(), program.size());
  sock_fprog prog{static_cast<unsigned short>(insns.size()), insns.data()};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
    return SysFail(Code::kSandboxUnavailable, "seccomp(SECCOMP_SET_MODE_FILTER)", "");
  return {};
}

Status ApplySeccomp(const std::vector<SeccompRule>& rules) {
  ASSIGN_OR_RETURN(const std::string program, CompileSeccomp(rules));
  return LoadSeccompProgram(program);
}

}  // namespace cordon
