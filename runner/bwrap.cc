// bwrap argv construction and the workspace scan that feeds it. Agent arguments never appear
// here: the command is handed to the shim through its spec, after bwrap's own "--".
#include "runner/bwrap.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>

#include "core/redact.h"
#include "core/unique_fd.h"

namespace cordon {

HostPath DescribeHostPath(const std::string& path) {
  HostPath hp{path, PathKind::kMissing, {}};
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return hp;
  if (S_ISLNK(st.st_mode)) {
    hp.kind = PathKind::kSymlink;
    char buf[PATH_MAX];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    if (n > 0) hp.symlink_target.assign(buf, static_cast<std::size_t>(n));
  } else if (S_ISDIR(st.st_mode)) {
    hp.kind = PathKind::kDir;
  } else if (S_ISREG(st.st_mode)) {
    hp.kind = PathKind::kFile;
  } else {
    hp.kind = PathKind::kOther;
  }
  return hp;
}

std::vector<std::string> BuildBwrapArgv(const SandboxLayout& l) {
  std::vector<std::string> a = {l.bwrap,         "--unshare-user", "--unshare-pid",
                                "--unshare-ipc", "--unshare-uts",  "--unshare-cgroup-try"};
  if (l.network != NetworkMode::kAllow)
    a.push_back("--unshare-net");  // loopback: bwrap brings lo up
  a.insert(a.end(), {"--die-with-parent", "--new-session", "--hostname", "cordon"});
  if (l.json_status_fd >= 0)
    a.insert(a.end(), {"--json-status-fd", std::to_string(l.json_status_fd)});
  a.push_back("--clearenv");
  for (const auto& [k, v] : l.env) a.insert(a.end(), {"--setenv", k, v});
  auto bind = [&](const char* how, const HostPath& p) {
    if (p.kind == PathKind::kSymlink) {
      a.insert(a.end(), {"--symlink", p.symlink_target, p.path});
    } else if (p.kind != PathKind::kMissing) {
      a.insert(a.end(), {how, p.path, p.path});
    }
  };
  // The private /tmp first, so a read path below /tmp is bound on top of it, not hidden by it.
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/tmp/home"});
  for (const auto& p : l.read) bind("--ro-bind", p);
  a.insert(a.end(), {l.workspace_writable ? "--bind" : "--ro-bind", l.workspace, l.workspace});
  for (const auto& p : l.write) bind("--bind", p);
  // An ancestor of a protected or masked path that is a mount point cannot be renamed or
  // removed, so the path cannot be moved aside and recreated.
  auto writable = [&](const std::string& p) {
    auto under = [&](const std::string& root) {
      return p == root || (p.size() > root.size() && p.compare(0, root.size(), root) == 0 &&
                           (root == "/" || p[root.size()] == '/'));
    };
    if (l.workspace_writable && under(l.workspace)) return true;
    return std::any_of(l.write.begin(), l.write.end(),
                       [&](const HostPath& w) { return under(w.path); });
  };
  for (const auto& pin : l.pins) {
    if (writable(pin)) a.insert(a.end(), {"--bind", pin, pin});
  }
  if (l.workspace_writable) {
    for (const auto& p : l.protect) {
      if (p.kind == PathKind::kDir || p.kind == PathKind::kFile) {
        a.insert(a.end(), {"--ro-bind", p.path, p.path});
      } else if (p.want_dir) {
        a.insert(a.end(), {"--tmpfs", p.path, "--remount-ro", p.path});
      } else {
        a.insert(a.end(), {"--ro-bind", "/dev/null", p.path});
      }
    }
  }
  for (const auto& d : l.deny) {
    if (d.kind == PathKind::kDir) {
      a.insert(a.end(), {"--tmpfs", d.path, "--remount-ro", d.path});
    } else if (d.kind == PathKind::kFile || d.kind == PathKind::kOther) {
      a.insert(a.end(), {"--ro-bind", "/dev/null", d.path});
    }
  }
  a.insert(a.end(), {"--ro-bind", l.shim, kShimInSandbox});
  if (!l.cwd.empty()) a.insert(a.end(), {"--chdir", l.cwd});
  a.insert(a.end(), {"--", kShimInSandbox, "--spec-fd", std::to_string(l.spec_fd)});
  if (l.status_fd >= 0) a.insert(a.end(), {"--status-fd", std::to_string(l.status_fd)});
  return a;
}

std::vector<std::pair<std::string, std::string>> SandboxEnvironment(char** host_env,
                                                                    const std::string& workspace) {
  static const std::set<std::string> kPass = {"LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ"};
  std::vector<std::pair<std::string, std::string>> env = {
      {"PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"},
      {"HOME", "/tmp/home"},
      {"TMPDIR", "/tmp"},
      {"CORDON_SANDBOX", "1"},
      {"CORDON_WORKSPACE", workspace}};
  for (char** e = host_env; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string name(entry.substr(0, eq));
    if (kPass.count(name) && !Redactor::IsSecretName(name)) {
      env.emplace_back(name, std::string(entry.substr(eq + 1)));
    }
  }
  return env;
}

namespace {

constexpr const char* kRootDirs[] = {".cordon", ".thndrs", ".vscode", ".claude"};
constexpr const char* kRootFiles[] = {
    ".mcp.json", ".bashrc",   ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
    ".zshenv",   ".zprofile", ".zlogin",       ".zlogout",    ".envrc",       ".inputrc"};

}  // namespace

Result<ProtectedScan> ScanProtectedPaths(const std::string& ws, std::size_t max_entries,
                                         int max_depth) {
  ProtectedScan scan;
  std::set<std::string> pins;
  auto add = [&](const std::string& rel, PathKind kind, bool want_dir) -> Status {
    if (kind == PathKind::kSymlink || kind == PathKind::kOther) {
      return Fail(Code::kSandboxUnavailable,
                  "protected path " + rel +
                      " is a symbolic link or special file; cordon will not "
                      "run processes in this workspace until it is a plain file or directory");
    }
    scan.protect.push_back({ws + "/" + rel, kind, want_dir});
    for (std::size_t pos = rel.find('/'); pos != std::string::npos; pos = rel.find('/', pos + 1)) {
      pins.insert(ws + "/" + rel.substr(0, pos));
    }
    return {};
  };
  auto kind_of = [&](const std::string& rel) { return DescribeHostPath(ws + "/" + rel).kind; };
  auto add_git = [&](const std::string& prefix, bool at_root) -> Status {
    const std::string git = prefix + ".git";
    PathKind k = kind_of(git);
    if (k == PathKind::kDir) {
      TRY(add(git + "/config", kind_of(git + "/config"), false));
      TRY(add(git + "/hooks", kind_of(git + "/hooks"), true));
    } else if (k == PathKind::kFile || (k == PathKind::kMissing && at_root)) {
      // A gitdir file, or no repository at all: the agent may not plant one.
      TRY(add(git, k, true));
    } else if (k != PathKind::kMissing) {
      TRY(add(git, k, true));
    }
    return {};
  };
  for (const char* d : kRootDirs) TRY(add(d, kind_of(d), true));
  // A missing shell dotfile matters only where a shell reads it: in a workspace that is the
  // user's home. Elsewhere only existing ones are protected (no stub is mounted).
  bool is_home = false;
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    std::unique_ptr<char, decltype(&std::free)> real(::realpath(home, nullptr), &std::free);
    is_home = real != nullptr && ws == real.get();
  }
  for (const char* f : kRootFiles) {
    PathKind k = kind_of(f);
    if (k != PathKind::kMissing || is_home || std::string_view(f) == ".mcp.json")
      TRY(add(f, k, false));
  }
  TRY(add_git("", true));
  // Nested repositories and protected names below the root, within a bounded walk.
  std::function<Status(const std::string&, int)> walk = [&](const std::string& rel,
                                                            int depth) -> Status {
    if (depth > max_depth || scan.truncated) return {};
    std::string dir = rel.empty() ? ws : ws + "/" + rel;
    std::vector<std::pair<std::string, unsigned char>> entries;
    {
      UniqueDir d = UniqueDir::Open(dir.c_str());
      if (!d.valid()) return {};
      while (dirent* e = d.Next()) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        entries.emplace_back(n, e->d_type);
      }
    }
    for (const auto& [n, type] : entries) {
      if (++scan.scanned > max_entries) {
        scan.truncated = true;
        return {};
      }
      const std::string child = rel.empty() ? n : rel + "/" + n;
      if (!rel.empty()) {
        if (n == ".git") {
          TRY(add_git(rel + "/", false));
          continue;
        }
        if (IsProtectedPath(child)) {
          PathKind k = kind_of(child);
          TRY(add(child, k, k == PathKind::kDir));
          continue;
        }
      } else if (n == ".git" || IsProtectedPath(child)) {
        continue;  // handled above
      }
      if (type == DT_DIR && n != "node_modules" && n != "target" && n != ".venv") {
        TRY(walk(child, depth + 1));
      }
    }
    return {};
  };
  TRY(walk("", 1));
  scan.pins.assign(pins.begin(), pins.end());
  std::sort(scan.pins.begin(), scan.pins.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') < std::count(b.begin(), b.end(), '/') ||
           (std::count(a.begin(), a.end(), '/') == std::count(b.begin(), b.end(), '/') && a < b);
  });
  return scan;
}

}  // namespace cordon
