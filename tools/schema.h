// A JSON Schema validator for the subset cordon's tool schemas use. The tool input parser IS
// this validator, so a schema and its parser cannot disagree.
#pragma once

#include <string>

#include "core/text.h"

namespace cordon {

// Supported keywords: type (string or array), properties, required, additionalProperties
// (false or a schema), items, enum, const, minimum, maximum, minLength, maxLength, minItems,
// maxItems, pattern-free. Anything else in a schema is a programming error (SchemaIsSupported).
// Returns an empty string when `value` conforms; otherwise a message naming the JSON pointer.
std::string ValidateAgainstSchema(const Json& schema, const Json& value);

// True when `schema` uses only the keywords above (tests check every tool schema with it).
bool SchemaIsSupported(const Json& schema, std::string* why);

}  // namespace cordon
