// Listening TCP sockets of a sandbox's processes: pure table parsing, then a thin /proc reader.
#include "runner/listeners.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <map>

#include "core/clock.h"
#include "core/unique_fd.h"
#include "runner/pidfd.h"
#include "runner/proc_usage.h"

namespace cordon {
namespace {

bool ParseHex32(std::string_view s, std::uint32_t& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && end == s.data() + s.size();
}

// "0100007F:1F90" (v4) or 32 hex digits ":1F90" (v6): the kernel prints each 32-bit word of the
// address in host byte order, the port in network order as a number.
bool ParseEndpoint(std::string_view field, bool v6, std::string& address, int& port) {
  const std::size_t colon = field.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view addr = field.substr(0, colon);
  std::uint32_t p = 0;
  if (!ParseHex32(field.substr(colon + 1), p) || p > 65535) return false;
  const std::size_t words = v6 ? 4 : 1;
  if (addr.size() != words * 8) return false;
  std::uint32_t raw[4] = {};
  for (std::size_t i = 0; i < words; ++i) {
    if (!ParseHex32(addr.substr(i * 8, 8), raw[i])) return false;
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(v6 ? AF_INET6 : AF_INET, raw, text, sizeof text) == nullptr) return false;
  address = text;
  port = static_cast<int>(p);
  return true;
}

}  // namespace

std::vector<TcpListen> ParseProcNetTcp(std::string_view text, bool v6) {
  std::vector<TcpListen> out;
  bool header = true;
  while (!text.empty()) {
    const std::size_t nl = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(std::min(nl + 1, text.size()));
    if (header) {  // "  sl  local_address rem_address   st ..."
      header = false;
      continue;
    }
    std::vector<std::string_view> f;
    while (!line.empty()) {
      const std::size_t b = line.find_first_not_of(' ');
      if (b == std::string_view::npos) break;
      line.remove_prefix(b);
      const std::size_t e = std::min(line.find(' '), line.size());
      f.push_back(line.substr(0, e));
      line.remove_prefix(e);
    }
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    if (f.size() < 10 || f[3] != "0A") continue;
    TcpListen l;
    auto [end, ec] = std::from_chars(f[9].data(), f[9].data() + f[9].size(), l.inode);
    if (ec != std::errc() || end != f[9].data() + f[9].size() || l.inode == 0) continue;
    if (!ParseEndpoint(f[1], v6, l.address, l.port)) continue;
    out.push_back(std::move(l));
  }
  return out;
}

std::optional<std::uint64_t> SocketInode(std::string_view link) {
  constexpr std::string_view kPrefix = "socket:[";
  if (link.substr(0, kPrefix.size()) != kPrefix || link.empty() || link.back() != ']')
    return std::nullopt;
  const std::string_view digits = link.substr(kPrefix.size(), link.size() - kPrefix.size() - 1);
  std::uint64_t inode = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), inode);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return inode;
}

namespace {

// The listeners among `procs` (the processes of one pid namespace).
std::vector<Listener> ListenersOf(const std::vector<LiveProcess>& procs) {
  std::vector<Listener> out;
  // Every listening socket of the namespaces these processes are in, by inode.
  std::map<std::uint64_t, TcpListen> listening;
  for (const LiveProcess& p : procs) {
    const std::string base = "/proc/" + std::to_string(p.pid) + "/net/";
    for (bool v6 : {false, true}) {
      auto text = ReadProcFile(base + (v6 ? "tcp6" : "tcp"), 1 << 20);
      if (!text) continue;
      for (TcpListen& l : ParseProcNetTcp(*text, v6)) listening[l.inode] = std::move(l);
    }
  }
  if (listening.empty()) return out;
  for (const LiveProcess& p : procs) {
    const std::string dir = "/proc/" + std::to_string(p.pid) + "/fd";
    UniqueDir d = UniqueDir::Open(dir.c_str());
    if (!d.valid()) continue;
    while (dirent* e = d.Next()) {
      if (e->d_name[0] == '.') continue;
      char link[64] = {};
      const ssize_t n = ::readlinkat(::dirfd(d.get()), e->d_name, link, sizeof link - 1);
      if (n <= 0) continue;
      auto inode = SocketInode(std::string_view(link, static_cast<std::size_t>(n)));
      if (!inode) continue;
      auto it = listening.find(*inode);
      if (it == listening.end()) continue;
      out.push_back(Listener{p.pid, p.comm, it->second.address, it->second.port});
    }
  }
  std::sort(out.begin(), out.end(), [](const Listener& a, const Listener& b) {
    return a.port != b.port ? a.port < b.port : a.pid < b.pid;
  });
  // A socket shared by several fds of one process is one listener.
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Listener& a, const Listener& b) {
                          return a.port == b.port && a.pid == b.pid && a.address == b.address;
                        }),
            out.end());
  return out;
}

