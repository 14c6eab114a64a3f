// The real binary: exit codes, bad JSON, deep nesting, huge input, unknown tools, catalog
// formats, policy show, audit verify/show, and the default audit location.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/text.h"
#include "mcp/config.h"
#include "runner/host_probe.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_ / "ws/hello.txt", "hello\nworld\n");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
  }
  testing::RunResult Cordon(std::vector<std::string> args, const std::string& stdin_data = {}) {
    args.insert(args.begin(), testing::CordonBin());
    return testing::Run(args, env_, stdin_data);
  }
  testing::RunResult Call(const std::string& tool, const std::string& json) {
    return Cordon({"call", tool, "--workspace", dir_ / "ws", "--audit-log", log(), "--json", json});
  }
  std::string log() { return dir_ / "audit.jsonl"; }
  static std::string CodeOf(const testing::RunResult& r) {
    Json j = Json::parse(r.out, nullptr, false);
    if (j.is_discarded()) return "unparseable: " + r.out;
    return j["isError"].get<bool>() ? j["structuredContent"]["error"]["code"].get<std::string>()
                                    : "ok";
  }
  TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(CliTest, SuccessfulCallPrintsCallToolResultAndExitsZero) {
  auto r = Call("read_file_range", R"({"path":"hello.txt","start_line":1})");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(CodeOf(r), "ok");
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["structuredContent"]["lines"], Json({"hello", "world"}));
}

TEST_F(CliTest, ReadUrlIsOffByDefaultAndSaysWhatItNeeds) {
  // Issue 12: read_url is in the registry, but the shipped policy grants no net:read, and
  // `cordon tools` lists it only when the policy does.
  auto r = Call("read_url", R"({"url":"https://docs.example.test/guide.html"})");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(CodeOf(r), "denied_by_policy") << r.out;
  EXPECT_NE(r.out.find("net:read"), std::string::npos) << r.out;
  EXPECT_EQ(Cordon({"tools", "--workspace", dir_ / "ws"}).out.find("read_url"), std::string::npos);
  WriteFile(dir_ / "net.toml", "[scopes]\ngrant = [\"net:read\"]\n");
  auto listed = Cordon({"tools", "--workspace", dir_ / "ws", "--policy", dir_ / "net.toml"});
  EXPECT_NE(listed.out.find("read_url"), std::string::npos) << listed.out << listed.err;
  // Granted, in a session with no egress proxy for it: refused, pointing at the docs.
  r = Cordon({"call", "read_url", "--workspace", dir_ / "ws", "--audit-log", log(), "--policy",
              dir_ / "net.toml", "--json", R"({"url":"https://docs.example.test/guide.html"})"});
  EXPECT_EQ(CodeOf(r), "denied_by_policy") << r.out;
  EXPECT_NE(r.out.find("docs/policy.md"), std::string::npos) << r.out;
  // A URL that is not http(s) is bad input, whatever the policy.
  r = Cordon({"call", "read_url", "--workspace", dir_ / "ws", "--audit-log", log(), "--policy",
              dir_ / "net.toml", "--json", R"({"url":"file:///etc/passwd"})"});
  EXPECT_EQ(CodeOf(r), "invalid_input") << r.out;
}

TEST_F(CliTest, CallRefusesNumbersOutOfRangeAsInvalidInput) {
  // Issue 9: 1e400 made `cordon call` exit 3 (an uncaught out_of_range). It is bad input: an
  // invalid_input result and exit 1, whether it comes inline, from @FILE or from @-.
  const std::string overflow = R"({"path":"hello.txt","start_line":1e400})";
  const std::string big = R"({"path":"hello.txt","start_line":123456789012345678901234567890})";
  WriteFile(dir_ / "input.json", R"({"path":"hello.txt","start_line":-1E+999})");
  const testing::RunResult runs[] = {
      Call("read_file_range", overflow),
      Call("read_file_range", big),
      Call("read_file_range", "@" + (dir_ / "input.json")),
      Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(), "--json",
              "@-"},
             overflow),
  };
  for (const auto& r : runs) {
    EXPECT_EQ(r.signal, 0);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(CodeOf(r), "invalid_input") << r.out;
  }
  EXPECT_NE(runs[0].out.find("out of range"), std::string::npos) << runs[0].out;
  EXPECT_NE(runs[1].out.find("64 bits"), std::string::npos) << runs[1].out;
  auto verify = Cordon({"audit", "verify", log()});
  EXPECT_EQ(verify.exit_code, 0) << verify.out;
}

TEST_F(CliTest, BadInputGetsStableCodesAndNeverCrashes) {
  struct Case {
    std::string name, tool, json, code;
  };
  const Case cases[] = {
      {"malformed", "read_file_range", R"({"path":)", "invalid_input"},
      {"single quotes", "read_file_range", "{'path':'x'}", "invalid_input"},
      {"not an object", "read_file_range", "[1,2,3]", "invalid_input"},
      {"wrong type", "read_file_range", R"({"path":7,"start_line":1})", "invalid_input"},
      {"deep nesting", "read_file_range", std::string(200000, '[') + std::string(200000, ']'),
       "invalid_input"},
      {"huge input", "create_file",
       R"({"path":"big.txt","content":")" + std::string(9u << 20, 'x') + "\"}", "too_large"},
      {"unknown tool", "format_disk", "{}", "invalid_input"},
      {"invalid utf-8 in json", "read_file_range", "{\"path\":\"\xff\xfe\",\"start_line\":1}",
       "invalid_input"},
  };
  for (const auto& c : cases) {
    std::string json_file = dir_ / "input.json";
    WriteFile(json_file, c.json);
    auto r = Call(c.tool, "@" + json_file);
    EXPECT_EQ(r.signal, 0) << c.name;
    EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.err;
    EXPECT_EQ(CodeOf(r), c.code) << c.name;
    EXPECT_LT(r.out.size(), 4096u) << c.name << ": the error must not echo the input";
  }
  EXPECT_FALSE(testing::Exists(dir_ / "ws/big.txt"));
  auto verify = Cordon({"audit", "verify", log()});
  EXPECT_EQ(verify.exit_code, 0) << verify.out;
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{},
                                             {"frobnicate"},
                                             {"call", "read_file_range"},
                                             {"call", "--json", "{}"},
                                             {"call", "read_file_range", "--json", "{}", "--bogus"},
                                             {"call", "read_file_range", "--json"},
                                             {"tools", "--format", "xml"},
                                             {"audit", "verify"},
                                             {"policy", "edit"}}) {
    auto r = Cordon(args);
    EXPECT_EQ(r.exit_code, 2) << ::testing::PrintToString(args);
    EXPECT_NE(r.err.find("usage:"), std::string::npos);
  }
}

