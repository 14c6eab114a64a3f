// policy/decision: the one decision seam, table-tested without a kernel. Each row is what is
// asked, under which policy, and what must come out: the verdict, the rule that decided and
// where it came from (what the record shows an auditor), and the reason the agent is told.
#include "policy/decision.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace cordon {
namespace {

Policy WithScopes(std::set<std::string> scopes) {
  Policy p;
  p.scopes = std::move(scopes);
  p.provenance["scopes.grant"] = "test.toml:1";
  p.entry_provenance["scopes.grant"]["fs:read"] = "test.toml:2";
  return p;
}

TEST(Decision, CallsAreDecidedByTheScopeGrantWithItsSource) {
  struct Row {
    std::set<std::string> scopes;
    CallAsk ask;
    Verdict verdict;
    std::string source;
    std::string reason_has;
  };
  const Row rows[] = {
      {{"fs:read"}, {"read_file_range", "fs:read", true}, Verdict::kAllow, "test.toml:2", ""},
      // granted, but by no line this policy kept for that scope: the list's own source
      {{"fs:read", "fs:write"},
       {"create_file", "fs:write", true},
       Verdict::kAllow,
       "test.toml:1",
       ""},
      {{"fs:read"},
       {"create_file", "fs:write", true},
       Verdict::kDeny,
       "test.toml:1",
       "create_file needs scope fs:write, which the policy does not grant"},
      {{}, {"mcp__srv__echo", "mcp:call", false}, Verdict::kDeny, "", "needs scope mcp:call"},
      {{"mcp:call"}, {"mcp__srv__echo", "mcp:call", false}, Verdict::kAllow, "", ""},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(r.ask.tool) + " " + std::string(r.ask.scope));
    const Decision d = Decide(WithScopes(r.scopes), r.ask);
    EXPECT_EQ(d.verdict, r.verdict);
    EXPECT_EQ(d.rule, "scopes.grant");
    EXPECT_EQ(d.source, r.source);
    EXPECT_NE(d.reason.find(r.reason_has), std::string::npos) << d.reason;
    if (r.verdict == Verdict::kDeny) {
      EXPECT_EQ(d.code, Code::kDeniedByPolicy);
      EXPECT_EQ(d.ToError().code, Code::kDeniedByPolicy);
    }
  }
}

TEST(Decision, AScopeAUserFileGrantsNamesThatFileAndLine) {
  testing::TempDir dir;
  testing::WriteFile(dir.path() + "/50-net.toml", "[scopes]\ngrant = [\"net:read\"]\n");
  PolicySources s;
  s.dirs = {testing::ShippedPolicyDir()};
  s.extra_files = {dir.path() + "/50-net.toml"};
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p) << p.error().message;
  const Decision d = Decide(*p, CallAsk{"read_url", "net:read", true});
  EXPECT_TRUE(d.allowed());
  EXPECT_NE(d.source.find("50-net.toml:2"), std::string::npos) << d.source;
  // Granted by the built-in defaults before any file: said so, not a file's line.
  EXPECT_EQ(Decide(*p, CallAsk{"read_file_range", "fs:read", true}).source, "built-in default");
}

TEST(Decision, ALauncherThatDownloadsAtStartNeedsTheNetwork) {
  const std::vector<std::string> npx = {"npx", "-y", "@modelcontextprotocol/server-everything"};
  const std::vector<std::string> node = {"node", "server.js"};
  const std::string why = "npx fetches @modelcontextprotocol/server-everything from npm";
  struct Row {
    const std::vector<std::string>* argv;
    NetworkMode network;
    std::optional<std::string> fetches;
    std::string_view preset;
    Verdict verdict;
    std::string reason_has;
  };
  const Row rows[] = {
      {&npx, NetworkMode::kNone, why, "npm", Verdict::kDeny, "--allow-preset npm"},
      {&npx, NetworkMode::kLoopback, why, "npm", Verdict::kDeny, "network loopback"},
      {&npx, NetworkMode::kNone, why, "", Verdict::kDeny, "--allow-domain"},
      {&npx, NetworkMode::kProxy, why, "npm", Verdict::kAllow, ""},
      {&npx, NetworkMode::kAllow, why, "npm", Verdict::kAllow, ""},
      {&node, NetworkMode::kNone, std::nullopt, "", Verdict::kAllow, ""},
  };
  const Policy policy = WithScopes({});
  for (const Row& r : rows) {
    SCOPED_TRACE((*r.argv)[0] + " " + std::string(NetworkModeName(r.network)));
    const Decision d = Decide(policy, LaunchAsk{.tool = "wrap",
                                                .argv = *r.argv,
                                                .network = r.network,
                                                .fetches_at_start = r.fetches,
                                                .preset = r.preset});
    EXPECT_EQ(d.verdict, r.verdict);
    EXPECT_NE(d.reason.find(r.reason_has), std::string::npos) << d.reason;
    if (!d.allowed()) {
      EXPECT_NE(d.reason.find(why), std::string::npos) << d.reason;
    }
  }
  const std::vector<std::string> none;
  const Decision empty = Decide(policy, LaunchAsk{.tool = "exec", .argv = none});
  EXPECT_FALSE(empty.allowed());
  EXPECT_EQ(empty.code, Code::kInvalidInput);
}

