// cordon-shim --serve: the warm sandbox's fork server (docs/adr/0008-warm-sandbox.md).
#pragma once

#include <string_view>

namespace cordon::shim {

// What a call's reply carries before its init's pidfd (SCM_RIGHTS), and the server's first
// datagram on the control socket once it is ready.
inline constexpr std::string_view kWarmReady = "cordon-warm-ready";
inline constexpr std::string_view kWarmStarted = "started";
// The in-sandbox path where the session's stage directory is bound (the upper layers).
inline constexpr const char* kWarmStageDir = "/run/cordon/stage";

// Serves calls on `sock` (SOCK_SEQPACKET) until cordon closes it. Each call is one datagram
// with six descriptors: the call frame (a memfd), stdin, stdout, stderr, the status socket
// and the reply socket.
int Serve(int sock);

}  // namespace cordon::shim
