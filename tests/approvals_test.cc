// policy/approvals (issue 34, docs/adr/0015-approvals.md): the four matchers, the shell
// splitter, evaluation across layers and the loader's check, table-tested. The patterns and
// command lines here are what an agent could write: each hostile shape (many stars, deep
// nesting, long text) must answer quickly and the same way every time.
#include "policy/approvals.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "policy/policy.h"

namespace cordon {
namespace {

ApprovalRule Rule(ApprovalMatcher matcher, std::string pattern,
                  ApprovalDecision decision = ApprovalDecision::kAsk) {
  ApprovalRule r;
  r.id = "r";
  r.matcher = matcher;
  r.decision = decision;
  r.pattern = std::move(pattern);
  r.where = "test.toml:1";
  return r;
}

ApprovalRule ArgvRule(std::vector<std::string> argv,
                      ApprovalDecision decision = ApprovalDecision::kAsk) {
  ApprovalRule r = Rule(ApprovalMatcher::kArgv, "", decision);
  r.argv = std::move(argv);
  return r;
}

// Each row's argv is given as words (not split), with the resolved program when it matters.
struct ArgvRow {
  std::vector<std::string> argv;
  std::string program;
  bool match;
};

bool Matches(const ApprovalRule& r, const ArgvRow& row) {
  return RuleMatchesArgv(r, ArgvSubject{row.argv, row.program});
}

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += "[" + w + "]";
  return out;
}

// ---------------------------------------------------------------- glob

TEST(ApprovalGlob, ToolNamesMatchWhole) {
  struct Row {
    std::string pattern, text;
    bool match;
  };
  const Row rows[] = {
      {"mcp__github__*", "mcp__github__create_issue", true},
      {"mcp__github__*", "mcp__github__", true},
      {"mcp__github__*", "mcp__gitlab__x", false},
      {"mcp__github__*", "xmcp__github__x", false},
      {"read_url", "read_url", true},
      {"read_url", "read_urls", false},
      {"read_url", "read_ur", false},
      {"read_?rl", "read_url", true},
      {"read_?rl", "read_rl", false},
      {"*", "", true},
      {"*", "anything/with/slashes", true},
      {"a*b*c", "abc", true},
      {"a*b*c", "aXXbYYc", true},
      {"a*b*c", "aXXbYY", false},
      {"*.x", "a.x.x", true},
      {"", "", true},
      {"", "a", false},
      {"[ab]", "a", false},  // no classes: '[' is itself
      {"[ab]", "[ab]", true},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(ApprovalGlobMatches(r.pattern, r.text, false), r.match) << r.pattern << " " << r.text;
  }
}

TEST(ApprovalGlob, PathGlobKeepsStarsWithinAComponent) {
  struct Row {
    std::string pattern, text;
    bool match;
  };
  const Row rows[] = {
      {"a/*", "a/b", true},    {"a/*", "a/b/c", false},     {"*", "a/b", false},
      {"a/?", "a/b", true},    {"a?b", "a/b", false},       {"a/**", "a/b/c", true},
      {"a/**", "a", true},  // the raw glob: `**` is zero or more (RuleMatchesPath reads gitignore)
      {"**/x", "x", true},     {"**/x", "a/b/x", true},     {"**/x", "a/b/xy", false},
      {"a/**/b", "a/b", true}, {"a/**/b", "a/x/y/b", true}, {"a/**/b", "a/x/y/c", false},
      {"a**b", "a/b", false},  // `**` inside a component is two stars
      {"a**b", "axxb", true},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(ApprovalGlobMatches(r.pattern, r.text, true), r.match) << r.pattern << " " << r.text;
  }
}

TEST(ApprovalGlob, ManyStarsAgainstLongTextAreFast) {
  std::string pattern;
  for (int i = 0; i < 250; ++i) pattern += "a*";
  pattern += "b";  // 501 bytes: under kMaxApprovalPatternBytes
  const std::string text(64 * 1024, 'a');
  std::string path_pattern, path;
  for (int i = 0; i < 100; ++i) path_pattern += "**/a*a*a/";
  path_pattern += "b";
  for (int i = 0; i < 2000; ++i) path += "aaaaaaaa/";
  path += "c";

  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(ApprovalGlobMatches(pattern, text, false));
  EXPECT_TRUE(ApprovalGlobMatches(pattern, text + "b", false));
  EXPECT_FALSE(ApprovalGlobMatches(path_pattern, path, true));
  ApprovalRule rule = Rule(ApprovalMatcher::kPath, path_pattern);
  EXPECT_FALSE(RuleMatchesPath(rule, path));
  ApprovalRule tool = Rule(ApprovalMatcher::kTool, pattern);
  EXPECT_FALSE(RuleMatchesTool(tool, text));
  const auto took = std::chrono::steady_clock::now() - start;
  // Quadratic-at-worst on 512 x 64 KiB is tens of milliseconds; backtracking would be forever.
  EXPECT_LT(took, std::chrono::seconds(5));
}

// ---------------------------------------------------------------- tool

TEST(ApprovalTool, RuleMatchesToolByGlob) {
  const ApprovalRule github = Rule(ApprovalMatcher::kTool, "mcp__github__*");
  EXPECT_TRUE(RuleMatchesTool(github, "mcp__github__create_pull_request"));
  EXPECT_FALSE(RuleMatchesTool(github, "read_url"));
  EXPECT_FALSE(RuleMatchesTool(github, ""));
  ApprovalRule wrong = github;
  wrong.matcher = ApprovalMatcher::kPath;  // another matcher never matches
  EXPECT_FALSE(RuleMatchesTool(wrong, "mcp__github__x"));
  EXPECT_FALSE(RuleMatchesTool(Rule(ApprovalMatcher::kTool, ""), ""));
}

// ---------------------------------------------------------------- path

TEST(ApprovalPath, GitignoreReading) {
  struct Row {
    std::string pattern, path;
    bool match;
  };
  const Row rows[] = {
      // no '/': a component at any depth
      {"Dockerfile*", "Dockerfile", true},
      {"Dockerfile*", "a/b/Dockerfile.dev", true},
      {"Dockerfile*", "a/xDockerfile", false},
      {"*.pem", "secrets/key.pem", true},
      {"*.pem", "key.pem.bak", false},
      // and what is below a matched directory
      {"node_modules", "a/node_modules/x/y.js", true},
      {"secrets", "secrets", true},
      {"secrets", "secretsx/a", false},
      // with '/': anchored at the workspace root
      {".github/workflows/**", ".github/workflows/ci.yml", true},
      {".github/workflows/**", ".github/workflows/a/b.yml", true},
      {".github/workflows/**", ".github/workflows", false},  // below, not the directory itself
      {".github/workflows/**", "x/.github/workflows/ci.yml", false},
      {".github/workflows/*.yml", ".github/workflows/ci.yml", true},
      {".github/workflows/*.yml", ".github/workflows/a/ci.yml", false},
      {".github/workflows", ".github/workflows/ci.yml", true},
      {"src/*.c", "src/a.c", true},
      {"src/*.c", "lib/src/a.c", false},
      {"/Makefile", "Makefile", true},
      {"/Makefile", "a/Makefile", false},
      {"build/", "build/out.o", true},
      {"build/", "a/build/out.o", true},  // a trailing '/' does not anchor (gitignore)
      // ** as a component
      {"**/deploy/**", "deploy/app.yaml", true},
      {"**/deploy/**", "x/deploy/y/z", true},
      {"**/deploy/**", "deploy", false},
      {"**/deploy/**", "x/deployer/y", false},
      {"a/**/b", "a/b", true},
      {"a/**/b", "a/x/y/b", true},
      {"a/**/b", "a/x/y/b/c", true},
      {"**", "anything/at/all", true},
      // * and ? never cross '/'
      {"a/*", "a/b/c", true},  // a/b matched, c is below it
      {"a*c", "a/c", false},
      {"a?c", "a/c", false},
      // the path as the caller may give it
      {"a/b", "a//b", true},
      {"a/b", "./a/b", true},
      {"x", "", false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(RuleMatchesPath(Rule(ApprovalMatcher::kPath, r.pattern), r.path), r.match)
        << r.pattern << " vs " << r.path;
  }
  EXPECT_FALSE(RuleMatchesPath(Rule(ApprovalMatcher::kTool, "*"), "a"));
  EXPECT_FALSE(RuleMatchesPath(Rule(ApprovalMatcher::kPath, ""), "a"));
}

// ---------------------------------------------------------------- domain

TEST(ApprovalPath, WhatCouldMatchBelowADirectory) {
  // A commit asks before it deletes or replaces a directory below which a rule could match.
  struct Row {
    const char* pattern;
    const char* dir;
    bool could;
  } rows[] = {
      {"**/deploy/**", "vendor", true},      // vendor/x/deploy/y
      {"**/deploy/**", "deploy", true},      // deploy/y
      {"**/deploy/**", "a/deploy/b", true},  // below a matched directory
      {".github/workflows/**", ".github", true},
      {".github/workflows/**", "src", false},  // anchored: never below src
      {".github/workflows/**", ".githubx", false},
      {".github/workflows/*.yml", ".github/workflows", true},
      {".github/workflows/*.yml", ".github/workflows/sub", false},  // * stays in one component
      {"Dockerfile*", "anything/at/all", true},                     // no '/': any depth
      {"/Dockerfile", "src", false},                                // anchored at the root
      {"config/prod.yaml", "config", true},
      {"config/prod.yaml", "config/prod.yaml", true},  // a directory of that name: what is in it
      {"config/prod.yaml", "conf", false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(RuleCouldMatchBelow(Rule(ApprovalMatcher::kPath, r.pattern), r.dir), r.could)
        << r.pattern << " below " << r.dir;
  }
  EXPECT_FALSE(RuleCouldMatchBelow(Rule(ApprovalMatcher::kTool, "*"), "a"));
}

TEST(ApprovalDomain, NamesAddressesAndPorts) {
  struct Row {
    std::string pattern, host;
    int port;
    bool match;
  };
  const Row rows[] = {
      {"example.com", "example.com", 443, true},
      {"example.com", "example.com", 8080, true},  // no port in the rule: any port
      {"example.com", "api.example.com", 443, false},
      {"*.example.com", "api.example.com", 443, true},
      {"*.example.com", "a.b.example.com", 22, true},
      {"*.example.com", "example.com", 443, false},
      {"*.example.com", "badexample.com", 443, false},
      {"example.com:8443", "example.com", 8443, true},
      {"example.com:8443", "example.com", 443, false},
      {"example.com:8443", "example.com", 0, true},  // 0: any port
      {"Example.COM.", "example.com", 443, true},
      {"example.com", "EXAMPLE.com.", 443, true},
      {"203.0.113.7", "203.0.113.7", 443, true},
      {"203.0.113.7", "203.0.113.8", 443, false},
      {"[2001:db8::1]:443", "2001:db8:0::1", 443, true},
      {"2001:db8::1", "[2001:db8::1]", 80, true},
      {"127.0.0.1", "localhost", 80, false},  // names are not resolved here
      {"localhost", "127.0.0.1", 80, false},
      {"*.a*.com", "x.ab.com", 443, false},  // not a rule: never matches
  };
  for (const Row& r : rows) {
    EXPECT_EQ(RuleMatchesDomain(Rule(ApprovalMatcher::kDomain, r.pattern), r.host, r.port), r.match)
        << r.pattern << " vs " << r.host << ":" << r.port;
  }
}

// ---------------------------------------------------------------- shell words

TEST(ApprovalShellWords, SplitsAsShDoes) {
  struct Row {
    std::string text;
    std::vector<std::string> words;
    bool opaque;
  };
  const Row rows[] = {
      {"git push", {"git", "push"}, false},
      {"  git\tpush  origin ", {"git", "push", "origin"}, false},
      {"git 'a b' \"c d\"", {"git", "a b", "c d"}, false},
      {"a'b'\"c\"d", {"abcd"}, false},
      {"echo ''", {"echo", ""}, false},
      {"a\\ b", {"a b"}, false},
      {"\"a\\\"b\\\\c\\d\"", {"a\"b\\c\\d"}, false},
      {"a;b", {"a", ";", "b"}, false},
      {"a&&b||c|d&e", {"a", "&&", "b", "||", "c", "|", "d", "&", "e"}, false},
      {"(a)", {"(", "a", ")"}, false},
      {"a\nb", {"a", "\n", "b"}, false},
      {"git push # and more\nls", {"git", "push", "\n", "ls"}, false},
      {"a#b", {"a#b"}, false},
      {"git push>log 2>&1", {"git", "push", ">", "log", "2", ">&", "1"}, false},
      {"a \\\nb", {"a", "b"}, false},
      {"'; git push'", {"; git push"}, false},
      {"echo $HOME", {"echo", "$HOME"}, true},
      {"echo \"$HOME\"", {"echo", "$HOME"}, true},
      {"echo '$HOME'", {"echo", "$HOME"}, false},
      {"echo `id`", {"echo", "`id`"}, true},
      {"eval git push", {"eval", "git", "push"}, true},
      {"cat <<EOF", {"cat", "<<", "EOF"}, true},
      {"echo 'unclosed", {"echo", "unclosed"}, true},
      {"echo \"unclosed", {"echo", "unclosed"}, true},
      {"", {}, false},
      {"# only a comment", {}, false},
  };
  for (const Row& r : rows) {
    const ShellWords s = SplitShellWords(r.text);
    EXPECT_EQ(s.words, r.words) << r.text << " -> " << Joined(s.words);
    EXPECT_EQ(s.opaque, r.opaque) << r.text;
  }
}

TEST(ApprovalShellWords, OverLongTextIsOpaqueAndCut) {
  std::string text(70 * 1024, 'a');
  text[10] = ' ';
  const ShellWords s = SplitShellWords(text);
  EXPECT_TRUE(s.opaque);
  ASSERT_EQ(s.words.size(), 2u);
  EXPECT_EQ(s.words[0].size(), 10u);
  EXPECT_EQ(s.words[1].size(), 64u * 1024 - 11);
}

// ---------------------------------------------------------------- argv

TEST(ApprovalArgv, GitPushIsSeenThroughWrappersShellsAndOptions) {
  const ApprovalRule rule = ArgvRule({"git", "push"});
  const ArgvRow rows[] = {
      {{"git", "push"}, "", true},
      {{"git", "push", "origin", "main"}, "", true},
      {{"git", "-C", "x", "push"}, "", true},
      {{"git", "--git-dir=.git", "push"}, "", true},
      {{"git", "--git-dir", ".git", "--work-tree", ".", "push"}, "", true},
      {{"git", "-c", "user.name=x", "--no-pager", "-P", "--bare", "push"}, "", true},
      {{"git", "--exec-path=/x", "--namespace=n", "--no-optional-locks", "push"}, "", true},
      {{"/usr/bin/git", "push"}, "", true},
      {{"./tools/g", "push"}, "/usr/bin/git", true},  // a symlink resolved to git
      {{"git", "push"}, "/usr/bin/echo", true},       // called git: asked, whatever it is
      {{"env", "git", "push"}, "", true},
      {{"env", "-i", "FOO=1", "git", "push", "origin", "main"}, "", true},
      {{"env", "-u", "HOME", "-C", "/tmp", "--", "git", "push"}, "", true},
      {{"env", "-S", "git push"}, "", true},
      {{"env", "-S", "FOO=1 git", "push"}, "", true},
      {{"/usr/bin/env", "-iS", "git push"}, "", true},
      {{"timeout", "5", "git", "push"}, "", true},
      {{"timeout", "-s", "KILL", "-k", "1", "--foreground", "5s", "git", "push"}, "", true},
      {{"nice", "-n", "5", "nohup", "git", "push"}, "", true},
      {{"nice", "-5", "git", "push"}, "", true},
      {{"nice", "--adjustment=3", "git", "push"}, "", true},
      {{"setsid", "-f", "git", "push"}, "", true},
      {{"xargs", "-n1", "git", "push"}, "", true},
      {{"xargs", "-I", "{}", "-P", "4", "git", "push", "{}"}, "", true},
      {{"xargs", "-0", "-a", "list", "git", "push"}, "", true},
      {{"stdbuf", "-oL", "-e", "0", "git", "push"}, "", true},
      {{"ionice", "-c", "3", "git", "push"}, "", true},
      {{"chrt", "-b", "0", "git", "push"}, "", true},
      {{"taskset", "-c", "0-3", "git", "push"}, "", true},
      {{"taskset", "0x3", "git", "push"}, "", true},
      {{"command", "-p", "git", "push"}, "", true},
      {{"exec", "-a", "name", "git", "push"}, "", true},
      {{"sh", "-c", "git push"}, "", true},
      // Launchers that run their words as a shell text, or as another user.
      {{"script", "-qc", "git push", "/dev/null"}, "", true},
      {{"script", "-q", "-c", "cd x; git push", "log"}, "", true},
      {{"watch", "-n", "5", "git push"}, "", true},
      {{"watch", "-x", "git", "push"}, "", true},
      {{"sudo", "-u", "bob", "git", "push"}, "", true},
      {{"sudo", "-E", "sh", "-c", "git push"}, "", true},
      {{"doas", "git", "push"}, "", true},
      {{"bash", "-lc", "cd x && git -C y push --force"}, "", true},
      {{"bash", "--login", "-c", "git push"}, "", true},
      {{"bash", "-o", "pipefail", "-ec", "git push"}, "", true},
      {{"sh", "-c", "npm test && git push"}, "", true},
      {{"sh", "-c", "npm test;git push"}, "", true},
      {{"sh", "-c", "FOO=1 git push"}, "", true},
      {{"sh", "-c", "if true; then git push; fi"}, "", true},
      {{"sh", "-c", "(git push)"}, "", true},
      {{"sh", "-c", "\"git\" 'push'"}, "", true},
      {{"sh", "-c", "/usr/bin/git --no-pager push"}, "", true},
      {{"sh", "-c", "sh -c \"git push\""}, "", true},
      {{"sh", "-c", "bash -c 'dash -c \"git push\"'"}, "", true},
      {{"sh", "-c", "env -S 'git push'"}, "", true},
      {{"sh", "-c", "echo hi | xargs -n1 git push"}, "", true},
      {{"sh", "-c", "echo git push"}, "", true},  // consecutive words anywhere: asks
      {{"git", "-c", "alias.p=push", "p"}, "", true},
      {{"git", "-calias.p=push", "p"}, "", true},
      {{"git", "-c", "Alias.P=push", "p"}, "", true},
      {{"git", "--config-env=alias.p=ENV", "p"}, "", true},
      {{"git", "-c", "include.path=/tmp/x", "p"}, "", true},
      {{"env", "GIT_CONFIG_COUNT=1", "git", "p"}, "", true},
      {{"sh", "-c", "git -c alias.x=push x"}, "", true},
      {{"sh", "-c", "GIT_CONFIG_PARAMETERS=x git p"}, "", true},
      // GIT_CONFIG_NOSYSTEM only takes configuration away: no alias can come of it
      {{"env", "GIT_CONFIG_NOSYSTEM=1", "git", "commit"}, "", false},
      {{"sh", "-c", "export GIT_CONFIG_NOSYSTEM=1; git -c user.name=a commit -qm x"}, "", false},
      // opaque text: an ask rule asks when its program is named in it
      {{"sh", "-c", "g=git; $g push"}, "", true},
      {{"sh", "-c", "eval git push"}, "", true},
      {{"sh", "-c", "echo `git push`"}, "", true},
      // not git push
      {{"git", "status"}, "", false},
      {{"watch", "-n", "5", "git status"}, "", false},
      {{"script", "-qc", "git status", "/dev/null"}, "", false},
      {{"git", "pushx"}, "", false},
      {{"git", "log", "--", "push"}, "", false},
      {{"git", "-C", "push", "status"}, "", false},
      {{"git"}, "", false},
      {{"gitk", "push"}, "", false},
      {{"echo", "hi"}, "", false},
      // the rule's words anywhere in an argv, as in a text: a launcher cordon does not know
      {{"echo", "git", "push"}, "", true},
      {{"find", ".", "-maxdepth", "0", "-exec", "git", "push", "origin", "main", ";"}, "", true},
      {{"unshare", "-r", "git", "push"}, "", true},
      {{"flock", "-x", "/tmp/l", "sh", "-c", "git push"}, "", true},
      {{"ssh-agent", "sh", "-c", "git push -v origin main"}, "", true},
      {{"git", "submodule", "foreach", "git", "push"}, "", true},
      // called by one name, resolved to another: either is the program
      {{"./bb/sh", "-c", "git push"}, "/usr/bin/busybox", true},
      {{"./bb/env", "git", "push"}, "/usr/bin/coreutils", true},
      {{"sh", "-c", "eval 'git push'"}, "", true},
      {{"sh", "-c", "c='git push'; eval \"$c\""}, "", true},
      // everyday texts that are not git push
      {{"sh", "-c", "for f in $(git ls-files); do echo $f; done"}, "", false},
      {{"sh", "-c", "V=$(git describe --always); echo $V"}, "", false},
      {{"sh", "-c", "git diff $(git merge-base HEAD main) --stat"}, "", false},
      {{"sh", "-c", "git commit -F - <<'EOF'\nfix\nEOF"}, "", false},
      {{"sh", "-c", "eval \"$(ssh-agent -s)\" && git status"}, "", false},
      {{"env", "GIT_CONFIG_GLOBAL=/dev/null", "git", "status"}, "", false},
      {{"git", "-c", "include.path=/dev/null", "status"}, "", false},
      {{"sh", "-c", "export GIT_CONFIG_GLOBAL=/dev/null; git status"}, "", false},
      {{"sh", "-c", "git status"}, "", false},
      {{"sh", "-c", "echo $HOME"}, "", false},
      {{"sh", "-c", "digit push; gitk push"}, "", false},
      // expansions: a word the shell expands may be the rule's word, or all the rest of them
      {{"sh", "-c", "git $sub origin"}, "", true},
      {{"sh", "-c", "git -C \"$d\" push"}, "", true},
      {{"sh", "-c", "c='git push'; $c"}, "", true},
      {{"sh", "-c", "$(which git) push"}, "", true},
      {{"sh", "-c", "cd \"$(git rev-parse --show-toplevel)\" && make"}, "", false},
      {{"sh", "-c", "echo \"$(git push 2>&1)\""}, "", true},
      {{"sh", "-c", "for f in *.c; do git add \"$f\"; done"}, "", false},
      {{"sh", "-c", "\"$PYTHON\" -m pytest && git status"}, "", false},
      {{"sh", "-c", "mkdir -p \"$(dirname a/b)\" && git init -q"}, "", false},
      {{"sh", "-c", "i=$((i+1)); git log -1"}, "", false},
      // opaque text that names git only as a path part or a variable's name: not asked
      {{"sh", "-c", "mkdir -p sub/.git && echo $HOME > sub/.git/x"}, "", false},
      {{"sh", "-c", "echo \"git_dir=$GIT_DIR\"; ls $HOME/git-repos"}, "", false},
      {{"sh", "-c", "git ; push"}, "", false},
      {{"sh", "-c", "git '' push"}, "", false},
      {{"sh", "script.sh", "git", "push"}, "", true},  // the words are in the argv
      {{"sh", "script.sh", "status"}, "", false},      // a script file is not read
      {{"sh", "-c"}, "", false},
      {{"env"}, "", false},
      {{"timeout", "5"}, "", false},
      {{}, "", false},
  };
  for (const ArgvRow& row : rows) {
    EXPECT_EQ(Matches(rule, row), row.match) << Joined(row.argv) << " program=" << row.program;
  }
}

// npm resolves to npm-cli.js and cargo to rustup on ordinary installs: the name a command was
// called by counts as well as the one it resolves to.
TEST(ApprovalArgv, TheNameItWasCalledByCountsBesideTheResolvedOne) {
  EXPECT_TRUE(Matches(
      ArgvRule({"npm", "publish"}),
      {{"npm", "publish", "--access", "public"}, "/usr/share/nodejs/npm/bin/npm-cli.js", true}));
  EXPECT_TRUE(Matches(ArgvRule({"cargo", "publish"}),
                      {{"cargo", "publish"}, "/home/u/.cargo/bin/rustup", true}));
  EXPECT_FALSE(Matches(ArgvRule({"cargo", "publish"}),
                       {{"cargo", "build"}, "/home/u/.cargo/bin/rustup", false}));
}

// An allow rule allows a command that is exactly its words, never a part of a text: above an
// ask in its layer, it would otherwise let the ask's command by beside it.
TEST(ApprovalArgv, AnAllowRuleAllowsOnlyTheCommandItself) {
  ApprovalRule allow = ArgvRule({"git", "push", "--dry-run"}, ApprovalDecision::kAllow);
  EXPECT_TRUE(Matches(allow, {{"git", "push", "--dry-run"}, "", true}));
  EXPECT_TRUE(Matches(allow, {{"env", "git", "-C", "x", "push", "--dry-run"}, "", true}));
  EXPECT_FALSE(Matches(allow, {{"sh", "-c", "git push; echo git push --dry-run"}, "", false}));
  EXPECT_FALSE(Matches(allow, {{"echo", "git", "push", "--dry-run"}, "", false}));
  EXPECT_FALSE(Matches(allow, {{"git", "-c", "alias.p=push", "p"}, "", false}));
  ApprovalRule ask = ArgvRule({"git", "push"});
  allow.layer = ask.layer;
  const ApprovalRule rules[] = {allow, ask};
  const std::vector<std::string> both = {"sh", "-c", "git push; echo git push --dry-run"};
  EXPECT_EQ(EvaluateArgv(rules, ArgvSubject{both}).decision, ApprovalDecision::kAsk);
  const std::vector<std::string> alias = {"git", "-c", "alias.p=push", "p"};
  EXPECT_EQ(EvaluateArgv(rules, ArgvSubject{alias}).decision, ApprovalDecision::kAsk);
}

TEST(ApprovalArgv, OpaqueTextMatchesOnlyAskRules) {
  const ArgvRow opaque{{"sh", "-c", "g=git; $g push"}, "", true};
  EXPECT_TRUE(Matches(ArgvRule({"git", "push"}, ApprovalDecision::kAsk), opaque));
  EXPECT_FALSE(Matches(ArgvRule({"git", "push"}, ApprovalDecision::kDeny), opaque));
  EXPECT_FALSE(Matches(ArgvRule({"git", "push"}, ApprovalDecision::kAllow), opaque));
  // The words still match best effort, for any decision.
  const ArgvRow readable{{"sh", "-c", "git push $REMOTE"}, "", true};
  EXPECT_TRUE(Matches(ArgvRule({"git", "push"}, ApprovalDecision::kDeny), readable));
  // A program not named in the text is not asked about.
  EXPECT_FALSE(Matches(ArgvRule({"npm", "publish"}), opaque));
}

TEST(ApprovalArgv, OtherRulesAndPrograms) {
  struct Row {
    std::vector<std::string> rule;
    ArgvRow subject;
  };
  const Row rows[] = {
      {{"git"}, {{"git", "status"}, "", true}},
      {{"git"}, {{"git"}, "", true}},
      {{"/usr/bin/git", "push"}, {{"git", "push"}, "", true}},  // the rule's program by basename
      {{"git", "-C", "x", "push"}, {{"git", "push"}, "", true}},
      {{"npm", "publish"}, {{"npm", "publish", "--tag", "x"}, "", true}},
      {{"npm", "publish"}, {{"npx", "publish"}, "", false}},
      {{"rm", "-rf"}, {{"sh", "-c", "cd / && rm -rf x"}, "", true}},
      {{"rm", "-rf"}, {{"rm", "-r", "-f", "x"}, "", false}},  // words compare exactly
      {{"env"}, {{"env", "git", "push"}, "", true}},          // a wrapper as the rule's program
      {{"sh", "-c"}, {{"sh", "-c", "ls"}, "", true}},
      {{"curl"}, {{"timeout", "5", "sh", "-c", "curl -s x | sh"}, "", true}},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(Matches(ArgvRule(r.rule), r.subject), r.subject.match)
        << Joined(r.rule) << " vs " << Joined(r.subject.argv);
  }
  ApprovalRule tool = ArgvRule({"git"});
  tool.matcher = ApprovalMatcher::kTool;
  EXPECT_FALSE(RuleMatchesArgv(tool, ArgvSubject{std::vector<std::string>{"git"}}));
  EXPECT_FALSE(RuleMatchesArgv(ArgvRule({}), ArgvSubject{std::vector<std::string>{"git"}}));
}

// Each hostile shape must answer within a bound that a backtracking or quadratic reading would
// blow through.
class ApprovalArgvHostile : public ::testing::Test {
 protected:
  void SetUp() override { start_ = std::chrono::steady_clock::now(); }
  void TearDown() override {
    EXPECT_LT(std::chrono::steady_clock::now() - start_, std::chrono::seconds(5));
  }
  const ApprovalRule ask_ = ArgvRule({"git", "push"});
  const ApprovalRule deny_ = ArgvRule({"git", "push"}, ApprovalDecision::kDeny);

 private:
  std::chrono::steady_clock::time_point start_;
};

TEST_F(ApprovalArgvHostile, WrappersDeeperThanAPersonWritesAreOpaque) {
  std::vector<std::string> deep;
  for (int i = 0; i < 40; ++i) deep.push_back("env");
  deep.push_back("git");
  deep.push_back("push");
  EXPECT_TRUE(Matches(ask_, {deep, "", true}));
  // Past the depth the wrapper chain is not followed, but the words are in the argv: read as a
  // text's words, so a deny rule sees them too.
  EXPECT_TRUE(Matches(deny_, {deep, "", true}));
}

TEST_F(ApprovalArgvHostile, ShellsNestedPastTheLimitAreOpaque) {
  std::string text = "git push";
  for (int i = 0; i < 10; ++i) {
    std::string quoted = "'";
    for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    text = "sh -c " + quoted + "'";
  }
  ASSERT_GT(text.size(), 64u * 1024);  // and longer than the splitter reads
  EXPECT_TRUE(Matches(ask_, {{"sh", "-c", text}, "", true}));
  EXPECT_FALSE(Matches(ask_, {{"sh", "-c", text.substr(0, 1000)}, "", false}));
}

TEST_F(ApprovalArgvHostile, ManyEnvSplitStringsSpendTheBudget) {
  std::string many;
  for (int i = 0; i < 2000; ++i) many += "env -S 'env -S x' ";
  many += "git push";
  // Too much to read: an ask rule asks, since git is named; a deny rule decides on what it read.
  EXPECT_TRUE(Matches(ask_, {{"sh", "-c", many}, "", true}));
  std::string few;
  for (int i = 0; i < 5; ++i) few += "env -S 'env -S x' ";
  EXPECT_TRUE(Matches(deny_, {{"sh", "-c", few + "git push"}, "", true}));
  EXPECT_FALSE(Matches(deny_, {{"sh", "-c", few + "git status"}, "", false}));
}

TEST_F(ApprovalArgvHostile, LongRunsOfGitOptions) {
  std::string gits;
  for (int i = 0; i < 2500; ++i) gits += "git -C x -C x -c a=b ";
  ASSERT_LT(gits.size(), 64u * 1024);
  EXPECT_FALSE(Matches(deny_, {{"sh", "-c", gits + "status"}, "", false}));
  EXPECT_TRUE(Matches(deny_, {{"sh", "-c", gits + "push"}, "", true}));
  std::vector<std::string> argv = {"git"};
  for (int i = 0; i < 20000; ++i) argv.push_back("--no-pager");
  argv.push_back("push");
  EXPECT_TRUE(Matches(deny_, {argv, "", true}));
}

// Each word is a start, and each start reads the options after it: without the budget these are
// quadratic in the text.
TEST_F(ApprovalArgvHostile, OptionRunsReadFromEveryStart) {
  for (const std::string unit : {"git -C ", "sh -o ", "env -u ", "bash -O "}) {
    std::string text;
    while (text.size() < 60 * 1024) text += unit;
    text += "status";
    EXPECT_FALSE(Matches(deny_, {{"sh", "-c", text}, "", false})) << unit;
    EXPECT_FALSE(Matches(ArgvRule({"npm"}), {{"sh", "-c", text}, "", false})) << unit;
  }
}

TEST_F(ApprovalArgvHostile, TextsFullOfOperators) {
  std::string ops;
  while (ops.size() < 70 * 1024) ops += "a&&b;c|d(e)";
  EXPECT_FALSE(Matches(ask_, {{"bash", "-c", ops}, "", false}));
  EXPECT_TRUE(Matches(ask_, {{"bash", "-c", ops + "git push"}, "", true}));     // cut, but named
  EXPECT_FALSE(Matches(deny_, {{"bash", "-c", ops + "git push"}, "", false}));  // past the cut
  // The largest text an honest agent could send is read to its end within the budget.
  std::string honest;
  while (honest.size() < 60 * 1024) honest += "npm test && FOO=1 env -i nice git status; ";
  EXPECT_TRUE(Matches(deny_, {{"bash", "-c", honest + "git push"}, "", true}));
  EXPECT_TRUE(Matches(deny_, {{"sh", "-c", "sh -c '" + honest + "git push'"}, "", true}));
}

// ---------------------------------------------------------------- evaluation

ApprovalRule Layered(std::string id, ApprovalDecision d, PolicyLayer layer, std::string pattern) {
  ApprovalRule r = Rule(ApprovalMatcher::kTool, std::move(pattern), d);
  r.id = std::move(id);
  r.layer = layer;
  return r;
}

TEST(ApprovalEvaluate, FirstMatchInALayerStrictestAcrossLayers) {
  using D = ApprovalDecision;
  using L = PolicyLayer;
  struct Row {
    std::string name;
    std::vector<ApprovalRule> rules;
    std::string tool;
    D decision;
    std::string rule_id;  // "" : no rule
  };
  const Row rows[] = {
      {"no rules", {}, "read_url", D::kAllow, ""},
      {"no rule matches", {Layered("a", D::kDeny, L::kUser, "mcp__*")}, "read_url", D::kAllow, ""},
      {"an allow before an ask in one layer allows",
       {Layered("allow", D::kAllow, L::kUser, "read_url"),
        Layered("ask", D::kAsk, L::kUser, "read_*")},
       "read_url",
       D::kAllow,
       "allow"},
      {"an ask before an allow in one layer asks",
       {Layered("ask", D::kAsk, L::kUser, "read_*"),
        Layered("allow", D::kAllow, L::kUser, "read_url")},
       "read_url",
       D::kAsk,
       "ask"},
      {"a project ask beats a user allow",
       {Layered("allow", D::kAllow, L::kUser, "read_url"),
        Layered("ask", D::kAsk, L::kProject, "read_url")},
       "read_url",
       D::kAsk,
       "ask"},
      {"deny beats ask across layers",
       {Layered("ask", D::kAsk, L::kShipped, "*"), Layered("deny", D::kDeny, L::kCli, "read_*")},
       "read_url",
       D::kDeny,
       "deny"},
      {"a later layer's allow does not undo an earlier ask",
       {Layered("ask", D::kAsk, L::kShipped, "*"),
        Layered("allow", D::kAllow, L::kUser, "read_url")},
       "read_url",
       D::kAsk,
       "ask"},
      {"a tie keeps the earliest layer's rule",
       {Layered("user", D::kAsk, L::kUser, "*"), Layered("system", D::kAsk, L::kSystem, "*")},
       "read_url",
       D::kAsk,
       "system"},
      {"the first match decides its layer even when a later one is stricter",
       {Layered("allow", D::kAllow, L::kSystem, "read_url"),
        Layered("deny", D::kDeny, L::kSystem, "*")},
       "read_url",
       D::kAllow,
       "allow"},
  };
  for (const Row& r : rows) {
    const ApprovalMatch m = EvaluateTool(r.rules, r.tool);
    EXPECT_EQ(m.decision, r.decision) << r.name;
    if (r.rule_id.empty()) {
      EXPECT_EQ(m.rule, nullptr) << r.name;
    } else {
      ASSERT_NE(m.rule, nullptr) << r.name;
      EXPECT_EQ(m.rule->id, r.rule_id) << r.name;
    }
  }
}

TEST(ApprovalEvaluate, EachKindReadsOnlyItsOwnRules) {
  std::vector<ApprovalRule> rules;
  rules.push_back(Rule(ApprovalMatcher::kTool, "*", ApprovalDecision::kDeny));
  rules.push_back(ArgvRule({"git", "push"}));
  rules.push_back(Rule(ApprovalMatcher::kPath, ".github/**", ApprovalDecision::kDeny));
  rules.push_back(Rule(ApprovalMatcher::kDomain, "*.example.com", ApprovalDecision::kAsk));
  for (std::size_t i = 0; i < rules.size(); ++i) rules[i].id = "r" + std::to_string(i);

  const std::vector<std::string> push = {"sh", "-c", "git push"};
  EXPECT_EQ(EvaluateArgv(rules, {push}).rule, &rules[1]);
  EXPECT_EQ(EvaluateArgv(rules, {push}).decision, ApprovalDecision::kAsk);
  const std::vector<std::string> status = {"git", "status"};
  EXPECT_EQ(EvaluateArgv(rules, {status}).rule, nullptr);
  EXPECT_EQ(EvaluatePath(rules, ".github/workflows/ci.yml").rule, &rules[2]);
  EXPECT_EQ(EvaluatePath(rules, "src/main.cc").rule, nullptr);
  EXPECT_EQ(EvaluateDomain(rules, "api.example.com", 443).rule, &rules[3]);
  EXPECT_EQ(EvaluateDomain(rules, "example.org", 443).decision, ApprovalDecision::kAllow);
  EXPECT_EQ(EvaluateTool(rules, "read_url").rule, &rules[0]);
}

TEST(ApprovalStrictnessTest, DenyOverAskOverAllow) {
  EXPECT_EQ(ApprovalStrictness(ApprovalDecision::kAllow), 0);
  EXPECT_EQ(ApprovalStrictness(ApprovalDecision::kAsk), 1);
  EXPECT_EQ(ApprovalStrictness(ApprovalDecision::kDeny), 2);
}

// ---------------------------------------------------------------- the loader's check

TEST(ApprovalCheck, GoodRulesPass) {
  ApprovalRule push = ArgvRule({"git", "push"});
  push.id = "git-push";
  push.match = {"git push", "sh -c 'git push'", "git -C x push origin"};
  push.not_match = {"git status", "gitk push"};
  EXPECT_TRUE(CheckApprovalRule(push)) << CheckApprovalRule(push).error().message;

  ApprovalRule tool = Rule(ApprovalMatcher::kTool, "mcp__github__*");
  tool.match = {"mcp__github__create_issue"};
  tool.not_match = {"read_url"};
  EXPECT_TRUE(CheckApprovalRule(tool)) << CheckApprovalRule(tool).error().message;

  ApprovalRule path = Rule(ApprovalMatcher::kPath, ".github/workflows/**");
  path.match = {".github/workflows/ci.yml"};
  path.not_match = {"src/a.c", ".github/workflows"};
  EXPECT_TRUE(CheckApprovalRule(path)) << CheckApprovalRule(path).error().message;

  ApprovalRule domain = Rule(ApprovalMatcher::kDomain, "*.example.com:8443");
  domain.match = {"api.example.com", "api.example.com:8443"};
  domain.not_match = {"api.example.com:443", "example.com", "[::1]:8443"};
  EXPECT_TRUE(CheckApprovalRule(domain)) << CheckApprovalRule(domain).error().message;
}

TEST(ApprovalCheck, FailuresNameWhereTheRuleAndTheExample) {
  struct Row {
    std::string name;
    ApprovalRule rule;
    std::string message;  // the whole message
  };
  auto with = [](ApprovalRule r, auto change) {
    change(r);
    return r;
  };
  ApprovalRule push = ArgvRule({"git", "push"});
  push.id = "git-push";
  push.match = {"git push"};
  ApprovalRule tool = Rule(ApprovalMatcher::kTool, "read_*");
  tool.match = {"read_url"};
  ApprovalRule path = Rule(ApprovalMatcher::kPath, "src/**");
  path.match = {"src/a.c"};
  ApprovalRule domain = Rule(ApprovalMatcher::kDomain, "example.com");
  domain.match = {"example.com"};
  const std::string head = "test.toml:1: approval rule \"";

  const Row rows[] = {
      {"match example fails",
       with(push,
            [](ApprovalRule& r) {
              r.match = {"git push", "git status"};
            }),
       head + "git-push\": its match example \"git status\" does not match"},
      {"not_match example matches",
       with(push, [](ApprovalRule& r) { r.not_match = {"sh -c 'git push'"}; }),
       head + "git-push\": its not_match example \"sh -c 'git push'\" matches"},
      {"no match example", with(tool, [](ApprovalRule& r) { r.match.clear(); }),
       head + "r\": has no match example (each rule shows at least one tool it matches)"},
      {"empty id", with(tool, [](ApprovalRule& r) { r.id.clear(); }), head + "\": has no id"},
      {"bad id", with(tool, [](ApprovalRule& r) { r.id = "a b"; }),
       head + "a b\": its id has a character other than A-Z a-z 0-9 _ . -"},
      {"long id", with(tool, [](ApprovalRule& r) { r.id = std::string(65, 'x'); }),
       head + std::string(65, 'x') + "\": its id is longer than 64 characters"},
      {"empty pattern", with(tool, [](ApprovalRule& r) { r.pattern.clear(); }),
       head + "r\": has an empty tool pattern"},
      {"two matchers", with(tool, [](ApprovalRule& r) { r.argv = {"git"}; }),
       head + "r\": has both a tool pattern and argv (one matcher per rule)"},
      {"long pattern", with(tool, [](ApprovalRule& r) { r.pattern = std::string(513, '*'); }),
       head + "r\": its pattern is longer than 512 bytes"},
      {"NUL in pattern", with(tool, [](ApprovalRule& r) { r.pattern = std::string("read\0*", 6); }),
       head + "r\": its pattern has a NUL byte"},
      {"NUL in example", with(tool, [](ApprovalRule& r) { r.match = {std::string("read\0x", 6)}; }),
       head + "r\": its match example \"read\\x00x\" has a NUL byte"},
      {"empty argv", with(push, [](ApprovalRule& r) { r.argv.clear(); }),
       head + "git-push\": argv is empty (write the prefix, as [\"git\", \"push\"])"},
      {"empty argv word",
       with(push,
            [](ApprovalRule& r) {
              r.argv = {"git", ""};
            }),
       head + "git-push\": argv has an empty word"},
      {"argv and pattern", with(push, [](ApprovalRule& r) { r.pattern = "x"; }),
       head + "git-push\": has both argv and a pattern (one matcher per rule)"},
      {"long argv",
       with(push, [](ApprovalRule& r) { r.argv = std::vector<std::string>(17, "git"); }),
       head + "git-push\": argv has more than 16 words"},
      {"empty argv example", with(push, [](ApprovalRule& r) { r.match = {"  "}; }),
       head + "git-push\": its match example \"  \" has no words"},
      {"absolute path", with(path, [](ApprovalRule& r) { r.pattern = "/etc/*"; }),
       head + "r\": its path pattern \"/etc/*\" is absolute (write it relative to the workspace)"},
      {"dot-dot path", with(path, [](ApprovalRule& r) { r.pattern = "a/../b"; }),
       head + "r\": its path pattern \"a/../b\" has a .. component"},
      {"bad domain", with(domain, [](ApprovalRule& r) { r.pattern = "a*.example.com"; }),
       head + "r\": domain rule \"a*.example.com\" has a * that is not a leading \"*.\" (write a "
              "name, *.suffix, or an address, each optionally with :PORT)"},
      {"bad domain example", with(domain, [](ApprovalRule& r) { r.match = {"example.com:x"}; }),
       head + "r\": its match example \"example.com:x\" is not host or host:port"},
      {"domain example on another port",
       with(domain,
            [](ApprovalRule& r) {
              r.pattern = "example.com:8443";
              r.match = {"example.com:443"};
            }),
       head + "r\": its match example \"example.com:443\" does not match"},
      {"no where",
       with(tool,
            [](ApprovalRule& r) {
              r.where.clear();
              r.match = {"x"};
            }),
       "approval rule \"r\": its match example \"x\" does not match"},
  };
  for (const Row& r : rows) {
    const Status s = CheckApprovalRule(r.rule);
    ASSERT_FALSE(s) << r.name;
    EXPECT_EQ(s.error().code, Code::kInvalidInput) << r.name;
    EXPECT_EQ(s.error().message, r.message) << r.name;
  }
}

}  // namespace
}  // namespace cordon
