// Egress by domain (issue 12, docs/adr/0005-egress-proxy.md): the pure rules and name decision
// of policy/egress, then the proxy engine (runner/egress_proxy) on real sockets with real
// clients (curl, Python's urllib) against local upstream servers on 127.0.0.1. Names look real
// through resolve entries ("api.example.test=127.0.0.1"); nothing leaves 127.0.0.1, and the only
// name the system resolver is asked about is "localhost" (/etc/hosts).
#include "policy/egress.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runner/egress_proxy.h"
#include "runner/preset_cache.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------- policy/egress, pure

TEST(EgressRuleTest, ParseDomainRuleNormalisesAndRefusesWhatIsNotARule) {
  auto r = ParseDomainRule("API.Example.COM.", "t");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->host, "api.example.com");
  EXPECT_EQ(r->text, "api.example.com");
  EXPECT_FALSE(r->wildcard);
  EXPECT_FALSE(r->port);
  EXPECT_TRUE(r->AllowsPort(80));
  EXPECT_TRUE(r->AllowsPort(443));
  EXPECT_FALSE(r->AllowsPort(8080));

  r = ParseDomainRule("*.example.com:8443", "t");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->wildcard);
  EXPECT_EQ(r->host, "example.com");
  EXPECT_EQ(r->port, 8443);
  EXPECT_EQ(r->text, "*.example.com:8443");
  EXPECT_FALSE(r->AllowsPort(443));

  r = ParseDomainRule("[::1]:8443", "t");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->address);
  EXPECT_EQ(r->host, "::1");
  EXPECT_EQ(r->text, "[::1]:8443");

  r = ParseDomainRule("0x7f.1", "t");  // a legacy IPv4 form is an address rule, not a name
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->address);
  EXPECT_EQ(r->host, "127.0.0.1");

  for (const char* bad :
       {"", "*", "*.com", "a*.example.com", "ex ample.com", "example.com:0", "example.com:65536",
        "example.com:x", "[example.com]", "[::1", "-bad.example.com", "1.2.3.999"}) {
    EXPECT_FALSE(ParseDomainRule(bad, "t")) << bad;
  }
  EXPECT_FALSE(ParseDomainRule(std::string_view("a\0b.com", 7), "t"));
}

TEST(EgressRuleTest, ParseEgressHostTurnsEveryAddressFormIntoAnAddress) {
  struct Case {
    const char* in;
    const char* name;
    bool address;
  };
  const Case cases[] = {
      {"0x7f.1", "127.0.0.1", true},
      {"2130706433", "127.0.0.1", true},
      {"127.1", "127.0.0.1", true},
      {"0177.0.0.1", "127.0.0.1", true},
      {"::ffff:127.0.0.1", "127.0.0.1", true},
      {"[::ffff:7f00:1]", "127.0.0.1", true},
      {"[::1]", "::1", true},
      {"0", "0.0.0.0", true},
      {"API.Example.Test.", "api.example.test", false},
      {"registry.npmjs.org", "registry.npmjs.org", false},
  };
  for (const Case& c : cases) {
    auto h = ParseEgressHost(c.in);
    ASSERT_TRUE(h) << c.in << ": " << h.error().message;
    EXPECT_EQ(h->name, c.name) << c.in;
    EXPECT_EQ(h->address.has_value(), c.address) << c.in;
    if (c.address) {
      EXPECT_TRUE(h->address->v4 || std::string(c.name) == "::1") << c.in;
    }
  }
  for (const char* bad : {"", ".", "a..b", "1.2.3.999", "bad_host!.com", "a b.com", "x.123"}) {
    EXPECT_FALSE(ParseEgressHost(bad)) << bad;
  }
  EXPECT_FALSE(ParseEgressHost(std::string_view("api.example.test\0.evil", 22)));
  EXPECT_FALSE(ParseEgressHost(std::string(300, 'a')));
}

EgressPolicy MakePolicy(std::vector<std::string> allow, std::vector<std::string> deny = {},
                        std::vector<std::string> resolve = {}) {
  EgressPolicy p;
  for (const auto& a : allow) p.allow.push_back(*ParseDomainRule(a, "test allow"));
  for (const auto& d : deny) p.deny.push_back(*ParseDomainRule(d, "test deny"));
  for (const auto& r : resolve) p.resolve.push_back(*ParseResolveEntry(r, "test resolve"));
  return p;
}

NameDecision Decide(const EgressPolicy& p, const std::string& host, int port) {
  return DecideName(p, *ParseEgressHost(host), port);
}

TEST(EgressRuleTest, DecideNameDenyBeatsAllowAndWildcardsStayBelowTheirSuffix) {
  const EgressPolicy p = MakePolicy({"*.example.com", "api.example.org:8443", "203.0.113.7"},
                                    {"secret.example.com"}, {"api.example.org=127.0.0.1"});
  auto d = Decide(p, "www.example.com", 443);
  EXPECT_TRUE(d.allowed);
  ASSERT_TRUE(d.rule);
  EXPECT_EQ(d.rule->text, "*.example.com");
  EXPECT_TRUE(d.pinned.empty());

  d = Decide(p, "Secret.Example.COM.", 443);
  EXPECT_FALSE(d.allowed);
  ASSERT_TRUE(d.rule);
  EXPECT_EQ(d.rule->text, "secret.example.com");
  EXPECT_EQ(d.rule->source, "test deny");
  EXPECT_NE(d.reason.find("deny_domains"), std::string::npos) << d.reason;

  EXPECT_FALSE(Decide(p, "example.com", 443).allowed);      // the apex is not below itself
  EXPECT_FALSE(Decide(p, "evilexample.com", 443).allowed);  // a suffix, not a label boundary
  EXPECT_FALSE(Decide(p, "example.com.evil.test", 443).allowed);
  d = Decide(p, "www.example.com", 8080);
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.reason.find("port 8080"), std::string::npos) << d.reason;

  d = Decide(p, "api.example.org", 8443);
  EXPECT_TRUE(d.allowed);
  ASSERT_EQ(d.pinned.size(), 1u);
  EXPECT_EQ(d.pinned[0].Text(), "127.0.0.1");
  EXPECT_FALSE(Decide(p, "api.example.org", 443).allowed);

  // IP literals: only one a rule names, in any spelling.
  EXPECT_TRUE(Decide(p, "203.0.113.7", 443).allowed);
  EXPECT_TRUE(Decide(p, "::ffff:203.0.113.7", 443).allowed);
  d = Decide(p, "127.0.0.1", 8443);  // the resolve entry's address is not a literal's rule
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.reason.find("not named by any allow_domains rule"), std::string::npos);
  EXPECT_FALSE(Decide(p, "0x7f.1", 443).allowed);
  EXPECT_NE(Decide(MakePolicy({}), "a.test", 443).reason.find("allowlist is empty"),
            std::string::npos);
}

