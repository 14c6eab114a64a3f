// SIGKILL in the middle of a write, at least 200 times: the target always holds the whole old
// content or the whole new content, and the audit log is intact or merely torn at its tail.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <random>
#include <thread>

#include "core/text.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, a[0], &fa, nullptr, a.data(), e.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

TEST(KillMidWrite, TargetIsAlwaysWholeOldOrWholeNew) {
  TempDir dir;
  const std::string target = dir / "ws/data.txt";
  const std::string contents[2] = {std::string(3u << 20, 'a') + "\nend-a\n",
                                   std::string(5u << 20, 'b') + "\nend-b\n"};
  WriteFile(target, contents[0]);
  for (int i = 0; i < 2; ++i) {
    Json patch = {
        {"patches", {{{"op", "replace"}, {"path", "data.txt"}, {"content", contents[i]}}}}};
    WriteFile(dir / ("patch" + std::to_string(i) + ".json"), patch.dump());
  }
  const std::vector<std::string> env = {"XDG_CONFIG_HOME=" + (dir / "config"),
                                        "PATH=/usr/bin:/bin"};
  auto argv_for = [&](int which) {
    // Built in two steps: GCC 12's -Wrestrict misreads `"@" + std::string` at -O2/-O3.
    std::string patch_arg = "@";
    patch_arg += dir / ("patch" + std::to_string(which) + ".json");
    return std::vector<std::string>{testing::CordonBin(), "call",     "write_patch",
                                    "--workspace",        dir / "ws", "--audit-log",
                                    dir / "audit.jsonl",  "--json",   patch_arg};
  };
  // Measure one uninterrupted write so kill times cover the whole call.
  auto t0 = std::chrono::steady_clock::now();
  auto full = testing::Run(argv_for(1), env);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  auto span_us = std::max<long>(2000, std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now() - t0)
                                          .count());
  ASSERT_EQ(ReadFile(target), contents[1]);

  std::mt19937 rng(20261130);
  int current = 1, killed = 0, completed = 0;
  // Keep going until at least 200 writers died by SIGKILL (bounded at 1500 attempts).
  for (int i = 0; i < 1500 && killed < 200; ++i) {
    const int next = 1 - current;
    pid_t pid = Spawn(argv_for(next), env);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<long>(0, span_us)(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
      ++killed;
    } else {
      // The writer finished first (a loaded machine changes timings): aim earlier next time.
      ++completed;
      span_us = std::max<long>(500, span_us * 3 / 4);
    }
    const std::string now = ReadFile(target);
    ASSERT_TRUE(now == contents[0] || now == contents[1])
        << "iteration " << i << ": target holds " << now.size() << " bytes, neither whole version";
    current = now == contents[next] ? next : current;
  }
  EXPECT_GE(killed, 200) << "completed without a kill: " << completed;
  // The log survives too: intact, or torn only at its last line.
  auto verify = testing::Run({testing::CordonBin(), "audit", "verify", dir / "audit.jsonl"}, env);
  EXPECT_TRUE(verify.exit_code == 0 || verify.exit_code == 4) << verify.out;
}

}  // namespace
}  // namespace cordon
