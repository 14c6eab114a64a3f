// cordon mcp list | test | tools | trust | call | probe: the configured MCP servers, as a client.
#include <cstdio>
#include <iostream>

#include "cli/common.h"
#include "core/text.h"
#include "mcp/client.h"
#include "mcp/hub.h"

namespace cordon::cli {
namespace {

struct McpFlags {
  SessionFlags session;
  std::string name, tool, url, json, call;
  bool json_output = false;
};

// Runs `verb` with a session and a hub over the workspace's configured servers.
int WithHub(const McpFlags& f, bool is_call, char** envp,
            const std::function<int(Session&, mcp::McpHub&)>& verb) {
  SessionOptions o = SessionOptionsFrom(f.session, "mcp-cli");
  if (!is_call && o.audit_log.empty()) o.audit_log = DefaultAuditLogPath(NewSessionId());
  auto session = StartSessionOr(kExitStart, o, envp);
  if (!session) return session.error();
  auto config = LoadSessionMcpConfig(**session);
  if (!config) {
    std::fprintf(stderr, "cordon: mcp config: %s\n", config.error().ToString().c_str());
    return kExitStart;
  }
  mcp::McpHub hub(**session, *config);
  return verb(**session, hub);
}

const mcp::ServerConfig* ServerOrSay(mcp::McpHub& hub, const std::string& name) {
  const mcp::ServerConfig* s = hub.Find(name);
  if (s == nullptr)
    std::fprintf(stderr, "cordon: no enabled server named %s (see cordon mcp list)\n",
                 name.c_str());
  return s;
}

CLI::App* Verb(CLI::App* mcp, const char* name, const char* what,
               const std::shared_ptr<McpFlags>& f) {
  CLI::App* cmd = mcp->add_subcommand(name, what)->group("Commands");
  AddSessionFlags(cmd, &f->session);
  return cmd;
}

void AddServerName(CLI::App* cmd, const std::shared_ptr<McpFlags>& f) {
  cmd->add_option("NAME", f->name, "a configured server (see cordon mcp list)")->required();
}

void AddJsonOutput(CLI::App* cmd, const std::shared_ptr<McpFlags>& f) {
  cmd->add_flag("--json,--json-output", f->json_output, "print JSON");
}

int List(const McpFlags& f, Session&, mcp::McpHub& hub) {
  Json out = Json::array();
  for (const auto& s : hub.config().servers) {
    out.push_back({{"name", s.name},
                   {"enabled", true},
                   {"transport", s.transport},
                   {"source", s.source},
                   {"trust", hub.TrustState(s)}});
  }
  for (const auto& d : hub.config().diagnostics)
    std::fprintf(stderr, "cordon: %s\n", DumpJson(d).c_str());
  if (f.json_output) {
    std::cout << DumpJson(out, 2) << std::endl;
  } else {
    for (const auto& s : out) {
      std::cout << TerminalSafe(s["name"].get<std::string>(), true) << "  enabled  "
                << s["transport"].get<std::string>() << "  "
                << TerminalSafe(s["source"].get<std::string>(), true) << "  "
                << s["trust"].get<std::string>() << "\n";
    }
  }
  return kExitOk;
}

int Test(const McpFlags& f, Session&, mcp::McpHub& hub) {
  const mcp::ServerConfig* s = ServerOrSay(hub, f.name);
  if (s == nullptr) return kExitToolError;
  auto tools = hub.Tools(*s);
  if (!tools) {
    std::fprintf(stderr, "cordon: %s: %s\n", TerminalSafe(s->name, true).c_str(),
                 TerminalSafe(tools.error().ToString()).c_str());
    return kExitToolError;
  }
  auto client = hub.Client(*s);
  Json r = {{"server", s->name},
            {"ready", true},
            {"protocolVersion", JsonStringField((*client)->initialize_result(), "protocolVersion")},
            {"tools", tools->first.size()},
            {"hidden_tools", tools->second.size()}};
  std::cout << (f.json_output ? DumpJson(r, 2)
                              : TerminalSafe(s->name, true) + ": ready, protocol " +
                                    TerminalSafe(r["protocolVersion"].get<std::string>(), true) +
                                    ", " + std::to_string(tools->first.size()) + " tools")
            << std::endl;
  return kExitOk;
}

int Tools(const McpFlags& f, Session&, mcp::McpHub& hub) {
  const mcp::ServerConfig* s = ServerOrSay(hub, f.name);
  if (s == nullptr) return kExitToolError;
  auto tools = hub.Tools(*s);
  if (!tools) {
    std::fprintf(stderr, "cordon: %s: %s\n", TerminalSafe(s->name, true).c_str(),
                 TerminalSafe(tools.error().ToString()).c_str());
    return kExitToolError;
  }
  // A tool's name and description are the server's words: written out visibly (no escape
  // sequence or bidi control reaches the terminal), and a description's later lines indented,
  // so that none can pass for another tool's line.
  for (const auto& t : tools->first) {
    std::string description = TerminalSafe(JsonStringField(t, "description"));
    for (std::size_t at = description.find('\n'); at != std::string::npos;
         at = description.find('\n', at + 5))
      description.insert(at + 1, "    ");
    std::cout << "mcp__" << TerminalSafe(s->name, true) << "__"
              << TerminalSafe(JsonStringField(t, "name"), true) << "  " << description << "\n";
  }
  return kExitOk;
}

int Trust(const McpFlags& f, Session& session, mcp::McpHub& hub) {
  const mcp::ServerConfig* s = ServerOrSay(hub, f.name);
  if (s == nullptr) return kExitToolError;
  // Trust covers this definition and the tools it lists now. The server starts with the same
  // clamped sandbox as any project server (ConnectServer does not check trust).
  auto client = mcp::ConnectServer(session, *s);
  if (!client) {
    std::fprintf(stderr, "cordon: %s\n", client.error().ToString().c_str());
    return kExitToolError;
  }
  auto tools = (*client)->ListTools();
  if (!tools) {
    std::fprintf(stderr, "cordon: %s\n", tools.error().ToString().c_str());
    return kExitToolError;
  }
  if (auto st = mcp::Trust(session.workspace().root(), *s, *tools); !st) {
    std::fprintf(stderr, "cordon: %s\n", st.error().ToString().c_str());
    return kExitToolError;
  }
  session.Audit(McpTrustRecord{.server = s->name,
                               .source = s->source,
                               .definition_sha256 = s->definition_sha256,
                               .tools = tools->size()},
                true);
  std::cout << "trusted " << s->name << " (" << tools->size() << " tools pinned)\n";
  return kExitOk;
}

int Call(const McpFlags& f, const std::string& args, Session& session, mcp::McpHub& hub) {
  if (ServerOrSay(hub, f.name) == nullptr) return kExitToolError;
  Json result = session.CallJsonText("mcp__" + f.name + "__" + f.tool, args);
  std::cout << DumpJson(result) << std::endl;
  return result["isError"].get<bool>() ? kExitToolError : kExitOk;
}

// A small client mode: initialize a Streamable HTTP server at URL, list its tools, and
// optionally call one (--call NAME --json ARGS).
int Probe(const McpFlags& f, const Json& args, Session& session) {
  mcp::ServerConfig probe;
  probe.name = "probe";
  probe.transport = mcp::Transport::kStreamableHttp;
  probe.url = f.url;
  auto client = mcp::ConnectServer(session, probe);
  if (!client) {
    std::fprintf(stderr, "cordon: %s\n", client.error().ToString().c_str());
    return kExitToolError;
  }
  Json out = {
      {"protocolVersion", JsonStringField((*client)->initialize_result(), "protocolVersion")},
      {"serverInfo", (*client)->initialize_result().is_object()
                         ? (*client)->initialize_result().value("serverInfo", Json::object())
                         : Json::object()}};
  auto tools = (*client)->ListTools();
  out["tools"] = Json::array();
  if (tools) {
    for (const auto& t : *tools) out["tools"].push_back(t.value("name", ""));
  }
  if (!f.call.empty()) {
    auto r = (*client)->CallTool(f.call, args);
    if (!r) {
      std::fprintf(stderr, "cordon: %s\n", r.error().ToString().c_str());
      return kExitToolError;
    }
    out["call"] = *r;
  }
  std::cout << DumpJson(out, 2) << std::endl;
  return kExitOk;
}

}  // namespace

void AddMcpCommand(CLI::App& root, Context& ctx) {
  CLI::App* mcp = root.add_subcommand("mcp",
                                      "configured MCP servers (~/.cordon/mcp.toml, "
                                      ".cordon/mcp.toml, thndrs' mcp.toml, .mcp.json); they run "
                                      "confined")
                      ->group("Commands")
                      ->require_subcommand(1);
  auto f = std::make_shared<McpFlags>();
  char** const* envp = &ctx.envp;

  // The verbs that only take an optional --json (and, but for list, a server name).
  using HubVerb = int (*)(const McpFlags&, Session&, mcp::McpHub&);
  struct SimpleVerb {
    const char* name;
    const char* description;
    bool takes_server;
    HubVerb run;
  };
  for (const SimpleVerb& v :
       {SimpleVerb{"list", "configured servers: name, transport, file, trust", false, &List},
        SimpleVerb{"test", "start a server confined, initialize, count its tools", true, &Test},
        SimpleVerb{"tools", "a server's tools as the agent sees them", true, &Tools},
        SimpleVerb{"trust", "pin a server's definition and tools so that it may run", true,
                   &Trust}}) {
    CLI::App* verb = Verb(mcp, v.name, v.description, f);
    if (v.takes_server) AddServerName(verb, f);
    AddJsonOutput(verb, f);
    ctx.run[verb] = [f, envp, run = v.run] {
      return WithHub(*f, false, *envp, [&](Session& s, mcp::McpHub& h) { return run(*f, s, h); });
    };
  }

  CLI::App* call = Verb(mcp, "call", "call a server's tool through the audited path", f);
  AddServerName(call, f);
  call->add_option("TOOL", f->tool, "the tool's name on that server")->required();
  call->add_option("--json", f->json, "the tool's arguments: JSON, @FILE, or @- for stdin")
      ->type_name("JSON");
  ctx.run[call] = [f, envp, call] {
    auto args = ReadJsonArgument(f->json.empty() ? "{}" : f->json);
    if (!args) return UsageError(*call, args.error().message);
    return WithHub(*f, true, *envp,
                   [&](Session& s, mcp::McpHub& h) { return Call(*f, *args, s, h); });
  };

  CLI::App* probe = Verb(mcp, "probe", "initialize a Streamable HTTP server, list its tools", f);
  probe->add_option("URL", f->url, "the server's MCP endpoint")->required();
  probe->add_option("--call", f->call, "then call this tool")->type_name("TOOL");
  probe->add_option("--json", f->json, "the --call tool's arguments: JSON, @FILE, or @-")
      ->type_name("JSON");
  ctx.run[probe] = [f, envp, probe] {
    auto text = ReadJsonArgument(f->json.empty() ? "{}" : f->json);
    if (!text) return UsageError(*probe, text.error().message);
    auto args = ParseJsonBounded(*text);
    if (!args) return UsageError(*probe, "--json: " + args.error().message);
    return WithHub(*f, false, *envp, [&](Session& s, mcp::McpHub&) { return Probe(*f, *args, s); });
  };
}

}  // namespace cordon::cli
