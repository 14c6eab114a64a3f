// cordon setup CLIENT: the pure edit of each client's file (table-driven), then the real binary on
// real configuration files in a temporary HOME: add, add again, remove, wrap, unwrap, --dry-run,
// a file it must refuse, and everything else in the file kept.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <regex>

#include "mcp/client_setup.h"
#include "policy/toml_parse.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using cordon::testing::CordonBin;
using cordon::testing::Exists;
using cordon::testing::ReadFile;
using cordon::testing::TempDir;
using cordon::testing::WriteFile;
using mcp::Client;
using mcp::SetupAction;
using mcp::SetupRequest;
using OJson = nlohmann::ordered_json;

SetupRequest Req(SetupAction action, std::string name = "cordon") {
  SetupRequest r;
  r.action = action;
  r.name = std::move(name);
  r.workspace = "/p";
  return r;
}

// --- the edit, without a file

TEST(ClientSetupEdit, AddToAnEmptyJsonFileWritesTheDocumentedShape) {
  auto e = mcp::EditClientConfig(Client::kCursor, "", "mcp.json", Req(SetupAction::kAdd));
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_TRUE(e->changed);
  EXPECT_EQ(e->text,
            "{\n  \"mcpServers\": {\n    \"cordon\": {\n      \"command\": \"cordon\",\n      "
            "\"args\": [\n        \"serve\",\n        \"--workspace\",\n        \"/p\"\n      ]\n"
            "    }\n  }\n}\n");
  auto v = mcp::EditClientConfig(Client::kVsCode, "", "mcp.json", Req(SetupAction::kAdd));
  ASSERT_TRUE(v);
  EXPECT_EQ(
      OJson::parse(v->text)["servers"]["cordon"],
      OJson::parse(R"({"type":"stdio","command":"cordon","args":["serve","--workspace","/p"]})"));
}

TEST(ClientSetupEdit, JsonKeepsOtherKeysTheirOrderAndTheFileIndent) {
  const std::string text =
      "{\n    \"zeta\": 1,\n    \"mcpServers\": {\n        \"other\": {\"command\": \"x\"}\n    "
      "},\n    \"alpha\": [true, null, 2.5, \"\\u00e9\"]\n}";
  auto e = mcp::EditClientConfig(Client::kClaudeCode, text, "f", Req(SetupAction::kAdd));
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_NE(e->text.find("\n    \"zeta\": 1,\n    \"mcpServers\""), std::string::npos) << e->text;
  EXPECT_EQ(e->text.back(), '}') << "no newline was at the end, none is added";
  OJson before = OJson::parse(text), after = OJson::parse(e->text);
  after["mcpServers"].erase("cordon");
  EXPECT_EQ(before, after);
  // Removing it again gives the same document back.
  auto r = mcp::EditClientConfig(Client::kClaudeCode, e->text, "f", Req(SetupAction::kRemove));
  ASSERT_TRUE(r);
  EXPECT_EQ(OJson::parse(r->text), before);
}

TEST(ClientSetupEdit, FilesItCannotKeepIntactAreRefused) {
  struct Case {
    Client client;
    const char* text;
    Code code;
    const char* says;
  } cases[] = {
      {Client::kCursor, "{\"mcpServers\": {}, }", Code::kInvalidInput, "not valid JSON"},
      {Client::kVsCode, "{\n  // mine\n  \"servers\": {}\n}", Code::kInvalidInput, "comments"},
      {Client::kCursor, "[1, 2]", Code::kInvalidInput, "not a JSON object"},
      {Client::kClaudeDesktop, "{\"mcpServers\": []}", Code::kInvalidInput, "not an object"},
      {Client::kCodex, "[mcp_servers.x\ncommand = 1", Code::kInvalidInput, "f:1"},
      {Client::kCodex, "mcp_servers = { x = { command = \"a\" } }", Code::kInvalidInput, "inline"},
  };
  for (const auto& c : cases) {
    auto e = mcp::EditClientConfig(c.client, c.text, "f", Req(SetupAction::kAdd));
    ASSERT_FALSE(e) << c.text;
    EXPECT_EQ(e.error().code, c.code) << c.text;
    EXPECT_NE(e.error().message.find(c.says), std::string::npos) << e.error().message;
  }
  // A dotted-key definition of the entry itself is not rewritten either.
  auto d = mcp::EditClientConfig(Client::kCodex, "mcp_servers.srv.command = \"a\"\n", "f",
                                 Req(SetupAction::kWrap, "srv"));
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("edit it by hand"), std::string::npos) << d.error().message;
}

TEST(ClientSetupEdit, AnotherDefinitionUnderTheNameNeedsForce) {
  // Not cordon serve (cordon wrap of a server, here): --force replaces it.
  const std::string text =
      R"({"mcpServers": {"cordon": {"command": "cordon", "args": ["wrap", "--", "x"]}}})";
  auto e = mcp::EditClientConfig(Client::kCursor, text, "f", Req(SetupAction::kAdd));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, Code::kAlreadyExists);
  EXPECT_NE(e.error().message.find("--force"), std::string::npos);
  auto r = Req(SetupAction::kAdd);
  r.force = true;
  auto forced = mcp::EditClientConfig(Client::kCursor, text, "f", r);
  ASSERT_TRUE(forced);
  EXPECT_EQ(OJson::parse(forced->text)["mcpServers"]["cordon"]["args"].size(), 3u);
  // A server that is not cordon is not removed by --remove without --force.
  auto other =
      mcp::EditClientConfig(Client::kCursor, R"({"mcpServers": {"cordon": {"command": "node"}}})",
                            "f", Req(SetupAction::kRemove));
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("does not run cordon"), std::string::npos);
}

