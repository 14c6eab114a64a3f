// gitleaks-format rule files read as redaction rules (policy/gitleaks.h; docs/policy.md,
// "gitleaks rule files"). Written from the format's documentation; nothing of gitleaks is used.
#include "policy/gitleaks.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>

#include "policy/toml_parse.h"

namespace cordon {
namespace {

std::string Line(const std::string& path, const toml::node& n) {
  return path + ":" + std::to_string(n.source().begin.line);
}

Result<std::vector<std::string>> Strings(const toml::node& n, const std::string& at) {
  const toml::array* a = n.as_array();
  if (a == nullptr) return Fail(Code::kInvalidInput, at + " must be an array of strings");
  std::vector<std::string> out;
  for (const auto& item : *a) {
    auto s = item.value<std::string>();
    if (!item.is_string() || !s) return Fail(Code::kInvalidInput, at + " must hold strings only");
    out.push_back(*s);
  }
  return out;
}

Result<std::string> String(const toml::node& n, const std::string& at) {
  auto s = n.value<std::string>();
  if (!n.is_string() || !s) return Fail(Code::kInvalidInput, at + " must be a string");
  return *s;
}

// What an allowlist takes back: a secret one of `regexes` finds, or that holds a stopword.
struct Allowlist {
  std::vector<std::string> regexes, stopwords;
  std::vector<std::string> target_rules;  // the file's own allowlists only; empty: every rule
};

// Whether RE2 compiles `re` as a rule's allow pattern would be compiled ("" if so).
std::string AllowError(const std::string& re) {
  RedactRule probe;
  probe.id = "allow";
  probe.pattern = "x";
  probe.allow = {re};
  Status s = RedactRules::Check(probe);
  return s ? std::string() : s.error().message.substr(s.error().message.find("allow \""));
}

// One allowlist table. nullopt: it cannot apply to output (noted), so nothing is taken back.
Result<std::optional<Allowlist>> ReadAllowlist(const toml::table& t, const std::string& path,
                                               const std::string& what, bool file_level,
                                               std::vector<std::string>& notes) {
  const std::string where = Line(path, t) + ": " + what;
  Allowlist allow;
  bool all = false;        // condition = "AND"
  bool elsewhere = false;  // paths or commits: never true of output
  std::string target = "secret";
  for (auto&& [k, v] : t) {
    const std::string key(k.str());
    const std::string at = Line(path, v) + ": " + what + "." + key;
    if (key == "regexes") {
      ASSIGN_OR_RETURN(allow.regexes, Strings(v, at));
    } else if (key == "stopwords") {
      ASSIGN_OR_RETURN(allow.stopwords, Strings(v, at));
    } else if (key == "paths" || key == "commits") {
      ASSIGN_OR_RETURN(auto list, Strings(v, at));
      elsewhere = elsewhere || !list.empty();
    } else if (key == "condition") {
      ASSIGN_OR_RETURN(std::string c, String(v, at));
      if (c != "OR" && c != "AND") {
        return Fail(Code::kInvalidInput, at + " must be \"OR\" or \"AND\", not \"" + c + "\"");
      }
      all = c == "AND";
    } else if (key == "regexTarget") {
      ASSIGN_OR_RETURN(target, String(v, at));
    } else if (key == "targetRules" && file_level) {
      ASSIGN_OR_RETURN(allow.target_rules, Strings(v, at));
    } else if (key != "description") {
      notes.push_back(at + ": not a key cordon reads; ignored");
    }
  }
  if (target != "secret" && !allow.regexes.empty()) {
    notes.push_back(where + ": regexTarget \"" + target +
                    "\" is not honoured (cordon tests the secret only); its regexes are ignored, "
                    "so what they allow is hidden");
    allow.regexes.clear();
    if (all) return std::optional<Allowlist>();
  }
  if (all && (elsewhere || (!allow.regexes.empty() && !allow.stopwords.empty()))) {
    notes.push_back(where +
                    ": condition \"AND\" over paths, commits, or both regexes and stopwords is "
                    "not honoured (output has no path or commit); ignored, so what it allows is "
                    "hidden");
    return std::optional<Allowlist>();
  }
  for (auto it = allow.regexes.begin(); it != allow.regexes.end();) {
    if (std::string why = AllowError(*it); !why.empty()) {
      notes.push_back(where + ": " + why + "; ignored, so what it allows is hidden");
      it = allow.regexes.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(allow.stopwords, [](const std::string& w) { return w.empty(); });
  return std::optional<Allowlist>(std::move(allow));
}

// The allowlists under `node` ([x.allowlist] as one table, [[x.allowlists]] as an array).
Status ReadAllowlists(const toml::node& node, const std::string& path, const std::string& what,
                      bool file_level, std::vector<Allowlist>& out,
                      std::vector<std::string>& notes) {
  auto one = [&](const toml::node& n) -> Status {
    const toml::table* t = n.as_table();
    if (t == nullptr)
      return Fail(Code::kInvalidInput, Line(path, n) + ": " + what + " must be a table");
    ASSIGN_OR_RETURN(auto allow, ReadAllowlist(*t, path, what, file_level, notes));
    if (allow) out.push_back(std::move(*allow));
    return {};
  };
  if (const toml::array* a = node.as_array()) {
    for (const auto& item : *a) TRY(one(item));
    return {};
  }
  return one(node);
}

void AddAllow(RedactRule& r, const Allowlist& a) {
  r.allow.insert(r.allow.end(), a.regexes.begin(), a.regexes.end());
  r.stopwords.insert(r.stopwords.end(), a.stopwords.begin(), a.stopwords.end());
}

}  // namespace

Result<GitleaksRules> ParseGitleaksRules(std::string_view text, const std::string& path) {
  auto parsed = ParseToml(text, path);
  if (!parsed) {
    return Fail(Code::kInvalidInput,
                "rule file (gitleaks format) is not TOML: " + parsed.error().message);
  }
  const toml::table& root = *parsed;
  GitleaksRules out;
  std::vector<Allowlist> file_allows;
  for (auto&& [k, v] : root) {
    const std::string key(k.str());
    if (key == "allowlist" || key == "allowlists") {
      TRY(ReadAllowlists(v, path, key, true, file_allows, out.notes));
    } else if (key == "extend") {
      out.notes.push_back(Line(path, v) +
                          ": [extend] is not followed (gitleaks' default rules and other files "
                          "are not loaded); cordon's own rules cover the common shapes");
    } else if (key != "rules" && key != "title" && key != "description" && key != "minVersion") {
      out.notes.push_back(Line(path, v) + ": \"" + key + "\" is not a key cordon reads; ignored");
    }
  }
  const toml::node* rules = root.get("rules");
  if (rules == nullptr) return out;
  const toml::array* items = rules->as_array();
  if (items == nullptr) {
    return Fail(Code::kInvalidInput, Line(path, *rules) + ": rules must be [[rules]] tables");
  }
  for (const auto& item : *items) {
    const toml::table* t = item.as_table();
    const std::string where = Line(path, item);
    if (t == nullptr) return Fail(Code::kInvalidInput, where + ": each [[rules]] must be a table");
    RedactRule r;
    r.where = where;
    std::string id, file_path, target = "secret";
    if (const toml::node* n = t->get("id")) {
      ASSIGN_OR_RETURN(id, String(*n, where + ": rules.id"));
    }
    if (id.empty()) return Fail(Code::kInvalidInput, where + ": a [[rules]] entry needs an id");
    const std::string at = where + ": gitleaks rule \"" + id + "\"";
    std::vector<Allowlist> allows;
    bool required = false;
    std::int64_t group = 0;
    for (auto&& [k, v] : *t) {
      const std::string key(k.str());
      const std::string field = at + ": " + key;
      if (key == "regex") {
        ASSIGN_OR_RETURN(r.pattern, String(v, field));
      } else if (key == "path") {
        ASSIGN_OR_RETURN(file_path, String(v, field));
      } else if (key == "regexTarget") {
        ASSIGN_OR_RETURN(target, String(v, field));
      } else if (key == "secretGroup") {
        auto n = v.value<std::int64_t>();
        if (!v.is_integer() || !n || *n < 0) {
          return Fail(Code::kInvalidInput, field + " must be an integer of 0 or more");
        }
        group = *n;
      } else if (key == "entropy") {
        auto d = v.value<double>();
        if (!(v.is_floating_point() || v.is_integer()) || !d) {
          return Fail(Code::kInvalidInput, field + " must be a number (bits per byte)");
        }
        r.entropy = *d;
      } else if (key == "keywords") {
        ASSIGN_OR_RETURN(r.keywords, Strings(v, field));
      } else if (key == "allowlist" || key == "allowlists") {
        TRY(ReadAllowlists(v, path, "rule \"" + id + "\" " + key, false, allows, out.notes));
      } else if (key == "required") {
        required = true;
      } else if (key != "id" && key != "description" && key != "tags") {
        out.notes.push_back(Line(path, v) + ": gitleaks rule \"" + id + "\": \"" + key +
                            "\" is not a key cordon reads; ignored");
      }
    }
    if (r.pattern.empty() && file_path.empty()) {
      return Fail(Code::kInvalidInput, at + " has neither regex nor path");
    }
    auto skip = [&](const std::string& why) {
      out.notes.push_back(at + " skipped: " + why);
      ++out.skipped;
    };
    if (!file_path.empty()) {
      skip("it tests a file's path, and output has none");
      continue;
    }
    if (target != "secret") {
      skip("regexTarget \"" + target + "\" is not honoured (only \"secret\")");
      continue;
    }
    if (required) {
      skip("composite rules (required) are not honoured");
      continue;
    }
    if (group > 9) {
      skip("secretGroup " + std::to_string(group) + " is past the 9 groups cordon reads");
      continue;
    }
    r.group = group > 0 ? static_cast<int>(group) : -1;
    r.id = id;
    for (char& c : r.id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const Allowlist& a : allows) AddAllow(r, a);
    for (const Allowlist& a : file_allows) {
      if (a.target_rules.empty() ||
          std::find(a.target_rules.begin(), a.target_rules.end(), id) != a.target_rules.end())
        AddAllow(r, a);
    }
    if (Status s = RedactRules::Check(r); !s) {
      // What the compiler (and RE2) said, without its own "where: redact rule" prefix.
      std::string why = s.error().message;
      const std::string prefix = where + ": redact rule \"" + r.id + "\": ";
      if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
      skip(why);
      continue;
    }
    out.rules.push_back(std::move(r));
  }
  return out;
}

}  // namespace cordon
