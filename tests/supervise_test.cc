// Supervision (issue 23): who owns a job under `serve --http`, and what the process tools say of
// running ones. Every test runs the real binary against the real kernel.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "core/text.h"
#include "runner/cgroup.h"
#include "runner/host_probe.h"
#include "runner/host_stats.h"
#include "runner/listeners.h"
#include "runner/proc_usage.h"
#include "runner/resource_monitor.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using cordon::testing::ReadFile;
using cordon::testing::TempDir;
using cordon::testing::WriteFile;

int FreeLoopbackPort() {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

// `cordon serve --http` in the background, stopped (SIGTERM) and reaped by Stop or on
// destruction.
class HttpServe {
 public:
  HttpServe(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    pid_ = ::fork();
    if (pid_ == 0) {
      // A test that dies (an abort, a signal) takes its server with it.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
      const int devnull = ::open("/dev/null", O_RDWR);
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      std::vector<char*> a;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      _exit(127);
    }
  }
  ~HttpServe() { Stop(); }
  pid_t pid() const { return pid_; }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

// One MCP session over Streamable HTTP, each message POSTed with curl.
class HttpMcpSession {
 public:
  explicit HttpMcpSession(std::string url) : url_(std::move(url)) {}
  // initialize (retried while the server starts) and notifications/initialized; false when no
  // session id came back.
  bool Open() {
    const std::string init =
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"supervise_test","version":"1"}}})";
    cordon::testing::RunResult r;
    for (int i = 0; i < 100 && (r = Post(init)).out.empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto at = r.err.find("Mcp-Session-Id: ");
    if (at == std::string::npos) return false;
    sid_ = r.err.substr(at + 16, 32);
    Post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
    return true;
  }
  // A tools/call; the whole JSON-RPC response (null when none could be read) and its raw text.
  Json Call(const std::string& tool, const Json& args, std::string* raw = nullptr) {
    const Json msg = {{"jsonrpc", "2.0"},
                      {"id", ++next_id_},
                      {"method", "tools/call"},
                      {"params", {{"name", tool}, {"arguments", args}}}};
    auto r = Post(msg.dump());
    if (raw != nullptr) *raw = r.out;
    return Json::parse(r.out, nullptr, false);
  }
  // Any other request (tools/list): its JSON-RPC response.
  Json Request(const std::string& method) {
    const Json msg = {{"jsonrpc", "2.0"}, {"id", ++next_id_}, {"method", method}};
    return Json::parse(Post(msg.dump()).out, nullptr, false);
  }
  // DELETE: the client ends the session; the HTTP status.
  std::string End() {
    auto r = cordon::testing::Run({FindOnPath("curl"), "-s", "-m", "60", "-o", "/dev/null", "-w",
                                   "%{http_code}", "-X", "DELETE", url_, "-H",
                                   "Mcp-Session-Id: " + sid_});
    return r.out;
  }
  const std::string& sid() const { return sid_; }
  const std::string& url() const { return url_; }

 private:
  cordon::testing::RunResult Post(const std::string& body) {
    std::vector<std::string> argv = {FindOnPath("curl"),
                                     "-s",
                                     "-m",
                                     "60",
                                     "-D",
                                     "/dev/stderr",
                                     "-X",
                                     "POST",
                                     url_,
                                     "-H",
                                     "Content-Type: application/json",
                                     "-H",
                                     "Accept: application/json, text/event-stream",
                                     "--data-binary",
                                     body};
    if (!sid_.empty())
      argv.insert(argv.end(),
                  {"-H", "Mcp-Session-Id: " + sid_, "-H", "MCP-Protocol-Version: 2025-06-18"});
    return cordon::testing::Run(argv);
  }
  std::string url_;
  std::string sid_;
  int next_id_ = 1;
};

