// The staged workspace's promises (SECURITY.md "The staged workspace (issue 18)"), against the
// real binary, kernel, overlayfs and bwrap: what the workspace rules refuse never reaches the
// host tree, at any moment, whatever the process does to the tree or to cordon's checks; what
// they allow reaches it at the commit point. Each attack of issue 18 is one test here. Run as
// root by ctest and as an ordinary user by scripts/test-unprivileged.sh.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "core/text.h"
#include "runner/host_probe.h"
#include "test_util.h"

namespace cordon {
namespace {

using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::string Joined(const std::set<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

std::vector<Json> Records(const std::string& log) {
  std::vector<Json> out;
  std::istringstream in(ReadFile(log));
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

// Whether a process `sleep SECONDS` runs on the host.
bool SleepRuns(const std::string& seconds) {
  const std::string wanted = std::string("sleep") + '\0' + seconds + '\0';
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid[0] >= '0' && pid[0] <= '9' && ReadFile(e.path().string() + "/cmdline") == wanted)
      return true;
  }
  return false;
}

// Waits (at most 30 s) until a process `sleep SECONDS` runs on the host: the sandbox's command
// has started (its window is open), whatever a slow build (ASan) makes of the launch.
bool AwaitSleep(const std::string& seconds) {
  for (int i = 0; i < 1500; ++i) {
    if (SleepRuns(seconds)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class StagedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (FindOnPath("bwrap").empty())
      why = "bwrap is not installed";
    else if (!testing::UserNamespacesEnabled())
      why = "user namespaces are disabled";
    if (!why.empty()) SECURITY_SKIP(why);
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_ + "/src");
    WriteFile(ws_ + "/src/main.c", "int main(void) { return 0; }\n");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
    // Is staging available here? cordon doctor's check says; without it these tests have
    // nothing to test (the direct mode has its own).
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
    if (!staged) SECURITY_SKIP("this host cannot stage the workspace: " << detail);
  }
  void Policy(const std::string& toml) {
    std::filesystem::create_directories(dir_ / "config/cordon/policies.d");
    WriteFile(dir_ / "config/cordon/policies.d/50-t.toml", toml);
  }
  testing::RunResult Exec(const std::string& script, std::vector<std::string> opts = {}) {
    std::vector<std::string> argv = {testing::CordonBin(), "exec", "--workspace", ws_,
                                     "--audit-log",        Log()};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.insert(argv.end(), {"--", "/bin/sh", "-c", "cd '" + ws_ + "' && " + script});
    return testing::Run(argv, env_);
  }
  std::string Log() { return dir_ / "audit.jsonl"; }
  Json LastProcess() {
    Json last;
    for (auto& j : Records(Log())) {
      if (j.value("type", "") == "process") last = j;
    }
    return last;
  }
  std::vector<Json> Refused() {
    std::vector<Json> out;
    for (auto& j : Records(Log())) {
      if (j.value("type", "") == "protected_path_removed") out.push_back(j);
    }
    return out;
  }
  // Starts `cordon exec` of `script` in the background; returns its pid.
  pid_t Spawn(const std::string& script, const std::string& out,
              const std::vector<std::string>& opts = {}) {
    std::vector<std::string> envs = env_;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (entry.rfind("XDG_CONFIG_HOME=", 0) != 0 && entry.rfind("XDG_STATE_HOME=", 0) != 0)
        envs.push_back(entry);
    }
    std::vector<char*> cenv;
    for (auto& e : envs) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const std::string full = "cd '" + ws_ + "' && " + script;
    const std::string log = Log();
    std::vector<std::string> args = {"cordon", "exec", "--workspace", ws_, "--audit-log", log};
    args.insert(args.end(), opts.begin(), opts.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", full});
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    const std::string bin = testing::CordonBin();
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execve(bin.c_str(), cargs.data(), cenv.data());
      _exit(127);
    }
    return pid;
  }
  // Leaves a stage of ws_ as a cordon killed in the middle of its commit would: `cordon exec` of
  // `script` and then `sleep TAG` is killed -9 while the sleep runs, and the stage's phase file
  // then says "committing" (its upper layer holds what the command wrote). Returns the stage's
  // directory ("" after a failure).
  std::string KillInTheCommit(const std::string& script, const std::string& tag,
                              const std::vector<std::string>& opts = {}) {
    const std::string out = dir_ / ("killed-" + tag + ".out");
    const pid_t a = Spawn(script + " && sleep " + tag, out, opts);
    const bool ran = AwaitSleep(tag);
    ::kill(a, SIGKILL);
    ::waitpid(a, nullptr, 0);
    if (!ran) {
      ADD_FAILURE() << "the command never ran: " << ReadFile(out);
      return "";
    }
    // The sandbox dies with its parent.
    for (int i = 0; i < 500 && SleepRuns(tag); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string stage;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "state/cordon/stage")) {
      if (e.path().filename().string().rfind(std::to_string(a) + "-", 0) == 0)
        stage = e.path().string() + "/1";
    }
    if (!Exists(stage + "/phase")) {
      ADD_FAILURE() << "no stage of the killed cordon: " << ReadFile(out);
      return "";
    }
    const std::string phase = ReadFile(stage + "/phase");
    WriteFile(stage + "/phase", "committing" + phase.substr(phase.find('\n')));
    return stage;
  }
  // Host git in the workspace, with no system or user configuration.
  testing::RunResult HostGit(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", ws_});
    return testing::Run(args, {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (dir_ / "home")});
  }
  // The workspace made a repository: branch main, one commit of what it holds.
  bool MakeRepository() {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"init", "-q", "-b", "main"},
          {"config", "user.email", "t@example.org"},
          {"config", "user.name", "t"},
          {"add", "."},
          {"commit", "-qm", "base"}}) {
      auto r = HostGit(args);
      if (r.exit_code != 0) {
        ADD_FAILURE() << "git " << args[0] << ": " << r.err;
        return false;
      }
    }
    return true;
  }
  std::string SessionOf(const std::string& log) {
    std::string session;
    for (const auto& j : Records(log)) {
      if (j.value("type", "") == "session_started") session = j.value("session", "");
    }
    return session;
  }

  TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
};

// The sweep's cap made it fail open: planted names stayed when the process also created more
// entries than sandbox.max_scan_entries. Staged, the cap is irrelevant: nothing refused lands.
TEST_F(StagedTest, PlantsBehindAFloodOfEntriesNeverReachTheHost) {
  Policy("[sandbox]\nmax_scan_entries = 200\n");
  auto r = Exec(
      "echo 'touch /tmp/pwned' > .envrc && mkdir -p .vscode sub/.git && "
      "echo '{}' > .vscode/tasks.json && printf '[core]\\n\\tfsmonitor = /bin/false\\n' > "
      "sub/.git/config && mkdir flood && i=0; while [ $i -lt 1000 ]; do : > flood/f$i; "
      "i=$((i+1)); done");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Exists(ws_ + "/.envrc"));
  EXPECT_FALSE(Exists(ws_ + "/.vscode"));
  EXPECT_FALSE(Exists(ws_ + "/sub/.git"));
  EXPECT_TRUE(Exists(ws_ + "/flood/f999"));  // what the rules allow is installed
  const Json p = LastProcess();
  EXPECT_EQ(p["confinement"]["workspace_mode"], "staged") << p.dump();
  EXPECT_EQ(p["changes"]["workspace_mode"], "staged") << p.dump();
  std::set<std::string> refused;
  for (const auto& j : Refused()) refused.insert(j.value("reason", "") + " " + j.value("path", ""));
  EXPECT_TRUE(refused.contains("protected_path " + ws_ + "/.envrc")) << Joined(refused);
  EXPECT_TRUE(refused.contains("protected_path " + ws_ + "/.vscode")) << Joined(refused);
  EXPECT_TRUE(refused.contains("new_git_dir " + ws_ + "/sub/.git")) << Joined(refused);
  // The caller of `cordon exec` is told, not only the record: the exit code is the command's.
  EXPECT_NE(r.err.find("the workspace rules refuse were kept out of the tree"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("sub/.git (new_git_dir, and 1 entry below it)"), std::string::npos) << r.err;
}

