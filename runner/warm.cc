// The warm sandbox and the session's pool of them (runner/warm.h).
#include "runner/warm.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>

#include "core/fd_passing.h"
#include "core/signals.h"
#include "runner/shim/serve.h"

namespace cordon {
namespace {

constexpr int kReadyTimeoutMs = 10000;
constexpr int kReplyTimeoutMs = 10000;

// Waits for one datagram on `fd`; its text and the descriptor it carried, if any.
Result<std::pair<std::string, UniqueFd>> ReceiveOne(int fd, int timeout_ms, const char* what) {
  pollfd p{fd, POLLIN, 0};
  int r = 0;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return Fail(Code::kSandboxUnavailable, std::string(what) + ": no answer in time");
  char data[256];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  iovec iov{data, sizeof data};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  std::vector<UniqueFd> fds = n > 0 ? TakePassedFds(msg) : std::vector<UniqueFd>{};
  UniqueFd passed;
  if (fds.size() == 1) passed = std::move(fds[0]);
  if (n <= 0) return Fail(Code::kSandboxUnavailable, std::string(what) + ": the server is gone");
  return std::make_pair(std::string(data, static_cast<std::size_t>(n)), std::move(passed));
}

std::string ReadAvailable(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; out.size() < 4096 && (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
  return out;
}

}  // namespace

Result<std::shared_ptr<WarmSandbox>> WarmSandbox::Start(const std::vector<std::string>& argv,
                                                        std::string id,
                                                        std::optional<CgroupJob> cgroup) {
  std::shared_ptr<WarmSandbox> s(new WarmSandbox());
  s->id_ = std::move(id);
  if (cgroup) s->cgroup_.emplace(std::move(*cgroup));
  int sv[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return SysFail(Code::kSandboxUnavailable, "socketpair", "");
  s->sock_ = UniqueFd(sv[0]);
  UniqueFd server_end(sv[1]);
  Pipe err = MakePipe();
  if (!err.valid()) return SysFail(Code::kSandboxUnavailable, "pipe2", "");
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull.valid()) return SysFail(Code::kSandboxUnavailable, "open", "/dev/null");
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::string path_env = "PATH=/usr/bin:/bin";
  char* cenv[] = {path_env.data(), nullptr};
  const std::vector<std::string> procs =
      s->cgroup_ ? s->cgroup_->procs_files() : std::vector<std::string>{};
  std::promise<pid_t> forked;
  auto forked_f = forked.get_future();
  WarmSandbox* raw = s.get();
  s->waiter_ = std::thread([&, raw] {
    BlockTerminationSignals();
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // Only async-signal-safe calls until execve.
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) _exit(126);
      for (const auto& f : procs) {
        const int fd = ::open(f.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ::write(fd, "0", 1) != 1) _exit(126);
        ::close(fd);
      }
      ::setsid();
      const int hi[4] = {::fcntl(devnull.get(), F_DUPFD_CLOEXEC, 64),
                         ::fcntl(devnull.get(), F_DUPFD_CLOEXEC, 64),
                         ::fcntl(err.write.get(), F_DUPFD_CLOEXEC, 64),
                         ::fcntl(server_end.get(), F_DUPFD_CLOEXEC, 64)};
      for (int i = 0; i < 4; ++i) {
        if (hi[i] < 0 || ::dup2(hi[i], i) < 0) _exit(126);
      }
      ::syscall(SYS_close_range, 4U, ~0U, 0);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
      ::execve(cargv[0], cargv.data(), cenv);
      _exit(127);
    }
    {
      std::lock_guard<std::mutex> lock(raw->pid_mu_);
      raw->pid_ = pid;
    }
    forked.set_value(pid);
    if (pid < 0) return;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::lock_guard<std::mutex> lock(raw->pid_mu_);
    raw->exited_ = true;
  });
  const pid_t pid = forked_f.get();
  server_end.Reset();
  err.write.Reset();
  if (pid < 0) return SysFail(Code::kSandboxUnavailable, "fork", "");
  auto ready = ReceiveOne(s->sock_.get(), kReadyTimeoutMs, "the warm sandbox");
  if (!ready || ready->first != shim::kWarmReady) {
    s->broken_ = true;
    ::fcntl(err.read.get(), F_SETFL, O_NONBLOCK);
    const std::string why = ReadAvailable(err.read.get());
    return Fail(
        Code::kSandboxUnavailable,
        "the warm sandbox did not start" +
            (why.empty() ? (ready ? std::string() : ": " + ready.error().message) : ": " + why));
  }
  return s;
}

WarmSandbox::~WarmSandbox() {
  sock_.Reset();  // the server reads EOF and leaves; bwrap follows, and its pid namespace
  for (int i = 0; i < 40 && !exited_.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  {
    std::lock_guard<std::mutex> lock(pid_mu_);
    if (!exited_.load() && pid_ > 0) ::kill(pid_, SIGKILL);
  }
  if (waiter_.joinable()) waiter_.join();
}

Status WarmSandbox::Submit(const WarmCallFds& f) {
  if (broken()) return Fail(Code::kSandboxUnavailable, "the warm sandbox " + id_ + " has ended");
  const int fds[6] = {f.frame, f.in, f.out, f.err, f.status, f.reply};
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (SendWithFds(sock_.get(), "call", fds) < 0) {
      broken_ = true;
      return SysFail(Code::kSandboxUnavailable, "the warm sandbox " + id_ + ": sendmsg", "");
    }
  }
  return {};
}

Result<UniqueFd> WarmSandbox::AwaitReply(int reply_fd) {
  auto got = ReceiveOne(reply_fd, kReplyTimeoutMs, "the warm sandbox's reply");
  if (got && got->first == shim::kWarmStarted && got->second.valid()) return std::move(got->second);
  broken_ = true;
  return Fail(Code::kSandboxUnavailable, "the warm sandbox " + id_ + " did not start the call: " +
                                             (got ? got->first : got.error().message));
}

Result<std::shared_ptr<WarmSandbox>> WarmPool::Get(const std::string& key, const Starter& start) {
  std::shared_ptr<WarmSandbox> retired;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  ++tick_;
  auto it = entries_.find(key);
  if (it != entries_.end() &&
      (it->second.sandbox->broken() || it->second.sandbox->calls() >= kMaxCalls)) {
    retired = std::move(it->second.sandbox);
    entries_.erase(it);
    it = entries_.end();
  }
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxSandboxes) {
      auto lru = entries_.begin();
      for (auto e = entries_.begin(); e != entries_.end(); ++e) {
        if (e->second.last_use < lru->second.last_use) lru = e;
      }
      retired = std::move(lru->second.sandbox);
      entries_.erase(lru);
    }
    ASSIGN_OR_RETURN(
        auto made, start("warm-" + std::to_string(::getpid()) + "-" + std::to_string(++started_)));
    it = entries_.emplace(key, Entry{std::move(made), 0}).first;
  }
  it->second.last_use = tick_;
  return it->second.sandbox;
}

void WarmPool::Drop(const std::shared_ptr<WarmSandbox>& sandbox) {
  std::shared_ptr<WarmSandbox> retired;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.sandbox == sandbox) {
      retired = std::move(it->second.sandbox);
      entries_.erase(it);
      return;
    }
  }
}

}  // namespace cordon