std::vector<Json> Records(const std::string& log) {
  std::vector<Json> out;
  std::istringstream in(ReadFile(log));
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

class SuperviseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "HOME=" + (dir_ / "home")};
    std::filesystem::create_directories(dir_ / "home");
    std::filesystem::create_directories(dir_ / "ws");
  }
  // serve --http on a free loopback port (with `extra` arguments); the URL of its endpoint.
  std::string StartHttp(const std::vector<std::string>& extra = {}) {
    const int port = FreeLoopbackPort();
    std::vector<std::string> argv = {cordon::testing::CordonBin(),
                                     "serve",
                                     "--workspace",
                                     dir_ / "ws",
                                     "--audit-log",
                                     log(),
                                     "--http",
                                     "127.0.0.1:" + std::to_string(port),
                                     "--no-auth"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = std::make_unique<HttpServe>(argv, env_);
    server_pid_ = server_->pid();
    return "http://127.0.0.1:" + std::to_string(port) + "/mcp";
  }
  // A policy layer that grants diagnostics:read (off in the shipped policy); its --policy flag.
  std::vector<std::string> GrantDiagnostics() {
    WriteFile(dir_ / "diag.toml", "[scopes]\ngrant = [\"diagnostics:read\"]\n");
    return {"--policy", dir_ / "diag.toml"};
  }
  pid_t server_pid_ = 0;
  std::string log() const { return dir_ / "audit.jsonl"; }
  void ExpectVerifies() {
    auto v = cordon::testing::Run({cordon::testing::CordonBin(), "audit", "verify", log()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  }
  TempDir dir_;
  std::vector<std::string> env_;
  std::unique_ptr<HttpServe> server_;
};

// A response's structuredContent (an empty object when it has none).
Json Structured(const Json& response) {
  if (!response.is_object() || !response.contains("result") || !response["result"].is_object())
    return Json::object();
  return response["result"].value("structuredContent", Json::object());
}
// A tool error's code and message ("" when the result is no error).
std::string ErrorField(const Json& response, const char* field) {
  const Json e = Structured(response).value("error", Json::object());
  return e.is_object() ? e.value(field, "") : "";
}

// Issue 23's first fault: under `serve --http` every MCP session shared one job table, so
// session B listed, read and cancelled session A's job-1. Each job is its starter's now: another
// session's id is not_found, with the message of an id that never existed, and nothing of the
// job (its argv, its output) reaches B.
TEST_F(SuperviseTest, HttpSessionsSeeAndStopOnlyTheirOwnJobs) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so jobs cannot run");
  const std::string url = StartHttp();
  HttpMcpSession a(url), b(url);
  ASSERT_TRUE(a.Open()) << "no MCP session from initialize";
  ASSERT_TRUE(b.Open());
  ASSERT_NE(a.sid(), b.sid());

  const Json started =
      a.Call("run_shell", {{"program", "sh"},
                           {"args", {"-c", "echo private-output-of-a; exec sleep 120"}},
                           {"background", true}});
  ASSERT_FALSE(started["result"].value("isError", true)) << started.dump();
  const std::string job = Structured(started).value("id", "");
  EXPECT_EQ(job, "job-1");
  // A sees its job, and its output once the line is written.
  Json out_a;
  for (int i = 0; i < 100; ++i) {
    out_a = a.Call("process_output", {{"id", job}});
    if (Structured(out_a).value("output", "").find("private-output-of-a") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(Structured(out_a).value("output", "").find("private-output-of-a"), std::string::npos)
      << out_a.dump();

  // B: nothing of A's job in its list; its output and cancel are not_found, as for an id that
  // never existed.
  std::string raw;
  const Json list_b = b.Call("process_list", Json::object(), &raw);
  EXPECT_EQ(Structured(list_b)["jobs"], Json::array()) << raw;
  EXPECT_EQ(raw.find("private-output-of-a"), std::string::npos) << raw;
  EXPECT_EQ(raw.find("job-1"), std::string::npos) << raw;
  const Json never = b.Call("process_output", {{"id", "job-77"}});
  for (const char* tool : {"process_output", "process_cancel"}) {
    SCOPED_TRACE(tool);
    const Json r = b.Call(tool, {{"id", job}}, &raw);
    EXPECT_TRUE(r["result"].value("isError", false)) << raw;
    EXPECT_EQ(ErrorField(r, "code"), "not_found") << raw;
    EXPECT_EQ(raw.find("private-output-of-a"), std::string::npos) << raw;
    EXPECT_EQ(raw.find("sleep"), std::string::npos) << raw;
    // The same words as for an id no session ever had (only the id differs).
    std::string msg = ErrorField(r, "message");
    const std::size_t at = msg.find(job);
    ASSERT_NE(at, std::string::npos) << raw;
    EXPECT_EQ(msg.replace(at, job.size(), "job-77"), ErrorField(never, "message"));
  }

  // A's job still runs: B's cancel did nothing to it.
  const Json list_a = a.Call("process_list", Json::object());
  ASSERT_EQ(Structured(list_a)["jobs"].size(), 1u) << list_a.dump();
  EXPECT_EQ(Structured(list_a)["jobs"][0]["state"], "running") << list_a.dump();
  EXPECT_FALSE(Structured(list_a)["jobs"][0]["cancel_requested"].get<bool>());

  // B's own first job is its job-1; A cancelling job-1 cancels A's, and B's runs on.
  const Json started_b =
      b.Call("run_shell", {{"program", "sleep"}, {"args", {"120"}}, {"background", true}});
  EXPECT_EQ(Structured(started_b)["id"], "job-1") << started_b.dump();
  const Json cancel_a = a.Call("process_cancel", {{"id", "job-1"}});
  EXPECT_EQ(Structured(cancel_a)["was_running"], true) << cancel_a.dump();
  EXPECT_EQ(Structured(cancel_a)["state"], "cancelled") << cancel_a.dump();
  const Json list_b2 = b.Call("process_list", Json::object());
  ASSERT_EQ(Structured(list_b2)["jobs"].size(), 1u) << list_b2.dump();
  EXPECT_EQ(Structured(list_b2)["jobs"][0]["state"], "running") << list_b2.dump();
  EXPECT_EQ(Structured(list_b2)["jobs"][0]["argv"], Json({"sleep", "120"}));

  // B's session ends (DELETE): its jobs, which nobody else can reach, end with it.
  EXPECT_EQ(b.End(), "200");
  server_->Stop();

  // The log says who made each call and started each process, by label, never by session id.
  std::map<std::string, std::set<std::string>> labels_by_tool;
  std::set<std::string> client_labels;
  int cancelled = 0;
  for (const Json& r : Records(log())) {
    if (r["type"] == "mcp_client") client_labels.insert(r.value("mcp_session", ""));
    if (r["type"] == "tool_started")
      labels_by_tool[r["tool"]].insert(r.value("mcp_session", "(none)"));
    if (r["type"] == "process") {
      EXPECT_TRUE(r.contains("mcp_session")) << r.dump();
      if (r["status"] == "cancelled") ++cancelled;
    }
  }
  EXPECT_EQ(client_labels, (std::set<std::string>{"mcp-1", "mcp-2"}));
  EXPECT_EQ(labels_by_tool["run_shell"], (std::set<std::string>{"mcp-1", "mcp-2"}));
  EXPECT_EQ(labels_by_tool["process_cancel"], (std::set<std::string>{"mcp-1", "mcp-2"}));
  EXPECT_EQ(cancelled, 2) << "A's job by process_cancel, B's by the end of its session";
  const std::string text = ReadFile(log());
  EXPECT_EQ(text.find(a.sid()), std::string::npos) << "a session id is a credential";
  EXPECT_EQ(text.find(b.sid()), std::string::npos);
  ExpectVerifies();
}

// Issue 23's second fault: process_list gave cpu_ms, max_rss_kb and elapsed_ms 0 for a running
// job (the shim reports them only at its end). They are read live from /proc over the job's
// sandbox now: a CPU burner's cpu_ms rises between two lists while it runs.
TEST_F(SuperviseTest, ProcessListShowsARunningJobsCpuMemoryAndTimeLive) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so jobs cannot run");
  HttpMcpSession s(StartHttp());
  ASSERT_TRUE(s.Open());
  const Json started =
      s.Call("run_shell",
             {{"program", "sh"}, {"args", {"-c", "while :; do :; done"}}, {"background", true}});
  ASSERT_EQ(Structured(started).value("id", ""), "job-1") << started.dump();
  auto job_of = [&]() {
    const Json list = s.Call("process_list", Json::object());
    const Json jobs = Structured(list).value("jobs", Json::array());
    return jobs.size() == 1 ? jobs[0] : Json::object();
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const Json first = job_of();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const Json second = job_of();
  ASSERT_EQ(first.value("state", ""), "running") << first.dump();
  ASSERT_EQ(second.value("state", ""), "running") << second.dump();
  ASSERT_TRUE(first["cpu_ms"].is_number() && second["cpu_ms"].is_number()) << second.dump();
  const double cpu1 = first["cpu_ms"], cpu2 = second["cpu_ms"];
  const double wall1 = first["elapsed_ms"], wall2 = second["elapsed_ms"];
  std::printf("burner: cpu_ms %.0f -> %.0f over elapsed_ms %.0f -> %.0f\n", cpu1, cpu2, wall1,
              wall2);
  EXPECT_GT(cpu1, 0) << first.dump();
  // The burner spins the whole 1.5 s; on 2 busy shared cores it gets at least a fifth of that.
  EXPECT_GT(cpu2 - cpu1, 300) << first.dump() << second.dump();
  EXPECT_LE(cpu2 - cpu1, (wall2 - wall1) * 1.1 + 50) << "one thread cannot burn more than the wall";
  EXPECT_GT(wall2 - wall1, 1400);
  ASSERT_TRUE(second["max_rss_kb"].is_number_integer()) << second.dump();
  EXPECT_GT(second["max_rss_kb"].get<std::int64_t>(), 0);
  EXPECT_GT(second["rss_kb"].get<std::int64_t>(), 0);
  EXPECT_GE(second["processes"].get<int>(), 2) << "the sandbox's init and the shell at least";

  // Once it ended, the figures are the shim's final ones again.
  const Json cancelled = s.Call("process_cancel", {{"id", "job-1"}});
  EXPECT_EQ(Structured(cancelled).value("state", ""), "cancelled") << cancelled.dump();
  const Json ended = job_of();
  EXPECT_EQ(ended.value("state", ""), "cancelled");
  EXPECT_FALSE(ended.contains("processes")) << ended.dump();
  server_->Stop();
  ExpectVerifies();
}

// /proc parsing (runner/proc_usage.h), table by table, without a kernel.
TEST(ProcUsage, ParsesStatLinesWhateverTheCommandCalledItself) {
  // Fields 3..24 of proc(5): state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime vsize rss.
  const std::string tail = " S 41 42 42 0 -1 4194560 10 0 0 0 250 50 7 3 20 0 1 0 9876 1000 321";
  for (const std::string comm : {"sh", "a b", "x) S 1 (y", ")", ""}) {
    SCOPED_TRACE(comm);
    auto st = ParseProcStat("1234 (" + comm + ")" + tail + "\n");
    ASSERT_TRUE(st);
    EXPECT_EQ(st->pid, 1234);
    EXPECT_EQ(st->comm, comm);
    EXPECT_EQ(st->state, 'S');
    EXPECT_EQ(st->ppid, 41);
    EXPECT_EQ(st->utime, 250u);
    EXPECT_EQ(st->stime, 50u);
    EXPECT_EQ(st->cutime, 7u);
    EXPECT_EQ(st->cstime, 3u);
    EXPECT_EQ(st->starttime, 9876u);
    EXPECT_EQ(st->rss_pages, 321);
  }
  for (const char* bad : {"", "1234", "1234 (sh", "1234 (sh) S 41",
                          "x (sh)"
                          " S 41 42 42 0 -1 4 1 0 0 0 2 5 7 3 20 0 1 0 9 1 3",
                          "1234 (sh) SS 41 42 42 0 -1 4 1 0 0 0 2 5 7 3 20 0 1 0 9 1 3",
                          "1234 (sh) S 41 42 42 0 -1 4 1 0 0 0 2x 5 7 3 20 0 1 0 9 1 3"}) {
    EXPECT_FALSE(ParseProcStat(bad)) << bad;
  }
  EXPECT_EQ(StateName('R'), "running");
  EXPECT_EQ(StateName('Z'), "zombie");
  EXPECT_EQ(StateName('?'), "unknown");
}

TEST(ProcUsage, StatusKbAndCommandLines) {
  const std::string status = "Name:\tsh\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nVmRSSx: 9 kB\n";
  EXPECT_EQ(StatusKb(status, "VmHWM"), 2048);
  EXPECT_EQ(StatusKb(status, "VmRSS"), 1024);
  EXPECT_EQ(StatusKb(status, "VmSwap"), std::nullopt);
  EXPECT_EQ(StatusKb("VmRSS:\tlots kB\n", "VmRSS"), std::nullopt);
  EXPECT_EQ(CmdlineText(std::string("sh\0-c\0echo a\nb\0", 16)), "sh -c echo a b");
  EXPECT_EQ(CmdlineText(std::string("x\xff\0", 3)), "x\uFFFD");
  EXPECT_EQ(CmdlineText(""), "");
  LiveProcess a, b;
  a.cpu_ms = 10;
  a.rss_kb = 100;
  a.peak_kb = 300;
  b.cpu_ms = 5;
  b.rss_kb = 200;
  b.peak_kb = -1;  // unreadable
  const LiveUsage u = SumUsage({a, b});
  EXPECT_EQ(u.cpu_ms, 15);
  EXPECT_EQ(u.rss_kb, 300);
  EXPECT_EQ(u.max_rss_kb, 300);
  EXPECT_EQ(u.processes, 2);
  EXPECT_FALSE(SumUsage({}).cpu_ms) << "no process read: null, never 0";
}

// process_cancel {force}: SIGKILL at once instead of SIGTERM and the grace. A job that ignores
// SIGTERM holds a plain cancel for the whole grace (2 s); a forced one ends at once.
TEST_F(SuperviseTest, ProcessCancelForceSkipsTheGrace) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so jobs cannot run");
  HttpMcpSession s(StartHttp());
  ASSERT_TRUE(s.Open());
  for (int i = 0; i < 2; ++i) {
    const Json started =
        s.Call("run_shell", {{"program", "sh"},
                             {"args", {"-c", "trap '' TERM; echo up; while :; do sleep 0.1; done"}},
                             {"background", true}});
    ASSERT_FALSE(started["result"].value("isError", true)) << started.dump();
  }
  for (const char* id : {"job-1", "job-2"}) {  // both are up, TERM ignored
    for (int i = 0; i < 100; ++i) {
      if (Structured(s.Call("process_output", {{"id", id}})).value("output", "") == "up\n") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  auto timed = [&](const Json& args, Json* out) {
    const auto t0 = std::chrono::steady_clock::now();
    *out = s.Call("process_cancel", args);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  Json plain, forced;
  const double plain_ms = timed({{"id", "job-1"}}, &plain);
  const double forced_ms = timed({{"id", "job-2"}, {"force", true}}, &forced);
  std::printf("process_cancel of a job ignoring SIGTERM: %.0f ms plain, %.0f ms forced\n", plain_ms,
              forced_ms);
  EXPECT_EQ(Structured(plain).value("state", ""), "cancelled") << plain.dump();
  EXPECT_EQ(Structured(plain).value("forced", true), false) << plain.dump();
  EXPECT_EQ(Structured(forced).value("state", ""), "cancelled") << forced.dump();
  EXPECT_EQ(Structured(forced).value("forced", false), true) << forced.dump();
  EXPECT_EQ(Structured(forced).value("was_running", false), true) << forced.dump();
  EXPECT_GE(plain_ms, 1900) << "the grace is 2 s";
  // Relative, not a clock bound (a loaded host slows both alike): the plain cancel waits the
  // 2 s grace on top of what the forced one does.
  EXPECT_LT(forced_ms, plain_ms - 1000) << "force waits for no grace";
  // Bad input: force of another type.
  const Json bad = s.Call("process_cancel", {{"id", "job-2"}, {"force", "yes"}});
  EXPECT_EQ(ErrorField(bad, "code"), "invalid_input") << bad.dump();
  server_->Stop();
  int cancelled = 0;
  for (const Json& r : Records(log())) {
    if (r["type"] == "process" && r["status"] == "cancelled") ++cancelled;
  }
  EXPECT_EQ(cancelled, 2);
  ExpectVerifies();
}

// A small real MCP server (Python, stdlib only) for the configured-server rows.
constexpr const char* kPyServer = R"(import json, sys
sys.stderr.write("N" * 800 + "\nstarting with ghp_" + "Q" * 36 + "\n")
sys.stderr.flush()
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "py", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "shout", "description": "d", "inputSchema": {"type": "object"}}]}
    elif m["params"].get("arguments", {}).get("odd"):
        r = {"content": [{"type": "text", "text": "x"}], "isError": "true"}
    else:
        r = {"content": [{"type": "text", "text": "x"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
)";

// supervisor_processes: the live table. A job's processes with their owner, a configured
// stdio server's (seen by every MCP session), nothing of another MCP session's job, cordon
// itself never; command lines redacted and cut; max_processes bounds the rows.
TEST_F(SuperviseTest, SupervisorProcessesListsTheLiveTableOfItsOwnSessionAndServers) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("python3").empty()) GTEST_SKIP() << "SKIPPED: python3 is needed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so jobs cannot run");
  WriteFile(dir_ / "srv/server.py", kPyServer);
  WriteFile(dir_ / "home/.cordon/mcp.toml",
            "[servers.py]\ncommand = \"python3\"\nargs = [\"" + dir_ / "srv/server.py" +
                "\"]\n[servers.py.sandbox]\nread = [\"" + dir_ / "srv" + "\"]\n");
  HttpMcpSession a(StartHttp(GrantDiagnostics())), b(a.url());
  ASSERT_TRUE(a.Open());
  ASSERT_TRUE(b.Open());
  const CgroupMode cgroups_ = ProbeCgroups().mode;  // what serve's launches get on this host
  // mcp_server_status before the server started: nothing to say of a process.
  const Json before = a.Call("mcp_server_status", Json::object());
  ASSERT_EQ(Structured(before)["servers"].size(), 1u) << before.dump();
  EXPECT_EQ(Structured(before)["servers"][0]["state"], "not_started") << before.dump();
  EXPECT_TRUE(Structured(before)["servers"][0]["pid"].is_null());
  const Json tools = a.Request("tools/list");  // starts the configured server
  ASSERT_NE(tools.dump().find("mcp__py__shout"), std::string::npos) << tools.dump();
  const std::string token = "ghp_" + std::string(36, 'Q');
  const std::string long_arg(800, 'L');
  const Json started =
      a.Call("run_shell", {{"program", "sh"},
                           {"args", {"-c", "sleep 120; : \"$0\" \"$1\"", token, long_arg}},
                           {"background", true}});
  ASSERT_FALSE(started["result"].value("isError", true)) << started.dump();

  std::string raw;
  Json table;
  for (int i = 0; i < 50; ++i) {  // until the job's sleep has started
    table = a.Call("supervisor_processes", Json::object(), &raw);
    if (raw.find("sleep 120") != std::string::npos && raw.find("\"job\"") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(table["result"].value("isError", true)) << raw;
  // JSON plus equal text.
  EXPECT_EQ(Json::parse(table["result"]["content"][0]["text"].get<std::string>()),
            Structured(table));
  const Json rows = Structured(table)["processes"];
  int job_rows = 0, server_rows = 0;
  for (const Json& r : rows) {
    EXPECT_NE(r["pid"].get<int>(), server_pid_) << "cordon itself is listed: " << r.dump();
    EXPECT_LE(r["cmdline"].get<std::string>().size(), 500u) << r.dump();
    EXPECT_TRUE(r["cpu_ms"].is_number()) << r.dump();
    EXPECT_GT(r["pid_namespace"].get<std::uint64_t>(), 0u);
    // Its sandbox's cgroup now, where cordon could make one (root on this hybrid host, a
    // delegated v2 tree); null for an ordinary user without one.
    ASSERT_TRUE(r.contains("cgroup")) << r.dump();
    if (r["owner"] == Json{{"kind", "job"}, {"name", "job-1"}} && cgroups_ != CgroupMode::kNone) {
      ASSERT_TRUE(r["cgroup"].is_object()) << r.dump();
      EXPECT_EQ(r["cgroup"]["mode"], Name(kCgroupModeNames, cgroups_)) << r.dump();
      EXPECT_GE(r["cgroup"]["pids"].get<int>(), 2) << "the shell and its sleep: " << r.dump();
      EXPECT_GT(r["cgroup"]["memory_bytes"].get<std::int64_t>(), 0) << r.dump();
    } else if (cgroups_ == CgroupMode::kNone) {
      EXPECT_TRUE(r["cgroup"].is_null()) << r.dump();
    }
    if (r["owner"] == Json{{"kind", "job"}, {"name", "job-1"}}) {
      ++job_rows;
      if (r["cmdline"].get<std::string>().rfind("sh -c", 0) == 0) {
        EXPECT_TRUE(r["cmdline_truncated"].get<bool>()) << r.dump();
        EXPECT_NE(r["cmdline"].get<std::string>().find("[REDACTED:github_token]"),
                  std::string::npos)
            << r.dump();
      }
    }
    // The server's sandbox: its init, the shim, and python3 running server.py.
    if (r["owner"] == Json{{"kind", "server"}, {"name", "py"}} &&
        r["cmdline"].get<std::string>().find("server.py") != std::string::npos) {
      ++server_rows;
    }
  }
  EXPECT_GE(job_rows, 2) << "the job's shell and its sleep: " << raw;
  EXPECT_GE(server_rows, 1) << "the configured server: " << raw;
  EXPECT_EQ(raw.find(token), std::string::npos) << "the token is redacted";
  EXPECT_EQ(Structured(table)["total"].get<std::size_t>(), rows.size());
  EXPECT_EQ(Structured(table)["omitted"], 0);

  // mcp_server_status after a call: running, its pid, one tool, one call; its stderr tail is
  // the last 500 bytes, the token in it redacted.
  const Json shout = a.Call("mcp__py__shout", Json::object());
  EXPECT_FALSE(shout["result"].value("isError", true)) << shout.dump();
  const Json status = a.Call("mcp_server_status", {{"name", "py"}}, &raw);
  ASSERT_EQ(Structured(status)["servers"].size(), 1u) << raw;
  const Json py = Structured(status)["servers"][0];
  EXPECT_EQ(py["state"], "running") << raw;
  EXPECT_GT(py.value("pid", 0), 0) << raw;
  EXPECT_EQ(py["tools"], 1) << raw;
  EXPECT_EQ(py["calls"], 1) << raw;
  EXPECT_EQ(py["failures"], 0) << raw;
  EXPECT_EQ(py["trust"], "trusted (user config)") << raw;
  EXPECT_GE(py.value("uptime_ms", -1), 0) << raw;
  const std::string tail = py.value("stderr_tail", "");
  EXPECT_LE(tail.size(), 500u) << raw;
  EXPECT_NE(tail.find("starting with [REDACTED:github_token]"), std::string::npos) << raw;
  EXPECT_EQ(raw.find("ghp_QQQQ"), std::string::npos) << raw;
  bool server_pid_listed = false;
  for (const Json& r : rows) server_pid_listed |= r["sandbox_pid"] == py["pid"];
  EXPECT_TRUE(server_pid_listed) << "the live table and the status name one sandbox";
  // A server's answer whose isError is not a boolean is passed on; it never ends cordon (it
  // threw on a worker thread before, and every session went with it).
  const Json odd = a.Call("mcp__py__shout", {{"odd", true}}, &raw);
  EXPECT_TRUE(odd.contains("result")) << raw;
  EXPECT_EQ(Structured(a.Call("mcp_server_status", {{"name", "py"}}))["servers"][0]["calls"], 2);
  EXPECT_EQ(ErrorField(a.Call("mcp_server_status", {{"name", "nope"}}), "code"), "not_found");
  EXPECT_EQ(ErrorField(a.Call("mcp_server_status", {{"name", ""}}), "code"), "invalid_input");

  // B sees the configured server, and nothing of A's job.
  const Json table_b = b.Call("supervisor_processes", Json::object(), &raw);
  EXPECT_EQ(raw.find("job-1"), std::string::npos) << raw;
  EXPECT_EQ(raw.find("sleep 120"), std::string::npos) << raw;
  EXPECT_NE(raw.find("server.py"), std::string::npos) << raw;

  // max_processes bounds the rows and says how many were left out; 0 and 501 are refused.
  const Json one = a.Call("supervisor_processes", {{"max_processes", 1}});
  EXPECT_EQ(Structured(one)["processes"].size(), 1u) << one.dump();
  EXPECT_EQ(Structured(one)["omitted"].get<std::size_t>(),
            Structured(one)["total"].get<std::size_t>() - 1);
  for (const Json& bad : {Json{{"max_processes", 0}}, Json{{"max_processes", 501}},
                          Json{{"max_processes", "5"}}, Json{{"pid", 1}}}) {
    EXPECT_EQ(ErrorField(a.Call("supervisor_processes", bad), "code"), "invalid_input") << bad;
  }
  server_->Stop();
  ExpectVerifies();
}

// Off by default: the shipped policy does not grant diagnostics:read.
TEST_F(SuperviseTest, DiagnosticsToolsNeedDiagnosticsRead) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  HttpMcpSession s(StartHttp());
  ASSERT_TRUE(s.Open());
  for (const char* tool :
       {"supervisor_processes", "mcp_server_status", "host_resources", "resource_history"}) {
    const Json r = s.Call(tool, Json::object());
    EXPECT_EQ(ErrorField(r, "code"), "denied_by_policy") << r.dump();
  }
  const Json list = s.Request("tools/list");
  EXPECT_EQ(list.dump().find("supervisor_processes"), std::string::npos) << "listed ungranted";
  EXPECT_EQ(list.dump().find("mcp_server_status"), std::string::npos) << "listed ungranted";
  EXPECT_NE(list.dump().find("session_tag"), std::string::npos) << "session:operate is granted";
  server_->Stop();
  ExpectVerifies();
}

// Bytes (issue 23): the shim reads its own /proc/self/io after it reaps the command, which the
// kernel makes include every process of the tree reaped below it (here `head` and `cat`, children
// of sh). The process record carries them as `io`: head's 1 MB to f and cat's 1 MB to /dev/null
// written, and 2 MB read (from /dev/zero and f).
TEST_F(SuperviseTest, ProcessRecordCountsTheBytesOfTheCommandsReapedTree) {
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so exec cannot run");
  auto r = cordon::testing::Run(
      {cordon::testing::CordonBin(), "exec", "--workspace", dir_ / "ws", "--audit-log", log(), "--",
       "sh", "-c", "head -c 1048576 /dev/zero > f && cat f > /dev/null"},
      env_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  Json process;
  for (const Json& rec : Records(log()))
    if (rec["type"] == "process") process = rec;
  ASSERT_TRUE(process.contains("io")) << process.dump();
  const Json io = process["io"];
  for (const char* k : {"read_bytes", "write_bytes", "rchar", "wchar"})
    EXPECT_TRUE(io[k].is_number_unsigned()) << k << " " << io.dump();
  EXPECT_GE(io.value("wchar", 0ull), 2ull * 1048576) << io.dump();
  EXPECT_LT(io.value("wchar", 0ull), 2ull * 1048576 + 65536) << "only the command's bytes";
  EXPECT_GE(io.value("rchar", 0ull), 2ull * 1048576) << io.dump();
  ExpectVerifies();
}

// session_usage: a 1 MB write by a run_shell command is in that call's bytes and in the total
// (wchar, what write(2) moved: exactly the file's bytes plus the little sh wrote); another MCP
// session sees none of it; a call that started no process has null figures.
TEST_F(SuperviseTest, SessionUsageCountsEachMcpSessionsCallsAndBytes) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so run_shell cannot run");
  HttpMcpSession a(StartHttp(GrantDiagnostics())), b(a.url());
  ASSERT_TRUE(a.Open());
  ASSERT_TRUE(b.Open());
  const Json wrote =
      a.Call("run_shell", {{"program", "sh"}, {"args", {"-c", "head -c 1048576 /dev/zero > f"}}});
  ASSERT_FALSE(wrote["result"].value("isError", true)) << wrote.dump();
  const Json failed = a.Call("run_shell", {{"program", "sh"}, {"args", {"-c", "exit 3"}}});
  const Json missing = a.Call("read_file_range", {{"path", "no-such-file"}});
  EXPECT_TRUE(missing["result"].value("isError", false)) << missing.dump();
  b.Call("process_list", Json::object());

  std::string raw;
  const Json usage = a.Call("session_usage", Json::object(), &raw);
  const Json u = Structured(usage);
  ASSERT_FALSE(usage["result"].value("isError", true)) << raw;
  EXPECT_EQ(Json::parse(usage["result"]["content"][0]["text"].get<std::string>()), u);
  EXPECT_EQ(u["calls"], 3) << raw;
  EXPECT_EQ(u["by_tool"]["run_shell"]["calls"], 2) << raw;
  EXPECT_EQ(u["by_tool"]["read_file_range"]["error"], 1) << raw;
  EXPECT_FALSE(u["by_tool"].contains("process_list")) << "B's call: " << raw;
  ASSERT_EQ(u["per_call"].size(), 3u) << raw;
  const Json first = u["per_call"][0];
  EXPECT_EQ(first["tool"], "run_shell");
  EXPECT_EQ(first["processes"], 1);
  EXPECT_TRUE(first["cpu_ms"].is_number()) << first.dump();
  EXPECT_GT(first["max_rss_kb"].get<std::int64_t>(), 0) << first.dump();
  EXPECT_GE(first["io"]["wchar"].get<std::uint64_t>(), 1048576u) << first.dump();
  EXPECT_LT(first["io"]["wchar"].get<std::uint64_t>(), 1048576u + 65536) << first.dump();
  EXPECT_GE(first["io"]["rchar"].get<std::uint64_t>(), 1048576u) << "from /dev/zero";
  const Json read = u["per_call"][2];
  EXPECT_EQ(read["tool"], "read_file_range");
  EXPECT_EQ(read["code"], "not_found") << read.dump();
  EXPECT_EQ(read["cpu_ms"], nullptr) << "no process: unknown is null";
  EXPECT_EQ(read["io"]["wchar"], nullptr);
  EXPECT_GE(u["total"]["io"]["wchar"].get<std::uint64_t>(), 1048576u) << raw;
  EXPECT_TRUE(u["total"]["elapsed_ms"].is_number());
  (void)failed;

  // B: its one call, and none of A's figures.
  const Json ub = Structured(b.Call("session_usage", Json::object(), &raw));
  EXPECT_EQ(ub["calls"], 1) << raw;
  EXPECT_EQ(ub["per_call"].size(), 1u) << raw;
  EXPECT_EQ(ub["by_tool"]["process_list"]["ok"], 1) << raw;
  EXPECT_EQ(ub["total"]["io"]["wchar"], nullptr) << raw;
  EXPECT_EQ(raw.find("run_shell"), std::string::npos) << raw;
  // Bad input.
  EXPECT_EQ(ErrorField(a.Call("session_usage", {{"call", 1}}), "code"), "invalid_input");
  server_->Stop();
  ExpectVerifies();
}

// session_traces: the slowest calls first, each failure with its code and a redacted message cut
// to 500 bytes, the warnings (a result cut to the cap, a secret redacted); nothing of another MCP
// session's calls.
TEST_F(SuperviseTest, SessionTracesGivesSlowestCallsFailuresAndWarningsOfItsOwnSession) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so run_shell cannot run");
  HttpMcpSession a(StartHttp(GrantDiagnostics())), b(a.url());
  ASSERT_TRUE(a.Open());
  ASSERT_TRUE(b.Open());
  const std::string token = "ghp_" + std::string(36, 'Q');
  a.Call("run_shell", {{"program", "sleep"}, {"args", {"0.7"}}});               // call: slowest
  a.Call("run_shell", {{"program", "sh"}, {"args", {"-c", "echo " + token}}});  // redacted
  a.Call("run_shell",
         {{"program", "sh"}, {"args", {"-c", "head -c 200000 /dev/zero | tr '\\0' a"}}});
  const std::string long_name = std::string(900, 'n') + token;
  const Json missing = a.Call("read_file_range", {{"path", long_name}});
  EXPECT_TRUE(missing["result"].value("isError", false)) << missing.dump();
  b.Call("run_shell", {{"program", "sh"}, {"args", {"-c", "sleep 1.2; echo b-secret-work"}}});
  b.Call("read_file_range", {{"path", "b-missing-file"}});

  std::string raw;
  const Json traces = a.Call("session_traces", Json::object(), &raw);
  const Json t = Structured(traces);
  ASSERT_FALSE(traces["result"].value("isError", true)) << raw;
  EXPECT_EQ(Json::parse(traces["result"]["content"][0]["text"].get<std::string>()), t);
  ASSERT_EQ(t["slowest"].size(), 4u) << raw;
  EXPECT_EQ(t["slowest"][0]["tool"], "run_shell") << raw;
  EXPECT_GE(t["slowest"][0]["elapsed_ms"].get<double>(), 700.0) << raw;
  for (std::size_t i = 1; i < t["slowest"].size(); ++i)
    EXPECT_GE(t["slowest"][i - 1]["elapsed_ms"].get<double>(),
              t["slowest"][i]["elapsed_ms"].get<double>());
  ASSERT_EQ(t["failures"].size(), 1u) << raw;
  EXPECT_EQ(t["failures"][0]["tool"], "read_file_range");
  EXPECT_FALSE(t["failures"][0]["code"].get<std::string>().empty()) << raw;
  EXPECT_LE(t["failures"][0]["message"].get<std::string>().size(), 500u) << raw;
  EXPECT_EQ(t["failures_omitted"], 0);
  std::set<std::string> warnings;  // "call tool: warning"
  for (const Json& w : t["warnings"])
    warnings.insert(w["tool"].get<std::string>() + ": " + w["warning"].get<std::string>());
  // The echoed token (redacted in stdout, and again where the result repeats it) and the path
  // holding it in the failure's message.
  EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.rfind("run_shell: ", 0) == 0 &&
           w.find("redacted from the result") != std::string::npos;
  })) << raw;
  EXPECT_TRUE(warnings.count("run_shell: the result was cut to the output cap")) << raw;
  EXPECT_EQ(raw.find("ghp_QQQQ"), std::string::npos) << raw;
  EXPECT_EQ(raw.find("b-missing-file"), std::string::npos) << "B's failure: " << raw;

  const Json tb = Structured(b.Call("session_traces", Json::object(), &raw));
  EXPECT_EQ(tb["slowest"].size(), 2u) << raw;
  ASSERT_EQ(tb["failures"].size(), 1u) << raw;
  EXPECT_EQ(raw.find("sleep\",\"0.7"), std::string::npos) << raw;
  EXPECT_EQ(ErrorField(a.Call("session_traces", {{"top", 3}}), "code"), "invalid_input");
  server_->Stop();
  ExpectVerifies();
}

