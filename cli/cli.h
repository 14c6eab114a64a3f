// The cordon command line: parses, prepares, runs, cleans up. Exit codes are in docs/cli.md.
#pragma once

namespace cordon {

enum ExitCode : int {
  kExitOk = 0,
  kExitToolError = 1,  // the tool returned isError, or `audit verify` found a broken chain
  kExitUsage = 2,      // bad command line
  kExitStart = 3,      // cordon could not start: policy, workspace, audit log or key
  kExitTornTail = 4,   // `audit verify`: intact but for a torn last line (a crash)
};

int RunCli(int argc, char** argv, char** envp);

}  // namespace cordon
