// docs/audit-schema.json against the logs of real runs of the binary (exec, call, serve over
// stdio, a refused scope, a refused domain, a torn line), checked by two independent validators:
// Python's jsonschema and Ajv 2020 from the MCP peers. A record with an extra, a missing or a
// retyped field fails both.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
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
  WriteFile(dir_ / "ro.toml", "[scopes]\ngrant = [\"!process:run\"]\n");
  r = Cordon({"call", "run_shell", "--workspace", ws_, "--audit-log", log, "--policy",
              dir_ / "ro.toml", "--json", R"({"program":"touch","args":["y.txt"]})"});
  EXPECT_NE(r.exit_code, 0) << r.out;
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
  // cordon serve over stdio: initialize, a shell command, a file edit.
  const std::string init =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"schema-test","version":"1"}}})";
  const std::string shell =
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_shell","arguments":{"program":"ls","args":["-l"]}}})";
  const std::string write =
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_file","arguments":{"path":"b.txt","content":"b\n"}}})";
  r = Cordon({"serve", "--workspace", ws_, "--audit-log", log},
             init + "\n" + shell + "\n" + write + "\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;

  std::set<std::string> types;
  for (const auto& line : Lines(ReadFile(log))) {
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_object()) types.insert(rec.value("type", ""));
  }
  for (const char* t :
       {"log_started", "session_started", "tool_started", "tool_finished", "process", "file_write",
        "policy_denied", "log_recovered", "mcp_client", "session_finished", "checkpoint"}) {
    EXPECT_TRUE(types.count(t)) << "the runs wrote no " << t << " record";
  }
  if (!FindOnPath("curl").empty()) {
    EXPECT_TRUE(types.count("network"));
  }

  auto py = Python(log);
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  EXPECT_NE(py.out.find("checked "), std::string::npos) << py.out << py.err;
  auto ajv = Ajv(log);
  EXPECT_EQ(ajv.exit_code, 0) << ajv.out << ajv.err;
  EXPECT_EQ(py.out.substr(py.out.find("checked ")), ajv.out.substr(ajv.out.find("checked ")));
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
