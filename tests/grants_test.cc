// Grants and saying what is hidden (issue 11): --read/--write on exec and wrap, refused and
// missing paths, cordon's own files under a grant, a server's own program files without a flag,
// the tail of a failing server's stderr with hints, and the fast refusal of npx-style servers.
// Against the real binary, the real kernel and bwrap, and the real npm peers.
#include "runner/grants.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "core/redact.h"
#include "mcp/diagnose.h"
#include "runner/host_probe.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using cordon::testing::CordonBin;
using cordon::testing::Exists;
using cordon::testing::ReadFile;

using cordon::testing::TempDir;
using cordon::testing::WriteFile;

bool HaveSandbox() {
  return !FindOnPath("bwrap").empty() && cordon::testing::UserNamespacesEnabled();
}

std::string Peers() { return cordon::testing::FromEnv("MCP_PEERS_DIR", "/tmp/mcp-peers"); }
std::string Scripts() {
  return cordon::testing::FromEnv("CORDON_MCP_PEER_SCRIPTS",
                                  CORDON_SOURCE_DIR "/../shared/mcp-peers");
}
bool HavePeers() {
  return !FindOnPath("node").empty() &&
         Exists(Peers() + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js") &&
         Exists(Scripts() + "/sdk-client.mjs");
}

// The grant fields of a plan or record's confinement, as "access from path" lines.
std::vector<std::string> Grants(const Json& confinement) {
  std::vector<std::string> out;
  for (const auto& g : confinement.value("grants", Json::array())) {
    out.push_back(g["access"].get<std::string>() + " " + g["from"].get<std::string>() + " " +
                  g["path"].get<std::string>());
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class GrantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveSandbox()) SECURITY_SKIP("(grants) bwrap or user namespaces missing");
    std::filesystem::create_directories(dir_ / "ws");
    std::filesystem::create_directories(dir_ / "home");
    WriteFile(dir_ / "ws/a.txt", "alpha\n");
    env_ = {"HOME=" + (dir_ / "home"), "XDG_CONFIG_HOME=" + (dir_ / "config"),
            "XDG_STATE_HOME=" + (dir_ / "state"), "MCP_PEERS_DIR=" + Peers()};
  }
  std::vector<std::string> Exec(std::vector<std::string> flags, std::vector<std::string> cmd) {
    std::vector<std::string> a = {CordonBin(), "exec",        "--workspace",
                                  dir_ / "ws", "--audit-log", dir_ / "exec.jsonl"};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return a;
  }
  std::vector<std::string> Wrap(std::vector<std::string> flags, std::vector<std::string> cmd) {
    std::vector<std::string> a = {CordonBin(), "wrap",        "--workspace",
                                  dir_ / "ws", "--audit-log", dir_ / "wrap.jsonl"};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return a;
  }
  // The records of one type in a log.
  std::vector<Json> Records(const std::string& log, const std::string& type) {
    std::vector<Json> out;
    std::istringstream in(ReadFile(log));
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == type) out.push_back(j);
    }
    return out;
  }
  TempDir dir_;
  std::vector<std::string> env_;
};

// --- pure parts, table-driven

TEST(GrantRefusal, RootHomeAndAncestorsOfHomeAreRefusedOthersAreNot) {
  EXPECT_TRUE(GrantRefusal("/", "/home/me"));
  EXPECT_TRUE(GrantRefusal("/home/me", "/home/me"));
  EXPECT_TRUE(GrantRefusal("/home", "/home/me"));
  EXPECT_FALSE(GrantRefusal("/home/me/src", "/home/me"));
  EXPECT_FALSE(GrantRefusal("/home/other", "/home/me"));
  EXPECT_FALSE(GrantRefusal("/srv/data", "/home/me"));
}

TEST(ProgramFiles, NodeScriptGrantsItsPackageAndTheNodeModulesChainNeverHome) {
  TempDir t;
  const std::string home = t / "home";
  // A package installed with npm install --prefix ~/mcp: the script's package, and the
  // node_modules it resolves its dependencies from.
  WriteFile(home + "/mcp/node_modules/@s/srv/package.json", "{}");
  WriteFile(home + "/mcp/node_modules/@s/srv/dist/index.js", "");
  WriteFile(home + "/mcp/node_modules/dep/package.json", "{}");
  auto g = ProgramFileGrants({"node", home + "/mcp/node_modules/@s/srv/dist/index.js", "x"}, "/",
                             "/usr/bin:/bin", home);
  std::vector<std::string> paths;
  for (const auto& x : g) paths.push_back(x.from + " " + x.path);
  EXPECT_TRUE(Has(paths, "node_modules " + home + "/mcp/node_modules"))
      << ::testing::PrintToString(paths);
  for (const auto& x : g) {
    EXPECT_FALSE(GrantRefusal(x.path, home)) << x.path;
    EXPECT_FALSE(x.write);
  }
  // A script with no package above it below $HOME: the script alone, never $HOME.
  WriteFile(home + "/loose.py", "");
  auto loose = ProgramFileGrants({"python3", "-u", home + "/loose.py"}, "/", "/usr/bin:/bin", home);
  ASSERT_FALSE(loose.empty());
  EXPECT_EQ(loose.back().path, home + "/loose.py");
  EXPECT_EQ(loose.back().from, "script");
  // Inline code and modules name no script.
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"node", "-e", "1"}, {"python3", "-m", "http.server"}, {"python3", "-c", "1"}}) {
    for (const auto& x : ProgramFileGrants(argv, "/", "/usr/bin:/bin", home))
      EXPECT_EQ(x.from, "executable") << argv[1];
  }
}

