// Session flags, session start, usage errors and the usage line, shared by every command.
#include "cli/common.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <tuple>

#include "cli/terminal_asker.h"
#include "core/redact.h"
#include "core/signals.h"
#include "runner/mask.h"

#ifndef CORDON_SHIPPED_POLICY_DIR
#define CORDON_SHIPPED_POLICY_DIR "/usr/share/cordon/policies.d"
#endif

namespace cordon::cli {

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

std::string Formatter::make_usage(const CLI::App* app, std::string) const {
  std::string out = "usage: " + CommandPath(*app);
  if (!app->get_options([](const CLI::Option* o) { return o->nonpositional(); }).empty())
    out += " [OPTIONS]";
  for (const CLI::Option* o :
       app->get_options([](const CLI::Option* o) { return o->get_positional(); })) {
    std::string name = o->get_name(true, false);
    if (o->get_items_expected_max() > 1) name += "...";
    out += " " + (o->get_required() ? name : "[" + name + "]");
  }
  if (!app->get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); }).empty())
    out += app->get_require_subcommand_min() > 0 ? " COMMAND" : " [COMMAND]";
  if (takes_command.contains(app)) out += " -- CMD [ARGS...]";
  return out + "\n";
}

const Formatter& TreeFacts(const CLI::App& app) {
  return dynamic_cast<const Formatter&>(*app.get_formatter());
}

std::string CommandPath(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* p = app.get_parent(); p != nullptr; p = p->get_parent())
    path = p->get_name() + " " + path;
  return path;
}

int OwnFailureCode(const CLI::App& app, int otherwise) {
  const Formatter& facts = TreeFacts(app);
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) {
    if (facts.takes_command.contains(a)) return kExitCordonFailed;
  }
  return otherwise;
}

int UsageError(const CLI::App& app, const std::string& why) {
  std::fprintf(stderr, "cordon: %s\n%sRun '%s --help' for more.\n", why.c_str(),
               TreeFacts(app).make_usage(&app, "").c_str(), CommandPath(app).c_str());
  return OwnFailureCode(app, kExitUsage);
}

void TakesCommand(Context& ctx, CLI::App* app) { ctx.facts->takes_command.insert(app); }

std::vector<std::string> NetworkModeChoices() {
  std::vector<std::string> names;
  for (const auto& entry : kNetworkModeNames) names.emplace_back(entry.name);
  return names;
}

CLI::Option* WithChoices(Context& ctx, CLI::Option* opt, std::vector<std::string> names,
                         std::function<Status(const std::string&)> parse) {
  std::string shown;
  for (const auto& n : names) shown += (shown.empty() ? "" : "|") + n;
  ctx.facts->choices[opt] = std::move(names);
  opt->type_name(shown);
  opt->check(CLI::Validator(
      [parse = std::move(parse)](std::string& value) -> std::string {
        Status st = parse(value);
        return st ? std::string() : st.error().message;
      },
      ""));
  return opt;
}

void AddSessionFlags(CLI::App* app, SessionFlags* f) {
  app->add_option("--workspace", f->workspace, "the workspace (default: the current directory)")
      ->type_name("DIR");
  app->add_option("--audit-log", f->audit_log,
                  "the audit log (default: $XDG_STATE_HOME/cordon/sessions/...)")
      ->type_name("FILE");
  app->add_option("--audit-key-file", f->audit_key_file,
                  "make the audit chain an HMAC-SHA-256 chain keyed by this file")
      ->type_name("FILE");
  app->add_option("--audit-signing-key", f->audit_signing_key,
                  "sign audit checkpoints with this Ed25519 key (cordon audit keygen)")
      ->type_name("FILE");
  app->add_option("--audit-witness", f->audit_witness,
                  "also write each checkpoint to FILE, fd:N or syslog (keep it off the host)")
      ->type_name("WHERE");
  app->add_option("--policy", f->policy_files, "an extra policy layer (may be repeated)")
      ->type_name("FILE");
  app->add_flag("--allow-dangerous-workspace", f->allow_dangerous_workspace,
                "let / or your home directory be a writable workspace (a confined command "
                "could then rewrite your shell startup files, ~/.gitconfig, ...)");
  app->add_flag("--non-interactive", f->non_interactive,
                "ask no one: every approval rule's `ask` is refused at once with "
                "approval_required (as under CI=true)");
}

