// ShowAuditLog: a log as a readable timeline; the key=value columns come from the catalog.
#pragma once

#include <string>

#include "core/error.h"

namespace cordon {

// A readable timeline, one line per record.
Result<std::string> ShowAuditLog(const std::string& path);

}  // namespace cordon
