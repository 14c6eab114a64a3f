// The audit-netlink reader for Landlock denials: record parsing and the summary bounds (pure),
// AUDIT_GET (the kernel's switch and queue length), and the per-session reader thread.
#include "runner/kernel_audit.h"

#include <linux/audit.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace cordon {
namespace {

using Clock = std::chrono::steady_clock;

// How long Collect waits, at most, for the kernel to deliver and release a process's domains.
constexpr auto kCollectBudget = std::chrono::milliseconds(500);
// Domains nobody watches (other programs' Landlock domains, or ours before Watch) kept at most.
constexpr std::size_t kMaxUnwatchedDomains = 64;

bool IsHex(std::string_view s) {
  if (s.empty() || s.size() % 2 != 0) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
  });
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// The kernel's audit_log_untrustedstring: "quoted" when printable, hex otherwise.
std::string Untrusted(std::string_view raw, bool quoted) {
  if (quoted || !IsHex(raw)) return std::string(raw);
  std::string out;
  for (std::size_t i = 0; i + 1 < raw.size(); i += 2) {
    out.push_back(static_cast<char>(HexDigit(raw[i]) * 16 + HexDigit(raw[i + 1])));
  }
  return out;
}

struct Field {
  std::string key, value;
  bool quoted = false;
};

std::vector<Field> Fields(std::string_view text) {
  std::vector<Field> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    const std::size_t eq = text.find('=', i);
    if (eq == std::string_view::npos) break;
    Field f;
    f.key = std::string(text.substr(i, eq - i));
    i = eq + 1;
    if (i < text.size() && text[i] == '"') {
      const std::size_t end = text.find('"', i + 1);
      if (end == std::string_view::npos) break;
      f.value = std::string(text.substr(i + 1, end - i - 1));
      f.quoted = true;
      i = end + 1;
    } else {
      const std::size_t end = std::min(text.find(' ', i), text.size());
      f.value = std::string(text.substr(i, end - i));
      i = end;
    }
    if (f.key.find(' ') != std::string::npos) break;
    out.push_back(std::move(f));
  }
  return out;
}

std::optional<std::uint64_t> Number(std::string_view s, int base) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (base == 16 && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) d = HexDigit(c);
    if (d < 0) return std::nullopt;
    v = v * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(d);
  }
  return v;
}

std::string EntryKey(const DenialSummary::Entry& e) {
  return e.blockers + '\0' + e.path + '\0' + e.address + '\0' + e.object;
}

// One AUDIT_GET round trip on its own socket (CAP_AUDIT_CONTROL).
Result<audit_status> AuditGet() {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT));
  if (!fd.valid()) return SysFail(Code::kSandboxUnavailable, "socket(NETLINK_AUDIT)", "");
  timeval tv{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  nlmsghdr req{};
  req.nlmsg_len = NLMSG_LENGTH(0);
  req.nlmsg_type = AUDIT_GET;
  req.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  req.nlmsg_seq = 1;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd.get(), &req, req.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) < 0) {
    return SysFail(Code::kSandboxUnavailable, "AUDIT_GET", "");
  }
  alignas(nlmsghdr) char buf[8192];
  for (int round = 0; round < 4; ++round) {
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0) return SysFail(Code::kSandboxUnavailable, "AUDIT_GET reply", "");
    int len = static_cast<int>(n);  // signed: NLMSG_NEXT may step past an unaligned end
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        if (e->error != 0) {
          errno = -e->error;
          return SysFail(Code::kSandboxUnavailable, "AUDIT_GET", "");
        }
      } else if (h->nlmsg_type == AUDIT_GET) {
        audit_status st{};
        std::memcpy(&st, NLMSG_DATA(h),
                    std::min<std::size_t>(sizeof st, h->nlmsg_len - NLMSG_HDRLEN));
        return st;
      }
    }
  }
  return Fail(Code::kSandboxUnavailable, "AUDIT_GET: no status in the kernel's reply");
}

// The multicast reader socket; EPERM without CAP_AUDIT_READ.
Result<UniqueFd> BindReadlog() {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT));
  if (!fd.valid()) return SysFail(Code::kSandboxUnavailable, "socket(NETLINK_AUDIT)", "");
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = 1u << (AUDIT_NLGRP_READLOG - 1);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return SysFail(Code::kSandboxUnavailable, "bind(AUDIT_NLGRP_READLOG)", "");
  }
  return fd;
}

}  // namespace

