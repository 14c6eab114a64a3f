// Issue 10, "fail closed": the audit log on a real full filesystem (a size-limited tmpfs in a
// private mount namespace), a log deleted or replaced under a session, and disk full on a file
// write. Every disk-full test runs with each fsync mode.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "audit/verify.h"
#include "audit/writer.h"
#include "core/hash.h"
#include "runner/host_probe.h"
#include "runner/landlock.h"
#include "session/session.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::string CodeOf(const Json& result) {
  return result["isError"].get<bool>()
             ? result["structuredContent"]["error"]["code"].get<std::string>()
             : "ok";
}

std::string MessageOf(const Json& result) {
  return result["isError"].get<bool>()
             ? result["structuredContent"]["error"]["message"].get<std::string>()
             : "";
}

std::vector<Json> LogRecords(const std::string& path) {
  std::vector<Json> out;
  std::string text = ReadFile(path);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    Json rec = Json::parse(text.substr(pos, nl - pos), nullptr, false);
    out.push_back(rec);
    pos = nl + 1;
  }
  return out;
}

// The records of the session that wrote the log's first record (the filler writer below is
// another session on the same file, and records its own gaps).
std::vector<Json> FirstSession(const std::vector<Json>& recs) {
  std::vector<Json> out;
  if (recs.empty() || !recs[0].is_object()) return out;
  const std::string session = recs[0].value("session", "");
  for (const auto& r : recs) {
    if (r.is_object() && r.value("session", "") == session) out.push_back(r);
  }
  return out;
}

bool HasType(const std::vector<Json>& recs, const std::string& type) {
  for (const auto& r : recs) {
    if (r.is_object() && r.value("type", "") == type) return true;
  }
  return false;
}

// Fills the filesystem holding `dir` with one file until the kernel says ENOSPC.
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

// Another writer on the same log (several sessions append to one file) takes what the disk
// still has, including a session's reservation past EOF: big records first, then small ones.
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

// The fixture: a 256 KiB tmpfs in this process's own mount namespace (nothing to clean up on
// the host), a workspace outside it, and a policy choosing the fsync mode.
class FullDiskTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "SKIPPED: needs root for a size-limited tmpfs";
    }
    ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << std::strerror(errno);
    ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
    full_ = dir_ / "full";
    std::filesystem::create_directories(full_);
    ASSERT_EQ(::mount("tmpfs", full_.c_str(), "tmpfs", 0, "size=256k"), 0) << std::strerror(errno);
    mounted_ = true;
    ::setenv("XDG_CONFIG_HOME", (dir_ / "config").c_str(), 1);
    std::filesystem::create_directories(dir_ / "ws");
    WriteFile(dir_ / "fsync.toml", "[audit]\nfsync = \"" + GetParam() + "\"\n");
    log_ = full_ + "/audit.jsonl";
  }
  void TearDown() override {
    if (mounted_) ::umount2(full_.c_str(), MNT_DETACH);
  }
  SessionOptions Options() {
    SessionOptions o;
    o.workspace = dir_ / "ws";
    o.audit_log = log_;
    o.shipped_policy_dir = testing::ShippedPolicyDir();
    o.policy_files = {dir_ / "fsync.toml"};
    return o;
  }
  std::unique_ptr<Session> Start() {
    auto s = Session::Start(Options(), environ);
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : nullptr;
  }
  std::vector<std::string> CordonArgs(const std::string& tool, const std::string& json) {
    return {testing::FromEnv("CORDON_TEST_BIN", CORDON_BIN),
            "call",
            tool,
            "--json",
            json,
            "--workspace",
            dir_ / "ws",
            "--audit-log",
            log_,
            "--policy",
            dir_ / "fsync.toml"};
  }
  TempDir dir_;
  std::string full_, log_;
  bool mounted_ = false;
};

INSTANTIATE_TEST_SUITE_P(FsyncModes, FullDiskTest,
                         ::testing::Values("always", "per_call", "never"));

