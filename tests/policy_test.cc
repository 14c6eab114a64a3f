// Policy: layering, list merging ("!entry", project layer), provenance per entry, the show
// renderings, enum name tables, unknown keys with file:line, tighten-only project files,
// examples, and the protected-path rule.
#include "policy/policy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "policy/egress.h"
#include "policy/git_rules.h"
#include "policy/policy_show.h"
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
      {"[audit]\nfsync = 1\n", "x.toml:2: audit.fsync must be a string"},
      {"[network]\nmode = \"open\"\n",
       "x.toml:2: network.mode must be one of \"none\", \"loopback\", \"proxy\", \"allow\", not "
       "\"open\""},
      {"[filesystem]\nwrite = \"/data\"\n", "x.toml:2: filesystem.write must be an array"},
      {"[filesystem]\nwrite = [\n  \"/a\",\n  \"!\",\n]\n",
       "x.toml:4: filesystem.write entry \"!\" names nothing"},
      {"[filesystem]\nread = [\"!relative\"]\n",
       "x.toml:2: filesystem.read entry \"relative\" must be absolute"},
      {"[scopes]\ngrant = [\"!root:all\"]\n", "x.toml:2: unknown scope \"root:all\""},
      {"[seccomp]\nallow = [\"ptrace\"]\n", "x.toml:2: unknown key \"seccomp.allow\""},
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

// filesystem.xattr_allow (issue 33, part 6): only `user.` names reach the host. Another
// namespace, a bare "*" or the overlay's marks are errors when the file loads, in every layer.
TEST(PolicyXattrAllow, OnlyUserNamesAreAccepted) {
  for (const char* entry : {"trusted.x", "*", "security.capability", "security.*",
                            "system.posix_acl_access", "trusted.*", "user", "user.",
                            "user.overlay.opaque", "user.overlay.*", "user.a*", "user.*.x"}) {
    SCOPED_TRACE(entry);
    for (bool project : {false, true}) {
      Policy p;
      auto st = ApplyPolicyText(p, std::string("[filesystem]\nxattr_allow = [\"") + entry + "\"]\n",
                                "x.toml", project);
      ASSERT_FALSE(st);
      EXPECT_EQ(st.error().code, Code::kInvalidInput);
      EXPECT_NE(st.error().message.find(std::string("x.toml:2: filesystem.xattr_allow entry \"") +
                                        entry + "\""),
                std::string::npos)
          << st.error().message;
    }
  }
  Policy p;
  auto st = ApplyPolicyText(p, "[filesystem]\nxattr_allow = [\"trusted.x\"]\n", "x.toml", false);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("trusted.*, security.* and system.* ones never reach the host"),
            std::string::npos)
      << st.error().message;
  ASSERT_TRUE(ApplyPolicyText(
      p, "[filesystem]\nxattr_allow = [\"user.checksum.sha256\", \"user.myapp.*\"]\n", "u.toml",
      false));
  EXPECT_EQ(p.filesystem.xattr_allow,
            (std::vector<std::string>{"user.checksum.sha256", "user.myapp.*"}));
  EXPECT_EQ(p.entry_provenance["filesystem.xattr_allow"]["user.myapp.*"], "u.toml:2");
  EXPECT_NE(p.CanonicalJson().find("\"xattr_allow\":[\"user.checksum.sha256\",\"user.myapp.*\"]"),
            std::string::npos)
      << p.CanonicalJson();
  EXPECT_NE(PolicyShowText(p).find("\"user.myapp.*\",    # u.toml:2"), std::string::npos)
      << PolicyShowText(p);
  // A policy that leaves the key out keeps its hash.
  EXPECT_EQ(Policy().CanonicalJson().find("xattr_allow"), std::string::npos);
}

TEST(PolicyXattrAllow, NamesMatchExactlyOrUnderADottedPrefix) {
  const std::vector<std::string> allow = {"user.checksum.sha256", "user.myapp.*"};
  struct Case {
    const char* name;
    bool allowed;
  };
  for (const Case& c : std::initializer_list<Case>{{"user.checksum.sha256", true},
                                                   {"user.checksum.sha2567", false},
                                                   {"user.checksum", false},
                                                   {"user.myapp.x", true},
                                                   {"user.myapp.a.b", true},
                                                   {"user.myapp.", false},
                                                   {"user.myapp", false},
                                                   {"user.myappx", false},
                                                   {"user.x", false},
                                                   {"trusted.myapp.x", false},
                                                   {"security.capability", false}}) {
    EXPECT_EQ(XattrAllowed(c.name, allow), c.allowed) << c.name;
  }
  EXPECT_FALSE(XattrAllowed("user.x", {}));
  // Even "user.*" leaves the overlay's own marks in the stage.
  const std::vector<std::string> every = {"user.*"};
  EXPECT_TRUE(XattrAllowed("user.x", every));
  EXPECT_FALSE(XattrAllowed("user.overlay.opaque", every));
  EXPECT_FALSE(XattrAllowed("trusted.x", every));
}

// The workspace's policy file is the agent's to write: it may drop entries, never add one.
TEST(PolicyXattrAllow, AProjectFileCannotWidenIt) {
  Policy p;
  ASSERT_TRUE(ApplyPolicyText(p, "[filesystem]\nxattr_allow = [\"user.a\", \"user.b.*\"]\n",
                              "u.toml", false));
  ASSERT_TRUE(ApplyPolicyText(p, "[filesystem]\nxattr_allow = [\"!user.a\", \"user.c\"]\n",
                              "project.toml", true));
  EXPECT_EQ(p.filesystem.xattr_allow, std::vector<std::string>{"user.b.*"});
  ASSERT_EQ(p.notes.size(), 1u) << ::testing::PrintToString(p.notes);
  EXPECT_NE(p.notes[0].find("a project file cannot add \"user.c\" to filesystem.xattr_allow"),
            std::string::npos)
      << p.notes[0];
  Policy q;
  ASSERT_TRUE(
      ApplyPolicyText(q, "[filesystem]\nxattr_allow = [\"user.*\"]\n", "project.toml", true));
  EXPECT_TRUE(q.filesystem.xattr_allow.empty());
}

TEST(Policy, ProjectFileCanOnlyTighten) {
  TempDir d;
  WriteFile(d / "pol/00.toml",
            "[limits]\ntimeout_secs = 30\nmax_output_bytes = 1000\n"
            "[scopes]\ngrant = [\"!fs:write\", \"!process:run\", \"!process:operate\", "
            "\"!mcp:call\"]\n[audit]\nfsync = \"per_call\"\n");
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
  EXPECT_EQ(p->audit_fsync, FsyncMode::kPerCall);          // weakening refused
  EXPECT_EQ(p->redact_values.size(), 1u);                  // more redaction accepted
  EXPECT_GE(p->notes.size(), 4u);
  EXPECT_NE(p->provenance["limits.max_output_bytes"].find(".cordon/policy.toml:3"),
            std::string::npos);
}

// The project file and the rule files it names are written by the agent: a key of 200,000
// dotted parts is refused (toml++ would recurse once per part and overflow the stack), and a
// FIFO (a start that never ends), a symlink to a file outside the workspace (read and quoted in
// an error) or /dev/zero (memory) is refused without being read.
TEST(Policy, AnAgentWrittenPolicyCannotCrashHangOrReadOutside) {
  TempDir d;
  WriteFile(d / "outside.toml", "outside-secret-Zk41 = 1\n");
  PolicySources s;
  s.project_file = d / "ws/.cordon/policy.toml";
  std::string deep;
  for (int i = 0; i < 200000; ++i) deep += i == 0 ? "a" : ".a";
  WriteFile(d / "ws/.cordon/policy.toml", deep + " = 1\n");
  auto p = LoadPolicy(s);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("dotted"), std::string::npos) << p.error().message;
  WriteFile(d / "ws/.cordon/policy.toml", "[redact]\nrule_files = [\"r.toml\"]\n");
  ASSERT_EQ(::mkfifo((d / "ws/.cordon/r.toml").c_str(), 0600), 0);
  p = LoadPolicy(s);  // returns at once: a FIFO is never opened for reading
  ASSERT_FALSE(p);
  for (const std::string& target : {d / "outside.toml", std::string("/dev/zero")}) {
    ::unlink((d / "ws/.cordon/r.toml").c_str());
    ASSERT_EQ(::symlink(target.c_str(), (d / "ws/.cordon/r.toml").c_str()), 0);
    p = LoadPolicy(s);
    ASSERT_FALSE(p) << target;
    EXPECT_EQ(p.error().message.find("outside-secret-Zk41"), std::string::npos)
        << p.error().message;
  }
  // The project file itself as a link to a file outside is not read either.
  ::unlink((d / "ws/.cordon/policy.toml").c_str());
  ASSERT_EQ(::symlink((d / "outside.toml").c_str(), (d / "ws/.cordon/policy.toml").c_str()), 0);
  p = LoadPolicy(s);
  if (!p) {
    EXPECT_EQ(p.error().message.find("outside-secret-Zk41"), std::string::npos);
  } else {
    EXPECT_EQ(p->files.back().path.find("outside"), std::string::npos);
  }
}

