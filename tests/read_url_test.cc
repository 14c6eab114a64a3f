// read_url end to end: the real egress proxy (runner/egress_proxy) under read_url's rules, a
// local HTTP server on 127.0.0.1 behind a real-looking name (a resolve entry maps
// docs.example.test to it), and libcurl in between. HTML comes back as text, JSON as is; a
// redirect to a name the rules do not allow is refused naming it; a large body is capped;
// binary is refused; a hanging server times out; a name the proxy refuses is denied_by_policy
// with the proxy's reason, and every connection the proxy saw is a network event.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "runner/egress_proxy.h"
#include "tests/test_util.h"
#include "tools/registry.h"

namespace cordon {
namespace {

using testing::TempDir;

// A small HTTP/1.0 server on 127.0.0.1: one thread, one connection at a time, fixed routes.
class LocalHttpServer {
 public:
  LocalHttpServer() {
    listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_.get(), 16) != 0 ||
        ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1: " << std::strerror(errno);
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~LocalHttpServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  static const std::string& Page() {
    static const std::string page =
        "<!DOCTYPE html><html><head><title>The Guide</title><style>p{}</style>"
        "<script>var token = '</p>never shown';</script></head><body><h1>Install</h1>"
        "<p>Run <code>make</code> &amp; enjoy.</p><ul><li>one</li><li>two</li></ul>"
        "<a href=\"https://docs.example.test/next\">next</a></body></html>";
    return page;
  }
  static constexpr std::string_view kJson = R"({"a": [1, 2], "s": "<b>not html</b>"})";
  static constexpr std::size_t kBigBytes = 3u << 20;

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (c.valid()) Serve(c.get());
    }
  }
  void Send(int fd, std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return;  // the client went away (a capped body)
      data.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  void Respond(int fd, std::string_view status, std::string_view type, std::string_view body,
               std::string_view extra = "") {
    std::string head = "HTTP/1.0 " + std::string(status) +
                       "\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\nConnection: close\r\n";
    if (!type.empty()) head += "Content-Type: " + std::string(type) + "\r\n";
    head += std::string(extra) + "\r\n";
    Send(fd, head);
    Send(fd, body);
  }
  void Serve(int fd) {
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      req.append(buf, static_cast<std::size_t>(n));
    }
    const std::size_t sp = req.find(' ');
    const std::string path = req.substr(sp + 1, req.find(' ', sp + 1) - sp - 1);
    const std::string self = "http://docs.example.test:" + std::to_string(port_);
    if (path == "/page.html") {
      Respond(fd, "200 OK", "text/html; charset=utf-8", Page());
    } else if (path == "/data.json") {
      Respond(fd, "200 OK", "application/json", kJson);
    } else if (path == "/to-page") {
      Respond(fd, "302 Found", "text/plain", "moved", "Location: /page.html\r\n");
    } else if (path == "/to-evil") {
      Respond(fd, "302 Found", "text/plain", "moved",
              "Location: http://evil.example.test:" + std::to_string(port_) + "/page.html\r\n");
    } else if (path == "/loop") {
      Respond(fd, "302 Found", "text/plain", "again", "Location: " + self + "/loop\r\n");
    } else if (path == "/big") {
      std::string big;
      while (big.size() < kBigBytes) big += "0123456789abcde\n";
      Respond(fd, "200 OK", "text/plain", big);
    } else if (path == "/binary") {
      Respond(fd, "200 OK", "application/octet-stream",
              std::string("\x7f"
                          "ELF\x02\x01",
                          6));
    } else if (path == "/nul") {
      Respond(fd, "200 OK", "text/plain", std::string("abc\0def", 7));
    } else if (path == "/hang") {
      // Says nothing until the client gives up (or the server stops).
      for (int k = 0; k < 600 && !stop_; ++k) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 50) > 0) {
          if (::recv(fd, buf, sizeof buf, 0) <= 0) return;
        }
      }
    } else {
      Respond(fd, "404 Not Found", "text/plain", "not here");
    }
  }

  UniqueFd listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class ReadUrlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ws = Workspace::Open(dir_.path());
    ASSERT_TRUE(ws) << ws.error().message;
    ws_.emplace(std::move(*ws));
    const std::string port = std::to_string(server_.port());
    auto allow = ParseDomainRule("docs.example.test:" + port, "test");
    ASSERT_TRUE(allow) << allow.error().message;
    rules_.allow.push_back(*allow);
    auto resolve = ParseResolveEntry("docs.example.test=127.0.0.1", "test");
    ASSERT_TRUE(resolve) << resolve.error().message;
    rules_.resolve.push_back(*resolve);

    auto proxy = EgressProxy::Start();
    ASSERT_TRUE(proxy) << proxy.error().message;
    proxy_ = std::move(*proxy);
    // read_url's listener: never connected to, it names the rules Connect serves under.
    UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(listener.get(), 4), 0);
    listener_id_ =
        proxy_->AddListener(std::move(listener), rules_, "read_url", [this](const NetworkEvent& e) {
          std::lock_guard<std::mutex> lock(mu_);
          events_.push_back(e);
        });
  }
  void TearDown() override {
    if (proxy_) proxy_->RemoveListener(listener_id_);
  }

  std::string Url(const std::string& path, const std::string& host = "docs.example.test") {
    return "http://" + host + ":" + std::to_string(server_.port()) + path;
  }

  Result<Json> Read(Json input, bool with_proxy = true) {
    // The session's part read_url uses, served by this test's own proxy and listener.
    struct ProxyServices : ToolServices {
      EgressProxy* proxy = nullptr;
      std::uint64_t listener = 0;
      const EgressPolicy* rules = nullptr;
      const EgressPolicy* EgressRules() override { return rules; }
      Result<UniqueFd> ConnectEgress() override { return proxy->Connect(listener); }
    } services;
    if (with_proxy) {
      services.proxy = proxy_.get();
      services.listener = listener_id_;
      services.rules = &rules_;
    }
    ToolContext ctx{
        .workspace = *ws_, .policy = policy_, .services = services, .redactor = &redactor_};
    const ToolSpec* spec = FindTool("read_url");
    if (spec == nullptr) return Fail(Code::kInternal, "read_url is not registered");
    return spec->run(input, ctx);
  }
  std::vector<NetworkEvent> Events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // A connection's record is written when the proxy's thread sees both sides closed, which may
  // be just after read_url returned: wait for it (bounded).
  template <typename Pred>
  bool EventuallySeen(Pred pred) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      for (const auto& e : Events()) {
        if (pred(e)) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  TempDir dir_;
  std::optional<Workspace> ws_;
  Policy policy_;
  Redactor redactor_{testing::ShippedRedactRules()};
  LocalHttpServer server_;
  EgressPolicy rules_;
  std::unique_ptr<EgressProxy> proxy_;
  std::uint64_t listener_id_ = 0;
  std::mutex mu_;
  std::vector<NetworkEvent> events_;
};

