// docs/audit-schema.json against the logs of real runs of the binary (exec, call, serve over
// stdio with configured servers, mcp trust, a refused scope, a refused domain, a torn line, the
// direct workspace's sweep, a log replaced under a session, a disk-full run), checked by two
// independent validators: Python's jsonschema and Ajv 2020 from the MCP peers. Every catalog type
// appears in those logs but the ones this host cannot produce, which are built from their structs
// and named below. A record with an extra, a missing or a retyped field fails both.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit.h"
#include "core/text.h"
#include "session/session.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::RunResult;
using testing::TempDir;
using testing::WriteFile;

// A validator that is missing fails under CI=true, and is a loud skip elsewhere.
#define VALIDATOR_SKIP(reason)                                                              \
  do {                                                                                      \
    if (::cordon::testing::InCi()) {                                                        \
      GTEST_FAIL() << "SCHEMA VALIDATOR MISSING, AND CI=true FORBIDS SKIPPING: " << reason; \
    } else {                                                                                \
      GTEST_SKIP() << "SKIPPED SCHEMA VALIDATION: " << reason;                              \
    }                                                                                       \
  } while (0)

// Both validators read the schema and a JSONL file, skip lines that are not JSON (a torn line),
// print "line N: error" for each record that fails, "checked N" at the end, and exit 1 on any
// failure.
constexpr const char* kPython = R"(import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
v = jsonschema.Draft202012Validator(schema)
bad = n = 0
for i, line in enumerate(open(sys.argv[2], encoding='utf-8', errors='replace'), 1):
    try:
        rec = json.loads(line)
    except ValueError:
        continue
    n += 1
    errs = list(v.iter_errors(rec))
    if errs:
        bad += 1
        best = jsonschema.exceptions.best_match(errs)
        print('line %d: %s at %s' % (i, best.message, list(best.absolute_path)))
print('checked %d' % n)
sys.exit(1 if bad else 0)
)";

constexpr const char* kNode = R"(const fs = require('fs');
const Ajv2020 = require(process.env.MCP_PEERS_DIR + '/node_modules/ajv/dist/2020').default;
const ajv = new Ajv2020({allErrors: true});
const validate = ajv.compile(JSON.parse(fs.readFileSync(process.argv[2], 'utf8')));
let bad = 0, n = 0;
fs.readFileSync(process.argv[3], 'utf8').split('\n').forEach((line, i) => {
  let rec;
  try { rec = JSON.parse(line); } catch (e) { return; }
  n++;
  if (!validate(rec)) {
    bad++;
    console.log('line ' + (i + 1) + ': ' + ajv.errorsText(validate.errors));
  }
});
console.log('checked ' + n);
process.exit(bad ? 1 : 0);
)";

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
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= p.size();) {
    std::size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string cand = p.substr(start, end - start) + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

// Record types no run on this host can produce, each built from its struct instead (and why).
// Landlock's denials reach the log only from the kernel's audit stream, which needs root and
// audit enabled (docs/audit.md, "Landlock denials").
const std::set<std::string> kBuiltFromStructs = {"access_denied"};

// A real MCP server (Python, stdlib only) with one tool, `echo {text}`.
constexpr const char* kEchoServer = R"(import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "echo", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "echo", "description": "Echoes.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    elif m["method"] == "tools/call":
        r = {"content": [{"type": "text", "text": m["params"]["arguments"].get("text", "")}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
)";

// Fills the filesystem holding `file` until the kernel says ENOSPC (as tests/failclosed_test.cc).
void FillUp(const std::string& file) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  std::string block(4096, 'f');
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  while (::write(fd, "f", 1) > 0) {
  }
  EXPECT_EQ(errno, ENOSPC);
  ::close(fd);
}

// Another writer on the same log takes what the disk still has, the session's reservation
// included (as tests/failclosed_test.cc).
void ConsumeLogSpace(const std::string& log) {
  auto other = AuditWriter::Open(log, "other-writer", FsyncMode::kNever, std::nullopt, nullptr);
  ASSERT_TRUE(other) << other.error().message;
  for (std::size_t size : {4000, 1000, 200, 20, 1}) {
    for (int i = 0; i < 100000; ++i) {
      if (!other->Append(McpDiagnosticRecord{
              .server = "filler", .reason = "filler", .message = std::string(size, 'x')})) {
        break;
      }
    }
  }
}

class AuditSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    std::filesystem::create_directories(dir_ / "home");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "HOME=" + (dir_ / "home")};
    schema_ = std::string(CORDON_SOURCE_DIR) + "/docs/audit-schema.json";
    peers_ = testing::FromEnv("MCP_PEERS_DIR", "/tmp/mcp-peers");
    WriteFile(dir_ / "validate.py", kPython);
    WriteFile(dir_ / "validate.js", kNode);
  }
  RunResult Cordon(std::vector<std::string> args, const std::string& in = {}) {
    args.insert(args.begin(), testing::CordonBin());
    return testing::Run(args, env_, in);
  }
  std::string Log() const { return dir_ / "audit.jsonl"; }

  // Both validators on `file`; each result's exit code and output.
  RunResult Python(const std::string& file) {
    return testing::Run({FindOnPath("python3"), dir_ / "validate.py", schema_, file});
  }
  RunResult Ajv(const std::string& file) {
    return testing::Run({FindOnPath("node"), dir_ / "validate.js", schema_, file},
                        {"MCP_PEERS_DIR=" + peers_});
  }
  // Skips (fails under CI) when either validator is missing.
  bool ValidatorsMissing(std::string* why) {
    if (FindOnPath("python3").empty() ||
        testing::Run({FindOnPath("python3"), "-c", "import jsonschema"}).exit_code != 0) {
      *why = "python3 with jsonschema (Debian: python3-jsonschema; scripts/install-deps.sh)";
      return true;
    }
    if (FindOnPath("node").empty() || !testing::Exists(peers_ + "/node_modules/ajv/dist/2020.js")) {
      *why = "node, or Ajv in the MCP peers at " + peers_ + " (scripts/install-mcp-peers.sh)";
      return true;
    }
    return false;
  }

  TempDir dir_;
  std::string ws_, schema_, peers_;
  std::vector<std::string> env_;
};

