// cordon wrap: one stdio MCP server, confined, proxied both ways unchanged in meaning, with
// audit records for tools/call, redaction of results and bounded message sizes.
#pragma once

#include "runner/launch.h"
#include "session/session.h"

namespace cordon::mcp {

// Proxies between (client_in, client_out) and the confined server; returns the exit code.
int RunWrap(Session& session, ProcessRequest req, int client_in, int client_out);

}  // namespace cordon::mcp
