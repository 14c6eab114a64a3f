// cordon doctor: can this host confine processes, and the remedy for each missing piece.
#include "runner/doctor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "audit/audit.h"
#include "audit/checkpoint.h"
#include "audit/knowledge.h"
#include "cli/common.h"
#include "cli/terminal_asker.h"
#include "core/text.h"
#include "runner/launch.h"
#include "tools/curl_loader.h"
#include "workspace/credential_stores.h"
#include "workspace/secret_files.h"
#include "workspace/staging.h"

namespace cordon::cli {
namespace {

// `required`: a failure makes doctor fail (FAIL, exit 1), not only warn.
Json Check(std::string name, bool pass, std::string detail, std::string remedy,
           bool required = false) {
  return {{"name", std::move(name)},
          {"ok", pass},
          {"required", required},
          {"detail", std::move(detail)},
          {"remedy", pass ? std::string() : std::move(remedy)}};
}

std::string Joined(const auto& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Issue 19: the secret detectors are data, the [[redact.rules]] of policies.d/10-secrets.toml.
// An install without that file would start every session with no rules and say nothing, so a
// policy without rules fails the check. Only the policy files of this directory are read (no
// workspace walk: the secret-file scan is a session's, at its start).
Json RedactionCheck() {
  const std::string shipped = ShippedPolicyDir();
  std::error_code ec;
  const std::string here = std::filesystem::current_path(ec).string();
  auto policy = LoadPolicy(DefaultPolicySources(shipped, ec ? std::string() : here));
  if (!policy) {
    return Check("redaction", false,
                 "the policy does not load, so no session starts: " + policy.error().message,
                 "fix the file and line the message names", true);
  }
  PrintPolicyWarnings(*policy);
  const RedactRules* rules = policy->compiled_redact_rules.get();
  std::vector<std::string> layers;
  for (const auto& f : policy->files) layers.push_back(f.path);
  if (rules == nullptr || rules->size() == 0) {
    return Check("redaction", false,
                 "NO redaction rules: the policy (" +
                     (layers.empty() ? std::string("no files") : Joined(layers)) +
                     ") has no [[redact.rules]], so private keys, tokens and passwords would "
                     "reach agents and the audit log as written (only exact values, such as "
                     "secret-named environment variables and redact.values, and the lines of "
                     "files named like .env or *.pem would be hidden)",
                 "reinstall cordon: its rules ship as " + shipped +
                     "/10-secrets.toml (docs/policy.md, \"Redaction\")",
                 true);
  }
  std::set<std::string> from;
  std::vector<std::string> always, on_runs;
  for (const RedactRule& r : rules->rules()) {
    from.insert(r.where.substr(0, r.where.rfind(':')));
    if (r.keywords.empty() && !r.token_runs) always.push_back(r.id);
    if (r.keywords.empty() && r.token_runs) on_runs.push_back(r.id);
  }
  const SecretScanLimits limits;
  const std::string scan =
      policy->redact_scan_files
          ? "on (at session start: at most " + std::to_string(limits.max_entries) + " entries, " +
                std::to_string(limits.max_file_bytes >> 20) + " MiB a file, " +
                std::to_string(limits.max_total_bytes >> 20) + " MiB in all)"
          : "OFF (redact.scan_files = false, " + policy->provenance["redact.scan_files"] +
                "): the lines of the workspace's secret files are hidden only where a rule finds "
                "them";
  // [redact] rule_files: what each gave, and how many of its rules were skipped (the notes of
  // `cordon policy show` say which and why).
  std::vector<std::string> rule_files;
  for (const auto& f : policy->redact_rule_file_counts) {
    rule_files.push_back(f.path + ": " + std::to_string(f.loaded) + " loaded, " +
                         std::to_string(f.skipped) + " skipped");
  }
  const std::string from_files =
      rule_files.empty() ? std::string()
                         : "; rule files (gitleaks format): " + Joined(rule_files) +
                               (std::any_of(policy->redact_rule_file_counts.begin(),
                                            policy->redact_rule_file_counts.end(),
                                            [](const auto& f) { return f.skipped > 0; })
                                    ? " (`cordon policy show` names each skipped rule and why)"
                                    : "");
  return Check("redaction", true,
               std::to_string(rules->size()) + " redaction rules from " + Joined(from) +
                   from_files + "; without keywords (run on every text): " +
                   (always.empty() ? std::string("none") : Joined(always)) +
                   "; on runs of token characters only: " +
                   (on_runs.empty() ? std::string("none") : Joined(on_runs)) +
                   "; workspace secret-file scan: " + scan,
               "", true);
}

// Issue 32: the session's redaction knowledge (audit/knowledge.h). A session that cannot store
// it starts, but `audit diff` then withholds its diffs: said here, with what the store holds.
Json RedactionKnowledgeCheck() {
  const std::string dir = RedactionKnowledgeDir();
  // Checked without writing (a store would fsync, seconds on a busy disk): the directory is
  // this user's, closed to others, and writable; a missing one is made as a session would.
  std::error_code made;
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path(), made);
  ::mkdir(dir.c_str(), 0700);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0 || ::access(dir.c_str(), W_OK) != 0) {
    return Check("redaction_knowledge", false,
                 dir + " is not a directory this user owns, closed to others and can write: " +
                     "sessions cannot keep their redaction knowledge and `cordon audit diff` "
                     "withholds their diffs",
                 "make " + dir + " a directory this user owns and can write (0700)");
  }
  std::size_t files = 0;
  std::uintmax_t bytes = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    ++files;
    bytes += e.file_size(ec);
  }
  return Check("redaction_knowledge", true,
               dir + " takes each session's redaction knowledge (hashes only, for audit diff): " +
                   std::to_string(files) + " file(s), " + std::to_string(bytes) + " bytes",
               "");
}

