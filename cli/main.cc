// cordon: the supervisor binary. Builds the command tree (CLI11, one file per command), parses,
// and runs the chosen command; usage errors and exit codes are decided here and in common.cc.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string_view>
#include <vector>

#include "cli/common.h"
#include "core/version.h"

namespace cordon::cli {
namespace {

// The command CLI11 reached: where a usage error belongs, and which command runs.
const CLI::App* Deepest(const CLI::App& app) {
  const CLI::App* at = &app;
  for (auto subs = at->get_subcommands(); !subs.empty(); subs = at->get_subcommands())
    at = subs.front();
  return at;
}

// Edit distance, for the option a mistyped one was meant to be.
std::size_t Distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "unknown option --netwrok; did you mean --network?" for the first word among `extra` that
// looks like an option `at` does not have; nullopt when none does.
std::optional<std::string> UnknownOption(const CLI::App& at,
                                         const std::vector<std::string>& extra) {
  for (const std::string& word : extra) {
    if (word.size() < 2 || word[0] != '-' || word == "-") continue;
    const std::string name = word.substr(0, word.find('='));
    std::string best;
    std::size_t best_distance = std::string::npos;
    for (const CLI::Option* opt : at.get_options()) {
      for (const std::string& l : opt->get_lnames()) {
        const std::string candidate = "--" + l;
        const std::size_t d = Distance(name, candidate);
        if (d < best_distance) {
          best_distance = d;
          best = candidate;
        }
      }
    }
    std::string message = "unknown option " + name;
    // Close enough to be a slip of the keyboard: two edits, or a third of a long name.
    if (!best.empty() && best_distance <= std::max<std::size_t>(2, name.size() / 3))
      message += "; did you mean " + best + "?";
    return message;
  }
  return std::nullopt;
}

// Each command's own exit codes, for its --help (exec, wrap, doctor and audit verify write
// their own): the root's table is about all of them.
std::string ExitCodesFooter(const CLI::App& cmd) {
  const std::string path = CommandPath(cmd);
  std::vector<int> codes = {kExitOk};
  if (path == "cordon call" || path.rfind("cordon mcp ", 0) == 0) codes.push_back(kExitToolError);
  codes.push_back(kExitUsage);
  codes.push_back(kExitStart);
  std::string out = "exit codes:";
  for (const int c : codes) {
    for (const auto& d : kExitCodeDocs) {
      if (d.code != c) continue;
      std::string meaning = d.meaning;
      // The table's "(audit verify: ...)" asides belong to audit verify's page.
      if (const std::size_t aside = meaning.find(" (audit verify"); aside != std::string::npos)
        meaning.erase(aside);
      out += "\n  " + std::to_string(c) + "  " + meaning;
    }
  }
  return out;
}

void SetExitCodeFooters(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_footer().empty() && !sub->get_group().empty()) {
      sub->footer(sub->get_subcommands([](CLI::App*) { return true; }).empty()
                      ? ExitCodesFooter(*sub)
                      : "exit codes: each command's own (" + CommandPath(*sub) +
                            " COMMAND --help)");
    }
    SetExitCodeFooters(*sub);
  }
}

void AddVersionCommand(CLI::App& root, Context& ctx) {
  CLI::App* cmd = root.add_subcommand("version", "print the version")->group("Commands");
  ctx.run[cmd] = [] {
    std::cout << "cordon " << kCordonVersion << "\n";
    return kExitOk;
  };
}

// help [COMMAND...]: the help of a command, found by walking the same tree.
void AddHelpCommand(CLI::App& root, Context& ctx) {
  auto words = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd =
      root.add_subcommand("help", "print the help of cordon or of a command")->group("Commands");
  cmd->add_option("COMMAND", *words, "a command, e.g. `mcp list`");
  ctx.run[cmd] = [words, cmd, root = &root]() -> int {
    CLI::App* at = root;
    for (const auto& w : *words) {
      CLI::App* next = nullptr;
      try {
        next = at->get_subcommand(w);
      } catch (const CLI::OptionNotFound&) {
      }
      if (next == nullptr || next->get_group().empty())
        return UsageError(*cmd, "no command " + CommandPath(*at) + " " + w);
      at = next;
    }
    std::cout << at->get_formatter()->make_help(at, CommandPath(*at), CLI::AppFormatMode::Normal);
    return kExitOk;
  };
}

