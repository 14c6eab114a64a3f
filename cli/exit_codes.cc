// The exec exit-code mapping, kept beside the codes it maps to.
#include "cli/exit_codes.h"

namespace cordon {

int ExecExitCode(const ProcessOutcome& o) {
  if (o.error) return o.error->code == Code::kNotFound ? kExitNotFound : kExitCordonFailed;
  if (o.status == ProcessStatus::kTimeout) return kExitTimeout;
  if (o.signal) return kExitSignalBase + *o.signal;
  return o.exit_code.value_or(kExitCordonFailed);
}

}  // namespace cordon
