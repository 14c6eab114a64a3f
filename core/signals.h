// Signal masks shared by every thread cordon starts, and the one handler that turns SIGINT,
// SIGTERM and SIGHUP into an orderly stop (docs/cli.md "Stopping").
#pragma once

#include <atomic>

namespace cordon {

// Worker threads call this so that SIGTERM/SIGINT/SIGHUP reach the main thread, which turns them
// into an orderly shutdown.
void BlockTerminationSignals();

// Installs the handler for SIGINT, SIGTERM and SIGHUP (no SA_RESTART: a blocking read in the
// main thread returns EINTR). The handler only records the signal: whoever runs the session
// sees it, ends the sandboxed tree, writes the records and exits 128+N. A second signal while
// that runs changes nothing (the first one is the one reported).
void InstallTerminationHandler();
// The first termination signal received since InstallTerminationHandler, or 0.
int TerminationSignal();

}  // namespace cordon
