// The command line as a tree: every command the binary reports answers --help with its own
// usage and rejects a bad option with it; exec/wrap keep 125 for cordon's own failures; words
// after "--" reach the command; --json @-; and `cmake --install` lays out binaries, policies,
// completions and the man page.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "runner/host_probe.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::TempDir;
using testing::WriteFile;

class CliTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_ / "ws/hello.txt", "hello\nworld\n");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
  }
  testing::RunResult Cordon(std::vector<std::string> args, const std::string& stdin_data = {}) {
    args.insert(args.begin(), testing::CordonBin());
    return testing::Run(args, env_, stdin_data);
  }
  // Every command path the binary knows, as it reports them ("exec", "mcp list", ...).
  std::vector<std::vector<std::string>> Commands() {
    auto r = Cordon({"_generate", "commands"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::vector<std::string>> out;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::vector<std::string> path;
      for (std::string w; words >> w;) path.push_back(w);
      out.push_back(path);
    }
    return out;
  }
  static std::string Joined(const std::vector<std::string>& path) {
    std::string s = "cordon";
    for (const auto& w : path) s += " " + w;
    return s;
  }
  TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(CliTreeTest, EveryCommandAnswersHelpWithItsOwnUsage) {
  auto commands = Commands();
  // The tree is the binary's; these few only prove the walk reached into it.
  std::set<std::string> seen;
  for (const auto& c : commands) seen.insert(Joined(c));
  for (const char* known : {"cordon exec", "cordon mcp list", "cordon audit verify"})
    EXPECT_TRUE(seen.contains(known)) << known;
  EXPECT_FALSE(seen.contains("cordon _generate")) << "the generator is hidden";
  commands.push_back({});  // the root
  for (const auto& path : commands) {
    for (const char* flag : {"--help", "-h"}) {
      auto args = path;
      args.push_back(flag);
      auto r = Cordon(args);
      EXPECT_EQ(r.exit_code, 0) << Joined(path) << " " << flag << ": " << r.err;
      EXPECT_TRUE(r.err.empty()) << Joined(path) << ": " << r.err;
      const std::string usage = "usage: " + Joined(path) + " ";
      EXPECT_NE(r.out.find(usage), std::string::npos) << Joined(path) << ":\n" << r.out;
    }
    // `cordon help PATH` prints the same page.
    auto args = path;
    args.insert(args.begin(), "help");
    auto help = Cordon(args);
    EXPECT_EQ(help.exit_code, 0) << Joined(path);
    args = path;
    args.push_back("--help");
    EXPECT_EQ(help.out, Cordon(args).out) << Joined(path);
  }
}

TEST_F(CliTreeTest, EveryCommandRejectsAnUnknownOptionWithItsUsage) {
  for (const auto& path : Commands()) {
    auto args = path;
    args.push_back("--no-such-option");
    auto r = Cordon(args);
    // exec and wrap pass on the command's own code, so cordon's own failures are 125.
    const int want = path[0] == "exec" || path[0] == "wrap" ? 125 : 2;
    EXPECT_EQ(r.exit_code, want) << Joined(path) << ": " << r.err;
    EXPECT_NE(r.err.find("--no-such-option"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("usage: " + Joined(path) + " "), std::string::npos)
        << Joined(path) << ":\n"
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST_F(CliTreeTest, AnUnknownOptionIsNamedWithTheClosestOne) {
  auto r = Cordon({"exec", "--netwrok", "none", "--", "true"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("unknown option --netwrok; did you mean --network?"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("not expected"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage: cordon exec "), std::string::npos) << r.err;
  // The same with =VALUE, a subcommand's own options, and exit 2 outside exec and wrap.
  auto eq = Cordon({"wrap", "--alow-preset=npm", "--", "true"});
  EXPECT_EQ(eq.exit_code, 125) << eq.err;
  EXPECT_NE(eq.err.find("unknown option --alow-preset; did you mean --allow-preset?"),
            std::string::npos)
      << eq.err;
  auto verify = Cordon({"audit", "verify", "x.jsonl", "--requre", "signed"});
  EXPECT_EQ(verify.exit_code, 2) << verify.err;
  EXPECT_NE(verify.err.find("unknown option --requre; did you mean --require?"), std::string::npos)
      << verify.err;
  // Nothing close: named, no guess.
  auto far = Cordon({"tools", "--zzzzzzzz"});
  EXPECT_EQ(far.exit_code, 2) << far.err;
  EXPECT_NE(far.err.find("unknown option --zzzzzzzz"), std::string::npos) << far.err;
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

TEST_F(CliTreeTest, EachCommandsHelpShowsItsOwnExitCodesOnly) {
  // audit verify's outcome codes (4 to 9) belong to its page and the root's table only.
  const std::string verify_only = "a gap record";
  for (const auto& path : Commands()) {
    auto args = path;
    args.push_back("--help");
    auto r = Cordon(args);
    EXPECT_NE(r.out.find("exit"), std::string::npos) << Joined(path) << ":\n" << r.out;
    const bool verify = path == std::vector<std::string>{"audit", "verify"};
    EXPECT_EQ(r.out.find(verify_only) != std::string::npos, verify) << Joined(path) << ":\n"
                                                                    << r.out;
  }
  auto root = Cordon({"--help"});
  EXPECT_NE(root.out.find("audit verify: a gap record"), std::string::npos) << root.out;
  auto call = Cordon({"call", "--help"});
  EXPECT_NE(call.out.find("exit codes:\n  0  success\n  1  the tool returned an error result\n"
                          "  2  usage error"),
            std::string::npos)
      << call.out;
  auto tools = Cordon({"tools", "--help"});
  EXPECT_EQ(tools.out.find("  1  "), std::string::npos) << tools.out;
}

TEST_F(CliTreeTest, UsageErrorsUnderExecAndWrapExit125) {
  const std::string ws = dir_ / "ws", log = dir_ / "a.jsonl";
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"exec"},
                                             {"exec", "--workspace", ws},
                                             {"exec", "--workspace", ws, "--"},
                                             {"exec", "true"},
                                             {"exec", "--network", "sideways", "--", "true"},
                                             {"exec", "--timeout", "0", "--", "true"},
                                             {"exec", "--timeout", "soon", "--", "true"},
                                             {"exec", "--timeout"},
                                             {"wrap"},
                                             {"wrap", "--read", dir_ / "missing", "--", "true"},
                                             {"wrap", "--network", "sideways", "--", "true"}}) {
    auto r = Cordon(args);
    EXPECT_EQ(r.exit_code, 125) << ::testing::PrintToString(args) << r.err;
    EXPECT_NE(r.err.find("usage: cordon " + args[0]), std::string::npos) << r.err;
  }
  // A command given without "--" is told where it goes.
  auto bare = Cordon({"exec", "true"});
  EXPECT_NE(bare.err.find("the command goes after --"), std::string::npos) << bare.err;
  // Could not start (a missing workspace): also cordon's own failure, so 125, not 3.
  auto r = Cordon({"exec", "--workspace", dir_ / "missing", "--audit-log", log, "--", "true"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
  // Elsewhere the same mistakes are exit 2, and words after "--" are refused.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"tools", "--format"},
           {"call", "read_file_range", "--json", "{}", "--", "extra"},
           {"mcp"},
           {"mcp", "frob"},
           {"audit"},
           {"audit", "show"},
           {"policy", "show", "extra"},
           {"help", "frob"}}) {
    auto u = Cordon(args);
    EXPECT_EQ(u.exit_code, 2) << ::testing::PrintToString(args) << u.err;
    EXPECT_NE(u.err.find("usage: cordon"), std::string::npos) << u.err;
  }
}

TEST_F(CliTreeTest, WordsAfterDashDashReachTheCommand) {
  if (FindOnPath("bwrap").empty()) GTEST_SKIP() << "SKIPPED: bwrap is not installed";
  auto r = Cordon({"exec", "--workspace", dir_ / "ws", "--audit-log", dir_ / "a.jsonl", "--", "sh",
                   "-c", "printf '[%s]' \"$@\"", "sh", "--help", "-h", "--version", "--"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[--help][-h][--version][--]");
  // --help before "--" is cordon's, and runs nothing.
  auto help = Cordon({"exec", "--help", "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.out.find("ran"), std::string::npos);
  EXPECT_NE(help.out.find("usage: cordon exec [OPTIONS] -- CMD [ARGS...]"), std::string::npos)
      << help.out;
}

TEST_F(CliTreeTest, JsonFromStdinOrFile) {
  const std::string args = R"({"path":"hello.txt","start_line":2})";
  auto r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log",
                   dir_ / "a.jsonl", "--json", "@-"},
                  args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["structuredContent"]["lines"], Json({"world"}));
  WriteFile(dir_ / "args.json", args);
  auto f = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log",
                   dir_ / "a.jsonl", "--json=@" + (dir_ / "args.json")});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(f.out, r.out);
  auto missing = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--json",
                         "@" + (dir_ / "nope.json")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.json"), std::string::npos) << missing.err;
}

TEST_F(CliTreeTest, VersionThreeWays) {
  auto a = Cordon({"version"}), b = Cordon({"--version"});
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_EQ(b.exit_code, 0);
  EXPECT_EQ(a.out.rfind("cordon ", 0), 0u) << a.out;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(CliTreeTest, InstallLaysOutBinariesPoliciesCompletionsAndManPage) {
  // The build tree holds the binary; install from it into a fresh prefix.
  const std::string build = std::filesystem::path(CORDON_BIN).parent_path().string();
  const std::string prefix = dir_ / "prefix";
  auto inst = testing::Run({"/usr/bin/env", "cmake", "--install", build, "--prefix", prefix});
  ASSERT_EQ(inst.exit_code, 0) << inst.out << inst.err;
  for (const char* f : {"bin/cordon", "bin/cordon-shim", "share/cordon/policies.d/00-default.toml",
                        "share/bash-completion/completions/cordon",
                        "share/zsh/site-functions/_cordon", "share/man/man1/cordon.1"}) {
    EXPECT_TRUE(testing::Exists(prefix + "/" + f)) << f;
  }
  // The installed binary reads the installed policies.
  auto policy = testing::Run(
      {prefix + "/bin/cordon", "policy", "show", "--json", "--workspace", dir_ / "ws"}, env_);
  ASSERT_EQ(policy.exit_code, 0) << policy.err;
  EXPECT_NE(policy.out.find(prefix + "/bin/../share/cordon/policies.d/"), std::string::npos)
      << policy.out;

  const std::string bash_completion = prefix + "/share/bash-completion/completions/cordon";
  auto syntax = testing::Run({"/bin/bash", "-n", bash_completion});
  EXPECT_EQ(syntax.exit_code, 0) << syntax.err;
  // The completion works: subcommands, an option's accepted values, a nested command's options.
  auto complete = [&](const std::string& words) {
    const std::string script = "source '" + bash_completion + "'; COMP_WORDS=(" + words +
                               "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _cordon; "
                               "printf '%s\\n' \"${COMPREPLY[@]}\"";
    auto r = testing::Run({"/bin/bash", "-c", script});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(complete("cordon mc"), "mcp\n");
  EXPECT_EQ(complete("cordon exec --netw"), "--network\n");
  EXPECT_EQ(complete("cordon exec --workspace /tmp --network ''"),
            "none\nloopback\nproxy\nallow\n");
  EXPECT_EQ(complete("cordon mcp li"), "list\n");
  EXPECT_EQ(complete("cordon audit verify --key"), "--key-file\n");

  const std::string man = testing::ReadFile(prefix + "/share/man/man1/cordon.1");
  EXPECT_EQ(man.rfind(".\\\"", 0), 0u);
  EXPECT_NE(man.find(".TH CORDON 1"), std::string::npos);
  EXPECT_NE(man.find(".SH EXIT STATUS"), std::string::npos);
  EXPECT_NE(man.find("cordon mcp list"), std::string::npos);
  if (!FindOnPath("zsh").empty()) {
    const std::string zsh_completion = prefix + "/share/zsh/site-functions/_cordon";
    auto z = testing::Run({FindOnPath("zsh"), "-n", zsh_completion});
    EXPECT_EQ(z.exit_code, 0) << z.err;
    // The completion system's functions, stubbed to print what they were given; the script's
    // last line (the call with the shell's words) is left off so that `t` drives it.
    const std::string harness =
        "_describe() { print -r -- \"${(P)4}\"; }\n"
        "compadd() { shift; print -r -- \"$*\"; }\n"
        "_files() { print -r -- files $*; }\n"
        "_command_names() { print -r -- commands; }\n"
        "eval \"$(sed '$d' '" +
        zsh_completion +
        "')\"\n"
        "t() { words=(\"$@\"); CURRENT=$#; _cordon; }\n"
        "t cordon mcp ''; t cordon exec --network ''; t cordon exec -- ''; t cordon exec --wor\n";
    auto zr = testing::Run({FindOnPath("zsh"), "-f", "-c", harness});
    EXPECT_EQ(zr.exit_code, 0) << zr.err;
    EXPECT_NE(zr.out.find("list:configured servers"), std::string::npos) << zr.out;
    EXPECT_NE(zr.out.find("none loopback allow\n"), std::string::npos) << zr.out;
    EXPECT_NE(zr.out.find("commands\n"), std::string::npos) << zr.out;
    EXPECT_NE(zr.out.find("--network:"), std::string::npos) << zr.out;
  }
  if (!FindOnPath("groff").empty()) {
    auto g = testing::Run(
        {FindOnPath("groff"), "-man", "-Tutf8", "-ww", "-z", prefix + "/share/man/man1/cordon.1"});
    EXPECT_EQ(g.exit_code, 0) << g.err;
    EXPECT_TRUE(g.err.empty()) << g.err;
  }
}

}  // namespace
}  // namespace cordon