TEST(EgressRuleTest, ClassifyAddressRefusesEveryRangeThatLeadsIntoTheHostOrAPrivateNetwork) {
  struct Case {
    const char* addr;
    AddressClass cls;
  };
  const Case cases[] = {
      {"127.0.0.1", AddressClass::kLoopback},
      {"127.255.255.254", AddressClass::kLoopback},
      {"::1", AddressClass::kLoopback},
      {"::ffff:127.0.0.1", AddressClass::kLoopback},
      {"0.0.0.0", AddressClass::kUnspecified},
      {"::", AddressClass::kUnspecified},
      {"10.255.255.53", AddressClass::kPrivate},
      {"172.16.0.1", AddressClass::kPrivate},
      {"172.31.255.255", AddressClass::kPrivate},
      {"192.168.1.1", AddressClass::kPrivate},
      {"100.64.0.1", AddressClass::kPrivate},
      {"fd00::1", AddressClass::kPrivate},
      {"169.254.169.254", AddressClass::kLinkLocal},
      {"fe80::1", AddressClass::kLinkLocal},
      {"224.0.0.1", AddressClass::kMulticast},
      {"ff02::1", AddressClass::kMulticast},
      {"240.0.0.1", AddressClass::kReserved},
      {"255.255.255.255", AddressClass::kReserved},
      {"64:ff9b::7f00:1", AddressClass::kReserved},
      {"2002:7f00:1::", AddressClass::kReserved},
      {"203.0.113.80", AddressClass::kPublic},
      {"172.32.0.1", AddressClass::kPublic},
      {"8.8.8.8", AddressClass::kPublic},
      {"2606:4700::1111", AddressClass::kPublic},
  };
  for (const Case& c : cases) {
    auto a = ParseIpAddress(c.addr);
    ASSERT_TRUE(a) << c.addr;
    EXPECT_EQ(ClassifyAddress(*a), c.cls)
        << c.addr << " is " << AddressClassName(ClassifyAddress(*a));
  }
  const EgressPolicy p = MakePolicy({"127.0.0.1:8080"}, {}, {"api.example.test=10.0.0.5"});
  EXPECT_TRUE(AddressAllowedByRule(p, *ParseIpAddress("::ffff:127.0.0.1")));
  EXPECT_TRUE(AddressAllowedByRule(p, *ParseIpAddress("10.0.0.5")));
  EXPECT_FALSE(AddressAllowedByRule(p, *ParseIpAddress("127.0.0.2")));
  // The port-aware form: the address rule's port only, and no resolve entry.
  EXPECT_TRUE(AddressAllowedOnPort(p, *ParseIpAddress("127.0.0.1"), 8080));
  EXPECT_FALSE(AddressAllowedOnPort(p, *ParseIpAddress("127.0.0.1"), 443));
  EXPECT_FALSE(AddressAllowedOnPort(p, *ParseIpAddress("10.0.0.5"), 443));
  const EgressPolicy d = MakePolicy({"*.example.com"}, {"203.0.113.80", "198.51.100.1:22"});
  ASSERT_NE(AddressDeniedByRule(d, *ParseIpAddress("::ffff:203.0.113.80"), 443), nullptr);
  EXPECT_EQ(AddressDeniedByRule(d, *ParseIpAddress("203.0.113.80"), 80)->text, "203.0.113.80");
  EXPECT_NE(AddressDeniedByRule(d, *ParseIpAddress("198.51.100.1"), 22), nullptr);
  EXPECT_EQ(AddressDeniedByRule(d, *ParseIpAddress("198.51.100.1"), 443), nullptr);
  EXPECT_EQ(AddressDeniedByRule(d, *ParseIpAddress("203.0.113.81"), 443), nullptr);
}

TEST(EgressRuleTest, AResolvedAddressMustBePublicAndNotTheHostsOwnUnlessARuleNamesIt) {
  // This machine's eth0 is in a documentation range that ClassifyAddress calls public: only the
  // host's own address list keeps a name from leading to it.
  const std::vector<IpAddress> own = {*ParseIpAddress("127.0.0.1"), *ParseIpAddress("192.0.2.2")};
  const EgressPolicy p = MakePolicy({"*.example.test", "10.1.2.3:8443"});
  auto why = [&](const char* a, int port) {
    return ResolvedAddressRefusal(p, own, *ParseIpAddress(a), port).value_or("");
  };
  EXPECT_EQ(why("203.0.113.80", 443), "");
  EXPECT_EQ(why("192.0.2.2", 443), "this host's own address");
  EXPECT_EQ(why("::ffff:192.0.2.2", 443), "this host's own address");
  EXPECT_EQ(why("127.0.0.1", 443), "loopback");
  EXPECT_EQ(why("169.254.169.254", 80), "link-local");
  EXPECT_EQ(why("10.1.2.3", 443), "private");
  EXPECT_EQ(why("10.1.2.3", 8443), "");  // the address rule, on its port
  EXPECT_EQ(why("fd00::1", 443), "private");
}

TEST(EgressRuleTest, ProxyEnvironmentPointsEveryClientAtTheSandboxPort) {
  std::map<std::string, std::string> env;
  for (auto& [k, v] : ProxyEnvironment()) env[k] = v;
  EXPECT_EQ(env["HTTP_PROXY"], "http://127.0.0.1:3128");
  EXPECT_EQ(env["https_proxy"], "http://127.0.0.1:3128");
  EXPECT_EQ(env["ALL_PROXY"], "socks5h://127.0.0.1:3128");
  EXPECT_EQ(env["no_proxy"], "localhost,127.0.0.1,::1");
  EXPECT_EQ(env["NODE_USE_ENV_PROXY"], "1");
  EXPECT_EQ(env.size(), 9u);
}

// ---------------------------------------------------------------- the proxy, real sockets

UniqueFd ListenLoopback(int* port) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return {};
  if (::listen(s.get(), 64) != 0) return {};
  socklen_t len = sizeof a;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return s;
}

UniqueFd ConnectLoopback(int port) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return {};
  return s;
}