// `cordon call` on a log whose filesystem is full: the session cannot record its start, so
// neither the shell command nor the file write happens.
TEST_P(FullDiskTest, CordonCallOnAFullLogDoesNothing) {
  FillUp(full_ + "/filler");
  auto r = testing::Run(CordonArgs("run_shell", R"({"program":"touch","args":["ran"]})"));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("audit_unavailable"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(dir_ / "ws/ran")) << "the command ran without its record";
  r = testing::Run(CordonArgs("create_file", R"({"path":"new.txt","content":"x"})"));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("audit_unavailable"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(dir_ / "ws/new.txt")) << "the file was written without its record";
  // Nothing was left behind, not even a torn line: the log is empty.
  EXPECT_EQ(ReadFile(log_), "");
}

// In a running session, the record before the act (tool_started, with its reservation) cannot
// be written: the call fails with audit_unavailable and does nothing; the session goes on.
TEST_P(FullDiskTest, RecordBeforeTheActFailsAndTheActDoesNotStart) {
  auto s = Start();
  ASSERT_TRUE(s);
  FillUp(full_ + "/filler");
  ConsumeLogSpace(log_);
  Json r = s->Call("run_shell", {{"program", "touch"}, {"args", {"ran"}}});
  EXPECT_EQ(CodeOf(r), "audit_unavailable") << r.dump();
  EXPECT_FALSE(Exists(dir_ / "ws/ran")) << "the command ran without its record";
  r = s->Call("create_file", {{"path", "new.txt"}, {"content", "x"}});
  EXPECT_EQ(CodeOf(r), "audit_unavailable") << r.dump();
  EXPECT_FALSE(Exists(dir_ / "ws/new.txt"));
  EXPECT_FALSE(s->poisoned()) << "nothing happened: the session is not poisoned";
  // Space again: the next call runs and is recorded.
  std::filesystem::remove(full_ + "/filler");
  r = s->Call("create_file", {{"path", "new.txt"}, {"content", "x"}});
  EXPECT_EQ(CodeOf(r), "ok") << r.dump();
  s->Finish();
  auto recs = FirstSession(LogRecords(log_));
  EXPECT_FALSE(HasType(recs, "gap")) << "nothing was lost: the refused calls did nothing";
  EXPECT_EQ(recs.back()["type"], "session_finished");
  auto v = VerifyAuditLog(log_, std::nullopt);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->verdict, VerifyReport::Verdict::kIntact) << v->problem;
  for (const auto& w : v->warnings) EXPECT_EQ(w.find("torn"), std::string::npos) << w;
}

