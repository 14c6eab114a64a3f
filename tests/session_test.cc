// The call pipeline (Session::Run): its order for built-in tools, and the same steps for the
// tools of real MCP servers (server-everything from npm, and a small Python server).
#include "session/session.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "mcp/config.h"
#include "mcp/hub.h"
#include "runner/host_probe.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("XDG_CONFIG_HOME", (dir_ / "config").c_str(), 1);
    std::filesystem::create_directories(dir_ / "ws");
  }
  std::unique_ptr<Session> Start(std::vector<std::string> policy_files = {}) {
    SessionOptions o;
    o.workspace = dir_ / "ws";
    o.audit_log = dir_ / "audit.jsonl";
    o.shipped_policy_dir = testing::ShippedPolicyDir();
    o.policy_files = std::move(policy_files);
    auto s = Session::Start(o, environ);
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : nullptr;
  }
  // The records after session_started, without the common fields' noise.
  std::vector<Json> Records() {
    std::vector<Json> out;
    std::string text = ReadFile(dir_ / "audit.jsonl");
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t nl = text.find('\n', pos);
      Json rec = Json::parse(text.substr(pos, nl - pos));
      if (rec["type"] != "session_started" && rec["type"] != "log_started") out.push_back(rec);
      pos = nl + 1;
    }
    return out;
  }
  static std::vector<std::string> Types(const std::vector<Json>& recs) {
    std::vector<std::string> out;
    for (const auto& r : recs) out.push_back(r["type"]);
    return out;
  }
  static std::string CodeOf(const Json& result) {
    return result["isError"].get<bool>()
               ? result["structuredContent"]["error"]["code"].get<std::string>()
               : "ok";
  }
  TempDir dir_;
};

TEST_F(SessionTest, InvalidInputNeverExecutesAndIsCheckedBeforeThePolicy) {
  WriteFile(
      dir_ / "ro.toml",
      "[scopes]\ngrant = [\"!fs:write\", \"!process:run\", \"!process:operate\", \"!mcp:call\"]\n");
  auto s = Start({dir_ / "ro.toml"});
  // create_file is not granted, but its input is wrong first: invalid_input, nothing denied.
  Json r = s->Call("create_file", {{"path", "x.txt"}, {"content", 7}});
  EXPECT_EQ(CodeOf(r), "invalid_input");
  r = s->Call("no_such_tool", Json::object());
  EXPECT_EQ(CodeOf(r), "invalid_input");
  r = s->CallJsonText("read_file_range", "{not json");
  EXPECT_EQ(CodeOf(r), "invalid_input");
  s->Finish();
  EXPECT_FALSE(testing::Exists(dir_ / "ws/x.txt"));
  auto recs = Records();
  EXPECT_EQ(Types(recs), (std::vector<std::string>{"tool_started", "tool_finished", "tool_started",
                                                   "tool_finished", "tool_started", "tool_finished",
                                                   "session_finished"}));
  EXPECT_EQ(recs[0]["scope"], "fs:write");
  EXPECT_EQ(recs[1]["code"], "invalid_input");
  EXPECT_NE(recs[1]["message"].get<std::string>().find("create_file schema"), std::string::npos);
  EXPECT_FALSE(recs[2].contains("scope"));  // an unknown tool has none
  EXPECT_EQ(recs[4]["input_bytes"], 9);
  EXPECT_EQ(recs[4]["call"], 3);
  EXPECT_EQ(recs[5]["code"], "invalid_input");
}

TEST_F(SessionTest, DeniedCallIsStartedThenDeniedAndNeverExecutes) {
  WriteFile(
      dir_ / "ro.toml",
      "[scopes]\ngrant = [\"!fs:write\", \"!process:run\", \"!process:operate\", \"!mcp:call\"]\n");
  auto s = Start({dir_ / "ro.toml"});
  Json r = s->Call("run_shell", {{"program", "touch"}, {"args", {"y.txt"}}});
  EXPECT_EQ(CodeOf(r), "denied_by_policy");
  s->Finish();
  EXPECT_FALSE(testing::Exists(dir_ / "ws/y.txt"));
  auto recs = Records();
  // No process record: the call stopped at Authorize.
  EXPECT_EQ(Types(recs), (std::vector<std::string>{"tool_started", "policy_denied", "tool_finished",
                                                   "session_finished"}));
  EXPECT_EQ(recs[1]["scope"], "process:run");
  EXPECT_EQ(recs[1]["call"], recs[0]["call"]);
  EXPECT_EQ(recs[2]["code"], "denied_by_policy");
}

