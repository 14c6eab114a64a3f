// The warm sandbox's fork server (docs/adr/0008-warm-sandbox.md). It runs inside one bwrap with
// CAP_SYS_ADMIN, CAP_DAC_OVERRIDE and CAP_SETPCAP in the sandbox's user namespace; each call gets
// an init in new pid, mount and IPC namespaces that mounts the call's own /tmp, /proc and
// overlays, drops every capability, and runs the command as the cold shim does (runner/shim/run.h).
#include "runner/shim/serve.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "core/fd_passing.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "runner/contain.h"
#include "runner/shim/run.h"
#include "runner/shim/sha256.h"

namespace cordon::shim {
namespace {

constexpr std::size_t kMaxFrame = 64u << 20;
constexpr int kCallFds = 6;  // frame, stdin, stdout, stderr, status, reply

std::string ReadBounded(int fd, std::size_t max) {
  std::string out;
  char buf[65536];
  while (out.size() <= max) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

Error SysError(const std::string& what) {
  return Error{Code::kSandboxUnavailable, what + ": " + std::strerror(errno), errno, {}};
}

// Mount points in /proc/self/mountinfo (field 5, octal escapes undone) strictly below `dir`,
// only the outermost of nested ones.
std::vector<std::string> MountsBelow(const std::string& dir) {
  std::vector<std::string> all;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::size_t pos = 0;
    for (int field = 0; field < 4 && pos != std::string::npos; ++field) {
      pos = line.find(' ', pos);
      if (pos != std::string::npos) ++pos;
    }
    if (pos == std::string::npos) continue;
    const std::size_t end = line.find(' ', pos);
    const std::string mp = UnescapeMountinfoField(std::string_view(line).substr(pos, end - pos));
    if (mp.size() > dir.size() + 1 && mp.compare(0, dir.size() + 1, dir + "/") == 0)
      all.push_back(mp);
  }
  std::sort(all.begin(), all.end());
  std::vector<std::string> out;
  for (const auto& m : all) {
    if (!out.empty() && (m == out.back() || m.rfind(out.back() + "/", 0) == 0)) continue;
    out.push_back(m);
  }
  return out;
}

bool MakeParents(const std::string& path) {
  for (std::size_t i = 1; i < path.size(); ++i) {
    if (path[i] != '/') continue;
    if (::mkdir(path.substr(0, i).c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// The mounts strictly below `dir` (each with what is mounted below it), detached copies that
// outlive a mount over `dir`.
struct KeptMount {
  std::string path;
  UniqueFd tree;
  bool dir = true;
};

std::vector<KeptMount> TakeMountsBelow(const StatusChannel& ch, const std::string& dir,
                                       const char* step) {
  std::vector<KeptMount> kept;
  for (const auto& m : MountsBelow(dir)) {
    const int fd = static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, m.c_str(),
                                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
    if (fd < 0) ch.Die(step, SysError("open_tree " + m));
    struct stat st {};
    const bool is_dir = ::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode);
    kept.push_back({m, UniqueFd(fd), is_dir});
  }
  return kept;
}

// Puts taken mounts back where they were, now over what was mounted on their parent. With
// `make_points`, a missing mount point is made (a fresh tmpfs); without, a missing or changed one
// fails the call: making it would be a write the command did not do.
void PutBack(const StatusChannel& ch, std::vector<KeptMount>& kept, bool make_points,
             const char* step) {
  for (auto& k : kept) {
    if (make_points) {
      if (!MakeParents(k.path)) ch.Die(step, SysError("mkdir below " + k.path));
      if (k.dir) {
        if (::mkdir(k.path.c_str(), 0755) != 0 && errno != EEXIST)
          ch.Die(step, SysError("mkdir " + k.path));
      } else {
        UniqueFd f(::open(k.path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        if (!f.valid()) ch.Die(step, SysError("create " + k.path));
      }
    } else {
      struct stat st {};
      if (::lstat(k.path.c_str(), &st) != 0 || S_ISDIR(st.st_mode) != k.dir) {
        ch.Die(step, {Code::kSandboxUnavailable,
                      "the mount point " + k.path + " changed on the host; the call is refused", 0,
                      k.path});
      }
    }
    if (::syscall(SYS_move_mount, k.tree.get(), "", AT_FDCWD, k.path.c_str(),
                  MOVE_MOUNT_F_EMPTY_PATH) != 0)
      ch.Die(step, SysError("move_mount " + k.path));
  }
}

// A fresh tmpfs on /tmp (with /tmp/home), the mounts that were below the old one moved onto it
// (a workspace or grant under /tmp).
void FreshTmp(const StatusChannel& ch, std::uint64_t size) {
  std::vector<KeptMount> kept = TakeMountsBelow(ch, "/tmp", "tmp");
  const std::string opts = "mode=0755" + (size > 0 ? ",size=" + std::to_string(size) : "");
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
    ch.Die("tmp", SysError("mount tmpfs /tmp"));
  if (::mkdir("/tmp/home", 0755) != 0) ch.Die("tmp", SysError("mkdir /tmp/home"));
  PutBack(ch, kept, true, "tmp");
}

// The call's overlay on a staged root. What the sandbox mounted below the root (the policy's
// deny masks, cordon's own and root-only files, the pinned directories above them, read-only
// repository views) goes back over the overlay, as a cold sandbox's bwrap mounts it there: an
// overlay's lower layer shows none of the lower directory's submounts.
void MountOverlay(const StatusChannel& ch, const std::string& target, const std::string& options) {
  std::vector<KeptMount> kept = TakeMountsBelow(ch, target, "stage");
  if (::mount("overlay", target.c_str(), "overlay", 0, options.c_str()) != 0)
    ch.Die("stage", SysError("mount overlay on " + target));
  PutBack(ch, kept, false, "stage");
}

// The call's own /proc (its pid namespace), with what bwrap keeps read-only kept so.
void FreshProc(const StatusChannel& ch) {
  constexpr unsigned long kFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (::mount("proc", "/proc", "proc", kFlags, nullptr) != 0)
    ch.Die("proc", SysError("mount proc"));
  for (const char* p : {"/proc/irq", "/proc/bus", "/proc/sysrq-trigger"}) {
    if (::access(p, F_OK) != 0) continue;
    if (::mount(p, p, nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(nullptr, p, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | kFlags, nullptr) != 0)
      ch.Die("proc", SysError(std::string("read-only ") + p));
  }
}

// The staged call's change window (workspace/changes.h, ChangeWindowStart): cordon read its
// start on the fine clock; an inode change is stamped from the coarse clock (or a floor above it),
// so the command starts only once the coarse clock has reached that start. Every change it could
// race with is then stamped at or after it. Most of the tick has passed during the clone and the
// mounts. At most 50 ms, as ChangeWindowStart.
void WaitForCoarseClock(std::int64_t t0_ns) {
  for (int i = 0; i < 250; ++i) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec * 1000000000LL + ts.tv_nsec >= t0_ns) return;
    timespec pause{0, 200000};
    ::nanosleep(&pause, nullptr);
  }
}

// The init of one call: pid 1 of its own pid namespace, in its own mount (and, as root, IPC)
// namespaces.
[[noreturn]] void CallInit(std::vector<UniqueFd> fds) {
  fds[5].Reset();
  StatusChannel ch;
  ch.fd = ::fcntl(fds[4].get(), F_DUPFD_CLOEXEC, 100);
  const std::string text = ReadBounded(fds[0].get(), kMaxFrame);
  if (text.size() > kMaxFrame)
    ch.Die("spec", {Code::kSandboxUnavailable, "call frame too large", 0, {}});
  auto frame = ParseJsonBounded(text, ParseLimits{kMaxFrame, 16});
  if (!frame || !frame->is_object() || !(*frame)["spec"].is_string())
    ch.Die("spec", {Code::kSandboxUnavailable, "bad call frame", 0, {}});
  const std::string spec_text = (*frame)["spec"].get<std::string>();
  ch.spec_sha256 = Sha256Hex(spec_text);
  for (int i = 0; i < 3; ++i) {
    if (::dup2(fds[1 + i].get(), i) < 0) ch.Die("stdio", SysError("dup2"));
  }
  fds.clear();
  // Nothing the server held (its socket, other calls' descriptors) is the call's business.
  if (ch.fd > 3) ::close_range(3, static_cast<unsigned>(ch.fd) - 1, 0);
  ::close_range(static_cast<unsigned>(ch.fd) + 1, ~0U, 0);
  auto parsed = ParseJsonBounded(spec_text);
  if (!parsed) ch.Die("spec", parsed.error());
  auto spec = ContainSpecFromJson(*parsed);
  if (!spec) ch.Die("spec", spec.error());
  std::vector<std::string> env;
  std::vector<char*> envp;
  std::int64_t window_start_ns = 0;
  try {
    window_start_ns = frame->value("window_start_ns", std::int64_t{0});
    env = frame->at("env").get<std::vector<std::string>>();
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      ch.Die("mount", SysError("mount --make-rprivate /"));
    FreshTmp(ch, frame->value("tmp_size", std::uint64_t{0}));
    for (const auto& o : frame->at("overlays")) {
      const std::string target = o.at("target").get<std::string>();
      MountOverlay(ch, target, o.at("options").get<std::string>());
    }
    FreshProc(ch);
    // Its own pty instance: the sandbox's /dev/pts is bwrap's, and a pty one call opened could
    // be opened, read and typed into by another call of the same uid.
    if (::mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                "newinstance,ptmxmode=0666,mode=620") != 0)
      ch.Die("mount", SysError("mount devpts /dev/pts"));
    for (const auto& c : frame->at("cover")) {
      const std::string path = c.get<std::string>();
      if (::mount("tmpfs", path.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,mode=000") != 0)
        ch.Die("mount", SysError("cover " + path));
    }
  } catch (const std::exception& e) {
    ch.Die("spec", {Code::kSandboxUnavailable, std::string("bad call frame: ") + e.what(), 0, {}});
  }
  // The init keeps no capability: the command's child inherits none, and nothing in the call
  // can gain one from it.
  if (auto dropped = DropAllCapabilities(); !dropped) ch.Die("capabilities", dropped.error());
  if (window_start_ns > 0) WaitForCoarseClock(window_start_ns);
  RunCommand(*spec, ch, {envp.data(), true, true});
}

void Reply(int fd, std::string_view text, int pass_fd) {
  (void)SendWithFds(fd, text, std::span<const int>(&pass_fd, pass_fd >= 0 ? 1 : 0));
}

}  // namespace

int Serve(int sock) {
  if (::chdir("/") != 0) return 125;
  ::signal(SIGPIPE, SIG_IGN);
  ::close_range(static_cast<unsigned>(sock) + 1, ~0U, 0);
  if (::send(sock, kWarmReady.data(), kWarmReady.size(), MSG_NOSIGNAL) < 0) return 125;
  // An IPC namespace per call where the call can still set its SysV shm limits there: as root.
  // As an ordinary user bwrap nests a second user namespace whose uid 0 is unmapped, and the
  // shm sysctls of an IPC namespace it owns belong to real root; the calls then share the
  // sandbox's IPC namespace, whose limits they set as a cold sandbox does.
  const bool own_ipc = ::getuid() == 0;
  bool use_clone3 = true;
  while (true) {
    while (::waitpid(-1, nullptr, WNOHANG | __WALL) > 0) {
    }
    pollfd p{sock, POLLIN, 0};
    const int r = ::poll(&p, 1, 1000);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    if (r < 0 || (p.revents & POLLIN) == 0) break;  // cordon is gone
    char data[64];
    alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))];
    iovec iov{data, sizeof data};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    std::vector<UniqueFd> fds = TakePassedFds(msg);
    // Anything else is not a call: its descriptors close, and cordon sees its reply socket end.
    if (fds.size() != kCallFds || (msg.msg_flags & MSG_CTRUNC) != 0) continue;
    int pidfd = -1;
    const std::uint64_t flags =
        CLONE_NEWPID | CLONE_NEWNS | CLONE_PIDFD | (own_ipc ? CLONE_NEWIPC : 0);
    long pid = -1;
    if (use_clone3) {
      clone_args args{};
      args.flags = flags;
      args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
      args.exit_signal = SIGCHLD;
      pid = ::syscall(SYS_clone3, &args, sizeof args);
      // A container's seccomp profile (Docker's default, without CAP_SYS_ADMIN) answers ENOSYS
      // to clone3, whose flags it cannot read: clone(2) does the same here, and is used from now.
      if (pid < 0 && errno == ENOSYS) use_clone3 = false;
    }
    if (!use_clone3) {
      // clone(2) with no new stack forks; CLONE_PIDFD puts the pidfd where parent_tid points.
      pid = ::syscall(SYS_clone, static_cast<unsigned long>(flags) | SIGCHLD, nullptr, &pidfd,
                      nullptr, nullptr);
    }
    if (pid == 0) CallInit(std::move(fds));
    if (pid < 0) {
      const std::string e =
          std::string(use_clone3 ? "error: clone3: " : "error: clone: ") + std::strerror(errno);
      Reply(fds[5].get(), e, -1);
      continue;
    }
    Reply(fds[5].get(), kWarmStarted, pidfd);
    ::close(pidfd);
  }
  return 0;
}

}  // namespace cordon::shim
