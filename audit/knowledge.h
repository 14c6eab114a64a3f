// The session's redaction knowledge: what its redactor knew by value (the environment's and the
// policy's secrets, the workspace's secret-file lines, the user's credential stores), as hashes
// only (Redactor::Knowledge). A reader that shows file content after the session, `audit diff`,
// loads it and hides what the session hid, even when the secret's source has since changed or
// gone (a rotated token, a deleted .env).
//
// Kept content-addressed (core/before_images.h's store) under cordon's state directory, which
// every sandbox has masked: one file per distinct knowledge, 0600 in a 0700 directory, named in
// session_started.redaction.knowledge by its SHA-256, so the log's chain vouches for it.
#pragma once

#include <string>

#include "core/error.h"
#include "core/redact.h"
#include "core/text.h"

namespace cordon {

// <state>/redaction-knowledge.
std::string RedactionKnowledgeDir();

// Stores r.Knowledge() under `dir`; returns what session_started names:
// {"sha256", "hashes": count, "rules_sha256": HEX|null}. A store that cannot be written is an
// error (the caller records it; a reader then withholds diffs).
Result<Json> StoreRedactionKnowledge(const Redactor& r, const std::string& dir);

// Adds the knowledge that `named` (session_started.redaction.knowledge) names to `into`:
// not_found when the session named none or its file is gone, conflict when the file no longer
// hashes to its name, invalid_input when it is not knowledge. Nothing is added on error.
Status LoadRedactionKnowledge(const Json& named, const std::string& dir, Redactor& into);

}  // namespace cordon
