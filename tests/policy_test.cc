// Policy: layering, unknown keys with file:line, tighten-only project files, examples, and the
// protected-path rule.
#include "policy/policy.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(Policy, ShippedDefaultLoads) {
  PolicySources s;
  s.dirs = {testing::ShippedPolicyDir()};
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->limits.max_read_lines, 2000);
  EXPECT_TRUE(p->Grants("fs:read"));
  EXPECT_FALSE(p->Grants("diagnostics:read"));
  EXPECT_NE(p->provenance["limits.max_read_lines"].find("00-default.toml:10"), std::string::npos);
}

TEST(Policy, LaterFilesOverrideInLexicalOrder) {
  TempDir d;
  WriteFile(d / "pol/20-b.toml", "[limits]\ntimeout_secs = 7\n");
  WriteFile(d / "pol/10-a.toml", "[limits]\ntimeout_secs = 5\nmax_results = 9\n");
  WriteFile(d / "pol/ignored.txt", "not toml at all [");
  PolicySources s;
  s.dirs = {d / "pol"};
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->limits.timeout_secs, 7);
  EXPECT_EQ(p->limits.max_results, 9);
  EXPECT_EQ(p->provenance["limits.timeout_secs"], d / "pol/20-b.toml:2");
  ASSERT_EQ(p->files.size(), 2u);
}

TEST(Policy, UnknownKeysAndBadTypesNameFileAndLine) {
  struct Case {
    std::string text, needle;
  };
  const Case cases[] = {
      {"[limits]\ntimeout_secs = 5\nmax_bogus = 1\n", "x.toml:3: unknown key \"limits.max_bogus\""},
      {"[nonsense]\na = 1\n", "x.toml:1: unknown key \"nonsense\""},
      {"[limits]\ntimeout_secs = \"5\"\n",
       "x.toml:2: limits.timeout_secs must be a positive integer"},
      {"[limits]\ntimeout_secs = -1\n", "x.toml:2"},
      {"[scopes]\ngrant = [\"fs:read\", \"root:all\"]\n", "unknown scope \"root:all\""},
      {"[audit]\nfsync = \"sometimes\"\n", "x.toml:2: audit.fsync"},
      {"[limits\n", "x.toml:1"},
      {"[examples]\nprotected = [\"src/main.c\"]\n",
       "example fails: src/main.c should be protected"},
  };
  for (const auto& c : cases) {
    Policy p;
    auto st = ApplyPolicyText(p, c.text, "x.toml", false);
    ASSERT_FALSE(st) << c.text;
    EXPECT_EQ(st.error().code, Code::kInvalidInput);
    EXPECT_NE(st.error().message.find(c.needle), std::string::npos)
        << c.text << " -> " << st.error().message;
  }
}

TEST(Policy, ProjectFileCanOnlyTighten) {
  TempDir d;
  WriteFile(d / "pol/00.toml",
            "[limits]\ntimeout_secs = 30\nmax_output_bytes = 1000\n"
            "[scopes]\ngrant = [\"fs:read\"]\n[audit]\nfsync = \"per_call\"\n");
  WriteFile(d / "ws/.cordon/policy.toml",
            "[limits]\ntimeout_secs = 3600\nmax_output_bytes = 10\n"
            "[scopes]\ngrant = [\"fs:read\", \"fs:write\", \"process:run\"]\n"
            "[audit]\nfsync = \"never\"\n[redact]\nvalues = [\"project-secret-1\"]\n");
  PolicySources s;
  s.dirs = {d / "pol"};
  s.project_file = d / "ws/.cordon/policy.toml";
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->limits.timeout_secs, 30);                   // raise refused
  EXPECT_EQ(p->limits.max_output_bytes, 10);               // lowering accepted
  EXPECT_EQ(p->scopes, std::set<std::string>{"fs:read"});  // grant refused
  EXPECT_EQ(p->audit_fsync, "per_call");                   // weakening refused
  EXPECT_EQ(p->redact_values.size(), 1u);                  // more redaction accepted
  EXPECT_GE(p->notes.size(), 4u);
  EXPECT_NE(p->provenance["limits.max_output_bytes"].find(".cordon/policy.toml:3"),
            std::string::npos);
}

TEST(Policy, ProjectFileCanDropScopes) {
  TempDir d;
  WriteFile(d / "pol/00.toml", "[scopes]\ngrant = [\"fs:read\", \"fs:write\"]\n");
  WriteFile(d / "proj.toml", "[scopes]\ngrant = [\"fs:read\"]\n");
  PolicySources s;
  s.dirs = {d / "pol"};
  s.project_file = d / "proj.toml";
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->Grants("fs:write"));
}

TEST(ProtectedPaths, Table) {
  for (const char* p :
       {".git/config", ".git/hooks", ".git/hooks/pre-commit", "vendor/x/.git/config",
        "a/.git/hooks/post-checkout", ".cordon", ".cordon/policy.toml", ".thndrs/mcp.toml",
        ".mcp.json", "sub/.mcp.json", ".vscode/tasks.json", ".claude/settings.json", ".bashrc",
        ".zshrc", ".profile", "x/.bash_profile", ".envrc", ".config/fish/config.fish"}) {
    EXPECT_TRUE(IsProtectedPath(p)) << p;
  }
  for (const char* p : {"src/main.c", ".git/objects/ab/cd", ".git/HEAD", ".git/refs/heads/main",
                        ".github/workflows/ci.yml", "config", "hooks/x", "docs/profile.md",
                        ".gitconfig.example", "cordon/x", ".vscodeignore"}) {
    EXPECT_FALSE(IsProtectedPath(p)) << p;
  }
}

}  // namespace
}  // namespace cordon