TEST_F(ReadUrlTest, ReturnsReadableTextFromHtml) {
  auto r = Read({{"url", Url("/page.html")}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)["status"], 200);
  EXPECT_EQ((*r)["final_url"], Url("/page.html"));
  EXPECT_EQ((*r)["content_type"], "text/html; charset=utf-8");
  EXPECT_EQ((*r)["bytes"], LocalHttpServer::Page().size());
  EXPECT_EQ((*r)["truncated"], false);
  EXPECT_EQ((*r)["title"], "The Guide");
  EXPECT_EQ((*r)["text"],
            "# Install\n\nRun make & enjoy.\n\n- one\n- two\n\nnext "
            "(https://docs.example.test/next)");
  // The proxy saw the connection, by name, and allowed it.
  EXPECT_TRUE(EventuallySeen([](const NetworkEvent& e) {
    return e.host == "docs.example.test" && e.allowed && e.identity == "read_url";
  }));
}

TEST_F(ReadUrlTest, ReturnsJsonAsIs) {
  auto r = Read({{"url", Url("/data.json")}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)["text"], LocalHttpServer::kJson);
  EXPECT_EQ((*r)["title"], nullptr);
}

TEST_F(ReadUrlTest, FollowsARedirectToAnAllowedName) {
  auto r = Read({{"url", Url("/to-page")}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)["final_url"], Url("/page.html"));
  EXPECT_EQ((*r)["redirects"], Json::array({Url("/page.html")}));
  EXPECT_EQ((*r)["title"], "The Guide");
}

