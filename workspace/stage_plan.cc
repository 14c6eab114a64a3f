// The staged commit's pure part: one decision per upper-layer entry from the one set of rules,
// and the record of what a commit did (workspace/stage.h). No syscalls.
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "policy/git_rules.h"
#include "policy/policy.h"
#include "workspace/stage.h"
#include "workspace/stage_fs.h"

namespace cordon {
namespace {

using stage::HasComponent;
using stage::IsBelow;
using stage::LeafOf;

bool RepoExecutes(std::string_view rel, const CommitRules& rules) {
  return std::any_of(rules.repo_protected.begin(), rules.repo_protected.end(),
                     [&](const std::string& p) { return rel == p || IsBelow(rel, p); });
}

// HEAD, commondir and gitdir make git take their directory for a repository (a bare one needs no
// `.git`), whose config host git would obey: outside a `.git` directory they are refused, as the
// file tools refuse them (tools/registry.cc ResolveWritablePath).
bool PlantsBareRepository(std::string_view rel) {
  const std::string_view base = LeafOf(rel);
  return (base == "HEAD" || base == "commondir" || base == "gitdir") &&
         !HasComponent(stage::ParentOf(rel), ".git");
}

CommitDecision Refuse(const UpperEntry& e, std::size_t i, const char* reason) {
  return {e.rel, CommitAction::kRefuse, reason, false, i};
}

// A directory inside a git directory may be made only where git's shared directories are
// (objects/, refs/, logs/ and what is below them): the git rule speaks of files, so ask it about
// a name inside the directory.
bool GitAllowsDir(std::string_view rel) { return GitRuleAllowsWrite(std::string(rel) + "/x"); }

// A path inside a directory git takes for a repository although it is not named `.git`
// (CommitRules::git_dirs, new_git_dirs): what the git rules refuse there, and in a new one its
// HEAD too. Empty when the path may land.
const char* RepositoryDirRule(std::string_view rel, bool dir, const CommitRules& rules) {
  // A directory is asked about through a name inside it, as GitAllowsDir does.
  auto writable = [&](std::string_view sub) {
    return dir ? IsGitWritable(std::string(sub) + "/x") : IsGitWritable(sub);
  };
  for (const auto& g : rules.git_dirs) {
    if (IsBelow(rel, g) && !writable(rel.substr(g.empty() ? 0 : g.size() + 1)))
      return "git_metadata";
  }
  for (const auto& g : rules.new_git_dirs) {
    if (!IsBelow(rel, g)) continue;
    const std::string_view sub = rel.substr(g.empty() ? 0 : g.size() + 1);
    if (sub == "HEAD" || !writable(sub)) return "new_git_dir";
  }
  return nullptr;
}

// A part of the minimum structure of a git directory not named `.git` (CommitRules::git_dirs).
bool InGitDirStructure(std::string_view rel, const CommitRules& rules) {
  return std::any_of(rules.git_dirs.begin(), rules.git_dirs.end(), [&](const std::string& g) {
    return IsBelow(rel, g) && IsGitDirStructure(rel.substr(g.empty() ? 0 : g.size() + 1));
  });
}

// At or below a masked path (CommitRules::masked).
bool Masked(std::string_view rel, const CommitRules& rules) {
  return std::any_of(rules.masked.begin(), rules.masked.end(),
                     [&](const std::string& m) { return rel == m || IsBelow(rel, m); });
}

// An ancestor of a masked path: deleting or replacing it would take the masked path with it.
bool HoldsMasked(std::string_view rel, const CommitRules& rules) {
  return std::any_of(rules.masked.begin(), rules.masked.end(),
                     [&](const std::string& m) { return IsBelow(m, rel); });
}

CommitDecision Decide(const UpperEntry& e, std::size_t i, const CommitRules& rules) {
  const std::string_view rel = e.rel;
  const bool is_git = LeafOf(rel) == ".git";
  if (Masked(rel, rules)) return Refuse(e, i, "masked_path");
  if (HoldsMasked(rel, rules) && (e.kind != UpperKind::kDir || e.opaque))
    return Refuse(e, i, "masked_path");
  if (const char* why = RepositoryDirRule(rel, e.kind == UpperKind::kDir, rules))
    return Refuse(e, i, why);
  if (e.kind == UpperKind::kWhiteout) {
    // Deleting what the rules protect is as forbidden as writing it: a whiteout of .git/config
    // or .vscode/ would otherwise reach the host as a deletion.
    if (IsProtectedPath(rel, rules.extra_protected)) return Refuse(e, i, "protected_path");
    if (is_git || !GitRuleAllowsWrite(rel)) return Refuse(e, i, "git_metadata");
    // A repository's HEAD, objects/ or refs/: without one, host git takes the directory for no
    // repository and falls through to a parent directory's (rm .git/HEAD).
    if (IsGitRepositoryStructure(rel) || InGitDirStructure(rel, rules))
      return Refuse(e, i, "git_metadata");
    if (RepoExecutes(rel, rules)) return Refuse(e, i, "repo_executes");
    // Also when the host has nothing there: the decision is the record that the process deleted
    // it; ApplyCommit finds nothing and records no change.
    return {e.rel, CommitAction::kDelete, "", false, i};
  }
  if (e.kind == UpperKind::kOther) return Refuse(e, i, "special_file");
  if (IsProtectedPath(rel, rules.extra_protected)) return Refuse(e, i, "protected_path");
  if (RepoExecutes(rel, rules)) return Refuse(e, i, "repo_executes");
  if (is_git) {
    // Only a git directory the host already has may be written into; a new one (or one that
    // replaces the host's: rm -rf .git && git init) is a repository whose config host git obeys.
    if (e.host == HostKind::kMissing) return Refuse(e, i, "new_git_dir");
    // A host `.git` file points git at a git directory: rewriting it redirects git (metadata);
    // a directory in its place is a git directory the host does not have.
    if (e.host != HostKind::kDir) {
      return Refuse(e, i, e.kind == UpperKind::kDir ? "new_git_dir" : "git_metadata");
    }
    if (e.kind != UpperKind::kDir) return Refuse(e, i, "git_metadata");
    if (e.opaque) return Refuse(e, i, "new_git_dir");
  }
  if (e.kind == UpperKind::kDir) {
    const bool host_dir = e.host == HostKind::kDir;
    // An existing directory that was only copied up is not a write; a new one (or the opaque
    // replacement of one) inside a git directory is.
    if ((!host_dir || e.opaque) && !GitAllowsDir(rel)) return Refuse(e, i, "git_metadata");
    // objects/ or refs/ emptied and made again (rm -rf .git/objects; mkdir .git/objects): no
    // git command does that; it would lose the repository's history or every branch.
    if (e.opaque && (IsGitRepositoryStructure(rel) || InGitDirStructure(rel, rules)))
      return Refuse(e, i, "git_metadata");
    // Set-id and sticky bits on a directory are not installed (ApplyCommit sets mode & 0777):
    // refusing the directory would refuse everything the process wrote below it.
    if (host_dir && !e.opaque) {
      const bool chmod = (e.mode & 0777) != (e.host_sig.mode & 0777);
      // A git directory, or its objects/ or refs/, that its owner can no longer read or search
      // (chmod 000 .git/objects): an ordinary user's git takes the directory for no repository
      // and falls through to a parent directory's.
      if (chmod && (e.mode & 0700) != 0700 &&
          (is_git || IsGitRepositoryStructure(rel) || InGitDirStructure(rel, rules)))
        return Refuse(e, i, "git_metadata");
      return {e.rel, chmod ? CommitAction::kChmod : CommitAction::kKeepDir, "", false, i};
    }
    if (e.host == HostKind::kMissing) return {e.rel, CommitAction::kMkdir, "", e.opaque, i};
    if (host_dir) return {e.rel, CommitAction::kKeepDir, "", true, i};
    // The host has a non-directory here. The overlay shows a directory made in place of a deleted
    // file as opaque; a plain one means the host changed after the mount.
    if (!e.opaque) return Refuse(e, i, "not_a_directory");
    return {e.rel, CommitAction::kMkdir, "", true, i};
  }
  if (!GitRuleAllowsWrite(rel) || PlantsBareRepository(rel) || e.unreadable_head)
    return Refuse(e, i, "git_metadata");
  // git writes through a symlink in its directory (a reflog is appended with O_APPEND):
  // logs/HEAD -> ../hooks/post-commit would add a line the agent words (a branch name, a commit
  // subject) to a hook. git itself makes none there. (Found by the adversary pass, wt-adv.)
  if (e.kind == UpperKind::kSymlink && HasComponent(stage::ParentOf(rel), ".git"))
    return Refuse(e, i, "git_metadata");
  // A lock file git left (a process ended in the middle of a git command) would stop host git
  // ("index.lock exists"): it stays out of the tree.
  if (HasComponent(rel, ".git") && rel.size() > 5 && rel.substr(rel.size() - 5) == ".lock")
    return Refuse(e, i, "git_lock");
  // seccomp already refuses set-id modes inside; this is the second wall, and a record.
  if (e.kind == UpperKind::kFile && (e.mode & (S_ISUID | S_ISGID)) != 0) {
    return Refuse(e, i, "setid_bits");
  }
  return {e.rel, CommitAction::kInstall, "", false, i};
}

// The length of the valid UTF-8 sequence at s[i], 0 when the byte there starts none (overlong
// forms, surrogates and code points past U+10FFFF are invalid).
std::size_t Utf8SeqLen(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n;
  std::uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

bool ValidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = Utf8SeqLen(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Sets `key` to the path as shown, and path_escaped when it had to be escaped.
void PutPath(Json& j, const char* key, const std::string& path) {
  bool escaped = false;
  j[key] = EscapePathBytes(path, &escaped);
  if (escaped) j["path_escaped"] = true;
}

}  // namespace

namespace stage {

bool DeletionTakesProtected(std::string_view rel, const CommitRules& rules) {
  return Masked(rel, rules) || HoldsMasked(rel, rules) ||
         IsProtectedPath(rel, rules.extra_protected) || !GitRuleAllowsWrite(rel) ||
         LeafOf(rel) == ".git" || RepoExecutes(rel, rules);
}

}  // namespace stage

std::vector<CommitDecision> PlanCommit(std::span<const UpperEntry> upper,
                                       const CommitRules& rules) {
  std::vector<CommitDecision> out;
  out.reserve(upper.size());
  // Refused directories: whatever is below one is refused with it. Looked up by each ancestor,
  // so the result does not depend on siblings being adjacent in the listing.
  std::set<std::string, std::less<>> refused;
  // Held directories (issue 34): what is below one is held with it, by its rule.
  std::map<std::string, std::pair<std::string, std::string>, std::less<>> held;
  for (std::size_t i = 0; i < upper.size(); ++i) {
    const UpperEntry& e = upper[i];
    bool below = false;
    for (std::string_view p = stage::ParentOf(e.rel); !p.empty() && !below;
         p = stage::ParentOf(p)) {
      below = refused.find(p) != refused.end();
    }
    CommitDecision d = below ? Refuse(e, i, "below_refused") : Decide(e, i, rules);
    if (d.action != CommitAction::kRefuse && !rules.approval_paths.empty()) {
      const std::pair<std::string, std::string>* under = nullptr;
      for (std::string_view p = stage::ParentOf(e.rel); !p.empty() && under == nullptr;
           p = stage::ParentOf(p)) {
        if (auto it = held.find(p); it != held.end()) under = &it->second;
      }
      if (under != nullptr) {
        d.hold = under->first;
        d.hold_source = under->second;
      } else if (d.action != CommitAction::kKeepDir || d.opaque) {
        // A change (a directory only copied up is none): the entry's own path, and what it
        // would take with it from the host.
        const ApprovalMatch m = EvaluatePath(rules.approval_paths, e.rel);
        const ApprovalRule* rule = m.decision != ApprovalDecision::kAllow ? m.rule : nullptr;
        if (e.below_rule >= 0 &&
            static_cast<std::size_t>(e.below_rule) < rules.approval_paths.size()) {
          const ApprovalRule& b = rules.approval_paths[e.below_rule];
          if (rule == nullptr ||
              ApprovalStrictness(b.decision) > ApprovalStrictness(rule->decision))
            rule = &b;
        }
        // A symlink (`ln -s src deploy`) or a directory's new mode (`chmod 777 deploy`) reaches
        // what is below it: held when a rule names what it leads to.
        if (e.kind == UpperKind::kSymlink || d.action == CommitAction::kChmod) {
          for (const ApprovalRule& r : rules.approval_paths) {
            if (r.decision == ApprovalDecision::kAllow || !RuleReachesThrough(r, e.rel)) continue;
            if (rule == nullptr ||
                ApprovalStrictness(r.decision) > ApprovalStrictness(rule->decision))
              rule = &r;
          }
        }
        if (rule != nullptr && rule->decision == ApprovalDecision::kDeny) {
          d = Refuse(e, i, "approval_denied");
        } else if (rule != nullptr) {
          d.hold = rule->id;
          d.hold_source = rule->where;
        }
      }
    }
    if (d.action == CommitAction::kRefuse && e.kind == UpperKind::kDir) refused.insert(e.rel);
    if (!d.hold.empty() && e.kind == UpperKind::kDir)
      held.emplace(e.rel, std::pair(d.hold, d.hold_source));
    out.push_back(std::move(d));
  }
  // A file with other links shares its inode with them: when one name is held, the others wait
  // with it (`ln deploy/a notes.txt` would otherwise land notes.txt now, and a write to it later
  // would change the held file).
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::pair<std::string, std::string>> linked;
  for (const CommitDecision& d : out) {
    const UpperEntry& e = upper[d.entry];
    if (!d.hold.empty() && e.kind == UpperKind::kFile && e.nlink > 1)
      linked.emplace(std::pair(e.sig.dev, e.sig.ino), std::pair(d.hold, d.hold_source));
  }
  if (!linked.empty()) {
    for (CommitDecision& d : out) {
      const UpperEntry& e = upper[d.entry];
      if (!d.hold.empty() || d.action != CommitAction::kInstall || e.kind != UpperKind::kFile ||
          e.nlink < 2)
        continue;
      if (auto it = linked.find(std::pair(e.sig.dev, e.sig.ino)); it != linked.end()) {
        d.hold = it->second.first;
        d.hold_source = it->second.second;
      }
    }
  }
  return out;
}

std::string EscapePathBytes(std::string_view path, bool* escaped) {
  const bool valid = ValidUtf8(path);
  if (escaped != nullptr) *escaped = !valid;
  if (valid) return std::string(path);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(path.size() + 16);
  for (std::size_t i = 0; i < path.size();) {
    const std::size_t n = Utf8SeqLen(path, i);
    if (n == 0) {
      const auto c = static_cast<unsigned char>(path[i]);
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    } else if (path[i] == '\\') {
      out += "\\\\";
      ++i;
    } else {
      out.append(path.substr(i, n));
      i += n;
    }
  }
  return out;
}

Json StagedChangesJson(const CommitOutcome& outcome, std::size_t max_entries,
                       const std::string& root_prefix) {
  static constexpr const char* kKinds[] = {"created", "modified",     "touched", "deleted",
                                           "renamed", "mode_changed", "linked"};
  const auto shown = [&](const std::string& rel) {
    return root_prefix.empty() ? rel : root_prefix + "/" + rel;
  };
  Json counts = Json::object(), git = Json::object();
  for (const char* k : kKinds) counts[k] = 0;
  Json entries = Json::array();
  std::size_t listed = 0;
  std::uint64_t omitted = 0;
  for (const FileChange& c : outcome.changes) {
    const std::uint64_t n = 1 + c.below;
    std::string kind = c.kind;
    // The same bytes with the same mode: as ChangeRecorder::Record, a rewrite is "touched".
    if (kind == "modified" && c.sha256_before && c.sha256_after &&
        *c.sha256_before == *c.sha256_after && !c.mode_before) {
      kind = "touched";
    }
    if (c.git) {  // inside a git directory: counted, not listed
      git[kind] = git.value(kind, std::uint64_t{0}) + n;
      continue;
    }
    counts[kind] = counts[kind].get<std::uint64_t>() + n;
    if (listed >= max_entries) {
      omitted += n;
      continue;
    }
    ++listed;
    Json j = {{"kind", kind}, {"type", c.type}};
    PutPath(j, "path", shown(c.path));
    if (c.bytes_before) j["bytes_before"] = *c.bytes_before;
    if (c.bytes_after) j["bytes_after"] = *c.bytes_after;
    if (c.mode_before && c.mode_after) {
      j["mode_before"] = OctalMode(*c.mode_before);
      j["mode_after"] = OctalMode(*c.mode_after);
    }
    if (c.below > 0) j["below"] = c.below;
    if (c.sha256_before) j["sha256_before"] = *c.sha256_before;
    if (c.sha256_after) j["sha256_after"] = *c.sha256_after;
    if (!c.before_image.empty()) j["before_image"] = c.before_image;
    if (!c.before_image_error.empty()) j["before_image_error"] = c.before_image_error;
    if (!c.approval.empty()) j["approval"] = c.approval;
    entries.push_back(std::move(j));
  }
  Json refused = Json::array();
  for (std::size_t i = 0; i < outcome.refused.size() && i < max_entries; ++i) {
    const RefusedEntry& r = outcome.refused[i];
    Json j = {{"reason", r.reason}, {"type", r.type}};
    PutPath(j, "path", shown(r.rel));
    bool q_escaped = false;
    j["quarantine"] = EscapePathBytes(r.quarantine, &q_escaped);
    if (q_escaped) j["path_escaped"] = true;
    if (!r.git.is_null()) j["git"] = r.git;
    if (!r.approval.empty()) j["approval"] = r.approval;
    refused.push_back(std::move(j));
  }
  Json conflicts = Json::array();
  for (std::size_t i = 0; i < outcome.conflicts.size() && i < max_entries; ++i) {
    conflicts.push_back(EscapePathBytes(shown(outcome.conflicts[i])));
  }
  const auto rest = [&](std::size_t n) { return n > max_entries ? n - max_entries : 0; };
  Json out = {{"entries", std::move(entries)},
              {"counts", std::move(counts)},
              {"omitted", omitted},
              {"concurrent", false},
              {"workspace_mode", "staged"},
              {"refused", std::move(refused)},
              {"refused_omitted", rest(outcome.refused.size())},
              {"conflicts", std::move(conflicts)},
              {"conflicts_omitted", rest(outcome.conflicts.size())}};
  if (!git.empty()) out["git"] = std::move(git);
  if (outcome.error) {
    out["error"] = {{"code", CodeName(outcome.error->code)},
                    {"message", EscapePathBytes(outcome.error->message)}};
    Json not_done = Json::array();
    for (std::size_t i = 0; i < outcome.not_done.size() && i < max_entries; ++i) {
      not_done.push_back(EscapePathBytes(shown(outcome.not_done[i])));
    }
    out["not_done"] = std::move(not_done);
    out["not_done_omitted"] = rest(outcome.not_done.size());
  }
  return out;
}

Json NameJson(const std::string& name) {
  bool changed = false;
  (void)RepairUtf8(name, &changed);
  if (!changed) return name;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : name) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return Json{{"hex", hex}};
}

Result<std::string> NameFromJson(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  const auto bad = [] {
    return Fail(Code::kInvalidInput, "a name of the commit rules is malformed");
  };
  if (!j.is_object() || j.size() != 1 || !j.contains("hex") || !j["hex"].is_string()) return bad();
  const std::string hex = j["hex"].get<std::string>();
  if (hex.size() % 2 != 0) return bad();
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const auto nibble = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return bad();
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

namespace {

Json NamesJson(const std::vector<std::string>& names) {
  Json out = Json::array();
  for (const auto& n : names) out.push_back(NameJson(n));
  return out;
}

Result<std::vector<std::string>> NamesFromJson(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array())
    return Fail(Code::kInvalidInput, std::string("the commit rules lack ") + key);
  std::vector<std::string> out;
  for (const Json& n : *it) {
    ASSIGN_OR_RETURN(std::string name, NameFromJson(n));
    out.push_back(std::move(name));
  }
  return out;
}

}  // namespace

Json CommitRulesJson(const CommitRules& rules) {
  // Every field, by position: a field added to CommitRules stops this from compiling.
  const auto& [extra_protected, protected_from, repo_protected, git_dirs, new_git_dirs, masked,
               xattr_allow, approval_paths] = rules;
  Json from = Json::array();
  for (const auto& [name, where] : protected_from)
    from.push_back(Json::array({NameJson(name), NameJson(where)}));
  Json approvals = Json::array();
  for (const ApprovalRule& r : approval_paths) {
    approvals.push_back({{"id", r.id},
                         {"decision", std::string(Name(kApprovalDecisionNames, r.decision))},
                         {"path", NameJson(r.pattern)},
                         {"where", NameJson(r.where)},
                         {"layer", static_cast<int>(r.layer)},
                         {"reason", NameJson(r.reason)}});
  }
  return {
      {"extra_protected", NamesJson(extra_protected)}, {"protected_from", std::move(from)},
      {"repo_protected", NamesJson(repo_protected)},   {"git_dirs", NamesJson(git_dirs)},
      {"new_git_dirs", NamesJson(new_git_dirs)},       {"masked", NamesJson(masked)},
      {"xattr_allow", NamesJson(xattr_allow)},         {"approval_paths", std::move(approvals)}};
}

Result<CommitRules> CommitRulesFromJson(const Json& j) {
  // A stage made before xattr_allow existed has six fields: it installs no extended attribute;
  // one made before approval_paths, seven: it holds nothing for an answer.
  const bool has_xattr_allow = j.is_object() && j.contains("xattr_allow");
  const bool has_approvals = j.is_object() && j.contains("approval_paths");
  if (!j.is_object() || j.size() != 6u + has_xattr_allow + has_approvals)
    return Fail(Code::kInvalidInput, "the commit rules are not an object of their eight fields");
  CommitRules rules;
  auto& [extra_protected, protected_from, repo_protected, git_dirs, new_git_dirs, masked,
         xattr_allow, approval_paths] = rules;
  if (has_approvals) {
    const Json& list = j["approval_paths"];
    const auto bad = [] {
      return Fail(Code::kInvalidInput, "an approval rule of the commit rules is malformed");
    };
    if (!list.is_array()) return bad();
    for (const Json& r : list) {
      if (!r.is_object() || !r.contains("id") || !r["id"].is_string() || !r.contains("decision") ||
          !r["decision"].is_string() || !r.contains("layer") || !r["layer"].is_number_integer() ||
          !r.contains("path") || !r.contains("where") || !r.contains("reason"))
        return bad();
      ApprovalRule rule;
      rule.id = r["id"].get<std::string>();
      ASSIGN_OR_RETURN(rule.decision, ParseName(kApprovalDecisionNames,
                                                r["decision"].get<std::string>(), "decision"));
      rule.matcher = ApprovalMatcher::kPath;
      ASSIGN_OR_RETURN(rule.pattern, NameFromJson(r["path"]));
      ASSIGN_OR_RETURN(rule.where, NameFromJson(r["where"]));
      ASSIGN_OR_RETURN(rule.reason, NameFromJson(r["reason"]));
      rule.layer = static_cast<PolicyLayer>(r["layer"].get<int>());
      approval_paths.push_back(std::move(rule));
    }
  }
  if (has_xattr_allow) {
    ASSIGN_OR_RETURN(xattr_allow, NamesFromJson(j, "xattr_allow"));
  }
  ASSIGN_OR_RETURN(extra_protected, NamesFromJson(j, "extra_protected"));
  ASSIGN_OR_RETURN(repo_protected, NamesFromJson(j, "repo_protected"));
  ASSIGN_OR_RETURN(git_dirs, NamesFromJson(j, "git_dirs"));
  ASSIGN_OR_RETURN(new_git_dirs, NamesFromJson(j, "new_git_dirs"));
  ASSIGN_OR_RETURN(masked, NamesFromJson(j, "masked"));
  const auto from = j.find("protected_from");
  if (from == j.end() || !from->is_array())
    return Fail(Code::kInvalidInput, "the commit rules lack protected_from");
  for (const Json& pair : *from) {
    if (!pair.is_array() || pair.size() != 2)
      return Fail(Code::kInvalidInput, "a protected_from entry of the commit rules is malformed");
    ASSIGN_OR_RETURN(std::string name, NameFromJson(pair[0]));
    ASSIGN_OR_RETURN(protected_from[name], NameFromJson(pair[1]));
  }
  return rules;
}

}  // namespace cordon
