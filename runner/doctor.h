// cordon doctor: a preflight of every confinement layer, each with what fails and the remedy.
#pragma once

#include "core/text.h"

namespace cordon {

// Runs every check; `report` receives {"checks":[{name, ok, required, detail, remedy}], "ok"}.
// `deep` adds what takes seconds: as root, the scan of /etc, /usr and /opt for root-only files
// (each session makes its own scan; doctor only counts them).
// `allow_weaker`: the policy's [sandbox] allow_weaker, so that a host where only a weaker mode
// runs is a warning, not a failure.
bool RunDoctor(Json* report, const std::string& shim_path, bool deep = false,
               bool allow_weaker = false);

}  // namespace cordon
