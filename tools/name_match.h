// Agent-supplied name patterns (find_files' regex, the glob of find_files and
// list_searchable_files) matched in the supervisor with RE2: linear in the name, bounded memory,
// no recursion. A backtracking engine (std::regex, fnmatch) would let an agent stall or crash
// cordon with a name it created itself.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"

namespace re2 {
class RE2;
}

namespace cordon {

inline constexpr std::size_t kMaxNamePatternBytes = 1024;

// A compiled pattern; cheap to move, immutable after Compile.
class NameMatcher {
 public:
  // A regular expression in RE2 syntax, searched for anywhere in the name. Constructs RE2 cannot
  // express (lookaround, backreferences) are invalid_input.
  static Result<NameMatcher> Regex(std::string_view pattern);
  // A shell glob as fnmatch(3) with no flags reads it: `*` and `?` also match `/`, `[...]` and
  // `[!...]` are sets, a backslash quotes the next character. The whole name must match.
  static Result<NameMatcher> Glob(std::string_view glob);

  NameMatcher(NameMatcher&&) noexcept;
  NameMatcher& operator=(NameMatcher&&) noexcept;
  ~NameMatcher();

  bool Matches(std::string_view name) const;

 private:
  explicit NameMatcher(std::unique_ptr<re2::RE2> re);
  std::unique_ptr<re2::RE2> re_;
};

// The RE2 regular expression a glob means (exposed for tests).
std::string GlobToRegex(std::string_view glob);

}  // namespace cordon
