// Rendering of the effective policy with provenance for `cordon policy show`.
#include "policy/policy_show.h"

#include <sstream>

#include "core/redact.h"

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
  Json effective = Json::parse(policy.CanonicalJson());
  HideSecretEnvValues(policy, effective);
  return {{"effective", std::move(effective)},
          {"decided_by", policy.provenance},
          {"entries", std::move(entries)},
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
  put("filesystem", "protected_names", policy.filesystem.protected_names);
  put("sandbox", "max_scan_entries", policy.max_scan_entries);
  put("sandbox", "allow_dangerous_workspace", policy.allow_dangerous_workspace);
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
      }
      if (policy.tools.empty()) out << "# (no per-tool settings)\n";
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
  }
  out << "\n# files read, in order\n";
  for (const auto& f : policy.files) {
    out << f.layer << "  " << f.path << "  sha256:" << f.sha256 << "\n";
  }
  for (const auto& n : policy.notes) out << "note: " << n << "\n";
  return out.str();
}

}  // namespace cordon
