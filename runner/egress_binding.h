// One sandbox's place on the session's egress proxy (docs/adr/0005-egress-proxy.md): its rules,
// its identity and its record sink, bound to the listener the shim opened inside the sandbox's
// network namespace and sent to cordon. The listener leaves the proxy when the last owner drops
// the binding, so no connection of a finished sandbox is served after its process record.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/text.h"
#include "runner/egress_proxy.h"

namespace cordon {

class EgressBinding {
 public:
  EgressBinding(std::shared_ptr<EgressProxy> proxy, EgressPolicy policy, std::string identity,
                NetworkSink sink);
  ~EgressBinding();
  EgressBinding(const EgressBinding&) = delete;
  EgressBinding& operator=(const EgressBinding&) = delete;

  // The listener the shim sent: a listening TCP stream socket, taken once; anything else (a
  // second descriptor, a connected socket, another family) is refused.
  Status Bind(UniqueFd listener);
  // An in-process client's binding (read_url): no listener, only Connect.
  Status BindConnectOnly();
  // A stream served under this binding's rules, identity and sink (EgressProxy::Connect).
  Result<UniqueFd> Connect();
  bool bound() const;
  const EgressPolicy& policy() const { return policy_; }
  const std::string& identity() const { return identity_; }
  // The listener's connection counts, shared: it outlives the binding for whoever holds it.
  std::shared_ptr<const EgressActivity> activity() const { return activity_; }

 private:
  std::shared_ptr<EgressProxy> proxy_;
  EgressPolicy policy_;
  std::string identity_;
  NetworkSink sink_;
  std::shared_ptr<EgressActivity> activity_ = std::make_shared<EgressActivity>();
  mutable std::mutex mu_;
  std::uint64_t id_ = 0;
};

// The rules as the plan, the process record and `policy show` print them: each rule with its
// source, the presets, the resolve entries.
Json EgressPolicyJson(const EgressPolicy& policy);

// Whether `fd` is what the shim must send: a listening IPv4 TCP socket on 127.0.0.1.
Status CheckSandboxListener(int fd);

}  // namespace cordon
