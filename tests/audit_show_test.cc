// `cordon audit show` verifies as it reads: a header with the verdict, every record after a break
// marked, verify's exit code; its per-type columns and each filter, on logs the real binary wrote.
#include <gtest/gtest.h>
#include <unistd.h>

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

// The record lines of a timeline (the header's lines start with '#').
std::vector<std::string> Rows(const std::string& out) {
  std::vector<std::string> rows;
  for (auto& l : Lines(out)) {
    if (!l.empty() && l[0] != '#') rows.push_back(l);
  }
  return rows;
}

class AuditShowTest : public ::testing::Test {
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
  RunResult Show(std::vector<std::string> args) {
    args.insert(args.begin(), {"audit", "show", Log()});
    return Cordon(args);
  }
  std::string Log() const { return dir_ / "audit.jsonl"; }
  RunResult Call(const std::string& tool, const std::string& json,
                 std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"call",        tool,  "--workspace", ws_,
                                     "--audit-log", Log(), "--json",      json};
    args.insert(args.end(), extra.begin(), extra.end());
    return Cordon(args);
  }
  RunResult Exec(std::vector<std::string> cmd, std::vector<std::string> opts = {}) {
    std::vector<std::string> args = {"exec", "--workspace", ws_, "--audit-log", Log()};
    args.insert(args.end(), opts.begin(), opts.end());
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    return Cordon(args);
  }

  TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
};

TEST_F(AuditShowTest, AnEditedLineAndEveryLineAfterItAreMarkedAndTheExitIsVerifys) {
  WriteFile(ws_ + "/hello.txt", "hello\n");
  ASSERT_EQ(Call("read_file_range", R"({"path":"hello.txt","start_line":1})").exit_code, 0);
  ASSERT_EQ(Call("create_file", R"({"path":"new.txt","content":"x"})").exit_code, 0);
  auto ok = Show({});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("chain only: the SHA-256 chain is intact"), std::string::npos) << ok.out;
  auto lines = Lines(ReadFile(Log()));
  ASSERT_GE(lines.size(), 8u);
  // Line 4 (tool_finished of the read): its status edited, the JSON still whole.
  ASSERT_NE(lines[3].find("\"status\":\"ok\""), std::string::npos) << lines[3];
  lines[3].replace(lines[3].find("\"status\":\"ok\""), 13, "\"status\":\"no\"");
  std::string edited;
  for (const auto& l : lines) edited += l + "\n";
  WriteFile(Log(), edited);
  auto bad = Show({});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  // The chain breaks at line 5 (its prev is not line 4's hash): line 4 is the first unproven.
  EXPECT_NE(bad.out.find("BROKEN at line 5: chain mismatch"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("line 4 and every line after it are marked !"), std::string::npos)
      << bad.out;
  const auto rows = Rows(bad.out);
  ASSERT_EQ(rows.size(), lines.size()) << bad.out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string want = (i + 1 >= 4 ? "! " : "  ") + std::to_string(i + 1) + "  ";
    EXPECT_EQ(rows[i].rfind(want, 0), 0u) << "line " << i + 1 << ": " << rows[i];
  }
  // --jsonl: each record as written, then _line and _verified.
  auto jsonl = Show({"--jsonl"});
  EXPECT_EQ(jsonl.exit_code, 1);
  const auto out = Lines(jsonl.out);
  ASSERT_EQ(out.size(), lines.size()) << jsonl.out;
  for (std::size_t i = 0; i < out.size(); ++i) {
    Json j = Json::parse(out[i], nullptr, false);
    ASSERT_TRUE(j.is_object()) << out[i];
    EXPECT_EQ(j["_line"], i + 1);
    EXPECT_EQ(j["_verified"], i + 1 >= 4 ? "after_break" : "intact") << out[i];
    const std::string tail = ",\"_line\":" + std::to_string(i + 1) + ",\"_verified\":";
    EXPECT_EQ(out[i].substr(0, out[i].find(tail)) + "}", lines[i]) << "not as written";
  }
  EXPECT_NE(jsonl.err.find("line 4 and every line after it are marked !"), std::string::npos)
      << jsonl.err;
}

