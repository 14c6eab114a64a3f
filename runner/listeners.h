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

#include "core/error.h"

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
// The listeners among the processes in the pid namespace (st_dev, st_ino of its ns/pid) a holder
// of its descriptor names (NamespaceProcessesIn), ordered by port then pid; empty when none can
// be read. By the held namespace, never by a pid: a reused pid never names another sandbox's.
std::vector<Listener> NamespaceListenersIn(std::uint64_t ns_dev, std::uint64_t ns_ino);

// stop_local_server's act on one job's sandbox.
struct ListenerStopTarget {
  std::uint64_t ns_dev = 0, ns_ino = 0;  // the job's pid namespace, held open by its owner
  pid_t top_group = 0;  // the job's command's process group (its session), as cordon numbers it
  int grace_ms = 2000;  // SIGTERM, then SIGKILL after this
};
struct ListenerStopOutcome {
  pid_t pid = 0;
  int port = 0;
  std::string comm;                  // untrusted
  std::string address;               // where it listened
  pid_t pgid = 0;                    // the group that was signalled (0: the listener alone)
  bool group = false;                // the whole process group was signalled
  bool group_by_number = false;      // by kill(-pgid): the kernel has no PIDFD_SIGNAL_PROCESS_GROUP
  std::vector<std::string> signals;  // SIGTERM, then SIGKILL when the grace ran out
  bool stopped = false;              // the listener has exited
  double elapsed_ms = 0;
};
// Stops the process `pid` listening on `port` in the target's pid namespace, with its process
// group: every process is pinned by a pidfd, its namespace checked through /proc while the pidfd
// says it is still the same process, and signalled through that pidfd (the group through its
// leader's, PIDFD_SIGNAL_PROCESS_GROUP). Refusals, before any signal: not_found (no such process,
// or it holds no listener on `port`), not_owned (not in this namespace), shared_group (in the
// job's top process group, or a group whose leader is outside the sandbox), unsupported (no pid
// namespace, no pidfds).
Result<ListenerStopOutcome> StopNamespaceListener(const ListenerStopTarget& target, pid_t pid,
                                                  int port);

}  // namespace cordon