void SendAllTo(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Reads until EOF or `timeout`; `*eof` says which.
std::string ReadUntilEof(int fd, std::chrono::milliseconds timeout, bool* eof = nullptr) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + timeout;
  if (eof) *eof = false;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (::poll(&p, 1, static_cast<int>(std::max<long>(1, left.count()))) <= 0) continue;
    char buf[8192];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (eof) *eof = true;
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// A local HTTP/1.1 server on 127.0.0.1: answers each request with "hello from upstream" (and
// claims keep-alive, so the proxy's Connection: close is what ends it), then keeps reading until
// the peer closes, so that it sees every byte the proxy ever forwarded.
class Upstream {
 public:
  Upstream() {
    fd_ = ListenLoopback(&port_);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Upstream() {
    stop_ = true;
    thread_.join();
    for (auto& t : conns_) t.join();
  }
  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  std::vector<std::string> received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  // Waits until `n` connections have been handled and closed.
  bool WaitClosed(int n, std::chrono::milliseconds t = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, t, [&] { return static_cast<int>(received_.size()) >= n; });
  }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      UniqueFd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) continue;
      ++connections_;
      conns_.emplace_back([this, fd = c.Release()] { Handle(UniqueFd(fd)); });
    }
  }
  void Handle(UniqueFd c) {
    std::string got;
    const auto end = std::chrono::steady_clock::now() + 5s;
    std::size_t need = std::string::npos;
    while (std::chrono::steady_clock::now() < end) {
      const auto head_end = got.find("\r\n\r\n");
      if (head_end != std::string::npos && need == std::string::npos) {
        const std::string head = got.substr(0, head_end);
        need = head_end + 4;
        if (auto cl = head.find("Content-Length: "); cl != std::string::npos) {
          need += std::stoul(head.substr(cl + 16));
        } else if (head.find("Transfer-Encoding: chunked") != std::string::npos) {
          need = std::string::npos - 1;  // until the last chunk
        }
      }
      if (need == std::string::npos - 1 && got.find("\r\n0\r\n\r\n") != std::string::npos) {
        need = got.size();
      }
      if (need != std::string::npos && need != std::string::npos - 1 && got.size() >= need) break;
      pollfd p{c.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[8192];
      const ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    if (got.find("\r\n\r\n") != std::string::npos) {
      const std::string body = "hello from upstream\n";
      SendAllTo(c.get(), "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                             std::to_string(body.size()) +
                             "\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n" + body);
      got += ReadUntilEof(c.get(), 3s);  // a pipelined request would arrive here
    }
    std::lock_guard lock(mu_);
    received_.push_back(got);
    cv_.notify_all();
  }

  UniqueFd fd_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
  std::vector<std::thread> conns_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> received_;
};

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = EgressProxy::Start();
    ASSERT_TRUE(p) << p.error().message;
    proxy_ = std::move(*p);
  }
  void TearDown() override { proxy_.reset(); }

  // The stand-in for the shim's listener, under `policy`.
  void Listen(EgressPolicy policy) {
    UniqueFd l = ListenLoopback(&proxy_port_);
    ASSERT_TRUE(l.valid());
    id_ = proxy_->AddListener(std::move(l), std::move(policy), "test sandbox",
                              [this](const NetworkEvent& e) {
                                std::lock_guard lock(mu_);
                                events_.push_back(e);
                                cv_.notify_all();
                              });
  }
  std::string up() const { return std::to_string(upstream_.port()); }
  std::string ProxyUrl() const { return "http://127.0.0.1:" + std::to_string(proxy_port_); }
  // The default policy: api.example.test on the upstream's port, mapped to 127.0.0.1.
  EgressPolicy ApiPolicy(std::vector<std::string> extra_allow = {},
                         std::vector<std::string> extra_resolve = {}) {
    std::vector<std::string> allow = {"api.example.test:" + up()};
    allow.insert(allow.end(), extra_allow.begin(), extra_allow.end());
    std::vector<std::string> resolve = {"api.example.test=127.0.0.1"};
    resolve.insert(resolve.end(), extra_resolve.begin(), extra_resolve.end());
    return MakePolicy(allow, {}, resolve);
  }
  NetworkEvent WaitEvent(std::size_t n = 1) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, 15s, [&] { return events_.size() >= n; })) return {};
    return events_[n - 1];
  }
  std::size_t EventCount() {
    std::lock_guard lock(mu_);
    return events_.size();
  }
  // curl with no proxy variables of the caller's environment in the way.
  testing::RunResult Curl(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/curl", "-sS", "--max-time", "20", "-D", "-"});
    return testing::Run(args, {"NO_PROXY=", "no_proxy=", "http_proxy=", "HTTP_PROXY=",
                               "https_proxy=", "HTTPS_PROXY=", "ALL_PROXY=", "all_proxy="});
  }
  // A raw exchange: sends `request`, returns what came back until the proxy closed.
  std::string Raw(std::string_view request, std::chrono::milliseconds t = 15s) {
    UniqueFd c = ConnectLoopback(proxy_port_);
    if (!c.valid()) return "<connect failed>";
    SendAllTo(c.get(), request);
    return ReadUntilEof(c.get(), t);
  }

  Upstream upstream_;
  std::unique_ptr<EgressProxy> proxy_;
  int proxy_port_ = 0;
  std::uint64_t id_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<NetworkEvent> events_;
};