TEST_F(AuditShowTest, EachFilterOnARealLog) {
  if (::access("/usr/bin/bwrap", X_OK) != 0) SECURITY_SKIP("bwrap is not installed");
  ASSERT_EQ(Exec({"/bin/sh", "-c", "echo hi > made.txt"}).exit_code, 0);
  ASSERT_EQ(Exec({"/bin/sh", "-c", "exit 3"}).exit_code, 3);
  ASSERT_EQ(Call("create_file", R"({"path":"notes.txt","content":"one\n"})").exit_code, 0);
  WriteFile(dir_ / "ro.toml", "[scopes]\ngrant = [\"!process:run\"]\n");
  EXPECT_NE(
      Call("run_shell", R"({"program":"touch","args":["y.txt"]})", {"--policy", dir_ / "ro.toml"})
          .exit_code,
      0);
  Exec({"/usr/bin/curl", "-sS", "--max-time", "20", "http://refused.example.test/"},
       {"--network", "proxy"});
  std::vector<Json> recs;
  for (const auto& l : Lines(ReadFile(Log()))) recs.push_back(Json::parse(l));
  auto types_of = [](const RunResult& r) {
    std::vector<std::string> types;
    for (const auto& row : Rows(r.out)) {
      // "  N  ts  session  #seq  type  ..."
      std::istringstream in(row);
      std::string n, ts, session, seq, type;
      in >> n >> ts >> session >> seq >> type;
      types.push_back(type);
    }
    return types;
  };
  using V = std::vector<std::string>;

  // Per-type columns.
  auto all = Show({});
  EXPECT_EQ(all.exit_code, 0) << all.out << all.err;
  EXPECT_NE(all.out.find("argv=\"/bin/sh -c exit 3\"  status=\"exited\"  exit_code=3"),
            std::string::npos)
      << all.out;
  EXPECT_NE(all.out.find("changes={\"created\":1"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("rule=\"scopes.grant\""), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("to=\"refused.example.test:80\"  decision=\"denied\""), std::string::npos)
      << all.out;
  EXPECT_NE(all.out.find("path=\"notes.txt\"  status=\"written\"  sha256_before=null  "
                         "sha256_after=\"" +
                         std::string("2c8b08da5ce6")),
            std::string::npos)
      << all.out;

  auto r = Show({"--type", "process"});
  EXPECT_EQ(types_of(r), (V{"process", "process", "process"})) << r.out;
  r = Show({"--type", "policy_denied,network"});
  EXPECT_EQ(types_of(r), (V{"policy_denied", "network"})) << r.out;
  r = Show({"--type", "processes"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("unknown record type \"processes\"; the types are session_started"),
            std::string::npos)
      << r.err;

  // The third session (create_file): its id's first 8 characters.
  std::vector<std::string> sessions;
  for (const auto& j : recs) {
    if (j["type"] == "session_started") sessions.push_back(j["session"]);
  }
  ASSERT_EQ(sessions.size(), 5u);
  r = Show({"--session", sessions[2].substr(0, 8)});
  EXPECT_EQ(types_of(r), (V{"session_started", "tool_started", "file_write", "tool_finished",
                            "session_finished"}))
      << r.out;

  r = Show({"--tool", "create_file"});
  EXPECT_EQ(types_of(r), (V{"tool_started", "file_write", "tool_finished"})) << r.out;

  r = Show({"--path", "made*"});
  EXPECT_EQ(types_of(r), (V{"process"})) << r.out;
  EXPECT_NE(r.out.find("echo hi > made.txt"), std::string::npos) << r.out;
  r = Show({"--path", "*.txt", "--type", "file_write"});
  EXPECT_EQ(types_of(r), (V{"file_write"})) << r.out;

  // --since the create_file session's start, --until the exit 3 process's record.
  std::string start3, exit3;
  for (const auto& j : recs) {
    if (j["session"] == sessions[2] && j["type"] == "session_started") start3 = j["ts"];
    if (j["type"] == "process" && j.value("exit_code", Json(0)) == Json(3)) exit3 = j["ts"];
  }
  r = Show({"--since", start3, "--type", "process"});
  EXPECT_EQ(types_of(r), (V{"process"})) << r.out;  // only the curl run's
  EXPECT_EQ(r.out.find("exit 3"), std::string::npos) << r.out;
  r = Show({"--until", exit3, "--type", "process"});
  EXPECT_EQ(types_of(r), (V{"process", "process"})) << r.out;
  r = Show({"--since", "2999-01-01T00:00:00+02:00"});
  EXPECT_TRUE(Rows(r.out).empty()) << r.out;
  r = Show({"--since", "yesterday"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--since: \"yesterday\" is not an RFC 3339 time: give "
                       "2026-01-02T03:04:05Z"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(Show({"--until", "2026-13-01"}).exit_code, 2);

  r = Show({"--errors"});
  EXPECT_EQ(types_of(r), (V{"process", "tool_finished"})) << r.out;
  EXPECT_NE(r.out.find("exit_code=3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("code=\"denied_by_policy\""), std::string::npos) << r.out;

  r = Show({"--denied"});
  EXPECT_EQ(types_of(r), (V{"policy_denied", "network"})) << r.out;

  r = Show({"--changes"});
  EXPECT_EQ(types_of(r), (V{"process", "file_write"})) << r.out;
  EXPECT_NE(r.out.find("made.txt"), std::string::npos) << r.out;

  // The kinds pass a record of either; other filters must all hold.
  r = Show({"--errors", "--denied"});
  EXPECT_EQ(types_of(r), (V{"process", "policy_denied", "tool_finished", "network"})) << r.out;
  // Filters combine: the refused network record of the curl run alone.
  r = Show({"--denied", "--tool", "exec"});
  EXPECT_EQ(types_of(r), (V{"network"})) << r.out;
}

// --tag: only the sessions that carry the tag, whether --tag gave it (session_started.tags) or a
// session_tag call added it later; a bad tag is refused (exit 2).
TEST_F(AuditShowTest, TagKeepsOnlyTheSessionsThatCarryIt) {
  ASSERT_EQ(Call("process_list", "{}", {"--tag", "nightly"}).exit_code, 0);
  ASSERT_EQ(Call("process_list", "{}").exit_code, 0);
  ASSERT_EQ(Call("session_tag", R"({"tag":"late","tagged":true})").exit_code, 0);
  std::vector<std::string> sessions;
  for (const auto& l : Lines(ReadFile(Log()))) {
    const Json r = Json::parse(l);
    if (r["type"] == "session_started") sessions.push_back(r["session"].get<std::string>());
  }
  ASSERT_EQ(sessions.size(), 3u);
  auto sessions_of = [](const RunResult& r) {
    std::set<std::string> out;
    for (const auto& row : Rows(r.out)) {
      std::istringstream in(row);
      std::string n, ts, session;
      in >> n >> ts >> session;
      out.insert(session);
    }
    return out;
  };
  auto nightly = Show({"--tag", " nightly "});
  EXPECT_EQ(nightly.exit_code, 0) << nightly.err;
  EXPECT_EQ(sessions_of(nightly), std::set<std::string>{sessions[0].substr(0, 8)}) << nightly.out;
  auto late = Show({"--tag", "late"});
  EXPECT_EQ(sessions_of(late), std::set<std::string>{sessions[2].substr(0, 8)}) << late.out;
  EXPECT_NE(late.out.find("session_started"), std::string::npos) << "its whole session";
  auto jsonl = Show({"--tag", "late", "--jsonl"});
  for (const auto& l : Lines(jsonl.out)) EXPECT_EQ(Json::parse(l)["session"], sessions[2]);
  auto none = Show({"--tag", "never-given"});
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_TRUE(Rows(none.out).empty()) << none.out;
  auto bad = Show({"--tag", "a\nb"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("--tag: a tag is one line"), std::string::npos) << bad.err;
}

TEST_F(AuditShowTest, ASignedLogCutAfterACheckpointIsUnprovenAloneAndCutWithTheWitness) {
  WriteFile(ws_ + "/hello.txt", "hello\n");
  auto key = Cordon({"audit", "keygen", "--out", dir_ / "k", "--json"});
  ASSERT_EQ(key.exit_code, 0) << key.err;
  const std::string key_id = Json::parse(key.out)["key_id"];
  const std::string witness = dir_ / "witness.jsonl";
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(
        Call("read_file_range", R"({"path":"hello.txt","start_line":1})",
             {"--audit-signing-key", dir_ / "k/audit-signing.key", "--audit-witness", witness})
            .exit_code,
        0);
  }
  const std::string pub = dir_ / "k/audit-signing.pub";
  auto whole = Show({"--pubkey", pub, "--witness", witness});
  EXPECT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  EXPECT_NE(whole.out.find("signed: checkpoints verified with key " + key_id), std::string::npos)
      << whole.out;
  // Cut the second session's session_finished and its checkpoint.
  auto lines = Lines(ReadFile(Log()));
  std::string cut;
  for (std::size_t i = 0; i + 2 < lines.size(); ++i) cut += lines[i] + "\n";
  WriteFile(Log(), cut);
  auto alone = Show({"--pubkey", pub});
  EXPECT_EQ(alone.exit_code, 5) << alone.out << alone.err;
  EXPECT_NE(alone.out.find("# ? marks records after the last proven checkpoint"), std::string::npos)
      << alone.out;
  const auto rows = Rows(alone.out);
  ASSERT_EQ(rows.size(), lines.size() - 2);
  EXPECT_EQ(rows.back().rfind("? ", 0), 0u) << rows.back();
  EXPECT_EQ(rows.front().rfind("  1  ", 0), 0u) << rows.front();
  auto witnessed = Show({"--pubkey", pub, "--witness", witness});
  EXPECT_EQ(witnessed.exit_code, 6) << witnessed.out << witnessed.err;
  EXPECT_NE(witnessed.out.find("CUT by the witness"), std::string::npos) << witnessed.out;
}

TEST(ShowTime, Rfc3339) {
  EXPECT_EQ(*ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*ParseRfc3339("1970-01-01T00:00:01.5Z"), 1500);
  EXPECT_EQ(*ParseRfc3339("1970-01-01T02:00:00+02:00"), 0);
  EXPECT_EQ(*ParseRfc3339("1970-01-02"), 86400000);
  for (const char* bad : {"", "1970-01-01T00:00:00", "1970-01-01T00:00Z", "1970-1-01",
                          "1970-01-01T00:00:00Zx", "1970-01-01T00:00:00."}) {
    EXPECT_FALSE(ParseRfc3339(bad)) << bad;
  }
}

}  // namespace
// What show, summary and diff print passes through TerminalSafe: an edited log or an agent's file
// name cannot move the auditor's cursor, recolour the text (CSI as C0 or C1) or reorder a line.
TEST(TerminalSafe, ControlsAndBidiOverridesAreWrittenOutVisibly) {
  EXPECT_EQ(TerminalSafe("ok\ttab\nnext"), "ok\ttab\nnext");
  EXPECT_EQ(TerminalSafe("\x1b[31mred"), "\\u{001B}[31mred");
  EXPECT_EQ(TerminalSafe("a\xc2\x9b"
                         "31m"),
            "a\\u{009B}31m");                                // C1 CSI
  EXPECT_EQ(TerminalSafe("x\xe2\x80\xaey"), "x\\u{202E}y");  // right-to-left override
  EXPECT_EQ(TerminalSafe("\xe2\x81\xa6i\xe2\x81\xa9"), "\\u{2066}i\\u{2069}");
  EXPECT_EQ(TerminalSafe("\xe2\x80\x8f\xd8\x9c\x7f"), "\\u{200F}\\u{061C}\\u{007F}");
  EXPECT_EQ(TerminalSafe("caf\xc3\xa9 \xe2\x80\x94 \xe2\x82\xac"),
            "caf\xc3\xa9 \xe2\x80\x94 \xe2\x82\xac");
  // Bytes that are not UTF-8 (a lone 0x9B is CSI to a terminal taking 8-bit controls, a cut or
  // overlong sequence) and the invisible format characters are written out too (found by the
  // adversarial pass of issue 33).
  EXPECT_EQ(TerminalSafe("cut\xc2"), "cut\\x{C2}");
  EXPECT_EQ(TerminalSafe("a\x9b[31mRED"), "a\\x{9B}[31mRED");
  EXPECT_EQ(TerminalSafe("\xc0\x9b\xe0\x80\x9b"), "\\x{C0}\\x{9B}\\x{E0}\\x{80}\\x{9B}");
  EXPECT_EQ(TerminalSafe("z\xe2\x80\xa8w\xef\xbb\xbfq\xe2\x81\xaa\xe2\x80\x8b"),
            "z\\u{2028}w\\u{FEFF}q\\u{206A}\\u{200B}");
  EXPECT_EQ(TerminalSafe("\xed\xa0\x80\xf4\x90\x80\x80"),
            "\\x{ED}\\x{A0}\\x{80}\\x{F4}\\x{90}\\x{80}\\x{80}");   // a surrogate, past U+10FFFF
  EXPECT_EQ(TerminalSafe("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");  // an emoji stays
}

}  // namespace cordon
