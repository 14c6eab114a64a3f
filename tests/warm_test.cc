// The warm sandbox's promises (docs/adr/0008-warm-sandbox.md, SECURITY.md "The warm sandbox"):
// serve's foreground calls run in one bwrap's fork server, each in its own pid and mount
// namespaces with its own /tmp, /proc and overlay, and the escape cases are refused there as
// in a cold sandbox. Every test asserts that the calls really ran warm (a silent cold fallback
// fails). Real binary, kernel, bwrap, overlayfs, Landlock and seccomp; run as root by ctest
// and as an ordinary user by scripts/test-unprivileged.sh.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "core/text.h"
#include "runner/host_probe.h"
#include "test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::WriteFile;

std::string ProbeBin() { return testing::FromEnv("CORDON_TEST_PROBE", CORDON_PROBE); }

std::vector<Json> Records(const std::string& log, const std::string& type) {
  std::vector<Json> out;
  std::istringstream in(ReadFile(log));
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == type) out.push_back(std::move(j));
  }
  return out;
}

// Host pids whose command line is exactly `argv` (NUL-joined).
std::vector<std::string> HostPidsRunning(const std::vector<std::string>& argv) {
  std::string wanted;
  for (const auto& a : argv) wanted += a + '\0';
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid[0] >= '0' && pid[0] <= '9' && ReadFile(e.path().string() + "/cmdline") == wanted)
      out.push_back(pid);
  }
  return out;
}

class WarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (FindOnPath("bwrap").empty())
      why = "bwrap is not installed";
    else if (!testing::UserNamespacesEnabled())
      why = "user namespaces are disabled";
    if (!why.empty()) SECURITY_SKIP(why);
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    for (int i = 0; i < 10; ++i) WriteFile(ws_ + "/f" + std::to_string(i), "file\n");
    std::filesystem::copy_file(ProbeBin(), ws_ + "/probe");
    ::chmod((ws_ + "/probe").c_str(), 0755);
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
  }
  void TearDown() override { Stop(); }
  void Policy(const std::string& toml) {
    std::filesystem::create_directories(dir_ / "config/cordon/policies.d");
    WriteFile(dir_ / "config/cordon/policies.d/50-t.toml", toml);
  }
  std::string Log() { return dir_ / "audit.jsonl"; }
  void Serve() {
    serve_ = std::make_unique<testing::LinePeer>(
        std::vector<std::string>{testing::CordonBin(), "serve", "--workspace", ws_, "--audit-log",
                                 Log()},
        env_);
    Send(0, "initialize",
         {{"protocolVersion", "2025-06-18"},
          {"capabilities", Json::object()},
          {"clientInfo", {{"name", "warm_test"}, {"version", "1"}}}});
    ASSERT_TRUE(Await(0).contains("result"));
    serve_->Send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }
  void Stop() {
    if (serve_) {
      serve_->CloseInput();
      serve_->Wait();
      serve_.reset();
    }
  }
  void Send(int id, const std::string& method, const Json& params) {
    serve_->Send(
        Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump());
  }
  Json Await(int id) {
    while (!answers_.count(id)) {
      const std::string line = serve_->Line(120);
      if (line.empty()) return Json::object();
      Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("id") && j["id"].is_number_integer())
        answers_[j["id"].get<int>()] = j;
    }
    return answers_[id];
  }
  // A run_shell call's structured result.
  Json Shell(int id, const std::vector<std::string>& argv) {
    Json args = {{"program", argv[0]},
                 {"args", std::vector<std::string>(argv.begin() + 1, argv.end())}};
    Send(id, "tools/call", {{"name", "run_shell"}, {"arguments", args}});
    Json r = Await(id);
    return r.contains("result") ? r["result"].value("structuredContent", Json::object()) : r;
  }
  void ExpectRefused(const Json& r, const std::string& what) {
    const std::string out = r.value("stdout", "");
    EXPECT_EQ(r.value("exit_code", Json()), 1) << what << ": " << r.dump();
    EXPECT_NE(out.find("refused"), std::string::npos) << what << ": " << r.dump();
    EXPECT_EQ(out.find("ESCAPED"), std::string::npos) << what;
  }
  // Every process record of the log ran warm, and there are `n` of them.
  void ExpectAllWarm(std::size_t n) {
    auto procs = Records(Log(), "process");
    EXPECT_EQ(procs.size(), n);
    for (const auto& p : procs) {
      EXPECT_EQ(p.value("launch", Json::object()).value("kind", ""), "warm") << p.dump();
    }
  }

  testing::TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
  std::unique_ptr<testing::LinePeer> serve_;
  std::map<int, Json> answers_;
};

