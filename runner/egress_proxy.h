// The egress proxy (docs/adr/0005-egress-proxy.md): HTTP CONNECT, absolute-form plain HTTP and
// SOCKS5 on listeners that the shim opened inside each sandbox's network namespace and handed to
// cordon. Every connection (every plain HTTP request) is decided by the listener's EgressPolicy:
// the name before any DNS query, then every resolved address, then the port; it is recorded
// through the listener's sink, allowed or not.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"
#include "policy/egress.h"

namespace cordon {

// The port the shim's listener takes on the sandbox's own loopback.
inline constexpr int kSandboxProxyPort = 3128;

// One connection (CONNECT or SOCKS5 tunnel) or one plain HTTP request, as the network record
// holds it.
struct NetworkEvent {
  std::string identity;  // whose listener: "tool run_shell", "server github", "read_url", ...
  std::string protocol;  // "connect", "http", "socks5"
  std::string method;    // plain HTTP only ("GET")
  std::string host;      // as normalised (ParseEgressHost), or as sent when it did not parse
  int port = 0;
  std::string address;  // the address connected to; empty when refused before connecting
  bool allowed = false;
  std::string rule;              // the rule that decided ("*.npmjs.org"), empty when none matched
  std::string rule_source;       // where the rule came from ("policies.d/10-net.toml:3")
  std::string reason;            // refused: the one line the client was told
  std::string error;             // allowed, but the upstream failed (connect refused, timeout)
  std::uint64_t bytes_up = 0;    // client -> upstream, after the request head
  std::uint64_t bytes_down = 0;  // upstream -> client
  double duration_ms = 0;
  int status = 0;  // plain HTTP: the upstream's status code; a refusal: 403 (or the SOCKS reply)
};

using NetworkSink = std::function<void(const NetworkEvent&)>;

// How busy one listener is, read while its sandbox runs (before any record of an open connection
// exists): a server still downloading what it runs is told apart from one that wrote nothing.
struct EgressActivity {
  std::atomic<std::uint64_t> accepted{0};  // connections taken from the listener so far
  std::atomic<std::uint64_t> finished{0};  // of those, the ones whose record is written
};

// What the proxy knows of the host: its own interface addresses (refused like loopback unless a
// rule names them). Read once at Start.
class EgressProxy {
 public:
  static Result<std::unique_ptr<EgressProxy>> Start();
  // Stops accepting, ends every open connection (each still gets its record), joins threads.
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Serves connections arriving on `listener` (a listening stream socket, usually from a
  // sandbox's namespace) under `policy`. The sink may be called from any proxy thread, also
  // after RemoveListener returned for connections that were open (until it returns: see below).
  // An invalid `listener` makes a listener that only Connect serves (read_url's).
  // `activity`, when given, counts its connections.
  std::uint64_t AddListener(UniqueFd listener, EgressPolicy policy, std::string identity,
                            NetworkSink sink, std::shared_ptr<EgressActivity> activity = nullptr);
  // Closes the listener and ends its open connections (shutdown(2) on both ends of each; a
  // getaddrinfo in progress is waited for); when it returns no thread calls that listener's
  // sink again. Not to be called from a sink (it would wait for its own thread).
  void RemoveListener(std::uint64_t id);
  // A connected stream for an in-process client (read_url): the other end of a socketpair,
  // served exactly as if accepted on listener `id`.
  Result<UniqueFd> Connect(std::uint64_t id);

  const std::vector<IpAddress>& host_addresses() const;
  // How many times the proxy has asked the system resolver (getaddrinfo) so far: a test's proof
  // that a refused name, a resolve entry or an IP literal never reaches a resolver.
  std::uint64_t resolver_queries() const;

 private:
  EgressProxy();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The environment a proxied sandbox gets: HTTP_PROXY, HTTPS_PROXY (http://127.0.0.1:3128),
// ALL_PROXY (socks5h://127.0.0.1:3128), NO_PROXY (kDefaultNoProxy), each in both cases, and
// NODE_USE_ENV_PROXY=1 (Node >= 22.21 then honours them in fetch).
std::vector<std::pair<std::string, std::string>> ProxyEnvironment();
// The NO_PROXY default: names a client reaches directly (its own loopback).
inline constexpr std::string_view kDefaultNoProxy = "localhost,127.0.0.1,::1";

}  // namespace cordon
