// ShowAuditLog: a log as a readable timeline; the key=value columns come from the catalog.
#pragma once

#include <string>

#include "core/error.h"
#include "core/text.h"

namespace cordon {

// A readable timeline, one line per record.
Result<std::string> ShowAuditLog(const std::string& path);

// The same log as JSON: {"path", "records": [each record as written], "unreadable": [{"line",
// "bytes"}]} (a line that is not a record is named, never dumped).
Result<Json> ShowAuditLogJson(const std::string& path);

}  // namespace cordon
