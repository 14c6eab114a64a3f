// `cordon audit summary`: a scripted `serve` session through the real binary (file edits, a
// failing command that changes a file and prints a token, a scope the policy does not grant, a
// domain the egress proxy refuses) with a `call` session interleaved in the same log, summarized
// to exact numbers; a log cut before a session's end, and one with an edited line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "audit/audit.h"
#include "core/text.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::RunResult;
using testing::TempDir;
using testing::WriteFile;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

std::string FindOnPath(const std::string& name) {
  for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
    std::string cand = std::string(dir) + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
  }
  return "";
}

// One JSON-RPC request to a `cordon serve` driven line by line, and its response (null when none
// came within 120 s): each request waits for its answer, so the calls run in order and other
// runs can be made between them.
Json Request(testing::LinePeer& serve, int id, const std::string& method, const Json& params) {
  serve.Send(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump());
  for (std::string line = serve.Line(120); !line.empty(); line = serve.Line(120)) {
    Json j = Json::parse(line, nullptr, false);
    if (j.is_object() && j.value("id", Json()) == Json(id)) return j;
  }
  return nullptr;
}
Json CallTool(testing::LinePeer& serve, int id, const std::string& tool, const Json& args) {
  return Request(serve, id, "tools/call", {{"name", tool}, {"arguments", args}});
}

// A web server on 127.0.0.1 (Python, stdlib only): prints its port, answers every GET with a
// fixed body, and exits when its stdin closes.
constexpr const char* kWebServer = R"(import http.server, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the local server\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
threading.Thread(target=s.serve_forever, daemon=True).start()
sys.stdin.read()
)";

class AuditSummaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    std::filesystem::create_directories(dir_ / "home");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "HOME=" + (dir_ / "home")};
  }
  RunResult Cordon(std::vector<std::string> args) {
    args.insert(args.begin(), testing::CordonBin());
    return testing::Run(args, env_);
  }
  std::string Log() const { return dir_ / "audit.jsonl"; }
  // `audit summary LOG --json`: its exit code and the parsed output.
  std::pair<int, Json> SummaryJson(const std::string& log, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"audit", "summary", log, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = Cordon(args);
    Json j = Json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out << r.err;
    return {r.exit_code, j};
  }

  TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
};

// The token the command prints: built inside the command, so no argument holds it.
constexpr const char* kToken = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
constexpr const char* kTokenCommand =
    "echo hi > made.txt; echo ghp_$(printf abcdefghijklmnopqrstuvwxyz0123456789); exit 3";