// The disk fills while a command runs (another writer takes the reservation): the records
// after the act are lost. The session is poisoned, a gap record says what was lost, and the
// verifier reports the gap, not a crash.
TEST_P(FullDiskTest, RecordAfterTheActFailsPoisonsTheSessionAndLeavesAGap) {
  auto s = Start();
  ASSERT_TRUE(s);
  Json shell_result;
  std::thread call([&] {
    shell_result =
        s->Call("run_shell", {{"program", "sh"},
                              {"args", {"-c", "while [ ! -e go ]; do sleep 0.02; done; touch ran"}},
                              {"timeout_secs", 60}});
  });
  // Wait for tool_started (the act is under way), then fill the disk and the reservation.
  for (int i = 0; i < 3000 && ReadFile(log_).find("\"tool_started\"") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FillUp(full_ + "/filler");
  ConsumeLogSpace(log_);
  WriteFile(dir_ / "ws/go", "");
  call.join();
  EXPECT_TRUE(Exists(dir_ / "ws/ran")) << shell_result.dump();
  ASSERT_TRUE(s->poisoned());
  // Every later call: audit_unavailable, naming the log and the errno; nothing runs.
  Json r = s->Call("create_file", {{"path", "late.txt"}, {"content", "x"}});
  EXPECT_EQ(CodeOf(r), "audit_unavailable");
  EXPECT_NE(MessageOf(r).find(log_), std::string::npos) << MessageOf(r);
  EXPECT_NE(MessageOf(r).find("errno 28"), std::string::npos) << MessageOf(r);
  EXPECT_FALSE(Exists(dir_ / "ws/late.txt"));
  // Space again: the session's end writes the gap first.
  std::filesystem::remove(full_ + "/filler");
  s->Finish();
  for (const auto& rec : LogRecords(log_)) ASSERT_TRUE(rec.is_object()) << "a torn line";
  auto recs = FirstSession(LogRecords(log_));
  Json gap;
  for (const auto& rec : recs) {
    if (rec["type"] == "gap") gap = rec;
  }
  ASSERT_TRUE(gap.is_object()) << testing::ReadFile(log_);
  EXPECT_GE(gap["lost"].get<int>(), 2);  // process and tool_finished
  EXPECT_NE(gap["types"].dump().find("process"), std::string::npos) << gap.dump();
  EXPECT_NE(gap["types"].dump().find("tool_finished"), std::string::npos) << gap.dump();
  EXPECT_EQ(gap["errno"], ENOSPC);
  EXPECT_EQ(recs.back()["type"], "session_finished");
  auto v = VerifyAuditLog(log_, std::nullopt);
  ASSERT_TRUE(v);
  EXPECT_GE(v->gaps, 1u);
  EXPECT_GE(v->lost_records, 2u);
  for (const auto& w : v->warnings) EXPECT_EQ(w.find("torn"), std::string::npos) << w;
  auto out =
      testing::Run({testing::FromEnv("CORDON_TEST_BIN", CORDON_BIN), "audit", "verify", log_});
  EXPECT_EQ(out.exit_code, 9) << out.out;  // kExitGap
  EXPECT_EQ(out.out.find(" intact\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("GAP"), std::string::npos) << out.out;
}

// Disk full on a file write is no_space (not too_large), the previous file stays, and no
// temporary file is left.
TEST_P(FullDiskTest, FileWriteOnAFullDiskIsNoSpaceAndKeepsThePreviousFile) {
  SessionOptions o = Options();
  o.workspace = full_ + "/ws";
  o.audit_log = dir_ / "audit.jsonl";
  std::filesystem::create_directories(o.workspace);
  WriteFile(o.workspace + "/a.txt", "old content\n");
  auto s = Session::Start(o, environ);
  ASSERT_TRUE(s) << s.error().message;
  FillUp(full_ + "/filler");
  const std::string big(64 * 1024, 'n');
  Json r =
      (*s)->Call("replace_range", {{"path", "a.txt"}, {"old_string", "old"}, {"new_string", big}});
  EXPECT_EQ(CodeOf(r), "no_space") << r.dump();
  EXPECT_EQ(ReadFile(o.workspace + "/a.txt"), "old content\n");
  r = (*s)->Call("create_file", {{"path", "b.txt"}, {"content", big}});
  EXPECT_EQ(CodeOf(r), "no_space") << r.dump();
  EXPECT_FALSE(Exists(o.workspace + "/b.txt"));
  for (const auto& e : std::filesystem::directory_iterator(o.workspace)) {
    EXPECT_EQ(e.path().filename().string().find(".cordon-tmp"), std::string::npos) << e.path();
  }
  EXPECT_FALSE((*s)->poisoned());
}

// `cordon exec` and `cordon wrap` on a log that cannot take session_started: nothing starts and
// they exit 125 (cordon itself failed; docs/cli.md: they keep 1-123 for the command's own code),
// naming audit_unavailable.
TEST_P(FullDiskTest, ExecAndWrapOnAFullLogExit125AndStartNothing) {
  FillUp(full_ + "/filler");
  const std::string bin = testing::FromEnv("CORDON_TEST_BIN", CORDON_BIN);
  for (const std::string cmd : {"exec", "wrap"}) {
    auto r = testing::Run({bin, cmd, "--workspace", dir_ / "ws", "--audit-log", log_, "--policy",
                           dir_ / "fsync.toml", "--", "touch", "ran-" + cmd});
    EXPECT_EQ(r.exit_code, 125) << cmd << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("audit_unavailable"), std::string::npos) << cmd << ": " << r.err;
    EXPECT_FALSE(Exists(dir_ / ("ws/ran-" + cmd))) << cmd << " ran without its record";
  }
  EXPECT_EQ(ReadFile(log_), "");
}

// A checkpoint the log cannot take (here: RLIMIT_FSIZE leaves room for one more record and not
// for the checkpoint after it; EFBIG) poisons the session like any record after an act, and the
// gap record names the checkpoint.
TEST_P(FullDiskTest, ACheckpointTheLogCannotTakePoisonsTheSessionAndLeavesAGap) {
  WriteFile(dir_ / "fsync.toml",
            "[audit]\nfsync = \"" + GetParam() + "\"\ncheckpoint_records = 1\n");
  SessionOptions o = Options();
  o.audit_log = dir_ / "audit.jsonl";  // off the tmpfs: the file size limit decides
  o.audit_witness = dir_ / "witness.jsonl";
  auto started = Session::Start(o, environ);
  ASSERT_TRUE(started) << started.error().message;
  Session& s = **started;
  const McpDiagnosticRecord rec{.server = "t", .reason = "filler", .message = "m"};
  ASSERT_TRUE(s.Audit(rec, true));
  auto recs = LogRecords(o.audit_log);
  ASSERT_GE(recs.size(), 2u);
  ASSERT_EQ(recs.back()["type"], "checkpoint");
  const std::string text = ReadFile(o.audit_log);
  const std::size_t end_of_rec = text.rfind('\n', text.size() - 2);
  const std::size_t start_of_rec = text.rfind('\n', end_of_rec - 1) + 1;
  const std::size_t rec_line = end_of_rec + 1 - start_of_rec;
  ASSERT_FALSE(s.poisoned());
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  const struct rlimit tight = {static_cast<rlim_t>(text.size() + rec_line + 16), old.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tight), 0);
  const Status wrote = s.Audit(rec, true);
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(wrote) << "the record itself fits";
  ASSERT_TRUE(s.poisoned()) << "a checkpoint that could not be written left the session usable";
  EXPECT_NE(s.poisoned()->message.find("checkpoint"), std::string::npos) << s.poisoned()->message;
  EXPECT_NE(s.poisoned()->message.find("errno 27"), std::string::npos) << s.poisoned()->message;
  Json r = s.Call("create_file", {{"path", "late.txt"}, {"content", "x"}});
  EXPECT_EQ(CodeOf(r), "audit_unavailable") << r.dump();
  EXPECT_FALSE(Exists(dir_ / "ws/late.txt"));
  s.Finish();
  Json gap;
  for (const auto& line : LogRecords(o.audit_log)) {
    ASSERT_TRUE(line.is_object()) << "a torn line";
    if (line["type"] == "gap") gap = line;
  }
  ASSERT_TRUE(gap.is_object()) << ReadFile(o.audit_log);
  EXPECT_NE(gap["types"].dump().find("checkpoint"), std::string::npos) << gap.dump();
  EXPECT_EQ(gap["errno"], EFBIG);
  auto v = VerifyAuditLog(o.audit_log, std::nullopt);
  ASSERT_TRUE(v);
  EXPECT_GE(v->gaps, 1u);
  EXPECT_NE(v->verdict, VerifyReport::Verdict::kBroken) << v->problem;
}

// A witness on a full filesystem cannot take the checkpoint: the session is poisoned (the
// operator asked for checkpoints outside the log; losing them silently would weaken the proof),
// the message names the witness, and later calls do nothing.
TEST_P(FullDiskTest, AWitnessThatCannotTakeACheckpointPoisonsTheSession) {
  WriteFile(dir_ / "fsync.toml",
            "[audit]\nfsync = \"" + GetParam() + "\"\ncheckpoint_records = 4\n");
  FillUp(full_ + "/filler");
  SessionOptions o = Options();
  o.audit_log = dir_ / "audit.jsonl";
  o.audit_witness = full_ + "/witness.jsonl";
  auto started = Session::Start(o, environ);
  ASSERT_TRUE(started) << started.error().message;
  Session& s = **started;
  ASSERT_FALSE(s.poisoned());
  int calls = 0;
  while (!s.poisoned() && calls < 10) {
    Json r =
        s.Call("create_file", {{"path", "f" + std::to_string(calls) + ".txt"}, {"content", "x"}});
    EXPECT_EQ(CodeOf(r), "ok") << r.dump();
    ++calls;
  }
  ASSERT_TRUE(s.poisoned()) << "the witness failed " << calls << " times, unnoticed";
  EXPECT_NE(s.poisoned()->message.find(o.audit_witness.value()), std::string::npos)
      << s.poisoned()->message;
  Json r = s.Call("create_file", {{"path", "late.txt"}, {"content", "x"}});
  EXPECT_EQ(CodeOf(r), "audit_unavailable") << r.dump();
  EXPECT_FALSE(Exists(dir_ / "ws/late.txt"));
}

class DetachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("XDG_CONFIG_HOME", (dir_ / "config").c_str(), 1);
    std::filesystem::create_directories(dir_ / "ws");
  }
  std::unique_ptr<Session> Start() {
    SessionOptions o;
    o.workspace = dir_ / "ws";
    o.audit_log = log_;
    o.shipped_policy_dir = testing::ShippedPolicyDir();
    auto s = Session::Start(o, environ);
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : nullptr;
  }
  TempDir dir_;
  std::string log_ = dir_ / "audit.jsonl";
};