int Run(int argc, char** argv, char** envp) {
  Context ctx;
  ctx.envp = envp;
  ctx.facts = std::make_shared<Formatter>();
  ctx.facts->column_width(34);
  CLI::App app(
      "cordon runs AI-agent tool calls and commands inside bubblewrap, Landlock, seccomp and "
      "dropped capabilities, and writes a hash-chained audit log.",
      "cordon");
  app.formatter(ctx.facts);
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("cordon ") + kCordonVersion);
  std::string footer =
      "Options end at \"--\"; what follows it is passed on untouched.\n\nexit codes:";
  for (const auto& d : kExitCodeDocs) footer += "\n  " + std::to_string(d.code) + "  " + d.meaning;
  footer += "\n  exec and wrap: the command's own code; cordon's own failures exit 125";

  AddCallCommand(app, ctx);
  AddExecCommand(app, ctx);
  AddServeCommand(app, ctx);
  AddWrapCommand(app, ctx);
  AddMcpCommand(app, ctx);
  AddDoctorCommand(app, ctx);
  AddToolsCommand(app, ctx);
  AddPolicyCommand(app, ctx);
  AddApprovalsCommand(app, ctx);
  AddAuditCommand(app, ctx);
  AddSetupCommand(app, ctx);
  AddVersionCommand(app, ctx);
  AddHelpCommand(app, ctx);
  AddGenerateCommand(app, ctx);
  // Set after the commands: CLI11 gives a subcommand its parent's footer when it is made, and
  // each command's page shows its own exit codes only.
  app.footer(footer);
  SetExitCodeFooters(app);

  // Options end at the first "--": what follows is the command of exec and wrap, never parsed,
  // so `cordon exec -- prog --help` reaches prog.
  std::vector<std::string> words(argv + std::min(argc, 1), argv + argc);
  bool has_command = false;
  if (auto dd = std::find(words.begin(), words.end(), "--"); dd != words.end()) {
    ctx.command.assign(dd + 1, words.end());
    words.erase(dd, words.end());
    has_command = true;
  }
  std::reverse(words.begin(), words.end());  // CLI11 takes its vector last word first
  try {
    app.parse(words);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    // CLI11 reports "frob" in `cordon frob` as a missing subcommand; name the word instead.
    const CLI::App* at = Deepest(app);
    const auto extra = at->remaining();
    // `cordon exec --netwrok none`: name the option, and the one it was likely meant to be.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ||
        dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
      if (auto unknown = UnknownOption(*at, extra)) return UsageError(*at, *unknown);
    }
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !extra.empty())
      return UsageError(*at, "unknown command or argument: " + extra.front());
    // `cordon exec make test`: the command belongs after "--"; say so instead of "not expected".
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr &&
        ctx.facts->takes_command.contains(at))
      return UsageError(*at, std::string(e.what()) + " (the command goes after --: " +
                                 CommandPath(*at) + " [OPTIONS] -- CMD ARGS)");
    return UsageError(*at, e.what());
  }
  const CLI::App* cmd = Deepest(app);
  if (has_command && !ctx.facts->takes_command.contains(cmd))
    return UsageError(*cmd, CommandPath(*cmd) + " takes no command after --");
  auto run = ctx.run.find(cmd);
  if (run == ctx.run.end()) return UsageError(*cmd, "a command is needed");
  try {
    return run->second();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cordon: internal error: %s\n", e.what());
    return OwnFailureCode(*cmd, kExitStart);
  }
}

}  // namespace
}  // namespace cordon::cli

int main(int argc, char** argv, char** envp) {
  // glibc gives each thread that allocates its own arena, up to 8 per core, and an arena keeps
  // what its thread freed: with 30 calls in flight each on its own thread, the launch's passing
  // copies of a call's arguments stayed resident in 16 arenas (bench/call_memory.py: 3.28 MiB
  // per in-flight call for 1 MiB of arguments; 2.52 with two arenas, and the same calls per
  // second in bench/mcp.py). An operator's own MALLOC_ARENA_MAX is kept.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) ::mallopt(M_ARENA_MAX, 2);
  // A block of 64 KiB or more is mapped on its own and unmapped when freed. glibc's default
  // raises that bound up to 32 MiB as large blocks are freed, after which the launch's passing
  // copies of a call's arguments (the plan's argv, the sandbox's spec) stay resident as free
  // heap: 30 calls in flight with 1 MiB of arguments each peaked at 62-66 MiB, and 56-57 with the
  // bound fixed (bench/call_memory.py). An operator's own MALLOC_MMAP_THRESHOLD_ is kept.
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) ::mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  return cordon::cli::Run(argc, argv, envp);
}
