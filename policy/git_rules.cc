// What may be written inside a git directory, and the paths a repository's git configuration
// executes (policy/git_rules.h).
#include "policy/git_rules.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace cordon {
namespace {

std::vector<std::string_view> Split(std::string_view rel) {
  std::vector<std::string_view> parts;
  while (!rel.empty()) {
    std::size_t slash = rel.find('/');
    std::string_view p = rel.substr(0, slash);
    if (!p.empty() && p != ".") parts.push_back(p);
    rel = slash == std::string_view::npos ? std::string_view() : rel.substr(slash + 1);
  }
  return parts;
}

// Entries at the top of a git directory that git reads for configuration, commands or the
// location of other git directories.
bool TellsGitWhatToDo(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "config",  "config.worktree", "commondir", "gitdir",  "hooks",  "info",
      "modules", "worktrees",       "branches",  "remotes", "shallow"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

bool WritableParts(const std::vector<std::string_view>& parts, std::size_t from) {
  if (from >= parts.size()) return false;  // the git directory itself
  const std::string_view first = parts[from];
  if (std::find(parts.begin() + static_cast<std::ptrdiff_t>(from), parts.end(), "..") !=
      parts.end()) {
    return false;
  }
  if (from + 1 == parts.size()) {
    if (IsGitSyncedFile(first)) return true;
    constexpr std::string_view kLock = ".lock";
    return first.size() > kLock.size() && first.ends_with(kLock) &&
           IsGitSyncedFile(first.substr(0, first.size() - kLock.size()));
  }
  if (IsGitSharedDir(first)) return true;
  if (first == "worktrees") return WritableParts(parts, from + 2);
  if (first == "modules") {
    // A submodule's name may hold slashes (modules/libs/foo/). Read with a one-component name
    // the path must be writable, and no longer reading of the name may land on an entry git
    // takes instructions from (modules/a/objects/config is the config of submodule a/objects).
    if (!WritableParts(parts, from + 2)) return false;
    for (std::size_t end = from + 3; end < parts.size(); ++end) {
      if (TellsGitWhatToDo(parts[end])) return false;
    }
    return true;
  }
  return false;
}

}  // namespace

bool IsGitSharedDir(std::string_view name) {
  return name == "objects" || name == "refs" || name == "logs";
}

bool IsGitSyncedFile(std::string_view name) {
  if (name == "HEAD" || name == "index" || name == "packed-refs" || name == "COMMIT_EDITMSG" ||
      name == "AUTO_MERGE") {
    return true;
  }
  // git update-index --split-index writes the shared part of the index as sharedindex.<hash>
  // (SHA-1 or SHA-256) beside it, and the index then names it: kept private, the host index
  // would point at a file the host does not have.
  constexpr std::string_view kShared = "sharedindex.";
  if (name.starts_with(kShared)) {
    const std::string_view hex = name.substr(kShared.size());
    return (hex.size() == 40 || hex.size() == 64) &&
           std::all_of(hex.begin(), hex.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  }
  // ORIG_HEAD, FETCH_HEAD, MERGE_HEAD, CHERRY_PICK_HEAD, REVERT_HEAD, REBASE_HEAD, BISECT_HEAD...
  constexpr std::string_view kSuffix = "_HEAD";
  if (name.size() <= kSuffix.size() || !name.ends_with(kSuffix)) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || c == '_'; });
}

bool IsGitWritable(std::string_view rel) { return WritableParts(Split(rel), 0); }

bool IsGitContentPath(std::string_view rel) {
  const std::vector<std::string_view> parts = Split(rel);
  const auto git = std::find(parts.begin(), parts.end(), ".git");
  if (git == parts.end() || git + 1 == parts.end()) return false;
  if (std::find(git + 1, parts.end(), "refs") != parts.end()) return true;
  std::string_view leaf = parts.back();
  if (leaf.ends_with(".lock")) leaf.remove_suffix(5);
  return leaf == "index" || leaf == "HEAD" || leaf == "packed-refs";
}

bool GitRuleAllowsWrite(std::string_view rel) {
  const std::vector<std::string_view> parts = Split(rel);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == ".git" && i + 1 < parts.size()) return WritableParts(parts, i + 1);
  }
  return true;
}

