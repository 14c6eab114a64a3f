// Grants: checking what a person asks for, and finding what a server's own program needs.
#include "runner/grants.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "runner/mask.h"

namespace cordon {
namespace {

std::string Parent(const std::string& p) {
  const std::size_t slash = p.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return p.substr(0, slash);
}

std::string Base(const std::string& p) {
  const std::size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool IsDir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

bool IsSymlink(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// argv[0] as execvp would find it: a path with a slash is taken from `cwd`, a bare name from
// the caller's PATH.
std::string FindExecutable(const std::string& name, const std::string& cwd,
                           const std::string& path_env) {
  if (name.find('/') != std::string::npos) return name[0] == '/' ? name : cwd + "/" + name;
  std::size_t start = 0;
  while (start <= path_env.size()) {
    std::size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    const std::string dir = path_env.substr(start, end - start);
    start = end + 1;
    if (dir.empty() || dir[0] != '/') continue;  // a relative PATH entry names no fixed place
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0 && !IsDir(candidate)) return candidate;
  }
  return {};
}

enum class Interpreter { kNone, kNode, kPython };

Interpreter InterpreterOf(const std::string& name) {
  if (name == "node" || name == "nodejs" || name == "bun") return Interpreter::kNode;
  if (name.rfind("python", 0) == 0 || name.rfind("pypy", 0) == 0) return Interpreter::kPython;
  return Interpreter::kNone;
}

// The script an interpreter runs: its first operand, past the options (and the values of the
// options that take one). None for code given inline (-e, -c) or a module (-m).
std::optional<std::string> ScriptArgument(const std::vector<std::string>& argv, Interpreter in) {
  static const std::set<std::string> kNodeValued = {"-r",
                                                    "--require",
                                                    "--import",
                                                    "--loader",
                                                    "--experimental-loader",
                                                    "-C",
                                                    "--conditions",
                                                    "--env-file",
                                                    "--title",
                                                    "--input-type",
                                                    "--inspect-port",
                                                    "--openssl-config",
                                                    "--redirect-warnings"};
  static const std::set<std::string> kNodeInline = {"-e", "--eval", "-p", "--print", "-"};
  static const std::set<std::string> kPythonValued = {"-W", "-X", "-Q"};
  static const std::set<std::string> kPythonInline = {"-c", "-m", "-"};
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (in == Interpreter::kNode) {
      if (kNodeInline.count(a)) return std::nullopt;
      if (kNodeValued.count(a)) {
        ++i;
        continue;
      }
      if (a == "run" && i == 1 && Base(argv[0]) == "bun") continue;
    } else {
      if (kPythonInline.count(a)) return std::nullopt;
      if (kPythonValued.count(a)) {
        ++i;
        continue;
      }
    }
    if (a == "--") {
      if (i + 1 < argv.size()) return argv[i + 1];
      return std::nullopt;
    }
    if (!a.empty() && a[0] == '-') continue;
    return a;
  }
  return std::nullopt;
}

// The interpreter a "#!" line names ("#!/usr/bin/env -S node" names node), or nullopt.
std::optional<std::string> ShebangInterpreter(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  char buf[256] = {};
  in.read(buf, sizeof buf - 1);
  std::string line(buf, static_cast<std::size_t>(in.gcount()));
  if (line.rfind("#!", 0) != 0) return std::nullopt;
  line = line.substr(
      2, line.find('\n') == std::string::npos ? std::string::npos : line.find('\n') - 2);
  std::istringstream words(line);
  std::string word;
  if (!(words >> word)) return std::nullopt;
  if (Base(word) != "env") return word;
  while (words >> word) {
    if (word[0] != '-') return word;
  }
  return std::nullopt;
}

// `path` resolved as realpath(3) does it, component by component, noting whether it followed a
// symlink that lies at or below `workspace`: such a link is the repository's (or a confined
// process's) to point anywhere, so what it leads to outside the workspace is no program file the
// person chose (`node -r ./init.js ./data` with data -> ~/.config would grant ~/.config).
std::optional<std::string> ResolveNotingWorkspaceLinks(const std::string& path,
                                                       const std::string& workspace,
                                                       bool* via_workspace_link) {
  std::vector<std::string> todo;  // components still to walk, last first
  auto push = [&todo](const std::string& p) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (start <= p.size()) {
      std::size_t end = p.find('/', start);
      if (end == std::string::npos) end = p.size();
      if (end > start) parts.push_back(p.substr(start, end - start));
      start = end + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push(path);
  std::string cur = "/";
  for (int links = 0; !todo.empty();) {
    const std::string part = todo.back();
    todo.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      cur = Parent(cur);
      continue;
    }
    const std::string next = (cur == "/" ? "" : cur) + "/" + part;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) return std::nullopt;
    if (!S_ISLNK(st.st_mode)) {
      cur = next;
      continue;
    }
    if (++links > 40) return std::nullopt;  // ELOOP, as realpath(3)
    if (!workspace.empty() && (cur == workspace || PathUnder(cur, workspace)))
      *via_workspace_link = true;
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(next.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return std::nullopt;
    const std::string target(buf, static_cast<std::size_t>(n));
    if (target[0] == '/') cur = "/";
    push(target);
  }
  return cur;
}

// Whether `path`, resolved, may carry a grant: not when a symlink in the workspace led it out.
std::optional<std::string> RealPathOutsideOnlyByChoice(const std::string& path,
                                                       const std::string& workspace) {
  bool via_link = false;
  std::optional<std::string> real = ResolveNotingWorkspaceLinks(path, workspace, &via_link);
  if (!real) return std::nullopt;
  if (via_link && *real != workspace && !PathUnder(*real, workspace)) return std::nullopt;
  return real;
}

void Add(std::vector<PathGrant>& out, std::string path, std::string from, const std::string& home) {
  if (path.empty() || GrantRefusal(path, home)) return;
  for (const auto& g : out) {
    if (g.path == path) return;
  }
  out.push_back({std::move(path), false, std::move(from)});
}

}  // namespace

std::optional<std::string> GrantRefusal(const std::string& path, const std::string& home) {
  if (path == "/") return "it is the root directory /, which would show the whole host";
  if (!home.empty() && home != "/" && path == home) {
    return "it is your home directory (shell startup files, ~/.ssh, the configuration of every "
           "tool)";
  }
  if (!home.empty() && home != "/" && PathUnder(home, path)) {
    return "it holds your home directory " + home;
  }
  return std::nullopt;
}

Result<PathGrant> ResolveGrant(const std::string& requested, bool write, const std::string& from,
                               const std::string& home) {
  if (requested.empty()) return Fail(Code::kInvalidInput, from + " needs a path");
  char buf[PATH_MAX];
  if (::realpath(requested.c_str(), buf) == nullptr) {
    const int err = errno;
    return Fail(err == ENOENT || err == ENOTDIR ? Code::kNotFound : Code::kInvalidInput,
                from + " " + requested + ": " + std::strerror(err) +
                    "; a grant must name an existing file or directory",
                err, requested);
  }
  const std::string path = buf;
  if (auto why = GrantRefusal(path, home)) {
    return Fail(Code::kDeniedByPolicy,
                from + " " + requested + " is refused: " + *why +
                    ". Grant the directory the command needs instead (for example " +
                    (path == "/" ? std::string("/srv/data") : home + "/src/lib") +
                    "), or make that directory the workspace",
                0, path);
  }
  return PathGrant{path, write, from};
}

std::vector<PathGrant> ProgramFileGrants(const std::vector<std::string>& argv,
                                         const std::string& cwd, const std::string& path_env,
                                         const std::string& home, const std::string& workspace) {
  std::vector<PathGrant> out;
  if (argv.empty() || argv[0].empty()) return out;
  const std::string exe = FindExecutable(argv[0], cwd, path_env);
  if (exe.empty()) return out;
  const std::optional<std::string> exe_real = RealPathOutsideOnlyByChoice(exe, workspace);
  if (!exe_real) return out;
  // The path the command is started by (a symlink is shown as the link), then what it leads to.
  if (IsSymlink(exe)) Add(out, exe, "executable", home);
  Add(out, *exe_real, "executable", home);
  // A Python virtual environment's interpreter or console script needs the environment.
  for (const std::string& bin : {exe, *exe_real}) {
    const std::string env = Parent(Parent(bin));
    if (Exists(env + "/pyvenv.cfg")) Add(out, env, "virtual environment", home);
  }
  Interpreter in = InterpreterOf(Base(argv[0]));
  if (in == Interpreter::kNone) in = InterpreterOf(Base(*exe_real));
  std::optional<std::string> script;
  if (in != Interpreter::kNone) {
    script = ScriptArgument(argv, in);
  } else if (auto shebang = ShebangInterpreter(*exe_real)) {
    // A script run by its #! line is the interpreter's script: its package goes with it.
    in = InterpreterOf(Base(*shebang));
    if (in != Interpreter::kNone) script = *exe_real;
  }
  if (in == Interpreter::kNone) return out;
  if (!script || script->empty()) return out;
  const std::string lexical = (*script)[0] == '/' ? *script : cwd + "/" + *script;
  // Not through a symlink in the workspace to somewhere outside it: then nothing is granted,
  // and the server's failure hint names --read.
  const std::optional<std::string> real = RealPathOutsideOnlyByChoice(lexical, workspace);
  if (!real) return out;  // the server will say it is missing; the hint names --read
  std::string package;
  for (std::string d = Parent(*real);; d = Parent(d)) {
    if (GrantRefusal(d, home)) break;  // never `/`, $HOME or above it
    if (Exists(d + "/package.json") || Exists(d + "/pyproject.toml") || Exists(d + "/Cargo.toml")) {
      package = d;
      break;
    }
    if (d == "/") break;
  }
  if (IsSymlink(lexical)) Add(out, lexical, "script", home);
  if (package.empty()) {
    Add(out, *real, "script", home);
  } else {
    Add(out, package, "script's package", home);
  }
  if (in == Interpreter::kNode) {
    // Node looks for packages in node_modules of the script's directory and of each ancestor
    // (never inside a node_modules name itself).
    for (std::string d = package.empty() ? Parent(*real) : package;; d = Parent(d)) {
      if (Base(d) != "node_modules" && IsDir(d + "/node_modules")) {
        Add(out, (d == "/" ? "" : d) + "/node_modules", "node_modules", home);
      }
      if (d == "/") break;
    }
  }
  // A grant inside another grant adds nothing: kept out so that --plan lists what matters.
  std::vector<PathGrant> kept;
  for (const auto& g : out) {
    const bool inside = std::any_of(out.begin(), out.end(), [&](const PathGrant& o) {
      return &o != &g && o.path != g.path && IsDir(o.path) && !IsSymlink(o.path) &&
             PathUnder(g.path, o.path);
    });
    if (!inside) kept.push_back(g);
  }
  return kept;
}

std::optional<std::string> FetchesPackageAtStart(const std::vector<std::string>& argv,
                                                 const std::string& workspace) {
  if (argv.empty()) return std::nullopt;
  const std::string tool = Base(argv[0]);
  std::size_t first = 1;  // the first argument after the tool's own subcommand
  enum class Registry { kNpm, kPython } registry = Registry::kNpm;
  bool local_first = false;  // checks node_modules/.bin before it downloads
  std::string what;
  auto arg = [&](std::size_t i) { return i < argv.size() ? argv[i] : std::string(); };
  if (tool == "npx" || tool == "bunx") {
    what = tool;
    local_first = true;
  } else if ((tool == "npm" && (arg(1) == "exec" || arg(1) == "x")) ||
             (tool == "bun" && arg(1) == "x")) {
    what = tool + " " + arg(1);
    first = 2;
    local_first = true;
  } else if ((tool == "pnpm" || tool == "yarn") && arg(1) == "dlx") {
    what = tool + " dlx";
    first = 2;
  } else if (tool == "uvx") {
    what = "uvx";
    registry = Registry::kPython;
  } else if (tool == "uv" && arg(1) == "tool" && arg(2) == "run") {
    what = "uv tool run";
    first = 3;
    registry = Registry::kPython;
  } else if (tool == "pipx" && arg(1) == "run") {
    what = "pipx run";
    first = 2;
    registry = Registry::kPython;
  } else {
    return std::nullopt;
  }
  // The package: --package/-p names it; else the first operand.
  std::string package;
  for (std::size_t i = first; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-p" || a == "--package" || a == "--from" || a == "--spec") {
      package = arg(i + 1);
      break;
    }
    if (a.rfind("--package=", 0) == 0 || a.rfind("--from=", 0) == 0) {
      package = a.substr(a.find('=') + 1);
      break;
    }
    if (a == "--") {
      package = arg(i + 1);
      break;
    }
    if (!a.empty() && a[0] != '-') {
      package = a;
      break;
    }
  }
  if (package.empty()) package = "the package";
  if (package[0] == '.' || package[0] == '/') return std::nullopt;  // a local path: no download
  if (local_first) {
    // npx runs an installed bin without the network: the workspace's node_modules/.bin.
    std::string name = package;
    if (name[0] == '@') {
      const std::size_t slash = name.find('/');
      if (slash != std::string::npos) name = name.substr(slash + 1);
    }
    name = name.substr(0, name.find('@'));
    if (!name.empty() && Exists(workspace + "/node_modules/.bin/" + name)) return std::nullopt;
  }
  if (registry == Registry::kNpm) {
    return what + " downloads " + package +
           " from the npm registry as it starts, and keeps it in the npm cache (~/.npm): the "
           "sandbox has neither network access nor your npm cache, so the server would hang "
           "and fail. Install it once outside cordon (npm install --prefix ~/mcp-servers " +
           package +
           ") and run it with node from there (cordon reads a server's own package without "
           "a flag; see docs/clients.md), or give the server the host network";
  }
  return what + " downloads " + package +
         " from the Python package index as it starts, and keeps it in its cache (~/.cache): "
         "the sandbox has neither network access nor that cache, so the server would hang and "
         "fail. Install it once outside cordon (uv tool install " +
         package + ", or pipx install " + package +
         ") and run its installed command, or give the server the host network";
}

std::string LauncherPreset(const std::vector<std::string>& argv) {
  if (argv.empty()) return {};
  const std::string tool = Base(argv[0]);
  for (const char* t : {"npx", "npm", "pnpm", "yarn", "bun", "bunx"}) {
    if (tool == t) return "npm";
  }
  for (const char* t : {"uvx", "uv", "pipx", "pip", "pip3"}) {
    if (tool == t) return "pypi";
  }
  if (tool == "cargo") return "crates";
  return {};
}

}  // namespace cordon