// PIDFD_SIGNAL_PROCESS_GROUP (linux/pidfd.h, Linux 6.9): the signal goes to the process group
// whose id is the pidfd's process (its leader). Debian 12's headers predate it.
constexpr unsigned kPidfdSignalProcessGroup = 1U << 2;

// Waits up to `ms` for the pidfd's process to exit; whether it did.
bool WaitExit(int pidfd, double ms) {
  const double until = MonotonicMs() + ms;
  for (;;) {
    const double left = until - MonotonicMs();
    pollfd p{pidfd, POLLIN, 0};
    const int r = ::poll(&p, 1, left > 0 ? static_cast<int>(left) + 1 : 0);
    if (r > 0) return true;
    if (r < 0 && errno == EINTR) continue;
    if (left <= 0) return false;
  }
}

// A process pinned by a pidfd, with what /proc said of it while the pidfd still named it.
struct Pinned {
  UniqueFd fd;
  std::uint64_t ns_dev = 0, ns_ino = 0;
  ProcStat stat;
};

Result<Pinned> Pin(pid_t pid) {
  Pinned p;
  p.fd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!p.fd.valid()) {
    if (errno == ENOSYS) {
      return Fail(Code::kUnsupported,
                  "this kernel has no pidfd_open (Linux 5.3): cordon signals no process by number");
    }
    return Fail(Code::kNotFound, "no process " + std::to_string(pid));
  }
  const std::string dir = "/proc/" + std::to_string(pid);
  struct stat ns {};
  if (::stat((dir + "/ns/pid").c_str(), &ns) != 0) {
    // Not ours to read (another user's), or gone meanwhile.
    if (errno == EACCES || errno == EPERM) {
      return Fail(Code::kNotOwned,
                  "process " + std::to_string(pid) + " is not in this job's sandbox");
    }
    return Fail(Code::kNotFound, "no process " + std::to_string(pid));
  }
  auto text = ReadProcFile(dir + "/stat");
  auto stat = text ? ParseProcStat(*text) : std::nullopt;
  // Read while the pidfd still names a live process: what was read is its own, not a successor's.
  if (!stat || !PidfdAlive(p.fd.get())) {
    return Fail(Code::kNotFound, "process " + std::to_string(pid) + " has ended");
  }
  p.ns_dev = ns.st_dev;
  p.ns_ino = ns.st_ino;
  p.stat = std::move(*stat);
  return p;
}

// SIGTERM or SIGKILL to the listener's group through its leader's pidfd, or to the listener
// alone when no leader is pinned.
void SendStop(const Pinned& listener, const Pinned* leader, int sig, ListenerStopOutcome& out) {
  if (leader != nullptr) {
    if (::syscall(SYS_pidfd_send_signal, leader->fd.get(), sig, nullptr,
                  kPidfdSignalProcessGroup) == 0) {
      return;
    }
    if (errno == EINVAL && PidfdAlive(leader->fd.get())) {
      // A kernel before 6.9: by number, right after the leader was seen alive (a group that
      // ended and whose id was reused in between is the race the tool's description names).
      out.group_by_number = true;
      ::kill(-out.pgid, sig);
      return;
    }
  }
  ::syscall(SYS_pidfd_send_signal, listener.fd.get(), sig, nullptr, 0);
}

}  // namespace

std::vector<Listener> NamespaceListenersIn(std::uint64_t ns_dev, std::uint64_t ns_ino) {
  return ListenersOf(NamespaceProcessesIn(ns_dev, ns_ino));
}