void AddTagFlag(CLI::App* app, SessionFlags* f) {
  app->add_option("--tag", f->tags,
                  "tag the session (may be repeated): trimmed, one line, at most 64 characters; "
                  "in session_started.tags")
      ->type_name("TAG")
      ->allow_extra_args(false)  // one tag per --tag: `--tag x TOOL` leaves TOOL alone
      ->transform(CLI::Validator(
          [](std::string& v) {
            auto tag = NormalizeSessionTag(v);
            if (!tag) return tag.error().message;
            v = *tag;
            return std::string();
          },
          ""));
}

void AddGrantFlags(CLI::App* app, GrantFlags* f) {
  app->add_option("--read", f->read,
                  "also show this path, read-only (repeatable; not /, $HOME or above it)")
      ->type_name("DIR");
  app->add_option("--write", f->write,
                  "also show this path, writable (repeatable; not /, $HOME or above it)")
      ->type_name("DIR");
}

Status AddGrants(const GrantFlags& f, ProcessRequest& req) {
  const char* home_env = std::getenv("HOME");
  const std::string home = CanonicalPath(home_env != nullptr ? home_env : "/nonexistent");
  for (const auto& [list, write] : {std::pair{&f.read, false}, std::pair{&f.write, true}}) {
    for (const auto& p : *list) {
      ASSIGN_OR_RETURN(PathGrant g, ResolveGrant(p, write, write ? "--write" : "--read", home));
      req.grants.push_back(std::move(g));
    }
  }
  return {};
}

void AddEgressFlags(Context& ctx, CLI::App* app, EgressFlags* f) {
  auto check = [](std::function<Status(const std::string&)> parse) {
    return CLI::Validator(
        [parse = std::move(parse)](std::string& value) -> std::string {
          Status st = parse(value);
          return st ? std::string() : st.error().message;
        },
        "");
  };
  std::string presets, names;
  for (const EgressPreset& p : EgressPresets()) {
    presets += "\n  " + std::string(p.name) + ": " + std::string(p.what);
    names += (names.empty() ? "" : "|") + std::string(p.name);
  }
  app->add_option("--allow-domain", f->allow,
                  "let the command reach NAME through cordon's proxy (repeatable; NAME, *.SUFFIX "
                  "or an address, optionally :PORT, default ports 80 and 443; implies --network "
                  "proxy)")
      ->type_name("NAME")
      ->check(check([](const std::string& v) { return Checked(ParseDomainRule(v, {})); }));
  app->add_option("--deny-domain", f->deny,
                  "never let the command reach NAME (repeatable; beats every allow rule)")
      ->type_name("NAME")
      ->check(check([](const std::string& v) { return Checked(ParseDomainRule(v, {})); }));
  std::vector<std::string> choices;
  for (const EgressPreset& p : EgressPresets()) choices.emplace_back(p.name);
  WithChoices(ctx,
              app->add_option("--allow-preset", f->presets,
                              "allow a package registry's domains and make its cache writable "
                              "(repeatable; implies --network proxy):" +
                                  presets),
              std::move(choices), [names](const std::string& v) -> Status {
                if (FindEgressPreset(v) != nullptr) return {};
                return Fail(Code::kInvalidInput, "\"" + v + "\" is not a preset (" + names + ")");
              });
  app->add_option("--resolve", f->resolve,
                  "connect to NAME at these addresses without a DNS query, and allow those "
                  "addresses (repeatable, like curl's --resolve)")
      ->type_name("NAME=ADDR[,ADDR]")
      ->check(check([](const std::string& v) { return Checked(ParseResolveEntry(v, {})); }));
}