// session_diff: the files this MCP session changed, by the code of `cordon audit diff` on its own
// log: a file-tool edit (replace_range) and a `sed -i` by run_shell of committed files, each
// with its diff; from_call/to_call narrow it; another session's change never appears.
TEST_F(SuperviseTest, SessionDiffShowsThisSessionsFileToolAndCommandChanges) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("git").empty()) GTEST_SKIP() << "SKIPPED: git is not installed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so run_shell cannot run");
  const std::string ws = dir_ / "ws";
  WriteFile(ws + "/notes.txt", "one\nkeep\n");
  WriteFile(ws + "/conf.txt", "alpha\nbeta\n");
  for (const std::vector<std::string>& g :
       {std::vector<std::string>{"init", "-q"},
        {"add", "notes.txt", "conf.txt"},
        {"-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-qm", "base"}}) {
    std::vector<std::string> argv = {FindOnPath("git"), "-C", ws};
    argv.insert(argv.end(), g.begin(), g.end());
    ASSERT_EQ(cordon::testing::Run(argv, env_).exit_code, 0);
  }
  HttpMcpSession a(StartHttp()), b(a.url());
  ASSERT_TRUE(a.Open());
  ASSERT_TRUE(b.Open());
  const Json edit = a.Call("replace_range",
                           {{"path", "notes.txt"}, {"old_string", "one"}, {"new_string", "two"}});
  ASSERT_FALSE(edit["result"].value("isError", true)) << edit.dump();
  const Json sed =
      a.Call("run_shell", {{"program", "sed"}, {"args", {"-i", "s/beta/gamma/", "conf.txt"}}});
  ASSERT_FALSE(sed["result"].value("isError", true)) << sed.dump();
  const Json made = b.Call("create_file", {{"path", "b-only.txt"}, {"content", "b\n"}});
  ASSERT_FALSE(made["result"].value("isError", true)) << made.dump();

  std::string raw;
  const Json diff = a.Call("session_diff", Json::object(), &raw);
  const Json d = Structured(diff);
  ASSERT_FALSE(diff["result"].value("isError", true)) << raw;
  EXPECT_EQ(Json::parse(diff["result"]["content"][0]["text"].get<std::string>()), d);
  ASSERT_EQ(d["files"].size(), 2u) << raw;
  EXPECT_EQ(raw.find("b-only.txt"), std::string::npos) << "B's file: " << raw;
  const Json notes = d["files"][0], conf = d["files"][1];
  EXPECT_EQ(notes["path"], "notes.txt");
  EXPECT_EQ(notes["tool"], "replace_range");
  EXPECT_NE(notes.value("diff", "").find("-one\n+two"), std::string::npos) << notes.dump();
  EXPECT_EQ(conf["path"], "conf.txt");
  EXPECT_EQ(conf["tool"], "run_shell");
  EXPECT_NE(conf.value("diff", "").find("-beta\n+gamma"), std::string::npos) << conf.dump();
  EXPECT_EQ(d["counts"]["files"], 2);
  EXPECT_EQ(d["counts"]["diffs"], 2);

  // One call's changes.
  const std::uint64_t sed_call = conf["call"].get<std::uint64_t>();
  const Json only =
      Structured(a.Call("session_diff", {{"from_call", sed_call}, {"to_call", sed_call}}, &raw));
  ASSERT_EQ(only["files"].size(), 1u) << raw;
  EXPECT_EQ(only["files"][0]["path"], "conf.txt");
  const Json before = Structured(a.Call("session_diff", {{"to_call", sed_call - 1}}, &raw));
  ASSERT_EQ(before["files"].size(), 1u) << raw;
  EXPECT_EQ(before["files"][0]["path"], "notes.txt");
  // B sees its own file only.
  const Json db = Structured(b.Call("session_diff", Json::object(), &raw));
  ASSERT_EQ(db["files"].size(), 1u) << raw;
  EXPECT_EQ(db["files"][0]["path"], "b-only.txt");
  EXPECT_EQ(raw.find("gamma"), std::string::npos) << raw;
  // Bad input.
  for (const Json& bad : {Json{{"from_call", 5}, {"to_call", 2}}, Json{{"from_call", 0}},
                          Json{{"to_call", "3"}}, Json{{"session", "x"}}}) {
    EXPECT_EQ(ErrorField(a.Call("session_diff", bad), "code"), "invalid_input") << bad;
  }
  server_->Stop();
  ExpectVerifies();
}