bool IsGitDirStructure(std::string_view rel) {
  const std::vector<std::string_view> parts = Split(rel);
  if (parts.empty()) return false;
  const std::string_view leaf = parts.back();
  const bool structure = leaf == "HEAD" || leaf == "objects" || leaf == "refs";
  if (!structure) return false;
  if (parts.size() == 1) return true;
  // worktrees/NAME/HEAD (a linked worktree's objects and refs are its commondir's)
  if (parts[0] == "worktrees") return parts.size() == 3 && leaf == "HEAD";
  // modules/NAME/{HEAD,objects,refs}, NAME may hold slashes: any such leaf below modules/
  return parts[0] == "modules" && parts.size() >= 3;
}

bool IsGitRepositoryStructure(std::string_view rel) {
  const std::vector<std::string_view> parts = Split(rel);
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i] != ".git") continue;
    std::string sub;
    for (std::size_t k = i + 1; k < parts.size(); ++k) {
      if (!sub.empty()) sub += '/';
      sub += parts[k];
    }
    return IsGitDirStructure(sub);
  }
  return false;
}

bool IsGitHeadContent(std::string_view content) {
  if (content.ends_with('\n')) content.remove_suffix(1);
  auto hex = [](std::string_view s) {
    return (s.size() == 40 || s.size() == 64) && std::all_of(s.begin(), s.end(), [](char c) {
             return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
  };
  if (hex(content)) return true;
  constexpr std::string_view kRef = "ref: refs/";
  if (!content.starts_with(kRef) || content.size() == kRef.size()) return false;
  const std::string_view name = content.substr(kRef.size() - 5);  // "refs/..."
  // A ref name git accepts in HEAD: printable, no "..", no control characters or spaces.
  return name.find("..") == std::string_view::npos &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return static_cast<unsigned char>(c) > ' ' && c != 0x7f && c != '~' && c != '^' &&
                  c != ':' && c != '?' && c != '*' && c != '[' && c != '\\';
         });
}

}  // namespace cordon

// ---- Paths a repository's git configuration executes ----

namespace cordon {
namespace {

constexpr std::size_t kMaxPath = 4096;  // PATH_MAX: a longer value names nothing git can open

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAlnum(char c) { return IsAlpha(c) || (c >= '0' && c <= '9'); }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }

// One `name = value` of a config file, with the section it is in.
struct ConfigEntry {
  std::string section;     // lowercased
  std::string subsection;  // as written (legacy [a.b] lowercased, as git does)
  bool has_subsection = false;
  std::string key;  // lowercased
  std::string value;
  bool has_value = false;  // `key` alone is a boolean true
};

// git-config's grammar (git's config.c), over a string: a line git would refuse is skipped up to
// its end and parsing goes on, so one bad line hides nothing after it. CRLF counts as LF.
class ConfigParser {
 public:
  explicit ConfigParser(std::string_view text) : text_(text) {}

  template <typename Fn>
  void Run(Fn&& on_entry) {
    for (;;) {
      const int c = Get();
      if (c == kEof) return;
      if (c == '\n' || IsSpace(static_cast<char>(c))) continue;
      if (c == '#' || c == ';') {
        SkipLine();
      } else if (c == '[') {
        if (!Header()) {
          in_section_ = false;  // keys below a broken header belong to no section
          SkipLine();
        }
      } else if (IsAlpha(static_cast<char>(c)) && in_section_) {
        ConfigEntry e;
        e.section = section_;
        e.subsection = subsection_;
        e.has_subsection = has_subsection_;
        e.key = std::string(1, Lower(static_cast<char>(c)));
        if (KeyAndValue(e)) on_entry(e);
      } else {
        SkipLine();
      }
    }
  }

 private:
  static constexpr int kEof = -1;

