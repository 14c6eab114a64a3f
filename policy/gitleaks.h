// Rule files in the gitleaks configuration format ([redact] rule_files): each [[rules]] table
// read as a RedactRule (core/redact.h), checked by the same compiler as [[redact.rules]].
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/redact.h"

namespace cordon {

// What one rule file gave.
struct GitleaksRules {
  std::vector<RedactRule> rules;   // where: "FILE:LINE"; id: the file's, lower-cased
  std::vector<std::string> notes;  // "FILE:LINE: ..." for each rule skipped and key ignored
  std::size_t skipped = 0;         // rules not loaded (each has a note saying why)
};

// Reads one file's text (pure: the caller reads the file). Honoured per [[rules]]: id, regex,
// secretGroup, entropy, keywords, and the regexes and stopwords of its [rules.allowlist] /
// [[rules.allowlists]]; the file's [allowlist] / [[allowlists]] regexes and stopwords apply to
// its rules (to those its targetRules name, when it has one). Skipped, each with a note: a rule
// with a path (output has no file path to test), a regexTarget other than "secret", composite
// rules (required), a regex or allowlist regex RE2 does not compile, and any rule
// RedactRules::Check refuses. An allowlist whose meaning needs what output lacks (paths,
// commits under condition "AND", a regexTarget of "match" or "line") is ignored with a note: the
// rule then hides more, never less. Errors (invalid_input naming the file, and the rule's line
// and id): text that is not TOML, a rule without an id, a rule with neither regex nor path, a
// field of the wrong type.
Result<GitleaksRules> ParseGitleaksRules(std::string_view text, const std::string& path);

}  // namespace cordon
