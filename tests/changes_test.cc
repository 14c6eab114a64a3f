// Change records (issue 10): what a confined command changed in the writable roots reaches its
// `process` record. The diff is tested as data; every other test runs the real binary
// (`cordon exec`, `cordon serve`) and reads the log.
#include "workspace/changes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/hash.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "runner/host_probe.h"
#include "tests/test_util.h"
#include "workspace/guard.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// ---- the diff, as data -------------------------------------------------------------------

SnapEntry E(std::string path, std::uint64_t ino, std::uint32_t mode = S_IFREG | 0644,
            std::uint64_t size = 1, std::int64_t mtime = 1, std::uint32_t nlink = 1) {
  SnapEntry e;
  e.path = std::move(path);
  e.dev = 1;
  e.ino = ino;
  e.size = size;
  e.mtime_ns = mtime;
  e.ctime_ns = mtime;
  e.mode = mode;
  e.nlink = nlink;
  return e;
}

std::string Summary(const std::vector<FileChange>& changes) {
  std::string s;
  for (const auto& c : changes) {
    s += c.kind + " " + c.path;
    if (!c.from.empty()) s += " <- " + c.from;
    if (c.below > 0) s += " +" + std::to_string(c.below);
    s += "\n";
  }
  return s;
}

std::string Diff(std::vector<SnapEntry> before, std::vector<SnapEntry> after) {
  return Summary(
      DiffRoot(RootSnapshot{"/w", std::move(before)}, RootSnapshot{"/w", std::move(after)}));
}

constexpr std::uint32_t kDir = S_IFDIR | 0755;

TEST(ChangeDiffTest, EachKindFromTwoSnapshots) {
  struct Case {
    const char* what;
    std::vector<SnapEntry> before, after;
    std::string want;
  } cases[] = {
      {"nothing", {E("a", 1)}, {E("a", 1)}, ""},
      {"created", {E("a", 1)}, {E("a", 1), E("b", 2)}, "created b\n"},
      {"modified in place", {E("a", 1)}, {E("a", 1, S_IFREG | 0644, 2, 5)}, "modified a\n"},
      {"replaced by a new inode (sed -i)",
       {E("a", 1)},
       {E("a", 9, S_IFREG | 0644, 1, 5)},
       "modified a\n"},
      {"mode only", {E("a", 1)}, {E("a", 1, S_IFREG | 0600, 1, 1)}, "mode_changed a\n"},
      {"file renamed", {E("a", 1)}, {E("b", 1)}, "renamed b <- a\n"},
      {"hard link",
       {E("a", 1)},
       {E("a", 1, S_IFREG | 0644, 1, 1, 2), E("b", 1, S_IFREG | 0644, 1, 1, 2)},
       "linked b <- a\n"},
      {"directory renamed once, whatever is below it",
       {E("d", 1, kDir), E("d/x", 2), E("d/e", 3, kDir), E("d/e/y", 4)},
       {E("d2", 1, kDir), E("d2/x", 2), E("d2/e", 3, kDir), E("d2/e/y", 4)},
       "renamed d2 <- d\n"},
      {"directory renamed and a file in it edited",
       {E("d", 1, kDir), E("d/x", 2)},
       {E("d2", 1, kDir), E("d2/x", 2, S_IFREG | 0644, 7, 7)},
       "renamed d2 <- d\nmodified d2/x\n"},
      {"deleted tree folds into its directory",
       {E("s", 1, kDir), E("s/a", 2), E("s/b", 3, kDir), E("s/b/c", 4), E("s-x", 5)},
       {E("s-x", 5)},
       "deleted s +3\n"},
      {"moved over an existing name",
       {E("a", 1), E("b", 2)},
       {E("a", 2)},
       "renamed a <- b\ndeleted a\n"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Diff(c.before, c.after), c.want) << c.what;
  }
}

// An entry whose statx pass came after the process changed it (SnapEntry::lost): only its name,
// inode and type are known from before.
SnapEntry Lost(std::string path, std::uint64_t ino, std::uint32_t mode = S_IFREG) {
  SnapEntry e = E(std::move(path), ino, mode, 0, -1);
  e.lost = true;
  e.nlink = 0;
  return e;
}