TEST(Decision, ConnectionsAreDecidedOnTheNameWithTheRuleAndItsSource) {
  EgressPolicy egress;
  egress.allow.push_back(*ParseDomainRule("*.example.com", "net.toml:4"));
  egress.allow.push_back(*ParseDomainRule("api.test:8443", "--allow-domain"));
  egress.deny.push_back(*ParseDomainRule("bad.example.com", "net.toml:9"));
  egress.resolve.push_back(*ParseResolveEntry("api.test=127.0.0.1", "--resolve"));
  struct Row {
    std::string host;
    int port;
    Verdict verdict;
    std::string rule;
    std::string source;
    std::size_t pinned;
  };
  const Row rows[] = {
      {"www.example.com", 443, Verdict::kAllow, "*.example.com", "net.toml:4", 0},
      {"WWW.Example.COM.", 80, Verdict::kAllow, "*.example.com", "net.toml:4", 0},
      {"www.example.com", 22, Verdict::kDeny, "*.example.com", "net.toml:4", 0},
      {"bad.example.com", 443, Verdict::kDeny, "bad.example.com", "net.toml:9", 0},
      {"example.com", 443, Verdict::kDeny, "", "", 0},
      {"api.test", 8443, Verdict::kAllow, "api.test:8443", "--allow-domain", 1},
      {"127.0.0.1", 443, Verdict::kDeny, "", "", 0},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.host + ":" + std::to_string(r.port));
    auto host = ParseEgressHost(r.host);
    ASSERT_TRUE(host) << host.error().message;
    const ConnectDecision d = Decide(egress, ConnectAsk{*host, r.port});
    EXPECT_EQ(d.verdict, r.verdict);
    EXPECT_EQ(d.rule, r.rule);
    EXPECT_EQ(d.source, r.source);
    EXPECT_EQ(d.pinned.size(), r.pinned);
    EXPECT_EQ(d.reason.empty(), d.allowed()) << d.reason;
  }
}

// Approval rules through the seam: a tool, a command and a write each come out allow, ask or
// deny with the rule's id and file:line; within a layer the first match decides, across layers
// the strictest; a tool the scopes refuse is refused, never asked about.
TEST(Decision, ApprovalRulesGiveTheThirdVerdictWithTheRuleAndItsLine) {
  Policy p = WithScopes({"fs:read", "process:run"});
  ASSERT_TRUE(ApplyPolicyText(p, R"([[approvals.rules]]
id = "dry-run-ok"
decision = "allow"
argv = ["git", "push", "--dry-run"]
match = ["git push --dry-run"]

[[approvals.rules]]
id = "push"
decision = "ask"
argv = ["git", "push"]
match = ["git push"]

[[approvals.rules]]
id = "reads"
decision = "ask"
tool = "read_*"
match = ["read_file_range"]

[[approvals.rules]]
id = "deploy"
decision = "ask"
path = "deploy/**"
match = ["deploy/a.yaml"]
)",
                              "user.toml", PolicyLayer::kUser));
  ASSERT_TRUE(ApplyPolicyText(p, R"([[approvals.rules]]
id = "never-deploy-prod"
decision = "deny"
path = "deploy/prod/**"
match = ["deploy/prod/x"]
)",
                              ".cordon/policy.toml", PolicyLayer::kProject));
  const std::vector<std::string> push = {"git", "push", "origin"};
  const std::vector<std::string> dry = {"git", "push", "--dry-run"};
  const std::vector<std::string> status = {"git", "status"};
  Decision d = Decide(p, CommandAsk{.tool = "run_shell", .argv = push});
  EXPECT_EQ(d.verdict, Verdict::kAsk);
  EXPECT_EQ(d.rule, "push");
  EXPECT_EQ(d.source, "user.toml:7");
  EXPECT_EQ(d.code, Code::kApprovalRequired);
  EXPECT_NE(d.reason.find("git push"), std::string::npos) << d.reason;
  // The first match in the layer: the allow above the ask.
  d = Decide(p, CommandAsk{.tool = "run_shell", .argv = dry});
  EXPECT_EQ(d.verdict, Verdict::kAllow);
  EXPECT_EQ(d.rule, "dry-run-ok");
  EXPECT_TRUE(Decide(p, CommandAsk{.tool = "run_shell", .argv = status}).allowed());
  d = Decide(p, CallAsk{"read_file_range", "fs:read", true});
  EXPECT_EQ(d.verdict, Verdict::kAsk);
  EXPECT_EQ(d.source, "user.toml:13");
  // Not granted: refused by the scope, not asked.
  d = Decide(p, CallAsk{"create_file", "fs:write", true});
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule, "scopes.grant");
  // Across layers the strictest: the project's deny beats the user's ask.
  const std::vector<std::string> prod = {"deploy/a.yaml", "deploy/prod/x"};
  d = Decide(p, WriteAsk{.tool = "create_file", .paths = prod});
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule, "never-deploy-prod");
  EXPECT_EQ(d.source, ".cordon/policy.toml:1");
  EXPECT_NE(d.reason.find("deploy/prod/x"), std::string::npos) << d.reason;
  const std::vector<std::string> one = {"deploy/a.yaml"};
  EXPECT_EQ(Decide(p, WriteAsk{.tool = "create_file", .paths = one}).verdict, Verdict::kAsk);
  const std::vector<std::string> other = {"src/a.c"};
  EXPECT_TRUE(Decide(p, WriteAsk{.tool = "create_file", .paths = other}).allowed());
}

