// What no confined process and no file tool may see, whatever the grants: cordon's own files
// (found once, from the environment and the session's options), a workspace at `/` or $HOME
// (refused for writing without --allow-dangerous-workspace), and, when cordon runs as root,
// every file under the read binds that the host's ordinary users cannot read (a scan, cached).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "runner/bwrap.h"

namespace cordon {

// `path` with its deepest existing ancestor resolved by realpath and the rest appended: the
// form the workspace root has, so that a lexical comparison with it means what it says.
std::string CanonicalPath(const std::string& path);

// Whether `path` is `root` or lies below it (lexically, on canonical paths).
bool PathUnder(const std::string& path, const std::string& root);
// The first entry of `roots` at or above `path`, or nullptr.
const std::string* UnderAny(const std::string& path, const std::vector<std::string>& roots);

// cordon's own files, canonical and without duplicates: its configuration directory
// ($XDG_CONFIG_HOME/cordon, else ~/.config/cordon: the user's policies.d), the system policy
// layers (/etc/cordon), its state directory ($XDG_STATE_HOME/cordon, else
// ~/.local/state/cordon, else /tmp/cordon: default audit logs and the MCP trust store), its
// runtime directory ($XDG_RUNTIME_DIR/cordon, else /tmp/cordon-UID), the user-level
// MCP configuration (~/.cordon/mcp.toml, ~/.thndrs/mcp.toml), and each file in `named` (the
// audit log, the audit key, --policy layers, serve's token file, ...).
std::vector<std::string> CordonOwnPaths(const std::vector<std::string>& named);
// The own directories cordon creates (0700) when one is missing where a confined process could
// create it first: its configuration and state directories. No placeholder: they are cordon's.
std::vector<std::string> CordonOwnDirectories();

// Why a writable workspace at `workspace` (canonical) is dangerous: it is `/`, or it is the
// home directory `home` (canonical); nullopt when it is neither.
std::optional<std::string> DangerousWorkspaceReason(const std::string& workspace,
                                                    const std::string& home);
// The refusal (denied_by_policy) for a dangerous writable workspace, naming the flag.
Error DangerousWorkspaceError(const std::string& workspace, const std::string& reason);

// Root-only files: entries under `roots` that "others" may not read (a file without o+r, a
// directory without o+r or o+x), each masked whole (nothing below it is listed). `named` are
// paths the policy names (the workspace, read and write paths): one of them is never masked,
// and an entry above one is descended into rather than masked.
// The walk (core/walk.h) goes 256 directories deep and fails closed past that: `incomplete`
// says why, and a launch that needs the scan is refused (runner/plan.cc).
struct RootOnlyScan {
  std::vector<HostPath> masked;
  std::optional<Error> incomplete;
  std::size_t scanned = 0;
  double ms = 0;
};
// `denied`: paths the deny list masks whole; the scan does not enter them (nothing below one is
// shown), so a tree too deep to search can be denied rather than removed.
RootOnlyScan ScanRootOnly(const std::vector<std::string>& roots,
                          const std::vector<std::string>& named,
                          const std::vector<std::string>& denied = {});

// The scan, once per session for each (roots, named) pair: the session's host facts share it.
class RootOnlyCache {
 public:
  std::shared_ptr<const RootOnlyScan> Get(const std::vector<std::string>& roots,
                                          const std::vector<std::string>& named,
                                          const std::vector<std::string>& denied = {});

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const RootOnlyScan>> scans_;
};

}  // namespace cordon
