// cordon serve --http: MCP over Streamable HTTP on a loopback address. Every request needs the
// bearer token (unless --no-auth), and Host/Origin are checked against DNS rebinding.
#pragma once

#include <string>

#include "session/session.h"

namespace cordon::mcp {

struct HttpServeOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string token;  // empty only with --no-auth
};

// Parses "127.0.0.1:PORT" or "localhost:PORT"; other addresses are refused.
Result<HttpServeOptions> ParseListenAddress(const std::string& spec);

// Serves until SIGTERM/SIGINT/SIGHUP. Writes "listening on URL" to stderr once bound.
int ServeHttp(Session& session, const HttpServeOptions& options);

}  // namespace cordon::mcp
