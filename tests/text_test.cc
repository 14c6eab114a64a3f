// Table tests for UTF-8 repair, line cutting and bounded JSON parsing.
#include "core/text.h"

#include <gtest/gtest.h>

namespace cordon {
namespace {

TEST(RepairUtf8, Table) {
  struct Case {
    std::string in, out;
    bool changed;
  };
  const Case cases[] = {
      {"plain", "plain", false},
      {"caf\xc3\xa9", "caf\xc3\xa9", false},
      {"bad\xff", "bad\xef\xbf\xbd", true},
      {"\xc3", "\xef\xbf\xbd", true},                                  // truncated sequence
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", true},  // surrogate
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd", true},                  // overlong
      {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", false},                 // emoji
  };
  for (const auto& c : cases) {
    bool changed = false;
    EXPECT_EQ(RepairUtf8(c.in, &changed), c.out) << c.in;
    EXPECT_EQ(changed, c.changed) << c.in;
  }
}

TEST(CutLine, CutsOnCodePointsWithMarker) {
  std::string s = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";  // 4 code points, 8 bytes
  EXPECT_TRUE(CutLine(s, 2));
  EXPECT_EQ(s, "\xc3\xa9\xc3\xa9 [cordon: line cut, 2 more characters]");
  std::string short_line = "abc";
  EXPECT_FALSE(CutLine(short_line, 3));
  EXPECT_EQ(short_line, "abc");
}

TEST(JsonNestingDepth, IgnoresBracketsInStrings) {
  EXPECT_EQ(JsonNestingDepth("{}"), 1u);
  EXPECT_EQ(JsonNestingDepth("[[[]]]"), 3u);
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[[[[\"{{"})"), 1u);
  EXPECT_EQ(JsonNestingDepth("42"), 0u);
}

TEST(ParseJsonBounded, RejectsWithStableCodes) {
  EXPECT_EQ(ParseJsonBounded("{").error().code, Code::kInvalidInput);
  EXPECT_EQ(ParseJsonBounded("{'a':1}").error().code, Code::kInvalidInput);
  EXPECT_EQ(ParseJsonBounded("").error().code, Code::kInvalidInput);
  EXPECT_EQ(ParseJsonBounded(std::string(100000, '[') + std::string(100000, ']')).error().code,
            Code::kInvalidInput);
  ParseLimits small;
  small.max_bytes = 10;
  EXPECT_EQ(ParseJsonBounded(R"({"a":"0123456789"})", small).error().code, Code::kTooLarge);
  auto ok = ParseJsonBounded(R"({"a":[1,2]})");
  ASSERT_TRUE(ok);
  EXPECT_EQ((*ok)["a"][1], 2);
}

TEST(DumpJson, NeverThrowsOnInvalidUtf8) {
  Json j = std::string("x\xff");
  EXPECT_EQ(DumpJson(j), "\"x\xef\xbf\xbd\"");
}

}  // namespace
}  // namespace cordon