// serve's flags follow the workspace; an entry that runs cordon serve is updated by a run with
// other flags (its other keys kept), and left alone by a run with the same ones.
TEST(ClientSetupEdit, ServeFlagsAreWrittenAndARerunUpdatesCordonsEntry) {
  auto with = [](std::vector<std::string> flags) {
    SetupRequest r = Req(SetupAction::kAdd);
    r.flags = std::move(flags);
    return r;
  };
  const std::vector<std::string> npm = {"--allow-preset", "npm", "--timeout", "900"};
  auto a = mcp::EditClientConfig(Client::kClaudeCode, R"({"mcpServers": {}})", "f", with(npm));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(OJson::parse(a->text)["mcpServers"]["cordon"]["args"],
            OJson::parse(R"(["serve", "--workspace", "/p", "--allow-preset", "npm",
                             "--timeout", "900"])"));
  auto same = mcp::EditClientConfig(Client::kClaudeCode, a->text, "f", with(npm));
  ASSERT_TRUE(same);
  EXPECT_FALSE(same->changed) << same->summary;
  // The entry also has an env (the user's, or planted by a cloned project's file): not adopted
  // unseen; with --force, an update keeps it, and its place.
  OJson edited = OJson::parse(a->text);
  edited["mcpServers"]["cordon"]["env"] = {{"K", "v"}};
  auto refused = mcp::EditClientConfig(Client::kClaudeCode, edited.dump(2), "f",
                                       with({"--network", "loopback", "--read", "/d"}));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kAlreadyExists);
  EXPECT_NE(refused.error().message.find("also sets env"), std::string::npos)
      << refused.error().message;
  auto forced = [&](std::vector<std::string> flags) {
    SetupRequest r = with(std::move(flags));
    r.force = true;
    return r;
  };
  auto u = mcp::EditClientConfig(Client::kClaudeCode, edited.dump(2), "f",
                                 forced({"--network", "loopback", "--read", "/d"}));
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_TRUE(u->changed);
  EXPECT_EQ(u->summary,
            "updated server \"cordon\" in f: it runs cordon serve --workspace /p --network "
            "loopback --read /d");
  EXPECT_EQ(OJson::parse(u->text)["mcpServers"]["cordon"],
            OJson::parse(R"({"command": "cordon", "args": ["serve", "--workspace", "/p",
                             "--network", "loopback", "--read", "/d"], "env": {"K": "v"}})"));
  // Without flags: back to the plain entry, the env still there.
  auto plain = mcp::EditClientConfig(Client::kClaudeCode, u->text, "f", forced({}));
  ASSERT_TRUE(plain);
  EXPECT_EQ(OJson::parse(plain->text)["mcpServers"]["cordon"]["args"],
            OJson::parse(R"(["serve", "--workspace", "/p"])"));
  EXPECT_EQ(OJson::parse(plain->text)["mcpServers"]["cordon"]["env"], OJson({{"K", "v"}}));

  // Codex: the table is rewritten in place, its sub-table kept.
  const std::string codex =
      "model = \"o4-mini\"\n\n[mcp_servers.cordon]\ncommand = \"cordon\"\nargs = [\"serve\", "
      "\"--workspace\", \"/p\"]\n\n[mcp_servers.cordon.env]\nK = \"v\"\n\n[profiles.p]\nmodel = "
      "\"x\"\n";
  ASSERT_FALSE(mcp::EditClientConfig(Client::kCodex, codex, "config.toml", with(npm)));
  auto c = mcp::EditClientConfig(Client::kCodex, codex, "config.toml", forced(npm));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->text,
            "model = \"o4-mini\"\n\n[mcp_servers.cordon]\ncommand = \"cordon\"\nargs = [\"serve\", "
            "\"--workspace\", \"/p\", \"--allow-preset\", \"npm\", \"--timeout\", \"900\"]\n\n"
            "[mcp_servers.cordon.env]\nK = \"v\"\n\n[profiles.p]\nmodel = \"x\"\n");
  auto c2 = mcp::EditClientConfig(Client::kCodex, c->text, "config.toml", with(npm));
  ASSERT_TRUE(c2);
  EXPECT_FALSE(c2->changed);
  auto back = mcp::EditClientConfig(Client::kCodex, c->text, "config.toml", forced({}));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->text, codex);
}