TEST_F(AuditSummaryTest, AScriptedSessionGivesExactNumbers) {
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed");
  if (!testing::UserNamespacesEnabled()) SECURITY_SKIP("user namespaces are disabled");
  const std::string curl = FindOnPath("curl");
  if (curl.empty()) GTEST_SKIP() << "SKIPPED: curl is missing (the refused domain's client)";
  if (!testing::Exists("/usr/bin/python3")) GTEST_SKIP() << "SKIPPED: python3 (the web server)";
  WriteFile(ws_ + "/notes.txt", "alpha\n");
  // api.example.test is this test's web server on 127.0.0.1, the one domain the proxy allows.
  testing::LinePeer web({"/usr/bin/python3", "-c", kWebServer}, {});
  const std::string port = web.Line(30);
  ASSERT_FALSE(port.empty()) << "the web server did not start";
  const std::string api = "api.example.test:" + port;
  testing::LinePeer serve(
      {testing::CordonBin(), "serve", "--workspace", ws_, "--audit-log", Log(), "--network",
       "proxy", "--resolve", "api.example.test=127.0.0.1", "--allow-domain", api},
      env_);
  Json r = Request(serve, 1, "initialize",
                   {{"protocolVersion", "2025-11-25"},
                    {"capabilities", Json::object()},
                    {"clientInfo", {{"name", "summary-test"}, {"version", "1.2"}}}});
  ASSERT_TRUE(r.contains("result")) << r.dump();
  r = CallTool(serve, 2, "create_file", {{"path", "a.txt"}, {"content", "one\n"}});
  ASSERT_FALSE(r["result"].value("isError", true)) << r.dump();
  r = CallTool(serve, 3, "replace_range",
               {{"path", "notes.txt"}, {"old_string", "alpha"}, {"new_string", "beta"}});
  ASSERT_FALSE(r["result"].value("isError", true)) << r.dump();
  // Another session, in the same log, while this one is open.
  auto call = Cordon({"call", "read_file_range", "--workspace", ws_, "--audit-log", Log(), "--json",
                      R"({"path":"notes.txt","start_line":1})"});
  ASSERT_EQ(call.exit_code, 0) << call.out << call.err;
  r = CallTool(serve, 4, "run_shell", {{"program", "sh"}, {"args", {"-c", kTokenCommand}}});
  ASSERT_EQ(r["result"]["structuredContent"].value("exit_code", -1), 3) << r.dump();
  EXPECT_EQ(r.dump().find(kToken), std::string::npos) << r.dump();
  r = CallTool(serve, 5, "read_url", {{"url", "http://example.test/"}});
  EXPECT_EQ(r["result"]["structuredContent"]["error"].value("code", ""), "denied_by_policy")
      << r.dump();
  r = CallTool(
      serve, 6, "run_shell",
      {{"program", "curl"}, {"args", {"-sS", "--max-time", "20", "http://refused.example.test/"}}});
  ASSERT_EQ(r["result"]["structuredContent"].value("exit_code", -1), 0) << r.dump();
  r = CallTool(
      serve, 7, "run_shell",
      {{"program", "curl"}, {"args", {"-sS", "--max-time", "20", "http://" + api + "/x"}}});
  ASSERT_EQ(r["result"]["structuredContent"].value("stdout", ""), "hello from the local server\n")
      << r.dump();
  serve.CloseInput();
  ASSERT_EQ(serve.Wait(), 0);
  web.CloseInput();

  // The log as written: the session ids, the policy hash, the line of every record.
  std::vector<Json> recs;
  for (const auto& l : Lines(ReadFile(Log()))) recs.push_back(Json::parse(l));
  const std::string serve_id = recs.front()["session"];
  std::string call_id, policy;
  std::uint64_t api_up = 0, api_down = 0;
  for (const auto& rec : recs) {
    if (rec["type"] == "network" && rec["host"] == "api.example.test") {
      api_up += rec["bytes_up"].get<std::uint64_t>();
      api_down += rec["bytes_down"].get<std::uint64_t>();
    }
  }
  // Plain HTTP counts the body after the request head (none for a GET) and what came down: the
  // response head and its 28-byte body.
  EXPECT_EQ(api_up, 0u);
  EXPECT_GT(api_down, 28u);
  std::uint64_t serve_lines = 0, call_first = 0, call_last = 0;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    if (recs[i]["session"] == serve_id) {
      ++serve_lines;
      if (recs[i]["type"] == "session_started") policy = recs[i]["policy_sha256"];
      continue;
    }
    call_id = recs[i]["session"];
    if (call_first == 0) call_first = i + 1;
    call_last = i + 1;
  }
  ASSERT_FALSE(call_id.empty());
  ASSERT_EQ(policy.size(), 64u);

  auto [code, j] = SummaryJson(Log());
  EXPECT_EQ(code, 0) << j.dump(2);
  EXPECT_EQ(j["exit_code"], 0);
  ASSERT_EQ(j["logs"].size(), 1u) << j.dump(2);
  const Json& log = j["logs"][0];
  EXPECT_EQ(log["verification"]["verdict"], "intact");
  EXPECT_EQ(log["unfinished_sessions"], Json::array());
  EXPECT_EQ(log["unreadable_lines"], Json::array());
  ASSERT_EQ(log["sessions"].size(), 2u) << log.dump(2);
  const Json& s = log["sessions"][0];
  EXPECT_EQ(s["session"], serve_id);
  EXPECT_EQ(s["client"], "mcp");
  EXPECT_EQ(s["clientInfo"], (Json{{"name", "summary-test"}, {"version", "1.2"}}));
  EXPECT_EQ(s["workspace"], ws_);
  EXPECT_EQ(s["policy_sha256"], policy);
  EXPECT_TRUE(s["finished"].get<bool>());
  EXPECT_GE(s["duration_ms"].get<std::int64_t>(), 0);
  EXPECT_EQ(s["session_finished"], (Json{{"calls", 6}, {"errors", 1}}));
  // Verification: every line of the session intact; the call's session lies inside it.
  EXPECT_EQ(s["verification"]["records"], serve_lines);
  EXPECT_EQ(s["verification"]["lines"], (Json{{"intact", serve_lines}}));
  EXPECT_EQ(s["verification"]["first_line"], 1);
  EXPECT_EQ(s["verification"]["last_line"], recs.size());
  EXPECT_LT(s["verification"]["first_line"].get<std::uint64_t>(), call_first);
  EXPECT_GT(s["verification"]["last_line"].get<std::uint64_t>(), call_last);
  // Calls by tool and status.
  EXPECT_EQ(s["calls"], (Json{{"total", 6},
                              {"by_tool",
                               {{"create_file", {{"ok", 1}}},
                                {"replace_range", {{"ok", 1}}},
                                {"read_url", {{"error", 1}}},
                                {"run_shell", {{"ok", 3}}}}}}))
      << s["calls"].dump();
  // Commands with their exit codes, the failing one first.
  const Json& cmds = s["commands"];
  EXPECT_EQ(cmds["total"], 3);
  EXPECT_EQ(cmds["failed"], 1);
  EXPECT_EQ(cmds["omitted"], 0);
  ASSERT_EQ(cmds["listed"].size(), 3u) << cmds.dump();
  EXPECT_EQ(cmds["listed"][0]["argv"], std::string("sh -c ") + kTokenCommand);
  EXPECT_EQ(cmds["listed"][0]["exit_code"], 3);
  EXPECT_EQ(cmds["listed"][0]["status"], "exited");
  EXPECT_EQ(cmds["listed"][0]["failed"], true);
  EXPECT_EQ(cmds["listed"][0]["tool"], "run_shell");
  EXPECT_EQ(cmds["listed"][1]["argv"], "curl -sS --max-time 20 http://refused.example.test/");
  EXPECT_EQ(cmds["listed"][1]["exit_code"], 0);
  EXPECT_EQ(cmds["listed"][1]["failed"], false);
  EXPECT_EQ(cmds["listed"][2]["argv"], "curl -sS --max-time 20 http://" + api + "/x");
  EXPECT_EQ(cmds["listed"][2]["exit_code"], 0);
  // Files: two by the file tools, one by the command.
  const Json& files = s["files"];
  EXPECT_EQ(files["total"], 3);
  EXPECT_EQ(files["counts"], (Json{{"created", 2}, {"modified", 1}})) << files.dump();
  EXPECT_EQ(files["omitted"], 0);
  ASSERT_EQ(files["listed"].size(), 3u) << files.dump();
  auto file = [&](std::size_t i) {
    const Json& f = files["listed"][i];
    return f["path"].get<std::string>() + " " + f["kind"].get<std::string>() + " " +
           f["source"].get<std::string>() + " " + f["tool"].get<std::string>();
  };
  EXPECT_EQ(file(0), "a.txt created file_write create_file");
  EXPECT_EQ(file(1), "notes.txt modified file_write replace_range");
  EXPECT_EQ(file(2), "made.txt created process run_shell");
  EXPECT_EQ(files["listed"][1]["op"], "edit");
  // Denials by rule: the scope, and the refused domain.
  EXPECT_EQ(s["denials"], (Json{{"total", 2},
                                {"by_rule",
                                 {{{"type", "policy_denied"},
                                   {"rule", "scopes.grant"},
                                   {"count", 1},
                                   {"subjects", {"read_url net:read"}},
                                   {"subjects_omitted", 0}},
                                  {{"type", "network"},
                                   {"rule", "not allowed"},
                                   {"count", 1},
                                   {"subjects", {"refused.example.test:80"}},
                                   {"subjects_omitted", 0}}}}}))
      << s["denials"].dump();
  EXPECT_EQ(s["network"], (Json::array({{{"host", "api.example.test"},
                                         {"decision", "allowed"},
                                         {"ports", {std::stoi(port)}},
                                         {"connections", 1},
                                         {"bytes_up", api_up},
                                         {"bytes_down", api_down},
                                         {"errors", 0}},
                                        {{"host", "refused.example.test"},
                                         {"decision", "denied"},
                                         {"ports", {80}},
                                         {"connections", 1},
                                         {"bytes_up", 0},
                                         {"bytes_down", 0},
                                         {"errors", 0}}})))
      << s["network"].dump();
  // The token the command printed, counted; its value nowhere in the summary.
  EXPECT_EQ(s["redactions"],
            (Json{{"records", 0}, {"output", 1}, {"output_by_rule", {{"github_token", 1}}}}))
      << s["redactions"].dump();
  EXPECT_EQ(j.dump().find(kToken), std::string::npos);
  EXPECT_EQ(ReadFile(Log()).find(kToken), std::string::npos) << "the log holds the token";

  // The interleaved call's session.
  const Json& c = log["sessions"][1];
  EXPECT_EQ(c["session"], call_id);
  EXPECT_EQ(c["client"], "cli");
  EXPECT_EQ(c["clientInfo"], nullptr);
  EXPECT_EQ(c["calls"], (Json{{"total", 1}, {"by_tool", {{"read_file_range", {{"ok", 1}}}}}}));
  EXPECT_EQ(c["verification"]["first_line"], call_first);
  EXPECT_EQ(c["verification"]["last_line"], call_last);
  EXPECT_EQ(c["commands"]["total"], 0);
  EXPECT_EQ(c["files"]["total"], 0);
  EXPECT_EQ(c["denials"]["total"], 0);

  // --session keeps one session.
  auto [one_code, one] = SummaryJson(Log(), {"--session", call_id.substr(0, 8)});
  EXPECT_EQ(one_code, 0);
  ASSERT_EQ(one["logs"][0]["sessions"].size(), 1u);
  EXPECT_EQ(one["logs"][0]["sessions"][0]["session"], call_id);

  // The text form says the same.
  auto text = Cordon({"audit", "summary", Log()});
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  for (const std::string& want : std::vector<std::string>{
           "# " + Log() + ": ok: " + std::to_string(recs.size()) + " records, 2 sessions",
           "# 2 session(s)\n", "\nsession " + serve_id + "  lines 1-" + std::to_string(recs.size()),
           "  client      mcp  \"summary-test\" \"1.2\"\n", "  calls       6\n",
           "    run_shell: ok 3\n", "  commands    3 (1 failed)\n",
           "    ! exit 3  run_shell  \"sh -c echo hi > made.txt;",
           "  files       3 changed (created 2, modified 1)\n",
           "    created  \"made.txt\"  run_shell (process, line ",
           "    policy_denied  scopes.grant  1  \"read_url net:read\"\n",
           "    network  not allowed  1  \"refused.example.test:80\"\n",
           "    refused.example.test  denied  1 connection(s)  0 B up, 0 B down\n",
           "    api.example.test  allowed  1 connection(s)  0 B up, " + std::to_string(api_down) +
               " B down\n",
           "  redacted    0 in records, 1 in results (github_token 1)\n"}) {
    EXPECT_NE(text.out.find(want), std::string::npos) << "missing: " << want << "\n" << text.out;
  }

  // Cut before the serve session's end: that session is unfinished (the chain alone cannot tell
  // a cut after a whole line; the summary still names the session).
  const auto lines = Lines(ReadFile(Log()));
  std::string cut;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) cut += lines[i] + "\n";
  WriteFile(dir_ / "cut.jsonl", cut);
  auto [cut_code, cj] = SummaryJson(dir_ / "cut.jsonl");
  EXPECT_EQ(cut_code, 0) << cj.dump(2);
  EXPECT_EQ(cj["logs"][0]["unfinished_sessions"], Json::array({serve_id}));
  EXPECT_FALSE(cj["logs"][0]["sessions"][0]["finished"].get<bool>());
  EXPECT_FALSE(cj["logs"][0]["sessions"][0].contains("session_finished"));
  auto cut_text = Cordon({"audit", "summary", dir_ / "cut.jsonl"});
  EXPECT_NE(cut_text.out.find("1 unfinished: " + serve_id), std::string::npos) << cut_text.out;
  EXPECT_NE(cut_text.out.find("UNFINISHED: no session_finished"), std::string::npos)
      << cut_text.out;

  // Line 4 edited: verify's exit code (1), and the lines from 4 on counted after the break.
  auto edited = lines;
  const auto at = edited[3].find("\"ts\":\"");
  ASSERT_NE(at, std::string::npos);
  edited[3][at + 7] = edited[3][at + 7] == '1' ? '2' : '1';
  std::string body;
  for (const auto& l : edited) body += l + "\n";
  WriteFile(dir_ / "edited.jsonl", body);
  auto [bad_code, bj] = SummaryJson(dir_ / "edited.jsonl");
  EXPECT_EQ(bad_code, 1) << bj.dump(2);
  EXPECT_EQ(bj["exit_code"], 1);
  EXPECT_EQ(bj["logs"][0]["verification"]["verdict"], "broken");
  EXPECT_EQ(bj["logs"][0]["sessions"][0]["verification"]["lines"],
            (Json{{"intact", 3}, {"after_break", serve_lines - 3}}));
  EXPECT_EQ(bj["logs"][0]["sessions"][1]["verification"]["lines"],
            (Json{{"after_break", call_last - call_first + 1}}));
}

