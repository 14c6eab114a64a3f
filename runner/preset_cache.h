// cordon's own cache for each egress preset a proxied sandbox uses (issue 18): made 0700 by
// cordon under CordonCacheDir(), outside the workspace and every directory the host's own
// npm, yarn, pip, uv and cargo use, granted writable to the sandbox and named to its clients
// by the preset's variables (policy/egress.h). Never the user's own caches: what a sandbox
// writes there runs in later sandboxes only, never on the host.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "policy/egress.h"
#include "runner/environment.h"

namespace cordon {

struct PresetCache {
  std::string preset;
  std::string source;  // "preset npm (--allow-preset)": the grant's `from`
  std::string path;    // PresetCacheDir(preset): canonical once checked, else as named
  EnvList env;         // the preset's variables pointing at `path` (PresetCacheEnvironment)
  bool exists = false;
  // Why the sandbox gets no cache (its clients then use their defaults under the sandbox's own
  // HOME, which end with it); empty when it gets one.
  std::string unavailable;
};

// Where the host's own package tools keep what they run from: npm's ~/.npm, yarn's caches,
// pip's and uv's under $XDG_CACHE_HOME (or ~/.cache), ~/.cargo, plus what the caller's
// environment (`host_env`) sets npm_config_cache, YARN_CACHE_FOLDER, PIP_CACHE_DIR,
// UV_CACHE_DIR and CARGO_HOME to. Canonical. `home` empty: its entries are left out.
std::vector<std::string> HostPackageCachePaths(const std::string& home, char** host_env);

// Why `dir` (canonical) may not be a preset cache: it is `/`, $HOME (`home`, canonical) or an
// ancestor of it; it is, lies in or holds the workspace or one of `host_paths`. nullopt: it may.
std::optional<std::string> PresetCacheRefusal(const std::string& dir, const std::string& workspace,
                                              const std::string& home,
                                              const std::vector<std::string>& host_paths);

// The preset's cache directory, checked: with `create`, each missing directory from
// CordonCacheDir() down is made (0700) by cordon, never left for a sandbox to make. Each of
// them must then be a real directory (not a symlink) owned by this uid, and is set to 0700.
// Returns the canonical path; not_found when it is missing and `create` is false.
Result<std::string> PreparePresetCacheDir(std::string_view preset, bool create);

// Each preset of `egress` with its cache: prepared (PreparePresetCacheDir) and checked
// (PresetCacheRefusal against `workspace`, canonical, and the caller's environment). A cache
// that cannot be had is `unavailable`, with the reason: the sandbox still runs, without it.
std::vector<PresetCache> PresetCachesFor(const EgressPolicy& egress, const std::string& workspace,
                                         char** host_env, bool create);

}  // namespace cordon
