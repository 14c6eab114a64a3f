// The direct mode's sweep fails closed (issue 18): each test is one attack found against the
// landed build, run against the real binary and kernel (and, for the sweep's own races, against
// WorkspaceGuard on a real tree). Run as root and as an ordinary user
// (scripts/test-unprivileged.sh): the mode-bit attacks only bite an ordinary user.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "core/unique_fd.h"
#include "runner/host_probe.h"
#include "tests/test_util.h"
#include "workspace/guard.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// A name 200 bytes long: twenty-one of them nest deeper than PATH_MAX.
const std::string kLong(200, 'n');

// Makes `depth` nested directories named kLong below `root` (by descriptor: the path is longer
// than PATH_MAX) and returns the deepest one's fd.
UniqueFd MakeDeep(const std::string& root, int depth) {
  UniqueFd at(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (int i = 0; i < depth && at.valid(); ++i) {
    ::mkdirat(at.get(), kLong.c_str(), 0755);
    at = UniqueFd(::openat(at.get(), kLong.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  return at;
}

// Whether `name` exists in the deepest of MakeDeep's directories.
bool ExistsDeep(const std::string& root, int depth, const std::string& name) {
  UniqueFd at = MakeDeep(root, depth);
  struct stat st {};
  return at.valid() && ::fstatat(at.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// Removes `name` in `dir_fd` and everything below it, by descriptor (std::filesystem gives up
// past PATH_MAX and would leave the tree behind in /tmp).
void RemoveAt(int dir_fd, const std::string& name) {
  UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (sub.valid()) {
    std::vector<std::string> names;
    if (DIR* d = ::fdopendir(::fcntl(sub.get(), F_DUPFD_CLOEXEC, 0))) {
      while (dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          names.emplace_back(e->d_name);
      }
      ::closedir(d);
    }
    for (const auto& n : names) RemoveAt(sub.get(), n);
    ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR);
  } else {
    ::unlinkat(dir_fd, name.c_str(), 0);
  }
}

void RemoveDeep(const std::string& parent) {
  UniqueFd fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.valid()) RemoveAt(fd.get(), kLong);
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

// ---- the sweep itself, on a real tree ----------------------------------------------------

class DirectModeGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_ + "/.git/hooks");
  }
  // A guard whose baseline is the tree as it is now, with a process "running".
  std::unique_ptr<WorkspaceGuard> Guard(GuardOptions opts = {}) {
    auto scan = ScanProtectedPaths(ws_, opts);
    EXPECT_TRUE(scan) << scan.error().message;
    auto g =
        std::make_unique<WorkspaceGuard>(std::vector<std::string>{ws_}, opts, q_,
                                         [this](const GuardEvent& e) { events_.push_back(e); });
    auto token = g->BeforeLaunch();
    EXPECT_TRUE(token) << token.error().message;
    if (scan && token) g->Launched(*token, true, scan->protect, scan->git_dirs);
    return g;
  }
  TempDir dir_;
  std::string ws_;
  // Longer than the workspace's prefix, as ~/.local/state/cordon/quarantine/<session> is.
  std::string q_ = dir_ / ("quarantine-" + std::string(80, 'q'));
  std::vector<GuardEvent> events_;
};

TEST_F(DirectModeGuard, ACapHitFailsTheSweepAndEveryLaterLaunchUntilASweepCompletes) {
  GuardOptions opts;
  opts.max_entries = 300;
  auto guard = Guard(opts);
  // The process plants a name, then makes more entries than the walk may visit.
  WriteFile(ws_ + "/.envrc", "evil");
  std::filesystem::create_directories(ws_ + "/many");
  for (int i = 0; i < 400; ++i) WriteFile(ws_ + "/many/f" + std::to_string(i), "");
  auto swept = guard->AfterProcess();
  ASSERT_FALSE(swept) << "a sweep that could not walk the tree reported success";
  EXPECT_EQ(swept.error().code, Code::kSandboxUnavailable);
  EXPECT_NE(swept.error().message.find(ws_), std::string::npos) << swept.error().message;
  EXPECT_NE(swept.error().message.find("sandbox.max_scan_entries"), std::string::npos)
      << swept.error().message;
  // Every later launch is refused, naming why.
  auto next = guard->BeforeLaunch();
  ASSERT_FALSE(next) << "a launch after a failed sweep was allowed";
  EXPECT_EQ(next.error().code, Code::kSandboxUnavailable);
  EXPECT_NE(next.error().message.find("launches nothing more"), std::string::npos)
      << next.error().message;
  // The operator removes the entries: the next launch's sweep completes, moves the planted name,
  // and the launch goes ahead.
  std::filesystem::remove_all(ws_ + "/many");
  auto fixed = guard->BeforeLaunch();
  EXPECT_TRUE(fixed) << fixed.error().message;
  EXPECT_FALSE(testing::Exists(ws_ + "/.envrc"));
  EXPECT_EQ(ReadFile(q_ + "/.envrc"), "evil");
}

TEST_F(DirectModeGuard, AnEntryTheSweepCannotMoveFailsItAndIsNamed) {
  auto guard = Guard();
  WriteFile(ws_ + "/sub/.envrc", "evil");
  // The quarantine cannot take it (a file where its directory must be; root cannot either).
  WriteFile(q_, "not a directory");
  auto swept = guard->AfterProcess();
  ASSERT_FALSE(swept) << "a sweep that moved nothing reported success";
  EXPECT_NE(swept.error().message.find(q_), std::string::npos) << swept.error().message;
  EXPECT_NE(swept.error().message.find(ws_ + "/sub/.envrc"), std::string::npos)
      << swept.error().message;
  ASSERT_TRUE(guard->broken());
  std::filesystem::remove(q_);
  EXPECT_TRUE(guard->BeforeLaunch());
  EXPECT_FALSE(testing::Exists(ws_ + "/sub/.envrc"));
  EXPECT_FALSE(guard->broken());
}

TEST_F(DirectModeGuard, PlantedNamesInDirectoriesMade555AreStillMoved) {
  // chmod 555 on the planted directory, on the directory holding it, or on the workspace root
  // made the rename fail (EACCES) for an ordinary user, and everything stayed. cordon owns them:
  // it gives itself u+w through the descriptors, moves, and gives the mode back.
  auto guard = Guard();
  std::filesystem::create_directories(ws_ + "/.vscode");
  WriteFile(ws_ + "/.vscode/tasks.json", "evil");
  std::filesystem::create_directories(ws_ + "/sub/.git/hooks");
  WriteFile(ws_ + "/sub/.git/hooks/post-checkout", "evil");
  std::filesystem::create_directories(ws_ + "/p/.idea");
  ASSERT_EQ(::chmod((ws_ + "/.vscode").c_str(), 0555), 0);
  ASSERT_EQ(::chmod((ws_ + "/sub/.git").c_str(), 0555), 0);
  ASSERT_EQ(::chmod((ws_ + "/p").c_str(), 0555), 0);
  ASSERT_EQ(::chmod(ws_.c_str(), 0555), 0);
  auto swept = guard->AfterProcess();
  EXPECT_TRUE(swept) << swept.error().message;
  EXPECT_FALSE(testing::Exists(ws_ + "/.vscode"));
  EXPECT_FALSE(testing::Exists(ws_ + "/sub/.git"));
  EXPECT_FALSE(testing::Exists(ws_ + "/p/.idea"));
  EXPECT_EQ(ReadFile(q_ + "/.vscode/tasks.json"), "evil");
  EXPECT_EQ(ModeOf(ws_), 0555u) << "the root's mode is given back";
  EXPECT_EQ(ModeOf(ws_ + "/p"), 0555u);
  ::chmod(ws_.c_str(), 0755);
  ::chmod((ws_ + "/p").c_str(), 0755);
  ::chmod((q_ + "/.vscode").c_str(), 0755);
  ::chmod((q_ + "/sub/.git").c_str(), 0755);
}

TEST_F(DirectModeGuard, ANameBelowAPathLongerThanPathMaxIsSwept) {
  auto guard = Guard();
  // 21 x 201 bytes: longer than PATH_MAX in the workspace itself.
  ASSERT_GT(21 * (kLong.size() + 1), static_cast<std::size_t>(PATH_MAX));
  {
    UniqueFd deep = MakeDeep(ws_, 21);
    ASSERT_TRUE(deep.valid());
    ASSERT_EQ(::mkdirat(deep.get(), ".vscode", 0755), 0);
  }
  // 20 x 201 bytes: shorter than PATH_MAX here, longer under the quarantine's prefix.
  std::filesystem::create_directories(ws_ + "/b");
  ASSERT_LT(ws_.size() + 2 + 20 * (kLong.size() + 1) + 7, static_cast<std::size_t>(PATH_MAX));
  ASSERT_GT(q_.size() + 2 + 20 * (kLong.size() + 1) + 7, static_cast<std::size_t>(PATH_MAX));
  {
    UniqueFd deep = MakeDeep(ws_ + "/b", 20);
    ASSERT_TRUE(deep.valid());
    UniqueFd f(::openat(deep.get(), ".envrc", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(f.valid());
  }
  auto swept = guard->AfterProcess();
  EXPECT_TRUE(swept) << swept.error().message;
  EXPECT_FALSE(ExistsDeep(ws_, 21, ".vscode")) << "a name below a path past PATH_MAX stayed";
  EXPECT_FALSE(ExistsDeep(ws_ + "/b", 20, ".envrc")) << "a name too long under the quarantine";
  EXPECT_TRUE(ExistsDeep(q_, 21, ".vscode"));
  EXPECT_TRUE(ExistsDeep(q_ + "/b", 20, ".envrc"));
  // The next launch's scan has nothing to bind there.
  auto scan = ScanProtectedPaths(ws_);
  EXPECT_TRUE(scan) << scan.error().message;
  for (const std::string& p : {ws_, ws_ + "/b", q_, q_ + "/b"}) RemoveDeep(p);
}

TEST_F(DirectModeGuard, ADirectorySwappedForASymlinkWhileTheSweepGivesBackItsModeChangesNothing) {
  // The sweep gives u+rwx back to a directory of its uid made unreadable (chmod 077). Done by
  // name, it followed a symlink swapped in meanwhile: a 0600 file outside became 0777.
  const std::string outside = dir_ / "outside";
  WriteFile(outside, "secret");
  ASSERT_EQ(::chmod(outside.c_str(), 0600), 0);
  auto guard = Guard();
  std::filesystem::create_directories(ws_ + "/d");
  std::atomic<bool> stop{false};
  std::atomic<int> swaps{0};
  std::thread swapper([&] {
    // One renameat2(RENAME_EXCHANGE) flips the name between a directory made unreadable
    // (chmod 077, through a descriptor) and a symlink to the file outside; when a sweep has
    // quarantined either, the pair is made again.
    const std::string d = ws_ + "/d", s = ws_ + "/s";
    UniqueFd dir;
    auto setup = [&] {
      for (const std::string& p : {d, s}) {
        if (::rmdir(p.c_str()) != 0) ::unlink(p.c_str());
      }
      ::mkdir(d.c_str(), 0700);
      dir = UniqueFd(::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      ::symlink(outside.c_str(), s.c_str());
    };
    setup();
    while (!stop) {
      ::fchmod(dir.get(), 0077);
      if (::syscall(SYS_renameat2, AT_FDCWD, d.c_str(), AT_FDCWD, s.c_str(), RENAME_EXCHANGE) != 0)
        setup();
      ++swaps;
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int sweeps = 0;
  for (; std::chrono::steady_clock::now() < until && ModeOf(outside) == 0600; ++sweeps)
    (void)guard->Sweep("call_boundary");
  stop = true;
  swapper.join();
  EXPECT_EQ(ModeOf(outside), 0600u) << "the sweep changed a file outside the workspace";
  EXPECT_GT(swaps.load(), 1000) << "the race was not run";
  EXPECT_GT(sweeps, 10) << "the race was not run";
  EXPECT_EQ(ReadFile(outside), "secret");
}

// ---- the real binary ---------------------------------------------------------------------

class DirectModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindOnPath("bwrap").empty()) {
      GTEST_SKIP() << "SKIPPED SECURITY TEST: bwrap is not installed, so cordon fails closed";
    }
    if (!testing::UserNamespacesEnabled()) {
      GTEST_SKIP()
          << "SKIPPED SECURITY TEST: user namespaces are disabled (user.max_user_namespaces=0)";
    }
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_ + "/src");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
    // The direct mode (the fallback where staging cannot be had) is what these tests attack.
    std::filesystem::create_directories(dir_ / "config/cordon/policies.d");
    WriteFile(dir_ / "config/cordon/policies.d/40-direct.toml",
              "[sandbox]\nworkspace = \"direct\"\n");
  }
  testing::RunResult Exec(std::vector<std::string> cmd, std::vector<std::string> opts = {}) {
    std::vector<std::string> argv = {testing::CordonBin(), "exec", "--workspace", ws_,
                                     "--audit-log",        log_};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return testing::Run(argv, env_);
  }
  std::vector<Json> Records(const std::string& type) {
    std::vector<Json> out;
    std::istringstream in(ReadFile(log_));
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == type) out.push_back(j);
    }
    return out;
  }
  TempDir dir_;
  std::string ws_;
  std::string log_ = dir_ / "audit.jsonl";
  std::vector<std::string> env_;
};

// What lands through git is checked like the tree in the direct mode too (issue 33, part 1):
// its git view synced the index and wrote refs/ straight into the host repository, so
// `git add -f .envrc` put .envrc in the host's index and a commit of it moved the host's branch;
// the user's `git checkout -- .` or `reset --hard` then wrote it into the tree. Now the view's
// refs are private copies too, and the index, refs and packed refs a sync-out would land are
// checked first: the host keeps its own, the record names the ref, commit and path, exec exits
// 123, and an allowed commit and branch land as before.
TEST_F(DirectModeTest, GitContentTheRulesRefuseNeverLandsThroughTheIndexOrARef) {
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", ws_});
    return testing::Run(args, {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (dir_ / "home")});
  };
  WriteFile(ws_ + "/src/a.c", "int a;\n");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"init", "-q", "-b", "main"},
                                               {"config", "user.email", "t@example.org"},
                                               {"config", "user.name", "t"},
                                               {"add", "."},
                                               {"commit", "-qm", "base"}}) {
    ASSERT_EQ(git(args).exit_code, 0) << args[0];
  }
  const std::string base = git({"rev-parse", "HEAD"}).out;
  const std::string sandbox_git = "export HOME=/tmp GIT_CONFIG_NOSYSTEM=1; ";
  auto host_writes_nothing_refused = [&](const std::string& when) {
    EXPECT_EQ(git({"ls-files", ".envrc", "sub/.envrc"}).out, "")
        << "the host's index names a refused path " << when;
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"checkout", "--", "."},
          std::vector<std::string>{"reset", "-q", "--hard"}}) {
      (void)git(args);
      for (const char* name : {"/.envrc", "/sub/.envrc"})
        EXPECT_FALSE(std::filesystem::exists(ws_ + name))
            << name << " reached the tree by git " << args[0] << " " << when;
    }
  };
  auto refusals = [&]() {
    std::vector<Json> out;
    for (const auto& j : Records("protected_path_removed"))
      if (j.value("reason", "") == "git_content") out.push_back(j);
    return out;
  };

  // 1. The index alone.
  auto r =
      Exec({"sh", "-c", sandbox_git + "echo 'touch /tmp/pwned' > .envrc && git add -f .envrc"});
  EXPECT_EQ(r.exit_code, 123) << r.out << r.err;
  host_writes_nothing_refused("after git add -f");
  ASSERT_FALSE(refusals().empty()) << ReadFile(log_);
  EXPECT_EQ(refusals().back()["git"][0].value("path", ""), ".envrc") << refusals().back().dump();

  // 2. A commit on the branch, a branch above it, and an allowed branch in the same call.
  r = Exec({"sh", "-c",
            sandbox_git +
                "git reset -q && mkdir -p sub && echo x > sub/.envrc && git add -f sub/.envrc && "
                "git commit -qm planted && git checkout -qb also && echo y > y && git add y && "
                "git commit -qm more && git checkout -q main~1 && git checkout -qb clean && "
                "echo ok > ok.txt && git add ok.txt && git commit -qm clean"});
  EXPECT_EQ(r.exit_code, 123) << r.out << r.err;
  EXPECT_EQ(git({"rev-parse", "main"}).out, base) << "main moved to the planted commit";
  EXPECT_NE(git({"rev-parse", "--verify", "-q", "also"}).exit_code, 0)
      << "the branch above the planted commit reached the host";
  EXPECT_EQ(git({"log", "--format=%s", "-n", "1", "clean"}).out, "clean\n")
      << "the allowed branch did not land";
  host_writes_nothing_refused("after a commit");
  bool named = false;
  for (const auto& j : refusals()) {
    for (const auto& g : j.value("git", Json::array()))
      named = named || (g.value("path", "") == "sub/.envrc" && g.value("commit", "").size() == 40);
  }
  EXPECT_TRUE(named) << "no record names the planted commit and its path: " << ReadFile(log_);

  // 3. The same after `git gc`: the refs go into packed-refs and the loose files are deleted.
  r = Exec({"sh", "-c",
            sandbox_git + "git checkout -q main && echo x > .envrc && git add -f .envrc && "
                          "git commit -qm again && git gc -q --prune=now"});
  EXPECT_EQ(r.exit_code, 123) << r.out << r.err;
  EXPECT_EQ(git({"rev-parse", "main"}).out, base) << "main moved, or was lost, through packed-refs";
  EXPECT_EQ(git({"log", "--format=%s", "-n", "1", "clean"}).out, "clean\n");
  host_writes_nothing_refused("after git gc");
  EXPECT_EQ(git({"fsck", "--no-dangling"}).exit_code, 0) << git({"fsck"}).err;

  // 4. Ordinary work still lands: a commit on main, seen by host git at once.
  r = Exec({"sh", "-c",
            sandbox_git + "git checkout -q main && echo 2 > src/a.c && git commit -qam two"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(git({"log", "--format=%s", "-n", "1", "main"}).out, "two\n");
  EXPECT_EQ(git({"status", "--porcelain"}).out, "") << "the host's index and tree disagree";
}

TEST_F(DirectModeTest, PlantingThenPassingTheEntryCapFailsTheCall) {
  WriteFile(dir_ / "cap.toml", "[sandbox]\nmax_scan_entries = 300\n");
  auto r = Exec({"sh", "-c",
                 "mkdir .vscode && echo x > .envrc && mkdir many && i=0; while [ $i -lt 400 ]; "
                 "do : > many/f$i; i=$((i+1)); done"},
                {"--policy", dir_ / "cap.toml"});
  EXPECT_NE(r.exit_code, 0) << "the call succeeded though its sweep could not walk the tree\n"
                            << r.err;
  EXPECT_NE(r.err.find("sandbox_unavailable"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sweep"), std::string::npos) << r.err;
  auto procs = Records("process");
  ASSERT_EQ(procs.size(), 1u) << ReadFile(log_);
  EXPECT_EQ(procs[0].value("error", Json())["code"], "sandbox_unavailable") << procs[0].dump();
}

TEST_F(DirectModeTest, PlantedDirectoriesMade555AreSwept) {
  auto r = Exec({"sh", "-c",
                 "mkdir .vscode && echo x > .vscode/tasks.json && chmod 555 .vscode && "
                 "git init -q sub && chmod 555 sub/.git && mkdir -p p/.idea && chmod 555 p && "
                 "chmod 555 ."});
  ::chmod(ws_.c_str(), 0755);
  ::chmod((ws_ + "/p").c_str(), 0755);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(testing::Exists(ws_ + "/.vscode")) << "a planted .vscode made 555 stayed";
  EXPECT_FALSE(testing::Exists(ws_ + "/sub/.git")) << "a planted sub/.git made 555 stayed";
  EXPECT_FALSE(testing::Exists(ws_ + "/p/.idea")) << "a name in a 555 directory stayed";
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir_ / "state", ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory()) ::chmod(it->path().c_str(), 0755);
  }
}

TEST_F(DirectModeTest, ANameBelowAPathLongerThanPathMaxIsSweptAndLaterLaunchesWork) {
  auto r = Exec({"python3", "-c",
                 "import os\n"
                 "for i in range(21):\n"
                 "  os.mkdir('" +
                     kLong + "'); os.chdir('" + kLong +
                     "')\n"
                     "os.mkdir('.vscode')\n"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(ExistsDeep(ws_, 21, ".vscode")) << "a name below a path past PATH_MAX stayed";
  auto next = Exec({"true"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
  RemoveDeep(ws_);
  std::error_code ec;
  for (const auto& q : std::filesystem::directory_iterator(dir_ / "state/cordon/quarantine", ec))
    RemoveDeep(q.path().string());
}

TEST_F(DirectModeTest, AQuarantineThatCannotTakeWhatWasPlantedRefusesTheNextLaunch) {
  // One session (cordon serve): the first call's sweep cannot move what it planted; that call
  // fails, and so does every launch after it, until the operator fixes what was named.
  std::filesystem::create_directories(dir_ / "state/cordon");
  WriteFile(dir_ / "state/cordon/quarantine", "not a directory");
  int in[2], out[2];
  ASSERT_EQ(::pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    for (const auto& e : env_) ::putenv(const_cast<char*>(e.c_str()));
    ::execl(testing::CordonBin().c_str(), "cordon", "serve", "--workspace", ws_.c_str(),
            "--audit-log", log_.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  FILE* reader = ::fdopen(out[0], "r");
  auto send = [&](const Json& msg) {
    const std::string line = msg.dump() + "\n";
    return ::write(in[1], line.data(), line.size()) == static_cast<ssize_t>(line.size());
  };
  auto await = [&](int id) {
    char* buf = nullptr;
    std::size_t cap = 0;
    Json found;
    while (found.is_null() && ::getline(&buf, &cap, reader) > 0) {
      Json j = Json::parse(buf, nullptr, false);
      if (j.is_object() && j.contains("id") && j["id"] == id) found = j;
    }
    std::free(buf);
    return found;
  };
  auto shell = [&](int id, const std::string& script) {
    send(Json{
        {"jsonrpc", "2.0"},
        {"id", id},
        {"method", "tools/call"},
        {"params",
         {{"name", "run_shell"}, {"arguments", {{"program", "sh"}, {"args", {"-c", script}}}}}}});
    return await(id);
  };
  send(Json::parse(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"));
  await(1);
  send(Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  const Json planted = shell(2, "echo evil > .envrc");
  const Json refused = shell(3, "echo ran > refused.txt");
  std::filesystem::remove(dir_ / "state/cordon/quarantine");  // the operator's fix
  const Json fixed = shell(4, "echo ran > ran.txt");
  ::close(in[1]);
  while (::fgetc(reader) != EOF) {
  }
  ::fclose(reader);
  int status = 0;
  ::waitpid(pid, &status, 0);
  auto is_error = [](const Json& j) {
    return j.contains("result") && j["result"].value("isError", false);
  };
  EXPECT_TRUE(is_error(planted)) << "the call whose sweep failed succeeded: " << planted.dump();
  EXPECT_NE(planted.dump().find("sandbox_unavailable"), std::string::npos) << planted.dump();
  EXPECT_NE(planted.dump().find(".envrc"), std::string::npos) << planted.dump();
  EXPECT_TRUE(is_error(refused)) << "a launch after a failed sweep ran: " << refused.dump();
  EXPECT_NE(refused.dump().find("launches nothing more"), std::string::npos) << refused.dump();
  EXPECT_FALSE(is_error(fixed)) << fixed.dump();
  EXPECT_FALSE(testing::Exists(ws_ + "/refused.txt")) << "a launch after a failed sweep ran";
  EXPECT_EQ(ReadFile(ws_ + "/ran.txt"), "ran\n") << "the call after the fix ran";
  EXPECT_FALSE(testing::Exists(ws_ + "/.envrc"));
}

}  // namespace
}  // namespace cordon
