// Workspace containment: normalization table, then the kernel's answer for symlinks, "..",
// special files, and atomic install semantics.
#include "core/fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>

#include "core/walk.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(NormalizeWorkspacePath, Table) {
  struct Case {
    std::string in;
    std::optional<std::string> out;
    Code code;
  };
  const Case cases[] = {
      {"a/b.txt", "a/b.txt", Code::kInternal},
      {"./a//b/./c", "a/b/c", Code::kInternal},
      {"a/../b", "b", Code::kInternal},
      {".", ".", Code::kInternal},
      {"/ws/root/x", "x", Code::kInternal},
      {"/ws/root", ".", Code::kInternal},
      {"/ws/rootx/y", std::nullopt, Code::kOutsideWorkspace},
      {"/etc/passwd", std::nullopt, Code::kOutsideWorkspace},
      {"..", std::nullopt, Code::kOutsideWorkspace},
      {"a/../../b", std::nullopt, Code::kOutsideWorkspace},
      {"", std::nullopt, Code::kInvalidInput},
      {std::string("a\0b", 3), std::nullopt, Code::kInvalidInput},
      {std::string(5000, 'a'), std::nullopt, Code::kInvalidInput},
  };
  for (const auto& c : cases) {
    auto r = NormalizeWorkspacePath("/ws/root", c.in);
    if (c.out) {
      ASSERT_TRUE(r) << c.in << ": " << r.error().message;
      EXPECT_EQ(*r, *c.out);
    } else {
      ASSERT_FALSE(r) << c.in;
      EXPECT_EQ(r.error().code, c.code) << c.in;
    }
  }
}

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_ / "ws/a.txt", "alpha\n");
    WriteFile(dir_ / "outside/secret.txt", "secret\n");
    auto ws = Workspace::Open(dir_ / "ws");
    ASSERT_TRUE(ws);
    ws_ = std::move(*ws);
  }
  TempDir dir_;
  Workspace ws_;
};

TEST_F(WorkspaceTest, ReadsRegularFiles) {
  auto fc = ws_.ReadRegular("a.txt", 1 << 20);
  ASSERT_TRUE(fc);
  EXPECT_EQ(fc->data, "alpha\n");
}

TEST_F(WorkspaceTest, SymlinkToOutsideIsRefusedByTheKernel) {
  ASSERT_EQ(::symlink((dir_ / "outside/secret.txt").c_str(), (dir_ / "ws/link").c_str()), 0);
  ASSERT_EQ(::symlink("../outside", (dir_ / "ws/dirlink").c_str()), 0);
  ASSERT_EQ(::symlink("a.txt", (dir_ / "ws/inner").c_str()), 0);
  for (const char* p : {"link", "dirlink/secret.txt", "inner"}) {
    auto r = ws_.ReadRegular(p, 1 << 20);
    ASSERT_FALSE(r) << p;
    EXPECT_EQ(r.error().code, Code::kInvalidInput) << p;
    EXPECT_NE(r.error().message.find("symbolic link"), std::string::npos);
  }
}

TEST_F(WorkspaceTest, WritesThroughSymlinkedParentAreRefused) {
  ASSERT_EQ(::symlink("../outside", (dir_ / "ws/dirlink").c_str()), 0);
  auto r = ws_.CreateExclusive("dirlink/new.txt", "x");
  ASSERT_FALSE(r);
  EXPECT_FALSE(testing::Exists(dir_ / "outside/new.txt"));
  // A symlink as the final component is not replaced either.
  ASSERT_EQ(::symlink((dir_ / "outside/secret.txt").c_str(), (dir_ / "ws/leaf").c_str()), 0);
  auto c = ws_.CreateExclusive("leaf", "x");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, Code::kAlreadyExists);
  EXPECT_EQ(testing::ReadFile(dir_ / "outside/secret.txt"), "secret\n");
}

TEST_F(WorkspaceTest, SpecialFilesAreRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "ws/fifo").c_str(), 0600), 0);
  auto r = ws_.ReadRegular("fifo", 1 << 20);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kUnsupportedFileType);
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string sp = dir_ / "ws/sock";
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sp.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto rs = ws_.ReadRegular("sock", 1 << 20);
  ::close(s);
  ASSERT_FALSE(rs);
  EXPECT_EQ(rs.error().code, Code::kUnsupportedFileType);
  auto rd = ws_.ReadRegular(".", 1 << 20);
  ASSERT_FALSE(rd);
  EXPECT_EQ(rd.error().code, Code::kUnsupportedFileType);
}

TEST_F(WorkspaceTest, TooLargeIsReported) {
  auto r = ws_.ReadRegular("a.txt", 3);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kTooLarge);
}

