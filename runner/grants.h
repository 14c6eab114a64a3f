// Grants: host paths outside the workspace that a confined process may read or write because a
// person asked for them (--read, --write, a configured server's sandbox.read/sandbox.write), or
// because a server's own program lies there (its executable, its script's package). One rule
// refuses `/`, $HOME and every ancestor of $HOME, whoever asks; cordon's own files stay masked
// under any grant (runner/mask.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace cordon {

struct PathGrant {
  std::string path;  // canonical (realpath), except a symlink kept as the link itself
  bool write = false;
  std::string from;  // who asked: "--read", "--write", "sandbox.read", "executable", ...
};

// Why a grant of `path` (canonical) is refused: it is `/`, $HOME (`home`, canonical) or an
// ancestor of $HOME. nullopt when it may be granted.
std::optional<std::string> GrantRefusal(const std::string& path, const std::string& home);

// A requested grant, resolved (realpath) and checked: not_found when the path does not exist,
// denied_by_policy when GrantRefusal refuses it. `from` names the flag or key in messages.
Result<PathGrant> ResolveGrant(const std::string& requested, bool write, const std::string& from,
                               const std::string& home);

// A server's own program files, readable without a flag: the executable that `argv[0]` resolves
// to on `path_env` (and its symlink target), and, when it is an interpreter (node, python3, ...),
// the package its script argument lies in (the nearest ancestor holding package.json,
// pyproject.toml or Cargo.toml; the script alone when that is `/`, $HOME or an ancestor of it)
// plus, for Node, each node_modules directory on the resolution chain upward. Relative scripts
// are taken from `cwd`. Never `/`, $HOME or an ancestor of $HOME. Never what a symlink at or
// below `workspace` (canonical; the repository's and the confined process's to point anywhere)
// leads to outside it: such a path is not granted.
std::vector<PathGrant> ProgramFileGrants(const std::vector<std::string>& argv,
                                         const std::string& cwd, const std::string& path_env,
                                         const std::string& home,
                                         const std::string& workspace = {});

// When `argv` fetches a package from a registry as it starts (npx, npm exec, pnpm dlx, yarn dlx,
// bunx, uvx, uv tool run, pipx run), what it needs that a sandbox without network lacks; nullopt
// for any other command, and for npx/npm exec of a package the workspace's node_modules/.bin
// holds already (that runs offline).
std::optional<std::string> FetchesPackageAtStart(const std::vector<std::string>& argv,
                                                 const std::string& workspace);

// The egress preset whose registry `argv`'s launcher installs from: npm for npx, npm, pnpm,
// yarn, bun and bunx; pypi for uvx, uv, pipx and pip; crates for cargo. Empty for any other
// program (node, python3, a shell): which registry it would want is not known.
std::string LauncherPreset(const std::vector<std::string>& argv);

}  // namespace cordon
