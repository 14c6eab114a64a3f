// MCP requests: initialize (version negotiation, AGENTS.md instructions), ping, tools/list,
// tools/call (through Session::Call, so limits, redaction and audit apply), logging/setLevel.
#include "mcp/server.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>

#include "runner/hash.h"

namespace cordon::mcp {
namespace {

constexpr std::size_t kMaxInstructionBytes = 16384;

bool WriteLine(int fd, const Json& j) {
  std::string line = DumpJson(j) + "\n";
  std::string_view rest(line);
  while (!rest.empty()) {
    ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

std::string NegotiateVersion(const Json& requested) {
  if (requested.is_string()) {
    for (const char* v : kSupportedVersions) {
      if (requested == v) return v;
    }
  }
  return kSupportedVersions[0];
}

Json McpServer::Instructions() {
  // AGENTS.md guides the agent; it changes neither the catalog nor the limits.
  auto file = session_.workspace().OpenRegular("AGENTS.md");
  if (!file) return nullptr;
  std::string text(kMaxInstructionBytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(file->get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  const bool truncated = got > kMaxInstructionBytes;
  if (truncated) text.resize(kMaxInstructionBytes);
  text = RepairUtf8(text);
  session_.Audit("instructions",
                 {{"path", "AGENTS.md"}, {"sha256", Sha256Hex(text)}, {"bytes", text.size()},
                  {"truncated", truncated}},
                 true);
  return truncated ? Json(text + "\n[cordon: AGENTS.md cut at " + std::to_string(kMaxInstructionBytes) + " bytes]")
                   : Json(text);
}

Json McpServer::Initialize(const Json& params) {
  version_ = NegotiateVersion(params.is_object() ? params.value("protocolVersion", Json()) : Json());
  Json result = {{"protocolVersion", version_},
                 {"capabilities", {{"tools", {{"listChanged", false}}}, {"logging", Json::object()}}},
                 {"serverInfo", {{"name", "cordon"}, {"version", "0.1.0"}}}};
  Json instructions = Instructions();
  if (!instructions.is_null()) result["instructions"] = instructions;
  if (params.is_object() && params.contains("clientInfo")) {
    session_.Audit("mcp_client", {{"clientInfo", params["clientInfo"]}, {"protocolVersion", version_}}, false);
  }
  return result;
}

std::optional<Json> McpServer::Handle(const Message& m) {
  if (m.kind == Message::Kind::kResponse) return std::nullopt;  // cordon sends no requests yet
  if (m.kind == Message::Kind::kNotification) {
    if (m.method == "notifications/initialized") initialized_ = true;
    return std::nullopt;  // cancelled/progress/roots notifications need no answer
  }
  const Json& p = m.params;
  if (m.method == "initialize") return MakeResult(m.id, Initialize(p));
  if (m.method == "ping") return MakeResult(m.id, Json::object());
  if (m.method == "logging/setLevel") return MakeResult(m.id, Json::object());
  if (m.method == "tools/list") {
    Json tools = Json::array();
    for (const ToolSpec* t : session_.Catalog()) tools.push_back(CatalogEntry(*t, CatalogFormat::kMcp));
    if (session_.external_tools() != nullptr && session_.policy().Grants("mcp:call")) {
      for (auto& t : session_.external_tools()->Catalog()) tools.push_back(std::move(t));
    }
    return MakeResult(m.id, {{"tools", tools}});
  }
  if (m.method == "tools/call") {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) {
      return MakeError(m.id, kInvalidParams, "tools/call needs params.name (a string)");
    }
    Json args = p.value("arguments", Json::object());
    if (!args.is_object()) return MakeError(m.id, kInvalidParams, "params.arguments must be an object");
    // Unknown or ungranted tools come back as isError results, as the tool contract says.
    return MakeResult(m.id, session_.Call(p["name"].get<std::string>(), args));
  }
  return MakeError(m.id, kMethodNotFound, "method not found: " + m.method);
}

std::vector<Json> McpServer::HandleLine(std::string_view line) {
  auto parsed = ParseMessage(line);
  if (std::holds_alternative<Json>(parsed)) return {std::get<Json>(parsed)};
  auto reply = Handle(std::get<Message>(parsed));
  if (!reply) return {};
  return {std::move(*reply)};
}

namespace {
volatile std::sig_atomic_t g_terminate = 0;
void OnTerminate(int) { g_terminate = 1; }
}  // namespace

int ServeStdio(Session& session, int in_fd, int out_fd) {
  // SIGTERM/SIGINT/SIGHUP end the loop (read gets EINTR: no SA_RESTART) so that servers and
  // background jobs are stopped and recorded before cordon exits.
  struct sigaction sa{};
  sa.sa_handler = OnTerminate;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  McpServer server(session);
  std::string buf;
  bool discarding = false;  // inside an oversized line: drop bytes up to its newline
  char chunk[65536];
  while (true) {
    if (g_terminate) break;
    ssize_t n = ::read(in_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(buf.data() + start, nl - start);
      if (discarding) {
        discarding = false;
        continue;
      }
      if (line.empty() || line == "\r") continue;
      for (const Json& out : server.HandleLine(line)) {
        if (!WriteLine(out_fd, out)) return 1;
      }
    }
    buf.erase(0, start);
    if (buf.size() > kMaxMessageBytes) {
      if (!discarding) {
        WriteLine(out_fd, MakeError(nullptr, kInvalidRequest,
                                    "message exceeds " + std::to_string(kMaxMessageBytes) + " bytes"));
      }
      discarding = true;
      buf.clear();
    }
  }
  return 0;
}

}  // namespace cordon::mcp