TEST(FetchesPackage, NpxAndFriendsAreNamedInstalledBinsAndOtherCommandsAreNot) {
  TempDir ws;
  EXPECT_TRUE(
      FetchesPackageAtStart({"npx", "-y", "@modelcontextprotocol/server-everything"}, ws.path()));
  EXPECT_TRUE(FetchesPackageAtStart({"npm", "exec", "some-server"}, ws.path()));
  EXPECT_TRUE(FetchesPackageAtStart({"/usr/bin/pnpm", "dlx", "some-server"}, ws.path()));
  EXPECT_TRUE(FetchesPackageAtStart({"uvx", "mcp-server-fetch"}, ws.path()));
  EXPECT_TRUE(FetchesPackageAtStart({"pipx", "run", "mcp-server-fetch"}, ws.path()));
  EXPECT_FALSE(FetchesPackageAtStart({"node", "server.js"}, ws.path()));
  EXPECT_FALSE(FetchesPackageAtStart({"npm", "test"}, ws.path()));
  EXPECT_FALSE(FetchesPackageAtStart({"npx", "./local-script.js"}, ws.path()));
  // Installed in the workspace: npx runs it offline.
  WriteFile(ws / "node_modules/.bin/server-everything", "");
  EXPECT_FALSE(FetchesPackageAtStart({"npx", "-y", "@modelcontextprotocol/server-everything@1.0"},
                                     ws.path()));
  auto why = FetchesPackageAtStart({"npx", "-y", "pkg"}, ws.path());
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("npm registry"), std::string::npos);
  EXPECT_NE(why->find("npm cache"), std::string::npos);
}

TEST(FailureHints, PathsAndNetworkAreNamedWithTheFlagOrTheKey) {
  TempDir t;
  WriteFile(t / "lib/x.js", "");
  const std::string path_line = "Error: Cannot find module '" + (t / "lib/x.js") + "'";
  auto wrapped = mcp::FailureHints(path_line, {.wrapped = true});
  ASSERT_EQ(wrapped.size(), 1u);
  EXPECT_NE(wrapped[0].find("--read " + (t / "lib")), std::string::npos) << wrapped[0];
  EXPECT_NE(wrapped[0].find("exists on the host"), std::string::npos) << wrapped[0];
  auto configured = mcp::FailureHints(
      path_line, {.wrapped = false, .server = "fs", .source = "/h/.cordon/mcp.toml"});
  ASSERT_EQ(configured.size(), 1u);
  EXPECT_NE(configured[0].find("sandbox.read = [\"" + (t / "lib") +
                               "\"] under [servers.fs.sandbox] in /h/.cordon/mcp.toml"),
            std::string::npos)
      << configured[0];
  auto net = mcp::FailureHints("getaddrinfo EAI_AGAIN registry.npmjs.org",
                               {.wrapped = true, .preset = "npm"});
  ASSERT_EQ(net.size(), 1u);
  EXPECT_NE(net[0].find("--allow-preset npm (or --allow-domain NAME)"), std::string::npos)
      << net[0];
  // Through the proxy, the hint points at the refusals in the log instead.
  auto proxied = mcp::FailureHints("getaddrinfo EAI_AGAIN registry.npmjs.org",
                                   {.wrapped = true, .network = NetworkMode::kProxy});
  ASSERT_EQ(proxied.size(), 1u);
  EXPECT_NE(proxied[0].find("network records of the audit log"), std::string::npos) << proxied[0];
  EXPECT_TRUE(mcp::FailureHints("getaddrinfo EAI_AGAIN x",
                                {.wrapped = true, .network = NetworkMode::kAllow})
                  .empty());
  EXPECT_TRUE(mcp::FailureHints("listening on stdio", {.wrapped = true}).empty());
  // The tail is bounded and redacted.
  Redactor r(testing::ShippedRedactRules());
  std::string big(10000, 'x');
  big += "\nlast line ghp_0123456789abcdefghijklmnopqrstuvwxyzAB\n";
  const std::string tail = mcp::StderrTail(big, r, 200);
  EXPECT_LE(tail.size(), 200u);
  EXPECT_EQ(tail.find("ghp_0123"), std::string::npos) << tail;
  EXPECT_NE(tail.find("last line"), std::string::npos) << tail;
}