TEST_F(SessionTest, EffectsComeBetweenStartedAndFinishedAndQuickReadsAreOneWrite) {
  auto s = Start();
  Json r = s->Call("create_file", {{"path", "a.txt"}, {"content", "hello\n"}});
  ASSERT_EQ(CodeOf(r), "ok") << r.dump();
  r = s->Call("read_file_range", {{"path", "a.txt"}, {"start_line", 1}});
  ASSERT_EQ(CodeOf(r), "ok");
  s->Finish();
  auto recs = Records();
  EXPECT_EQ(Types(recs),
            (std::vector<std::string>{"tool_started", "file_write", "tool_finished", "tool_started",
                                      "tool_finished", "session_finished"}));
  EXPECT_EQ(recs[1]["status"], "written");
  EXPECT_EQ(recs[1]["sha256_before"], nullptr);
  // The quick read's two records carry one timestamp: they were written together.
  EXPECT_EQ(recs[3]["ts"], recs[4]["ts"]);
  EXPECT_EQ(recs[3]["effect"], "none");
  EXPECT_FALSE(recs[3].contains("unvalidated"));
}

TEST_F(SessionTest, TheOutputCapAppliesToBuiltInResultsToo) {
  // read_file_range always returns its first line, even one longer than the byte cap. The
  // pipeline's backstop cuts any string past the cap plus room for a tool's own markers
  // (64 KiB), and the text is still the JSON of structuredContent.
  WriteFile(dir_ / "ws/long.txt", std::string(100000, 'x') + "\nshort\n");
  WriteFile(dir_ / "tight.toml", "[limits]\nmax_output_bytes = 100\nmax_line_chars = 200000\n");
  auto s = Start({dir_ / "tight.toml"});
  Json r = s->Call("read_file_range", {{"path", "long.txt"}, {"start_line", 1}});
  ASSERT_EQ(CodeOf(r), "ok") << r.dump().substr(0, 500);
  const std::string line = r["structuredContent"]["lines"][0];
  const std::size_t kept = 100 + 64 * 1024;
  EXPECT_EQ(line.substr(0, kept), std::string(kept, 'x'));
  EXPECT_EQ(line.substr(kept),
            "\n[cordon: " + std::to_string(100000 - kept) + " bytes of output dropped]");
  EXPECT_EQ(Json::parse(r["content"][0]["text"].get<std::string>()), r["structuredContent"]);
  s->Finish();
  auto recs = Records();
  ASSERT_GE(recs.size(), 2u);
  EXPECT_EQ(recs[1]["type"], "tool_finished");
  EXPECT_EQ(recs[1]["truncated"], true);
}

// A small real MCP server: its tool's schema uses anyOf, which cordon's validator does not
// support, and it appends every tools/call it receives to a file.
constexpr const char* kPyServer = R"(import json, sys
seen = open(sys.argv[1], "a")
schema = {"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}
strict = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False}
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "py", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "loose", "inputSchema": schema}, {"name": "strict", "inputSchema": strict}]}
    elif m["method"] == "tools/call":
        seen.write(json.dumps(m["params"]) + "\n")
        seen.flush()
        r = {"content": [{"type": "text", "text": "got " + json.dumps(m["params"]["arguments"], sort_keys=True)}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
)";

class SessionMcpTest : public SessionTest {
 protected:
  // A user-level server config (no trust step), loaded into a hub on the session.
  std::unique_ptr<mcp::McpHub> Hub(Session& s, const std::string& toml) {
    WriteFile(dir_ / "mcp.toml", toml);
    mcp::ConfigSources sources;
    sources.files = {{dir_ / "mcp.toml", false}};
    auto cfg = mcp::LoadMcpConfig(sources, s.workspace().root());
    EXPECT_TRUE(cfg) << cfg.error().message;
    return cfg ? std::make_unique<mcp::McpHub>(s, *cfg) : nullptr;
  }
};

TEST_F(SessionMcpTest, ServerEverythingInvalidInputIsRefusedBeforeTheServer) {
  const std::string peers = testing::FromEnv("MCP_PEERS_DIR", "/tmp/mcp-peers");
  if (FindOnPath("node").empty() ||
      !testing::Exists(peers + "/node_modules/@modelcontextprotocol/server-everything")) {
    GTEST_SKIP() << "SKIPPED MCP PEER TEST: node or server-everything missing";
  }
  auto s = Start();
  {
    auto hub =
        Hub(*s, "[servers.everything]\ncommand = \"node\"\nargs = [\"" + peers +
                    "/node_modules/@modelcontextprotocol/server-everything/dist/index.js\","
                    " \"stdio\"]\ntimeout_secs = 60\n[servers.everything.sandbox]\nread = [\"" +
                    peers + "\"]\n");
    ASSERT_TRUE(hub);
    Json bad = s->Call("mcp__everything__get-sum", {{"a", "one"}, {"b", 2}});
    EXPECT_EQ(CodeOf(bad), "invalid_input") << bad.dump();
    EXPECT_NE(bad.dump().find("/a"), std::string::npos) << bad.dump();
    Json good = s->Call("mcp__everything__get-sum", {{"a", 1}, {"b", 2}});
    EXPECT_EQ(CodeOf(good), "ok") << good.dump();
    EXPECT_NE(good["content"][0]["text"].get<std::string>().find("3"), std::string::npos);
  }
  s->Finish();
  std::vector<Json> calls;
  for (const auto& r : Records()) {
    if (r.value("tool", "") == "mcp__everything__get-sum") calls.push_back(r);
  }
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0]["type"], "tool_started");
  EXPECT_EQ(calls[0]["scope"], "mcp:call");
  EXPECT_FALSE(calls[0].contains("unvalidated"));  // its schema is within the validator
  EXPECT_EQ(calls[1]["code"], "invalid_input");
  EXPECT_EQ(calls[1]["server"], "everything");
  EXPECT_EQ(calls[1]["server_tool"], "get-sum");
  EXPECT_EQ(calls[3]["status"], "ok");
}