TEST_F(WarmTest, TheEscapeCasesAreRefusedInAWarmSandbox) {
  // A host listener the sandbox must not reach (network none).
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(ls, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  const std::string probe = ws_ + "/probe";
  const char* home = std::getenv("HOME");
  const std::string outside = std::string(home != nullptr ? home : "/root") + "/warm-escaped";
  ::unlink(outside.c_str());
  Serve();
  struct Case {
    std::vector<std::string> argv;
    std::string what;
  };
  const std::vector<Case> cases = {
      {{probe, "read", "/etc/shadow"}, "read /etc/shadow"},
      {{probe, "write", outside}, "write outside the workspace"},
      {{probe, "write", "/usr/bin/warm-escaped"}, "write /usr/bin"},
      {{probe, "unshare"}, "unshare(CLONE_NEWUSER)"},
      {{probe, "clone-newns"}, "clone(CLONE_NEWNS)"},
      {{probe, "ptrace", "1"}, "ptrace the call's init"},
      {{probe, "kill", std::to_string(::getpid())}, "signal a host pid"},
      {{probe, "tiocsti"}, "TIOCSTI"},
      {{probe, "io_uring"}, "io_uring_setup"},
      {{probe, "setcap", ws_ + "/capped"}, "setxattr security.capability"},
      {{probe, "connect", port}, "connect to a host listener"},
  };
  int id = 1;
  for (const auto& c : cases) ExpectRefused(Shell(id++, c.argv), c.what);
  Json status = Shell(id++, {"cat", "/proc/self/status"});
  const std::string st = status.value("stdout", "");
  EXPECT_NE(st.find("NoNewPrivs:\t1"), std::string::npos) << st;
  EXPECT_NE(st.find("Seccomp:\t2"), std::string::npos) << st;
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"})
    EXPECT_NE(st.find(std::string(set) + ":\t0000000000000000"), std::string::npos) << set << st;
  EXPECT_FALSE(testing::Exists(outside));
  EXPECT_FALSE(testing::Exists("/usr/bin/warm-escaped"));
  ::fcntl(ls, F_SETFL, O_NONBLOCK);
  EXPECT_LT(::accept(ls, nullptr, nullptr), 0) << "a connection reached the host";
  ::close(ls);
  Stop();
  ExpectAllWarm(cases.size() + 1);
  // One sandbox served them all, its calls numbered in order.
  auto procs = Records(Log(), "process");
  ASSERT_FALSE(procs.empty());
  EXPECT_EQ(procs.back()["launch"].value("call", 0), static_cast<int>(cases.size() + 1));
  EXPECT_EQ(procs.back()["launch"].value("sandbox", ""),
            procs.front()["launch"].value("sandbox", ""));
}

TEST_F(WarmTest, ASetsidDoubleForkedSleeperIsGoneAfterItsCall) {
  Serve();
  Json r = Shell(1, {"/bin/sh", "-c",
                     "setsid /bin/sh -c 'sleep 987 &' </dev/null >/dev/null 2>&1; "
                     "sleep 0.2; echo started"});
  EXPECT_EQ(r.value("exit_code", Json()), 0) << r.dump();
  EXPECT_TRUE(HostPidsRunning({"sleep", "987"}).empty()) << "the sleeper outlived its call";
  // The sandbox is still there for the next call, and it is warm.
  Json next = Shell(2, {"/bin/true"});
  EXPECT_EQ(next.value("exit_code", Json()), 0) << next.dump();
  Stop();
  ExpectAllWarm(2);
}

TEST_F(WarmTest, ConcurrentCallsCannotSeeOrSignalEachOther) {
  Serve();
  // Call 1 leaves a file in its /tmp and sleeps; call 2 runs while it does.
  Json args1 = {{"program", "/bin/sh"},
                {"args", {"-c", "echo one > /tmp/only-mine; sleep 4; cat /tmp/only-mine"}}};
  Send(1, "tools/call", {{"name", "run_shell"}, {"arguments", args1}});
  bool running = false;
  for (int i = 0; i < 1500 && !running; ++i) {
    running = !HostPidsRunning({"sleep", "4"}).empty();
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(running) << "call 1 never started";
  Json two = Shell(2, {"/bin/sh", "-c",
                       "ls /proc | grep -c '^[0-9]'; ls -a /tmp; cat /tmp/only-mine; "
                       "ps ax | grep -c 'sleep 4'; kill -9 -1; echo after-kill"});
  const std::string out = two.value("stdout", "");
  EXPECT_EQ(out.find("only-mine"), std::string::npos) << out;
  EXPECT_EQ(out.find("one"), std::string::npos) << out;
  EXPECT_NE(out.find("after-kill"), std::string::npos) << two.dump();
  // It sees its own processes only (sh, ls, grep and its init: a handful).
  EXPECT_LT(std::stoi(out.substr(0, out.find('\n'))), 8) << out;
  Json r1 = Await(1);
  Json one = r1["result"].value("structuredContent", Json::object());
  EXPECT_EQ(one.value("exit_code", Json()), 0) << one.dump();
  EXPECT_EQ(one.value("stdout", ""), "one\n") << one.dump();
  Stop();
  ExpectAllWarm(2);
}

// Found by the adversarial pass on issue 20: a cold call has its own devpts instance (bwrap's
// --dev), but a warm call's init keeps the sandbox's /dev, so every call of a sandbox shared
// one /dev/pts. Call 2 could open call 1's pty slave, read what was written for the program on
// it (a password an `expect` script types) and write into what call 1 reads from its master.
TEST_F(WarmTest, ConcurrentCallsCannotOpenEachOthersPtys) {
  if (FindOnPath("python3").empty()) GTEST_SKIP() << "python3 is not installed";
  WriteFile(ws_ + "/pty_owner.py",
            "import os, select, time\n"
            "m, s = os.openpty()\n"
            "os.write(m, b'typed-secret\\n')\n"
            "time.sleep(4)\n"
            "r = os.read(m, 100) if select.select([m], [], [], 0)[0] else b''\n"
            "print('master read:', r)\n");
  WriteFile(ws_ + "/pty_other.py",
            "import os, glob\n"
            "for p in sorted(glob.glob('/dev/pts/[0-9]*')):\n"
            "    try:\n"
            "        fd = os.open(p, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)\n"
            "    except OSError as e:\n"
            "        print('refused', p, e.errno)\n"
            "        continue\n"
            "    try:\n"
            "        print('ESCAPED read', p, os.read(fd, 64))\n"
            "    except OSError:\n"
            "        print('ESCAPED opened', p)\n"
            "    os.write(fd, b'INJECTED')\n"
            "print('other done')\n");
  Serve();
  Json args1 = {{"program", "python3"}, {"args", {"pty_owner.py"}}};
  Send(1, "tools/call", {{"name", "run_shell"}, {"arguments", args1}});
  bool running = false;
  for (int i = 0; i < 1500 && !running; ++i) {
    running = !HostPidsRunning({"python3", "pty_owner.py"}).empty();
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(running) << "call 1 never started";
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // its pty is open by now
  Json two = Shell(2, {"python3", "pty_other.py"});
  const std::string out = two.value("stdout", "");
  EXPECT_NE(out.find("other done"), std::string::npos) << two.dump();
  EXPECT_EQ(out.find("ESCAPED"), std::string::npos) << out;
  EXPECT_EQ(out.find("typed-secret"), std::string::npos) << out;
  Json r1 = Await(1);
  Json one = r1["result"].value("structuredContent", Json::object());
  EXPECT_EQ(one.value("exit_code", Json()), 0) << one.dump();
  EXPECT_EQ(one.value("stdout", "").find("INJECTED"), std::string::npos) << one.dump();
  Stop();
  ExpectAllWarm(2);
}

TEST_F(WarmTest, ARepositoryAndProtectedNamesTheHostMadeBetweenCallsStayProtected) {
  Serve();
  Json first = Shell(1, {"/bin/true"});
  ASSERT_EQ(first.value("exit_code", Json()), 0) << first.dump();
  // Between calls, on the host: a new repository and a protected directory.
  auto git = testing::Run({"/usr/bin/git", "init", "-q", ws_ + "/sub"});
  ASSERT_EQ(git.exit_code, 0) << git.err;
  const std::string config = ReadFile(ws_ + "/sub/.git/config");
  std::filesystem::create_directories(ws_ + "/.vscode");
  Json second = Shell(2, {"/bin/sh", "-c",
                          "printf '[core]\\n\\thooksPath = /tmp\\n' >> sub/.git/config; "
                          "echo '{}' > .vscode/settings.json; mkdir -p sub/.git/hooks; "
                          "echo 'echo pwned' > sub/.git/hooks/post-checkout; echo ok > plain.txt"});
  EXPECT_EQ(second.value("exit_code", Json()), 0) << second.dump();
  EXPECT_EQ(ReadFile(ws_ + "/sub/.git/config"), config);
  EXPECT_FALSE(testing::Exists(ws_ + "/.vscode/settings.json"));
  EXPECT_FALSE(testing::Exists(ws_ + "/sub/.git/hooks/post-checkout"));
  EXPECT_EQ(ReadFile(ws_ + "/plain.txt"), "ok\n");  // what the rules allow still lands
  Stop();
  ExpectAllWarm(2);
}

// The policy's deny masks inside the workspace are mounts below it in the sandbox; the call's
// overlay is mounted on the workspace and must not cover them (a cold sandbox's bwrap mounts
// them over its overlay).
TEST_F(WarmTest, PathsThePolicyDeniesInsideTheWorkspaceStayHidden) {
  std::filesystem::create_directories(ws_ + "/sub");
  std::filesystem::create_directories(ws_ + "/vault");
  WriteFile(ws_ + "/sub/secret.txt", "hidden-file-text\n");
  WriteFile(ws_ + "/vault/key", "hidden-dir-text\n");
  Policy("[filesystem]\ndeny = [\"" + ws_ + "/sub/secret.txt\", \"" + ws_ + "/vault\"]\n");
  Serve();
  const std::vector<std::vector<std::string>> reads = {
      {"cat", "sub/secret.txt"},
      {"cat", "vault/key"},
      {"/bin/sh", "-c", "cat sub/* vault/* 2>&1; mv sub moved 2>&1; cat moved/secret.txt 2>&1"},
      {"/bin/sh", "-c", "mv vault v2 2>&1; cat v2/key 2>&1; echo x > sub/secret.txt"},
  };
  int id = 1;
  for (const auto& argv : reads) {
    Json r = Shell(id++, argv);
    const std::string out = r.value("stdout", "") + r.value("stderr", "");
    EXPECT_EQ(out.find("hidden-"), std::string::npos) << argv.back() << ": " << r.dump();
  }
  Stop();
  EXPECT_EQ(ReadFile(ws_ + "/sub/secret.txt"), "hidden-file-text\n");
  EXPECT_EQ(ReadFile(ws_ + "/vault/key"), "hidden-dir-text\n");
  EXPECT_FALSE(testing::Exists(ws_ + "/moved"));
  EXPECT_FALSE(testing::Exists(ws_ + "/v2"));
  ExpectAllWarm(reads.size());
}

TEST_F(WarmTest, TheSearchToolsRunWarmAndSeeCommittedWrites) {
  Serve();
  Json w = Shell(1, {"/bin/sh", "-c", "echo needle-in-warm > found.txt"});
  ASSERT_EQ(w.value("exit_code", Json()), 0) << w.dump();
  Send(2, "tools/call", {{"name", "search_text"}, {"arguments", {{"pattern", "needle-in-warm"}}}});
  Json s = Await(2)["result"].value("structuredContent", Json::object());
  EXPECT_EQ(s.value("total_matches", 0), 1) << s.dump();
  Stop();
  auto procs = Records(Log(), "process");
  ASSERT_EQ(procs.size(), 2u);
  for (const auto& p : procs) EXPECT_EQ(p["launch"].value("kind", ""), "warm") << p.dump();
}

TEST_F(WarmTest, WarmOffRunsColdAndSaysWhy) {
  Policy("[sandbox]\nwarm = \"off\"\n");
  Serve();
  Json r = Shell(1, {"/bin/true"});
  EXPECT_EQ(r.value("exit_code", Json()), 0) << r.dump();
  Stop();
  auto procs = Records(Log(), "process");
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0]["launch"].value("kind", ""), "cold") << procs[0].dump();
  EXPECT_NE(procs[0]["launch"].value("reason", "").find("warm = \"off\""), std::string::npos)
      << procs[0].dump();
}

}  // namespace
}  // namespace cordon