TEST(ClientSetupEdit, WrapAndUnwrapAJsonServerKeepItsOtherKeys) {
  const std::string text =
      R"({"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@x/fs", "/d"], "env": {"K": "v"}}}})";
  auto w = mcp::EditClientConfig(Client::kClaudeDesktop, text, "f", Req(SetupAction::kWrap, "fs"));
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(OJson::parse(w->text)["mcpServers"]["fs"],
            OJson::parse(R"({"command": "cordon", "args": ["wrap", "--workspace", "/p",
                             "--allow-preset", "npm", "--", "npx", "-y", "@x/fs", "/d"],
                             "env": {"K": "v"}})"));
  // npx downloads the server as it starts: the npm preset, said in a note.
  ASSERT_EQ(w->notes.size(), 1u);
  EXPECT_NE(w->notes[0].find("--allow-preset npm"), std::string::npos) << w->notes[0];
  auto again =
      mcp::EditClientConfig(Client::kClaudeDesktop, w->text, "f", Req(SetupAction::kWrap, "fs"));
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->changed);
  auto u =
      mcp::EditClientConfig(Client::kClaudeDesktop, w->text, "f", Req(SetupAction::kUnwrap, "fs"));
  ASSERT_TRUE(u);
  EXPECT_EQ(OJson::parse(u->text), OJson::parse(text));
  auto missing =
      mcp::EditClientConfig(Client::kClaudeDesktop, text, "f", Req(SetupAction::kWrap, "nope"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Code::kNotFound);
  EXPECT_NE(missing.error().message.find("its servers: fs"), std::string::npos);
  auto url = mcp::EditClientConfig(Client::kVsCode,
                                   R"({"servers": {"gh": {"type": "http", "url": "https://x"}}})",
                                   "f", Req(SetupAction::kWrap, "gh"));
  ASSERT_FALSE(url);
  EXPECT_NE(url.error().message.find("stdio"), std::string::npos);
}

// wrap's flags go before "--"; a wrapped entry is updated by a run with other flags (its server
// and other keys kept), and left alone by a run with the same ones or none.
TEST(ClientSetupEdit, WrapFlagsAreWrittenAndARerunUpdatesTheWrap) {
  const std::string text =
      R"({"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@x/fs", "/d"], "env": {"K": "v"}}}})";
  auto with = [](std::vector<std::string> flags) {
    SetupRequest r = Req(SetupAction::kWrap, "fs");
    r.flags = std::move(flags);
    return r;
  };
  auto args = [](const std::string& t) { return OJson::parse(t)["mcpServers"]["fs"]["args"]; };
  // The caller chose the network: no preset is added, and a note says npx may not start.
  auto w = mcp::EditClientConfig(Client::kClaudeDesktop, text, "f",
                                 with({"--network", "loopback", "--read", "/d"}));
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(args(w->text), OJson::parse(R"(["wrap", "--workspace", "/p", "--network", "loopback",
                                            "--read", "/d", "--", "npx", "-y", "@x/fs", "/d"])"));
  ASSERT_EQ(w->notes.size(), 1u);
  EXPECT_NE(w->notes[0].find("will refuse to start it"), std::string::npos) << w->notes[0];
  auto same = mcp::EditClientConfig(Client::kClaudeDesktop, w->text, "f",
                                    with({"--network", "loopback", "--read", "/d"}));
  ASSERT_TRUE(same);
  EXPECT_FALSE(same->changed) << same->summary;
  auto other = mcp::EditClientConfig(Client::kClaudeDesktop, w->text, "f",
                                     with({"--allow-preset", "npm", "--write", "/e"}));
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_TRUE(other->changed);
  EXPECT_TRUE(other->summary.starts_with("updated server \"fs\"")) << other->summary;
  EXPECT_TRUE(other->notes.empty()) << other->notes[0];
  EXPECT_EQ(args(other->text), OJson::parse(R"(["wrap", "--workspace", "/p", "--allow-preset",
                                                "npm", "--write", "/e", "--", "npx", "-y",
                                                "@x/fs", "/d"])"));
  EXPECT_EQ(OJson::parse(other->text)["mcpServers"]["fs"]["env"], OJson::parse(R"({"K": "v"})"));
  auto none = mcp::EditClientConfig(Client::kClaudeDesktop, other->text, "f",
                                    Req(SetupAction::kWrap, "fs"));
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->changed);
  auto u = mcp::EditClientConfig(Client::kClaudeDesktop, other->text, "f",
                                 Req(SetupAction::kUnwrap, "fs"));
  ASSERT_TRUE(u);
  EXPECT_EQ(OJson::parse(u->text), OJson::parse(text));
  // --network allow reaches the registry itself: no preset, no note.
  auto allow =
      mcp::EditClientConfig(Client::kClaudeDesktop, text, "f", with({"--network", "allow"}));
  ASSERT_TRUE(allow);
  EXPECT_TRUE(allow->notes.empty()) << allow->notes[0];
}

const char* kCodexFile = R"(# my codex settings
model = "o4-mini"   # the default

[mcp_servers.fs]
command = "node"
# the server's script
args = ["server.js", "/d"]
startup_timeout_sec = 20

[mcp_servers.fs.env]
TOKEN = "abc"

[profiles.fast]
model = "gpt-4.1"
)";

