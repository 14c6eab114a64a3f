// The user's interpreter: a version manager's shim (pyenv, asdf, mise or rtx, volta) is resolved
// as the user's shell would, by the manager's own `which`, run on the host with the user's
// environment; the interpreter it names runs instead, and its prefix is granted read-only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace cordon {

struct VersionManager {
  std::string name;                    // "pyenv": also its command, and the `which` it is asked
  std::string shims_dir;               // where its shims lie
  std::vector<std::string> not_shims;  // names in shims_dir that are the manager's own programs
  std::vector<std::string> commands;   // where its executable may be, after the PATH
};

// The directories the managers use, from their variables (empty: the documented default).
struct ManagerDirs {
  std::string home;
  std::string pyenv_root;     // $PYENV_ROOT, else ~/.pyenv
  std::string asdf_data_dir;  // $ASDF_DATA_DIR, else ~/.asdf
  std::string mise_data_dir;  // $MISE_DATA_DIR, else ~/.local/share/mise
  std::string volta_home;     // $VOLTA_HOME, else ~/.volta
};
std::vector<VersionManager> VersionManagers(const ManagerDirs& dirs);

// The manager whose shims directory holds `exe` (the program as PATH found it), if any.
std::optional<VersionManager> ShimManager(const std::string& exe,
                                          const std::vector<VersionManager>& managers);

// The installation prefix of an interpreter whose executable is `real` (canonical): P when `real`
// is P/bin/NAME, NAME is an interpreter (python*, pypy*, node, nodejs, bun) and P holds lib/;
// never a system prefix (/, /usr, /usr/local), which the policy shows already.
std::optional<std::string> InterpreterPrefix(const std::string& real);

struct ResolvedProgram {
  std::string program;  // what runs instead of argv[0]: the interpreter the shim would run
  std::string prefix;   // its installation prefix, granted read-only (empty: none found)
  std::string how;      // "pyenv which python3 -> /home/u/.pyenv/versions/3.11.7/bin/python3"
};

// When `argv0`, found on `path_env` as execvp would, is a version manager's shim: asks the
// manager (`pyenv which python3`, `asdf which`, `mise which`, `volta which`) in `cwd`, with
// `env` (the user's environment, so that .python-version, PYENV_VERSION and the like count).
// nullopt when argv0 is not a shim. A shim the manager cannot resolve (no manager found, the
// version not installed, no answer in 10 s) is not_found, naming the manager's answer and the
// fix: the interpreter's own path.
Result<std::optional<ResolvedProgram>> ResolveShim(const std::string& argv0, const std::string& cwd,
                                                   const std::string& path_env, char** env);

}  // namespace cordon
