// The environment of a confined process, as data: the fixed sandbox variables, what the policy's
// [env] section passes from the caller and sets, and the PATH the command is resolved on.
// Pure: the host's environment is passed in (docs/policy.md "[env]").
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/policy.h"

namespace cordon {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// The variables every confined process gets whatever the caller's environment holds: PATH (see
// SandboxPath), HOME, TMPDIR, CORDON_SANDBOX and CORDON_WORKSPACE.
bool IsFixedSandboxVariable(std::string_view name);
inline constexpr std::string_view kDefaultSandboxPath =
    "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

// The environment before per-request additions (--env, a server's configured env):
// the fixed variables; LANG, LC_ALL, LC_CTYPE, TERM and TZ when they do not look secret; each
// caller variable env.pass names (a "PREFIX*" entry never matches a secret-looking name: those
// pass only when named exactly); with `inherit_all` (cordon wrap: the server gets what its
// client gave to cordon) every caller variable; then env.set. env.deny removes caller variables
// and set entries alike; cordon's own CORDON_* variables are never inherited.
EnvList BuildSandboxEnvironment(char** host_env, const std::string& workspace,
                                const EnvPolicy& policy, bool inherit_all);

// Sets `name` in `env`, replacing an earlier value, keeping its position.
void SetEnv(EnvList& env, const std::string& name, const std::string& value);

// The caller's PATH as far as it lies inside what the sandbox can read (`visible`: the read and
// write binds and the workspace), minus what it hides (`hidden`), in the caller's order, without
// duplicates: a command is then found where the caller's shell would find it, unless that is
// outside the sandbox. Empty when nothing of it is visible.
std::string SandboxPath(std::string_view caller_path, const std::vector<std::string>& visible,
                        const std::vector<std::string>& hidden);

// The names in `env` beyond the fixed variables, sorted: what records list (never values).
std::vector<std::string> PassedEnvNames(const EnvList& env);

}  // namespace cordon