// The loader: examples run, a project file only adds ask and deny, a later layer replaces by id
// or removes, and each rule keeps its file:line.
TEST(Decision, TheLoaderChecksExamplesAndKeepsTheProjectToAskAndDeny) {
  Policy p;
  auto st = ApplyPolicyText(p, R"(
[[approvals.rules]]
id = "x"
decision = "ask"
argv = ["git", "push"]
match = ["git pull"]
)",
                            "bad.toml", PolicyLayer::kUser);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("bad.toml:2"), std::string::npos) << st.error().message;
  st = ApplyPolicyText(p, R"([[approvals.rules]]
id = "x"
decision = "ask"
argv = ["git", "push"]
match = ["git push"]
not_match = ["git push --force"]
)",
                       "bad.toml", PolicyLayer::kUser);
  ASSERT_FALSE(st) << "a not_match example that matches refuses the file";
  st = ApplyPolicyText(p, "[[approvals.rules]]\nid = \"x\"\ndecision = \"maybe\"\ntool = \"a\"\n",
                       "bad.toml", PolicyLayer::kUser);
  ASSERT_FALSE(st);
  st = ApplyPolicyText(
      p, "[[approvals.rules]]\nid = \"x\"\ndecision = \"ask\"\ntool = \"a\"\npath = \"b\"\n",
      "bad.toml", PolicyLayer::kUser);
  ASSERT_FALSE(st) << "one matcher only";
  const char* shipped = R"([[approvals.rules]]
id = "push"
decision = "ask"
argv = ["git", "push"]
match = ["git push"]
)";
  ASSERT_TRUE(ApplyPolicyText(p, shipped, "shipped.toml", PolicyLayer::kShipped));
  // The project: an allow and a replacement are notes; a new ask is kept.
  ASSERT_TRUE(ApplyPolicyText(p, R"([[approvals.rules]]
id = "push"
decision = "allow"
argv = ["git", "push"]
match = ["git push"]

[[approvals.rules]]
id = "mine"
decision = "deny"
argv = ["git", "push"]
match = ["git push"]

[[approvals.rules]]
id = "ok"
decision = "ask"
tool = "x"
match = ["x"]

[approvals]
remove = ["push"]
)",
                              "project.toml", PolicyLayer::kProject));
  ASSERT_EQ(p.approval_rules.size(), 3u);
  EXPECT_EQ(p.approval_rules[0].id, "push");
  EXPECT_EQ(p.approval_rules[1].id, "mine");
  EXPECT_EQ(p.approval_rules[2].id, "ok");
  std::string notes;
  for (const auto& n : p.notes) notes += n + "\n";
  EXPECT_NE(notes.find("project.toml:1: a project file cannot allow"), std::string::npos) << notes;
  EXPECT_NE(notes.find("cannot remove approval rules"), std::string::npos) << notes;
  // A user layer replaces by id (the rule is now the user's, at its line) or removes.
  Policy q;
  ASSERT_TRUE(ApplyPolicyText(q, shipped, "shipped.toml", PolicyLayer::kShipped));
  ASSERT_TRUE(ApplyPolicyText(q, R"([[approvals.rules]]
id = "push"
decision = "deny"
argv = ["git", "push"]
match = ["git push"]
)",
                              "user.toml", PolicyLayer::kUser));
  ASSERT_EQ(q.approval_rules.size(), 1u);
  EXPECT_EQ(q.approval_rules[0].decision, ApprovalDecision::kDeny);
  EXPECT_EQ(q.approval_rules[0].where, "user.toml:1");
  ASSERT_TRUE(
      ApplyPolicyText(q, "[approvals]\nremove = [\"push\"]\n", "cli.toml", PolicyLayer::kCli));
  EXPECT_TRUE(q.approval_rules.empty());
}

}  // namespace
}  // namespace cordon
