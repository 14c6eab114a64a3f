// read_url: one http(s) URL fetched with libcurl in cordon, through the session's egress proxy
// (docs/adr/0005-egress-proxy.md), so that it is decided and recorded under read_url's rules
// exactly like a sandbox's connection. Redirects are followed here, each one checked against
// the same rules first; the body is capped, HTML reduced to text in one linear pass
// (tools/html_text.h), other text returned as is, binary refused, and the text redacted.
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/text.h"
#include "runner/egress_proxy.h"
#include "tools/curl_loader.h"
#include "tools/html_text.h"
#include "tools/registry.h"

namespace cordon {
namespace {

constexpr std::int64_t kDefaultMaxBytes = 1 << 20;
constexpr int kMaxRedirects = 5;
constexpr std::size_t kMaxReadUrlBytes = 8192;
constexpr std::size_t kUrlSniffBytes = 1024;
constexpr std::size_t kMaxProxyHeadBytes = 8192;

std::string_view Trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// A URL as curl itself reads it, so the name checked is the name curl will send in CONNECT.
struct UrlParts {
  std::string url;  // curl's normalised rendering
  std::string scheme;
  std::string host;
  int port = 0;
};

Result<UrlParts> ParseUrl(const CurlApi& api, const std::string& url) {
  if (url.size() > kMaxReadUrlBytes) {
    return Fail(Code::kInvalidInput, "the URL is " + std::to_string(url.size()) +
                                         " bytes; at most " + std::to_string(kMaxReadUrlBytes) +
                                         " are taken");
  }
  if (url.find_first_of(std::string_view("\0\r\n\t ", 5)) != std::string::npos) {
    return Fail(Code::kInvalidInput, "the URL contains whitespace or a NUL byte");
  }
  std::unique_ptr<CURLU, void (*)(CURLU*)> h(api.url(), api.url_cleanup);
  if (!h) return Fail(Code::kInternal, "curl_url failed");
  if (CURLUcode rc = api.url_set(h.get(), CURLUPART_URL, url.c_str(), 0); rc != CURLUE_OK) {
    return Fail(Code::kInvalidInput, url + " is not an absolute URL (curl: error " +
                                         std::to_string(static_cast<int>(rc)) + ")");
  }
  auto get = [&](CURLUPart part, unsigned flags) -> std::optional<std::string> {
    char* p = nullptr;
    if (api.url_get(h.get(), part, &p, flags) != CURLUE_OK || p == nullptr) return std::nullopt;
    std::string s(p);
    api.free(p);
    return s;
  };
  UrlParts out;
  out.scheme = AsciiLower(get(CURLUPART_SCHEME, 0).value_or(""));
  if (out.scheme != "http" && out.scheme != "https") {
    return Fail(Code::kInvalidInput,
                url + ": only http and https URLs are read (the scheme is \"" + out.scheme + "\")");
  }
  if (get(CURLUPART_USER, 0) || get(CURLUPART_PASSWORD, 0)) {
    return Fail(Code::kInvalidInput,
                "the URL carries a user name or password; read_url sends "
                "no credentials");
  }
  out.host = get(CURLUPART_HOST, 0).value_or("");
  const std::string port = get(CURLUPART_PORT, CURLU_DEFAULT_PORT).value_or("");
  out.port = port.empty() ? 0 : std::atoi(port.c_str());
  out.url = get(CURLUPART_URL, 0).value_or(url);
  if (out.host.empty() || out.port <= 0) {
    return Fail(Code::kInvalidInput, url + " names no host");
  }
  return out;
}

// curl 7.88 (Debian 12) calls connect() even on a socket CURLOPT_SOCKOPTFUNCTION declared
// connected (curl issue #10626, fixed in 8.0), so the proxy's end of a socketpair cannot be
// handed to it. curl connects instead to a private listener of this call's own (an abstract
// Unix socket with a random name, so nothing is left on disk), whose one connection from this
// process (SO_PEERCRED; anyone else is turned away) is relayed to the socket ConnectEgress
// gave. read_url reads at most max_bytes, so the one extra copy costs nothing that matters.
class Relay {
 public:
  static Result<std::unique_ptr<Relay>> Listen() {
    std::unique_ptr<Relay> r(new Relay());
    r->listener_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!r->listener_.valid()) return SysFail(Code::kInternal, "socket", "read_url relay");
    unsigned char rnd[12];
    if (::getrandom(rnd, sizeof rnd, 0) != static_cast<ssize_t>(sizeof rnd)) {
      return SysFail(Code::kInternal, "getrandom", "read_url relay");
    }
    std::string name = "cordon-read_url-";
    for (unsigned char b : rnd) {
      name += "0123456789abcdef"[b >> 4];
      name += "0123456789abcdef"[b & 15];
    }
    r->addr_.sun_family = AF_UNIX;
    r->addr_.sun_path[0] = '\0';  // abstract: no file, gone with the socket
    std::memcpy(r->addr_.sun_path + 1, name.data(), name.size());
    r->addr_len_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (::bind(r->listener_.get(), reinterpret_cast<const sockaddr*>(&r->addr_), r->addr_len_) !=
            0 ||
        ::listen(r->listener_.get(), 4) != 0) {
      return SysFail(Code::kInternal, "bind/listen", "read_url relay");
    }
    return r;
  }
  ~Relay() {
    stop_ = true;
    // Wakes a read or write blocked in the thread; the descriptors stay open until it ends.
    if (client_.valid()) ::shutdown(client_.get(), SHUT_RDWR);
    if (upstream_.valid()) ::shutdown(upstream_.get(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
  }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  const sockaddr_un& address() const { return addr_; }
  socklen_t address_len() const { return addr_len_; }

  // Takes the proxy's socket and relays the one connection curl makes to the listener.
  void Start(UniqueFd upstream) {
    upstream_ = std::move(upstream);
    thread_ = std::thread([this] { Run(); });
  }

 private:
  Relay() = default;

  void Run() {
    // Accept: only a connection from this process is relayed.
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) continue;
      ucred cred{};
      socklen_t len = sizeof cred;
      if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
          cred.pid == ::getpid()) {
        client_ = std::move(c);
        break;
      }
    }
    listener_.Reset();
    if (stop_ || !client_.valid()) return;
    // Both ways until both are done; a direction ends with a half close of the other side.
    bool up_open = true, down_open = true;
    char buf[65536];
    while (!stop_ && (up_open || down_open)) {
      pollfd p[2] = {{client_.get(), static_cast<short>(up_open ? POLLIN : 0), 0},
                     {upstream_.get(), static_cast<short>(down_open ? POLLIN : 0), 0}};
      if (::poll(p, 2, 50) < 0 && errno != EINTR) return;
      if (up_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        up_open = Pump(client_.get(), upstream_.get(), buf, sizeof buf);
        if (!up_open) ::shutdown(upstream_.get(), SHUT_WR);
      }
      if (down_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
        down_open = Pump(upstream_.get(), client_.get(), buf, sizeof buf);
        if (!down_open) ::shutdown(client_.get(), SHUT_WR);
      }
    }
  }
  // One read and its writes; false when the source is done or either side failed.
  static bool Pump(int from, int to, char* buf, std::size_t size) {
    const ssize_t n = ::recv(from, buf, size, MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;
    for (ssize_t off = 0; off < n;) {
      const ssize_t w = ::send(to, buf + off, static_cast<std::size_t>(n - off), MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      off += w;
    }
    return true;
  }

  UniqueFd listener_;
  UniqueFd client_;
  UniqueFd upstream_;
  sockaddr_un addr_{};
  socklen_t addr_len_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What one request got.
struct Hop {
  CURLcode rc = CURLE_OK;
  long status = 0;
  long connect_code = 0;  // the proxy's answer to CONNECT
  std::string content_type;
  std::string redirect_url;
  std::string body;
  bool capped = false;
  std::string proxy_head;  // the CONNECT response's status line and headers
  bool in_proxy_head = true;
  std::optional<Error> socket_error;
  char curl_error[CURL_ERROR_SIZE] = {};
};

struct Transfer {
  ToolContext* ctx;
  Hop* hop;
  std::size_t max_bytes;
  std::unique_ptr<Relay> relay;  // one per connection curl opens (one: the proxy's)
};

// The proxy's one-line reason for a refusal: an X-Cordon-Reason header, a Proxy-Status
// details parameter (RFC 9209), else its status line's reason phrase. curl discards the body
// of a refused CONNECT, so the reason must come from the head.
std::string ProxyReason(std::string_view head) {
  std::string status_reason;
  std::size_t start = 0;
  bool first = true;
  while (start < head.size()) {
    std::size_t end = head.find('\n', start);
    if (end == std::string_view::npos) end = head.size();
    const std::string_view line = Trim(head.substr(start, end - start));
    start = end + 1;
    if (first) {
      first = false;
      // "HTTP/1.1 403 reason words"
      const std::size_t sp1 = line.find(' ');
      const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
      if (sp2 != std::string_view::npos) status_reason = std::string(Trim(line.substr(sp2 + 1)));
      continue;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string name = AsciiLower(Trim(line.substr(0, colon)));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (name == "x-cordon-reason" && !value.empty()) return std::string(value);
    if (name == "proxy-status") {
      if (std::size_t d = value.find("details=\""); d != std::string_view::npos) {
        const std::size_t q = value.find('"', d + 9);
        if (q != std::string_view::npos) return std::string(value.substr(d + 9, q - d - 9));
      }
    }
  }
  if (status_reason.empty() || AsciiLower(status_reason) == "forbidden") {
    return "the name, the port or the address it resolves to is not allowed for read_url";
  }
  return status_reason;
}

Hop FetchOnce(const CurlApi& api, ToolContext& ctx, const std::string& url, std::size_t max_bytes,
              std::chrono::milliseconds timeout) {
  Hop hop;
  Transfer t{&ctx, &hop, max_bytes, nullptr};
  std::unique_ptr<CURL, void (*)(CURL*)> curl(api.easy_init(), api.easy_cleanup);
  if (!curl) {
    hop.socket_error = Error{Code::kInternal, "curl_easy_init failed", 0, {}};
    return hop;
  }
  CURL* c = curl.get();
  const std::string proxy = "http://127.0.0.1:" + std::to_string(kSandboxProxyPort);
  api.easy_setopt(c, CURLOPT_URL, url.c_str());
  api.easy_setopt(c, CURLOPT_HTTPGET, 1L);
  api.easy_setopt(c, CURLOPT_ERRORBUFFER, hop.curl_error);
  api.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  api.easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  api.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);  // each redirect is checked first (Run)
  api.easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  api.easy_setopt(c, CURLOPT_USERAGENT, "cordon-read_url/1");
  api.easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // the cap counts decoded bytes
  // Every connection goes to the proxy, plain HTTP too (CONNECT host:80): a refusal is then
  // always the proxy's answer to CONNECT, never confused with a site's own 403. The proxy is
  // an IP literal (no DNS query), NO_PROXY of the environment is overridden (nothing goes
  // direct), and whatever address curl has, its socket reaches only ConnectEgress's (Relay).
  api.easy_setopt(c, CURLOPT_PROXY, proxy.c_str());
  api.easy_setopt(c, CURLOPT_NOPROXY, "");
  api.easy_setopt(c, CURLOPT_HTTPPROXYTUNNEL, 1L);
  api.easy_setopt(c, CURLOPT_OPENSOCKETDATA, &t);
  api.easy_setopt(
      c, CURLOPT_OPENSOCKETFUNCTION,
      +[](void* data, curlsocktype, curl_sockaddr* address) -> curl_socket_t {
        auto* tr = static_cast<Transfer*>(data);
        if (tr->ctx->services.EgressRules() == nullptr || tr->relay) return CURL_SOCKET_BAD;
        Result<UniqueFd> upstream = tr->ctx->services.ConnectEgress();
        if (!upstream) {
          tr->hop->socket_error = upstream.error();
          return CURL_SOCKET_BAD;
        }
        auto relay = Relay::Listen();
        if (!relay) {
          tr->hop->socket_error = relay.error();
          return CURL_SOCKET_BAD;
        }
        UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!sock.valid()) {
          tr->hop->socket_error = Error{Code::kInternal, "socket(AF_UNIX) failed", errno, {}};
          return CURL_SOCKET_BAD;
        }
        // curl connects this socket to the relay instead of the proxy's address. The address
        // lives in curl's sockaddr_storage (struct Curl_sockaddr_ex), of which curl_sockaddr
        // shows only the first 16 bytes: the 43 bytes of the abstract address fit its 128.
        address->family = AF_UNIX;
        address->socktype = SOCK_STREAM;
        address->protocol = 0;
        address->addrlen = (*relay)->address_len();
        std::memcpy(reinterpret_cast<char*>(address) + offsetof(curl_sockaddr, addr),
                    &(*relay)->address(), (*relay)->address_len());
        (*relay)->Start(std::move(*upstream));
        tr->relay = std::move(*relay);
        return sock.Release();  // curl owns it now; CLOSESOCKETFUNCTION closes it
      });
  api.easy_setopt(
      c, CURLOPT_CLOSESOCKETFUNCTION, +[](void*, curl_socket_t fd) -> int {
        UniqueFd owned(fd);  // closed here
        return 0;
      });
  api.easy_setopt(c, CURLOPT_HEADERDATA, &t);
  api.easy_setopt(
      c, CURLOPT_HEADERFUNCTION, +[](char* p, std::size_t size, std::size_t n, void* data) {
        auto* tr = static_cast<Transfer*>(data);
        Hop& h = *tr->hop;
        const std::string_view line(p, size * n);
        if (h.in_proxy_head) {
          // The first head is the proxy's answer to CONNECT (every request is tunnelled).
          if (h.proxy_head.size() + line.size() <= kMaxProxyHeadBytes) h.proxy_head += line;
          if (line == "\r\n" || line == "\n") h.in_proxy_head = false;
        }
        return size * n;
      });
  api.easy_setopt(c, CURLOPT_WRITEDATA, &t);
  api.easy_setopt(
      c, CURLOPT_WRITEFUNCTION, +[](char* p, std::size_t size, std::size_t n, void* data) {
        auto* tr = static_cast<Transfer*>(data);
        Hop& h = *tr->hop;
        const std::size_t len = size * n;
        const std::size_t room = tr->max_bytes - h.body.size();
        if (len > room) {
          h.body.append(p, room);
          h.capped = true;
          return std::size_t{0};  // ends the transfer: nothing more is read
        }
        h.body.append(p, len);
        return len;
      });
  api.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  api.easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  api.easy_setopt(
      c, CURLOPT_XFERINFOFUNCTION,
      +[](void* data, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
        auto* tr = static_cast<Transfer*>(data);
        return tr->ctx->cancel != nullptr && tr->ctx->cancel->load() ? 1 : 0;
      });
  hop.rc = api.easy_perform(c);
  api.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &hop.status);
  api.easy_getinfo(c, CURLINFO_HTTP_CONNECTCODE, &hop.connect_code);
  char* ct = nullptr;
  if (api.easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct != nullptr) {
    hop.content_type = ct;
  }
  char* location = nullptr;
  if (api.easy_getinfo(c, CURLINFO_REDIRECT_URL, &location) == CURLE_OK && location != nullptr) {
    hop.redirect_url = location;
  }
  return hop;
}

enum class BodyKind { kHtml, kText, kBinary };

BodyKind Classify(std::string_view media, std::string_view body) {
  if (media.empty()) {
    // No content type: HTML if it says so, else text unless it looks binary (checked later).
    std::string head = AsciiLower(Trim(body.substr(0, 512)));
    return head.rfind("<!doctype html", 0) == 0 || head.rfind("<html", 0) == 0 ? BodyKind::kHtml
                                                                               : BodyKind::kText;
  }
  if (media == "text/html" || media == "application/xhtml+xml") return BodyKind::kHtml;
  auto ends_with = [&](std::string_view suffix) {
    return media.size() >= suffix.size() && media.substr(media.size() - suffix.size()) == suffix;
  };
  if (media.rfind("text/", 0) == 0 || media == "application/json" || media == "application/xml" ||
      media == "application/javascript" || media == "application/ecmascript" ||
      media == "application/x-javascript" || media == "application/x-ndjson" ||
      media == "application/yaml" || media == "application/x-yaml" || media == "application/toml" ||
      ends_with("+json") || ends_with("+xml")) {
    return BodyKind::kText;
  }
  return BodyKind::kBinary;
}

// ISO-8859-1 (and its superset windows-1252, read as Latin-1) to UTF-8: every byte is a
// code point. Any other declared charset is taken as UTF-8 and repaired.
std::string Latin1ToUtf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (unsigned char c : in) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

// Cuts `text` to `cap` bytes on a code point, moved back so that no secret is cut in two,
// then redacts it. Returns whether it cut.
bool CutAndRedact(std::string& text, std::size_t cap, const Redactor* redactor) {
  bool cut = false;
  if (text.size() > cap) {
    std::size_t at = cap;
    while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xc0) == 0x80) --at;
    if (redactor != nullptr) at = redactor->CutBefore(text, at);
    text.resize(at);
    cut = true;
  }
  if (redactor != nullptr) redactor->Redact(text);
  return cut;
}