TEST(Policy, ProjectFileCanDropScopes) {
  TempDir d;
  WriteFile(d / "pol/00.toml", "[scopes]\ngrant = [\"fs:read\", \"fs:write\"]\n");
  WriteFile(d / "proj.toml", "[scopes]\ngrant = [\"!fs:write\"]\n");
  PolicySources s;
  s.dirs = {d / "pol"};
  s.project_file = d / "proj.toml";
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->Grants("fs:write"));
}

// [scopes] only: the exact set, and after it a layer may only narrow.
TEST(PolicyScopes, OnlySetsTheExactSetAndLaterLayersOnlyNarrowIt) {
  TempDir d;
  WriteFile(d / "shipped/00.toml", "[scopes]\ngrant = [\"fs:read\"]\n");
  // A user's read-only agent, then a later file that tries to widen it again.
  WriteFile(d / "user/10-ro.toml", "[scopes]\nonly = [\"fs:read\", \"diagnostics:read\"]\n");
  WriteFile(d / "user/20-more.toml", "[scopes]\ngrant = [\"fs:write\", \"!diagnostics:read\"]\n");
  PolicySources s;
  s.dirs = {d / "shipped", d / "none", d / "user"};
  s.project_file = d / "proj.toml";
  WriteFile(d / "proj.toml", "[scopes]\nonly = [\"fs:read\", \"process:run\"]\n");
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p) << p.error().message;
  // The built-in five are gone (only is exact), diagnostics:read was added by only and removed
  // by the later "!"; fs:write and process:run cannot come back.
  EXPECT_EQ(p->scopes, std::set<std::string>{"fs:read"});
  EXPECT_EQ(p->provenance["scopes.grant"], d / "proj.toml:2");
  std::string notes;
  for (const auto& n : p->notes) notes += n + "\n";
  EXPECT_NE(notes.find("20-more.toml:2: [scopes] only at " + (d / "user/10-ro.toml:2") +
                       " fixed the scopes, so grant cannot add \"fs:write\""),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("proj.toml:2: scopes.only can only narrow here (a project file), so "
                       "\"process:run\" stays out"),
            std::string::npos)
      << notes;
  // An only that narrows says nothing on stderr.
  EXPECT_TRUE(p->warnings.empty()) << p->warnings[0];
}

TEST(PolicyScopes, OnlyRefusesRemovalsAndUnknownScopes) {
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {"[scopes]\nonly = [\"!fs:write\"]\n", "x.toml:2: scopes.only names the exact set"},
           {"[scopes]\nonly = [\"fs:read\", \"root:all\"]\n", "x.toml:2: unknown scope"},
           {"[scopes]\nonly = \"fs:read\"\n", "x.toml:2"},
           {"[scopes]\nexact = [\"fs:read\"]\n", "scopes.exact"}}) {
    Policy p;
    auto st = ApplyPolicyText(p, text, "x.toml", false);
    ASSERT_FALSE(st) << text;
    EXPECT_EQ(st.error().code, Code::kInvalidInput) << text;
    EXPECT_NE(st.error().message.find(needle), std::string::npos) << st.error().message;
  }
}

TEST(PolicyScopes, AUserGrantThatLeavesOrAddsMoreThanItNamesIsAWarning) {
  TempDir d;
  WriteFile(d / "user/ro.toml", "[scopes]\ngrant = [\"fs:read\"]\n");
  PolicySources s;
  s.dirs = {testing::ShippedPolicyDir(), d / "none", d / "user"};
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->warnings.size(), 1u);
  EXPECT_NE(p->warnings[0].find(d / "user/ro.toml:2: [scopes] grant adds to the layers below, so "
                                    "\"fs:write\", \"mcp:call\", \"process:operate\", "
                                    "\"process:run\", \"session:operate\" stay granted"),
            std::string::npos)
      << p->warnings[0];
  EXPECT_NE(p->warnings[0].find("[scopes] only = [...]"), std::string::npos);
  // A grant beyond the shipped set.
  WriteFile(d / "user/ro.toml", "[scopes]\ngrant = [\"!fs:write\", \"net:read\"]\n");
  p = LoadPolicy(s);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->warnings.size(), 1u) << p->warnings[1];
  EXPECT_NE(p->warnings[0].find("grant widens the shipped scopes with \"net:read\""),
            std::string::npos)
      << p->warnings[0];
  // Removals only, or the shipped file itself: nothing to say.
  WriteFile(d / "user/ro.toml", "[scopes]\ngrant = [\"!fs:write\"]\n");
  p = LoadPolicy(s);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->warnings.empty());
  s.dirs = {testing::ShippedPolicyDir()};
  p = LoadPolicy(s);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->warnings.empty());
  // only is the way to say "exactly these": no warning.
  s.dirs = {testing::ShippedPolicyDir(), d / "none", d / "user"};
  WriteFile(d / "user/ro.toml", "[scopes]\nonly = [\"fs:read\"]\n");
  p = LoadPolicy(s);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->warnings.empty());
  EXPECT_EQ(p->scopes, std::set<std::string>{"fs:read"});
}

// One layer of a merge test: its TOML and whether it is the tighten-only project layer.
struct Layer {
  std::string text;
  bool project = false;
};

struct MergeCase {
  std::string what;
  std::vector<Layer> layers;
  std::string key;  // "filesystem.write"
  std::vector<std::string> want;
  std::vector<std::string> note_needles;  // one per expected note, in order
};

std::vector<std::string> ListOf(const Policy& p, const std::string& name) {
  for (const ListKey& k : ListKeys()) {
    if (k.Name() == name) return k.get(p);
  }
  ADD_FAILURE() << "no list key " << name;
  return {};
}