// Issue 32, part 5: the session-start scan of the current directory as a workspace (its cache
// warmed as a session would): how long it takes and whether a limit stopped it, since what lies
// past the limit is not known to the redactor.
Json SecretFileScanCheck() {
  std::error_code ec;
  const std::string here = std::filesystem::current_path(ec).string();
  if (ec) return Check("secret_file_scan", false, "cannot tell the current directory", "");
  auto policy = LoadPolicy(DefaultPolicySources(ShippedPolicyDir(), here));
  if (!policy) return Check("secret_file_scan", false, policy.error().message, "fix the policy");
  if (!policy->redact_scan_files) {
    return Check("secret_file_scan", true, "[redact] scan_files = false: no scan", "");
  }
  UniqueFd root(::open(here.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return Check("secret_file_scan", false, "cannot open " + here, "");
  Redactor shapes(policy->compiled_redact_rules);
  auto scan = ScanSecretFiles(root.get(), shapes, SecretScanLimits{}, SecretScanCacheFile(here));
  if (!scan) return Check("secret_file_scan", false, scan.error().message, "");
  const std::string detail = "a session in " + here + " scans " + std::to_string(scan->entries) +
                             " entries in " + std::to_string(static_cast<long>(scan->ms)) +
                             " ms (" + std::to_string(scan->cached_files) +
                             " files from the cache, " + std::to_string(scan->read_files) +
                             " read), beside the session's start: the first output waits for "
                             "it, never passes without it; " +
                             std::to_string(scan->files.size()) + " secret file(s)";
  if (scan->truncated) {
    return Check("secret_file_scan", false,
                 detail + "; STOPPED at a limit: secret files past it are not known",
                 "deny or move the large trees under this directory (SECURITY.md, \"Files the "
                 "scan does not reach\")");
  }
  return Check("secret_file_scan", true, detail, "");
}

// Issue 32: the user's credential stores, read by value at each session start. Says which stores
// were read and how many values each gave or skipped (never a value), and fails when a store the
// policy reads is not denied to the sandbox.
Json CredentialStoresCheck() {
  std::error_code ec;
  const std::string here = std::filesystem::current_path(ec).string();
  auto policy = LoadPolicy(DefaultPolicySources(ShippedPolicyDir(), ec ? std::string() : here));
  if (!policy) return Check("credential_stores", false, policy.error().message, "fix the policy");
  if (policy->redact_credential_stores.empty()) {
    return Check("credential_stores", false,
                 "[redact] credential_stores is empty: the secrets of the user's credential stores "
                 "are hidden only where a shape rule finds them",
                 "reinstall cordon: its list ships in policies.d/00-default.toml");
  }
  const char* home = std::getenv("HOME");
  const CredentialScan scan =
      ReadCredentialStores(policy->redact_credential_stores, home != nullptr ? home : "");
  std::vector<std::string> read, absent, problems, undenied;
  for (const StoreReport& r : scan.stores) {
    if (r.state == "missing") {
      absent.push_back(r.path);
    } else if (r.state == "read") {
      read.push_back(r.path + " (" + std::to_string(r.values) + " values" +
                     (r.skipped > 0 ? ", " + std::to_string(r.skipped) + " below the floor" : "") +
                     ")");
    } else {
      problems.push_back(r.path + " (" + r.state + ")");
    }
  }
  const auto& deny = policy->filesystem.deny;
  for (const auto& s : policy->redact_credential_stores) {
    if (!DenyCovers(deny, s)) undenied.push_back(s);
  }
  std::string detail = std::to_string(scan.values.size()) +
                       " secret values known by value (\"[REDACTED:credential]\", with their hex, "
                       "URL-encoded and base64 forms), read in " +
                       std::to_string(static_cast<long>(scan.ms)) +
                       " ms; read: " + (read.empty() ? std::string("none") : Joined(read)) +
                       "; not present: " + std::to_string(absent.size());
  if (!problems.empty()) detail += "; NOT read: " + Joined(problems);
  if (!undenied.empty()) {
    return Check("credential_stores", false,
                 detail + "; NOT in [filesystem] deny: " + Joined(undenied),
                 "add them to [filesystem] deny");
  }
  return Check("credential_stores", problems.empty(), detail,
               "make the stores readable by the user running cordon, or remove them from "
               "[redact] credential_stores");
}

// Issue 34: the approval rules the policy here loads (ask, allow, deny, and where each comes
// from), and who an `ask` would go to from this shell: the terminal, or no one (CI=true, or no
// controlling terminal), in which case every ask is refused at once.
Json ApprovalsCheck(const Result<Policy>& policy) {
  if (!policy) return Check("approvals", false, policy.error().message, "fix the policy");
  std::size_t by[3] = {0, 0, 0};
  for (const ApprovalRule& r : policy->approval_rules) ++by[static_cast<int>(r.decision)];
  std::string who;
  const ApprovalReply probe = [] {
    ApprovalQuestion none;
    auto asker = AskerFor("exec", false);
    // Only "no one" answers without asking; a terminal asker is not put a question here.
    if (dynamic_cast<NobodyAsker*>(asker.get()) != nullptr) return asker->Ask(none);
    const int fd = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      return ApprovalReply{.answer = ApprovalAnswer::kNoClient,
                           .via = AskedVia::kNone,
                           .why_no_one = "no terminal to ask on"};
    }
    ::close(fd);
    return ApprovalReply{.answer = ApprovalAnswer::kOnce, .via = AskedVia::kTerminal};
  }();
  who = probe.via == AskedVia::kTerminal
            ? "exec and call ask on this terminal"
            : "exec and call would ask no one here (" + probe.why_no_one +
                  "): every ask is refused at once with approval_required";
  // Held commits (part b): what a process changes under a path rule is held at its commit, in
  // the staged workspace only; what waits unanswered is in the held store.
  std::size_t paths = 0, waiting = 0;
  for (const ApprovalRule& r : policy->approval_rules)
    paths += r.matcher == ApprovalMatcher::kPath && r.decision != ApprovalDecision::kAllow;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(StagedWorkspace::HeldRoot(), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++waiting;
  const std::string held =
      std::to_string(paths) + " path rules hold what a process changes under them at its commit " +
      (policy->workspace_mode == WorkspaceMode::kDirect
           ? "only in the staged workspace, and workspace_mode is direct here: they apply to the "
             "file tools only"
           : "(see workspace_staging; in the direct mode they apply to the file "
             "tools only)") +
      "; " + std::to_string(waiting) +
      (waiting == 1 ? " held change waits" : " held changes wait") +
      " for an answer (`cordon approvals list`)";
  return Check("approvals", true,
               std::to_string(policy->approval_rules.size()) + " approval rules (" +
                   std::to_string(by[1]) + " ask, " + std::to_string(by[2]) + " deny, " +
                   std::to_string(by[0]) + " allow; `cordon policy show` lists them); " + who +
                   "; " + held +
                   "; serve over stdio asks a client that declares elicitation; serve --http "
                   "and wrap refuse every ask at once",
               "");
}

// Issue 10, fail closed: the default audit log directory takes files, and its filesystem can
// reserve room ahead of an act (fallocate past the end), which the writer relies on.
Json AuditLogCheck() {
  const std::string path = DefaultAuditLogPath(NewSessionId());
  const std::string dir = path.substr(0, path.rfind('/'));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string probe = dir + "/.cordon-doctor-" + NewSessionId();
  const int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Check("audit_log", false, "cannot create files in " + dir + ": " + std::strerror(errno),
                 "make " + dir + " writable, or pass --audit-log FILE on a writable filesystem");
  }
  const int rc =
      ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(AuditWriter::kReserveBytes));
  const int err = rc == 0 ? 0 : errno;
  struct statvfs sv {};
  const bool have_sv = ::fstatvfs(fd, &sv) == 0;
  ::close(fd);
  ::unlink(probe.c_str());
  const std::string free_mib =
      have_sv ? std::to_string(static_cast<unsigned long long>(sv.f_bavail) * sv.f_frsize >> 20) +
                    " MiB free"
              : "free space unknown";
  if (err != 0) {
    return Check("audit_log", false,
                 "audit logs in " + dir + " (" + free_mib + "): the filesystem cannot reserve " +
                     "room ahead (fallocate: " + std::strerror(err) +
                     "); a full disk after an act then leaves a gap record and stops the session",
                 "put the audit log (--audit-log) on a filesystem with fallocate (ext4, xfs, "
                 "btrfs, tmpfs)");
  }
  return Check(
      "audit_log", true,
      "audit logs in " + dir + ": writable, 64 KiB reserved ahead of each act (" + free_mib + ")",
      "");
}

