// What the commands share: session flags, starting a session, usage errors, the command tree.
#pragma once

#include <CLI/CLI.hpp>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "core/error.h"
#include "mcp/config.h"
#include "policy/egress.h"
#include "policy/policy.h"
#include "session/session.h"

namespace cordon::cli {

// Facts about the command tree that CLI11 has no place for: which commands take a command
// after "--", and the accepted values of an option (for completions). Every command shares the
// root's formatter, so any App reaches them; its usage line states the trailing command.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override;
  std::set<const CLI::App*> takes_command;
  std::map<const CLI::Option*, std::vector<std::string>> choices;
};

const Formatter& TreeFacts(const CLI::App& app);

// The parsed command line, and what each command runs once its flags are parsed.
struct Context {
  char** envp = nullptr;
  std::vector<std::string> command;  // the words after "--" (exec, wrap)
  std::map<const CLI::App*, std::function<int()>> run;
  std::shared_ptr<Formatter> facts;
};

// "cordon mcp list" for the App of `mcp list`.
std::string CommandPath(const CLI::App& app);
// The code a usage error (or any failure of cordon itself) exits with under `app`: 125 under
// exec and wrap, whose own code is the command's, else `otherwise`.
int OwnFailureCode(const CLI::App& app, int otherwise);
// Prints "cordon: WHY", the command's usage line and where to find more; returns the exit code.
int UsageError(const CLI::App& app, const std::string& why);

// A subcommand whose help and usage end with "-- CMD [ARGS...]".
void TakesCommand(Context& ctx, CLI::App* app);
// An option accepting one of `names`; `parse` is the one that decides, with its own message.
// The names --network accepts, from NetworkMode's one name table.
std::vector<std::string> NetworkModeChoices();
CLI::Option* WithChoices(Context& ctx, CLI::Option* opt, std::vector<std::string> names,
                         std::function<Status(const std::string&)> parse);

// Only whether `r` succeeded: for validators built on the Parse functions.
template <typename T>
Status Checked(const Result<T>& r) {
  if (!r) return std::unexpected(r.error());
  return {};
}

struct SessionFlags {
  std::string workspace = ".";
  std::string audit_log;
  std::string audit_key_file;
  std::string audit_signing_key;  // --- checkpoint ---
  std::string audit_witness;
  std::vector<std::string> policy_files;
  bool allow_dangerous_workspace = false;
  std::vector<std::string> tags;  // --tag (serve, exec, call)
  bool non_interactive = false;   // --non-interactive: every approval `ask` is refused at once
};
void AddSessionFlags(CLI::App* app, SessionFlags* flags);
// --tag TAG (may be repeated): the session's tags, checked by NormalizeSessionTag.
void AddTagFlag(CLI::App* app, SessionFlags* flags);
// The shipped policy layer: PREFIX/share/cordon/policies.d beside an installed cordon
// (PREFIX/bin/cordon), else the directory built in (the source tree's, for a build-tree binary).
std::string ShippedPolicyDir();
SessionOptions SessionOptionsFrom(const SessionFlags& flags, const std::string& client);
Result<Policy> LoadEffectivePolicy(const SessionOptions& options);
// The policy's warnings (a [scopes] grant that leaves more than it names), each a line on
// stderr: said at the start of every command that loads the policy.
void PrintPolicyWarnings(const Policy& policy);
// Starts a session, or says why not on stderr and yields `exit_code`.
std::expected<std::unique_ptr<Session>, int> StartSessionOr(int exit_code,
                                                            const SessionOptions& options,
                                                            char** envp);

// --read DIR and --write DIR (repeatable) for exec and wrap.
struct GrantFlags {
  std::vector<std::string> read, write;
};
void AddGrantFlags(CLI::App* app, GrantFlags* flags);
// Each flag's path resolved and checked (runner/grants.h) into req.grants: a missing path is
// not_found, `/`, $HOME or an ancestor of $HOME is denied_by_policy.
Status AddGrants(const GrantFlags& flags, ProcessRequest& req);

