// cordon-shim: started by bwrap inside the sandbox. Reads its spec from an inherited memfd,
// applies Contain() (rlimits, no_new_privs, capabilities, Landlock, seccomp), then forks: the
// child execs the command in a new session; the shim waits and reports the real exit status and
// resource use on the status fd, with the SHA-256 of the spec bytes it read (so a test can match
// them with `cordon exec --plan`). It never runs the command if any step fails.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/fd_passing.h"
#include "core/unique_fd.h"
#include "runner/contain.h"
#include "runner/shim/run.h"
#include "runner/shim/serve.h"
#include "runner/shim/sha256.h"

namespace {

int g_status_fd = -1;
std::string g_spec_sha256;  // of the spec as read, before parsing

[[noreturn]] void Die(const std::string& step, const cordon::Error& e) {
  cordon::shim::StatusChannel{g_status_fd, g_spec_sha256}.Die(step, e);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Network mode proxy (docs/adr/0005-egress-proxy.md): a listener on the sandbox's own loopback,
// opened here, inside its network namespace and before anything is confined, and sent to cordon,
// which accepts on it outside. The shim keeps no copy: the command cannot accept on it, and the
// port stays taken, so nothing in the sandbox can listen there in its place.
void SendProxyListener(int port) {
  cordon::UniqueFd ls(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!ls.valid()) Die("proxy", {cordon::Code::kSandboxUnavailable, "socket", errno, {}});
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(ls.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(ls.get(), 128) != 0) {
    Die("proxy",
        {cordon::Code::kSandboxUnavailable,
         std::string("listen on 127.0.0.1:") + std::to_string(port) + ": " + std::strerror(errno),
         errno,
         {}});
  }
  if (g_status_fd < 0) Die("proxy", {cordon::Code::kSandboxUnavailable, "no status fd", 0, {}});
  const std::string_view line = cordon::kProxyListenerLine;
  const int fd = ls.get();
  if (cordon::SendWithFds(g_status_fd, line, std::span<const int>(&fd, 1)) !=
      static_cast<ssize_t>(line.size())) {
    Die("proxy", {cordon::Code::kSandboxUnavailable, "sendmsg of the proxy listener", errno, {}});
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The warm sandbox's fork server (docs/adr/0008-warm-sandbox.md).
  for (int i = 1; i + 2 < argc; ++i) {
    if (std::strcmp(argv[i], "--serve") == 0 && std::strcmp(argv[i + 1], "--sock-fd") == 0)
      _exit(cordon::shim::Serve(std::atoi(argv[i + 2])));  // no exit-time work (LSan) inside
  }
  int spec_fd = -1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--spec-fd") == 0) spec_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--status-fd") == 0) g_status_fd = std::atoi(argv[i + 1]);
  }
  if (g_status_fd >= 0) {
    // Keep the status fd out of reach of the command (CLOEXEC) and at a high number.
    int fd = ::fcntl(g_status_fd, F_DUPFD_CLOEXEC, 100);
    ::close(g_status_fd);
    g_status_fd = fd;
  }
  if (spec_fd < 0) Die("spec", {cordon::Code::kSandboxUnavailable, "no --spec-fd", 0, {}});
  std::string text = ReadAll(spec_fd);
  g_spec_sha256 = cordon::shim::Sha256Hex(text);
  // Nothing else cordon or bwrap passed down (the spec memfd included) is the command's business.
  if (g_status_fd >= 3) {
    ::close_range(3, static_cast<unsigned>(g_status_fd) - 1, 0);
    ::close_range(static_cast<unsigned>(g_status_fd) + 1, ~0U, 0);
  } else {
    ::close_range(3, ~0U, 0);
  }
  auto parsed = cordon::ParseJsonBounded(text);
  if (!parsed) Die("spec", parsed.error());
  auto spec = cordon::ContainSpecFromJson(*parsed);
  if (!spec) Die("spec", spec.error());

  // A cordon that died while bwrap was starting supervises nothing: run nothing for it.
  if (g_status_fd >= 0) {
    pollfd gone{g_status_fd, 0, 0};
    if (::poll(&gone, 1, 0) > 0 && (gone.revents & (POLLERR | POLLHUP)) != 0) _exit(125);
  }
  if (spec->proxy_port > 0) SendProxyListener(spec->proxy_port);
  cordon::shim::RunCommand(*spec, {g_status_fd, g_spec_sha256}, {});
}
