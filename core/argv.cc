#include "core/argv.h"

#include <nlohmann/json.hpp>

namespace cordon {

void to_json(nlohmann::json& j, const Argv& argv) { j = argv.get(); }

}  // namespace cordon
