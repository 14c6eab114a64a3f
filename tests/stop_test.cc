// Stopping (issue 11): SIGINT, SIGTERM and SIGHUP sent to the process group of `cordon exec`,
// `wrap`, `serve` and `call` (as a terminal or a CI runner sends them, after setsid) end the
// sandboxed tree, leave no process of the run behind, write the `process` and
// `session_finished` records (the chain verifies), and make cordon exit 128+N. And `wrap`
// finishes its records within the two seconds an MCP client waits between closing stdin and
// sending SIGTERM.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include "core/text.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;
using Clock = std::chrono::steady_clock;

// A process's parent and start time (field 22 of /proc/PID/stat): the start time tells a
// process of the run from a later one that got the same pid.
struct ProcInfo {
  pid_t ppid = 0;
  unsigned long long start = 0;
  char state = '?';
};

std::optional<ProcInfo> ReadProc(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(stat.substr(close + 2));
  ProcInfo info;
  in >> info.state >> info.ppid;
  std::string skip;
  for (int field = 5; field < 22; ++field) in >> skip;
  in >> info.start;
  return info;
}

// Every process below `root` now (pid -> start time), found by walking /proc's parent links.
std::map<pid_t, unsigned long long> Descendants(pid_t root) {
  std::map<pid_t, ProcInfo> all;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (auto info = ReadProc(pid)) all[pid] = *info;
  }
  std::map<pid_t, unsigned long long> out;
  std::set<pid_t> frontier = {root};
  while (!frontier.empty()) {
    std::set<pid_t> next;
    for (const auto& [pid, info] : all) {
      if (frontier.contains(info.ppid) && !out.contains(pid)) {
        out[pid] = info.start;
        next.insert(pid);
      }
    }
    frontier = std::move(next);
  }
  return out;
}

