// The binding of a sandbox's listener to the proxy (runner/egress_binding.h).
#include "runner/egress_binding.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

namespace cordon {

EgressBinding::EgressBinding(std::shared_ptr<EgressProxy> proxy, EgressPolicy policy,
                             std::string identity, NetworkSink sink)
    : proxy_(proxy),
      policy_(std::move(policy)),
      identity_(std::move(identity)),
      sink_(std::move(sink)) {}

EgressBinding::~EgressBinding() {
  std::lock_guard<std::mutex> lock(mu_);
  if (id_ != 0 && proxy_ != nullptr) proxy_->RemoveListener(id_);
}

bool EgressBinding::bound() const {
  std::lock_guard<std::mutex> lock(mu_);
  return id_ != 0;
}

Status CheckSandboxListener(int fd) {
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &len) != 0 || value != AF_INET) {
    return Fail(Code::kSandboxUnavailable, "the shim's proxy listener is not an IPv4 socket");
  }
  len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) != 0 || value != SOCK_STREAM) {
    return Fail(Code::kSandboxUnavailable, "the shim's proxy listener is not a stream socket");
  }
  len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0 || value != 1) {
    return Fail(Code::kSandboxUnavailable, "the shim's proxy listener is not listening");
  }
  sockaddr_in addr{};
  len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      addr.sin_addr.s_addr != htonl(INADDR_LOOPBACK) || ntohs(addr.sin_port) != kSandboxProxyPort) {
    return Fail(Code::kSandboxUnavailable, "the shim's proxy listener is not on 127.0.0.1:" +
                                               std::to_string(kSandboxProxyPort));
  }
  return {};
}

Json EgressPolicyJson(const EgressPolicy& p) {
  auto rules = [](const std::vector<DomainRule>& list) {
    Json out = Json::array();
    for (const DomainRule& r : list) out.push_back({{"rule", r.text}, {"source", r.source}});
    return out;
  };
  Json resolve = Json::array();
  for (const ResolveEntry& e : p.resolve) {
    resolve.push_back({{"name", e.name}, {"addresses", e.addresses}, {"source", e.source}});
  }
  return {{"allow", rules(p.allow)},
          {"deny", rules(p.deny)},
          {"presets", p.presets},
          {"resolve", std::move(resolve)}};
}

Status EgressBinding::BindConnectOnly() {
  std::lock_guard<std::mutex> lock(mu_);
  if (id_ != 0) return Fail(Code::kInternal, "the binding is bound already");
  if (proxy_ == nullptr) return Fail(Code::kSandboxUnavailable, "no egress proxy is running");
  id_ = proxy_->AddListener(UniqueFd(), policy_, identity_, sink_, activity_);
  return {};
}

Result<UniqueFd> EgressBinding::Connect() {
  std::lock_guard<std::mutex> lock(mu_);
  if (id_ == 0 || proxy_ == nullptr) return Fail(Code::kSandboxUnavailable, "not bound");
  return proxy_->Connect(id_);
}

Status EgressBinding::Bind(UniqueFd listener) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id_ != 0) return Fail(Code::kSandboxUnavailable, "a second proxy listener was sent");
  if (proxy_ == nullptr) return Fail(Code::kSandboxUnavailable, "no egress proxy is running");
  TRY(CheckSandboxListener(listener.get()));
  id_ = proxy_->AddListener(std::move(listener), policy_, identity_, sink_, activity_);
  return {};
}

}  // namespace cordon