TEST(ClientSetupEdit, CodexTomlIsEditedAsTextAndEverythingElseStays) {
  auto a = mcp::EditClientConfig(Client::kCodex, kCodexFile, "config.toml", Req(SetupAction::kAdd));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->text, std::string(kCodexFile) +
                         "\n[mcp_servers.cordon]\ncommand = \"cordon\"\nargs = [\"serve\", "
                         "\"--workspace\", \"/p\"]\n");
  auto same = mcp::EditClientConfig(Client::kCodex, a->text, "config.toml", Req(SetupAction::kAdd));
  ASSERT_TRUE(same);
  EXPECT_FALSE(same->changed);
  auto r = mcp::EditClientConfig(Client::kCodex, a->text, "config.toml", Req(SetupAction::kRemove));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->text, kCodexFile);

  // Wrap rewrites the one table: its keys stay, its [.env] sub-table and all comments elsewhere
  // stay byte for byte; the comment inside it is said to go.
  auto w = mcp::EditClientConfig(Client::kCodex, kCodexFile, "config.toml",
                                 Req(SetupAction::kWrap, "fs"));
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_NE(
      w->text.find("[mcp_servers.fs]\ncommand = \"cordon\"\nargs = [\"wrap\", \"--workspace\", "
                   "\"/p\", \"--\", \"node\", \"server.js\", \"/d\"]\nstartup_timeout_sec = 20\n"
                   "\n[mcp_servers.fs.env]\nTOKEN = \"abc\"\n"),
      std::string::npos)
      << w->text;
  EXPECT_TRUE(w->text.starts_with("# my codex settings\nmodel = \"o4-mini\"   # the default\n"));
  ASSERT_EQ(w->notes.size(), 1u);
  EXPECT_NE(w->notes[0].find("comments inside [mcp_servers.fs]"), std::string::npos);
  auto u = mcp::EditClientConfig(Client::kCodex, w->text, "config.toml",
                                 Req(SetupAction::kUnwrap, "fs"));
  ASSERT_TRUE(u);
  auto orig = ParseToml(kCodexFile, "a"), back = ParseToml(u->text, "b");
  ASSERT_TRUE(orig && back);
  EXPECT_TRUE(*orig == *back) << u->text;

  // Removing a table with a sub-table removes both and leaves no double blank line.
  auto rf = Req(SetupAction::kRemove, "fs");
  rf.force = true;
  auto gone = mcp::EditClientConfig(Client::kCodex, kCodexFile, "config.toml", rf);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->text,
            "# my codex settings\nmodel = \"o4-mini\"   # the default\n\n"
            "[profiles.fast]\nmodel = \"gpt-4.1\"\n");
}

TEST(ClientSetupEdit, ConfigPathsAndScopes) {
  const mcp::ConfigDirs dirs{"/h", "", ""};
  auto path = [&](Client c, mcp::ConfigScope s) {
    auto p = mcp::ClientConfigPath(c, s, "/proj", dirs);
    return p ? *p : "error: " + p.error().message;
  };
  using S = mcp::ConfigScope;
  EXPECT_EQ(path(Client::kClaudeCode, S::kProject), "/proj/.mcp.json");
  EXPECT_EQ(path(Client::kClaudeCode, S::kUser), "/h/.claude.json");
  EXPECT_EQ(path(Client::kClaudeDesktop, S::kUser), "/h/.config/Claude/claude_desktop_config.json");
  EXPECT_EQ(path(Client::kVsCode, S::kProject), "/proj/.vscode/mcp.json");
  EXPECT_EQ(path(Client::kVsCode, S::kUser), "/h/.config/Code/User/mcp.json");
  EXPECT_EQ(path(Client::kCursor, S::kProject), "/proj/.cursor/mcp.json");
  EXPECT_EQ(path(Client::kCursor, S::kUser), "/h/.cursor/mcp.json");
  EXPECT_EQ(path(Client::kCodex, S::kUser), "/h/.codex/config.toml");
  EXPECT_TRUE(path(Client::kCodex, S::kProject).starts_with("error: "));
  EXPECT_TRUE(path(Client::kClaudeDesktop, S::kProject).starts_with("error: "));
  EXPECT_EQ(*mcp::ClientConfigPath(Client::kCodex, S::kUser, "", {"/h", "/x", "/c"}),
            "/c/config.toml");
  EXPECT_EQ(*mcp::ClientConfigPath(Client::kVsCode, S::kUser, "", {"/h", "/x", "/c"}),
            "/x/Code/User/mcp.json");
}

TEST(ClientSetupEdit, UnifiedDiffOfOneHunk) {
  EXPECT_EQ(mcp::UnifiedDiff("a\nb\nc\nd\ne\nf\n", "a\nb\nc\nX\ne\nf\n", "F"),
            "--- F\n+++ F\n@@ -1,6 +1,6 @@\n a\n b\n c\n-d\n+X\n e\n f\n");
  EXPECT_EQ(mcp::UnifiedDiff("", "x\n", "F"), "--- /dev/null\n+++ F\n@@ -0,0 +1,1 @@\n+x\n");
  EXPECT_EQ(mcp::UnifiedDiff("x\n", "x\n", "F"), "");
}

// --- the real binary, on real files in a temporary HOME

class SetupCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir / "home");
    std::filesystem::create_directories(dir / "proj");
    std::filesystem::create_directories(dir / "bin");
    // `cordon` on the PATH is this binary: setup writes "command": "cordon", as the docs do.
    std::filesystem::create_symlink(CordonBin(), dir / "bin/cordon");
  }
  cordon::testing::RunResult Setup(std::vector<std::string> args) {
    args.insert(args.begin(), {CordonBin(), "setup"});
    return cordon::testing::Run(args, {"HOME=" + (dir / "home"), "XDG_CONFIG_HOME=", "CODEX_HOME=",
                                       "PATH=" + (dir / "bin") + ":/usr/bin:/bin"});
  }
  // The files in the directory of `path` other than it: backups, leftovers.
  std::vector<std::string> Beside(const std::string& path) {
    std::vector<std::string> out;
    const auto parent = std::filesystem::path(path).parent_path();
    if (!std::filesystem::exists(parent)) return out;
    for (const auto& e : std::filesystem::directory_iterator(parent)) {
      if (e.path() != path) out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static mode_t Mode(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
  }
  TempDir dir;
};

struct ClientCase {
  std::string client;
  std::vector<std::string> scope;  // the flags
  std::string file;                // relative to the temp dir
  std::string existing;            // the file before: other keys and a server "srv"
};

std::vector<ClientCase> Cases() {
  const std::string json_servers =
      R"({
  "numStartups": 7,
  "mcpServers": {
    "srv": {
      "command": "node",
      "args": ["srv.js"],
      "env": {"K": "v"}
    }
  },
  "projects": {"/x": {"allowedTools": []}}
}
)";
  const std::string vscode = R"({
  "inputs": [{"type": "promptString", "id": "k"}],
  "servers": {
    "srv": {"type": "stdio", "command": "node", "args": ["srv.js"]}
  }
}
)";
  const std::string codex =
      "# mine\nmodel = \"o4-mini\"\n\n[mcp_servers.srv]\ncommand = "
      "\"node\"\nargs = [\"srv.js\"]\n\n[profiles.p]\nmodel = \"x\"\n";
  return {
      {"claude-code", {"--project", "PROJ"}, "proj/.mcp.json", json_servers},
      {"claude-code", {"--user", "--workspace", "PROJ"}, "home/.claude.json", json_servers},
      {"claude-desktop",
       {"--workspace", "PROJ"},
       "home/.config/Claude/claude_desktop_config.json",
       json_servers},
      {"vscode", {"--project", "PROJ"}, "proj/.vscode/mcp.json", vscode},
      {"vscode", {"--user", "--workspace", "PROJ"}, "home/.config/Code/User/mcp.json", vscode},
      {"cursor", {"--project", "PROJ"}, "proj/.cursor/mcp.json", json_servers},
      {"cursor", {"--user", "--workspace", "PROJ"}, "home/.cursor/mcp.json", json_servers},
      {"codex", {"--workspace", "PROJ"}, "home/.codex/config.toml", codex},
  };
}

// Every other key of the file, the entry `name` aside: JSON or TOML, compared as data.
std::string AllBut(const std::string& text, bool toml, const std::string& name) {
  if (toml) {
    auto t = ParseToml(text, "x");
    if (!t) return "unparsable: " + t.error().message;
    if (auto* s = (*t)["mcp_servers"].as_table()) s->erase(name);
    std::ostringstream os;
    os << *t;
    return os.str();
  }
  OJson j = OJson::parse(text, nullptr, false);
  if (j.is_discarded()) return "unparsable";
  for (const char* key : {"mcpServers", "servers"}) {
    if (j.contains(key)) j[key].erase(name);
  }
  return j.dump();
}

// The server `name`'s command and args, joined by spaces.
std::string Command(const std::string& text, bool toml, const std::string& name) {
  std::string out;
  if (toml) {
    auto t = ParseToml(text, "x");
    if (!t) return "unparsable";
    out = (*t)["mcp_servers"][name]["command"].value_or(std::string());
    if (auto* a = (*t)["mcp_servers"][name]["args"].as_array()) {
      for (const auto& x : *a) out += " " + x.value_or(std::string());
    }
    return out;
  }
  OJson j = OJson::parse(text, nullptr, false);
  const OJson& s = j.contains("mcpServers") ? j["mcpServers"][name] : j["servers"][name];
  out = s.value("command", "");
  for (const auto& a : s.value("args", OJson::array())) out += " " + a.get<std::string>();
  return out;
}