// Issue 10, checkpoints: OpenSSL can make and check Ed25519 signatures.
Json AuditSigningCheck() {
  auto key = Ed25519Key::Generate();
  if (!key) {
    return Check("audit_checkpoints", false, "Ed25519: " + key.error().message,
                 "install an OpenSSL with Ed25519 (1.1.1 or later)");
  }
  auto sig = key->Sign("cordon doctor");
  const bool pass = sig && key->Verify("cordon doctor", *sig);
  return Check("audit_checkpoints", pass,
               pass ? "signed checkpoints: Ed25519 signs and verifies (cordon audit keygen makes "
                      "a key; --audit-signing-key and --audit-witness use it)"
                    : "Ed25519 signing failed",
               "install an OpenSSL with Ed25519 (1.1.1 or later)");
}

// Issue 12, read_url: libcurl loads (it is dlopen'ed, never linked) and speaks http and https.
Json ReadUrlCheck() {
  constexpr const char* kRemedy =
      "install the Debian package libcurl4 (read_url fetches with it, through the egress proxy)";
  auto api = Curl();
  if (!api) return Check("read_url", false, api.error().message, kRemedy);
  const curl_version_info_data* v = (*api)->version_info(CURLVERSION_NOW);
  bool http = false, https = false;
  for (const char* const* p = v != nullptr ? v->protocols : nullptr; p != nullptr && *p; ++p) {
    http = http || std::strcmp(*p, "http") == 0;
    https = https || std::strcmp(*p, "https") == 0;
  }
  const std::string version = v != nullptr && v->version != nullptr ? v->version : "?";
  if (!http || !https) {
    return Check("read_url", false,
                 "libcurl " + version + " lacks " + (http ? "https" : "http") + " support",
                 kRemedy);
  }
  return Check("read_url", true,
               "libcurl " + version +
                   " loads with http and https (read_url: only through the egress proxy, under "
                   "the net:read scope and read_url's allowed domains)",
               "");
}

