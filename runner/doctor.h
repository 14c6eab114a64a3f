// cordon doctor: a preflight of every confinement layer, each with what fails and the remedy.
#pragma once

#include "core/text.h"

namespace cordon {

// Runs every check; `report` receives {"checks":[{name, ok, required, detail, remedy}], "ok"}.
bool RunDoctor(Json* report, const std::string& shim_path);

}  // namespace cordon
