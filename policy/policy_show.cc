// Rendering of the effective policy with provenance for `cordon policy show`.
#include "policy/policy_show.h"

#include <sstream>

#include "core/redact.h"
#include "policy/egress.h"

namespace cordon {
namespace {

// env.set values of secret-looking names are the policy's secrets: never shown.
void HideSecretEnvValues(const Policy& policy, Json& effective) {
  for (const auto& [name, value] : policy.env.set) {
    if (Redactor::IsSecretName(name)) effective["env"]["set"][name] = "(value not shown)";
  }
}

const std::string kBuiltIn = "built-in default";

std::string DecidedBy(const Policy& policy, const std::string& key) {
  auto it = policy.provenance.find(key);
  return it == policy.provenance.end() ? kBuiltIn : it->second;
}

std::string EntryFrom(const Policy& policy, const ListKey& key, const std::string& value) {
  auto list = policy.entry_provenance.find(key.Name());
  if (list == policy.entry_provenance.end()) return kBuiltIn;
  auto it = list->second.find(value);
  return it == list->second.end() ? kBuiltIn : it->second;
}

constexpr const char* kToolListKeys[] = {"allow_domains", "deny_domains", "presets"};

const std::vector<std::string>& ToolList(const ToolOverride& o, std::string_view key) {
  return key == "allow_domains"  ? o.allow_domains
         : key == "deny_domains" ? o.deny_domains
                                 : o.presets;
}

std::string FromOf(const Policy& policy, const std::string& key, const std::string& value) {
  auto list = policy.entry_provenance.find(key);
  if (list == policy.entry_provenance.end()) return kBuiltIn;
  auto it = list->second.find(value);
  return it == list->second.end() ? kBuiltIn : it->second;
}

Json RuleJson(const DomainRule& r) { return {{"rule", r.text}, {"from", r.source}}; }

// One sandbox's effective egress: every rule with where it came from, the presets with what they
// add, and the resolve entries.
Json EgressJson(const Policy& policy, const EgressPolicy& e, NetworkMode mode) {
  Json allow = Json::array(), deny = Json::array(), resolve = Json::array(),
       presets = Json::array();
  for (const DomainRule& r : e.allow) allow.push_back(RuleJson(r));
  for (const DomainRule& r : e.deny) deny.push_back(RuleJson(r));
  for (const ResolveEntry& r : e.resolve) {
    resolve.push_back({{"name", r.name}, {"addresses", r.addresses}, {"from", r.source}});
  }
  for (const std::string& name : e.presets) {
    const EgressPreset* p = FindEgressPreset(name);
    if (p == nullptr) continue;
    Json domains = Json::array(), variables = Json::object();
    for (std::string_view d : p->domains) domains.push_back(d);
    const std::string cache = PresetCacheDir(name);
    for (const auto& [k, v] : PresetCacheEnvironment(*p, cache)) variables[k] = v;
    presets.push_back({{"name", name},
                       {"what", p->what},
                       {"domains", domains},
                       {"cache", {{"path", cache}, {"variables", variables}}},
                       {"from", FromOf(policy, "network.presets", name)}});
  }
  return {{"mode", NetworkModeName(mode)},
          {"allow_domains", allow},
          {"deny_domains", deny},
          {"presets", presets},
          {"resolve", resolve}};
}

}  // namespace

Json PolicyShowJson(const Policy& policy) {
  Json files = Json::array();
  for (const auto& f : policy.files) {
    files.push_back({{"path", f.path}, {"sha256", f.sha256}, {"layer", f.layer}});
  }
  Json entries = Json::object();
  for (const ListKey& key : ListKeys()) {
    Json list = Json::array();
    for (const std::string& value : key.get(policy)) {
      Json e = {{"from", EntryFrom(policy, key, value)}};
      if (!key.secret) e["value"] = value;
      list.push_back(std::move(e));
    }
    entries[key.Name()] = std::move(list);
  }
  // The per-tool egress lists, and each tool's effective egress (global + its own).
  Json egress_tools = Json::object();
  for (const auto& [tool, o] : policy.tools) {
    bool any = false;
    for (const char* k : kToolListKeys) {
      const std::string name = "tools." + tool + "." + k;
      const auto& values = ToolList(o, k);
      if (values.empty()) continue;
      any = true;
      Json list = Json::array();
      for (const std::string& v : values) {
        list.push_back({{"value", v}, {"from", FromOf(policy, name, v)}});
      }
      entries[name] = std::move(list);
    }
    if (!any) continue;
    egress_tools[tool] = EgressJson(policy, EgressFor(policy, tool), policy.NetworkFor(tool));
  }
  Json egress = Json::object();
  egress = EgressJson(policy, EgressFor(policy, ""), policy.network);
  Json effective = Json::parse(policy.CanonicalJson());
  HideSecretEnvValues(policy, effective);
  return {{"effective", std::move(effective)},
          {"decided_by", policy.provenance},
          {"entries", std::move(entries)},
          {"egress", std::move(egress)},
          {"egress_tools", std::move(egress_tools)},
          {"files", std::move(files)},
          {"notes", policy.notes},
          {"sha256", policy.Sha256()}};
}

Json PolicyShowEffective(const Policy& policy) {
  Json e = Json::parse(policy.CanonicalJson());
  HideSecretEnvValues(policy, e);
  // The canonical form leaves keys at their defaults out (so that old policy hashes hold);
  // the view shows them, so no setting is hidden from the person reading it.
  auto put = [&](const char* section, const char* key, Json v) {
    if (!e[section].contains(key)) e[section][key] = std::move(v);
  };
  put("audit", "signing_key", policy.audit_signing_key);
  put("audit", "checkpoint_records", policy.audit_checkpoint_records);
  put("audit", "checkpoint_seconds", policy.audit_checkpoint_seconds);
  put("audit", "file_changes", policy.audit_file_changes);
  put("audit", "before_images", policy.audit_before_images);
  put("audit", "before_images_max_file_bytes", policy.audit_before_images_max_file_bytes);
  put("audit", "before_images_max_session_bytes", policy.audit_before_images_max_session_bytes);
  put("filesystem", "protected_names", policy.filesystem.protected_names);
  put("filesystem", "xattr_allow", policy.filesystem.xattr_allow);
  put("sandbox", "max_scan_entries", policy.max_scan_entries);
  put("sandbox", "allow_dangerous_workspace", policy.allow_dangerous_workspace);
  put("sandbox", "workspace", std::string(Name(kWorkspaceModeNames, policy.workspace_mode)));
  put("network", "allow_domains", policy.egress.allow_domains);
  put("network", "deny_domains", policy.egress.deny_domains);
  put("network", "presets", policy.egress.presets);
  put("network", "resolve", policy.egress.resolve);
  put("approvals", "timeout_secs", policy.approvals_timeout_secs);
  put("approvals", "held_days", policy.approvals_held_days);
  if (!e.contains("tools")) e["tools"] = Json::object();
  return e;
}

std::string PolicyShowText(const Policy& policy) {
  const Json effective = PolicyShowEffective(policy);
  std::ostringstream out;
  auto scalar = [&](const std::string& key, const Json& value) {
    out << key << " = " << value.dump() << "    # " << DecidedBy(policy, key) << "\n";
  };
  auto list = [&](const ListKey& key) {
    const std::string name = key.Name();
    out << name << " = [    # last set by " << DecidedBy(policy, name) << "\n";
    for (const std::string& value : key.get(policy)) {
      out << "  " << (key.secret ? "(value not shown)" : Json(value).dump()) << ",    # "
          << EntryFrom(policy, key, value) << "\n";
    }
    out << "]\n";
  };
  auto list_key = [](const std::string& name) -> const ListKey* {
    for (const ListKey& k : ListKeys()) {
      if (k.Name() == name) return &k;
    }
    return nullptr;
  };
  out << "# effective policy (sha256 " << policy.Sha256() << ")\n";
  // Every section of the effective policy, every key in it: a key added to the policy later
  // shows here without a change to this function.
  for (const auto& [section, body] : effective.items()) {
    out << "\n# [" << section << "]\n";
    if (section == "tools") {
      for (const auto& [tool, o] : policy.tools) {
        for (const auto& [k, v] : o.limits) scalar("tools." + tool + "." + k, v);
        if (o.network) scalar("tools." + tool + ".network", NetworkModeName(*o.network));
        for (const char* k : kToolListKeys) {
          const std::string name = "tools." + tool + "." + k;
          const auto& values = ToolList(o, k);
          if (values.empty()) continue;
          out << name << " = [    # last set by " << DecidedBy(policy, name) << "\n";
          for (const std::string& v : values) {
            out << "  " << Json(v).dump() << ",    # " << FromOf(policy, name, v) << "\n";
          }
          out << "]\n";
        }
      }
      if (policy.tools.empty()) out << "# (no per-tool settings)\n";
      continue;
    }
    if (section == "approvals") {
      // One line per rule, in the order they are evaluated, each with the line that wrote it.
      out << "approvals.rules = [    # last set by " << DecidedBy(policy, "approvals.rules")
          << "\n";
      for (const ApprovalRule& r : policy.approval_rules) {
        Json rule = {{"id", r.id}, {"decision", Name(kApprovalDecisionNames, r.decision)}};
        const std::string matcher(Name(kApprovalMatcherNames, r.matcher));
        rule[matcher] = r.matcher == ApprovalMatcher::kArgv ? Json(r.argv) : Json(r.pattern);
        out << "  " << rule.dump() << ",    # " << r.layer << ", " << r.where << "\n";
      }
      out << "]\n";
      scalar("approvals.timeout_secs", policy.approvals_timeout_secs);
      scalar("approvals.held_days", policy.approvals_held_days);
      continue;
    }
    if (body.is_array()) {  // "scopes": the list scopes.grant
      if (const ListKey* k = list_key(section + ".grant")) list(*k);
      continue;
    }
    for (const auto& [k, v] : body.items()) {
      const std::string name = section + "." + k;
      if (name == "redact.values_count") continue;  // the redact.values list counts them
      if (const ListKey* lk = list_key(name)) {
        list(*lk);
      } else if (v.is_object()) {  // env.set: one line per name
        for (const auto& [k2, v2] : v.items()) scalar(name + "." + k2, v2);
      } else if (v.is_array()) {
        out << name << " = " << v.dump() << "    # " << DecidedBy(policy, name) << "\n";
      } else {
        scalar(name, v);
      }
    }
    if (section == "redact") list(*list_key("redact.values"));
    if (section == "network") {
      // What each preset stands for: the domains it allows, and cordon's cache for it that the
      // sandbox may write, with the variables that point its clients there.
      for (const std::string& name : policy.egress.presets) {
        const EgressPreset* p = FindEgressPreset(name);
        if (p == nullptr) continue;
        std::string domains, variables;
        for (std::string_view d : p->domains)
          domains += (domains.empty() ? "" : ", ") + std::string(d);
        for (const PresetCacheVariable& v : p->cache_variables)
          variables += (variables.empty() ? "" : ", ") + std::string(v.name);
        out << "# preset " << name << ": " << p->what << "; allows " << domains << "; cache "
            << PresetCacheDir(name) << " (" << variables << ")\n";
      }
      if (!policy.egress.allow_domains.empty() || !policy.egress.presets.empty()) {
        if (policy.network != NetworkMode::kProxy) {
          out << "# (these domains apply to a sandbox whose network mode is \"proxy\"; "
                 "network.mode is \""
              << NetworkModeName(policy.network) << "\")\n";
        }
      }
    }
  }
  out << "\n# files read, in order\n";
  for (const auto& f : policy.files) {
    out << f.layer << "  " << f.path << "  sha256:" << f.sha256 << "\n";
  }
  for (const auto& n : policy.notes) out << "note: " << n << "\n";
  return out.str();
}

}  // namespace cordon
