// The egress rules and the name decision (policy/egress.h). Pure: inet_pton and string work.
#include "policy/egress.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/fs.h"
#include "core/text.h"

namespace cordon {
namespace {

constexpr std::size_t kMaxName = 253;
constexpr std::size_t kMaxLabel = 63;

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A DNS name (already lower case, no trailing dot): labels of [a-z0-9_-], 1..63 long, not
// starting or ending with '-', at most 253 in all, and a last label that is not all digits.
std::string NameProblem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxName) return "is longer than 253 characters";
  std::size_t start = 0;
  std::string_view last;
  while (start <= name.size()) {
    std::size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    std::string_view label = name.substr(start, dot - start);
    if (label.empty()) return "has an empty label";
    if (label.size() > kMaxLabel) return "has a label longer than 63 characters";
    for (char c : label) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (!ok) return "has a character no DNS name has";
    }
    if (label.front() == '-' || label.back() == '-')
      return "has a label that starts or ends with -";
    last = label;
    start = dot + 1;
  }
  if (AllDigits(last)) return "ends in an all-digit label (an address, not a name)";
  return {};
}

// "host[:port]" with IPv6 in brackets; an unbracketed IPv6 literal has no port.
struct HostPort {
  std::string_view host;
  std::optional<std::string_view> port;
  bool bracketed = false;
};
std::optional<HostPort> SplitHostPort(std::string_view s) {
  HostPort hp;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    hp.host = s.substr(1, close - 1);
    hp.bracketed = true;
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      hp.port = rest.substr(1);
    }
    return hp;
  }
  const auto first = s.find(':');
  if (first != std::string_view::npos && s.find(':', first + 1) != std::string_view::npos) {
    hp.host = s;  // an IPv6 literal without brackets: no port
    return hp;
  }
  if (first == std::string_view::npos) {
    hp.host = s;
    return hp;
  }
  hp.host = s.substr(0, first);
  hp.port = s.substr(first + 1);
  return hp;
}

std::optional<int> ParsePort(std::string_view s) {
  if (!AllDigits(s) || s.size() > 5) return std::nullopt;
  const int p = std::stoi(std::string(s));
  if (p < 1 || p > 65535) return std::nullopt;
  return p;
}

// The legacy IPv4 forms inet_aton accepts: 1 to 4 parts, each decimal, octal (leading 0) or
// hex (0x); the last part fills the remaining bytes.
std::optional<std::uint32_t> ParseLegacyIpv4(std::string_view s) {
  std::vector<std::uint64_t> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = s.find('.', start);
    std::string_view part = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (part.empty() || part.size() > 12) return std::nullopt;
    int base = 10;
    if (part.size() > 2 && part[0] == '0' && (part[1] == 'x' || part[1] == 'X')) {
      base = 16;
      part.remove_prefix(2);
    } else if (part.size() > 1 && part[0] == '0') {
      base = 8;
      part.remove_prefix(1);
    }
    std::uint64_t v = 0;
    for (char c : part) {
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (base == 16 && c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0 || d >= base) return std::nullopt;
      v = v * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(d);
      if (v > 0xffffffffULL) return std::nullopt;
    }
    parts.push_back(v);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
    if (parts.size() == 4) return std::nullopt;
  }
  std::uint32_t out = 0;
  const std::size_t n = parts.size();
  for (std::size_t i = 0; i + 1 < n; ++i) {
    if (parts[i] > 255) return std::nullopt;
    out |= static_cast<std::uint32_t>(parts[i]) << (24 - 8 * i);
  }
  const std::uint64_t last_max = n == 1 ? 0xffffffffULL : (1ULL << (8 * (5 - n))) - 1;
  if (parts[n - 1] > last_max) return std::nullopt;
  out |= static_cast<std::uint32_t>(parts[n - 1]);
  return out;
}

bool InPrefix(const IpAddress& a, const unsigned char* prefix, int bits, bool v4) {
  if (a.v4 != v4) return false;
  const unsigned char* b = a.bytes.data() + (v4 ? 12 : 0);
  int i = 0;
  for (; bits >= 8; bits -= 8, ++i) {
    if (b[i] != prefix[i]) return false;
  }
  if (bits == 0) return true;
  const auto mask = static_cast<unsigned char>(0xff << (8 - bits));
  return (b[i] & mask) == (prefix[i] & mask);
}