TEST_F(WorkspaceTest, CreateNeverClobbers) {
  auto r = ws_.CreateExclusive("a.txt", "new");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kAlreadyExists);
  EXPECT_EQ(testing::ReadFile(dir_ / "ws/a.txt"), "alpha\n");
  auto ok = ws_.CreateExclusive("deep/er/b.txt", "beta");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(testing::ReadFile(dir_ / "ws/deep/er/b.txt"), "beta");
  EXPECT_FALSE(ok->existed);
}

TEST_F(WorkspaceTest, ReplacePreservesModeAndLeavesNoTemp) {
  ASSERT_EQ(::chmod((dir_ / "ws/a.txt").c_str(), 0751), 0);
  auto fc = ws_.ReadRegular("a.txt", 1 << 20);
  ASSERT_TRUE(fc);
  auto w = ws_.AtomicReplace("a.txt", "beta\n", *fc);
  ASSERT_TRUE(w) << w.error().message;
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "ws/a.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0751u);
  EXPECT_EQ(testing::ReadFile(dir_ / "ws/a.txt"), "beta\n");
  EXPECT_EQ(w->bytes_before, 6u);
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "ws")) {
    EXPECT_EQ(e.path().filename().string().find(".cordon-tmp"), std::string::npos);
  }
}

TEST_F(WorkspaceTest, KilledWritersTemporaryFilesAreSweptByTheNextWrite) {
  // A dead writer's pid: a child that has exited and been reaped.
  pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string d = std::to_string(dead), live = std::to_string(::getppid());
  auto plant = [&](const std::string& name, bool old) {
    WriteFile(dir_ / ("ws/" + name), "half a write");
    if (old) {
      const timespec times[2] = {{0, UTIME_OMIT}, {std::time(nullptr) - 120, 0}};
      ASSERT_EQ(::utimensat(AT_FDCWD, (dir_ / ("ws/" + name)).c_str(), times, 0), 0);
    }
  };
  plant(".cordon-tmp-" + d + "-a.txt-0123456789ab", true);   // dead and old: swept
  plant(".cordon-tmp-" + d + "-a.txt-fresh0000000", false);  // dead but fresh: kept (another host?)
  plant(".cordon-tmp-" + live + "-a.txt-alive000000", true);  // its writer lives: kept
  plant(".cordon-tmp-notapid-a.txt-000000000000", true);      // not ours to judge: kept
  auto fc = ws_.ReadRegular("a.txt", 1 << 20);
  ASSERT_TRUE(fc);
  ASSERT_TRUE(ws_.AtomicReplace("a.txt", "beta\n", *fc));
  EXPECT_FALSE(testing::Exists(dir_ / ("ws/.cordon-tmp-" + d + "-a.txt-0123456789ab")));
  EXPECT_TRUE(testing::Exists(dir_ / ("ws/.cordon-tmp-" + d + "-a.txt-fresh0000000")));
  EXPECT_TRUE(testing::Exists(dir_ / ("ws/.cordon-tmp-" + live + "-a.txt-alive000000")));
  EXPECT_TRUE(testing::Exists(dir_ / "ws/.cordon-tmp-notapid-a.txt-000000000000"));
  EXPECT_EQ(testing::ReadFile(dir_ / "ws/a.txt"), "beta\n");
}

TEST_F(WorkspaceTest, ReplaceDetectsAConcurrentChange) {
  auto fc = ws_.ReadRegular("a.txt", 1 << 20);
  ASSERT_TRUE(fc);
  WriteFile(dir_ / "ws/a.txt", "someone else wrote this, longer\n");
  auto w = ws_.AtomicReplace("a.txt", "mine\n", *fc);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, Code::kConflict);
  EXPECT_EQ(testing::ReadFile(dir_ / "ws/a.txt"), "someone else wrote this, longer\n");
}