std::string LimitKey(const Policy& policy, const std::string& key) {
  if (auto it = policy.tools.find("read_url");
      it != policy.tools.end() && it->second.limits.count(key) > 0) {
    return "tools.read_url." + key;
  }
  return "limits." + key;
}

std::string DecidedBy(const Policy& policy, const std::string& key) {
  auto it = policy.provenance.find(key);
  return it == policy.provenance.end() ? "built-in default" : it->second;
}

Result<Json> RunReadUrl(const Json& in, ToolContext& ctx) {
  const Limits lim = ctx.policy.LimitsFor("read_url");
  const std::string url = in["url"].get<std::string>();

  // The limits: what the call asked for, cut to the policy's.
  const std::string time_key = LimitKey(ctx.policy, "timeout_secs");
  const std::int64_t asked_secs = in.value("timeout_secs", lim.timeout_secs);
  const std::int64_t timeout_secs = std::min(asked_secs, lim.timeout_secs);
  std::string timeout_what =
      std::to_string(timeout_secs) + " s (" +
      (in.contains("timeout_secs") ? "the call's timeout_secs"
                                   : time_key + ", " + DecidedBy(ctx.policy, time_key)) +
      ")";
  if (asked_secs > timeout_secs) {
    timeout_what = std::to_string(timeout_secs) + " s: the " + std::to_string(asked_secs) +
                   " s asked for were cut to it by " + time_key + " (" +
                   DecidedBy(ctx.policy, time_key) + ")";
  }
  const std::int64_t max_bytes =
      std::min<std::int64_t>(in.value("max_bytes", kDefaultMaxBytes), lim.max_file_bytes);
  const std::size_t text_cap = static_cast<std::size_t>(lim.max_output_bytes);

  ASSIGN_OR_RETURN(const CurlApi* api, Curl());
  ASSIGN_OR_RETURN(UrlParts parts, ParseUrl(*api, url));  // bad input first, whatever the policy
  if (ctx.services.EgressRules() == nullptr) {
    return Fail(Code::kDeniedByPolicy,
                "read_url needs network mode proxy with allow_domains for read_url (see "
                "docs/policy.md); this session has no egress proxy for it");
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_secs);
  Json redirects = Json::array();
  Hop hop;
  for (int hops = 0;; ++hops) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Fail(Code::kTimeout, "read_url ran past " + timeout_what + " reading " + parts.url);
    }
    hop = FetchOnce(*api, ctx, parts.url, static_cast<std::size_t>(max_bytes), left);
    const std::string where = parts.host + ":" + std::to_string(parts.port);
    if (hop.socket_error) return std::unexpected(*hop.socket_error);
    if (ctx.cancel != nullptr && ctx.cancel->load()) {
      return Fail(Code::kCancelled, "read_url was cancelled reading " + parts.url);
    }
    if (hop.connect_code == 403) {
      return Fail(Code::kDeniedByPolicy,
                  "the egress proxy refused " + where + ": " + ProxyReason(hop.proxy_head));
    }
    if (hop.rc == CURLE_OPERATION_TIMEDOUT) {
      return Fail(Code::kTimeout, "read_url ran past " + timeout_what + " reading " + parts.url);
    }
    if (hop.connect_code != 0 && hop.connect_code / 100 != 2) {
      return Fail(Code::kServerUnavailable, "the egress proxy could not reach " + where +
                                                " (HTTP " + std::to_string(hop.connect_code) +
                                                "): " + ProxyReason(hop.proxy_head));
    }
    if (hop.rc != CURLE_OK && !(hop.rc == CURLE_WRITE_ERROR && hop.capped)) {
      const std::string detail =
          hop.curl_error[0] != '\0' ? hop.curl_error : api->easy_strerror(hop.rc);
      return Fail(Code::kServerUnavailable, "reading " + parts.url + " failed: " + detail);
    }
    const bool redirect = hop.status == 301 || hop.status == 302 || hop.status == 303 ||
                          hop.status == 307 || hop.status == 308;
    if (!redirect || hop.redirect_url.empty()) break;
    if (hops == kMaxRedirects) {
      return Fail(Code::kServerUnavailable, parts.url + " redirected more than " +
                                                std::to_string(kMaxRedirects) +
                                                " times; read_url stopped there");
    }
    // The next name is checked before it is asked for: the proxy would refuse it too, but
    // this error says which redirect it was.
    auto next = ParseUrl(*api, hop.redirect_url);
    if (!next) {
      return Fail(Code::kDeniedByPolicy,
                  parts.url + " redirected to " + hop.redirect_url +
                      ", which read_url does not follow: " + next.error().message);
    }
    if (const EgressPolicy* rules = ctx.services.EgressRules()) {
      auto host = ParseEgressHost(next->host);
      if (!host) {
        return Fail(Code::kDeniedByPolicy,
                    parts.url + " redirected to " + next->host +
                        ", which is not a host name read_url follows: " + host.error().message);
      }
      NameDecision d = DecideName(*rules, *host, next->port);
      if (!d.allowed) {
        return Fail(Code::kDeniedByPolicy, parts.url + " redirected to " + host->name + ":" +
                                               std::to_string(next->port) +
                                               ", which read_url's network rules do not allow (" +
                                               d.reason + "); the redirect was not followed");
      }
    }
    redirects.push_back(next->url);
    parts = std::move(*next);
  }

  // The body: HTML to text, other text as is, anything else refused.
  const std::string content_type = hop.content_type;
  std::string media = AsciiLower(Trim(content_type.substr(0, content_type.find(';'))));
  std::string charset;
  if (std::size_t cs = AsciiLower(content_type).find("charset="); cs != std::string::npos) {
    charset = AsciiLower(Trim(content_type.substr(cs + 8)));
    charset = charset.substr(0, charset.find(';'));
    if (charset.size() >= 2 && charset.front() == '"')
      charset = charset.substr(1, charset.size() - 2);
  }
  const BodyKind kind = Classify(media, hop.body);
  const std::string what = parts.url + " (" + (media.empty() ? "no content type" : media) + ")";
  if (kind == BodyKind::kBinary) {
    return Fail(Code::kBinaryFile, what +
                                       " is not text; read_url returns only text, HTML, "
                                       "JSON, XML and JavaScript");
  }
  if (std::memchr(hop.body.data(), '\0', std::min(hop.body.size(), kUrlSniffBytes)) != nullptr) {
    return Fail(Code::kBinaryFile, what + " looks binary (a NUL byte in its first " +
                                       std::to_string(kUrlSniffBytes) +
                                       " bytes); it is not returned as text");
  }
  const std::size_t received = hop.body.size();
  std::string body = charset == "iso-8859-1" || charset == "latin1" || charset == "windows-1252" ||
                             charset == "us-ascii"
                         ? Latin1ToUtf8(hop.body)
                         : std::move(hop.body);
  bool cut = false;
  std::string text;
  Json title = nullptr;
  if (kind == BodyKind::kHtml) {
    HtmlTextOptions o;
    o.max_output_bytes = text_cap + Redactor::kWindow;  // room for the cut to move back
    HtmlText h = HtmlToText(body, o);
    text = std::move(h.text);
    cut = h.truncated;
    if (!h.title.empty()) {
      if (ctx.redactor != nullptr) ctx.redactor->Redact(h.title);
      title = std::move(h.title);
    }
  } else {
    text = RepairUtf8(body);
  }
  cut = CutAndRedact(text, text_cap, ctx.redactor) || cut;
  return Json{{"status", hop.status},           {"final_url", parts.url},
              {"content_type", content_type},   {"bytes", received},
              {"truncated", hop.capped || cut}, {"redirects", std::move(redirects)},
              {"title", std::move(title)},      {"text", std::move(text)}};
}

}  // namespace