TEST(PolicyLists, MergeTable) {
  const std::string ws = "[filesystem]\nwrite = [\"${WORKSPACE}\"]\n";
  const std::string sc = "[seccomp]\ndeny = [\"a\", \"b\", \"c\"]\n";
  const MergeCase cases[] = {
      {"a later layer extends and is told what the old rule would have dropped",
       {{ws}, {"[filesystem]\nwrite = [\"/data\"]\n"}},
       "filesystem.write",
       {"${WORKSPACE}", "/data"},
       {"l1.toml:2: filesystem.write now extends the layers below instead of replacing them, so "
        "it keeps \"${WORKSPACE}\"; to drop it as before, add \"!${WORKSPACE}\""}},
      {"\"!entry\" removes, and a file using it gets no note",
       {{ws}, {"[filesystem]\nwrite = [\"!${WORKSPACE}\", \"/data\"]\n"}},
       "filesystem.write",
       {"/data"},
       {}},
      {"repeating the entries below is the old meaning too: deduplicated, no note",
       {{ws}, {"[filesystem]\nwrite = [\"/data\", \"${WORKSPACE}\", \"/data\"]\n"}},
       "filesystem.write",
       {"${WORKSPACE}", "/data"},
       {}},
      {"removing what is not there is a note, not an error",
       {{ws}, {"[filesystem]\nwrite = [\"!/nope\"]\n"}},
       "filesystem.write",
       {"${WORKSPACE}"},
       {"l1.toml:2: \"!/nope\" in filesystem.write removes nothing: no such entry below"}},
      {"remove then add moves an entry to the end; order otherwise stable",
       {{sc}, {"[seccomp]\ndeny = [\"!a\", \"a\", \"d\"]\n"}},
       "seccomp.deny",
       {"b", "c", "a", "d"},
       {}},
      {"!! adds a literal leading !",
       {{"[redact]\nenv_names = [\"!!BANG\"]\n"}},
       "redact.env_names",
       {"!BANG"},
       {}},
      {"a project may remove from a grants list",
       {{"[filesystem]\nread = [\"/usr\", \"/opt\"]\n"},
        {"[filesystem]\nread = [\"!/opt\"]\n", true}},
       "filesystem.read",
       {"/usr"},
       {}},
      {"a project's plain grants list narrows to what it names and cannot add",
       {{"[filesystem]\nread = [\"/usr\", \"/opt\"]\n"},
        {"[filesystem]\nread = [\"/opt\", \"/srv\"]\n", true}},
       "filesystem.read",
       {"/opt"},
       {"l1.toml:2: a project file's plain filesystem.read list narrows it to the entries it "
        "names; "
        "dropped \"/usr\"",
        "l1.toml:2: a project file cannot add \"/srv\""}},
      {"a project may add to a denies list, silently",
       {{"[filesystem]\ndeny = [\"/etc/shadow\"]\n"},
        {"[filesystem]\ndeny = [\"~/.secret\"]\n", true}},
       "filesystem.deny",
       {"/etc/shadow", "~/.secret"},
       {}},
      {"a project may not remove from a denies list",
       {{"[filesystem]\ndeny = [\"/etc/shadow\"]\n"},
        {"[filesystem]\ndeny = [\"!/etc/shadow\"]\n", true}},
       "filesystem.deny",
       {"/etc/shadow"},
       {"l1.toml:2: a project file cannot remove \"/etc/shadow\" from filesystem.deny"}},
      {"seccomp.deny: a project always added, so its meaning did not change",
       {{sc}, {"[seccomp]\ndeny = [\"d\"]\n", true}},
       "seccomp.deny",
       {"a", "b", "c", "d"},
       {}},
      {"seccomp.deny: another layer used to replace it",
       {{sc}, {"[seccomp]\ndeny = [\"d\"]\n"}},
       "seccomp.deny",
       {"a", "b", "c", "d"},
       {"keeps \"a\", \"b\", \"c\"; to drop them as before, add \"!a\", \"!b\", \"!c\""}},
      {"deny and redact lists always added, so no meaning note",
       {{"[redact]\nenv_names = [\"A\"]\n"}, {"[redact]\nenv_names = [\"B\"]\n"}},
       "redact.env_names",
       {"A", "B"},
       {}},
      {"scopes: extend and remove, effective order sorted",
       {{"[scopes]\ngrant = [\"process:run\", \"fs:read\"]\n"},
        {"[scopes]\ngrant = [\"!process:run\", \"diagnostics:read\"]\n"}},
       "scopes.grant",
       {"diagnostics:read", "fs:read"},
       {}},
      {"scopes: a project cannot grant",
       {{"[scopes]\ngrant = [\"fs:read\"]\n"},
        {"[scopes]\ngrant = [\"fs:read\", \"fs:write\"]\n", true}},
       "scopes.grant",
       {"fs:read"},
       {"l1.toml:2: a project file cannot add \"fs:write\" to scopes.grant"}},
      {"secret values never appear in notes",
       {{"[redact]\nvalues = [\"hunter2\"]\n"}, {"[redact]\nvalues = [\"!hunter3\"]\n"}},
       "redact.values",
       {"hunter2"},
       {"l1.toml:2: a \"!\" entry in redact.values removes nothing"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Policy p;
    for (std::size_t i = 0; i < c.layers.size(); ++i) {
      auto st = ApplyPolicyText(p, c.layers[i].text, "l" + std::to_string(i) + ".toml",
                                c.layers[i].project);
      ASSERT_TRUE(st) << st.error().message;
    }
    EXPECT_EQ(ListOf(p, c.key), c.want);
    ASSERT_EQ(p.notes.size(), c.note_needles.size()) << ::testing::PrintToString(p.notes);
    for (std::size_t i = 0; i < c.note_needles.size(); ++i) {
      EXPECT_NE(p.notes[i].find(c.note_needles[i]), std::string::npos) << p.notes[i];
      EXPECT_EQ(p.notes[i].find("hunter"), std::string::npos) << p.notes[i];
    }
  }
}

TEST(PolicyLists, TheExampleInDocsPolicyMd) {
  Policy p;
  ASSERT_TRUE(ApplyPolicyText(p, "[filesystem]\nwrite = [\"${WORKSPACE}\"]\n", "00.toml", false));
  ASSERT_TRUE(ApplyPolicyText(p, "[filesystem]\nwrite = [\"~/.cache/pip\", \"!${WORKSPACE}\"]\n",
                              "50.toml", false));
  EXPECT_EQ(p.filesystem.write, std::vector<std::string>{"~/.cache/pip"});
  ASSERT_TRUE(ApplyPolicyText(p,
                              "[filesystem]\nwrite = [\"!~/.cache/pip\"]\n"
                              "deny = [\"${WORKSPACE}/secrets\"]\n",
                              "project.toml", true));
  EXPECT_TRUE(p.filesystem.write.empty());
  EXPECT_EQ(p.filesystem.deny, std::vector<std::string>{"${WORKSPACE}/secrets"});
  EXPECT_TRUE(p.notes.empty()) << ::testing::PrintToString(p.notes);
  // Without the "!" the user file keeps the workspace writable, and says what changed.
  Policy q;
  ASSERT_TRUE(ApplyPolicyText(q, "[filesystem]\nwrite = [\"${WORKSPACE}\"]\n", "00.toml", false));
  ASSERT_TRUE(ApplyPolicyText(q, "[filesystem]\nwrite = [\"~/.cache/pip\"]\n", "50.toml", false));
  EXPECT_EQ(q.filesystem.write, (std::vector<std::string>{"${WORKSPACE}", "~/.cache/pip"}));
  ASSERT_EQ(q.notes.size(), 1u);
}

TEST(PolicyLists, EveryListKeyIsReachableFromAFile) {
  // A list key born later gets the merge rule by being in ListKeys(); this checks the table.
  for (const ListKey& k : ListKeys()) {
    SCOPED_TRACE(k.Name());
    const std::string entry = k.Name() == "scopes.grant"                 ? "fs:read"
                              : k.Name() == "filesystem.protected_names" ? ".x"
                              : k.Name() == "filesystem.xattr_allow"     ? "user.x"
                              : k.section == "filesystem"                ? "/x"
                              : k.Name() == "redact.credential_stores"   ? "~/.x"
                              : k.Name() == "network.presets"            ? "npm"
                              : k.Name() == "network.resolve"            ? "x.test=127.0.0.1"
                              : k.section == "network"                   ? "x.test"
                                                                         : "x";
    Policy p;
    const std::string text =
        "[" + std::string(k.section) + "]\n" + std::string(k.key) + " = [\"" + entry + "\"]\n";
    ASSERT_TRUE(ApplyPolicyText(p, text, "a.toml", false));
    EXPECT_EQ(k.get(p), std::vector<std::string>{entry});
    EXPECT_EQ(p.entry_provenance[k.Name()][entry], "a.toml:2");
    ASSERT_TRUE(ApplyPolicyText(
        p, "[" + std::string(k.section) + "]\n" + std::string(k.key) + " = [\"!" + entry + "\"]\n",
        "b.toml", false));
    EXPECT_TRUE(k.get(p).empty());
    EXPECT_EQ(p.entry_provenance[k.Name()].count(entry), 0u);
  }
}

TEST(PolicyShow, EachEntryAndValueKeepsItsFileAndLine) {
  TempDir d;
  WriteFile(d / "pol/10-a.toml",
            "[filesystem]\n"
            "read = [\n"
            "  \"/usr\",\n"
            "  \"/opt\",\n"
            "]\n"
            "[audit]\n"
            "fsync = \"always\"\n"
            "[redact]\n"
            "values = [\"sekrit-value-1\"]\n");
  WriteFile(d / "pol/20-b.toml",
            "[filesystem]\nread = [\"/srv\", \"!/opt\"]\n[tools.exec]\ntimeout_secs = 99\n");
  PolicySources s;
  s.dirs = {d / "pol"};
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p) << p.error().message;
  const std::string a = d / "pol/10-a.toml";
  const std::string b = d / "pol/20-b.toml";
  EXPECT_EQ(p->filesystem.read, (std::vector<std::string>{"/usr", "/srv"}));
  EXPECT_EQ(p->entry_provenance["filesystem.read"]["/usr"], a + ":3");
  EXPECT_EQ(p->entry_provenance["filesystem.read"]["/srv"], b + ":2");
  EXPECT_EQ(p->provenance["filesystem.read"], b + ":2");
  EXPECT_EQ(p->provenance["audit.fsync"], a + ":7");
  EXPECT_TRUE(p->notes.empty()) << ::testing::PrintToString(p->notes);

  Json j = PolicyShowJson(*p);
  EXPECT_EQ(j["sha256"], p->Sha256());
  EXPECT_EQ(j["effective"], Json::parse(p->CanonicalJson()));
  EXPECT_EQ(j["decided_by"]["audit.fsync"], a + ":7");
  EXPECT_EQ(j["entries"]["filesystem.read"],
            Json::parse(R"([{"value":"/usr","from":")" + a + R"(:3"},{"value":"/srv","from":")" +
                        b + R"(:2"}])"));
  EXPECT_EQ(j["entries"]["scopes.grant"][0],
            (Json{{"value", "fs:read"}, {"from", "built-in default"}}));
  EXPECT_EQ(j["entries"]["redact.values"], Json::parse(R"([{"from":")" + a + R"(:9"}])"));
  EXPECT_EQ(j["files"][1],
            (Json{{"path", b}, {"sha256", p->files[1].sha256}, {"layer", "shipped"}}));
  for (const ListKey& k : ListKeys()) EXPECT_TRUE(j["entries"].contains(k.Name())) << k.Name();
  EXPECT_EQ(j.dump().find("sekrit"), std::string::npos);

  const std::string text = PolicyShowText(*p);
  for (const std::string& line : std::vector<std::string>{
           {"# effective policy (sha256 " + p->Sha256() + ")",
            "audit.fsync = \"always\"    # " + a + ":7",
            "limits.timeout_secs = 30    # built-in default",
            "tools.exec.timeout_secs = 99    # " + b + ":4",
            "filesystem.read = [    # last set by " + b + ":2", "  \"/usr\",    # " + a + ":3",
            "  \"/srv\",    # " + b + ":2", "  (value not shown),    # " + a + ":9",
            "shipped  " + a + "  sha256:" + p->files[0].sha256}}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("/opt"), std::string::npos);
  EXPECT_EQ(text.find("sekrit"), std::string::npos);
}

