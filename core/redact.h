// Redactor: deterministic removal of secrets from tool output and audit records.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/text.h"

namespace cordon {

class Redactor {
 public:
  // Values shorter than this are not redacted by exact match: a 2-character "secret" would
  // shred ordinary output. SECURITY.md says so.
  static constexpr std::size_t kMinExactValue = 6;

  // Adds exact values: each (rule, value) pair becomes "[REDACTED:rule]".
  void AddValue(std::string rule, std::string value);
  // Adds the values of environment variables whose names look secret
  // (*TOKEN*, *KEY*, *SECRET*, *PASSWORD*, *PASSWD*, case-insensitive).
  void AddSecretEnvironment(char** envp);
  static bool IsSecretName(std::string_view name);

  // Redacts `text` in place; returns how many secrets it replaced.
  std::size_t Redact(std::string& text) const;
  // Redacts every string value (not keys) in `j`; returns the count.
  std::size_t RedactJson(Json& j) const;

 private:
  std::vector<std::pair<std::string, std::string>> values_;  // rule, value; longest first
};

}  // namespace cordon
