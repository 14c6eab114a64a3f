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

TEST(ParseJsonBounded, NumbersOutOfRangeAreInvalidInputNotExceptions) {
  // nlohmann throws out_of_range 406 for these; ParseJsonBounded never throws.
  for (const char* text : {"1e400", "-1e400", R"({"a":[1,2,1e999]})", "[1E+400]", R"({"a":"\xff"})",
                           "{\"a\":\"\xff\"}"}) {
    auto r = ParseJsonBounded(text);
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_EQ(r.error().code, Code::kInvalidInput) << text;
  }
  EXPECT_NE(ParseJsonBounded("1e400").error().message.find("out of range"), std::string::npos);
  // Integers beyond 64 bits would lose digits: refused unless the caller keeps the text.
  const std::string big = R"({"n":123456789012345678901234567890})";
  EXPECT_EQ(ParseJsonBounded(big).error().code, Code::kInvalidInput);
  ParseLimits keep;
  keep.allow_inexact_integers = true;
  EXPECT_TRUE(ParseJsonBounded(big, keep).has_value());
  // What still fits is accepted as before.
  EXPECT_TRUE(ParseJsonBounded(R"([18446744073709551615,-9223372036854775808,1e300,1e-400,1.0])"));
}

TEST(JsonIntegersExact, Table) {
  struct Case {
    const char* text;
    bool exact;
  };
  const Case cases[] = {
      {"0", true},
      {"18446744073709551615", true},
      {"18446744073709551616", false},
      {"-9223372036854775808", true},
      {"-9223372036854775809", false},
      {"123456789012345678901234567890.5", true},  // a double by its spelling
      {"1e30", true},
      {R"({"s":"123456789012345678901234567890"})", true},  // digits in a string
      {R"({"s":"\"123456789012345678901234567890"})", true},
      {R"([1,{"a":123456789012345678901234567890}])", false},
  };
  for (const auto& c : cases) EXPECT_EQ(JsonIntegersExact(c.text), c.exact) << c.text;
}

TEST(NullOverflowingNumbers, Table) {
  EXPECT_EQ(NullOverflowingNumbers(R"({"id":7,"x":1e400,"y":[-1E999,2]})"),
            R"({"id":7,"x":null,"y":[null,2]})");
  EXPECT_EQ(NullOverflowingNumbers(R"({"s":"1e400","n":1e300})"), R"({"s":"1e400","n":1e300})");
}

TEST(JsonStringField, NeverThrows) {
  EXPECT_EQ(JsonStringField(Json::parse(R"({"a":"x"})"), "a"), "x");
  EXPECT_EQ(JsonStringField(Json::parse(R"({"a":5})"), "a", "d"), "d");
  EXPECT_EQ(JsonStringField(Json(5), "a", "d"), "d");
  EXPECT_EQ(JsonStringField(Json::array(), "a"), "");
}

TEST(DumpJson, NeverThrowsOnInvalidUtf8) {
  Json j = std::string("x\xff");
  EXPECT_EQ(DumpJson(j), "\"x\xef\xbf\xbd\"");
}

}  // namespace
}  // namespace cordon

namespace cordon {
namespace {

// The leading keys come first at every level; the rest is what DumpJson writes, key for key,
// invalid UTF-8 replaced as DumpJson replaces it.
TEST(DumpJsonLeading, LeadsEveryLevelAndOtherwiseWritesWhatDumpJsonWrites) {
  const Json j = Json::parse(R"({"a":1,"stdout":"x","nested":[{"z":true,"exit_code":0},[null,2.5]],
                                 "obj":{"k":"v\"q","stderr":"e"}})");
  Json with_bad = j;
  with_bad["bad"] = std::string(
      "a\xff"
      "b");
  const std::string out = DumpJsonLeading(with_bad, {"exit_code", "stdout", "stderr"});
  EXPECT_EQ(out.rfind(R"({"stdout":"x",)", 0), 0u) << out;
  EXPECT_NE(out.find(R"({"exit_code":0,"z":true})"), std::string::npos) << out;
  EXPECT_NE(out.find(R"({"stderr":"e","k":"v\"q"})"), std::string::npos) << out;
  EXPECT_EQ(Json::parse(out), Json::parse(DumpJson(with_bad))) << out;
  EXPECT_NE(out.find("a\xef\xbf\xbd"
                     "b"),
            std::string::npos)
      << "invalid UTF-8 replaced: " << out;
}

}  // namespace
}  // namespace cordon