// [network] egress keys: parse, normalise, merge across layers, keep the file:line of each entry.
TEST(PolicyEgress, ListsMergeWithProvenanceAndBecomeRules) {
  Policy p;
  ASSERT_TRUE(ApplyPolicyText(p,
                              "[network]\n"
                              "mode = \"proxy\"\n"
                              "allow_domains = [\n"
                              "  \"API.GitHub.com\",\n"
                              "  \"*.example.org:8443\",\n"
                              "]\n"
                              "deny_domains = [\"evil.example.org\"]\n"
                              "presets = [\"npm\"]\n"
                              "resolve = [\"api.test=127.0.0.1,::1\"]\n"
                              "[tools.exec]\n"
                              "allow_domains = [\"docs.example.com\"]\n"
                              "deny_domains = [\"*.ads.example.com\"]\n"
                              "presets = [\"pypi\"]\n",
                              "u.toml", false))
      << "valid egress keys";
  EXPECT_EQ(p.network, NetworkMode::kProxy);
  EXPECT_EQ(p.egress.allow_domains,
            (std::vector<std::string>{"api.github.com", "*.example.org:8443"}));
  EXPECT_EQ(p.entry_provenance["network.allow_domains"]["api.github.com"], "u.toml:4");
  EXPECT_EQ(p.entry_provenance["network.allow_domains"]["*.example.org:8443"], "u.toml:5");
  EXPECT_EQ(p.entry_provenance["network.deny_domains"]["evil.example.org"], "u.toml:7");
  EXPECT_EQ(p.egress.resolve, std::vector<std::string>{"api.test=127.0.0.1,::1"});
  EXPECT_EQ(p.entry_provenance["tools.exec.allow_domains"]["docs.example.com"], "u.toml:11");
  // A later user layer removes with "!", case-insensitively (entries are kept normalised).
  ASSERT_TRUE(
      ApplyPolicyText(p, "[network]\nallow_domains = [\"!Api.GitHub.com.\"]\n", "v.toml", false));
  EXPECT_EQ(p.egress.allow_domains, std::vector<std::string>{"*.example.org:8443"});
  EXPECT_TRUE(p.notes.empty()) << ::testing::PrintToString(p.notes);

  const EgressPolicy g = EgressFor(p, "call");
  const EgressPolicy* global = &g;
  ASSERT_EQ(global->allow.size(), 3u);  // *.example.org:8443 and npm's two registries
  EXPECT_EQ(global->allow[0].text, "*.example.org:8443");
  EXPECT_EQ(global->allow[0].source, "u.toml:5");
  EXPECT_EQ(global->allow[1].text, "registry.npmjs.org");
  EXPECT_EQ(global->allow[1].source, "preset npm (u.toml:8)");
  EXPECT_EQ(global->presets, std::vector<std::string>{"npm"});
  ASSERT_EQ(global->caches.size(), 1u);
  EXPECT_EQ(global->caches[0],
            (std::pair<std::string, std::string>{"npm", "preset npm (u.toml:8)"}));
  ASSERT_EQ(global->deny.size(), 1u);
  EXPECT_EQ(global->deny[0].source, "u.toml:7");
  ASSERT_EQ(global->resolve.size(), 1u);
  EXPECT_EQ(global->resolve[0].addresses, (std::vector<std::string>{"127.0.0.1", "::1"}));
  EXPECT_EQ(global->resolve[0].source, "u.toml:9");

  // A tool gets the global rules and its own; the command line's come last with their flag.
  EgressExtra extra;
  extra.allow.push_back(*ParseDomainRule("cli.example.net", "--allow-domain"));
  extra.presets = {{"crates", "--allow-preset"}};
  extra.resolve.push_back(*ParseResolveEntry("api.test=127.0.0.2", "--resolve"));
  const EgressPolicy e = EgressFor(p, "exec", extra);
  const EgressPolicy* exec = &e;
  std::vector<std::string> allow;
  for (const auto& r : exec->allow) allow.push_back(r.text + " <- " + r.source);
  EXPECT_EQ(
      allow,
      (std::vector<std::string>{
          "*.example.org:8443 <- u.toml:5", "docs.example.com <- u.toml:11",
          "cli.example.net <- --allow-domain", "registry.npmjs.org <- preset npm (u.toml:8)",
          "registry.yarnpkg.com <- preset npm (u.toml:8)", "pypi.org <- preset pypi (u.toml:13)",
          "files.pythonhosted.org <- preset pypi (u.toml:13)",
          "crates.io <- preset crates (--allow-preset)",
          "index.crates.io <- preset crates (--allow-preset)",
          "static.crates.io <- preset crates (--allow-preset)"}));
  EXPECT_EQ(exec->presets, (std::vector<std::string>{"npm", "pypi", "crates"}));
  ASSERT_EQ(exec->deny.size(), 2u);
  EXPECT_EQ(exec->deny[1].source, "u.toml:12");
  // The flag's mapping of api.test replaces the policy's.
  ASSERT_EQ(exec->resolve.size(), 1u);
  EXPECT_EQ(exec->resolve[0].addresses, std::vector<std::string>{"127.0.0.2"});
  EXPECT_EQ(exec->resolve[0].source, "--resolve");
  // The rules decide as the proxy will.
  EXPECT_TRUE(DecideName(*exec, *ParseEgressHost("files.pythonhosted.org"), 443).allowed);
  EXPECT_FALSE(DecideName(*exec, *ParseEgressHost("x.ads.example.com"), 443).allowed);
  EXPECT_FALSE(DecideName(*global, *ParseEgressHost("pypi.org"), 443).allowed);

  // The canonical form (and so the recorded policy hash) carries the egress keys.
  const Json canonical = Json::parse(p.CanonicalJson());
  EXPECT_EQ(canonical["network"]["presets"], Json::array({"npm"}));
  EXPECT_EQ(canonical["tools"]["exec"]["presets"], Json::array({"pypi"}));
}