TEST_F(SetupCli, EachClientAddRemoveWrapUnwrapKeepingEverythingElse) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.client + " " + c.file);
    const std::string file = dir / c.file;
    const bool toml = c.client == "codex";
    std::vector<std::string> scope;
    for (const auto& s : c.scope) scope.push_back(s == "PROJ" ? dir / "proj" : s);
    auto with = [&](std::vector<std::string> more) {
      std::vector<std::string> a = {c.client};
      a.insert(a.end(), scope.begin(), scope.end());
      a.insert(a.end(), more.begin(), more.end());
      return a;
    };
    std::filesystem::remove_all(std::filesystem::path(file).parent_path());
    WriteFile(file, c.existing);
    ::chmod(file.c_str(), 0640);

    // --dry-run prints the diff and writes nothing, not even a backup.
    auto dry = Setup(with({"--dry-run"}));
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_NE(dry.out.find("+++ " + file), std::string::npos) << dry.out;
    EXPECT_NE(dry.out.find("serve"), std::string::npos) << dry.out;
    EXPECT_EQ(ReadFile(file), c.existing);
    EXPECT_TRUE(Beside(file).empty());

    // add: the entry is there, the rest unchanged, the mode kept, the old file backed up.
    auto add = Setup(with({}));
    ASSERT_EQ(add.exit_code, 0) << add.err;
    const std::string added = ReadFile(file);
    EXPECT_NE(added.find("serve"), std::string::npos) << added;
    EXPECT_EQ(AllBut(added, toml, "cordon"), AllBut(c.existing, toml, "cordon"));
    EXPECT_EQ(Mode(file), 0640u);
    auto beside = Beside(file);
    ASSERT_EQ(beside.size(), 1u);
    EXPECT_TRUE(
        beside[0].starts_with(std::filesystem::path(file).filename().string() + ".cordon-backup-"));
    EXPECT_EQ(ReadFile(std::filesystem::path(file).parent_path() / beside[0]), c.existing);
    EXPECT_NE(add.err.find("the previous file is kept as"), std::string::npos) << add.err;

    // add again: nothing changes, no second backup.
    auto again = Setup(with({}));
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.err.find("nothing changed"), std::string::npos) << again.err;
    EXPECT_EQ(ReadFile(file), added);
    EXPECT_EQ(Beside(file).size(), 1u);

    // wrap srv, then again (nothing), then unwrap: srv runs its own command again.
    auto wrap = Setup(with({"--wrap", "srv"}));
    ASSERT_EQ(wrap.exit_code, 0) << wrap.err;
    const std::string wrapped = ReadFile(file);
    const std::string line = Command(wrapped, toml, "srv");
    EXPECT_TRUE(line.starts_with("cordon wrap --workspace ")) << line;
    EXPECT_TRUE(line.ends_with(" -- node srv.js")) << line;
    EXPECT_EQ(AllBut(wrapped, toml, "srv"), AllBut(added, toml, "srv"));
    EXPECT_EQ(Setup(with({"--wrap", "srv"})).exit_code, 0);
    EXPECT_EQ(ReadFile(file), wrapped);
    auto unwrap = Setup(with({"--remove", "--wrap", "srv"}));
    ASSERT_EQ(unwrap.exit_code, 0) << unwrap.err;
    EXPECT_EQ(AllBut(ReadFile(file), toml, ""), AllBut(added, toml, "")) << ReadFile(file);

    // remove: back to the data the file began with.
    auto rm = Setup(with({"--remove"}));
    ASSERT_EQ(rm.exit_code, 0) << rm.err;
    EXPECT_EQ(AllBut(ReadFile(file), toml, ""), AllBut(c.existing, toml, "")) << ReadFile(file);
    auto rm2 = Setup(with({"--remove"}));
    EXPECT_EQ(rm2.exit_code, 0);
    EXPECT_NE(rm2.err.find("nothing changed"), std::string::npos) << rm2.err;
    for (const auto& b : Beside(file)) {
      EXPECT_TRUE(b.find(".cordon-") == std::string::npos ||
                  b.find(".cordon-backup-") != std::string::npos)
          << "a temp file left: " << b;
    }

    // A file that is not valid JSON or TOML is refused and left as it was.
    const std::string broken = toml ? "[mcp_servers.srv\ncommand = \"node\"\n"
                                    : "{\"mcpServers\": {\"srv\": {\"command\": \"node\",}}}\n";
    WriteFile(file, broken);
    const auto count = Beside(file).size();
    auto bad = Setup(with({}));
    EXPECT_EQ(bad.exit_code, 1) << bad.err;
    EXPECT_NE(bad.err.find("invalid_input"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find(file), std::string::npos) << bad.err;
    EXPECT_EQ(ReadFile(file), broken);
    EXPECT_EQ(Beside(file).size(), count);
  }
}

// What setup writes is the server definition docs/clients.md shows and tests with real clients.
TEST_F(SetupCli, WritesTheShapesDocsClientsMdTests) {
  const std::string doc = ReadFile(CORDON_SOURCE_DIR "/docs/clients.md");
  auto block = [&](const std::string& tested) {
    std::smatch m;
    const std::regex re("<!-- tested: " + tested + ";[^\n]*-->\n```(json|toml)\n([\\s\\S]*?)\n```");
    std::string out;
    if (std::regex_search(doc, m, re)) out = m[2];
    size_t at;
    while ((at = out.find("/path/to/project")) != std::string::npos)
      out.replace(at, 16, dir / "proj");
    return out;
  };
  auto cursor = Setup({"cursor", "--project", dir / "proj"});
  ASSERT_EQ(cursor.exit_code, 0) << cursor.err;
  const std::string cursor_doc = block("cursor");
  ASSERT_FALSE(cursor_doc.empty());
  EXPECT_EQ(OJson::parse(ReadFile(dir / "proj/.cursor/mcp.json")), OJson::parse(cursor_doc));

  auto code = Setup({"claude-code", "--project", dir / "proj"});
  ASSERT_EQ(code.exit_code, 0) << code.err;
  const std::string code_doc = block("claude-code");
  ASSERT_FALSE(code_doc.empty()) << "docs/clients.md has no claude-code snippet";
  EXPECT_EQ(OJson::parse(ReadFile(dir / "proj/.mcp.json")), OJson::parse(code_doc));

  auto codex = Setup({"codex", "--workspace", dir / "proj"});
  ASSERT_EQ(codex.exit_code, 0) << codex.err;
  auto got = ParseToml(ReadFile(dir / "home/.codex/config.toml"), "got");
  auto want = ParseToml(block("codex-serve"), "doc");
  ASSERT_TRUE(got && want);
  EXPECT_TRUE(*got == *want) << ReadFile(dir / "home/.codex/config.toml");
  EXPECT_EQ(Mode(dir / "home/.codex/config.toml"), 0600u) << "a new user file is its owner's";
}