// A hard link made inside landed as a false conflict (issue 33): installing d/x over the host
// file that y was a link of dropped y's link count, so y's ctime moved, and the conflict rule
// read the commit's own step as a host edit: y stayed old, quarantined, and the quarantine held
// a link to the installed d/x with mode 0600. cargo does exactly this (target/debug/NAME is a
// hard link of deps/NAME-HASH). Both names land new, as one inode, with the process's mode.
TEST_F(StagedTest, HardLinksLandAsOneInodeWithoutAFalseConflict) {
  std::filesystem::create_directories(ws_ + "/d");
  WriteFile(ws_ + "/d/x", "old\n");
  ASSERT_EQ(::link((ws_ + "/d/x").c_str(), (ws_ + "/y").c_str()), 0);
  for (int round = 0; round < 2; ++round) {
    const std::string text = round == 0 ? "new" : "newer";
    auto r = Exec("rm -f d/x y && echo " + text +
                  " > d/x && chmod 640 d/x && ln d/x y && "
                  "mkdir -p deps && cp d/x deps/bin-0123 && ln -f deps/bin-0123 bin");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(ReadFile(ws_ + "/d/x"), text + "\n");
    EXPECT_EQ(ReadFile(ws_ + "/y"), text + "\n") << "the second name stayed old";
    struct stat a {
    }, b{}, c{}, d{};
    ASSERT_EQ(::stat((ws_ + "/d/x").c_str(), &a), 0);
    ASSERT_EQ(::stat((ws_ + "/y").c_str(), &b), 0);
    ASSERT_EQ(::stat((ws_ + "/deps/bin-0123").c_str(), &c), 0);
    ASSERT_EQ(::stat((ws_ + "/bin").c_str(), &d), 0);
    EXPECT_EQ(a.st_ino, b.st_ino) << "d/x and y are no longer one file";
    EXPECT_EQ(c.st_ino, d.st_ino) << "deps/bin-0123 and bin are no longer one file";
    EXPECT_EQ(a.st_nlink, 2u) << "something else holds a link to the installed file";
    EXPECT_EQ(a.st_mode & 07777, 0640u) << "the process's mode";
    for (const auto& j : Refused())
      ADD_FAILURE() << "refused: " << j.value("reason", "") << " " << j.value("path", "");
    EXPECT_EQ(r.err.find("conflict"), std::string::npos) << r.err;
  }
}

// Renaming a directory that existed before the call failed in the staged workspace (issue 33,
// part 2): overlayfs without redirect_dir answers EXDEV, so `git mv src lib` exited 128 and
// Python's os.rename and Node's fs.renameSync threw; only `mv`, which copies, worked. Each
// program renames a directory of the host's tree in a call of its own; the host then shows the
// move with everything the tree held: contents, modes, times, a symlink, and two names of one
// file still one file.
TEST_F(StagedTest, ADirectoryThatExistedBeforeTheCallRenamesForEveryProgram) {
  std::filesystem::create_directories(ws_ + "/src/deep/er");
  WriteFile(ws_ + "/src/deep/er/leaf.txt", "leaf\n");
  WriteFile(ws_ + "/src/run.sh", "#!/bin/sh\necho run\n");
  ASSERT_EQ(::chmod((ws_ + "/src/run.sh").c_str(), 0750), 0);
  ASSERT_EQ(::chmod((ws_ + "/src/deep").c_str(), 0751), 0);
  ASSERT_EQ(::symlink("deep/er/leaf.txt", (ws_ + "/src/leaf-link").c_str()), 0);
  ASSERT_EQ(::link((ws_ + "/src/main.c").c_str(), (ws_ + "/src/main-again.c").c_str()), 0);
  const timespec old_time[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (ws_ + "/src/deep/er/leaf.txt").c_str(), old_time, 0), 0);
  auto git = [&](const std::string& args) {
    return testing::Run({"/bin/sh", "-c", "cd '" + ws_ + "' && git " + args});
  };
  ASSERT_EQ(
      git("init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm i").exit_code,
      0);

  auto r = Exec("git mv src lib");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Exists(ws_ + "/src"));
  EXPECT_EQ(ReadFile(ws_ + "/lib/deep/er/leaf.txt"), "leaf\n");
  const std::string staged_names = git("diff --cached --name-status -M").out;
  EXPECT_NE(staged_names.find("R100\tsrc/deep/er/leaf.txt\tlib/deep/er/leaf.txt"),
            std::string::npos)
      << "the index on the host does not hold git mv's rename:\n"
      << staged_names;

  r = Exec("python3 -c 'import os; os.rename(\"lib\", \"py\")'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string last = "py";
  if (!FindOnPath("node").empty()) {
    r = Exec("node -e 'require(\"fs\").renameSync(\"py\", \"js\")'");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    last = "js";
  } else {
    std::cerr << "SKIPPED LOUDLY: node is not installed; fs.renameSync was not tried\n";
  }
  for (const char* gone : {"/src", "/lib", last == "js" ? "/py" : "/js"})
    EXPECT_FALSE(Exists(ws_ + gone)) << gone << " is still on the host";
  const std::string d = ws_ + "/" + last;
  EXPECT_EQ(ReadFile(d + "/deep/er/leaf.txt"), "leaf\n");
  EXPECT_EQ(ReadFile(d + "/main.c"), "int main(void) { return 0; }\n");
  struct stat run {
  }, deep{}, leaf{}, a{}, b{};
  ASSERT_EQ(::stat((d + "/run.sh").c_str(), &run), 0);
  ASSERT_EQ(::stat((d + "/deep").c_str(), &deep), 0);
  ASSERT_EQ(::stat((d + "/deep/er/leaf.txt").c_str(), &leaf), 0);
  ASSERT_EQ(::stat((d + "/main.c").c_str(), &a), 0);
  ASSERT_EQ(::stat((d + "/main-again.c").c_str(), &b), 0);
  EXPECT_EQ(run.st_mode & 07777, 0750u);
  EXPECT_EQ(deep.st_mode & 07777, 0751u);
  EXPECT_EQ(leaf.st_mtim.tv_sec, 1000000000) << "the file's time was not kept";
  EXPECT_EQ(a.st_ino, b.st_ino) << "two names of one file became two files";
  char target[64] = {};
  ASSERT_GT(::readlink((d + "/leaf-link").c_str(), target, sizeof target - 1), 0);
  EXPECT_STREQ(target, "deep/er/leaf.txt");
  for (const auto& j : Refused())
    ADD_FAILURE() << "refused: " << j.value("reason", "") << " " << j.value("path", "");
}

// What the supervisor moves for a program is still what the workspace rules judge at the commit,
// and it moves nothing the program could not: a directory moved into the repository's hooks
// never lands there, and a move to another mount stays EXDEV, as the kernel answers it.
TEST_F(StagedTest, ADirectoryMovedForAProgramIsStillJudgedByTheRules) {
  ASSERT_EQ(testing::Run({"/bin/sh", "-c", "cd '" + ws_ + "' && git init -q"}).exit_code, 0);
  std::filesystem::create_directories(ws_ + "/payload");
  WriteFile(ws_ + "/payload/pre-commit", "#!/bin/sh\ntouch /tmp/pwned\n");
  ASSERT_EQ(::chmod((ws_ + "/payload/pre-commit").c_str(), 0755), 0);
  const std::string hooks_before = testing::Run({"/bin/ls", "-A", ws_ + "/.git/hooks"}).out;
  auto r = Exec(
      "rm -rf .git/hooks && python3 -c 'import os; os.rename(\"payload\", \".git/hooks\")' && "
      "test -x .git/hooks/pre-commit && "
      "python3 -c '\nimport errno, os\ntry:\n    os.rename(\"src\", \"/tmp/src\")\n"
      "except OSError as e:\n    raise SystemExit(0 if e.errno == errno.EXDEV else 3)\n"
      "raise SystemExit(4)'");
  EXPECT_NE(r.exit_code, 4) << "a move to another mount was made" << r.err;
  EXPECT_NE(r.exit_code, 3) << "a move to another mount did not say EXDEV" << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Exists(ws_ + "/.git/hooks/pre-commit")) << "the moved hook landed";
  EXPECT_EQ(testing::Run({"/bin/ls", "-A", ws_ + "/.git/hooks"}).out, hooks_before);
  EXPECT_TRUE(Exists(ws_ + "/src/main.c"));
  bool refused = false;
  for (const auto& j : Refused())
    refused = refused || j.value("path", "").find(".git/hooks") != std::string::npos;
  EXPECT_TRUE(refused) << "no record names the refused hooks";
}

