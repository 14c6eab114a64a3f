// cordon's own files, dangerous workspaces and the root-only scan (runner/mask.h).
#include "runner/mask.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include "core/fs.h"
#include "core/unique_fd.h"
#include "core/walk.h"

namespace cordon {
namespace {

// getdents64's record (the kernel's struct linux_dirent64; glibc 2.36 has no declaration).
struct linux_dirent64 {
  ino64_t d_ino;
  off64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

}  // namespace

std::string CanonicalPath(const std::string& path) {
  if (path.empty() || path[0] != '/') return path;
  std::string head = path, tail;
  while (true) {
    std::unique_ptr<char, decltype(&std::free)> real(::realpath(head.c_str(), nullptr), &std::free);
    if (real != nullptr) {
      std::string out = real.get();
      if (!tail.empty()) out += (out == "/" ? "" : "/") + tail;
      return out;
    }
    const std::size_t slash = head.find_last_of('/');
    if (slash == std::string::npos || head == "/") return path;
    const std::string leaf = head.substr(slash + 1);
    if (leaf == ".." || leaf == ".") return path;  // cannot be resolved lexically: keep as given
    if (!leaf.empty()) tail = tail.empty() ? leaf : leaf + "/" + tail;
    head = slash == 0 ? "/" : head.substr(0, slash);
  }
}

bool PathUnder(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

const std::string* UnderAny(const std::string& path, const std::vector<std::string>& roots) {
  for (const auto& r : roots) {
    if (PathUnder(path, r)) return &r;
  }
  return nullptr;
}

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '/' ? std::string(v) : std::string();
}

}  // namespace

std::vector<std::string> CordonOwnPaths(const std::vector<std::string>& named) {
  // The same rules as DefaultPolicySources (policy/), DefaultAuditLogPath (audit/),
  // TrustStorePath and DefaultConfigSources (mcp/), (the runtime directory is kept masked: it held
  // stub locks once).
  const std::string home = Env("HOME");
  std::vector<std::string> raw;
  if (std::string x = Env("XDG_CONFIG_HOME"); !x.empty()) {
    raw.push_back(x + "/cordon");
  } else if (!home.empty()) {
    raw.push_back(home + "/.config/cordon");
  }
  raw.push_back("/etc/cordon");
  if (std::string x = Env("XDG_STATE_HOME"); !x.empty()) {
    raw.push_back(x + "/cordon");
  } else if (!home.empty()) {
    raw.push_back(home + "/.local/state/cordon");
  } else {
    raw.push_back(CordonStateDir());
  }
  if (std::string x = Env("XDG_RUNTIME_DIR"); !x.empty()) {
    raw.push_back(x + "/cordon");
  } else {
    raw.push_back("/tmp/cordon-" + std::to_string(::getuid()));
  }
  if (!home.empty()) {
    raw.push_back(home + "/.cordon/mcp.toml");
    raw.push_back(home + "/.thndrs/mcp.toml");
  }
  for (const auto& n : named) {
    if (n.empty()) continue;
    if (n[0] == '/') {
      raw.push_back(n);
    } else {
      char cwd[PATH_MAX];
      if (::getcwd(cwd, sizeof cwd) != nullptr) raw.push_back(std::string(cwd) + "/" + n);
    }
  }
  std::vector<std::string> out;
  for (const auto& p : raw) {
    std::string c = CanonicalPath(p);
    if (c.empty() || c == "/") continue;  // never mask the whole host
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
  }
  return out;
}

std::optional<std::string> DangerousWorkspaceReason(const std::string& workspace,
                                                    const std::string& home) {
  if (workspace == "/") return "it is the root directory /";
  if (!home.empty() && home != "/" && workspace == home) {
    return "it is your home directory (shell startup files, ~/.gitconfig, ~/.ssh, the "
           "configuration of every tool)";
  }
  return std::nullopt;
}

Error DangerousWorkspaceError(const std::string& workspace, const std::string& reason) {
  return Error{Code::kDeniedByPolicy,
               "the workspace " + workspace + " cannot be writable: " + reason +
                   ". Choose a project directory with --workspace DIR, or, if you accept that "
                   "risk, pass --allow-dangerous-workspace (or set [sandbox] "
                   "allow_dangerous_workspace = true in your own policy)",
               0, workspace};
}

namespace {

constexpr std::size_t kRootOnlyMaxDepth = 256;

bool RootOnlyMode(mode_t mode) {
  if (S_ISLNK(mode)) return false;  // its target is what counts, and is scanned where it lies
  if (S_ISDIR(mode)) return (mode & S_IROTH) == 0 || (mode & S_IXOTH) == 0;
  return (mode & S_IROTH) == 0;
}

PathKind KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return PathKind::kDir;
  if (S_ISREG(mode)) return PathKind::kFile;
  return PathKind::kOther;
}

// bwrap gives the sandbox its own /proc, /dev and /tmp: what lies there on the host is not shown.
bool ReplacedInSandbox(const std::string& p) {
  return p == "/proc" || p == "/dev" || p == "/tmp" || p == "/sys";
}

}  // namespace