// The messages below are the real text: Python 3.11, Node 18 and server-filesystem 2026.8.31
// printed them (each captured from a run of that program).
TEST(FailureHints, AModuleErrorIsAModuleHintNeverANetworkOne) {
  const std::string python =
      "Traceback (most recent call last):\n"
      "  File \"/srv/mcp/server.py\", line 1, in <module>\n"
      "    import requests\n"
      "ModuleNotFoundError: No module named 'requests'";
  for (const NetworkMode mode : {NetworkMode::kNone, NetworkMode::kProxy}) {
    auto h = mcp::FailureHints(python, {.wrapped = true, .network = mode});
    ASSERT_EQ(h.size(), 1u) << ::testing::PrintToString(h);
    EXPECT_NE(h[0].find("could not import requests"), std::string::npos) << h[0];
    EXPECT_NE(h[0].find("--read DIR"), std::string::npos) << h[0];
    EXPECT_EQ(h[0].find("network"), std::string::npos) << h[0];
  }
  // ImportError names the module and the file; the hint names the module.
  auto import = mcp::FailureHints(
      "ImportError: cannot import name 'Server' from 'mcp' (/usr/lib/python3.11/mcp.py)",
      {.wrapped = true});
  ASSERT_EQ(import.size(), 1u);
  EXPECT_NE(import[0].find("could not import Server"), std::string::npos) << import[0];
  // Node, CommonJS: a package name, then the require stack.
  auto node = mcp::FailureHints(
      "node:internal/modules/cjs/loader:1210\n  throw err;\n  ^\n\n"
      "Error: Cannot find module 'express'\nRequire stack:\n- /srv/mcp/server.js\n"
      "    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)",
      {.wrapped = false, .server = "fs", .source = "/h/.cordon/mcp.toml"});
  ASSERT_EQ(node.size(), 1u) << ::testing::PrintToString(node);
  EXPECT_NE(node[0].find("could not import express"), std::string::npos) << node[0];
  EXPECT_NE(node[0].find("sandbox.read = [\"DIR\"] under [servers.fs.sandbox]"), std::string::npos)
      << node[0];
  // Node, ES modules: the package, never the importer the line also names.
  auto esm = mcp::FailureHints(
      "node:internal/modules/esm/resolve:873\n"
      "  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);\n"
      "        ^\n\n"
      "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'express' imported from "
      "/srv/mcp/server.mjs",
      {.wrapped = true});
  ASSERT_EQ(esm.size(), 1u) << ::testing::PrintToString(esm);
  EXPECT_NE(esm[0].find("could not import express"), std::string::npos) << esm[0];
  EXPECT_EQ(esm[0].find("server.mjs"), std::string::npos) << esm[0];
}

TEST(FailureHints, NetworkCausesMatchWholeWordsOnly) {
  // Node's resolver failure and Python's: network hints.
  auto node =
      mcp::FailureHints("Error: getaddrinfo ENOTFOUND registry.npmjs.org", {.wrapped = true});
  ASSERT_EQ(node.size(), 1u);
  EXPECT_NE(node[0].find("tried to reach the network"), std::string::npos) << node[0];
  auto py = mcp::FailureHints(
      "urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>",
      {.wrapped = true});
  ASSERT_EQ(py.size(), 1u);
  EXPECT_NE(py[0].find("tried to reach the network"), std::string::npos) << py[0];
  // A marker inside a longer word is not that cause.
  EXPECT_TRUE(mcp::FailureHints("WARN xenotfoundx eai_againy", {.wrapped = true}).empty());
}

TEST(FailureHints, TheNetworkHintNamesThePresetOfTheLauncher) {
  EXPECT_EQ(LauncherPreset({"npx", "-y", "pkg"}), "npm");
  EXPECT_EQ(LauncherPreset({"/usr/local/bin/uvx", "mcp-server-fetch"}), "pypi");
  EXPECT_EQ(LauncherPreset({"pipx", "run", "mcp-server-fetch"}), "pypi");
  EXPECT_EQ(LauncherPreset({"cargo", "run"}), "crates");
  EXPECT_EQ(LauncherPreset({"node", "server.js"}), "");
  const std::string line =
      "urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>";
  auto uvx = mcp::FailureHints(line, {.wrapped = true, .preset = "pypi"});
  ASSERT_EQ(uvx.size(), 1u);
  EXPECT_NE(uvx[0].find("--allow-preset pypi"), std::string::npos) << uvx[0];
  EXPECT_EQ(uvx[0].find("npm"), std::string::npos) << uvx[0];
  auto configured = mcp::FailureHints(
      line, {.server = "fetch", .source = "/h/.cordon/mcp.toml", .preset = "pypi"});
  ASSERT_EQ(configured.size(), 1u);
  EXPECT_NE(configured[0].find("sandbox.presets = [\"pypi\"]"), std::string::npos) << configured[0];
}