TEST_F(ReadUrlTest, RefusesARedirectToANameTheRulesDoNotAllow) {
  auto r = Read({{"url", Url("/to-evil")}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kDeniedByPolicy);
  EXPECT_NE(r.error().message.find("evil.example.test"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("not followed"), std::string::npos) << r.error().message;
  // The refused name was never asked for.
  for (const auto& e : Events()) EXPECT_NE(e.host, "evil.example.test");
}

TEST_F(ReadUrlTest, StopsAfterFiveRedirects) {
  auto r = Read({{"url", Url("/loop")}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kServerUnavailable);
  EXPECT_NE(r.error().message.find("more than 5"), std::string::npos) << r.error().message;
}

TEST_F(ReadUrlTest, CapsALargeBody) {
  auto r = Read({{"url", Url("/big")}, {"max_bytes", 100000}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)["bytes"], 100000);
  EXPECT_EQ((*r)["truncated"], true);
  // The text is cut at the policy's output limit, on a line of the body.
  const std::string text = (*r)["text"].get<std::string>();
  EXPECT_LE(text.size(), static_cast<std::size_t>(policy_.limits.max_output_bytes));
  EXPECT_EQ(text.substr(0, 32), "0123456789abcde\n0123456789abcde\n");
  // Without max_bytes the default (1 MiB) applies.
  r = Read({{"url", Url("/big")}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)["bytes"], 1 << 20);
  EXPECT_EQ((*r)["truncated"], true);
}

TEST_F(ReadUrlTest, RefusesBinary) {
  for (const char* path : {"/binary", "/nul"}) {
    auto r = Read({{"url", Url(path)}});
    ASSERT_FALSE(r) << path;
    EXPECT_EQ(r.error().code, Code::kBinaryFile) << path << ": " << r.error().message;
  }
}

TEST_F(ReadUrlTest, TimesOutOnAHangingServer) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = Read({{"url", Url("/hang")}, {"timeout_secs", 1}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kTimeout) << r.error().message;
  EXPECT_NE(r.error().message.find("1 s"), std::string::npos) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
}

TEST_F(ReadUrlTest, ANameTheProxyRefusesIsDeniedByPolicyWithItsReason) {
  auto r = Read({{"url", Url("/page.html", "other.example.test")}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kDeniedByPolicy) << r.error().message;
  EXPECT_NE(r.error().message.find("egress proxy refused other.example.test"), std::string::npos)
      << r.error().message;
  EXPECT_TRUE(EventuallySeen(
      [](const NetworkEvent& e) { return e.host == "other.example.test" && !e.allowed; }));
}

TEST_F(ReadUrlTest, WithoutAProxyItIsRefusedSayingWhatIsNeeded) {
  auto r = Read({{"url", Url("/page.html")}}, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kDeniedByPolicy);
  EXPECT_NE(r.error().message.find("docs/policy.md"), std::string::npos) << r.error().message;
}

TEST_F(ReadUrlTest, RefusesUrlsItDoesNotRead) {
  for (const char* url :
       {"ftp://docs.example.test/x", "file:///etc/passwd", "http://user:pw@docs.example.test/",
        "not a url", "gopher://docs.example.test/"}) {
    auto r = Read({{"url", url}});
    ASSERT_FALSE(r) << url;
    EXPECT_EQ(r.error().code, Code::kInvalidInput) << url << ": " << r.error().message;
  }
}

}  // namespace
}  // namespace cordon