TEST(ChangeDiffTest, ALostBeforeSideIsReportedChangedWithItsBeforeUnknown) {
  struct Case {
    const char* what;
    std::vector<SnapEntry> before, after;
    std::string want;
  } cases[] = {
      {"lost, same inode, even with equal metadata", {Lost("a", 1)}, {E("a", 1)}, "modified a\n"},
      {"lost, then renamed", {Lost("a", 1)}, {E("b", 1)}, "renamed b <- a\n"},
      {"lost, then deleted", {Lost("a", 1), E("z", 2)}, {E("z", 2)}, "deleted a\n"},
      {"lost, replaced by a new inode", {Lost("a", 1)}, {E("a", 9)}, "modified a\n"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Diff(c.before, c.after), c.want) << c.what;
    auto changes = DiffRoot(RootSnapshot{"/w", c.before}, RootSnapshot{"/w", c.after});
    ASSERT_FALSE(changes.empty()) << c.what;
    EXPECT_TRUE(changes[0].before_unknown) << c.what;
    EXPECT_FALSE(changes[0].bytes_before) << c.what << ": no size is known from before";
    EXPECT_FALSE(changes[0].mode_before) << c.what;
  }
}

TEST(ChangeDiffTest, AnEntryThePassNeverReachedIsDecidedFromTheAfterSide) {
  // Deferred: only its name, inode and type are known. The window opened at t0 = 100: an after
  // entry untouched since (ctime < 100), same inode at the same name, is unchanged.
  auto deferred = [](std::string path, std::uint64_t ino) {
    SnapEntry e = E(std::move(path), ino, S_IFREG, 0, 0);
    e.deferred = true;
    return e;
  };
  struct Case {
    const char* what;
    std::vector<SnapEntry> before, after;
    std::string want;
    bool unknown;
  } cases[] = {
      {"untouched since the window opened",
       {deferred("a", 1)},
       {E("a", 1, S_IFREG | 0644, 5, 50)},
       "",
       false},
      {"changed in the window",
       {deferred("a", 1)},
       {E("a", 1, S_IFREG | 0644, 5, 150)},
       "modified a\n",
       true},
      {"another inode now",
       {deferred("a", 1)},
       {E("a", 9, S_IFREG | 0644, 5, 50)},
       "modified a\n",
       true},
      {"gone", {deferred("a", 1), E("z", 2)}, {E("z", 2)}, "deleted a\n", true},
      {"renamed in the window",
       {deferred("a", 1)},
       {E("b", 1, S_IFREG | 0644, 5, 150)},
       "renamed b <- a\n",
       true},
  };
  for (const auto& c : cases) {
    RootSnapshot before{"/w", c.before};
    before.window_start_ns = 100;
    auto changes = DiffRoot(before, RootSnapshot{"/w", c.after});
    EXPECT_EQ(Summary(changes), c.want) << c.what;
    if (!changes.empty()) {
      EXPECT_EQ(changes[0].before_unknown, c.unknown) << c.what;
      EXPECT_FALSE(changes[0].bytes_before) << c.what;
    }
  }
  // Without a window start (the pass was to run before the launch) nothing is assumed.
  RootSnapshot before{"/w", {deferred("a", 1)}};
  EXPECT_EQ(Summary(DiffRoot(before, RootSnapshot{"/w", {E("a", 1)}})), "modified a\n");
}

TEST(ChangeDiffTest, TheTimestampGranularityIsTheCoarsestDevicesCommonDivisor) {
  auto root = [](std::vector<std::pair<std::uint64_t, std::int64_t>> dev_ctime) {
    RootSnapshot r{"/w", {}};
    for (const auto& [dev, ctime] : dev_ctime) {
      SnapEntry e = E("x", 1);
      e.dev = dev;
      e.ctime_ns = ctime;
      r.entries.push_back(e);
    }
    return r;
  };
  constexpr std::int64_t s = 1000000000;
  EXPECT_EQ(TimestampGranularityNs(root({{1, 1700 * s + 123456789}, {1, 1701 * s + 987654321}})),
            1);
  EXPECT_EQ(TimestampGranularityNs(root({{1, 1700 * s}, {1, 1703 * s}})), s);
  EXPECT_EQ(TimestampGranularityNs(root({{1, 1700 * s}, {1, 1702 * s}})), 2 * s);
  // A seconds filesystem mounted inside a nanosecond one: the coarser decides.
  EXPECT_EQ(TimestampGranularityNs(
                root({{1, 1700 * s + 123456789}, {1, 1701 * s + 7}, {2, 1700 * s}, {2, 1703 * s}})),
            s);
  // Nothing stat-ed, or one stamp only: the coarsest step kept (2 s).
  EXPECT_EQ(TimestampGranularityNs(root({})), 2 * s);
  EXPECT_EQ(TimestampGranularityNs(root({{1, 1700 * s}})), 2 * s);
}