TEST_F(AuditSummaryTest, BadInputFailsClosedWithVerifysCodes) {
  auto missing = Cordon({"audit", "summary", dir_ / "nope.jsonl", "--json"});
  EXPECT_EQ(missing.exit_code, 3) << missing.out << missing.err;
  Json j = Json::parse(missing.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << missing.out;
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["logs"][0]["verification"]["verdict"], "unreadable");
  EXPECT_NE(missing.err.find("cannot open audit log"), std::string::npos) << missing.err;
  auto no_log = Cordon({"audit", "summary"});
  EXPECT_EQ(no_log.exit_code, 2) << no_log.out << no_log.err;
}

// A name the agent chose (its clientInfo, a tool it asked for) cannot put a line of its own into
// the text summary (a job page shows it inside a fence): with a newline it is printed JSON-quoted.
TEST_F(AuditSummaryTest, AgentChosenNamesCannotStartALineOfTheirOwn) {
  const Json init = {{"jsonrpc", "2.0"},
                     {"id", 1},
                     {"method", "initialize"},
                     {"params",
                      {{"protocolVersion", "2025-11-25"},
                       {"capabilities", Json::object()},
                       {"clientInfo", {{"name", "t\n~~~\n<b>"}, {"version", "1"}}}}}};
  const Json call = {{"jsonrpc", "2.0"},
                     {"id", 2},
                     {"method", "tools/call"},
                     {"params", {{"name", "no\n~~~\nsuch"}, {"arguments", Json::object()}}}};
  auto r = testing::Run({testing::CordonBin(), "serve", "--workspace", ws_, "--audit-log", Log()},
                        env_, init.dump() + "\n" + call.dump() + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto text = Cordon({"audit", "summary", Log()});
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("  client      mcp  \"t\\n~~~\\n<b>\" \"1\"\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("    \"no\\n~~~\\nsuch\": error 1\n"), std::string::npos) << text.out;
  for (const auto& line : Lines(text.out)) EXPECT_NE(line, "~~~") << text.out;
}

