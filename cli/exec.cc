// cordon exec -- CMD ARGS: one command, confined, with cordon's own stdio; its exit code passes
// through, and cordon's own failures exit 125 (cli/exit_codes.h).
#include <cstdio>
#include <cstdlib>

#include "cli/common.h"
#include "runner/bwrap.h"
#include "runner/contain.h"

namespace cordon::cli {

void AddExecCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    SessionFlags session;
    GrantFlags grants;
    std::string network, timeout;
    bool plan = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = root.add_subcommand("exec",
                                      "run one command confined; stdio and exit code pass "
                                      "through (124 timeout, 125 cordon failed, 127 not found)")
                      ->group("Commands");
  TakesCommand(ctx, cmd);
  WithChoices(ctx,
              cmd->add_option("--network", f->network,
                              "network access (default: the policy's network mode)"),
              NetworkModeChoices(),
              [](const std::string& v) -> Status { return Checked(ParseNetworkMode(v)); });
  cmd->add_option("--timeout", f->timeout, "time limit in seconds")->type_name("SECONDS");
  AddGrantFlags(cmd, &f->grants);
  cmd->add_flag("--plan", f->plan, "print the launch plan as JSON and run nothing");
  AddSessionFlags(cmd, &f->session);
  std::string footer = "exit codes: the command's own, or";
  for (const auto& d : kExecExitCodeDocs)
    footer += "\n  " + std::to_string(d.code) + "  " + d.meaning;
  cmd->footer(footer);
  ctx.run[cmd] = [f, cmd, &ctx]() -> int {
    if (ctx.command.empty())
      return UsageError(*cmd, "exec needs a command: cordon exec [OPTIONS] -- CMD ARGS...");
    ProcessRequest req;
    req.argv = ctx.command;
    req.tool = "exec";
    req.kind = ProcessKind::kForeground;
    req.inherit_stdio = true;
    if (!f->network.empty()) req.network = *ParseNetworkMode(f->network);
    if (!f->timeout.empty()) {
      char* end = nullptr;
      long t = std::strtol(f->timeout.c_str(), &end, 10);
      if (end == nullptr || *end != '\0' || t <= 0)
        return UsageError(*cmd, "--timeout takes a positive number of seconds");
      req.timeout_secs = t;
      req.timeout_from_user = true;  // the person or CI script running cordon, not the agent
    }
    // A grant that cannot be had is the caller's mistake: said with the usage line (125).
    if (auto st = AddGrants(f->grants, req); !st) return UsageError(*cmd, st.error().ToString());
    auto session =
        StartSessionOr(kExitCordonFailed, SessionOptionsFrom(f->session, "exec"), ctx.envp);
    if (!session) return session.error();
    req.cwd = (*session)->workspace().root();
    if (f->plan) {
      // The launch plan as data, without running anything: what bwrap gets, what the shim
      // applies (rlimits, Landlock, seccomp), and what the process record would say.
      auto plan = (*session)->processes().Plan(req);
      if (!plan) {
        std::fprintf(stderr, "cordon: %s\n", plan.error().ToString().c_str());
        return kExitCordonFailed;
      }
      std::printf("%s\n", PlanJson(*plan).dump(2).c_str());
      return kExitOk;
    }
    auto proc = (*session)->processes().RunForeground(req, nullptr);
    if (!proc) {
      std::fprintf(stderr, "cordon: %s\n", proc.error().ToString().c_str());
      return kExitCordonFailed;
    }
    ProcessOutcome o = (*proc)->outcome();
    if (o.error) {
      std::fprintf(stderr, "cordon: %s: %s\n", std::string(CodeName(o.error->code)).c_str(),
                   o.error->message.c_str());
    } else if (o.status == ProcessStatus::kTimeout) {
      std::fprintf(stderr, "cordon: timed out: %s; the sandbox was terminated\n",
                   o.limit ? o.limit->Describe().c_str() : "the time limit");
    } else if (o.limit) {
      // The command's own exit code passes through; cordon says which limit ended it.
      std::fprintf(stderr, "cordon: the command was ended by %s\n", o.limit->Describe().c_str());
    }
    return ExecExitCode(o);
  };
}

}  // namespace cordon::cli