TEST(ChangeDiffTest, ChangesSpreadThroughALargeTreeAreFoundAmongTheUnchangedEntries) {
  // The identical head and tail are short when changes are spread out (a build's outputs): the
  // middle is matched by name, and only what differs reaches the inode indexes.
  std::vector<SnapEntry> before, after;
  for (std::uint64_t i = 0; i < 3000; ++i) {
    before.push_back(E("f" + std::to_string(i), 10 + i));
    after.push_back(E("f" + std::to_string(i), 10 + i));
  }
  after[5] = E("f5", 15, S_IFREG | 0644, 9, 9);               // modified
  after[1500] = E("f1500", 1510, S_IFREG | 0600);             // mode only
  after[2990].path = "g2990";                                 // renamed
  after.insert(after.begin() + 100, E("new", 99999));         // created
  after[2001].nlink = 2;                                      // f2000 gets a second name
  after.push_back(E("link", 2010, S_IFREG | 0644, 1, 1, 2));  // `link`
  after.erase(after.begin() + 2501);                          // f2500 deleted
  EXPECT_EQ(Diff(before, after),
            "mode_changed f1500\ndeleted f2500\nmodified f5\nrenamed g2990 <- f2990\n"
            "linked link <- f2000\ncreated new\n");
}

TEST(ChangeDiffTest, TheWindowStartSeparatesEarlierFromLaterInodeChanges) {
  // The promise the pass beside the process rests on, checked against this kernel's
  // timestamps (coarse, or multigrain since Linux 6.13, which may run ahead of the coarse clock).
  TempDir dir;
  const std::string f = dir / "f";
  auto ctime = [&] {
    struct stat st {};
    EXPECT_EQ(::lstat(f.c_str(), &st), 0);
    return st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
  };
  for (int i = 0; i < 20; ++i) {
    WriteFile(f, "before");
    struct stat st {};
    ASSERT_EQ(::lstat(f.c_str(), &st), 0);  // a query makes the next stamp fine-grained
    WriteFile(f, "before again");
    const std::int64_t earlier = ctime();
    const std::int64_t t0 = ChangeWindowStart();
    EXPECT_LT(earlier, t0) << "round " << i;
    WriteFile(f, "after");
    EXPECT_GE(ctime(), t0) << "round " << i;
  }
}

TEST(ChangeDiffTest, TheStatxPassBesideTheProcessMarksWhatChangedAfterTheLaunchAsLost) {
  TempDir dir;
  const std::string root = dir / "w";
  std::filesystem::create_directories(root + "/e");
  for (const char* f : {"a", "b", "c", "d", "keep", "e/f"}) WriteFile(root + "/" + f, "1\n");
  GuardOptions opts;
  opts.snapshot = true;
  opts.sync_fill_entries = 0;  // always beside the process, as on a large tree
  auto scan = ScanProtectedPaths(root, opts);
  ASSERT_TRUE(scan.has_value()) << scan.error().message;
  ASSERT_TRUE(scan->snapshot);
  TreeSnapshot& snap = *scan->snapshot;
  ASSERT_EQ(snap.Deferred(), 6u) << "files wait for the pass; directories are stat-ed at once";
  // The "process" starts after t0 and changes four files and swaps the directory for a symlink
  // to a look-alike before the pass gets to them.
  const std::int64_t t0 = ChangeWindowStart();
  WriteFile(root + "/a", "1\n2\n");
  ASSERT_EQ(::chmod((root + "/b").c_str(), 0600), 0);
  std::filesystem::rename(root + "/c", root + "/c2");
  std::filesystem::remove(root + "/d");
  std::filesystem::rename(root + "/e", root + "/e-old");
  std::filesystem::create_directories(dir / "elsewhere");
  WriteFile(dir / "elsewhere/f", "secret\n");
  std::filesystem::create_directory_symlink(dir / "elsewhere", root + "/e");
  std::atomic<bool> stop{true};
  FillDeferred(snap, t0, &stop);
  EXPECT_EQ(snap.Deferred(), 6u) << "a pass told to stop leaves the rest deferred";
  FillDeferred(snap, t0);
  EXPECT_EQ(snap.Deferred(), 0u);
  std::map<std::string, const SnapEntry*> by_path;
  for (const auto& e : snap.roots[0].entries) by_path[e.path] = &e;
  for (const char* f : {"a", "b", "c", "d", "e/f"}) {
    ASSERT_TRUE(by_path.count(f)) << f;
    EXPECT_TRUE(by_path[f]->lost) << f << " changed after t0: its before state is unknown";
  }
  ASSERT_TRUE(by_path.count("keep"));
  const SnapEntry& keep = *by_path["keep"];
  struct stat st {};
  ASSERT_EQ(::lstat((root + "/keep").c_str(), &st), 0);
  EXPECT_FALSE(keep.lost);
  EXPECT_EQ(keep.ino, st.st_ino);
  EXPECT_EQ(keep.size, 2u);
  EXPECT_EQ(keep.mode, st.st_mode);
  EXPECT_EQ(keep.ctime_ns, st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec);
  // The diff against the tree after: every change is there, the untouched file is not.
  auto after = WalkWritableRoot(root, opts, true, true);
  ASSERT_TRUE(after.has_value());
  std::string got = Summary(DiffRoot(snap.roots[0], RootSnapshot{root, after->snapshot}));
  EXPECT_EQ(got,
            "modified a\nmodified b\nrenamed c2 <- c\ndeleted d\ncreated e\n"
            "renamed e-old <- e\nmodified e-old/f\n")
      << got;
}