// The aggregation alone, on records written inline (the kinds a real run on this host cannot
// produce, access_denied, beside the others): denials counted per rule (a Landlock denial by its
// count), a process's omitted changes counted but not listed, a gap's lost records, a call
// without its tool_finished, limits on what is listed, a torn line in no session.
TEST(SummarizeAuditLines, DenialsOfEveryKindGapsAndLimits) {
  const std::string log =
      R"({"session":"s1","type":"session_started","ts":"2026-01-02T03:04:05.000Z","client":"cli","workspace":"/w","policy_sha256":"p"}
{"session":"s1","type":"tool_started","tool":"run_shell","ts":"2026-01-02T03:04:05.500Z"}
{"session":"s2","type":"session_started","ts":"2026-01-02T03:04:06.000Z","client":"mcp"}
{"session":"s1","type":"process","tool":"run_shell","kind":"foreground","argv":["sh","-c","x"],"status":"killed","signal":9,"exit_code":null,"changes":{"entries":[{"kind":"created","path":"a"},{"kind":"renamed","path":"c","from":"b"}],"counts":{"created":5,"renamed":1,"deleted":0},"omitted":4}}
{"session":"s1","type":"access_denied","layer":"landlock","denials":[{"blockers":"fs.write_file","path":"/etc/x","count":3},{"blockers":"fs.write_file","path":"/etc/y","count":1},{"blockers":"net.connect_tcp","address":"1.2.3.4:80","count":2}],"omitted":7}
{"session":"s1","type":"protected_path_removed","path":"/w/.envrc","reason":"protected_path"}
{"session":"s1","type":"protected_path_removed","path":"/w/.git/hooks/x"}
{"session":"s1","type":"setuid_stripped","path":"/w/tool"}
{"session":"s1","type":"network","host":"h","port":443,"decision":"denied","rule":"deny_domains h"}
{"session":"s1","type":"gap","lost":3}
{"session":"s1","type":"file_write","tool":"create_file","op":"create","path":"n","status":"failed"}
{"v":1,"seq":9,"ts":"2026)";
  SummaryLimits limits;
  limits.files = 2;
  limits.subjects = 1;
  const LogSummary sum = SummarizeAuditLines("inline", log, nullptr, "", limits);
  EXPECT_EQ(sum.unreadable_lines, (std::vector<std::uint64_t>{12}));
  EXPECT_EQ(sum.unfinished, (std::vector<std::string>{"s1", "s2"}));
  ASSERT_EQ(sum.sessions.size(), 2u);
  const Json j = sum.sessions[0].ToJson();
  EXPECT_EQ(j["verification"]["verified"], false);
  EXPECT_EQ(j["verification"]["first_line"], 1);
  EXPECT_EQ(j["verification"]["last_line"], 11);
  EXPECT_EQ(j["verification"]["gaps"], 1);
  EXPECT_EQ(j["verification"]["lost_records"], 3);
  EXPECT_EQ(j["duration_ms"], 500) << "unfinished: to its last record with a time";
  EXPECT_EQ(j["calls"], (Json{{"total", 1}, {"by_tool", {{"run_shell", {{"unfinished", 1}}}}}}));
  EXPECT_EQ(j["commands"]["failed"], 1);
  EXPECT_EQ(j["commands"]["listed"][0]["signal"], 9);
  EXPECT_EQ(j["commands"]["listed"][0]["exit_code"], nullptr);
  // 2 listed + 4 omitted by the process, 1 failed write; the list cut at 2.
  EXPECT_EQ(j["files"]["total"], 7);
  EXPECT_EQ(j["files"]["counts"], (Json{{"created", 5}, {"renamed", 1}, {"failed", 1}}));
  EXPECT_EQ(j["files"]["listed"].size(), 2u);
  EXPECT_EQ(j["files"]["listed"][1]["from"], "b");
  EXPECT_EQ(j["files"]["omitted"], 5);
  const Json want = Json::array({
      {{"type", "access_denied"},
       {"rule", "landlock fs.write_file"},
       {"count", 4},
       {"subjects", {"/etc/x"}},
       {"subjects_omitted", 1}},
      {{"type", "access_denied"},
       {"rule", "landlock net.connect_tcp"},
       {"count", 2},
       {"subjects", {"1.2.3.4:80"}},
       {"subjects_omitted", 0}},
      {{"type", "access_denied"},
       {"rule", "landlock (not listed)"},
       {"count", 7},
       {"subjects", Json::array()},
       {"subjects_omitted", 0}},
      {{"type", "protected_path_removed"},
       {"rule", "protected_path"},
       {"count", 2},
       {"subjects", {"/w/.envrc"}},
       {"subjects_omitted", 1}},
      {{"type", "setuid_stripped"},
       {"rule", "setid_bits"},
       {"count", 1},
       {"subjects", {"/w/tool"}},
       {"subjects_omitted", 0}},
      {{"type", "network"},
       {"rule", "deny_domains h"},
       {"count", 1},
       {"subjects", {"h:443"}},
       {"subjects_omitted", 0}},
  });
  EXPECT_EQ(j["denials"]["by_rule"], want) << j["denials"].dump(2);
  EXPECT_EQ(j["denials"]["total"], 17);
  // --session keeps the sessions whose id starts with the prefix.
  const LogSummary only = SummarizeAuditLines("inline", log, nullptr, "s2");
  ASSERT_EQ(only.sessions.size(), 1u);
  EXPECT_EQ(only.sessions[0].client, "mcp");
}

// --- the CI examples of docs/ci.md: their YAML parses, and every block they run, run as written
// against a real log (the agent a script in a checkout), passes; the gate fails on an edited log.

// Prints, as JSON, each YAML block of docs/ci.md: {name, blocks: [the shell each step or script
// item runs, in order], variables: the job's variables}. Exits 1 when a block does not parse.
constexpr const char* kCiExtract = R"(import json, re, sys
import yaml
text = open(sys.argv[1], encoding='utf-8').read()
out = []
for i, block in enumerate(re.findall(r'```yaml\n(.*?)```', text, re.S)):
    doc = yaml.safe_load(block)
    if 'jobs' in doc:
        blocks, variables = [], {}
        for job in doc['jobs'].values():
            for step in job['steps']:
                if 'run' in step:
                    blocks.append(step['run'])
        out.append({'name': 'github', 'blocks': blocks, 'variables': variables})
    else:
        for job in doc.values():
            if not isinstance(job, dict) or 'script' not in job:
                continue
            blocks = []
            for key in ('before_script', 'script', 'after_script'):
                blocks.extend(job.get(key, []))
            out.append({'name': 'gitlab', 'blocks': blocks, 'variables': job.get('variables', {})})
print(json.dumps(out))
)";