std::optional<LandlockAuditEvent> ParseLandlockAuditRecord(std::uint16_t type,
                                                           std::string_view text) {
  if (type != kAuditLandlockAccess && type != kAuditLandlockDomain) return std::nullopt;
  // Drop the "audit(TS:SERIAL): " prefix and any trailing NULs/newlines.
  if (text.rfind("audit(", 0) == 0) {
    const std::size_t p = text.find("): ");
    if (p == std::string_view::npos) return std::nullopt;
    text.remove_prefix(p + 3);
  }
  while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.remove_suffix(1);
  const std::vector<Field> fields = Fields(text);
  if (fields.empty() || fields[0].key != "domain") return std::nullopt;
  LandlockAuditEvent e;
  auto domain = Number(fields[0].value, 16);
  if (!domain) return std::nullopt;
  e.domain = *domain;
  auto get = [&](std::string_view key) -> const Field* {
    for (const auto& f : fields) {
      if (f.key == key) return &f;
    }
    return nullptr;
  };
  if (type == kAuditLandlockDomain) {
    const Field* status = get("status");
    if (status == nullptr) return std::nullopt;
    if (status->value == "allocated") {
      const Field* pid = get("pid");
      auto n = pid != nullptr ? Number(pid->value, 10) : std::nullopt;
      if (!n || *n == 0 || *n > 0x7fffffff) return std::nullopt;
      e.kind = LandlockAuditEvent::Kind::kAllocated;
      e.pid = static_cast<pid_t>(*n);
      if (const Field* exe = get("exe")) e.exe = Untrusted(exe->value, exe->quoted);
      return e;
    }
    if (status->value == "deallocated") {
      const Field* d = get("denials");
      auto n = d != nullptr ? Number(d->value, 10) : std::nullopt;
      if (!n) return std::nullopt;
      e.kind = LandlockAuditEvent::Kind::kDeallocated;
      e.denials = *n;
      return e;
    }
    return std::nullopt;
  }
  const Field* blockers = get("blockers");
  if (blockers == nullptr || blockers->value.empty()) return std::nullopt;
  e.kind = LandlockAuditEvent::Kind::kAccess;
  e.blockers = blockers->value;
  if (e.blockers.rfind("net.", 0) == 0) {
    const Field* addr = get("daddr");
    const Field* port = get("dest");
    if (addr == nullptr && port == nullptr) {
      addr = get("saddr");
      port = get("src");
    }
    std::string a = addr != nullptr ? addr->value : "";
    if (a.find(':') != std::string::npos) a = "[" + a + "]";
    e.address = a + ":" + (port != nullptr ? port->value : "?");
    return e;
  }
  if (const Field* path = get("path")) {
    e.path = Untrusted(path->value, path->quoted);
    return e;
  }
  for (const auto& f : fields) {
    if (f.key == "domain" || f.key == "blockers") continue;
    const bool untrusted = f.key == "ocomm" || f.key == "comm" || f.key == "name";
    e.object += (e.object.empty() ? "" : " ") + f.key + "=" +
                (untrusted ? Untrusted(f.value, f.quoted) : f.value);
  }
  return e;
}

void MergeEntry(DenialSummary& s, const DenialSummary::Entry& entry) {
  const std::string key = EntryKey(entry);
  for (auto& e : s.listed) {
    if (EntryKey(e) == key) {
      e.count += entry.count;
      return;
    }
  }
  if (s.listed.size() < DenialSummary::kMaxListed) {
    s.listed.push_back(entry);
    return;
  }
  s.omitted += entry.count;
}

void AddDenial(DenialSummary& s, const LandlockAuditEvent& access) {
  ++s.received;
  MergeEntry(s, {access.blockers, access.path, access.address, access.object, 1});
}

Json DenialSummary::ToJson() const {
  Json list = Json::array();
  for (const auto& e : listed) {
    Json j = {{"blockers", e.blockers}, {"count", e.count}};
    if (!e.path.empty()) j["path"] = e.path;
    if (!e.address.empty()) j["address"] = e.address;
    if (!e.object.empty()) j["object"] = e.object;
    list.push_back(std::move(j));
  }
  Json j = {
      {"denials", list}, {"omitted", omitted}, {"received", received}, {"complete", complete}};
  if (kernel_total) j["kernel_total"] = *kernel_total;
  if (!complete) j["incomplete_reason"] = incomplete_reason;
  return j;
}