// session_tag: each MCP session's own tags, starting from serve's --tag; bad tags refused; each
// change a session_tag record; session_started.tags says --tag.
TEST_F(SuperviseTest, SessionTagsAreEachMcpSessionsOwnAndRecorded) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  HttpMcpSession a(StartHttp({"--tag", "  ci-run-7 "})), b(a.url());
  ASSERT_TRUE(a.Open());
  ASSERT_TRUE(b.Open());
  std::string raw;
  const Json added = a.Call("session_tag", {{"tag", "  refactor-auth\t"}, {"tagged", true}}, &raw);
  EXPECT_EQ(Structured(added)["tags"], Json({"ci-run-7", "refactor-auth"})) << raw;
  EXPECT_EQ(Structured(added)["tag"], "refactor-auth");
  EXPECT_EQ(Json::parse(added["result"]["content"][0]["text"].get<std::string>()),
            Structured(added));
  // Adding it twice changes nothing; B has only serve's tag; removing works for A alone.
  EXPECT_EQ(Structured(a.Call("session_tag", {{"tag", "refactor-auth"}, {"tagged", true}}))["tags"],
            Json({"ci-run-7", "refactor-auth"}));
  const Json other = b.Call("session_tag", {{"tag", "b-only"}, {"tagged", true}});
  EXPECT_EQ(Structured(other)["tags"], Json({"ci-run-7", "b-only"})) << other.dump();
  const Json removed = a.Call("session_tag", {{"tag", "ci-run-7"}, {"tagged", false}});
  EXPECT_EQ(Structured(removed)["tags"], Json({"refactor-auth"})) << removed.dump();
  for (const Json& bad :
       {Json{{"tag", "a\nb"}, {"tagged", true}},
        Json{{"tag", std::string(65, 'x')}, {"tagged", true}},
        Json{{"tag", "   "}, {"tagged", true}}, Json{{"tag", ""}, {"tagged", false}},
        Json{{"tag", "x\ry"}, {"tagged", true}}, Json{{"tag", "x"}},
        Json{{"tag", "x"}, {"tagged", "yes"}}}) {
    EXPECT_EQ(ErrorField(a.Call("session_tag", bad), "code"), "invalid_input") << bad;
  }
  // 64 characters (code points, not bytes) are allowed.
  const std::string wide = std::string(60, 'x') + "\u00e9\u00e9\u00e9\u00e9";
  EXPECT_EQ(ErrorField(a.Call("session_tag", {{"tag", wide}, {"tagged", true}}), "code"), "");
  // At most 32 tags a session (each record carries the whole set): B has ci-run-7 and b-only.
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(
        ErrorField(b.Call("session_tag", {{"tag", "t" + std::to_string(i)}, {"tagged", true}}),
                   "code"),
        "");
  }
  EXPECT_EQ(ErrorField(b.Call("session_tag", {{"tag", "one-more"}, {"tagged", true}}), "code"),
            "invalid_input");
  server_->Stop();
  std::vector<Json> tag_records;
  Json started;
  for (const Json& r : Records(log())) {
    if (r["type"] == "session_tag") tag_records.push_back(r);
    if (r["type"] == "session_started") started = r;
  }
  EXPECT_EQ(started.value("tags", Json()), Json({"ci-run-7"})) << started.dump();
  ASSERT_EQ(tag_records.size(), 35u);
  EXPECT_EQ(tag_records[0]["tag"], "refactor-auth");
  EXPECT_EQ(tag_records[0]["tagged"], true);
  EXPECT_EQ(tag_records[0]["mcp_session"], "mcp-1");
  EXPECT_EQ(tag_records[2]["mcp_session"], "mcp-2");
  EXPECT_EQ(tag_records[3]["tags"], Json({"refactor-auth"}));
  ExpectVerifies();
  // audit summary names each MCP session's client, not only the last one's.
  auto summary = cordon::testing::Run(
      {cordon::testing::CordonBin(), "audit", "summary", "--json", log()}, env_);
  const Json sum = Json::parse(summary.out, nullptr, false);
  ASSERT_TRUE(sum.is_object()) << summary.out << summary.err;
  const Json clients = sum["logs"][0]["sessions"][0]["mcp_clients"];
  ASSERT_EQ(clients.size(), 2u) << sum.dump();
  EXPECT_EQ(clients[0]["mcp_session"], "mcp-1");
  EXPECT_EQ(clients[1]["mcp_session"], "mcp-2");
  EXPECT_EQ(clients[1]["clientInfo"]["name"], "supervise_test");
  auto text = cordon::testing::Run({cordon::testing::CordonBin(), "audit", "summary", log()}, env_);
  EXPECT_NE(text.out.find("mcp clients 2: mcp-1=\"supervise_test\" \"1\" mcp-2="),
            std::string::npos)
      << text.out;

  // --tag on exec and call; a bad one is refused before anything runs.
  auto call = cordon::testing::Run(
      {cordon::testing::CordonBin(), "call", "--workspace", dir_ / "ws", "--audit-log",
       dir_ / "call.jsonl", "--tag", "nightly", "process_list", "--json", "{}"},
      env_);
  EXPECT_EQ(call.exit_code, 0) << call.out << call.err;
  EXPECT_NE(ReadFile(dir_ / "call.jsonl").find("\"tags\":[\"nightly\"]"), std::string::npos);
  auto bad = cordon::testing::Run(
      {cordon::testing::CordonBin(), "exec", "--workspace", dir_ / "ws", "--audit-log",
       dir_ / "bad.jsonl", "--tag", std::string(65, 'y'), "--", "true"},
      env_);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("at most 64 characters"), std::string::npos) << bad.err;
  EXPECT_FALSE(cordon::testing::Exists(dir_ / "bad.jsonl"));
}

