// Egress by domain (docs/adr/0005-egress-proxy.md): the rules of network mode `proxy` as data,
// and the decision the proxy makes on a name before any DNS query. Pure: no system call.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace cordon {

// The ports an allow rule without ":PORT" allows.
inline constexpr int kDefaultEgressPorts[] = {80, 443};

// One allow or deny entry, as a policy file, a flag or a preset wrote it:
//   "example.com"          that name only
//   "*.example.com"        any name below example.com (not example.com itself)
//   "203.0.113.7"          that address (an IP literal a client names, or a name resolving to it)
//   "2001:db8::1", "[2001:db8::1]"
// each optionally followed by ":PORT" ("[::1]:8443" for an IPv6 address with a port). Without a
// port an allow rule allows 80 and 443, and a deny rule denies every port.
struct DomainRule {
  std::string text;  // normalised: lower case, no trailing dot, IPv6 in brackets
  std::string host;  // the name, the suffix after "*." (no dot), or the canonical address
  bool wildcard = false;
  bool address = false;
  std::optional<int> port;
  std::string source;  // "policies.d/10-net.toml:3", "--allow-domain", "preset npm", ...
  bool AllowsPort(int p) const;
  // Whether a name rule matches `name` (lower case, no trailing dot): that name, or for a
  // wildcard a name below its suffix. An address rule matches no name.
  bool MatchesName(std::string_view name) const;
};
// Refuses an empty entry, a bare "*", a wildcard inside a label ("a*.b"), a name that is not a
// DNS name, a port outside 1..65535 and a NUL byte, naming what is wrong.
Result<DomainRule> ParseDomainRule(std::string_view text, std::string source);

// A name mapped to addresses, like curl's --resolve ("api.example.test=127.0.0.1[,::1]"): the
// proxy connects to these without a DNS query, and a mapped address counts as a rule that allows
// that address (so a test may map a real-looking name to loopback). Never from a project file.
struct ResolveEntry {
  std::string name;                    // normalised, never a wildcard
  std::vector<std::string> addresses;  // canonical text
  std::string source;
};
Result<ResolveEntry> ParseResolveEntry(std::string_view text, std::string source);

// A variable that points a registry's client at the preset's cache inside the sandbox: its value
// is the cache directory, or `subdir` below it (a directory the client makes itself).
struct PresetCacheVariable {
  std::string_view name;    // "npm_config_cache"
  std::string_view subdir;  // "" or "pip"
};

// A package registry: its domains, and the variables that point its clients at cordon's own
// cache for it (PresetCacheDir), never at the user's (~/.npm, ~/.cache/pip, ~/.cargo: code the
// host's own npm, pip and cargo run).
struct EgressPreset {
  std::string_view name;
  std::vector<std::string_view> domains;
  std::vector<PresetCacheVariable> cache_variables;
  std::string_view what;  // one line for `policy show` and --help
};
std::span<const EgressPreset> EgressPresets();
const EgressPreset* FindEgressPreset(std::string_view name);

// cordon's cache for a preset: CordonCacheDir() + "/presets/" + name. Shared by every sandbox of
// this user that uses the preset; no host tool uses it.
std::string PresetCacheDir(std::string_view preset);
// The preset's variables with their values for a cache at `dir`, in the preset's order.
std::vector<std::pair<std::string, std::string>> PresetCacheEnvironment(const EgressPreset& preset,
                                                                        const std::string& dir);

// The effective rules of one sandbox (one tool, one configured server, one `exec`).
struct EgressPolicy {
  std::vector<DomainRule> allow;
  std::vector<DomainRule> deny;
  std::vector<ResolveEntry> resolve;
  std::vector<std::string> presets;  // names applied: their domains are in `allow`
  // (preset, source) for each preset applied: its cordon cache is granted writable to the
  // sandbox and its variables point there (runner/preset_cache.h).
  std::vector<std::pair<std::string, std::string>> caches;
  bool empty() const { return allow.empty(); }
};

// What a command line or a configured server adds to a sandbox's rules beyond the policy's:
// --allow-domain, --deny-domain, --allow-preset, --resolve, [servers.NAME.sandbox].
struct EgressExtra {
  std::vector<DomainRule> allow;
  std::vector<DomainRule> deny;
  std::vector<std::pair<std::string, std::string>> presets;  // (name, source)
  std::vector<ResolveEntry> resolve;
  bool empty() const { return allow.empty() && deny.empty() && presets.empty() && resolve.empty(); }
};

