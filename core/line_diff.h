// A line diff (Myers' O(ND) shortest edit script) and its unified rendering (`diff -u`'s
// format), in-process: `cordon audit diff` never runs a diff program on paths.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cordon {

// A text as lines, each with its '\n' when it has one (only the last line can lack it).
std::vector<std::string_view> SplitLines(std::string_view text);

struct LineEdit {
  char op;        // ' ' both, '-' only in a, '+' only in b
  std::size_t a;  // ' ' and '-': the line of a; '+': the line of a it comes before
  std::size_t b;  // ' ' and '+': the line of b; '-': the line of b it comes before
};

// Pure: a shortest edit script from a to b, in order, when at most `max_edits` lines differ
// (after the common head and tail are set aside); past that, a correct but longer one (the
// differing middle deleted, then inserted), so time and memory stay bounded.
std::vector<LineEdit> DiffLines(const std::vector<std::string_view>& a,
                                const std::vector<std::string_view>& b,
                                std::size_t max_edits = 2000);

struct UnifiedDiffOptions {
  std::size_t context = 3;
  std::size_t max_edits = 2000;  // O(max_edits^2) memory: 16 MB at 2000
};

// `diff -u`'s body for a to b under the two labels ("--- a/x", "+++ b/x", then "@@ -l,n +l,n @@"
// hunks; "\ No newline at end of file" where a side's last line has none). Empty when the texts
// are equal.
std::string UnifiedDiff(std::string_view a, std::string_view b, std::string_view a_label,
                        std::string_view b_label, const UnifiedDiffOptions& options = {});

}  // namespace cordon
