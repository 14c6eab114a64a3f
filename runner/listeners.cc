// Listening TCP sockets of a sandbox's processes: pure table parsing, then a thin /proc reader.
#include "runner/listeners.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>

#include "core/unique_fd.h"
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

std::vector<Listener> NamespaceListeners(pid_t member) {
  std::vector<Listener> out;
  const std::vector<LiveProcess> procs = NamespaceProcesses(member);
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

}  // namespace cordon