// The log is deleted while the session runs: the writer notices before its next write, starts
// the file at the path with a log_started whose `previous` links the deleted file's end, and
// the session goes on (issue 19: continue with a link, fail closed only when that fails).
TEST_F(DetachTest, DeletedLogIsFollowedWithALinkAndTheSessionGoesOn) {
  auto s = Start();
  ASSERT_TRUE(s);
  ASSERT_EQ(CodeOf(s->Call("create_file", {{"path", "a.txt"}, {"content", "a"}})), "ok");
  const std::string old_id = LogRecords(log_)[0]["log_id"];
  std::filesystem::remove(log_);
  Json r = s->Call("create_file", {{"path", "b.txt"}, {"content", "b"}});
  EXPECT_EQ(CodeOf(r), "ok") << r.dump();
  EXPECT_TRUE(Exists(dir_ / "ws/b.txt"));
  EXPECT_FALSE(s->poisoned());
  s->Finish();
  auto recs = LogRecords(log_);
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs[0]["type"], "log_started") << ReadFile(log_);
  EXPECT_EQ(recs[0]["previous"]["reason"], "deleted");
  EXPECT_EQ(recs[0]["previous"]["log_id"], old_id);
  EXPECT_EQ(recs[0]["previous"]["head"].get<std::string>().size(), 64u);
  EXPECT_EQ(recs.back()["type"], "session_finished");
  // The chain of the new file is whole; what the deleted file held is gone, and verify says so.
  auto v = VerifyAuditLog(log_, std::nullopt);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->verdict, VerifyReport::Verdict::kCut) << v->problem;
  EXPECT_NE(v->problem.find("deleted under it"), std::string::npos) << v->problem;
  ASSERT_EQ(v->links.size(), 1u);
}

