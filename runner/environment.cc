// The environment of a confined process (runner/environment.h).
#include "runner/environment.h"

#include <algorithm>
#include <set>

#include "core/redact.h"

namespace cordon {
namespace {

bool MatchesAny(const std::vector<std::string>& entries, std::string_view name) {
  return std::any_of(entries.begin(), entries.end(),
                     [&](const std::string& e) { return EnvEntryMatches(e, name); });
}

bool ExactlyNamed(const std::vector<std::string>& entries, std::string_view name) {
  return std::find(entries.begin(), entries.end(), name) != entries.end();
}

bool PathUnderRoot(std::string_view path, std::string_view root) {
  while (root.size() > 1 && root.back() == '/') root.remove_suffix(1);
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.substr(0, root.size()) == root &&
                          path[root.size()] == '/');
}

}  // namespace

bool IsFixedSandboxVariable(std::string_view name) {
  return name == "PATH" || name == "HOME" || name == "TMPDIR" || name == "CORDON_SANDBOX" ||
         name == "CORDON_WORKSPACE";
}

void SetEnv(EnvList& env, const std::string& name, const std::string& value) {
  for (auto& [k, v] : env) {
    if (k == name) {
      v = value;
      return;
    }
  }
  env.emplace_back(name, value);
}

EnvList BuildSandboxEnvironment(char** host_env, const std::string& workspace,
                                const EnvPolicy& policy, bool inherit_all) {
  static const std::set<std::string, std::less<>> kLocale = {"LANG", "LC_ALL", "LC_CTYPE", "TERM",
                                                             "TZ"};
  EnvList env = {{"PATH", std::string(kDefaultSandboxPath)},
                 {"HOME", "/tmp/home"},
                 {"TMPDIR", "/tmp"},
                 {"CORDON_SANDBOX", "1"},
                 {"CORDON_WORKSPACE", workspace}};
  for (char** e = host_env; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    const std::string name(entry.substr(0, eq));
    // PATH is SandboxPath's; HOME and TMPDIR name the sandbox's own; CORDON_* are cordon's.
    if (IsFixedSandboxVariable(name) || name.rfind("CORDON_", 0) == 0) continue;
    if (MatchesAny(policy.deny, name)) continue;
    const bool secret = Redactor::IsSecretName(name);
    bool pass = inherit_all || ExactlyNamed(policy.pass, name);
    if (!pass && !secret) pass = kLocale.contains(name) || MatchesAny(policy.pass, name);
    if (pass) env.emplace_back(name, std::string(entry.substr(eq + 1)));
  }
  for (const auto& [name, value] : policy.set) {
    if (!MatchesAny(policy.deny, name)) SetEnv(env, name, value);
  }
  return env;
}

std::string SandboxPath(std::string_view caller_path, const std::vector<std::string>& visible,
                        const std::vector<std::string>& hidden) {
  std::string out;
  std::set<std::string, std::less<>> seen;
  std::size_t start = 0;
  while (start <= caller_path.size()) {
    std::size_t colon = caller_path.find(':', start);
    if (colon == std::string_view::npos) colon = caller_path.size();
    std::string_view dir = caller_path.substr(start, colon - start);
    start = colon + 1;
    // Relative entries (and the empty one, which means ".") would resolve against the
    // sandbox's working directory, not where the caller meant: left out.
    if (dir.empty() || dir[0] != '/' || seen.contains(dir)) continue;
    const auto under = [&](const std::string& root) { return PathUnderRoot(dir, root); };
    if (std::none_of(visible.begin(), visible.end(), under) ||
        std::any_of(hidden.begin(), hidden.end(), under)) {
      continue;
    }
    seen.emplace(dir);
    if (!out.empty()) out += ':';
    out += dir;
  }
  return out;
}

std::vector<std::string> PassedEnvNames(const EnvList& env) {
  std::vector<std::string> names;
  for (const auto& [k, v] : env) {
    if (!IsFixedSandboxVariable(k)) names.push_back(k);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace cordon
