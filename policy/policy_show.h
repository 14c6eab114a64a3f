// What `cordon policy show` prints: every effective value and every list entry with the
// file:line it came from, as JSON and as commented TOML-like text. Pure functions of a Policy.
#pragma once

#include <string>

#include "core/text.h"
#include "policy/policy.h"

namespace cordon {

// {"effective", "decided_by", "entries", "files", "notes", "sha256"}. "entries" maps each list
// key to [{"value", "from"}] in effective order; secret lists (redact.values) omit "value".
Json PolicyShowJson(const Policy& policy);

// The effective policy as `policy show` prints it: the canonical values plus the keys the
// canonical form leaves out at their defaults.
Json PolicyShowEffective(const Policy& policy);

// The same, section by section, one value or entry per line with "# file:line" after it.
std::string PolicyShowText(const Policy& policy);

}  // namespace cordon
