// The policy model: limits, scopes, redaction values and audit durability, with the file and
// line that decided each value and each list entry. Loaded from TOML layers whose lists extend
// the ones below ("!entry" removes); a project layer may only tighten.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/fsync_mode.h"
#include "core/network_mode.h"
#include "core/redact.h"
#include "policy/approvals.h"

namespace cordon {

// Scopes a tool may need. Their names are stable and appear in policy files.
// diagnostics:read (the supervisor's own views) and net:read (read_url) are off by default.
inline constexpr std::string_view kAllScopes[] = {
    "fs:read",         "fs:write", "process:run",      "process:operate",
    "session:operate", "mcp:call", "diagnostics:read", "net:read"};
bool IsKnownScope(std::string_view scope);

struct Limits {
  std::int64_t timeout_secs = 30;
  // Limits on confined processes (cgroup where delegable, rlimits otherwise).
  std::int64_t memory_bytes = 4ll << 30;
  std::int64_t pids = 512;
  std::int64_t cpu_secs = 600;
  std::int64_t file_size_bytes = 1ll << 30;
  std::int64_t open_files = 1024;
  std::int64_t max_output_bytes = 65536;
  std::int64_t max_results = 1000;
  std::int64_t max_line_chars = 2000;
  std::int64_t max_read_lines = 2000;
  std::int64_t max_file_bytes = 16 << 20;
  std::int64_t max_input_bytes = 8 << 20;
  // `serve`: answers held for a client that has not read them, plus what running calls may
  // still return (each at its output cap); past it new calls are refused (output_backlog).
  std::int64_t max_pending_output_bytes = 64ll << 20;
};

enum class WorkspaceMode { kAuto, kStaged, kDirect };
inline constexpr EnumName<WorkspaceMode> kWorkspaceModeNames[] = {
    {WorkspaceMode::kAuto, "auto"},
    {WorkspaceMode::kStaged, "staged"},
    {WorkspaceMode::kDirect, "direct"}};

std::string_view NetworkModeName(NetworkMode mode);
Result<NetworkMode> ParseNetworkMode(std::string_view name);
// Higher is stricter: none > loopback > proxy > allow.
int NetworkStrictness(NetworkMode mode);

struct FilesystemPolicy {
  // Paths as written in policy files; ${WORKSPACE} and ~ are expanded by ExpandPath at launch.
  std::vector<std::string> read;
  std::vector<std::string> write;
  std::vector<std::string> deny;
  // Names protected in every writable root besides the built-in ones (IsProtectedPath):
  // never written by a file tool, swept out of the workspace when a process creates them.
  std::vector<std::string> protected_names;
  // `user.*` extended attributes a file the staged workspace made keeps on the host: exact
  // names, or a prefix ending in ".*" (XattrAllowed). Empty: none. A grant: a project file may
  // only remove entries. trusted.*, security.* and system.* names are refused when the file
  // loads.
  std::vector<std::string> xattr_allow;
};

// [env]: what a confined process gets of the environment beyond the fixed sandbox variables
// (runner/environment.h). A project layer may only remove: drop pass entries, add deny entries;
// its `set` entries are refused with a note.
struct EnvPolicy {
  // Variable names passed from the caller's environment. "NAME*" is a prefix, which never
  // matches a secret-looking name (Redactor::IsSecretName): those pass only when named exactly.
  std::vector<std::string> pass;
  std::vector<std::string> deny;           // never passed from the caller, never set; "NAME*" too
  std::map<std::string, std::string> set;  // NAME = "value", set in every confined process
  bool empty() const { return pass.empty() && deny.empty() && set.empty(); }
};
// A variable name ([A-Za-z_][A-Za-z0-9_]*), or with `allow_prefix` such a name followed by "*".
bool IsEnvName(std::string_view name, bool allow_prefix = false);
// Whether `name` matches an entry of an [env] list: the same name, or a "PREFIX*" entry.
bool EnvEntryMatches(std::string_view entry, std::string_view name);
// Whether a commit installs the extended attribute `name` of a file the sandbox made, by
// `allow` (filesystem.xattr_allow): a `user.` name equal to an entry or under a "PREFIX.*" entry.
// The overlay's own marks (user.overlay.*) and every other namespace never are.
bool XattrAllowed(std::string_view name, std::span<const std::string> allow);

// The workspace walk that finds every git directory and protected name refuses a launch
// past this many entries (sandbox.max_scan_entries raises it).
inline constexpr std::int64_t kDefaultMaxScanEntries = 2'000'000;

// A per-tool section ([tools.NAME]): limit overrides, a network mode, and egress rules that
// add to the [network] ones for this tool (same syntax and merge rules; entry provenance under
// "tools.NAME.allow_domains" and so on).
struct ToolOverride {
  std::map<std::string, std::int64_t> limits;
  std::optional<NetworkMode> network;
  std::vector<std::string> allow_domains;  // kGrants: a project file may only remove
  std::vector<std::string> deny_domains;   // kDenies: a project file may add
  std::vector<std::string> presets;        // kGrants
};

// [network] egress keys (network mode "proxy"; the entry syntax is policy/egress.h's). Entries
// are kept normalised (DomainRule::text, ResolveEntry as "name=addr,addr").
struct EgressLists {
  std::vector<std::string> allow_domains;  // kGrants
  std::vector<std::string> deny_domains;   // kDenies
  std::vector<std::string> presets;        // kGrants: names from EgressPresets()
  std::vector<std::string> resolve;        // kUserOnly: never from a project file
  bool empty() const {
    return allow_domains.empty() && deny_domains.empty() && presets.empty() && resolve.empty();
  }
};

// Where a policy file sits in the merge order; kProject is the tighten-only workspace file.
enum class PolicyLayer { kShipped, kSystem, kUser, kCli, kProject };
inline constexpr EnumName<PolicyLayer> kPolicyLayerNames[] = {
    {PolicyLayer::kShipped, "shipped"}, {PolicyLayer::kSystem, "system"},
    {PolicyLayer::kUser, "user"},       {PolicyLayer::kCli, "cli"},
    {PolicyLayer::kProject, "project"},
};
// Records and `policy show` print a layer by its name.
void to_json(nlohmann::json& j, PolicyLayer layer);
inline std::ostream& operator<<(std::ostream& out, PolicyLayer layer) {
  return out << Name(kPolicyLayerNames, layer);
}

struct PolicyFile {
  std::string path;
  std::string sha256;
  PolicyLayer layer = PolicyLayer::kShipped;
};

struct Policy {
  Limits limits;
  std::set<std::string> scopes;
  std::vector<std::string> redact_values;
  std::vector<std::string> redact_env_names;
  // [redact] credential_stores: the user's credential stores (~/.aws, ~/.netrc, ...), read at
  // session start for the secret values they hold (workspace/credential_stores.h). A project
  // may only add; every store also joins [filesystem] deny.
  std::vector<std::string> redact_credential_stores;
  // [redact] secret_words: the words that name a secret (password, token, api_key, ...), written
  // into every rule that says "{secret_words}" (ExpandSecretWords). A project may only add.
  std::vector<std::string> redact_secret_words;
  // [[redact.rules]]: the secret detectors (policies.d/10-secrets.toml and any layer's own),
  // compiled and their examples checked once every layer is read. A later layer's rule with
  // the same id replaces the earlier one; a project file may only add new ids.
  std::vector<RedactRule> redact_rules;
  // [redact] rule_files: rule files in the gitleaks format (policy/gitleaks.h), absolute or `~`
  // (a relative entry is resolved against the policy file that names it). A project may only
  // add. Their rules join redact_rules when every layer is read; an id a rule already has is
  // taken as "gitleaks:<id>".
  std::vector<std::string> redact_rule_files;
  struct RuleFileCount {
    std::string path;  // as read (~ expanded)
    std::size_t loaded = 0, skipped = 0;
  };
  std::vector<RuleFileCount> redact_rule_file_counts;  // one per rule file, in order
  std::shared_ptr<const RedactRules> compiled_redact_rules;
  // [redact] scan_files: find the workspace's secret files at session start
  // (workspace/secret_files.h). Only a layer the user controls may turn it off.
  bool redact_scan_files = true;
  FsyncMode audit_fsync = FsyncMode::kPerCall;
  // --- checkpoint: [audit] signing_key, checkpoint_records, checkpoint_seconds ---
  std::string audit_signing_key;  // empty: none (or --audit-signing-key)
  std::int64_t audit_checkpoint_records = 1000;
  std::int64_t audit_checkpoint_seconds = 60;
  // [audit] file_changes: each process record lists what it changed in the writable roots
  // (docs/adr/0004-change-records.md). A project file cannot turn it off.
  bool audit_file_changes = true;
  // [audit] arguments = "redacted" (default) | "hashed": with hashed, tool_started.args and
  // process.argv keep each argument's SHA-256, length and shape, never its text
  // (audit/arguments.h). A project file may choose hashed, never go back to redacted.
  bool audit_arguments_hashed = false;
  // [audit] before_images, before_images_max_file_bytes, before_images_max_session_bytes: the
  // file tools and the staged commit keep what a file held before they replace or delete it, in
  // cordon's state directory, for `cordon audit diff` (core/before_images.h). Only a layer the
  // user controls sets them: a project file's are ignored, with a note.
  bool audit_before_images = false;
  std::int64_t audit_before_images_max_file_bytes = 1 << 20;
  std::int64_t audit_before_images_max_session_bytes = 64 << 20;
  // [[approvals.rules]] (policy/approvals.h, docs/policy.md "Approvals"), in layer order, each
  // with its file:line and layer. A later layer other than the project's replaces a rule by id
  // (approvals.remove drops one); a project file only adds ask and deny rules.
  std::vector<ApprovalRule> approval_rules;
  // [approvals] timeout_secs: how long a question waits for its answer; held_days: how long a
  // change held for approval waits before it goes to the quarantine.
  std::int64_t approvals_timeout_secs = 300;
  std::int64_t approvals_held_days = 7;
  FilesystemPolicy filesystem;
  EnvPolicy env;  // [env]
  NetworkMode network = NetworkMode::kNone;
  EgressLists egress;                     // [network] allow_domains, deny_domains, presets, resolve
  std::vector<std::string> seccomp_deny;  // plain syscalls denied with EPERM ([seccomp] deny)
  bool allow_weaker_sandbox = false;      // [sandbox] allow_weaker: Landlock+seccomp without bwrap
  // [sandbox] workspace (docs/adr/0006-staged-workspace.md): how a writable root is shown to the
  // sandbox. kAuto stages where the host can, kStaged requires it (a launch without it fails
  // closed), kDirect binds it directly with the sweep. A project file may only require staging.
  WorkspaceMode workspace_mode = WorkspaceMode::kAuto;
  // [sandbox] warm = "on" | "off": serve's foreground calls run in a warm sandbox
  // (docs/adr/0008-warm-sandbox.md).
  bool warm = true;
  std::int64_t max_scan_entries = kDefaultMaxScanEntries;  // [sandbox] max_scan_entries
  // [sandbox] allow_dangerous_workspace (or --allow-dangerous-workspace): `/` or $HOME may be
  // a writable workspace. Off, they are refused for writing (denied_by_policy).
  bool allow_dangerous_workspace = false;
  // cordon's own files (configuration, policy layers, trust store, state, audit log, keys):
  // absolute, canonical paths the session fills in (runner/mask.h), never a policy file. No
  // confined process and no file tool reads or writes at or below one of them.
  std::vector<std::string> own_paths;
  std::map<std::string, ToolOverride> tools;
  std::vector<PolicyFile> files;
  // key ("limits.timeout_secs") -> where its value came from ("policies.d/00-default.toml:4").
  // For a list key, the last file that edited the list.
  std::map<std::string, std::string> provenance;
  // list key ("filesystem.read") -> entry -> the file:line that added it (the first one, when
  // several layers name it).
  std::map<std::string, std::map<std::string, std::string>> entry_provenance;
  // Things the loader noticed but did not apply, e.g. a project file trying to raise a limit.
  std::vector<std::string> notes;
  // What every command says on stderr as it starts (cli/common.h): a layer above the shipped
  // one whose [scopes] grant leaves the agent scopes its list does not name, or adds scopes the
  // shipped policy does not grant. Each warning is about the effective policy, not a refusal.
  std::vector<std::string> warnings;
  // Where [scopes] only fixed the set ("" when no layer did): after it, a layer may only narrow
  // the scopes (grant cannot add; a later only keeps what both name).
  std::string scopes_only_where;
  // The scopes after the shipped layer, once it has loaded (LoadPolicy).
  std::optional<std::set<std::string>> shipped_scopes;