RootOnlyScan ScanRootOnly(const std::vector<std::string>& roots,
                          const std::vector<std::string>& named,
                          const std::vector<std::string>& denied) {
  const auto t0 = std::chrono::steady_clock::now();
  RootOnlyScan scan;
  auto above_named = [&](const std::string& p) {
    for (const auto& n : named) {
      if (n != p && PathUnder(n, p)) return true;
    }
    return false;
  };
  auto listed = [](const std::vector<std::string>& list, const std::string& p) {
    return std::find(list.begin(), list.end(), p) != list.end();
  };
  // One fstatat per entry (none for a symlink, which is never masked): /usr holds ~160k
  // entries, and the common entry (world-readable, not a directory) costs no string.
  WalkOptions opts;
  opts.max_depth = kRootOnlyMaxDepth;
  opts.too_deep = TooDeep::kFail;
  WalkHooks hooks;
  std::string root_path;
  hooks.visit = [&](const WalkEntry& e) -> Result<Visit> {
    ++scan.scanned;
    if (e.type == DT_LNK) return Visit::kNext;
    struct stat st {};
    if (::fstatat(e.dir_fd, e.name, &st, AT_SYMLINK_NOFOLLOW) != 0) return Visit::kNext;
    const bool dir_entry = S_ISDIR(st.st_mode);
    if (!dir_entry && !RootOnlyMode(st.st_mode)) return Visit::kNext;
    const std::string path = root_path == "/" ? "/" + *e.rel : root_path + "/" + *e.rel;
    if (ReplacedInSandbox(path) || listed(named, path) || listed(roots, path) ||
        listed(denied, path)) {
      return Visit::kNext;
    }
    if (RootOnlyMode(st.st_mode) && !above_named(path)) {
      scan.masked.push_back({path, KindOf(st.st_mode), {}});
      return Visit::kNext;
    }
    return dir_entry ? Visit::kDescend : Visit::kNext;
  };
  // Gone or not a directory meanwhile is skipped by the walk. A directory root cannot open
  // (root-squashed NFS, FUSE) the sandbox's uid 0, with fewer capabilities, cannot open either;
  // any other error fails closed.
  hooks.unopenable = [](const WalkEntry& e, int err) -> Result<UniqueFd> {
    if (err == EACCES || err == EPERM) return UniqueFd();
    if (err == ENOENT || err == ENOTDIR || err == ELOOP) return UniqueFd();  // changed meanwhile
    errno = err;
    return SysFail(Code::kSandboxUnavailable, "open", *e.rel);
  };
  for (const auto& root : roots) {
    UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) continue;
    root_path = root;
    opts.what = root;
    auto walked = WalkTree(fd.get(), opts, hooks);
    if (!walked) {
      Error err = std::move(walked).error();
      if (!err.where.empty() && err.where[0] != '/')
        err.where = root == "/" ? "/" + err.where : root + "/" + err.where;
      scan.incomplete = std::move(err);
      break;
    }
  }
  std::sort(scan.masked.begin(), scan.masked.end(),
            [](const HostPath& a, const HostPath& b) { return a.path < b.path; });
  scan.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return scan;
}

std::shared_ptr<const RootOnlyScan> RootOnlyCache::Get(const std::vector<std::string>& roots,
                                                       const std::vector<std::string>& named,
                                                       const std::vector<std::string>& denied) {
  std::string key;
  for (const auto& r : roots) key += r + '\n';
  key += '\0';
  for (const auto& n : named) key += n + '\n';
  key += '\0';
  for (const auto& d : denied) key += d + '\n';
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = scans_[key];
  if (!slot) slot = std::make_shared<const RootOnlyScan>(ScanRootOnly(roots, named, denied));
  return slot;
}

std::vector<std::string> CordonOwnDirectories() {
  const std::string home = Env("HOME");
  std::vector<std::string> out;
  if (std::string x = Env("XDG_CONFIG_HOME"); !x.empty()) {
    out.push_back(CanonicalPath(x + "/cordon"));
  } else if (!home.empty()) {
    out.push_back(CanonicalPath(home + "/.config/cordon"));
  }
  out.push_back(CanonicalPath(CordonStateDir()));
  return out;
}

}  // namespace cordon
