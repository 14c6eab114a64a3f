// Approval rules and their matchers (policy/approvals.h, docs/adr/0015-approvals.md). Pure: the
// patterns and the command lines may come from files the agent wrote, so every matcher here is
// iterative and bounded (no backtracking recursion, a work budget for nested shell text).
#include "policy/approvals.h"

#include <algorithm>
#include <array>
#include <optional>

#include "core/text.h"
#include "policy/egress.h"
#include "policy/policy.h"

namespace cordon {
namespace {

// sh -c "bash -c '...'" nests; so do wrappers. Deeper than this is read as opaque text.
constexpr int kMaxDepth = 8;
// What one argv match may cost (words visited, bytes split): a guard against text built to make
// the scan quadratic. Running out counts as text the matcher could not read.
constexpr std::size_t kArgvWorkBudget = std::size_t{1} << 20;
constexpr std::size_t kMaxShellText = 64 * 1024;

// --- globs ---

// One glob without '/' semantics: `*` any run, `?` one byte. Greedy with one remembered star:
// O(|pattern| * |text|) at worst, no recursion, no allocation.
bool SegmentMatches(std::string_view pat, std::string_view txt) {
  std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < txt.size()) {
    if (p < pat.size() && pat[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pat.size() && (pat[p] == '?' || pat[p] == txt[t])) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

// '/'-separated components; empty ones and "." are dropped ("a//./b" is "a/b").
std::vector<std::string_view> Components(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t slash = s.find('/', start);
    if (slash == std::string_view::npos) slash = s.size();
    std::string_view c = s.substr(start, slash - start);
    if (!c.empty() && c != ".") out.push_back(c);
    start = slash + 1;
  }
  return out;
}

// reach[j]: whether the pattern's components match the text's first j components. A DP over
// (pattern component, text component): O(|pattern| * |text|) in all.
std::vector<char> ComponentReach(std::span<const std::string_view> pat,
                                 std::span<const std::string_view> txt) {
  std::vector<char> reach(txt.size() + 1, 0), next(txt.size() + 1, 0);
  reach[0] = 1;
  for (std::string_view p : pat) {
    if (p == "**") {
      char any = 0;  // `**` matches zero or more whole components
      for (std::size_t j = 0; j <= txt.size(); ++j)
        next[j] = any = static_cast<char>(any | reach[j]);
    } else {
      next[0] = 0;
      for (std::size_t j = 1; j <= txt.size(); ++j) {
        next[j] = static_cast<char>(reach[j - 1] && SegmentMatches(p, txt[j - 1]));
      }
    }
    reach.swap(next);
  }
  return reach;
}

// A path pattern as the gitignore reading takes it: leading and trailing '/' dropped (a leading
// one, or one inside, anchors it at the workspace's root), its components, and whether it ended
// in `**` (what is below, not the directory itself; those `**` are dropped). Nullopt: empty.
struct PathPattern {
  std::vector<std::string_view> components;
  bool anchored = false;
  bool below = false;
};
std::optional<PathPattern> ParsePathPattern(std::string_view pattern) {
  PathPattern out;
  while (!pattern.empty() && pattern.front() == '/') {
    out.anchored = true;
    pattern.remove_prefix(1);
  }
  while (!pattern.empty() && pattern.back() == '/') pattern.remove_suffix(1);
  if (pattern.empty()) return std::nullopt;
  if (pattern.find('/') != std::string_view::npos) out.anchored = true;
  out.components = Components(pattern);
  while (!out.components.empty() && out.components.back() == "**") {
    out.components.pop_back();
    out.below = true;
  }
  return out;
}

// The gitignore reading of a path pattern: without a '/' it matches a component at any depth;
// a path under a matched one matches too (a rule on a directory covers what is in it); a
// trailing `**` matches what is below, not the directory itself.
bool PathPatternMatches(std::string_view pattern, std::string_view path) {
  std::optional<PathPattern> parsed = ParsePathPattern(pattern);
  if (!parsed) return false;
  std::vector<std::string_view>& pat = parsed->components;
  if (!parsed->anchored) pat.insert(pat.begin(), "**");
  const bool below = parsed->below;
  const std::vector<std::string_view> txt = Components(path);
  if (txt.empty()) return false;
  const std::vector<char> reach = ComponentReach(pat, txt);
  // below: the pattern must stop short of the last component; else any prefix of one or more.
  const std::size_t lo = below ? 0 : 1, hi = below ? txt.size() - 1 : txt.size();
  for (std::size_t j = lo; j <= hi; ++j) {
    if (reach[j]) return true;
  }
  return false;
}

bool PatternCouldMatchBelow(std::string_view pattern, std::string_view dir) {
  const std::optional<PathPattern> parsed = ParsePathPattern(pattern);
  if (!parsed) return false;
  if (!parsed->anchored) return true;  // a name at any depth
  const std::vector<std::string_view>& pat = parsed->components;
  const std::vector<std::string_view> txt = Components(dir);
  if (txt.empty()) return true;  // the workspace's root: anything could be below it
  // A prefix of `dir` that the whole pattern matches covers everything below it.
  std::vector<char> reach(txt.size() + 1, 0), next(txt.size() + 1, 0);
  reach[0] = 1;
  for (std::size_t m = 0; m < pat.size(); ++m) {
    // The pattern's first m components match all of `dir`: a later one could match below it.
    if (reach[txt.size()]) return true;
    const std::string_view p = pat[m];
    if (p == "**") {
      char any = 0;
      for (std::size_t j = 0; j <= txt.size(); ++j)
        next[j] = any = static_cast<char>(any | reach[j]);
    } else {
      next[0] = 0;
      for (std::size_t j = 1; j <= txt.size(); ++j)
        next[j] = static_cast<char>(reach[j - 1] && SegmentMatches(p, txt[j - 1]));
    }
    reach.swap(next);
  }
  // The whole pattern matched `dir` or one of its ancestors: what is below matches (a rule on a
  // directory covers what is in it; a trailing `**` is what is below).
  return std::any_of(reach.begin() + 1, reach.end(), [](char c) { return c != 0; });
}

// --- shell words ---

struct SplitWords {
  std::vector<std::string> words;
  std::vector<char> op;  // op[i]: words[i] is a control operator, not a quoted ";" or "|"
  bool opaque = false;   // an expansion ($, a backquote), `eval`, a here-document, or `hard`
  // What no word-by-word reading can follow: an unclosed quote, a text past 64 KiB. An ask rule
  // then applies wherever its program is named.
  bool hard = false;
};

SplitWords Split(std::string_view text) {
  SplitWords out;
  if (text.size() > kMaxShellText) {
    out.opaque = out.hard = true;
    text = text.substr(0, kMaxShellText);
  }
  std::string cur;
  bool in_word = false;
  auto flush = [&] {
    if (!in_word) return;
    out.words.push_back(std::move(cur));
    out.op.push_back(0);
    cur.clear();
    in_word = false;
  };
  auto emit = [&](std::string_view w, bool control) {
    flush();
    out.words.emplace_back(w);
    out.op.push_back(control ? 1 : 0);
  };
  const std::size_t n = text.size();
  std::size_t i = 0;
  auto next_is = [&](char c) { return i + 1 < n && text[i + 1] == c; };
  while (i < n) {
    const char c = text[i];
    switch (c) {
      case ' ':
      case '\t':
      case '\r':
      case '\v':
      case '\f':
        flush();
        ++i;
        break;
      case '\n':
        emit("\n", true);
        ++i;
        break;
      case ';':
      case '(':
      case ')':
        emit(std::string_view(&text[i], 1), true);
        ++i;
        break;
      case '&':
      case '|':
        if (next_is(c)) {
          emit(text.substr(i, 2), true);
          i += 2;
        } else if (c == '&' && next_is('>')) {  // &> a redirection
          emit("&>", false);
          i += 2;
        } else {
          emit(std::string_view(&text[i], 1), true);
          ++i;
        }
        break;
      case '<':
        if (next_is('<')) {   // a here-document's body is text this splitter does not read
          out.opaque = true;  // its body is read as words: `sh <<EOF\ngit push` still asks
          emit("<<", false);
          i += 2;
        } else {
          emit("<", false);
          ++i;
        }
        break;
      case '>':
        // Redirections are words of their own, so that `git push>log` still reads `push`.
        if (next_is('>') || next_is('&') || next_is('|')) {
          emit(text.substr(i, 2), false);
          i += 2;
        } else {
          emit(">", false);
          ++i;
        }
        break;
      case '#':
        if (in_word) {
          cur += c;
          ++i;
        } else {
          while (i < n && text[i] != '\n') ++i;
        }
        break;
      case '\'': {
        in_word = true;
        const std::size_t close = text.find('\'', i + 1);
        if (close == std::string_view::npos) {
          out.opaque = out.hard = true;
          cur.append(text.substr(i + 1));
          i = n;
        } else {
          cur.append(text.substr(i + 1, close - i - 1));
          i = close + 1;
        }
        break;
      }
      case '"': {
        in_word = true;
        ++i;
        bool closed = false;
        while (i < n) {
          const char d = text[i];
          if (d == '"') {
            closed = true;
            ++i;
            break;
          }
          if (d == '\\' && i + 1 < n) {
            const char e = text[i + 1];
            if (e == '\n') {
              i += 2;
              continue;
            }
            if (e == '"' || e == '\\' || e == '$' || e == '`') {
              cur += e;
              i += 2;
              continue;
            }
          }
          if (d == '$' || d == '`') out.opaque = true;
          cur += d;
          ++i;
        }
        if (!closed) out.opaque = out.hard = true;
        break;
      }
      case '\\':
        in_word = true;
        if (i + 1 < n && text[i + 1] != '\n') cur += text[i + 1];
        i += 2;
        break;
      case '$':
      case '`':
        out.opaque = true;
        in_word = true;
        cur += c;
        ++i;
        break;
      default:
        in_word = true;
        cur += c;
        ++i;
        break;
    }
  }
  flush();
  for (const std::string& w : out.words) {
    if (w == "eval") out.opaque = true;  // its arguments are read as texts (ScanWords)
  }
  return out;
}

// --- argv ---

std::string_view Basename(std::string_view s) {
  const auto slash = s.rfind('/');
  return slash == std::string_view::npos ? s : s.substr(slash + 1);
}

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// `needle` in `text` where it could be a command word: after the start, a blank, a control
// operator, a quote, a backquote, '=' (a variable that holds it) or '/' (a path to it), and
// before the end, a blank, an operator, a quote or a backquote. So "git" in "$g; /usr/bin/git x"
// and "g=git", never in "gitk", "digit", "sub/.git/config" or "npm=$npm_config_cache".
bool BoundedContains(std::string_view text, std::string_view needle) {
  if (needle.empty()) return false;
  constexpr std::string_view kBefore = " \t\n;&|(){}`\"'=/";
  constexpr std::string_view kAfter = " \t\n;&|)`\"'";
  for (std::size_t at = text.find(needle); at != std::string_view::npos;
       at = text.find(needle, at + 1)) {
    const std::size_t end = at + needle.size();
    if ((at == 0 || kBefore.find(text[at - 1]) != std::string_view::npos) &&
        (end == text.size() || kAfter.find(text[end]) != std::string_view::npos)) {
      return true;
    }
  }
  return false;
}

bool IsShell(std::string_view name) {
  // script(1) runs `-c TEXT` through the user's shell, as a shell does.
  static constexpr std::string_view kShells[] = {"sh",  "bash", "dash",  "zsh",  "ksh",   "mksh",
                                                 "ash", "yash", "rbash", "posh", "script"};
  return std::find(std::begin(kShells), std::end(kShells), name) != std::end(kShells);
}

// A -c value (or --config-env's) that can define an alias: alias.*, or a file of config that
// may hold one (include.path, includeIf.*.path).
// A GIT_CONFIG* variable that can bring configuration in (GIT_CONFIG_GLOBAL, _COUNT, _KEY_n,
// _PARAMETERS, ...), and so an alias. GIT_CONFIG_NOSYSTEM only takes the system file away.
bool SetsGitConfig(std::string_view word) {
  return word.starts_with("GIT_CONFIG") && !word.starts_with("GIT_CONFIG_NOSYSTEM");
}

bool ConfigCanAlias(std::string_view kv) {
  const std::string key = AsciiLower(kv.substr(0, kv.find('=')));
  return key.starts_with("alias.") || key.starts_with("include");
}

// git's own commands: an alias never replaces one (git runs the command, not an alias of that
// name), so configuration that could define an alias does not change what these do.
bool IsGitCommand(std::string_view w) {
  static constexpr std::string_view kCommands[] = {"add",
                                                   "am",
                                                   "annotate",
                                                   "apply",
                                                   "archive",
                                                   "bisect",
                                                   "blame",
                                                   "branch",
                                                   "bundle",
                                                   "cat-file",
                                                   "check-attr",
                                                   "check-ignore",
                                                   "checkout",
                                                   "cherry",
                                                   "cherry-pick",
                                                   "clean",
                                                   "clone",
                                                   "commit",
                                                   "commit-tree",
                                                   "config",
                                                   "count-objects",
                                                   "describe",
                                                   "diff",
                                                   "diff-files",
                                                   "diff-index",
                                                   "diff-tree",
                                                   "difftool",
                                                   "fetch",
                                                   "for-each-ref",
                                                   "format-patch",
                                                   "fsck",
                                                   "gc",
                                                   "grep",
                                                   "hash-object",
                                                   "help",
                                                   "init",
                                                   "log",
                                                   "ls-files",
                                                   "ls-remote",
                                                   "ls-tree",
                                                   "maintenance",
                                                   "merge",
                                                   "merge-base",
                                                   "mergetool",
                                                   "mv",
                                                   "name-rev",
                                                   "notes",
                                                   "pull",
                                                   "range-diff",
                                                   "read-tree",
                                                   "rebase",
                                                   "reflog",
                                                   "remote",
                                                   "repack",
                                                   "replace",
                                                   "reset",
                                                   "restore",
                                                   "rev-list",
                                                   "rev-parse",
                                                   "revert",
                                                   "rm",
                                                   "shortlog",
                                                   "show",
                                                   "show-ref",
                                                   "sparse-checkout",
                                                   "stash",
                                                   "status",
                                                   "switch",
                                                   "symbolic-ref",
                                                   "tag",
                                                   "update-index",
                                                   "update-ref",
                                                   "var",
                                                   "verify-commit",
                                                   "version",
                                                   "whatchanged",
                                                   "worktree",
                                                   "write-tree"};
  return std::find(std::begin(kCommands), std::end(kCommands), w) != std::end(kCommands);
}

struct GitOptions {
  std::size_t next = 0;  // the first word after git's global options
  bool alias = false;    // an alias may be defined: the subcommand can be anything
};

GitOptions SkipGitGlobalOptions(std::span<const std::string> w) {
  GitOptions g;
  std::size_t& i = g.next;
  while (i < w.size()) {
    std::string_view a = w[i];
    if (a.size() < 2 || a[0] != '-' || a == "--") break;
    if (a == "-c" || a == "--config-env") {
      if (i + 1 < w.size() && ConfigCanAlias(w[i + 1])) g.alias = true;
      i += 2;
    } else if (a == "-C" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" ||
               a == "--super-prefix") {
      i += 2;
    } else if (a.starts_with("--config-env=")) {
      if (ConfigCanAlias(a.substr(13))) g.alias = true;
      ++i;
    } else if (a.starts_with("-c")) {  // -calias.p=push
      if (ConfigCanAlias(a.substr(2))) g.alias = true;
      ++i;
    } else {
      ++i;  // a flag, --opt=value, or an option git does not know: skipped, as git fails on it
    }
  }
  return g;
}

// Options of a wrapper: which short letters and long names take the next word as a value.
struct OptionSpec {
  std::string_view short_args;
  std::initializer_list<std::string_view> long_args;
};

// The index of the first operand after the options. `--` ends them; a lone `-` is an operand.
std::size_t SkipOptions(std::span<const std::string> w, std::size_t i, const OptionSpec& spec) {
  while (i < w.size()) {
    std::string_view a = w[i];
    if (a == "--") return i + 1;
    if (a.size() < 2 || a[0] != '-') return i;
    if (a.starts_with("--")) {
      const std::string_view name = a.substr(2);
      const bool takes =
          name.find('=') == std::string_view::npos &&
          std::find(spec.long_args.begin(), spec.long_args.end(), name) != spec.long_args.end();
      i += takes ? 2 : 1;
      continue;
    }
    std::size_t skip = 1;
    for (std::size_t k = 1; k < a.size(); ++k) {
      if (spec.short_args.find(a[k]) != std::string_view::npos) {
        if (k + 1 == a.size()) skip = 2;  // the value is the next word; else it is attached
        break;
      }
    }
    i += skip;
  }
  return i;
}

struct Unwrapped {
  std::size_t next = 0;               // the wrapped command's first word
  std::optional<std::string> prefix;  // env -S: text whose words come before w[next..]
  bool git_config = false;            // a GIT_CONFIG_* variable set: git aliases possible
};

// env's options and NAME=VALUE words, by hand: -S splits a string into more words.
Unwrapped UnwrapEnv(std::span<const std::string> w) {
  Unwrapped u;
  std::size_t i = 1;
  while (i < w.size()) {
    std::string_view a = w[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() >= 2 && a[0] == '-') {
      if (a == "-S" || a == "--split-string") {
        if (i + 1 < w.size()) u.prefix = w[i + 1];
        u.next = std::min(i + 2, w.size());
        return u;
      }
      if (a.starts_with("--split-string=")) {
        u.prefix = std::string(a.substr(15));
        u.next = i + 1;
        return u;
      }
      if (a.starts_with("--")) {
        i += (a == "--unset" || a == "--chdir") ? 2 : 1;
        continue;
      }
      // A cluster: -i, -0, -v flags; -u NAME, -C DIR, -P PATH take a value (attached or next);
      // -S takes the rest of the word or the next one as text to split.
      std::size_t skip = 1;
      for (std::size_t k = 1; k < a.size(); ++k) {
        if (a[k] == 'S') {
          if (k + 1 < a.size()) {
            u.prefix = std::string(a.substr(k + 1));
          } else if (i + 1 < w.size()) {
            u.prefix = w[i + 1];
            skip = 2;
          }
          u.next = std::min(i + skip, w.size());
          return u;
        }
        if (a[k] == 'u' || a[k] == 'C' || a[k] == 'P') {
          if (k + 1 == a.size()) skip = 2;
          break;
        }
      }
      i += skip;
      continue;
    }
    if (a.find('=') != std::string_view::npos) {
      if (SetsGitConfig(a)) u.git_config = true;
      ++i;
      continue;
    }
    break;
  }
  u.next = std::min(i, w.size());
  return u;
}

// The wrapped command of a wrapper (env, nice, timeout, ...), or nullopt when `name` is none.
std::optional<Unwrapped> Unwrap(std::string_view name, std::span<const std::string> w) {
  Unwrapped u;
  if (name == "env") return UnwrapEnv(w);
  if (name == "nice") {
    u.next = SkipOptions(w, 1, {"n", {"adjustment"}});
  } else if (name == "timeout") {
    u.next = SkipOptions(w, 1, {"sk", {"signal", "kill-after"}}) + 1;  // then the duration
  } else if (name == "nohup" || name == "setsid" || name == "command" || name == "busybox") {
    u.next = SkipOptions(w, 1, {"", {}});
  } else if (name == "xargs") {
    u.next = SkipOptions(
        w, 1,
        {"IdEaLnPs",
         {"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}});
  } else if (name == "stdbuf") {
    u.next = SkipOptions(w, 1, {"ioe", {"input", "output", "error"}});
  } else if (name == "ionice") {
    u.next = SkipOptions(w, 1, {"cnpPu", {"class", "classdata", "pid", "pgid", "uid"}});
  } else if (name == "chrt") {
    u.next = SkipOptions(w, 1, {"TPD", {"sched-runtime", "sched-period", "sched-deadline"}});
    const bool priority = u.next < w.size() && !w[u.next].empty() &&
                          std::all_of(w[u.next].begin(), w[u.next].end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
    if (priority) ++u.next;
  } else if (name == "taskset") {
    u.next = SkipOptions(w, 1, {"", {}}) + 1;  // then the mask or the cpu list
  } else if (name == "exec") {
    u.next = SkipOptions(w, 1, {"a", {}});
  } else if (name == "time") {
    u.next = SkipOptions(w, 1, {"fo", {"format", "output"}});
  } else {
    return std::nullopt;
  }
  u.next = std::min(u.next, w.size());
  return u;
}

// watch(1): without -x it joins its operands with spaces and runs them as a shell text; with -x
// they are the argv. `*next`: the first operand.
std::optional<std::string> WatchText(std::span<const std::string> w, std::size_t* next) {
  bool exec = false;
  for (std::size_t i = 1; i < w.size() && w[i].size() > 1 && w[i][0] == '-'; ++i) {
    const std::string_view a = w[i];
    if (a == "--") break;
    exec = exec || a == "--exec" ||
           (!a.starts_with("--") && a.find('x') != std::string_view::npos &&
            a.find_first_of("nq") == std::string_view::npos);
  }
  *next = SkipOptions(w, 1, {"nq", {"interval", "equexit"}});
  if (exec || *next >= w.size()) return std::nullopt;
  std::string text;
  for (std::size_t i = *next; i < w.size(); ++i) text += (i == *next ? "" : " ") + w[i];
  return text;
}

// The TEXT of `sh [options] -c TEXT`, or nullopt when the shell reads a file or its stdin.
// `*scanned`: how many words were read, for the work budget.
std::optional<std::string_view> ShellCommandText(std::span<const std::string> w,
                                                 std::size_t* scanned) {
  bool command = false;
  std::size_t i = 1;
  while (i < w.size()) {
    std::string_view a = w[i];
    if (a == "--" || a == "-") {
      ++i;
      break;
    }
    if (a.starts_with("--")) {
      i += (a == "--rcfile" || a == "--init-file") ? 2 : 1;
      continue;
    }
    if (a.size() < 2 || (a[0] != '-' && a[0] != '+')) break;
    bool takes = false;
    for (char c : a.substr(1)) {
      if (c == 'c' && a[0] == '-') command = true;
      if (c == 'o' || c == 'O') takes = true;  // -o pipefail, +O extglob
    }
    i += takes ? 2 : 1;
  }
  *scanned = i;
  if (!command || i >= w.size()) return std::nullopt;
  return std::string_view(w[i]);
}

struct ArgvMatch {
  std::string prog;               // the basename of the rule's program
  std::vector<std::string> rest;  // the rule's words after the program (and git's options)
  bool ask = false;               // opaque text matches ask rules whose program it names
  // An allow rule allows only a command that is exactly its words (through wrappers): never a
  // part of a shell text, a word anywhere in an argv, or what an alias may be. Otherwise an
  // allow above an ask in its layer would let `sh -c 'git push; echo git push --dry-run'` by.
  bool allow = false;
  std::size_t budget = kArgvWorkBudget;
  bool exhausted = false;

  bool Spend(std::size_t n) {
    if (n > budget) {
      exhausted = true;
      budget = 0;
      return false;
    }
    budget -= n;
    return true;
  }
};

// The rule's prefix at the start of `w`: the program by basename, git's global options skipped.
bool DirectMatch(ArgvMatch& m, std::span<const std::string> w, std::string_view program,
                 bool git_config) {
  // The name it was called by or the one it resolves to: npm is a symlink to npm-cli.js,
  // cargo to rustup, sh to busybox; a workspace symlink `g` to git.
  if (w.empty() || (Basename(w[0]) != m.prog && (program.empty() || Basename(program) != m.prog))) {
    return false;
  }
  std::span<const std::string> rest = w.subspan(1);
  if (m.prog == "git") {
    const GitOptions g = SkipGitGlobalOptions(rest);
    // Each git word in a text is a start: `git -C git -C git ...` would read its options again
    // from each one.
    if (!m.Spend(g.next)) return false;
    rest = rest.subspan(g.next);
    // An alias may stand for the rule's words, unless the subcommand is one of git's own.
    if (!m.allow && (g.alias || git_config) && !rest.empty() && !IsGitCommand(rest[0])) {
      return true;
    }
  }
  return rest.size() >= m.rest.size() && std::equal(m.rest.begin(), m.rest.end(), rest.begin());
}

bool ScanText(ArgvMatch& m, std::string_view text, int depth);

// A word the shell expands ($x, "$x", ${x}, a substitution's output): it may stand for any word,
// or for several.
bool Unreadable(std::string_view w) { return w.find_first_of("$`") != std::string_view::npos; }

// An ask rule in a text with expansions: its words match where each is the text's own word or an
// expansion, which may stand for that word and every one after it (`git $sub`, `git -C "$d"
// push`); an expansion in the program's place counts only when the text names the program
// (`g=git; $g push`, `c='git push'; $c`), so that `"$PYTHON" -m pytest` is not taken for git.
bool WildMatch(const ArgvMatch& m, std::span<const std::string> seg, bool names_prog,
               bool at_command) {
  if (seg.empty()) return false;
  // An expansion where a command starts may be the whole command (`c='git push'; $c`); one among
  // a command's arguments (`git add "$f"`) is not a program.
  if (Unreadable(seg[0])) return at_command && names_prog;
  if (Basename(seg[0]) != m.prog) return false;
  std::size_t k = 1;
  if (m.prog == "git") {
    static constexpr std::string_view kTakesValue[] = {
        "-C",          "-c",          "--git-dir",    "--work-tree",
        "--namespace", "--exec-path", "--config-env", "--super-prefix"};
    while (k < seg.size() && seg[k].starts_with('-')) {
      const bool value = std::find(std::begin(kTakesValue), std::end(kTakesValue), seg[k]) !=
                         std::end(kTakesValue);
      k += value ? 2 : 1;
    }
  }
  for (const std::string& word : m.rest) {
    if (k >= seg.size()) return false;
    if (Unreadable(seg[k])) return true;
    if (seg[k] != word) return false;
    ++k;
  }
  return true;
}

// Whether words[i] is where a command starts: the text's start, after a control operator, a
// keyword that starts a command list, a wrapper, or the assignments before a command.
bool AtCommand(const SplitWords& s, std::size_t i) {
  static constexpr std::string_view kBefore[] = {
      "do",   "then",  "else", "elif",  "!",      "{",    "exec", "command",
      "time", "nohup", "env",  "xargs", "setsid", "sudo", "doas", "eval"};
  while (i > 0) {
    const std::string& prev = s.words[i - 1];
    if (s.op[i - 1]) return true;
    if (std::find(std::begin(kBefore), std::end(kBefore), prev) != std::end(kBefore)) return true;
    const std::size_t eq = prev.find('=');
    if (eq == std::string::npos || eq == 0) return false;  // an argument, not an assignment
    --i;
  }
  return true;
}

// Whether the substitution at `at` stands where a command starts: at the text's start, after an
// operator, or after a word that starts a command (`do`, `eval`, `exec`, ...), a quote aside.
// `for f in $(git ls-files)`, `cd "$(git rev-parse ...)"` and `V=$(git describe)` are arguments.
bool SubstitutionAtCommand(std::string_view text, std::size_t at) {
  std::size_t i = at;
  if (i > 0 && text[i - 1] == '"') --i;
  while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t')) --i;
  if (i == 0 || std::string_view(";&|(){}\n`").find(text[i - 1]) != std::string_view::npos) {
    return true;
  }
  std::size_t start = i;
  while (start > 0 &&
         std::string_view(" \t\n;&|(){}").find(text[start - 1]) == std::string_view::npos) {
    --start;
  }
  static constexpr std::string_view kStarts[] = {"do",   "then",  "else",    "elif", "!",
                                                 "eval", "exec",  "command", "time", "nohup",
                                                 "env",  "xargs", "setsid",  "sudo", "doas"};
  const std::string_view prev = text.substr(start, i - start);
  return std::find(std::begin(kStarts), std::end(kStarts), prev) != std::end(kStarts);
}

// Each command substitution ($(...) or `...`) in `text`: what it runs is a text of its own, read
// as one (`echo "$(git push)"`, ``echo `git push` ``); and where it stands for the program, an
// ask rule applies when it names the program (`$(which git) push`). Each is read once at each
// depth.
bool ScanSubstitutions(ArgvMatch& m, std::string_view text, int depth) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::size_t begin = 0, end = std::string_view::npos;
    if (text[i] == '`') {
      begin = i + 1;
      end = text.find('`', begin);
    } else if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '(') {
      begin = i + 2;
      int open = 1;
      for (std::size_t j = begin; j < text.size(); ++j) {
        open += text[j] == '(' ? 1 : text[j] == ')' ? -1 : 0;
        if (open == 0) {
          end = j;
          break;
        }
      }
    } else {
      continue;
    }
    if (end == std::string_view::npos) end = text.size();
    const std::string_view inner = text.substr(begin, end - begin);
    if (m.ask && SubstitutionAtCommand(text, i) && BoundedContains(inner, m.prog)) return true;
    if (ScanText(m, inner, depth + 1)) return true;
    if (m.exhausted) return false;
    i = end;
  }
  return false;
}

// Shell words: the rule's prefix as consecutive words at any position (not only where a command
// starts: `echo git push` matching too is the price of reading no grammar), and each
// `sh -c TEXT` or `env -S TEXT` in them read in turn. Wrappers need no unwrapping here: what
// they wrap is a later position.
bool ScanWords(ArgvMatch& m, const SplitWords& s, int depth) {
  const std::size_t n = s.words.size();
  if (depth > kMaxDepth) {
    return m.ask && std::any_of(s.words.begin(), s.words.end(),
                                [&](const std::string& w) { return BoundedContains(w, m.prog); });
  }
  if (!m.Spend(n + 1)) return false;
  bool git_config = false, names_prog = false;
  for (const std::string& w : s.words) {
    git_config = git_config || SetsGitConfig(w);
    // The program named where an expansion could take it from: an assignment (`g=git`,
    // `c='git push'`) or the expansion itself (`${GIT:-git}`), not a command of its own.
    names_prog =
        names_prog || (m.ask && s.opaque &&
                       ((w.find('=') != std::string::npos && w.find('=') > 0) || Unreadable(w)) &&
                       BoundedContains(w, m.prog));
  }
  // end[i]: the next control operator at or after i.
  std::vector<std::size_t> end(n + 1, n);
  for (std::size_t i = n; i-- > 0;) end[i] = s.op[i] ? i : end[i + 1];
  const std::span<const std::string> all(s.words);
  for (std::size_t i = 0; i < n; ++i) {
    if (s.op[i]) continue;
    const std::span<const std::string> seg = all.subspan(i, end[i] - i);
    if (DirectMatch(m, seg, {}, git_config)) return true;
    if (m.ask && s.opaque && WildMatch(m, seg, names_prog, AtCommand(s, i))) return true;
    const std::string_view name = Basename(seg[0]);
    if (name == "eval") {
      // Its arguments are joined and run as a text: each is read as one (`eval 'git push'`).
      for (std::size_t k = 1; k < seg.size(); ++k) {
        if (ScanText(m, seg[k], depth + 1)) return true;
      }
    }
    if (IsShell(name)) {
      std::size_t scanned = 0;
      const auto text = ShellCommandText(seg, &scanned);
      if (!m.Spend(scanned)) return false;
      if (text && ScanText(m, *text, depth + 1)) return true;
    } else if (name == "watch") {
      std::size_t next = 0;
      if (!m.Spend(seg.size())) return false;
      if (const auto text = WatchText(seg, &next); text && ScanText(m, *text, depth + 1))
        return true;
    } else if (name == "env") {
      const Unwrapped u = UnwrapEnv(seg);
      if (!m.Spend(u.next)) return false;
      if (u.prefix) {
        if (!m.Spend(u.prefix->size())) return false;
        SplitWords more = Split(*u.prefix);
        if (more.hard && m.ask && BoundedContains(*u.prefix, m.prog)) return true;
        if (!m.Spend(seg.size() - u.next + 1)) return false;
        for (std::size_t k = u.next; k < seg.size(); ++k) {
          more.words.push_back(seg[k]);
          more.op.push_back(0);
        }
        if (ScanWords(m, more, depth + 1)) return true;
      }
    }
    if (m.exhausted) return false;
  }
  return false;
}

bool ScanText(ArgvMatch& m, std::string_view text, int depth) {
  // The whole text is searched for the program, past the part the splitter reads: a linear
  // search, and what hides beyond 64 KiB is what most needs asking about.
  if (depth > kMaxDepth) return m.ask && BoundedContains(text, m.prog);
  if (!m.Spend(std::min(text.size(), kMaxShellText) + 1)) return false;
  const SplitWords s = Split(text);
  if (s.hard && m.ask && BoundedContains(text, m.prog)) return true;
  if (s.opaque && ScanSubstitutions(m, text.substr(0, kMaxShellText), depth)) return true;
  return ScanWords(m, s, depth);
}

// An argv as it will be executed: the program (resolved, at the top), then through wrappers one
// at a time, into `sh -c TEXT` as shell words.
bool MatchChain(ArgvMatch& m, std::span<const std::string> argv, std::string_view program) {
  std::vector<std::string> owned;  // env -S: the words it made
  bool git_config = false;
  for (int depth = 0; depth <= kMaxDepth; ++depth) {
    if (argv.empty() || !m.Spend(argv.size() + 1)) return false;
    if (DirectMatch(m, argv, program, git_config)) return true;
    // A multi-call binary (busybox, uutils) acts by the name it was called by.
    const std::string_view called = Basename(argv[0]);
    const bool by_call = IsShell(called) || called == "watch" || Unwrap(called, argv).has_value();
    const std::string_view name = by_call || program.empty() ? called : Basename(program);
    program = {};
    if (IsShell(name)) {
      if (m.allow) return false;
      std::size_t scanned = 0;
      const auto text = ShellCommandText(argv, &scanned);
      return text && ScanText(m, *text, depth + 1);
    }
    if (name == "watch") {
      std::size_t next = 0;
      const auto text = WatchText(argv, &next);
      if (text) return !m.allow && ScanText(m, *text, depth + 1);
      if (next >= argv.size()) return false;
      argv = argv.subspan(next);
      continue;
    }
    const std::optional<Unwrapped> u = Unwrap(name, argv);
    if (!u || (!u->prefix && u->next >= argv.size())) return false;
    git_config = git_config || u->git_config;
    if (!u->prefix) {
      argv = argv.subspan(u->next);
      continue;
    }
    const SplitWords s = Split(*u->prefix);
    if (s.opaque && m.ask && BoundedContains(*u->prefix, m.prog)) return true;
    // As GNU env reads them: the split words are env's arguments again (NAME=VALUE, options).
    std::vector<std::string> words{"env"};
    words.insert(words.end(), s.words.begin(), s.words.end());
    words.insert(words.end(), argv.begin() + static_cast<std::ptrdiff_t>(u->next), argv.end());
    owned = std::move(words);
    argv = owned;
  }
  // Deeper than a person writes: read as opaque.
  return m.ask && std::any_of(argv.begin(), argv.end(),
                              [&](const std::string& w) { return BoundedContains(w, m.prog); });
}

// --- evaluation and checks ---

template <typename Matches>
ApprovalMatch Evaluate(std::span<const ApprovalRule> rules, ApprovalMatcher matcher,
                       Matches matches) {
  ApprovalMatch best;
  std::vector<PolicyLayer> decided;  // layers whose first match has been seen
  for (const ApprovalRule& r : rules) {
    if (r.matcher != matcher) continue;
    if (std::find(decided.begin(), decided.end(), r.layer) != decided.end()) continue;
    if (!matches(r)) continue;
    decided.push_back(r.layer);
    const int s = ApprovalStrictness(r.decision);
    const bool stricter = best.rule == nullptr || s > ApprovalStrictness(best.decision);
    const bool earlier_tie = best.rule != nullptr && s == ApprovalStrictness(best.decision) &&
                             static_cast<int>(r.layer) < static_cast<int>(best.rule->layer);
    if (stricter || earlier_tie) best = {r.decision, &r};
  }
  return best;
}

struct HostPortExample {
  std::string host;
  int port = 0;
};

// "host", "host:port", "[v6]", "[v6]:port", or a bare IPv6 address.
std::optional<HostPortExample> ParseHostPortExample(std::string_view s) {
  HostPortExample out;
  std::string_view host = s, port;
  if (s.starts_with("[")) {
    const auto close = s.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = s.substr(1, close - 1);
    std::string_view tail = s.substr(close + 1);
    if (!tail.empty()) {
      if (tail[0] != ':') return std::nullopt;
      port = tail.substr(1);
      if (port.empty()) return std::nullopt;
    }
  } else if (std::count(s.begin(), s.end(), ':') == 1) {
    host = s.substr(0, s.find(':'));
    port = s.substr(s.find(':') + 1);
    if (port.empty()) return std::nullopt;
  }
  if (host.empty()) return std::nullopt;
  if (!port.empty()) {
    if (port.size() > 5) return std::nullopt;
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9') return std::nullopt;
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) return std::nullopt;
    out.port = p;
  }
  out.host = std::string(host);
  return out;
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// A value shown in a message: cut, with NUL and control bytes made visible.
std::string Shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 120)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  if (s.size() > 120) out += "...";
  return out;
}

}  // namespace

int ApprovalStrictness(ApprovalDecision d) {
  switch (d) {
    case ApprovalDecision::kAllow:
      return 0;
    case ApprovalDecision::kAsk:
      return 1;
    case ApprovalDecision::kDeny:
      return 2;
  }
  return 2;  // an out-of-range value is read as the strictest
}

bool ApprovalGlobMatches(std::string_view pattern, std::string_view text, bool path) {
  if (!path) return SegmentMatches(pattern, text);
  const std::vector<std::string_view> pat = Components(pattern), txt = Components(text);
  return ComponentReach(pat, txt).back() != 0;
}

ShellWords SplitShellWords(std::string_view text) {
  SplitWords s = Split(text);
  return ShellWords{std::move(s.words), s.opaque};
}

bool RuleMatchesTool(const ApprovalRule& rule, std::string_view tool) {
  return rule.matcher == ApprovalMatcher::kTool && !rule.pattern.empty() &&
         ApprovalGlobMatches(rule.pattern, tool, /*path=*/false);
}

bool RuleMatchesPath(const ApprovalRule& rule, std::string_view path) {
  return rule.matcher == ApprovalMatcher::kPath && PathPatternMatches(rule.pattern, path);
}

bool RuleCouldMatchBelow(const ApprovalRule& rule, std::string_view dir) {
  return rule.matcher == ApprovalMatcher::kPath && PatternCouldMatchBelow(rule.pattern, dir);
}

bool RuleReachesThrough(const ApprovalRule& rule, std::string_view rel) {
  if (rule.matcher != ApprovalMatcher::kPath) return false;
  if (PathPatternMatches(rule.pattern, rel) ||
      PathPatternMatches(rule.pattern, std::string(rel) + "/x"))
    return true;
  std::string_view p = rule.pattern;
  while (!p.empty() && p.front() == '/') p.remove_prefix(1);
  const bool anchored = p.find('/') != std::string_view::npos || p.size() != rule.pattern.size();
  return anchored && !p.starts_with("**") && PatternCouldMatchBelow(rule.pattern, rel);
}

bool RuleMatchesDomain(const ApprovalRule& rule, std::string_view host, int port) {
  if (rule.matcher != ApprovalMatcher::kDomain) return false;
  const auto r = ParseDomainRule(rule.pattern, rule.where);
  if (!r) return false;
  if (r->port && port != 0 && *r->port != port) return false;
  std::string name = AsciiLower(host);
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (const auto ip = ParseIpAddress(name)) return r->address && r->host == ip->Text();
  return r->MatchesName(name);
}

bool RuleMatchesArgv(const ApprovalRule& rule, const ArgvSubject& subject) {
  if (rule.matcher != ApprovalMatcher::kArgv || rule.argv.empty()) return false;
  ArgvMatch m;
  m.prog = std::string(Basename(rule.argv[0]));
  if (m.prog.empty()) return false;
  std::span<const std::string> rest = std::span(rule.argv).subspan(1);
  if (m.prog == "git") rest = rest.subspan(SkipGitGlobalOptions(rest).next);
  m.rest.assign(rest.begin(), rest.end());
  m.ask = rule.decision == ApprovalDecision::kAsk;
  m.allow = rule.decision == ApprovalDecision::kAllow;
  std::vector<std::string> only_program;
  std::span<const std::string> argv = subject.argv;
  if (argv.empty()) {
    if (subject.program.empty()) return false;
    only_program.emplace_back(subject.program);
    argv = only_program;
  }
  bool matched = MatchChain(m, argv, subject.program);
  if (!matched && !m.exhausted && !m.allow) {
    // A launcher cordon does not know (find -exec, unshare, flock, ssh-agent, git submodule
    // foreach): the rule's words anywhere in the argv, and each `sh -c TEXT` in it, as in a text.
    SplitWords words;
    words.words.assign(argv.begin(), argv.end());
    words.op.assign(argv.size(), 0);
    matched = ScanWords(m, words, 1);
  }
  if (!m.exhausted) return matched;
  // Too much to read: an ask rule asks when its program is named at all.
  return m.ask && (BoundedContains(subject.program, m.prog) ||
                   std::any_of(argv.begin(), argv.end(),
                               [&](const std::string& w) { return BoundedContains(w, m.prog); }));
}

ApprovalMatch EvaluateTool(std::span<const ApprovalRule> rules, std::string_view tool) {
  return Evaluate(rules, ApprovalMatcher::kTool,
                  [&](const ApprovalRule& r) { return RuleMatchesTool(r, tool); });
}

ApprovalMatch EvaluateArgv(std::span<const ApprovalRule> rules, const ArgvSubject& subject) {
  return Evaluate(rules, ApprovalMatcher::kArgv,
                  [&](const ApprovalRule& r) { return RuleMatchesArgv(r, subject); });
}

ApprovalMatch EvaluatePath(std::span<const ApprovalRule> rules, std::string_view path) {
  return Evaluate(rules, ApprovalMatcher::kPath,
                  [&](const ApprovalRule& r) { return RuleMatchesPath(r, path); });
}

ApprovalMatch EvaluateDomain(std::span<const ApprovalRule> rules, std::string_view host, int port) {
  return Evaluate(rules, ApprovalMatcher::kDomain,
                  [&](const ApprovalRule& r) { return RuleMatchesDomain(r, host, port); });
}

Status CheckApprovalRule(const ApprovalRule& rule) {
  const std::string head =
      (rule.where.empty() ? "" : rule.where + ": ") + "approval rule \"" + Shown(rule.id) + "\": ";
  auto bad = [&](const std::string& why) { return Fail(Code::kInvalidInput, head + why); };

  if (rule.id.empty()) return bad("has no id");
  if (rule.id.size() > 64) return bad("its id is longer than 64 characters");
  for (char c : rule.id) {
    const bool ok = IsWordChar(c) || c == '.' || c == '-';
    if (!ok) return bad("its id has a character other than A-Z a-z 0-9 _ . -");
  }

  const std::string_view matcher = Name(kApprovalMatcherNames, rule.matcher);
  if (rule.matcher == ApprovalMatcher::kArgv) {
    if (rule.argv.empty()) return bad("argv is empty (write the prefix, as [\"git\", \"push\"])");
    if (!rule.pattern.empty()) return bad("has both argv and a pattern (one matcher per rule)");
    if (rule.argv.size() > kMaxApprovalArgvWords) {
      return bad("argv has more than " + std::to_string(kMaxApprovalArgvWords) + " words");
    }
    for (const std::string& w : rule.argv) {
      if (w.empty()) return bad("argv has an empty word");
      if (w.size() > kMaxApprovalPatternBytes) {
        return bad("an argv word is longer than " + std::to_string(kMaxApprovalPatternBytes) +
                   " bytes");
      }
      if (HasNul(w)) return bad("an argv word has a NUL byte");
    }
    if (Basename(rule.argv[0]).empty()) return bad("argv's program ends in '/'");
  } else {
    if (rule.pattern.empty()) return bad("has an empty " + std::string(matcher) + " pattern");
    if (!rule.argv.empty()) {
      return bad("has both a " + std::string(matcher) + " pattern and argv (one matcher per rule)");
    }
    if (rule.pattern.size() > kMaxApprovalPatternBytes) {
      return bad("its pattern is longer than " + std::to_string(kMaxApprovalPatternBytes) +
                 " bytes");
    }
    if (HasNul(rule.pattern)) return bad("its pattern has a NUL byte");
  }
  if (rule.matcher == ApprovalMatcher::kDomain) {
    if (auto r = ParseDomainRule(rule.pattern, rule.where); !r) return bad(r.error().message);
  }
  if (rule.matcher == ApprovalMatcher::kPath) {
    if (rule.pattern.front() == '/') {
      return bad("its path pattern \"" + Shown(rule.pattern) +
                 "\" is absolute (write it relative to the workspace)");
    }
    std::size_t start = 0;
    while (start <= rule.pattern.size()) {
      std::size_t slash = rule.pattern.find('/', start);
      if (slash == std::string::npos) slash = rule.pattern.size();
      if (std::string_view(rule.pattern).substr(start, slash - start) == "..") {
        return bad("its path pattern \"" + Shown(rule.pattern) + "\" has a .. component");
      }
      start = slash + 1;
    }
  }

  if (rule.match.empty()) {
    return bad("has no match example (each rule shows at least one " + std::string(matcher) +
               " it matches)");
  }
  // Whether one example matches, or why it cannot be read.
  auto run = [&](const std::string& ex) -> Result<bool> {
    if (HasNul(ex)) return Fail(Code::kInvalidInput, "has a NUL byte");
    switch (rule.matcher) {
      case ApprovalMatcher::kTool:
        return RuleMatchesTool(rule, ex);
      case ApprovalMatcher::kPath:
        return RuleMatchesPath(rule, ex);
      case ApprovalMatcher::kDomain: {
        const auto hp = ParseHostPortExample(ex);
        if (!hp) return Fail(Code::kInvalidInput, "is not host or host:port");
        return RuleMatchesDomain(rule, hp->host, hp->port);
      }
      case ApprovalMatcher::kArgv: {
        const ShellWords words = SplitShellWords(ex);
        if (words.words.empty()) return Fail(Code::kInvalidInput, "has no words");
        return RuleMatchesArgv(rule, ArgvSubject{words.words, {}});
      }
    }
    return Fail(Code::kInvalidInput, "is for an unknown matcher");
  };
  for (const std::string& ex : rule.match) {
    const Result<bool> r = run(ex);
    if (!r) return bad("its match example \"" + Shown(ex) + "\" " + r.error().message);
    if (!*r) return bad("its match example \"" + Shown(ex) + "\" does not match");
  }
  for (const std::string& ex : rule.not_match) {
    const Result<bool> r = run(ex);
    if (!r) return bad("its not_match example \"" + Shown(ex) + "\" " + r.error().message);
    if (*r) return bad("its not_match example \"" + Shown(ex) + "\" matches");
  }
  return {};
}

}  // namespace cordon