TEST_F(SessionMcpTest, UnsupportedSchemaIsPassedThroughAndRecordedAsUnvalidated) {
  if (FindOnPath("python3").empty()) GTEST_SKIP() << "SKIPPED: python3 is needed";
  WriteFile(dir_ / "ws/server.py", kPyServer);
  auto s = Start();
  {
    auto hub = Hub(*s, "[servers.py]\ncommand = \"python3\"\nargs = [\"" + (dir_ / "ws/server.py") +
                           "\", \"" + (dir_ / "ws/seen.jsonl") + "\"]\ntimeout_secs = 10\n");
    ASSERT_TRUE(hub);
    // The strict tool's schema is checked: the server never sees the bad call.
    Json bad = s->Call("mcp__py__strict", {{"text", "hi"}, {"extra", 1}});
    EXPECT_EQ(CodeOf(bad), "invalid_input") << bad.dump();
    Json ok = s->Call("mcp__py__strict", {{"text", "hi"}});
    EXPECT_EQ(CodeOf(ok), "ok") << ok.dump();
    // The loose tool's schema uses anyOf: passed through, unchecked, and said so.
    Json loose = s->Call("mcp__py__loose", {{"n", Json::array({1, 2})}});
    EXPECT_EQ(CodeOf(loose), "ok") << loose.dump();
    EXPECT_EQ(loose["content"][0]["text"], "got {\"n\": [1, 2]}");
    // A tool the server does not offer is refused without a call.
    Json missing = s->Call("mcp__py__absent", Json::object());
    EXPECT_EQ(CodeOf(missing), "invalid_input") << missing.dump();
  }
  s->Finish();
  const std::string seen = ReadFile(dir_ / "ws/seen.jsonl");
  EXPECT_EQ(std::count(seen.begin(), seen.end(), '\n'), 2) << seen;
  EXPECT_EQ(seen.find("extra"), std::string::npos) << seen;
  std::map<std::string, std::vector<Json>> started;
  for (const auto& r : Records()) {
    if (r["type"] == "tool_started") started[r["tool"]].push_back(r);
  }
  ASSERT_EQ(started["mcp__py__loose"].size(), 1u);
  EXPECT_EQ(started["mcp__py__loose"][0]["unvalidated"], "unsupported keyword anyOf");
  ASSERT_EQ(started["mcp__py__strict"].size(), 2u);
  EXPECT_FALSE(started["mcp__py__strict"][0].contains("unvalidated"));
}

TEST_F(SessionMcpTest, DeniedExternalCallStartsNoServer) {
  if (FindOnPath("python3").empty()) GTEST_SKIP() << "SKIPPED: python3 is needed";
  WriteFile(dir_ / "ws/server.py", kPyServer);
  WriteFile(
      dir_ / "nomcp.toml",
      "[scopes]\ngrant = [\"!fs:write\", \"!process:run\", \"!process:operate\", \"!mcp:call\"]\n");
  auto s = Start({dir_ / "nomcp.toml"});
  {
    auto hub = Hub(*s, "[servers.py]\ncommand = \"python3\"\nargs = [\"" + (dir_ / "ws/server.py") +
                           "\", \"" + (dir_ / "ws/seen.jsonl") + "\"]\ntimeout_secs = 10\n");
    ASSERT_TRUE(hub);
    Json r = s->Call("mcp__py__strict", {{"text", "hi"}});
    EXPECT_EQ(CodeOf(r), "denied_by_policy");
  }
  s->Finish();
  EXPECT_FALSE(testing::Exists(dir_ / "ws/seen.jsonl"));  // the server never ran
  auto types = Types(Records());
  EXPECT_EQ(std::count(types.begin(), types.end(), "process"), 0);
  EXPECT_EQ(std::count(types.begin(), types.end(), "policy_denied"), 1);
}

}  // namespace
}  // namespace cordon
