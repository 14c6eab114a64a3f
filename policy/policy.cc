// Policy loading and merging. Unknown keys and wrong types are errors naming file and line;
// shipped/system/user/cli layers override scalars and extend lists in order ("!entry" removes);
// the project layer can only tighten.
#include "policy/policy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/fs.h"
#include "core/hash.h"
#include "policy/egress.h"
#include "policy/gitleaks.h"
#include "policy/toml_parse.h"

namespace cordon {
namespace {

std::string Where(const std::string& source, const toml::node& node) {
  return source + ":" + std::to_string(node.source().begin.line);
}

struct LimitField {
  const char* key;
  std::int64_t Limits::*member;
};
constexpr LimitField kLimitFields[] = {
    {"timeout_secs", &Limits::timeout_secs},
    {"max_output_bytes", &Limits::max_output_bytes},
    {"max_results", &Limits::max_results},
    {"max_line_chars", &Limits::max_line_chars},
    {"max_read_lines", &Limits::max_read_lines},
    {"max_file_bytes", &Limits::max_file_bytes},
    {"max_input_bytes", &Limits::max_input_bytes},
    {"max_pending_output_bytes", &Limits::max_pending_output_bytes},
    {"memory_bytes", &Limits::memory_bytes},
    {"pids", &Limits::pids},
    {"cpu_secs", &Limits::cpu_secs},
    {"file_size_bytes", &Limits::file_size_bytes},
    {"open_files", &Limits::open_files},
};

const LimitField* FindLimit(std::string_view key) {
  for (const auto& f : kLimitFields) {
    if (key == f.key) return &f;
  }
  return nullptr;
}

std::string AnyEntry(const std::string&, std::string&) { return {}; }

std::string PathEntry(const std::string& name, std::string& path) {
  if (path.empty() || (path[0] != '/' && path[0] != '~' && path.rfind("${WORKSPACE}", 0) != 0)) {
    return name + " entry \"" + path + "\" must be absolute, start with ~ or ${WORKSPACE}";
  }
  return {};
}

// A rule file: absolute, `~`, or relative to the policy file that names it (ApplyListTo).
std::string RuleFileEntry(const std::string& name, std::string& path) {
  if (path.empty() || path.find('\0') != std::string::npos || path.rfind("${", 0) == 0) {
    return name + " entry \"" + path +
           "\" must be a path: absolute, starting with ~, or relative to this policy file";
  }
  return {};
}

// A protected name: one path component, matched at any depth.
std::string NameEntry(const std::string& name, std::string& entry) {
  if (entry.empty() || entry == "." || entry == ".." || entry.find('/') != std::string::npos ||
      entry.find('\0') != std::string::npos) {
    return name + " entry \"" + entry + "\" must be one file or directory name (no /)";
  }
  return {};
}

// An extended attribute a commit may install: a `user.` name, or a `user.` prefix ending in
// ".*". The other namespaces are never the sandbox's to give (trusted.*, security.capability
// and the security modules' labels), and the overlay's marks (user.overlay.*) mean nothing
// outside the stage.
std::string XattrEntry(const std::string& name, std::string& entry) {
  std::string_view body = entry;
  const bool prefix = body.ends_with(".*");
  if (prefix) body.remove_suffix(1);  // "user.myapp.": the prefix, with its dot
  if (!body.starts_with("user.")) {
    return name + " entry \"" + entry +
           "\" must name user.* attributes: trusted.*, security.* and system.* ones never reach "
           "the host";
  }
  if (body.starts_with("user.overlay.")) {
    return name + " entry \"" + entry +
           "\" names the overlay's own marks, which never reach the host";
  }
  if ((!prefix && body == "user.") || body.size() > 255 ||
      body.find_first_of(std::string_view("*\0", 2)) != std::string_view::npos) {
    return name + " entry \"" + entry +
           "\" must be an attribute name (user.NAME) or a prefix ending in .* (user.NAME.*)";
  }
  return {};
}

std::string EnvEntry(const std::string& name, std::string& entry) {
  return IsEnvName(entry, true) ? std::string()
                                : name + " entry \"" + entry +
                                      "\" must be a variable name ([A-Za-z_][A-Za-z0-9_]*), "
                                      "optionally ending in * (a prefix)";
}

std::string ScopeEntry(const std::string&, std::string& scope) {
  return IsKnownScope(scope) ? std::string() : "unknown scope \"" + scope + "\"";
}

// Egress entries (policy/egress.h) are checked when the file loads and kept normalised, so that
// "!Example.COM" removes "example.com" and `policy show` prints what the proxy matches.
std::string DomainEntry(const std::string& name, std::string& entry) {
  auto rule = ParseDomainRule(entry, {});
  if (!rule) return name + ": " + rule.error().message;
  entry = rule->text;
  return {};
}

std::string PresetEntry(const std::string& name, std::string& entry) {
  if (FindEgressPreset(entry) != nullptr) return {};
  std::string known;
  for (const EgressPreset& p : EgressPresets()) {
    known += (known.empty() ? "\"" : ", \"") + std::string(p.name) + "\"";
  }
  return name + " entry \"" + entry + "\" is not a preset (known: " + known + ")";
}

std::string ResolveEntryCheck(const std::string& name, std::string& entry) {
  auto e = ParseResolveEntry(entry, {});
  if (!e) return name + ": " + e.error().message;
  entry = ResolveEntryText(*e);
  return {};
}

Result<std::vector<std::string>> StringArray(const toml::node& node, const std::string& source,
                                             const std::string& key) {
  const toml::array* arr = node.as_array();
  if (arr == nullptr) {
    return Fail(Code::kInvalidInput,
                Where(source, node) + ": " + key + " must be an array of strings");
  }
  std::vector<std::string> out;
  for (const toml::node& item : *arr) {
    auto s = item.value<std::string>();
    if (!item.is_string() || !s) {
      return Fail(Code::kInvalidInput,
                  Where(source, item) + ": " + key + " entries must be strings");
    }
    out.push_back(*s);
  }
  return out;
}

// One entry of a layer's list: "x" adds x, "!x" removes it, "!!x" adds the literal "!x".
struct ListEdit {
  std::string value;
  bool remove = false;
  std::string where;
};

// What the merge needs of a list: a ListKey of the policy, or a [tools.NAME] list.
struct ListSpec {
  std::string name;  // "filesystem.read", "tools.exec.allow_domains"
  ListPolarity polarity;
  bool replaced_before;
  bool secret;
  std::string (*check)(const std::string& key_name, std::string& entry);
  // Entries are paths, and a relative one means: beside the policy file that names it.
  bool relative_to_file = false;
};
ListSpec SpecOf(const ListKey& key) {
  return {key.Name(), key.polarity, key.replaced_before,
          key.secret, key.check,    key.Name() == "redact.rule_files"};
}

// The one list merge every list key uses. Order is first-seen and entries are unique; an entry
// added again keeps its place and the source that first added it.
void MergeList(Policy& policy, const ListSpec& key, std::vector<std::string>& list,
               const std::vector<ListEdit>& edits, bool tighten_only) {
  const std::string& name = key.name;
  std::map<std::string, std::string>& from = policy.entry_provenance[name];
  for (const ListEdit& e : edits) {
    const std::string shown = key.secret ? "a value" : "\"" + e.value + "\"";
    auto it = std::find(list.begin(), list.end(), e.value);
    if (!e.remove) {
      if (it != list.end()) continue;
      if (tighten_only && key.polarity == ListPolarity::kGrants) {
        policy.notes.push_back(e.where + ": a project file cannot add " + shown + " to " + name +
                               "; it stays out");
        continue;
      }
      list.push_back(e.value);
      from[e.value] = e.where;
    } else {
      if (it == list.end()) {
        policy.notes.push_back(e.where + ": " +
                               (key.secret ? "a \"!\" entry" : "\"!" + e.value + "\"") + " in " +
                               name + " removes nothing: no such entry below");
        continue;
      }
      if (tighten_only && key.polarity == ListPolarity::kDenies) {
        policy.notes.push_back(e.where + ": a project file cannot remove " + shown + " from " +
                               name + "; it stays");
        continue;
      }
      list.erase(it);
      from.erase(e.value);
    }
  }
}

// Before lists merged, a layer that set a list replaced it (a project layer narrowed a kGrants
// list to a subset). A file written for that rule (no "!" entries) that leaves out entries
// from below now keeps them: say so, and how to get the old meaning.
void NoteChangedMeaning(Policy& policy, const ListSpec& key, const std::vector<std::string>& below,
                        const std::vector<ListEdit>& edits, bool tighten_only,
                        const std::string& where) {
  if (!key.replaced_before || (tighten_only && key.polarity != ListPolarity::kGrants)) return;
  std::vector<std::string> kept;
  for (const ListEdit& e : edits) {
    if (e.remove) return;
  }
  for (const std::string& b : below) {
    if (std::none_of(edits.begin(), edits.end(), [&](const ListEdit& e) { return e.value == b; })) {
      kept.push_back(b);
    }
  }
  if (kept.empty()) return;
  std::string names;
  std::string removals;
  for (const std::string& k : kept) {
    names += (names.empty() ? "\"" : ", \"") + k + "\"";
    removals += (removals.empty() ? "\"!" : ", \"!") + k + "\"";
  }
  policy.notes.push_back(where + ": " + key.name +
                         " now extends the layers below instead of replacing them, so it keeps " +
                         names + "; to drop " + (kept.size() == 1 ? "it" : "them") +
                         " as before, add " + removals);
}

// Applies one layer's array for `key` to `list` (the policy's current entries).
Status ApplyListTo(Policy& policy, const ListSpec& key, std::vector<std::string>& list,
                   const toml::node& node, const std::string& source, bool tighten_only) {
  const std::string& name = key.name;
  ASSIGN_OR_RETURN(auto raw, StringArray(node, source, name));
  const toml::array& items = *node.as_array();
  std::vector<ListEdit> edits;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    ListEdit e{raw[i], false, Where(source, *items.get(i))};
    if (e.value.rfind("!!", 0) == 0) {
      e.value.erase(0, 1);
    } else if (e.value.rfind('!', 0) == 0) {
      e.value.erase(0, 1);
      e.remove = true;
      if (e.value.empty()) {
        return Fail(Code::kInvalidInput, e.where + ": " + name + " entry \"!\" names nothing");
      }
    }
    if (std::string why = key.check(name, e.value); !why.empty()) {
      return Fail(Code::kInvalidInput, e.where + ": " + why);
    }
    if (key.relative_to_file) {
      // A project file is written by the agent: it names rule files in its workspace only, so
      // that it cannot have cordon read (and quote, in an error) a file the sandbox hides.
      const std::filesystem::path dir = std::filesystem::path(source).parent_path();
      const std::string workspace = dir.parent_path().lexically_normal().string();
      if (e.value[0] != '/' && e.value[0] != '~')
        e.value = (dir / e.value).lexically_normal().string();
      if (tighten_only && !e.remove &&
          (e.value[0] == '~' || e.value.rfind(workspace + "/", 0) != 0)) {
        policy.notes.push_back(e.where + ": a project file names rule files inside its " +
                               "workspace only; \"" + e.value + "\" ignored");
        continue;
      }
    }
    edits.push_back(std::move(e));
  }
  const std::string where = Where(source, node);
  if (tighten_only && key.polarity == ListPolarity::kUserOnly) {
    // Checked above (a bad entry is still an error), then refused whole: a resolve entry from
    // the repository could point an allowed name at the host's own services.
    for (const ListEdit& e : edits) {
      policy.notes.push_back(e.where + ": a project file cannot set " + name + " (it could point " +
                             "a name at the host's own services); \"" + (e.remove ? "!" : "") +
                             e.value + "\" ignored");
    }
    return {};
  }
  const bool plain =
      std::none_of(edits.begin(), edits.end(), [](const ListEdit& e) { return e.remove; });
  if (tighten_only && key.polarity == ListPolarity::kGrants && plain) {
    // A project file may only narrow a grants list, so a plain list there can mean one thing:
    // "only these" (the old rule). Reading it as an extension would silently keep what the
    // repository meant to drop.
    std::string dropped;
    for (const std::string& below : list) {
      if (std::none_of(edits.begin(), edits.end(),
                       [&](const ListEdit& e) { return e.value == below; })) {
        edits.push_back({below, true, where});
        if (!key.secret) dropped += (dropped.empty() ? "\"" : ", \"") + below + "\"";
      }
    }
    if (!dropped.empty()) {
      policy.notes.push_back(where + ": a project file's plain " + name +
                             " list narrows it to the entries it names; dropped " + dropped);
    }
  } else {
    NoteChangedMeaning(policy, key, list, edits, tighten_only, where);
  }
  MergeList(policy, key, list, edits, tighten_only);
  policy.provenance[name] = where;
  return {};
}

// "\"a\", \"b\"" for a note.
std::string QuotedList(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& x : v) out += (out.empty() ? "\"" : ", \"") + x + "\"";
  return out;
}