std::string PortsText(const DomainRule& r) {
  if (r.port) return std::to_string(*r.port);
  return "80 and 443";
}

}  // namespace

bool DomainRule::MatchesName(std::string_view name) const {
  if (address) return false;
  if (!wildcard) return name == host;
  return name.size() > host.size() + 1 && name.ends_with(host) &&
         name[name.size() - host.size() - 1] == '.';
}

bool DomainRule::AllowsPort(int p) const {
  if (port) return p == *port;
  return std::find(std::begin(kDefaultEgressPorts), std::end(kDefaultEgressPorts), p) !=
         std::end(kDefaultEgressPorts);
}

std::string IpAddress::Text() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (v4) {
    ::inet_ntop(AF_INET, bytes.data() + 12, buf, sizeof buf);
  } else {
    ::inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf);
  }
  return buf;
}

std::optional<IpAddress> ParseIpAddress(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  if (text.empty() || text.size() > 64 || text.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  const std::string s(text);
  IpAddress a;
  unsigned char v6[16];
  if (s.find(':') != std::string::npos) {
    if (::inet_pton(AF_INET6, s.c_str(), v6) != 1) return std::nullopt;
    std::memcpy(a.bytes.data(), v6, 16);
    static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    a.v4 = std::memcmp(v6, kMapped, 12) == 0;
    return a;
  }
  const auto v4 = ParseLegacyIpv4(s);
  if (!v4) return std::nullopt;
  a.bytes[10] = 0xff;
  a.bytes[11] = 0xff;
  a.bytes[12] = static_cast<unsigned char>(*v4 >> 24);
  a.bytes[13] = static_cast<unsigned char>(*v4 >> 16);
  a.bytes[14] = static_cast<unsigned char>(*v4 >> 8);
  a.bytes[15] = static_cast<unsigned char>(*v4);
  a.v4 = true;
  return a;
}

std::string_view AddressClassName(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic:
      return "public";
    case AddressClass::kLoopback:
      return "loopback";
    case AddressClass::kUnspecified:
      return "unspecified";
    case AddressClass::kPrivate:
      return "private";
    case AddressClass::kLinkLocal:
      return "link-local";
    case AddressClass::kMulticast:
      return "multicast";
    case AddressClass::kReserved:
      return "reserved";
  }
  return "reserved";
}

AddressClass ClassifyAddress(const IpAddress& a) {
  struct Range {
    unsigned char prefix[16];
    int bits;
    bool v4;
    AddressClass cls;
  };
  static const Range kRanges[] = {
      {{127}, 8, true, AddressClass::kLoopback},
      {{0}, 8, true, AddressClass::kUnspecified},
      {{10}, 8, true, AddressClass::kPrivate},
      {{172, 16}, 12, true, AddressClass::kPrivate},
      {{192, 168}, 16, true, AddressClass::kPrivate},
      {{100, 64}, 10, true, AddressClass::kPrivate},
      {{169, 254}, 16, true, AddressClass::kLinkLocal},
      {{224}, 4, true, AddressClass::kMulticast},
      {{240}, 4, true, AddressClass::kReserved},
      {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, false, AddressClass::kLoopback},
      {{0}, 128, false, AddressClass::kUnspecified},
      {{0xfc}, 7, false, AddressClass::kPrivate},
      {{0xfe, 0x80}, 10, false, AddressClass::kLinkLocal},
      {{0xff}, 8, false, AddressClass::kMulticast},
      // NAT64 and 6to4 embed an IPv4 address the gateway would reach: treat them as reserved
      // rather than decode them.
      {{0x00, 0x64, 0xff, 0x9b}, 96, false, AddressClass::kReserved},
      {{0x20, 0x02}, 16, false, AddressClass::kReserved},
      // IPv4-compatible (deprecated) ::a.b.c.d
      {{0}, 96, false, AddressClass::kReserved},
  };
  for (const Range& r : kRanges) {
    if (InPrefix(a, r.prefix, r.bits, r.v4)) return r.cls;
  }
  return AddressClass::kPublic;
}

