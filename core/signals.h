// Signal masks shared by every thread cordon starts.
#pragma once

namespace cordon {

// Worker threads call this so that SIGTERM/SIGINT/SIGHUP reach the main thread, which turns them
// into an orderly shutdown (cordon serve).
void BlockTerminationSignals();

}  // namespace cordon