// The log is replaced (renamed over) while the session runs: log_detached closes the old file
// (kept through a hard link here), the replacement starts with the link, and both verify.
TEST_F(DetachTest, ReplacedLogIsClosedAndFollowed) {
  auto s = Start();
  ASSERT_TRUE(s);
  ASSERT_EQ(CodeOf(s->Call("create_file", {{"path", "a.txt"}, {"content", "a"}})), "ok");
  ASSERT_EQ(::link(log_.c_str(), (dir_ / "old.jsonl").c_str()), 0);
  WriteFile(dir_ / "other.jsonl", "");
  std::filesystem::rename(dir_ / "other.jsonl", log_);
  Json r = s->Call("create_file", {{"path", "b.txt"}, {"content", "b"}});
  EXPECT_EQ(CodeOf(r), "ok") << r.dump();
  s->Finish();
  auto old_recs = LogRecords(dir_ / "old.jsonl");
  EXPECT_EQ(old_recs.back()["type"], "log_detached") << ReadFile(dir_ / "old.jsonl");
  EXPECT_EQ(old_recs.back()["reason"], "replaced");
  EXPECT_EQ(old_recs.back()["where"], "old_file");
  auto new_recs = LogRecords(log_);
  ASSERT_FALSE(new_recs.empty());
  EXPECT_EQ(new_recs[0]["type"], "log_started");
  std::string old_text = ReadFile(dir_ / "old.jsonl");
  old_text.pop_back();  // the last line, without its newline
  EXPECT_EQ(new_recs[0]["previous"]["head"], Sha256Hex(old_text.substr(old_text.rfind('\n') + 1)))
      << ReadFile(log_);
  for (const std::string& f : {dir_ / "old.jsonl", log_}) {
    auto v = VerifyAuditLog(f, std::nullopt);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->verdict, VerifyReport::Verdict::kIntact) << f << ": " << v->problem;
  }
  EXPECT_EQ(CheckRotationLink(dir_ / "old.jsonl", new_recs[0]["previous"], std::nullopt), "");
}

