// Version managers' shims resolved by the managers themselves, outside the sandbox.
#include "runner/interpreter.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/unique_fd.h"

namespace cordon {
namespace {

std::string ParentDir(const std::string& p) {
  const auto slash = p.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}
std::string BaseName(const std::string& p) {
  const auto slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}
bool IsDirectory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool IsExecutableFile(const std::string& p) {
  struct stat st {};
  return ::access(p.c_str(), X_OK) == 0 && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string EnvValue(char** env, const std::string& name) {
  const std::string prefix = name + "=";
  for (char** e = env; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, prefix.c_str(), prefix.size()) == 0) return *e + prefix.size();
  }
  return {};
}

// argv[0] as execvp finds it: with a slash, from `cwd`; else the first executable on the PATH.
std::string OnPath(const std::string& name, const std::string& cwd, const std::string& path_env) {
  if (name.find('/') != std::string::npos) return name[0] == '/' ? name : cwd + "/" + name;
  std::size_t start = 0;
  while (start <= path_env.size()) {
    std::size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    const std::string dir = path_env.substr(start, end - start);
    start = end + 1;
    if (dir.empty() || dir[0] != '/') continue;
    if (IsExecutableFile(dir + "/" + name)) return dir + "/" + name;
  }
  return {};
}

struct Output {
  int status = -1;  // the exit code, or -1 (a signal, or no answer in time)
  std::string out, err;
};

// Runs argv on the host in `cwd` with `env`, stdin /dev/null, for at most `timeout`.
Result<Output> RunOnHost(const std::vector<std::string>& argv, const std::string& cwd, char** env,
                         std::chrono::milliseconds timeout) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return SysFail(Code::kInternal, "pipe2", argv[0]);
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return SysFail(Code::kInternal, "pipe2", argv[0]);
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);
  UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return SysFail(Code::kInternal, "fork", argv[0]);
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    if (::chdir(cwd.c_str()) != 0 || ::dup2(null_fd.get(), 0) < 0 || ::dup2(out_w.get(), 1) < 0 ||
        ::dup2(err_w.get(), 2) < 0)
      ::_exit(126);
    ::execve(cargv[0], cargv.data(), env);
    ::_exit(127);
  }
  out_w = UniqueFd();
  err_w = UniqueFd();
  Output o;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true, err_open = true, timed_out = false;
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_r.get() : -1, POLLIN, 0},
                     {err_open ? err_r.get() : -1, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::string& to = i == 0 ? o.out : o.err;
      if (to.size() < 65536) to.append(buf, static_cast<std::size_t>(got));
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!timed_out && WIFEXITED(status)) o.status = WEXITSTATUS(status);
  return o;
}

std::string FirstLine(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

}  // namespace

std::vector<VersionManager> VersionManagers(const ManagerDirs& d) {
  auto or_default = [&](const std::string& v, const std::string& rel) {
    return !v.empty() ? v : d.home + "/" + rel;
  };
  const std::string pyenv = or_default(d.pyenv_root, ".pyenv");
  const std::string asdf = or_default(d.asdf_data_dir, ".asdf");
  const std::string mise = or_default(d.mise_data_dir, ".local/share/mise");
  const std::string volta = or_default(d.volta_home, ".volta");
  return {
      {"pyenv", pyenv + "/shims", {}, {pyenv + "/bin/pyenv"}},
      {"asdf", asdf + "/shims", {}, {asdf + "/bin/asdf"}},
      {"mise", mise + "/shims", {}, {d.home + "/.local/bin/mise"}},
      {"rtx", d.home + "/.local/share/rtx/shims", {}, {d.home + "/.local/bin/rtx"}},
      {"volta", volta + "/bin", {"volta", "volta-shim", "volta-migrate"}, {volta + "/bin/volta"}},
  };
}

std::optional<VersionManager> ShimManager(const std::string& exe,
                                          const std::vector<VersionManager>& managers) {
  const std::string dir = ParentDir(exe), name = BaseName(exe);
  for (const auto& m : managers) {
    if (dir != m.shims_dir) continue;
    if (std::find(m.not_shims.begin(), m.not_shims.end(), name) != m.not_shims.end()) continue;
    return m;
  }
  return std::nullopt;
}

std::optional<std::string> InterpreterPrefix(const std::string& real) {
  const std::string name = BaseName(real), bin = ParentDir(real);
  const bool interpreter = name.starts_with("python") || name.starts_with("pypy") ||
                           name == "node" || name == "nodejs" || name == "bun";
  if (!interpreter || BaseName(bin) != "bin") return std::nullopt;
  const std::string prefix = ParentDir(bin);
  if (prefix == "/" || prefix == "/usr" || prefix == "/usr/local") return std::nullopt;
  if (!IsDirectory(prefix + "/lib")) return std::nullopt;
  return prefix;
}

Result<std::optional<ResolvedProgram>> ResolveShim(const std::string& argv0, const std::string& cwd,
                                                   const std::string& path_env, char** env) {
  const std::string exe = OnPath(argv0, cwd, path_env);
  if (exe.empty()) return std::nullopt;
  const ManagerDirs dirs{EnvValue(env, "HOME"), EnvValue(env, "PYENV_ROOT"),
                         EnvValue(env, "ASDF_DATA_DIR"), EnvValue(env, "MISE_DATA_DIR"),
                         EnvValue(env, "VOLTA_HOME")};
  if (dirs.home.empty()) return std::nullopt;
  const auto manager = ShimManager(exe, VersionManagers(dirs));
  if (!manager) return std::nullopt;
  const std::string name = BaseName(exe);
  const std::string what = argv0 + " is a " + manager->name + " shim (" + exe + ")";
  std::string command = OnPath(manager->name, cwd, path_env);
  for (const auto& c : manager->commands) {
    if (command.empty() && IsExecutableFile(c)) command = c;
  }
  if (command.empty())
    return Fail(Code::kNotFound,
                what + ", and " + manager->name +
                    " itself is neither on PATH nor in its usual place, so "
                    "cordon cannot ask it which interpreter that is; give the "
                    "interpreter's own path instead of " +
                    argv0,
                0, exe);
  const std::string asked = manager->name + " which " + name;
  auto run = RunOnHost({command, "which", name}, cwd, env, std::chrono::seconds(10));
  if (!run) return std::unexpected(run.error());
  std::string resolved = FirstLine(run->out);
  std::error_code ec;
  if (run->status == 0 && !resolved.empty() && resolved[0] == '/')
    resolved = std::filesystem::canonical(resolved, ec).string();
  if (run->status != 0 || resolved.empty() || resolved[0] != '/' || ec ||
      !IsExecutableFile(resolved)) {
    std::string said = FirstLine(run->err);
    if (said.empty()) said = run->status < 0 ? "no answer in 10 s" : FirstLine(run->out);
    return Fail(Code::kNotFound,
                what + ", and `" + asked + "` in " + cwd +
                    " did not name the program the shim runs (" +
                    (said.empty() ? "exit " + std::to_string(run->status) : said) +
                    "): install or select the version it expects (" + manager->name +
                    " install, or a .python-version / .tool-versions file), or give the "
                    "interpreter's own path (`" +
                    asked + "` prints it) instead of " + argv0,
                0, exe);
  }
  ResolvedProgram r;
  r.program = resolved;
  r.prefix = InterpreterPrefix(resolved).value_or("");
  r.how = asked + " -> " + resolved;
  return r;
}

}  // namespace cordon