TEST(PolicyEgress, AProjectFileCanOnlyNarrowEgress) {
  const std::string user =
      "[network]\n"
      "mode = \"proxy\"\n"
      "allow_domains = [\"a.example.com\", \"b.example.com\"]\n"
      "presets = [\"npm\", \"pypi\"]\n"
      "resolve = [\"api.test=127.0.0.1\"]\n"
      "[tools.exec]\n"
      "allow_domains = [\"c.example.com\"]\n";
  Policy p;
  ASSERT_TRUE(ApplyPolicyText(p, user, "user.toml", false));
  ASSERT_TRUE(ApplyPolicyText(p,
                              "[network]\n"
                              "allow_domains = [\"!b.example.com\", \"attacker.example\"]\n"
                              "presets = [\"!pypi\", \"crates\"]\n"
                              "deny_domains = [\"*.tracker.example\"]\n"
                              "resolve = [\"registry.npmjs.org=127.0.0.1\"]\n"
                              "[tools.exec]\n"
                              "allow_domains = [\"!c.example.com\", \"d.example.com\"]\n"
                              "deny_domains = [\"a.example.com\"]\n"
                              "presets = [\"npm\"]\n",
                              "project.toml", true));
  EXPECT_EQ(p.egress.allow_domains, std::vector<std::string>{"a.example.com"});
  EXPECT_EQ(p.egress.presets, std::vector<std::string>{"npm"});
  EXPECT_EQ(p.egress.deny_domains, std::vector<std::string>{"*.tracker.example"});
  EXPECT_EQ(p.entry_provenance["network.deny_domains"]["*.tracker.example"], "project.toml:4");
  EXPECT_EQ(p.egress.resolve, std::vector<std::string>{"api.test=127.0.0.1"});
  EXPECT_TRUE(p.tools["exec"].allow_domains.empty());
  EXPECT_TRUE(p.tools["exec"].presets.empty());
  EXPECT_EQ(p.tools["exec"].deny_domains, std::vector<std::string>{"a.example.com"});
  const std::vector<std::string> needles = {
      "project.toml:2: a project file cannot add \"attacker.example\" to network.allow_domains",
      "project.toml:3: a project file cannot add \"crates\" to network.presets",
      "project.toml:5: a project file cannot set network.resolve (it could point a name at the "
      "host's own services); \"registry.npmjs.org=127.0.0.1\" ignored",
      "project.toml:7: a project file cannot add \"d.example.com\" to tools.exec.allow_domains",
      "project.toml:9: a project file cannot add \"npm\" to tools.exec.presets",
  };
  std::string all;
  for (const auto& n : p.notes) all += n + "\n";
  for (const auto& n : needles) EXPECT_NE(all.find(n), std::string::npos) << n << "\n" << all;
  // The tool's deny rule beats the global allow rule for exec only.
  const EgressPolicy exec = EgressFor(p, "exec");
  EXPECT_FALSE(DecideName(exec, *ParseEgressHost("a.example.com"), 443).allowed);
  EXPECT_TRUE(DecideName(EgressFor(p, "call"), *ParseEgressHost("a.example.com"), 443).allowed);

  // A project file cannot remove a deny rule, nor open the network to proxy from none.
  Policy q;
  ASSERT_TRUE(ApplyPolicyText(q, "[network]\ndeny_domains = [\"x.example\"]\n", "u.toml", false));
  ASSERT_TRUE(ApplyPolicyText(q, "[network]\nmode = \"proxy\"\ndeny_domains = [\"!x.example\"]\n",
                              "p.toml", true));
  EXPECT_EQ(q.network, NetworkMode::kNone);
  EXPECT_EQ(q.egress.deny_domains, std::vector<std::string>{"x.example"});
  ASSERT_EQ(q.notes.size(), 2u) << ::testing::PrintToString(q.notes);
  // From allow, proxy is a tightening a project may make.
  Policy r;
  ASSERT_TRUE(ApplyPolicyText(r, "[network]\nmode = \"allow\"\n", "u.toml", false));
  ASSERT_TRUE(ApplyPolicyText(r, "[network]\nmode = \"proxy\"\n", "p.toml", true));
  EXPECT_EQ(r.network, NetworkMode::kProxy);
  EXPECT_TRUE(r.notes.empty());
}

TEST(PolicyEgress, BadEntriesNameFileAndLine) {
  struct Case {
    std::string text, needle;
  };
  const Case cases[] = {
      {"[network]\nallow_domains = [\n  \"ok.example\",\n  \"a*.example.com\",\n]\n",
       "x.toml:4: network.allow_domains: domain rule \"a*.example.com\" has a * that is not a "
       "leading \"*.\""},
      {"[network]\nallow_domains = [\"*\"]\n", "x.toml:2: network.allow_domains: domain rule"},
      {"[network]\ndeny_domains = [\"example.com:99999\"]\n",
       "x.toml:2: network.deny_domains: domain rule \"example.com:99999\" has a port"},
      {"[network]\npresets = [\"maven\"]\n",
       "x.toml:2: network.presets entry \"maven\" is not a preset (known: \"npm\", \"pypi\", "
       "\"crates\")"},
      {"[network]\nresolve = [\"api.test\"]\n",
       "x.toml:2: network.resolve: resolve entry \"api.test\" has no ="},
      {"[network]\nresolve = [\"api.test=not-an-address\"]\n", "x.toml:2: network.resolve"},
      {"[network]\nallow_domains = \"example.com\"\n",
       "x.toml:2: network.allow_domains must be an array"},
      {"[tools.exec]\n\nallow_domains = [\"bad..name\"]\n",
       "x.toml:3: tools.exec.allow_domains: domain rule \"bad..name\" has an empty label"},
      {"[tools.exec]\npresets = [\"gems\"]\n", "x.toml:2: tools.exec.presets entry \"gems\""},
      {"[network]\nmode = \"proxied\"\n", "x.toml:2: network.mode must be one of"},
  };
  for (const auto& c : cases) {
    for (bool project : {false, true}) {  // a project file's bad entry is an error too
      Policy p;
      auto st = ApplyPolicyText(p, c.text, "x.toml", project);
      ASSERT_FALSE(st) << c.text;
      EXPECT_EQ(st.error().code, Code::kInvalidInput);
      EXPECT_NE(st.error().message.find(c.needle), std::string::npos)
          << c.text << " -> " << st.error().message;
    }
  }
}

TEST(PolicyEgress, ShowListsDomainsPresetsAndResolveWithSources) {
  Policy p;
  ASSERT_TRUE(ApplyPolicyText(p,
                              "[network]\nmode = \"proxy\"\nallow_domains = [\"api.example.com\"]\n"
                              "presets = [\"pypi\"]\nresolve = [\"api.test=127.0.0.1\"]\n"
                              "[tools.exec]\ndeny_domains = [\"bad.example.com\"]\n",
                              "u.toml", false));
  const std::string text = PolicyShowText(p);
  for (const std::string& line : std::vector<std::string>{
           "network.mode = \"proxy\"    # u.toml:2",
           "network.allow_domains = [    # last set by u.toml:3",
           "  \"api.example.com\",    # u.toml:3",
           "network.presets = [    # last set by u.toml:4",
           "  \"pypi\",    # u.toml:4",
           "# preset pypi: the Python Package Index (pip, uv); cordon's own pip and uv caches; "
           "allows pypi.org, files.pythonhosted.org; cache " +
               PresetCacheDir("pypi") + " (PIP_CACHE_DIR, UV_CACHE_DIR)",
           "  \"api.test=127.0.0.1\",    # u.toml:5",
           "tools.exec.deny_domains = [    # last set by u.toml:7",
           "  \"bad.example.com\",    # u.toml:7",
       }) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  }
  const Json j = PolicyShowJson(p);
  EXPECT_EQ(j["egress"]["mode"], "proxy");
  EXPECT_EQ(j["egress"]["allow_domains"][0],
            (Json{{"rule", "api.example.com"}, {"from", "u.toml:3"}}));
  EXPECT_EQ(j["egress"]["allow_domains"][1],
            (Json{{"rule", "pypi.org"}, {"from", "preset pypi (u.toml:4)"}}));
  // cordon's own cache, never ~/.cache/pip, and the variables that point pip and uv there.
  const std::string cache = PresetCacheDir("pypi");
  EXPECT_EQ(
      j["egress"]["presets"][0]["cache"],
      (Json{{"path", cache},
            {"variables", {{"PIP_CACHE_DIR", cache + "/pip"}, {"UV_CACHE_DIR", cache + "/uv"}}}}));
  EXPECT_EQ(j["egress"]["presets"][0]["from"], "u.toml:4");
  EXPECT_EQ(j["egress"]["resolve"][0]["from"], "u.toml:5");
  EXPECT_EQ(j["egress_tools"]["exec"]["deny_domains"][0]["from"], "u.toml:7");
  EXPECT_EQ(j["entries"]["tools.exec.deny_domains"][0]["value"], "bad.example.com");
}

