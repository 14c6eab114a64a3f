// cordon call TOOL --json J: one tool call, its CallToolResult printed.
#include <iostream>

#include "cli/common.h"
#include "core/signals.h"

namespace cordon::cli {

void AddCallCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    SessionFlags session;
    std::string tool, json;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = root.add_subcommand("call", "run one tool; prints the CallToolResult JSON")
                      ->group("Commands");
  cmd->add_option("TOOL", f->tool, "the tool to call (see cordon tools)")->required();
  cmd->add_option("--json", f->json, "the tool's arguments: JSON, @FILE, or @- for stdin")
      ->type_name("JSON")
      ->required();
  AddSessionFlags(cmd, &f->session);
  AddTagFlag(cmd, &f->session);
  ctx.run[cmd] = [f, cmd, &ctx]() -> int {
    auto text = ReadJsonArgument(f->json);
    if (!text) return UsageError(*cmd, text.error().message);
    // A signal ends the call's sandbox (run_shell), and cordon exits 128+N after the records.
    InstallTerminationHandler();
    auto session = StartSessionOr(kExitStart, SessionOptionsFrom(f->session, "cli"), ctx.envp);
    if (!session) return session.error();
    Json result = (*session)->CallJsonText(f->tool, *text);
    (*session)->Finish();
    std::cout << DumpResultJson(result) << std::endl;
    return ExitCodeAfterSignal(result["isError"].get<bool>() ? kExitToolError : kExitOk);
  };
}

}  // namespace cordon::cli