Result<ListenerStopOutcome> StopNamespaceListener(const ListenerStopTarget& target, pid_t pid,
                                                  int port) {
  if (target.ns_ino == 0) {
    return Fail(Code::kUnsupported,
                "the job has no pid namespace of its own (the weaker mode, or it has ended): "
                "cordon cannot tell its processes from others, so it signals none");
  }
  // Whether the pid is the job's is read from the job's own namespace first: a pid outside it
  // is not_owned whether or not such a process exists, so no answer tells the agent which host
  // pids are alive.
  const std::string not_owned = "process " + std::to_string(pid) +
                                " is not in this job's sandbox (another job's, a server's or the "
                                "host's, or none): nothing was signalled";
  if (pid <= 0) return Fail(Code::kNotOwned, not_owned);
  const double start = MonotonicMs();
  ListenerStopOutcome out;
  out.pid = pid;
  out.port = port;
  std::string ports;
  bool found = false, member = false;
  for (const Listener& l : NamespaceListenersIn(target.ns_dev, target.ns_ino)) {
    if (l.pid != pid) continue;
    member = true;
    if (l.port == port) {
      found = true;
      out.comm = l.comm;
      out.address = l.address;
      break;
    }
    ports += (ports.empty() ? "" : ", ") + std::to_string(l.port);
  }
  if (!member) {
    for (const LiveProcess& p : NamespaceProcessesIn(target.ns_dev, target.ns_ino))
      member = member || p.pid == pid;
  }
  if (!member) return Fail(Code::kNotOwned, not_owned);
  if (!found) {
    return Fail(Code::kNotFound,
                "process " + std::to_string(pid) + " does not listen on port " +
                    std::to_string(port) +
                    (ports.empty() ? " (it listens on none)" : " (it listens on " + ports + ")"));
  }
  // Pinned, then checked again: the pid is still the job's process (not a successor's).
  auto pinned = Pin(pid);
  if (!pinned) {
    if (pinned.error().code == Code::kNotOwned) return Fail(Code::kNotOwned, not_owned);
    return std::unexpected(pinned.error());
  }
  Pinned listener = std::move(*pinned);
  if (listener.ns_dev != target.ns_dev || listener.ns_ino != target.ns_ino) {
    return Fail(Code::kNotOwned, not_owned);
  }
  const pid_t pgid = listener.stat.pgrp;
  if (target.top_group <= 0) {
    return Fail(Code::kUnsupported,
                "the job's command never reported its process group, so cordon cannot tell "
                "its top group from a server's own: use process_cancel");
  }
  if (pgid == target.top_group) {
    return Fail(Code::kSharedGroup,
                "process " + std::to_string(pid) +
                    " is in the job's top process group: stopping its group stops the job. Use "
                    "process_cancel (or start the server in a group of its own, e.g. setsid)");
  }
  std::optional<Pinned> leader;
  if (pgid == pid) {
    leader = std::move(listener);
  } else if (pgid > 1) {
    auto l = Pin(pgid);
    if (l && (l->ns_dev != target.ns_dev || l->ns_ino != target.ns_ino)) {
      return Fail(Code::kSharedGroup, "process " + std::to_string(pid) +
                                          " is in a process group whose leader is outside the "
                                          "job's sandbox: use process_cancel");
    }
    if (!l && l.error().code == Code::kNotOwned) {
      return Fail(Code::kSharedGroup, "process " + std::to_string(pid) +
                                          " is in a process group whose leader is outside the "
                                          "job's sandbox: use process_cancel");
    }
    // A leader that left its group (or ended) leaves the listener to be signalled alone.
    if (l && l->stat.pgrp == pgid) leader = std::move(*l);
  }
  const Pinned& self = leader && pgid == pid ? *leader : listener;
  out.group = leader.has_value();
  out.pgid = out.group ? pgid : 0;
  out.signals.push_back("SIGTERM");
  SendStop(self, leader ? &*leader : nullptr, SIGTERM, out);
  if (!WaitExit(self.fd.get(), target.grace_ms)) {
    out.signals.push_back("SIGKILL");
    SendStop(self, leader ? &*leader : nullptr, SIGKILL, out);
    WaitExit(self.fd.get(), 2000);
  }
  out.stopped = !PidfdAlive(self.fd.get());
  out.elapsed_ms = MonotonicMs() - start;
  return out;
}

}  // namespace cordon
