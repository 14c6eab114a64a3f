// Rendering of the effective policy with provenance for `cordon policy show`.
#include "policy/policy_show.h"

#include <sstream>

#include "core/redact.h"

namespace cordon {
namespace {

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
  // env.set values of secret-looking names are the policy's secrets: shown as never.
  for (const auto& [name, value] : policy.env.set) {
    if (Redactor::IsSecretName(name)) effective["env"]["set"][name] = "(value not shown)";
  }
  return {{"effective", std::move(effective)},
          {"decided_by", policy.provenance},
          {"entries", std::move(entries)},
          {"files", std::move(files)},
          {"notes", policy.notes},
          {"sha256", policy.Sha256()}};
}

std::string PolicyShowText(const Policy& policy) {
  const Json effective = Json::parse(policy.CanonicalJson());
  std::ostringstream out;
  auto scalar = [&](const std::string& key, const Json& value) {
    out << key << " = " << value.dump() << "    # " << DecidedBy(policy, key) << "\n";
  };
  out << "# effective policy (sha256 " << policy.Sha256() << ")\n";
  for (const auto& [k, v] : effective["limits"].items()) scalar("limits." + k, v);
  scalar("network.mode", effective["network"]["mode"]);
  scalar("audit.fsync", effective["audit"]["fsync"]);
  scalar("sandbox.allow_weaker", effective["sandbox"]["allow_weaker"]);
  scalar("sandbox.max_scan_entries", policy.max_scan_entries);
  scalar("sandbox.allow_dangerous_workspace", policy.allow_dangerous_workspace);
  for (const auto& [name, value] : policy.env.set) {
    scalar("env.set." + name,
           Redactor::IsSecretName(name) ? Json("(value not shown)") : Json(value));
  }
  for (const auto& [tool, o] : policy.tools) {
    for (const auto& [k, v] : o.limits) scalar("tools." + tool + "." + k, v);
    if (o.network) scalar("tools." + tool + ".network", NetworkModeName(*o.network));
  }
  for (const ListKey& key : ListKeys()) {
    const std::string name = key.Name();
    const std::vector<std::string> values = key.get(policy);
    out << "\n" << name << " = [    # last set by " << DecidedBy(policy, name) << "\n";
    for (const std::string& value : values) {
      out << "  " << (key.secret ? "(value not shown)" : Json(value).dump()) << ",    # "
          << EntryFrom(policy, key, value) << "\n";
    }
    out << "]\n";
  }
  out << "\n# files read, in order\n";
  for (const auto& f : policy.files) {
    out << f.layer << "  " << f.path << "  sha256:" << f.sha256 << "\n";
  }
  for (const auto& n : policy.notes) out << "note: " << n << "\n";
  return out.str();
}

}  // namespace cordon
