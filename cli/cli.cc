// Subcommands: call, tools, policy show, audit verify/show. Options end at "--".
#include "cli/cli.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "audit/audit.h"
#include "core/hash.h"
#include "core/version.h"
#include "mcp/http_server.h"
#include "mcp/hub.h"
#include "mcp/server.h"
#include "mcp/wrap.h"
#include "runner/bwrap.h"
#include "runner/contain.h"
#include "runner/doctor.h"
#include "runner/launch.h"
#include "session/session.h"
#include "tools/registry.h"

#ifndef CORDON_SHIPPED_POLICY_DIR
#define CORDON_SHIPPED_POLICY_DIR "/usr/share/cordon/policies.d"
#endif

namespace cordon {
namespace {

constexpr const char* kUsage = R"(usage: cordon COMMAND [OPTIONS] [-- ARGS]

commands:
  call TOOL --json JSON|@FILE   run one tool; prints the CallToolResult JSON
  exec [--network none|loopback|allow] [--timeout S] [--plan] -- CMD ARGS...
                                run one command confined; stdio and exit code pass through
                                (124 timeout, 125 sandbox failure, 127 command not found)
  serve [--http 127.0.0.1:PORT (--token-file F | --no-auth)]
                                an MCP server (stdio, or Streamable HTTP on loopback) exposing
                                the tools the policy grants
  wrap [--network M] [--read DIR]... -- CMD ARGS...
                                run one stdio MCP server confined and proxy it, with audit
                                records, caps and redaction (tool names are not prefixed)
  mcp list | test NAME | tools NAME | trust NAME [--json]
  mcp call NAME TOOL --json J
  mcp probe URL [--call TOOL --json J]
                                a Streamable HTTP client mode: initialize, list tools, call
                                configured MCP servers (~/.cordon/mcp.toml, .cordon/mcp.toml,
                                thndrs' mcp.toml, .mcp.json); they run confined
  doctor [--json]               preflight of bwrap, user namespaces, Landlock, seccomp, cgroups,
                                rg and fd, with the remedy for each missing piece
  tools [--format mcp|openai|anthropic]
                                print the tool catalog the policy allows
  policy show [--json]          print the effective policy and where each value came from
  audit verify LOG [--key-file K]
                                check a log's hash chain (exit 0 intact, 1 broken, 4 torn tail)
  audit show LOG                print a readable timeline of a log
  version                       print the version

common options (before any "--"):
  --workspace DIR        the workspace (default: the current directory)
  --audit-log PATH       audit log (default: $XDG_STATE_HOME/cordon/sessions/...)
  --audit-key-file K     make the audit chain an HMAC-SHA-256 chain keyed by K
  --policy FILE          an extra policy layer (may be repeated)

exit codes: 0 ok, 1 tool error, 2 usage error, 3 cordon could not start, 4 torn audit tail
)";

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> options;
  std::vector<std::string> after_dashdash;
  bool has(const std::string& k) const { return options.count(k) > 0; }
  std::string get(const std::string& k, std::string def = {}) const {
    auto it = options.find(k);
    return it == options.end() || it->second.empty() ? def : it->second.back();
  }
};

int Usage(const std::string& why) {
  std::fprintf(stderr, "cordon: %s\n\n%s", why.c_str(), kUsage);
  return kExitUsage;
}

// Parses options; `flags` take no value. Unknown options are usage errors.
std::optional<Args> Parse(int argc, char** argv, int from, const std::vector<std::string>& valued,
                          const std::vector<std::string>& flags, std::string* err) {
  Args a;
  for (int i = from; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--") {
      for (++i; i < argc; ++i) a.after_dashdash.push_back(argv[i]);
      break;
    }
    if (s.rfind("--", 0) == 0) {
      std::string name = s, value;
      bool inline_value = false;
      if (auto eq = s.find('='); eq != std::string::npos) {
        name = s.substr(0, eq);
        value = s.substr(eq + 1);
        inline_value = true;
      }
      if (std::find(flags.begin(), flags.end(), name) != flags.end() && !inline_value) {
        a.options[name].push_back("true");
      } else if (std::find(valued.begin(), valued.end(), name) != valued.end()) {
        if (!inline_value) {
          if (i + 1 >= argc) {
            *err = name + " needs a value";
            return std::nullopt;
          }
          value = argv[++i];
        }
        a.options[name].push_back(value);
      } else {
        *err = "unknown option " + name;
        return std::nullopt;
      }
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

// An installed cordon (PREFIX/bin/cordon) reads PREFIX/share/cordon/policies.d; a binary in the
// build tree reads the source tree's policies.d.
std::string ShippedPolicyDir() {
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string p(exe, static_cast<std::size_t>(n));
    p = p.substr(0, p.find_last_of('/')) + "/../share/cordon/policies.d";
    if (::access(p.c_str(), R_OK) == 0) return p;
  }
  return CORDON_SHIPPED_POLICY_DIR;
}

SessionOptions SessionOptionsFrom(const Args& a, const std::string& client) {
  SessionOptions o;
  o.workspace = a.get("--workspace", ".");
  o.audit_log = a.get("--audit-log");
  if (a.has("--audit-key-file")) o.audit_key_file = a.get("--audit-key-file");
  if (a.has("--policy")) o.policy_files = a.options.at("--policy");
  o.shipped_policy_dir = ShippedPolicyDir();
  o.client = client;
  return o;
}

Result<Policy> LoadEffectivePolicy(const SessionOptions& o) {
  ASSIGN_OR_RETURN(Workspace ws, Workspace::Open(o.workspace));
  PolicySources sources = DefaultPolicySources(o.shipped_policy_dir, ws.root());
  sources.extra_files = o.policy_files;
  return LoadPolicy(sources);
}

const std::vector<std::string> kSessionOptions = {"--workspace", "--audit-log", "--audit-key-file",
                                                  "--policy"};

std::vector<std::string> With(std::vector<std::string> base, std::vector<std::string> more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

int CmdCall(int argc, char** argv, char** envp) {
  std::string err;
  auto a = Parse(argc, argv, 2, With(kSessionOptions, {"--json"}), {}, &err);
  if (!a) return Usage(err);
  if (a->positional.size() != 1) return Usage("call takes exactly one TOOL name");
  if (!a->has("--json")) return Usage("call needs --json '{...}' or --json @FILE");
  std::string text = a->get("--json");
  if (!text.empty() && text[0] == '@') {
    std::ifstream in(text.substr(1), std::ios::binary);
    if (!in) return Usage("cannot read " + text.substr(1));
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto session = Session::Start(SessionOptionsFrom(*a, "cli"), envp);
  if (!session) {
    std::fprintf(stderr, "cordon: cannot start: %s\n", session.error().ToString().c_str());
    return kExitStart;
  }
  Json result = (*session)->CallJsonText(a->positional[0], text);
  (*session)->Finish();
  std::cout << DumpJson(result) << std::endl;
  return result["isError"].get<bool>() ? kExitToolError : kExitOk;
}

// exec: one command, confined, with cordon's own stdio; the exit code passes through.
int CmdExec(int argc, char** argv, char** envp) {
  std::string err;
  auto a =
      Parse(argc, argv, 2, With(kSessionOptions, {"--network", "--timeout"}), {"--plan"}, &err);
  if (!a) return Usage(err);
  if (!a->positional.empty()) return Usage("exec takes its command after --");
  if (a->after_dashdash.empty())
    return Usage("exec needs a command: cordon exec [OPTIONS] -- CMD ARGS...");
  ProcessRequest req;
  req.argv = a->after_dashdash;
  req.tool = "exec";
  req.kind = "foreground";
  req.inherit_stdio = true;
  if (a->has("--network")) {
    auto mode = ParseNetworkMode(a->get("--network"));
    if (!mode) return Usage(mode.error().message);
    req.network = *mode;
  }
  if (a->has("--timeout")) {
    const std::string text = a->get("--timeout");
    char* end = nullptr;
    long t = std::strtol(text.c_str(), &end, 10);
    if (end == nullptr || *end != '\0' || t <= 0)
      return Usage("--timeout takes a positive number of seconds");
    req.timeout_secs = t;
    req.timeout_from_user = true;  // the person or CI script running cordon, not the agent
  }
  auto session = Session::Start(SessionOptionsFrom(*a, "exec"), envp);
  if (!session) {
    std::fprintf(stderr, "cordon: cannot start: %s\n", session.error().ToString().c_str());
    return kExitStart;
  }
  req.cwd = (*session)->workspace().root();
  if (a->has("--plan")) {
    // The launch plan as data, without running anything: what bwrap gets, what the shim
    // applies (rlimits, Landlock, seccomp), and what the process record would say.
    auto plan = (*session)->processes().Plan(req);
    if (!plan) {
      std::fprintf(stderr, "cordon: %s\n", plan.error().ToString().c_str());
      return 125;
    }
    Json out = {
        {"bwrap", plan->layout.bwrap.empty() ? Json(nullptr) : Json(BuildBwrapArgv(plan->layout))},
        {"contain", ContainSpecJson(plan->contain)},
        {"confinement", plan->confinement},
        {"stubs", plan->created_stubs}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  auto proc = (*session)->processes().RunForeground(req, nullptr);
  if (!proc) {
    std::fprintf(stderr, "cordon: %s\n", proc.error().ToString().c_str());
    return 125;
  }
  ProcessOutcome o = (*proc)->outcome();
  if (o.error) {
    std::fprintf(stderr, "cordon: %s: %s\n", std::string(CodeName(o.error->code)).c_str(),
                 o.error->message.c_str());
    return o.error->code == Code::kNotFound ? 127 : 125;
  }
  if (o.status == "timeout") {
    std::fprintf(stderr, "cordon: timed out; the sandbox was terminated\n");
    return 124;
  }
  if (o.signal) return 128 + *o.signal;
  return o.exit_code.value_or(125);
}

// The workspace's configured MCP servers; their env and header values join the redaction list.
Result<mcp::McpConfig> LoadSessionMcpConfig(Session& session) {
  const std::string ws = session.workspace().root();
  ASSIGN_OR_RETURN(mcp::McpConfig config, mcp::LoadMcpConfig(mcp::DefaultConfigSources(ws), ws));
  for (const auto& srv : config.servers) {
    for (const auto& [k, v] : srv.env) session.AddRedaction("mcp_config", v);
    for (const auto& [k, v] : srv.headers) session.AddRedaction("mcp_config", v);
  }
  return config;
}

// serve: an MCP server over stdio exposing the granted tools. Logs go to stderr only.
int CmdServe(int argc, char** argv, char** envp) {
  std::string err;
  auto a =
      Parse(argc, argv, 2, With(kSessionOptions, {"--http", "--token-file"}), {"--no-auth"}, &err);
  if (!a) return Usage(err);
  if (!a->positional.empty()) return Usage("serve takes no arguments");
  std::optional<mcp::HttpServeOptions> http;
  if (a->has("--http")) {
    auto o = mcp::ParseListenAddress(a->get("--http"));
    if (!o) return Usage(o.error().message);
    if (a->has("--no-auth") == a->has("--token-file")) {
      return Usage(
          "serve --http needs --token-file FILE (created with a new token when missing) or "
          "--no-auth");
    }
    if (a->has("--token-file")) {
      const std::string path = a->get("--token-file");
      std::ifstream in(path);
      std::string token;
      std::getline(in, token);
      if (token.empty()) {
        token = RandomHex(24);
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || ::write(fd, (token + "\n").data(), token.size() + 1) !=
                          static_cast<ssize_t>(token.size() + 1)) {
          std::fprintf(stderr, "cordon: cannot write token file %s\n", path.c_str());
          return kExitStart;
        }
        ::close(fd);
        std::fprintf(stderr, "cordon: wrote a new bearer token to %s\n", path.c_str());
      }
      o->token = token;
    }
    http = *o;
  }
  auto session = Session::Start(SessionOptionsFrom(*a, "mcp"), envp);
  if (!session) {
    std::fprintf(stderr, "cordon: cannot start: %s\n", session.error().ToString().c_str());
    return kExitStart;
  }
  auto config = LoadSessionMcpConfig(**session);
  if (!config) {
    std::fprintf(stderr, "cordon: mcp config: %s\n", config.error().ToString().c_str());
    return kExitStart;
  }
  if (http) {
    // A configured server at this very address would be this server proxying itself: every
    // tools/list would wait on itself. Skip it, and say so.
    const std::string port = std::to_string(http->port);
    std::erase_if(config->servers, [&](const mcp::ServerConfig& srv) {
      const bool self = srv.url.find("://127.0.0.1:" + port + "/") != std::string::npos ||
                        srv.url.find("://localhost:" + port + "/") != std::string::npos;
      if (self) {
        Json d = {{"server", srv.name}, {"reason", "its URL is this cordon serve itself; skipped"}};
        (*session)->Audit(
            McpDiagnosticRecord{.server = srv.name, .reason = d["reason"].get<std::string>()},
            false);
        std::fprintf(stderr, "cordon: server %s: its URL is this cordon serve itself; skipped\n",
                     srv.name.c_str());
        config->diagnostics.push_back(std::move(d));
      }
      return self;
    });
  }
  int rc = 0;
  {
    // The hub's servers are stopped (and their process records written) before the session ends.
    mcp::McpHub hub(**session, *config);
    std::fprintf(stderr, "cordon: serving MCP on %s for %s (audit log %s)\n",
                 http ? "HTTP" : "stdio", (*session)->workspace().root().c_str(),
                 (*session)->audit_path().c_str());
    rc = http ? mcp::ServeHttp(**session, *http)
              : mcp::ServeStdio(**session, 0, 1, [&hub](std::function<void()> notify) {
                  hub.on_tools_changed = std::move(notify);
                });
  }
  (*session)->Finish();
  return rc;
}

// wrap: one stdio MCP server, confined, proxied with audit records, caps and redaction.
int CmdWrap(int argc, char** argv, char** envp) {
  std::string err;
  auto a = Parse(argc, argv, 2, With(kSessionOptions, {"--network", "--read"}), {}, &err);
  if (!a) return Usage(err);
  if (!a->positional.empty() || a->after_dashdash.empty()) {
    return Usage("wrap needs a server command: cordon wrap [OPTIONS] -- CMD ARGS...");
  }
  ProcessRequest req;
  req.argv = a->after_dashdash;
  if (a->has("--network")) {
    auto mode = ParseNetworkMode(a->get("--network"));
    if (!mode) return Usage(mode.error().message);
    req.network = *mode;
  }
  if (a->has("--read")) {
    for (const auto& r : a->options.at("--read")) {
      char* real = ::realpath(r.c_str(), nullptr);
      if (real == nullptr) return Usage("--read " + r + ": no such path");
      req.extra_read.push_back(real);
      std::free(real);
    }
  }
  auto session = Session::Start(SessionOptionsFrom(*a, "wrap"), envp);
  if (!session) {
    std::fprintf(stderr, "cordon: cannot start: %s\n", session.error().ToString().c_str());
    return kExitStart;
  }
  req.cwd = (*session)->workspace().root();
  int rc = mcp::RunWrap(**session, req, 0, 1);
  (*session)->Finish();
  return rc;
}

// mcp list | test NAME | tools NAME | call NAME TOOL --json J | trust NAME
int CmdMcp(int argc, char** argv, char** envp) {
  std::string err;
  // --json is the arguments of `call`/`probe --call`, and an output flag for the other verbs.
  const std::string first = argc > 2 ? argv[2] : "";
  const bool json_is_flag = first != "call" && first != "probe";
  auto a = json_is_flag ? Parse(argc, argv, 2, With(kSessionOptions, {"--call"}),
                                {"--json", "--json-output"}, &err)
                        : Parse(argc, argv, 2, With(kSessionOptions, {"--json", "--call"}),
                                {"--json-output"}, &err);
  if (!a) return Usage(err);
  if (json_is_flag && a->has("--json")) a->options["--json-output"] = {"true"};
  if (a->positional.empty())
    return Usage("try: mcp list | test NAME | tools NAME | call NAME TOOL --json J | trust NAME");
  const std::string verb = a->positional[0];
  SessionOptions o = SessionOptionsFrom(*a, "mcp-cli");
  if (verb != "call" && o.audit_log.empty()) o.audit_log = DefaultAuditLogPath(NewSessionId());
  auto session = Session::Start(o, envp);
  if (!session) {
    std::fprintf(stderr, "cordon: cannot start: %s\n", session.error().ToString().c_str());
    return kExitStart;
  }
  const std::string ws = (*session)->workspace().root();
  auto config = LoadSessionMcpConfig(**session);
  if (!config) {
    std::fprintf(stderr, "cordon: mcp config: %s\n", config.error().ToString().c_str());
    return kExitStart;
  }
  mcp::McpHub hub(**session, *config);
  auto need = [&](std::size_t n) { return a->positional.size() == n; };
  auto server_or_fail = [&](const std::string& name) -> const mcp::ServerConfig* {
    const mcp::ServerConfig* s = hub.Find(name);
    if (s == nullptr)
      std::fprintf(stderr, "cordon: no enabled server named %s (see cordon mcp list)\n",
                   name.c_str());
    return s;
  };
  if (verb == "list" && need(1)) {
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
    if (a->has("--json-output")) {
      std::cout << DumpJson(out, 2) << std::endl;
    } else {
      for (const auto& s : out) {
        std::cout << s["name"].get<std::string>() << "  enabled  "
                  << s["transport"].get<std::string>() << "  " << s["source"].get<std::string>()
                  << "  " << s["trust"].get<std::string>() << "\n";
      }
    }
    return kExitOk;
  }
  if ((verb == "test" || verb == "tools" || verb == "trust") && need(2)) {
    const mcp::ServerConfig* s = server_or_fail(a->positional[1]);
    if (s == nullptr) return kExitToolError;
    if (verb == "trust") {
      // Trust covers this definition and the tools it lists now. The server starts with the
      // same clamped sandbox as any project server (ConnectServer does not check trust).
      auto client = mcp::ConnectServer(**session, *s);
      if (!client) {
        std::fprintf(stderr, "cordon: %s\n", client.error().ToString().c_str());
        return kExitToolError;
      }
      auto tools = (*client)->ListTools();
      if (!tools) {
        std::fprintf(stderr, "cordon: %s\n", tools.error().ToString().c_str());
        return kExitToolError;
      }
      if (auto st = mcp::Trust(ws, *s, *tools); !st) {
        std::fprintf(stderr, "cordon: %s\n", st.error().ToString().c_str());
        return kExitToolError;
      }
      (*session)->Audit(McpTrustRecord{.server = s->name,
                                       .source = s->source,
                                       .definition_sha256 = s->definition_sha256,
                                       .tools = tools->size()},
                        true);
      std::cout << "trusted " << s->name << " (" << tools->size() << " tools pinned)\n";
      return kExitOk;
    }
    auto tools = hub.Tools(*s);
    if (!tools) {
      std::fprintf(stderr, "cordon: %s: %s\n", s->name.c_str(), tools.error().ToString().c_str());
      return kExitToolError;
    }
    if (verb == "test") {
      auto client = hub.Client(*s);
      Json r = {{"server", s->name},
                {"ready", true},
                {"protocolVersion", (*client)->initialize_result().value("protocolVersion", "")},
                {"tools", tools->first.size()},
                {"hidden_tools", tools->second.size()}};
      std::cout << (a->has("--json-output")
                        ? DumpJson(r, 2)
                        : s->name + ": ready, protocol " + r["protocolVersion"].get<std::string>() +
                              ", " + std::to_string(tools->first.size()) + " tools")
                << std::endl;
      return kExitOk;
    }
    for (const auto& t : tools->first) {
      std::cout << "mcp__" << s->name << "__" << t.value("name", "") << "  "
                << t.value("description", "") << "\n";
    }
    return kExitOk;
  }
  if (verb == "probe" && need(2)) {
    // A small client mode: initialize a Streamable HTTP server at URL, list its tools, and
    // optionally call one (--call NAME --json ARGS).
    mcp::ServerConfig probe;
    probe.name = "probe";
    probe.transport = "streamable_http";
    probe.url = a->positional[1];
    auto client = mcp::ConnectServer(**session, probe);
    if (!client) {
      std::fprintf(stderr, "cordon: %s\n", client.error().ToString().c_str());
      return kExitToolError;
    }
    Json out = {{"protocolVersion", (*client)->initialize_result().value("protocolVersion", "")},
                {"serverInfo", (*client)->initialize_result().value("serverInfo", Json::object())}};
    auto tools = (*client)->ListTools();
    out["tools"] = Json::array();
    if (tools) {
      for (const auto& t : *tools) out["tools"].push_back(t.value("name", ""));
    }
    if (a->has("--call")) {
      auto args = ParseJsonBounded(a->get("--json", "{}"));
      if (!args) return Usage("--json: " + args.error().message);
      auto r = (*client)->CallTool(a->get("--call"), *args);
      if (!r) {
        std::fprintf(stderr, "cordon: %s\n", r.error().ToString().c_str());
        return kExitToolError;
      }
      out["call"] = *r;
    }
    std::cout << DumpJson(out, 2) << std::endl;
    return kExitOk;
  }
  if (verb == "call" && need(3)) {
    if (server_or_fail(a->positional[1]) == nullptr) return kExitToolError;
    Json result = (*session)->CallJsonText("mcp__" + a->positional[1] + "__" + a->positional[2],
                                           a->get("--json", "{}"));
    std::cout << DumpJson(result) << std::endl;
    return result["isError"].get<bool>() ? kExitToolError : kExitOk;
  }
  return Usage("try: mcp list | test NAME | tools NAME | call NAME TOOL --json J | trust NAME");
}

int CmdDoctor(int argc, char** argv) {
  std::string err;
  auto a = Parse(argc, argv, 2, {}, {"--json"}, &err);
  if (!a) return Usage(err);
  Json report;
  bool ok = RunDoctor(&report, "");
  if (a->has("--json")) {
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
}

int CmdTools(int argc, char** argv, char** envp) {
  std::string err;
  auto a = Parse(argc, argv, 2, With(kSessionOptions, {"--format"}), {}, &err);
  if (!a) return Usage(err);
  if (!a->positional.empty()) return Usage("tools takes no arguments");
  auto format = ParseCatalogFormat(a->get("--format", "mcp"));
  if (!format) return Usage(format.error().message);
  // Listing tools has no side effect, so it opens no session and writes no log.
  auto policy = LoadEffectivePolicy(SessionOptionsFrom(*a, "cli"));
  if (!policy) {
    std::fprintf(stderr, "cordon: cannot start: %s\n", policy.error().ToString().c_str());
    return kExitStart;
  }
  (void)envp;
  Json tools = Json::array();
  for (const ToolSpec* t : GrantedTools(*policy)) tools.push_back(CatalogEntry(*t, *format));
  std::cout << DumpJson(*format == CatalogFormat::kMcp ? Json{{"tools", tools}} : tools, 2)
            << std::endl;
  return kExitOk;
}

int CmdPolicy(int argc, char** argv, char** envp) {
  std::string err;
  auto a = Parse(argc, argv, 2, kSessionOptions, {"--json"}, &err);
  if (!a) return Usage(err);
  if (a->positional.size() != 1 || a->positional[0] != "show") return Usage("try: policy show");
  auto policy = LoadEffectivePolicy(SessionOptionsFrom(*a, "cli"));
  if (!policy) {
    std::fprintf(stderr, "cordon: policy: %s\n", policy.error().ToString().c_str());
    return kExitStart;
  }
  (void)envp;
  Json effective = Json::parse(policy->CanonicalJson());
  Json files = Json::array();
  for (const auto& f : policy->files) {
    files.push_back({{"path", f.path}, {"sha256", f.sha256}, {"layer", f.layer}});
  }
  if (a->has("--json")) {
    std::cout << DumpJson({{"effective", effective},
                           {"decided_by", policy->provenance},
                           {"files", files},
                           {"notes", policy->notes},
                           {"sha256", policy->Sha256()}},
                          2)
              << std::endl;
    return kExitOk;
  }
  std::cout << "# effective policy (sha256 " << policy->Sha256() << ")\n";
  for (const auto& [k, v] : effective["limits"].items()) {
    std::string key = "limits." + k;
    std::cout << key << " = " << v.dump() << "    # " << policy->provenance[key] << "\n";
  }
  std::cout << "scopes.grant = " << effective["scopes"].dump() << "    # "
            << policy->provenance["scopes.grant"] << "\n";
  std::cout << "audit.fsync = \"" << policy->audit_fsync << "\"    # "
            << policy->provenance["audit.fsync"] << "\n";
  std::cout << "redact.values = (" << policy->redact_values.size() << " values, not shown)\n";
  std::cout << "redact.env_names = " << Json(policy->redact_env_names).dump() << "\n";
  std::cout << "\n# files read, in order\n";
  for (const auto& f : policy->files) {
    std::cout << f.layer << "  " << f.path << "  sha256:" << f.sha256 << "\n";
  }
  for (const auto& n : policy->notes) std::cout << "note: " << n << "\n";
  return kExitOk;
}

int CmdAudit(int argc, char** argv) {
  std::string err;
  auto a = Parse(argc, argv, 2, {"--key-file"}, {"--json"}, &err);
  if (!a) return Usage(err);
  if (a->positional.size() != 2) return Usage("try: audit verify LOG | audit show LOG");
  const std::string& verb = a->positional[0];
  const std::string& log = a->positional[1];
  if (verb == "show") {
    auto text = ShowAuditLog(log);
    if (!text) {
      std::fprintf(stderr, "cordon: %s\n", text.error().ToString().c_str());
      return kExitStart;
    }
    std::cout << *text;
    return kExitOk;
  }
  if (verb != "verify") return Usage("unknown audit command " + verb);
  std::optional<std::string> key;
  if (a->has("--key-file")) {
    auto k = ReadKeyFile(a->get("--key-file"));
    if (!k) {
      std::fprintf(stderr, "cordon: %s\n", k.error().ToString().c_str());
      return kExitStart;
    }
    key = *k;
  }
  auto report = VerifyAuditLog(log, key);
  if (!report) {
    std::fprintf(stderr, "cordon: %s\n", report.error().ToString().c_str());
    return kExitStart;
  }
  for (const auto& w : report->warnings) std::cout << "warning: " << w << "\n";
  switch (report->verdict) {
    case VerifyReport::Verdict::kIntact:
      std::cout << "ok: " << report->records << " records, " << report->sessions
                << " sessions, chain " << (key ? "hmac-sha256" : "sha256") << " intact\n";
      return kExitOk;
    case VerifyReport::Verdict::kTornTail:
      std::cout << "torn: " << report->problem << "; the " << report->records
                << " records before it are intact\n";
      return kExitTornTail;
    case VerifyReport::Verdict::kBroken:
      std::cout << "BROKEN at line " << report->first_bad_line << ": " << report->problem << "\n";
      return kExitToolError;
  }
  return kExitToolError;
}

}  // namespace

int RunCli(int argc, char** argv, char** envp) {
  if (argc < 2) return Usage("no command");
  std::string cmd = argv[1];
  try {
    if (cmd == "call") return CmdCall(argc, argv, envp);
    if (cmd == "tools") return CmdTools(argc, argv, envp);
    if (cmd == "exec") return CmdExec(argc, argv, envp);
    if (cmd == "doctor") return CmdDoctor(argc, argv);
    if (cmd == "serve") return CmdServe(argc, argv, envp);
    if (cmd == "wrap") return CmdWrap(argc, argv, envp);
    if (cmd == "mcp") return CmdMcp(argc, argv, envp);
    if (cmd == "policy") return CmdPolicy(argc, argv, envp);
    if (cmd == "audit") return CmdAudit(argc, argv);
    if (cmd == "version" || cmd == "--version") {
      std::cout << "cordon " << kCordonVersion << "\n";
      return kExitOk;
    }
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::cout << kUsage;
      return kExitOk;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cordon: internal error: %s\n", e.what());
    return kExitStart;
  }
  return Usage("unknown command " + cmd);
}

}  // namespace cordon