// --- host_resources and resource_history (issue 23): the host and the resource monitor.

std::int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// /proc text parsed without a kernel.
TEST(HostStats, ParsesProcStatLoadavgAndMeminfo) {
  const auto cpu = ParseHostCpuTimes(
      "cpu  100 5 50 800 20 1 2 3 7 0\ncpu0 50 2 25 400 10 0 1 1 3 0\n"
      "cpu1 50 3 25 400 10 1 1 2 4 0\nintr 1 2 3\nctxt 99\n");
  ASSERT_TRUE(cpu.has_value());
  EXPECT_EQ(cpu->cpus, 2);
  EXPECT_EQ(cpu->total, 100u + 5 + 50 + 800 + 20 + 1 + 2 + 3) << "guest is already in user";
  EXPECT_EQ(cpu->idle, 820u);
  EXPECT_FALSE(ParseHostCpuTimes("intr 1 2\n").has_value());
  EXPECT_FALSE(ParseHostCpuTimes("cpu  1 x 3 4\ncpu0 1 2 3 4\n").has_value());
  HostCpuTimes later = *cpu;
  later.total += 200;
  later.idle += 50;
  EXPECT_DOUBLE_EQ(*BusyPercent(*cpu, later), 75.0);
  EXPECT_FALSE(BusyPercent(*cpu, *cpu).has_value()) << "no time passed";

  const auto load = ParseLoadAverages("0.52 1.25 2.00 3/456 7890\n");
  ASSERT_TRUE(load.has_value());
  EXPECT_DOUBLE_EQ(load->one, 0.52);
  EXPECT_DOUBLE_EQ(load->fifteen, 2.0);
  EXPECT_FALSE(ParseLoadAverages("0.52 1.25\n").has_value());

  const auto mem =
      ParseHostMemory("MemTotal:       16000 kB\nMemFree: 1 kB\nMemAvailable:    9000 kB\n");
  ASSERT_TRUE(mem.has_value());
  EXPECT_EQ(mem->total_kb, 16000);
  EXPECT_EQ(mem->available_kb, 9000);
  EXPECT_FALSE(ParseHostMemory("MemTotal: 16000 kB\n").has_value());
}