Result<EgressChoice> EgressFromFlags(const EgressFlags& f, const std::string& network_flag) {
  EgressChoice c;
  for (const auto& [list, flag, deny] : {std::tuple{&f.allow, "--allow-domain", false},
                                         std::tuple{&f.deny, "--deny-domain", true}}) {
    for (const std::string& v : *list) {
      auto r = ParseDomainRule(v, flag);
      if (!r)
        return Fail(Code::kInvalidInput, std::string(flag) + " " + v + ": " + r.error().message);
      (deny ? c.extra.deny : c.extra.allow).push_back(std::move(*r));
    }
  }
  for (const std::string& v : f.presets) {
    if (FindEgressPreset(v) == nullptr)
      return Fail(Code::kInvalidInput, "--allow-preset " + v + ": not a preset");
    c.extra.presets.emplace_back(v, "--allow-preset");
  }
  for (const std::string& v : f.resolve) {
    auto e = ParseResolveEntry(v, "--resolve");
    if (!e) return Fail(Code::kInvalidInput, "--resolve " + v + ": " + e.error().message);
    c.extra.resolve.push_back(std::move(*e));
  }
  if (f.empty()) return c;
  if (!network_flag.empty()) {
    ASSIGN_OR_RETURN(NetworkMode mode, ParseNetworkMode(network_flag));
    if (mode != NetworkMode::kProxy) {
      const char* flag = !f.allow.empty()     ? "--allow-domain"
                         : !f.presets.empty() ? "--allow-preset"
                         : !f.deny.empty()    ? "--deny-domain"
                                              : "--resolve";
      return Fail(Code::kInvalidInput, std::string(flag) +
                                           " needs --network proxy, not --network " + network_flag +
                                           " (leave --network out: " + flag + " implies proxy)");
    }
    c.network = mode;
  } else if (!f.allow.empty() || !f.presets.empty()) {
    // Naming a domain to reach is asking for the proxy: without this, the policy's default
    // `none` would make the flag a silent no-op.
    c.network = NetworkMode::kProxy;
  }
  return c;
}

void AddProcessFlags(Context& ctx, CLI::App* app, ProcessFlags* f,
                     const std::string& network_help) {
  WithChoices(ctx, app->add_option("--network", f->network, network_help), NetworkModeChoices(),
              [](const std::string& v) -> Status { return Checked(ParseNetworkMode(v)); });
  AddGrantFlags(app, &f->grants);
  AddEgressFlags(ctx, app, &f->egress);
  AddEnvFlag(app, &f->env);
}

Status ApplyProcessFlags(const ProcessFlags& f, char** envp, ProcessRequest& req) {
  ASSIGN_OR_RETURN(req.extra_env, EnvFromFlags(f.env, envp));
  if (!f.network.empty()) {
    ASSIGN_OR_RETURN(req.network, ParseNetworkMode(f.network));
  }
  // --allow-domain and --allow-preset imply --network proxy; a contradicting --network is the
  // caller's mistake. The rules (egress->extra) join the policy's for this sandbox's proxy.
  ASSIGN_OR_RETURN(EgressChoice egress, EgressFromFlags(f.egress, f.network));
  if (egress.network) req.network = egress.network;
  req.egress_extra = std::move(egress.extra);
  if (auto st = AddGrants(f.grants, req); !st)
    return Fail(st.error().code, st.error().ToString(), st.error().err, st.error().where);
  return {};
}

SessionOptions SessionOptionsFrom(const SessionFlags& f, const std::string& client) {
  SessionOptions o;
  o.workspace = f.workspace;
  o.audit_log = f.audit_log;
  if (!f.audit_key_file.empty()) o.audit_key_file = f.audit_key_file;
  if (!f.audit_signing_key.empty()) o.audit_signing_key = f.audit_signing_key;
  if (!f.audit_witness.empty()) o.audit_witness = f.audit_witness;
  o.policy_files = f.policy_files;
  o.allow_dangerous_workspace = f.allow_dangerous_workspace;
  // cordon's own files that only mcp/ knows of: the trust store and the user's MCP servers.
  o.own_files.push_back(mcp::TrustStorePath());
  for (const auto& [path, project] : mcp::DefaultConfigSources(".").files) {
    if (!project) o.own_files.push_back(path);
  }
  o.shipped_policy_dir = ShippedPolicyDir();
  o.client = client;
  o.tags = f.tags;
  const std::string command = client == "mcp" ? "serve" : client;
  o.asker = AskerFor(command, f.non_interactive);
  o.ask_client = command == "serve" && NoOneToAsk(f.non_interactive).empty();
  return o;
}

