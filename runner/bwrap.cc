// bwrap argv construction. Agent arguments never appear
// here: the command is handed to the shim through its spec, after bwrap's own "--".
#include "runner/bwrap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <set>

#include "core/redact.h"
#include "runner/environment.h"

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
  if (l.env_args_fd >= 0) {
    a.insert(a.end(), {"--args", std::to_string(l.env_args_fd)});
  } else {
    for (const auto& [k, v] : l.env) a.insert(a.end(), {"--setenv", k, v});
  }
  auto bind = [&](const char* how, const HostPath& p) {
    if (p.kind == PathKind::kSymlink) {
      a.insert(a.end(), {"--symlink", p.symlink_target, p.path});
    } else if (p.kind != PathKind::kMissing) {
      a.insert(a.end(), {how, p.path, p.path});
    }
  };
  // The private /tmp first, so a read path below /tmp is bound on top of it, not hidden by it.
  // Its pages are RAM: sized to the memory limit, it cannot pin more than that.
  if (l.host_proc) {
    a.insert(a.end(), {"--ro-bind", "/proc", "/proc", "--dev", "/dev"});
  } else {
    a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev"});
  }
  if (l.tmp_size_bytes > 0) a.insert(a.end(), {"--size", std::to_string(l.tmp_size_bytes)});
  a.insert(a.end(), {"--tmpfs", "/tmp", "--dir", "/tmp/home"});
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
      }
    }
    AppendGitViewArgs(l.git_views, a);
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

std::string BwrapEnvArgs(const SandboxLayout& l) {
  std::string out;
  for (const auto& [k, v] : l.env) {
    out += std::string_view("--setenv\0", 9);
    out += k;
    out += '\0';
    out += v;
    out += '\0';
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> SandboxEnvironment(char** host_env,
                                                                    const std::string& workspace) {
  return BuildSandboxEnvironment(host_env, workspace, EnvPolicy{}, false);
}

}  // namespace cordon