TEST_F(AuditSchemaTest, LogsOfRealRunsMatchTheSchemaInBothValidators) {
  std::string why;
  if (ValidatorsMissing(&why)) VALIDATOR_SKIP(why);
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed");
  const std::string log = Log();
  // cordon exec: a command that writes a file (process.changes) and one that fails.
  auto r = Cordon({"exec", "--workspace", ws_, "--audit-log", log, "--", "/bin/sh", "-c",
                   "echo hi > made.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Cordon({"exec", "--workspace", ws_, "--audit-log", log, "--", "/bin/sh", "-c", "exit 3"});
  ASSERT_EQ(r.exit_code, 3) << r.err;
  // cordon call: a file write, a read, and a call the policy refuses.
  r = Cordon({"call", "create_file", "--workspace", ws_, "--audit-log", log, "--json",
              R"({"path":"notes.txt","content":"one\ntwo\n"})"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Cordon({"call", "read_file_range", "--workspace", ws_, "--audit-log", log, "--json",
              R"({"path":"notes.txt","start_line":1})"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // A tagged session, and a tag added by a call: session_started.tags and session_tag.
  r = Cordon({"call", "session_tag", "--workspace", ws_, "--audit-log", log, "--tag", "nightly",
              "--json", R"({"tag":"reviewed","tagged":true})"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  WriteFile(dir_ / "ro.toml", "[scopes]\ngrant = [\"!process:run\"]\n");
  r = Cordon({"call", "run_shell", "--workspace", ws_, "--audit-log", log, "--policy",
              dir_ / "ro.toml", "--json", R"({"program":"touch","args":["y.txt"]})"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  // An approval rule's ask that no one can answer (--non-interactive): an approval record.
  r = Cordon(
      {"exec", "--workspace", ws_, "--audit-log", log, "--non-interactive", "--", "git", "push"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  // A refused domain through the egress proxy.
  if (!FindOnPath("curl").empty()) {
    r = Cordon({"exec", "--workspace", ws_, "--audit-log", log, "--network", "proxy", "--",
                FindOnPath("curl"), "-sS", "--max-time", "20", "http://refused.example.test/"});
    EXPECT_NE((r.out + r.err).find("refused.example.test is not allowed"), std::string::npos)
        << r.out << r.err;
  }
  // A signed, witnessed session: checkpoint records.
  r = Cordon({"audit", "keygen", "--out", dir_ / "k"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Cordon({"call", "read_file_range", "--workspace", ws_, "--audit-log", log, "--json",
              R"({"path":"notes.txt","start_line":1})", "--audit-signing-key",
              dir_ / "k/audit-signing.key", "--audit-witness", dir_ / "witness.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // A torn line (a crash mid-write): skipped by the validators, recovered by the next writer.
  WriteFile(log, ReadFile(log) + R"({"v":1,"seq":9,"ts":"2026)");
  // Configured servers: `echo` (trusted with `cordon mcp trust`, then called) and `broken`, which
  // exits at once (mcp_diagnostic); an AGENTS.md (instructions).
  WriteFile(ws_ + "/echo_server.py", kEchoServer);
  WriteFile(dir_ / "home/.cordon/mcp.toml",
            "[servers.echo]\ncommand = \"/usr/bin/python3\"\nargs = [\"" + ws_ +
                "/echo_server.py\"]\n[servers.broken]\ncommand = \"/bin/false\"\n");
  WriteFile(ws_ + "/AGENTS.md", "# rules\nBe nice.\n");
  r = Cordon({"mcp", "trust", "echo", "--workspace", ws_, "--audit-log", log});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // A stage a killed cordon left mid-commit, without a rules file (an older cordon's): the next
  // staged launch (serve's, below) quarantines it whole and records it (recovery).
  WriteFile(testing::LeaveStage(testing::GoneCordonStages(dir_ / "state"), "1", ws_, "committing") +
                "/u0/left.txt",
            "x\n");
  // cordon serve over stdio: initialize, a shell command, a file edit, the server's tool, and a
  // command that makes a protected directory (the staged commit refuses it:
  // protected_path_removed).
  const std::string init =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"schema-test","version":"1"}}})";
  const std::string shell =
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_shell","arguments":{"program":"ls","args":["-l"]}}})";
  const std::string write =
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_file","arguments":{"path":"b.txt","content":"b\n"}}})";
  const std::string echo =
      R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mcp__echo__echo","arguments":{"text":"hi"}}})";
  const std::string vscode =
      R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_shell","arguments":{"program":"sh","args":["-c","mkdir .vscode && echo x > .vscode/settings.json"]}}})";
  r = Cordon({"serve", "--workspace", ws_, "--audit-log", log},
             init + "\n" + shell + "\n" + write + "\n" + echo + "\n" + vscode + "\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(R"("text":"hi")"), std::string::npos) << r.out;
  // The direct workspace mode's sweep finds a set-user-ID file and strips it (setuid_stripped).
  WriteFile(ws_ + "/suid", "x\n");
  ASSERT_EQ(::chmod((ws_ + "/suid").c_str(), 04755), 0);
  WriteFile(dir_ / "direct.toml", "[sandbox]\nworkspace = \"direct\"\n");
  r = Cordon({"exec", "--workspace", ws_, "--audit-log", log, "--policy", dir_ / "direct.toml",
              "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  std::vector<std::string> logs = {log};
  // In this process, as tests/failclosed_test.cc does: on root, a disk that fills while a
  // command runs (gap), and a log replaced (renamed over) under a session (log_detached in the
  // old file and the new).
  ::setenv("XDG_CONFIG_HOME", (dir_ / "config-inproc").c_str(), 1);
  ::setenv("XDG_STATE_HOME", (dir_ / "state-inproc").c_str(), 1);
  auto start = [&](const std::string& at) {
    SessionOptions o;
    o.workspace = ws_;
    o.audit_log = at;
    o.shipped_policy_dir = testing::ShippedPolicyDir();
    auto session = Session::Start(o, environ);
    EXPECT_TRUE(session) << session.error().message;
    return session ? std::move(*session) : nullptr;
  };
  // The disk-full run first: the mount namespace is this thread's from here on, and the
  // sessions' threads must all be born in it.
  bool full_disk_ran = false;
  if (::geteuid() == 0) {
    ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << std::strerror(errno);
    ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
    const std::string full = dir_ / "full";
    std::filesystem::create_directories(full);
    ASSERT_EQ(::mount("tmpfs", full.c_str(), "tmpfs", 0, "size=256k"), 0) << std::strerror(errno);
    const std::string full_log = full + "/audit.jsonl";
    auto s = start(full_log);
    if (s) {
      std::thread call([&] {
        s->Call("run_shell", {{"program", "sh"},
                              {"args", {"-c", "while [ ! -e go ]; do sleep 0.02; done; touch ran"}},
                              {"timeout_secs", 60}});
      });
      for (int i = 0; i < 3000 && ReadFile(full_log).find("\"tool_started\"") == std::string::npos;
           ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      FillUp(full + "/filler");
      ConsumeLogSpace(full_log);
      WriteFile(ws_ + "/go", "");
      call.join();
      std::filesystem::remove(full + "/filler");
      s->Finish();
      std::filesystem::copy_file(full_log, dir_ / "full.jsonl");
      logs.push_back(dir_ / "full.jsonl");
      full_disk_ran = true;
    }
    ::umount2(full.c_str(), MNT_DETACH);
  }
  {
    const std::string detached = dir_ / "detached.jsonl", old = dir_ / "detached-old.jsonl";
    auto s = start(detached);
    ASSERT_TRUE(s);
    s->Call("create_file", {{"path", "d1.txt"}, {"content", "a"}});
    ASSERT_EQ(::link(detached.c_str(), old.c_str()), 0);
    WriteFile(dir_ / "other.jsonl", "");
    std::filesystem::rename(dir_ / "other.jsonl", detached);
    s->Call("create_file", {{"path", "d2.txt"}, {"content", "b"}});
    s->Finish();
    logs.push_back(old);
    logs.push_back(detached);
  }
  // A job's web server (network loopback), probed and stopped: a `network` record of protocol
  // probe, and local_server_stopped.
  if (!FindOnPath("python3").empty()) {
    const std::string at = dir_ / "listener.jsonl";
    SessionOptions o;
    o.workspace = ws_;
    o.audit_log = at;
    o.shipped_policy_dir = testing::ShippedPolicyDir();
    o.tool_process.network = NetworkMode::kLoopback;
    auto session = Session::Start(o, environ);
    ASSERT_TRUE(session) << session.error().message;
    auto& s = *session;
    const Json job =
        s->Call("run_shell",
                {{"program", "sh"},
                 {"args", {"-c", "setsid -w python3 -m http.server --bind 127.0.0.1 0 & wait"}},
                 {"background", true}});
    ASSERT_FALSE(job.value("isError", true)) << job.dump();
    Json server;
    for (int i = 0; i < 150 && server.is_null(); ++i) {
      const Json list = s->Call("local_servers", Json::object())["structuredContent"]["servers"];
      if (list.is_array() && !list.empty()) server = list[0];
      if (server.is_null()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_FALSE(server.is_null()) << "the job's http.server never listened";
    const Json probe = s->Call(
        "local_servers",
        {{"urls", {"http://127.0.0.1:" + std::to_string(server["port"].get<int>()) + "/"}}});
    EXPECT_EQ(probe["structuredContent"]["probes"][0]["http_status"], 200) << probe.dump();
    const Json stop =
        s->Call("stop_local_server",
                {{"job_id", "job-1"}, {"pid", server["pid"]}, {"port", server["port"]}});
    EXPECT_FALSE(stop.value("isError", true)) << stop.dump();
    s->Finish();
    logs.push_back(at);
  }
  // The types no run here produces, built from their structs and written by the real writer.
  {
    auto w = AuditWriter::Open(dir_ / "built.jsonl", "built-from-structs", FsyncMode::kNever,
                               std::nullopt, nullptr);
    ASSERT_TRUE(w) << w.error().message;
    ASSERT_TRUE(w->Append(AccessDeniedRecord{
        .tool = "run_shell",
        .kind = "foreground",
        .layer = "landlock",
        .denials = Json::array(
            {{{"blockers", "fs.write_file"}, {"path", "/etc/passwd"}, {"count", 2}},
             {{"blockers", "net.connect_tcp"}, {"address", "127.0.0.1:80"}, {"count", 1}}}),
        .total = 3}));
    logs.push_back(dir_ / "built.jsonl");
  }

  // Every log passes both validators, which check the same records.
  std::set<std::string> types, built;
  for (const auto& file : logs) {
    for (const auto& line : Lines(ReadFile(file))) {
      Json rec = Json::parse(line, nullptr, false);
      if (!rec.is_object()) continue;
      (file == dir_ / "built.jsonl" ? built : types).insert(rec.value("type", ""));
    }
    auto py = Python(file);
    EXPECT_EQ(py.exit_code, 0) << file << ":\n" << py.out << py.err;
    EXPECT_NE(py.out.find("checked "), std::string::npos) << py.out << py.err;
    auto ajv = Ajv(file);
    EXPECT_EQ(ajv.exit_code, 0) << file << ":\n" << ajv.out << ajv.err;
    EXPECT_EQ(py.out.substr(py.out.find("checked ")), ajv.out.substr(ajv.out.find("checked ")))
        << file;
  }
  // Every type of the catalog: in a log of a real run, or named above and built.
  for (const auto& info : AuditRecordCatalog()) {
    const std::string t(info.type);
    if (kBuiltFromStructs.contains(t)) {
      EXPECT_TRUE(built.contains(t)) << t << " is named as built from its struct, but was not";
      continue;
    }
    if (t == "gap" && !full_disk_ran) continue;  // said below
    if (t == "network" && FindOnPath("curl").empty()) continue;
    EXPECT_TRUE(types.contains(t))
        << "no real run wrote a " << t << " record: add a run that does to this test, or name it "
        << "in kBuiltFromStructs with the reason this host cannot produce it";
  }
  if (!full_disk_ran) {
    SECURITY_SKIP("the disk-full run (gap records) needs root for a size-limited tmpfs");
  }
  if (FindOnPath("curl").empty()) {
    SECURITY_SKIP("curl is missing: the egress run (network records) did not run");
  }
}

TEST_F(AuditSchemaTest, ExtraMissingOrRetypedFieldsFailBothValidators) {
  std::string why;
  if (ValidatorsMissing(&why)) VALIDATOR_SKIP(why);
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed");
  auto r = Cordon(
      {"exec", "--workspace", ws_, "--audit-log", Log(), "--", "/bin/sh", "-c", "echo x > x.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json process;
  for (const auto& line : Lines(ReadFile(Log()))) {
    Json rec = Json::parse(line);
    if (rec["type"] == "process") process = rec;
  }
  ASSERT_TRUE(process.is_object());
  ASSERT_TRUE(process.contains("changes")) << process.dump();
  WriteFile(dir_ / "good.jsonl", process.dump() + "\n");
  EXPECT_EQ(Python(dir_ / "good.jsonl").exit_code, 0);
  EXPECT_EQ(Ajv(dir_ / "good.jsonl").exit_code, 0);
  struct Case {
    std::string name;
    Json rec;
  };
  std::vector<Case> cases;
  cases.push_back({"extra field", process});
  cases.back().rec["injected"] = true;
  cases.push_back({"missing field", process});
  cases.back().rec.erase("exit_code");
  cases.push_back({"retyped field", process});
  cases.back().rec["exit_code"] = "0";
  cases.push_back({"v is not 1", process});
  cases.back().rec["v"] = 2;
  cases.push_back({"extra field in changes", process});
  cases.back().rec["changes"]["injected"] = 1;
  cases.push_back({"retyped field in a change entry", process});
  cases.back().rec["changes"]["entries"] =
      Json::array({{{"kind", "created"}, {"path", 7}, {"type", "file"}}});
  // One file, one bad record a line: each validator names every line.
  std::string bad;
  for (const auto& c : cases) bad += c.rec.dump() + "\n";
  const std::string file = dir_ / "bad.jsonl";
  WriteFile(file, bad);
  const RunResult py = Python(file), ajv = Ajv(file);
  EXPECT_EQ(py.exit_code, 1) << py.out << py.err;
  EXPECT_EQ(ajv.exit_code, 1) << ajv.out << ajv.err;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string at = "line " + std::to_string(i + 1) + ": ";
    EXPECT_NE(py.out.find(at), std::string::npos) << cases[i].name << " passed jsonschema";
    EXPECT_NE(ajv.out.find(at), std::string::npos) << cases[i].name << " passed Ajv";
  }
}

}  // namespace
}  // namespace cordon