// After a layer's [scopes] grant: what `only` fixed stays fixed (a grant cannot add), and a
// layer above the shipped one that leaves the agent more than it names is warned about.
void CheckScopesGrant(Policy& policy, const std::set<std::string>& before, const toml::node& node,
                      const std::string& source, bool tighten_only) {
  const std::string where = Where(source, node);
  std::vector<std::string> added;
  for (const std::string& s : policy.scopes) {
    if (before.count(s) == 0) added.push_back(s);
  }
  if (!policy.scopes_only_where.empty()) {
    for (const std::string& s : added) {
      policy.scopes.erase(s);
      policy.entry_provenance["scopes.grant"].erase(s);
    }
    if (!added.empty()) {
      policy.notes.push_back(where + ": [scopes] only at " + policy.scopes_only_where +
                             " fixed the scopes, so grant cannot add " + QuotedList(added) +
                             "; left out");
    }
    return;
  }
  if (tighten_only || !policy.shipped_scopes) return;
  // Only whole-word lists are the "read-only agent" a user means: a list with "!" entries says
  // exactly what it removes.
  std::vector<std::string> named;
  bool plain = true;
  if (const toml::array* items = node.as_array()) {
    for (const auto& item : *items) {
      const std::string v = item.value<std::string>().value_or("");
      if (v.rfind('!', 0) == 0) plain = false;
      named.push_back(v);
    }
  }
  std::vector<std::string> widened, kept;
  for (const std::string& s : policy.scopes) {
    if (policy.shipped_scopes->count(s) == 0 &&
        std::find(added.begin(), added.end(), s) != added.end())
      widened.push_back(s);
    if (plain && std::find(named.begin(), named.end(), s) == named.end()) kept.push_back(s);
  }
  if (!widened.empty()) {
    policy.warnings.push_back(where + ": [scopes] grant widens the shipped scopes with " +
                              QuotedList(widened) +
                              " (grant adds to the layers below; to set the exact set, write "
                              "[scopes] only = [...])");
  }
  if (!kept.empty()) {
    policy.warnings.push_back(where + ": [scopes] grant adds to the layers below, so " +
                              QuotedList(kept) + (kept.size() == 1 ? " stays" : " stay") +
                              " granted although the list does not name " +
                              (kept.size() == 1 ? "it" : "them") +
                              "; for exactly the listed scopes write [scopes] only = [...]");
  }
}

Status ApplyList(Policy& policy, const ListKey& key, const toml::node& node,
                 const std::string& source, bool tighten_only) {
  std::vector<std::string> list = key.get(policy);
  const std::set<std::string> scopes_before = policy.scopes;
  TRY(ApplyListTo(policy, SpecOf(key), list, node, source, tighten_only));
  key.set(policy, std::move(list));
  if (key.Name() == "scopes.grant")
    CheckScopesGrant(policy, scopes_before, node, source, tighten_only);
  return {};
}

