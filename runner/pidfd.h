// What a pidfd says of its process without waiting: the one check every pin-then-read step of
// the launch, the live table and stop_local_server makes.
#pragma once

#include <poll.h>

namespace cordon {

// Whether the process the pidfd names still runs: a pidfd polls readable once it has exited
// (a zombie included), so a /proc read made before this returns true was that process's own.
inline bool PidfdAlive(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace cordon