TEST(FailureHints, ServerFilesystemsInaccessibleDirectoryGetsAReadHint) {
  TempDir t;
  std::filesystem::create_directories(t / "docs");
  const std::string tail = "Warning: Cannot access directory " + (t / "docs") +
                           ", skipping\nError: None of the specified directories are accessible";
  auto h = mcp::FailureHints(tail, {.wrapped = true});
  ASSERT_EQ(h.size(), 1u) << ::testing::PrintToString(h);
  EXPECT_NE(h[0].find("could not open " + (t / "docs") + ":"), std::string::npos) << h[0];
  EXPECT_NE(h[0].find("--read " + (t / "docs") + " "), std::string::npos) << h[0];
  // A directory that is not on the host: its own path, not its parent.
  auto missing = mcp::FailureHints("Warning: Cannot access directory /nonexistent/notes, skipping",
                                   {.wrapped = true});
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("--read /nonexistent/notes "), std::string::npos) << missing[0];
}

TEST(FailureHints, NetworkActivityIsNamedOnlyWhenThereIsSome) {
  EXPECT_EQ(mcp::NetworkActivityNote(0, 0), "");
  const std::string n = mcp::NetworkActivityNote(3, 1);
  EXPECT_NE(n.find("3 connections through the proxy so far, 2 open now"), std::string::npos) << n;
}

// --- exec: --read and --write

TEST_F(GrantsTest, ExecReadAndWriteGrantsShowExactlyThosePaths) {
  WriteFile(dir_ / "ref/data.txt", "reference\n");
  std::filesystem::create_directories(dir_ / "out");
  // Without grants neither path is there (the private /tmp hides them).
  auto none =
      cordon::testing::Run(Exec({}, {"/bin/sh", "-c", "cat " + (dir_ / "ref/data.txt")}), env_);
  EXPECT_NE(none.exit_code, 0) << none.out;
  auto r = cordon::testing::Run(
      Exec({"--read", dir_ / "ref", "--write", dir_ / "out"},
           {"/bin/sh", "-c",
            "cat " + (dir_ / "ref/data.txt") + " && echo made > " + (dir_ / "out/made.txt") +
                " && ! echo no > " + (dir_ / "ref/new.txt")}),
      env_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "reference\n");
  EXPECT_EQ(ReadFile(dir_ / "out/made.txt"), "made\n");
  EXPECT_FALSE(Exists(dir_ / "ref/new.txt")) << "a --read path was writable";
  // The process record names both grants and who asked for them.
  auto procs = Records(dir_ / "exec.jsonl", "process");
  ASSERT_FALSE(procs.empty());
  auto g = Grants(procs.back()["confinement"]);
  EXPECT_TRUE(Has(g, "read --read " + (dir_ / "ref"))) << ::testing::PrintToString(g);
  EXPECT_TRUE(Has(g, "write --write " + (dir_ / "out"))) << ::testing::PrintToString(g);
  // And --plan shows them without running anything.
  auto plan = cordon::testing::Run(Exec({"--plan", "--read", dir_ / "ref"}, {"true"}), env_);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_TRUE(Has(Grants(Json::parse(plan.out)["confinement"]), "read --read " + (dir_ / "ref")));
}

TEST_F(GrantsTest, MissingAndDangerousGrantsAreRefusedWithStableCodes) {
  for (const char* cmd : {"exec", "wrap"}) {
    auto argv = [&](std::vector<std::string> flags) {
      return std::string(cmd) == "exec" ? Exec(flags, {"true"}) : Wrap(flags, {"true"});
    };
    auto missing = cordon::testing::Run(argv({"--read", dir_ / "no/such/dir"}), env_);
    EXPECT_EQ(missing.exit_code, 125) << cmd;
    EXPECT_NE(missing.err.find("not_found: --read " + (dir_ / "no/such/dir")), std::string::npos)
        << cmd << ": " << missing.err;
    auto missing_w = cordon::testing::Run(argv({"--write", dir_ / "gone"}), env_);
    EXPECT_EQ(missing_w.exit_code, 125) << cmd;
    EXPECT_NE(missing_w.err.find("not_found: --write"), std::string::npos) << missing_w.err;
    // `/`, $HOME and an ancestor of $HOME, for reading and for writing.
    for (const std::string flag : {"--read", "--write"}) {
      for (const std::string& path : {std::string("/"), dir_ / "home", dir_.path()}) {
        auto r = cordon::testing::Run(argv({flag, path}), env_);
        EXPECT_EQ(r.exit_code, 125) << cmd << " " << flag << " " << path;
        EXPECT_NE(r.err.find("denied_by_policy: " + flag + " " + path + " is refused"),
                  std::string::npos)
            << cmd << " " << flag << " " << path << ": " << r.err;
      }
    }
  }
}