ToolSpec MakeReadUrlTool() {
  ToolSpec t;
  t.name = "read_url";
  t.description =
      "Fetch one http(s) URL through cordon's egress proxy, under the policy's allowed domains, "
      "and return it as text: HTML reduced to readable text, JSON, XML and other text as is, "
      "binary refused. Redirects are followed (at most 5) only to allowed names. The body is "
      "capped at max_bytes and the text at the policy's output limit.";
  t.scope = "net:read";
  t.effect = Effect::kNone;  // no file or process; the connection is a `network` record
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"url",
         {{"type", "string"},
          {"minLength", 8},
          {"maxLength", static_cast<std::int64_t>(kMaxReadUrlBytes)},
          {"description", "An absolute http:// or https:// URL, without credentials."}}},
        {"max_bytes",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", std::int64_t{1} << 30},
          {"description",
           "Bytes of the body to read, at most the policy's limits.max_file_bytes. Default "
           "1 MiB; a longer body is cut (truncated: true)."}}},
        {"timeout_secs",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", 86400},
          {"description",
           "The whole fetch, redirects included; at most the policy's timeout. "
           "Default: the policy's timeout."}}}}},
      {"required", {"url"}},
      {"additionalProperties", false}};
  SetOutputSchemas(
      t,
      {{"status", {{"type", "integer"}}},
       {"final_url", {{"type", "string"}}},
       {"content_type", {{"type", "string"}}},
       {"bytes", {{"type", "integer"}}},
       {"truncated", {{"type", "boolean"}}},
       {"redirects", {{"type", "array"}, {"items", {{"type", "string"}}}}},
       {"title", {{"type", {"string", "null"}}}},
       {"text", {{"type", "string"}}}},
      {"status", "final_url", "content_type", "bytes", "truncated", "redirects", "title", "text"});
  t.example = {{"url", "https://docs.example.test/guide.html"}, {"max_bytes", 65536}};
  // net:read and an allowlist are the user's to grant: under the shipped policy the example
  // is refused, and says how to allow it.
  t.example_code = Code::kDeniedByPolicy;
  t.run = RunReadUrl;
  return t;
}

}  // namespace cordon