  bool Grants(std::string_view scope) const { return scopes.count(std::string(scope)) > 0; }
  // Limits and network for one tool: the global values with its [tools.NAME] overrides.
  Limits LimitsFor(std::string_view tool) const;
  NetworkMode NetworkFor(std::string_view tool) const;
  // The canonical JSON of the effective values (not provenance), and its SHA-256.
  std::string CanonicalJson() const;
  std::string Sha256() const;
};

// Which way a list's entries point. A project layer may only tighten: it may remove from a
// kGrants list (filesystem.read, scopes.grant) and add to a kDenies list (filesystem.deny).
// A kUserOnly list (network.resolve) is not a project file's to edit at all: its entries are
// refused there with a note.
enum class ListPolarity { kGrants, kDenies, kUserOnly };

// One list key of a policy file. Every list key merges the same way (MergeList in policy.cc):
// a layer's plain entries extend the list below, "!entry" removes one, "!!x" adds a literal
// "!x"; the result keeps first-seen order without duplicates.
struct ListKey {
  std::string_view section;  // "filesystem"
  std::string_view key;      // "read"
  ListPolarity polarity;
  // Before lists merged, a layer setting this key replaced the list below (a project layer
  // narrowed kGrants lists to a subset). Such files get a note when their meaning changed.
  bool replaced_before;
  bool secret;  // entries are never shown (redact.values), only counted with their sources
  std::vector<std::string> (*get)(const Policy&);
  void (*set)(Policy&, std::vector<std::string>);
  // Validates one entry (without its "!") and may normalise it in place (a domain rule's lower
  // case): an empty string, or why it is refused.
  std::string (*check)(const std::string& key_name, std::string& entry);

