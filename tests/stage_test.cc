// The staged commit (workspace/stage.h): the rules table-driven without a kernel, then ListUpper,
// PlanCommit and ApplyCommit against a real overlayfs upper layer, a live overlay with a ledger,
// a host directory swapped for a symlink under the commit, and a commit interrupted midway.
#include "workspace/stage.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>
#include <thread>

#include "core/unique_fd.h"
#include "test_util.h"
#include "workspace/stage_fs.h"
#include "workspace/staging.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// A stage carries its rules (recovery decides by them): every field goes out and comes back, the
// bytes of names that are not UTF-8 included; anything else (torn, another shape) is refused.
TEST(CommitRulesJson, EveryFieldComesBackExactly) {
  CommitRules rules;
  rules.extra_protected = {"deploy.cfg", std::string("bad\xff", 4)};
  rules.protected_from = {{"deploy.cfg", "/ws/.cordon/policy.toml:2"}};
  rules.repo_protected = {".husky"};
  rules.git_dirs = {"fixture.git"};
  rules.new_git_dirs = {"data"};
  rules.masked = {"secret/key"};
  rules.xattr_allow = {"user.checksum.sha256", "user.myapp.*"};
  const std::string text = CommitRulesJson(rules).dump();
  auto back = CommitRulesFromJson(Json::parse(text));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->extra_protected, rules.extra_protected);
  EXPECT_EQ(back->protected_from, rules.protected_from);
  EXPECT_EQ(back->repo_protected, rules.repo_protected);
  EXPECT_EQ(back->git_dirs, rules.git_dirs);
  EXPECT_EQ(back->new_git_dirs, rules.new_git_dirs);
  EXPECT_EQ(back->masked, rules.masked);
  EXPECT_EQ(back->xattr_allow, rules.xattr_allow);
  // A stage made before xattr_allow existed is recovered by its six fields: it installs none.
  const char* six = R"({"extra_protected":[],"protected_from":[],"repo_protected":[],)"
                    R"("git_dirs":[],"new_git_dirs":[],"masked":["m"]})";
  auto old = CommitRulesFromJson(Json::parse(six));
  ASSERT_TRUE(old) << old.error().message;
  EXPECT_EQ(old->masked, std::vector<std::string>{"m"});
  EXPECT_TRUE(old->xattr_allow.empty());
  for (const char* bad : {"null", "{}", "[]", R"({"extra_protected": []})",
                          R"({"extra_protected":[{"hex":"zz"}],"protected_from":[],)"
                          R"("repo_protected":[],"git_dirs":[],"new_git_dirs":[],"masked":[]})",
                          R"({"extra_protected":[],"protected_from":[],"repo_protected":[],)"
                          R"("git_dirs":[],"new_git_dirs":[],"masked":[],"xattr_allow":"x"})",
                          R"({"extra_protected":[],"protected_from":[],"repo_protected":[],)"
                          R"("git_dirs":[],"new_git_dirs":[],"masked":[],"other":[]})"}) {
    EXPECT_FALSE(CommitRulesFromJson(Json::parse(bad))) << bad;
  }
}

UpperEntry Entry(std::string rel, UpperKind kind, HostKind host = HostKind::kMissing,
                 std::uint32_t mode = 0, bool opaque = false, std::uint32_t host_mode = 0) {
  UpperEntry e;
  e.rel = std::move(rel);
  e.kind = kind;
  e.host = host;
  e.opaque = opaque;
  if (mode == 0) {
    mode = kind == UpperKind::kDir       ? (S_IFDIR | 0755)
           : kind == UpperKind::kSymlink ? (S_IFLNK | 0777)
           : kind == UpperKind::kFile    ? (S_IFREG | 0644)
                                         : S_IFIFO | 0644;
  }
  e.mode = mode;
  e.host_sig.mode = host_mode != 0 ? host_mode : mode;
  return e;
}

struct Want {
  CommitAction action;
  std::string reason;
  bool opaque = false;
};