TEST_F(WorkspaceTest, ParentThatIsAFileIsNotFound) {
  auto r = ws_.CreateExclusive("a.txt/child", "x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kNotFound);
}

// core/walk.h: the one bounded descriptor walk. Its promises, whatever the caller: a symlink
// is never followed, a depth past the bound fails or is reported (never a crash, never silent),
// the entry bound likewise, and a directory can be removed on the way back up.
UniqueFd MakeDeep(const std::string& root, int levels) {
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (int i = 0; i < levels && fd.valid(); ++i) {
    if (::mkdirat(fd.get(), "d", 0755) != 0) return UniqueFd();
    fd = UniqueFd(::openat(fd.get(), "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  return fd;
}

WalkHooks DescendAll(std::vector<std::string>* seen) {
  WalkHooks h;
  h.visit = [seen](const WalkEntry& e) -> Result<Visit> {
    if (seen != nullptr) seen->push_back(*e.rel);
    return Visit::kDescend;  // asked of every entry: the walk itself refuses what is no directory
  };
  return h;
}

TEST(WalkTree, NeverFollowsASymlinkEvenWhenAskedTo) {
  TempDir dir, outside;
  WriteFile(outside / "secret", "s");
  WriteFile(dir / "a/file", "f");
  std::filesystem::create_directory_symlink(outside.path(), dir / "a/link");
  std::filesystem::create_directory_symlink(outside.path(), dir / "link-at-root");
  UniqueFd root(::open(dir.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  std::vector<std::string> seen;
  auto r = WalkTree(root.get(), {.sorted = true}, DescendAll(&seen));
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "a/file", "a/link", "link-at-root"}));
  EXPECT_EQ(r->directories, 2u);
  EXPECT_FALSE(r->truncated);
  // With an `unopenable` hook the caller decides every refusal, a symlink's included (a
  // listing that must fail closed when a directory is swapped for a link sees it).
  WalkHooks h = DescendAll(nullptr);
  std::vector<int> errs;
  h.unopenable = [&](const WalkEntry&, int err) -> Result<UniqueFd> {
    errs.push_back(err);
    return UniqueFd();
  };
  ASSERT_TRUE(WalkTree(root.get(), {.sorted = true}, h));
  EXPECT_EQ(errs.size(), 3u) << "a/file, a/link and link-at-root";
  for (int e : errs) EXPECT_TRUE(e == ELOOP || e == ENOTDIR) << e;
}

TEST(WalkTree, ADeepTreeFailsOrIsReportedAndNeverCrashes) {
  TempDir dir;
  // Deeper than a recursive walk with a getdents buffer per level could go on an 8 MiB stack.
  ASSERT_TRUE(MakeDeep(dir.path(), 600).valid());
  UniqueFd root(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  WalkOptions fail{.max_depth = 300, .what = "the test tree"};
  auto r = WalkTree(root.get(), fail, DescendAll(nullptr));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kTooLarge);
  EXPECT_NE(r.error().message.find("300 directories deep in the test tree"), std::string::npos)
      << r.error().message;
  WalkOptions skip{.max_depth = 300, .too_deep = TooDeep::kSkip};
  std::vector<std::string> seen;
  r = WalkTree(root.get(), skip, DescendAll(&seen));
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_TRUE(r->truncated);
  // Directories 1..300 are listed: their entries (and the root's) are seen, the 301st's not.
  EXPECT_EQ(seen.size(), 301u) << "every directory down to the bound, none below";
  EXPECT_EQ(r->directories, 301u);
  WalkOptions all{.max_depth = 1000};
  r = WalkTree(root.get(), all, DescendAll(nullptr));
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->entries, 600u);
}

TEST(WalkTree, TheEntryBoundFailsOrStops) {
  TempDir dir;
  for (int i = 0; i < 20; ++i) WriteFile(dir / ("f" + std::to_string(i)), "x");
  UniqueFd root(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto r = WalkTree(root.get(), {.max_entries = 10}, DescendAll(nullptr));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kTooLarge);
  std::vector<std::string> seen;
  r = WalkTree(root.get(), {.max_entries = 10, .too_many = TooDeep::kSkip}, DescendAll(&seen));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->truncated);
  EXPECT_TRUE(seen.empty()) << "the bound holds before the visitor sees the directory";
}

TEST(WalkTree, LeaveRunsAfterTheContentsSoATreeCanBeRemoved) {
  TempDir dir;
  WriteFile(dir / "x/y/z/file", "f");
  WriteFile(dir / "x/other", "o");
  ::chmod((dir / "x/y").c_str(), 0500);  // its parent's mode does not stop the removal
  UniqueFd root(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  WalkHooks h;
  h.visit = [](const WalkEntry& e) -> Result<Visit> {
    if (e.type == DT_DIR) return Visit::kDescend;
    if (::unlinkat(e.dir_fd, e.name, 0) != 0) return SysFail(Code::kInternal, "unlink", *e.rel);
    return Visit::kNext;
  };
  h.enter = [](const WalkEntry&, int fd) -> Status {
    ::fchmod(fd, 0700);
    return {};
  };
  std::vector<std::string> left;
  h.leave = [&](const WalkEntry& e) -> Status {
    left.push_back(*e.rel);
    if (::unlinkat(e.dir_fd, e.name, AT_REMOVEDIR) != 0)
      return SysFail(Code::kInternal, "rmdir", *e.rel);
    return {};
  };
  auto r = WalkTree(root.get(), {.sorted = true}, h);
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(left, (std::vector<std::string>{"x/y/z", "x/y", "x"}));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace cordon