TEST_F(CliTest, StartFailuresExitThreeWithAClearMessage) {
  auto r = Cordon({"call", "read_file_range", "--workspace", dir_ / "missing", "--json", "{}"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("missing"), std::string::npos);
  WriteFile(dir_ / "bad.toml", "[limits]\ntimeout_secs = 5\nmax_bogus = 1\n");
  r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--policy", dir_ / "bad.toml",
              "--json", "{}"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("bad.toml:3: unknown key \"limits.max_bogus\""), std::string::npos) << r.err;
  WriteFile(dir_ / "short.key", "short");
  ::chmod((dir_ / "short.key").c_str(), 0600);  // refused for its length, not its mode
  r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-key-file",
              dir_ / "short.key", "--json", "{}"});
  EXPECT_EQ(r.exit_code, 3);
}

TEST_F(CliTest, CatalogInEachProviderFormat) {
  auto mcp = Cordon({"tools", "--workspace", dir_ / "ws"});
  ASSERT_EQ(mcp.exit_code, 0) << mcp.err;
  Json m = Json::parse(mcp.out);
  ASSERT_EQ(m["tools"].size(), 15u);  // the granted ones: not diagnostics:read's, nor read_url
  EXPECT_TRUE(m["tools"][0].contains("inputSchema") && m["tools"][0].contains("outputSchema"));
  Json o = Json::parse(Cordon({"tools", "--format", "openai", "--workspace", dir_ / "ws"}).out);
  EXPECT_EQ(o[0]["type"], "function");
  EXPECT_TRUE(o[0]["function"].contains("parameters"));
  Json a = Json::parse(Cordon({"tools", "--format", "anthropic", "--workspace", dir_ / "ws"}).out);
  EXPECT_TRUE(a[0].contains("input_schema"));
  // A read-only policy shows only the read tool. Lists extend, so the project file removes.
  WriteFile(dir_ / "ws/.cordon/policy.toml",
            "[scopes]\ngrant = [\"!fs:write\", \"!process:run\", \"!process:operate\", "
            "\"!session:operate\", \"!mcp:call\"]\n");
  Json ro = Json::parse(Cordon({"tools", "--workspace", dir_ / "ws"}).out);
  ASSERT_EQ(ro["tools"].size(), 5u);
  for (const auto& t : ro["tools"]) EXPECT_NE(t["name"], "create_file");
}