// --allow-domain, --deny-domain, --allow-preset and --resolve (repeatable) for exec and wrap.
struct EgressFlags {
  std::vector<std::string> allow, deny, presets, resolve;
  bool empty() const { return allow.empty() && deny.empty() && presets.empty() && resolve.empty(); }
};
// Adds the options; each value is checked as it is parsed, so a bad one is a usage error naming
// the flag and the value (--help lists the presets with what each one allows).
void AddEgressFlags(Context& ctx, CLI::App* app, EgressFlags* flags);
// What the egress flags decide: the rules they add (sources "--allow-domain", ...) and the
// network mode they imply. --allow-domain or --allow-preset without --network mean
// `--network proxy`; with --network none, loopback or allow any egress flag is invalid_input
// (the rules would not apply). `network_flag` is --network's value, empty when not given.
struct EgressChoice {
  std::optional<NetworkMode> network;  // set: use it for the request (req.network)
  EgressExtra extra;                   // the rules to add to the policy's (EgressFor)
};
Result<EgressChoice> EgressFromFlags(const EgressFlags& flags, const std::string& network_flag);

// What a confined process gets beyond the policy, for exec, wrap and serve (one definition):
// --network, --read, --write, the egress flags and --env.
struct ProcessFlags {
  std::string network;  // empty: the policy's network mode
  GrantFlags grants;
  EgressFlags egress;
  std::vector<std::string> env;
};
// Adds the options; `network_help` says whose network --network sets.
void AddProcessFlags(Context& ctx, CLI::App* app, ProcessFlags* flags,
                     const std::string& network_help);
// Applies them to `req` (extra_env, network, egress_extra, grants). A bad value or a grant that
// cannot be had is the caller's mistake: the error's message is what to say with the usage line.
Status ApplyProcessFlags(const ProcessFlags& flags, char** envp, ProcessRequest& req);

// The workspace's configured MCP servers; their env and header values join the redaction list.
Result<mcp::McpConfig> LoadSessionMcpConfig(Session& session);

// --env NAME and --env NAME=VALUE (exec, wrap), in order: NAME takes cordon's own value, and
// is left out (said on stderr) when cordon has none, as `docker run -e NAME` does. A bad name
// is invalid_input.
Result<std::vector<std::pair<std::string, std::string>>> EnvFromFlags(
    const std::vector<std::string>& flags, char** envp);
// Adds the --env option to `cmd`.
void AddEnvFlag(CLI::App* cmd, std::vector<std::string>* flags);
// Values given with --env whose names look secret join the session's redactor: they reach the
// command, never a record or a result.
void RedactEnvValues(Session& session, const std::vector<std::pair<std::string, std::string>>& env);
// cordon's exit code when a termination signal (SIGINT, SIGTERM, SIGHUP) stopped the command:
// 128 + N, or `otherwise` when none arrived (core/signals.h).
int ExitCodeAfterSignal(int otherwise);

// A --json argument: the text itself, "@-" for standard input, or "@FILE".
Result<std::string> ReadJsonArgument(const std::string& arg);

// One registrar per command file.
void AddCallCommand(CLI::App& root, Context& ctx);
void AddExecCommand(CLI::App& root, Context& ctx);
void AddServeCommand(CLI::App& root, Context& ctx);
void AddWrapCommand(CLI::App& root, Context& ctx);
void AddMcpCommand(CLI::App& root, Context& ctx);
void AddDoctorCommand(CLI::App& root, Context& ctx);
void AddToolsCommand(CLI::App& root, Context& ctx);
void AddPolicyCommand(CLI::App& root, Context& ctx);
void AddApprovalsCommand(CLI::App& root, Context& ctx);
void AddAuditCommand(CLI::App& root, Context& ctx);
void AddSetupCommand(CLI::App& root, Context& ctx);
// The hidden `_generate`: completions, man page and the command list, from this same tree.
void AddGenerateCommand(CLI::App& root, Context& ctx);

}  // namespace cordon::cli