Result<Policy> LoadEffectivePolicy(const SessionOptions& o) {
  ASSIGN_OR_RETURN(Workspace ws, Workspace::Open(o.workspace));
  PolicySources sources = DefaultPolicySources(o.shipped_policy_dir, ws.root());
  sources.extra_files = o.policy_files;
  ASSIGN_OR_RETURN(Policy policy, LoadPolicy(sources));
  PrintPolicyWarnings(policy);
  return policy;
}

void PrintPolicyWarnings(const Policy& policy) {
  for (const std::string& w : policy.warnings)
    std::fprintf(stderr, "cordon: warning: %s\n", w.c_str());
}

std::expected<std::unique_ptr<Session>, int> StartSessionOr(int exit_code,
                                                            const SessionOptions& options,
                                                            char** envp) {
  auto session = Session::Start(options, envp);
  if (!session) {
    std::fprintf(stderr, "cordon: cannot start: %s\n", session.error().ToString().c_str());
    return std::unexpected(exit_code);
  }
  PrintPolicyWarnings((*session)->policy());
  return std::move(*session);
}

Result<mcp::McpConfig> LoadSessionMcpConfig(Session& session) {
  const std::string ws = session.workspace().root();
  ASSIGN_OR_RETURN(mcp::McpConfig config, mcp::LoadMcpConfig(mcp::DefaultConfigSources(ws), ws));
  for (const auto& srv : config.servers) {
    for (const auto& [k, v] : srv.env) session.AddRedaction("mcp_config", v);
    for (const auto& [k, v] : srv.headers) session.AddRedaction("mcp_config", v);
  }
  return config;
}

Result<std::vector<std::pair<std::string, std::string>>> EnvFromFlags(
    const std::vector<std::string>& flags, char** envp) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& f : flags) {
    const std::size_t eq = f.find('=');
    const std::string name = f.substr(0, eq);
    if (!IsEnvName(name)) {
      // The name only: the value may be the secret it was meant to carry (a typo'd
      // --env API-TOKEN=...), and this message lands in terminals and CI logs.
      return Fail(Code::kInvalidInput, "--env " + name + (eq == std::string::npos ? "" : "=...") +
                                           ": \"" + name +
                                           "\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
    }
    if (eq != std::string::npos) {
      env.emplace_back(name, f.substr(eq + 1));
      continue;
    }
    const char* value = nullptr;
    for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
      if (std::strncmp(*e, name.c_str(), name.size()) == 0 && (*e)[name.size()] == '=')
        value = *e + name.size() + 1;
    }
    if (value == nullptr) {
      std::fprintf(stderr, "cordon: --env %s: not set in cordon's environment; not passed\n",
                   name.c_str());
      continue;
    }
    env.emplace_back(name, value);
  }
  return env;
}

void AddEnvFlag(CLI::App* cmd, std::vector<std::string>* flags) {
  cmd->add_option("--env", *flags,
                  "pass NAME from cordon's environment, or set NAME=VALUE (repeatable; policy "
                  "[env] sets the defaults)")
      ->type_name("NAME[=VALUE]");
}

void RedactEnvValues(Session& session,
                     const std::vector<std::pair<std::string, std::string>>& env) {
  for (const auto& [name, value] : env) {
    if (Redactor::IsSecretName(name)) session.AddRedaction("env", value);
  }
}

int ExitCodeAfterSignal(int otherwise) {
  const int sig = TerminationSignal();
  return sig != 0 ? kExitSignalBase + sig : otherwise;
}

Result<std::string> ReadJsonArgument(const std::string& arg) {
  if (arg.empty() || arg[0] != '@') return arg;
  if (arg == "@-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(arg.substr(1), std::ios::binary);
  if (!in) return Fail(Code::kInvalidInput, "cannot read " + arg.substr(1));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace cordon::cli