// The project's .mcp.json is read by cordon serve too: the entry setup wrote there is for the
// client, and cordon skips it instead of starting itself.
TEST_F(SetupCli, CordonDoesNotStartTheEntryWrittenForTheClient) {
  ASSERT_EQ(Setup({"claude-code", "--project", dir / "proj"}).exit_code, 0);
  auto list = cordon::testing::Run(
      {CordonBin(), "mcp", "list", "--workspace", dir / "proj"},
      {"HOME=" + (dir / "home"), "XDG_STATE_HOME=" + (dir / "state"), "XDG_CONFIG_HOME="});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.err.find("runs cordon itself"), std::string::npos) << list.out << list.err;
  EXPECT_EQ(list.out.find("untrusted"), std::string::npos) << list.out;
}

TEST_F(SetupCli, ScopeAndWorkspaceMistakesAreUsageErrors) {
  auto desk = Setup({"claude-desktop", "--project", dir / "proj"});
  EXPECT_EQ(desk.exit_code, 2);
  EXPECT_NE(desk.err.find("--user"), std::string::npos) << desk.err;
  auto user = Setup({"cursor", "--user"});
  EXPECT_EQ(user.exit_code, 2);
  EXPECT_NE(user.err.find("--workspace DIR is needed"), std::string::npos) << user.err;
  auto client = Setup({"vim"});
  EXPECT_EQ(client.exit_code, 2);
  EXPECT_NE(client.err.find("not a client"), std::string::npos) << client.err;
  auto wrap = Setup({"cursor", "--project", dir / "proj", "--wrap", "nope"});
  EXPECT_EQ(wrap.exit_code, 1);
  EXPECT_NE(wrap.err.find("not_found"), std::string::npos) << wrap.err;
  EXPECT_FALSE(Exists(dir / "proj/.cursor/mcp.json"));
}

