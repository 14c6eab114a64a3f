// cordon setup: where each MCP client keeps its servers, and the pure edit of one such file (add,
// remove, wrap or unwrap one entry) that leaves everything else in it as it was.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace cordon::mcp {

enum class Client { kClaudeCode, kClaudeDesktop, kVsCode, kCursor, kCodex };

// "claude-code", "claude-desktop", "vscode", "cursor", "codex".
std::string_view ClientName(Client client);
std::optional<Client> ParseClient(std::string_view name);
std::vector<std::string> ClientNames();

enum class ConfigScope { kUser, kProject };

// The directories a client's user file is found under: $HOME, $XDG_CONFIG_HOME (empty: ~/.config)
// and $CODEX_HOME (empty: ~/.codex). Passed in, so the paths are decided without the environment.
struct ConfigDirs {
  std::string home;
  std::string xdg_config_home;
  std::string codex_home;
};

// The file `client` keeps its servers in for `scope` (`project_dir` for kProject, absolute):
//   claude-code     project: DIR/.mcp.json              user: ~/.claude.json
//   claude-desktop  user: $XDG_CONFIG_HOME/Claude/claude_desktop_config.json
//   vscode          project: DIR/.vscode/mcp.json       user: $XDG_CONFIG_HOME/Code/User/mcp.json
//   cursor          project: DIR/.cursor/mcp.json       user: ~/.cursor/mcp.json
//   codex           user: $CODEX_HOME/config.toml
// A scope the client does not have is invalid_input naming the one it has.
Result<std::string> ClientConfigPath(Client client, ConfigScope scope,
                                     const std::string& project_dir, const ConfigDirs& dirs);

// Whether the file is JSON ({"mcpServers": ...} or VS Code's {"servers": ...}) or TOML (Codex).
bool ClientUsesToml(Client client);

enum class SetupAction {
  kAdd,     // the entry `name` runs `cordon serve --workspace W [flags]`
  kRemove,  // the entry `name` (a cordon entry) goes
  kWrap,  // the stdio entry `name` runs through `cordon wrap --workspace W [flags] -- ITS COMMAND`
  kUnwrap,  // the entry `name` runs its own command again
};

struct SetupRequest {
  SetupAction action = SetupAction::kAdd;
  std::string name = "cordon";
  std::string cordon_command = "cordon";  // what the client starts: "cordon" or an absolute path
  std::string workspace;                  // written after --workspace, as given
  // add: serve's flags, written after the workspace as given ("--network", "proxy", ...); wrap:
  // the same for cordon wrap (--timeout aside: wrap has no time limit). The caller has checked
  // them. An entry that runs cordon serve, or is wrapped already, gets these in place of its own
  // (re-running setup with other flags updates it), its other keys kept.
  std::vector<std::string> flags{};
  bool force = false;  // add: replace a different entry of that name; remove: a non-cordon one
};

struct SetupEdit {
  bool changed = false;
  std::string text;                // the whole new file (the old one when nothing changed)
  std::string summary;             // one line: what was done, or why nothing was
  std::vector<std::string> notes;  // what the user should know (comments not kept, ...)
};

// The edit of one client file's text (`text` empty: a new file). `source` names the file in
// messages. A file that is not valid JSON (comments and trailing commas included: they would be
// lost) or TOML is invalid_input and nothing is decided; so is a servers key that is not an
// object. An add whose name holds a cordon serve entry updates its command and args; one whose
// name holds another definition is already_exists unless `force`; a wrap
// or unwrap of a name the file lacks is not_found; a wrap of a server without a command (a URL
// server) is invalid_input. Doing what is already done changes nothing (changed=false).
// JSON keeps its key order and indentation; TOML is edited as text, one table only, and the
// result is parsed again and compared with the original: anything else that would change is
// internal and nothing is decided.
Result<SetupEdit> EditClientConfig(Client client, std::string_view text, const std::string& source,
                                   const SetupRequest& request);

// `before` and `after` as a unified diff of one hunk (the changed lines with 3 of context).
std::string UnifiedDiff(std::string_view before, std::string_view after, const std::string& path);

}  // namespace cordon::mcp
