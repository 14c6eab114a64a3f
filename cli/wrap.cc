// cordon wrap -- CMD ARGS: one stdio MCP server, confined, proxied with audit records, caps and
// redaction. The server's exit code passes through; cordon's own failures exit 125.
#include "mcp/wrap.h"

#include <cstdlib>

#include "cli/common.h"
#include "core/signals.h"

namespace cordon::cli {

void AddWrapCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    SessionFlags session;
    std::string network;
    std::vector<std::string> read;
    std::vector<std::string> env;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = root.add_subcommand("wrap",
                                      "run one stdio MCP server confined and proxy it, with "
                                      "audit records, caps and redaction")
                      ->group("Commands");
  TakesCommand(ctx, cmd);
  WithChoices(ctx, cmd->add_option("--network", f->network, "the server's network access"),
              NetworkModeChoices(),
              [](const std::string& v) -> Status { return Checked(ParseNetworkMode(v)); });
  cmd->add_option("--read", f->read, "a read-only path for the server's own files (repeatable)")
      ->type_name("DIR");
  AddEnvFlag(cmd, &f->env);
  AddSessionFlags(cmd, &f->session);
  cmd->footer("exit codes: the server's own, or 125 when cordon itself failed");
  ctx.run[cmd] = [f, cmd, &ctx]() -> int {
    if (ctx.command.empty())
      return UsageError(*cmd, "wrap needs a server command: cordon wrap [OPTIONS] -- CMD ARGS...");
    // The client's SIGTERM (or Ctrl-C) ends the server's sandbox and writes the records; cordon
    // then exits 128+N (docs/cli.md "Stopping").
    InstallTerminationHandler();
    ProcessRequest req;
    req.argv = ctx.command;
    // The server gets the environment its client gave to cordon wrap (minus env.deny): its
    // config's GITHUB_TOKEN and the like are meant for it. Secret-looking values are in the
    // session's redactor (from cordon's own environment), so they never reach logs or results.
    req.inherit_env = true;
    auto env = EnvFromFlags(f->env, ctx.envp);
    if (!env) return UsageError(*cmd, env.error().message);
    req.extra_env = std::move(*env);
    if (!f->network.empty()) req.network = *ParseNetworkMode(f->network);
    for (const auto& r : f->read) {
      char* real = ::realpath(r.c_str(), nullptr);
      if (real == nullptr) return UsageError(*cmd, "--read " + r + ": no such path");
      req.extra_read.push_back(real);
      std::free(real);
    }
    auto session =
        StartSessionOr(kExitCordonFailed, SessionOptionsFrom(f->session, "wrap"), ctx.envp);
    if (!session) return session.error();
    req.cwd = (*session)->workspace().root();
    RedactEnvValues(**session, req.extra_env);
    int rc = mcp::RunWrap(**session, req, 0, 1);
    (*session)->Finish();
    return ExitCodeAfterSignal(rc);
  };
}

}  // namespace cordon::cli