// cargo hard-links target/debug/NAME to target/debug/deps/NAME-HASH (issue 33, part 3): before
// hard links landed whole, a build inside after an edit left the deps binary old, and host cargo
// then called the build fresh, so the user ran stale code with no error. Two builds inside, an
// edit between them: both names hold the new program, as one file. Needs cargo (rustup's or
// Debian's); skipped loudly without it.
TEST_F(StagedTest, ACargoBuildInsideLeavesBothOfItsBinariesNew) {
  std::string cargo = FindOnPath("cargo");
  const char* home = std::getenv("HOME");
  const std::string rustup_cargo =
      std::string(home != nullptr ? home : "/nonexistent") + "/.cargo/bin/cargo";
  if (cargo.empty() && ::access(rustup_cargo.c_str(), X_OK) == 0) cargo = rustup_cargo;
  if (cargo.empty()) GTEST_SKIP() << "SKIPPED LOUDLY: cargo is not installed (rustup or Debian's)";
  std::vector<std::string> opts = {
      "--env", "PATH=" + std::filesystem::path(cargo).parent_path().string() + ":/usr/bin:/bin",
      "--env", "CARGO_HOME=" + ws_ + "/.cargo-home"};
  const std::string rustup_home = std::string(home != nullptr ? home : "") + "/.rustup";
  if (home != nullptr && Exists(rustup_home)) {
    // rustup's cargo is a proxy that reads its toolchains there
    for (const std::string& dir : {rustup_home, std::string(home) + "/.cargo"}) {
      opts.insert(opts.end(), {"--read", dir});
    }
    opts.insert(opts.end(), {"--env", "RUSTUP_HOME=" + rustup_home});
  }
  WriteFile(ws_ + "/Cargo.toml",
            "[package]\nname = \"hl\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
  for (const std::string version : {"one", "two"}) {
    WriteFile(ws_ + "/src/main.rs", "fn main() { println!(\"" + version + "\"); }\n");
    auto r = Exec("cargo build --offline", opts);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.err.find("conflict"), std::string::npos) << r.err;
    std::string deps;
    for (const auto& e : std::filesystem::directory_iterator(ws_ + "/target/debug/deps")) {
      const std::string name = e.path().filename().string();
      if (name.rfind("hl-", 0) == 0 && name.find('.') == std::string::npos) deps = e.path();
    }
    ASSERT_FALSE(deps.empty()) << "no target/debug/deps/hl-HASH";
    for (const std::string& bin : {ws_ + "/target/debug/hl", deps}) {
      auto ran = testing::Run({bin});
      EXPECT_EQ(ran.out, version + "\n") << bin << " is stale";
    }
    struct stat a {
    }, b{};
    ASSERT_EQ(::stat((ws_ + "/target/debug/hl").c_str(), &a), 0);
    ASSERT_EQ(::stat(deps.c_str(), &b), 0);
    EXPECT_EQ(a.st_ino, b.st_ino) << "cargo's two names of the binary are no longer one file";
  }
  for (const auto& j : Refused())
    ADD_FAILURE() << "refused: " << j.value("reason", "") << " " << j.value("path", "");
}

// A user.* extended attribute of a file the process made reached the host with it (issue 33):
// its words, for the host's tools to read. The file lands; the attribute does not.
TEST_F(StagedTest, AFilesExtendedAttributesStayInTheSandbox) {
  auto r = Exec(
      "echo made > made.txt && python3 -c \"import os; os.setxattr('made.txt', 'user.x', "
      "b'evil'); os.setxattr('made.txt', 'user.xdg.origin.url', b'http://x'); "
      "print(os.getxattr('made.txt', 'user.x').decode())\"");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "evil\n") << "set inside: " << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/made.txt"), "made\n");
  char value[64];
  for (const char* name : {"user.x", "user.xdg.origin.url"}) {
    errno = 0;
    EXPECT_LT(::getxattr((ws_ + "/made.txt").c_str(), name, value, sizeof value), 0) << name;
    EXPECT_EQ(errno, ENODATA) << name;
  }
}

// filesystem.xattr_allow (issue 33, part 6): the user's policy names the `user.*` attributes
// that reach the host with a file the process made; the others stay in the stage, trusted.*
// ones always, and the workspace's own policy file cannot add a name.
TEST_F(StagedTest, OnlyTheXattrsTheUserAllowsReachTheHost) {
  Policy("[filesystem]\nxattr_allow = [\"user.keep.*\"]\n");
  // (A project file's plain list of a grant narrows it to the names it keeps: user.keep.* stays.)
  WriteFile(ws_ + "/.cordon/policy.toml",
            "[filesystem]\nxattr_allow = [\"user.keep.*\", \"user.x\"]\n");
  auto r = Exec(
      "echo made > made.txt && python3 -c \"import os\n"
      "os.setxattr('made.txt', 'user.keep.a', b'kept')\n"
      "os.setxattr('made.txt', 'user.x', b'evil')\n"
      "try: os.setxattr('made.txt', 'trusted.t', b'evil')\n"
      "except OSError: pass\n"
      "print(sorted(n for n in os.listxattr('made.txt') if not n.startswith('security.')))\"");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("'user.keep.a', 'user.x'"), std::string::npos) << "set inside: " << r.out;
  EXPECT_EQ(ReadFile(ws_ + "/made.txt"), "made\n");
  const std::string made = ws_ + "/made.txt";
  char value[64] = {};
  const ssize_t n = ::getxattr(made.c_str(), "user.keep.a", value, sizeof value);
  EXPECT_EQ(n, 4) << "user.keep.a did not reach the host: " << std::strerror(errno);
  if (n == 4) {
    EXPECT_EQ(std::string(value, 4), "kept");
  }
  for (const char* name : {"user.x", "trusted.t"}) {
    errno = 0;
    EXPECT_LT(::getxattr(made.c_str(), name, value, sizeof value), 0) << name;
    EXPECT_EQ(errno, ENODATA) << name;
  }
}