// An address as 16 bytes (IPv4 as IPv4-mapped IPv6, so that "::ffff:127.0.0.1" and "127.0.0.1"
// are the same address), with its canonical text ("127.0.0.1", "2001:db8::1").
struct IpAddress {
  std::array<unsigned char, 16> bytes{};
  bool v4 = false;
  std::string Text() const;
  bool operator==(const IpAddress& o) const { return bytes == o.bytes; }
};
// inet_pton for either family; also the legacy IPv4 forms a resolver accepts ("127.1",
// "0x7f.0.0.1", "2130706433"), so that none of them passes as a name. Brackets are allowed.
std::optional<IpAddress> ParseIpAddress(std::string_view text);

// What kind of address it is, for the rule that a name must not lead into the host's or a
// private network: everything but kPublic is refused unless a rule allows that address.
enum class AddressClass {
  kPublic,
  kLoopback,     // 127.0.0.0/8, ::1
  kUnspecified,  // 0.0.0.0/8, ::
  kPrivate,      // 10/8, 172.16/12, 192.168/16, 100.64/10 (shared), fc00::/7
  kLinkLocal,    // 169.254/16, fe80::/10
  kMulticast,    // 224/4, ff00::/8
  kReserved,     // 240/4 and 255.255.255.255
};
std::string_view AddressClassName(AddressClass c);
AddressClass ClassifyAddress(const IpAddress& a);
// The deny rule that names this address (on this port), if any: deny beats allow for the
// addresses a name resolves to, not only for an IP literal a client names.
const DomainRule* AddressDeniedByRule(const EgressPolicy& policy, const IpAddress& address,
                                      int port);
// Whether an allow rule names this address and allows `port`: how an address a resolver gave
// for an allowed name may be non-public. Port-aware, unlike AddressAllowedByRule below, so that
// "127.0.0.1:8080" does not open 127.0.0.1:443 to a name; and resolve entries do not count here
// (a mapped address is reachable under the name it is mapped from, which DecideName pins).
bool AddressAllowedOnPort(const EgressPolicy& policy, const IpAddress& address, int port);
// Why a resolver's answer for an allowed name may not be connected to: its class ("loopback",
// "private", ...) or "this host's own address" (`own`: the host's interface addresses, which
// the proxy reads once, since a documentation range can be this network's public one); nullopt
// when it may (public and not the host's, or named by an allow rule for this port).
std::optional<std::string> ResolvedAddressRefusal(const EgressPolicy& policy,
                                                  std::span<const IpAddress> own,
                                                  const IpAddress& address, int port);

// A host as a client named it, normalised: lower case, no trailing dot; an IP literal (any form
// ParseIpAddress takes) becomes an address. Refuses an empty or over-long name, a label over 63
// characters, characters no DNS name has, a NUL, and a name whose last label is all digits.
struct EgressHost {
  std::string name;  // the normalised name, or the address's canonical text
  std::optional<IpAddress> address;
};
Result<EgressHost> ParseEgressHost(std::string_view host);

struct NameDecision {
  bool allowed = false;
  std::optional<DomainRule> rule;  // the rule that decided (deny or allow); none: none matched
  std::string reason;              // one line: for the proxy's 403 and the network record
  // From a resolve entry: connect to these and ask no resolver.
  std::vector<IpAddress> pinned;
};
// The name decision, before any DNS query: a deny rule beats an allow rule; an IP literal needs
// an allow rule naming that address; the port must be one the matching allow rule allows.
NameDecision DecideName(const EgressPolicy& policy, const EgressHost& host, int port);

// Whether an allow rule or a resolve entry names this address: the only way a non-public
// address (ClassifyAddress) may be reached.
bool AddressAllowedByRule(const EgressPolicy& policy, const IpAddress& address);

// "name=addr,addr": the normalised text of a resolve entry, as policy files keep it.
std::string ResolveEntryText(const ResolveEntry& e);

struct Policy;
// The effective rules of one sandbox running `tool` (policy/policy.h): [network] allow_domains,
// deny_domains, presets and resolve, then [tools.TOOL]'s, then `extra`'s, each rule with the
// file:line (or flag) that added it; presets expanded into allow rules and caches (source
// "preset NAME (where it was named)"). A rule named twice keeps its first place and source; a
// resolve entry of `extra` replaces the policy's for that name. The policy's entries were
// checked and normalised when it loaded (LoadPolicy refuses a bad one), so all of them parse.
EgressPolicy EgressFor(const Policy& policy, std::string_view tool, const EgressExtra& extra = {});

}  // namespace cordon
