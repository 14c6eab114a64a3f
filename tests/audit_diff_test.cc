// `cordon audit diff` and the before-images store: the line diff and its unified form (table
// cases, and random texts checked against an LCS), the store's reads and writes, the policy keys,
// and the real binary: a replace_range with the store on, a committed file changed by run_shell
// `sed -i` (verified from HEAD), hashes only without either, a bad session id, a tampered store
// entry, a symlink at the after path, and the store unreadable from inside the sandbox.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/before_images.h"
#include "core/hash.h"
#include "core/line_diff.h"
#include "core/text.h"
#include "policy/policy.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::RunResult;
using testing::TempDir;
using testing::WriteFile;

// ---- the line diff ----

TEST(LineDiffTest, UnifiedDiffTableCases) {
  struct Case {
    const char* a;
    const char* b;
    const char* want;
  };
  const Case cases[] = {
      {"x\n", "x\n", ""},
      {"a\nb\nc\n", "a\nB\nc\n", "--- a\n+++ b\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
      {"", "new\n", "--- a\n+++ b\n@@ -0,0 +1 @@\n+new\n"},
      {"gone\n", "", "--- a\n+++ b\n@@ -1 +0,0 @@\n-gone\n"},
      {"a\nb", "a\nb\n",
       "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
      {"1\n2\n3\n4\n5\n6\n7\n8\n", "0\n1\n2\n3\n4\n5\n6\n7\n8\n",
       "--- a\n+++ b\n@@ -1,3 +1,4 @@\n+0\n 1\n 2\n 3\n"},
      {"1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\n5\n6\n7\n",
       "--- a\n+++ b\n@@ -5,4 +5,3 @@\n 5\n 6\n 7\n-8\n"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(UnifiedDiff(c.a, c.b, "a", "b"), c.want) << "a=" << c.a << " b=" << c.b;
  }
}

TEST(LineDiffTest, ChangesSixLinesApartShareAHunkAndSevenApartDoNot) {
  auto lines = [](int n, int change1, int change2) {
    std::string s;
    for (int i = 1; i <= n; ++i) {
      s += (i == change1 || i == change2 ? "X" : "") + std::to_string(i) + "\n";
    }
    return s;
  };
  const std::string base = lines(30, 0, 0);
  // Lines 5 and 12: 6 equal lines between them (6..11) = 2 x context: one hunk.
  const std::string one = UnifiedDiff(base, lines(30, 5, 12), "a", "b");
  EXPECT_NE(one.find("@@ -2,14 +2,14 @@\n"), std::string::npos) << one;
  EXPECT_EQ(one.find("@@ -", one.find("@@ -") + 1), std::string::npos) << one;
  // Lines 5 and 13: 7 equal lines between: two hunks.
  const std::string two = UnifiedDiff(base, lines(30, 5, 13), "a", "b");
  EXPECT_NE(two.find("@@ -2,7 +2,7 @@\n"), std::string::npos) << two;
  EXPECT_NE(two.find("@@ -10,7 +10,7 @@\n"), std::string::npos) << two;
}

// Applies an edit script to a; checks it is well formed.
std::string Apply(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b,
                  const std::vector<LineEdit>& edits) {
  std::string out;
  std::size_t ai = 0, bi = 0;
  for (const auto& e : edits) {
    if (e.op == ' ') {
      EXPECT_EQ(e.a, ai);
      EXPECT_EQ(e.b, bi);
      EXPECT_EQ(a[e.a], b[e.b]);
      out += a[ai++];
      ++bi;
    } else if (e.op == '-') {
      EXPECT_EQ(e.a, ai);
      ++ai;
    } else {
      EXPECT_EQ(e.b, bi);
      out += b[bi++];
    }
  }
  EXPECT_EQ(ai, a.size());
  EXPECT_EQ(bi, b.size());
  return out;
}

std::size_t Lcs(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
  std::vector<std::vector<std::size_t>> t(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = a.size(); i-- > 0;) {
    for (std::size_t j = b.size(); j-- > 0;) {
      t[i][j] = a[i] == b[j] ? t[i + 1][j + 1] + 1 : std::max(t[i + 1][j], t[i][j + 1]);
    }
  }
  return t[0][0];
}

TEST(LineDiffTest, RandomTextsRoundTripWithAShortestScript) {
  std::mt19937 rng(22);
  for (int iter = 0; iter < 400; ++iter) {
    auto text = [&rng] {
      std::string s;
      const int n = static_cast<int>(rng() % 25);
      for (int i = 0; i < n; ++i) s += std::string(1, static_cast<char>('a' + rng() % 4)) + "\n";
      if (rng() % 4 == 0) s += "z";  // no newline at the end
      return s;
    };
    const std::string ta = text(), tb = text();
    const auto a = SplitLines(ta), b = SplitLines(tb);
    const auto edits = DiffLines(a, b);
    EXPECT_EQ(Apply(a, b, edits), tb);
    std::size_t changed = 0;
    for (const auto& e : edits) changed += e.op != ' ';
    EXPECT_EQ(changed, a.size() + b.size() - 2 * Lcs(a, b)) << ta << "|" << tb;
    // Past the edit bound the script is longer, never wrong.
    EXPECT_EQ(Apply(a, b, DiffLines(a, b, 2)), tb);
  }
}

// ---- the store ----

TEST(BeforeImageStoreTest, StoresReadsBackAndRefusesWhatDoesNotHash) {
  TempDir dir;
  const std::string store = dir / "state/cordon/before-images";
  BeforeImageStore s(store, {.max_file_bytes = 16, .max_session_bytes = 24});
  const std::string old = "old content\n";
  const std::string sha = Sha256Hex(old);
  EXPECT_EQ(s.Put(old, sha).status, "stored");
  EXPECT_EQ(s.Put(old, sha).status, "stored");  // there already: no bytes counted twice
  EXPECT_EQ(s.stored_bytes(), old.size());
  struct stat st {};
  ASSERT_EQ(::stat(store.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((store + "/" + sha).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = ReadBeforeImage(store, sha, 1 << 20);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, old);
  // Caps: per file, then per session.
  const std::string big(17, 'x');
  EXPECT_EQ(s.Put(big, Sha256Hex(big)).status, "over_file_cap");
  const std::string mid(13, 'y');
  EXPECT_EQ(s.Put(mid, Sha256Hex(mid)).status, "over_session_cap");
  EXPECT_EQ(s.Put("x", Sha256Hex("y")).status, "failed");  // the bytes do not hash to the name
  // Tampered: not used.
  WriteFile(store + "/" + sha, "other content\n");
  auto bad = ReadBeforeImage(store, sha, 1 << 20);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Code::kConflict);
  // A symlink at an entry's name is not followed; a name that is not a hash is refused.
  WriteFile(dir / "outside", old);
  ASSERT_EQ(::unlink((store + "/" + sha).c_str()), 0);
  ASSERT_EQ(::symlink((dir / "outside").c_str(), (store + "/" + sha).c_str()), 0);
  EXPECT_FALSE(ReadBeforeImage(store, sha, 1 << 20));
  EXPECT_EQ(ReadBeforeImage(store, "../outside", 1 << 20).error().code, Code::kInvalidInput);
  // The store replaces the symlink with the right bytes (rename over it), never writing through.
  BeforeImageStore again(store, {});
  EXPECT_EQ(again.Put(old, sha).status, "stored");
  EXPECT_EQ(ReadFile(dir / "outside"), old);
  ASSERT_EQ(::lstat((store + "/" + sha).c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(BeforeImageStoreTest, AStoreThatCannotBeMadeFailsEachPutWithItsReason) {
  TempDir dir;
  WriteFile(dir / "file", "x");
  BeforeImageStore s(dir / "file/before-images", {});
  const BeforeImageOutcome o = s.Put("abc", Sha256Hex("abc"));
  EXPECT_EQ(o.status, "failed");
  EXPECT_NE(o.error.find("file/before-images"), std::string::npos) << o.error;
}

TEST(BeforeImagePolicyTest, OnlyALayerTheUserControlsTurnsItOn) {
  TempDir dir;
  WriteFile(dir / "user/50.toml",
            "[audit]\nbefore_images = true\nbefore_images_max_file_bytes = 4096\n");
  WriteFile(dir / "ws/.cordon/policy.toml",
            "[audit]\nbefore_images = false\nbefore_images_max_session_bytes = 1\n");
  PolicySources sources;
  sources.dirs = {testing::ShippedPolicyDir(), dir / "user"};
  auto p = LoadPolicy(sources);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->audit_before_images);
  EXPECT_EQ(p->audit_before_images_max_file_bytes, 4096);
  sources.project_file = dir / "ws/.cordon/policy.toml";
  auto q = LoadPolicy(sources);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_TRUE(q->audit_before_images) << "a project file turned it off";
  EXPECT_EQ(q->audit_before_images_max_session_bytes, 64 << 20);
  std::string notes;
  for (const auto& n : q->notes) notes += n + "\n";
  EXPECT_NE(notes.find("a project file cannot set audit.before_images"), std::string::npos)
      << notes;
  // A project file cannot turn it on either.
  PolicySources only_project;
  only_project.dirs = {testing::ShippedPolicyDir()};
  WriteFile(dir / "ws2/.cordon/policy.toml", "[audit]\nbefore_images = true\n");
  only_project.project_file = dir / "ws2/.cordon/policy.toml";
  auto r = LoadPolicy(only_project);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->audit_before_images);
  // A bad value is an error wherever it is.
  WriteFile(dir / "bad/50.toml", "[audit]\nbefore_images = \"yes\"\n");
  sources = {};
  sources.dirs = {testing::ShippedPolicyDir(), dir / "bad"};
  auto bad = LoadPolicy(sources);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("audit.before_images must be true or false"),
            std::string::npos)
      << bad.error().message;
}

// ---- the real binary ----

class AuditDiffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    std::filesystem::create_directories(dir_ / "home");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "HOME=" + (dir_ / "home")};
  }
  void StoreOn() {
    WriteFile(dir_ / "config/cordon/policies.d/50-images.toml", "[audit]\nbefore_images = true\n");
  }
  std::string Store() const { return dir_ / "state/cordon/before-images"; }
  std::string Log() const { return dir_ / "audit.jsonl"; }
  RunResult Cordon(std::vector<std::string> args) {
    args.insert(args.begin(), testing::CordonBin());
    return testing::Run(args, env_);
  }
  RunResult Call(const std::string& tool, const std::string& json) {
    return Cordon({"call", tool, "--workspace", ws_, "--audit-log", Log(), "--json", json});
  }
  std::vector<Json> Records(const std::string& type) {
    std::vector<Json> out;
    std::istringstream in(ReadFile(Log()));
    for (std::string l; std::getline(in, l);) {
      Json j = Json::parse(l, nullptr, false);
      if (j.is_object() && j.value("type", "") == type) out.push_back(j);
    }
    return out;
  }
  // The last session's id (each `cordon call` is one session).
  std::string LastSession() {
    auto s = Records("session_started");
    return s.empty() ? "" : s.back().value("session", "");
  }
  RunResult Diff(const std::string& session, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"audit", "diff", Log(), "--session", session};
    args.insert(args.end(), extra.begin(), extra.end());
    return Cordon(args);
  }
  Json DiffJson(const std::string& session) {
    auto r = Diff(session, {"--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    Json j = Json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out;
    return j;
  }
  bool Staged(std::string* why) {
    if (::access("/usr/bin/bwrap", X_OK) != 0 || !testing::UserNamespacesEnabled()) {
      *why = "bwrap or user namespaces are missing";
      return false;
    }
    auto r = Cordon({"doctor", "--json"});
    Json d = Json::parse(r.out, nullptr, false);
    for (const auto& c : d.is_object() ? d.value("checks", Json::array()) : Json::array()) {
      if (c.value("name", "") == "workspace_staging") {
        *why = c.value("detail", "");
        return c.value("ok", false);
      }
    }
    *why = r.out + r.err;
    return false;
  }
  void Git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {
        "/usr/bin/git", "-C", ws_, "-c", "user.name=t", "-c", "user.email=t@example.test"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = testing::Run(argv, env_);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }

  TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
};

TEST_F(AuditDiffTest, AReplaceRangeWithTheStoreOnShowsAUnifiedDiffRedacted) {
  StoreOn();
  WriteFile(ws_ + "/app.cfg",
            "name = demo\ntoken = ghp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\nlevel = 1\n");
  auto r = Call("replace_range",
                R"({"path":"app.cfg","old_string":"level = 1","new_string":"level = 2"})");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto writes = Records("file_write");
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].value("before_image", ""), "stored") << writes[0].dump();
  const std::string sha = writes[0]["sha256_before"].get<std::string>();
  // Raw bytes, 0600 in a 0700 directory.
  EXPECT_EQ(ReadFile(Store() + "/" + sha),
            "name = demo\ntoken = ghp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\nlevel = 1\n");
  struct stat st {};
  ASSERT_EQ(::stat(Store().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string session = LastSession();
  auto text = Diff(session.substr(0, 8));  // a prefix, as show --session takes
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("--- a/app.cfg\n+++ b/app.cfg\n@@ -1,3 +1,3 @@\n name = demo\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("\n-level = 1\n+level = 2\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(store, verified)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(disk, verified)"), std::string::npos) << text.out;
  // The secret in the context line is redacted as the diff is printed.
  EXPECT_EQ(text.out.find("ghp_AAAA"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" token = [REDACTED:"), std::string::npos) << text.out;
  Json j = DiffJson(session);
  ASSERT_EQ(j["files"].size(), 1u) << j.dump();
  EXPECT_EQ(j["files"][0]["before"]["source"], "store");
  EXPECT_EQ(j["files"][0]["after"]["source"], "disk");
  EXPECT_GE(j["files"][0].value("redactions", 0), 1);
  EXPECT_EQ(j["counts"]["before"]["store"], 1);
  EXPECT_EQ(j["verification"]["verdict"], "intact");
}

// A hunk whose context holds only a private key's body lines (its BEGIN line is further up) shows
// none of them: each side is redacted whole before the diff is made.
TEST_F(AuditDiffTest, AKeysBodyInAHunksContextIsRedactedToo) {
  StoreOn();
  std::string key = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
  for (int i = 0; i < 8; ++i)
    key +=
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAA" + std::to_string(i) + "\n";
  key += "-----END OPENSSH PRIVATE KEY-----\n";
  WriteFile(ws_ + "/deploy.cfg", key + "level = 1\n");
  auto r = Call("replace_range",
                R"({"path":"deploy.cfg","old_string":"level = 1","new_string":"level = 2"})");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto text = Diff(LastSession());
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("+level = 2"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("[REDACTED:"), std::string::npos) << text.out;
}

TEST_F(AuditDiffTest, ACommittedFileChangedBySedIsDiffedVerifiedFromHeadAndStoredWhenOn) {
  std::string why;
  if (!Staged(&why)) SECURITY_SKIP("this host cannot stage the workspace: " << why);
  WriteFile(ws_ + "/notes.txt", "one\ntwo\nthree\n");
  Git({"init", "-q"});
  Git({"add", "notes.txt"});
  Git({"commit", "-q", "-m", "base"});
  auto r = Call("run_shell", R"({"program":"sed","args":["-i","s/two/TWO/","notes.txt"]})");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_EQ(ReadFile(ws_ + "/notes.txt"), "one\nTWO\nthree\n");
  auto procs = Records("process");
  ASSERT_FALSE(procs.empty());
  const Json& entry = procs.back()["changes"]["entries"][0];
  ASSERT_EQ(entry.value("path", ""), "notes.txt") << procs.back().dump();
  ASSERT_TRUE(entry.contains("sha256_before")) << entry.dump();  // the staged commit hashed it
  EXPECT_FALSE(entry.contains("before_image")) << "the store is off";
  auto text = Diff(LastSession());
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("(HEAD, verified)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"), std::string::npos)
      << text.out;
  // The same with the store on: the commit kept the before-image as it installed the change.
  StoreOn();
  Git({"commit", "-q", "-am", "second"});
  ASSERT_EQ(
      Call("run_shell", R"({"program":"sed","args":["-i","s/one/ONE/","notes.txt"]})").exit_code,
      0);
  const Json stored = Records("process").back()["changes"]["entries"][0];
  EXPECT_EQ(stored.value("before_image", ""), "stored") << stored.dump();
  Json j = DiffJson(LastSession());
  ASSERT_EQ(j["files"].size(), 1u) << j.dump();
  EXPECT_EQ(j["files"][0]["before"]["source"], "store") << j.dump();
  EXPECT_NE(j["files"][0].value("diff", "").find("-one\n+ONE\n"), std::string::npos) << j.dump();
}

// A file the agent replaces with a symlink loses its content as a deleted one does: the commit
// hashes it and keeps its before-image (it kept neither before).
TEST_F(AuditDiffTest, AFileReplacedByASymlinkKeepsItsBeforeImage) {
  std::string why;
  if (!Staged(&why)) SECURITY_SKIP("this host cannot stage the workspace: " << why);
  WriteFile(ws_ + "/important.c", "int main(void) { return 0; }\n");
  StoreOn();
  auto r = Call("run_shell", R"({"program":"ln","args":["-sf","elsewhere","important.c"]})");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json process = Records("process").back();  // a copy: the loop must not outlive it
  Json gone;
  for (const Json& e : process["changes"]["entries"]) {
    if (e.value("path", "") == "important.c") gone = e;
  }
  ASSERT_TRUE(gone.is_object()) << process.dump();
  EXPECT_EQ(gone.value("type", ""), "symlink") << gone.dump();
  ASSERT_TRUE(gone.contains("sha256_before")) << gone.dump();
  EXPECT_EQ(gone.value("before_image", ""), "stored") << gone.dump();
  EXPECT_EQ(ReadFile(Store() + "/" + gone["sha256_before"].get<std::string>()),
            "int main(void) { return 0; }\n");
}

TEST_F(AuditDiffTest, AGitCommitInTheSandboxKeepsNoImagesOfGitsOwnFiles) {
  std::string why;
  if (!Staged(&why)) SECURITY_SKIP("this host cannot stage the workspace: " << why);
  WriteFile(ws_ + "/notes.txt", "one\n");
  Git({"init", "-q"});
  Git({"add", "notes.txt"});
  Git({"commit", "-q", "-m", "base"});
  WriteFile(ws_ + "/notes.txt", "two\n");
  StoreOn();
  // The commit replaces .git/index, the branch ref and its log: counted, never listed, so no
  // diff could name their images.
  auto r = Call("run_shell", R"({"program":"git","args":["-c","user.name=t","-c",)"
                             R"("user.email=t@example.test","commit","-qam","second"]})");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json changes = Records("process").back()["changes"];
  ASSERT_GE(changes["git"].value("modified", 0), 1) << changes.dump();
  std::ptrdiff_t images = 0;
  if (testing::Exists(Store())) {
    images = std::distance(std::filesystem::directory_iterator(Store()),
                           std::filesystem::directory_iterator());
  }
  EXPECT_EQ(images, 0) << "images of .git files were kept";
}

TEST_F(AuditDiffTest, AnEarlierChangesAfterSideComesFromTheStoreOnceTheFileChangedAgain) {
  StoreOn();
  WriteFile(ws_ + "/a.txt", "v1\n");
  ASSERT_EQ(
      Call("replace_range", R"({"path":"a.txt","old_string":"v1","new_string":"v2"})").exit_code,
      0);
  const std::string first = LastSession();
  ASSERT_EQ(
      Call("replace_range", R"({"path":"a.txt","old_string":"v2","new_string":"v3"})").exit_code,
      0);
  // The disk holds v3 now; v2 is the second change's before-image.
  Json j = DiffJson(first);
  ASSERT_EQ(j["files"].size(), 1u) << j.dump();
  EXPECT_EQ(j["files"][0]["after"]["source"], "store") << j.dump();
  EXPECT_NE(j["files"][0].value("diff", "").find("-v1\n+v2\n"), std::string::npos) << j.dump();
}

TEST_F(AuditDiffTest, WithoutTheStoreOrAHeadOnlyTheHashesAreShownMarked) {
  WriteFile(ws_ + "/a.txt", "before\n");
  ASSERT_EQ(Call("replace_range", R"({"path":"a.txt","old_string":"before","new_string":"after"})")
                .exit_code,
            0);
  const std::string sha_before = Sha256Hex("before\n"), sha_after = Sha256Hex("after\n");
  auto text = Diff(LastSession());
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("before sha256 " + sha_before + "  (HASHES ONLY: not in the store"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("after  sha256 " + sha_after + "  (disk, verified)"), std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("---"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("no diff"), std::string::npos) << text.out;
  Json j = DiffJson(LastSession());
  EXPECT_EQ(j["files"][0]["before"]["source"], "none");
  EXPECT_FALSE(j["files"][0].contains("diff"));
  EXPECT_EQ(j["counts"]["before"]["none"], 1);
  // The exit code is verify's: the diff of an edited log does not pass for a good one.
  std::string log = ReadFile(Log());
  const std::size_t at = log.find("\"op\":\"edit\"");
  ASSERT_NE(at, std::string::npos) << log;
  log.replace(at, 11, "\"op\":\"EDIT\"");
  WriteFile(Log(), log);
  auto broken = Diff(LastSession());
  EXPECT_EQ(broken.exit_code, 1) << broken.out << broken.err;
  EXPECT_NE(broken.out.find("BROKEN at line"), std::string::npos) << broken.out;
}

TEST_F(AuditDiffTest, ABadSessionIdExitsTwoNamingTheSessions) {
  WriteFile(ws_ + "/a.txt", "x\n");
  ASSERT_EQ(Call("read_file_range", R"({"path":"a.txt"})").exit_code, 0);
  auto none = Diff("nosuchsession");
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("not_found: no session in " + Log() +
                          " starts with \"nosuchsession\"; "
                          "its sessions: " +
                          LastSession()),
            std::string::npos)
      << none.err;
  auto json = Diff("nosuchsession", {"--json"});
  EXPECT_EQ(json.exit_code, 2);
  Json j = Json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_EQ(j["error"]["code"], "not_found");
  auto empty = Diff("");
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  EXPECT_NE(empty.err.find("invalid_input"), std::string::npos) << empty.err;
  auto missing = Cordon({"audit", "diff", dir_ / "nolog.jsonl", "--session", "x"});
  EXPECT_EQ(missing.exit_code, 3) << missing.err;
}

TEST_F(AuditDiffTest, ATamperedStoreEntryIsNotUsedAndIsMarked) {
  StoreOn();
  WriteFile(ws_ + "/a.txt", "line one\n");
  ASSERT_EQ(
      Call("replace_range", R"({"path":"a.txt","old_string":"one","new_string":"two"})").exit_code,
      0);
  const std::string entry = Store() + "/" + Sha256Hex("line one\n");
  ASSERT_TRUE(testing::Exists(entry));
  WriteFile(entry, "line forged\n");
  auto text = Diff(LastSession());
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("HASHES ONLY: the store's copy does not hash to sha256_before"),
            std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("forged"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("@@"), std::string::npos) << text.out;
}

TEST_F(AuditDiffTest, ASymlinkAtTheAfterPathIsNotFollowed) {
  StoreOn();
  WriteFile(ws_ + "/a.txt", "v1\n");
  ASSERT_EQ(
      Call("replace_range", R"({"path":"a.txt","old_string":"v1","new_string":"v2"})").exit_code,
      0);
  // The same bytes outside the workspace, behind a symlink where the file was: following it
  // would hash right.
  WriteFile(dir_ / "outside.txt", "v2\n");
  std::filesystem::remove(ws_ + "/a.txt");
  std::filesystem::create_symlink(dir_ / "outside.txt", ws_ + "/a.txt");
  Json j = DiffJson(LastSession());
  ASSERT_EQ(j["files"].size(), 1u) << j.dump();
  EXPECT_EQ(j["files"][0]["before"]["source"], "store");
  EXPECT_EQ(j["files"][0]["after"]["source"], "none") << j.dump();
  EXPECT_NE(j["files"][0]["after"].value("note", "").find("on disk:"), std::string::npos)
      << j.dump();
  EXPECT_FALSE(j["files"][0].contains("diff")) << j.dump();
}

TEST_F(AuditDiffTest, TheStoreIsNeitherReadableNorWritableInsideTheSandbox) {
  if (::access("/usr/bin/bwrap", X_OK) != 0 || !testing::UserNamespacesEnabled()) {
    SECURITY_SKIP("bwrap or user namespaces are missing");
  }
  // The state directory inside the workspace, which the sandbox sees: only the mask hides it.
  const std::string state = ws_ + "/own-state";
  for (auto& e : env_) {
    if (e.rfind("XDG_STATE_HOME=", 0) == 0) e = "XDG_STATE_HOME=" + state;
  }
  const std::string store = state + "/cordon/before-images";
  StoreOn();
  WriteFile(ws_ + "/a.txt", "secret-before-image\n");
  ASSERT_EQ(Call("replace_range",
                 R"({"path":"a.txt","old_string":"secret-before-image","new_string":"gone"})")
                .exit_code,
            0);
  const std::string sha = Sha256Hex("secret-before-image\n");
  const std::string entry = store + "/" + sha;
  ASSERT_EQ(ReadFile(entry), "secret-before-image\n");
  // A confined process names the store by its path: masked, like all of cordon's own files.
  auto cat = Call("run_shell", Json{{"program", "cat"}, {"args", {entry}}}.dump());
  EXPECT_EQ(cat.out.find("secret-before-image"), std::string::npos) << cat.out;
  auto ls = Call("run_shell", Json{{"program", "ls"}, {"args", {"-la", store}}}.dump());
  EXPECT_EQ(ls.out.find(sha), std::string::npos) << ls.out;
  auto grep = Call("run_shell",
                   Json{{"program", "grep"}, {"args", {"-r", "secret-before-image", ws_}}}.dump());
  EXPECT_EQ(grep.out.find("own-state"), std::string::npos) << grep.out;
  // Nor can it forge an entry.
  auto forge =
      Call("run_shell", Json{{"program", "sh"}, {"args", {"-c", "echo forged > " + entry}}}.dump());
  EXPECT_EQ(ReadFile(entry), "secret-before-image\n") << forge.out;
  // The file tools refuse it too.
  auto read = Call("read_file_range", Json{{"path", entry}}.dump());
  EXPECT_NE(read.exit_code, 0);
  EXPECT_EQ(read.out.find("secret-before-image"), std::string::npos) << read.out;
}

}  // namespace
}  // namespace cordon