// No file can be opened at the path (its directory is now a regular file): the writer cannot
// continue, so the call that noticed is refused, the session takes no further calls, and the
// old file (the only place left) gets the gap and the session's end.
TEST_F(DetachTest, LogThatCannotBeFollowedFailsClosed) {
  std::filesystem::create_directories(dir_ / "logs");
  log_ = dir_ / "logs/audit.jsonl";
  auto s = Start();
  ASSERT_TRUE(s);
  ASSERT_EQ(CodeOf(s->Call("create_file", {{"path", "a.txt"}, {"content", "a"}})), "ok");
  std::filesystem::rename(dir_ / "logs", dir_ / "kept");
  WriteFile(dir_ / "logs", "not a directory\n");
  Json r = s->Call("create_file", {{"path", "b.txt"}, {"content", "b"}});
  EXPECT_EQ(CodeOf(r), "audit_unavailable") << r.dump();
  EXPECT_FALSE(Exists(dir_ / "ws/b.txt"));
  ASSERT_TRUE(s->poisoned());
  EXPECT_EQ(CodeOf(s->Call("create_file", {{"path", "c.txt"}, {"content", "c"}})),
            "audit_unavailable");
  EXPECT_FALSE(Exists(dir_ / "ws/c.txt"));
  s->Finish();
  auto recs = LogRecords(dir_ / "kept/audit.jsonl");
  ASSERT_FALSE(recs.empty());
  bool detached = false;
  for (const auto& rec : recs) detached = detached || rec["type"] == "log_detached";
  EXPECT_TRUE(detached) << ReadFile(dir_ / "kept/audit.jsonl");
  EXPECT_EQ(recs.back()["type"], "session_finished");
}

class OwnFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
  }
  std::string Bin() { return testing::FromEnv("CORDON_TEST_BIN", CORDON_BIN); }
  TempDir dir_;
  std::string ws_;
};