TEST_F(GrantsTest, CordonsOwnFilesStayMaskedUnderAReadAndAWriteGrant) {
  // The audit log and key lie in a directory the command is granted, read and write.
  std::filesystem::create_directories(dir_ / "logs");
  WriteFile(dir_ / "logs/key", "0123456789abcdef0123456789abcdef\n");
  ::chmod((dir_ / "logs/key").c_str(), 0600);
  WriteFile(dir_ / "logs/other.txt", "other\n");
  const std::string log = dir_ / "logs/audit.jsonl";
  for (const std::string flag : {"--read", "--write"}) {
    auto r = cordon::testing::Run(
        {CordonBin(), "exec", "--workspace", dir_ / "ws", "--audit-log", log, "--audit-key-file",
         dir_ / "logs/key", flag, dir_ / "logs", "--", "/bin/sh", "-c",
         "cat " + (dir_ / "logs/other.txt") + "; cat " + log + " " + (dir_ / "logs/key") +
             "; echo x >> " + log + "; echo y > " + (dir_ / "logs/key") + "; true"},
        env_);
    EXPECT_EQ(r.exit_code, 0) << flag << r.err;
    EXPECT_EQ(r.out, "other\n") << flag << ": cordon's own files were readable";
  }
  EXPECT_EQ(ReadFile(dir_ / "logs/key"), "0123456789abcdef0123456789abcdef\n");
  auto v = cordon::testing::Run(
      {CordonBin(), "audit", "verify", log, "--key-file", dir_ / "logs/key"}, env_);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// --- wrap: the server's own program files

TEST_F(GrantsTest, WrappedNodeServerRunsWithoutReadAndThePlanNamesItsPackage) {
  if (!HavePeers()) GTEST_SKIP() << "SKIPPED MCP PEER TEST: run scripts/install-mcp-peers.sh";
  const std::string pkg = Peers() + "/node_modules/@modelcontextprotocol/server-everything";
  auto plan =
      cordon::testing::Run(Wrap({"--plan"}, {"node", pkg + "/dist/index.js", "stdio"}), env_);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  auto g = Grants(Json::parse(plan.out)["confinement"]);
  EXPECT_TRUE(
      Has(g, "read node_modules " + std::filesystem::canonical(Peers()).string() + "/node_modules"))
      << ::testing::PrintToString(g);
  // Through the official SDK client, with no --read at all.
  auto r = cordon::testing::Run(
      {FindOnPath("node"), Scripts() + "/sdk-client.mjs", "--full-env", "--call", "echo", "--args",
       R"({"message":"no flag needed"})", "--", CordonBin(), "wrap", "--workspace", dir_ / "ws",
       "--audit-log", dir_ / "wrap.jsonl", "--", "node", pkg + "/dist/index.js", "stdio"},
      env_);
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_TRUE(j.value("ok", false)) << r.out << r.err;
  EXPECT_EQ(j["call"]["result"]["content"][0]["text"], "Echo: no flag needed") << r.out;
  auto procs = Records(dir_ / "wrap.jsonl", "process");
  ASSERT_FALSE(procs.empty());
  EXPECT_FALSE(Grants(procs.back()["confinement"]).empty()) << procs.back().dump();
}

TEST_F(GrantsTest, WrappedExecutableOutsideTheWorkspaceAndAPythonPackageAreReadable) {
  if (!Exists("/usr/bin/python3")) GTEST_SKIP() << "SKIPPED: /usr/bin/python3 is missing";
  // A minimal MCP server in Python, answering initialize and exiting on EOF.
  const std::string server =
      "#!/usr/bin/python3\n"
      "import json, sys\n"
      "import helper\n"
      "for line in sys.stdin:\n"
      "    m = json.loads(line)\n"
      "    if 'id' in m:\n"
      "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {'protocolVersion': "
      "'2025-06-18', 'capabilities': {}, 'serverInfo': {'name': helper.NAME, 'version': '1'}}}), "
      "flush=True)\n";
  WriteFile(dir_ / "pysrv/pyproject.toml", "[project]\nname = 'pysrv'\n");
  WriteFile(dir_ / "pysrv/src/server.py", server);
  WriteFile(dir_ / "pysrv/src/helper.py", "NAME = 'py-helper'\n");
  ::chmod((dir_ / "pysrv/src/server.py").c_str(), 0755);
  const std::string init =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";
  // Started as an interpreter's script, and as an executable: both see their package.
  for (const auto& cmd : std::vector<std::vector<std::string>>{
           {"/usr/bin/python3", dir_ / "pysrv/src/server.py"}, {dir_ / "pysrv/src/server.py"}}) {
    auto r = cordon::testing::Run(Wrap({}, cmd), env_, init + "\n");
    EXPECT_EQ(r.exit_code, 0) << cmd[0] << ": " << r.err;
    EXPECT_NE(r.out.find("py-helper"), std::string::npos) << cmd[0] << ": " << r.out << r.err;
  }
  auto plan = cordon::testing::Run(Wrap({"--plan"}, {dir_ / "pysrv/src/server.py"}), env_);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  auto g = Grants(Json::parse(plan.out)["confinement"]);
  EXPECT_TRUE(Has(g, "read executable " + (dir_ / "pysrv/src/server.py")) ||
              Has(g, "read script's package " + (dir_ / "pysrv")))
      << ::testing::PrintToString(g);
}

// A malicious repository cannot widen a server's program files: a script argument that is a
// symlink in the workspace (`node -r ./init.js ./data`, data -> ~/.config, or cred ->
// ~/.git-credentials) is no program file outside it, so the preloaded init.js cannot read there.
TEST_F(GrantsTest, ASymlinkInTheWorkspaceNeverCarriesAProgramFileGrantOutside) {
  if (FindOnPath("node").empty()) GTEST_SKIP() << "SKIPPED: node is missing";
  const std::string home = std::filesystem::canonical(dir_ / "home").string();
  const std::string ws = std::filesystem::canonical(dir_ / "ws").string();
  WriteFile(home + "/.config/tool/token", "TOKEN-FROM-HOME-CONFIG\n");
  WriteFile(home + "/.git-credentials", "CREDENTIALS-FROM-HOME\n");
  std::filesystem::create_directory_symlink("../home/.config", ws + "/data");
  std::filesystem::create_symlink(home + "/.git-credentials", ws + "/cred");
  std::filesystem::create_directories(ws + "/sub");
  std::filesystem::create_directory_symlink(home, ws + "/sub/h");
  WriteFile(ws + "/init.js",
            "const fs = require('fs');\n"
            "for (const p of ['" +
                home + "/.config/tool/token', '" + home +
                "/.git-credentials']) {\n"
                "  try { process.stderr.write('READ ' + fs.readFileSync(p, 'utf8')); }\n"
                "  catch (e) { process.stderr.write('REFUSED ' + e.code + '\\n'); }\n"
                "}\n"
                "process.exit(0);\n");
  for (const std::string& target :
       {ws + "/data", ws + "/cred", ws + "/sub/h/.config/tool/token", ws + "/sub/../data/tool"}) {
    auto plan =
        cordon::testing::Run(Wrap({"--plan"}, {"node", "-r", ws + "/init.js", target}), env_);
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    for (const auto& g : Grants(Json::parse(plan.out)["confinement"])) {
      EXPECT_EQ(g.find(home), std::string::npos) << target << ": " << g;
    }
    auto r = cordon::testing::Run(Wrap({}, {"node", "-r", ws + "/init.js", target}), env_, "");
    EXPECT_EQ(r.err.find("FROM-HOME"), std::string::npos) << target << ": " << r.err;
    EXPECT_NE(r.err.find("REFUSED ENOENT"), std::string::npos) << target << ": " << r.err;
  }
  // A path outside the workspace the command names itself is still its program file.
  auto plan = cordon::testing::Run(
      Wrap({"--plan"}, {"node", "-r", ws + "/init.js", home + "/.config/tool/token"}), env_);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_TRUE(Has(Grants(Json::parse(plan.out)["confinement"]),
                  "read script " + home + "/.config/tool/token"))
      << plan.out;
}

// --- saying why a server failed

TEST_F(GrantsTest, WrapSaysWhyTheServerExitedRedactedWithAReadHintAndRecordsIt) {
  if (FindOnPath("node").empty()) GTEST_SKIP() << "SKIPPED: node is missing";
  // The server needs a module outside the sandbox, and prints a token on its way out.
  WriteFile(dir_ / "lib/helper.js", "module.exports = 1;\n");
  WriteFile(dir_ / "ws/server.js",
            "console.error('token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB');\n"
            "require('" +
                (dir_ / "lib/helper.js") + "');\n");
  const std::string init = R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})";
  auto r = cordon::testing::Run(Wrap({}, {"node", dir_ / "ws/server.js"}), env_, init + "\n");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("exited with code"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Cannot find module"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: the server could not open " + (dir_ / "lib/helper.js")),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--read " + (dir_ / "lib")), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("ghp_0123456789"), std::string::npos) << "unredacted: " << r.err;
  auto diags = Records(dir_ / "wrap.jsonl", "mcp_diagnostic");
  bool recorded = false;
  for (const auto& d : diags) {
    if (d.value("stderr", "").find("Cannot find module") != std::string::npos) recorded = true;
  }
  EXPECT_TRUE(recorded) << ReadFile(dir_ / "wrap.jsonl");
  // The hint's remedy works.
  auto fixed = cordon::testing::Run(
      Wrap({"--read", dir_ / "lib"},
           {"node", "-e", "require('" + (dir_ / "lib/helper.js") + "'); console.error('loaded')"}),
      env_, "");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
}

