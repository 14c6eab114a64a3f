// cordon doctor: can this host confine processes, and the remedy for each missing piece.
#include "runner/doctor.h"

#include <iostream>

#include "cli/common.h"

namespace cordon::cli {

void AddDoctorCommand(CLI::App& root, Context& ctx) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = root.add_subcommand("doctor",
                                      "preflight of bwrap, user namespaces, Landlock, seccomp, "
                                      "cgroups, rg and fd, with the remedy for each missing piece")
                      ->group("Commands");
  cmd->add_flag("--json", *json, "print the report as JSON");
  cmd->footer("exits 0 when processes can be confined here, 1 when not");
  ctx.run[cmd] = [json]() -> int {
    Json report;
    bool ok = RunDoctor(&report, "");
    if (*json) {
      std::cout << DumpJson(report, 2) << std::endl;
    } else {
      for (const auto& c : report["checks"]) {
        const bool pass = c["ok"].get<bool>();
        std::cout << (pass ? "ok    " : (c["required"].get<bool>() ? "FAIL  " : "warn  "))
                  << c["name"].get<std::string>() << ": " << c["detail"].get<std::string>() << "\n";
        if (!pass) std::cout << "      remedy: " << c["remedy"].get<std::string>() << "\n";
      }
      std::cout
          << (ok ? "cordon can confine processes on this host\n"
                 : "cordon cannot confine processes here: calls fail with sandbox_unavailable\n");
    }
    return ok ? kExitOk : kExitToolError;
  };
}

}  // namespace cordon::cli