TEST(Policy, ShippedDefaultKeepsItsMeaning) {
  PolicySources s;
  s.dirs = {testing::ShippedPolicyDir()};
  auto p = LoadPolicy(s);
  ASSERT_TRUE(p) << p.error().message;
  // It restates the built-in scopes, so the new merge rule changes nothing and says nothing.
  EXPECT_TRUE(p->notes.empty()) << ::testing::PrintToString(p->notes);
  EXPECT_EQ(p->filesystem.write, std::vector<std::string>{"${WORKSPACE}"});
  EXPECT_EQ(p->filesystem.read.front(), "/usr");
  // Issue 32: the 15 credential stores joined the 16 entries of before.
  EXPECT_EQ(p->filesystem.deny.size(), 31u);
  EXPECT_EQ(p->seccomp_deny.front(), "ptrace");
  EXPECT_EQ(p->audit_fsync, FsyncMode::kPerCall);
  // Issue 21: run_shell gets 10 minutes, and the CPU to match.
  EXPECT_EQ(p->LimitsFor("run_shell").timeout_secs, 600);
  EXPECT_EQ(p->LimitsFor("read_url").timeout_secs, 30);
  EXPECT_EQ(p->limits.cpu_secs, 2400);
  // The sha256 of the effective policy: the one recorded before lists merged, changed only by
  // the limit added since (limits.max_pending_output_bytes, issue 19) and run_shell's time
  // (tools.run_shell.timeout_secs and limits.cpu_secs, issue 21), and the scope session:operate
  // (granted, issue 23), and the credential stores on the deny list and read by value
  // ([redact] credential_stores, issue 32), and the words the context rules name ([redact]
  // secret_words, issue 32 part 2), and the shipped approval rules (policies.d/20-approvals.toml,
  // issue 34).
  EXPECT_EQ(p->redact_credential_stores.size(), 21u);
  EXPECT_EQ(p->redact_secret_words.size(), 12u);
  EXPECT_EQ(p->approval_rules.size(), 17u);
  EXPECT_EQ(p->Sha256(), "64682c3075f242236e6e1547fb171ee20f0f22004ad9510a4a2da7b1ad32012c");
}

template <typename E, std::size_t N>
void ExpectRoundTrip(const EnumName<E> (&table)[N], int count, std::string_view what) {
  ASSERT_EQ(static_cast<int>(N), count) << what << ": every enumerator has a name";
  for (int i = 0; i < count; ++i) {
    const E e = static_cast<E>(i);
    auto back = ParseName(table, Name(table, e), what);
    ASSERT_TRUE(back) << what;
    EXPECT_EQ(*back, e) << what;
  }
  auto bad = ParseName(table, "bogus", what);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Code::kInvalidInput);
  EXPECT_NE(bad.error().message.find(std::string(what) + " must be one of \""), std::string::npos);
}

TEST(PolicyEnums, NameTablesRoundTrip) {
  ExpectRoundTrip(kFsyncModeNames, 3, "audit.fsync");
  ExpectRoundTrip(kNetworkModeNames, 4, "network mode");
  EXPECT_EQ(*ParseNetworkMode("proxy"), NetworkMode::kProxy);
  // none > loopback > proxy > allow
  EXPECT_GT(NetworkStrictness(NetworkMode::kNone), NetworkStrictness(NetworkMode::kLoopback));
  EXPECT_GT(NetworkStrictness(NetworkMode::kLoopback), NetworkStrictness(NetworkMode::kProxy));
  EXPECT_GT(NetworkStrictness(NetworkMode::kProxy), NetworkStrictness(NetworkMode::kAllow));
  ExpectRoundTrip(kPolicyLayerNames, 5, "policy layer");
  EXPECT_EQ(NetworkModeName(NetworkMode::kLoopback), "loopback");
  EXPECT_EQ(*ParseNetworkMode("allow"), NetworkMode::kAllow);
  EXPECT_EQ(Json(PolicyLayer::kProject), "project");
  EXPECT_TRUE(AtLeastAsStrict(FsyncMode::kAlways, FsyncMode::kPerCall));
  EXPECT_FALSE(AtLeastAsStrict(FsyncMode::kNever, FsyncMode::kPerCall));
}

TEST(PolicyEnums, FsyncAndLayersFromFiles) {
  struct Case {
    std::string base, project;
    FsyncMode want;
    std::size_t notes;
  };
  const Case cases[] = {
      {"per_call", "always", FsyncMode::kAlways, 0},
      {"per_call", "never", FsyncMode::kPerCall, 1},
      {"never", "per_call", FsyncMode::kPerCall, 0},
      {"always", "per_call", FsyncMode::kAlways, 1},
  };
  for (const auto& c : cases) {
    TempDir d;
    WriteFile(d / "pol/00.toml", "[audit]\nfsync = \"" + c.base + "\"\n");
    WriteFile(d / "cli.toml", "[limits]\npids = 10\n");
    WriteFile(d / "proj.toml", "[audit]\nfsync = \"" + c.project + "\"\n");
    PolicySources s;
    s.dirs = {d / "pol"};
    s.extra_files = {d / "cli.toml"};
    s.project_file = d / "proj.toml";
    auto p = LoadPolicy(s);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->audit_fsync, c.want) << c.base << " then " << c.project;
    EXPECT_EQ(p->notes.size(), c.notes) << c.base << " then " << c.project;
    ASSERT_EQ(p->files.size(), 3u);
    EXPECT_EQ(p->files[0].layer, PolicyLayer::kShipped);
    EXPECT_EQ(p->files[1].layer, PolicyLayer::kCli);
    EXPECT_EQ(p->files[2].layer, PolicyLayer::kProject);
  }
}

TEST(ProtectedPaths, PolicyKeysForMoreNamesAndTheWalkCap) {
  Policy p;
  EXPECT_EQ(p.max_scan_entries, kDefaultMaxScanEntries);
  ASSERT_TRUE(ApplyPolicyText(p,
                              "[filesystem]\nprotected_names = [\".tool-versions\"]\n"
                              "[sandbox]\nmax_scan_entries = 5000000\n",
                              "user.toml", false));
  EXPECT_EQ(p.filesystem.protected_names, std::vector<std::string>{".tool-versions"});
  EXPECT_EQ(p.max_scan_entries, 5000000);
  // A project file may lower the cap and add names, not raise the cap.
  ASSERT_TRUE(ApplyPolicyText(p, "[sandbox]\nmax_scan_entries = 9000000\n", "proj.toml", true));
  EXPECT_EQ(p.max_scan_entries, 5000000);
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes.back().find("cannot raise sandbox.max_scan_entries"), std::string::npos);
  // A name is one path component.
  Policy q;
  auto bad = ApplyPolicyText(q, "[filesystem]\nprotected_names = [\"a/b\"]\n", "x.toml", false);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("one file or directory name"), std::string::npos);
  // Policy examples see the extra names.
  EXPECT_TRUE(
      ApplyPolicyText(p, "[examples]\nprotected = [\"sub/.tool-versions\"]\n", "e.toml", false));
}

TEST(ProtectedPaths, Table) {
  for (const char* p :
       {".git/config", ".git/hooks", ".git/hooks/pre-commit", "vendor/x/.git/config",
        "a/.git/hooks/post-checkout", ".cordon", ".cordon/policy.toml", ".thndrs/mcp.toml",
        ".mcp.json", "sub/.mcp.json", ".vscode/tasks.json", ".claude/settings.json", ".bashrc",
        ".zshrc", ".profile", "x/.bash_profile", ".envrc", ".config/fish/config.fish",
        // Issue 9: auto-run configuration, at any depth.
        ".gitmodules", "sub/.gitmodules", ".devcontainer/devcontainer.json", "a/.idea/x.xml",
        ".cursor/rules", "sub/.vscode/settings.json", "sub/.envrc",
        // Issue 18: more editors and agents that run project configuration on open.
        ".devcontainer.json", "sub/.devcontainer.json", ".gemini/settings.json", ".zed/tasks.json",
        "a/.zed/settings.json", ".helix/languages.toml", ".nvim.lua", "sub/.nvimrc", ".exrc",
        ".vimrc", ".lazy.lua", ".aider.conf.yml"}) {
    EXPECT_TRUE(IsProtectedPath(p)) << p;
  }
  const std::vector<std::string> extra = {".tool-versions"};
  EXPECT_TRUE(IsProtectedPath("a/.tool-versions", extra));
  EXPECT_TRUE(IsProtectedPath(".tool-versions/x", extra));
  EXPECT_FALSE(IsProtectedPath("a/.tool-versions"));
  EXPECT_FALSE(IsProtectedPath("a/tool-versions", extra));
  for (const char* p : {"src/main.c",
                        ".git/objects/ab/cd",
                        ".git/HEAD",
                        ".git/refs/heads/main",
                        ".github/workflows/ci.yml",
                        "config",
                        "hooks/x",
                        "docs/profile.md",
                        ".gitconfig.example",
                        "cordon/x",
                        ".vscodeignore",
                        ".ideas/x",
                        ".gitmodules.bak",
                        ".cursorrules.md",
                        "gemini/x",
                        ".zedrc",
                        "helix/config.toml",
                        "nvim.lua",
                        ".nvim.lua.bak",
                        "docs/.exrc.md",
                        ".aider.chat.history.md",
                        ".aider.tags.cache.v3/x",
                        ".devcontainer.jsonc"}) {
    EXPECT_FALSE(IsProtectedPath(p)) << p;
  }
}

