// The GitReader the staged commit checks git content with (workspace/git_content.h,
// docs/adr/0014): the host's git, run read-only and confined.
#pragma once

#include "core/error.h"
#include "workspace/git_content.h"

namespace cordon {

// Runs `git ARGS` with exactly `req.env`, `req.input` on stdin, and returns its stdout. The child
// has no_new_privs, Landlock that lets it read (and execute) only the system's directories and
// `req.readable` and write nowhere, and no TCP; CPU, memory, file size (0) and process limits;
// stdin, stdout and stderr its only descriptors. It is killed after 120 s. Fails on a non-zero
// exit, a signal, more than 256 MiB of output, or where Landlock is missing (no confinement,
// no check: the caller fails closed).
Result<std::string> RunGitConfined(const GitReadRequest& req);

}  // namespace cordon