Result<EgressHost> ParseEgressHost(std::string_view host) {
  if (host.find('\0') != std::string_view::npos) {
    return Fail(Code::kInvalidInput, "host name has a NUL byte");
  }
  if (host.size() > kMaxName + 2) return Fail(Code::kInvalidInput, "host name is too long");
  EgressHost out;
  if (auto ip = ParseIpAddress(host)) {
    out.address = *ip;
    out.name = ip->Text();
    return out;
  }
  std::string name = AsciiLower(host);
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (auto problem = NameProblem(name); !problem.empty()) {
    return Fail(Code::kInvalidInput, "host \"" + name.substr(0, 80) + "\" " + problem);
  }
  out.name = std::move(name);
  return out;
}

Result<DomainRule> ParseDomainRule(std::string_view text, std::string source) {
  auto bad = [&](const std::string& why) {
    return Fail(Code::kInvalidInput,
                "domain rule \"" + std::string(text.substr(0, 80)) + "\" " + why +
                    " (write a name, *.suffix, or an address, each optionally with :PORT)");
  };
  if (text.find('\0') != std::string_view::npos) return bad("has a NUL byte");
  const auto hp = SplitHostPort(text);
  if (!hp) return bad("has an unclosed [ or junk after ]");
  DomainRule r;
  r.source = std::move(source);
  if (hp->port) {
    r.port = ParsePort(*hp->port);
    if (!r.port) return bad("has a port that is not 1..65535");
  }
  if (auto ip = ParseIpAddress(hp->host)) {
    r.address = true;
    r.host = ip->Text();
  } else {
    if (hp->bracketed) return bad("has brackets around something that is not an IPv6 address");
    std::string host = AsciiLower(hp->host);
    if (!host.empty() && host.back() == '.') host.pop_back();
    if (host.rfind("*.", 0) == 0) {
      r.wildcard = true;
      host = host.substr(2);
    }
    if (host.find('*') != std::string::npos) return bad("has a * that is not a leading \"*.\"");
    if (auto problem = NameProblem(host); !problem.empty()) return bad(problem);
    if (r.wildcard && host.find('.') == std::string::npos) {
      return bad("is a wildcard over a whole top-level domain");
    }
    r.host = std::move(host);
  }
  std::string shown = r.wildcard ? "*." + r.host : r.host;
  const bool v6 = r.address && r.host.find(':') != std::string::npos;
  if (v6 && r.port) shown = "[" + shown + "]";
  r.text = r.port ? shown + ":" + std::to_string(*r.port) : shown;
  return r;
}

Result<ResolveEntry> ParseResolveEntry(std::string_view text, std::string source) {
  auto bad = [&](const std::string& why) {
    return Fail(Code::kInvalidInput, "resolve entry \"" + std::string(text.substr(0, 80)) + "\" " +
                                         why + " (write NAME=ADDRESS[,ADDRESS...])");
  };
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) return bad("has no =");
  auto host = ParseEgressHost(text.substr(0, eq));
  if (!host) return bad(host.error().message);
  if (host->address) return bad("maps an address, not a name");
  ResolveEntry e;
  e.name = host->name;
  e.source = std::move(source);
  std::string_view rest = text.substr(eq + 1);
  while (true) {
    const auto comma = rest.find(',');
    std::string_view one = rest.substr(0, comma);
    auto ip = ParseIpAddress(one);
    if (!ip) return bad("has \"" + std::string(one.substr(0, 60)) + "\", which is not an address");
    e.addresses.push_back(ip->Text());
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return e;
}

std::span<const EgressPreset> EgressPresets() {
  static const EgressPreset kPresets[] = {
      // npm keeps _cacache/ (the tarballs) and _npx/ (what npx installed) under its cache.
      {"npm",
       {"registry.npmjs.org", "registry.yarnpkg.com"},
       {{"npm_config_cache", ""}, {"YARN_CACHE_FOLDER", "yarn"}},
       "the npm registry (npm, npx, yarn); cordon's own npm cache"},
      {"pypi",
       {"pypi.org", "files.pythonhosted.org"},
       {{"PIP_CACHE_DIR", "pip"}, {"UV_CACHE_DIR", "uv"}},
       "the Python Package Index (pip, uv); cordon's own pip and uv caches"},
      // Cargo has no variable for its registry cache alone: CARGO_HOME moves registry/ and git/
      // together with config.toml and bin/. Inside, HOME is the sandbox's own, so without it
      // cargo would use a CARGO_HOME that ends with the sandbox; the user's ~/.cargo is seen in
      // neither case.
      {"crates",
       {"crates.io", "index.crates.io", "static.crates.io"},
       {{"CARGO_HOME", ""}},
       "crates.io (cargo); cordon's own CARGO_HOME (registry and git caches)"},
  };
  return kPresets;
}