// Names an agent, a repository or a log chose reach the terminal written out visibly on every
// human channel (issue 33, part 5): `policy show` (a project's policy file is the repository's),
// `setup --dry-run` (a project's .mcp.json), `doctor` (the directory it runs in) and `audit
// verify` (a log's name). No escape sequence (which could clear the screen, retitle the window or
// forge cordon's own lines), no C1 control, no bidi override, and no newline inside a name.
TEST_F(CliTest, WhatOthersChoseIsWrittenOutVisiblyOnEveryHumanChannel) {
  const std::string title = "\x1b]0;pwned\x07";
  const std::string forged = "\ncordon: all changes were committed\n";
  auto clean = [&](const testing::RunResult& r, const std::string& what) {
    for (const std::string& text : {r.out, r.err}) {
      for (const std::string bad : {"\x1b", "\x07", "\xc2\x9b", "\xe2\x80\xae"})
        EXPECT_EQ(text.find(bad), std::string::npos) << what << " wrote a raw control:\n" << text;
      EXPECT_EQ(text.find("\ncordon: all changes were committed"), std::string::npos)
          << what << " let a name start a line of its own:\n"
          << text;
    }
  };
  // policy show: a project's protected name.
  WriteFile(dir_ / "ws/.cordon/policy.toml",
            "[filesystem]\nprotected_names = [\"\\u001b]0;pwned\\u0007\\u202e\", "
            "\"x\\ncordon: all changes were committed\\n\"]\n");
  auto shown = Cordon({"policy", "show", "--workspace", dir_ / "ws"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("pwned"), std::string::npos) << "the name is not shown at all";
  clean(shown, "policy show");
  // setup --dry-run: a project's .mcp.json with a server named by the repository.
  std::filesystem::create_directories(dir_ / "home");
  WriteFile(dir_ / "proj/.mcp.json",
            "{\"mcpServers\": {\"\\u001b]0;pwned\\u0007\": {\"command\": \"x\\u009b2J\"}}}\n");
  auto setup = testing::Run(
      {testing::CordonBin(), "setup", "claude-code", "--project", dir_ / "proj", "--dry-run"},
      {"HOME=" + (dir_ / "home"), "XDG_CONFIG_HOME=", "CODEX_HOME="});
  EXPECT_EQ(setup.exit_code, 0) << setup.err;
  EXPECT_NE(setup.out.find("pwned"), std::string::npos) << setup.out << setup.err;
  clean(setup, "setup --dry-run");
  // doctor, run in a directory whose name holds the controls.
  const std::string odd = dir_ / ("ws" + title + forged);
  std::filesystem::create_directories(odd);
  auto doctor = testing::Run(
      {"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" doctor", "sh", odd, testing::CordonBin()}, env_);
  EXPECT_NE(doctor.out.find("pwned"), std::string::npos) << doctor.out << doctor.err;
  clean(doctor, "doctor");
  // audit verify of a log so named.
  const std::string log_path = dir_ / ("log" + title + forged + ".jsonl");
  ASSERT_EQ(Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log_path,
                    "--json", R"({"path":"hello.txt","start_line":1,"end_line":1})"})
                .exit_code,
            0);
  auto verify = Cordon({"audit", "verify", dir_.path()});
  EXPECT_NE(verify.out.find("pwned"), std::string::npos) << verify.out << verify.err;
  clean(verify, "audit verify");
}

TEST_F(CliTest, PolicyShowNamesTheDecidingFile) {
  WriteFile(dir_ / "ws/.cordon/policy.toml", "[limits]\ntimeout_secs = 5\nmax_results = 99999\n");
  auto r = Cordon({"policy", "show", "--workspace", dir_ / "ws", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["effective"]["limits"]["timeout_secs"], 5);
  EXPECT_EQ(j["effective"]["limits"]["max_results"], 1000);
  EXPECT_EQ(j["decided_by"]["limits.timeout_secs"], dir_ / "ws/.cordon/policy.toml:2");
  EXPECT_NE(j["decided_by"]["limits.max_results"].get<std::string>().find("00-default.toml"),
            std::string::npos);
  EXPECT_EQ(j["notes"].size(), 1u);
  auto text = Cordon({"policy", "show", "--workspace", dir_ / "ws"});
  EXPECT_NE(text.out.find("limits.timeout_secs = 5    # " + (dir_ / "ws/.cordon/policy.toml:2")),
            std::string::npos)
      << text.out;
}

// Egress by domain (issue 12): `policy show` lists every domain, preset and resolve entry with
// the file:line that added it, and what a project file tried to add is left out with a note.
TEST_F(CliTest, PolicyShowListsEgressDomainsAndWhereEachCameFrom) {
  const std::string user = dir_ / "config/cordon/policies.d/50-net.toml";
  WriteFile(user,
            "[network]\n"
            "mode = \"proxy\"\n"
            "allow_domains = [\"api.github.com\", \"*.example.org\"]\n"
            "presets = [\"npm\"]\n"
            "resolve = [\"api.test=127.0.0.1\"]\n"
            "[tools.exec]\n"
            "allow_domains = [\"docs.example.com\"]\n");
  const std::string project = dir_ / "ws/.cordon/policy.toml";
  WriteFile(project,
            "[network]\n"
            "allow_domains = [\"!*.example.org\", \"exfil.attacker.example\"]\n"
            "deny_domains = [\"gist.github.com\"]\n"
            "resolve = [\"registry.npmjs.org=127.0.0.1\"]\n");
  env_.push_back("XDG_CACHE_HOME=" + (dir_ / "cache"));
  auto text = Cordon({"policy", "show", "--workspace", dir_ / "ws"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const std::string& line : std::vector<std::string>{
           "network.mode = \"proxy\"    # " + user + ":2",
           "  \"api.github.com\",    # " + user + ":3",
           "  \"gist.github.com\",    # " + project + ":3",
           "  \"npm\",    # " + user + ":4",
           "# preset npm: the npm registry (npm, npx, yarn); cordon's own npm cache; allows "
           "registry.npmjs.org, registry.yarnpkg.com; cache " +
               (dir_ / "cache") + "/cordon/presets/npm (npm_config_cache, YARN_CACHE_FOLDER)",
           "  \"api.test=127.0.0.1\",    # " + user + ":5",
           "  \"docs.example.com\",    # " + user + ":7",
           "note: " + project +
               ":2: a project file cannot add \"exfil.attacker.example\" to "
               "network.allow_domains; it stays out",
           "note: " + project + ":4: a project file cannot set network.resolve",
       }) {
    EXPECT_NE(text.out.find(line), std::string::npos) << line << "\n" << text.out;
  }
  EXPECT_EQ(text.out.find("\"*.example.org\""), std::string::npos) << text.out;
  auto json = Cordon({"policy", "show", "--json", "--workspace", dir_ / "ws"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json j = Json::parse(json.out);
  EXPECT_EQ(j["effective"]["network"]["allow_domains"], Json::array({"api.github.com"}));
  const Json& allow = j["egress"]["allow_domains"];
  ASSERT_EQ(allow.size(), 3u) << allow.dump();
  EXPECT_EQ(allow[0], (Json{{"rule", "api.github.com"}, {"from", user + ":3"}}));
  EXPECT_EQ(allow[1],
            (Json{{"rule", "registry.npmjs.org"}, {"from", "preset npm (" + user + ":4)"}}));
  EXPECT_EQ(j["egress"]["deny_domains"][0]["from"], project + ":3");
  EXPECT_EQ(j["egress"]["resolve"].size(), 1u);
  EXPECT_EQ(j["egress"]["presets"][0]["cache"]["path"], (dir_ / "cache") + "/cordon/presets/npm");
  EXPECT_EQ(j["egress"]["presets"][0]["cache"]["variables"]["npm_config_cache"],
            (dir_ / "cache") + "/cordon/presets/npm");
  // exec's own rule after the global one.
  EXPECT_EQ(j["egress_tools"]["exec"]["allow_domains"][1],
            (Json{{"rule", "docs.example.com"}, {"from", user + ":7"}}));
}

// [servers.NAME.sandbox] egress keys: the user's own config adds rules with their file:line; a
// project's may add deny rules only (its allow_domains and presets dropped with a diagnostic).
TEST_F(CliTest, ServerSandboxEgressKeysAreTightenOnlyFromAProject) {
  auto def = [](const std::string& name) {
    return "[servers." + name + "]\ncommand = \"true\"\n[servers." + name +
           ".sandbox]\n"
           "network = \"proxy\"\n"
           "allow_domains = [\"API.github.com\"]\n"
           "deny_domains = [\"gist.github.com\"]\n"
           "presets = [\"npm\"]\n";
  };
  WriteFile(dir_ / "home/.cordon/mcp.toml", def("gh"));
  WriteFile(dir_ / "ws/.cordon/mcp.toml", def("repo"));
  mcp::ConfigSources sources;
  sources.files = {{dir_ / "home/.cordon/mcp.toml", false}, {dir_ / "ws/.cordon/mcp.toml", true}};
  auto cfg = mcp::LoadMcpConfig(sources, dir_ / "ws");
  ASSERT_TRUE(cfg) << cfg.error().message;
  ASSERT_EQ(cfg->servers.size(), 2u);
  const mcp::ServerConfig& user = cfg->servers[0];
  const mcp::ServerConfig& repo = cfg->servers[1];
  ASSERT_EQ(user.name, "gh");
  EXPECT_EQ(user.network, NetworkMode::kProxy);
  ASSERT_EQ(user.egress.allow.size(), 1u);
  EXPECT_EQ(user.egress.allow[0].text, "api.github.com");
  EXPECT_EQ(user.egress.allow[0].source,
            "servers.gh.sandbox (" + (dir_ / "home/.cordon/mcp.toml") + ":5)");
  ASSERT_EQ(user.egress.presets.size(), 1u);
  EXPECT_EQ(user.egress.presets[0].first, "npm");
  ASSERT_EQ(repo.name, "repo");
  EXPECT_TRUE(repo.egress.allow.empty());
  EXPECT_TRUE(repo.egress.presets.empty());
  ASSERT_EQ(repo.egress.deny.size(), 1u);
  EXPECT_EQ(repo.egress.deny[0].text, "gist.github.com");
  ASSERT_EQ(cfg->diagnostics.size(), 2u) << Json(cfg->diagnostics).dump();
  EXPECT_NE(cfg->diagnostics[0]["reason"].get<std::string>().find(
                "allow_domains \"api.github.com\" from servers.repo.sandbox (" +
                (dir_ / "ws/.cordon/mcp.toml") + ":5) was dropped"),
            std::string::npos)
      << cfg->diagnostics[0].dump();
  // The user's server runs under these rules: the policy's, then the server's.
  Policy policy;
  const EgressPolicy e = EgressFor(policy, "mcp__gh", user.egress);
  const EgressPolicy* egress = &e;
  EXPECT_TRUE(DecideName(*egress, *ParseEgressHost("registry.npmjs.org"), 443).allowed);
  EXPECT_FALSE(DecideName(*egress, *ParseEgressHost("gist.github.com"), 443).allowed);

  // The real binary says so where the user looks, and a bad entry names its file and line.
  auto list = Cordon({"mcp", "list", "--workspace", dir_ / "ws"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.err.find("a project's configuration cannot add egress: presets \\\"npm\\\""),
            std::string::npos)
      << list.err;
  WriteFile(dir_ / "ws/.cordon/mcp.toml",
            "[servers.repo]\ncommand = \"true\"\n[servers.repo.sandbox]\n"
            "deny_domains = [\"ok.example\", \"a*.example\"]\n");
  auto bad = Cordon({"mcp", "list", "--workspace", dir_ / "ws"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find(dir_ / "ws/.cordon/mcp.toml:4: sandbox.deny_domains: domain rule "
                                "\"a*.example\""),
            std::string::npos)
      << bad.err;
}

// --allow-domain without --network means proxy, whatever the policy's mode.
TEST_F(CliTest, AllowDomainImpliesNetworkProxy) {
  if (FindOnPath("bwrap").empty()) GTEST_SKIP() << "SKIPPED: bwrap is not installed";
  auto r = Cordon({"exec", "--plan", "--workspace", dir_ / "ws", "--audit-log", log(),
                   "--allow-domain", "example.com", "--", "true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["confinement"]["network"], "proxy");
  auto plain = Cordon({"exec", "--plan", "--workspace", dir_ / "ws", "--audit-log", log(),
                       "--deny-domain", "example.com", "--", "true"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(Json::parse(plain.out)["confinement"]["network"], "none");
}

// A bad --allow-domain (or preset, or resolve entry) is the caller's mistake, said with the flag
// and the value before anything runs; a --network that contradicts the egress flags too.
TEST_F(CliTest, EgressFlagsRefuseBadValuesNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::string ws = dir_ / "ws";
  const Case cases[] = {
      {{"exec", "--allow-domain", "a*.example.com", "--", "true"}, "--allow-domain"},
      {{"exec", "--allow-domain", "example.com:0", "--", "true"}, "example.com:0"},
      {{"exec", "--deny-domain", "*", "--", "true"}, "--deny-domain"},
      {{"exec", "--allow-preset", "maven", "--", "true"}, "--allow-preset"},
      {{"exec", "--resolve", "api.test=nowhere", "--", "true"}, "--resolve"},
      {{"wrap", "--allow-domain", "bad..name", "--", "true"}, "--allow-domain"},
      {{"exec", "--workspace", ws, "--network", "none", "--allow-domain", "example.com", "--",
        "true"},
       "--allow-domain needs --network proxy, not --network none"},
      {{"wrap", "--workspace", ws, "--network", "allow", "--allow-preset", "npm", "--", "true"},
       "--allow-preset needs --network proxy, not --network allow"},
  };
  for (const auto& c : cases) {
    auto r = Cordon(c.args);
    EXPECT_EQ(r.exit_code, 125) << ::testing::PrintToString(c.args) << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.needle << "\n" << r.err;
    EXPECT_NE(r.err.find("usage: cordon " + c.args[0]), std::string::npos) << r.err;
  }
  // --help lists the presets with what each allows.
  auto help = Cordon({"exec", "--help"});
  EXPECT_NE(help.out.find("pypi: the Python Package Index (pip, uv)"), std::string::npos)
      << help.out;
  EXPECT_NE(help.out.find("--allow-domain"), std::string::npos) << help.out;
}

TEST_F(CliTest, AuditVerifyExitCodesAndShow) {
  ASSERT_EQ(Call("read_file_range", R"({"path":"hello.txt","start_line":1})").exit_code, 0);
  ASSERT_EQ(Call("create_file", R"({"path":"new.txt","content":"x"})").exit_code, 0);
  auto ok = Cordon({"audit", "verify", log()});
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("ok: 10 records, 2 sessions"), std::string::npos) << ok.out;
  auto show = Cordon({"audit", "show", log()});
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("file_write"), std::string::npos);
  EXPECT_NE(show.out.find("path=\"new.txt\""), std::string::npos);

  std::string text = ReadFile(log());
  std::string edited = text;
  edited.replace(edited.find("new.txt"), 7, "old.txt");
  WriteFile(log(), edited);
  auto bad = Cordon({"audit", "verify", log()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("BROKEN at line 8"), std::string::npos) << bad.out;

  WriteFile(log(), text.substr(0, text.size() - 10));
  auto torn = Cordon({"audit", "verify", log()});
  EXPECT_EQ(torn.exit_code, 4) << torn.out;
  EXPECT_NE(torn.out.find("torn"), std::string::npos);
  auto missing = Cordon({"audit", "verify", dir_ / "nope.jsonl"});
  EXPECT_EQ(missing.exit_code, 3);
}

// Issue 11: `audit verify DIR` verifies every *.jsonl in it, one line per file, and exits with
// the worst outcome; every audit subcommand honours --json.
TEST_F(CliTest, AuditVerifyDirectoryChecksEveryLog) {
  const std::string logs = dir_ / "logs";
  std::filesystem::create_directories(logs);
  for (const char* name : {"b.jsonl", "a.jsonl"}) {
    ASSERT_EQ(Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log",
                      logs + "/" + name, "--json", R"({"path":"hello.txt","start_line":1})"})
                  .exit_code,
              0);
  }
  WriteFile(logs + "/notes.txt", "not a log\n");  // only *.jsonl is verified
  auto ok = Cordon({"audit", "verify", logs});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  const std::string a = logs + "/a.jsonl: ok: ", b = logs + "/b.jsonl: ok: ";
  ASSERT_NE(ok.out.find(a), std::string::npos) << ok.out << ok.err;
  ASSERT_NE(ok.out.find(b), std::string::npos) << ok.out;
  EXPECT_LT(ok.out.find(a), ok.out.find(b)) << "sorted by name: " << ok.out;
  EXPECT_EQ(ok.out.find("notes.txt"), std::string::npos) << ok.out;

  // One broken, one torn: the overall code is the worse (1 before 4).
  std::string text = ReadFile(logs + "/a.jsonl");
  WriteFile(logs + "/a.jsonl", text.substr(0, text.size() - 10));
  std::string edited = ReadFile(logs + "/b.jsonl");
  edited.replace(edited.find("hello.txt"), 9, "jello.txt");
  WriteFile(logs + "/b.jsonl", edited);
  auto bad = Cordon({"audit", "verify", logs});
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find(logs + "/a.jsonl: torn: "), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find(logs + "/b.jsonl: BROKEN at line "), std::string::npos) << bad.out;
  auto json = Cordon({"audit", "verify", logs, "--json"});
  EXPECT_EQ(json.exit_code, 1);
  Json j = Json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_EQ(j["exit_code"], 1);
  ASSERT_EQ(j["files"].size(), 2u) << json.out;
  EXPECT_EQ(j["files"][0]["path"], logs + "/a.jsonl");
  EXPECT_EQ(j["files"][0]["verdict"], "torn");
  EXPECT_EQ(j["files"][1]["verdict"], "broken");

  const std::string empty = dir_ / "empty";
  std::filesystem::create_directories(empty);
  auto none = Cordon({"audit", "verify", empty});
  EXPECT_EQ(none.exit_code, 3);
  EXPECT_NE(none.err.find("no *.jsonl audit log in " + empty), std::string::npos) << none.err;
}

TEST_F(CliTest, EveryAuditCommandHonoursJson) {
  ASSERT_EQ(Call("read_file_range", R"({"path":"hello.txt","start_line":1})").exit_code, 0);
  auto show = Cordon({"audit", "show", log(), "--json"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  Json s = Json::parse(show.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << show.out;
  ASSERT_FALSE(s["records"].empty());
  EXPECT_EQ(s["records"][0]["seq"], 1);
  EXPECT_EQ(s["records"].size(), 5u) << show.out;
  EXPECT_TRUE(s["unreadable"].empty());

  auto verify = Cordon({"audit", "verify", log(), "--json"});
  EXPECT_EQ(Json::parse(verify.out, nullptr, false)["verdict"], "intact") << verify.out;
  auto missing = Cordon({"audit", "verify", dir_ / "nope.jsonl", "--json"});
  EXPECT_EQ(missing.exit_code, 3);
  Json m = Json::parse(missing.out, nullptr, false);
  ASSERT_TRUE(m.is_object()) << "an error with --json is JSON too: " << missing.out;
  EXPECT_FALSE(m["error"]["code"].get<std::string>().empty());

  auto keygen = Cordon({"audit", "keygen", "--out", dir_ / "keys", "--json"});
  EXPECT_EQ(keygen.exit_code, 0) << keygen.err;
  Json k = Json::parse(keygen.out, nullptr, false);
  ASSERT_TRUE(k.is_object()) << keygen.out;
  EXPECT_EQ(k["private"], dir_ / "keys/audit-signing.key");
  EXPECT_EQ(k["public"], dir_ / "keys/audit-signing.pub");
  EXPECT_FALSE(k["key_id"].get<std::string>().empty());

  auto rotate = Cordon({"audit", "rotate", log(), "--json"});
  EXPECT_EQ(rotate.exit_code, 0) << rotate.err;
  Json r = Json::parse(rotate.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << rotate.out;
  EXPECT_EQ(r["log"], log());
  EXPECT_EQ(r["rotated_to"], log() + ".1");
}

// Issue 11: `policy show` prints every setting of the effective policy with its source, the
// keys left at their defaults included.
TEST_F(CliTest, PolicyShowTextHasEverySettingWithItsSource) {
  auto json = Cordon({"policy", "show", "--json", "--workspace", dir_ / "ws"});
  auto text = Cordon({"policy", "show", "--workspace", dir_ / "ws"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  Json effective = Json::parse(json.out)["effective"];
  for (const auto& [section, body] : effective.items()) {
    EXPECT_NE(text.out.find("# [" + section + "]\n"), std::string::npos) << section;
    if (!body.is_object() || section == "tools") continue;
    for (const auto& [key, value] : body.items()) {
      if (section + "." + key == "redact.values_count") continue;
      EXPECT_NE(text.out.find("\n" + section + "." + key + " = "), std::string::npos)
          << section << "." << key << " is missing from:\n"
          << text.out;
    }
  }
  for (const std::string line :
       {"network.mode = \"none\"    # ", "filesystem.read = [    # last set by ",
        "audit.checkpoint_records = 1000    # built-in default",
        "audit.checkpoint_seconds = 60    # built-in default",
        "audit.file_changes = true    # built-in default", "audit.signing_key = \"\"    # ",
        "sandbox.max_scan_entries = 2000000    # built-in default",
        "tools.exec.timeout_secs = 3600    # ", "scopes.grant = [    # last set by "}) {
    EXPECT_NE(text.out.find(line), std::string::npos) << line << "\n" << text.out;
  }
}

TEST_F(CliTest, KeyedChain) {
  WriteFile(dir_ / "audit.key", "a-long-enough-secret-key-for-hmac\n");
  ::chmod((dir_ / "audit.key").c_str(), 0600);  // a key others can read is refused
  auto r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(),
                   "--audit-key-file", dir_ / "audit.key", "--json",
                   R"({"path":"hello.txt","start_line":1})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Cordon({"audit", "verify", log(), "--key-file", dir_ / "audit.key"}).exit_code, 0);
  EXPECT_EQ(Cordon({"audit", "verify", log()}).exit_code, 1);
  // The key never appears in the log.
  EXPECT_EQ(ReadFile(log()).find("a-long-enough-secret"), std::string::npos);
}

TEST_F(CliTest, AUserScopesGrantThatLeavesMoreIsWarnedAtEveryCommand) {
  WriteFile(dir_ / "config/cordon/policies.d/50-ro.toml", "[scopes]\ngrant = [\"fs:read\"]\n");
  const std::string needle = "cordon: warning: " + (dir_ / "config/cordon/policies.d/50-ro.toml") +
                             ":2: [scopes] grant adds to the layers below";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"tools", "--workspace", dir_ / "ws"},
           {"policy", "show", "--workspace", dir_ / "ws"},
           {"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(), "--json",
            R"({"path":"hello.txt"})"}}) {
    auto r = Cordon(args);
    EXPECT_NE(r.err.find(needle), std::string::npos) << ::testing::PrintToString(args) << r.err;
  }
  // only = [...] is the way to say "exactly these": no warning, and create_file is gone.
  WriteFile(dir_ / "config/cordon/policies.d/50-ro.toml", "[scopes]\nonly = [\"fs:read\"]\n");
  auto tools = Cordon({"tools", "--workspace", dir_ / "ws"});
  EXPECT_EQ(tools.exit_code, 0) << tools.err;
  EXPECT_EQ(tools.err.find("warning"), std::string::npos) << tools.err;
  EXPECT_EQ(tools.out.find("create_file"), std::string::npos) << tools.out;
  EXPECT_NE(tools.out.find("read_file_range"), std::string::npos) << tools.out;
  auto denied = Call("create_file", R"({"path":"n.txt","content":"x"})");
  EXPECT_EQ(CodeOf(denied), "denied_by_policy") << denied.out;
}

TEST_F(CliTest, ReadFileRangeStartsAtLineOneByDefault) {
  auto r = Call("read_file_range", R"({"path":"hello.txt"})");
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["structuredContent"]["start_line"], 1);
  EXPECT_EQ(j["structuredContent"]["lines"], Json({"hello", "world"}));
}

TEST_F(CliTest, RunShellLeadsWithExitCodeAndOutputAndSummarizesItsConfinement) {
  if (!testing::UserNamespacesEnabled()) SECURITY_SKIP("(run_shell) user namespaces missing");
  auto r = Call("run_shell", R"({"program":"sh","args":["-c","echo out; echo err >&2; exit 3"]})");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  // The first bytes an agent reads, in the text and in structuredContent on the wire.
  Json j = Json::parse(r.out);
  const std::string text = j["content"][0]["text"].get<std::string>();
  EXPECT_EQ(text.rfind(R"({"exit_code":3,"stdout":"out\n","stderr":"err\n",)", 0), 0u) << text;
  const std::size_t sc = r.out.find("\"structuredContent\":");
  ASSERT_NE(sc, std::string::npos) << r.out;
  EXPECT_EQ(r.out.compare(sc, 56, R"("structuredContent":{"exit_code":3,"stdout":"out\n","std)"), 0)
      << r.out.substr(sc, 80);
  // A summary; the full object stays in the record, and comes with verbose: true.
  const Json& conf = j["structuredContent"]["confinement"];
  EXPECT_EQ(conf["network"], "none") << conf.dump();
  EXPECT_TRUE(conf.contains("mode") && conf.contains("workspace_mode")) << conf.dump();
  EXPECT_FALSE(conf.contains("rlimits")) << conf.dump();
  EXPECT_LT(conf.dump().size(), 150u) << conf.dump();
  auto verbose = Call("run_shell", R"({"program":"true","verbose":true})");
  Json v = Json::parse(verbose.out);
  EXPECT_TRUE(v["structuredContent"]["confinement"].contains("rlimits")) << verbose.out;
  bool recorded = false;
  std::istringstream lines(ReadFile(log()));
  for (std::string line; std::getline(lines, line);) {
    Json rec = Json::parse(line, nullptr, false);
    if (rec.value("type", "") == "process" && rec["confinement"].contains("rlimits"))
      recorded = true;
  }
  EXPECT_TRUE(recorded);
}

TEST_F(CliTest, DoctorAnswersInUnderASecondAndLeavesTheRootOnlyWalkToDeep) {
  const auto start = std::chrono::steady_clock::now();
  auto r = Cordon({"doctor", "--json"});
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  Json check;
  for (const auto& c : j["checks"]) {
    if (c["name"] == "root_only_files") check = c;
  }
  ASSERT_TRUE(check.is_object()) << r.out;
  if (::geteuid() != 0) GTEST_SKIP() << "SKIPPED: the root-only walk runs as root only";
  EXPECT_NE(check["detail"].get<std::string>().find("cordon doctor --deep"), std::string::npos)
      << check.dump();
  // The walk itself would take 1-2 s idle; the rest of doctor is well under that (a loaded
  // CI host is given more room than the idle target).
  EXPECT_LT(secs, testing::InCi() ? 5.0 : 3.0) << secs;
  auto deep = Cordon({"doctor", "--json", "--deep"});
  Json d = Json::parse(deep.out, nullptr, false);
  ASSERT_TRUE(d.is_object()) << deep.out << deep.err;
  for (const auto& c : d["checks"]) {
    if (c["name"] == "root_only_files") {
      EXPECT_NE(c["detail"].get<std::string>().find(" entries among "), std::string::npos)
          << c.dump();
    }
  }
}

TEST_F(CliTest, DoctorReportsEveryLayer) {
  auto r = Cordon({"doctor", "--json"});
  Json j = Json::parse(r.out);
  std::set<std::string> names;
  for (const auto& c : j["checks"]) {
    names.insert(c["name"].get<std::string>());
    if (!c["ok"].get<bool>()) {
      EXPECT_FALSE(c["remedy"].get<std::string>().empty()) << c.dump();
    }
  }
  for (const char* n :
       {"bwrap", "sandbox_host", "clone3", "landlock", "landlock_denials", "seccomp", "cgroup",
        "memory_rlimit", "change_window", "ripgrep", "fd", "audit_log", "audit_checkpoints",
        "read_url", "redaction", "pidfd_process_group", "git_content_check", "approvals"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  for (const auto& c : j["checks"]) {
    if (c["name"] == "read_url") {
      EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    }
    // stop_local_server's group signal: this 6.18 kernel has PIDFD_SIGNAL_PROCESS_GROUP (6.9).
    if (c["name"] == "pidfd_process_group") {
      EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    }
    // Git content is read by the host's git, confined (issue 33): git and Landlock are here.
    if (c["name"] == "git_content_check") {
      EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
      EXPECT_NE(c["detail"].get<std::string>().find("git version"), std::string::npos) << c.dump();
    }
    // Approvals (issue 34): the shipped rules load, and with no terminal no one is asked.
    if (c["name"] == "approvals") {
      EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
      EXPECT_NE(c["detail"].get<std::string>().find("17 approval rules (14 ask, 0 deny, 3 allow"),
                std::string::npos)
          << c.dump();
      const std::string d = c["detail"].get<std::string>();
      EXPECT_TRUE(d.find("refused at once") != std::string::npos ||
                  d.find("ask on this terminal") != std::string::npos)
          << d;
      if (testing::InCi()) {
        EXPECT_NE(d.find("(CI="), std::string::npos) << d;
      }
    }
  }
  // The memory limit without a cgroup (issue 11): RLIMIT_DATA, probed in a child.
  for (const auto& c : j["checks"]) {
    if (c["name"] == "change_window") {
      EXPECT_TRUE(c["ok"].get<bool>()) << c.dump()
                                       << ": this kernel orders inode changes "
                                          "against the change window's start";
    }
    if (c["name"] == "memory_rlimit") {
      EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    }
  }
  EXPECT_EQ(r.exit_code, j["ok"].get<bool>() ? 0 : 1);
  // Without bwrap, doctor says so and names the package.
  auto none = testing::Run({testing::CordonBin(), "doctor"}, {"PATH=/nonexistent"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("apt-get install bubblewrap"), std::string::npos) << none.out;
}

// `redaction` (issue 19): the secret detectors ship as policies.d/10-secrets.toml. An install
// without that file would start every session with no rules and say nothing; doctor fails
// instead. With the rules it says how many, which run on every text, and whether the workspace's
// secret files are scanned.
// doctor's issue 32 checks: the shipped credential stores are all hidden from the sandbox (an
// entry under a denied directory counts), and the session's redaction knowledge can be stored;
// a state directory that cannot take it is named.
TEST_F(CliTest, DoctorSaysTheCredentialStoresAreDeniedAndTheKnowledgeCanBeKept) {
  auto check_named = [](const testing::RunResult& r, const std::string& name) {
    const Json j = Json::parse(r.out, nullptr, false);
    if (j.is_object()) {
      for (const auto& c : j["checks"]) {
        if (c["name"] == name) return c;
      }
    }
    return Json();
  };
  WriteFile(dir_ / "home/.kube/config",
            "users:\n- user:\n    token: kube-tok-8Hq2Lm4Np6Rs8Tv0Xz\n");
  env_.push_back("HOME=" + (dir_ / "home"));
  auto r = Cordon({"doctor", "--json"});
  const Json stores = check_named(r, "credential_stores");
  ASSERT_TRUE(stores.is_object()) << r.out << r.err;
  EXPECT_TRUE(stores["ok"].get<bool>()) << stores.dump();
  EXPECT_NE(stores["detail"].get<std::string>().find("~/.kube/config (1 values)"),
            std::string::npos)
      << stores.dump();
  const Json knowledge = check_named(r, "redaction_knowledge");
  ASSERT_TRUE(knowledge.is_object()) << r.out;
  EXPECT_TRUE(knowledge["ok"].get<bool>()) << knowledge.dump();
  // A state directory that is a file: the knowledge cannot be kept, and doctor says where.
  WriteFile(dir_ / "state-file", "x");
  env_[1] = "XDG_STATE_HOME=" + (dir_ / "state-file");
  r = Cordon({"doctor", "--json"});
  const Json broken = check_named(r, "redaction_knowledge");
  ASSERT_TRUE(broken.is_object()) << r.out;
  EXPECT_FALSE(broken["ok"].get<bool>()) << broken.dump();
  EXPECT_NE(broken["remedy"].get<std::string>().find("state-file/cordon/redaction-knowledge"),
            std::string::npos)
      << broken.dump();
}

TEST_F(CliTest, DoctorFailsWhenThePolicyHasNoRedactionRules) {
  auto redaction_check = [](const testing::RunResult& r) {
    const Json j = Json::parse(r.out, nullptr, false);
    Json found;
    if (j.is_object()) {
      for (const auto& c : j["checks"]) {
        if (c["name"] == "redaction") found = c;
      }
    }
    return found;
  };
  auto r = Cordon({"doctor", "--json"});
  Json check = redaction_check(r);
  ASSERT_TRUE(check.is_object()) << r.out << r.err;
  EXPECT_TRUE(check["ok"].get<bool>()) << check.dump();
  EXPECT_TRUE(check["required"].get<bool>()) << check.dump();
  std::string detail = check["detail"].get<std::string>();
  for (const char* part :
       {" redaction rules from ", "/10-secrets.toml",
        "; without keywords (run on every text): none; on runs of token characters only: "
        "twilio_key, twilio_auth, discord_token;",
        "; workspace secret-file scan: on (at session start: at most 100000 entries, 1 MiB a file, "
        "64 MiB in all)"}) {
    EXPECT_NE(detail.find(part), std::string::npos) << part << "\n" << detail;
  }
  // A broken install: PREFIX/bin/cordon reads PREFIX/share/cordon/policies.d, which lacks
  // 10-secrets.toml.
  const std::string prefix = dir_ / "prefix";
  std::filesystem::create_directories(prefix + "/bin");
  std::filesystem::create_directories(prefix + "/share/cordon/policies.d");
  std::filesystem::copy_file(testing::CordonBin(), prefix + "/bin/cordon");
  std::filesystem::copy_file(CORDON_POLICY_DIR "/00-default.toml",
                             prefix + "/share/cordon/policies.d/00-default.toml");
  auto broken = testing::Run({prefix + "/bin/cordon", "doctor", "--json"}, env_);
  check = redaction_check(broken);
  ASSERT_TRUE(check.is_object()) << broken.out << broken.err;
  EXPECT_FALSE(check["ok"].get<bool>()) << check.dump();
  EXPECT_TRUE(check["required"].get<bool>()) << check.dump();
  detail = check["detail"].get<std::string>();
  EXPECT_NE(detail.find("NO redaction rules"), std::string::npos) << detail;
  EXPECT_NE(detail.find("00-default.toml"), std::string::npos) << detail;
  EXPECT_NE(check["remedy"].get<std::string>().find("/share/cordon/policies.d/10-secrets.toml"),
            std::string::npos)
      << check.dump();
  EXPECT_EQ(broken.exit_code, 1) << broken.out;
  EXPECT_FALSE(Json::parse(broken.out)["ok"].get<bool>());
  auto text = testing::Run({prefix + "/bin/cordon", "doctor"}, env_);
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("FAIL  redaction: NO redaction rules"), std::string::npos) << text.out;
}

// `install` (issue 21): cordon-shim runs every confined process and the shipped policy sets the
// confinement; an install where another user could replace either (the file, or through a
// directory above it) fails doctor, naming the path. A copy laid out as the package installs it
// (PREFIX/bin, PREFIX/share/cordon/policies.d) passes and is the one doctor names.
TEST_F(CliTest, DoctorFailsWhenTheShimOrTheShippedPolicyIsWritableByOthers) {
  namespace fs = std::filesystem;
  const std::string prefix = dir_ / "prefix";
  fs::create_directories(prefix + "/bin");
  fs::create_directories(prefix + "/share/cordon/policies.d");
  const std::string bin_dir = fs::path(testing::CordonBin()).parent_path();
  fs::copy_file(testing::CordonBin(), prefix + "/bin/cordon");
  fs::copy_file(bin_dir + "/cordon-shim", prefix + "/bin/cordon-shim");
  for (const char* f : {"00-default.toml", "10-secrets.toml"}) {
    fs::copy_file(std::string(CORDON_POLICY_DIR "/") + f, prefix + "/share/cordon/policies.d/" + f);
  }
  auto install_check = [&](const testing::RunResult& r) {
    const Json j = Json::parse(r.out, nullptr, false);
    Json found;
    if (j.is_object()) {
      for (const auto& c : j["checks"]) {
        if (c["name"] == "install") found = c;
      }
    }
    return found;
  };
  auto good = testing::Run({prefix + "/bin/cordon", "doctor", "--json"}, env_);
  Json check = install_check(good);
  ASSERT_TRUE(check.is_object()) << good.out << good.err;
  EXPECT_TRUE(check["ok"].get<bool>()) << check.dump();
  EXPECT_TRUE(check["required"].get<bool>()) << check.dump();
  const std::string real_prefix = fs::canonical(prefix);
  EXPECT_NE(check["detail"].get<std::string>().find(
                "cordon-shim " + real_prefix + "/bin/cordon-shim and the shipped policy " +
                real_prefix + "/share/cordon/policies.d (2 files)"),
            std::string::npos)
      << check.dump();

  const std::string secrets = prefix + "/share/cordon/policies.d/10-secrets.toml";
  fs::permissions(secrets, fs::perms::others_write, fs::perm_options::add);
  auto bad = testing::Run({prefix + "/bin/cordon", "doctor", "--json"}, env_);
  check = install_check(bad);
  ASSERT_TRUE(check.is_object()) << bad.out << bad.err;
  EXPECT_FALSE(check["ok"].get<bool>()) << check.dump();
  EXPECT_NE(check["detail"].get<std::string>().find(real_prefix +
                                                    "/share/cordon/policies.d/10-secrets.toml "
                                                    "is writable by every user"),
            std::string::npos)
      << check.dump();
  EXPECT_NE(check["remedy"].get<std::string>().find("chmod go-w"), std::string::npos);
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_FALSE(Json::parse(bad.out)["ok"].get<bool>());
  fs::permissions(secrets, fs::perms::others_write, fs::perm_options::remove);

  // The directory holding the shim: whoever may write it may rename the shim away.
  fs::permissions(prefix + "/bin", fs::perms::others_write, fs::perm_options::add);
  auto text = testing::Run({prefix + "/bin/cordon", "doctor"}, env_);
  fs::permissions(prefix + "/bin", fs::perms::others_write, fs::perm_options::remove);
  EXPECT_EQ(text.exit_code, 1) << text.out;
  EXPECT_NE(text.out.find("FAIL  install: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(real_prefix + "/bin is writable by every user"), std::string::npos)
      << text.out;
}

// `preset_caches` (issue 18): where each preset's cache of cordon's own is, whether it is there
// and writable, and one that cordon would not use (a symlinked level) named with the reason.
TEST_F(CliTest, DoctorSaysWhereEachPresetCacheIs) {
  const std::string cache = dir_ / "cache";
  env_.push_back("XDG_CACHE_HOME=" + cache);
  std::filesystem::create_directories(cache + "/cordon/presets/npm");
  for (const char* d : {"/cordon", "/cordon/presets", "/cordon/presets/npm"}) {
    std::filesystem::permissions(cache + d, std::filesystem::perms::owner_all);
  }
  WriteFile(cache + "/cordon/presets/npm/_cacache/index", "x");
  std::filesystem::create_directories(dir_ / "elsewhere");
  std::filesystem::create_directory_symlink(dir_ / "elsewhere", cache + "/cordon/presets/pypi");
  auto r = Cordon({"doctor", "--json"});
  const Json j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  Json check;
  for (const auto& c : j["checks"]) {
    if (c["name"] == "preset_caches") check = c;
  }
  ASSERT_TRUE(check.is_object()) << r.out;
  const std::string detail = check["detail"].get<std::string>();
  EXPECT_NE(detail.find("npm: " + cache +
                        "/cordon/presets/npm (npm_config_cache, "
                        "YARN_CACHE_FOLDER) writable, 0 MiB in 2 entries"),
            std::string::npos)
      << detail;
  EXPECT_NE(detail.find("pypi: " + cache +
                        "/cordon/presets/pypi (PIP_CACHE_DIR, UV_CACHE_DIR) "
                        "UNUSABLE"),
            std::string::npos)
      << detail;
  EXPECT_NE(detail.find("symlink"), std::string::npos) << detail;
  EXPECT_NE(detail.find("crates: " + cache + "/cordon/presets/crates (CARGO_HOME) not made yet"),
            std::string::npos)
      << detail;
  EXPECT_FALSE(check["ok"].get<bool>()) << check.dump();
  EXPECT_FALSE(check["required"].get<bool>()) << check.dump();
  EXPECT_FALSE(check["remedy"].get<std::string>().empty()) << check.dump();
  EXPECT_FALSE(std::filesystem::exists(cache + "/cordon/presets/crates")) << "doctor makes nothing";
}

TEST_F(CliTest, ExecPassesThroughStdioAndExitCode) {
  if (FindOnPath("bwrap").empty()) GTEST_SKIP() << "SKIPPED: bwrap is not installed";
  auto r = Cordon({"exec", "--workspace", dir_ / "ws", "--audit-log", log(), "--", "sh", "-c",
                   "cat hello.txt; echo to-stderr >&2; exit 7"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.out, "hello\nworld\n");
  EXPECT_EQ(r.err, "to-stderr\n");
  auto sig = Cordon({"exec", "--workspace", dir_ / "ws", "--audit-log", log(), "--", "sh", "-c",
                     "kill -TERM $$"});
  EXPECT_EQ(sig.exit_code, 128 + 15);
  auto missing =
      Cordon({"exec", "--workspace", dir_ / "ws", "--audit-log", log(), "--", "no-such-program-x"});
  EXPECT_EQ(missing.exit_code, 127);
  auto slow = Cordon({"exec", "--workspace", dir_ / "ws", "--audit-log", log(), "--timeout", "1",
                      "--", "sleep", "30"});
  EXPECT_EQ(slow.exit_code, 124);
  // Options after "--" belong to the command, untouched.
  auto opts = Cordon({"exec", "--workspace", dir_ / "ws", "--audit-log", log(), "--", "echo",
                      "--workspace", "--"});
  EXPECT_EQ(opts.out, "--workspace --\n");
  std::string text = ReadFile(log());
  EXPECT_NE(text.find("\"type\":\"process\""), std::string::npos);
  EXPECT_NE(text.find("\"status\":\"timeout\""), std::string::npos);
  EXPECT_EQ(Cordon({"audit", "verify", log()}).exit_code, 0);
}

TEST_F(CliTest, ExecPlanPrintsThePlanAndRunsNothing) {
  if (FindOnPath("bwrap").empty()) GTEST_SKIP() << "SKIPPED: bwrap is not installed";
  auto r = Cordon({"exec", "--plan", "--workspace", dir_ / "ws", "--audit-log", log(), "--network",
                   "loopback", "--", "sh", "-c", "touch ran"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json plan = Json::parse(r.out);
  std::vector<std::string> argv = plan["bwrap"].get<std::vector<std::string>>();
  auto dashdash = std::find(argv.begin(), argv.end(), "--");
  ASSERT_NE(dashdash, argv.end());
  EXPECT_NE(std::find(argv.begin(), dashdash, "--unshare-user"), dashdash);
  EXPECT_NE(std::find(argv.begin(), dashdash, "--unshare-net"), dashdash)
      << "loopback still gets its own netns";
  EXPECT_NE(std::find(argv.begin(), dashdash, "--die-with-parent"), dashdash);
  EXPECT_EQ(plan["confinement"]["network"], "loopback");
  EXPECT_TRUE(plan["contain"].contains("seccomp")) << plan["contain"].dump();
  EXPECT_TRUE(plan["contain"].contains("landlock")) << plan["contain"].dump();
  EXPECT_FALSE(testing::Exists(dir_ / "ws/ran")) << "--plan ran the command";
  EXPECT_EQ(ReadFile(log()).find("\"type\":\"process\""), std::string::npos);
}

TEST_F(CliTest, ExecInAnotherUsersWorkspaceFailsClearly) {
  if (FindOnPath("bwrap").empty()) GTEST_SKIP() << "SKIPPED: bwrap is not installed";
  if (::geteuid() != 0) GTEST_SKIP() << "SKIPPED: needs root to give the workspace to another user";
  std::filesystem::create_directories(dir_ / "theirs");
  ASSERT_EQ(::chown((dir_ / "theirs").c_str(), 65534, 65534), 0);
  auto r = Cordon({"exec", "--workspace", dir_ / "theirs", "--audit-log", log(), "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("belongs to uid 65534"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sandbox_unavailable"), std::string::npos) << r.err;
  // Read-only tools still work there.
  WriteFile(dir_ / "theirs/x.txt", "needle\n");
  auto search = Cordon({"call", "search_text", "--workspace", dir_ / "theirs", "--audit-log", log(),
                        "--json", R"({"pattern":"needle"})"});
  EXPECT_EQ(CodeOf(search), "ok") << search.out << search.err;
}

TEST_F(CliTest, DefaultAuditLogLivesOutsideTheWorkspace) {
  auto r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--json",
                   R"({"path":"hello.txt","start_line":1})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int logs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "state/cordon/sessions")) {
    ++logs;
    EXPECT_EQ(Cordon({"audit", "verify", e.path().string()}).exit_code, 0);
  }
  EXPECT_EQ(logs, 1);
}

}  // namespace
}  // namespace cordon
