// cordon's exit codes, and how `exec` turns a confined command's end into one (docs/cli.md).
#pragma once

#include "runner/launch.h"

namespace cordon {

enum ExitCode : int {
  kExitOk = 0,
  kExitToolError = 1,  // the tool returned isError, or `audit verify` found a broken chain
  kExitUsage = 2,      // bad command line
  kExitStart = 3,      // cordon could not start: policy, workspace, audit log or key
  kExitTornTail = 4,   // `audit verify`: intact but for a torn last line (a crash)
  // --- checkpoint: `audit verify`'s completeness outcomes (docs/audit.md) ---
  kExitUnprovenTail = 5,  // intact, but records follow the last checkpoint
  kExitCut = 6,           // the witness holds a checkpoint the log lacks: cut or replaced
  kExitWeakerMode = 7,    // the log's mode is weaker than --require
  kExitNoCheckpoint = 8,  // empty log, or no checkpoint where --pubkey expects one
  kExitGap = 9,           // a `gap` record: records were lost after their act
  // `exec` and `wrap` pass the command's own code through, so cordon's own outcomes take the
  // codes env(1) and timeout(1) use, which a command rarely returns itself.
  kExitGitRefused = 123,    // the command succeeded, but an index or ref it wrote was refused
  kExitTimeout = 124,       // the time limit passed; the sandbox was terminated
  kExitCordonFailed = 125,  // cordon itself failed (usage errors included)
  kExitNotFound = 127,      // the command does not exist
  kExitSignalBase = 128,    // + N: the command was killed by signal N
};

struct ExitCodeDoc {
  int code;
  const char* meaning;
};

// The help footers and the man page are written from these.
inline constexpr ExitCodeDoc kExitCodeDocs[] = {
    {kExitOk, "success (audit verify: the log is intact)"},
    {kExitToolError, "the tool returned an error result (audit verify: the chain is broken)"},
    {kExitUsage, "usage error: unknown command or option, missing argument"},
    {kExitStart, "cordon could not start: policy, workspace, audit log or key file"},
    {kExitTornTail, "audit verify: intact but for a last line torn by a crash"},
    {kExitUnprovenTail, "audit verify: intact, but records after the last checkpoint are unproven"},
    {kExitCut, "audit verify: the witness holds a checkpoint the log lacks (cut or replaced)"},
    {kExitWeakerMode,
     "audit verify: the log's mode (plain, hmac, signed) is weaker than --require"},
    {kExitNoCheckpoint, "audit verify: the log is empty or has no checkpoint to prove it complete"},
    {kExitGap, "audit verify: a gap record says records were lost after their act"},
};
inline constexpr ExitCodeDoc kExecExitCodeDocs[] = {
    {kExitGitRefused,
     "the command succeeded, but git content it made (an index entry, a commit on a ref) names "
     "a path the workspace rules refuse: the host kept its index and refs"},
    {kExitTimeout, "the time limit passed and the sandbox was terminated"},
    {kExitCordonFailed, "cordon failed: usage error, could not start, sandbox could not be set up"},
    {kExitNotFound, "the command does not exist"},
    {kExitSignalBase,
     "+ N: the command was killed by signal N, or cordon got SIGINT/SIGTERM/SIGHUP (N) and "
     "ended the sandbox"},
};

// The exit code of `cordon exec` for a command that ran (or failed to start) in the sandbox.
int ExecExitCode(const ProcessOutcome& outcome);

}  // namespace cordon
