// cordon exec -- CMD ARGS: one command, confined, with cordon's own stdio; its exit code passes
// through, and cordon's own failures exit 125 (cli/exit_codes.h).
#include <cstdio>
#include <cstdlib>

#include "cli/common.h"
#include "core/signals.h"
#include "core/text.h"
#include "runner/bwrap.h"
#include "runner/contain.h"
#include "runner/host_probe.h"

namespace cordon::cli {

void AddExecCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    SessionFlags session;
    ProcessFlags process;
    std::string timeout;
    bool plan = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = root.add_subcommand("exec",
                                      "run one command confined; stdio and exit code pass "
                                      "through (124 timeout, 125 cordon failed, 127 not found)")
                      ->group("Commands");
  TakesCommand(ctx, cmd);
  AddProcessFlags(ctx, cmd, &f->process, "network access (default: the policy's network mode)");
  cmd->add_option("--timeout", f->timeout, "time limit in seconds")->type_name("SECONDS");
  cmd->add_flag("--plan", f->plan, "print the launch plan as JSON and run nothing");
  AddSessionFlags(cmd, &f->session);
  AddTagFlag(cmd, &f->session);
  std::string footer = "exit codes: the command's own, or";
  for (const auto& d : kExecExitCodeDocs)
    footer += "\n  " + std::to_string(d.code) + "  " + d.meaning;
  cmd->footer(footer);
  ctx.run[cmd] = [f, cmd, &ctx]() -> int {
    if (ctx.command.empty())
      return UsageError(*cmd, "exec needs a command: cordon exec [OPTIONS] -- CMD ARGS...");
    // Ctrl-C, a CI runner's SIGTERM, a closed terminal's SIGHUP: the sandbox is ended, the
    // records written, and cordon exits 128+N (docs/cli.md "Stopping").
    InstallTerminationHandler();
    ProcessRequest req;
    req.argv = ctx.command;
    req.tool = "exec";
    req.kind = ProcessKind::kForeground;
    req.inherit_stdio = true;
    req.resolve_shims = true;  // the person's own command: a pyenv shim is resolved
    // --network, the egress flags, --env, --read and --write: a bad value, or a grant that
    // cannot be had, is the caller's mistake, said with the usage line (125).
    if (auto st = ApplyProcessFlags(f->process, ctx.envp, req); !st)
      return UsageError(*cmd, st.error().message);
    if (!f->timeout.empty()) {
      char* end = nullptr;
      long t = std::strtol(f->timeout.c_str(), &end, 10);
      if (end == nullptr || *end != '\0' || t <= 0)
        return UsageError(*cmd, "--timeout takes a positive number of seconds");
      req.timeout_secs = t;
      req.timeout_from_user = true;  // the person or CI script running cordon, not the agent
    }
    auto session =
        StartSessionOr(kExitCordonFailed, SessionOptionsFrom(f->session, "exec"), ctx.envp);
    if (!session) return session.error();
    req.cwd = (*session)->workspace().root();
    RedactEnvValues(**session, req.extra_env);
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
    // The staged commit could not complete: what the command wrote did not all reach the tree.
    // A caller reading only the exit code (`cordon exec -- make && deploy`) must see it fail, as
    // run_shell's result does (fail closed, never a silent partial).
    if (const Json w = (*proc)->workspace_commit(); w.is_object() && w.contains("error")) {
      std::string not_done;
      for (const auto& p : w.value("not_done", Json::array())) {
        if (not_done.size() > 2000) break;
        not_done += "\n  " + TerminalSafe(p.get<std::string>(), true);
      }
      std::fprintf(stderr,
                   "cordon: the command ran but its changes could not all be installed: %s%s\n",
                   w["error"].get<std::string>().c_str(),
                   not_done.empty() ? "" : ("; not done:" + not_done).c_str());
      return kExitCordonFailed;
    }
    // Entries the workspace rules kept out (a new repository's .git, a hook, a setuid bit):
    // the command's exit code is its own, but what it made is not all in the tree. A refused
    // index or ref (git_content) is a git command whose outcome did not land: a command that
    // succeeded exits kExitGitRefused, so that a script does not go on as if it had.
    bool git_refused = false;
    if (const Json w = (*proc)->workspace_commit();
        w.is_object() && w.contains("refused") && !w["refused"].empty()) {
      // Each name as the agent wrote it, made safe for the terminal and kept to its own line
      // (an escape sequence, a bidi override or a newline in a name would reach the user's
      // screen and could forge cordon's own lines); the most telling first, the entries below a
      // refused directory folded into it, and a count of the rest.
      std::string kept;
      std::size_t total = w.value("refused_omitted", std::size_t{0}), rest = total;
      for (const auto& r : w["refused"]) total += 1 + r.value("below", std::size_t{0});
      for (const auto& r : w["refused"]) {
        git_refused = git_refused || r.value("reason", "") == "git_content";
        const std::size_t under = r.value("below", std::size_t{0});
        if (kept.size() > 2000) {
          rest += 1 + under;
          continue;
        }
        kept += "\n  " + TerminalSafe(r.value("path", ""), true) + " (" +
                TerminalSafe(r.value("reason", ""), true) +
                (under > 0 ? ", and " + std::to_string(under) +
                                 (under == 1 ? " entry" : " entries") + " below it"
                           : "") +
                ")";
      }
      if (rest > 0) kept += "\n  and " + std::to_string(rest) + " more";
      const std::size_t n = total;
      std::fprintf(stderr,
                   "cordon: %zu %s the workspace rules refuse %s kept out of the tree, in "
                   "cordon's quarantine (SECURITY.md, \"The staged workspace\"):%s\n",
                   n, n == 1 ? "entry" : "entries", n == 1 ? "was" : "were", kept.c_str());
    }
    if (o.stop_signal) {
      std::fprintf(stderr, "cordon: stopped by signal %d; the sandbox was ended\n", *o.stop_signal);
      return kExitSignalBase + *o.stop_signal;
    }
    if (o.error) {
      std::fprintf(stderr, "cordon: %s: %s\n", std::string(CodeName(o.error->code)).c_str(),
                   o.error->message.c_str());
      // Not found inside, but found on the caller's PATH: its directory lies outside what the
      // sandbox can read (the sandbox's PATH keeps only the visible part of the caller's).
      const std::string& name = req.argv[0];
      if (o.error->code == Code::kNotFound && name.find('/') == std::string::npos) {
        // (A version manager's shim that could not be resolved said so itself: where = it.)
        if (const std::string host = FindOnPath(name); !host.empty() && host != o.error->where) {
          std::fprintf(stderr,
                       "cordon: %s is %s on your PATH, outside what the sandbox can read; add "
                       "its directory to [filesystem] read in your policy (docs/policy.md)\n",
                       name.c_str(), host.c_str());
        }
      }
    } else if (o.status == ProcessStatus::kTimeout) {
      std::fprintf(stderr, "cordon: timed out: %s; the sandbox was terminated\n",
                   o.limit ? o.limit->Describe().c_str() : "the time limit");
    } else if (o.limit) {
      // The command's own exit code passes through; cordon says which limit ended it.
      std::fprintf(stderr, "cordon: the command was ended by %s\n", o.limit->Describe().c_str());
    }
    const int code = ExitCodeAfterSignal(ExecExitCode(o));
    if (git_refused && code == kExitOk) {
      std::fprintf(stderr,
                   "cordon: the command's git index or ref stayed out of the host repository "
                   "(git_content above): exit %d\n",
                   kExitGitRefused);
      return kExitGitRefused;
    }
    return code;
  };
}

}  // namespace cordon::cli
