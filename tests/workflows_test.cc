// Agents' real workflows work with the staged workspace (issue 18, "Done when"): git, npm,
// pytest, a wrapped MCP filesystem server and a background job, each run by the real binary with
// real peers, each checked on the HOST tree after the call, at the commit point ADR 0006 names
// (a foreground process's end; a long-lived process's tool-call boundary, forwarded tools/call
// and one-second timer). Run as root by ctest and as an ordinary user by
// scripts/test-unprivileged.sh.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "core/text.h"
#include "runner/host_probe.h"
#include "test_util.h"

namespace cordon {
namespace {

using namespace std::chrono_literals;
using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::vector<Json> Records(const std::string& log) {
  std::vector<Json> out;
  std::istringstream in(ReadFile(log));
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An MCP peer (cordon serve or cordon wrap) driven over pipes, one JSON-RPC message a line, so
// the test can look at the host tree at the moment a response arrives, while the peer lives.
class Peer {
 public:
  Peer(const std::vector<std::string>& argv, const std::vector<std::string>& env,
       const std::string& err_path) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) std::abort();
    std::vector<std::string> envs = env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      bool overridden = false;
      for (const auto& x : env)
        overridden |= entry.substr(0, entry.find('=') + 1) == x.substr(0, x.find('=') + 1);
      if (!overridden) envs.push_back(entry);
    }
    std::vector<char*> cargv, cenv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (auto& e : envs) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) ::dup2(err, 2);
      ::execve(cargv[0], cargv.data(), cenv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Peer() {
    if (pid_ > 0) {
      CloseInput();
      // A peer that does not end on EOF within the test's patience is ended (ours, by pid).
      for (int i = 0; i < 300 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(100ms);
      if (::waitpid(pid_, nullptr, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
      }
    }
    if (from_ >= 0) ::close(from_);
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  void Send(const Json& msg) {
    const std::string line = msg.dump() + "\n";
    if (::write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      ADD_FAILURE() << "write to the peer failed";
  }
  // The response to `id`, or null after `timeout` (notifications in between are skipped).
  Json Until(int id, std::chrono::milliseconds timeout = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        Json j = Json::parse(buf_.substr(0, nl), nullptr, false);
        buf_.erase(0, nl + 1);
        if (j.is_object() && j.contains("id") && j["id"] == id &&
            (j.contains("result") || j.contains("error")))
          return j;
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return nullptr;
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n <= 0) return nullptr;
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  Json Initialize() {
    Send({{"jsonrpc", "2.0"},
          {"id", 1},
          {"method", "initialize"},
          {"params",
           {{"protocolVersion", "2025-06-18"},
            {"capabilities", Json::object()},
            {"clientInfo", {{"name", "workflows_test"}, {"version", "1"}}}}}});
    Json r = Until(1);
    Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    return r;
  }
  Json Call(const std::string& tool, const Json& args) {
    const int id = next_id_++;
    Send({{"jsonrpc", "2.0"},
          {"id", id},
          {"method", "tools/call"},
          {"params", {{"name", tool}, {"arguments", args}}}});
    return Until(id);
  }
  void CloseInput() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  // Closes stdin and waits: the peer's exit code, or 128 + its signal.
  int Finish() {
    CloseInput();
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int next_id_ = 2;
  std::string buf_;
};

class WorkflowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const bool ci = std::getenv("CI") != nullptr && std::string(std::getenv("CI")) == "true";
    std::string why;
    if (FindOnPath("bwrap").empty())
      why = "bwrap is not installed";
    else if (!testing::UserNamespacesEnabled())
      why = "user namespaces are disabled";
    if (!why.empty()) {
      if (ci) FAIL() << "WORKFLOW TEST CANNOT RUN under CI=true: " << why;
      GTEST_SKIP() << "SKIPPED WORKFLOW TEST: " << why;
    }
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
    // These tests are about the staged mode: without staging here they have nothing to test.
    auto r = testing::Run({testing::CordonBin(), "doctor", "--json"}, env_);
    Json d = Json::parse(r.out, nullptr, false);
    bool staged = false;
    std::string detail = r.out + r.err;
    if (d.is_object()) {
      for (const auto& c : d.value("checks", Json::array())) {
        if (c.value("name", "") == "workspace_staging") {
          staged = c.value("ok", false);
          detail = c.value("detail", "");
        }
      }
    }
    if (!staged) {
      if (ci) FAIL() << "WORKFLOW TEST CANNOT RUN under CI=true: no staging here: " << detail;
      GTEST_SKIP() << "SKIPPED WORKFLOW TEST: this host cannot stage the workspace: " << detail;
    }
  }
  testing::RunResult Exec(std::vector<std::string> cmd, std::vector<std::string> opts = {},
                          std::vector<std::string> extra_env = {}) {
    std::vector<std::string> argv = {testing::CordonBin(), "exec", "--workspace", ws_,
                                     "--audit-log",        Log()};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    auto env = env_;
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    return testing::Run(argv, env);
  }
  std::string Log() { return dir_ / "audit.jsonl"; }
  // The process records of the log, oldest first.
  std::vector<Json> Processes() {
    std::vector<Json> out;
    for (auto& j : Records(Log())) {
      if (j.value("type", "") == "process") out.push_back(std::move(j));
    }
    return out;
  }
  // Every process record says the staged mode ran, in its confinement and its change record.
  void ExpectAllStaged() {
    const auto procs = Processes();
    ASSERT_FALSE(procs.empty()) << ReadFile(Log());
    for (const auto& p : procs) {
      EXPECT_EQ(p["confinement"]["workspace_mode"], "staged") << p.dump();
      EXPECT_EQ(p["changes"]["workspace_mode"], "staged") << p.dump();
    }
  }
  // git on the host, as the user would run it, with no configuration but the repository's.
  testing::RunResult HostGit(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", ws_});
    return testing::Run(
        args, {"HOME=" + (dir_ / "home"), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
               "GIT_AUTHOR_NAME=h", "GIT_AUTHOR_EMAIL=h@example.org", "GIT_COMMITTER_NAME=h",
               "GIT_COMMITTER_EMAIL=h@example.org"});
  }

  TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
};

// git inside a staged call: commit, checkout -b, stash push/pop, rebase, and a branch rewind;
// each reaches the host's repository, and host git agrees with the tree after each call.
TEST_F(WorkflowsTest, GitCommitCheckoutStashRebaseAndResetReachTheHost) {
  for (std::vector<std::string> c : {std::vector<std::string>{"init", "-q", "-b", "main"},
                                     {"config", "commit.gpgsign", "false"},
                                     {"commit", "-q", "--allow-empty", "-m", "base"}}) {
    auto r = HostGit(c);
    ASSERT_EQ(r.exit_code, 0) << c[0] << ": " << r.out << r.err;
  }
  WriteFile(ws_ + "/a.txt", "a\n");
  ASSERT_EQ(HostGit({"add", "a.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit({"commit", "-q", "-m", "host"}).exit_code, 0);
  // The identity comes from the environment (HOME inside is /tmp/home, with no config).
  const std::vector<std::string> identity = {
      "GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.org", "GIT_COMMITTER_NAME=agent",
      "GIT_COMMITTER_EMAIL=agent@example.org"};
  std::vector<std::string> opts;
  for (const auto& e : identity) opts.insert(opts.end(), {"--env", e});
  const std::string script =
      "set -e; export GIT_CONFIG_NOSYSTEM=1; "
      "git checkout -q -b feature; echo f > f.txt; git add f.txt; git commit -q -m feat; "
      "git checkout -q main; echo m > m.txt; git add m.txt; git commit -q -m onmain; "
      "git checkout -q feature; echo dirty >> a.txt; git stash -q; "
      "test \"$(cat a.txt)\" = a; git stash pop -q; grep -q dirty a.txt; "
      "git commit -q -am stashed; git rebase -q main; git log --format=%s";
  auto r = Exec({"/bin/sh", "-c", script}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "stashed\nfeat\nonmain\nhost\nbase\n");
  // The host's repository has it all: the branch, the rebased order, HEAD on feature.
  EXPECT_EQ(HostGit({"log", "--format=%s", "feature"}).out, "stashed\nfeat\nonmain\nhost\nbase\n");
  EXPECT_EQ(HostGit({"log", "--format=%an", "-1", "feature"}).out, "agent\n");
  EXPECT_EQ(HostGit({"rev-parse", "--abbrev-ref", "HEAD"}).out, "feature\n");
  EXPECT_EQ(HostGit({"log", "--format=%s", "-1", "main"}).out, "onmain\n");
  auto status = HostGit({"status", "--porcelain"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.out, "") << "the host's index and tree agree with the sandbox's commits";
  EXPECT_EQ(HostGit({"stash", "list"}).out, "");
  EXPECT_FALSE(Exists(ws_ + "/.git/rebase-merge"));
  EXPECT_EQ(ReadFile(ws_ + "/a.txt"), "a\ndirty\n");
  auto fsck = HostGit({"fsck", "--no-progress"});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;

  // A branch rewind in a second call: the ref, the index and the tree move back on the host.
  auto reset = Exec({"/bin/sh", "-c", "git reset -q --hard HEAD~1 && git log --format=%s -1"});
  ASSERT_EQ(reset.exit_code, 0) << reset.out << reset.err;
  EXPECT_EQ(reset.out, "feat\n");
  EXPECT_EQ(HostGit({"log", "--format=%s", "-1", "feature"}).out, "feat\n");
  EXPECT_EQ(ReadFile(ws_ + "/a.txt"), "a\n");
  auto after = HostGit({"status", "--porcelain"});
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.out, "") << "the host's index and tree agree with the rewound branch";
  EXPECT_EQ(HostGit({"fsck", "--no-progress"}).exit_code, 0);
  ExpectAllStaged();
  EXPECT_EQ(Processes().size(), 2u);
}

// npm, run as an agent would in a project. The package comes from npm's registry through
// cordon's egress proxy (--allow-preset npm); node_modules and package-lock.json land on the
// host. Skips loudly when this host cannot reach the registry itself.
TEST_F(WorkflowsTest, NpmInstallFromTheRegistryLandsOnTheHost) {
  const std::string npm = FindOnPath("npm");
  if (npm.empty()) GTEST_SKIP() << "SKIPPED: npm is not installed (scripts/install-mcp-peers.sh)";
  // The host's own view of the registry, with the package this test installs.
  auto view = testing::Run({"/usr/bin/timeout", "60", npm, "view", "is-number@7.0.0", "version",
                            "--cache", dir_ / "host-npm-cache"});
  if (view.exit_code != 0 || view.out != "7.0.0\n") {
    GTEST_SKIP() << "SKIPPED: this host cannot reach registry.npmjs.org: " << view.out << view.err;
  }
  WriteFile(
      ws_ + "/package.json",
      R"({"name":"proj","version":"1.0.0","private":true,"dependencies":{"is-number":"7.0.0"}})");
  // The command runs in the workspace's root (cordon exec's working directory).
  auto r = Exec({"npm", "install", "--no-audit", "--no-fund", "--no-update-notifier"},
                {"--allow-preset", "npm"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  Json installed =
      Json::parse(ReadFile(ws_ + "/node_modules/is-number/package.json"), nullptr, false);
  ASSERT_TRUE(installed.is_object()) << "node_modules did not reach the host";
  EXPECT_EQ(installed["version"], "7.0.0");
  EXPECT_TRUE(Exists(ws_ + "/node_modules/is-number/index.js"));
  Json lock = Json::parse(ReadFile(ws_ + "/package-lock.json"), nullptr, false);
  ASSERT_TRUE(lock.is_object()) << "package-lock.json did not reach the host";
  EXPECT_EQ(lock["packages"]["node_modules/is-number"]["version"], "7.0.0") << lock.dump(1);
  // Node on the host loads what was installed inside.
  auto node = testing::Run(
      {FindOnPath("node"), "-e",
       "process.stdout.write(String(require('" + ws_ + "/node_modules/is-number')('42')))"});
  EXPECT_EQ(node.out, "true") << node.err;
  ExpectAllStaged();
}

// The same without the network: a dependency from a tarball in the project (a file: spec), as a
// vendored package is installed. node_modules (an extracted tree) and the lock land on the host.
TEST_F(WorkflowsTest, NpmInstallOfAVendoredTarballLandsOnTheHost) {
  const std::string npm = FindOnPath("npm");
  if (npm.empty()) GTEST_SKIP() << "SKIPPED: npm is not installed (scripts/install-mcp-peers.sh)";
  WriteFile(dir_ / "src/package/package.json",
            R"({"name":"tiny","version":"1.2.3","main":"index.js"})");
  WriteFile(dir_ / "src/package/index.js", "module.exports = (x) => 'tiny:' + x;\n");
  std::filesystem::create_directories(ws_ + "/vendor");
  auto tar = testing::Run(
      {"/bin/tar", "-czf", ws_ + "/vendor/tiny-1.2.3.tgz", "-C", dir_ / "src", "package"});
  ASSERT_EQ(tar.exit_code, 0) << tar.err;
  WriteFile(
      ws_ + "/package.json",
      R"({"name":"proj","version":"1.0.0","private":true,"dependencies":{"tiny":"file:vendor/tiny-1.2.3.tgz"}})");
  auto r = Exec({"npm", "install", "--offline", "--no-audit", "--no-fund", "--no-update-notifier"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/node_modules/tiny/index.js"),
            "module.exports = (x) => 'tiny:' + x;\n");
  Json lock = Json::parse(ReadFile(ws_ + "/package-lock.json"), nullptr, false);
  ASSERT_TRUE(lock.is_object()) << "package-lock.json did not reach the host";
  EXPECT_EQ(lock["packages"]["node_modules/tiny"]["version"], "1.2.3") << lock.dump(1);
  auto node = testing::Run({FindOnPath("node"), "-e",
                            "process.stdout.write(require('" + ws_ + "/node_modules/tiny')('x'))"});
  EXPECT_EQ(node.out, "tiny:x") << node.err;
  ExpectAllStaged();
}

// pytest in a project (Debian's python3-pytest; PyPI is not needed): a failing test's exit code
// comes back, .pytest_cache/ and __pycache__/ land on the host, and the next run reads the cache
// the first left there (--lf runs only what failed).
TEST_F(WorkflowsTest, PytestExitCodeComesBackAndItsCachesLandOnTheHost) {
  const std::string python = "/usr/bin/python3";
  if (testing::Run({python, "-m", "pytest", "--version"}).exit_code != 0)
    GTEST_SKIP() << "SKIPPED: pytest is not installed for " << python
                 << " (scripts/install-deps.sh installs python3-pytest)";
  WriteFile(ws_ + "/calc.py", "def add(a, b):\n    return a + b\n");
  WriteFile(ws_ + "/tests/test_calc.py",
            "from calc import add\n\n"
            "def test_ok():\n    assert add(1, 2) == 3\n\n"
            "def test_bad():\n    assert add(1, 1) == 3\n");
  const std::vector<std::string> pytest = {
      python, "-m", "pytest", "-q", "-p", "no:randomly", "--rootdir", ws_, ws_ + "/tests"};
  auto failing = Exec(pytest);
  EXPECT_EQ(failing.exit_code, 1) << "pytest's exit code for a failing test: " << failing.out
                                  << failing.err;
  EXPECT_NE(failing.out.find("1 failed, 1 passed"), std::string::npos) << failing.out;
  const std::string lastfailed = ReadFile(ws_ + "/.pytest_cache/v/cache/lastfailed");
  EXPECT_NE(lastfailed.find("tests/test_calc.py::test_bad"), std::string::npos)
      << ".pytest_cache did not reach the host: " << lastfailed;
  // Whether `dir` on the host has a compiled module whose name starts with `prefix`.
  auto has_pyc = [](const std::string& dir, const std::string& prefix) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().filename().string().starts_with(prefix)) return true;
    return false;
  };
  EXPECT_TRUE(has_pyc(ws_ + "/__pycache__", "calc.")) << "__pycache__ did not reach the host";
  EXPECT_TRUE(has_pyc(ws_ + "/tests/__pycache__", "test_calc."))
      << "tests/__pycache__ did not reach the host";
  // Fixed on the host; the second call reads the first call's cache: only the failed test runs.
  // The fix changes the file's size: a .pyc is checked against its source's size and mtime in
  // whole seconds, so a same-size edit within the second of the first write would run the old
  // bytecode (Python's, with or without cordon: seen once in five runs here before this).
  WriteFile(ws_ + "/tests/test_calc.py",
            "from calc import add\n\n"
            "def test_ok():\n    assert add(1, 2) == 3\n\n"
            "def test_bad():\n    assert add(1, 1) == 2  # fixed\n");
  std::vector<std::string> again = pytest;
  again.push_back("--lf");
  auto fixed = Exec(again);
  EXPECT_EQ(fixed.exit_code, 0) << fixed.out << fixed.err;
  // Both tests pass now; only the one the cache names as failed ran.
  EXPECT_NE(fixed.out.find("1 passed in"), std::string::npos) << fixed.out;
  EXPECT_EQ(ReadFile(ws_ + "/.pytest_cache/v/cache/lastfailed"), "{}")
      << "the second run's cache did not reach the host";
  ExpectAllStaged();
}

// The pinned third-party MCP peers (scripts/install-mcp-peers.sh).
class WorkflowsPeersTest : public WorkflowsTest {
 protected:
  void SetUp() override {
    WorkflowsTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    peers_ = testing::FromEnv("MCP_PEERS_DIR", "/tmp/mcp-peers");
    if (FindOnPath("node").empty() ||
        !Exists(peers_ + "/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")) {
      GTEST_SKIP() << "SKIPPED MCP PEER TEST: node or the pinned peers in " << peers_
                   << " are missing; run scripts/install-mcp-peers.sh";
    }
  }
  std::string peers_;
};

// A wrapped server-filesystem: write_file's (edit_file's, move_file's) result reaches the client
// only after the commit, so the change is on the host when the result arrives. A protected file it
// writes never reaches the host while it keeps running (past several timer commits), and is
// recorded at commit.
TEST_F(WorkflowsPeersTest, WrappedFilesystemServersWritesAreOnTheHostWhenItsResultArrives) {
  WriteFile(ws_ + "/host.txt", "from the host\n");
  Peer wrap({testing::CordonBin(), "wrap", "--workspace", ws_, "--audit-log", Log(), "--read",
             peers_, "--", FindOnPath("node"),
             peers_ + "/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", ws_},
            env_, dir_ / "wrap.err");
  Json init = wrap.Initialize();
  ASSERT_TRUE(init.contains("result")) << init.dump() << ReadFile(dir_ / "wrap.err");
  for (int i = 0; i < 3; ++i) {
    const std::string name = "notes/n" + std::to_string(i) + ".md";
    if (i == 0) {
      Json mk = wrap.Call("create_directory", {{"path", ws_ + "/notes"}});
      ASSERT_TRUE(mk.contains("result")) << mk.dump();
      ASSERT_FALSE(mk["result"].value("isError", false)) << mk.dump();
    }
    const std::string content = "note " + std::to_string(i) + "\n";
    Json w = wrap.Call("write_file", {{"path", ws_ + "/" + name}, {"content", content}});
    // At this moment, before anything else: the client has the result, the host has the file.
    const std::string on_host = ReadFile(ws_ + "/" + name);
    ASSERT_TRUE(w.contains("result")) << w.dump() << ReadFile(dir_ / "wrap.err");
    EXPECT_FALSE(w["result"].value("isError", false)) << w.dump();
    EXPECT_EQ(on_host, content) << "write_file's result arrived before its file reached the host";
  }
  // A file the host had: overwritten (the server's temporary file and rename), edited, moved;
  // each is on the host when its result arrives.
  Json over = wrap.Call("write_file", {{"path", ws_ + "/host.txt"}, {"content", "replaced\n"}});
  EXPECT_EQ(ReadFile(ws_ + "/host.txt"), "replaced\n") << over.dump();
  Json edit = wrap.Call(
      "edit_file",
      {{"path", ws_ + "/host.txt"}, {"edits", {{{"oldText", "replaced"}, {"newText", "edited"}}}}});
  EXPECT_EQ(ReadFile(ws_ + "/host.txt"), "edited\n") << edit.dump();
  Json move = wrap.Call("move_file",
                        {{"source", ws_ + "/host.txt"}, {"destination", ws_ + "/notes/moved.txt"}});
  EXPECT_FALSE(Exists(ws_ + "/host.txt")) << move.dump();
  EXPECT_EQ(ReadFile(ws_ + "/notes/moved.txt"), "edited\n") << move.dump();
  // A protected name, written by the server: refused at the commit, never on the host while the
  // server runs on (three timer commits and a call boundary).
  Json mk = wrap.Call("create_directory", {{"path", ws_ + "/.vscode"}});
  EXPECT_FALSE(mk["result"].value("isError", false)) << mk.dump();
  Json w = wrap.Call("write_file",
                     {{"path", ws_ + "/.vscode/settings.json"}, {"content", "{\"x\": 1}\n"}});
  EXPECT_FALSE(w["result"].value("isError", false)) << w.dump();
  bool seen = Exists(ws_ + "/.vscode");
  for (int i = 0; i < 30 && !seen; ++i) {
    std::this_thread::sleep_for(100ms);
    seen = Exists(ws_ + "/.vscode");
  }
  Json read = wrap.Call("read_text_file", {{"path", ws_ + "/.vscode/settings.json"}});
  seen = seen || Exists(ws_ + "/.vscode");
  EXPECT_FALSE(seen) << "a protected file the server wrote reached the host while it ran";
  // The server itself still sees its own write (the overlay keeps it).
  EXPECT_NE(read.dump().find("\\\"x\\\": 1"), std::string::npos) << read.dump();
  // Recorded at the commit, while the server still runs.
  bool recorded = false;
  for (const auto& j : Records(Log())) {
    if (j.value("type", "") != "protected_path_removed") continue;
    const std::string path = j.value("path", "");
    if ((path == ws_ + "/.vscode" || path == ws_ + "/.vscode/settings.json") &&
        j.value("when", "") == "commit")
      recorded = true;
  }
  EXPECT_TRUE(recorded) << ReadFile(Log());
  EXPECT_EQ(wrap.Finish(), 0) << ReadFile(dir_ / "wrap.err");
  EXPECT_FALSE(Exists(ws_ + "/.vscode")) << "nor at the server's end";
  EXPECT_EQ(ReadFile(ws_ + "/notes/n2.md"), "note 2\n");
  ExpectAllStaged();
}

// A background job started through cordon serve: with no tool call at all, what it writes is on
// the host within about a second (the timer), while it runs; and what it wrote before a tool
// call is on the host when that call's response arrives (the boundary).
TEST_F(WorkflowsTest, BackgroundJobsWritesReachTheHostByTheTimerAndAtEachCallBoundary) {
  Peer serve({testing::CordonBin(), "serve", "--workspace", ws_, "--audit-log", Log()}, env_,
             dir_ / "serve.err");
  Json init = serve.Initialize();
  ASSERT_TRUE(init.contains("result")) << init.dump() << ReadFile(dir_ / "serve.err");
  // It stamps each file with the time it wrote it (the host shares the clock), then says so.
  const std::string script =
      "date +%s%N > timer.txt; sleep 2; "
      "for i in 1 2 3; do date +%s%N > b$i.txt; echo wrote-b$i; sleep 0.7; done; sleep 60";
  Json started = serve.Call(
      "run_shell", {{"program", "/bin/sh"}, {"args", {"-c", script}}, {"background", true}});
  ASSERT_TRUE(started.contains("result")) << started.dump() << ReadFile(dir_ / "serve.err");
  const Json job = started["result"]["structuredContent"];
  ASSERT_EQ(job.value("status", ""), "running") << started.dump();
  EXPECT_EQ(job["confinement"]["workspace_mode"], "staged") << job.dump();
  const std::string id = job["id"];

  // The timer: no tool call is made while the host is polled.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!Exists(ws_ + "/timer.txt") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  const std::int64_t seen_ns = NowNs();
  ASSERT_TRUE(Exists(ws_ + "/timer.txt")) << "the running job's write never reached the host";
  const std::string stamp = ReadFile(ws_ + "/timer.txt");
  ASSERT_FALSE(stamp.empty());
  const double latency_ms = static_cast<double>(seen_ns - std::stoll(stamp)) / 1e6;
  EXPECT_LT(latency_ms, 2000.0) << "the one-second timer is late";
  std::printf("timer commit: on the host %.0f ms after the job wrote it\n", latency_ms);
  Json list = serve.Call("process_list", Json::object());
  ASSERT_TRUE(list.contains("result")) << list.dump();
  EXPECT_EQ(list["result"]["structuredContent"]["jobs"][0]["state"], "running") << list.dump();

  // The boundary: the first process_output whose output says a file was written has it on the
  // host when its response arrives (the sweep runs before the response; the timer seldom has).
  for (int i = 1; i <= 3; ++i) {
    const std::string marker = "wrote-b" + std::to_string(i);
    bool said = false;
    // Bounded by time, not by a count of calls: a Release build answers thousands in a second.
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (!said && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(10ms);
      Json out = serve.Call("process_output", {{"id", id}});
      ASSERT_TRUE(out.contains("result")) << out.dump();
      said =
          out["result"]["structuredContent"].value("output", "").find(marker) != std::string::npos;
      if (said) {
        EXPECT_TRUE(Exists(ws_ + "/b" + std::to_string(i) + ".txt"))
            << "b" << i << ".txt was written before the call but is not on the host at its "
            << "response";
      }
    }
    ASSERT_TRUE(said) << "the job never wrote b" << i;
  }
  Json still = serve.Call("process_list", Json::object());
  EXPECT_EQ(still["result"]["structuredContent"]["jobs"][0]["state"], "running") << still.dump();
  EXPECT_EQ(serve.Finish(), 0) << ReadFile(dir_ / "serve.err");
  ExpectAllStaged();
}

}  // namespace
}  // namespace cordon