// The processes of `run` that still exist (as anything but a zombie about to be reaped), after
// at most 3 s: a process SIGKILLed with its pid namespace is gone once the kernel has torn it
// down, which under load (two cores, twenty runnable tasks) can take a moment after cordon exits.
std::vector<pid_t> Survivors(const std::map<pid_t, unsigned long long>& run) {
  std::vector<pid_t> left;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  do {
    left.clear();
    for (const auto& [pid, start] : run) {
      auto info = ReadProc(pid);
      if (info && info->start == start && info->state != 'Z') left.push_back(pid);
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < until);
  return left;
}

class StopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::UserNamespacesEnabled())
      GTEST_SKIP() << "SKIPPED: user namespaces are disabled; bwrap cannot run";
    std::filesystem::create_directories(dir_ / "ws");
    // The command's marker file must reach the host while it runs (AwaitMarker): the direct
    // mode's bind. Staged, it would land only at the commit after the process
    // (docs/adr/0006-staged-workspace.md); what is tested here is how cordon stops.
    std::filesystem::create_directories(dir_ / "config/cordon/policies.d");
    testing::WriteFile(dir_ / "config/cordon/policies.d/40-direct.toml",
                       "[sandbox]\nworkspace = \"direct\"\n");
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // Starts cordon in a session (and process group) of its own, as a terminal or CI runner
  // starts a job; its stdin is a pipe this test holds.
  void Start(std::vector<std::string> args) {
    args.insert(args.begin(), testing::CordonBin());
    int in[2];
    ASSERT_EQ(::pipe2(in, O_CLOEXEC), 0);
    stdin_w_ = in[1];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, (dir_ / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawn_file_actions_addopen(&fa, 2, (dir_ / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    std::vector<std::string> env = {"XDG_CONFIG_HOME=" + (dir_ / "config"),
                                    "XDG_STATE_HOME=" + (dir_ / "state"), "PATH=/usr/bin:/bin"};
    std::vector<char*> a, e;
    for (auto& s : args) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : env) e.push_back(s.data());
    e.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, a[0], &fa, &attr, a.data(), e.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(in[0]);
  }

  // Waits until the sandboxed command wrote its marker into the workspace.
  void AwaitMarker() {
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (!testing::Exists(dir_ / "ws/started") && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(testing::Exists(dir_ / "ws/started")) << ReadFile(dir_ / "err");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // its children started
  }

  // Waits for cordon to exit (at most `limit`); its exit code, or -1 (-signal) otherwise.
  int Wait(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto until = Clock::now() + limit;
    int status = 0;
    while (Clock::now() < until) {
      const pid_t got = ::waitpid(pid_, &status, WNOHANG);
      if (got == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1000;
  }

  std::vector<Json> Records() {
    std::vector<Json> out;
    std::istringstream lines(ReadFile(log()));
    for (std::string l; std::getline(lines, l);) out.push_back(Json::parse(l));
    return out;
  }
  std::optional<Json> Last(const std::string& type) {
    std::optional<Json> found;
    for (auto& r : Records()) {
      if (r["type"] == type) found = r;
    }
    return found;
  }
  void ExpectVerifies() {
    auto v = testing::Run({testing::CordonBin(), "audit", "verify", log()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  }
  std::string log() { return dir_ / "audit.jsonl"; }
  std::vector<std::string> Session() { return {"--workspace", dir_ / "ws", "--audit-log", log()}; }

  TempDir dir_;
  pid_t pid_ = -1;
  int stdin_w_ = -1;
};

// The command starts a child and a grandchild, so that the tree, not just one process, must end.
const std::vector<std::string> kTree = {"sh", "-c",
                                        "sleep 300 & (sleep 300 & wait) & echo x > started; wait"};

class ExecStop : public StopTest, public ::testing::WithParamInterface<int> {};

TEST_P(ExecStop, GroupSignalEndsTheTreeWritesTheRecordsAndExits128PlusN) {
  const int sig = GetParam();
  std::vector<std::string> args = {"exec"};
  for (auto& s : Session()) args.push_back(s);
  args.push_back("--");
  for (const auto& w : kTree) args.push_back(w);
  Start(args);
  AwaitMarker();
  const auto run = Descendants(pid_);
  ASSERT_GE(run.size(), 4u) << "bwrap, the shim and the command's tree should be running";
  ASSERT_EQ(::kill(-pid_, sig), 0);  // the whole group, as Ctrl-C or a CI runner does
  const int rc = Wait();
  EXPECT_EQ(rc, 128 + sig) << ReadFile(dir_ / "err");
  EXPECT_EQ(ReadFile(dir_ / "err").find("sandbox_unavailable"), std::string::npos)
      << ReadFile(dir_ / "err");
  EXPECT_EQ(Survivors(run), std::vector<pid_t>{}) << "processes of the run remain";
  auto proc = Last("process");
  ASSERT_TRUE(proc) << ReadFile(log());
  EXPECT_EQ((*proc)["status"], "cancelled") << proc->dump();
  EXPECT_EQ((*proc)["stop_signal"], sig) << proc->dump();
  EXPECT_FALSE(proc->contains("error")) << proc->dump();
  EXPECT_TRUE(Last("session_finished")) << ReadFile(log());
  ExpectVerifies();
}

INSTANTIATE_TEST_SUITE_P(Signals, ExecStop, ::testing::Values(SIGINT, SIGTERM, SIGHUP));

TEST_F(StopTest, SignalToCordonAloneEndsExecToo) {
  std::vector<std::string> args = {"exec"};
  for (auto& s : Session()) args.push_back(s);
  args.push_back("--");
  for (const auto& w : kTree) args.push_back(w);
  Start(args);
  AwaitMarker();
  const auto run = Descendants(pid_);
  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(), 128 + SIGTERM) << ReadFile(dir_ / "err");
  EXPECT_EQ(Survivors(run), std::vector<pid_t>{});
  EXPECT_TRUE(Last("session_finished"));
  ExpectVerifies();
}

TEST_F(StopTest, CallRunShellStopsOnGroupSigint) {
  Json input = {{"program", "sh"}, {"args", {kTree[1], kTree[2]}}, {"timeout_secs", 300}};
  std::vector<std::string> args = {"call", "run_shell", "--json", input.dump()};
  for (auto& s : Session()) args.push_back(s);
  Start(args);
  AwaitMarker();
  const auto run = Descendants(pid_);
  ASSERT_EQ(::kill(-pid_, SIGINT), 0);
  EXPECT_EQ(Wait(), 128 + SIGINT) << ReadFile(dir_ / "err");
  EXPECT_EQ(Survivors(run), std::vector<pid_t>{});
  auto proc = Last("process");
  ASSERT_TRUE(proc);
  EXPECT_EQ((*proc)["stop_signal"], SIGINT);
  EXPECT_TRUE(Last("tool_finished"));
  EXPECT_TRUE(Last("session_finished"));
  ExpectVerifies();
}

void WriteLine(int fd, const Json& msg) {
  const std::string line = msg.dump() + "\n";
  ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
}

TEST_F(StopTest, ServeStopsItsRunningCallOnGroupSigterm) {
  std::vector<std::string> args = {"serve"};
  for (auto& s : Session()) args.push_back(s);
  Start(args);
  WriteLine(stdin_w_, {{"jsonrpc", "2.0"},
                       {"id", 1},
                       {"method", "initialize"},
                       {"params",
                        {{"protocolVersion", "2025-06-18"},
                         {"capabilities", Json::object()},
                         {"clientInfo", {{"name", "stop_test"}, {"version", "1"}}}}}});
  WriteLine(
      stdin_w_,
      {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}, {"params", Json::object()}});
  WriteLine(stdin_w_,
            {{"jsonrpc", "2.0"},
             {"id", 2},
             {"method", "tools/call"},
             {"params",
              {{"name", "run_shell"},
               {"arguments",
                {{"program", "sh"}, {"args", {kTree[1], kTree[2]}}, {"timeout_secs", 300}}}}}});
  AwaitMarker();
  const auto run = Descendants(pid_);
  ASSERT_EQ(::kill(-pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(), 128 + SIGTERM) << ReadFile(dir_ / "err");
  EXPECT_EQ(Survivors(run), std::vector<pid_t>{});
  auto proc = Last("process");
  ASSERT_TRUE(proc) << ReadFile(log());
  EXPECT_EQ((*proc)["stop_signal"], SIGTERM);
  EXPECT_TRUE(Last("session_finished"));
  ExpectVerifies();
}

// A background job that ran and wrote its file, ended by the session's stop, is `cancelled`
// with `stop_signal`, never "the sandbox did not start" (issue 19). Its sandbox was forked by
// the MCP worker that took the call; bwrap --die-with-parent follows that thread, and the
// worker pool's threads end first when `serve` stops: the sandbox was killed under the job,
// before its thread had seen the signal. Several rounds, two jobs each, every signal.
class ServeJobStop : public StopTest, public ::testing::WithParamInterface<int> {};

TEST_P(ServeJobStop, BackgroundJobsAreCancelledWithTheSignalNeverNotStarted) {
  const int sig = GetParam();
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::filesystem::remove(log());
    for (const char* f : {"ws/started", "ws/a", "ws/b"}) std::filesystem::remove(dir_ / f);
    std::vector<std::string> args = {"serve"};
    for (auto& s : Session()) args.push_back(s);
    Start(args);
    WriteLine(stdin_w_, {{"jsonrpc", "2.0"},
                         {"id", 1},
                         {"method", "initialize"},
                         {"params",
                          {{"protocolVersion", "2025-06-18"},
                           {"capabilities", Json::object()},
                           {"clientInfo", {{"name", "stop_test"}, {"version", "1"}}}}}});
    WriteLine(
        stdin_w_,
        {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}, {"params", Json::object()}});
    for (const char* name : {"a", "b"}) {
      const std::string script = std::string("echo x > ") + name +
                                 "; while [ ! -e a ] || [ ! -e b ]; do sleep 0.05; done; "
                                 "echo x > started; exec sleep 300";
      WriteLine(
          stdin_w_,
          {{"jsonrpc", "2.0"},
           {"id", std::string("job-") + name},
           {"method", "tools/call"},
           {"params",
            {{"name", "run_shell"},
             {"arguments", {{"program", "sh"}, {"args", {"-c", script}}, {"background", true}}}}}});
    }
    AwaitMarker();
    ASSERT_EQ(::kill(-pid_, sig), 0);
    ASSERT_EQ(Wait(), 128 + sig) << ReadFile(dir_ / "err");
    int jobs = 0;
    for (const Json& r : Records()) {
      if (r["type"] != "process") continue;
      ++jobs;
      EXPECT_EQ(r["status"], "cancelled") << r.dump();
      EXPECT_EQ(r.value("stop_signal", Json()), sig) << r.dump();
      EXPECT_FALSE(r.contains("error")) << r.dump();
      EXPECT_EQ(r.dump().find("did not start"), std::string::npos) << r.dump();
    }
    EXPECT_EQ(jobs, 2) << ReadFile(log());
    ExpectVerifies();
    ::close(stdin_w_);
    stdin_w_ = -1;
    if (HasFailure()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Signals, ServeJobStop, ::testing::Values(SIGINT, SIGTERM, SIGHUP));

TEST_F(StopTest, ServeHttpExits128PlusNWithItsRecords) {
  const std::string port = std::to_string(20000 + ::getpid() % 20000);
  std::vector<std::string> args = {"serve", "--http", "127.0.0.1:" + port, "--no-auth"};
  for (auto& s : Session()) args.push_back(s);
  Start(args);
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (ReadFile(dir_ / "err").find("listening on") == std::string::npos && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (ReadFile(dir_ / "err").find("libmicrohttpd") != std::string::npos)
    GTEST_SKIP() << "SKIPPED: libmicrohttpd is missing, serve --http cannot run: "
                 << ReadFile(dir_ / "err");
  ASSERT_NE(ReadFile(dir_ / "err").find("listening on"), std::string::npos)
      << ReadFile(dir_ / "err");
  ASSERT_EQ(::kill(-pid_, SIGINT), 0);
  EXPECT_EQ(Wait(), 128 + SIGINT) << ReadFile(dir_ / "err");
  EXPECT_TRUE(Last("session_finished")) << ReadFile(log());
  ExpectVerifies();
}

// A server that ignores EOF and SIGTERM: the worst case for the client's two seconds.
const std::vector<std::string> kStubbornServer = {
    "sh", "-c", "trap '' TERM INT HUP; echo x > started; exec sleep 300"};

TEST_F(StopTest, WrapFinishesItsRecordsWithinTwoSecondsOfStdinClosing) {
  std::vector<std::string> args = {"wrap"};
  for (auto& s : Session()) args.push_back(s);
  args.push_back("--");
  for (const auto& w : kStubbornServer) args.push_back(w);
  Start(args);
  AwaitMarker();
  const auto run = Descendants(pid_);
  const auto closed = Clock::now();
  ::close(stdin_w_);  // the client closes stdin ...
  stdin_w_ = -1;
  const int rc = Wait(std::chrono::milliseconds(2000));  // ... and sends SIGTERM 2 s later
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - closed).count();
  ASSERT_NE(rc, -1000) << "cordon wrap still ran 2 s after stdin closed";
  std::printf("stdin closed -> cordon wrap exited with its records: %lld ms\n",
              static_cast<long long>(took));
  EXPECT_LT(took, 2000);
  EXPECT_EQ(Survivors(run), std::vector<pid_t>{});
  auto proc = Last("process");
  ASSERT_TRUE(proc) << ReadFile(log());
  EXPECT_EQ((*proc)["kind"], "mcp_server");
  EXPECT_TRUE(Last("session_finished"));
  ExpectVerifies();
}

TEST_F(StopTest, WrapEndsTheServerOnGroupSigterm) {
  std::vector<std::string> args = {"wrap"};
  for (auto& s : Session()) args.push_back(s);
  args.push_back("--");
  for (const auto& w : kStubbornServer) args.push_back(w);
  Start(args);
  AwaitMarker();
  const auto run = Descendants(pid_);
  const auto sent = Clock::now();
  ASSERT_EQ(::kill(-pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(std::chrono::milliseconds(2000)), 128 + SIGTERM) << ReadFile(dir_ / "err");
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - sent).count(),
            2000);
  EXPECT_EQ(Survivors(run), std::vector<pid_t>{});
  auto proc = Last("process");
  ASSERT_TRUE(proc) << ReadFile(log());
  EXPECT_EQ((*proc)["stop_signal"], SIGTERM);
  EXPECT_TRUE(Last("session_finished"));
  ExpectVerifies();
}

}  // namespace
}  // namespace cordon