  std::string Name() const { return std::string(section) + "." + std::string(key); }
};
// All list keys, in the order `policy show` prints them.
std::span<const ListKey> ListKeys();

// Where policy layers come from, in merge order.
struct PolicySources {
  std::vector<std::string> dirs;            // shipped, system, user policies.d (lexical per dir)
  std::vector<std::string> extra_files;     // --policy FILE, in order
  std::optional<std::string> project_file;  // ${WORKSPACE}/.cordon/policy.toml: tighten-only
};

// The default sources: the shipped dir, /etc/cordon/policies.d, $XDG_CONFIG_HOME/cordon/policies.d.
PolicySources DefaultPolicySources(const std::string& shipped_dir, const std::string& workspace);

// Whether an entry of `deny` (as written: "~/.kube") is `path` or a directory above it.
bool DenyCovers(const std::vector<std::string>& deny, const std::string& path);

Result<Policy> LoadPolicy(const PolicySources& sources);

// Applies one TOML text as a layer. `tighten_only` is the project rule. Exposed for tests.
Status ApplyPolicyText(Policy& policy, std::string_view text, const std::string& source_name,
                       bool tighten_only);
// As above, naming the layer (its approval rules are evaluated as that layer's).
Status ApplyPolicyText(Policy& policy, std::string_view text, const std::string& source_name,
                       PolicyLayer layer);

// Expands ${WORKSPACE} and a leading ~ (the invoking user's HOME) in a policy path.
std::string ExpandPath(std::string_view path, const std::string& workspace,
                       const std::string& home);

// Paths inside a writable workspace that the agent may never write, at any depth: .git/config,
// .git/hooks, .gitmodules, .cordon/, .thndrs/, the editor and agent configs that run code when
// a project opens (.vscode/, .devcontainer/, .devcontainer.json, .idea/, .cursor/, .claude/,
// .gemini/, .zed/, .helix/, .nvim.lua, .nvimrc, .exrc, .vimrc, .lazy.lua, .aider.conf.yml),
// .mcp.json, .envrc, shell dotfiles, and each of `extra_names`
// (filesystem.protected_names). `rel` is a normalized workspace-relative path. The one
// definition behind the file tools' refusal and the workspace sweep (workspace/guard).
// A `.git` that does not exist yet is the other half of the rule (CreatesGitDir).
bool IsProtectedPath(std::string_view rel, std::span<const std::string> extra_names = {});
// The built-in protected names, for messages and docs.
std::string ProtectedNamesText();

}  // namespace cordon