TEST(PlanCommit, EveryRuleDecidesItsEntries) {
  using K = UpperKind;
  using H = HostKind;
  CommitRules rules;
  rules.extra_protected = {"secret.cfg"};
  rules.repo_protected = {".husky"};
  const std::vector<std::pair<UpperEntry, Want>> table = {
      {Entry("a.txt", K::kFile), {CommitAction::kInstall, ""}},
      {Entry("mod.txt", K::kFile, H::kFile), {CommitAction::kInstall, ""}},
      {Entry("link", K::kSymlink), {CommitAction::kInstall, ""}},
      {Entry(".envrc", K::kFile), {CommitAction::kRefuse, "protected_path"}},
      {Entry(".vscode", K::kDir), {CommitAction::kRefuse, "protected_path"}},
      {Entry(".vscode/tasks.json", K::kFile), {CommitAction::kRefuse, "below_refused"}},
      {Entry("d/secret.cfg", K::kFile), {CommitAction::kRefuse, "protected_path"}},
      // Deleting what is protected is refused like writing it.
      {Entry(".idea", K::kWhiteout, H::kDir), {CommitAction::kRefuse, "protected_path"}},
      {Entry(".git", K::kDir, H::kDir), {CommitAction::kKeepDir, ""}},
      {Entry(".git/config", K::kFile, H::kFile), {CommitAction::kRefuse, "protected_path"}},
      {Entry(".git/hooks", K::kWhiteout, H::kDir), {CommitAction::kRefuse, "protected_path"}},
      {Entry(".git/description", K::kFile, H::kFile), {CommitAction::kRefuse, "git_metadata"}},
      {Entry(".git/info", K::kDir), {CommitAction::kRefuse, "git_metadata"}},
      {Entry(".git/info/exclude", K::kFile), {CommitAction::kRefuse, "below_refused"}},
      {Entry(".git/logs", K::kDir), {CommitAction::kMkdir, ""}},
      {Entry(".git/logs/HEAD", K::kFile), {CommitAction::kInstall, ""}},
      {Entry(".git/objects", K::kDir, H::kDir), {CommitAction::kKeepDir, ""}},
      {Entry(".git/objects/ab", K::kDir), {CommitAction::kMkdir, ""}},
      {Entry(".git/objects/ab/cdef", K::kFile), {CommitAction::kInstall, ""}},
      {Entry(".git/index", K::kWhiteout, H::kFile), {CommitAction::kDelete, ""}},
      {Entry(".git/shallow", K::kWhiteout, H::kFile), {CommitAction::kRefuse, "git_metadata"}},
      // A nested repository the host does not have, and one it has.
      {Entry("sub", K::kDir), {CommitAction::kMkdir, ""}},
      {Entry("sub/.git", K::kDir), {CommitAction::kRefuse, "new_git_dir"}},
      {Entry("sub/.git/HEAD", K::kFile), {CommitAction::kRefuse, "below_refused"}},
      {Entry("sub/.git/objects", K::kDir), {CommitAction::kRefuse, "below_refused"}},
      {Entry("sub/.git/objects/x", K::kFile), {CommitAction::kRefuse, "below_refused"}},
      {Entry("old", K::kDir, H::kDir), {CommitAction::kKeepDir, ""}},
      {Entry("old/.git", K::kDir, H::kDir), {CommitAction::kKeepDir, ""}},
      {Entry("old/.git/config", K::kFile, H::kFile), {CommitAction::kRefuse, "protected_path"}},
      {Entry("old/.git/refs", K::kDir, H::kDir), {CommitAction::kKeepDir, ""}},
      {Entry("old/.git/refs/heads", K::kDir, H::kDir), {CommitAction::kKeepDir, ""}},
      {Entry("old/.git/refs/heads/main", K::kFile, H::kFile), {CommitAction::kInstall, ""}},
      // rm -rf .git && git init in a repository the host has: the overlay shows it opaque.
      {Entry("re/.git", K::kDir, H::kDir, 0, true), {CommitAction::kRefuse, "new_git_dir"}},
      {Entry("re/.git/HEAD", K::kFile), {CommitAction::kRefuse, "below_refused"}},
      {Entry("wt/.git", K::kFile, H::kFile), {CommitAction::kRefuse, "git_metadata"}},
      {Entry("new/.git", K::kFile), {CommitAction::kRefuse, "new_git_dir"}},
      {Entry("gone/.git", K::kWhiteout, H::kDir), {CommitAction::kRefuse, "git_metadata"}},
      {Entry("HEAD", K::kFile), {CommitAction::kRefuse, "git_metadata"}},
      {Entry("bare/commondir", K::kFile), {CommitAction::kRefuse, "git_metadata"}},
      {Entry(".husky", K::kDir, H::kDir), {CommitAction::kRefuse, "repo_executes"}},
      {Entry(".husky/pre-commit", K::kFile), {CommitAction::kRefuse, "below_refused"}},
      {Entry(".husky2", K::kFile), {CommitAction::kInstall, ""}},
      {Entry("fifo", K::kOther), {CommitAction::kRefuse, "special_file"}},
      {Entry("suid", K::kFile, H::kMissing, S_IFREG | 04755),
       {CommitAction::kRefuse, "setid_bits"}},
      {Entry("sgid", K::kFile, H::kFile, S_IFREG | 02755), {CommitAction::kRefuse, "setid_bits"}},
      {Entry("sgid_dir", K::kDir, H::kMissing, S_IFDIR | 02755), {CommitAction::kMkdir, ""}},
      {Entry("chm", K::kDir, H::kDir, S_IFDIR | 0700, false, S_IFDIR | 0755),
       {CommitAction::kChmod, ""}},
      {Entry("opq", K::kDir, H::kDir, 0, true), {CommitAction::kKeepDir, "", true}},
      {Entry("opqnew", K::kDir, H::kMissing, 0, true), {CommitAction::kMkdir, "", true}},
      {Entry("was_file", K::kDir, H::kFile, 0, true), {CommitAction::kMkdir, "", true}},
      {Entry("was_file/x", K::kFile), {CommitAction::kInstall, ""}},
      {Entry("changed", K::kDir, H::kSymlink), {CommitAction::kRefuse, "not_a_directory"}},
      {Entry("changed/x", K::kFile), {CommitAction::kRefuse, "below_refused"}},
      {Entry("deleted.txt", K::kWhiteout, H::kFile), {CommitAction::kDelete, ""}},
      {Entry("never.txt", K::kWhiteout), {CommitAction::kDelete, ""}},
  };
  std::vector<UpperEntry> listing;
  for (const auto& [e, w] : table) listing.push_back(e);
  const std::vector<CommitDecision> got = PlanCommit(listing, rules);
  ASSERT_EQ(got.size(), table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const Want& w = table[i].second;
    SCOPED_TRACE(table[i].first.rel);
    EXPECT_EQ(got[i].rel, table[i].first.rel);
    EXPECT_EQ(got[i].entry, i);
    EXPECT_EQ(static_cast<int>(got[i].action), static_cast<int>(w.action));
    EXPECT_EQ(got[i].reason, w.reason);
    EXPECT_EQ(got[i].opaque, w.opaque);
  }
}

TEST(PlanCommit, BelowARefusedDirectoryDoesNotDependOnListingOrder) {
  // Siblings between a refused directory and its children do not clear the refusal.
  std::vector<UpperEntry> listing = {Entry(".vscode", UpperKind::kDir),
                                     Entry("a", UpperKind::kFile),
                                     Entry(".vscode/x/y", UpperKind::kFile)};
  const auto got = PlanCommit(listing, {});
  EXPECT_EQ(got[2].action, CommitAction::kRefuse);
  EXPECT_EQ(got[2].reason, "below_refused");
  EXPECT_EQ(got[1].action, CommitAction::kInstall);
}