// --workspace holding cordon's state directory (e.g. ~/.local) ran the direct mode under `auto`
// without a word (issue 33): said on stderr now.
TEST_F(StagedTest, AWorkspaceHoldingCordonsStateSaysItIsNotStaged) {
  auto r = testing::Run({testing::CordonBin(), "exec", "--workspace", dir_.path(), "--audit-log",
                         Log(), "--", "/bin/true"},
                        env_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("the workspace is not staged ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("holds cordon's stage directory"), std::string::npos) << r.err;
  EXPECT_EQ(LastProcess()["confinement"]["workspace_mode"], "direct") << LastProcess().dump();
}

// The refused list printed names raw (issue 33): an escape sequence retitled the terminal, a
// newline forged cordon's own line, and the 36 shown of 52 hid the one that mattered, with no
// count. Names are written out visibly, one a line; protected names first, a refused
// directory's entries folded into it, the rest counted.
TEST_F(StagedTest, RefusedNamesArePrintedSafelyMostTellingFirstAndCounted) {
  auto r = Exec(
      "i=0; while [ $i -lt 60 ]; do mkfifo fifo$i; i=$((i+1)); done; "
      "mkfifo \"$(printf 'a\\033]0;retitled\\007b')\" "
      "\"$(printf 'b\\ncordon: all changes were committed')\"; "
      "mkdir -p .vscode && : > .vscode/a.json && : > .vscode/b.json && "
      "echo 'touch /tmp/pwned' > .envrc");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find('\033'), std::string::npos) << "a raw escape reached the terminal";
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);)
    EXPECT_NE(line.rfind("cordon: all changes", 0), 0u) << "a name forged a line: " << r.err;
  // The protected names come before the 62 special files, the directory with its count.
  const std::size_t envrc = r.err.find("  .envrc (protected_path)");
  const std::size_t vscode = r.err.find("  .vscode (protected_path, and 2 entries below it)");
  const std::size_t fifo = r.err.find("  fifo");
  ASSERT_NE(envrc, std::string::npos) << r.err;
  ASSERT_NE(vscode, std::string::npos) << r.err;
  ASSERT_NE(fifo, std::string::npos) << r.err;
  EXPECT_LT(envrc, fifo);
  EXPECT_LT(vscode, fifo);
  EXPECT_NE(r.err.find("66 entries the workspace rules refuse"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("b\\u{000A}cordon: all changes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" more\n"), std::string::npos) << "the rest is counted: " << r.err;
}

// chmod 555 made the sweep's rename fail as an ordinary user; the staged commit never needs to
// move anything out of the host tree.
TEST_F(StagedTest, ReadOnlyModesOnPlantedDirectoriesChangeNothing) {
  auto r = Exec(
      "mkdir -p .vscode sub/.git && echo x > .vscode/tasks.json && echo '[core]' > "
      "sub/.git/config && chmod 555 .vscode sub/.git sub && echo ok > kept.txt && chmod 555 .");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Exists(ws_ + "/.vscode"));
  EXPECT_FALSE(Exists(ws_ + "/sub/.git"));
  EXPECT_EQ(ReadFile(ws_ + "/kept.txt"), "ok\n");
}

// A path longer than PATH_MAX, with a protected name at its end: the sweep could not reach it.
TEST_F(StagedTest, AProtectedNameBelowAPathLongerThanPathMaxNeverLands) {
  const std::string seg(200, 'd');
  // Relative steps (a shell's cd builds the whole path, which is too long past level 20).
  auto r = Exec("python3 -c \"import os\nfor i in range(25):\n  os.mkdir('" + seg +
                "'); os.chdir('" + seg +
                "')\nopen('.envrc','w').write('evil')\nos.mkdir('.git')\nopen('.git/config','w')."
                "write('[core]')\nopen('ok.txt','w').write('fine')\n\"");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // Walk down on the host by descriptor: the path is too long for one string.
  int fd = ::open(ws_.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 25; ++i) {
    int next = ::openat(fd, seg.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    ::close(fd);
    ASSERT_GE(next, 0) << "level " << i << " was not installed";
    fd = next;
  }
  struct stat st {};
  EXPECT_NE(::fstatat(fd, ".envrc", &st, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_NE(::fstatat(fd, ".git", &st, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_EQ(::fstatat(fd, "ok.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
  ::close(fd);
  // And the next launch there works (the sweep's failure refused every later launch).
  auto again = Exec("true");
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
}

// A chain of directories just under the listing's depth cap overflowed cordon's stack in the
// recursive listing (SIGSEGV at the commit), and again in the recovery of that stage at every
// later start: the session and every later one died. The commit must fail closed instead, and
// the next launch work.
TEST_F(StagedTest, ATreeDeeperThanTheStackCanWalkFailsTheCallNotCordon) {
  auto r = Exec(
      "echo keep > keep.txt; python3 -c \"import os\nos.mkdir('a'); os.chdir('a')\n"
      "for i in range(4090):\n  os.mkdir('d'); os.chdir('d')\n"
      "open('.envrc','w').write('evil')\n\"");
  EXPECT_EQ(r.signal, 0) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << "a commit that cannot complete fails the call";
  auto again = Exec("echo next > next.txt");
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(ReadFile(ws_ + "/next.txt"), "next\n");
}

// A process that leaves its own file unreadable (chmod 000) made an ordinary user's commit fail
// (the upper file could not be opened): the call failed, the session launched nothing more and
// every other change was lost. The file lands with the mode the process set. (As root the
// open never failed; scripts/test-unprivileged.sh runs this as an ordinary user.)
TEST_F(StagedTest, AnUnreadableFileTheProcessMadeDoesNotFailTheCommit) {
  auto r = Exec("echo hi > x; chmod 000 x; echo ok > y; echo evil > .envrc; chmod 000 .envrc");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/y"), "ok\n");
  struct stat st {};
  ASSERT_EQ(::lstat((ws_ + "/x").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0u);
  EXPECT_FALSE(Exists(ws_ + "/.envrc"));
  auto again = Exec("true");
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
}

// While the process runs, the host sees nothing of what it planted (the sweep's window).
TEST_F(StagedTest, TheHostSeesNothingWhileTheProcessRuns) {
  const std::string out = dir_ / "plant.out";
  pid_t pid = Spawn(
      "mkdir -p .vscode nested && echo '{}' > .vscode/tasks.json && git init -q nested && "
      "echo hello > visible-later.txt && sleep 3",
      out);
  // Poll the host while it runs.
  bool seen = false, later_early = false;
  for (int i = 0; i < 25; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    seen = seen || Exists(ws_ + "/.vscode") || Exists(ws_ + "/nested/.git");
    later_early = later_early || Exists(ws_ + "/visible-later.txt");
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(out);
  EXPECT_FALSE(seen) << "the host saw a planted name while the process ran";
  EXPECT_FALSE(later_early) << "a write reached the host before the commit point";
  EXPECT_FALSE(Exists(ws_ + "/.vscode"));
  EXPECT_FALSE(Exists(ws_ + "/nested/.git"));
  EXPECT_EQ(ReadFile(ws_ + "/visible-later.txt"), "hello\n");
}

// A background swap of a directory for a symlink while cordon acts on the tree turned a file
// outside the workspace into 0777. The commit acts only through descriptors beneath the root.
TEST_F(StagedTest, SymlinkSwapsCannotMakeTheCommitTouchAFileOutside) {
  TempDir outside;
  const std::string victim = outside / "secret";
  WriteFile(victim, "secret\n");
  ::chmod(victim.c_str(), 0600);
  ::chmod(outside.path().c_str(), 0755);
  auto r =
      Exec("i=0; while [ $i -lt 200 ]; do mkdir -p d && chmod 000 d; rm -rf d; ln -sfn '" + victim +
           "' d; rm -f d; i=$((i+1)); done; mkdir -p d; chmod 000 d; rm -rf d; ln -s '" + victim +
           "' d; ln -s '" + outside.path() + "' e; mkdir -p e2; chmod 0777 e2");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  struct stat st {};
  ASSERT_EQ(::lstat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::lstat(outside.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(ReadFile(victim), "secret\n");
  // The symlinks themselves are ordinary entries of the tree: installed as links, never followed.
  ASSERT_EQ(::lstat((ws_ + "/d").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

// The git rules at commit, for every git directory at any depth, with no scan: config, hooks,
// commondir never land; what a commit needs does, and host git works after.
TEST_F(StagedTest, GitCommitReachesTheHostAndGitConfigurationDoesNot) {
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", ws_});
    return testing::Run(args, {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (dir_ / "home")});
  };
  ASSERT_EQ(git({"init", "-q"}).exit_code, 0);
  ASSERT_EQ(git({"config", "user.email", "t@example.org"}).exit_code, 0);
  ASSERT_EQ(git({"config", "user.name", "t"}).exit_code, 0);
  ASSERT_EQ(git({"add", "."}).exit_code, 0);
  ASSERT_EQ(git({"commit", "-qm", "base"}).exit_code, 0);
  const std::string config_before = ReadFile(ws_ + "/.git/config");
  auto r = Exec(
      "export HOME=/tmp GIT_CONFIG_NOSYSTEM=1; echo change >> src/main.c && git add -A && git -c "
      "user.email=a@b -c user.name=a commit -qm agent && git checkout -qb feature && git config "
      "core.fsmonitor /bin/false; echo evil > .git/hooks/pre-commit; chmod +x "
      ".git/hooks/pre-commit; echo ../x > .git/commondir; true");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/.git/config"), config_before);
  EXPECT_FALSE(Exists(ws_ + "/.git/hooks/pre-commit"));
  EXPECT_FALSE(Exists(ws_ + "/.git/commondir"));
  auto log = git({"log", "--format=%s", "-n", "1", "feature"});
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_EQ(log.out, "agent\n");
  auto head = git({"symbolic-ref", "HEAD"});
  EXPECT_EQ(head.out, "refs/heads/feature\n");
  auto status = git({"status", "--porcelain"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.out, "") << "the host's index and tree agree with the commit";
}

// What lands through git is checked like the tree (issue 33, part 1): `git add -f .envrc` put
// .envrc in the host's index, so that the user's next `git checkout -- .` or `reset --hard`
// wrote it into the tree, and a commit of it (on the branch, on a new branch, packed by `git gc`)
// moved the host's refs. Now the host keeps its index and refs, the record names the commit, the
// ref and the path, `exec` exits 123, and what the rules allow still lands in the same call.
TEST_F(StagedTest, GitContentTheRulesRefuseNeverLandsThroughTheIndexOrARef) {
  Policy("[filesystem]\nprotected_names = [\".tool-versions\"]\n");
  auto git = [&](std::vector<std::string> args) { return HostGit(std::move(args)); };
  ASSERT_TRUE(MakeRepository());
  const std::string base = git({"rev-parse", "HEAD"}).out;
  const std::string sandbox_git = "export HOME=/tmp GIT_CONFIG_NOSYSTEM=1; ";
  // Each of the user's everyday commands on its own: what it writes into the tree, it writes
  // from the host's index and HEAD.
  auto host_writes_nothing_refused = [&](const std::string& when) {
    EXPECT_EQ(git({"ls-files", ".envrc", ".tool-versions", "sub/.envrc"}).out, "")
        << "the host's index names a refused path " << when;
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"checkout", "--", "."},
          std::vector<std::string>{"reset", "-q", "--hard"}}) {
      (void)git(args);
      for (const char* name : {"/.envrc", "/.tool-versions", "/sub/.envrc"})
        EXPECT_FALSE(Exists(ws_ + name))
            << name << " reached the tree by git " << args[0] << " " << when;
    }
  };
  auto refusals = [&]() {
    std::vector<Json> out;
    for (const auto& j : Refused())
      if (j.value("reason", "") == "git_content") out.push_back(j);
    return out;
  };

  // 1. The index alone.
  auto r = Exec(sandbox_git + "echo 'touch /tmp/pwned' > .envrc && git add -f .envrc");
  EXPECT_EQ(r.exit_code, 123) << r.out << r.err;
  host_writes_nothing_refused("after git add -f");
  std::vector<Json> found = refusals();
  ASSERT_FALSE(found.empty()) << "no git_content record";
  EXPECT_NE(found.back().value("path", "").find(".git/index"), std::string::npos);
  EXPECT_EQ(found.back()["git"][0].value("path", ""), ".envrc") << found.back().dump();

  // 2. A commit on the branch, one on a new branch above it; and, in the same call, a branch of
  // allowed work that must land.
  r = Exec(sandbox_git +
           "mkdir -p sub && echo x > sub/.envrc && echo 'nodejs 1' > .tool-versions && "
           "git add -f sub/.envrc .tool-versions && git commit -qm planted && "
           "git checkout -qb also && echo y > y && git add y && git commit -qm more && "
           "git checkout -q main~1 && git checkout -qb clean && echo ok > ok.txt && "
           "git add ok.txt && git commit -qm clean");
  EXPECT_EQ(r.exit_code, 123) << r.out << r.err;
  host_writes_nothing_refused("after a commit");
  EXPECT_EQ(git({"rev-parse", "main"}).out, base) << "main moved to the planted commit";
  EXPECT_NE(git({"rev-parse", "--verify", "-q", "also"}).exit_code, 0)
      << "the branch above the planted commit reached the host";
  EXPECT_EQ(git({"log", "--format=%s", "-n", "1", "clean"}).out, "clean\n")
      << "the allowed branch did not land";
  bool named = false;
  for (const auto& j : refusals()) {
    for (const auto& g : j.value("git", Json::array())) {
      named = named || (g.value("path", "") == "sub/.envrc" && g.value("commit", "").size() == 40);
    }
  }
  EXPECT_TRUE(named) << "no record names the planted commit and its path";

  // 3. The same planted on main, then `git gc`: the objects go into a pack, the refs into
  // packed-refs (and the loose ref files are deleted).
  r = Exec(sandbox_git +
           "git checkout -q main && echo x > .envrc && git add -f .envrc && "
           "git commit -qm again && git gc -q --prune=now");
  EXPECT_EQ(r.exit_code, 123) << r.out << r.err;
  host_writes_nothing_refused("after git gc");
  EXPECT_EQ(git({"rev-parse", "main"}).out, base) << "main moved, or was lost, through packed-refs";
  EXPECT_EQ(git({"log", "--format=%s", "-n", "1", "clean"}).out, "clean\n");
  EXPECT_EQ(git({"fsck", "--no-dangling"}).exit_code, 0) << git({"fsck"}).err;
}

// core.hooksPath=.husky (husky, lefthook) and a core.fsmonitor script in the worktree: what
// the repository's own configuration executes never lands (reason repo_executes).
TEST_F(StagedTest, PathsTheRepositorysConfigExecutesNeverLand) {
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", ws_});
    return testing::Run(args, {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (dir_ / "home")});
  };
  ASSERT_EQ(git({"init", "-q"}).exit_code, 0);
  ASSERT_EQ(git({"config", "core.hooksPath", ".husky"}).exit_code, 0);
  ASSERT_EQ(git({"config", "core.fsmonitor", "tools/fsm.sh"}).exit_code, 0);
  WriteFile(ws_ + "/tools/fsm.sh", "#!/bin/sh\nexit 1\n");
  auto r = Exec(
      "mkdir -p .husky && echo 'touch /tmp/x' > .husky/pre-commit && echo evil > "
      "tools/fsm.sh && echo fine > tools/other.sh");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Exists(ws_ + "/.husky"));
  EXPECT_EQ(ReadFile(ws_ + "/tools/fsm.sh"), "#!/bin/sh\nexit 1\n");
  EXPECT_EQ(ReadFile(ws_ + "/tools/other.sh"), "fine\n");
  std::set<std::string> refused;
  for (const auto& j : Refused()) refused.insert(j.value("reason", "") + " " + j.value("path", ""));
  EXPECT_TRUE(refused.contains("repo_executes " + ws_ + "/.husky")) << Joined(refused);
  EXPECT_TRUE(refused.contains("repo_executes " + ws_ + "/tools/fsm.sh")) << Joined(refused);
}

// git appends a reflog through a symlink: .git/logs/HEAD -> ../hooks/post-commit would add a
// line the agent words to a hook the host runs. No symlink lands inside a git directory.
TEST_F(StagedTest, NoSymlinkLandsInsideAGitDirectory) {
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", ws_});
    return testing::Run(args, {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (dir_ / "home")});
  };
  ASSERT_EQ(git({"init", "-q"}).exit_code, 0);
  WriteFile(ws_ + "/.git/hooks/post-commit", "#!/bin/sh\nexit 0\n");
  ::chmod((ws_ + "/.git/hooks/post-commit").c_str(), 0755);
  auto r = Exec(
      "mkdir -p .git/logs/refs/heads && ln -sf ../hooks/post-commit .git/logs/HEAD && ln -sf "
      "../../../hooks/post-commit .git/logs/refs/heads/main && echo ok > .git/logs/plain");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  struct stat st {};
  EXPECT_FALSE(::lstat((ws_ + "/.git/logs/HEAD").c_str(), &st) == 0 && S_ISLNK(st.st_mode));
  EXPECT_FALSE(Exists(ws_ + "/.git/logs/refs/heads/main"));
  EXPECT_EQ(ReadFile(ws_ + "/.git/logs/plain"), "ok\n") << "git's own files there still land";
}

// What a process wrote in a directory granted with --write is staged too: another repository's
// .git/config planted there never lands.
TEST_F(StagedTest, WriteGrantsAreStagedUnderTheSameRules) {
  TempDir other;
  std::filesystem::create_directories(other / "repo/.git");
  WriteFile(other / "repo/.git/config", "[core]\n");
  auto r = Exec("printf '[core]\\n\\tfsmonitor = /bin/false\\n' > '" +
                    (other / "repo/.git/config") + "'; echo data > '" + (other / "out.txt") +
                    "'; echo x > '" + (other / ".envrc") + "'",
                {"--write", other.path()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(other / "repo/.git/config"), "[core]\n");
  EXPECT_EQ(ReadFile(other / "out.txt"), "data\n");
  EXPECT_FALSE(Exists(other / ".envrc"));
}

// Deletions, directory replacement and renames of directories that existed before the call reach
// the host exactly, and the change record lists exactly them.
TEST_F(StagedTest, DeletionsReplacementsAndRenamesAreExactOnTheHostAndInTheRecord) {
  std::filesystem::create_directories(ws_ + "/old/deep");
  for (int i = 0; i < 50; ++i) WriteFile(ws_ + "/old/f" + std::to_string(i), "x\n");
  WriteFile(ws_ + "/old/deep/g", "g\n");
  std::filesystem::create_directories(ws_ + "/replaced");
  WriteFile(ws_ + "/replaced/gone.txt", "gone\n");
  WriteFile(ws_ + "/keep.txt", "keep\n");
  WriteFile(ws_ + "/edit.txt", "before\n");
  auto r = Exec(
      "mv old moved && rm -rf replaced && mkdir replaced && echo new > replaced/new.txt && echo "
      "after > edit.txt && rm -f src/main.c");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Exists(ws_ + "/old"));
  EXPECT_EQ(ReadFile(ws_ + "/moved/deep/g"), "g\n");
  EXPECT_EQ(ReadFile(ws_ + "/moved/f49"), "x\n");
  EXPECT_FALSE(Exists(ws_ + "/replaced/gone.txt"));
  EXPECT_EQ(ReadFile(ws_ + "/replaced/new.txt"), "new\n");
  EXPECT_EQ(ReadFile(ws_ + "/edit.txt"), "after\n");
  EXPECT_EQ(ReadFile(ws_ + "/keep.txt"), "keep\n");
  EXPECT_FALSE(Exists(ws_ + "/src/main.c"));
  const Json changes = LastProcess()["changes"];
  std::set<std::string> listed;
  for (const auto& e : changes["entries"])
    listed.insert(e["kind"].get<std::string>() + " " + e["path"].get<std::string>());
  EXPECT_TRUE(listed.contains("modified edit.txt")) << changes.dump(1);
  EXPECT_TRUE(listed.contains("deleted src/main.c")) << changes.dump(1);
  EXPECT_TRUE(listed.contains("deleted old")) << changes.dump(1);
  EXPECT_TRUE(listed.contains("created replaced/new.txt")) << changes.dump(1);
  EXPECT_FALSE(listed.contains("modified keep.txt")) << changes.dump(1);
  for (const auto& e : changes["entries"]) {
    EXPECT_NE(e["path"], "keep.txt") << "an unchanged file is listed: " << changes.dump(1);
  }
}

// A host edit of a file the process also changed, while it ran: the host's version is kept, the
// process's goes to the quarantine, the result says `conflict` with the path.
TEST_F(StagedTest, AHostEditDuringTheCallIsAConflictAndTheHostVersionIsKept) {
  WriteFile(ws_ + "/shared.txt", "base\n");
  const std::string out = dir_ / "conflict.out";
  pid_t pid = Spawn("sleep 1.731; echo agent > shared.txt; echo mine > other.txt", out);
  EXPECT_TRUE(AwaitSleep("1.731")) << ReadFile(out);
  WriteFile(ws_ + "/shared.txt", "host\n");
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(ReadFile(ws_ + "/shared.txt"), "host\n");
  EXPECT_EQ(ReadFile(ws_ + "/other.txt"), "mine\n");
  const Json changes = LastProcess()["changes"];
  ASSERT_TRUE(changes.contains("conflicts")) << changes.dump(1);
  EXPECT_EQ(changes["conflicts"], Json::array({"shared.txt"})) << changes.dump(1);
}

// The same below a directory the process deleted or replaced: a file the host edited (or made)
// there while the process ran is not lost with the directory; the host's version stays.
TEST_F(StagedTest, AHostEditBelowADirectoryTheProcessDeletedIsAConflict) {
  for (const char* d : {"gone/sub", "replaced/sub"}) {
    std::filesystem::create_directories(ws_ + "/" + d);
    WriteFile(ws_ + "/" + d + "/file", "base\n");
  }
  const std::string out = dir_ / "conflict.out";
  pid_t pid =
      Spawn("sleep 1.732; rm -rf gone replaced && mkdir replaced && echo new > replaced/n", out);
  EXPECT_TRUE(AwaitSleep("1.732")) << ReadFile(out);
  WriteFile(ws_ + "/gone/sub/file", "host\n");
  WriteFile(ws_ + "/replaced/sub/file", "host\n");
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(ReadFile(ws_ + "/gone/sub/file"), "host\n") << ReadFile(out);
  EXPECT_EQ(ReadFile(ws_ + "/replaced/sub/file"), "host\n") << ReadFile(out);
  EXPECT_EQ(ReadFile(ws_ + "/replaced/n"), "new\n");
  const Json changes = LastProcess()["changes"];
  EXPECT_EQ(changes["conflicts"].size(), 2u) << changes.dump(1);
}

// The `recovery` records of a log.
std::vector<Json> Recoveries(const std::string& log) {
  std::vector<Json> out;
  for (auto& j : Records(log)) {
    if (j.value("type", "") == "recovery") out.push_back(j);
  }
  return out;
}

std::set<std::string> Strings(const Json& list) {
  std::set<std::string> out;
  for (const auto& v : list) out.insert(v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

// A stage is committed by the rules of the session that staged it, also when a later cordon,
// started in another workspace under another policy, finishes it (issue 33): workspace A's
// project policy refuses deploy.cfg; cordon is killed in A's commit; the next start, in B, whose
// rules allow that name, must not install it into A. What the recovery did (installed, refused,
// left) is recorded in A's session log, which `cordon audit verify` still proves.
TEST_F(StagedTest, ARecoveredStageIsDecidedByTheRulesOfTheSessionThatStagedIt) {
  std::filesystem::create_directories(ws_ + "/.cordon");
  WriteFile(ws_ + "/.cordon/policy.toml", "[filesystem]\nprotected_names = [\"deploy.cfg\"]\n");
  const std::string stage =
      KillInTheCommit("echo evil > deploy.cfg && mkdir -p sub && echo ok > sub/ok.txt", "4242");
  ASSERT_FALSE(stage.empty());
  ASSERT_FALSE(Exists(ws_ + "/sub/ok.txt"));

  const std::string b = dir_ / "wsb";
  std::filesystem::create_directories(b);
  const std::string b_log = dir_ / "b.jsonl";
  auto r = testing::Run({testing::CordonBin(), "exec", "--workspace", b, "--audit-log", b_log, "--",
                         "/bin/sh", "-c", "echo b > '" + b + "/b.txt'"},
                        env_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(b + "/b.txt"), "b\n");
  // What reached the host: A's rules, not B's.
  EXPECT_FALSE(Exists(ws_ + "/deploy.cfg")) << "A's refused name was installed by B's recovery";
  EXPECT_EQ(ReadFile(ws_ + "/sub/ok.txt"), "ok\n") << "what A's rules allow was lost";
  EXPECT_FALSE(Exists(stage));
  // The record, in A's log.
  const std::string a_session = SessionOf(Log());
  const std::vector<Json> recs = Recoveries(Log());
  ASSERT_EQ(recs.size(), 1u) << ReadFile(Log()) << "\n--- B's log\n"
                             << ReadFile(b_log) << "\n--- B's stderr\n"
                             << r.err;
  const Json& rec = recs[0];
  EXPECT_EQ(rec.value("outcome", ""), "finished") << rec.dump(1);
  EXPECT_EQ(rec.value("stage_session", ""), a_session) << rec.dump(1);
  std::set<std::string> installed, refused;
  for (const auto& e : rec["changes"]["entries"]) installed.insert(e.value("path", ""));
  for (const auto& e : rec["changes"]["refused"])
    refused.insert(e.value("reason", "") + " " + e.value("path", ""));
  EXPECT_TRUE(installed.contains("sub/ok.txt")) << rec.dump(1);
  EXPECT_FALSE(installed.contains("deploy.cfg")) << rec.dump(1);
  EXPECT_TRUE(refused.contains("protected_path deploy.cfg")) << rec.dump(1);
  EXPECT_TRUE(rec["left"].empty()) << rec.dump(1);
  EXPECT_TRUE(Recoveries(b_log).empty()) << ReadFile(b_log);
  // A's log still verifies.
  auto v = testing::Run({testing::CordonBin(), "audit", "verify", Log()}, env_);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  // And B's caller is told, in one line.
  EXPECT_NE(r.err.find("recovered a stage of session " + a_session), std::string::npos) << r.err;
}

// Recovery reads git content as a live commit does (issue 33, part 4 with part 1): cordon is
// killed in the commit of a call that made a git commit of an ordinary file, and in a second of
// one that committed a planted .envrc. The next start finishes both: the first commit and its
// index land (before, recovery had no git reader and refused every index and ref, so a user's
// work was quarantined), the second's stay out of the host's index and refs.
TEST_F(StagedTest, ARecoveredStageLandsTheGitWorkItsRulesAllowAndNoneTheyRefuse) {
  auto git = [&](std::vector<std::string> args) { return HostGit(std::move(args)); };
  ASSERT_TRUE(MakeRepository());
  const std::string sandbox_git = "export HOME=/tmp GIT_CONFIG_NOSYSTEM=1; ";
  auto recover = [&](const std::string& tag) {
    const std::string b = dir_ / ("wsb-" + tag);
    std::filesystem::create_directories(b);
    auto r = testing::Run({testing::CordonBin(), "exec", "--workspace", b, "--audit-log",
                           dir_ / ("b-" + tag + ".jsonl"), "--", "/bin/true"},
                          env_);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  };

  std::string stage = KillInTheCommit(
      sandbox_git + "echo one > one.txt && git add one.txt && git commit -qm one", "4244");
  ASSERT_FALSE(stage.empty());
  ASSERT_NE(git({"log", "--format=%s", "-n", "1"}).out, "one\n");
  recover("1");
  EXPECT_FALSE(Exists(stage));
  EXPECT_EQ(ReadFile(ws_ + "/one.txt"), "one\n");
  EXPECT_EQ(git({"log", "--format=%s", "-n", "1", "main"}).out, "one\n")
      << "the recovered commit's ref did not land";
  EXPECT_EQ(git({"ls-files", "one.txt"}).out, "one.txt\n") << "the recovered index did not land";
  EXPECT_EQ(git({"status", "--porcelain"}).out, "") << "the host's index and tree disagree";
  std::vector<Json> recs = Recoveries(Log());
  ASSERT_EQ(recs.size(), 1u) << ReadFile(Log());
  EXPECT_EQ(recs[0].value("outcome", ""), "finished") << recs[0].dump(1);
  for (const auto& e : recs[0]["changes"].value("refused", Json::array()))
    ADD_FAILURE() << "recovery refused " << e.dump();

  const std::string one = git({"rev-parse", "main"}).out;
  stage = KillInTheCommit(sandbox_git +
                              "echo 'touch /tmp/pwned' > .envrc && git add -f .envrc && "
                              "git commit -qm planted",
                          "4245");
  ASSERT_FALSE(stage.empty());
  recover("2");
  EXPECT_FALSE(Exists(ws_ + "/.envrc"));
  EXPECT_EQ(git({"rev-parse", "main"}).out, one) << "main moved to the planted commit";
  EXPECT_EQ(git({"ls-files", ".envrc"}).out, "") << "the host's index names .envrc";
  (void)git({"checkout", "--", "."});
  (void)git({"reset", "-q", "--hard"});
  EXPECT_FALSE(Exists(ws_ + "/.envrc")) << "git wrote the planted file into the tree";
  recs = Recoveries(Log());
  ASSERT_EQ(recs.size(), 2u) << ReadFile(Log());
  bool named = false;
  for (const auto& e : recs[1]["changes"].value("refused", Json::array()))
    named = named || e.value("reason", "") == "git_content";
  EXPECT_TRUE(named) << "the recovery record does not say git content was refused: "
                     << recs[1].dump(1);
}

// Where the log of the session that staged cannot be extended so that it still verifies (an
// HMAC-keyed chain, whose key the recovering session does not have), the record goes to the
// recovering session's log, naming that session and log, with a copy beside the quarantine; the
// stage is still decided by its own rules, and the keyed log is left as it was.
TEST_F(StagedTest, ARecoveryThatCannotExtendTheStagingLogIsRecordedInTheRecoveringOne) {
  std::filesystem::create_directories(ws_ + "/.cordon");
  WriteFile(ws_ + "/.cordon/policy.toml", "[filesystem]\nprotected_names = [\"deploy.cfg\"]\n");
  const std::string key = dir_ / "hmac.key";
  WriteFile(key, "0123456789abcdef0123456789abcdef\n");
  ::chmod(key.c_str(), 0600);
  const std::string stage = KillInTheCommit("echo evil > deploy.cfg && echo ok > ok.txt", "4243",
                                            {"--audit-key-file", key});
  ASSERT_FALSE(stage.empty());
  const std::string a_log = ReadFile(Log());
  const std::string b = dir_ / "wsb";
  std::filesystem::create_directories(b);
  const std::string b_log = dir_ / "b.jsonl";
  auto r = testing::Run(
      {testing::CordonBin(), "exec", "--workspace", b, "--audit-log", b_log, "--", "true"}, env_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Exists(ws_ + "/deploy.cfg"));
  EXPECT_EQ(ReadFile(ws_ + "/ok.txt"), "ok\n");
  EXPECT_EQ(ReadFile(Log()), a_log) << "the keyed log was changed";
  const std::vector<Json> recs = Recoveries(b_log);
  ASSERT_EQ(recs.size(), 1u) << ReadFile(b_log) << r.err;
  const Json& rec = recs[0];
  EXPECT_EQ(rec.value("stage_session", ""), SessionOf(Log())) << rec.dump(1);
  EXPECT_EQ(rec.value("stage_log", ""), Log()) << rec.dump(1);
  EXPECT_FALSE(rec.value("stage_log_error", "").empty()) << rec.dump(1);
  std::set<std::string> refused;
  for (const auto& e : rec["changes"]["refused"]) refused.insert(e.value("path", ""));
  EXPECT_TRUE(refused.contains("deploy.cfg")) << rec.dump(1);
  const Json copy = Json::parse(ReadFile(rec.value("copy", "")), nullptr, false);
  EXPECT_EQ(copy.value("type", ""), "recovery") << rec.dump(1);
  EXPECT_EQ(copy.value("stage_session", ""), rec.value("stage_session", "")) << copy.dump(1);
  auto v = testing::Run({testing::CordonBin(), "audit", "verify", Log(), "--key-file", key}, env_);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// The usual case: the next session writes the same log (`--audit-log` given again). The record is
// written once, with that session's, and the log verifies.
TEST_F(StagedTest, ARecoveryIntoTheSameLogIsRecordedOnceAndTheLogVerifies) {
  const std::string stage = KillInTheCommit("echo ok > ok.txt && echo evil > .envrc", "4244");
  ASSERT_FALSE(stage.empty());
  auto r = Exec("true");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/ok.txt"), "ok\n");
  EXPECT_FALSE(Exists(ws_ + "/.envrc"));
  const std::vector<Json> recs = Recoveries(Log());
  ASSERT_EQ(recs.size(), 1u) << ReadFile(Log()) << r.err;
  EXPECT_EQ(recs[0].value("session", ""), recs[0].value("recovered_by", "")) << recs[0].dump(1);
  EXPECT_NE(recs[0].value("stage_session", ""), recs[0].value("recovered_by", ""));
  EXPECT_FALSE(recs[0].contains("stage_log_error")) << recs[0].dump(1);
  auto v = testing::Run({testing::CordonBin(), "audit", "verify", Log()}, env_);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// A stage that carries no readable rules (made by an older cordon, or its rules file torn) is
// never installed, whatever its phase: it goes to the quarantine whole, and the record (in the
// recovering session's log, since whose it was is unknown, and a copy beside the quarantine)
// names every path it held. So does a stage killed before its commit.
TEST_F(StagedTest, AStageLeftByAKilledCordonWithoutReadableRulesIsQuarantinedWhole) {
  const std::string session = testing::GoneCordonStages(dir_ / "state");
  // No rules file (an older cordon's), a torn one, one of another shape, and one killed before
  // its commit.
  const std::string no_rules = testing::LeaveStage(session, "1", ws_, "committing");
  WriteFile(no_rules + "/u0/.envrc", "evil\n");
  std::filesystem::create_directories(no_rules + "/u0/sub");
  WriteFile(no_rules + "/u0/sub/finished.txt", "done\n");
  const std::string torn = testing::LeaveStage(session, "2", ws_, "committing");
  WriteFile(torn + "/rules.json", "{\"version\":1,\"session\":\"x\",\"rules\":{\"extra_pro");
  std::filesystem::create_directories(torn + "/u0/sub");
  WriteFile(torn + "/u0/torn.txt", "torn\n");
  const std::string odd = testing::LeaveStage(session, "4", ws_, "committing");
  WriteFile(odd + "/rules.json", "{\"version\":\"one\",\"rules\":[]}\n");
  WriteFile(odd + "/u0/odd.txt", "odd\n");
  const std::string running = testing::LeaveStage(session, "3", ws_, "running");
  std::filesystem::create_directories(running + "/u0/sub");
  WriteFile(running + "/u0/never.txt", "never\n");
  auto r = Exec("true");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* p : {"/sub/finished.txt", "/.envrc", "/torn.txt", "/odd.txt", "/never.txt"})
    EXPECT_FALSE(Exists(ws_ + p)) << p;
  EXPECT_FALSE(Exists(session));
  std::set<std::string> seen;
  for (const auto& j : Recoveries(Log())) {
    EXPECT_EQ(j.value("outcome", ""), "quarantined") << j.dump(1);
    EXPECT_TRUE(Exists(j.value("quarantine", ""))) << j.dump(1);
    EXPECT_TRUE(Exists(j.value("copy", ""))) << j.dump(1);
    EXPECT_FALSE(j.value("stage_log_error", "").empty()) << j.dump(1);
    const std::string left = Joined(Strings(j["left"]));
    seen.insert(j.value("reason", "") + ": " + left);
  }
  EXPECT_TRUE(seen.contains("rules_unreadable: .envrc\nsub\nsub/finished.txt\n")) << Joined(seen);
  EXPECT_TRUE(seen.contains("rules_unreadable: sub\ntorn.txt\n")) << Joined(seen);
  EXPECT_TRUE(seen.contains("never_committed: never.txt\nsub\n")) << Joined(seen);
  EXPECT_TRUE(seen.contains("rules_unreadable: odd.txt\n")) << Joined(seen);
  EXPECT_NE(r.err.find("quarantined whole (rules_unreadable)"), std::string::npos) << r.err;
}

// git takes any directory holding HEAD and objects/ + refs/ for a (bare) git directory when it
// runs there, and obeys its config and hooks: an existing bare repository in the tree (a test
// fixture, a local remote, a --write grant that is one) keeps them, as a `.git` does; a directory
// that holds a HEAD does not become one.
TEST_F(StagedTest, BareRepositoriesInTheTreeKeepTheirConfigAndHooks) {
  auto git = [&](const std::string& at, std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", at});
    return testing::Run(args, {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (dir_ / "home")});
  };
  ASSERT_EQ(git(ws_, {"init", "-q", "--bare", "fixture.git"}).exit_code, 0);
  const std::string config_before = ReadFile(ws_ + "/fixture.git/config");
  std::filesystem::create_directories(ws_ + "/data");
  WriteFile(ws_ + "/data/HEAD", "ref: refs/heads/main\n");
  TempDir remote;
  ASSERT_EQ(git(remote.path(), {"init", "-q", "--bare", "r.git"}).exit_code, 0);
  const std::string remote_config = ReadFile(remote / "r.git/config");
  auto r = Exec(
      "printf '[core]\\n\\tfsmonitor = /bin/false\\n' >> fixture.git/config; echo evil > "
      "fixture.git/hooks/post-update; mkdir -p fixture.git/refs/heads && echo ok > "
      "fixture.git/refs/heads/x; mkdir data/objects data/refs; cp fixture.git/config data/config; "
      "echo evil >> '" +
          (remote / "r.git/config") + "'; echo evil > '" + (remote / "r.git/hooks/pre-receive") +
          "'",
      {"--write", remote / "r.git"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/fixture.git/config"), config_before);
  EXPECT_FALSE(Exists(ws_ + "/fixture.git/hooks/post-update"));
  EXPECT_EQ(ReadFile(ws_ + "/fixture.git/refs/heads/x"), "ok\n") << "refs are git's to write";
  EXPECT_FALSE(Exists(ws_ + "/data/config") && Exists(ws_ + "/data/objects") &&
               Exists(ws_ + "/data/refs"))
      << "data/ became a repository with the agent's config";
  EXPECT_EQ(ReadFile(remote / "r.git/config"), remote_config);
  EXPECT_FALSE(Exists(remote / "r.git/hooks/pre-receive"));
}

// A recovery that died in its commit (a crash: the `recovering` mark it left is still there) is
// not run again at every start, where it would die again: the stage goes to the quarantine.
TEST_F(StagedTest, ARecoveryThatDiedIsQuarantinedNotRunAgain) {
  const std::string stage =
      testing::LeaveStage(testing::GoneCordonStages(dir_ / "state"), "1", ws_, "committing");
  WriteFile(stage + "/recovering", "");
  WriteFile(stage + "/u0/half.txt", "half\n");
  auto r = Exec("true");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Exists(ws_ + "/half.txt"));
  EXPECT_FALSE(Exists(stage));
  bool quarantined = false;
  for (const auto& j : Recoveries(Log())) {
    quarantined |= j.value("reason", "") == "recovery_died" &&
                   j.value("outcome", "") == "quarantined" &&
                   Strings(j["left"]).contains("half.txt");
  }
  EXPECT_TRUE(quarantined) << ReadFile(Log());
}

// cordon exec --plan says what a launch would stage, and cordon doctor names the mode.
TEST_F(StagedTest, PlanAndDoctorSayStaged) {
  auto r = testing::Run({testing::CordonBin(), "exec", "--plan", "--workspace", ws_, "--", "true"},
                        env_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json plan = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(plan.is_object()) << r.out;
  EXPECT_EQ(plan["confinement"]["workspace_mode"], "staged");
  ASSERT_TRUE(plan.contains("staged")) << r.out;
  EXPECT_EQ(plan["staged"][0]["root"], ws_);
  EXPECT_EQ(plan["git_views"].size(), 0u);
  // [sandbox] workspace = "direct" keeps the fallback.
  Policy("[sandbox]\nworkspace = \"direct\"\n");
  auto d = testing::Run({testing::CordonBin(), "exec", "--plan", "--workspace", ws_, "--", "true"},
                        env_);
  Json dplan = Json::parse(d.out, nullptr, false);
  EXPECT_EQ(dplan["confinement"]["workspace_mode"], "direct") << d.out << d.err;
}

}  // namespace
}  // namespace cordon