TEST_F(ProxyTest, CurlPlainHttpToAnAllowedNamePassesAndIsRecorded) {
  Listen(ApiPolicy());
  auto r = Curl({"-x", ProxyUrl(), "http://api.example.test:" + up() + "/some/path?q=1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("200 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Connection: close"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("keep-alive"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hello from upstream"), std::string::npos) << r.out;
  const NetworkEvent e = WaitEvent();
  EXPECT_TRUE(e.allowed) << e.reason;
  EXPECT_EQ(e.identity, "test sandbox");
  EXPECT_EQ(e.protocol, "http");
  EXPECT_EQ(e.method, "GET");
  EXPECT_EQ(e.host, "api.example.test");
  EXPECT_EQ(e.port, upstream_.port());
  EXPECT_EQ(e.address, "127.0.0.1");
  EXPECT_EQ(e.rule, "api.example.test:" + up());
  EXPECT_EQ(e.rule_source, "test allow");
  EXPECT_EQ(e.status, 200);
  EXPECT_GT(e.bytes_down, 20u);
  EXPECT_TRUE(e.error.empty()) << e.error;
  ASSERT_TRUE(upstream_.WaitClosed(1));
  const std::string seen = upstream_.received()[0];
  EXPECT_EQ(seen.rfind("GET /some/path?q=1 HTTP/1.1\r\n", 0), 0u) << seen;  // origin-form
  EXPECT_NE(seen.find("Connection: close\r\n"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("Proxy-Connection"), std::string::npos) << seen;
  EXPECT_EQ(proxy_->resolver_queries(), 0u);  // the resolve entry answered
}

TEST_F(ProxyTest, CurlConnectTunnelPassesBytesBothWaysAndCountsThem) {
  Listen(ApiPolicy());
  auto r = Curl({"-p", "-x", ProxyUrl(), "http://api.example.test:" + up() + "/tunnelled"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("200 Connection established"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hello from upstream"), std::string::npos) << r.out;
  const NetworkEvent e = WaitEvent();
  EXPECT_TRUE(e.allowed) << e.reason;
  EXPECT_EQ(e.protocol, "connect");
  EXPECT_EQ(e.address, "127.0.0.1");
  EXPECT_EQ(e.rule, "api.example.test:" + up());
  ASSERT_TRUE(upstream_.WaitClosed(1));
  const std::string seen = upstream_.received()[0];
  EXPECT_EQ(seen.rfind("GET /tunnelled HTTP/1.1\r\n", 0), 0u) << seen;
  EXPECT_EQ(e.bytes_up, seen.size());  // every byte the client sent through, nothing more
  EXPECT_GT(e.bytes_down, 20u);
  EXPECT_GT(e.duration_ms, 0);
}

TEST_F(ProxyTest, PythonUrllibThroughTheProxyVariables) {
  Listen(ApiPolicy());
  auto r = testing::Run(
      {"/usr/bin/python3", "-c",
       "import urllib.request,sys\n"
       "print(urllib.request.urlopen('http://api.example.test:" +
           up() + "/py', timeout=20).read().decode())\n"},
      {"http_proxy=" + ProxyUrl(), "HTTP_PROXY=" + ProxyUrl(), "no_proxy=", "NO_PROXY="});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hello from upstream"), std::string::npos) << r.out << r.err;
  const NetworkEvent e = WaitEvent();
  EXPECT_TRUE(e.allowed) << e.reason;
  EXPECT_EQ(e.protocol, "http");
}

TEST_F(ProxyTest, ANameNotAllowedIsRefusedBeforeAnyResolverHearsOfIt) {
  // The refused name has a resolve entry to the upstream: were it resolved and connected
  // before the decision, the upstream would see a connection.
  Listen(ApiPolicy({}, {"secret.attacker.example=127.0.0.1"}));
  auto r = Curl({"-x", ProxyUrl(), "http://secret.attacker.example:" + up() + "/"});
  EXPECT_NE(r.out.find("403 Forbidden"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cordon: secret.attacker.example is not in allow_domains"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("X-Cordon-Reason: "), std::string::npos) << r.out;
  // The same through CONNECT, and a name with no entry at all (getaddrinfo would be asked).
  r = Curl({"-p", "-x", ProxyUrl(), "http://exfil.attacker.example:443/"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("403"), std::string::npos) << r.out;
  const NetworkEvent e1 = WaitEvent(1);
  const NetworkEvent e2 = WaitEvent(2);
  EXPECT_FALSE(e1.allowed);
  EXPECT_EQ(e1.host, "secret.attacker.example");
  EXPECT_EQ(e1.status, 403);
  EXPECT_TRUE(e1.address.empty());
  EXPECT_NE(e1.reason.find("not in allow_domains"), std::string::npos) << e1.reason;
  EXPECT_FALSE(e2.allowed);
  EXPECT_EQ(e2.protocol, "connect");
  EXPECT_EQ(e2.host, "exfil.attacker.example");
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(upstream_.connections(), 0);
  EXPECT_EQ(proxy_->resolver_queries(), 0u);
}

TEST_F(ProxyTest, AnIpLiteralIsRefusedUnlessARuleNamesTheAddress) {
  Listen(ApiPolicy());
  for (const std::string host : {"127.0.0.1", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]"}) {
    auto out = Raw("GET http://" + host + ":" + up() + "/ HTTP/1.1\r\nHost: " + host + ":" + up() +
                   "\r\n\r\n");
    EXPECT_NE(out.find("403 Forbidden"), std::string::npos) << host << ": " << out;
    EXPECT_NE(out.find("not named by any allow_domains rule"), std::string::npos) << out;
  }
  EXPECT_EQ(upstream_.connections(), 0);
  proxy_->RemoveListener(id_);
  Listen(MakePolicy({"127.0.0.1:" + up()}));
  auto r = Curl({"-x", ProxyUrl(), "http://127.0.0.1:" + up() + "/"});
  EXPECT_NE(r.out.find("hello from upstream"), std::string::npos) << r.out << r.err;
  const NetworkEvent e = WaitEvent(5);
  EXPECT_TRUE(e.allowed) << e.reason;
  EXPECT_EQ(e.rule, "127.0.0.1:" + up());
}

TEST_F(ProxyTest, ANameResolvingToLoopbackIsRefusedUnlessARuleNamesTheAddress) {
  // The rebinding case: "localhost" is allowed by name, and the system resolver (/etc/hosts)
  // maps it to 127.0.0.1, which no rule names.
  Listen(MakePolicy({"localhost:" + up()}));
  auto r = Curl({"-x", ProxyUrl(), "http://localhost:" + up() + "/"});
  EXPECT_NE(r.out.find("403 Forbidden"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1 (loopback)"), std::string::npos) << r.out;
  const NetworkEvent e = WaitEvent();
  EXPECT_FALSE(e.allowed);
  EXPECT_NE(e.reason.find("resolves to 127.0.0.1 (loopback)"), std::string::npos) << e.reason;
  EXPECT_EQ(proxy_->resolver_queries(), 1u);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(upstream_.connections(), 0);
  // With a rule naming the address, the same name passes.
  proxy_->RemoveListener(id_);
  Listen(MakePolicy({"localhost:" + up(), "127.0.0.1:" + up()}));
  r = Curl({"-x", ProxyUrl(), "http://localhost:" + up() + "/"});
  EXPECT_NE(r.out.find("hello from upstream"), std::string::npos) << r.out;
}

TEST_F(ProxyTest, AnAddressRuleOpensItsOwnPortOnlyAndADenyRuleOnAnAddressBeatsTheName) {
  // "localhost" allowed on the upstream's port, 127.0.0.1 allowed only on port 1: the name
  // must not reach 127.0.0.1 on the upstream's port through the address rule of another port.
  Listen(MakePolicy({"localhost:" + up(), "127.0.0.1:1"}));
  auto r = Curl({"-x", ProxyUrl(), "http://localhost:" + up() + "/"});
  EXPECT_NE(r.out.find("403 Forbidden"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no allow_domains rule names for port " + up()), std::string::npos) << r.out;
  // A name allowed and mapped to 127.0.0.1, and a deny rule naming that address.
  proxy_->RemoveListener(id_);
  EgressPolicy p = ApiPolicy();
  p.deny.push_back(*ParseDomainRule("127.0.0.1", "test deny"));
  Listen(std::move(p));
  r = Curl({"-x", ProxyUrl(), "http://api.example.test:" + up() + "/"});
  EXPECT_NE(r.out.find("403 Forbidden"), std::string::npos) << r.out;
  const NetworkEvent e = WaitEvent(2);
  EXPECT_FALSE(e.allowed);
  EXPECT_EQ(e.rule, "127.0.0.1");
  EXPECT_EQ(e.rule_source, "test deny");
  EXPECT_NE(e.reason.find("denied by deny_domains rule 127.0.0.1"), std::string::npos) << e.reason;
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(upstream_.connections(), 0);
}

TEST_F(ProxyTest, APortTheRuleDoesNotAllowIsRefused) {
  Listen(MakePolicy({"api.example.test"}, {}, {"api.example.test=127.0.0.1"}));
  auto r = Curl({"-x", ProxyUrl(), "http://api.example.test:" + up() + "/"});
  EXPECT_NE(r.out.find("403 Forbidden"), std::string::npos) << r.out;
  const NetworkEvent e = WaitEvent();
  EXPECT_FALSE(e.allowed);
  EXPECT_NE(e.reason.find("port " + up() + " is not allowed"), std::string::npos) << e.reason;
  EXPECT_EQ(e.rule, "api.example.test");
  EXPECT_EQ(upstream_.connections(), 0);
}

TEST_F(ProxyTest, AHostHeaderThatNamesAnotherHostIsRefused) {
  Listen(ApiPolicy());
  auto out = Raw("GET http://api.example.test:" + up() +
                 "/ HTTP/1.1\r\nHost: internal.corp.example\r\n\r\n");
  EXPECT_NE(out.find("403 Forbidden"), std::string::npos) << out;
  EXPECT_NE(out.find("does not name the URL's host"), std::string::npos) << out;
  out = Raw("GET http://api.example.test:" + up() + "/ HTTP/1.1\r\nHost: api.example.test:" + up() +
            "\r\nHost: other.example\r\n\r\n");
  EXPECT_NE(out.find("400 Bad Request"), std::string::npos) << out;
  EXPECT_FALSE(WaitEvent(1).allowed);
  EXPECT_FALSE(WaitEvent(2).allowed);
  EXPECT_EQ(upstream_.connections(), 0);
}

TEST_F(ProxyTest, APipelinedSecondRequestNeverReachesAnyUpstream) {
  Upstream other;
  Listen(
      MakePolicy({"api.example.test:" + up(), "other.example.test:" + std::to_string(other.port())},
                 {}, {"api.example.test=127.0.0.1", "other.example.test=127.0.0.1"}));
  const std::string second =
      "GET http://other.example.test:" + std::to_string(other.port()) +
      "/second HTTP/1.1\r\nHost: other.example.test:" + std::to_string(other.port()) + "\r\n\r\n";
  auto out = Raw("POST http://api.example.test:" + up() +
                 "/first HTTP/1.1\r\nHost: api.example.test:" + up() +
                 "\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello" + second);
  EXPECT_NE(out.find("hello from upstream"), std::string::npos) << out;
  EXPECT_EQ(out.find("HTTP/1.1", 10), std::string::npos) << "one response only: " << out;
  ASSERT_TRUE(upstream_.WaitClosed(1));
  const std::string seen = upstream_.received()[0];
  EXPECT_NE(seen.find("\r\n\r\nhello"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("second"), std::string::npos) << seen;
  EXPECT_EQ(other.connections(), 0);
  const NetworkEvent e = WaitEvent();
  EXPECT_TRUE(e.allowed);
  EXPECT_EQ(e.method, "POST");
  EXPECT_EQ(e.bytes_up, 5u);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(EventCount(), 1u);
}

TEST_F(ProxyTest, AChunkedBodyIsForwardedByItsFramingAndBadFramingGets400) {
  Listen(ApiPolicy());
  const std::string head = "POST http://api.example.test:" + up() +
                           "/up HTTP/1.1\r\nHost: api.example.test:" + up() +
                           "\r\nTransfer-Encoding: chunked\r\n\r\n";
  auto out =
      Raw(head + "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n");
  EXPECT_NE(out.find("hello from upstream"), std::string::npos) << out;
  ASSERT_TRUE(upstream_.WaitClosed(1));
  const std::string seen = upstream_.received()[0];
  EXPECT_NE(seen.find("5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("smuggled"), std::string::npos) << seen;
  out = Raw(head + "zz\r\nhello\r\n");
  EXPECT_NE(out.find("400 Bad Request"), std::string::npos) << out;
  EXPECT_NE(out.find("chunk size is not hexadecimal"), std::string::npos) << out;
  out =
      Raw("POST http://api.example.test:" + up() + "/ HTTP/1.1\r\nHost: api.example.test:" + up() +
          "\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_NE(out.find("400 Bad Request"), std::string::npos) << out;
  EXPECT_FALSE(WaitEvent(2).allowed);
  EXPECT_FALSE(WaitEvent(3).allowed);
}

// The proxy forwards a chunked body's size lines and trailers as sent. A line a lenient upstream
// would end earlier than the proxy does (a bare LF after the last chunk, a bare CR in an
// extension) must be refused, or the bytes the proxy took for trailers or an extension reach the
// upstream as a second request that no decision and no record ever saw.
TEST_F(ProxyTest, AChunkedBodyCannotSmuggleASecondRequestInItsTrailersOrExtensions) {
  Listen(ApiPolicy());
  const std::string head = "POST http://api.example.test:" + up() +
                           "/up HTTP/1.1\r\nHost: api.example.test:" + up() +
                           "\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: internal.corp.example\r\n\r\n";
  struct Case {
    std::string body;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"0\r\n\n" + smuggled, "does not end in CRLF"},
      {"0\r\n" + smuggled, "is not \"name: value\""},
      {"5;x\r" + smuggled + "\r\nhello\r\n0\r\n\r\n", "control character"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const auto out = Raw(head + c.body);
    EXPECT_NE(out.find("400 Bad Request"), std::string::npos) << c.expect << ": " << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << out;
    ASSERT_TRUE(upstream_.WaitClosed(++n, 15s));
    const std::string seen = upstream_.received()[static_cast<std::size_t>(n - 1)];
    EXPECT_EQ(seen.find("smuggled"), std::string::npos) << c.expect << ": upstream saw " << seen;
    const NetworkEvent e = WaitEvent(static_cast<std::size_t>(n));
    EXPECT_FALSE(e.allowed) << c.expect;
    EXPECT_EQ(e.status, 400) << c.expect;
  }
  // A well-formed trailer still passes.
  const auto out = Raw(head + "5\r\nhello\r\n0\r\nX-Checksum: 1\r\n\r\n");
  EXPECT_NE(out.find("hello from upstream"), std::string::npos) << out;
}

// A refused plain request's record names the host it asked for, whatever refused it; and a
// framing header spelt with "_" (which CGI-style servers read as "-") is refused, since the
// upstream would frame the body differently from the proxy.
TEST_F(ProxyTest, ARefusedPlainRequestIsRecordedWithItsHostAndUnderscoreFramingIsRefused) {
  Listen(ApiPolicy());
  const std::string url = "http://api.example.test:" + up() + "/";
  const std::string host = "Host: api.example.test:" + up() + "\r\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"GET " + url + " HTTP/1.1\r\n" + host + host + "\r\n", "more than one Host header"},
      {"POST " + url + " HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
       "both Content-Length and Transfer-Encoding"},
      {"POST " + url + " HTTP/1.1\r\nContent-Length: 40\r\nTransfer_Encoding: chunked\r\n\r\n" +
           "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
       "may read as transfer-encoding"},
  };
  std::size_t n = 0;
  for (const auto& [request, expect] : cases) {
    const auto out = Raw(request);
    EXPECT_NE(out.find("400 Bad Request"), std::string::npos) << expect << ": " << out;
    EXPECT_NE(out.find(expect), std::string::npos) << out;
    const NetworkEvent e = WaitEvent(++n);
    EXPECT_FALSE(e.allowed) << expect;
    EXPECT_EQ(e.host, "api.example.test") << expect;
    EXPECT_EQ(e.port, upstream_.port()) << expect;
  }
  const auto out = Raw("GET http://user@api.example.test:" + up() + "/ HTTP/1.1\r\n\r\n");
  EXPECT_NE(out.find("credentials"), std::string::npos) << out;
  EXPECT_EQ(WaitEvent(++n).host, "user@api.example.test:" + up());
  EXPECT_EQ(upstream_.connections(), 0);
}

// "http://host#frag" has no path: the upstream still gets "GET / HTTP/1.1", not an empty target.
TEST_F(ProxyTest, AUrlWithOnlyAFragmentIsSentUpstreamWithThePathSlash) {
  Listen(ApiPolicy());
  const auto out = Raw("GET http://api.example.test:" + up() + "#frag HTTP/1.1\r\n\r\n");
  EXPECT_NE(out.find("hello from upstream"), std::string::npos) << out;
  ASSERT_TRUE(upstream_.WaitClosed(1, 15s));
  EXPECT_EQ(upstream_.received()[0].rfind("GET / HTTP/1.1\r\n", 0), 0u) << upstream_.received()[0];
  EXPECT_TRUE(WaitEvent().allowed);
}

TEST_F(ProxyTest, MalformedInputGets400AndARecordNeverAHang) {
  Listen(ApiPolicy());
  struct Case {
    std::string request;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {std::string("\x16\x03\x01\x02\x00\x01\xfc\x03\x03", 9), "not an HTTP request"},
      {"get http://api.example.test/ HTTP/1.1\r\n\r\n", "not an HTTP request"},
      {"GE T http://api.example.test/ HTTP/1.1\r\n\r\n", "request line"},
      {"GET http://api.example.test/\x01 HTTP/1.1\r\n\r\n", "control character"},
      {"GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n", "not an absolute http:// URL"},
      {"CONNECT api.example.test:99999 HTTP/1.1\r\n\r\n", "port is not a number"},
      {"CONNECT api.example.test HTTP/1.1\r\n\r\n", "has no port"},
      {std::string("CONNECT api.example.test\0.x:443 HTTP/1.1\r\n\r\n", 44), "NUL"},
      {"GET https://api.example.test/ HTTP/1.1\r\n\r\n", "must go through CONNECT"},
      {"GET http://user:pw@api.example.test/ HTTP/1.1\r\n\r\n", "credentials"},
      {std::string(20000, 'A'), "larger than 16 KiB"},
      {"GET http://api.example.test:" + up() + "/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
       "Content-Length header is not a number"},
  };
  std::size_t n = 0;
  for (const Case& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = Raw(c.request);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << c.expect;
    EXPECT_NE(out.find("HTTP/1.1 400 Bad Request"), std::string::npos) << c.request << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << c.expect << " in " << out;
    const NetworkEvent e = WaitEvent(++n);
    EXPECT_FALSE(e.allowed);
    EXPECT_EQ(e.status, 400);
    EXPECT_FALSE(e.reason.empty());
  }
  EXPECT_EQ(upstream_.connections(), 0);
}

TEST_F(ProxyTest, AClientThatDripsItsHeadIsCutAtTheHeadDeadline) {
  Listen(ApiPolicy());
  UniqueFd c = ConnectLoopback(proxy_port_);
  ASSERT_TRUE(c.valid());
  const std::string head = "GET http://api.example.test:" + up() + "/ HTTP/1.1\r\nX-Slow: ";
  const auto t0 = std::chrono::steady_clock::now();
  std::string out;
  bool eof = false;
  // One byte every 300 ms: each wait is short, but the head never ends.
  for (int i = 0; i < 60 && !eof; ++i) {
    SendAllTo(c.get(), i < static_cast<int>(head.size()) ? head.substr(i, 1) : "x");
    out += ReadUntilEof(c.get(), 300ms, &eof);
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(eof);
  EXPECT_GT(took, 9s);
  EXPECT_LT(took, 13s);
  EXPECT_NE(out.find("400 Bad Request"), std::string::npos) << out;
  EXPECT_NE(out.find("no complete request head within 10 s"), std::string::npos) << out;
  const NetworkEvent e = WaitEvent();
  EXPECT_FALSE(e.allowed);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(upstream_.connections(), 0);
}

TEST_F(ProxyTest, SocksWithANamePassesAndRefusalsGetTheirReplyCodes) {
  Listen(ApiPolicy());
  auto r = Curl({"--socks5-hostname", "127.0.0.1:" + std::to_string(proxy_port_),
                 "http://api.example.test:" + up() + "/socks"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hello from upstream"), std::string::npos) << r.out;
  NetworkEvent e = WaitEvent(1);
  EXPECT_TRUE(e.allowed) << e.reason;
  EXPECT_EQ(e.protocol, "socks5");
  EXPECT_EQ(e.host, "api.example.test");
  EXPECT_EQ(e.address, "127.0.0.1");
  EXPECT_GT(e.bytes_up, 0u);
  EXPECT_GT(e.bytes_down, 0u);

  r = Curl({"--socks5-hostname", "127.0.0.1:" + std::to_string(proxy_port_),
            "http://secret.attacker.example:" + up() + "/"});
  EXPECT_NE(r.exit_code, 0);
  e = WaitEvent(2);
  EXPECT_FALSE(e.allowed);
  EXPECT_EQ(e.status, 2);
  EXPECT_EQ(e.host, "secret.attacker.example");

  // Raw requests: an IPv4 address no rule names (0x02), BIND (0x07), address type 5 (0x08).
  const int port = upstream_.port();
  const std::string greeting("\x05\x01\x00", 3);
  const std::string ipv4 = std::string("\x05\x01\x00\x01\x7f\x00\x00\x01", 8) +
                           static_cast<char>(port >> 8) + static_cast<char>(port & 0xff);
  const std::string bind = std::string("\x05\x02\x00\x01\x7f\x00\x00\x01", 8) +
                           static_cast<char>(port >> 8) + static_cast<char>(port & 0xff);
  const std::string atyp5 = std::string("\x05\x01\x00\x05\x7f\x00\x00\x01\x00\x50", 10);
  struct Case {
    std::string request;
    char rep;
  };
  for (const Case& c : {Case{ipv4, 0x02}, Case{bind, 0x07}, Case{atyp5, 0x08}}) {
    const auto out = Raw(greeting + c.request);
    ASSERT_GE(out.size(), 4u);
    EXPECT_EQ(out.substr(0, 2), std::string("\x05\x00", 2));
    EXPECT_EQ(out[3], c.rep) << static_cast<int>(out[3]);
  }
  // A client that offers only username/password is told no method is acceptable.
  const auto out = Raw(std::string("\x05\x01\x02", 3));
  EXPECT_EQ(out, std::string("\x05\xff", 2));
  EXPECT_FALSE(WaitEvent(6).allowed);
  EXPECT_EQ(upstream_.connections(), 1);
}

TEST_F(ProxyTest, AnUpstreamThatRefusesGets502AndARecordWithTheError) {
  int closed_port = 0;
  { UniqueFd gone = ListenLoopback(&closed_port); }  // bound, then closed: nothing listens
  Listen(MakePolicy({"down.example.test:" + std::to_string(closed_port)}, {},
                    {"down.example.test=127.0.0.1"}));
  auto r =
      Curl({"-x", ProxyUrl(), "http://down.example.test:" + std::to_string(closed_port) + "/"});
  EXPECT_NE(r.out.find("502 Bad Gateway"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Connection refused"), std::string::npos) << r.out;
  const NetworkEvent e = WaitEvent();
  EXPECT_TRUE(e.allowed);
  EXPECT_NE(e.error.find("Connection refused"), std::string::npos) << e.error;
  EXPECT_EQ(e.status, 502);
  // SOCKS5 says so with its reply code 0x05 (connection refused).
  r = Curl({"--socks5-hostname", "127.0.0.1:" + std::to_string(proxy_port_),
            "http://down.example.test:" + std::to_string(closed_port) + "/"});
  EXPECT_NE(r.exit_code, 0);
  const NetworkEvent s = WaitEvent(2);
  EXPECT_TRUE(s.allowed);
  EXPECT_EQ(s.protocol, "socks5");
  EXPECT_EQ(s.status, 5);
  EXPECT_NE(s.error.find("Connection refused"), std::string::npos) << s.error;
}

TEST_F(ProxyTest, ConnectGivesAnInProcessClientTheSameRulesAndRecords) {
  Listen(ApiPolicy());
  auto fd = proxy_->Connect(id_);
  ASSERT_TRUE(fd) << fd.error().message;
  SendAllTo(fd->get(), "GET http://api.example.test:" + up() +
                           "/inproc HTTP/1.1\r\nHost: api.example.test:" + up() + "\r\n\r\n");
  const auto out = ReadUntilEof(fd->get(), 15s);
  EXPECT_NE(out.find("hello from upstream"), std::string::npos) << out;
  NetworkEvent e = WaitEvent(1);
  EXPECT_TRUE(e.allowed);
  EXPECT_EQ(e.identity, "test sandbox");
  auto fd2 = proxy_->Connect(id_);
  ASSERT_TRUE(fd2);
  SendAllTo(fd2->get(), "CONNECT secret.attacker.example:443 HTTP/1.1\r\n\r\n");
  EXPECT_NE(ReadUntilEof(fd2->get(), 15s).find("403 Forbidden"), std::string::npos);
  EXPECT_FALSE(WaitEvent(2).allowed);
  EXPECT_FALSE(proxy_->Connect(id_ + 100));
}

TEST_F(ProxyTest, RemoveListenerEndsAnOpenTunnelAndRecordsItBeforeReturning) {
  Listen(ApiPolicy());
  UniqueFd c = ConnectLoopback(proxy_port_);
  ASSERT_TRUE(c.valid());
  SendAllTo(c.get(), "CONNECT api.example.test:" + up() + " HTTP/1.1\r\n\r\n");
  const auto established = ReadUntilEof(c.get(), 1s);
  ASSERT_NE(established.find("200 Connection established"), std::string::npos) << established;
  ASSERT_EQ(EventCount(), 0u);  // the tunnel is open: its record comes at its end
  const auto t0 = std::chrono::steady_clock::now();
  proxy_->RemoveListener(id_);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  ASSERT_EQ(EventCount(), 1u);  // recorded before RemoveListener returned
  const NetworkEvent e = WaitEvent();
  EXPECT_TRUE(e.allowed);
  EXPECT_NE(e.error.find("listener was removed"), std::string::npos) << e.error;
  bool eof = false;
  ReadUntilEof(c.get(), 2s, &eof);
  EXPECT_TRUE(eof);                                    // the client's end was shut down
  EXPECT_FALSE(ConnectLoopback(proxy_port_).valid());  // the listener is closed
  EXPECT_FALSE(proxy_->Connect(id_));
}

TEST_F(ProxyTest, ALargeBodyWithExpectContinueIsForwardedWhole) {
  Listen(ApiPolicy());
  testing::TempDir dir;
  const std::string body(2 * 1024 * 1024, 'b');
  testing::WriteFile(dir / "body", body);
  auto r = Curl({"-x", ProxyUrl(), "--data-binary", "@" + (dir / "body"),
                 "http://api.example.test:" + up() + "/upload"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("100 Continue"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hello from upstream"), std::string::npos) << r.out;
  const NetworkEvent e = WaitEvent();
  EXPECT_TRUE(e.allowed) << e.reason;
  EXPECT_EQ(e.method, "POST");
  EXPECT_EQ(e.bytes_up, body.size());
  ASSERT_TRUE(upstream_.WaitClosed(1));
  const std::string seen = upstream_.received()[0];
  EXPECT_EQ(seen.find("Expect:"), std::string::npos);  // the proxy answered it itself
  const auto head_end = seen.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_EQ(seen.substr(head_end + 4), body);
}

TEST_F(ProxyTest, ManyTunnelsAtOnceAreEachDecidedAndRecordedAndRemoveListenerEndsThemAll) {
  Listen(ApiPolicy());
  constexpr int kClients = 32;
  // First: parallel complete exchanges.
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      UniqueFd c = ConnectLoopback(proxy_port_);
      if (!c.valid()) return;
      SendAllTo(c.get(), "CONNECT api.example.test:" + up() + " HTTP/1.1\r\n\r\nGET /" +
                             std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n");
      std::string out;
      const auto end = std::chrono::steady_clock::now() + 10s;
      while (out.find("hello from upstream") == std::string::npos &&
             std::chrono::steady_clock::now() < end) {
        out += ReadUntilEof(c.get(), 100ms);
      }
      if (out.find("hello from upstream") != std::string::npos) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients);
  WaitEvent(kClients);
  // Then: tunnels left open, cut by RemoveListener, each recorded before it returns.
  std::vector<UniqueFd> open;
  for (int i = 0; i < kClients; ++i) {
    UniqueFd c = ConnectLoopback(proxy_port_);
    ASSERT_TRUE(c.valid());
    SendAllTo(c.get(), "CONNECT api.example.test:" + up() + " HTTP/1.1\r\n\r\n");
    open.push_back(std::move(c));
  }
  for (auto& c : open) {
    ASSERT_NE(ReadUntilEof(c.get(), 200ms).find("200 Connection established"), std::string::npos);
  }
  proxy_->RemoveListener(id_);
  ASSERT_EQ(EventCount(), 2u * kClients);
  int cut = 0;
  for (std::size_t i = kClients; i < 2u * kClients; ++i) {
    const NetworkEvent e = WaitEvent(i + 1);
    EXPECT_TRUE(e.allowed);
    cut += e.error.find("listener was removed") != std::string::npos;
  }
  EXPECT_EQ(cut, kClients);
}

double CpuSeconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

TEST_F(ProxyTest, ATunnelToAClientThatStopsReadingWaitsWithoutSpinning) {
  // An upstream that sends many small segments (each takes a pipe slot) to a client that has
  // stopped reading: once every buffer is full, the tunnel must sleep in poll, not spin.
  int port = 0;
  UniqueFd l = ListenLoopback(&port);
  ASSERT_TRUE(l.valid());
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    UniqueFd c(::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!c.valid()) return;
    const int one = 1;
    ::setsockopt(c.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const std::string chunk(100, 'x');
    while (!stop) {
      if (::send(c.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0) {
        if (errno != EAGAIN) return;
        pollfd p{c.get(), POLLOUT, 0};
        ::poll(&p, 1, 50);
      }
    }
  });
  Listen(MakePolicy({"slow.example.test:" + std::to_string(port)}, {},
                    {"slow.example.test=127.0.0.1"}));
  UniqueFd c = ConnectLoopback(proxy_port_);
  ASSERT_TRUE(c.valid());
  SendAllTo(c.get(), "CONNECT slow.example.test:" + std::to_string(port) + " HTTP/1.1\r\n\r\n");
  char buf[64];
  ASSERT_GT(::recv(c.get(), buf, sizeof buf, 0), 0);  // "HTTP/1.1 200 ..." and stop reading
  std::this_thread::sleep_for(1500ms);                // every buffer on the way fills up
  const double before = CpuSeconds();
  std::this_thread::sleep_for(1000ms);
  const double used = CpuSeconds() - before;
  EXPECT_LT(used, 0.3) << "the process used " << used << " s of CPU in 1 s of a stalled tunnel";
  stop = true;
  proxy_->RemoveListener(id_);
  sender.join();
}

TEST_F(ProxyTest, DestroyingTheProxyEndsOpenTunnelsAndRecordsThem) {
  Listen(ApiPolicy());
  UniqueFd c = ConnectLoopback(proxy_port_);
  ASSERT_TRUE(c.valid());
  SendAllTo(c.get(), "CONNECT api.example.test:" + up() + " HTTP/1.1\r\n\r\n");
  ASSERT_NE(ReadUntilEof(c.get(), 500ms).find("200 Connection established"), std::string::npos);
  proxy_.reset();
  ASSERT_EQ(EventCount(), 1u);
  EXPECT_NE(WaitEvent().error.find("listener was removed"), std::string::npos);
  bool eof = false;
  ReadUntilEof(c.get(), 2s, &eof);
  EXPECT_TRUE(eof);
}

TEST_F(ProxyTest, TheHostsOwnAddressesAreKnown) {
  const auto& own = proxy_->host_addresses();
  EXPECT_NE(std::find(own.begin(), own.end(), *ParseIpAddress("127.0.0.1")), own.end());
}

// A TLS server on 127.0.0.1 (Python's ssl with a certificate for api.example.test made here
// by openssl): the proxy only sees CONNECT, the TLS inside passes through untouched.
class TlsUpstream {
 public:
  explicit TlsUpstream(const testing::TempDir& dir) {
    auto r =
        testing::Run({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                      "-keyout", dir / "key.pem", "-out", dir / "cert.pem", "-days", "1", "-subj",
                      "/CN=api.example.test", "-addext", "subjectAltName=DNS:api.example.test"});
    if (r.exit_code != 0) return;
    cert_ = dir / "cert.pem";
    const std::string script =
        "import http.server,ssl,sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "  def do_GET(self):\n"
        "    b=b'hello over tls\\n'\n"
        "    self.send_response(200);self.send_header('Content-Length',str(len(b)))\n"
        "    self.end_headers();self.wfile.write(b)\n"
        "  def log_message(self,*a): pass\n"
        "s=http.server.ThreadingHTTPServer(('127.0.0.1',0),H)\n"
        "c=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER);c.load_cert_chain(sys.argv[1],sys.argv[2])\n"
        "s.socket=c.wrap_socket(s.socket,server_side=True)\n"
        "open(sys.argv[3]+'.tmp','w').write(str(s.server_address[1]))\n"
        "import os;os.rename(sys.argv[3]+'.tmp',sys.argv[3])\n"
        "s.serve_forever()\n";
    const std::string port_file = dir / "port";
    std::vector<std::string> argv = {"/usr/bin/python3", "-c",     script, dir / "cert.pem",
                                     dir / "key.pem",    port_file};
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    if (::posix_spawn(&pid_, cargv[0], nullptr, nullptr, cargv.data(), environ) != 0) pid_ = -1;
    for (int i = 0; i < 100 && pid_ > 0 && !testing::Exists(port_file); ++i) {
      std::this_thread::sleep_for(50ms);
    }
    if (testing::Exists(port_file)) port_ = std::stoi(testing::ReadFile(port_file));
  }
  ~TlsUpstream() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  int port() const { return port_; }
  const std::string& cert() const { return cert_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string cert_;
};

TEST_F(ProxyTest, TlsThroughConnectWithCurlAndUrllib) {
  testing::TempDir dir;
  TlsUpstream tls(dir);
  ASSERT_GT(tls.port(), 0) << "could not start the local TLS server (openssl, python3 ssl)";
  const std::string port = std::to_string(tls.port());
  Listen(MakePolicy({"api.example.test:" + port}, {}, {"api.example.test=127.0.0.1"}));
  auto r =
      Curl({"-x", ProxyUrl(), "--cacert", tls.cert(), "https://api.example.test:" + port + "/"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hello over tls"), std::string::npos) << r.out << r.err;
  NetworkEvent e = WaitEvent(1);
  EXPECT_TRUE(e.allowed) << e.reason;
  EXPECT_EQ(e.protocol, "connect");
  EXPECT_GT(e.bytes_up, 200u);    // a ClientHello and the encrypted request
  EXPECT_GT(e.bytes_down, 500u);  // the certificate and the encrypted response
  r = testing::Run(
      {"/usr/bin/python3", "-c",
       "import urllib.request,ssl,sys\n"
       "c=ssl.create_default_context(cafile=sys.argv[1])\n"
       "print(urllib.request.urlopen(sys.argv[2],context=c,timeout=20).read()."
       "decode())\n",
       tls.cert(), "https://api.example.test:" + port + "/py"},
      {"https_proxy=" + ProxyUrl(), "HTTPS_PROXY=" + ProxyUrl(), "no_proxy=", "NO_PROXY="});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hello over tls"), std::string::npos) << r.out << r.err;
  e = WaitEvent(2);
  EXPECT_TRUE(e.allowed) << e.reason;
  EXPECT_EQ(e.protocol, "connect");
  // The same server under a name the rules do not allow: refused at CONNECT.
  r = Curl({"-x", ProxyUrl(), "--cacert", tls.cert(), "https://other.example.test:" + port + "/"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(WaitEvent(3).allowed);
}

// ------------------------------------------------------------------ preset caches (issue 18)

// Each preset's variables name cordon's cache for it: npm and yarn, pip and uv, cargo.
TEST(PresetCacheTest, TheVariablesPointEachClientAtCordonsCache) {
  const struct {
    const char* preset;
    std::vector<std::pair<std::string, std::string>> env;
  } cases[] = {
      {"npm", {{"npm_config_cache", "/c/npm"}, {"YARN_CACHE_FOLDER", "/c/npm/yarn"}}},
      {"pypi", {{"PIP_CACHE_DIR", "/c/pypi/pip"}, {"UV_CACHE_DIR", "/c/pypi/uv"}}},
      {"crates", {{"CARGO_HOME", "/c/crates"}}},
  };
  for (const auto& c : cases) {
    const EgressPreset* p = FindEgressPreset(c.preset);
    ASSERT_NE(p, nullptr) << c.preset;
    EXPECT_EQ(PresetCacheEnvironment(*p, std::string("/c/") + c.preset), c.env) << c.preset;
  }
  ::setenv("XDG_CACHE_HOME", "/var/cache-of-user", 1);
  EXPECT_EQ(PresetCacheDir("npm"), "/var/cache-of-user/cordon/presets/npm");
  ::unsetenv("XDG_CACHE_HOME");
}

// Never a directory the host's own tools run from, nor the workspace, nor $HOME or above it.
TEST(PresetCacheTest, ACacheWhereTheHostOrTheWorkspaceLooksIsRefused) {
  const std::vector<std::string> host = {"/home/u/.npm", "/home/u/.cache/pip", "/home/u/.cargo",
                                         "/srv/npm-cache"};
  const struct {
    const char* dir;
    const char* refusal;  // a part of the reason; nullptr: allowed
  } cases[] = {
      {"/home/u/.cache/cordon/presets/npm", nullptr},
      {"/var/cache/u/cordon/presets/pypi", nullptr},
      {"/home/u/.npm", "host's own package tools"},
      {"/home/u/.npm/cordon/presets/npm", "host's own package tools"},
      {"/home/u/.cache/pip/cordon/presets/pypi", "host's own package tools"},
      {"/home/u/.cargo/cordon/presets/crates", "host's own package tools"},
      {"/srv", "host's own package tools"},  // holds the caller's npm_config_cache
      {"/home/u/proj/.cache/cordon/presets/npm", "workspace"},
      {"/home/u", "home directory"},
      {"/home", "holds your home"},
      {"/", "root directory"},
  };
  for (const auto& c : cases) {
    auto why = PresetCacheRefusal(c.dir, "/home/u/proj", "/home/u", host);
    if (c.refusal == nullptr) {
      EXPECT_FALSE(why) << c.dir << ": " << why.value_or("");
    } else {
      ASSERT_TRUE(why) << c.dir;
      EXPECT_NE(why->find(c.refusal), std::string::npos) << c.dir << ": " << *why;
    }
  }
  // A workspace below the cache is refused too: the grant would hold it.
  EXPECT_TRUE(PresetCacheRefusal("/w", "/w/proj", "/home/u", host));
}

TEST(PresetCacheTest, TheHostsOwnCachesAreItsToolsDefaultsAndWhatTheCallerSet) {
  std::string a = "PIP_CACHE_DIR=/srv/pip", b = "CARGO_HOME=relative/ignored",
              c = "XDG_CACHE_HOME=/xdg", d = "npm_config_cache=/srv/npm";
  char* env[] = {a.data(), b.data(), c.data(), d.data(), nullptr};
  const std::vector<std::string> paths = HostPackageCachePaths("/home/u", env);
  for (const char* p : {"/home/u/.npm", "/home/u/.yarn", "/home/u/.cargo", "/xdg/pip", "/xdg/uv",
                        "/xdg/yarn", "/srv/pip", "/srv/npm"}) {
    EXPECT_NE(std::find(paths.begin(), paths.end(), p), paths.end()) << p;
  }
  EXPECT_EQ(std::find(paths.begin(), paths.end(), "relative/ignored"), paths.end());
}

// cordon makes the directory (0700, every level its own) and refuses one a symlink redirects.
TEST(PresetCacheTest, TheCacheIsMadeByCordon0700AndASymlinkedLevelIsRefused) {
  testing::TempDir dir;
  ::setenv("XDG_CACHE_HOME", dir.path().c_str(), 1);
  auto missing = PreparePresetCacheDir("npm", false);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Code::kNotFound);
  EXPECT_FALSE(testing::Exists(dir / "cordon")) << "nothing is made without create";
  auto made = PreparePresetCacheDir("npm", true);
  ASSERT_TRUE(made) << made.error().ToString();
  EXPECT_EQ(*made, dir / "cordon/presets/npm");
  for (const char* level : {"cordon", "cordon/presets", "cordon/presets/npm"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir / level).c_str(), &st), 0) << level;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << level;
  }
  // A mode opened up since is closed again.
  ::chmod((dir / "cordon/presets/npm").c_str(), 0777);
  ASSERT_TRUE(PreparePresetCacheDir("npm", true));
  struct stat st {};
  ASSERT_EQ(::stat((dir / "cordon/presets/npm").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  // A level replaced by a symlink (to the user's ~/.npm, say) is not followed.
  std::filesystem::create_directories(dir / "home/.npm");
  std::filesystem::create_directory_symlink(dir / "home/.npm", dir / "cordon/presets/pypi");
  auto linked = PreparePresetCacheDir("pypi", true);
  ASSERT_FALSE(linked);
  EXPECT_EQ(linked.error().code, Code::kSandboxUnavailable);
  EXPECT_NE(linked.error().message.find("symlink"), std::string::npos) << linked.error().message;
  ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace cordon