TEST(ChangeDiffTest, ALargeTreesDeferredBeforeSideHasNoFalseOrMissedChanges) {
  // Above SnapshotFill::kSyncFillEntries the launch's walk defers each file's statx to a pass
  // beside the process. One `mv` of a directory or an `rm -rf` of 50 files made the record list
  // thousands of unchanged files as modified (the pass found the moved directory gone, and the
  // walks' pairing never re-synchronised past 32 missing entries), and real changes fell out of
  // the list. Whether the pass ran before the changes, after them, or not at all: 0 false, 0
  // missed.
  for (const std::string when : {"never", "after", "before"}) {
    TempDir dir;
    const std::string root = dir / "w";
    char name[32];
    for (int d = 0; d < 100; ++d) {
      std::snprintf(name, sizeof name, "d%03d", d);
      std::filesystem::create_directories(root + "/" + name);
      for (int f = 0; f < 99; ++f) WriteFile(root + "/" + name + "/f" + std::to_string(f), "1\n");
    }
    std::filesystem::create_directories(root + "/gone");
    for (int f = 0; f < 50; ++f) WriteFile(root + "/gone/f" + std::to_string(f), "1\n");
    std::filesystem::create_directories(root + "/loose");
    for (int f = 0; f < 100; ++f) WriteFile(root + "/loose/l" + std::to_string(f), "1\n");
    // Every ctime before the window opens, cut to its granularity.
    ::usleep(50000);
    GuardOptions opts;
    opts.snapshot = true;
    auto scan = ScanProtectedPaths(root, opts);
    ASSERT_TRUE(scan.has_value()) << scan.error().message;
    ASSERT_TRUE(scan->snapshot);
    ASSERT_GT(scan->snapshot->Deferred(), SnapshotFill::kSyncFillEntries) << "the deferred path";
    SnapshotFill fill(scan->snapshot);  // the window opens
    if (when == "before") FillDeferred(*scan->snapshot, fill.t0_ns());
    std::filesystem::rename(root + "/d005", root + "/d005-moved");
    std::filesystem::remove_all(root + "/gone");
    for (int f = 0; f < 50; ++f) std::filesystem::remove(root + "/loose/l" + std::to_string(f));
    std::set<std::string> edited;
    for (int d = 10; d < 21; ++d) {
      std::snprintf(name, sizeof name, "d%03d", d);
      for (int f = 0; f < 99 && edited.size() < 1000; ++f) {
        const std::string rel = std::string(name) + "/f" + std::to_string(f);
        WriteFile(root + "/" + rel, "2\n");
        edited.insert(rel);
      }
    }
    if (when == "after") FillDeferred(*scan->snapshot, fill.t0_ns());
    auto after = WalkWritableRoot(root, opts, true, true);
    ASSERT_TRUE(after.has_value());
    std::set<std::string> modified, deleted, other;
    for (const FileChange& c :
         DiffRoot(scan->snapshot->roots[0], RootSnapshot{root, after->snapshot})) {
      if (c.kind == "modified") {
        modified.insert(c.path);
      } else if (c.kind == "deleted") {
        deleted.insert(c.path + (c.below > 0 ? " +" + std::to_string(c.below) : ""));
      } else {
        other.insert(c.kind + " " + c.path + (c.from.empty() ? "" : " <- " + c.from));
      }
    }
    std::set<std::string> want_deleted = {"gone +50"};
    for (int f = 0; f < 50; ++f) want_deleted.insert("loose/l" + std::to_string(f));
    std::size_t false_modified = 0, found = 0;
    for (const auto& m : modified) (edited.count(m) ? found : false_modified) += 1;
    EXPECT_EQ(false_modified, 0u) << when << ": unchanged files reported modified";
    EXPECT_EQ(found, edited.size()) << when << ": edits missed";
    EXPECT_EQ(deleted, want_deleted) << when;
    EXPECT_EQ(other, std::set<std::string>{"renamed d005-moved <- d005"}) << when;
  }
}

