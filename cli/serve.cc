// cordon serve: an MCP server (stdio, or Streamable HTTP on loopback) exposing the granted tools.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "cli/common.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/signals.h"
#include "core/unique_fd.h"
#include "mcp/http_server.h"
#include "mcp/hub.h"
#include "mcp/server.h"

namespace cordon::cli {
namespace {

// The bearer token in `path` (read like every key: refused when others can read it), or a new
// one written there (0600) when the file is missing. Empty on failure, said on stderr.
std::string TokenFromFile(const std::string& path) {
  auto text = ReadKeyFileChecked(path);
  if (text) {
    std::string token = text->substr(0, text->find('\n'));
    if (!token.empty() && token.back() == '\r') token.pop_back();
    if (!token.empty()) return token;
    std::fprintf(stderr, "cordon: token file %s is empty\n", path.c_str());
    return {};
  }
  if (text.error().code != Code::kNotFound) {
    std::fprintf(stderr, "cordon: %s\n", text.error().ToString().c_str());
    return {};
  }
  std::string token = RandomHex(24);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  const std::string line = token + "\n";
  if (!fd.valid() || !WriteAll(fd.get(), line, path)) {
    std::fprintf(stderr, "cordon: cannot write token file %s\n", path.c_str());
    return {};
  }
  std::fprintf(stderr, "cordon: wrote a new bearer token to %s\n", path.c_str());
  return token;
}

}  // namespace

void AddServeCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    SessionFlags session;
    ProcessFlags process;
    std::string http, token_file, timeout;
    bool no_auth = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = root.add_subcommand("serve",
                                      "an MCP server (stdio, or Streamable HTTP on loopback) "
                                      "exposing the tools the policy grants")
                      ->group("Commands");
  cmd->add_option("--http", f->http, "serve Streamable HTTP on this loopback address")
      ->type_name("127.0.0.1:PORT");
  cmd->add_option("--token-file", f->token_file,
                  "the bearer token for --http (created with a new token when missing)")
      ->type_name("FILE");
  cmd->add_flag("--no-auth", f->no_auth, "serve --http without a bearer token");
  AddProcessFlags(ctx, cmd, &f->process,
                  "run_shell's network access (default: the policy's network mode)");
  cmd->add_option("--timeout", f->timeout,
                  "every tool's time limit in seconds, in place of the policy's (an agent's "
                  "timeout_secs may only shorten it)")
      ->type_name("SECONDS");
  AddSessionFlags(cmd, &f->session);
  AddTagFlag(cmd, &f->session);
  cmd->footer(
      "--network, --allow-domain, --deny-domain, --allow-preset, --resolve, --env, --read and "
      "--write apply to every process run_shell starts, as exec's do to its command");
  ctx.run[cmd] = [f, cmd, &ctx]() -> int {
    std::optional<mcp::HttpServeOptions> http;
    if (!f->http.empty()) {
      auto o = mcp::ParseListenAddress(f->http);
      if (!o) return UsageError(*cmd, o.error().message);
      if (f->no_auth == !f->token_file.empty()) {
        return UsageError(*cmd,
                          "serve --http needs --token-file FILE (created with a new token when "
                          "missing) or --no-auth");
      }
      if (!f->token_file.empty()) {
        o->token = TokenFromFile(f->token_file);
        if (o->token.empty()) return kExitStart;
      }
      http = *o;
    }
    SessionOptions options = SessionOptionsFrom(f->session, "mcp");
    // The flags exec applies to its command, applied to the request every run_shell process
    // starts from; a bad value or a grant that cannot be had is a usage error (2).
    if (auto st = ApplyProcessFlags(f->process, ctx.envp, options.tool_process); !st)
      return UsageError(*cmd, st.error().message);
    if (!f->timeout.empty()) {
      char* end = nullptr;
      const long t = std::strtol(f->timeout.c_str(), &end, 10);
      if (end == nullptr || *end != '\0' || t <= 0)
        return UsageError(*cmd, "--timeout takes a positive number of seconds");
      options.tool_timeout_secs = t;
    }
    InstallTerminationHandler();  // before the servers start: a signal now is recorded too
    options.warm = true;
    if (!f->token_file.empty()) options.own_files.push_back(f->token_file);  // never shown inside
    auto session = StartSessionOr(kExitStart, options, ctx.envp);
    if (!session) return session.error();
    RedactEnvValues(**session, options.tool_process.extra_env);
    auto config = LoadSessionMcpConfig(**session);
    if (!config) {
      std::fprintf(stderr, "cordon: mcp config: %s\n", config.error().ToString().c_str());
      return kExitStart;
    }
    if (http) {
      // A configured server at this very address would be this server proxying itself: every
      // tools/list would wait on itself. Skip it, and say so.
      const std::string port = std::to_string(http->port);
      std::erase_if(config->servers, [&](const mcp::ServerConfig& srv) {
        const bool self = srv.url.find("://127.0.0.1:" + port + "/") != std::string::npos ||
                          srv.url.find("://localhost:" + port + "/") != std::string::npos;
        if (self) {
          Json d = {{"server", srv.name},
                    {"reason", "its URL is this cordon serve itself; skipped"}};
          (*session)->Audit(
              McpDiagnosticRecord{.server = srv.name, .reason = d["reason"].get<std::string>()},
              false);
          std::fprintf(stderr, "cordon: server %s: its URL is this cordon serve itself; skipped\n",
                       srv.name.c_str());
          config->diagnostics.push_back(std::move(d));
        }
        return self;
      });
    }
    int rc = 0;
    {
      // The hub's servers are stopped (and their process records written) before the session
      // ends.
      mcp::McpHub hub(**session, *config);
      std::fprintf(stderr, "cordon: serving MCP on %s for %s (audit log %s)\n",
                   http ? "HTTP" : "stdio", (*session)->workspace().root().c_str(),
                   (*session)->audit_path().c_str());
      rc = http ? mcp::ServeHttp(**session, *http)
                : mcp::ServeStdio(**session, 0, 1, [&hub](std::function<void()> notify) {
                    hub.on_tools_changed = std::move(notify);
                  });
    }
    (*session)->Finish();
    return ExitCodeAfterSignal(rc);  // SIGINT/SIGTERM/SIGHUP: 128+N once all is recorded
  };
}

}  // namespace cordon::cli