const ListKey kListKeys[] = {
    {"filesystem", "read", ListPolarity::kGrants, true, false,
     [](const Policy& p) { return p.filesystem.read; },
     [](Policy& p, std::vector<std::string> v) { p.filesystem.read = std::move(v); }, PathEntry},
    {"filesystem", "write", ListPolarity::kGrants, true, false,
     [](const Policy& p) { return p.filesystem.write; },
     [](Policy& p, std::vector<std::string> v) { p.filesystem.write = std::move(v); }, PathEntry},
    {"filesystem", "deny", ListPolarity::kDenies, false, false,
     [](const Policy& p) { return p.filesystem.deny; },
     [](Policy& p, std::vector<std::string> v) { p.filesystem.deny = std::move(v); }, PathEntry},
    // Scopes are a set: their order is the sorted one whatever the files say.
    {"scopes", "grant", ListPolarity::kGrants, true, false,
     [](const Policy& p) { return std::vector<std::string>(p.scopes.begin(), p.scopes.end()); },
     [](Policy& p, std::vector<std::string> v) {
       p.scopes = {v.begin(), v.end()};
     },
     ScopeEntry},
    {"redact", "values", ListPolarity::kDenies, false, true,
     [](const Policy& p) { return p.redact_values; },
     [](Policy& p, std::vector<std::string> v) { p.redact_values = std::move(v); }, AnyEntry},
    {"redact", "env_names", ListPolarity::kDenies, false, false,
     [](const Policy& p) { return p.redact_env_names; },
     [](Policy& p, std::vector<std::string> v) { p.redact_env_names = std::move(v); }, AnyEntry},
    {"redact", "credential_stores", ListPolarity::kDenies, false, false,
     [](const Policy& p) { return p.redact_credential_stores; },
     [](Policy& p, std::vector<std::string> v) { p.redact_credential_stores = std::move(v); },
     PathEntry},
    {"redact", "secret_words", ListPolarity::kDenies, false, false,
     [](const Policy& p) { return p.redact_secret_words; },
     [](Policy& p, std::vector<std::string> v) { p.redact_secret_words = std::move(v); }, AnyEntry},
    {"redact", "rule_files", ListPolarity::kDenies, false, false,
     [](const Policy& p) { return p.redact_rule_files; },
     [](Policy& p, std::vector<std::string> v) { p.redact_rule_files = std::move(v); },
     RuleFileEntry},
    {"filesystem", "protected_names", ListPolarity::kDenies, false, false,
     [](const Policy& p) { return p.filesystem.protected_names; },
     [](Policy& p, std::vector<std::string> v) { p.filesystem.protected_names = std::move(v); },
     NameEntry},
    {"filesystem", "xattr_allow", ListPolarity::kGrants, false, false,
     [](const Policy& p) { return p.filesystem.xattr_allow; },
     [](Policy& p, std::vector<std::string> v) { p.filesystem.xattr_allow = std::move(v); },
     XattrEntry},
    {"env", "pass", ListPolarity::kGrants, false, false, [](const Policy& p) { return p.env.pass; },
     [](Policy& p, std::vector<std::string> v) { p.env.pass = std::move(v); }, EnvEntry},
    {"env", "deny", ListPolarity::kDenies, false, false, [](const Policy& p) { return p.env.deny; },
     [](Policy& p, std::vector<std::string> v) { p.env.deny = std::move(v); }, EnvEntry},
    {"seccomp", "deny", ListPolarity::kDenies, true, false,
     [](const Policy& p) { return p.seccomp_deny; },
     [](Policy& p, std::vector<std::string> v) { p.seccomp_deny = std::move(v); }, AnyEntry},
    // Egress (network mode "proxy", policy/egress.h): domains and presets are grants, deny
    // rules denies, and resolve entries the user's alone.
    {"network", "allow_domains", ListPolarity::kGrants, false, false,
     [](const Policy& p) { return p.egress.allow_domains; },
     [](Policy& p, std::vector<std::string> v) { p.egress.allow_domains = std::move(v); },
     DomainEntry},
    {"network", "deny_domains", ListPolarity::kDenies, false, false,
     [](const Policy& p) { return p.egress.deny_domains; },
     [](Policy& p, std::vector<std::string> v) { p.egress.deny_domains = std::move(v); },
     DomainEntry},
    {"network", "presets", ListPolarity::kGrants, false, false,
     [](const Policy& p) { return p.egress.presets; },
     [](Policy& p, std::vector<std::string> v) { p.egress.presets = std::move(v); }, PresetEntry},
    {"network", "resolve", ListPolarity::kUserOnly, false, false,
     [](const Policy& p) { return p.egress.resolve; },
     [](Policy& p, std::vector<std::string> v) { p.egress.resolve = std::move(v); },
     ResolveEntryCheck},
};

const ListKey* FindListKey(std::string_view section, std::string_view key) {
  for (const ListKey& k : kListKeys) {
    if (k.section == section && k.key == key) return &k;
  }
  return nullptr;
}

Status UnknownKey(const std::string& source, const toml::node& node, const std::string& key) {
  return Fail(Code::kInvalidInput, Where(source, node) + ": unknown key \"" + key + "\"");
}

}  // namespace

std::span<const ListKey> ListKeys() { return kListKeys; }

