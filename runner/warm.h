// The warm sandbox (docs/adr/0008-warm-sandbox.md): one bwrap running `cordon-shim --serve`,
// which forks each of serve's foreground calls into its own pid and mount namespaces.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"
#include "runner/cgroup.h"

namespace cordon {

// The server's end of the control socket in the sandbox.
inline constexpr int kWarmSockFd = 3;

// The descriptors one call hands the server (runner/shim/serve.h): the frame memfd, stdin,
// stdout, stderr, the status socket, the reply socket.
struct WarmCallFds {
  int frame = -1, in = -1, out = -1, err = -1, status = -1, reply = -1;
};

class WarmSandbox {
 public:
  // Starts bwrap with `argv` (WarmServerArgv) from a thread of its own, which stays for the
  // sandbox's life (bwrap --die-with-parent follows the thread that forked it), in `cgroup`
  // when there is one; waits for the server to say it is ready.
  static Result<std::shared_ptr<WarmSandbox>> Start(const std::vector<std::string>& argv,
                                                    std::string id,
                                                    std::optional<CgroupJob> cgroup);
  ~WarmSandbox();  // closes the control socket: the server, bwrap and every call still in it end
  WarmSandbox(const WarmSandbox&) = delete;
  WarmSandbox& operator=(const WarmSandbox&) = delete;

  // Sends one call (the sandbox is broken when it cannot: it takes no further calls); then
  // AwaitReply on the call's reply socket gives the pidfd of the call's init.
  Status Submit(const WarmCallFds& fds);
  Result<UniqueFd> AwaitReply(int reply_fd);
  const std::string& id() const { return id_; }
  std::uint64_t TakeCallNumber() { return ++calls_; }
  std::uint64_t calls() const { return calls_.load(); }
  bool broken() const { return broken_.load() || exited_.load(); }

 private:
  WarmSandbox() = default;
  std::string id_;
  std::optional<CgroupJob> cgroup_;
  UniqueFd sock_;
  std::mutex send_mu_;
  std::mutex pid_mu_;  // pid_ and exited_: no signal to a pid the waiter has reaped
  pid_t pid_ = -1;
  std::thread waiter_;
  std::atomic<bool> exited_{false}, broken_{false};
  std::atomic<std::uint64_t> calls_{0};
};

// The session's warm sandboxes by launch key (at most kMaxSandboxes; the least recently used
// goes, once the calls holding it end). A sandbox is replaced after kMaxCalls calls or when
// broken.
class WarmPool {
 public:
  static constexpr std::size_t kMaxSandboxes = 4;
  static constexpr std::uint64_t kMaxCalls = 500;
  using Starter = std::function<Result<std::shared_ptr<WarmSandbox>>(const std::string& id)>;
  // The sandbox for `key`, started with `start` when there is none usable.
  Result<std::shared_ptr<WarmSandbox>> Get(const std::string& key, const Starter& start);
  void Drop(const std::shared_ptr<WarmSandbox>& sandbox);

 private:
  struct Entry {
    std::shared_ptr<WarmSandbox> sandbox;
    std::uint64_t last_use = 0;
  };
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::uint64_t tick_ = 0;
  std::uint64_t started_ = 0;
};

}  // namespace cordon
