// cordon tools: the catalog of tools the policy grants, in a provider's format.
#include <cstdio>
#include <iostream>

#include "cli/common.h"
#include "tools/registry.h"

namespace cordon::cli {

void AddToolsCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    SessionFlags session;
    std::string format = "mcp";
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd =
      root.add_subcommand("tools", "print the tool catalog the policy allows")->group("Commands");
  WithChoices(ctx, cmd->add_option("--format", f->format, "the catalog's format (default: mcp)"),
              {"mcp", "openai", "anthropic"},
              [](const std::string& v) -> Status { return Checked(ParseCatalogFormat(v)); });
  AddSessionFlags(cmd, &f->session);
  ctx.run[cmd] = [f]() -> int {
    CatalogFormat format = *ParseCatalogFormat(f->format);
    // Listing tools has no side effect, so it opens no session and writes no log.
    auto policy = LoadEffectivePolicy(SessionOptionsFrom(f->session, "cli"));
    if (!policy) {
      std::fprintf(stderr, "cordon: cannot start: %s\n", policy.error().ToString().c_str());
      return kExitStart;
    }
    Json tools = Json::array();
    for (const ToolSpec* t : GrantedTools(*policy)) tools.push_back(CatalogEntry(*t, format));
    std::cout << DumpJson(format == CatalogFormat::kMcp ? Json{{"tools", tools}} : tools, 2)
              << std::endl;
    return kExitOk;
  };
}

}  // namespace cordon::cli
