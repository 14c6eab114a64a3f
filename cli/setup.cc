// cordon setup CLIENT: writes cordon into an MCP client's configuration file (or wraps one of its
// servers), keeping a backup and replacing the file atomically; the edit itself is
// mcp/client_setup's.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "cli/common.h"
#include "core/fs.h"
#include "core/text.h"
#include "mcp/client_setup.h"
#include "policy/policy.h"
#include "runner/grants.h"
#include "runner/host_probe.h"

namespace cordon::cli {
namespace {

constexpr std::uint64_t kMaxConfigBytes = 16u << 20;

struct ConfigFile {
  std::string path;  // after following a symlink: the file that is replaced
  bool exists = false;
  std::string text;
  struct stat st {};
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// The path a client should start: "cordon" when that is this binary on PATH (the form
// docs/clients.md shows), else this binary's absolute path (a client started from a desktop
// menu may not search the PATH a shell has).
std::string CordonCommand() {
  std::error_code ec;
  const auto self = std::filesystem::canonical("/proc/self/exe", ec);
  if (ec) return "cordon";
  const std::string on_path = FindOnPath("cordon");
  if (!on_path.empty() && std::filesystem::equivalent(on_path, self, ec)) return "cordon";
  return self.string();
}

Result<ConfigFile> ReadConfig(const std::string& given) {
  ConfigFile f;
  std::error_code ec;
  // A config file that is a symlink (a dotfiles repository) is edited where it points.
  f.path = std::filesystem::weakly_canonical(std::filesystem::absolute(given), ec).string();
  if (ec) f.path = given;
  UniqueFd fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) return f;
    return SysFail(Code::kInvalidInput, "open", f.path);
  }
  if (::fstat(fd.get(), &f.st) != 0) return SysFail(Code::kInternal, "fstat", f.path);
  if (!S_ISREG(f.st.st_mode))
    return Fail(Code::kUnsupportedFileType, f.path + " is not a regular file; nothing written");
  if (static_cast<std::uint64_t>(f.st.st_size) > kMaxConfigBytes)
    return Fail(Code::kTooLarge, f.path + " is larger than 16 MiB; nothing written");
  f.exists = true;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SysFail(Code::kInternal, "read", f.path);
    if (n == 0) break;
    f.text.append(buf, static_cast<std::size_t>(n));
  }
  return f;
}