class CiExamplesTest : public AuditSummaryTest {};

TEST_F(CiExamplesTest, EveryCommandLineRunsAsWrittenAgainstARealLog) {
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed");
  if (!testing::UserNamespacesEnabled()) SECURITY_SKIP("user namespaces are disabled");
  if (testing::Run({"/usr/bin/python3", "-c", "import yaml"}).exit_code != 0) {
    SECURITY_SKIP("python3 with yaml (Debian: python3-yaml; scripts/install-deps.sh)");
  }
  auto parsed = testing::Run(
      {"/usr/bin/python3", "-c", kCiExtract, std::string(CORDON_SOURCE_DIR) + "/docs/ci.md"});
  ASSERT_EQ(parsed.exit_code, 0) << "docs/ci.md's YAML does not parse:\n" << parsed.err;
  const Json examples = Json::parse(parsed.out);
  ASSERT_EQ(examples.size(), 2u) << parsed.out;
  // `audit report` is another command of issue 22; until this build has it, its invocations are
  // not required to succeed (the blocks tolerate its failure, as a job does).
  const bool have_report = Cordon({"audit", "--help"}).out.find("\n  report ") != std::string::npos;
  if (!have_report) std::fprintf(stderr, "NOTE: this build has no `audit report`: not run\n");
  // `cordon doctor` answers for this host: the examples' doctor steps must answer the same.
  const int doctor = Cordon({"doctor"}).exit_code;

  for (const auto& ex : examples) {
    const std::string name = ex["name"];
    SCOPED_TRACE(name);
    const std::string root = dir_ / name;
    const std::string checkout = root + "/checkout", bin = root + "/bin";
    std::filesystem::create_directories(checkout + "/scripts");
    std::filesystem::create_directories(bin);
    std::filesystem::create_directories(root + "/runner");
    // `cordon` on PATH runs the binary under test and notes each invocation's exit code, so that
    // a failure a block tolerates (`set +e`, `|| true`) is still seen.
    const std::string calls = root + "/calls";
    WriteFile(bin + "/cordon", "#!/bin/sh\n'" + testing::CordonBin() +
                                   "' \"$@\"\nrc=$?\nprintf '%s %s\\n' \"$rc\" \"$*\" >> '" +
                                   calls + "'\nexit $rc\n");
    std::filesystem::permissions(bin + "/cordon", std::filesystem::perms::owner_all);
    WriteFile(checkout + "/scripts/agent.sh", "#!/bin/sh\necho \"$TASK\" > agent-output.txt\n");
    std::filesystem::permissions(checkout + "/scripts/agent.sh", std::filesystem::perms::owner_all);
    std::vector<std::string> env = env_;
    for (const std::string& e : std::vector<std::string>{
             "PATH=" + bin + ":/usr/bin:/bin", "RUNNER_TEMP=" + root + "/runner",
             "GITHUB_STEP_SUMMARY=" + root + "/step-summary.md", "TASK=write agent-output.txt",
             std::string("ANTHROPIC_API_KEY=sk-ant-api03-") + std::string(40, 'q')}) {
      env.push_back(e);
    }
    // The job's variables, under this test's directory.
    for (const auto& [k, v] : ex["variables"].items()) {
      const std::string path = root + v.get<std::string>();
      std::filesystem::create_directories(std::filesystem::path(path).parent_path());
      env.push_back(k + "=" + path);
    }
    auto run = [&](const std::string& script) {
      return testing::Run({"/bin/bash", "-e", "-c", "cd '" + checkout + "'\n" + script}, env);
    };
    std::string verify;
    for (const auto& b : ex["blocks"]) {
      const std::string block = b;
      // Installing the package and the host's sysctls (ubuntu-24.04's AppArmor step) are the
      // runner's business; the binary under test is on PATH, and this host is left as it is.
      if (block.find("apt-get") != std::string::npos || block.find("sysctl") != std::string::npos)
        continue;
      auto r = run(block);
      EXPECT_EQ(r.exit_code, block == "cordon doctor" ? doctor : 0) << block << "\n"
                                                                    << r.out << r.err;
      for (const auto& l : Lines(block)) {
        if (l.rfind("cordon audit verify ", 0) == 0) verify = l;
      }
    }
    // Every invocation: each command and flag exists, and on this log each succeeded.
    std::set<std::string> used;
    for (const auto& call : Lines(ReadFile(calls))) {
      std::istringstream words(call);
      std::string rc, w1, w2;
      words >> rc >> w1 >> w2;
      used.insert(w1 == "audit" ? w1 + " " + w2 : w1);
      if (call.find(" --json") != std::string::npos) used.insert(w1 + " " + w2 + " --json");
      if (w2 == "report" && !have_report) continue;
      EXPECT_EQ(rc, std::to_string(w1 == "doctor" ? doctor : 0)) << call;
    }
    EXPECT_EQ(used,
              (std::set<std::string>{"doctor", "audit keygen", "exec", "audit verify",
                                     "audit summary", "audit summary --json", "audit report"}));
    EXPECT_NE(verify.find("--require signed"), std::string::npos) << verify;
    EXPECT_NE(verify.find("--witness"), std::string::npos) << verify;
    // The agent ran confined and its change is in the summary, signed and complete.
    EXPECT_EQ(ReadFile(checkout + "/agent-output.txt"), "write agent-output.txt\n");
    const std::string summary_json = name == "github" ? root + "/runner/cordon/summary.json"
                                                      : checkout + "/cordon-audit/summary.json";
    Json sj = Json::parse(ReadFile(summary_json), nullptr, false);
    ASSERT_TRUE(sj.is_object()) << summary_json;
    EXPECT_EQ(sj["exit_code"], 0);
    EXPECT_EQ(sj["logs"][0]["verification"]["signed"], true);
    const Json& session = sj["logs"][0]["sessions"][0];
    EXPECT_EQ(session["commands"]["listed"][0]["argv"], "./scripts/agent.sh");
    EXPECT_EQ(session["files"]["counts"], (Json{{"created", 1}}));
    EXPECT_EQ(sj.dump().find(std::string(40, 'q')), std::string::npos) << "the API key leaked";
    // The gate fails the job on an edited log.
    std::string log_path;
    for (const auto& e : env) {
      if (e.rfind("CORDON_LOG=", 0) == 0) log_path = e.substr(11);
    }
    if (log_path.empty()) log_path = root + "/runner/cordon/audit.jsonl";
    std::string text = ReadFile(log_path);
    const auto at = text.find("\"exit_code\":0");
    ASSERT_NE(at, std::string::npos) << text;
    text[at + 12] = '1';
    WriteFile(log_path, text);
    auto gate = run(verify);
    EXPECT_EQ(gate.exit_code, 1) << gate.out << gate.err;
  }
}

}  // namespace
}  // namespace cordon