// The path rules of [[approvals.rules]]: an ask holds (the action is what approval installs),
// a deny refuses, a later layer's allow lets through only when no stricter rule matches, and
// what is below a held directory is held with it. The rules travel with the stage.
TEST(PlanCommit, ApprovalPathRulesHoldOrRefuseWhatTheyMatch) {
  using K = UpperKind;
  using H = HostKind;
  CommitRules rules;
  auto rule = [](std::string id, ApprovalDecision d, std::string path) {
    ApprovalRule r;
    r.id = std::move(id);
    r.decision = d;
    r.matcher = ApprovalMatcher::kPath;
    r.pattern = std::move(path);
    r.where = "t.toml:1";
    return r;
  };
  rules.approval_paths = {rule("ask-deploy", ApprovalDecision::kAsk, "**/deploy/**"),
                          rule("no-secrets", ApprovalDecision::kDeny, "secrets/**"),
                          rule("ask-ci", ApprovalDecision::kAsk, ".github/workflows/**")};
  std::vector<UpperEntry> listing = {
      Entry(".github", K::kDir, H::kDir),
      Entry(".github/workflows", K::kDir),  // new, and no match itself: made (empty)
      Entry(".github/workflows/ci.yml", K::kFile),
      Entry("deploy", K::kDir, H::kDir),  // only copied up: no change of its own
      Entry("deploy/a.yaml", K::kFile),
      Entry("deploy/gone.yaml", K::kWhiteout, H::kFile),
      Entry("secrets", K::kDir),
      Entry("secrets/k", K::kFile),
      Entry("src/a.c", K::kFile),
      Entry("vendor", K::kWhiteout, H::kDir)};  // below it a held path could be
  listing.back().below_rule = 0;
  const auto got = PlanCommit(listing, rules);
  ASSERT_EQ(got.size(), listing.size());
  const std::vector<std::pair<std::string, std::string>> held = {{"", ""},
                                                                 {"", ""},
                                                                 {"ask-ci", "t.toml:1"},
                                                                 {"", ""},
                                                                 {"ask-deploy", "t.toml:1"},
                                                                 {"ask-deploy", "t.toml:1"},
                                                                 {"", ""},
                                                                 {"", ""},
                                                                 {"", ""},
                                                                 {"ask-deploy", "t.toml:1"}};
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].hold, held[i].first) << got[i].rel;
    if (!held[i].first.empty()) {
      EXPECT_EQ(got[i].hold_source, held[i].second) << got[i].rel;
    }
  }
  EXPECT_EQ(got[1].action, CommitAction::kMkdir);
  EXPECT_EQ(got[5].action, CommitAction::kDelete);
  EXPECT_EQ(got[6].action, CommitAction::kMkdir);  // secrets/ itself is no match of secrets/**
  EXPECT_EQ(got[7].action, CommitAction::kRefuse);
  EXPECT_EQ(got[7].reason, "approval_denied");
  EXPECT_EQ(got[8].action, CommitAction::kInstall);
  // A later layer's allow does not undo an earlier layer's ask (the strictest wins).
  ApprovalRule allow = rule("ok", ApprovalDecision::kAllow, "deploy/a.yaml");
  allow.layer = PolicyLayer::kUser;
  rules.approval_paths.push_back(allow);
  EXPECT_EQ(PlanCommit(listing, rules)[4].hold, "ask-deploy");
  // The stage's rules file carries them, and an older stage's (without them) still reads.
  auto back = CommitRulesFromJson(CommitRulesJson(rules));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->approval_paths.size(), 4u);
  EXPECT_EQ(back->approval_paths[1].decision, ApprovalDecision::kDeny);
  EXPECT_EQ(back->approval_paths[3].layer, PolicyLayer::kUser);
  EXPECT_EQ(PlanCommit(listing, *back)[7].reason, "approval_denied");
  // A hard link to a held file waits with it, wherever it is in the listing.
  std::vector<UpperEntry> links = {Entry("a-notes.txt", K::kFile),
                                   Entry("deploy", K::kDir, H::kDir),
                                   Entry("deploy/h.yaml", K::kFile), Entry("z.txt", K::kFile)};
  for (std::size_t k : {0u, 2u}) {
    links[k].nlink = 2;
    links[k].sig.dev = 1;
    links[k].sig.ino = 77;
  }
  links[3].sig.ino = 78;
  const auto planned = PlanCommit(links, rules);
  EXPECT_EQ(planned[2].hold, "ask-deploy");
  EXPECT_EQ(planned[0].hold, "ask-deploy") << "the other name of a held inode";
  EXPECT_TRUE(planned[3].hold.empty());
}

// What the sandbox masks (the policy's deny list, cordon's own files) is never written or
// deleted by a commit, nor is a directory holding one deleted or replaced.
TEST(PlanCommit, AMaskedPathAndTheDirectoriesAboveItAreNeverTakenOrReplaced) {
  using K = UpperKind;
  using H = HostKind;
  CommitRules rules;
  rules.masked = {"sub/secret.txt", "vault"};
  const std::vector<std::pair<UpperEntry, Want>> table = {
      {Entry("sub", K::kWhiteout, H::kDir), {CommitAction::kRefuse, "masked_path"}},
      {Entry("sub", K::kDir, H::kDir), {CommitAction::kKeepDir, ""}},
      {Entry("sub/secret.txt", K::kFile, H::kFile), {CommitAction::kRefuse, "masked_path"}},
      {Entry("sub/other.txt", K::kFile), {CommitAction::kInstall, ""}},
      {Entry("vault", K::kWhiteout, H::kDir), {CommitAction::kRefuse, "masked_path"}},
      {Entry("vault", K::kDir, H::kDir, 0, true), {CommitAction::kRefuse, "masked_path"}},
      {Entry("vault/key", K::kWhiteout, H::kFile), {CommitAction::kRefuse, "masked_path"}},
      {Entry("vault/new", K::kFile), {CommitAction::kRefuse, "masked_path"}},
      {Entry("vault2", K::kFile), {CommitAction::kInstall, ""}},
  };
  for (const auto& [e, w] : table) {
    SCOPED_TRACE(e.rel);
    const auto got = PlanCommit(std::vector<UpperEntry>{e}, rules);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(static_cast<int>(got[0].action), static_cast<int>(w.action));
    EXPECT_EQ(got[0].reason, w.reason);
  }
  EXPECT_TRUE(stage::DeletionTakesProtected("sub", rules));
  EXPECT_TRUE(stage::DeletionTakesProtected("vault/key", rules));
  EXPECT_FALSE(stage::DeletionTakesProtected("sub2", rules));
}