// The CPU a process used lands in the bucket of the samples that saw it use it; a process that
// shows up after the first sample brings its whole CPU; one the caller may not see is left out.
TEST(ResourceMonitor, BucketsCpuBySampleTime) {
  auto sample = [](std::int64_t t, std::vector<MonitorProcess> procs, double cordon) {
    MonitorSample s;
    s.unix_ms = t;
    s.cordon_cpu_ms = cordon;
    s.processes = std::move(procs);
    return s;
  };
  const MonitorProcess a0{10, "job", "job-1", "A", "sh", 100, 500};
  MonitorProcess a1 = a0, a2 = a0;
  a1.cpu_ms = 400;
  a2.cpu_ms = 900;
  const MonitorProcess other{20, "job", "job-1", "B", "sh", 5000, 100};
  std::vector<MonitorSample> samples = {
      sample(500, {}, 10),            // the baseline, before the window
      sample(1500, {}, 11),           // bucket 0
      sample(2500, {a0, other}, 13),  // bucket 1: a is new, all its 100 ms count
      sample(3500, {a1, other}, 14),  // bucket 2: 300
      sample(3900, {a2}, 20)};        // bucket 2: 500 more
  samples[4].processes_omitted = 3;   // past the per-sample cap
  // The sandboxes' cgroups: the most each held at one sample of a bucket; B's are not A's.
  samples[3].cgroups = {{"job", "job-1", "A", "v1", 3000, 2}, {"job", "job-1", "B", "v1", 9, 9}};
  samples[4].cgroups = {{"job", "job-1", "A", "v1", 2000, 4}};
  const auto buckets =
      BucketSamples(samples, 5000, 1000, 4, 5,
                    [](const std::string&, const std::string& owner) { return owner == "A"; });
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(buckets[0].start_unix_ms, 1000);
  EXPECT_EQ(buckets[0].samples, 1);
  EXPECT_DOUBLE_EQ(buckets[0].cpu_ms, 0);
  EXPECT_DOUBLE_EQ(buckets[0].cordon_cpu_ms, 1);
  EXPECT_DOUBLE_EQ(buckets[1].cpu_ms, 100);
  ASSERT_EQ(buckets[1].top.size(), 1u) << "B's process is not A's";
  EXPECT_EQ(buckets[1].top[0].pid, 10);
  EXPECT_DOUBLE_EQ(buckets[2].cpu_ms, 800);
  EXPECT_EQ(buckets[2].samples, 2);
  EXPECT_DOUBLE_EQ(buckets[2].cordon_cpu_ms, 7);
  EXPECT_EQ(buckets[2].processes_omitted, 3);
  EXPECT_EQ(buckets[1].processes_omitted, 0);
  EXPECT_EQ(buckets[3].samples, 0);
  EXPECT_TRUE(buckets[3].top.empty());
  EXPECT_TRUE(buckets[1].cgroups.empty());
  ASSERT_EQ(buckets[2].cgroups.size(), 1u) << "B's job's cgroup is not A's";
  EXPECT_EQ(buckets[2].cgroups[0].name, "job-1");
  EXPECT_EQ(buckets[2].cgroups[0].mode, "v1");
  EXPECT_EQ(buckets[2].cgroups[0].memory_bytes, 3000);
  EXPECT_EQ(buckets[2].cgroups[0].pids, 4);
}

// host_resources agrees with /proc and statvfs read here.
TEST_F(SuperviseTest, HostResourcesAgreesWithProcAndStatvfs) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  HttpMcpSession s(StartHttp(GrantDiagnostics()));
  ASSERT_TRUE(s.Open());
  const Json r = s.Call("host_resources", Json::object());
  ASSERT_FALSE(r["result"].value("isError", true)) << r.dump();
  EXPECT_EQ(Json::parse(r["result"]["content"][0]["text"].get<std::string>()), Structured(r));
  const Json h = Structured(r);
  std::printf("host_resources: %s\n", h.dump().c_str());
  const auto cpu = ParseHostCpuTimes(ReadFile("/proc/stat"));
  ASSERT_TRUE(cpu.has_value());
  EXPECT_EQ(h["cpus"].get<int>(), cpu->cpus);
  ASSERT_TRUE(h["cpu_busy_percent"].is_number()) << h.dump();
  EXPECT_GE(h["cpu_busy_percent"].get<double>(), 0);
  EXPECT_LE(h["cpu_busy_percent"].get<double>(), 100);
  const auto load = ParseLoadAverages(ReadFile("/proc/loadavg"));
  ASSERT_TRUE(load.has_value());
  EXPECT_NEAR(h["load"]["fifteen"].get<double>(), load->fifteen, 1.0);
  const auto mem = ParseHostMemory(ReadFile("/proc/meminfo"));
  ASSERT_TRUE(mem.has_value());
  EXPECT_EQ(h["memory"]["total_kb"].get<std::int64_t>(), mem->total_kb);
  EXPECT_NEAR(h["memory"]["available_kb"].get<double>(), static_cast<double>(mem->available_kb),
              static_cast<double>(mem->total_kb) / 10);
  struct statvfs v {};
  ASSERT_EQ(::statvfs((dir_ / "ws").c_str(), &v), 0);
  const Json fs = h["workspace_filesystem"];
  EXPECT_EQ(fs["total_bytes"].get<std::uint64_t>(),
            static_cast<std::uint64_t>(v.f_blocks) * v.f_frsize);
  EXPECT_NEAR(fs["available_bytes"].get<double>(),
              static_cast<double>(v.f_bavail) * static_cast<double>(v.f_frsize),
              64.0 * 1024 * 1024);
  EXPECT_EQ(fs["total_inodes"].get<std::uint64_t>(), static_cast<std::uint64_t>(v.f_files));
  // A second call a little later reads the monitor the first one started.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const Json again = Structured(s.Call("host_resources", Json::object()));
  EXPECT_EQ(again.value("cpu_busy_source", ""), "monitor") << again.dump();
  EXPECT_NEAR(again["cpu_busy_window_ms"].get<double>(), 1000, 500);
  EXPECT_EQ(ErrorField(s.Call("host_resources", {{"x", 1}}), "code"), "invalid_input");
  server_->Stop();
  ExpectVerifies();
}

// resource_history puts a CPU burner in the buckets after its start and none before; another
// MCP session sees nothing of it; bad windows, bucket counts and process counts are refused.
TEST_F(SuperviseTest, ResourceHistoryPutsABurnerInTheRightBuckets) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so jobs cannot run");
  HttpMcpSession a(StartHttp(GrantDiagnostics())), b(a.url());
  ASSERT_TRUE(a.Open());
  ASSERT_TRUE(b.Open());
  for (const Json& bad :
       {Json{{"window_ms", 3600001}}, Json{{"window_ms", 0}},
        Json{{"window_ms", 200000}, {"bucket_ms", 1000}}, Json{{"max_processes", 0}},
        Json{{"max_processes", 51}}, Json{{"bucket_ms", "1s"}}}) {
    const Json r = a.Call("resource_history", bad);
    EXPECT_EQ(ErrorField(r, "code"), "invalid_input") << bad.dump() << " " << r.dump();
  }
  const Json first = a.Call("resource_history", Json::object());  // starts the monitor
  ASSERT_FALSE(first["result"].value("isError", true)) << first.dump();
  EXPECT_EQ(Structured(first)["buckets"].size(), 30u);
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  const std::int64_t job_start = NowUnixMs();
  const Json started =
      a.Call("run_shell",
             {{"program", "sh"}, {"args", {"-c", "while :; do :; done"}}, {"background", true}});
  ASSERT_EQ(Structured(started).value("id", ""), "job-1") << started.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(4500));
  const Json in = {{"window_ms", 20000}, {"bucket_ms", 1000}, {"max_processes", 3}};
  const Json r = a.Call("resource_history", in);
  ASSERT_FALSE(r["result"].value("isError", true)) << r.dump();
  EXPECT_EQ(Json::parse(r["result"]["content"][0]["text"].get<std::string>()), Structured(r));
  const Json buckets = Structured(r)["buckets"];
  ASSERT_EQ(buckets.size(), 20u);
  double before = 0, after = 0;
  int sampled = 0, with_cgroup = 0;
  const CgroupMode cgroups = ProbeCgroups().mode;  // what serve's launches get on this host
  for (const Json& bk : buckets) {
    // The burner's sandbox's cgroup, where it has one: its memory and its pids (the shim, the
    // shell), the most at one sample in the bucket. None for an ordinary user without one.
    ASSERT_TRUE(bk.contains("cgroups")) << bk.dump();
    for (const Json& c : bk["cgroups"]) {
      EXPECT_NE(cgroups, CgroupMode::kNone) << bk.dump();
      if (c["owner"] != Json{{"kind", "job"}, {"name", "job-1"}}) continue;
      ++with_cgroup;
      EXPECT_EQ(c["mode"], Name(kCgroupModeNames, cgroups)) << c.dump();
      EXPECT_GT(c["memory_bytes"].get<std::int64_t>(), 0) << c.dump();
      EXPECT_GE(c["pids"].get<int>(), 1) << c.dump();
      EXPECT_GE(bk["end_unix_ms"].get<std::int64_t>(), job_start) << bk.dump();
    }
    double job = 0;
    for (const Json& p : bk["top_processes"]) {
      if (p["owner"]["name"] == "job-1") job += p["cpu_ms"].get<double>();
    }
    if (bk["samples"].get<int>() > 0) {
      ++sampled;
      EXPECT_TRUE(bk["cordon_cpu_ms"].is_number()) << bk.dump();
      EXPECT_TRUE(bk["cordon_rss_kb"].is_number_integer()) << bk.dump();
    }
    if (bk["end_unix_ms"].get<std::int64_t>() <= job_start) before += job;
    if (bk["start_unix_ms"].get<std::int64_t>() >= job_start) after += job;
  }
  std::printf("burner: %.0f ms of CPU in buckets after its start, %.0f before; %d sampled\n", after,
              before, sampled);
  EXPECT_EQ(before, 0) << "the burner is in a bucket before it started: " << buckets.dump();
  EXPECT_GT(after, 500) << buckets.dump();
  EXPECT_GE(sampled, 6) << "one sample a second since the first call";
  if (cgroups != CgroupMode::kNone) {
    EXPECT_GE(with_cgroup, 3) << "the burner's cgroup in the buckets since it started: "
                              << buckets.dump();
  }
  // B's history has nothing of A's job.
  const Json other = b.Call("resource_history", in);
  ASSERT_FALSE(other["result"].value("isError", true)) << other.dump();
  EXPECT_EQ(other.dump().find("job-1"), std::string::npos) << other.dump();
  a.Call("process_cancel", {{"id", "job-1"}, {"force", true}});
  server_->Stop();
  ExpectVerifies();
}