// A new file in `dir` named PREFIX + a unique suffix, created exclusively with `mode`.
Result<std::pair<UniqueFd, std::string>> CreateUnique(int dirfd, const std::string& prefix,
                                                      mode_t mode) {
  for (int i = 0; i < 100; ++i) {
    std::string name = prefix + (i == 0 ? "" : "-" + std::to_string(i));
    UniqueFd fd(
        ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
    if (fd.get() >= 0) return std::make_pair(std::move(fd), std::move(name));
    if (errno != EEXIST) return SysFail(WriteErrorCode(errno), "openat", prefix);
  }
  return Fail(Code::kAlreadyExists, "no free name for " + prefix);
}

Status WriteSynced(const UniqueFd& fd, const std::string& data, const std::string& where,
                   mode_t mode) {
  TRY(WriteAll(fd.get(), data, where));
  // The mode asked for, whatever the umask took away.
  if (::fchmod(fd.get(), mode) != 0) return SysFail(Code::kInternal, "fchmod", where);
  if (::fsync(fd.get()) != 0) return SysFail(WriteErrorCode(errno), "fsync", where);
  return {};
}

struct Written {
  std::string backup;  // empty for a new file
};

// Keeps the old file as PATH.cordon-backup-TIME (same mode), then installs `text` by a temp file
// in the same directory and rename(2): a reader sees the old file or the new one, never a part.
// The file's mode (and owner, when cordon may set it) stays; a file changed since it was read is
// a conflict and is left alone.
Result<Written> ReplaceConfig(const ConfigFile& f, const std::string& text, bool user_file) {
  const std::filesystem::path path(f.path);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    return Fail(Code::kInternal,
                "cannot create " + path.parent_path().string() + ": " + ec.message());
  UniqueFd dir(::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return SysFail(Code::kInternal, "open", path.parent_path().string());
  const std::string leaf = path.filename().string();
  // A new user file may come to hold a server's secrets (its env): only its owner reads it.
  const mode_t mode = f.exists ? (f.st.st_mode & 07777) : (user_file ? 0600 : 0644);
  Written w;
  if (f.exists) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    struct tm tm {};
    ::gmtime_r(&now, &tm);
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    ASSIGN_OR_RETURN(auto backup, CreateUnique(dir.get(), leaf + ".cordon-backup-" + stamp, mode));
    TRY(WriteSynced(backup.first, f.text, backup.second, mode));
    w.backup = (path.parent_path() / backup.second).string();
  }
  ASSIGN_OR_RETURN(
      auto tmp,
      CreateUnique(dir.get(), "." + leaf + ".cordon-" + std::to_string(::getpid()), mode));
  auto discard = [&] { ::unlinkat(dir.get(), tmp.second.c_str(), 0); };
  if (auto st = WriteSynced(tmp.first, text, f.path, mode); !st) {
    discard();
    return std::unexpected(st.error());
  }
  if (f.exists && ::geteuid() == 0 && (f.st.st_uid != 0 || f.st.st_gid != 0))
    (void)::fchown(tmp.first.get(), f.st.st_uid, f.st.st_gid);
  struct stat now {};
  const bool same = f.exists ? ::fstatat(dir.get(), leaf.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
                                   IdentityOf(now) == IdentityOf(f.st)
                             : ::fstatat(dir.get(), leaf.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0;
  if (!same) {
    discard();
    return Fail(Code::kConflict, f.path +
                                     " changed while cordon setup edited it (is the client "
                                     "running and writing it?); nothing written, run again");
  }
  if (::renameat(dir.get(), tmp.second.c_str(), dir.get(), leaf.c_str()) != 0) {
    const int err = errno;
    discard();
    return SysFail(Code::kInternal, "renameat", f.path, err);
  }
  (void)::fsync(dir.get());
  return w;
}

struct SetupFlags {
  std::string client;
  std::string project;
  bool user = false;
  std::string file;
  std::string workspace;
  std::string name;
  std::string wrap;
  bool remove = false;
  bool dry_run = false;
  bool force = false;
  // serve's flags, for cordon's own entry (with --wrap: wrap's, --timeout aside).
  ProcessFlags process;
  std::string timeout;
  std::vector<std::string> policy;
  bool any_serve_flag() const {
    return !process.network.empty() || !process.grants.read.empty() ||
           !process.grants.write.empty() || !process.egress.empty() || !process.env.empty() ||
           !timeout.empty() || !policy.empty();
  }
};

// serve's flags for cordon's entry, or wrap's for a wrapped server: checked as serve and wrap check
// them (a contradiction, a grant they would refuse, a bad name), and written as they read them, in
// one order, paths absolute (the client starts cordon in a directory of its own choosing).
Result<std::vector<std::string>> ServeFlags(const SetupFlags& f, std::vector<std::string>& notes) {
  const ProcessFlags& p = f.process;
  std::vector<std::string> out;
  if (!p.network.empty()) out.insert(out.end(), {"--network", p.network});
  if (auto egress = EgressFromFlags(p.egress, p.network); !egress)
    return std::unexpected(egress.error());
  ProcessRequest grants;
  if (auto st = AddGrants(p.grants, grants); !st)
    return Fail(st.error().code, st.error().ToString());
  for (const PathGrant& g : grants.grants)
    out.insert(out.end(), {g.write ? "--write" : "--read", g.path});
  for (const auto& [flag, values] :
       {std::pair{"--allow-domain", &p.egress.allow}, std::pair{"--deny-domain", &p.egress.deny},
        std::pair{"--allow-preset", &p.egress.presets},
        std::pair{"--resolve", &p.egress.resolve}}) {
    for (const auto& v : *values) out.insert(out.end(), {flag, v});
  }
  for (const auto& e : p.env) {
    const std::size_t eq = e.find('=');
    const std::string name = e.substr(0, eq);
    // The name only in the message: the value may be a secret.
    if (!IsEnvName(name))
      return Fail(Code::kInvalidInput, "--env " + name + (eq == std::string::npos ? "" : "=...") +
                                           ": \"" + name +
                                           "\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
    if (eq != std::string::npos)
      notes.push_back("--env " + name + "=... is written into the file with its value; --env " +
                      name + " alone passes the client's own value instead");
    out.insert(out.end(), {"--env", e});
  }
  if (!f.timeout.empty()) {
    char* end = nullptr;
    const long t = std::strtol(f.timeout.c_str(), &end, 10);
    if (end == nullptr || *end != '\0' || t <= 0)
      return Fail(Code::kInvalidInput, "--timeout takes a positive number of seconds");
    out.insert(out.end(), {"--timeout", std::to_string(t)});
  }
  for (const auto& file : f.policy) {
    std::error_code ec;
    const std::string path = std::filesystem::canonical(file, ec).string();
    if (ec || !std::filesystem::is_regular_file(path))
      return Fail(Code::kInvalidInput, "--policy " + file + ": not a file");
    out.insert(out.end(), {"--policy", path});
  }
  return out;
}

int Refuse(const Error& e) {
  std::fprintf(stderr, "cordon setup: %s: %s\n", std::string(CodeName(e.code)).c_str(),
               e.message.c_str());
  return kExitToolError;
}

int CmdSetup(const CLI::App& cmd, const SetupFlags& f) {
  const mcp::Client client = *mcp::ParseClient(f.client);
  const std::string client_name(mcp::ClientName(client));
  const bool has_project = client != mcp::Client::kClaudeDesktop && client != mcp::Client::kCodex;
  if (f.user && !f.project.empty())
    return UsageError(cmd, "--user and --project exclude each other");
  const bool user = f.user || (f.project.empty() && !has_project);
  mcp::SetupRequest req;
  req.action = f.wrap.empty() ? (f.remove ? mcp::SetupAction::kRemove : mcp::SetupAction::kAdd)
                              : (f.remove ? mcp::SetupAction::kUnwrap : mcp::SetupAction::kWrap);
  if (!f.wrap.empty() && !f.name.empty())
    return UsageError(cmd, "--wrap names the server; --name is for cordon's own entry");
  req.name = !f.wrap.empty() ? f.wrap : !f.name.empty() ? f.name : "cordon";
  req.force = f.force;
  req.cordon_command = CordonCommand();
  std::vector<std::string> flag_notes;
  if (f.any_serve_flag()) {
    if (f.remove)
      return UsageError(cmd,
                        "--network, --read, --write, --allow-domain, --deny-domain, "
                        "--allow-preset, --resolve, --env, --timeout and --policy are written "
                        "into an entry; they do not go with --remove");
    if (!f.wrap.empty() && !f.timeout.empty())
      return UsageError(cmd,
                        "--timeout is serve's: cordon wrap has no time limit (a wrapped server "
                        "runs as long as its client keeps it)");
    auto flags = ServeFlags(f, flag_notes);
    if (!flags) return UsageError(cmd, flags.error().message);
    req.flags = std::move(*flags);
  }

  std::error_code ec;
  std::string project;
  if (!user) {
    project = std::filesystem::canonical(f.project.empty() ? "." : f.project, ec).string();
    if (ec || !std::filesystem::is_directory(project))
      return UsageError(cmd, "--project " + f.project + ": not a directory");
  }
  // The workspace written after --workspace: as given when it is "." or a client's variable
  // (${workspaceFolder}), else made absolute; by default the project (VS Code: its variable).
  const bool needs_workspace =
      req.action == mcp::SetupAction::kAdd || req.action == mcp::SetupAction::kWrap;
  if (!f.workspace.empty()) {
    if (f.workspace == "." || f.workspace.starts_with("${")) {
      req.workspace = f.workspace;
    } else {
      req.workspace = std::filesystem::canonical(f.workspace, ec).string();
      if (ec || !std::filesystem::is_directory(req.workspace))
        return UsageError(cmd, "--workspace " + f.workspace + ": not a directory");
    }
  } else if (!user) {
    req.workspace = client == mcp::Client::kVsCode ? "${workspaceFolder}" : project;
  } else if (needs_workspace) {
    return UsageError(cmd, "--workspace DIR is needed for " + client_name +
                               "'s user configuration: the directory cordon works in (`.`: the "
                               "directory the client starts cordon in)");
  }

  std::string path = f.file;
  if (path.empty()) {
    mcp::ConfigDirs dirs{Env("HOME"), Env("XDG_CONFIG_HOME"), Env("CODEX_HOME")};
    auto p = mcp::ClientConfigPath(
        client, user ? mcp::ConfigScope::kUser : mcp::ConfigScope::kProject, project, dirs);
    if (!p) return UsageError(cmd, p.error().message);
    path = *p;
  }
  auto file = ReadConfig(path);
  if (!file) return Refuse(file.error());
  if (!file->exists && (req.action == mcp::SetupAction::kWrap))
    return Refuse(Error{Code::kNotFound,
                        file->path + " does not exist: there is no server " + req.name + " to wrap",
                        0, file->path});
  auto edit = mcp::EditClientConfig(client, file->text, file->path, req);
  if (!edit) return Refuse(edit.error());
  if (!edit->changed) {
    std::fprintf(stderr, "cordon setup: %s\n", TerminalSafe(edit->summary, true).c_str());
    return kExitOk;
  }
  edit->notes.insert(edit->notes.end(), flag_notes.begin(), flag_notes.end());
  // What is printed comes in part from the client's configuration file (a project's .mcp.json
  // is the repository's): written out visibly, one line each.
  for (const auto& n : edit->notes)
    std::fprintf(stderr, "cordon setup: note: %s\n", TerminalSafe(n, true).c_str());
  if (f.dry_run) {
    std::cout << TerminalSafe(
        mcp::UnifiedDiff(file->exists ? file->text : "", edit->text, file->path));
    std::fprintf(stderr, "cordon setup: would have %s (--dry-run: nothing written)\n",
                 TerminalSafe(edit->summary, true).c_str());
    return kExitOk;
  }
  auto written = ReplaceConfig(*file, edit->text, user);
  if (!written) return Refuse(written.error());
  std::fprintf(stderr, "cordon setup: %s\n", TerminalSafe(edit->summary, true).c_str());
  if (!written->backup.empty())
    std::fprintf(stderr, "cordon setup: the previous file is kept as %s\n",
                 TerminalSafe(written->backup, true).c_str());
  std::fprintf(stderr, "cordon setup: restart %s (or reload its MCP servers) to use it\n",
               client_name.c_str());
  return kExitOk;
}

}  // namespace

void AddSetupCommand(CLI::App& root, Context& ctx) {
  auto f = std::make_shared<SetupFlags>();
  CLI::App* cmd = root.add_subcommand("setup",
                                      "add cordon to an MCP client's configuration, or wrap one "
                                      "of its servers with cordon wrap")
                      ->group("Commands");
  WithChoices(ctx, cmd->add_option("CLIENT", f->client, "the client")->required(),
              mcp::ClientNames(), [](const std::string& v) -> Status {
                if (mcp::ParseClient(v)) return {};
                std::string names;
                for (const auto& n : mcp::ClientNames()) names += (names.empty() ? "" : ", ") + n;
                return Fail(Code::kInvalidInput, "\"" + v + "\" is not a client (" + names + ")");
              });
  cmd->add_option("--project", f->project,
                  "edit the project's file in DIR (the default: the current directory; "
                  "claude-desktop and codex have none)")
      ->type_name("DIR");
  cmd->add_flag("--user", f->user, "edit the user's file instead of a project's");
  cmd->add_option("--file", f->file, "edit this file (in the client's format) instead")
      ->type_name("PATH");
  cmd->add_option("--workspace", f->workspace,
                  "the workspace cordon serves or wraps in (default: the project; needed with "
                  "--user; `.` is written as is)")
      ->type_name("DIR");
  cmd->add_option("--name", f->name, "the name of cordon's entry (default: cordon)")
      ->type_name("NAME");
  cmd->add_option("--wrap", f->wrap,
                  "instead: make the client's server NAME run through `cordon wrap`, with the "
                  "flags below but --timeout (again with other flags: they replace the wrap's)")
      ->type_name("NAME");
  cmd->add_flag("--remove", f->remove,
                "remove cordon's entry (with --wrap NAME: make NAME run its own command again)");
  cmd->add_flag("--dry-run", f->dry_run, "print the change as a diff and write nothing");
  cmd->add_flag("--force", f->force,
                "replace an entry of that name that is not cordon serve, or remove one that is "
                "not cordon");
  AddProcessFlags(ctx, cmd, &f->process,
                  "written into cordon's entry (or with --wrap, the wrapped server's): the network "
                  "access (serve and wrap --network)");
  cmd->add_option("--timeout", f->timeout,
                  "written into cordon's entry: every tool's time limit (serve --timeout)")
      ->type_name("SECONDS");
  cmd->add_option("--policy", f->policy,
                  "written into cordon's entry (or the wrap): an extra policy layer (--policy; "
                  "repeatable)")
      ->type_name("FILE");
  cmd->footer(
      "clients and their files (user / project):\n"
      "  claude-code     ~/.claude.json / DIR/.mcp.json\n"
      "  claude-desktop  ~/.config/Claude/claude_desktop_config.json\n"
      "  vscode          ~/.config/Code/User/mcp.json / DIR/.vscode/mcp.json\n"
      "  cursor          ~/.cursor/mcp.json / DIR/.cursor/mcp.json\n"
      "  codex           ~/.codex/config.toml ($CODEX_HOME)\n"
      "The previous file is kept beside it (FILE.cordon-backup-TIME); a file that is not valid "
      "JSON or TOML is never written.\n"
      "--network, --read, --write, --allow-domain, --deny-domain, --allow-preset, --resolve, "
      "--env, --timeout and --policy are checked as serve checks them and written after "
      "`serve --workspace DIR` in cordon's entry (paths absolute); running setup again with "
      "other flags updates that entry, keeping its other keys.\n"
      "exit codes: 0 done (or nothing to do), 1 refused: the file is unchanged, 2 usage error");
  ctx.run[cmd] = [f, cmd] { return CmdSetup(*cmd, *f); };
}

}  // namespace cordon::cli
