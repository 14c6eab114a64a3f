// The staged workspace's commit (docs/adr/0006-staged-workspace.md): a confined process writes
// only an overlay's private upper layer; at each commit point cordon lists that layer (exactly
// what changed), decides each entry by the one set of rules (protected names, the git rules,
// the repository's own executed paths, special files, set-id bits), and installs what they
// allow into the user's tree through descriptors. What they refuse stays out of the tree, in the
// quarantine, with a record. Three parts: ListUpper (descriptors, the upper layer only),
// PlanCommit (pure: listing + host facts in, decisions out), ApplyCommit (descriptors, the host
// tree). Nothing here ever follows a symlink in either tree.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/before_images.h"
#include "core/error.h"
#include "policy/approvals.h"
#include "workspace/changes.h"

namespace cordon {

// What an upper-layer entry is. A whiteout (a character device 0:0) deletes the lower entry of
// that name; anything else that is not a file, directory or symlink is kOther (refused).
enum class UpperKind { kFile, kDir, kSymlink, kWhiteout, kOther };
// file, dir, symlink, whiteout, other: as records name them.
const char* UpperTypeName(UpperKind k);

// The identity of an inode as statx saw it: a ledger compares these between commits.
struct InodeSig {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  std::uint32_t mode = 0;
  bool operator==(const InodeSig&) const = default;
};

// What the host tree holds at an upper entry's path (one fstatat beneath the root, no symlink
// followed on the way): read just before planning.
enum class HostKind { kMissing, kFile, kDir, kSymlink, kOther };

struct UpperEntry {
  std::string rel;  // relative to the staged root, '/'-separated, the name's bytes as they are
  UpperKind kind = UpperKind::kFile;
  bool opaque = false;     // a directory that hides the lower one (the overlay's opaque xattr)
  std::uint32_t mode = 0;  // st_mode: type, permission, set-id and sticky bits
  std::uint32_t nlink = 1;
  InodeSig sig;
  // Filled by ReadHostFacts.
  HostKind host = HostKind::kMissing;
  InodeSig host_sig;
  // Filled by MarkUnreadableHeads: a git directory's HEAD whose content git cannot read.
  bool unreadable_head = false;
  // Filled by MarkHeldBelow: the strictest rule of CommitRules::approval_paths that a host entry
  // below this one matches, when this entry would take them with it (a whiteout or an opaque
  // directory over a host directory, a file in a directory's place); -1: none.
  int below_rule = -1;
};

struct UpperLimits {
  std::size_t max_entries = 1u << 20;  // past this the listing fails: the commit fails closed
  // The listing (core/walk.h) keeps its own stack, but one descriptor per level is open: when it
  // recursed, 4096 levels overflowed an 8 MiB stack, killing cordon at the commit and at every
  // later start's recovery. 1024 levels lie past any real tree.
  std::size_t max_depth = 1024;
};

// Lists the upper layer below `upper_fd` (a directory fd), parents before their children, in
// name order within a directory. Never follows a symlink; reads the opaque mark from
// `opaque_xattr` ("user.overlay.opaque" for a userxattr mount). A directory it cannot open or
// read, or more than `limits` entries, fails the listing (the call then fails: the commit
// cannot complete).
Result<std::vector<UpperEntry>> ListUpper(int upper_fd, const UpperLimits& limits = {},
                                          const char* opaque_xattr = "user.overlay.opaque");

// Fills host/host_sig of each entry from the host tree below `root_fd`, resolving beneath it
// with no symlink followed (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS on the parent).
void ReadHostFacts(int root_fd, std::vector<UpperEntry>& entries);

// The rules a commit applies (one definition with the file tools: IsProtectedPath,
// GitRuleAllowsWrite, CreatesGitDir, and the paths the host repositories' config executes).
struct CommitRules {
  std::vector<std::string> extra_protected;  // filesystem.protected_names
  // Where each of extra_protected came from (policy file:line), when known: a stage carries it,
  // so that what recovery refuses names the rule of the session that staged.
  std::map<std::string, std::string> protected_from;
  // Root-relative paths a host repository's configuration executes from or includes
  // (core.hooksPath, core.fsmonitor, include.path, ...): protected like .git/hooks.
  std::vector<std::string> repo_protected;
  // Root-relative directories that git takes for a repository although they are not named
  // `.git` (a bare repository, a test fixture, one hidden inside `.git/objects`): HEAD and
  // objects/ and refs/, or a commondir (FindRepositoryDirs). Inside an existing one only what
  // IsGitWritable allows lands; in a new one (the host has no HEAD there) HEAD and what
  // IsGitWritable refuses never land, so host git never takes it for a repository.
  std::vector<std::string> git_dirs, new_git_dirs;
  // Root-relative paths the sandbox masks (the policy's deny list, cordon's own and root-only
  // files; Stage::SetMasked): nothing at or below one is written or deleted, nor is an ancestor
  // of one deleted or replaced. The masks already keep the process from them; this is the second
  // wall, should a mask ever fail to cover one.
  std::vector<std::string> masked;
  // filesystem.xattr_allow: the `user.*` extended attributes a file the process made keeps on
  // the host (XattrAllowed); every other one it set stays in the stage.
  std::vector<std::string> xattr_allow;
  // The `path` rules of [[approvals.rules]] (policy/approvals.h) that ask or deny, as the staging
  // session's policy had them: an entry an `ask` rule matches is held for an answer (kHold), one a
  // `deny` rule matches is refused (approval_denied). Applied to the workspace's root only (the
  // rules' paths are relative to it); Stage::Commit clears them for the other roots.
  std::vector<ApprovalRule> approval_paths;
};

// Every field of CommitRules as JSON, and back: a stage carries the rules its commit needs
// (Stage::Create), and recovery decides by them, never by the recovering session's. Both take
// the struct apart field by field (a structured binding): a field added to CommitRules does not
// compile until it is carried. FromJson fails on anything CommitRulesJson does not write (a torn
// or foreign file): recovery then quarantines the stage whole.
Json CommitRulesJson(const CommitRules& rules);
// One name's bytes as JSON, exactly (valid UTF-8 as a string, else {"hex": ...}), and back.
Json NameJson(const std::string& name);
Result<std::string> NameFromJson(const Json& j);
Result<CommitRules> CommitRulesFromJson(const Json& j);

// The directories, among the ancestors of the listed entries, that git would take for a
// repository after the commit (host and upper layer together), for CommitRules::git_dirs and
// new_git_dirs. Looks beneath `root_fd` through descriptors, a few fstatat per distinct ancestor.
void FindRepositoryDirs(int root_fd, std::span<const UpperEntry> upper, CommitRules& rules);

// Reads (below `upper_fd`, never through a symlink) each regular file of the upper layer that is
// a git directory's HEAD (IsGitRepositoryStructure, or HEAD of one of rules.git_dirs) and marks
// the ones git cannot read (IsGitHeadContent): with one, host git would take the directory for no
// repository and fall through to a parent directory's. One that cannot be read is marked too.
void MarkUnreadableHeads(int upper_fd, std::vector<UpperEntry>& entries, const CommitRules& rules);

// Walks the host directories that the listed entries would delete or replace (below `root_fd`,
// through descriptors, never following a symlink) for paths an `ask` or `deny` rule of
// rules.approval_paths matches, and sets each such entry's below_rule. A walk that cannot finish
// (unreadable, past its bounds) takes the strictest rule that could match there.
void MarkHeldBelow(int root_fd, std::vector<UpperEntry>& entries, const CommitRules& rules);

enum class CommitAction {
  kKeepDir,  // a directory only copied up (something below it changed): ensure it exists
  kMkdir,    // a directory the host does not have
  kInstall,  // a file or symlink: created or replacing the host's entry
  kDelete,   // a whiteout: remove the host's entry (a directory with everything below it)
  kChmod,    // an existing directory whose permission bits the process changed
  kRefuse,   // stays out of the host tree: moved to the quarantine, recorded
};

// Why an entry was refused: stable names, used in records and messages.
// protected_path, git_metadata, new_git_dir, repo_executes, special_file, setid_bits,
// below_refused (a parent was refused), not_a_directory (the host has a non-directory where the
// upper has a directory's children).
struct CommitDecision {
  std::string rel;
  CommitAction action = CommitAction::kRefuse;
  std::string reason;     // kRefuse only
  bool opaque = false;    // kMkdir/kKeepDir of an opaque directory: host children not in the
                          // upper are deleted first
  std::size_t entry = 0;  // index into the listing
  // Held for an answer (issue 34): the id and file:line of the `ask` path rule that matched. The
  // action is what approval installs; until then the entry stays in the upper layer.
  std::string hold{}, hold_source{};
};

// Pure: the listing (with host facts) and the rules in, one decision per entry out, in the
// listing's order. A refused directory refuses everything below it (below_refused). An entry
// the rules would land that an `ask` rule of rules.approval_paths matches is held (hold set), as
// is a change that would take host entries below it with it (a deleted or opaque directory, a
// file in a directory's place) when a rule could match one of them, and everything below a held
// directory; one a `deny` rule matches is refused (approval_denied).
std::vector<CommitDecision> PlanCommit(std::span<const UpperEntry> upper, const CommitRules& rules);

// What a commit remembers between commit points of a long-lived process, whose overlay stays
// mounted: for each path it installed, the upper inode as it was then and the host inode it
// left. An upper entry unchanged since is skipped; a host inode that is no longer the one the
// commit left was changed by the host since (a conflict if the upper changed too).
struct LedgerEntry {
  InodeSig upper;
  InodeSig host;
};
using CommitLedger = std::map<std::string, LedgerEntry>;

struct CommitOptions {
  // The overlay is no longer mounted and the upper layer is on the host tree's filesystem: a
  // file is installed by renaming it out of the upper layer. Otherwise it is copied (temporary
  // file in the target directory, fsync, rename).
  bool rename_from_upper = false;
  // Host entries changed at or after this (ctime, ChangeWindowStart at launch) were changed by
  // someone else while the process ran: where the upper changed them too, the host's version is
  // kept and the upper's goes to the quarantine (conflict).
  std::int64_t window_start_ns = 0;
  std::string quarantine_dir;  // absolute; made 0700 when missing
  // Hash (SHA-256) files up to this size for the change record's before/after.
  std::uint64_t hash_cap = 16u << 20;
  bool fsync = true;
  // A deletion (a whiteout, an opaque directory's clearing, a file replacing a directory) that
  // would take a protected entry, a `.git` or a path of `repo_protected` with it is refused at
  // apply time: PlanCommit cannot see what the host holds below a deleted directory.
  CommitRules rules;
  // The opaque mark ListUpper read. With rename_from_upper, once an opaque directory's host
  // children are cleared the mark is removed from the upper directory, so that a commit run again
  // after an interruption does not clear the children it has installed since.
  std::string opaque_xattr = "user.overlay.opaque";
  // [audit] before_images: each regular file the commit replaces or deletes is kept here first
  // (read through the descriptor it hashed). Null: off. A store failure is recorded in the
  // change (before_image), never the commit's.
  BeforeImageStore* before_images = nullptr;
};

struct RefusedEntry {
  std::string rel;
  std::string reason;      // as CommitDecision::reason, or "conflict"
  std::string type;        // file, dir, symlink, whiteout, other
  std::string quarantine;  // where it went (absolute), empty when nothing was kept (a whiteout)
  // git_content: what it would have landed, [{ref, commit, path, rule}] or [{ref, error}].
  Json git = nullptr;
  std::string approval{};  // approval_denied: the approval record's id (empty: a deny rule)
};

struct CommitOutcome {
  std::vector<FileChange> changes;  // what reached the host tree, sorted by path
  std::vector<RefusedEntry> refused;
  std::vector<std::string> conflicts;  // rel paths where the host's version was kept
  // Set when the commit could not complete: every path not done is in `not_done`, the call
  // fails and the session stops launching (fail closed, never a silent partial).
  std::optional<Error> error;
  std::vector<std::string> not_done;
};

// Installs the decisions into the host tree below `root_fd`, from the upper layer below
// `upper_fd`, through descriptors only (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS for every
// parent, O_NOFOLLOW, renameat2, unlinkat; mode bits set through the open descriptor, set-id
// bits never). Refused entries (and conflicts) are moved to the quarantine. Idempotent: applying
// the same decisions again after an interruption finishes the commit (a journal re-runs it).
// `ledger` is given for a live overlay (rename_from_upper false): entries unchanged since the
// last commit are skipped, and it is updated.
CommitOutcome ApplyCommit(int root_fd, int upper_fd, std::span<const UpperEntry> upper,
                          std::span<const CommitDecision> decisions, const CommitOptions& opts,
                          CommitLedger* ledger = nullptr);

// A path as a record shows it: valid UTF-8 as it is; otherwise each backslash doubled and each
// byte that is not part of a valid UTF-8 sequence written \xHH (lowercase hex), with *escaped
// set (the record then says "path_escaped": true). Two names that differ only in invalid bytes
// stay distinct, and the flag tells an escaped name from a valid one spelling "\xff".
std::string EscapePathBytes(std::string_view path, bool* escaped = nullptr);

// The `changes` field of a process record from a commit, in the shape ChangeRecorder::Record
// gives (entries, counts, omitted, concurrent, git), plus `workspace_mode: "staged"`, the
// `refused` entries and the `conflicts`, each list cut at `max_entries` with its omitted count.
// `root_prefix`: empty for the workspace (paths stay relative), else the root's absolute path.
Json StagedChangesJson(const CommitOutcome& outcome, std::size_t max_entries = 200,
                       const std::string& root_prefix = "");

}  // namespace cordon