// The monitor's own cost: cordon's CPU (all its threads, /proc/<pid>/stat) per second while it
// samples a job of 50 sleeping processes. The issue asks for under 1% of a core (10 ms/s).
TEST_F(SuperviseTest, MonitorCostsLittleWithFiftySleepingProcesses) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so jobs cannot run");
  const char* env_seconds = std::getenv("CORDON_MONITOR_COST_SECONDS");
  const int seconds = env_seconds != nullptr ? std::atoi(env_seconds) : 10;
  HttpMcpSession s(StartHttp(GrantDiagnostics()));
  ASSERT_TRUE(s.Open());
  const Json started =
      s.Call("run_shell",
             {{"program", "sh"},
              {"args", {"-c", "i=0; while [ $i -lt 50 ]; do sleep 600 & i=$((i+1)); done; wait"}},
              {"background", true}});
  ASSERT_EQ(Structured(started).value("id", ""), "job-1") << started.dump();
  int rows = 0;
  for (int i = 0; i < 100 && rows < 51; ++i) {
    rows = static_cast<int>(
        Structured(s.Call("supervisor_processes", {{"max_processes", 500}}))["processes"].size());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(rows, 51) << "the shell and its 50 sleeps";
  auto cpu_ms = [&] {
    const auto st = ParseProcStat(ReadFile("/proc/" + std::to_string(server_pid_) + "/stat"));
    return st ? static_cast<double>(st->utime + st->stime) * 1000.0 / ::sysconf(_SC_CLK_TCK) : -1;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the calls above settle
  const double c0 = cpu_ms();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double c1 = cpu_ms();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double per_s = (c1 - c0) / wall_s;
  std::printf(
      "monitor cost: cordon used %.0f ms of CPU in %.1f s with %d confined processes: "
      "%.2f ms/s (%.2f%% of a core)\n",
      c1 - c0, wall_s, rows, per_s, per_s / 10);
  // A figure, not a pass mark (speed is measured, never asserted: ASan and a loaded CI host
  // multiply it); the README gives the command and the figure of a plain build.
  RecordProperty("monitor_cpu_ms_per_s", std::to_string(per_s));
  // The history shows the same: cordon's own CPU in each bucket, every process seen.
  const Json h = Structured(s.Call("resource_history", {{"window_ms", 5000}, {"bucket_ms", 1000}}));
  ASSERT_EQ(h["buckets"].size(), 5u) << h.dump();
  EXPECT_GE(h["buckets"][3]["processes"].get<int>(), 51) << h.dump();
  s.Call("process_cancel", {{"id", "job-1"}, {"force", true}});
  server_->Stop();
  ExpectVerifies();
}

// --- local_servers (issue 23): the listeners of this session's jobs.

TEST(Listeners, ParsesProcNetTcpTablesAndSocketLinks) {
  const std::string v4 =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
      "0 12345 1 0000000000000000 100 0 0 10 0\n"
      "   1: 0100007F:0050 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        "
      "0 777 1 0000000000000000 20 4 30 10 -1\n"
      "   2: garbage\n";
  const auto l4 = ParseProcNetTcp(v4, false);
  ASSERT_EQ(l4.size(), 1u) << "only the LISTEN row";
  EXPECT_EQ(l4[0].address, "127.0.0.1");
  EXPECT_EQ(l4[0].port, 8080);
  EXPECT_EQ(l4[0].inode, 12345u);
  const std::string v6 =
      "  sl  local_address                         remote_address                        st\n"
      "   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000     0        0 999 1 0000000000000000 100 0 0 10 "
      "0\n";
  const auto l6 = ParseProcNetTcp(v6, true);
  ASSERT_EQ(l6.size(), 1u);
  EXPECT_EQ(l6[0].address, "::1");
  EXPECT_EQ(l6[0].port, 8081);
  EXPECT_TRUE(ParseProcNetTcp(v4, true).empty()) << "a v4 address is no v6 one";
  EXPECT_EQ(SocketInode("socket:[4242]"), 4242u);
  EXPECT_FALSE(SocketInode("pipe:[4242]").has_value());
  EXPECT_FALSE(SocketInode("socket:[42x]").has_value());
}

// A job's python3 -m http.server on loopback is found with its port, pid and job; its sibling job
// has none; another MCP session sees nothing of it and gets not_found for its id.
TEST_F(SuperviseTest, LocalServersFindsAJobsHttpServer) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("python3").empty()) GTEST_SKIP() << "SKIPPED: python3 is needed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so jobs cannot run");
  HttpMcpSession a(StartHttp({"--network", "loopback"})), b(a.url());
  ASSERT_TRUE(a.Open());
  ASSERT_TRUE(b.Open());
  const int port = FreeLoopbackPort();
  const Json web = a.Call(
      "run_shell", {{"program", "python3"},
                    {"args", {"-m", "http.server", "--bind", "127.0.0.1", std::to_string(port)}},
                    {"background", true}});
  ASSERT_EQ(Structured(web).value("id", ""), "job-1") << web.dump();
  const Json sibling =
      a.Call("run_shell", {{"program", "sleep"}, {"args", {"120"}}, {"background", true}});
  ASSERT_EQ(Structured(sibling).value("id", ""), "job-2") << sibling.dump();
  Json found;
  for (int i = 0; i < 100; ++i) {
    const Json r = a.Call("local_servers", Json::object());
    ASSERT_FALSE(r["result"].value("isError", true)) << r.dump();
    EXPECT_EQ(Json::parse(r["result"]["content"][0]["text"].get<std::string>()), Structured(r));
    const Json servers = Structured(r)["servers"];
    for (const Json& srv : servers) {
      if (srv["port"] == port) found = srv;
    }
    if (!found.is_null()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(found.is_null()) << "the http.server on port " << port << " was not found: "
                                << a.Call("process_output", {{"id", "job-1"}}).dump()
                                << a.Call("local_servers", Json::object()).dump()
                                << a.Call("process_list", Json::object()).dump();
  std::printf("local_servers: %s\n", found.dump().c_str());
  EXPECT_EQ(found["job"], "job-1");
  EXPECT_EQ(found["address"], "127.0.0.1");
  EXPECT_EQ(found["comm"], "python3");
  const pid_t pid = found["pid"].get<int>();
  EXPECT_NE(pid, server_pid_);
  EXPECT_NE(ReadFile("/proc/" + std::to_string(pid) + "/cmdline").find("http.server"),
            std::string::npos)
      << "the pid is the host pid of the server";
  const Json only_web = Structured(a.Call("local_servers", {{"job_id", "job-1"}}));
  EXPECT_EQ(only_web["servers"].size(), 1u) << only_web.dump();
  const Json only_sibling = Structured(a.Call("local_servers", {{"job_id", "job-2"}}));
  EXPECT_TRUE(only_sibling["servers"].empty()) << only_sibling.dump();
  EXPECT_EQ(ErrorField(a.Call("local_servers", {{"job_id", "job-9"}}), "code"), "not_found");
  // B: nothing of A's jobs.
  const Json theirs = b.Call("local_servers", Json::object());
  EXPECT_TRUE(Structured(theirs)["servers"].empty()) << theirs.dump();
  const Json probe = b.Call("local_servers", {{"job_id", "job-1"}});
  EXPECT_EQ(ErrorField(probe, "code"), "not_found") << probe.dump();
  std::string unknown = ErrorField(b.Call("local_servers", {{"job_id", "job-9"}}), "message");
  unknown.replace(unknown.find("job-9"), 5, "job-1");
  EXPECT_EQ(ErrorField(probe, "message"), unknown) << "nothing says A's job-1 exists";
  a.Call("process_cancel", {{"id", "job-1"}, {"force", true}});
  a.Call("process_cancel", {{"id", "job-2"}, {"force", true}});
  server_->Stop();
  ExpectVerifies();
}

// Issue 23's done-when for listeners: a job's `python3 -m http.server` (in a process group of its
// own) is found by local_servers, probed through `urls` inside the job's own network namespace
// (the host's loopback does not reach it), and stopped by stop_local_server; a sibling job's pid,
// a listener in a job's top process group, another MCP session and bad URLs are refused with
// their codes; each probe is a network record and the stop a local_server_stopped record.
TEST_F(SuperviseTest, LocalServersProbesAndStopLocalServerStopsOnlyAJobsOwnListener) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("python3").empty()) GTEST_SKIP() << "SKIPPED: python3 is needed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so jobs cannot run");
  WriteFile(dir_ / "ws/hello.txt", "hello from inside the job\n");
  HttpMcpSession a(StartHttp({"--network", "loopback"})), b(a.url());
  ASSERT_TRUE(a.Open());
  ASSERT_TRUE(b.Open());
  const int port = FreeLoopbackPort();
  int top_port = FreeLoopbackPort();
  while (top_port == port) top_port = FreeLoopbackPort();
  const std::string p = std::to_string(port);
  // job-1: the server in a session (and group) of its own; the shell waits for it.
  const Json web = a.Call(
      "run_shell",
      {{"program", "sh"},
       {"args", {"-c", "setsid -w python3 -m http.server --bind 127.0.0.1 " + p + " & wait"}},
       {"background", true}});
  ASSERT_EQ(Structured(web).value("id", ""), "job-1") << web.dump();
  const Json sibling =
      a.Call("run_shell", {{"program", "sleep"}, {"args", {"120"}}, {"background", true}});
  ASSERT_EQ(Structured(sibling).value("id", ""), "job-2") << sibling.dump();
  // job-3: the server is the job's command itself, in its top process group.
  const Json top =
      a.Call("run_shell",
             {{"program", "python3"},
              {"args", {"-m", "http.server", "--bind", "127.0.0.1", std::to_string(top_port)}},
              {"background", true}});
  ASSERT_EQ(Structured(top).value("id", ""), "job-3") << top.dump();
  Json found, found_top;
  for (int i = 0; i < 150 && (found.is_null() || found_top.is_null()); ++i) {
    // Copied out first: a range-for over a member of a temporary reads freed memory.
    const Json servers = Structured(a.Call("local_servers", Json::object()))["servers"];
    for (const Json& srv : servers) {
      if (srv["port"] == port) found = srv;
      if (srv["port"] == top_port) found_top = srv;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(found.is_null()) << a.Call("process_output", {{"id", "job-1"}}).dump()
                                << a.Call("local_servers", Json::object()).dump()
                                << a.Call("process_list", Json::object()).dump();
  ASSERT_FALSE(found_top.is_null()) << a.Call("process_output", {{"id", "job-3"}}).dump();
  const int pid = found["pid"].get<int>();

  // The job has a network namespace of its own: the host's loopback does not reach the server.
  {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_NE(::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << "the job's server is reachable from the host: the probe would prove nothing";
    ::close(s);
  }
  // Probed inside it: the owner is the listener, the body the workspace file.
  const int nobody = FreeLoopbackPort();
  const Json probed = a.Call(
      "local_servers", {{"urls",
                         {"http://127.0.0.1:" + p + "/hello.txt", "http://localhost:" + p + "/",
                          "http://127.0.0.1:" + std::to_string(nobody) + "/"}}});
  ASSERT_FALSE(probed["result"].value("isError", true)) << probed.dump();
  EXPECT_EQ(Json::parse(probed["result"]["content"][0]["text"].get<std::string>()),
            Structured(probed));
  const Json probes = Structured(probed)["probes"];
  ASSERT_EQ(probes.size(), 3u) << probed.dump();
  std::printf("probe: %s\n", probes[0].dump().c_str());
  EXPECT_TRUE(probes[0]["probed"].get<bool>()) << probes[0].dump();
  EXPECT_EQ(probes[0]["http_status"], 200) << probes[0].dump();
  EXPECT_EQ(probes[0]["body"], "hello from inside the job\n") << probes[0].dump();
  EXPECT_EQ(probes[0]["job"], "job-1");
  EXPECT_EQ(probes[0]["owner"]["pid"], pid) << probes[0].dump();
  EXPECT_EQ(probes[1]["http_status"], 200) << probes[1].dump();
  EXPECT_NE(probes[1]["body"].get<std::string>().find("hello.txt"), std::string::npos)
      << "the directory listing names the file: " << probes[1].dump();
  EXPECT_TRUE(probes[2]["owner"].is_null()) << probes[2].dump();
  EXPECT_FALSE(probes[2]["probed"].get<bool>()) << probes[2].dump();
  // A job named: probed in its namespace even with no listener there (nothing answers).
  const Json refused = Structured(
      a.Call("local_servers", {{"job_id", "job-2"}, {"urls", {"http://127.0.0.1:" + p + "/"}}}));
  ASSERT_EQ(refused["probes"].size(), 1u) << refused.dump();
  EXPECT_TRUE(refused["probes"][0]["probed"].get<bool>()) << refused.dump();
  EXPECT_TRUE(refused["probes"][0]["owner"].is_null()) << refused.dump();
  EXPECT_TRUE(refused["probes"][0]["http_status"].is_null()) << refused.dump();
  EXPECT_NE(refused["probes"][0]["error"].get<std::string>().find("refused"), std::string::npos)
      << refused.dump();
  // Bad URLs: invalid_input, nothing probed.
  for (const std::string& bad : std::vector<std::string>{
           "https://127.0.0.1:" + p + "/", "http://example.com/", "http://10.0.0.1:" + p + "/",
           "http://user@127.0.0.1:" + p + "/", "http://127.0.0.1:0/",
           "http://127.0.0.1:" + p + "/a b", "ftp://127.0.0.1/"}) {
    EXPECT_EQ(ErrorField(a.Call("local_servers", {{"urls", {bad}}}), "code"), "invalid_input")
        << bad;
  }
  EXPECT_EQ(ErrorField(a.Call("local_servers",
                              {{"urls", std::vector<std::string>(33, "http://127.0.0.1/")}}),
                       "code"),
            "invalid_input");
  // B sees no job of A's, probes nothing and stops nothing.
  EXPECT_EQ(ErrorField(b.Call("local_servers",
                              {{"job_id", "job-1"}, {"urls", {"http://127.0.0.1:" + p + "/"}}}),
                       "code"),
            "not_found");
  const Json b_stop =
      b.Call("stop_local_server", {{"job_id", "job-1"}, {"pid", pid}, {"port", port}});
  EXPECT_EQ(ErrorField(b_stop, "code"), "not_found") << b_stop.dump();

  // Refusals before any signal.
  const Json not_owned =
      a.Call("stop_local_server", {{"job_id", "job-2"}, {"pid", pid}, {"port", port}});
  EXPECT_EQ(ErrorField(not_owned, "code"), "not_owned") << not_owned.dump();
  const Json host_pid =
      a.Call("stop_local_server", {{"job_id", "job-1"}, {"pid", server_pid_}, {"port", port}});
  EXPECT_EQ(ErrorField(host_pid, "code"), "not_owned") << host_pid.dump();
  // A pid no process has is not_owned in the same words: no answer says which host pids live.
  const Json no_pid =
      a.Call("stop_local_server", {{"job_id", "job-1"}, {"pid", 4194000}, {"port", port}});
  EXPECT_EQ(ErrorField(no_pid, "code"), "not_owned") << no_pid.dump();
  std::string same = ErrorField(no_pid, "message");
  same.replace(same.find("4194000"), 7, std::to_string(server_pid_));
  EXPECT_EQ(ErrorField(host_pid, "message"), same);
  const Json wrong_port =
      a.Call("stop_local_server", {{"job_id", "job-1"}, {"pid", pid}, {"port", nobody}});
  EXPECT_EQ(ErrorField(wrong_port, "code"), "not_found") << wrong_port.dump();
  const Json shared = a.Call("stop_local_server",
                             {{"job_id", "job-3"}, {"pid", found_top["pid"]}, {"port", top_port}});
  EXPECT_EQ(ErrorField(shared, "code"), "shared_group") << shared.dump();
  EXPECT_EQ(
      ErrorField(a.Call("stop_local_server", {{"job_id", "job-1"}, {"pid", pid}, {"port", 70000}}),
                 "code"),
      "invalid_input");
  EXPECT_EQ(::kill(pid, 0), 0) << "a refusal signalled the server";

  // The stop: SIGTERM to its group, which ends it within the grace.
  const Json stop =
      a.Call("stop_local_server", {{"job_id", "job-1"}, {"pid", pid}, {"port", port}});
  ASSERT_FALSE(stop["result"].value("isError", true)) << stop.dump();
  EXPECT_EQ(Json::parse(stop["result"]["content"][0]["text"].get<std::string>()), Structured(stop));
  std::printf("stop_local_server: %s\n", Structured(stop).dump().c_str());
  EXPECT_TRUE(Structured(stop)["stopped"].get<bool>()) << stop.dump();
  EXPECT_EQ(Structured(stop)["pgid"], pid) << "setsid made it its group's leader";
  EXPECT_EQ(Structured(stop)["signals"], Json({"SIGTERM"})) << stop.dump();
  EXPECT_FALSE(Structured(stop)["group_by_number"].get<bool>()) << "this kernel has 6.9's flag";
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = true;
    const Json servers = Structured(a.Call("local_servers", Json::object()))["servers"];
    for (const Json& srv : servers)
      if (srv["port"] == port) gone = false;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone);
  // job-3's server and the sibling still run.
  EXPECT_EQ(::kill(found_top["pid"].get<int>(), 0), 0);
  EXPECT_EQ(Structured(a.Call("process_list", Json::object()))["jobs"][1].value("state", ""),
            "running");
  a.Call("process_cancel", {{"id", "job-2"}, {"force", true}});
  a.Call("process_cancel", {{"id", "job-3"}, {"force", true}});
  server_->Stop();
  ExpectVerifies();
  int probe_records = 0, stop_records = 0;
  for (const Json& rec : Records(log())) {
    if (rec["type"] == "network" && rec.value("protocol", "") == "probe") {
      ++probe_records;
      EXPECT_EQ(rec.value("decision", ""), "allowed") << rec.dump();
      EXPECT_EQ(rec.value("port", 0), port) << rec.dump();
      if (rec.value("identity", "") == "job job-1") {
        EXPECT_EQ(rec.value("http_status", 0), 200) << rec.dump();
        EXPECT_GT(rec.value("bytes_down", 0), 0) << rec.dump();
      } else {
        EXPECT_EQ(rec.value("identity", ""), "job job-2") << rec.dump();
        EXPECT_NE(rec.value("error", "").find("refused"), std::string::npos) << rec.dump();
      }
    }
    if (rec["type"] == "local_server_stopped") {
      ++stop_records;
      EXPECT_EQ(rec.value("job", ""), "job-1") << rec.dump();
      EXPECT_EQ(rec.value("pid", 0), pid) << rec.dump();
      EXPECT_EQ(rec.value("port", 0), port) << rec.dump();
      EXPECT_TRUE(rec.value("stopped", false)) << rec.dump();
      EXPECT_EQ(rec.value("mcp_session", ""), "mcp-1") << rec.dump();
    }
  }
  EXPECT_EQ(probe_records, 3) << "one per probe that ran (two of job-1's, one in job-2's)";
  EXPECT_EQ(stop_records, 1) << "refusals signal nothing and write no stop record";
}

// The processes on this host whose command line is exactly `argv` (NUL-joined).
int CountProcesses(const std::vector<std::string>& argv) {
  std::string want;
  for (const auto& a : argv) want += a + '\0';
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    std::ifstream f(e.path() / "cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (cmd == want) ++n;
  }
  return n;
}

// A run_shell background call still launching its sandbox when its MCP session is DELETEd:
// the DELETE's cancel scanned the job table before the job was in it, so the job ran on with no
// session to list or stop it (an orphan until serve ended). Now a session's end is remembered
// and the late job is cancelled and joined before its call returns. Tried at several offsets
// into the launch; no `sleep` of these calls may outlive its session.
TEST_F(SuperviseTest, AJobLaunchedAsItsSessionEndsIsNotLeftRunning) {
  if (FindOnPath("curl").empty()) GTEST_SKIP() << "SKIPPED: curl is not installed";
  if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed, so jobs cannot run");
  const std::string url = StartHttp();
  const std::vector<std::string> marker = {"sleep", "7777.25"};
  int cancelled = 0, started = 0;
  for (int delay_ms = 0; delay_ms <= 300; delay_ms += 25) {
    HttpMcpSession a(url);
    ASSERT_TRUE(a.Open());
    auto call = std::async(std::launch::async, [&] {
      return a.Call("run_shell",
                    {{"program", marker[0]}, {"args", {marker[1]}}, {"background", true}});
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    EXPECT_EQ(a.End(), "200");
    const Json r = call.get();
    const std::string code = ErrorField(r, "code");
    if (code == "cancelled") ++cancelled;
    if (Structured(r).contains("id")) ++started;
    int left = 0;
    for (int i = 0; i < 100 && (left = CountProcesses(marker)) > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(left, 0) << "a job outlived its session (DELETE " << delay_ms
                       << " ms after the call): " << r.dump();
  }
  std::printf("of 13 calls raced by their session's DELETE: %d cancelled, %d started first\n",
              cancelled, started);
  server_->Stop();
  ExpectVerifies();
}

}  // namespace
}  // namespace cordon
