// Signal masks shared by every thread cordon starts.
#include "core/signals.h"

#include <pthread.h>
#include <signal.h>

namespace cordon {

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

}  // namespace cordon