TEST_F(GrantsTest, WrapSaysWhenTheServerDoesNotAnswerInitializeWithTheNetworkHint) {
  // A server stuck on the network, as npm is without it: the client is still waiting, and the
  // person reading the client's log learns why within seconds.
  const std::string init = R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})";
  std::string wrap;
  for (const auto& a : Wrap({}, {"/bin/sh", "-c",
                                 "echo \"npm error network request to https://registry.npmjs.org "
                                 "failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org\" >&2; "
                                 "sleep 30"})) {
    wrap += " '" + a + "'";
  }
  const auto start = std::chrono::steady_clock::now();
  auto r =
      cordon::testing::Run({"/bin/sh", "-c", "(echo '" + init + "'; sleep 12) |" + wrap}, env_);
  const auto secs =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(secs, 25);
  EXPECT_NE(r.err.find("has not answered initialize after 10 s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("EAI_AGAIN"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: the server tried to reach the network"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-preset PRESET"), std::string::npos) << r.err;
  bool recorded = false;
  for (const auto& d : Records(dir_ / "wrap.jsonl", "mcp_diagnostic")) {
    if (d.value("reason", "") == "no answer to initialize" &&
        d.value("stderr", "").find("EAI_AGAIN") != std::string::npos)
      recorded = true;
  }
  EXPECT_TRUE(recorded) << ReadFile(dir_ / "wrap.jsonl");
}

TEST_F(GrantsTest, WrapSaysTheServerIsDownloadingWhileItsConnectionsAreOpen) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is missing";
  // A registry on 127.0.0.1 that takes the request and never answers: a download in progress,
  // as npx's is, with nothing on the server's stderr.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  const std::string init = R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})";
  std::string wrap;
  for (const auto& a :
       Wrap({"--resolve", "registry.example.test=127.0.0.1", "--allow-domain",
             "registry.example.test:" + port},
            {"/bin/sh", "-c",
             "curl -s -o /dev/null http://registry.example.test:" + port + "/pkg.tgz; sleep 30"})) {
    wrap += " '" + a + "'";
  }
  auto r =
      cordon::testing::Run({"/bin/sh", "-c", "(echo '" + init + "'; sleep 12) |" + wrap}, env_);
  ::close(listener);
  EXPECT_NE(r.err.find("has not answered initialize after 10 s; it is using the network: 1 "
                       "connection through the proxy so far, 1 open now"),
            std::string::npos)
      << r.err;
  // That line, not "the server wrote nothing" (the exit after the client left may say so).
  const std::size_t at = r.err.find("has not answered initialize");
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::string line = r.err.substr(at, r.err.find('\n', at) - at);
  EXPECT_EQ(line.find("wrote nothing"), std::string::npos) << line;
  bool recorded = false;
  for (const auto& d : Records(dir_ / "wrap.jsonl", "mcp_diagnostic")) {
    if (d.value("reason", "") == "no answer to initialize" &&
        d.value("message", "").find("using the network") != std::string::npos)
      recorded = true;
  }
  EXPECT_TRUE(recorded) << ReadFile(dir_ / "wrap.jsonl");
}

