// Approval rules (issue 34, docs/adr/0015-approvals.md): `[[approvals.rules]]` say which calls,
// launches, writes and connections are allowed, asked about or denied. Pure: the rules and the
// subjects are data, the caller gathers the facts (a program resolved on the sandbox's PATH, the
// paths a write would change) and asks here; policy/decision.h turns an answer into a verdict.
//
// Evaluation: within a layer (shipped, system, user, cli, project) the first matching rule
// decides; across layers the strictest one wins (deny > ask > allow).
//
// argv rules are a guide for an honest agent, not the boundary: the commit and the proxy are
// (SECURITY.md, "Approvals"). They see the command as it will run: the program by its resolved
// name, git's global options skipped (a `-c alias.*` makes every git rule apply), wrappers (env,
// nice, timeout, nohup, setsid, xargs, stdbuf, ionice, chrt, taskset, command, exec) unwrapped,
// and `sh|bash|dash|zsh -c TEXT` split into words and matched as consecutive words. What the
// splitter cannot read asks: an expansion where a command starts when the text assigns the
// program's name (`g=git; $g push`), an expansion in a rule word's place (`git $sub`), a command
// substitution that names the program (`$(which git) push`), and, where no word-by-word reading
// can follow (`eval`, a here-document, an unclosed quote, a text past 64 KiB), the program named
// anywhere. Only `ask` rules read text that way.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_names.h"
#include "core/error.h"

namespace cordon {

enum class PolicyLayer;  // policy/policy.h

enum class ApprovalDecision { kAllow, kAsk, kDeny };
inline constexpr EnumName<ApprovalDecision> kApprovalDecisionNames[] = {
    {ApprovalDecision::kAllow, "allow"},
    {ApprovalDecision::kAsk, "ask"},
    {ApprovalDecision::kDeny, "deny"},
};
// Higher is stricter: deny > ask > allow.
int ApprovalStrictness(ApprovalDecision d);

enum class ApprovalMatcher { kTool, kArgv, kPath, kDomain };
inline constexpr EnumName<ApprovalMatcher> kApprovalMatcherNames[] = {
    {ApprovalMatcher::kTool, "tool"},
    {ApprovalMatcher::kArgv, "argv"},
    {ApprovalMatcher::kPath, "path"},
    {ApprovalMatcher::kDomain, "domain"},
};

// Patterns are written by people and by project files (which the agent can write): each is
// bounded so that matching stays linear-ish and cheap.
inline constexpr std::size_t kMaxApprovalPatternBytes = 512;
inline constexpr std::size_t kMaxApprovalArgvWords = 16;

struct ApprovalRule {
  std::string id;
  ApprovalDecision decision = ApprovalDecision::kAsk;
  ApprovalMatcher matcher = ApprovalMatcher::kTool;
  // The one matcher's value: a glob for tool and path, a domain rule (policy/egress.h) for
  // domain; for argv the prefix (`["git", "push"]`) in `argv`.
  std::string pattern;
  std::vector<std::string> argv;
  std::string reason;
  // Examples the loader runs: each `match` must match the rule and no `not_match` may. For argv
  // each example is a command line, split into words as SplitShellWords does.
  std::vector<std::string> match;
  std::vector<std::string> not_match;
  std::string where;  // "policies.d/20-approvals.toml:12"
  PolicyLayer layer{};
};

// --- the subjects ---

// A command about to be launched. `argv` is as the caller gave it; `program` is argv[0] as it
// will run (resolved on the sandbox's PATH and through symlinks), or empty when unknown.
struct ArgvSubject {
  std::span<const std::string> argv;
  std::string_view program{};
};

// Whether one rule matches. A rule of another matcher never matches the subject.
bool RuleMatchesTool(const ApprovalRule& rule, std::string_view tool);
bool RuleMatchesArgv(const ApprovalRule& rule, const ArgvSubject& subject);
// `path` relative to the workspace, '/'-separated, no leading "./". A pattern without a '/'
// matches the last component at any depth (as .gitignore reads it); `**` matches any number of
// whole components, `*` and `?` never match '/'.
bool RuleMatchesPath(const ApprovalRule& rule, std::string_view path);
// Whether some path strictly below the directory `dir` could match a path rule: what a commit
// asks about before it deletes or replaces a directory with everything below it. Conservative:
// a pattern without '/' (any depth) could always match below.
bool RuleCouldMatchBelow(const ApprovalRule& rule, std::string_view dir);
// Whether a symlink, or a directory whose mode changes, at `rel` reaches what a path rule names:
// the rule matches it, or a name inside it, or (an anchored pattern that does not start with
// `**`) a path below it. A name rule (no '/') names files wherever they are, so a link to a
// directory never hides one from it.
bool RuleReachesThrough(const ApprovalRule& rule, std::string_view rel);
// `host` a lower-case name or canonical address, `port` 1..65535 (0: any).
bool RuleMatchesDomain(const ApprovalRule& rule, std::string_view host, int port);

// The glob the tool and path matchers use, exposed for tests. With `path`, `*` and `?` match
// within one '/' component and `**` as a whole component matches any number of them (no
// gitignore reading: that is RuleMatchesPath's); without, `*` matches anything (tool names).
bool ApprovalGlobMatches(std::string_view pattern, std::string_view text, bool path);

// A shell command text split as sh would into words, with quotes removed and the control
// operators (; & && || | ( ) newline) and redirections (> >> < >& ...) as words of their own
// (newline as "\n"). `opaque` is set when the text holds what the splitter cannot read: `$`, a
// backquote, `eval`, a here-document, an unclosed quote, more than 64 KiB (the rest unread).
struct ShellWords {
  std::vector<std::string> words;
  bool opaque = false;
};
ShellWords SplitShellWords(std::string_view text);

// --- evaluation over a rule list ---

struct ApprovalMatch {
  ApprovalDecision decision = ApprovalDecision::kAllow;
  const ApprovalRule* rule = nullptr;  // null: no rule matched (allow)
};
// The rule that decides for each kind of subject (within a layer the first match, across layers
// the strictest). No rule: {kAllow, nullptr}.
ApprovalMatch EvaluateTool(std::span<const ApprovalRule> rules, std::string_view tool);
ApprovalMatch EvaluateArgv(std::span<const ApprovalRule> rules, const ArgvSubject& subject);
ApprovalMatch EvaluatePath(std::span<const ApprovalRule> rules, std::string_view path);
ApprovalMatch EvaluateDomain(std::span<const ApprovalRule> rules, std::string_view host, int port);

// The loader's check of one rule: its pattern is valid and bounded, and its examples say what
// it does. The error names the rule's `where` and the example that failed.
Status CheckApprovalRule(const ApprovalRule& rule);

}  // namespace cordon
