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

}  // namespace
}  // namespace cordon
