// Signal masks shared by every thread cordon starts, and the termination handler.
#include "core/signals.h"

#include <pthread.h>
#include <signal.h>

namespace cordon {
namespace {

// Lock-free atomics are async-signal-safe; the handler does nothing else.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void OnTermination(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void InstallTerminationHandler() {
  struct sigaction sa {};
  sa.sa_handler = OnTermination;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

int TerminationSignal() { return g_signal.load(); }

}  // namespace cordon