// serve's flags, through the real binary: checked as serve checks them, written into the entry
// (paths absolute), updated by a second run; and the entry written starts `cordon serve`.
TEST_F(SetupCli, ServeFlagsGoIntoTheEntryAndARerunUpdatesIt) {
  WriteFile(dir / "data/in.txt", "x\n");
  WriteFile(dir / "extra.toml", "[limits]\ntimeout_secs = 100\n");
  const std::string file = dir / "proj/.mcp.json";
  WriteFile(file, R"({"mcpServers": {"srv": {"command": "node", "args": ["srv.js"]}}})");
  // A relative --read is made absolute: the client starts cordon in a directory of its own.
  auto add = cordon::testing::Run(
      {"/bin/sh", "-c", "cd '" + (dir / "data") + "/..' && exec \"$0\" \"$@\"", CordonBin(),
       "setup", "claude-code", "--project", dir / "proj", "--allow-preset", "npm", "--read", "data",
       "--env", "GREETING", "--timeout", "900", "--policy", dir / "extra.toml"},
      {"HOME=" + (dir / "home"), "XDG_CONFIG_HOME=", "PATH=" + (dir / "bin") + ":/usr/bin:/bin"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  const std::string want =
      "cordon serve --workspace " + (dir / "proj") + " --read " + (dir / "data") +
      " --allow-preset npm --env GREETING --timeout 900 --policy " + (dir / "extra.toml");
  EXPECT_EQ(Command(ReadFile(file), false, "cordon"), want);
  EXPECT_EQ(Command(ReadFile(file), false, "srv"), "node srv.js");
  // The same flags again: nothing changes.
  auto same = Setup({"claude-code", "--project", dir / "proj", "--allow-preset", "npm", "--read",
                     dir / "data", "--env", "GREETING", "--timeout", "900", "--policy",
                     dir / "extra.toml"});
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.err.find("nothing changed"), std::string::npos) << same.err;
  // Other flags: the entry is updated, without --force; the rest of the file stays.
  auto other = Setup(
      {"claude-code", "--project", dir / "proj", "--network", "loopback", "--env", "MODE=fast"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(other.err.find("updated server \"cordon\""), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("note: --env MODE=... is written into the file with its value"),
            std::string::npos)
      << other.err;
  const std::string updated = ReadFile(file);
  EXPECT_EQ(Command(updated, false, "cordon"),
            "cordon serve --workspace " + (dir / "proj") + " --network loopback --env MODE=fast");
  EXPECT_EQ(Command(updated, false, "srv"), "node srv.js");
  // What serve refuses, setup refuses before writing: a usage error (2), the file unchanged.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--network", "none", "--allow-preset", "npm"},
        {"--read", dir / "missing"},
        {"--env", "BAD-NAME=secret"},
        {"--timeout", "soon"},
        {"--policy", dir / "missing.toml"},
        {"--allow-preset", "nope"},
        {"--wrap", "srv", "--timeout", "60"},
        {"--remove", "--wrap", "srv", "--read", dir / "data"},
        {"--wrap", "srv", "--read", dir / "missing"}}) {
    std::vector<std::string> args = {"claude-code", "--project", dir / "proj"};
    args.insert(args.end(), bad.begin(), bad.end());
    auto r = Setup(args);
    EXPECT_EQ(r.exit_code, 2) << bad[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("secret"), std::string::npos) << r.err;
    EXPECT_EQ(ReadFile(file), updated) << bad[0];
  }
  // --wrap takes the same flags for the wrapped server (relative paths made absolute), and a
  // rerun with others replaces them; the server's command stays after "--".
  auto wrap = cordon::testing::Run(
      {"/bin/sh", "-c", "cd '" + (dir / "data") + "/..' && exec \"$0\" \"$@\"", CordonBin(),
       "setup", "claude-code", "--project", dir / "proj", "--wrap", "srv", "--read", "data",
       "--network", "loopback", "--policy", dir / "extra.toml"},
      {"HOME=" + (dir / "home"), "XDG_CONFIG_HOME=", "PATH=" + (dir / "bin") + ":/usr/bin:/bin"});
  ASSERT_EQ(wrap.exit_code, 0) << wrap.err;
  EXPECT_EQ(Command(ReadFile(file), false, "srv"),
            "cordon wrap --workspace " + (dir / "proj") + " --network loopback --read " +
                (dir / "data") + " --policy " + (dir / "extra.toml") + " -- node srv.js");
  auto rewrap =
      Setup({"claude-code", "--project", dir / "proj", "--wrap", "srv", "--write", dir / "data"});
  ASSERT_EQ(rewrap.exit_code, 0) << rewrap.err;
  EXPECT_NE(rewrap.err.find("updated server \"srv\""), std::string::npos) << rewrap.err;
  const std::string rewrapped = ReadFile(file);
  EXPECT_EQ(Command(rewrapped, false, "srv"), "cordon wrap --workspace " + (dir / "proj") +
                                                  " --write " + (dir / "data") + " -- node srv.js");
  EXPECT_EQ(Command(rewrapped, false, "cordon"), Command(updated, false, "cordon"));
  // The wrap written is one cordon wrap takes: --plan (put before the options) shows the grant.
  {
    std::vector<std::string> argv = {CordonBin(), "wrap", "--plan"};
    const OJson srv = OJson::parse(rewrapped)["mcpServers"]["srv"];
    for (std::size_t i = 1; i < srv["args"].size(); ++i)
      argv.push_back(srv["args"][i].get<std::string>());
    auto plan =
        cordon::testing::Run(argv, {"HOME=" + (dir / "home"), "XDG_CONFIG_HOME=" + (dir / "config"),
                                    "XDG_STATE_HOME=" + (dir / "state")});
    EXPECT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_NE(plan.out.find(dir / "data"), std::string::npos) << plan.out;
  }
  auto unwrap = Setup({"claude-code", "--project", dir / "proj", "--remove", "--wrap", "srv"});
  ASSERT_EQ(unwrap.exit_code, 0) << unwrap.err;
  EXPECT_EQ(Command(ReadFile(file), false, "srv"), "node srv.js");
  // Codex's TOML entry the same way.
  auto codex = Setup({"codex", "--workspace", dir / "proj", "--allow-preset", "npm"});
  ASSERT_EQ(codex.exit_code, 0) << codex.err;
  EXPECT_EQ(Command(ReadFile(dir / "home/.codex/config.toml"), true, "cordon"),
            "cordon serve --workspace " + (dir / "proj") + " --allow-preset npm");
  // The entry the client will start is a command serve takes: it serves, and exits 0 at EOF.
  if (!cordon::testing::UserNamespacesEnabled())
    SECURITY_SKIP("(setup) user namespaces are disabled; the entry's serve cannot start");
  std::vector<std::string> argv = {CordonBin()};
  const OJson entry = OJson::parse(ReadFile(file))["mcpServers"]["cordon"];
  for (const auto& a : entry["args"]) argv.push_back(a.get<std::string>());
  argv.insert(argv.end(), {"--audit-log", dir / "serve.jsonl"});
  auto serve =
      cordon::testing::Run(argv, {"HOME=" + (dir / "home"), "XDG_CONFIG_HOME=" + (dir / "config"),
                                  "XDG_STATE_HOME=" + (dir / "state")});
  EXPECT_EQ(serve.exit_code, 0) << serve.err;
}

// A configuration file that is a symlink (a dotfiles repository) stays one: its target is edited.
TEST_F(SetupCli, ASymlinkedFileIsEditedWhereItPoints) {
  WriteFile(dir / "dotfiles/mcp.json", "{\"mcpServers\": {}}\n");
  std::filesystem::create_directories(dir / "home/.cursor");
  std::filesystem::create_symlink(dir / "dotfiles/mcp.json", dir / "home/.cursor/mcp.json");
  auto r = Setup({"cursor", "--user", "--workspace", dir / "proj"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "home/.cursor/mcp.json"));
  EXPECT_NE(ReadFile(dir / "dotfiles/mcp.json").find("serve"), std::string::npos);
}

}  // namespace
}  // namespace cordon