// `cordon wrap` records a tools/call before the server sees it; a tools/call sent as a
// notification (no id) could never be answered or recorded as a call that ended, so it never
// reaches the server. The server here prints every line it receives on its stderr, which
// wrap passes on when it ends.
TEST_F(OwnFileTest, WrapNeverForwardsAToolsCallWithoutAnId) {
  testing::WriteFile(
      ws_ + "/server.sh",
      "while IFS= read -r line; do\n"
      "  printf 'got %s\\n' \"$line\" >&2\n"
      "  case \"$line\" in\n"
      "    *'\"initialize\"'*) printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{"
      "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{"
      "\"name\":\"r\",\"version\":\"1\"}}}' ;;\n"
      "    *'\"id\":2'*) printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}' ;;\n"
      "  esac\n"
      "done\n");
  const std::string log = dir_ / "wrap.jsonl";
  const std::string input =
      std::string(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})") + "\n" +
      R"({"jsonrpc":"2.0","method":"tools/call","params":{"name":"mark","arguments":{"tag":"no-id-call"}}})" +
      "\n" + R"({"jsonrpc":"2.0","id":2,"method":"ping"})" + "\n";
  auto r = testing::Run(
      {Bin(), "wrap", "--workspace", ws_, "--audit-log", log, "--", "sh", ws_ + "/server.sh"}, {},
      input);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("got {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}"), std::string::npos)
      << "the server saw the requests after it:\n"
      << r.err;
  EXPECT_EQ(r.err.find("no-id-call"), std::string::npos) << r.err;
  const std::string audit = testing::ReadFile(log);
  EXPECT_NE(audit.find("tools/call sent as a notification"), std::string::npos) << audit;
}

// With bwrap, a log inside the workspace is masked: the confined command cannot append to it,
// and the log still verifies.
TEST_F(OwnFileTest, LogInsideTheWorkspaceIsNotWritableByAConfinedCommand) {
  if (FindOnPath("bwrap").empty()) {
    SECURITY_SKIP("bwrap is not installed (the weaker-mode test covers the refusal)");
  }
  const std::string log = ws_ + "/audit.jsonl";
  auto r = testing::Run({Bin(), "exec", "--workspace", ws_, "--audit-log", log, "--", "sh", "-c",
                         "w=for; echo ${w}ged >> audit.jsonl; echo ${w}ged > audit.jsonl; true"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // (The command line is in the process record: the word is put together by the shell.)
  EXPECT_EQ(ReadFile(log).find("forged"), std::string::npos) << ReadFile(log);
  auto v = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->verdict, VerifyReport::Verdict::kIntact) << v->problem;
}

// Without bwrap (the weaker mode, Landlock + seccomp), a writable root is granted whole: a log
// or key under one could be written, so cordon refuses to start (exit 3), before it runs
// anything or opens the log.
TEST_F(OwnFileTest, WeakerModeRefusesAnOwnFileUnderAWritableRoot) {
  if (LandlockAbi() < 1) {
    SECURITY_SKIP("Landlock is unavailable, so there is no weaker mode");
  }
  const std::string bin = dir_ / "nobwrap-bin";
  std::filesystem::create_directories(bin);
  for (const char* tool : {"sh", "touch", "true"}) {
    std::filesystem::create_symlink(FindOnPath(tool), bin + "/" + tool);
  }
  WriteFile(dir_ / "weaker.toml", "[sandbox]\nallow_weaker = true\n");
  const std::vector<std::string> env = {"PATH=" + bin};
  auto call = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {Bin(),
                                     "call",
                                     "run_shell",
                                     "--json",
                                     R"({"program":"touch","args":["ran"]})",
                                     "--workspace",
                                     ws_,
                                     "--policy",
                                     dir_ / "weaker.toml"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::Run(argv, env);
  };
  // The log in the workspace: refused.
  auto r = call({"--audit-log", ws_ + "/audit.jsonl"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("audit log"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("writable root"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(ws_ + "/ran"));
  EXPECT_FALSE(Exists(ws_ + "/audit.jsonl")) << "the refused log was not even created";
  // The key in the workspace: refused.
  WriteFile(ws_ + "/key", "0123456789abcdef0123456789abcdef");
  ::chmod((ws_ + "/key").c_str(), 0600);  // refused for where it lies, not its mode
  r = call({"--audit-log", dir_ / "audit.jsonl", "--audit-key-file", ws_ + "/key"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("audit key"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(ws_ + "/ran"));
  // Outside the writable roots: the session runs.
  r = call({"--audit-log", dir_ / "audit.jsonl"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Exists(ws_ + "/ran"));
}

}  // namespace
}  // namespace cordon