bool IsEnvName(std::string_view name, bool allow_prefix) {
  if (allow_prefix && !name.empty() && name.back() == '*') name.remove_suffix(1);
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool XattrAllowed(std::string_view name, std::span<const std::string> allow) {
  if (!name.starts_with("user.") || name.starts_with("user.overlay.")) return false;
  return std::any_of(allow.begin(), allow.end(), [&](std::string_view entry) {
    if (!entry.ends_with(".*")) return entry == name;
    entry.remove_suffix(1);
    return name.size() > entry.size() && name.starts_with(entry);
  });
}

bool EnvEntryMatches(std::string_view entry, std::string_view name) {
  if (!entry.empty() && entry.back() == '*') {
    entry.remove_suffix(1);
    return name.substr(0, entry.size()) == entry;
  }
  return entry == name;
}

void to_json(nlohmann::json& j, PolicyLayer layer) { j = Name(kPolicyLayerNames, layer); }

bool IsKnownScope(std::string_view scope) {
  return std::find(std::begin(kAllScopes), std::end(kAllScopes), scope) != std::end(kAllScopes);
}

std::string Policy::CanonicalJson() const {
  nlohmann::json j;
  for (const auto& f : kLimitFields) j["limits"][f.key] = limits.*(f.member);
  j["scopes"] = scopes;
  j["redact"]["values_count"] = redact_values.size();
  j["redact"]["env_names"] = redact_env_names;
  j["redact"]["secret_words"] = redact_secret_words;
  if (!redact_credential_stores.empty())
    j["redact"]["credential_stores"] = redact_credential_stores;
  if (!redact_rule_files.empty()) j["redact"]["rule_files"] = redact_rule_files;
  j["audit"]["fsync"] = Name(kFsyncModeNames, audit_fsync);
  // Only when there are any: the policies recorded before approvals existed keep their hash.
  for (const ApprovalRule& r : approval_rules) {
    nlohmann::json rule = {{"id", r.id}, {"decision", Name(kApprovalDecisionNames, r.decision)}};
    const std::string matcher(Name(kApprovalMatcherNames, r.matcher));
    if (r.matcher == ApprovalMatcher::kArgv) {
      rule[matcher] = r.argv;
    } else {
      rule[matcher] = r.pattern;
    }
    rule["layer"] = r.layer;
    j["approvals"]["rules"].push_back(std::move(rule));
  }
  if (approvals_timeout_secs != 300) j["approvals"]["timeout_secs"] = approvals_timeout_secs;
  if (approvals_held_days != 7) j["approvals"]["held_days"] = approvals_held_days;
  // Only when set: the policies recorded before these keys existed keep their hash.
  if (!audit_signing_key.empty()) j["audit"]["signing_key"] = audit_signing_key;
  if (audit_checkpoint_records != 1000) j["audit"]["checkpoint_records"] = audit_checkpoint_records;
  if (audit_checkpoint_seconds != 60) j["audit"]["checkpoint_seconds"] = audit_checkpoint_seconds;
  // Only when off: the policies recorded before the key existed keep their hash.
  if (!audit_file_changes) j["audit"]["file_changes"] = false;
  if (audit_arguments_hashed) j["audit"]["arguments"] = "hashed";
  // Only when on: the policies recorded before the keys existed keep their hash.
  if (audit_before_images) {
    j["audit"]["before_images"] = true;
    j["audit"]["before_images_max_file_bytes"] = audit_before_images_max_file_bytes;
    j["audit"]["before_images_max_session_bytes"] = audit_before_images_max_session_bytes;
  }
  j["filesystem"]["read"] = filesystem.read;
  j["filesystem"]["write"] = filesystem.write;
  j["filesystem"]["deny"] = filesystem.deny;
  if (!filesystem.protected_names.empty())
    j["filesystem"]["protected_names"] = filesystem.protected_names;
  // Only when set: the policies recorded before the key existed keep their hash.
  if (!filesystem.xattr_allow.empty()) j["filesystem"]["xattr_allow"] = filesystem.xattr_allow;
  // Only when used: the policies recorded before [env] existed keep their hash.
  if (!env.pass.empty()) j["env"]["pass"] = env.pass;
  if (!env.deny.empty()) j["env"]["deny"] = env.deny;
  if (!env.set.empty()) j["env"]["set"] = env.set;
  j["network"]["mode"] = NetworkModeName(network);
  // Only when used: the policies recorded before egress rules existed keep their hash.
  if (!egress.allow_domains.empty()) j["network"]["allow_domains"] = egress.allow_domains;
  if (!egress.deny_domains.empty()) j["network"]["deny_domains"] = egress.deny_domains;
  if (!egress.presets.empty()) j["network"]["presets"] = egress.presets;
  if (!egress.resolve.empty()) j["network"]["resolve"] = egress.resolve;
  j["seccomp"]["deny"] = seccomp_deny;
  j["sandbox"]["allow_weaker"] = allow_weaker_sandbox;
  // Only when set, so that the hash of a policy that does not use the key is unchanged.
  if (max_scan_entries != kDefaultMaxScanEntries)
    j["sandbox"]["max_scan_entries"] = max_scan_entries;
  // Only when set: the policies recorded before the key existed keep their hash.
  if (allow_dangerous_workspace) j["sandbox"]["allow_dangerous_workspace"] = true;
  if (workspace_mode != WorkspaceMode::kAuto)
    j["sandbox"]["workspace"] = std::string(Name(kWorkspaceModeNames, workspace_mode));
  if (!warm) j["sandbox"]["warm"] = "off";
  for (const auto& [name, o] : tools) {
    j["tools"][name]["limits"] = o.limits;
    if (o.network) j["tools"][name]["network"] = NetworkModeName(*o.network);
    if (!o.allow_domains.empty()) j["tools"][name]["allow_domains"] = o.allow_domains;
    if (!o.deny_domains.empty()) j["tools"][name]["deny_domains"] = o.deny_domains;
    if (!o.presets.empty()) j["tools"][name]["presets"] = o.presets;
  }
  return j.dump();
}

std::string Policy::Sha256() const { return Sha256Hex(CanonicalJson()); }

Limits Policy::LimitsFor(std::string_view tool) const {
  Limits l = limits;
  if (auto it = tools.find(std::string(tool)); it != tools.end()) {
    for (const auto& [k, v] : it->second.limits) {
      if (const LimitField* f = FindLimit(k)) l.*(f->member) = v;
    }
  }
  return l;
}

NetworkMode Policy::NetworkFor(std::string_view tool) const {
  if (auto it = tools.find(std::string(tool)); it != tools.end() && it->second.network) {
    return *it->second.network;
  }
  return network;
}

int NetworkStrictness(NetworkMode m) {
  switch (m) {
    case NetworkMode::kNone:
      return 3;
    case NetworkMode::kLoopback:
      return 2;
    case NetworkMode::kProxy:
      return 1;
    case NetworkMode::kAllow:
      return 0;
  }
  return 3;
}

std::string_view NetworkModeName(NetworkMode mode) { return Name(kNetworkModeNames, mode); }

Result<NetworkMode> ParseNetworkMode(std::string_view name) {
  return ParseName(kNetworkModeNames, name, "network mode");
}

std::string ExpandPath(std::string_view path, const std::string& workspace,
                       const std::string& home) {
  std::string out(path);
  if (out == "~" || out.rfind("~/", 0) == 0) out = home + out.substr(1);
  for (std::size_t pos; (pos = out.find("${WORKSPACE}")) != std::string::npos;) {
    out.replace(pos, 12, workspace);
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

namespace {

// Editor and agent configuration that runs code, or decides what runs, when a project is
// opened: .vscode/ (tasks, settings), .idea/, .cursor/, .claude/, .gemini/ (Gemini CLI:
// settings.json names MCP servers and tool discovery commands), .zed/ (settings.json names
// language-server binaries, tasks.json), .helix/ (languages.toml names language-server
// commands), .devcontainer/ and .devcontainer.json (postCreateCommand and friends).
constexpr std::string_view kProtectedDirs[] = {".cordon", ".thndrs",       ".vscode", ".claude",
                                               ".idea",   ".devcontainer", ".cursor", ".gemini",
                                               ".zed",    ".helix"};
// .nvim.lua, .nvimrc and .exrc are what neovim's 'exrc' runs from the working directory (behind
// its :trust prompt, which a changed file raises again and a user clicks through); vim's 'exrc'
// runs .vimrc and .exrc with no prompt at all. .lazy.lua is lazy.nvim's project spec (Lua, run
// on open). .aider.conf.yml sets aider's test-cmd and lint-cmd, which aider runs. Aider's other
// .aider* files are its own history and caches, which it writes itself: not protected.
constexpr std::string_view kProtectedFiles[] = {".mcp.json",
                                                ".gitmodules",
                                                ".bashrc",
                                                ".bash_profile",
                                                ".bash_login",
                                                ".bash_logout",
                                                ".profile",
                                                ".zshrc",
                                                ".zshenv",
                                                ".zprofile",
                                                ".zlogin",
                                                ".zlogout",
                                                ".inputrc",
                                                ".envrc",
                                                ".cshrc",
                                                ".tcshrc",
                                                ".kshrc",
                                                ".config/fish/config.fish",
                                                ".devcontainer.json",
                                                ".nvim.lua",
                                                ".nvimrc",
                                                ".exrc",
                                                ".vimrc",
                                                ".lazy.lua",
                                                ".aider.conf.yml"};

}  // namespace

std::string ProtectedNamesText() {
  std::string out = ".git/config, .git/hooks, a new .git";
  for (std::string_view d : kProtectedDirs) out += ", " + std::string(d) + "/";
  for (std::string_view f : kProtectedFiles) out += ", " + std::string(f);
  return out;
}

bool IsProtectedPath(std::string_view rel, std::span<const std::string> extra_names) {
  std::vector<std::string_view> parts;
  std::string_view rest = rel;
  while (!rest.empty()) {
    std::size_t slash = rest.find('/');
    parts.push_back(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::string_view p = parts[i];
    if (std::find(std::begin(kProtectedDirs), std::end(kProtectedDirs), p) !=
        std::end(kProtectedDirs)) {
      return true;
    }
    if (std::find(std::begin(kProtectedFiles), std::end(kProtectedFiles), p) !=
        std::end(kProtectedFiles)) {
      return true;
    }
    if (std::find(extra_names.begin(), extra_names.end(), p) != extra_names.end()) return true;
    if (p == ".git" && i + 1 < parts.size() &&
        (parts[i + 1] == "config" || parts[i + 1] == "hooks")) {
      return true;
    }
    if (p == ".config" && i + 2 < parts.size() && parts[i + 1] == "fish") return true;
  }
  return false;
}

namespace {

// One key of a section being applied: its TOML node and where it is, for messages and
// provenance.
struct KeyInput {
  std::string_view key;  // "timeout_secs"
  const toml::node& node;
  std::string name;   // "limits.timeout_secs"
  std::string where;  // "file:line"
  const std::string& source;
  bool tighten_only;
  PolicyLayer layer = PolicyLayer::kUser;
};

// A positive integer, or invalid_input naming the key.
Result<std::int64_t> PositiveInteger(const toml::node& node, const std::string& name,
                                     const std::string& where) {
  auto v = node.value<std::int64_t>();
  if (!node.is_integer() || !v || *v <= 0) {
    return Fail(Code::kInvalidInput, where + ": " + name + " must be a positive integer");
  }
  return *v;
}

// A name from `table`, or invalid_input naming the key and the accepted names.
template <typename E, std::size_t N>
Result<E> NamedValue(const EnumName<E> (&table)[N], const toml::node& node, const std::string& name,
                     const std::string& where) {
  if (!node.is_string())
    return Fail(Code::kInvalidInput, where + ": " + name + " must be a string");
  auto v = ParseName(table, *node.value<std::string>(), name);
  if (!v) return Fail(Code::kInvalidInput, where + ": " + v.error().message);
  return *v;
}

Status ApplyLimitKey(Policy& policy, const KeyInput& in) {
  const LimitField* field = FindLimit(in.key);
  if (field == nullptr) return UnknownKey(in.source, in.node, in.name);
  ASSIGN_OR_RETURN(std::int64_t v, PositiveInteger(in.node, in.name, in.where));
  std::int64_t& slot = policy.limits.*(field->member);
  if (in.tighten_only && v > slot) {
    policy.notes.push_back(in.where + ": a project file cannot raise " + in.name + " to " +
                           std::to_string(v) + "; kept " + std::to_string(slot));
    return {};
  }
  slot = v;
  policy.provenance[in.name] = in.where;
  if (in.tighten_only) {
    // A project's lower limit is for every tool: a [tools.NAME] value an earlier layer set
    // (the shipped run_shell's 10 minutes) does not escape it.
    for (auto& [tool, o] : policy.tools) {
      auto it = o.limits.find(std::string(in.key));
      if (it == o.limits.end() || it->second <= v) continue;
      it->second = v;
      policy.provenance["tools." + tool + "." + std::string(in.key)] = in.where;
    }
  }
  return {};
}

// [audit] before_images and its caps. A project file is written by the agent: it must not
// decide what of the user's files cordon copies into its state directory (nor stop it), so its
// values are ignored with a note, as for signing_key. Checked first, so a bad value is an error
// wherever it is.
Status ApplyBeforeImagesKey(Policy& policy, const KeyInput& in) {
  bool on = policy.audit_before_images;
  std::int64_t cap = 0;
  if (in.key == "before_images") {
    auto v = in.node.value<bool>();
    if (!in.node.is_boolean() || !v) {
      return Fail(Code::kInvalidInput, in.where + ": " + in.name + " must be true or false");
    }
    on = *v;
  } else {
    ASSIGN_OR_RETURN(cap, PositiveInteger(in.node, in.name, in.where));
  }
  if (in.tighten_only) {
    policy.notes.push_back(in.where + ": a project file cannot set " + in.name +
                           " (only a layer the user controls decides what cordon keeps)");
    return {};
  }
  if (in.key == "before_images") {
    policy.audit_before_images = on;
  } else if (in.key == "before_images_max_file_bytes") {
    policy.audit_before_images_max_file_bytes = cap;
  } else {
    policy.audit_before_images_max_session_bytes = cap;
  }
  policy.provenance[in.name] = in.where;
  return {};
}

Status ApplyAuditKey(Policy& policy, const KeyInput& in) {
  // --- checkpoint: the signing key and the checkpoint period ---
  if (in.key == "signing_key") {
    if (!in.node.is_string() || in.node.value<std::string>()->empty() ||
        (*in.node.value<std::string>())[0] != '/') {
      return Fail(Code::kInvalidInput, in.where + ": " + in.name + " must be an absolute path");
    }
    if (in.tighten_only) {
      // A project file is written by the agent: it must not pick the key that signs its log.
      policy.notes.push_back(in.where + ": a project file cannot set " + in.name);
      return {};
    }
    policy.audit_signing_key = *in.node.value<std::string>();
    policy.provenance[in.name] = in.where;
    return {};
  }
  if (in.key == "checkpoint_records" || in.key == "checkpoint_seconds") {
    ASSIGN_OR_RETURN(std::int64_t v, PositiveInteger(in.node, in.name, in.where));
    std::int64_t& slot = in.key == "checkpoint_records" ? policy.audit_checkpoint_records
                                                        : policy.audit_checkpoint_seconds;
    if (in.tighten_only && v > slot) {
      policy.notes.push_back(in.where + ": a project file cannot raise " + in.name);
      return {};
    }
    slot = v;
    policy.provenance[in.name] = in.where;
    return {};
  }
  // --- changes: audit.file_changes (issue 10)
  if (in.key == "file_changes") {
    auto v = in.node.value<bool>();
    if (!in.node.is_boolean() || !v) {
      return Fail(Code::kInvalidInput, in.where + ": " + in.name + " must be true or false");
    }
    if (in.tighten_only && !*v && policy.audit_file_changes) {
      policy.notes.push_back(in.where + ": a project file cannot turn off " + in.name);
      return {};
    }
    policy.audit_file_changes = *v;
    policy.provenance[in.name] = in.where;
    return {};
  }
  if (in.key == "arguments") {
    const auto v = in.node.value<std::string>();
    if (!in.node.is_string() || (*v != "redacted" && *v != "hashed")) {
      return Fail(Code::kInvalidInput,
                  in.where + ": " + in.name + " must be \"redacted\" or \"hashed\"");
    }
    if (in.tighten_only && *v == "redacted" && policy.audit_arguments_hashed) {
      policy.notes.push_back(in.where + ": a project file cannot set " + in.name +
                             " back to \"redacted\"");
      return {};
    }
    policy.audit_arguments_hashed = *v == "hashed";
    policy.provenance[in.name] = in.where;
    return {};
  }
  if (in.key == "before_images" || in.key == "before_images_max_file_bytes" ||
      in.key == "before_images_max_session_bytes") {
    return ApplyBeforeImagesKey(policy, in);
  }
  if (in.key != "fsync") return UnknownKey(in.source, in.node, in.name);
  ASSIGN_OR_RETURN(FsyncMode mode, NamedValue(kFsyncModeNames, in.node, in.name, in.where));
  if (in.tighten_only && !AtLeastAsStrict(mode, policy.audit_fsync)) {
    policy.notes.push_back(in.where + ": a project file cannot weaken audit.fsync to " +
                           std::string(Name(kFsyncModeNames, mode)));
    return {};
  }
  policy.audit_fsync = mode;
  policy.provenance[in.name] = in.where;
  return {};
}

Status ApplyNetworkKey(Policy& policy, const KeyInput& in) {
  if (in.key != "mode") return UnknownKey(in.source, in.node, in.name);
  ASSIGN_OR_RETURN(NetworkMode mode, NamedValue(kNetworkModeNames, in.node, in.name, in.where));
  if (in.tighten_only && NetworkStrictness(mode) < NetworkStrictness(policy.network)) {
    policy.notes.push_back(in.where + ": a project file cannot open the network to " +
                           std::string(NetworkModeName(mode)));
    return {};
  }
  policy.network = mode;
  policy.provenance[in.name] = in.where;
  return {};
}

Status ApplySandboxKey(Policy& policy, const KeyInput& in) {
  if (in.key == "workspace") {
    ASSIGN_OR_RETURN(WorkspaceMode mode,
                     NamedValue(kWorkspaceModeNames, in.node, in.name, in.where));
    if (in.tighten_only && mode != WorkspaceMode::kStaged && mode != policy.workspace_mode) {
      policy.notes.push_back(in.where + ": a project file can only require " + in.name +
                             " = \"staged\"");
      return {};
    }
    policy.workspace_mode = mode;
    policy.provenance[in.name] = in.where;
    return {};
  }
  if (in.key == "warm") {
    const auto v = in.node.value<std::string>();
    if (!in.node.is_string() || !v || (*v != "on" && *v != "off")) {
      return Fail(Code::kInvalidInput, in.where + ": " + in.name + " must be \"on\" or \"off\"");
    }
    if (in.tighten_only && *v == "on" && !policy.warm) {
      policy.notes.push_back(in.where + ": a project file can only set " + in.name + " = \"off\"");
      return {};
    }
    policy.warm = *v == "on";
    policy.provenance[in.name] = in.where;
    return {};
  }
  if (in.key == "max_scan_entries") {
    ASSIGN_OR_RETURN(std::int64_t v, PositiveInteger(in.node, in.name, in.where));
    if (in.tighten_only && v > policy.max_scan_entries) {
      policy.notes.push_back(in.where + ": a project file cannot raise " + in.name);
      return {};
    }
    policy.max_scan_entries = v;
    policy.provenance[in.name] = in.where;
    return {};
  }
  bool Policy::*field = nullptr;
  if (in.key == "allow_weaker") {
    field = &Policy::allow_weaker_sandbox;
  } else if (in.key == "allow_dangerous_workspace") {
    field = &Policy::allow_dangerous_workspace;
  } else {
    return UnknownKey(in.source, in.node, in.name);
  }
  auto v = in.node.value<bool>();
  if (!in.node.is_boolean() || !v) {
    return Fail(Code::kInvalidInput, in.where + ": " + in.name + " must be true or false");
  }
  if (in.tighten_only && *v && !(policy.*field)) {
    policy.notes.push_back(in.where + ": a project file cannot set " + in.name + " = true");
    return {};
  }
  policy.*field = *v;
  policy.provenance[in.name] = in.where;
  return {};
}

// [tools.NAME]: limit overrides and a network mode for one tool.
Status ApplyToolSection(Policy& policy, const KeyInput& in) {
  const toml::table* tool = in.node.as_table();
  if (tool == nullptr) {
    return Fail(Code::kInvalidInput, in.where + ": [" + in.name + "] must be a table");
  }
  const std::string tool_name(in.key);
  for (auto&& [tk, tv] : *tool) {
    const std::string tkey = in.name + "." + std::string(tk.str());
    const std::string twhere = Where(in.source, tv);
    // The egress lists of one tool: the same entries, merge and tighten-only rule as
    // [network]'s (a project file may remove domains and presets, and add deny rules).
    if (tk.str() == "allow_domains" || tk.str() == "deny_domains" || tk.str() == "presets") {
      ToolOverride& o = policy.tools[tool_name];
      const bool deny = tk.str() == "deny_domains";
      std::vector<std::string>& list = tk.str() == "allow_domains" ? o.allow_domains
                                       : deny                      ? o.deny_domains
                                                                   : o.presets;
      const ListSpec spec{tkey,  deny ? ListPolarity::kDenies : ListPolarity::kGrants, false,
                          false, tk.str() == "presets" ? PresetEntry : DomainEntry,    false};
      TRY(ApplyListTo(policy, spec, list, tv, in.source, in.tighten_only));
      continue;
    }
    if (tk.str() == "network") {
      ASSIGN_OR_RETURN(NetworkMode mode, NamedValue(kNetworkModeNames, tv, tkey, twhere));
      if (in.tighten_only &&
          NetworkStrictness(mode) < NetworkStrictness(policy.NetworkFor(tool_name))) {
        policy.notes.push_back(twhere + ": a project file cannot open the network for " +
                               tool_name);
        continue;
      }
      policy.tools[tool_name].network = mode;
      policy.provenance[tkey] = twhere;
      continue;
    }
    const LimitField* field = FindLimit(tk.str());
    if (field == nullptr) return UnknownKey(in.source, tv, tkey);
    ASSIGN_OR_RETURN(std::int64_t v, PositiveInteger(tv, tkey, twhere));
    if (in.tighten_only && v > policy.LimitsFor(tool_name).*(field->member)) {
      policy.notes.push_back(twhere + ": a project file cannot raise " + tkey);
      continue;
    }
    policy.tools[tool_name].limits[std::string(tk.str())] = v;
    policy.provenance[tkey] = twhere;
  }
  return {};
}

// Examples are checked when the file loads: a policy that contradicts them is refused.
Status CheckExamples(Policy& policy, const KeyInput& in) {
  const bool want_protected = in.key == "protected";
  if (!want_protected && in.key != "writable") return UnknownKey(in.source, in.node, in.name);
  ASSIGN_OR_RETURN(auto paths, StringArray(in.node, in.source, in.name));
  for (const auto& p : paths) {
    auto rel = NormalizeWorkspacePath("/", p);
    if (!rel) {
      return Fail(Code::kInvalidInput, in.where + ": example " + p + ": " + rel.error().message);
    }
    if (IsProtectedPath(*rel, policy.filesystem.protected_names) != want_protected) {
      return Fail(Code::kInvalidInput, in.where + ": example fails: " + p + " should be " +
                                           (want_protected ? "protected" : "writable"));
    }
  }
  return {};
}

// [env] set = {NAME = "value"}: values only a layer the user controls may set (a project file
// adding a variable would be the repository granting itself something).
Status ApplyEnvKey(Policy& policy, const KeyInput& in) {
  if (in.key != "set") return UnknownKey(in.source, in.node, in.name);
  const toml::table* table = in.node.as_table();
  if (table == nullptr) {
    return Fail(Code::kInvalidInput, in.where + ": env.set must be a table of NAME = \"value\"");
  }
  for (auto&& [k, v] : *table) {
    const std::string name(k.str());
    const std::string where = Where(in.source, v);
    if (!IsEnvName(name)) {
      return Fail(Code::kInvalidInput,
                  where + ": env.set name \"" + name + "\" must be a variable name");
    }
    auto value = v.value<std::string>();
    if (!v.is_string() || !value) {
      return Fail(Code::kInvalidInput, where + ": env.set." + name + " must be a string");
    }
    if (in.tighten_only) {
      policy.notes.push_back(where + ": a project file cannot set env.set." + name +
                             "; it stays unset");
      continue;
    }
    policy.env.set[name] = *value;
    policy.provenance["env.set." + name] = where;
  }
  return {};
}

// A rule table's string field into `out`, or invalid_input naming it (`at`: "file:line: key").
Status StringInto(const toml::node& v, const std::string& at, std::string& out) {
  auto s = v.value<std::string>();
  if (!v.is_string() || !s) return Fail(Code::kInvalidInput, at + " must be a string");
  out = *s;
  return {};
}

// [[redact.rules]]: one table per rule (core/redact.h says what each field means).
Status ApplyRedactKey(Policy& policy, const KeyInput& in) {
  if (in.key == "scan_files") {
    auto v = in.node.value<bool>();
    if (!in.node.is_boolean() || !v) {
      return Fail(Code::kInvalidInput, in.where + ": " + in.name + " must be true or false");
    }
    if (in.tighten_only && !*v) {
      policy.notes.push_back(in.where + ": a project file cannot turn off " + in.name);
      return {};
    }
    policy.redact_scan_files = *v;
    policy.provenance[in.name] = in.where;
    return {};
  }
  if (in.key != "rules") return UnknownKey(in.source, in.node, in.name);
  const toml::array* rules = in.node.as_array();
  if (rules == nullptr) {
    return Fail(Code::kInvalidInput,
                in.where + ": redact.rules must be an array of tables " + "([[redact.rules]])");
  }
  for (auto&& item : *rules) {
    const toml::table* t = item.as_table();
    const std::string where = Where(in.source, item);
    if (t == nullptr) {
      return Fail(Code::kInvalidInput, where + ": each [[redact.rules]] entry must be a table");
    }
    RedactRule r;
    r.where = where;
    for (auto&& [k, v] : *t) {
      const std::string key(k.str());
      const std::string at = Where(in.source, v) + ": redact.rules." + key;
      auto str = [&](std::string& out) { return StringInto(v, at, out); };
      if (key == "id") {
        TRY(str(r.id));
      } else if (key == "pattern") {
        TRY(str(r.pattern));
      } else if (key == "ignore") {
        TRY(str(r.ignore));
      } else if (key == "keywords") {
        ASSIGN_OR_RETURN(r.keywords, StringArray(v, in.source, "redact.rules.keywords"));
      } else if (key == "require") {
        ASSIGN_OR_RETURN(r.require, StringArray(v, in.source, "redact.rules.require"));
      } else if (key == "match") {
        ASSIGN_OR_RETURN(r.match, StringArray(v, in.source, "redact.rules.match"));
      } else if (key == "not_match") {
        ASSIGN_OR_RETURN(r.not_match, StringArray(v, in.source, "redact.rules.not_match"));
      } else if (key == "group" || key == "min_length") {
        const std::int64_t max = key == "group" ? 9 : 4096;
        auto n = v.value<std::int64_t>();
        if (!v.is_integer() || !n || *n < 0 || *n > max) {
          return Fail(Code::kInvalidInput,
                      at + " must be an integer from 0 to " + std::to_string(max));
        }
        if (key == "group") {
          r.group = static_cast<int>(*n);
        } else {
          r.min_length = static_cast<std::size_t>(*n);
        }
      } else if (key == "token_runs") {
        auto b = v.value<bool>();
        if (!v.is_boolean() || !b) return Fail(Code::kInvalidInput, at + " must be true or false");
        r.token_runs = *b;
      } else if (key == "entropy") {
        auto d = v.value<double>();
        if (!(v.is_floating_point() || v.is_integer()) || !d) {
          return Fail(Code::kInvalidInput, at + " must be a number (bits per byte)");
        }
        r.entropy = *d;
      } else {
        return UnknownKey(in.source, v, "redact.rules." + key);
      }
    }
    if (r.id.empty() || r.pattern.empty()) {
      return Fail(Code::kInvalidInput, where + ": a [[redact.rules]] entry needs id and pattern");
    }
    if (r.match.empty()) {
      return Fail(Code::kInvalidInput,
                  where + ": redact rule \"" + r.id + "\" needs at least one match example");
    }
    auto same = std::find_if(policy.redact_rules.begin(), policy.redact_rules.end(),
                             [&](const RedactRule& o) { return o.id == r.id; });
    if (same != policy.redact_rules.end()) {
      if (in.tighten_only) {
        policy.notes.push_back(where + ": a project file cannot replace the redact rule \"" + r.id +
                               "\"; it adds new ids only");
        continue;
      }
      *same = std::move(r);
    } else {
      policy.redact_rules.push_back(std::move(r));
    }
  }
  policy.provenance["redact.rules"] = in.where;
  return {};
}

constexpr std::size_t kMaxApprovalRulesPerFile = 256;
constexpr std::size_t kMaxProjectApprovalRules = 64;

// [approvals]: rules, remove, timeout_secs, held_days (policy/approvals.h). A rule's examples are
// run here, so a rule that does not do what its examples say refuses its file.
Status ApplyApprovalRule(Policy& policy, const KeyInput& in, const toml::node& item) {
  const toml::table* t = item.as_table();
  const std::string where = Where(in.source, item);
  if (t == nullptr) {
    return Fail(Code::kInvalidInput, where + ": each [[approvals.rules]] entry must be a table");
  }
  ApprovalRule r;
  r.where = where;
  r.layer = in.layer;
  int matchers = 0;
  for (auto&& [k, v] : *t) {
    const std::string key(k.str());
    const std::string at = Where(in.source, v) + ": approvals.rules." + key;
    auto str = [&](std::string& out) { return StringInto(v, at, out); };
    if (key == "id") {
      TRY(str(r.id));
    } else if (key == "decision") {
      ASSIGN_OR_RETURN(r.decision, NamedValue(kApprovalDecisionNames, v, in.name + ".decision",
                                              Where(in.source, v)));
    } else if (key == "reason") {
      TRY(str(r.reason));
    } else if (key == "tool" || key == "path" || key == "domain") {
      TRY(str(r.pattern));
      r.matcher = key == "tool"   ? ApprovalMatcher::kTool
                  : key == "path" ? ApprovalMatcher::kPath
                                  : ApprovalMatcher::kDomain;
      ++matchers;
    } else if (key == "argv") {
      ASSIGN_OR_RETURN(r.argv, StringArray(v, in.source, "approvals.rules.argv"));
      r.matcher = ApprovalMatcher::kArgv;
      ++matchers;
    } else if (key == "match") {
      ASSIGN_OR_RETURN(r.match, StringArray(v, in.source, "approvals.rules.match"));
    } else if (key == "not_match") {
      ASSIGN_OR_RETURN(r.not_match, StringArray(v, in.source, "approvals.rules.not_match"));
    } else {
      return UnknownKey(in.source, v, "approvals.rules." + key);
    }
  }
  if (r.id.empty() || t->get("decision") == nullptr || matchers != 1) {
    return Fail(Code::kInvalidInput, where +
                                         ": an [[approvals.rules]] entry needs id, decision and "
                                         "exactly one of tool, argv, path, domain");
  }
  TRY(CheckApprovalRule(r));
  auto same = std::find_if(policy.approval_rules.begin(), policy.approval_rules.end(),
                           [&](const ApprovalRule& o) { return o.id == r.id; });
  if (in.tighten_only) {
    // A project file is written by the agent: it may ask about more, or deny more, and nothing
    // else (an allow, or a rule replacing one of the user's, would loosen).
    if (r.decision == ApprovalDecision::kAllow) {
      policy.notes.push_back(where + ": a project file cannot allow (approval rule \"" + r.id +
                             "\" is not applied)");
      return {};
    }
    if (same != policy.approval_rules.end()) {
      policy.notes.push_back(where + ": a project file cannot replace the approval rule \"" + r.id +
                             "\" (" + same->where + "); it adds new ids only");
      return {};
    }
  } else if (same != policy.approval_rules.end()) {
    policy.approval_rules.erase(same);  // replaced: the rule is now this layer's
  }
  policy.approval_rules.push_back(std::move(r));
  return {};
}

Status ApplyApprovalsKey(Policy& policy, const KeyInput& in) {
  if (in.key == "rules") {
    const toml::array* rules = in.node.as_array();
    if (rules == nullptr) {
      return Fail(Code::kInvalidInput,
                  in.where + ": approvals.rules must be an array of tables ([[approvals.rules]])");
    }
    // Every rule is read for every command, write or call: a file (the project's above all, which
    // the agent can write) cannot make each decision cost seconds with thousands of rules.
    const std::size_t cap = in.tighten_only ? kMaxProjectApprovalRules : kMaxApprovalRulesPerFile;
    if (rules->size() > cap) {
      return Fail(Code::kInvalidInput, in.where + ": " + std::to_string(rules->size()) +
                                           " approval rules; a " +
                                           (in.tighten_only ? "project " : "") +
                                           "policy file may hold " + std::to_string(cap));
    }
    const std::size_t before = policy.approval_rules.size();
    for (auto&& item : *rules) TRY(ApplyApprovalRule(policy, in, item));
    if (policy.approval_rules.size() != before) policy.provenance[in.name] = in.where;
    return {};
  }
  if (in.key == "remove") {
    ASSIGN_OR_RETURN(std::vector<std::string> ids,
                     StringArray(in.node, in.source, "approvals.remove"));
    if (in.tighten_only) {
      policy.notes.push_back(in.where + ": a project file cannot remove approval rules");
      return {};
    }
    for (const std::string& id : ids) {
      const auto gone =
          std::erase_if(policy.approval_rules, [&](const ApprovalRule& r) { return r.id == id; });
      if (gone == 0) {
        policy.notes.push_back(in.where + ": approvals.remove names \"" + id +
                               "\", which no layer below defines");
      }
    }
    policy.provenance[in.name] = in.where;
    return {};
  }
  if (in.key == "timeout_secs" || in.key == "held_days") {
    ASSIGN_OR_RETURN(std::int64_t v, PositiveInteger(in.node, in.name, in.where));
    std::int64_t& slot =
        in.key == "timeout_secs" ? policy.approvals_timeout_secs : policy.approvals_held_days;
    if (in.tighten_only) {
      policy.notes.push_back(in.where + ": a project file cannot set " + in.name);
      return {};
    }
    slot = v;
    policy.provenance[in.name] = in.where;
    return {};
  }
  return UnknownKey(in.source, in.node, in.name);
}

// [scopes] only = [...]: the exact set of scopes. After it (and in a project file) a layer may
// only narrow: only keeps what both name, and grant cannot add.
Status ApplyScopesKey(Policy& policy, const KeyInput& in) {
  if (in.key != "only") return UnknownKey(in.source, in.node, in.name);
  ASSIGN_OR_RETURN(auto raw, StringArray(in.node, in.source, in.name));
  std::set<std::string> listed;
  for (std::string v : raw) {
    if (v.rfind('!', 0) == 0) {
      return Fail(Code::kInvalidInput,
                  in.where + ": scopes.only names the exact set; \"" + v +
                      "\" removes (write the set without it, or use grant = [\"" + v + "\"])");
    }
    if (std::string why = ScopeEntry(in.name, v); !why.empty()) {
      return Fail(Code::kInvalidInput, in.where + ": " + why);
    }
    listed.insert(v);
  }
  auto& from = policy.entry_provenance["scopes.grant"];
  const bool narrow_only = in.tighten_only || !policy.scopes_only_where.empty();
  std::set<std::string> result;
  std::vector<std::string> refused;
  for (const std::string& s : listed) {
    if (narrow_only && policy.scopes.count(s) == 0) {
      refused.push_back(s);
    } else {
      result.insert(s);
      if (policy.scopes.count(s) == 0) from[s] = in.where;
    }
  }
  if (!refused.empty()) {
    policy.notes.push_back(in.where + ": scopes.only can only narrow here (" +
                           (in.tighten_only
                                ? std::string("a project file")
                                : "after [scopes] only at " + policy.scopes_only_where) +
                           "), so " + QuotedList(refused) + " stays out");
  }
  for (auto it = from.begin(); it != from.end();) {
    it = result.count(it->first) != 0 ? std::next(it) : from.erase(it);
  }
  policy.scopes = std::move(result);
  policy.provenance["scopes.grant"] = in.where;
  if (policy.scopes_only_where.empty()) policy.scopes_only_where = in.where;
  return {};
}

// Every section a policy file may have. List keys (kListKeys) are found first in any section;
// a section without a handler holds list keys only.
struct Section {
  std::string_view name;
  Status (*apply)(Policy&, const KeyInput&);
};
constexpr Section kSections[] = {
    {"limits", ApplyLimitKey},    {"scopes", ApplyScopesKey},  {"redact", ApplyRedactKey},
    {"audit", ApplyAuditKey},     {"examples", CheckExamples}, {"filesystem", nullptr},
    {"network", ApplyNetworkKey}, {"seccomp", nullptr},        {"sandbox", ApplySandboxKey},
    {"tools", ApplyToolSection},  {"env", ApplyEnvKey},        {"approvals", ApplyApprovalsKey},
};

}  // namespace

Status ApplyPolicyText(Policy& policy, std::string_view text, const std::string& source,
                       bool tighten_only) {
  return ApplyPolicyText(policy, text, source,
                         tighten_only ? PolicyLayer::kProject : PolicyLayer::kCli);
}

Status ApplyPolicyText(Policy& policy, std::string_view text, const std::string& source,
                       PolicyLayer layer) {
  const bool tighten_only = layer == PolicyLayer::kProject;
  ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
  for (auto&& [k, node] : root) {
    const std::string key(k.str());
    const Section* section = nullptr;
    for (const Section& s : kSections) {
      if (s.name == key) section = &s;
    }
    if (section == nullptr) return UnknownKey(source, node, key);
    const toml::table* table = node.as_table();
    if (table == nullptr) {
      return Fail(Code::kInvalidInput, Where(source, node) + ": [" + key + "] must be a table");
    }
    for (auto&& [sk, sub] : *table) {
      const std::string name = key + "." + std::string(sk.str());
      if (const ListKey* list = FindListKey(key, sk.str())) {
        TRY(ApplyList(policy, *list, sub, source, tighten_only));
      } else if (section->apply == nullptr) {
        return UnknownKey(source, sub, name);
      } else {
        TRY(section->apply(policy,
                           {sk.str(), sub, name, Where(source, sub), source, tighten_only, layer}));
      }
    }
  }
  return {};
}

PolicySources DefaultPolicySources(const std::string& shipped_dir, const std::string& workspace) {
  PolicySources s;
  s.dirs.push_back(shipped_dir);
  s.dirs.push_back("/etc/cordon/policies.d");
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x != nullptr && x[0] == '/') {
    s.dirs.push_back(std::string(x) + "/cordon/policies.d");
  } else if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') {
    s.dirs.push_back(std::string(h) + "/.config/cordon/policies.d");
  }
  if (!workspace.empty()) s.project_file = workspace + "/.cordon/policy.toml";
  return s;
}

namespace {

constexpr std::uint64_t kMaxPolicyFileBytes = 4 << 20;

// A policy or rule file's text. `workspace` non-empty: the file is in the agent's workspace
// (a project file, a rule file it names) and is read beneath it with no symlink followed, so it
// cannot be a link to a file the sandbox hides. Only a regular file is read (a FIFO would block
// the start, /dev/zero would fill memory), of at most 4 MiB. nullopt: it does not exist.
Result<std::optional<std::string>> ReadConfigText(const std::string& path, const std::string& what,
                                                  const std::string& workspace) {
  if (!workspace.empty()) {
    auto ws = Workspace::Open(workspace);
    if (!ws)
      return Fail(ws.error().code, "cannot read " + what + " " + path + ": " + ws.error().message);
    auto rel = ws->Relative(path);
    if (!rel)
      return Fail(Code::kDeniedByPolicy, what + " " + path + " is not inside the workspace");
    auto content = ws->ReadRegular(*rel, kMaxPolicyFileBytes);
    if (!content) {
      if (content.error().code == Code::kNotFound) return std::optional<std::string>();
      return Fail(content.error().code,
                  "cannot read " + what + " " + path + ": " + content.error().message);
    }
    return std::optional<std::string>(std::move(content->data));
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Fail(Code::kNotFound, "cannot read " + what + " " + path, errno, path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Fail(Code::kInvalidInput, what + " " + path + " is not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxPolicyFileBytes) {
    return Fail(Code::kTooLarge, what + " " + path + " is larger than 4 MiB");
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return std::optional<std::string>(std::move(text));
}

Status LoadFile(Policy& policy, const std::string& path, PolicyLayer layer, bool must_exist) {
  const std::string workspace =
      layer == PolicyLayer::kProject
          ? std::filesystem::path(path).parent_path().parent_path().string()
          : std::string();
  ASSIGN_OR_RETURN(std::optional<std::string> read, ReadConfigText(path, "policy file", workspace));
  if (!read) {
    if (must_exist) return Fail(Code::kNotFound, "cannot read policy file " + path, ENOENT, path);
    return {};
  }
  std::string text = std::move(*read);
  policy.files.push_back({path, Sha256Hex(text), layer});
  return ApplyPolicyText(policy, text, path, layer);
}

// [redact] rule_files, once every layer is read: each file's rules join redact_rules. A file
// that cannot be read or is not TOML fails the load naming it (as a policy file would: a rule
// file named and silently missing would leave its secrets shown); a rule the file holds that
// cordon cannot honour is skipped with a note. An id a rule already has becomes
// "gitleaks:<id>" (then "gitleaks:<id>:2", ...): a rule file never replaces a rule.
Status LoadRuleFiles(Policy& policy) {
  const char* home = std::getenv("HOME");
  const auto& named_at = policy.entry_provenance["redact.rule_files"];
  for (const std::string& entry : policy.redact_rule_files) {
    const std::string path = ExpandPath(entry, "", home != nullptr ? home : "");
    const auto at = named_at.find(entry);
    const std::string by = at != named_at.end() ? " (redact.rule_files, " + at->second + ")" : "";
    // A rule file a project file named lies in its workspace (checked where the entry was
    // read): it is read beneath the workspace, no symlink followed.
    std::string workspace;
    if (at != named_at.end()) {
      const std::string from = at->second.substr(0, at->second.rfind(':'));
      for (const auto& f : policy.files) {
        if (f.layer == PolicyLayer::kProject && f.path == from) {
          workspace = std::filesystem::path(from).parent_path().parent_path().string();
        }
      }
    }
    auto read = ReadConfigText(path, "redact rule file", workspace);
    if (!read) return Fail(read.error().code, read.error().message + by);
    if (!*read)
      return Fail(Code::kNotFound, "cannot read redact rule file " + path + by, ENOENT, path);
    auto parsed = ParseGitleaksRules(**read, path);
    if (!parsed) return Fail(parsed.error().code, parsed.error().message + by);
    std::size_t loaded = 0;
    for (RedactRule& r : parsed->rules) {
      auto taken = [&](const std::string& id) {
        return std::any_of(policy.redact_rules.begin(), policy.redact_rules.end(),
                           [&](const RedactRule& o) { return o.id == id; });
      };
      const std::string own = r.id;
      for (int n = 1; taken(r.id); ++n) {
        r.id = "gitleaks:" + own + (n == 1 ? std::string() : ":" + std::to_string(n));
      }
      if (r.id.size() > 64) {  // the longest marker name (core/redact.h)
        parsed->notes.push_back(r.where + ": gitleaks rule \"" + own +
                                "\" skipped: its id is taken, and " + r.id +
                                " is longer than 64 characters");
        ++parsed->skipped;
        continue;
      }
      if (r.id != own) {
        parsed->notes.push_back(r.where + ": gitleaks rule \"" + own +
                                "\": that id is taken, so its marker is [REDACTED:" + r.id + "]");
      }
      ++loaded;
      policy.redact_rules.push_back(std::move(r));
    }
    policy.notes.insert(policy.notes.end(), parsed->notes.begin(), parsed->notes.end());
    policy.redact_rule_file_counts.push_back({path, loaded, parsed->skipped});
  }
  return {};
}

}  // namespace

bool DenyCovers(const std::vector<std::string>& deny, const std::string& path) {
  return std::any_of(deny.begin(), deny.end(), [&](const std::string& d) {
    return !d.empty() && (d == path || (path.size() > d.size() && path.rfind(d, 0) == 0 &&
                                        (d.back() == '/' || path[d.size()] == '/')));
  });
}

Result<Policy> LoadPolicy(const PolicySources& sources) {
  Policy policy;
  // Built-in defaults: everything a coding agent needs, nothing else.
  policy.scopes = {"fs:read",         "fs:write",        "process:run",
                   "process:operate", "session:operate", "mcp:call"};
  policy.provenance["scopes.grant"] = "built-in default";
  for (const auto& s : policy.scopes)
    policy.entry_provenance["scopes.grant"][s] = "built-in default";
  for (const auto& f : kLimitFields)
    policy.provenance[std::string("limits.") + f.key] = "built-in default";
  policy.provenance["audit.fsync"] = "built-in default";
  static constexpr PolicyLayer kLayers[] = {PolicyLayer::kShipped, PolicyLayer::kSystem,
                                            PolicyLayer::kUser};
  for (std::size_t i = 0; i < sources.dirs.size(); ++i) {
    // What the layers above the shipped one are measured by (their [scopes] grant warnings).
    if (i == 1) policy.shipped_scopes = policy.scopes;
    const std::string& dir = sources.dirs[i];
    UniqueDir d = UniqueDir::Open(dir.c_str());
    if (!d.valid()) continue;
    std::vector<std::string> names;
    while (dirent* e = d.Next()) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".toml" && n[0] != '.') names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      TRY(LoadFile(policy, dir + "/" + n, i < 3 ? kLayers[i] : PolicyLayer::kUser, true));
    }
  }
  if (!policy.shipped_scopes) policy.shipped_scopes = policy.scopes;
  for (const auto& f : sources.extra_files) TRY(LoadFile(policy, f, PolicyLayer::kCli, true));
  if (sources.project_file)
    TRY(LoadFile(policy, *sources.project_file, PolicyLayer::kProject, false));
  // A credential store cordon reads for its values is one no sandbox may read: it joins the deny
  // list unless an entry there covers it already (~/.kube/config below ~/.kube).
  for (const auto& store : policy.redact_credential_stores) {
    if (DenyCovers(policy.filesystem.deny, store)) continue;
    policy.filesystem.deny.push_back(store);
    const auto& from = policy.entry_provenance["redact.credential_stores"];
    const auto it = from.find(store);
    policy.entry_provenance["filesystem.deny"][store] =
        "redact.credential_stores" + (it != from.end() ? " (" + it->second + ")" : std::string());
  }
  TRY(LoadRuleFiles(policy));
  // A rule set this binary checked before is not checked again: its patterns are compiled on
  // first use (core/redact.h).
  TRY(ExpandSecretWords(policy.redact_rules, policy.redact_secret_words));
  ASSIGN_OR_RETURN(policy.compiled_redact_rules,
                   RedactRules::Compile(policy.redact_rules, CordonStateDir() + "/redact-checked"));
  return policy;
}

}  // namespace cordon
