// Myers' diff over lines (core/line_diff.h), and the unified rendering.
#include "core/line_diff.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace cordon {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t nl = text.find('\n', at);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    out.push_back(text.substr(at, end - at));
    at = end;
  }
  return out;
}

namespace {

// The middle a[a0, a1) against b[b0, b1), as line ids; appends its edits to `out`.
void MyersMiddle(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b,
                 std::size_t a0, std::size_t a1, std::size_t b0, std::size_t b1,
                 std::size_t max_edits, std::vector<LineEdit>& out) {
  const auto n = static_cast<std::int64_t>(a1 - a0), m = static_cast<std::int64_t>(b1 - b0);
  const std::int64_t max_d = std::min<std::int64_t>(n + m, static_cast<std::int64_t>(max_edits));
  // trace[d] holds V after step d, for k in [-d, d] at index k + d.
  std::vector<std::vector<std::int32_t>> trace;  // int32: a side has at most max_file lines
  std::vector<std::int64_t> v(static_cast<std::size_t>(2 * max_d + 3), 0);
  const std::int64_t off = max_d + 1;
  std::int64_t found = -1;
  for (std::int64_t d = 0; d <= max_d && found < 0; ++d) {
    for (std::int64_t k = -d; k <= d; k += 2) {
      std::int64_t x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
                           ? v[off + k + 1]
                           : v[off + k - 1] + 1;
      std::int64_t y = x - k;
      while (x < n && y < m && a[a0 + x] == b[b0 + y]) ++x, ++y;
      v[off + k] = x;
      if (x >= n && y >= m) found = d;
    }
    trace.emplace_back();
    for (std::int64_t k = -d; k <= d; ++k)
      trace.back().push_back(static_cast<std::int32_t>(v[off + k]));
  }
  std::vector<LineEdit> rev;
  if (found < 0) {
    // Too many differences: everything in the middle goes, then comes back.
    for (std::size_t i = a0; i < a1; ++i) out.push_back({'-', i, b0});
    for (std::size_t j = b0; j < b1; ++j) out.push_back({'+', a1, j});
    return;
  }
  std::int64_t x = n, y = m;
  for (std::int64_t d = found; d > 0; --d) {
    const std::vector<std::int32_t>& pv = trace[static_cast<std::size_t>(d - 1)];
    auto at = [&](std::int64_t k) {
      return static_cast<std::int64_t>(pv[static_cast<std::size_t>(k + d - 1)]);
    };
    const std::int64_t k = x - y;
    const std::int64_t pk = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
    const std::int64_t px = at(pk), py = px - pk;
    while (x > px && y > py) {
      --x, --y;
      rev.push_back({' ', a0 + static_cast<std::size_t>(x), b0 + static_cast<std::size_t>(y)});
    }
    if (x == px) {
      --y;  // an insertion of b[y]
      rev.push_back({'+', a0 + static_cast<std::size_t>(x), b0 + static_cast<std::size_t>(y)});
    } else {
      --x;  // a deletion of a[x]
      rev.push_back({'-', a0 + static_cast<std::size_t>(x), b0 + static_cast<std::size_t>(y)});
    }
  }
  while (x > 0 && y > 0) {
    --x, --y;
    rev.push_back({' ', a0 + static_cast<std::size_t>(x), b0 + static_cast<std::size_t>(y)});
  }
  out.insert(out.end(), rev.rbegin(), rev.rend());
}

}  // namespace

std::vector<LineEdit> DiffLines(const std::vector<std::string_view>& a,
                                const std::vector<std::string_view>& b, std::size_t max_edits) {
  // Lines as ids, so the search compares integers.
  std::unordered_map<std::string_view, std::uint32_t> ids;
  auto idsOf = [&ids](const std::vector<std::string_view>& lines) {
    std::vector<std::uint32_t> out;
    out.reserve(lines.size());
    for (auto l : lines) {
      out.push_back(ids.emplace(l, static_cast<std::uint32_t>(ids.size())).first->second);
    }
    return out;
  };
  const std::vector<std::uint32_t> ia = idsOf(a), ib = idsOf(b);
  std::size_t head = 0;
  while (head < ia.size() && head < ib.size() && ia[head] == ib[head]) ++head;
  std::size_t tail = 0;
  while (tail < ia.size() - head && tail < ib.size() - head &&
         ia[ia.size() - 1 - tail] == ib[ib.size() - 1 - tail])
    ++tail;
  std::vector<LineEdit> out;
  for (std::size_t i = 0; i < head; ++i) out.push_back({' ', i, i});
  MyersMiddle(ia, ib, head, ia.size() - tail, head, ib.size() - tail, max_edits, out);
  for (std::size_t t = tail; t > 0; --t) out.push_back({' ', ia.size() - t, ib.size() - t});
  return out;
}

namespace {

std::string Range(std::size_t first, std::size_t count) {
  // `diff -u`: the first line (1-based), ",count" unless it is 1; an empty range names the line
  // before it.
  const std::size_t start = count == 0 ? first : first + 1;
  return count == 1 ? std::to_string(start) : std::to_string(start) + "," + std::to_string(count);
}

void Line(std::string& out, char op, std::string_view line) {
  out += op;
  out += line;
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

}  // namespace

std::string UnifiedDiff(std::string_view a, std::string_view b, std::string_view a_label,
                        std::string_view b_label, const UnifiedDiffOptions& options) {
  if (a == b) return {};
  const std::vector<std::string_view> la = SplitLines(a), lb = SplitLines(b);
  const std::vector<LineEdit> edits = DiffLines(la, lb, options.max_edits);
  std::string out;
  out += "--- ";
  out += a_label;
  out += "\n+++ ";
  out += b_label;
  out += "\n";
  const std::size_t ctx = options.context;
  std::size_t i = 0;
  while (i < edits.size()) {
    while (i < edits.size() && edits[i].op == ' ') ++i;
    if (i == edits.size()) break;
    const std::size_t start = i >= ctx ? i - ctx : 0;
    // The hunk runs on while the next change is at most 2 * context equal lines away.
    std::size_t end = i;
    for (std::size_t j = i; j < edits.size();) {
      if (edits[j].op != ' ') {
        end = j + 1;
        ++j;
        continue;
      }
      std::size_t run = j;
      while (run < edits.size() && edits[run].op == ' ') ++run;
      if (run == edits.size() || run - j > 2 * ctx) break;
      j = run;
    }
    const std::size_t stop = std::min(edits.size(), end + ctx);
    std::size_t na = 0, nb = 0;
    for (std::size_t j = start; j < stop; ++j) {
      if (edits[j].op != '+') ++na;
      if (edits[j].op != '-') ++nb;
    }
    out += "@@ -" + Range(edits[start].a, na) + " +" + Range(edits[start].b, nb) + " @@\n";
    for (std::size_t j = start; j < stop; ++j) {
      const LineEdit& e = edits[j];
      Line(out, e.op, e.op == '+' ? lb[e.b] : la[e.a]);
    }
    i = stop;
  }
  return out;
}

}  // namespace cordon