Result<int> KernelAuditEnabled() {
  ASSIGN_OR_RETURN(audit_status st, AuditGet());
  return static_cast<int>(st.enabled);
}

KernelAuditStatus ProbeKernelAudit(int landlock_abi) {
  if (landlock_abi < 7) {
    return {false, "not recorded: the kernel's Landlock ABI is " + std::to_string(landlock_abi) +
                       "; logging denials after exec needs ABI 7 (Linux 6.15)"};
  }
  auto sock = BindReadlog();
  if (!sock) {
    return {false, sock.error().err == EPERM ? "not recorded: needs CAP_AUDIT_READ (root)"
                                             : "not recorded: the audit netlink is unavailable: " +
                                                   sock.error().ToString()};
  }
  auto enabled = KernelAuditEnabled();
  if (!enabled) {
    return {false,
            "not recorded: cannot read the kernel's audit status (needs "
            "CAP_AUDIT_CONTROL): " +
                enabled.error().ToString()};
  }
  if (*enabled == 0) {
    return {false,
            "not recorded: the kernel's audit is disabled; cordon does not enable it for the host "
            "(auditctl -e 1, or boot with audit=1)"};
  }
  return {true, "recorded"};
}

Result<std::shared_ptr<KernelAudit>> KernelAudit::Start(int landlock_abi) {
  KernelAuditStatus st = ProbeKernelAudit(landlock_abi);
  if (!st.available) return Fail(Code::kSandboxUnavailable, st.reason);
  auto ka = std::shared_ptr<KernelAudit>(new KernelAudit());
  ASSIGN_OR_RETURN(ka->sock_, BindReadlog());
  // Room for bursts while the thread is descheduled: other audit traffic shares the group.
  int bytes = 4 << 20;
  if (::setsockopt(ka->sock_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0) {
    ::setsockopt(ka->sock_.get(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  }
  ka->wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!ka->wake_.valid()) return SysFail(Code::kSandboxUnavailable, "eventfd", "");
  KernelAudit* raw = ka.get();
  ka->thread_ = std::thread([raw] { raw->Loop(); });
  return ka;
}

KernelAudit::~KernelAudit() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  const std::uint64_t one = 1;
  ssize_t n = ::write(wake_.get(), &one, sizeof one);
  (void)n;
  if (thread_.joinable()) thread_.join();
}

void KernelAudit::Loop() {
  alignas(nlmsghdr) static thread_local char buf[65536];
  while (true) {
    pollfd fds[2] = {{sock_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    std::uint64_t requested = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      requested = drain_requested_;
    }
    std::uint64_t ignored = 0;
    ssize_t w = ::read(wake_.get(), &ignored, sizeof ignored);
    (void)w;
    // Everything queued on the socket now, so that a drain request sees what was sent before it.
    while (true) {
      ssize_t n = ::recv(sock_.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == ENOBUFS) {
          std::lock_guard<std::mutex> lock(mu_);
          ++overflows_;
          continue;
        }
        break;
      }
      int len = static_cast<int>(n);  // signed: NLMSG_NEXT may step past an unaligned end
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
        if (h->nlmsg_type != kAuditLandlockAccess && h->nlmsg_type != kAuditLandlockDomain) {
          continue;
        }
        std::string_view text(static_cast<const char*>(NLMSG_DATA(h)), h->nlmsg_len - NLMSG_HDRLEN);
        if (auto e = ParseLandlockAuditRecord(h->nlmsg_type, text)) {
          std::lock_guard<std::mutex> lock(mu_);
          Handle(*e);
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      drained_ = std::max(drained_, requested);
    }
    cv_.notify_all();
  }
}

void KernelAudit::Handle(const LandlockAuditEvent& e) {
  Domain& d = domains_[e.domain];
  d.touched = ++clock_;
  switch (e.kind) {
    case LandlockAuditEvent::Kind::kAccess:
      ++d.received;
      AddDenial(d.summary, e);
      break;
    case LandlockAuditEvent::Kind::kAllocated:
      d.creator = e.pid;
      break;
    case LandlockAuditEvent::Kind::kDeallocated:
      d.released = true;
      d.kernel_denials = e.denials;
      break;
  }
  EvictUnwatched();
}

void KernelAudit::EvictUnwatched() {
  std::size_t unwatched = 0;
  for (const auto& [id, d] : domains_) unwatched += watched_.count(d.creator) == 0 ? 1 : 0;
  while (unwatched > kMaxUnwatchedDomains) {
    auto oldest = domains_.end();
    for (auto it = domains_.begin(); it != domains_.end(); ++it) {
      if (watched_.count(it->second.creator) != 0) continue;
      if (oldest == domains_.end() || it->second.touched < oldest->second.touched) oldest = it;
    }
    if (oldest == domains_.end()) break;
    domains_.erase(oldest);
    --unwatched;
  }
}

void KernelAudit::Watch(pid_t creator) {
  if (creator <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  // A released domain of the same pid belongs to an earlier process that had this pid.
  std::erase_if(domains_,
                [&](const auto& kv) { return kv.second.creator == creator && kv.second.released; });
  watched_[creator] = overflows_;
}

bool KernelAudit::WaitQueueEmpty(int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (true) {
    auto st = AuditGet();
    if (st && st->backlog == 0) return true;
    if (!st || Clock::now() >= until) return false;
    ::usleep(1000);
  }
}

DenialSummary KernelAudit::Collect(pid_t creator) {
  const auto deadline = Clock::now() + kCollectBudget;
  DenialSummary out;
  if (creator <= 0) {
    out.complete = false;
    out.incomplete_reason = "the confined process's pid was not learned";
    return out;
  }
  // 1. What the process caused is in the kernel's queue by now (records are queued by the
  // denied syscall itself); wait until kauditd has sent it to the multicast group, then until
  // this reader has taken everything off its socket.
  const bool queue_empty = WaitQueueEmpty(static_cast<int>(kCollectBudget.count() / 2));
  ::usleep(1000);  // kauditd dequeues, then multicasts: the gap between the two
  std::unique_lock<std::mutex> lock(mu_);
  const std::uint64_t gen = ++drain_requested_;
  const std::uint64_t one = 1;
  ssize_t n = ::write(wake_.get(), &one, sizeof one);
  (void)n;
  cv_.wait_until(lock, deadline, [&] { return drained_ >= gen || stop_; });
  // 2. The domains it enforced: wait for their release, which carries the kernel's own count.
  auto mine = [&] {
    std::vector<Domain*> v;
    for (auto& [id, d] : domains_) {
      if (d.creator == creator) v.push_back(&d);
    }
    return v;
  };
  cv_.wait_until(lock, deadline, [&] {
    for (Domain* d : mine()) {
      if (!d->released) return false;
    }
    return true;
  });
  bool all_released = true;
  std::uint64_t kernel_total = 0;
  for (Domain* d : mine()) {
    all_released = all_released && d->released;
    kernel_total += d->kernel_denials;
    out.received += d->received;
    for (const auto& e : d->summary.listed) MergeEntry(out, e);
    out.omitted += d->summary.omitted;
  }
  if (all_released && !mine().empty()) out.kernel_total = kernel_total;
  const auto w = watched_.find(creator);
  const std::uint64_t overflow_then = w != watched_.end() ? w->second : overflows_;
  if (overflows_ > overflow_then) {
    out.complete = false;
    out.incomplete_reason =
        "cordon's audit socket overflowed: " + std::to_string(overflows_ - overflow_then) +
        " batches of kernel audit records were lost";
  } else if (!queue_empty) {
    out.complete = false;
    out.incomplete_reason = "the kernel's audit queue did not empty within 250 ms";
  } else if (!all_released) {
    out.complete = false;
    out.incomplete_reason =
        "a process of its Landlock domain still ran after 500 ms; later denials are not recorded";
  } else if (out.kernel_total && *out.kernel_total > out.received) {
    out.complete = false;
    out.incomplete_reason = "the kernel counted " + std::to_string(*out.kernel_total) +
                            " denials and delivered " + std::to_string(out.received) +
                            " (audit rules, rate or backlog limit)";
  }
  std::erase_if(domains_, [&](const auto& kv) { return kv.second.creator == creator; });
  watched_.erase(creator);
  return out;
}

}  // namespace cordon
