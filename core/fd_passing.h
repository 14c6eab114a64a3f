// Descriptors passed over a Unix socket (SCM_RIGHTS): one sender and one receiver for the shim's
// proxy listener, the warm server's calls and replies, and cordon's status channel.
#pragma once

#include <sys/socket.h>

#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "core/unique_fd.h"

namespace cordon {

inline constexpr std::size_t kMaxPassedFds = 8;

// sendmsg of `data` with `fds` attached (at most kMaxPassedFds), MSG_NOSIGNAL; its result.
inline ssize_t SendWithFds(int sock, std::string_view data, std::span<const int> fds) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxPassedFds * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    if (fds.size() > kMaxPassedFds) {
      errno = EINVAL;
      return -1;
    }
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  return ::sendmsg(sock, &msg, MSG_NOSIGNAL);
}

// The descriptors a received message carried, owned at once (whatever the caller makes of them).
inline std::vector<UniqueFd> TakePassedFds(msghdr& msg) {
  std::vector<UniqueFd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int passed = -1;
      std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
      fds.emplace_back(passed);
    }
  }
  return fds;
}

// Receives one message on `sock` and returns the first descriptor it carried (invalid when it
// carried none, or at end of file: the sender went away without sending).
inline UniqueFd ReceiveOneFd(int sock) {
  char data[64];
  iovec iov{data, sizeof data};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxPassedFds * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n <= 0) return {};
  std::vector<UniqueFd> fds = TakePassedFds(msg);
  if (fds.empty()) return {};
  return std::move(fds.front());
}

}  // namespace cordon
