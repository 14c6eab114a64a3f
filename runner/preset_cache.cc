// cordon's own caches for the egress presets (runner/preset_cache.h).
#include "runner/preset_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/fs.h"
#include "core/unique_fd.h"
#include "runner/grants.h"
#include "runner/mask.h"

namespace cordon {
namespace {

std::string HostEnvValue(char** env, std::string_view name) {
  for (char** e = env; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.size() > name.size() && entry.substr(0, name.size()) == name &&
        entry[name.size()] == '=') {
      return std::string(entry.substr(name.size() + 1));
    }
  }
  return {};
}

}  // namespace

std::vector<std::string> HostPackageCachePaths(const std::string& home, char** host_env) {
  std::vector<std::string> raw;
  std::string xdg = HostEnvValue(host_env, "XDG_CACHE_HOME");
  if (xdg.empty() || xdg[0] != '/') xdg = home.empty() ? std::string() : home + "/.cache";
  if (!home.empty()) {
    for (const char* rel : {"/.npm", "/.yarn", "/.cargo"}) raw.push_back(home + rel);
  }
  if (!xdg.empty()) {
    for (const char* rel : {"/pip", "/uv", "/yarn"}) raw.push_back(xdg + rel);
  }
  // The variables the presets set inside, as the caller set them for the host's own tools.
  for (const char* name : {"npm_config_cache", "NPM_CONFIG_CACHE", "YARN_CACHE_FOLDER",
                           "PIP_CACHE_DIR", "UV_CACHE_DIR", "CARGO_HOME"}) {
    std::string v = HostEnvValue(host_env, name);
    if (!v.empty() && v[0] == '/') raw.push_back(std::move(v));
  }
  std::vector<std::string> out;
  for (const auto& p : raw) {
    std::string c = CanonicalPath(p);
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
  }
  return out;
}

std::optional<std::string> PresetCacheRefusal(const std::string& dir, const std::string& workspace,
                                              const std::string& home,
                                              const std::vector<std::string>& host_paths) {
  if (auto why = GrantRefusal(dir, home)) return why;
  if (!workspace.empty() && (PathUnder(dir, workspace) || PathUnder(workspace, dir))) {
    return dir + " is in or holds the workspace " + workspace +
           " (set XDG_CACHE_HOME to a directory outside it)";
  }
  for (const std::string& p : host_paths) {
    if (PathUnder(dir, p) || PathUnder(p, dir)) {
      return dir + " is in or holds " + p +
             ", which the host's own package tools use (set XDG_CACHE_HOME elsewhere)";
    }
  }
  return std::nullopt;
}

Result<std::string> PreparePresetCacheDir(std::string_view preset, bool create) {
  const std::string root = CordonCacheDir();  // ".../cordon" or "/tmp/cordon-cache-UID"
  const std::size_t slash = root.find_last_of('/');
  const std::string base = slash == 0 ? std::string("/") : root.substr(0, slash);
  if (create) {
    // The user's own cache directory ($XDG_CACHE_HOME, ~/.cache), as any XDG program makes it.
    std::error_code ec;
    std::filesystem::create_directories(base, ec);
  }
  UniqueFd dir(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) {
    return SysFail(errno == ENOENT ? Code::kNotFound : Code::kSandboxUnavailable, "open", base);
  }
  // From cordon's own directory down, every level is cordon's: made here, a real directory of
  // this uid, 0700. A symlink or another user's directory (/tmp/cordon-cache-UID made first by
  // someone else) would let the grant land where cordon did not mean it to.
  std::string path = base == "/" ? std::string() : base;
  for (const std::string& name :
       {root.substr(slash + 1), std::string("presets"), std::string(preset)}) {
    path += "/" + name;
    if (create && ::mkdirat(dir.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
      return SysFail(Code::kSandboxUnavailable, "mkdir", path);
    }
    UniqueFd next(
        ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) {
      const int err = errno;
      if (err == ENOENT) return SysFail(Code::kNotFound, "open", path);
      if (err == ELOOP || err == ENOTDIR) {
        return Fail(Code::kSandboxUnavailable,
                    path +
                        " is not a directory (a symlink?): cordon "
                        "uses only a directory it made",
                    err, path);
      }
      return SysFail(Code::kSandboxUnavailable, "open", path);
    }
    struct stat st {};
    if (::fstat(next.get(), &st) != 0) return SysFail(Code::kSandboxUnavailable, "fstat", path);
    if (st.st_uid != ::geteuid()) {
      return Fail(Code::kSandboxUnavailable,
                  path + " belongs to uid " + std::to_string(st.st_uid) + ", not to uid " +
                      std::to_string(::geteuid()) + " that runs cordon",
                  0, path);
    }
    if ((st.st_mode & 07777) != 0700 && ::fchmod(next.get(), 0700) != 0) {
      return SysFail(Code::kSandboxUnavailable, "chmod", path);
    }
    dir = std::move(next);
  }
  return CanonicalPath(path);
}

std::vector<PresetCache> PresetCachesFor(const EgressPolicy& egress, const std::string& workspace,
                                         char** host_env, bool create) {
  std::vector<PresetCache> out;
  if (egress.caches.empty()) return out;
  const char* home_env = std::getenv("HOME");
  const std::string raw_home = home_env != nullptr && home_env[0] == '/' ? home_env : "";
  const std::string home = raw_home.empty() || raw_home == "/" ? "" : CanonicalPath(raw_home);
  const std::vector<std::string> host_paths = HostPackageCachePaths(home, host_env);
  for (const auto& [name, source] : egress.caches) {
    const EgressPreset* preset = FindEgressPreset(name);
    if (preset == nullptr) continue;
    PresetCache c;
    c.preset = name;
    c.source = source;
    c.path = PresetCacheDir(name);  // as named until it is checked: a symlink is not resolved
    // Checked before anything is made (never a directory in the workspace), and again on the
    // directory that exists.
    auto why = PresetCacheRefusal(CanonicalPath(c.path), workspace, home, host_paths);
    if (!why) {
      if (auto dir = PreparePresetCacheDir(name, create)) {
        c.path = *dir;
        c.exists = true;
        why = PresetCacheRefusal(c.path, workspace, home, host_paths);
      } else if (dir.error().code != Code::kNotFound || create) {
        why = dir.error().message;
      }
    }
    if (why) {
      c.unavailable = *why;
    } else {
      c.env = PresetCacheEnvironment(*preset, c.path);
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace cordon
