// The registry and the catalog renderings for MCP, OpenAI and Anthropic tool formats.
#include "tools/registry.h"

#include <cstdlib>

#include "runner/mask.h"

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

const std::vector<ToolSpec>& BuiltinTools() {
  static const std::vector<ToolSpec> tools = {
      MakeFindFilesTool(),     MakeListSearchableFilesTool(),
      MakeReadFileRangeTool(), MakeSearchTextTool(),
      MakeCreateFileTool(),    MakeReplaceRangeTool(),
      MakeWritePatchTool(),    MakeRunShellTool(),
      MakeProcessListTool(),   MakeProcessOutputTool(),
      MakeProcessCancelTool()};
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
  result["content"] = Json::array({{{"type", "text"}, {"text", DumpJson(structured)}}});
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
  if (IsProtectedPath(rel)) {
    return Fail(Code::kDeniedByPolicy,
                rel +
                    " is a protected path (.git/config, .git/hooks, .cordon/, .thndrs/, "
                    ".mcp.json, .vscode/, .claude/, shell dotfiles) and cannot be written");
  }
  return rel;
}

}  // namespace cordon
