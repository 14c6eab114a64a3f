// RE2-backed name matching for agent patterns: see name_match.h for why not std::regex.
#include "tools/name_match.h"

#include <re2/re2.h>

namespace cordon {
namespace {

// RE2's DFA memory budget per pattern; a pattern needing more fails to compile.
constexpr int64_t kMaxProgramMemory = 8 << 20;

Status CheckPatternText(std::string_view text, std::string_view what) {
  if (text.size() > kMaxNamePatternBytes) {
    return Fail(Code::kInvalidInput, std::string(what) + " is longer than " +
                                         std::to_string(kMaxNamePatternBytes) + " bytes");
  }
  if (text.find('\0') != std::string_view::npos) {
    return Fail(Code::kInvalidInput, std::string(what) + " contains a NUL byte");
  }
  return {};
}

// `latin1`: match bytes, as fnmatch(3) does in the C locale; otherwise UTF-8, as fd's regex.
Result<std::unique_ptr<re2::RE2>> CompileRe2(std::string_view pattern, std::string_view what,
                                             bool latin1) {
  re2::RE2::Options options;
  if (latin1) options.set_encoding(re2::RE2::Options::EncodingLatin1);
  options.set_log_errors(false);
  options.set_max_mem(kMaxProgramMemory);
  auto re = std::make_unique<re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    std::string why = re->error();
    if (re->error_code() == re2::RE2::ErrorBadPerlOp ||
        re->error_code() == re2::RE2::ErrorBadEscape) {
      why += " (lookaround and backreferences are not supported: patterns run in linear time)";
    }
    return Fail(Code::kInvalidInput, "invalid " + std::string(what) + ": " + why);
  }
  return re;
}

}  // namespace

std::string GlobToRegex(std::string_view glob) {
  std::string out = "^";
  for (std::size_t i = 0; i < glob.size(); ++i) {
    const char c = glob[i];
    if (c == '*') {
      // Consecutive stars mean what one star means; collapsing them keeps the program small.
      while (i + 1 < glob.size() && glob[i + 1] == '*') ++i;
      out += "(?s:.*)";
    } else if (c == '?') {
      out += "(?s:.)";
    } else if (c == '\\' && i + 1 < glob.size()) {
      out += re2::RE2::QuoteMeta(std::string(1, glob[++i]));
    } else if (c == '[') {
      // A set runs to the first ']' that is not its first member; without one, '[' is literal.
      std::size_t j = i + 1;
      if (j < glob.size() && (glob[j] == '!' || glob[j] == '^')) ++j;
      if (j < glob.size() && glob[j] == ']') ++j;
      while (j < glob.size() && glob[j] != ']') ++j;
      if (j >= glob.size()) {
        out += "\\[";
        continue;
      }
      std::string set = "[";
      std::size_t k = i + 1;
      if (glob[k] == '!' || glob[k] == '^') {
        set += '^';
        ++k;
      }
      for (; k < j; ++k) {
        const char m = glob[k];
        // Ranges pass through; everything RE2 treats specially inside a class is quoted.
        if (m == '\\' || m == '[' || m == ']' || m == '^') {
          set += '\\';
          set += m;
        } else {
          set += m;
        }
      }
      set += ']';
      out += set;
      i = j;
    } else {
      out += re2::RE2::QuoteMeta(std::string(1, c));
    }
  }
  out += "$";
  return out;
}

NameMatcher::NameMatcher(std::unique_ptr<re2::RE2> re) : re_(std::move(re)) {}
NameMatcher::NameMatcher(NameMatcher&&) noexcept = default;
NameMatcher& NameMatcher::operator=(NameMatcher&&) noexcept = default;
NameMatcher::~NameMatcher() = default;

Result<NameMatcher> NameMatcher::Regex(std::string_view pattern) {
  TRY(CheckPatternText(pattern, "pattern"));
  ASSIGN_OR_RETURN(auto re, CompileRe2(pattern, "pattern", false));
  return NameMatcher(std::move(re));
}

Result<NameMatcher> NameMatcher::Glob(std::string_view glob) {
  TRY(CheckPatternText(glob, "glob"));
  ASSIGN_OR_RETURN(auto re, CompileRe2(GlobToRegex(glob), "glob", true));
  return NameMatcher(std::move(re));
}

bool NameMatcher::Matches(std::string_view name) const {
  return re2::RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *re_);
}

}  // namespace cordon