// Issue 21, the installed layout: cordon-shim runs every confined process and the shipped policy
// sets the confinement, so another user who could replace either (or rename it away through a
// directory above it) would hold the sandbox. Each, its real path and every directory up to /
// must belong to root or to this user and be writable by no one else (a sticky directory of
// root's, such as /tmp, keeps others from renaming what is not theirs).
Json InstallCheck() {
  const std::string shim = DefaultShimPath();
  const std::string policies = ShippedPolicyDir();
  std::vector<std::string> problems;
  // In a user namespace that does not map root (rootless Podman, a user namespace of one's own),
  // root's files show the overflow uid and gid: an owner outside the namespace, which no one
  // inside can be, as root's are.
  bool child_userns = true;
  if (std::ifstream map("/proc/self/uid_map"); map) {
    std::string inside, outside, count;
    map >> inside >> outside >> count;
    child_userns = !(inside == "0" && outside == "0" && count == "4294967295");
  }
  long overflow_uid = 65534, overflow_gid = 65534;
  if (std::ifstream f("/proc/sys/kernel/overflowuid"); f) f >> overflow_uid;
  if (std::ifstream f("/proc/sys/kernel/overflowgid"); f) f >> overflow_gid;
  auto owned_safely = [&](const std::string& path, bool leaf) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      problems.push_back(path + ": " + std::strerror(errno));
      return;
    }
    if (child_userns && static_cast<long>(st.st_uid) == overflow_uid) st.st_uid = 0;
    if (child_userns && static_cast<long>(st.st_gid) == overflow_gid) st.st_gid = 0;
    const uid_t me = ::geteuid();
    const bool sticky_root_dir =
        !leaf && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0 && st.st_uid == 0;
    if (st.st_uid != 0 && st.st_uid != me) {
      problems.push_back(path + " belongs to uid " + std::to_string(st.st_uid));
    } else if ((st.st_mode & S_IWOTH) != 0 && !sticky_root_dir) {
      problems.push_back(path + " is writable by every user");
    } else if ((st.st_mode & S_IWGRP) != 0 && st.st_gid != 0 && st.st_gid != ::getegid() &&
               !sticky_root_dir) {
      problems.push_back(path + " is writable by group " + std::to_string(st.st_gid));
    }
  };
  auto with_parents = [&](const std::string& path) -> std::string {
    char real[PATH_MAX];
    if (::realpath(path.c_str(), real) == nullptr) {
      problems.push_back(path + ": " + std::strerror(errno));
      return path;
    }
    const std::string r = real;
    owned_safely(r, true);
    for (std::string d = r.substr(0, r.rfind('/')); !d.empty(); d = d.substr(0, d.rfind('/'))) {
      owned_safely(d, false);
    }
    owned_safely("/", false);
    return r;
  };
  const std::string real_shim = with_parents(shim);
  const std::string real_policies = with_parents(policies);
  std::size_t files = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(real_policies, ec)) {
    if (e.path().extension() != ".toml") continue;
    ++files;
    owned_safely(e.path().string(), true);
  }
  if (ec) problems.push_back(real_policies + ": " + ec.message());
  const std::string where = "cordon-shim " + real_shim + " and the shipped policy " +
                            real_policies + " (" + std::to_string(files) + " files)";
  if (!problems.empty()) {
    return Check("install", false, where + ": " + Joined(problems),
                 "reinstall cordon (the package, or cmake --install as root), or make each path "
                 "named writable only by root or you (chmod go-w, chown)",
                 true);
  }
  return Check("install", true, where + ": owned by root or you, writable by no one else", "",
               true);
}

}  // namespace

