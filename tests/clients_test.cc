// docs/clients.md cannot rot: every block marked `<!-- tested: ... -->` is read out of the file,
// its placeholders replaced, and the command it names started through the official TypeScript
// SDK client against the real binary and the real npm servers; the tool named in the marker is
// called and its result must hold the expected text.
#include <gtest/gtest.h>

#include <regex>

#include "policy/toml_parse.h"
#include "runner/host_probe.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using cordon::testing::CordonBin;
using cordon::testing::Exists;
using cordon::testing::ReadFile;

using cordon::testing::TempDir;
using cordon::testing::WriteFile;

struct Snippet {
  std::map<std::string, std::string> marker;  // tested, server, call, args, expect
  std::string lang;                           // json or toml
  std::string text;
};

std::vector<Snippet> TestedSnippets(const std::string& doc) {
  std::vector<Snippet> out;
  static const std::regex kBlock(R"(<!-- (tested: [^\n]*?) -->\n```(json|toml)\n([\s\S]*?)\n```)");
  for (std::sregex_iterator it(doc.begin(), doc.end(), kBlock), end; it != end; ++it) {
    Snippet s;
    std::string fields = (*it)[1];
    for (std::size_t start = 0; start < fields.size();) {
      std::size_t semi = fields.find("; ", start);
      if (semi == std::string::npos) semi = fields.size();
      const std::string kv = fields.substr(start, semi - start);
      const std::size_t colon = kv.find(": ");
      if (colon != std::string::npos) s.marker[kv.substr(0, colon)] = kv.substr(colon + 2);
      start = semi + 2;
    }
    s.lang = (*it)[2];
    s.text = (*it)[3];
    out.push_back(std::move(s));
  }
  return out;
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// The one server a snippet defines, whatever the client's layout: command, args, env.
struct ServerEntry {
  std::string command;
  std::vector<std::string> args;
  std::vector<std::string> env;  // NAME=VALUE
};

std::optional<ServerEntry> ServerOf(const Snippet& s, const std::string& name) {
  ServerEntry e;
  if (s.lang == "json") {
    Json j = Json::parse(s.text, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    // Claude Desktop and Cursor: mcpServers; VS Code: servers (with "type": "stdio").
    const Json& servers = j.contains("mcpServers") ? j["mcpServers"] : j["servers"];
    if (!servers.is_object() || !servers.contains(name)) return std::nullopt;
    const Json& d = servers[name];
    if (d.contains("type") && d["type"] != "stdio") return std::nullopt;
    e.command = d.value("command", "");
    e.args = d.value("args", std::vector<std::string>{});
    const Json env = d.value("env", Json::object());
    for (const auto& [k, v] : env.items()) e.env.push_back(k + "=" + v.get<std::string>());
    return e;
  }
  auto root = ParseToml(s.text, "docs/clients.md");  // Codex CLI: [mcp_servers.NAME]
  if (!root) return std::nullopt;
  const toml::table* t = (*root)["mcp_servers"][name].as_table();
  if (t == nullptr) return std::nullopt;
  e.command = (*t)["command"].value_or(std::string());
  if (const toml::array* a = (*t)["args"].as_array()) {
    for (const auto& x : *a) e.args.push_back(x.value_or(std::string()));
  }
  if (const toml::table* env = (*t)["env"].as_table()) {
    for (auto&& [k, v] : *env)
      e.env.push_back(std::string(k.str()) + "=" + v.value_or(std::string()));
  }
  return e;
}

TEST(ClientsDoc, EveryTestedSnippetRunsAgainstTheRealBinaryAndARealServer) {
  const std::string peers = cordon::testing::FromEnv("MCP_PEERS_DIR", "/tmp/mcp-peers");
  const std::string scripts =
      cordon::testing::FromEnv("CORDON_MCP_PEER_SCRIPTS", CORDON_SOURCE_DIR "/../shared/mcp-peers");
  if (FindOnPath("node").empty() || !Exists(scripts + "/sdk-client.mjs") ||
      !Exists(peers + "/node_modules/@modelcontextprotocol/server-filesystem")) {
    GTEST_SKIP() << "SKIPPED MCP PEER TEST: node or the peers are missing; run "
                    "scripts/install-mcp-peers.sh";
  }
  if (FindOnPath("bwrap").empty() || !cordon::testing::UserNamespacesEnabled())
    GTEST_SKIP() << "SKIPPED SANDBOX TEST: bwrap or user namespaces missing";
  const auto snippets = TestedSnippets(ReadFile(CORDON_SOURCE_DIR "/docs/clients.md"));
  // The five clients, and cordon serve as a server at least once.
  std::set<std::string> clients, servers;
  for (const auto& s : snippets) {
    clients.insert(s.marker.at("tested"));
    servers.insert(s.marker.at("server"));
  }
  for (const char* c : {"claude-code", "claude-desktop", "vscode", "cursor", "codex"})
    EXPECT_TRUE(clients.count(c)) << "docs/clients.md has no tested snippet for " << c;
  EXPECT_TRUE(servers.count("cordon")) << "no snippet runs cordon serve";
  for (const auto& s : snippets) {
    SCOPED_TRACE(s.marker.at("tested"));
    TempDir dir;
    WriteFile(dir / "project/a.txt", "alpha\nbeta\n");
    WriteFile(dir / "docs/guide.md", "# the cordon guide\n");
    std::filesystem::create_directories(dir / "scratch");
    std::filesystem::create_directories(dir / "home");
    auto fill = [&](std::string v) {
      v = ReplaceAll(v, "/path/to/project", dir / "project");
      v = ReplaceAll(v, "${workspaceFolder}", dir / "project");
      v = ReplaceAll(v, "/path/to/docs", dir / "docs");
      v = ReplaceAll(v, "/path/to/scratch", dir / "scratch");
      return ReplaceAll(v, "/path/to/mcp-servers", peers);
    };
    auto entry = ServerOf(s, s.marker.at("server"));
    ASSERT_TRUE(entry) << "cannot read server " << s.marker.at("server") << " in:\n" << s.text;
    ASSERT_EQ(entry->command, "cordon");
    std::vector<std::string> argv = {FindOnPath("node"),
                                     scripts + "/sdk-client.mjs",
                                     "--full-env",
                                     "--call",
                                     s.marker.at("call"),
                                     "--args",
                                     fill(s.marker.at("args")),
                                     "--",
                                     CordonBin()};
    for (const auto& a : entry->args) argv.push_back(fill(a));
    // The client's env reaches cordon, on top of a home and audit directory of the test's own.
    std::vector<std::string> env = {"HOME=" + (dir / "home"), "XDG_CONFIG_HOME=" + (dir / "config"),
                                    "XDG_STATE_HOME=" + (dir / "state"), "MCP_PEERS_DIR=" + peers};
    for (const auto& e : entry->env) env.push_back(fill(e));
    auto r = cordon::testing::Run(argv, env);
    Json j = Json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out << r.err;
    EXPECT_TRUE(j.value("ok", false)) << r.out << r.err;
    const std::string result = j["call"]["result"].dump();
    EXPECT_NE(result.find(fill(s.marker.at("expect"))), std::string::npos) << r.out << r.err;
    EXPECT_FALSE(j["call"]["result"].value("isError", false)) << result;
  }
}

// `cordon doctor` checks what the snippets rely on beyond the sandbox: a Node server started
// by `node` runs confined with its program files readable.
TEST(ClientsDoc, DoctorChecksThatNodeRunsConfinedAsAWrappedServer) {
  if (FindOnPath("node").empty()) GTEST_SKIP() << "SKIPPED: node is not installed";
  if (FindOnPath("bwrap").empty() || !cordon::testing::UserNamespacesEnabled())
    GTEST_SKIP() << "SKIPPED SANDBOX TEST: bwrap or user namespaces missing";
  auto r = cordon::testing::Run({CordonBin(), "doctor", "--json"});
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  bool found = false;
  for (const auto& c : j["checks"]) {
    if (c.value("name", "") != "mcp_server_node") continue;
    found = true;
    EXPECT_TRUE(c.value("ok", false)) << c.dump();
    EXPECT_NE(c.value("detail", "").find("runs confined as a wrapped server"), std::string::npos)
        << c.dump();
  }
  EXPECT_TRUE(found) << r.out;
  EXPECT_TRUE(j["checks"].dump().find("mcp_server_python3") != std::string::npos) << r.out;
}

}  // namespace
}  // namespace cordon
