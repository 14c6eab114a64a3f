// cordon wrap -- CMD ARGS: one stdio MCP server, confined, proxied with audit records, caps and
// redaction. The server's exit code passes through; cordon's own failures exit 125.
#include "mcp/wrap.h"

#include <cstdio>

#include "cli/common.h"
#include "core/signals.h"
#include "policy/decision.h"
#include "runner/grants.h"

namespace cordon::cli {

void AddWrapCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    SessionFlags session;
    ProcessFlags process;
    bool plan = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = root.add_subcommand("wrap",
                                      "run one stdio MCP server confined and proxy it, with "
                                      "audit records, caps and redaction")
                      ->group("Commands");
  TakesCommand(ctx, cmd);
  AddProcessFlags(ctx, cmd, &f->process, "the server's network access");
  cmd->add_flag("--plan", f->plan,
                "print the server's launch plan as JSON (with the grants of its own program "
                "files) and run nothing");
  AddSessionFlags(cmd, &f->session);
  cmd->footer(
      "the server's own program files (its executable; for node, python3, ...: its script's "
      "package and node_modules) are readable without --read\n"
      "exit codes: the server's own, or 125 when cordon itself failed");
  ctx.run[cmd] = [f, cmd, &ctx]() -> int {
    if (ctx.command.empty())
      return UsageError(*cmd, "wrap needs a server command: cordon wrap [OPTIONS] -- CMD ARGS...");
    // The client's SIGTERM (or Ctrl-C) ends the server's sandbox and writes the records; cordon
    // then exits 128+N (docs/cli.md "Stopping").
    InstallTerminationHandler();
    ProcessRequest req;
    req.argv = ctx.command;
    req.tool = "wrap";
    req.kind = ProcessKind::kMcpServer;
    req.pipe_stdin = true;
    req.no_timeout = true;
    req.program_files = true;
    req.resolve_shims = true;
    // The server gets the environment its client gave to cordon wrap (minus env.deny): its
    // config's GITHUB_TOKEN and the like are meant for it. Secret-looking values are in the
    // session's redactor (from cordon's own environment), so they never reach logs or results.
    req.inherit_env = true;
    // --network, the egress flags, --env, --read and --write: a bad value, or a grant that
    // cannot be had, is the caller's mistake, said with the usage line (125).
    if (auto st = ApplyProcessFlags(f->process, ctx.envp, req); !st)
      return UsageError(*cmd, st.error().message);
    auto session =
        StartSessionOr(kExitCordonFailed, SessionOptionsFrom(f->session, "wrap"), ctx.envp);
    if (!session) return session.error();
    req.cwd = (*session)->workspace().root();
    if (f->plan) {
      auto plan = (*session)->processes().Plan(req);
      if (!plan) {
        std::fprintf(stderr, "cordon wrap: %s\n", plan.error().ToString().c_str());
        return kExitCordonFailed;
      }
      std::printf("%s\n", PlanJson(*plan).dump(2).c_str());
      return kExitOk;
    }
    // A server that downloads itself as it starts (npx -y, uvx, ...) would hang without the
    // network it needs: said at once instead. Through the proxy it gets what its rules allow
    // (--allow-preset npm), and a refused registry is a quick 403, not a hang.
    const std::string preset = LauncherPreset(req.argv);
    const NetworkMode network = req.network.value_or((*session)->policy().NetworkFor(req.tool));
    const bool offline = network != NetworkMode::kAllow && network != NetworkMode::kProxy;
    const Decision launch =
        Decide((*session)->policy(),
               LaunchAsk{.tool = req.tool,
                         .argv = req.argv,
                         .network = network,
                         .fetches_at_start =
                             offline ? FetchesPackageAtStart(req.argv, req.cwd) : std::nullopt,
                         .preset = preset});
    if (!launch.allowed()) {
      (void)(*session)->Audit(
          McpDiagnosticRecord{
              .server = "wrapped", .reason = "server not started", .message = launch.reason},
          true);
      std::fprintf(stderr, "cordon wrap: %s: %s\n", std::string(CodeName(launch.code)).c_str(),
                   launch.reason.c_str());
      (*session)->Finish();
      return kExitCordonFailed;
    }
    RedactEnvValues(**session, req.extra_env);
    int rc = mcp::RunWrap(**session, req, 0, 1);
    (*session)->Finish();
    return ExitCodeAfterSignal(rc);
  };
}

}  // namespace cordon::cli
