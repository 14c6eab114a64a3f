// The host probe (docs/adr/0010-host-probe.md): each sandbox step tried in a throwaway child,
// the context read from /proc and the environment, one cause and one remedy.
#include "runner/host_capabilities.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/hash.h"
#include "core/unique_fd.h"
#include "core/version.h"
#include "runner/host_probe.h"
#include "runner/landlock.h"
#include "workspace/staging.h"

extern char** environ;

namespace cordon {
namespace {

std::optional<long> ReadLong(const char* path) {
  std::ifstream in(path);
  long v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

std::string ReadSmallFile(const char* path, std::size_t max = 4096) {
  std::ifstream in(path, std::ios::binary);
  std::string s(max, '\0');
  in.read(s.data(), static_cast<std::streamsize>(max));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

std::string NsInode(const char* name) {
  char buf[128];
  const std::string link = std::string("/proc/self/ns/") + name;
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("?");
}

// Runs argv (no shell), returns its exit status (-1: not run) and its output, bounded.
std::pair<int, std::string> RunCaptured(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {-1, "pipe2 failed"};
  UniqueFd rd(fds[0]), wr(fds[1]);
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(wr.get(), 1);
    ::dup2(wr.get(), 2);
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execve(a[0], a.data(), environ);
    ::_exit(127);
  }
  wr.Reset();
  if (pid < 0) return {-1, std::string("fork: ") + std::strerror(errno)};
  std::string out;
  char buf[2048];
  for (ssize_t n; (n = ::read(rd.get(), buf, sizeof buf)) > 0;) {
    if (out.size() < 4096) out.append(buf, static_cast<std::size_t>(n));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// One step's outcome, written by the probe child as a fixed record (one write, < PIPE_BUF).
struct WireStep {
  int step;
  int ok;
  int err;
  char what[52];
};

void Report(int fd, ProbeStep step, bool ok, int err, const char* what) {
  WireStep w{};
  w.step = static_cast<int>(step);
  w.ok = ok ? 1 : 0;
  w.err = err;
  std::strncpy(w.what, what, sizeof w.what - 1);
  (void)!::write(fd, &w, sizeof w);
}

bool WriteAll(const char* path, const char* data) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const std::size_t len = std::strlen(data);
  const bool ok = ::write(fd, data, len) == static_cast<ssize_t>(len);
  const int e = errno;
  ::close(fd);
  errno = e;
  return ok;
}

// The namespace steps, in a child that exits when done: only system calls after the fork (cordon
// may have threads). Each step reports; a step whose prerequisite failed is not tried.
void NamespaceChild(int fd, const char* uid_map, const char* gid_map, const char* mount_target) {
  if (::unshare(CLONE_NEWUSER) != 0) {
    Report(fd, ProbeStep::kUserNamespace, false, errno, "unshare(CLONE_NEWUSER)");
    ::_exit(0);
  }
  // setgroups may be absent on old kernels; the maps are what matter.
  (void)WriteAll("/proc/self/setgroups", "deny");
  if (!WriteAll("/proc/self/uid_map", uid_map)) {
    Report(fd, ProbeStep::kUserNamespace, false, errno, "write /proc/self/uid_map");
    ::_exit(0);
  }
  if (!WriteAll("/proc/self/gid_map", gid_map)) {
    Report(fd, ProbeStep::kUserNamespace, false, errno, "write /proc/self/gid_map");
    ::_exit(0);
  }
  Report(fd, ProbeStep::kUserNamespace, true, 0, "");
  if (::unshare(CLONE_NEWNS) != 0) {
    Report(fd, ProbeStep::kMount, false, errno, "unshare(CLONE_NEWNS)");
    ::_exit(0);
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    Report(fd, ProbeStep::kMount, false, errno, "mount --make-rprivate /");
    ::_exit(0);
  }
  if (::mount("tmpfs", mount_target, "tmpfs", MS_NOSUID | MS_NODEV, "size=16k") != 0) {
    Report(fd, ProbeStep::kMount, false, errno, "mount tmpfs");
    ::_exit(0);
  }
  ::umount2(mount_target, MNT_DETACH);
  Report(fd, ProbeStep::kMount, true, 0, "");
  // The pid namespace's own /proc, mounted by its first process.
  if (::unshare(CLONE_NEWPID) != 0) {
    Report(fd, ProbeStep::kProc, false, errno, "unshare(CLONE_NEWPID)");
  } else {
    const pid_t init = ::fork();
    if (init == 0) {
      const int rc = ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
      ::_exit(rc == 0 ? 0 : (errno & 0x7f) + 1);
    }
    int status = 0;
    if (init < 0) {
      Report(fd, ProbeStep::kProc, false, errno, "fork into the pid namespace");
    } else if (::waitpid(init, &status, 0) == init && WIFEXITED(status) &&
               WEXITSTATUS(status) == 0) {
      Report(fd, ProbeStep::kProc, true, 0, "");
    } else {
      Report(fd, ProbeStep::kProc, false, WIFEXITED(status) ? WEXITSTATUS(status) - 1 : EINTR,
             "mount proc");
    }
  }
  if (::unshare(CLONE_NEWNET) != 0) {
    Report(fd, ProbeStep::kNetNamespace, false, errno, "unshare(CLONE_NEWNET)");
  } else {
    Report(fd, ProbeStep::kNetNamespace, true, 0, "");
  }
  ::_exit(0);
}

// clone3 as the warm sandbox's fork server calls it (a new process, SIGCHLD at exit).
bool Clone3Works(int* err) {
  const pid_t child = ::fork();
  if (child == 0) {
    clone_args args{};
    args.exit_signal = SIGCHLD;
    const long pid = ::syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) ::_exit(0);
    if (pid < 0) ::_exit((errno & 0x7f) + 1);
    int status = 0;
    ::waitpid(static_cast<pid_t>(pid), &status, 0);
    ::_exit(0);
  }
  if (child < 0) {
    *err = errno;
    return false;
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  *err = code == 0 ? 0 : code - 1;
  return code == 0;
}

std::string ErrnoText(int err) {
  if (err == 0) return "";
  return std::string(strerrorname_np(err) != nullptr ? strerrorname_np(err) : "errno") + " (" +
         std::strerror(err) + ")";
}

std::string ContainerFlags(const std::string& container, bool gitlab_ci) {
  // GitLab's docker executor: the job cannot pass flags, the runner's config.toml can.
  if (container == "docker" && gitlab_ci) {
    return "in the runner's config.toml, [runners.docker] security_opt = "
           "[\"seccomp=/usr/share/cordon/cordon-seccomp.json\", \"apparmor=unconfined\", "
           "\"systempaths=unconfined\"] (docs/environments.md)";
  }
  if (container == "podman") {
    return "podman run --security-opt seccomp=/usr/share/cordon/cordon-seccomp.json "
           "--security-opt unmask=ALL";
  }
  return "docker run --security-opt seccomp=/usr/share/cordon/cordon-seccomp.json "
         "--security-opt apparmor=unconfined --security-opt systempaths=unconfined";
}

// A container engine whose flags cordon knows (others get the generic remedy).
bool Engine(const HostContext& x) { return x.container == "docker" || x.container == "podman"; }

constexpr const char* kKubernetesRemedy =
    "in the pod spec: `hostUsers: false`, and in the container's securityContext "
    "`seccompProfile: {type: Localhost, localhostProfile: cordon-seccomp.json}` (the file from "
    "/usr/share/cordon/ in each node's kubelet seccomp directory), `appArmorProfile: {type: "
    "Unconfined}` and `procMount: Unmasked` (docs/environments.md has the Job manifest)";

}  // namespace

bool ForcedByTestSwitch(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '1' && v[1] == '\0';
}

std::string CordonRuntimeDir() {
  std::string dir;
  if (const char* r = std::getenv("XDG_RUNTIME_DIR"); r != nullptr && r[0] == '/') {
    dir = std::string(r) + "/cordon";
  } else {
    dir = "/tmp/cordon-" + std::to_string(::getuid());
  }
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

std::vector<std::string> HostContext::MaskedProc() const {
  std::vector<std::string> out;
  for (const auto& m : proc_overmounts) {
    // Empty proc directories made to be mount points: the kernel lets a new /proc through.
    if (m == "/proc/sys/fs/binfmt_misc") continue;
    out.push_back(m);
  }
  return out;
}

std::string HostContext::Key() const { return Sha256Hex(ToJson().dump()).substr(0, 32); }

Json HostContext::ToJson() const {
  auto opt = [](const auto& o) { return o ? Json(*o) : Json(nullptr); };
  return {{"apparmor_restrict_unprivileged_userns", opt(apparmor_restrict_userns)},
          {"max_user_namespaces", opt(max_user_namespaces)},
          {"unprivileged_userns_clone", opt(unprivileged_userns_clone)},
          {"seccomp_mode", seccomp_mode},
          {"seccomp_filters", seccomp_filters},
          {"proc_overmounts", proc_overmounts},
          {"container", container},
          {"container_evidence", container_evidence},
          {"kubernetes", kubernetes},
          {"gitlab_ci", gitlab_ci},
          {"gvisor", gvisor},
          {"kernel", kernel},
          {"euid", euid},
          {"namespaces", namespaces},
          {"bwrap", bwrap},
          {"bwrap_identity", bwrap_identity},
          {"test_switches", test_switches},
          {"cordon", kCordonVersion}};
}

HostContext ReadHostContext() {
  HostContext c;
  if (auto v = ReadLong("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"))
    c.apparmor_restrict_userns = static_cast<int>(*v);
  c.max_user_namespaces = ReadLong("/proc/sys/user/max_user_namespaces");
  if (auto v = ReadLong("/proc/sys/kernel/unprivileged_userns_clone"))
    c.unprivileged_userns_clone = static_cast<int>(*v);
  {
    std::istringstream st(ReadSmallFile("/proc/self/status", 1 << 16));
    for (std::string line; std::getline(st, line);) {
      if (line.rfind("Seccomp:", 0) == 0) c.seccomp_mode = std::atoi(line.c_str() + 8);
      if (line.rfind("Seccomp_filters:", 0) == 0) c.seccomp_filters = std::atoi(line.c_str() + 16);
    }
  }
  {
    std::ifstream mi("/proc/self/mountinfo");
    for (std::string line; std::getline(mi, line);) {
      std::istringstream f(line);
      std::string id, parent, devno, root, point;
      if (!(f >> id >> parent >> devno >> root >> point)) continue;
      point = UnescapeMountinfoField(point);
      if (point.rfind("/proc/", 0) == 0) c.proc_overmounts.push_back(point);
    }
  }
  if (std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) {
    c.kubernetes = true;
    c.container = "kubernetes";
    c.container_evidence = "KUBERNETES_SERVICE_HOST is set";
  } else if (::access("/run/.containerenv", F_OK) == 0) {
    c.container = "podman";
    c.container_evidence = "/run/.containerenv";
  } else if (::access("/.dockerenv", F_OK) == 0) {
    c.container = "docker";
    c.container_evidence = "/.dockerenv";
  } else if (const char* ce = std::getenv("container"); ce != nullptr && *ce != '\0') {
    c.container = ce;  // systemd's convention: podman, lxc, systemd-nspawn, docker
    c.container_evidence = std::string("container=") + ce;
  } else {
    const std::string cg = ReadSmallFile("/proc/1/cgroup");
    for (const char* k : {"kubepods", "docker", "libpod", "lxc"}) {
      if (cg.find(k) != std::string::npos) {
        c.container = std::string(k) == "kubepods" ? "kubernetes"
                      : std::string(k) == "libpod" ? "podman"
                                                   : k;
        c.kubernetes = c.container == "kubernetes";
        c.container_evidence = std::string("/proc/1/cgroup names ") + k;
        break;
      }
    }
  }
  c.gitlab_ci = std::getenv("GITLAB_CI") != nullptr;
  utsname u{};
  if (::uname(&u) == 0) c.kernel = u.release;
  // gVisor's Sentry reports a fixed Linux 4.4.0 with its own build line, and its dmesg starts
  // with its own banner; either is enough.
  const std::string version = ReadSmallFile("/proc/version");
  c.gvisor = (c.kernel == "4.4.0" &&
              version.find("#1 SMP Sun Jan 10 15:06:54 PST 2016") != std::string::npos);
  c.euid = ::geteuid();
  c.namespaces = NsInode("user") + " " + NsInode("mnt") + " " + NsInode("pid") + " " +
                 NsInode("net") + " boot " + ReadSmallFile("/proc/sys/kernel/random/boot_id", 64);
  for (const char* sw :
       {"CORDON_TEST_NO_BWRAP", "CORDON_TEST_NO_LANDLOCK", "CORDON_TEST_NO_OVERLAY"})
    if (ForcedByTestSwitch(sw)) c.test_switches.push_back(std::string(sw) + "=1");
  c.bwrap = ForcedByTestSwitch("CORDON_TEST_NO_BWRAP") ? "" : FindOnPath("bwrap");
  if (struct stat st{}; !c.bwrap.empty() && ::stat(c.bwrap.c_str(), &st) == 0) {
    c.bwrap_identity = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
                       std::to_string(st.st_mtim.tv_sec) + ":" + std::to_string(st.st_mode);
  }
  return c;
}

const StepResult* HostCapabilities::Step(ProbeStep s) const {
  for (const auto& r : steps) {
    if (r.step == s) return &r;
  }
  return nullptr;
}

bool HostCapabilities::Ok(ProbeStep s) const {
  const StepResult* r = Step(s);
  return r != nullptr && r->tried && r->ok;
}

Json HostCapabilities::ToJson() const {
  Json st = Json::array();
  for (const auto& r : steps) {
    Json one = {{"step", std::string(Name(kProbeStepNames, r.step))},
                {"result", !r.tried ? "not tried"
                           : r.ok   ? "ok"
                                    : "failed"}};
    if (r.tried && !r.ok) {
      one["errno"] = r.err;
      one["error"] = ErrnoText(r.err);
    }
    if (!r.detail.empty()) one["detail"] = r.detail;
    st.push_back(std::move(one));
  }
  Json j = {{"cause", std::string(Name(kHostCauseNames, cause))},
            {"steps", st},
            {"landlock_abi", landlock_abi},
            {"clone3", clone3},
            {"context", context.ToJson()},
            {"cached", cached.empty() ? Json(nullptr) : Json(cached)}};
  if (cause != HostCause::kNone) {
    j["cause_text"] = cause_text;
    j["remedy"] = remedy;
  }
  return j;
}

void Classify(HostCapabilities& c) {
  const HostContext& x = c.context;
  auto failed = [&](ProbeStep s) {
    const StepResult* r = c.Step(s);
    return r != nullptr && r->tried && !r->ok;
  };
  auto step_text = [&](ProbeStep s) {
    const StepResult* r = c.Step(s);
    return r == nullptr ? std::string()
                        : r->detail + (r->err != 0 ? ": " + ErrnoText(r->err) : std::string());
  };
  const std::string where = x.container.empty() ? std::string()
                                                : " (cordon runs in a " + x.container +
                                                      " container: " + x.container_evidence + ")";
  c.cause = HostCause::kNone;
  c.cause_text.clear();
  c.remedy.clear();
  if (failed(ProbeStep::kSeccomp)) {
    c.cause = HostCause::kNoSeccomp;
    c.cause_text = "the kernel has no seccomp filters (prctl(PR_GET_SECCOMP) failed)";
    c.remedy = "boot a kernel with CONFIG_SECCOMP_FILTER=y";
    return;
  }
  const bool gvisor_without_landlock = x.gvisor && c.landlock_abi < 1;
  auto gvisor = [&](const std::string& what) {
    c.cause = HostCause::kGVisorNoLandlock;
    c.cause_text = "cordon runs under gVisor, where " + what +
                   ", and gVisor has no Landlock, so no weaker mode can run either";
    c.remedy =
        "run this container with runc instead of runsc (gVisor), or give gVisor's sandbox the "
        "namespaces bwrap needs (the probe's failed step is in `cordon doctor --json`)";
  };
  if (!c.Ok(ProbeStep::kBwrap)) {
    if (gvisor_without_landlock) return gvisor("bwrap is not installed");
    c.cause = HostCause::kNoBwrap;
    c.cause_text = "bwrap is not installed";
    c.remedy = "apt-get install bubblewrap (0.8.0 or newer)";
    return;
  }
  if (failed(ProbeStep::kUserNamespace)) {
    const StepResult& r = *c.Step(ProbeStep::kUserNamespace);
    const bool map_write = r.detail.find("_map") != std::string::npos;
    if (gvisor_without_landlock)
      return gvisor("a user namespace is refused (" + step_text(ProbeStep::kUserNamespace) + ")");
    if (r.err == ENOSPC || (x.max_user_namespaces && *x.max_user_namespaces <= 0)) {
      c.cause = HostCause::kUsernsDisabled;
      c.cause_text = "user namespaces are disabled: user.max_user_namespaces is " +
                     (x.max_user_namespaces ? std::to_string(*x.max_user_namespaces)
                                            : std::string("0 for this namespace")) +
                     " (" + step_text(ProbeStep::kUserNamespace) + ")" + where;
      c.remedy = x.container.empty()
                     ? "sudo sysctl -w user.max_user_namespaces=15000 (keep it in "
                       "/etc/sysctl.d/60-cordon.conf)"
                     : "set user.max_user_namespaces above 0 on the host that runs the container "
                       "(sudo sysctl -w user.max_user_namespaces=15000)";
      return;
    }
    if (x.unprivileged_userns_clone && *x.unprivileged_userns_clone == 0 && r.err == EPERM &&
        !map_write) {
      c.cause = HostCause::kUsernsDisabled;
      c.cause_text =
          "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)";
      c.remedy =
          "sudo sysctl -w kernel.unprivileged_userns_clone=1 (keep it in "
          "/etc/sysctl.d/60-cordon.conf)";
      return;
    }
    if (x.apparmor_restrict_userns && *x.apparmor_restrict_userns == 1 &&
        (r.err == EPERM || r.err == EACCES) && (map_write || x.seccomp_mode != 2)) {
      c.cause = HostCause::kAppArmorUserns;
      c.cause_text =
          "AppArmor restricts unprivileged user namespaces "
          "(kernel.apparmor_restrict_unprivileged_userns=1, as on Ubuntu 23.10 and later): " +
          step_text(ProbeStep::kUserNamespace);
      c.remedy = x.container.empty()
                     ? "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (keep it in "
                       "/etc/sysctl.d/60-cordon.conf), or load cordon's AppArmor profile: sudo "
                       "apparmor_parser -r /usr/share/cordon/apparmor/cordon (docs/environments.md)"
                     : "on the host that runs the container: sudo sysctl -w "
                       "kernel.apparmor_restrict_unprivileged_userns=0 (docs/environments.md)";
      return;
    }
    if (x.seccomp_mode == 2 && (r.err == EPERM || r.err == ENOSYS || r.err == EACCES)) {
      c.cause = HostCause::kSeccompUserns;
      c.cause_text = "a seccomp filter on cordon's own process (Seccomp_filters: " +
                     std::to_string(x.seccomp_filters) +
                     ") refuses the namespace calls bwrap needs (" +
                     step_text(ProbeStep::kUserNamespace) + ")" + where;
      c.remedy = x.kubernetes ? kKubernetesRemedy
                 : Engine(x)  ? ContainerFlags(x.container, x.gitlab_ci)
                              : "run cordon outside the program that installed that filter, or "
                                "allow unshare, clone, mount, umount2, pivot_root and setns there "
                                "(/usr/share/cordon/cordon-seccomp.json lists what cordon needs)";
      return;
    }
    c.cause = HostCause::kUnknown;
    c.cause_text = "a user namespace cannot be made: " + step_text(ProbeStep::kUserNamespace);
    c.remedy =
        "allow unprivileged user namespaces for this user; send `cordon doctor --json` "
        "with a report if the cause is not clear";
    return;
  }
  if (failed(ProbeStep::kMount)) {
    c.cause = HostCause::kMountRefused;
    c.cause_text =
        "a user namespace works but mounts in it are refused: " + step_text(ProbeStep::kMount) +
        where;
    c.remedy = x.kubernetes ? kKubernetesRemedy
               : Engine(x)  ? ContainerFlags(x.container, x.gitlab_ci)
               : x.apparmor_restrict_userns && *x.apparmor_restrict_userns == 1
                   ? "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or load "
                     "cordon's AppArmor profile (sudo apparmor_parser -r "
                     "/usr/share/cordon/apparmor/cordon)"
                   : "find the security module that refuses mount(2) here (AppArmor, SELinux) and "
                     "allow it for cordon and bwrap";
    return;
  }
  if (failed(ProbeStep::kNetNamespace)) {
    c.cause = HostCause::kNetnsRefused;
    c.cause_text =
        "a network namespace cannot be made: " + step_text(ProbeStep::kNetNamespace) + where;
    c.remedy = x.kubernetes ? kKubernetesRemedy
               : Engine(x)  ? ContainerFlags(x.container, x.gitlab_ci)
                            : "allow unshare(CLONE_NEWNET) for unprivileged users";
    return;
  }
  if (failed(ProbeStep::kProc)) {
    const std::vector<std::string> masked = x.MaskedProc();
    std::string list;
    for (std::size_t i = 0; i < masked.size() && i < 6; ++i)
      list += (i == 0 ? "" : ", ") + masked[i];
    if (masked.size() > 6) list += ", ...";
    c.cause = masked.empty() ? HostCause::kProcRefused : HostCause::kMaskedProc;
    c.cause_text = masked.empty()
                       ? "a new /proc cannot be mounted in cordon's namespaces (" +
                             step_text(ProbeStep::kProc) + ")" + where
                       : "/proc is masked (mounts over " + list +
                             "), so the kernel refuses a new /proc in a user namespace (" +
                             step_text(ProbeStep::kProc) + "); user namespaces themselves work" +
                             where;
    c.remedy = x.kubernetes ? "in the container's securityContext: `procMount: Unmasked` (it "
                              "needs `hostUsers: false` in the pod spec and the ProcMountType "
                              "feature gate; docs/environments.md)"
               : x.container == "podman" ? "podman run --security-opt unmask=ALL"
               : x.container == "docker" ? "docker run --security-opt systempaths=unconfined"
                                         : "unmount what covers /proc (" + list +
                                               ") in the mount namespace cordon runs in";
    return;
  }
  if (failed(ProbeStep::kBwrapRun)) {
    c.cause = HostCause::kBwrapFailed;
    c.cause_text = "each namespace step works alone, but bwrap fails: " +
                   c.Step(ProbeStep::kBwrapRun)->detail + where;
    c.remedy = "run `cordon doctor --json` and report its steps; bwrap " + x.bwrap +
               " may be too old (0.8.0 or newer) or confined by its own security profile";
    return;
  }
}

std::vector<std::string> ModeLosses(SandboxMode mode) {
  switch (mode) {
    case SandboxMode::kBwrap:
      return {};
    case SandboxMode::kBwrapHostProc:
      return {
          "/proc is the host's (read-only): host processes are listed with their command "
          "lines; their environment, memory and descriptors stay unreadable (Landlock "
          "refuses ptrace-mode access outside the sandbox)",
          "/proc's system figures (meminfo, loadavg, mounts of other processes) are the host's",
          "no warm sandbox: each call starts its own sandbox"};
    case SandboxMode::kLandlockOnly:
      return {
          "no namespaces: the deny list and cordon's own files are kept out by Landlock's "
          "read rules instead of masks, and root-only files under a read path stay readable",
          "no pid namespace: the command's process group ends with it (setsid and setpgid "
          "refused) instead of a namespace",
          "no network namespace: network none and loopback rest on seccomp refusing "
          "non-unix sockets; network proxy is refused",
          "no private /tmp, /proc or /dev: a TMPDIR of the call's own; /proc and raw devices "
          "are not granted",
          "no staged workspace: the direct mode's sweep keeps protected paths",
          "no IPC namespace: SysV shared memory is refused (ENOSYS)",
          "no warm sandbox: each call starts its own sandbox"};
  }
  return {};
}

Result<SandboxChoice> ChooseSandboxMode(const HostCapabilities& caps, bool allow_weaker) {
  if (caps.cause == HostCause::kNone) return SandboxChoice{};
  const std::string tail = ". Run `cordon doctor` for every step the probe tried";
  const std::string head = caps.cause_text + ". Remedy: " + caps.remedy;
  switch (caps.cause) {
    case HostCause::kNoSeccomp:
    case HostCause::kGVisorNoLandlock:
      return Fail(Code::kSandboxUnavailable, head + "; cordon fails closed" + tail);
    case HostCause::kMaskedProc:
    case HostCause::kProcRefused:
      if (!allow_weaker) {
        return Fail(Code::kSandboxUnavailable,
                    head +
                        "; cordon fails closed. Or set [sandbox] allow_weaker = true in your "
                        "policy to run with the host's /proc bound instead (mode bwrap-host-proc; "
                        "SECURITY.md, \"Weaker modes\")" +
                        tail);
      }
      if (caps.landlock_abi < 1) {
        return Fail(Code::kSandboxUnavailable,
                    head +
                        "; and without Landlock the host's /proc would show other processes' "
                        "environments: no weaker mode is possible" +
                        tail);
      }
      if (caps.Ok(ProbeStep::kBwrapRun)) {
        return SandboxChoice{SandboxMode::kBwrapHostProc, caps.cause_text,
                             ModeLosses(SandboxMode::kBwrapHostProc)};
      }
      break;  // bwrap fails even with the host's /proc: the namespace-free mode below
    default:
      break;
  }
  if (!allow_weaker) {
    return Fail(Code::kSandboxUnavailable,
                head +
                    "; cordon fails closed. Or set [sandbox] allow_weaker = true in your policy "
                    "to run with Landlock + seccomp only (mode landlock-seccomp; SECURITY.md, "
                    "\"Weaker modes\")" +
                    tail);
  }
  if (caps.landlock_abi < 1) {
    return Fail(Code::kSandboxUnavailable,
                head + ", and Landlock is unavailable: no weaker mode is possible" + tail);
  }
  return SandboxChoice{SandboxMode::kLandlockOnly, caps.cause_text,
                       ModeLosses(SandboxMode::kLandlockOnly)};
}

namespace {

// Records what a step did: tried, its outcome, the errno and what failed.
void SetStep(HostCapabilities& caps, ProbeStep s, bool ok, int err, std::string detail) {
  StepResult& r = caps.steps[static_cast<std::size_t>(s)];
  r.tried = true;
  r.ok = ok;
  r.err = err;
  r.detail = std::move(detail);
}

// The quick steps (a few forks, no exec): bwrap on PATH, the namespace child's steps and clone3.
// They run at every session start, cached or not: a cached result whose quick steps differ from
// now is not believed (two seccomp filters of the same count, a namespace inode reused).
void QuickSteps(HostCapabilities& caps) {
  const HostContext& x = caps.context;
  caps.steps.clear();
  for (const auto& e : kProbeStepNames)
    caps.steps.push_back(StepResult{e.value, false, false, 0, ""});
  auto set = [&](ProbeStep s, bool ok, int err, std::string detail) {
    SetStep(caps, s, ok, err, std::move(detail));
  };
  set(ProbeStep::kBwrap, !x.bwrap.empty(), x.bwrap.empty() ? ENOENT : 0,
      x.bwrap.empty() ? "bwrap is not on PATH" : x.bwrap);
  const std::string uid_map =
      std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1\n";
  const std::string gid_map =
      std::to_string(::getegid()) + " " + std::to_string(::getegid()) + " 1\n";
  const char* target = "/tmp";
  for (const char* t : {"/tmp", "/mnt", "/dev", "/run"}) {
    struct stat st {};
    if (::stat(t, &st) == 0 && S_ISDIR(st.st_mode)) {
      target = t;
      break;
    }
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) == 0) {
    UniqueFd rd(fds[0]), wr(fds[1]);
    const pid_t pid = ::fork();
    if (pid == 0) NamespaceChild(wr.get(), uid_map.c_str(), gid_map.c_str(), target);
    wr.Reset();
    if (pid > 0) {
      WireStep w{};
      while (::read(rd.get(), &w, sizeof w) == static_cast<ssize_t>(sizeof w)) {
        if (w.step < 0 || static_cast<std::size_t>(w.step) >= caps.steps.size()) continue;
        w.what[sizeof w.what - 1] = '\0';
        set(static_cast<ProbeStep>(w.step), w.ok != 0, w.err, w.what);
      }
      int status = 0;
      ::waitpid(pid, &status, 0);
    } else {
      set(ProbeStep::kUserNamespace, false, errno, "fork");
    }
  }
  int err = 0;
  caps.clone3 = Clone3Works(&err);
  set(ProbeStep::kClone3, caps.clone3, err,
      caps.clone3 ? "" : "clone3 refused: cordon-shim falls back to clone");
}

bool SameQuickSteps(const HostCapabilities& a, const HostCapabilities& b) {
  for (ProbeStep s : {ProbeStep::kBwrap, ProbeStep::kUserNamespace, ProbeStep::kMount,
                      ProbeStep::kProc, ProbeStep::kNetNamespace, ProbeStep::kClone3}) {
    const StepResult* x = a.Step(s);
    const StepResult* y = b.Step(s);
    if (x == nullptr || y == nullptr || x->tried != y->tried || x->ok != y->ok || x->err != y->err)
      return false;
  }
  return true;
}

}  // namespace

HostCapabilities ProbeHostNow() {
  HostCapabilities caps;
  caps.context = ReadHostContext();
  const HostContext& x = caps.context;
  QuickSteps(caps);
  auto set = [&](ProbeStep s, bool ok, int err, std::string detail) {
    SetStep(caps, s, ok, err, std::move(detail));
  };
  // bwrap itself, as cordon runs it; with the host's /proc where a new one is refused, so that
  // the bwrap-host-proc mode is known to start.
  const std::string on_path = FindOnPath("true");
  const std::string truth = on_path.empty() ? "/bin/true" : on_path;
  if (!x.bwrap.empty() && caps.Ok(ProbeStep::kUserNamespace)) {
    const bool host_proc = !caps.Ok(ProbeStep::kProc);
    std::vector<std::string> argv = {x.bwrap,
                                     "--unshare-user",
                                     "--unshare-pid",
                                     "--unshare-net",
                                     "--unshare-ipc",
                                     "--unshare-uts",
                                     "--die-with-parent",
                                     "--ro-bind",
                                     "/",
                                     "/"};
    if (host_proc) {
      argv.insert(argv.end(), {"--ro-bind", "/proc", "/proc"});
    } else {
      argv.insert(argv.end(), {"--proc", "/proc"});
    }
    argv.insert(argv.end(), {"--dev", "/dev", "--", truth});
    auto [rc, out] = RunCaptured(argv);
    set(ProbeStep::kBwrapRun, rc == 0, 0,
        rc == 0 ? (host_proc ? "bwrap ran `true` with the host's /proc bound" : "bwrap ran `true`")
                : "bwrap exit " + std::to_string(rc) + ": " + out.substr(0, 300));
  } else if (!x.bwrap.empty()) {
    // bwrap's own words for the refusal, for the record.
    auto [rc, out] = RunCaptured({x.bwrap, "--unshare-user", "--ro-bind", "/", "/", "--", truth});
    set(ProbeStep::kBwrapRun, rc == 0, 0,
        rc == 0 ? "bwrap ran `true`"
                : "bwrap exit " + std::to_string(rc) + ": " + out.substr(0, 300));
  }
  if (caps.Ok(ProbeStep::kMount)) {
    const std::string root = CordonRuntimeDir() + "/overlay-probe";
    ::mkdir(root.c_str(), 0700);
    StagingSupport st;
    if (ForcedByTestSwitch("CORDON_TEST_NO_OVERLAY")) {
      st.reason = "CORDON_TEST_NO_OVERLAY=1 is set";
    } else {
      st = ProbeStaging(StagedWorkspace::StageRoot(), root);
    }
    set(ProbeStep::kOverlay, st.available, 0, st.available ? "" : st.reason);
  }
  const bool no_landlock = ForcedByTestSwitch("CORDON_TEST_NO_LANDLOCK");
  caps.landlock_abi = no_landlock ? 0 : LandlockAbi();
  set(ProbeStep::kLandlock, caps.landlock_abi >= 1, caps.landlock_abi >= 1 ? 0 : ENOSYS,
      caps.landlock_abi >= 1 ? "ABI " + std::to_string(caps.landlock_abi)
      : no_landlock          ? "Landlock is unavailable (CORDON_TEST_NO_LANDLOCK=1 is set)"
                             : "Landlock is unavailable");
  const bool seccomp = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
  set(ProbeStep::kSeccomp, seccomp, seccomp ? 0 : errno, "");
  Classify(caps);
  // The cache: one file per context key, written whole and renamed into place.
  const std::string dir = CordonRuntimeDir();
  const std::string file = dir + "/host-probe-" + x.Key() + ".json";
  const std::string tmp = file + ".tmp" + std::to_string(::getpid());
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    Json j = caps.ToJson();
    const std::string text = j.dump();
    if (fd.valid() &&
        ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size())) {
      fd.Reset();
      if (::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
    } else {
      ::unlink(tmp.c_str());
    }
  }
  return caps;
}

HostCapabilities ProbeHost() {
  HostContext x = ReadHostContext();
  const std::string dir = CordonRuntimeDir();
  const std::string file = dir + "/host-probe-" + x.Key() + ".json";
  struct stat dst {};
  // Only a file this user wrote, in a directory only this user can write, is believed.
  if (::lstat(dir.c_str(), &dst) == 0 && S_ISDIR(dst.st_mode) && dst.st_uid == ::geteuid() &&
      (dst.st_mode & 022) == 0) {
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (fd.valid() && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_uid == ::geteuid() && (st.st_mode & 022) == 0 && st.st_size < (1 << 20)) {
      std::string text(static_cast<std::size_t>(st.st_size), '\0');
      if (::read(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size())) {
        try {
          const Json j = Json::parse(text);
          HostCapabilities caps;
          caps.context = std::move(x);
          for (const auto& s : j.at("steps")) {
            const std::string name = s.at("step").get<std::string>();
            const auto* e = std::find_if(std::begin(kProbeStepNames), std::end(kProbeStepNames),
                                         [&](const auto& n) { return n.name == name; });
            if (e == std::end(kProbeStepNames)) throw std::runtime_error("step");
            const std::string result = s.at("result").get<std::string>();
            caps.steps.push_back(StepResult{e->value, result != "not tried", result == "ok",
                                            s.value("errno", 0), s.value("detail", "")});
          }
          if (caps.steps.size() != std::size(kProbeStepNames)) throw std::runtime_error("steps");
          caps.landlock_abi = j.at("landlock_abi").get<int>();
          caps.clone3 = j.at("clone3").get<bool>();
          // The context cannot tell two seccomp filters of the same count apart, nor a reused
          // namespace inode: the quick steps are tried again and must agree.
          HostCapabilities now;
          now.context = caps.context;
          QuickSteps(now);
          if (SameQuickSteps(caps, now)) {
            Classify(caps);
            caps.cached = file;
            return caps;
          }
        } catch (const std::exception&) {
          // An unreadable cache is probed again, and rewritten.
        }
      }
    }
  }
  return ProbeHostNow();
}

void ForgetHostProbe() {
  const std::string file = CordonRuntimeDir() + "/host-probe-" + ReadHostContext().Key() + ".json";
  ::unlink(file.c_str());
}

}  // namespace cordon