std::string PresetCacheDir(std::string_view preset) {
  return CordonCacheDir() + "/presets/" + std::string(preset);
}

std::vector<std::pair<std::string, std::string>> PresetCacheEnvironment(const EgressPreset& preset,
                                                                        const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const PresetCacheVariable& v : preset.cache_variables) {
    env.emplace_back(std::string(v.name),
                     v.subdir.empty() ? dir : dir + "/" + std::string(v.subdir));
  }
  return env;
}

const EgressPreset* FindEgressPreset(std::string_view name) {
  for (const EgressPreset& p : EgressPresets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

bool AddressAllowedByRule(const EgressPolicy& policy, const IpAddress& address) {
  const std::string text = address.Text();
  for (const DomainRule& r : policy.allow) {
    if (r.address && r.host == text) return true;
  }
  for (const ResolveEntry& e : policy.resolve) {
    for (const std::string& a : e.addresses) {
      if (a == text) return true;
    }
  }
  return false;
}

NameDecision DecideName(const EgressPolicy& policy, const EgressHost& host, int port) {
  NameDecision d;
  const std::string shown = host.address && !host.address->v4 ? "[" + host.name + "]" : host.name;
  for (const DomainRule& r : policy.deny) {
    const bool match = r.address ? (host.address && r.host == host.name) : r.MatchesName(host.name);
    if (match && (!r.port || *r.port == port)) {
      d.rule = r;
      d.reason = shown + " is denied by deny_domains rule " + r.text + " (" + r.source + ")";
      return d;
    }
  }
  const DomainRule* name_match = nullptr;
  for (const DomainRule& r : policy.allow) {
    const bool match = host.address ? (r.address && r.host == host.name) : r.MatchesName(host.name);
    if (!match) continue;
    if (r.AllowsPort(port)) {
      d.allowed = true;
      d.rule = r;
      break;
    }
    if (!name_match) name_match = &r;
  }
  if (!d.allowed) {
    if (name_match) {
      d.rule = *name_match;
      d.reason = "port " + std::to_string(port) + " is not allowed for " + shown + " (rule " +
                 name_match->text + " allows " + PortsText(*name_match) + ")";
    } else if (host.address) {
      d.reason = "the address " + shown + " is not named by any allow_domains rule (a client " +
                 "must use a name, or a rule must name the address)";
    } else if (policy.allow.empty()) {
      d.reason = shown + " is not allowed: the allowlist is empty";
    } else {
      d.reason = shown + " is not in allow_domains";
    }
    return d;
  }
  if (!host.address) {
    for (const ResolveEntry& e : policy.resolve) {
      if (e.name != host.name) continue;
      for (const std::string& a : e.addresses) d.pinned.push_back(*ParseIpAddress(a));
      break;
    }
  }
  return d;
}

const DomainRule* AddressDeniedByRule(const EgressPolicy& policy, const IpAddress& address,
                                      int port) {
  const std::string text = address.Text();
  for (const DomainRule& r : policy.deny) {
    if (r.address && r.host == text && (!r.port || *r.port == port)) return &r;
  }
  return nullptr;
}

bool AddressAllowedOnPort(const EgressPolicy& policy, const IpAddress& address, int port) {
  const std::string text = address.Text();
  for (const DomainRule& r : policy.allow) {
    if (r.address && r.host == text && r.AllowsPort(port)) return true;
  }
  return false;
}

std::optional<std::string> ResolvedAddressRefusal(const EgressPolicy& policy,
                                                  std::span<const IpAddress> own,
                                                  const IpAddress& address, int port) {
  if (AddressAllowedOnPort(policy, address, port)) return std::nullopt;
  const AddressClass cls = ClassifyAddress(address);
  if (cls != AddressClass::kPublic) return std::string(AddressClassName(cls));
  if (std::find(own.begin(), own.end(), address) != own.end()) return "this host's own address";
  return std::nullopt;
}

}  // namespace cordon
