// The terminal's Asker (issue 34): `exec` and `call` put an approval question to the person at
// the controlling terminal (/dev/tty), never to the command's own stdin, which may be a pipe.
#pragma once

#include <memory>
#include <string>

#include "policy/asker.h"

namespace cordon::cli {

class TerminalAsker final : public Asker {
 public:
  // Y or "yes": once; s or "session": for the rest of the session; anything else, or end of
  // input: deny. No controlling terminal: no_client, at once.
  ApprovalReply Ask(const ApprovalQuestion& question) override;
};

// Who `command`'s questions go to: nobody under --non-interactive or CI (a CI variable other
// than "", "0" or "false" in cordon's own environment), else the terminal for exec, call and
// mcp; for serve, nobody until its client declares elicitation in `initialize` (then the MCP
// server asks through it, mcp/elicitation.h); for wrap, nobody (not built yet).
std::shared_ptr<Asker> AskerFor(const std::string& command, bool non_interactive);
// Why no one may be asked at all (--non-interactive, CI), or "" when someone may be.
std::string NoOneToAsk(bool non_interactive);

}  // namespace cordon::cli