TEST_F(GrantsTest, NpxServersFailFastNamingTheNetworkAndTheNpmCache) {
  const auto start = std::chrono::steady_clock::now();
  auto r = cordon::testing::Run(
      {"/usr/bin/timeout", "30", CordonBin(), "wrap", "--workspace", dir_ / "ws", "--audit-log",
       dir_ / "wrap.jsonl", "--", "npx", "-y", "@modelcontextprotocol/server-everything"},
      env_,
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})"
      "\n");
  const auto secs =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_LT(secs, 5);
  EXPECT_NE(r.err.find("denied_by_policy"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("network none"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("npm registry"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("npm cache"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(--allow-preset npm, or --network allow)"), std::string::npos) << r.err;
  // uvx downloads from the Python package index: its preset is pypi.
  auto uvx = cordon::testing::Run(
      {"/usr/bin/timeout", "30", CordonBin(), "wrap", "--workspace", dir_ / "ws", "--audit-log",
       dir_ / "wrap.jsonl", "--", "uvx", "mcp-server-fetch"},
      env_, "");
  EXPECT_EQ(uvx.exit_code, 125) << uvx.err;
  EXPECT_NE(uvx.err.find("(--allow-preset pypi, or --network allow)"), std::string::npos)
      << uvx.err;
  EXPECT_EQ(uvx.err.find("preset npm"), std::string::npos) << uvx.err;
  // A configured server says the same, naming its key, in `mcp test`.
  WriteFile(dir_ / "home/.cordon/mcp.toml",
            "[servers.ev]\ncommand = \"npx\"\nargs = [\"-y\", "
            "\"@modelcontextprotocol/server-everything\"]\n");
  auto t = cordon::testing::Run(
      {"/usr/bin/timeout", "30", CordonBin(), "mcp", "test", "ev", "--workspace", dir_ / "ws"},
      env_);
  EXPECT_NE(t.exit_code, 0);
  EXPECT_NE(t.err.find("npm registry"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("sandbox.network"), std::string::npos) << t.err;
}

TEST_F(GrantsTest, McpTestAndTrustSayWhyAConfiguredServerFailedAndTheRecordHoldsItsStderr) {
  if (FindOnPath("node").empty()) GTEST_SKIP() << "SKIPPED: node is missing";
  WriteFile(dir_ / "lib/helper.js", "module.exports = 1;\n");
  WriteFile(dir_ / "ws/server.js", "require('" + (dir_ / "lib/helper.js") + "');\n");
  const std::string cfg = dir_ / "home/.cordon/mcp.toml";
  WriteFile(cfg, "[servers.broken]\ncommand = \"node\"\nargs = [\"" + (dir_ / "ws/server.js") +
                     "\"]\ntimeout_secs = 10\n");
  auto t = cordon::testing::Run({CordonBin(), "mcp", "test", "broken", "--workspace", dir_ / "ws",
                                 "--audit-log", dir_ / "mcp.jsonl"},
                                env_);
  EXPECT_NE(t.exit_code, 0);
  EXPECT_NE(t.err.find("Cannot find module"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("sandbox.read = [\"" + (dir_ / "lib") +
                       "\"] under [servers.broken.sandbox] in " + cfg),
            std::string::npos)
      << t.err;
  bool recorded = false;
  for (const auto& d : Records(dir_ / "mcp.jsonl", "mcp_diagnostic")) {
    if (d.value("stderr", "").find("Cannot find module") != std::string::npos) recorded = true;
  }
  EXPECT_TRUE(recorded) << ReadFile(dir_ / "mcp.jsonl");
  // With the grant the hint names, the server starts (and then fails only for not being MCP).
  WriteFile(cfg, "[servers.broken]\ncommand = \"node\"\nargs = [\"" + (dir_ / "ws/server.js") +
                     "\"]\ntimeout_secs = 10\n[servers.broken.sandbox]\nread = [\"" +
                     (dir_ / "lib") + "\"]\n");
  auto fixed = cordon::testing::Run(
      {CordonBin(), "mcp", "test", "broken", "--workspace", dir_ / "ws"}, env_);
  EXPECT_EQ(fixed.err.find("Cannot find module"), std::string::npos) << fixed.err;
  // A missing sandbox.read path is an error naming the file and the key, not a silent drop.
  WriteFile(cfg,
            "[servers.broken]\ncommand = \"node\"\nargs = [\"x.js\"]\n[servers.broken.sandbox]\n"
            "read = [\"" +
                (dir_ / "nope") + "\"]\n");
  auto missing = cordon::testing::Run(
      {CordonBin(), "mcp", "test", "broken", "--workspace", dir_ / "ws"}, env_);
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(
      missing.err.find("not_found: server broken (" + cfg + "): sandbox.read " + (dir_ / "nope")),
      std::string::npos)
      << missing.err;
}

// mcp test and mcp trust: a configured server that used its time to download (its connections
// through the proxy) is said to be using the network, with the key that gives it longer, not
// "wrote nothing".
TEST_F(GrantsTest, McpTestAndTrustSayAConfiguredServerIsDownloading) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is missing";
  // A registry on 127.0.0.1 that takes the request and never answers: a download in progress,
  // as npx's is, with nothing on the server's stderr.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  WriteFile(dir_ / "config/cordon/policies.d/50-registry.toml",
            "[network]\nresolve = [\"registry.example.test=127.0.0.1\"]\n");
  const std::string cfg = dir_ / "home/.cordon/mcp.toml";
  WriteFile(cfg,
            "[servers.dl]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"curl -s -o /dev/null "
            "http://registry.example.test:" +
                port +
                "/pkg.tgz; sleep 30\"]\ntimeout_secs = 3\n[servers.dl.sandbox]\n"
                "network = \"proxy\"\nallow_domains = [\"registry.example.test:" +
                port + "\"]\n");
  for (const char* verb : {"test", "trust"}) {
    const std::string log = dir_ / (std::string(verb) + ".jsonl");
    auto r = cordon::testing::Run(
        {CordonBin(), "mcp", verb, "dl", "--workspace", dir_ / "ws", "--audit-log", log}, env_);
    EXPECT_NE(r.exit_code, 0) << verb;
    EXPECT_NE(r.err.find("initialize: no answer within 3 s; it is using the network: 1 "
                         "connection through the proxy so far, 1 open now"),
              std::string::npos)
        << verb << ": " << r.err;
    EXPECT_NE(
        r.err.find("or let it take longer: timeout_secs under [servers.dl] in " + cfg + " (now 3)"),
        std::string::npos)
        << verb << ": " << r.err;
    EXPECT_EQ(r.err.find("wrote nothing"), std::string::npos) << verb << ": " << r.err;
    bool recorded = false;
    for (const auto& d : Records(log, "mcp_diagnostic")) {
      if (d.value("reason", "") == "initialize failed" &&
          d.value("message", "").find("using the network") != std::string::npos)
        recorded = true;
    }
    EXPECT_TRUE(recorded) << verb << ": " << ReadFile(log);
  }
  ::close(listener);
}

TEST_F(GrantsTest, AProjectsSandboxReadOutsideTheWorkspaceIsReportedOnStderr) {
  WriteFile(dir_ / "outside/data.txt", "x\n");
  WriteFile(dir_ / "ws/.cordon/mcp.toml",
            "[servers.proj]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"exit 1\"]\ntimeout_secs = 5\n"
            "[servers.proj.sandbox]\nread = [\"" +
                (dir_ / "outside") + "\"]\n");
  auto r = cordon::testing::Run({CordonBin(), "mcp", "trust", "proj", "--workspace", dir_ / "ws",
                                 "--audit-log", dir_ / "trust.jsonl"},
                                env_);
  EXPECT_NE(r.err.find("sandbox.read " + (dir_ / "outside") + " lies outside the workspace"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("dropped"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cordon