// The one definition of what may be written inside a git directory (policy/git_rules.h).
// A repository's minimum structure and the HEAD git reads (issue 33: rm .git/HEAD made host git
// fall through to a parent directory's repository).
TEST(GitRules, TheMinimumStructureAndAHeadGitReads) {
  for (const char* rel :
       {".git/HEAD", ".git/objects", ".git/refs", "sub/.git/HEAD", ".git/modules/lib/HEAD",
        ".git/modules/a/b/refs", ".git/worktrees/wt/HEAD"}) {
    EXPECT_TRUE(IsGitRepositoryStructure(rel)) << rel;
  }
  for (const char* rel :
       {".git/index", ".git/ORIG_HEAD", ".git/refs/heads/main", ".git/logs/HEAD", ".git/objects/ab",
        "HEAD", "src/HEAD", ".git", ".git/worktrees/wt/refs", ".git/modules/HEAD"}) {
    EXPECT_FALSE(IsGitRepositoryStructure(rel)) << rel;
  }
  EXPECT_TRUE(IsGitDirStructure("HEAD"));
  EXPECT_FALSE(IsGitDirStructure("config"));
  for (const char* head : {"ref: refs/heads/main\n", "ref: refs/heads/feat/x",
                           "0123456789abcdef0123456789abcdef01234567\n",
                           "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}) {
    EXPECT_TRUE(IsGitHeadContent(head)) << head;
  }
  for (const char* head :
       {"", "\n", "pwned\n", "ref: ../../x\n", "ref: refs/\n", "ref: refs/heads/a..b\n",
        "ref: refs/heads/a b\n", "0123456789ABCDEF0123456789abcdef01234567\n",
        "ref: refs/heads/x\n\n", "ref:refs/heads/x"}) {
    EXPECT_FALSE(IsGitHeadContent(head)) << ::testing::PrintToString(std::string(head));
  }
}

// What the file tools never write inside a `.git` (issue 33): git content, whose meaning is
// checked only when git writes it in a sandbox.
TEST(GitRules, GitContentIsEveryRefIndexHeadAndPackedRefs) {
  for (const char* p :
       {".git/refs/heads/main", ".git/refs/tags/v1", ".git/refs/heads/a/b.lock", ".git/HEAD",
        ".git/index", ".git/index.lock", ".git/packed-refs", "sub/.git/refs/remotes/o/m",
        ".git/modules/lib/refs/heads/x", ".git/modules/lib/HEAD", ".git/worktrees/w/index",
        ".git/logs/refs/heads/main"}) {
    EXPECT_TRUE(IsGitContentPath(p)) << p;
  }
  for (const char* p :
       {"refs/heads/main", "src/HEAD", "index", ".git", ".git/COMMIT_EDITMSG", ".git/ORIG_HEAD",
        ".git/objects/ab/cdef", ".git/logs/HEAD.txt", "docs/packed-refs.md"}) {
    EXPECT_FALSE(IsGitContentPath(p)) << p;
  }
}

TEST(GitRules, OnlyWhatACommitNeedsIsWritable) {
  for (const char* p :
       {"HEAD", "index", "index.lock", "HEAD.lock", "packed-refs", "packed-refs.lock", "ORIG_HEAD",
        "MERGE_HEAD", "CHERRY_PICK_HEAD", "REBASE_HEAD", "FETCH_HEAD", "AUTO_MERGE",
        "COMMIT_EDITMSG", "objects/ab/cdef", "objects/info/alternates", "objects/pack/x.pack",
        "refs/heads/main", "refs/heads/main.lock", "refs/stash", "logs/HEAD", "logs/refs/heads/x",
        "modules/sub/HEAD", "modules/sub/objects/ab/cd", "modules/a/modules/b/index",
        "worktrees/wt/HEAD", "worktrees/wt/index.lock",
        // git update-index --split-index (SHA-1 and SHA-256 repositories)
        "sharedindex.0123456789abcdef0123456789abcdef01234567",
        "sharedindex.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "modules/sub/sharedindex.0123456789abcdef0123456789abcdef01234567"}) {
    EXPECT_TRUE(IsGitWritable(p)) << p;
  }
  for (const char* p : {"",
                        "config",
                        "config.lock",
                        "config.worktree",
                        "commondir",
                        "gitdir",
                        "hooks",
                        "hooks/pre-commit",
                        "info/attributes",
                        "info/exclude",
                        "description",
                        "shallow",
                        "sharedindex.abc",
                        "sharedindex.0123456789ABCDEF0123456789abcdef01234567",
                        "sharedindex.0123456789abcdef0123456789abcdef012345678",
                        "sharedindex.0123456789abcdef0123456789abcdef01234567/x",
                        "sharedindex_abcdef",
                        "refs/../sharedindex.0123456789abcdef0123456789abcdef01234567/x",
                        "rebase-merge/done",
                        "modules/sub/config",
                        "modules/sub/hooks/x",
                        "modules/sub/commondir",
                        "modules/libs/objects/hooks/x",
                        "modules/a/refs/config",
                        "modules/libs/foo/config",
                        "modules/a/objects/config",
                        "modules/sub",
                        "worktrees/wt/commondir",
                        "worktrees/wt/gitdir",
                        "worktrees/wt/config.worktree",
                        "worktrees/wt",
                        "objects/../config",
                        "refs/../hooks/x",
                        "head",
                        "X_HEAD/y",
                        "lower_HEAD",
                        "HEAD/x"}) {
    EXPECT_FALSE(IsGitWritable(p)) << p;
  }
  // Relative to the workspace: any directory named .git, at any depth.
  EXPECT_TRUE(GitRuleAllowsWrite("src/main.c"));
  EXPECT_TRUE(GitRuleAllowsWrite(".git/HEAD"));
  EXPECT_TRUE(GitRuleAllowsWrite("vendor/lib/.git/objects/ab/cd"));
  EXPECT_TRUE(GitRuleAllowsWrite(".git"));  // .git itself: IsProtectedPath's concern
  EXPECT_FALSE(GitRuleAllowsWrite(".git/commondir"));
  EXPECT_FALSE(GitRuleAllowsWrite(".git/config"));
  EXPECT_FALSE(GitRuleAllowsWrite(".git/info/exclude"));
  EXPECT_FALSE(GitRuleAllowsWrite("vendor/lib/.git/hooks/pre-commit"));
  EXPECT_FALSE(GitRuleAllowsWrite(".git/modules/sub/config"));
  EXPECT_FALSE(GitRuleAllowsWrite(".git/worktrees/wt/commondir"));
  EXPECT_FALSE(GitRuleAllowsWrite("./.git/commondir"));
}

// git update-index --split-index, run for real: every file it leaves at the top of the git
// directory is one the rules let through, so the host index never names a file kept private.
TEST(GitRules, ARealSplitIndexWritesOnlyNamesTheRulesSync) {
  if (::access("/usr/bin/git", X_OK) != 0) GTEST_SKIP() << "SKIPPED: /usr/bin/git is missing";
  TempDir d;
  const std::vector<std::string> env = {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (d / "home")};
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", d.path()});
    auto r = testing::Run(args, env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  git({"init", "-q"});
  WriteFile(d / "a.txt", "a\n");
  git({"add", "a.txt"});
  std::set<std::string> before;
  for (const auto& e : std::filesystem::directory_iterator(d / ".git"))
    before.insert(e.path().filename().string());
  git({"update-index", "--split-index"});
  std::vector<std::string> shared;
  for (const auto& e : std::filesystem::directory_iterator(d / ".git")) {
    const std::string n = e.path().filename().string();
    if (n.rfind("sharedindex", 0) == 0) shared.push_back(n);
    if (before.count(n) == 0 || n == "index") {
      EXPECT_TRUE(IsGitWritable(n)) << n << " is written by split-index and must reach the host";
    }
  }
  ASSERT_EQ(shared.size(), 1u) << "git wrote no shared index";
  EXPECT_TRUE(IsGitSyncedFile(shared[0])) << shared[0];
}

// core.hooksPath and the other keys git executes from, read from config text (issue 18).
TEST(GitConfigPaths, Table) {
  struct Case {
    const char* name;
    std::string config;
    std::string repo;  // the repository's worktree, relative to the workspace
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"husky 4-8", "[core]\n\thooksPath = .husky\n", "", {".husky"}},
      {"husky 9 runs .husky/<hook> from .husky/_",
       "[core]\n\thooksPath = .husky/_\n",
       "",
       {".husky", ".husky/_"}},
      {"lefthook with a hooks dir",
       "[core]\n  hookspath = .lefthook/hooks\n",
       "",
       {".lefthook/hooks"}},
      {"nested repository",
       "[core]\nhooksPath = ./githooks/\n",
       "vendor/lib",
       {"vendor/lib/githooks"}},
      {"section and key are case-insensitive", "[CORE]\nHOOKSPATH = Hooks\n", "", {"Hooks"}},
      {"legacy [section.sub] and a key on the header line",
       "[core] hooksPath = h1\n[filter.lfs]\nclean = ./bin/clean %f\n",
       "",
       {"bin/clean", "h1"}},
      {"quoted, escaped, continued",
       "[core]\nhooksPath = \"my \\\"hooks\\\"\" ; comment\n"
       "editor = ./scripts/ed\\\nit.sh --wait\n",
       "",
       {"my \"hooks\"", "scripts/edit.sh"}},
      {"comments are not values", "# [core]\n; hooksPath = x\n[core]\n#hooksPath = y\n", "", {}},
      {"fsmonitor path, not a boolean",
       "[core]\nfsmonitor = .git/hooks/fsmonitor-watchman\n[core]\nfsmonitor = true\n",
       "",
       {".git/hooks/fsmonitor-watchman"}},
      {"fsmonitor command", "[core]\nfsmonitor = tools/watch.sh --x\n", "", {"tools/watch.sh"}},
      {"include paths resolve against the git dir",
       "[include]\npath = ../shared.gitconfig\n[includeIf \"gitdir:~/work/\"]\n\tpath = local.cfg\n"
       "[include]\npath = ~/.gitconfig\n",
       "",
       {".git/local.cfg", "shared.gitconfig"}},
      {"include in a nested repository", "[include]\npath = ../../x.cfg\n", "a/b", {"a/x.cfg"}},
      {"bare command names are PATH lookups",
       "[core]\npager = less -R\neditor = vim\n"
       "[diff]\nexternal = difft\n[filter \"lfs\"]\nprocess = git-lfs filter-process\n",
       "",
       {}},
      {"command-valued keys",
       "[core]\nsshCommand = ./ssh-wrap -v\naskPass = bin/askpass\ngitProxy = ./proxy for x\n"
       "[diff \"img\"]\ntextconv = tools/exif\ncommand = ./d.sh\n"
       "[merge \"ours\"]\ndriver = ./m.sh %O %A %B\n[gpg]\nprogram = ./gpg2\n"
       "[gpg \"ssh\"]\nprogram = keys/ssh-sign\n[sequence]\neditor = ./seq\n"
       "[uploadpack]\npackObjectsHook = ./pack\n[credential]\nhelper = !./cred get\n"
       "[credential \"https://x\"]\nhelper = store\n",
       "",
       {"bin/askpass", "cred", "d.sh", "gpg2", "keys/ssh-sign", "m.sh", "pack", "proxy", "seq",
        "ssh-wrap", "tools/exif"}},
      {"aliases starting with ! only",
       "[alias]\nst = status\nx = !./scripts/x.sh && ./y\n"
       "lint = \"!f() { ./tools/lint; }; f\"\n",
       "",
       {"scripts/x.sh", "tools/lint", "y"}},
      {"interpreters run their script",
       "[alias]\na = !node scripts/a.js\nb = !python3 -m http.server\n"
       "c = !sh -c './c.sh arg'\nd = !FOO=1 bash -e d.sh\ne = !env -i X=1 ./e\n"
       "f = !python3 -c 'print(1)'\n",
       "",
       {"c.sh", "d.sh", "e", "scripts/a.js"}},
      {"submodule update commands", "[submodule \"s\"]\nupdate = !./up.sh\n", "", {"up.sh"}},
      {"pager.<cmd>", "[pager]\nlog = ./pg\ndiff = false\n", "", {"pg"}},
      {"nothing leaves the workspace",
       "[core]\nhooksPath = ../../outside\neditor = ../../../ed\nfsmonitor = /usr/bin/fsm\n"
       "[include]\npath = ../../../etc/x\n[alias]\nx = !$HOME/bin/x\n",
       "sub",
       {}},
      {"an absolute path inside the workspace",
       "[core]\nhooksPath = /ws/root/.githooks\n",
       "",
       {".githooks"}},
      {"a line git refuses hides nothing after it",
       "[core]\nbad = \"unterminated\nhooksPath = h\neditor = ./e\\q\n[core\nx = ./y\n"
       "[filter \"a\"]\nclean = ./ok\n",
       "",
       {"h", "ok"}},
      {"CRLF", "[core]\r\n\thooksPath = .husky\r\n", "", {".husky"}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> want = c.want;
    std::sort(want.begin(), want.end());
    std::vector<std::string> got;
    for (auto& e : GitConfigExecutedEntries(
             c.config, {.worktree = c.repo,
                       .config_dir = c.repo.empty() ? ".git" : c.repo + "/.git",
                       .workspace_abs = "/ws/root"})) {
      got.push_back(e.path);
    }
    EXPECT_EQ(got, want) << c.name;
  }
  // A hooks directory that is the worktree itself: its hook files, never the whole tree.
  const auto hooks_at_root = GitConfigExecutedPaths("[core]\nhooksPath = .\n", "");
  EXPECT_NE(std::find(hooks_at_root.begin(), hooks_at_root.end(), "pre-commit"),
            hooks_at_root.end());
  EXPECT_EQ(std::find(hooks_at_root.begin(), hooks_at_root.end(), ""), hooks_at_root.end());
  auto in_sub = GitConfigExecutedPaths("[core]\nhooksPath = .\n", "sub");
  EXPECT_NE(std::find(in_sub.begin(), in_sub.end(), "sub/post-checkout"), in_sub.end());
  EXPECT_EQ(std::find(in_sub.begin(), in_sub.end(), "sub"), in_sub.end());
  // The key that named a path, as the documentation spells it: for the refusal's message.
  auto e = GitConfigExecutedEntries("[CORE]\nhookspath = .husky\n[diff \"x\"]\ntextconv = ./t\n",
                                    {.worktree = "", .config_dir = ".git"});
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].key, "core.hooksPath");
  EXPECT_EQ(e[1].key, "diff.x.textconv");
  const GitConfigPath* hit = RepoExecutedPathOf(".husky/pre-commit", e);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->key, "core.hooksPath");
  EXPECT_EQ(RepoExecutedPathOf(".husky-notes", e), nullptr);
  EXPECT_EQ(RepoExecutedPathOf("src/.husky", e), nullptr);
  const std::vector<std::string> paths = {".husky", "a/b"};
  EXPECT_TRUE(IsUnderAnyPath("a/b/c", paths));
  EXPECT_TRUE(IsUnderAnyPath(".husky", paths));
  EXPECT_FALSE(IsUnderAnyPath("a/bc", paths));
  EXPECT_FALSE(IsUnderAnyPath("a", paths));
}

