// The registry and the catalog renderings for MCP, OpenAI and Anthropic tool formats.
#include "tools/registry.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>

#include "policy/git_rules.h"
#include "runner/mask.h"
#include "workspace/repo_config.h"

namespace cordon {

std::string_view EffectName(Effect effect) {
  switch (effect) {
    case Effect::kNone:
      return "none";
    case Effect::kFileWrite:
      return "file_write";
    case Effect::kProcess:
      return "process";
  }
  return "none";
}

namespace {

const std::vector<ToolSpec>& BaseTools() {
  static const std::vector<ToolSpec> tools = {
      MakeFindFilesTool(),           MakeListSearchableFilesTool(),
      MakeReadFileRangeTool(),       MakeSearchTextTool(),
      MakeCreateFileTool(),          MakeReplaceRangeTool(),
      MakeWritePatchTool(),          MakeRunShellTool(),
      MakeProcessListTool(),         MakeProcessOutputTool(),
      MakeProcessCancelTool(),       MakeReadUrlTool(),
      MakeSupervisorProcessesTool(), MakeSessionTagTool(),
      MakeMcpServerStatusTool(),     MakeSessionUsageTool(),
      MakeSessionTracesTool(),       MakeSessionDiffTool()};
  return tools;
}

}  // namespace

// The base list with each later group appended from its own function (merges stay apart).
const std::vector<ToolSpec>& BuiltinTools() {
  static const std::vector<ToolSpec> tools = [] {
    std::vector<ToolSpec> all = BaseTools();
    for (ToolSpec& t : MonitorTools()) all.push_back(std::move(t));
    for (ToolSpec& t : ListenerTools()) all.push_back(std::move(t));
    return all;
  }();
  return tools;
}

const ToolSpec* FindTool(std::string_view name) {
  for (const auto& t : BuiltinTools()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<const ToolSpec*> GrantedTools(const Policy& policy) {
  std::vector<const ToolSpec*> out;
  for (const auto& t : BuiltinTools()) {
    if (policy.Grants(t.scope)) out.push_back(&t);
  }
  return out;
}

Result<CatalogFormat> ParseCatalogFormat(std::string_view name) {
  if (name == "mcp") return CatalogFormat::kMcp;
  if (name == "openai") return CatalogFormat::kOpenAi;
  if (name == "anthropic") return CatalogFormat::kAnthropic;
  return Fail(Code::kInvalidInput,
              "unknown catalog format \"" + std::string(name) + "\" (mcp, openai, anthropic)");
}

Json CatalogEntry(const ToolSpec& spec, CatalogFormat format) {
  switch (format) {
    case CatalogFormat::kMcp:
      return {{"name", spec.name},
              {"description", spec.description},
              {"inputSchema", spec.input_schema},
              {"outputSchema", spec.output_schema}};
    case CatalogFormat::kOpenAi:
      return {{"type", "function"},
              {"function",
               {{"name", spec.name},
                {"description", spec.description},
                {"parameters", spec.input_schema},
                {"strict", false}}}};
    case CatalogFormat::kAnthropic:
      return {{"name", spec.name},
              {"description", spec.description},
              {"input_schema", spec.input_schema}};
  }
  return {};
}

Json MakeCallToolResult(Json structured, bool is_error) {
  Json result;
  // The text is what most clients show the model: a command's outcome and output lead it.
  result["content"] = Json::array({{{"type", "text"}, {"text", DumpResultJson(structured)}}});
  result["structuredContent"] = std::move(structured);
  result["isError"] = is_error;
  return result;
}

Json MakeErrorResult(const Error& error) {
  Json structured = {{"error", {{"code", CodeName(error.code)}, {"message", error.message}}}};
  return MakeCallToolResult(std::move(structured), true);
}

Json ErrorOutputSchema() {
  return {{"type", "object"},
          {"properties", {{"code", {{"type", "string"}}}, {"message", {{"type", "string"}}}}},
          {"required", {"code", "message"}},
          {"additionalProperties", false}};
}

void SetOutputSchemas(ToolSpec& spec, Json success_properties, Json required) {
  // Present when secrets were replaced in the result (the session's redaction, SECURITY.md).
  success_properties["redactions"] = {
      {"type", "object"},
      {"properties",
       {{"count", {{"type", "integer"}}},
        {"by_rule", {{"type", "object"}, {"additionalProperties", {{"type", "integer"}}}}}}}};
  spec.success_schema = {{"type", "object"},
                         {"properties", success_properties},
                         {"required", required},
                         {"additionalProperties", false}};
  // MCP output schemas are one object schema; "error" is the failure alternative, and the
  // success fields are all present whenever "error" is absent.
  success_properties["error"] = ErrorOutputSchema();
  spec.output_schema = {{"type", "object"},
                        {"properties", std::move(success_properties)},
                        {"additionalProperties", false}};
}

namespace {

// Inside a git directory only what a commit needs may be written (policy/git_rules.h), and a
// `.git` directory that does not exist may not be made by writing into it.
Status CheckGitRule(const std::string& root, const std::string& rel) {
  if (!GitRuleAllowsWrite(rel)) {
    return Fail(Code::kDeniedByPolicy,
                rel +
                    " is inside a git directory, where only objects/, refs/, logs/, HEAD, "
                    "index, packed-refs, *_HEAD, COMMIT_EDITMSG and their lock files may be "
                    "written (config, hooks, commondir, info and the rest tell git what to run)");
  }
  if (IsGitContentPath(rel)) {
    // A ref written here would move a branch to a commit nobody checked (issue 33): git content
    // is checked when git writes it in a sandbox, at the staged commit or the git view's sync.
    return Fail(Code::kDeniedByPolicy,
                rel +
                    " is git content (a ref, the index, HEAD or packed-refs): git writes it, "
                    "through run_shell, where what it names is checked against the workspace "
                    "rules; the file tools do not");
  }
  for (std::size_t pos = rel.find(".git/"); pos != std::string::npos;
       pos = rel.find(".git/", pos + 1)) {
    if (pos != 0 && rel[pos - 1] != '/') continue;
    struct stat st {};
    const std::string dir = root + "/" + rel.substr(0, pos + 4);
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Fail(Code::kDeniedByPolicy, rel.substr(0, pos + 4) +
                                             " is not an existing git directory: a repository "
                                             "cannot be created with the file tools");
    }
  }
  return {};
}

std::string Home() {
  const char* h = std::getenv("HOME");
  return h != nullptr ? h : "/nonexistent";
}

std::string Absolute(const ToolContext& ctx, const std::string& rel) {
  const std::string& root = ctx.workspace.root();
  return rel == "." ? root : (root == "/" ? "/" : root + "/") + rel;
}

Status CheckNotMasked(const ToolContext& ctx, const std::string& rel) {
  const std::vector<std::string> masked = ToolMaskedRoots(ctx);
  const std::string* hit = UnderAny(Absolute(ctx, rel), masked);
  if (hit == nullptr) return {};
  const bool own = UnderAny(*hit, ctx.policy.own_paths) != nullptr;
  return Fail(Code::kDeniedByPolicy,
              rel + (own ? " is one of cordon's own files (" + *hit +
                               ": configuration, policy, state, audit log or key), which no tool "
                               "may read or write"
                         : " lies under " + *hit + ", which the policy denies (filesystem.deny)"),
              0, rel);
}

}  // namespace

// The one masked set of the sandbox (runner/launch.cc), canonical like the workspace root.
std::vector<std::string> ToolMaskedRoots(const ToolContext& ctx) {
  std::vector<std::string> out = ctx.policy.own_paths;
  const std::string home = Home();
  for (const auto& d : ctx.policy.filesystem.deny) {
    out.push_back(CanonicalPath(ExpandPath(d, ctx.workspace.root(), home)));
  }
  return out;
}

bool HiddenFromTools(const ToolContext& ctx, const std::vector<std::string>& masked,
                     const std::string& rel) {
  return UnderAny(Absolute(ctx, rel), masked) != nullptr;
}

Result<std::string> ResolveReadablePath(const ToolContext& ctx, const std::string& path) {
  ASSIGN_OR_RETURN(std::string rel, ctx.workspace.Relative(path));
  TRY(CheckNotMasked(ctx, rel));
  return rel;
}

Result<std::string> ResolveWritablePath(const ToolContext& ctx, const std::string& path) {
  ASSIGN_OR_RETURN(std::string rel, ctx.workspace.Relative(path));
  if (!ctx.policy.allow_dangerous_workspace) {
    if (auto why = DangerousWorkspaceReason(ctx.workspace.root(), CanonicalPath(Home()))) {
      return std::unexpected(DangerousWorkspaceError(ctx.workspace.root(), *why));
    }
  }
  TRY(CheckNotMasked(ctx, rel));
  if (Status git = CheckGitRule(ctx.workspace.root(), rel); !git)
    return std::unexpected(git.error());
  // HEAD, commondir and gitdir are what make git take a directory for a repository (a bare one
  // needs no `.git`): outside a `.git` directory the file tools never write one, as the sweep
  // quarantines the HEAD of a repository a process makes.
  {
    const std::string base =
        rel.substr(rel.rfind('/') == std::string::npos ? 0 : rel.rfind('/') + 1);
    const bool in_git = rel.rfind(".git/", 0) == 0 || rel.find("/.git/") != std::string::npos;
    if (!in_git && (base == "HEAD" || base == "commondir" || base == "gitdir")) {
      return Fail(Code::kDeniedByPolicy,
                  rel + ": a file named " + base +
                      " outside a .git directory would make git take its directory for a "
                      "repository, whose config host git would obey; it cannot be written");
    }
  }
  // The same definition the workspace guard sweeps by (workspace/guard).
  if (IsProtectedPath(rel, ctx.policy.filesystem.protected_names)) {
    return Fail(Code::kDeniedByPolicy, rel + " is a protected path (" + ProtectedNamesText() +
                                           ", filesystem.protected_names) and cannot be written");
  }
  // What a host repository's own configuration runs or reads (core.hooksPath=.husky: the next
  // `git commit` runs .husky/pre-commit), from the config of the repositories this path is in:
  // the same paths the workspace guard binds and sweeps (workspace/repo_config.h).
  {
    const std::string changed[] = {rel};
    const std::vector<GitConfigPath> executed = RepoExecutedPaths(ctx.workspace.fd(), changed);
    if (const GitConfigPath* hit = RepoExecutedPathOf(rel, executed)) {
      return Fail(Code::kDeniedByPolicy,
                  rel + (rel == hit->path ? std::string() : " lies in " + hit->path + ", which") +
                      " is protected: the repository's git configuration (" + hit->key +
                      ") makes git run or read it on the host; it cannot be written");
    }
  }
  // A `.git` that is not already a directory would be a repository (or a gitdir pointer) the
  // agent planted: refused here as the sweep removes one a process creates.
  for (std::size_t start = 0; start < rel.size();) {
    std::size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    if (rel.compare(start, end - start, ".git") == 0) {
      const std::string git = rel.substr(0, end);
      struct stat st {};
      if (end == rel.size() ||
          ::fstatat(ctx.workspace.fd(), git.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          !S_ISDIR(st.st_mode)) {
        return Fail(Code::kDeniedByPolicy,
                    rel + " would create or replace " + git +
                        ": a git directory the workspace does not have cannot be planted");
      }
    }
    start = end + 1;
  }
  return rel;
}

}  // namespace cordon