TEST(StagedChangesJson, NamesThatAreNotUtf8StayDistinctAndEscaped) {
  bool escaped = true;
  EXPECT_EQ(EscapePathBytes("caf\xc3\xa9/a\\b", &escaped), "caf\xc3\xa9/a\\b");
  EXPECT_FALSE(escaped);
  EXPECT_EQ(EscapePathBytes("bad\xff"
                            "name\\",
                            &escaped),
            "bad\\xffname\\\\");
  EXPECT_TRUE(escaped);
  EXPECT_NE(EscapePathBytes("bad\xff"), EscapePathBytes("bad\xfe"));
  EXPECT_EQ(EscapePathBytes("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate is not UTF-8

  CommitOutcome out;
  for (const char* p : {"bad\xff", "bad\xfe"}) {
    FileChange c;
    c.kind = "created";
    c.path = p;
    c.type = "file";
    c.bytes_after = 1;
    out.changes.push_back(c);
  }
  const std::string dumped = DumpJson(StagedChangesJson(out));
  EXPECT_NE(dumped.find("\"bad\\\\xff\""), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("\"bad\\\\xfe\""), std::string::npos) << dumped;
  EXPECT_EQ(dumped.find("\xef\xbf\xbd"), std::string::npos) << dumped;  // nothing collapsed
}

TEST(StagedChangesJson, MirrorsTheRecordShapeWithRefusedAndConflicts) {
  CommitOutcome out;
  auto change = [&](std::string kind, std::string path, std::string type) {
    FileChange c;
    c.kind = std::move(kind);
    c.path = std::move(path);
    c.type = std::move(type);
    c.git = c.path.find(".git/") != std::string::npos;
    out.changes.push_back(std::move(c));
    return &out.changes.back();
  };
  change("created", ".git/objects/ab/cd", "file");
  change("modified", "a.txt", "file")->sha256_before = "same";
  out.changes.back().sha256_after = "same";
  auto* d = change("deleted", "dir", "dir");
  d->below = 3;
  change("created", "b.txt", "file");
  change("created", "c.txt", "file");
  out.refused = {{".envrc", "protected_path", "file", "/q/.envrc"},
                 {"fifo", "special_file", "other", ""},
                 {"x", "conflict", "file", "/q/x"}};
  out.conflicts = {"x", "y"};
  const Json j = StagedChangesJson(out, 2, "/ws");
  EXPECT_EQ(j["workspace_mode"], "staged");
  EXPECT_EQ(j["concurrent"], false);
  EXPECT_EQ(j["counts"]["touched"], 1);  // the same bytes: touched, as Record says
  EXPECT_EQ(j["counts"]["deleted"], 4);  // the directory and the three below it
  EXPECT_EQ(j["counts"]["renamed"], 0);
  EXPECT_EQ(j["counts"]["created"], 2);
  EXPECT_EQ(j["git"]["created"], 1);  // counted, not listed
  ASSERT_EQ(j["entries"].size(), 2u);
  EXPECT_EQ(j["entries"][0]["path"], "/ws/a.txt");
  EXPECT_EQ(j["entries"][1]["below"], 3);
  EXPECT_EQ(j["omitted"], 2);
  ASSERT_EQ(j["refused"].size(), 2u);
  EXPECT_EQ(j["refused"][0]["reason"], "protected_path");
  EXPECT_EQ(j["refused"][0]["quarantine"], "/q/.envrc");
  EXPECT_EQ(j["refused_omitted"], 1);
  EXPECT_EQ(j["conflicts"], Json::array({"/ws/x", "/ws/y"}));
  EXPECT_EQ(j["conflicts_omitted"], 0);
  EXPECT_FALSE(j.contains("error"));
}

// ---- against the kernel ------------------------------------------------------------------

// The host tree as a map: rel -> type, mode and content (or target). Walked by fds, so paths
// past PATH_MAX are listed too.
void ListTree(int dfd, const std::string& prefix, std::map<std::string, std::string>& out) {
  UniqueDir d = UniqueDir::FromFd(UniqueFd(::openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
  ASSERT_TRUE(d.valid());
  while (dirent* e = d.Next()) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    const std::string rel = prefix.empty() ? n : prefix + "/" + n;
    struct stat st {};
    ASSERT_EQ(::fstatat(dfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW), 0) << rel;
    char mode[16];
    std::snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(st.st_mode & 07777));
    if (S_ISDIR(st.st_mode)) {
      out[rel] = std::string("dir ") + mode;
      UniqueFd sub(::openat(dfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      ASSERT_TRUE(sub.valid()) << rel;
      ListTree(sub.get(), rel, out);
    } else if (S_ISREG(st.st_mode)) {
      UniqueFd f(::openat(dfd, n.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      std::string data(static_cast<std::size_t>(st.st_size), '\0');
      ASSERT_EQ(::read(f.get(), data.data(), data.size()), st.st_size);
      out[rel] = std::string("file ") + mode + " " + data;
    } else if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      const ssize_t k = ::readlinkat(dfd, n.c_str(), buf, sizeof buf);
      out[rel] = "link " + std::string(buf, k > 0 ? static_cast<std::size_t>(k) : 0);
    } else {
      out[rel] = "other";
    }
  }
}

std::map<std::string, std::string> Tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.valid()) ListTree(fd.get(), "", out);
  return out;
}

// Removes a tree by fds (TempDir's path-based removal stops at PATH_MAX).
void RemoveTree(int dfd) {
  UniqueDir d = UniqueDir::FromFd(UniqueFd(::openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
  if (!d.valid()) return;
  std::vector<std::string> names;
  while (dirent* e = d.Next()) {
    if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..")
      names.push_back(e->d_name);
  }
  for (const std::string& n : names) {
    UniqueFd sub(::openat(dfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.valid()) {
      ::fchmod(sub.get(), 0700);
      RemoveTree(sub.get());
      ::unlinkat(dfd, n.c_str(), AT_REMOVEDIR);
    } else {
      ::unlinkat(dfd, n.c_str(), 0);
    }
  }
}

// A temporary tree with the overlay's four directories on one filesystem.
struct Staging {
  TempDir dir;
  std::string lower = dir / "lower", upper = dir / "upper", work = dir / "work",
              quarantine = dir / "quarantine", outside = dir / "outside", sig = dir / "sig";
  Staging() {
    for (const auto& p : {lower, upper, work, outside, sig}) ::mkdir(p.c_str(), 0755);
  }
  ~Staging() {
    UniqueFd fd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.valid()) RemoveTree(fd.get());
  }
  UniqueFd Open(const std::string& p) const {
    return UniqueFd(::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
};

void WriteAllTo(const std::string& path, const std::string& s) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.valid()) (void)!::write(fd.get(), s.data(), s.size());
}

// Mounts the overlay (lower = the host tree, over itself) in a child's own user and mount
// namespace, as an unprivileged cordon would, and runs `script` in it with the overlay as its
// cwd. Returns the child's pid; *mount_failed is set when the mount (not the script) failed.
pid_t StartInOverlay(const Staging& s, const std::string& script) {
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  const std::string opts =
      "lowerdir=" + s.lower + ",upperdir=" + s.upper + ",workdir=" + s.work + ",userxattr";
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(90);
  WriteAllTo("/proc/self/setgroups", "deny");
  WriteAllTo("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1");
  WriteAllTo("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(91);
  // The raw mount(2): the mount command retries read-only on failure, which looks like success.
  if (::mount("overlay", s.lower.c_str(), "overlay", 0, opts.c_str()) != 0) ::_exit(92);
  if (::chdir(s.lower.c_str()) != 0) ::_exit(93);
  ::setenv("HOME", s.sig.c_str(), 1);
  ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
  ::_exit(94);
}

int WaitExit(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Skips loudly where the kernel cannot mount an unprivileged overlay; fails under CI=true.
#define SKIP_OR_FAIL_WITHOUT_OVERLAY(code)                                                        \
  do {                                                                                            \
    if ((code) >= 90 && (code) <= 93) {                                                           \
      const char* ci = std::getenv("CI");                                                         \
      if (ci != nullptr && std::string(ci) == "true") {                                           \
        FAIL() << "overlayfs (userxattr, user namespace) cannot be mounted here (step " << (code) \
               << "); CI=true: a staged test that cannot run fails";                              \
      }                                                                                           \
      GTEST_SKIP() << "SKIPPED LOUDLY: overlayfs with userxattr cannot be mounted in a user "     \
                      "namespace here (step "                                                     \
                   << (code) << ")";                                                              \
    }                                                                                             \
  } while (0)

int RunInOverlay(const Staging& s, const std::string& script) {
  return WaitExit(StartInOverlay(s, "set -e; exec 2>" + s.sig + "/stderr; " + script));
}

struct Commit {
  std::vector<UpperEntry> listing;
  std::vector<CommitDecision> decisions;
  CommitOutcome outcome;
};

CommitOptions Options(const Staging& s, bool rename) {
  CommitOptions o;
  o.rename_from_upper = rename;
  o.quarantine_dir = s.quarantine;
  o.fsync = false;
  return o;
}

// ListUpper, ReadHostFacts, PlanCommit and ApplyCommit over `decisions_limit` decisions.
Commit RunCommit(const Staging& s, const CommitOptions& o, CommitLedger* ledger = nullptr,
                 std::size_t decisions_limit = SIZE_MAX) {
  Commit c;
  UniqueFd root = s.Open(s.lower), upper = s.Open(s.upper);
  auto listing = ListUpper(upper.get());
  EXPECT_TRUE(listing.has_value()) << (listing ? "" : listing.error().ToString());
  if (!listing) return c;
  c.listing = std::move(*listing);
  ReadHostFacts(root.get(), c.listing);
  c.decisions = PlanCommit(c.listing, o.rules);
  std::span<const CommitDecision> d(c.decisions);
  c.outcome = ApplyCommit(root.get(), upper.get(), c.listing,
                          d.first(std::min(decisions_limit, d.size())), o, ledger);
  return c;
}

const std::string kLong(200, 'L');

// The host tree before the process, and what the process does to it.
void MakeLower(const Staging& s) {
  const std::string& L = s.lower;
  WriteFile(L + "/keep.txt", "keep");
  WriteFile(L + "/mod.txt", "old");
  WriteFile(L + "/del.txt", "del");
  WriteFile(L + "/deldir/a", "a");
  WriteFile(L + "/deldir/sub/b", "b");
  WriteFile(L + "/opq/old1", "o1");
  WriteFile(L + "/opq/olddir/x", "x");
  WriteFile(L + "/mvsrc/f1", "f1");
  WriteFile(L + "/mvsrc/d/f2", "f2");
  WriteFile(L + "/perm.txt", "perm");
  WriteFile(L + "/permdir/in", "in");
  WriteFile(L + "/.git/config", "[core]\n");
  WriteFile(L + "/.git/HEAD", "ref: refs/heads/main\n");
  ::mkdir((L + "/.git/objects").c_str(), 0755);
  ::mkdir((L + "/.git/hooks").c_str(), 0755);
  WriteFile(L + "/repo2/src.txt", "src");
  WriteFile(L + "/repo2/.git/config", "[core]\n");
  ::chmod((L + "/perm.txt").c_str(), 0644);
  ::chmod((L + "/permdir").c_str(), 0755);
}

const char* kScript =
    "echo new > created.txt\n"
    "echo new > mod.txt\n"
    "rm del.txt\n"
    "rm -rf deldir\n"
    "rm -rf opq && mkdir opq && echo new > opq/new\n"
    "mv mvsrc mvdst\n"
    "chmod 600 perm.txt\n"
    "chmod 700 permdir\n"
    "ln -s keep.txt link\n"
    "mkfifo fifo\n"
    "echo evil >> .git/config\n"
    "mkdir -p .git/objects/ab && echo obj > .git/objects/ab/cdef\n"
    "git init -q nested\n"
    "mkdir -p .vscode && echo '{}' > .vscode/tasks.json\n"
    "rm -rf repo2\n"
    "printf x > \"$(printf 'bad\\377name')\"\n"
    "printf y > \"$(printf 'bad\\376name')\"\n"
    // Past PATH_MAX (25 x 201 bytes): one relative mkdir and chdir at a time (dash's cd cannot).
    "python3 -c \"import os\nfor _ in range(25): os.mkdir('L' * 200); os.chdir('L' * 200)\n"
    "open('deep.txt', 'w').write('deep\\n')\"\n";

std::map<std::string, std::string> ExpectedHost() {
  std::map<std::string, std::string> t = {
      {"keep.txt", "file 644 keep"},
      {"created.txt", "file 644 new\n"},
      {"mod.txt", "file 644 new\n"},
      {"opq", "dir 755"},
      {"opq/new", "file 644 new\n"},
      {"mvdst", "dir 755"},
      {"mvdst/f1", "file 644 f1"},
      {"mvdst/d", "dir 755"},
      {"mvdst/d/f2", "file 644 f2"},
      {"perm.txt", "file 600 perm"},
      {"permdir", "dir 700"},
      {"permdir/in", "file 644 in"},
      {"link", "link keep.txt"},
      {".git", "dir 755"},
      {".git/config", "file 644 [core]\n"},
      {".git/HEAD", "file 644 ref: refs/heads/main\n"},
      {".git/objects", "dir 755"},
      {".git/objects/ab", "dir 755"},
      {".git/objects/ab/cdef", "file 644 obj\n"},
      {".git/hooks", "dir 755"},
      {"nested", "dir 755"},
      // A deletion that would take a repository's git directory with it is refused.
      {"repo2", "dir 755"},
      {"repo2/src.txt", "file 644 src"},
      {"repo2/.git", "dir 755"},
      {"repo2/.git/config", "file 644 [core]\n"},
      {"bad\xffname", "file 644 x"},  // printf 'bad\377name'
      {"bad\xfename", "file 644 y"},
  };
  std::string p;
  for (int i = 0; i < 25; ++i) {
    p += (p.empty() ? "" : "/") + kLong;
    t[p] = "dir 755";
  }
  t[p + "/deep.txt"] = "file 644 deep\n";
  return t;
}

std::map<std::string, std::string> RefusedReasons(const CommitOutcome& o) {
  std::map<std::string, std::string> out;
  for (const auto& r : o.refused) out[r.rel] = r.reason;
  return out;
}

TEST(ApplyCommit, RenamesAnUnmountedUpperLayerIntoTheHostTreeByTheRules) {
  Staging s;
  MakeLower(s);
  const int code = RunInOverlay(s, kScript);
  SKIP_OR_FAIL_WITHOUT_OVERLAY(code);
  ASSERT_EQ(code, 0) << ReadFile(s.sig + "/stderr");

  // The listing saw the overlay's own marks: whiteouts and the opaque directory.
  Commit c = RunCommit(s, Options(s, true));
  std::map<std::string, const UpperEntry*> by_rel;
  for (const auto& e : c.listing) by_rel[e.rel] = &e;
  ASSERT_TRUE(by_rel.count("del.txt"));
  EXPECT_EQ(by_rel["del.txt"]->kind, UpperKind::kWhiteout);
  EXPECT_EQ(by_rel["deldir"]->kind, UpperKind::kWhiteout);
  EXPECT_TRUE(by_rel["opq"]->opaque);
  EXPECT_FALSE(by_rel[".git"]->opaque);
  EXPECT_EQ(by_rel["fifo"]->kind, UpperKind::kOther);

  ASSERT_FALSE(c.outcome.error) << c.outcome.error->ToString();
  EXPECT_TRUE(c.outcome.not_done.empty());
  EXPECT_EQ(Tree(s.lower), ExpectedHost());

  const auto reasons = RefusedReasons(c.outcome);
  EXPECT_EQ(reasons.at("fifo"), "special_file");
  EXPECT_EQ(reasons.at(".git/config"), "protected_path");
  EXPECT_EQ(reasons.at(".vscode"), "protected_path");
  EXPECT_EQ(reasons.at(".vscode/tasks.json"), "below_refused");
  EXPECT_EQ(reasons.at("nested/.git"), "new_git_dir");
  EXPECT_EQ(reasons.at("nested/.git/HEAD"), "below_refused");
  EXPECT_EQ(reasons.at("repo2"), "protected_path");
  // What was refused is in the quarantine, not in the tree.
  EXPECT_EQ(ReadFile(s.quarantine + "/.git/config"), "[core]\nevil\n");
  EXPECT_EQ(ReadFile(s.quarantine + "/.vscode/tasks.json"), "{}\n");
  EXPECT_TRUE(testing::Exists(s.quarantine + "/nested/.git/HEAD"));
  EXPECT_FALSE(testing::Exists(s.quarantine + "/fifo"));

  // The record: every host change, hashed; names that are not UTF-8 escaped, not collapsed.
  std::map<std::string, const FileChange*> changes;
  for (const auto& ch : c.outcome.changes) changes[ch.path + " " + ch.kind] = &ch;
  ASSERT_TRUE(changes.count("mod.txt modified"));
  EXPECT_EQ(changes["mod.txt modified"]->bytes_before, 3u);
  EXPECT_TRUE(changes["mod.txt modified"]->sha256_before.has_value());
  EXPECT_EQ(changes["deldir deleted"]->below, 3u);
  EXPECT_EQ(changes["perm.txt modified"]->mode_after, 0600u);
  EXPECT_EQ(changes["permdir mode_changed"]->mode_after, 0700u);
  EXPECT_TRUE(changes.count("opq/old1 deleted"));
  EXPECT_TRUE(changes.count("opq/olddir deleted"));
  EXPECT_TRUE(changes.count(".git/objects/ab/cdef created"));
  const Json j = StagedChangesJson(c.outcome);
  const std::string dumped = DumpJson(j);
  EXPECT_NE(dumped.find("bad\\\\xffname"), std::string::npos);
  EXPECT_NE(dumped.find("bad\\\\xfename"), std::string::npos);
  EXPECT_EQ(j["git"]["created"], 2);  // .git/objects/ab and its file: counted, not listed
  // del.txt; deldir and 3 below; opq/old1; opq/olddir and 1 below; mvsrc and 3 below.
  EXPECT_EQ(j["counts"]["deleted"].get<int>(), 1 + 4 + 1 + 2 + 4);

  // Run again on what is left: nothing more reaches the host (idempotent).
  Commit again = RunCommit(s, Options(s, true));
  ASSERT_FALSE(again.outcome.error);
  EXPECT_EQ(Tree(s.lower), ExpectedHost());
  EXPECT_TRUE(again.outcome.changes.empty()) << again.outcome.changes.front().path;
}

TEST(ApplyCommit, ALiveOverlayIsCopiedWithALedgerAndAHostEditIsAConflict) {
  Staging s;
  WriteFile(s.lower + "/h.txt", "host-orig");
  WriteFile(s.lower + "/same.txt", "same");
  const std::int64_t window = ChangeWindowStart();
  const std::string S = s.sig;
  const pid_t pid = StartInOverlay(
      s, "set -e; exec 2>" + S +
             "/stderr\n"
             "echo one > f.txt; echo agent1 > h.txt; echo e > .envrc; echo s > stays.txt\n"
             "touch " +
             S + "/step1; while [ ! -e " + S +
             "/go2 ]; do sleep 0.01; done\n"
             "echo two > f.txt; echo agent2 > h.txt; touch " +
             S +
             "/step2\n"
             "while [ ! -e " +
             S + "/go3 ]; do sleep 0.01; done\n");
  // A failed assertion returns early: the child (ours) must not wait for go3 forever.
  struct KillOnExit {
    pid_t pid;
    ~KillOnExit() {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } guard{pid};
  auto wait_for = [&](const std::string& f) {
    for (int i = 0; i < 1000 && !testing::Exists(f); ++i) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        guard.pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return testing::Exists(f) ? 0 : -1;
  };
  const int step1 = wait_for(S + "/step1");
  SKIP_OR_FAIL_WITHOUT_OVERLAY(step1);
  ASSERT_EQ(step1, 0) << ReadFile(S + "/stderr");

  CommitOptions o = Options(s, false);
  o.window_start_ns = window;
  CommitLedger ledger;
  Commit c1 = RunCommit(s, o, &ledger);
  ASSERT_FALSE(c1.outcome.error) << c1.outcome.error->ToString();
  EXPECT_EQ(ReadFile(s.lower + "/f.txt"), "one\n");
  EXPECT_EQ(ReadFile(s.lower + "/h.txt"), "agent1\n");
  EXPECT_FALSE(testing::Exists(s.lower + "/.envrc"));
  EXPECT_EQ(ReadFile(s.quarantine + "/.envrc"), "e\n");
  EXPECT_EQ(RefusedReasons(c1.outcome).at(".envrc"), "protected_path");
  // Copied, not moved: the process's view stays its own.
  EXPECT_EQ(ReadFile(s.upper + "/f.txt"), "one\n");

  WriteFile(s.lower + "/h.txt", "host-edit");  // the user edits the file meanwhile
  WriteFile(S + "/go2", "");
  ASSERT_EQ(wait_for(S + "/step2"), 0) << ReadFile(S + "/stderr");
  Commit c2 = RunCommit(s, o, &ledger);
  ASSERT_FALSE(c2.outcome.error) << c2.outcome.error->ToString();
  EXPECT_EQ(ReadFile(s.lower + "/f.txt"), "two\n");
  EXPECT_EQ(ReadFile(s.lower + "/h.txt"), "host-edit");  // the host's version is kept
  EXPECT_EQ(c2.outcome.conflicts, std::vector<std::string>{"h.txt"});
  EXPECT_EQ(ReadFile(s.quarantine + "/h.txt"), "agent2\n");
  // Only what changed since the first commit: f.txt; .envrc is not quarantined twice.
  ASSERT_EQ(c2.outcome.changes.size(), 1u);
  EXPECT_EQ(c2.outcome.changes[0].path, "f.txt");
  EXPECT_EQ(c2.outcome.changes[0].kind, "modified");
  EXPECT_EQ(RefusedReasons(c2.outcome),
            (std::map<std::string, std::string>{{"h.txt", "conflict"}}));

  // Nothing changed: nothing happens.
  Commit c3 = RunCommit(s, o, &ledger);
  EXPECT_TRUE(c3.outcome.changes.empty());
  EXPECT_TRUE(c3.outcome.refused.empty());
  WriteFile(S + "/go3", "");
  guard.pid = -1;
  EXPECT_EQ(WaitExit(pid), 0) << ReadFile(S + "/stderr");
}

// filesystem.xattr_allow (issue 33, part 6): renamed out of the upper layer or copied from it,
// a file the process made keeps the user.* attributes the rules allow and no other.
TEST(ApplyCommit, OnlyTheAllowedUserXattrsReachTheHostByRenameOrCopy) {
  for (const bool rename : {true, false}) {
    SCOPED_TRACE(rename ? "rename" : "copy");
    Staging s;
    const int code =
        RunInOverlay(s,
                     "echo made > made.txt; python3 -c \"import os\n"
                     "for n in ('user.keep.a', 'user.x'): os.setxattr('made.txt', n, b'v')\"");
    SKIP_OR_FAIL_WITHOUT_OVERLAY(code);
    ASSERT_EQ(code, 0) << ReadFile(s.sig + "/stderr");
    CommitOptions o = Options(s, rename);
    o.rules.xattr_allow = {"user.keep.*"};
    Commit c = RunCommit(s, o);
    ASSERT_FALSE(c.outcome.error) << c.outcome.error->ToString();
    const std::string made = s.lower + "/made.txt";
    EXPECT_EQ(ReadFile(made), "made\n");
    char names[1024];
    const ssize_t n = ::listxattr(made.c_str(), names, sizeof names);
    ASSERT_GE(n, 0) << std::strerror(errno);
    std::vector<std::string> user;
    for (ssize_t at = 0; at < n; at += static_cast<ssize_t>(std::strlen(names + at)) + 1) {
      if (std::string_view(names + at).starts_with("user.")) user.emplace_back(names + at);
    }
    EXPECT_EQ(user, std::vector<std::string>{"user.keep.a"});
  }
}

// A host directory swapped for a symlink to a directory outside the tree after the plan read
// it: nothing is written outside. Swapped before the directory's own step, the directory is
// refused with what is below it; swapped after it (the child steps alone), the commit fails and
// names what it did not do.
TEST(ApplyCommit, AHostParentSwappedForASymlinkAfterThePlanWritesNothingOutside) {
  for (const bool rename : {true, false}) {
    for (const bool after_dir_step : {false, true}) {
      SCOPED_TRACE(std::string(rename ? "rename" : "copy") +
                   (after_dir_step ? ", after the directory's step" : ", before it"));
      Staging s;
      WriteFile(s.outside + "/file", "orig");
      ::mkdir((s.lower + "/sub").c_str(), 0755);
      WriteFile(s.upper + "/sub/file", "agent");
      WriteFile(s.upper + "/sub/new", "agent");
      UniqueFd root = s.Open(s.lower), upper = s.Open(s.upper);
      auto listing = ListUpper(upper.get());
      ASSERT_TRUE(listing);
      ReadHostFacts(root.get(), *listing);
      ASSERT_EQ((*listing)[0].host, HostKind::kDir);
      const auto decisions = PlanCommit(*listing, {});
      ASSERT_EQ(decisions.size(), 3u);
      ASSERT_EQ(decisions[1].action, CommitAction::kInstall);

      ASSERT_EQ(::rename((s.lower + "/sub").c_str(), (s.dir / "sub-away").c_str()), 0);
      ASSERT_EQ(::symlink(s.outside.c_str(), (s.lower + "/sub").c_str()), 0);
      std::span<const CommitDecision> steps(decisions);
      const CommitOutcome out =
          ApplyCommit(root.get(), upper.get(), *listing, after_dir_step ? steps.subspan(1) : steps,
                      Options(s, rename));
      EXPECT_EQ(Tree(s.outside), (std::map<std::string, std::string>{{"file", "file 644 orig"}}));
      EXPECT_TRUE(out.changes.empty());
      if (after_dir_step) {
        ASSERT_TRUE(out.error);
        EXPECT_EQ(out.not_done, (std::vector<std::string>{"sub/file", "sub/new"}));
        EXPECT_EQ(ReadFile(s.upper + "/sub/file"), "agent");  // still there for a later commit
      } else {
        ASSERT_FALSE(out.error) << out.error->ToString();
        EXPECT_EQ(RefusedReasons(out),
                  (std::map<std::string, std::string>{{"sub", "not_a_directory"},
                                                      {"sub/file", "below_refused"},
                                                      {"sub/new", "below_refused"}}));
        EXPECT_EQ(ReadFile(s.quarantine + "/sub/file"), "agent");
      }
    }
  }
}

// The host has a symlink where the upper has a directory when the facts are read: the
// directory is refused (not_a_directory) and nothing goes through the link.
TEST(ApplyCommit, AHostSymlinkWhereTheUpperHasADirectoryIsRefused) {
  Staging s;
  WriteFile(s.outside + "/file", "orig");
  ASSERT_EQ(::symlink(s.outside.c_str(), (s.lower + "/sub").c_str()), 0);
  WriteFile(s.upper + "/sub/file", "agent");
  Commit c = RunCommit(s, Options(s, true));
  ASSERT_FALSE(c.outcome.error) << c.outcome.error->ToString();
  EXPECT_EQ(RefusedReasons(c.outcome),
            (std::map<std::string, std::string>{{"sub", "not_a_directory"},
                                                {"sub/file", "below_refused"}}));
  EXPECT_EQ(Tree(s.outside), (std::map<std::string, std::string>{{"file", "file 644 orig"}}));
  EXPECT_EQ(ReadFile(s.quarantine + "/sub/file"), "agent");
}

// A commit with nothing to install does not sync the filesystem (a warm call that wrote nothing
// paid a syncfs of the whole disk for it); one that installs something still does. syncfs of an
// O_PATH descriptor fails (EBADF) where the *at calls of the commit work, so the root opened
// O_PATH shows whether the commit's final syncfs ran.
TEST(ApplyCommit, SyncsTheHostTreeOnlyWhenItInstallsSomething) {
  Staging s;
  CommitOptions o = Options(s, true);
  o.fsync = true;
  UniqueFd path_root(::open(s.lower.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(path_root.valid());
  UniqueFd upper = s.Open(s.upper);
  auto empty = ListUpper(upper.get());
  ASSERT_TRUE(empty);
  ASSERT_TRUE(empty->empty());
  const CommitOutcome none = ApplyCommit(path_root.get(), upper.get(), *empty, {}, o);
  EXPECT_FALSE(none.error) << none.error->ToString();
  EXPECT_TRUE(none.changes.empty());

  WriteFile(s.upper + "/new.txt", "agent");
  auto listing = ListUpper(upper.get());
  ASSERT_TRUE(listing);
  ReadHostFacts(path_root.get(), *listing);
  const auto decisions = PlanCommit(*listing, o.rules);
  ASSERT_EQ(decisions.size(), 1u);
  const CommitOutcome one = ApplyCommit(path_root.get(), upper.get(), *listing, decisions, o);
  EXPECT_EQ(ReadFile(s.lower + "/new.txt"), "agent");  // installed, then the sync was tried
  ASSERT_TRUE(one.error);
  EXPECT_NE(one.error->message.find("syncfs"), std::string::npos) << one.error->ToString();
}

// A live process's commit point with nothing in its upper layer leaves the phase file as it was
// (no rewrite on the state disk at every wrap call boundary and timer tick); one with a write in
// it copies the write and rewrites the phase.
TEST(Stage, ALiveCommitPointWithNothingWrittenLeavesThePhaseFileAlone) {
  TempDir d;
  const std::string root = d / "root";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  auto stage = Stage::Create(d / "stage", {root}, d / "quarantine");
  ASSERT_TRUE(stage) << stage.error().ToString();
  (*stage)->OpenWindow();
  const std::string phase = d / "stage/phase";
  auto mtime_ns = [&] {
    struct stat st {};
    EXPECT_EQ(::stat(phase.c_str(), &st), 0);
    return st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
  };
  const auto before = mtime_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(25));  // past a coarse clock tick
  const CommitOutcome none = (*stage)->Commit(false);
  EXPECT_FALSE(none.error);
  EXPECT_TRUE(none.changes.empty());
  EXPECT_EQ(mtime_ns(), before);
  EXPECT_EQ(ReadFile(phase).substr(0, 8), "running\n");

  WriteFile(d / "stage/u0/a.txt", "agent");
  std::this_thread::sleep_for(std::chrono::milliseconds(25));
  const CommitOutcome one = (*stage)->Commit(false);
  ASSERT_FALSE(one.error) << one.error->ToString();
  EXPECT_EQ(ReadFile(root + "/a.txt"), "agent");
  EXPECT_NE(mtime_ns(), before);
  EXPECT_EQ(ReadFile(phase).substr(0, 8), "running\n");
}

// The end of a call that wrote nothing (a warm `run_shell true`): its final commit rewrites no
// phase file either, and reports nothing.
TEST(Stage, AFinalCommitWithNothingWrittenLeavesThePhaseFileAlone) {
  TempDir d;
  const std::string root = d / "root";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  WriteFile(root + "/kept.txt", "host");
  auto stage = Stage::Create(d / "stage", {root}, d / "quarantine");
  ASSERT_TRUE(stage) << stage.error().ToString();
  (*stage)->OpenWindow();
  const std::string phase = d / "stage/phase";
  struct stat before {};
  ASSERT_EQ(::stat(phase.c_str(), &before), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(25));  // past a coarse clock tick
  const CommitOutcome none = (*stage)->Commit(true);
  EXPECT_FALSE(none.error);
  EXPECT_TRUE(none.changes.empty());
  EXPECT_TRUE(none.refused.empty());
  struct stat after {};
  ASSERT_EQ(::stat(phase.c_str(), &after), 0);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(ReadFile(phase).substr(0, 8), "running\n");
  EXPECT_EQ(ReadFile(root + "/kept.txt"), "host");
  EXPECT_FALSE((*stage)->failed());
}

// kill -9 in the middle of a commit, simulated by applying a prefix of the decisions: listing
// and committing again ends in the state one whole commit reaches.
TEST(ApplyCommit, ACommitInterruptedMidwayFinishesWhenRunAgain) {
  Staging whole;
  MakeLower(whole);
  const int code = RunInOverlay(whole, kScript);
  SKIP_OR_FAIL_WITHOUT_OVERLAY(code);
  ASSERT_EQ(code, 0) << ReadFile(whole.sig + "/stderr");
  Commit one = RunCommit(whole, Options(whole, true));
  ASSERT_FALSE(one.outcome.error);
  const auto want_host = Tree(whole.lower), want_q = Tree(whole.quarantine);
  ASSERT_EQ(want_host, ExpectedHost());

  // Cut right after the opaque directory's first child (its host children were cleared and
  // opq/new installed), and at a few other points.
  std::size_t after_opq_new = 0;
  for (std::size_t i = 0; i < one.decisions.size(); ++i) {
    if (one.decisions[i].rel == "opq/new") after_opq_new = i + 1;
  }
  ASSERT_GT(after_opq_new, 0u);
  const std::size_t n = one.decisions.size();
  for (const std::size_t cut : {after_opq_new, n / 3, n / 2, n - 1}) {
    SCOPED_TRACE("cut after " + std::to_string(cut) + " of " + std::to_string(n));
    Staging s;
    MakeLower(s);
    ASSERT_EQ(RunInOverlay(s, kScript), 0) << ReadFile(s.sig + "/stderr");
    Commit half = RunCommit(s, Options(s, true), nullptr, cut);
    ASSERT_FALSE(half.outcome.error);
    Commit rest = RunCommit(s, Options(s, true));
    ASSERT_FALSE(rest.outcome.error) << rest.outcome.error->ToString();
    EXPECT_EQ(Tree(s.lower), want_host);
    // The quarantine's paths are per staging directory: compare the trees below them.
    EXPECT_EQ(Tree(s.quarantine), want_q);
  }
}

// A probe that passed is recorded and believed by the next session (it forked, made a mount
// namespace and mounted an overlay for every `cordon exec`); only this user's unwritable-by-others
// record is believed, and a launch whose mount fails removes it, so the next session probes again.
// /proc/sys cannot be an overlay's lower layer: the probe fails there unless a record says
// otherwise.
TEST(StagingProbe, APassedProbeIsRecordedAndAFailedMountRemovesTheRecord) {
  testing::TempDir d;
  const std::string stage = d / "stage";
  ASSERT_EQ(::mkdir(stage.c_str(), 0700), 0);
  const std::string root = "/proc/sys";
  EXPECT_FALSE(ProbeStaging(stage, root).available);
  const std::string record = StagingRecordPath(stage, root);
  ASSERT_FALSE(record.empty());
  EXPECT_NE(::access(record.c_str(), F_OK), 0) << "a failed probe is not recorded";
  testing::WriteFile(record, "");
  ASSERT_EQ(::chmod(record.c_str(), 0666), 0);
  EXPECT_FALSE(ProbeStaging(stage, root).available) << "a record others can write was believed";
  ASSERT_EQ(::chmod(record.c_str(), 0600), 0);
  EXPECT_TRUE(ProbeStaging(stage, root).available) << "the record was not believed";
  // The launch child's mount fails: the record goes.
  ASSERT_EQ(::mkdir((d / "u").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((d / "w").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((d / "m").c_str(), 0700), 0);
  StageMountPlan plan = PrepareStageMounts({{root, d / "u", d / "w"}}, ::geteuid(), ::getegid());
  plan.targets[0] = d / "m";
  plan.records = {record};
  const pid_t pid = ::fork();
  if (pid == 0) {
    const char* step = "";
    _exit(MountStagesInChild(plan, &step) != 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the mount did not fail";
  EXPECT_NE(::access(record.c_str(), F_OK), 0) << "the record outlived a failed mount";
  // A root that can be staged is recorded by its probe, for the next session.
  const std::string ws = d / "ws";
  ASSERT_EQ(::mkdir(ws.c_str(), 0700), 0);
  if (!ProbeStaging(stage, ws).available) GTEST_SKIP() << "no staging on this host";
  EXPECT_EQ(::access(StagingRecordPath(stage, ws).c_str(), F_OK), 0);
}

}  // namespace
}  // namespace cordon
