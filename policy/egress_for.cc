// The effective egress rules of one sandbox (policy/egress.h EgressFor): the policy's [network]
// and [tools.NAME] lists, then what the command line or a configured server adds, each rule
// with the file:line or flag it came from. Pure: string work on an already loaded Policy.
#include <algorithm>

#include "policy/egress.h"
#include "policy/policy.h"

namespace cordon {
namespace {

std::string From(const Policy& policy, const std::string& key, const std::string& entry) {
  auto list = policy.entry_provenance.find(key);
  if (list != policy.entry_provenance.end()) {
    if (auto it = list->second.find(entry); it != list->second.end()) return it->second;
  }
  return key;  // a hand-built Policy: at least the key that holds it
}

// A rule named twice keeps its first place and its first source.
void AddRule(std::vector<DomainRule>& rules, DomainRule r) {
  const bool seen = std::any_of(rules.begin(), rules.end(),
                                [&](const DomainRule& x) { return x.text == r.text; });
  if (!seen) rules.push_back(std::move(r));
}

void AddRules(const Policy& policy, const std::string& key, const std::vector<std::string>& entries,
              std::vector<DomainRule>& out) {
  for (const std::string& e : entries) {
    // Checked and normalised when the policy loaded; a hand-built entry that does not parse
    // names nothing the proxy could match.
    if (auto rule = ParseDomainRule(e, From(policy, key, e))) AddRule(out, std::move(*rule));
  }
}

void AddPreset(EgressPolicy& out, const std::string& name, const std::string& from) {
  const EgressPreset* preset = FindEgressPreset(name);
  if (preset == nullptr) return;
  if (std::find(out.presets.begin(), out.presets.end(), name) != out.presets.end()) return;
  out.presets.push_back(name);
  const std::string source = "preset " + name + " (" + from + ")";
  for (std::string_view d : preset->domains) {
    if (auto r = ParseDomainRule(d, source)) AddRule(out.allow, std::move(*r));
  }
  out.caches.emplace_back(name, source);
}

}  // namespace

std::string ResolveEntryText(const ResolveEntry& e) {
  std::string out = e.name + "=";
  for (std::size_t i = 0; i < e.addresses.size(); ++i) out += (i ? "," : "") + e.addresses[i];
  return out;
}

EgressPolicy EgressFor(const Policy& policy, std::string_view tool, const EgressExtra& extra) {
  EgressPolicy out;
  const EgressLists& g = policy.egress;
  AddRules(policy, "network.allow_domains", g.allow_domains, out.allow);
  AddRules(policy, "network.deny_domains", g.deny_domains, out.deny);
  const ToolOverride* o = nullptr;
  if (auto it = policy.tools.find(std::string(tool)); it != policy.tools.end()) o = &it->second;
  const std::string tkey = "tools." + std::string(tool) + ".";
  if (o != nullptr) {
    AddRules(policy, tkey + "allow_domains", o->allow_domains, out.allow);
    AddRules(policy, tkey + "deny_domains", o->deny_domains, out.deny);
  }
  for (const DomainRule& r : extra.allow) AddRule(out.allow, r);
  for (const DomainRule& r : extra.deny) AddRule(out.deny, r);
  // Presets after the named rules: a rule a file names for a registry keeps its own source.
  for (const std::string& p : g.presets) AddPreset(out, p, From(policy, "network.presets", p));
  if (o != nullptr) {
    for (const std::string& p : o->presets) AddPreset(out, p, From(policy, tkey + "presets", p));
  }
  for (const auto& [name, from] : extra.presets) AddPreset(out, name, from);
  for (const std::string& e : g.resolve) {
    if (auto entry = ParseResolveEntry(e, From(policy, "network.resolve", e)))
      out.resolve.push_back(std::move(*entry));
  }
  // A flag's mapping of a name replaces the policy's for that name (as curl's --resolve given
  // twice does): the proxy pins the first entry for a name.
  for (const ResolveEntry& e : extra.resolve) {
    std::erase_if(out.resolve, [&](const ResolveEntry& x) { return x.name == e.name; });
  }
  out.resolve.insert(out.resolve.begin(), extra.resolve.begin(), extra.resolve.end());
  return out;
}

}  // namespace cordon
