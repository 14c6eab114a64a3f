// The TCP listeners of a sandbox's processes (issue 23's local_servers): each process's
// /proc/<pid>/net/tcp{,6} (its own network namespace's tables) mapped to the process through the
// socket inodes in /proc/<pid>/fd. Parsing is pure; the reader is thin.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cordon {

// A listening socket of a /proc/net/tcp or tcp6 table.
struct TcpListen {
  std::uint64_t inode = 0;
  std::string address;  // as inet_ntop writes it
  int port = 0;
};
// The rows in state LISTEN (0A) of a /proc/<pid>/net/tcp (`v6` false) or tcp6 table; malformed
// rows are skipped.
std::vector<TcpListen> ParseProcNetTcp(std::string_view text, bool v6);
// The inode of a "socket:[123]" fd link; nullopt for anything else.
std::optional<std::uint64_t> SocketInode(std::string_view link);

// A process of a sandbox that holds a listening TCP socket.
struct Listener {
  pid_t pid = 0;     // host pid
  std::string comm;  // the name it gave itself: untrusted
  std::string address;
  int port = 0;
};
// The listeners among the processes in the pid namespace of `member` (NamespaceProcesses),
// ordered by port then pid; empty when none can be read.
std::vector<Listener> NamespaceListeners(pid_t member);

}  // namespace cordon