  int Peek() const {
    if (pos_ >= text_.size()) return kEof;
    const char c = text_[pos_];
    if (c == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') return '\n';
    return static_cast<unsigned char>(c);
  }
  int Get() {
    const int c = Peek();
    if (c == kEof) return c;
    pos_ += (c == '\n' && text_[pos_] == '\r') ? 2 : 1;
    last_ = c;
    return c;
  }
  // To the start of the next line; nothing when the newline was the last character read.
  void SkipLine() {
    if (last_ == '\n') return;
    last_ = '\n';
    const std::size_t nl = text_.find('\n', pos_);
    pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
  }

  // After `[`: `name]`, `name "sub"]` or the legacy `name.sub]`.
  bool Header() {
    std::string name;
    int c = Get();
    while (c != kEof && (IsAlnum(static_cast<char>(c)) || c == '-' || c == '.')) {
      name += Lower(static_cast<char>(c));
      c = Get();
    }
    if (name.empty()) return false;
    section_.clear();
    subsection_.clear();
    has_subsection_ = false;
    if (c == ']') {
      const std::size_t dot = name.find('.');
      if (dot == 0 || (dot != std::string::npos && dot + 1 == name.size())) return false;
      section_ = name.substr(0, dot);
      if (dot != std::string::npos) {
        subsection_ = name.substr(dot + 1);
        has_subsection_ = true;
      }
      in_section_ = true;
      return true;
    }
    if (!IsSpace(static_cast<char>(c)) || name.find('.') != std::string::npos) return false;
    while (c != kEof && IsSpace(static_cast<char>(c))) c = Get();
    if (c != '"') return false;
    for (c = Get(); c != '"'; c = Get()) {
      if (c == kEof || c == '\n') return false;
      if (c == '\\') {
        c = Get();
        if (c == kEof || c == '\n') return false;
      }
      subsection_ += static_cast<char>(c);
    }
    if (Get() != ']') return false;
    section_ = std::move(name);
    has_subsection_ = true;
    in_section_ = true;
    return true;
  }

  // The rest of a key (its first letter is in e.key), then `= value`, or nothing (true).
  bool KeyAndValue(ConfigEntry& e) {
    int c = Get();
    while (c != kEof && (IsAlnum(static_cast<char>(c)) || c == '-')) {
      e.key += Lower(static_cast<char>(c));
      c = Get();
    }
    while (c != kEof && IsSpace(static_cast<char>(c))) c = Get();
    if (c == kEof || c == '\n') return true;
    if (c == '#' || c == ';') {
      SkipLine();
      return true;
    }
    if (c != '=') {
      SkipLine();
      return false;
    }
    e.has_value = true;
    return Value(e.value);
  }

  // git's parse_value: whitespace outside quotes is trimmed at both ends and kept inside; `"`
  // toggles quoting; \\ \" \n \t \b and a backslash-newline continuation; a comment outside
  // quotes ends the value. A newline inside quotes or another escape: the line is refused.
  bool Value(std::string& out) {
    bool quote = false;
    std::size_t spaces = 0;
    for (;;) {
      int c = Get();
      if (c == kEof || c == '\n') return !quote;
      if (!quote && (c == '#' || c == ';')) {
        SkipLine();
        return true;
      }
      if (!quote && IsSpace(static_cast<char>(c))) {
        if (!out.empty()) ++spaces;
        continue;
      }
      out.append(spaces, ' ');
      spaces = 0;
      if (c == '\\') {
        c = Get();
        switch (c) {
          case '\n':
            continue;
          case 't':
            out += '\t';
            continue;
          case 'b':
            out += '\b';
            continue;
          case 'n':
            out += '\n';
            continue;
          case '\\':
          case '"':
            out += static_cast<char>(c);
            continue;
          default:
            SkipLine();
            return false;
        }
      }
      if (c == '"') {
        quote = !quote;
        continue;
      }
      out += static_cast<char>(c);
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  int last_ = '\n';
  bool in_section_ = false;
  std::string section_, subsection_;
  bool has_subsection_ = false;
};

// `base/rel`, with `.` and `..` resolved; nullopt-like empty result when it leaves the workspace
// or is the workspace itself, or is not a usable path.
bool Normalize(std::string_view base, std::string_view rel, std::string& out) {
  out.clear();
  if (rel.empty() || rel.size() > kMaxPath || rel.find('\0') != std::string_view::npos) {
    return false;
  }
  std::vector<std::string_view> parts;
  for (std::string_view half : {base, rel}) {
    while (!half.empty()) {
      const std::size_t slash = half.find('/');
      const std::string_view p = half.substr(0, slash);
      half = slash == std::string_view::npos ? std::string_view() : half.substr(slash + 1);
      if (p.empty() || p == ".") continue;
      if (p == "..") {
        if (parts.empty()) return false;  // above the workspace
        parts.pop_back();
        continue;
      }
      parts.push_back(p);
    }
  }
  for (const auto& p : parts) {
    if (!out.empty()) out += '/';
    out += p;
  }
  return !out.empty();
}

// A value's path made workspace-relative: relative to `base`; absolute only beneath the
// workspace's absolute path; `~` and `$VAR` never (they name the user's home or the environment).
bool ResolvePath(std::string_view value, std::string_view base, std::string_view workspace_abs,
                 std::string& out) {
  if (value.empty() || value[0] == '~' || value.find('$') != std::string_view::npos ||
      value.find('`') != std::string_view::npos) {
    return false;
  }
  if (value[0] == '/') {
    std::string_view ws = workspace_abs;
    while (ws.size() > 1 && ws.back() == '/') ws.remove_suffix(1);
    if (ws.empty() || ws[0] != '/') return false;
    if (ws == "/") return Normalize("", value.substr(1), out);
    if (!value.starts_with(ws) || value.size() <= ws.size() || value[ws.size()] != '/') {
      return false;
    }
    return Normalize("", value.substr(ws.size() + 1), out);
  }
  return Normalize(base, value, out);
}

// The words of the first simple command of each list element of a shell command line: quotes
// and backslashes as sh reads them; ; & | && || ( ) and newlines separate commands. Bounded by
// the value's length.
std::vector<std::vector<std::string>> ShellCommands(std::string_view cmd) {
  std::vector<std::vector<std::string>> out(1);
  std::string word;
  bool in_word = false;
  auto end_word = [&] {
    if (in_word) out.back().push_back(std::move(word));
    word.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < cmd.size(); ++i) {
    const char c = cmd[i];
    if (c == '\'') {
      const std::size_t close = cmd.find('\'', i + 1);
      const std::size_t end = close == std::string_view::npos ? cmd.size() : close;
      word.append(cmd.substr(i + 1, end - i - 1));
      in_word = true;
      i = end;
    } else if (c == '"') {
      in_word = true;
      for (++i; i < cmd.size() && cmd[i] != '"'; ++i) {
        if (cmd[i] == '\\' && i + 1 < cmd.size()) ++i;
        word += cmd[i];
      }
    } else if (c == '\\' && i + 1 < cmd.size()) {
      word += cmd[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      end_word();
    } else if (c == ';' || c == '&' || c == '|' || c == '\n' || c == '(' || c == ')' || c == '{' ||
               c == '}') {
      end_word();
      if (!out.back().empty()) out.emplace_back();
    } else {
      word += c;
      in_word = true;
    }
  }
  end_word();
  if (out.back().empty()) out.pop_back();
  return out;
}

std::string_view Basename(std::string_view p) {
  const std::size_t slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

bool IsShell(std::string_view name) {
  return name == "sh" || name == "bash" || name == "dash" || name == "zsh" || name == "ksh" ||
         name == "mksh" || name == "ash" || name == "fish";
}
bool IsInterpreter(std::string_view name) {
  constexpr std::string_view kNames[] = {"node",      "nodejs", "python",  "python2", "python3",
                                         "perl",      "ruby",   "php",     "lua",     "deno",
                                         "bun",       "tsx",    "ts-node", "pwsh",    "Rscript",
                                         "osascript", "awk",    "gawk",    "tclsh",   "wish"};
  if (std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames)) return true;
  // python3.11, perl5.36, ...
  return (name.starts_with("python") || name.starts_with("perl") || name.starts_with("ruby")) &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.") == std::string_view::npos;
}
bool IsAssignment(std::string_view w) {
  const std::size_t eq = w.find('=');
  if (eq == std::string_view::npos || eq == 0 || !(IsAlpha(w[0]) || w[0] == '_')) return false;
  return std::all_of(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(eq),
                     [](char c) { return IsAlnum(c) || c == '_'; });
}

// The words of a command line that name files it runs from the worktree: each command's
// program when it holds a slash (a bare name is looked up on PATH), and the script an
// interpreter or a shell is given; `sh -c 'CMD'` is read again, a few levels deep.
void CommandPaths(std::string_view cmd, int depth, std::vector<std::string>& out) {
  if (depth > 3) return;
  for (const auto& words : ShellCommands(cmd)) {
    std::size_t i = 0;
    // Prefixes that run the command that follows them.
    while (i < words.size()) {
      const std::string_view w = words[i];
      if (IsAssignment(w) || w == "!" || w == "exec" || w == "command" || w == "nohup" ||
          w == "time" || w == "then" || w == "do" || w == "else" || w == "if" || w == "while" ||
          w == "until" || w == "builtin") {
        ++i;
      } else if (Basename(w) == "env") {
        for (++i; i < words.size() && (words[i].starts_with("-") || IsAssignment(words[i]));) ++i;
      } else if (w.ends_with("()")) {
        ++i;  // f() { ...: a function definition; its body follows
      } else {
        break;
      }
    }
    if (i >= words.size()) continue;
    const std::string_view prog = words[i];
    if (prog.find('/') != std::string_view::npos) out.emplace_back(prog);
    const std::string_view base = Basename(prog);
    const bool shell = IsShell(base);
    if (!shell && !IsInterpreter(base)) continue;
    for (++i; i < words.size(); ++i) {
      const std::string_view w = words[i];
      if (shell && w.size() > 1 && w[0] == '-' && w.find('c') != std::string_view::npos &&
          w.find_first_not_of("-abcefhilmnrsuvxCeo") == std::string_view::npos) {
        if (i + 1 < words.size()) CommandPaths(words[i + 1], depth + 1, out);
        break;
      }
      if (!shell && (w == "-c" || w == "-m" || w == "-e" || w == "-E" || w == "--eval" ||
                     w == "-p" || w == "-r")) {
        // a module, or code on the command line: no script file to name
        if (w != "-r") break;
        ++i;  // node -r MODULE: its argument, then the script
        continue;
      }
      if (w.starts_with("-")) continue;
      if ((base == "deno" || base == "bun") && (w == "run" || w == "x")) continue;
      out.emplace_back(w);  // the script: relative to the working directory, slash or not
      break;
    }
  }
}

enum class Kind {
  kHooksPath,
  kFsmonitor,
  kInclude,
  kCommand,      // run by the shell
  kBangCommand,  // a shell command when it starts with `!`
  kCredential,   // `!cmd`, an absolute path, or a name git prefixes with credential-
  kProgram,      // run directly: the whole value is the program
  kPager,        // a boolean, or a command
  kDir,          // a directory git copies hooks from (init.templateDir)
};

struct KeyRule {
  std::string_view section;
  bool subsection;           // the rule is for section.<any>.key
  std::string_view key;      // lowercased; "*" any key
  std::string_view spelled;  // as the documentation spells the key
  Kind kind;
};

constexpr KeyRule kKeyRules[] = {
    {"core", false, "hookspath", "hooksPath", Kind::kHooksPath},
    {"core", false, "fsmonitor", "fsmonitor", Kind::kFsmonitor},
    {"include", false, "path", "path", Kind::kInclude},
    {"includeif", true, "path", "path", Kind::kInclude},
    {"core", false, "editor", "editor", Kind::kCommand},
    {"core", false, "pager", "pager", Kind::kCommand},
    {"core", false, "sshcommand", "sshCommand", Kind::kCommand},
    {"core", false, "askpass", "askPass", Kind::kProgram},
    {"core", false, "gitproxy", "gitProxy", Kind::kCommand},
    {"sequence", false, "editor", "editor", Kind::kCommand},
    {"diff", false, "external", "external", Kind::kCommand},
    {"diff", true, "command", "command", Kind::kCommand},
    {"diff", true, "textconv", "textconv", Kind::kCommand},
    {"filter", true, "clean", "clean", Kind::kCommand},
    {"filter", true, "smudge", "smudge", Kind::kCommand},
    {"filter", true, "process", "process", Kind::kCommand},
    {"merge", true, "driver", "driver", Kind::kCommand},
    {"credential", false, "helper", "helper", Kind::kCredential},
    {"credential", true, "helper", "helper", Kind::kCredential},
    {"gpg", false, "program", "program", Kind::kProgram},
    {"gpg", true, "program", "program", Kind::kProgram},
    {"gpg", true, "defaultkeycommand", "defaultKeyCommand", Kind::kCommand},
    {"alias", false, "*", "", Kind::kBangCommand},
    {"alias", true, "command", "command", Kind::kBangCommand},
    {"submodule", true, "update", "update", Kind::kBangCommand},
    {"uploadpack", false, "packobjectshook", "packObjectsHook", Kind::kCommand},
    {"pager", false, "*", "", Kind::kPager},
    {"interactive", false, "difffilter", "diffFilter", Kind::kCommand},
    {"mergetool", true, "cmd", "cmd", Kind::kCommand},
    {"mergetool", true, "path", "path", Kind::kProgram},
    {"difftool", true, "cmd", "cmd", Kind::kCommand},
    {"difftool", true, "path", "path", Kind::kProgram},
    {"browser", true, "cmd", "cmd", Kind::kCommand},
    {"browser", true, "path", "path", Kind::kProgram},
    {"man", true, "cmd", "cmd", Kind::kCommand},
    {"man", true, "path", "path", Kind::kProgram},
    {"trailer", true, "cmd", "cmd", Kind::kCommand},
    {"trailer", true, "command", "command", Kind::kCommand},
    {"tar", true, "command", "command", Kind::kCommand},
    {"guitool", true, "cmd", "cmd", Kind::kCommand},
    {"remote", true, "uploadpack", "uploadpack", Kind::kCommand},
    {"remote", true, "receivepack", "receivepack", Kind::kCommand},
    {"sendemail", false, "sendmailcmd", "sendmailCmd", Kind::kCommand},
    {"sendemail", false, "tocmd", "toCmd", Kind::kCommand},
    {"sendemail", false, "cccmd", "ccCmd", Kind::kCommand},
    {"sendemail", false, "headercmd", "headerCmd", Kind::kCommand},
    {"sendemail", false, "smtpserver", "smtpServer", Kind::kProgram},
    {"init", false, "templatedir", "templateDir", Kind::kDir},
};

const KeyRule* RuleFor(const ConfigEntry& e) {
  for (const auto& r : kKeyRules) {
    if (r.section == e.section && r.subsection == e.has_subsection &&
        (r.key == "*" || r.key == e.key)) {
      return &r;
    }
  }
  return nullptr;
}

// How git's documentation writes the key: core.hooksPath, diff.<driver>.textconv, alias.x.
std::string SpelledKey(const KeyRule& r, const ConfigEntry& e) {
  static constexpr std::pair<std::string_view, std::string_view> kSections[] = {
      {"includeif", "includeIf"}, {"uploadpack", "uploadpack"}, {"sendemail", "sendemail"}};
  std::string out(e.section);
  for (const auto& [lower, spelled] : kSections) {
    if (lower == e.section) out = spelled;
  }
  if (e.has_subsection) out += "." + e.subsection;
  out += "." + std::string(r.spelled.empty() ? std::string_view(e.key) : r.spelled);
  return out;
}

bool IsBoolean(std::string_view v) {
  std::string l;
  for (char c : v) l += Lower(c);
  return l.empty() || l == "true" || l == "false" || l == "yes" || l == "no" || l == "on" ||
         l == "off" || l == "1" || l == "0";
}

// git's hook names (githooks(5)): what a hooks directory that is the worktree itself runs.
constexpr std::string_view kHookNames[] = {"applypatch-msg",
                                           "pre-applypatch",
                                           "post-applypatch",
                                           "pre-commit",
                                           "pre-merge-commit",
                                           "prepare-commit-msg",
                                           "commit-msg",
                                           "post-commit",
                                           "pre-rebase",
                                           "post-checkout",
                                           "post-merge",
                                           "pre-push",
                                           "pre-receive",
                                           "update",
                                           "proc-receive",
                                           "post-receive",
                                           "post-update",
                                           "reference-transaction",
                                           "push-to-checkout",
                                           "pre-auto-gc",
                                           "post-rewrite",
                                           "sendemail-validate",
                                           "fsmonitor-watchman",
                                           "p4-changelist",
                                           "p4-prepare-changelist",
                                           "p4-post-changelist",
                                           "p4-pre-submit",
                                           "post-index-change"};

// `dir` is the worktree or one of its ancestors.
bool IsWorktreeOrAbove(std::string_view dir, std::string_view worktree) {
  if (dir.empty()) return true;
  return worktree == dir ||
         (worktree.size() > dir.size() && worktree.starts_with(dir) && worktree[dir.size()] == '/');
}

}  // namespace

std::vector<GitConfigPath> GitConfigExecutedEntries(std::string_view config_text,
                                                    const GitConfigPlace& place) {
  std::vector<GitConfigPath> out;
  std::string resolved;
  std::string worktree;
  Normalize("", place.worktree, worktree);  // "" stays "" (the workspace root)
  std::string config_dir;
  Normalize("", place.config_dir, config_dir);
  auto add = [&](std::string_view value, std::string_view base, const std::string& key) {
    if (ResolvePath(value, base, place.workspace_abs, resolved)) out.push_back({resolved, key});
  };
  auto add_hooks_dir = [&](const std::string& dir, const std::string& key) {
    if (!IsWorktreeOrAbove(dir, worktree)) {
      out.push_back({dir, key});
      return;
    }
    // Hooks in the worktree's own top (or above it): the hook files, not the whole tree.
    for (std::string_view h : kHookNames)
      out.push_back({dir.empty() ? std::string(h) : dir + "/" + std::string(h), key});
  };
  ConfigParser(config_text).Run([&](const ConfigEntry& e) {
    const KeyRule* rule = RuleFor(e);
    if (rule == nullptr || !e.has_value) return;
    const std::string key = SpelledKey(*rule, e);
    std::string_view v = e.value;
    switch (rule->kind) {
      case Kind::kHooksPath: {
        // Resolved with a last component added, so that `.` (the worktree) and the workspace
        // root itself resolve too; then that component is taken off again.
        std::string probe;
        if (v.empty() ||
            !ResolvePath(std::string(v) + "/x", worktree, place.workspace_abs, probe)) {
          return;
        }
        const std::string dir = probe == "x" ? std::string() : probe.substr(0, probe.size() - 2);
        add_hooks_dir(dir, key);
        // husky 9 points core.hooksPath at .husky/_, whose scripts run ../<hook>.
        if (Basename(dir) == "_") {
          const std::size_t slash = dir.rfind('/');
          add_hooks_dir(slash == std::string::npos ? std::string() : dir.substr(0, slash), key);
        }
        return;
      }
      case Kind::kFsmonitor:
        if (IsBoolean(v)) return;
        [[fallthrough]];
      case Kind::kCommand: {
        std::vector<std::string> words;
        CommandPaths(v, 0, words);
        for (const auto& w : words) add(w, worktree, key);
        return;
      }
      case Kind::kPager:
        if (IsBoolean(v)) return;
        {
          std::vector<std::string> words;
          CommandPaths(v, 0, words);
          for (const auto& w : words) add(w, worktree, key);
        }
        return;
      case Kind::kBangCommand:
      case Kind::kCredential: {
        if (v.starts_with("!")) {
          std::vector<std::string> words;
          CommandPaths(v.substr(1), 0, words);
          for (const auto& w : words) add(w, worktree, key);
        } else if (rule->kind == Kind::kCredential && v.starts_with("/")) {
          std::vector<std::string> words;
          CommandPaths(v, 0, words);
          for (const auto& w : words) add(w, worktree, key);
        }
        return;
      }
      case Kind::kProgram: {
        while (!v.empty() && IsSpace(v.back())) v.remove_suffix(1);
        if (v.find('/') != std::string_view::npos) add(v, worktree, key);
        std::vector<std::string> words;
        CommandPaths(v, 0, words);
        for (const auto& w : words) add(w, worktree, key);
        return;
      }
      case Kind::kInclude:
        add(v, config_dir, key);
        return;
      case Kind::kDir:
        add(v, worktree, key);
        return;
    }
  });
  SortUniqueByPath(out);
  return out;
}

void SortUniqueByPath(std::vector<GitConfigPath>& paths) {
  std::sort(paths.begin(), paths.end(), [](const GitConfigPath& a, const GitConfigPath& b) {
    return a.path < b.path || (a.path == b.path && a.key < b.key);
  });
  paths.erase(
      std::unique(paths.begin(), paths.end(),
                  [](const GitConfigPath& a, const GitConfigPath& b) { return a.path == b.path; }),
      paths.end());
}

std::vector<std::string> GitConfigExecutedPaths(std::string_view config_text,
                                                std::string_view repo_root_rel) {
  const std::string root(repo_root_rel);
  const std::string git_dir = root.empty() ? ".git" : root + "/.git";
  std::vector<std::string> out;
  for (auto& e : GitConfigExecutedEntries(config_text, {.worktree = root, .config_dir = git_dir})) {
    out.push_back(std::move(e.path));
  }
  return out;
}

namespace {
bool IsOrBelow(std::string_view rel, std::string_view p) {
  while (rel.starts_with("./")) rel.remove_prefix(2);
  return rel == p || (rel.size() > p.size() && rel.starts_with(p) && rel[p.size()] == '/');
}
}  // namespace

const GitConfigPath* RepoExecutedPathOf(std::string_view rel,
                                        std::span<const GitConfigPath> paths) {
  for (const auto& p : paths) {
    if (IsOrBelow(rel, p.path)) return &p;
  }
  return nullptr;
}

bool IsUnderAnyPath(std::string_view rel, std::span<const std::string> paths) {
  return std::any_of(paths.begin(), paths.end(),
                     [&](const std::string& p) { return IsOrBelow(rel, p); });
}

}  // namespace cordon