// Hostile config text: bounded, never throws, never reads past the end.
TEST(GitConfigPaths, HostileInput) {
  std::string huge = "[core]\nhooksPath = ";
  huge.append(8u << 20, 'a');
  EXPECT_TRUE(GitConfigExecutedPaths(huge, "").empty()) << "a path longer than PATH_MAX";
  std::string many = "[alias]\n";
  for (int i = 0; i < 100000; ++i)
    many += "a" + std::to_string(i) + " = !./s" + std::to_string(i % 7) + "\n";
  EXPECT_EQ(GitConfigExecutedPaths(many, "").size(), 7u);
  static constexpr char kNul[] =
      "[core]\nhooksPath = a\0b\n[core]\neditor = ./e\0x\n[co\0re]\nx=1\n";
  const std::string nul(kNul, sizeof kNul - 1);
  EXPECT_TRUE(GitConfigExecutedPaths(nul, "").empty());
  for (const std::string& t : std::vector<std::string>{
           "[", "[core", "[core \"", "[core \"x\\", "[core]\nhooksPath = \"",
           "[core]\nhooksPath = x\\", "[core]\nhooksPath", "\"\\", "[core]\n=", "[a \"b\"]]\n",
           std::string(1, '\0'), "[core]\nhooksPath=\"\\\n"}) {
    EXPECT_TRUE(GitConfigExecutedPaths(t, "").empty()) << t;
  }
  // Deep `sh -c` nesting and a long chain of quotes stay bounded.
  std::string deep = "[alias]\nx = !";
  for (int i = 0; i < 2000; ++i) deep += "sh -c ";
  deep += "./x\n";
  EXPECT_TRUE(GitConfigExecutedPaths(deep, "").empty());
  std::string quotes = "[alias]\nx = !";
  quotes.append(1u << 20, '"');
  EXPECT_TRUE(GitConfigExecutedPaths(quotes, "").empty());
}

}  // namespace
}  // namespace cordon
