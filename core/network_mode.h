// How a confined process reaches the network: a plain enum shared by the policy (which parses
// it), the plan, and the shim's appliers (Landlock's net rules, the seccomp socket rules), so
// that the appliers depend on core/ alone.
#pragma once

#include "core/enum_names.h"

namespace cordon {

// kProxy: the sandbox's own network namespace (loopback only), and the names that the egress
// rules allow through cordon's proxy (docs/adr/0005-egress-proxy.md, policy/egress.h).
enum class NetworkMode { kNone, kLoopback, kProxy, kAllow };
inline constexpr EnumName<NetworkMode> kNetworkModeNames[] = {
    {NetworkMode::kNone, "none"},
    {NetworkMode::kLoopback, "loopback"},
    {NetworkMode::kProxy, "proxy"},
    {NetworkMode::kAllow, "allow"},
};

}  // namespace cordon