TEST(ChangeNamesTest, NamesThatAreNotUtf8AreEscapedReversiblyAndNeverCollapse) {
  struct Case {
    std::string in, want;
  } cases[] = {
      {"src/main.cc", "src/main.cc"},
      {"caf\xc3\xa9", "caf\xc3\xa9"},                // valid UTF-8 is kept
      {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},      // four bytes
      {"a\xff", "a\\xff"},                           // never valid
      {"a\xfe", "a\\xfe"},                           // another name, another record
      {"a\\xff", "a\\\\xff"},                        // a backslash in the name itself
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},           // a surrogate
      {"\xc0\xaf", "\\xc0\\xaf"},                    // an overlong '/'
      {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},  // above U+10FFFF
      {"\xe2\x82", "\\xe2\\x82"},                    // cut short
  };
  for (const auto& c : cases) EXPECT_EQ(EscapeName(c.in), c.want) << c.want;

  // In a record: two names that differ only in an invalid byte stay two names.
  TempDir dir;
  const std::string root = dir / "w";
  std::filesystem::create_directories(root + "/old");
  for (int i = 0; i < 4; ++i) WriteFile(root + "/old/f" + std::to_string(i), "x");
  GuardOptions opts;
  auto before = WalkWritableRoot(root, opts, true, true);
  ASSERT_TRUE(before.has_value());
  WriteFile(root + "/x\xff", "1");
  WriteFile(root + "/x\xfe", "2");
  for (int i = 0; i < 6; ++i) WriteFile(root + "/n" + std::to_string(i), "n");
  std::filesystem::remove_all(root + "/old");
  auto after = WalkWritableRoot(root, opts, true, true);
  ASSERT_TRUE(after.has_value());
  TreeSnapshot b, a;
  b.roots.push_back({root, before->snapshot});
  a.roots.push_back({root, after->snapshot});
  ChangeRecorder full;
  Json rec = Json::parse(DumpJson(full.Record(b, a, false)));
  std::set<std::string> paths;
  for (const auto& e : rec["entries"]) paths.insert(e["path"].get<std::string>());
  EXPECT_TRUE(paths.count("x\\xff")) << rec.dump();
  EXPECT_TRUE(paths.count("x\\xfe")) << rec.dump();
  // Cut at its cap, the record says how many changes it left out: what it lists (each with what
  // went with it) and what it omits add up to its counts.
  ChangeRecorder capped(ChangeLimits{.max_entries = 3});
  Json cut = capped.Record(b, a, false);
  std::uint64_t counted = 0, listed = 0;
  for (const auto& [kind, n] : cut["counts"].items()) counted += n.get<std::uint64_t>();
  for (const auto& e : cut["entries"]) listed += 1 + e.value("below", std::uint64_t{0});
  EXPECT_EQ(cut["entries"].size(), 3u);
  EXPECT_EQ(counted, 13u) << "8 created, old/ deleted with its 4 files";
  EXPECT_EQ(listed + cut["omitted"].get<std::uint64_t>(), counted) << cut.dump();
}

// ---- the real binary ---------------------------------------------------------------------

class ChangesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindOnPath("bwrap").empty()) {
      SECURITY_SKIP("bwrap is not installed, so cordon fails closed");
    }
    if (!testing::UserNamespacesEnabled()) {
      SECURITY_SKIP("user namespaces are disabled (user.max_user_namespaces=0)");
    }
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_ + "/.git/objects");
    std::filesystem::create_directories(ws_ + "/.git/refs");
    WriteFile(ws_ + "/.git/HEAD", "ref: refs/heads/main\n");
    WriteFile(ws_ + "/.git/config", "[core]\n");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
    // ADR 0004's differ (two walks) is the direct mode's change record; the staged mode's is the
    // commit (StagedTest.DeletionsReplacementsAndRenamesAreExactOnTheHostAndInTheRecord).
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

  // One `cordon serve` session that makes these tools/call requests one after the other, each
  // once the answer to the one before has come (serve runs calls concurrently otherwise).
  testing::RunResult Serve(const std::vector<Json>& calls) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return {};
    const std::vector<std::string> argv = {testing::CordonBin(), "serve", "--workspace", ws_,
                                           "--audit-log",        log_};
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      for (const auto& e : env_) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> cargv;
      for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
      cargv.push_back(nullptr);
      ::execv(cargv[0], cargv.data());
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
      bool found = false;
      while (!found && ::getline(&buf, &cap, reader) > 0) {
        Json j = Json::parse(buf, nullptr, false);
        found = j.is_object() && j.contains("id") && j["id"] == id;
      }
      std::free(buf);
      return found;
    };
    bool ok = send(Json::parse(
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"));
    ok = ok && await(1) && send(Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    int id = 2;
    for (const auto& c : calls) {
      ok =
          ok && send(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"}, {"params", c}});
      ok = ok && await(id++);
    }
    ::close(in[1]);
    while (::fgetc(reader) != EOF) {
    }
    ::fclose(reader);
    int status = 0;
    ::waitpid(pid, &status, 0);
    testing::RunResult r;
    r.exit_code = ok && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }

  static Json Shell(const std::string& script, bool background = false) {
    Json args = {{"program", "sh"}, {"args", {"-c", script}}};
    if (background) args["background"] = true;
    return {{"name", "run_shell"}, {"arguments", args}};
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

  // The changes of the only (or last) process record.
  Json Changes() {
    auto procs = Records("process");
    if (procs.empty()) return Json();
    return procs.back().value("changes", Json());
  }

  static std::vector<Json> Entries(const Json& changes, const std::string& kind) {
    std::vector<Json> out;
    if (!changes.is_object() || !changes.contains("entries")) return out;
    for (const auto& e : changes["entries"]) {
      if (e.value("kind", "") == kind) out.push_back(e);
    }
    return out;
  }

  TempDir dir_;
  std::string ws_;
  std::string log_ = dir_ / "audit.jsonl";
  std::vector<std::string> env_;
};

// A filesystem that keeps whole seconds (ext4 with 128-byte inodes, what mke2fs makes below
// 512 MiB) stamps a change in the window with t0's second, before t0: the window start is cut to
// the granularity, so a change the pass beside the process did not see first is still found.
TEST_F(ChangesTest, OnAFilesystemKeepingSecondsAChangeInTheWindowIsStillFound) {
  if (::geteuid() != 0 || FindOnPath("mkfs.ext4").empty() || FindOnPath("mount").empty()) {
    GTEST_SKIP() << "SKIPPED SECURITY TEST: needs root and mkfs.ext4 to mount an ext4 with "
                    "128-byte inodes (seconds timestamps)";
  }
  const std::string img = dir_ / "small.img", mnt = dir_ / "mnt";
  std::filesystem::create_directories(mnt);
  WriteFile(img, "");
  ASSERT_EQ(::truncate(img.c_str(), 200 << 20), 0);
  ASSERT_EQ(testing::Run({FindOnPath("mkfs.ext4"), "-q", "-F", "-I", "128", img}, {}).exit_code, 0);
  auto m = testing::Run({FindOnPath("mount"), "-o", "loop", img, mnt}, {});
  if (m.exit_code != 0) GTEST_SKIP() << "SKIPPED SECURITY TEST: loop mount failed: " << m.err;
  struct Unmount {
    std::string at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{mnt};
  ws_ = mnt + "/ws";
  std::filesystem::create_directories(ws_ + "/.git/objects");
  std::filesystem::create_directories(ws_ + "/.git/refs");
  WriteFile(ws_ + "/.git/HEAD", "ref: refs/heads/main\n");
  WriteFile(ws_ + "/.git/config", "[core]\n");
  for (int d = 0; d < 40; ++d) {  // 40,000 entries: far past the launch's own pass
    const std::string dir = ws_ + "/d" + std::to_string(d);
    std::filesystem::create_directories(dir);
    for (int f = 0; f < 1000; ++f) {
      UniqueFd fd(
          ::open((dir + "/f" + std::to_string(f)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
      ASSERT_TRUE(fd.valid());
    }
  }
  struct stat st {};
  ASSERT_EQ(::stat((ws_ + "/d0/f0").c_str(), &st), 0);
  if (st.st_ctim.tv_nsec != 0) GTEST_SKIP() << "SKIPPED: this ext4 keeps nanoseconds";
  ::sleep(2);  // the tree is older than any window start's second
  // Each run writes one file at once and keeps the CPUs busy for a while (the pass runs on idle
  // CPU only); a few runs, so that the write shares t0's second in some.
  for (int run = 0; run < 3; ++run) {
    const std::string file = "d39/f99" + std::to_string(run);
    auto r = Exec({"sh", "-c",
                   "echo changed >> " + file +
                       "; for k in 1 2 3; do timeout 1 sh -c 'while :; do :; done' & done; wait"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Json c = Changes();
    ASSERT_TRUE(c.is_object()) << ReadFile(log_);
    bool found = false;
    for (const auto& e : Entries(c, "modified")) found = found || e["path"] == file;
    EXPECT_TRUE(found) << "run " << run << ": " << c.dump(2);
  }
}

TEST_F(ChangesTest, RmRfSrcIsRecordedAsOneDeletedDirectory) {
  WriteFile(ws_ + "/src/a.c", "int a;\n");
  WriteFile(ws_ + "/src/lib/b.c", "int bb;\n");
  WriteFile(ws_ + "/keep.txt", "k\n");
  auto r = Exec({"rm", "-rf", "src"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json c = Changes();
  ASSERT_TRUE(c.is_object()) << "the process record carries no changes:\n" << ReadFile(log_);
  auto del = Entries(c, "deleted");
  ASSERT_EQ(del.size(), 1u) << c.dump(2);
  EXPECT_EQ(del[0]["path"], "src");
  EXPECT_EQ(del[0]["type"], "dir");
  EXPECT_EQ(del[0]["below"], 3);  // a.c, lib, lib/b.c
  EXPECT_EQ(del[0]["bytes_before"], 7 + 8);
  EXPECT_EQ(c["counts"]["deleted"], 4);
  EXPECT_EQ(c["entries"].size(), 1u) << c.dump(2);
}

TEST_F(ChangesTest, SedInPlaceIsAModificationWithTheHashAfter) {
  WriteFile(ws_ + "/conf.txt", "mode=old\n");
  auto r = Exec({"sed", "-i", "s/old/newer/", "conf.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json c = Changes();
  ASSERT_TRUE(c.is_object()) << ReadFile(log_);
  auto mod = Entries(c, "modified");
  ASSERT_EQ(mod.size(), 1u) << c.dump(2);
  EXPECT_EQ(mod[0]["path"], "conf.txt");
  EXPECT_EQ(mod[0]["bytes_before"], 9);
  EXPECT_EQ(mod[0]["bytes_after"], 11);
  EXPECT_EQ(mod[0]["sha256_after"], Sha256Hex("mode=newer\n"));
  // Nothing else: sed's temporary file came and went within the run.
  EXPECT_EQ(c["entries"].size(), 1u) << c.dump(2);
}

TEST_F(ChangesTest, ADirectoryRenameIsOneEntryNotOneDeleteAndCreatePerFile) {
  for (int i = 0; i < 300; ++i) WriteFile(ws_ + "/dir/sub/f" + std::to_string(i), "x");
  auto r = Exec({"mv", "dir", "dir2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json c = Changes();
  ASSERT_TRUE(c.is_object()) << ReadFile(log_);
  ASSERT_EQ(c["entries"].size(), 1u) << c.dump(2);
  EXPECT_EQ(c["entries"][0]["kind"], "renamed");
  EXPECT_EQ(c["entries"][0]["from"], "dir");
  EXPECT_EQ(c["entries"][0]["path"], "dir2");
  EXPECT_EQ(c["entries"][0]["type"], "dir");
  EXPECT_EQ(c["counts"]["deleted"], 0);
  EXPECT_EQ(c["counts"]["created"], 0);
  EXPECT_EQ(c["omitted"], 0);
}

TEST_F(ChangesTest, AHardLinkIsANewNameOfAnExistingFile) {
  WriteFile(ws_ + "/a", "shared\n");
  auto r = Exec({"ln", "a", "b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json c = Changes();
  ASSERT_TRUE(c.is_object()) << ReadFile(log_);
  auto linked = Entries(c, "linked");
  ASSERT_EQ(linked.size(), 1u) << c.dump(2);
  EXPECT_EQ(linked[0]["path"], "b");
  EXPECT_EQ(linked[0]["from"], "a");
  EXPECT_EQ(c["counts"]["created"], 0) << c.dump(2);
  EXPECT_EQ(c["counts"]["modified"], 0) << c.dump(2);
}

TEST_F(ChangesTest, AModeOnlyChangeIsRecordedWithBothModes) {
  WriteFile(ws_ + "/f", "secret-ish\n");
  ::chmod((ws_ + "/f").c_str(), 0644);
  auto r = Exec({"chmod", "600", "f"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json c = Changes();
  ASSERT_TRUE(c.is_object()) << ReadFile(log_);
  auto m = Entries(c, "mode_changed");
  ASSERT_EQ(m.size(), 1u) << c.dump(2);
  EXPECT_EQ(m[0]["path"], "f");
  EXPECT_EQ(m[0]["mode_before"], "644");
  EXPECT_EQ(m[0]["mode_after"], "600");
  EXPECT_FALSE(m[0].contains("sha256_after")) << "no content changed";
}

// A same-size rewrite whose mtime is set back (touch -d) leaves only ctime changed, which a
// process cannot set: it is still a modification, with the hash after.
TEST_F(ChangesTest, ARewriteWithItsMtimeSetBackIsStillAModification) {
  WriteFile(ws_ + "/t.txt", "AAAAAAAAAAAAAAAA\n");
  const timespec old[2] = {{1577836800, 0}, {1577836800, 0}};  // 2020-01-01
  ASSERT_EQ(::utimensat(AT_FDCWD, (ws_ + "/t.txt").c_str(), old, 0), 0);
  auto r = Exec({"sh", "-c",
                 "printf 'BBBBBBBBBBBBBBBB\\n' > t.txt && touch -d @1577836800 t.txt && "
                 "stat -c '%s %Y' t.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json c = Changes();
  ASSERT_TRUE(c.is_object()) << ReadFile(log_);
  auto m = Entries(c, "modified");
  ASSERT_EQ(m.size(), 1u) << c.dump(2);
  EXPECT_EQ(m[0]["path"], "t.txt");
  EXPECT_EQ(m[0]["sha256_after"], Sha256Hex("BBBBBBBBBBBBBBBB\n")) << m[0].dump();
}

TEST_F(ChangesTest, CreatingAndDeletingWithinTheRunLeavesNothing) {
  WriteFile(ws_ + "/stay", "s\n");
  auto r = Exec({"sh", "-c", "echo x > tmp && mkdir d && echo y > d/z && rm -r tmp d"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json c = Changes();
  ASSERT_TRUE(c.is_object()) << "an empty change list is still recorded:\n" << ReadFile(log_);
  EXPECT_TRUE(c["entries"].empty()) << c.dump(2);
  for (const auto& [kind, n] : c["counts"].items()) EXPECT_EQ(n, 0) << kind;
}

TEST_F(ChangesTest, ARewriteWithTheSameContentIsTouchedWithEqualHashes) {
  // The first call hashes what it created; the second finds that hash in the session's cache
  // (keyed by dev, ino, size, mtime, ctime) for its sha256_before.
  auto r = Serve({Shell("printf same > f"), Shell("sleep 0.05; printf same > f")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto procs = Records("process");
  ASSERT_EQ(procs.size(), 2u) << ReadFile(log_);
  auto created = Entries(procs[0]["changes"], "created");
  ASSERT_EQ(created.size(), 1u) << procs[0].dump(2);
  EXPECT_EQ(created[0]["sha256_after"], Sha256Hex("same"));
  auto touched = Entries(procs[1]["changes"], "touched");
  ASSERT_EQ(touched.size(), 1u) << procs[1].dump(2);
  EXPECT_EQ(touched[0]["path"], "f");
  EXPECT_EQ(touched[0]["sha256_before"], Sha256Hex("same"));
  EXPECT_EQ(touched[0]["sha256_after"], Sha256Hex("same"));
}

TEST_F(ChangesTest, ABackgroundJobsWritesAfterItsCallReturnedAreInItsOwnRecord) {
  auto r = Serve({Shell("sleep 1; echo late > late.txt", true), Shell("sleep 3")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json job_record;
  std::uint64_t job_seq = 0, first_finished_seq = 0;
  for (const auto& p : Records("process")) {
    if (p.contains("job")) {
      job_record = p;
      job_seq = p["seq"];
    }
  }
  for (const auto& f : Records("tool_finished")) {
    if (first_finished_seq == 0) first_finished_seq = f["seq"];
  }
  ASSERT_TRUE(job_record.is_object()) << ReadFile(log_);
  EXPECT_GT(job_seq, first_finished_seq) << "the job's record comes when it ends";
  auto created = Entries(job_record["changes"], "created");
  ASSERT_EQ(created.size(), 1u) << job_record.dump(2);
  EXPECT_EQ(created[0]["path"], "late.txt");
  EXPECT_EQ(created[0]["sha256_after"], Sha256Hex("late\n"));
  // The foreground `sleep 3` ran meanwhile: both windows are marked as shared.
  EXPECT_EQ(job_record["changes"]["concurrent"], true);
}

TEST_F(ChangesTest, MoreThanTheCapIsCountedNotListed) {
  auto r = Exec({"sh", "-c",
                 "mkdir many && i=0; while [ $i -lt 250 ]; do echo $i > many/f$i; "
                 "i=$((i+1)); done"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json c = Changes();
  ASSERT_TRUE(c.is_object()) << ReadFile(log_);
  EXPECT_EQ(c["entries"].size(), 200u);
  EXPECT_EQ(c["counts"]["created"], 251);  // many/ and its 250 files
  EXPECT_EQ(c["omitted"], 51);
  EXPECT_LT(ReadFile(log_).size(), 200u * 1024) << "one bounded record";
}

TEST_F(ChangesTest, SymlinksAreRecordedNeverFollowedAndGitInternalsAreCounted) {
  auto r = Exec({"sh", "-c", "ln -s /etc/passwd link && echo o > .git/objects/obj"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json c = Changes();
  ASSERT_TRUE(c.is_object()) << ReadFile(log_);
  auto created = Entries(c, "created");
  ASSERT_EQ(created.size(), 1u) << c.dump(2);
  EXPECT_EQ(created[0]["path"], "link");
  EXPECT_EQ(created[0]["type"], "symlink");
  EXPECT_FALSE(created[0].contains("sha256_after")) << "a symlink is never followed";
  EXPECT_EQ(c["git"]["created"], 1) << c.dump(2);
}

TEST_F(ChangesTest, TurnedOffByPolicyTheRecordHasNoChanges) {
  WriteFile(dir_ / "off.toml", "[audit]\nfile_changes = false\n");
  auto r = Exec({"touch", "x"}, {"--policy", dir_ / "off.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto procs = Records("process");
  ASSERT_EQ(procs.size(), 1u) << ReadFile(log_);
  EXPECT_FALSE(procs[0].contains("changes"));
}

}  // namespace
}  // namespace cordon
