// NameMatcher: agent patterns in RE2, globs as fnmatch(3) reads them, and the inputs that made
// std::regex hang or crash the supervisor.
#include "tools/name_match.h"

#include <fnmatch.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/text.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

TEST(NameMatchTest, GlobAgreesWithFnmatchOnATable) {
  const char* globs[] = {"*.md", "a?c", "[abc]x", "[!abc]x", "[a-c]*", "\\*star", "*/*.cc",
                         "[]]x", "[",   "x[",     "**.h",    ".*",     "a*b*c",   "[^a]b"};
  const char* names[] = {"README.md", "abc",  "ax",     "dx",   "bcd",  "*star", "src/a.cc",
                         "]x",        "[",    "x[",     "a.h",  ".git", "aXbYc", "cb",
                         "ab",        "a/bc", "md.txt", "star", "a.cc", "x",     ""};
  for (const char* g : globs) {
    auto m = NameMatcher::Glob(g);
    ASSERT_TRUE(m.has_value()) << g << ": " << m.error().ToString();
    for (const char* n : names) {
      EXPECT_EQ(m->Matches(n), ::fnmatch(g, n, 0) == 0)
          << "glob " << g << " name " << n << " regex " << GlobToRegex(g);
    }
  }
}

TEST(NameMatchTest, RegexSearchesAnywhereInTheName) {
  auto m = NameMatcher::Regex("^ma.n\\.(rs|cc)$");
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->Matches("main.rs"));
  EXPECT_FALSE(m->Matches("domain.rs"));
  auto sub = NameMatcher::Regex("test");
  ASSERT_TRUE(sub.has_value());
  EXPECT_TRUE(sub->Matches("my_test_file.py"));
}

TEST(NameMatchTest, UnsupportedOrBadPatternsAreInvalidInput) {
  for (const char* bad : {"(?=a)b", "(a)\\1", "(", "[z-a]", "a{1001}"}) {
    auto m = NameMatcher::Regex(bad);
    ASSERT_FALSE(m.has_value()) << bad;
    EXPECT_EQ(m.error().code, Code::kInvalidInput) << bad;
  }
  auto look = NameMatcher::Regex("(?!x)y");
  ASSERT_FALSE(look.has_value());
  EXPECT_NE(look.error().message.find("lookaround"), std::string::npos) << look.error().message;
  EXPECT_EQ(NameMatcher::Regex(std::string(1025, 'a')).error().code, Code::kInvalidInput);
  EXPECT_EQ(NameMatcher::Glob(std::string(1025, '*')).error().code, Code::kInvalidInput);
  EXPECT_EQ(NameMatcher::Regex(std::string("a\0b", 3)).error().code, Code::kInvalidInput);
}

// The review's inputs: (a|a)*b took 845 ms at 22 characters under std::regex and doubled per
// character; a* over 200,000 characters overflowed the stack. Under RE2 both are linear. The
// bound is generous (a loaded CI machine), far below the exponential case at 255 characters.
TEST(NameMatchTest, PathologicalPatternsStayLinear) {
  auto m = NameMatcher::Regex("(a|a)*b");
  ASSERT_TRUE(m.has_value());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(m->Matches(std::string(255, 'a')));
  auto star = NameMatcher::Regex("a*");
  ASSERT_TRUE(star.has_value());
  EXPECT_TRUE(star->Matches(std::string(200000, 'a')));
  auto glob = NameMatcher::Glob(std::string(500, '*') + "b");
  ASSERT_TRUE(glob.has_value());
  std::string alternating;
  for (int i = 0; i < 300; ++i) alternating += i % 2 ? "*a" : "a";
  auto glob2 = NameMatcher::Glob(alternating + "b");
  ASSERT_TRUE(glob2.has_value());
  EXPECT_FALSE(glob2->Matches(std::string(255, 'a')));
  EXPECT_FALSE(glob->Matches(std::string(255, 'a')));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Through the real binary: a name the agent could create, a pattern std::regex took seconds on,
// and the glob that makes cordon match in the supervisor (fd cannot take both).
TEST(NameMatchTest, FindFilesAnswersPathologicalPatternsAndRefusesLookaround) {
  testing::TempDir dir;
  const std::string ws = dir / "ws";
  std::filesystem::create_directories(ws);
  testing::WriteFile(ws + "/" + std::string(200, 'a'), "x");
  testing::WriteFile(ws + "/aab", "x");
  auto call = [&](const Json& input) {
    return testing::Run({testing::CordonBin(), "call", "find_files", "--workspace", ws,
                         "--audit-log", dir / "audit.jsonl", "--json", input.dump()},
                        {"XDG_CONFIG_HOME=" + (dir / "config")});
  };
  auto r = call({{"pattern", "(a|a)*b"}, {"glob", "*"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["structuredContent"]["files"], Json::array({"aab"})) << r.out;
  auto look = call({{"pattern", "(?<=a)b"}});
  EXPECT_EQ(look.exit_code, 1) << look.out << look.err;
  Json lj = Json::parse(look.out);
  EXPECT_TRUE(lj["isError"].get<bool>());
  EXPECT_NE(look.out.find("invalid_input"), std::string::npos) << look.out;
  EXPECT_NE(look.out.find("lookaround"), std::string::npos) << look.out;
}

}  // namespace
}  // namespace cordon