void AddDoctorCommand(CLI::App& root, Context& ctx) {
  auto json = std::make_shared<bool>(false);
  auto deep = std::make_shared<bool>(false);
  CLI::App* cmd = root.add_subcommand("doctor",
                                      "preflight of bwrap, user namespaces, Landlock, seccomp, "
                                      "cgroups, rg and fd, with the remedy for each missing piece")
                      ->group("Commands");
  auto policies = std::make_shared<std::vector<std::string>>();
  cmd->add_flag("--json", *json, "print the report as JSON");
  cmd->add_option("--policy", *policies,
                  "an extra policy layer (may be repeated): its [sandbox] allow_weaker decides "
                  "whether a weaker mode may run where the full sandbox cannot");
  cmd->add_flag("--deep", *deep,
                "also run the checks that take seconds: as root, the scan of /etc, /usr and /opt "
                "for files only root may read");
  cmd->footer(
      "exits 0 when processes can be confined, the policy has redaction rules and cordon-shim "
      "and the shipped policy are writable by root or you only, 1 when not");
  ctx.run[cmd] = [json, deep, policies]() -> int {
    Json report;
    // The policy here with the --policy layers: its allow_weaker, and its approval rules.
    std::error_code ec;
    const std::string here = std::filesystem::current_path(ec).string();
    PolicySources sources = DefaultPolicySources(ShippedPolicyDir(), ec ? std::string() : here);
    sources.extra_files = *policies;
    const Result<Policy> policy = LoadPolicy(sources);
    const bool allow_weaker = policy && policy->allow_weaker_sandbox;
    const bool confines = RunDoctor(&report, "", *deep, allow_weaker);
    report["checks"].push_back(AuditLogCheck());
    report["checks"].push_back(AuditSigningCheck());
    report["checks"].push_back(ReadUrlCheck());
    report["checks"].push_back(ApprovalsCheck(policy));
    Json install = InstallCheck();
    const bool installed = install["ok"].get<bool>();
    report["checks"].push_back(std::move(install));
    report["checks"].push_back(CredentialStoresCheck());
    report["checks"].push_back(RedactionKnowledgeCheck());
    // It reads the tree below the current directory (seconds in a big one): with --deep only.
    if (*deep) report["checks"].push_back(SecretFileScanCheck());
    Json redaction = RedactionCheck();
    const bool redacts = redaction["ok"].get<bool>();
    report["checks"].push_back(std::move(redaction));
    const bool ok = confines && redacts && installed;
    report["ok"] = ok;
    if (*json) {
      std::cout << DumpJson(report, 2) << std::endl;
    } else {
      for (const auto& c : report["checks"]) {
        const bool pass = c["ok"].get<bool>();
        std::cout << (pass ? "ok    " : (c["required"].get<bool>() ? "FAIL  " : "warn  "))
                  << c["name"].get<std::string>() << ": "
                  << TerminalSafe(c["detail"].get<std::string>(), true) << "\n";
        if (!pass)
          std::cout << "      remedy: " << TerminalSafe(c["remedy"].get<std::string>(), true)
                    << "\n";
      }
      std::cout << (!confines    ? "cordon cannot confine processes here: calls fail with "
                                   "sandbox_unavailable\n"
                    : !redacts   ? "cordon can confine processes here, but the redaction check "
                                   "failed (above)\n"
                    : !installed ? "cordon can confine processes here, but its install check "
                                   "failed (above)\n"
                                 : "cordon can confine processes on this host\n");
    }
    return ok ? kExitOk : kExitToolError;
  };
}

}  // namespace cordon::cli
