// The staged workspace's lifecycle (docs/adr/0006-staged-workspace.md): probe, stage
// directories, the launch child's mount step, commit points and recovery.
#include "workspace/staging.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <utility>

#include "core/fs.h"
#include "core/hash.h"
#include "core/unique_fd.h"
#include "core/walk.h"
#include "workspace/repo_config.h"
#include "workspace/stage_fs.h"

namespace cordon {

namespace {
std::string JoinNul(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out.append(s).push_back('\0');
  return out;
}
std::vector<std::string> SplitNul(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = text.find('\0', pos);
    if (end == std::string::npos) break;
    out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}
}  // namespace

namespace {

// Whether the directory `dir_fd` names has no entry; false when it cannot be read (the commit
// then reports why).
bool DirIsEmpty(int dir_fd) {
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return false;
  }
  bool empty = true;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  if (errno != 0) empty = false;
  ::closedir(d);
  return empty;
}

// overlayfs splits its options at ',' and lowerdir at ':'; a backslash escapes either.
std::string EscapeOption(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ',' || c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

bool WriteSmall(const char* path, const std::string& data) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  ::close(fd);
  return ok;
}

std::string RandomSuffix() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

// Removes a tree cordon owns (a stage), whatever modes the process left on it: overlayfs leaves
// work/work at mode 000, and a process may chmod 000 what it made. Never follows a symlink; a
// directory deeper than 4096 levels (or past the descriptors open at once) is left in place.
void RemoveTree(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash + 1 >= path.size()) return;
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  UniqueFd pfd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!pfd.valid()) return;
  const char* top = path.c_str() + slash + 1;
  // A directory of cordon's own tree (checked by the caller's walk or fstatat here) that cannot
  // be opened gets u+rwx first: nothing runs there any more.
  auto open_dir = [](int dir_fd, const char* name) {
    UniqueFd fd = OpenSubdir(dir_fd, name);
    if (!fd.valid() && (errno == EACCES || errno == EPERM)) {
      ::fchmodat(dir_fd, name, 0700, 0);
      fd = OpenSubdir(dir_fd, name);
    }
    if (fd.valid()) ::fchmod(fd.get(), 0700);
    return fd;
  };
  struct stat st {};
  if (::fstatat(pfd.get(), top, &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    ::unlinkat(pfd.get(), top, 0);
    return;
  }
  UniqueFd root = open_dir(pfd.get(), top);
  if (root.valid()) {
    WalkOptions opts;
    opts.max_depth = 4096;
    opts.too_deep = TooDeep::kSkip;
    opts.what = path;
    WalkHooks hooks;
    hooks.visit = [](const WalkEntry& e) -> Result<Visit> {
      unsigned char type = e.type;
      struct stat est {};
      if (type == DT_UNKNOWN && ::fstatat(e.dir_fd, e.name, &est, AT_SYMLINK_NOFOLLOW) == 0)
        type = S_ISDIR(est.st_mode) ? DT_DIR : DT_REG;
      if (type == DT_DIR) return Visit::kDescend;
      ::unlinkat(e.dir_fd, e.name, 0);
      return Visit::kNext;
    };
    hooks.enter = [](const WalkEntry&, int fd) -> Status {
      ::fchmod(fd, 0700);
      return {};
    };
    hooks.leave = [](const WalkEntry& e) -> Status {
      ::unlinkat(e.dir_fd, e.name, AT_REMOVEDIR);
      return {};
    };
    hooks.unopenable = [&](const WalkEntry& e, int) -> Result<UniqueFd> {
      return open_dir(e.dir_fd, e.name);
    };
    (void)WalkTree(root.get(), opts, hooks);
  }
  ::unlinkat(pfd.get(), top, AT_REMOVEDIR);
}

Status MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST)
    return SysFail(Code::kSandboxUnavailable, "mkdir", path);
  return {};
}

Status MakeDirs(const std::string& path, mode_t mode) {
  for (std::size_t pos = 1; pos != std::string::npos; pos = path.find('/', pos + 1)) {
    const std::string part = path.substr(0, pos);
    if (part.size() > 1) TRY(MakeDir(part, mode));
  }
  TRY(MakeDir(path, mode));
  return {};
}

bool PidAlive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `data` to `path` so that a crash leaves either the old file or the whole new one: a
// temporary file beside it, fsync, rename over it, fsync of the directory.
Status WriteDurably(const std::string& path, const std::string& data) {
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd.valid()) return SysFail(Code::kSandboxUnavailable, "open", dir);
  const std::string tmp = "." + name + ".tmp-" + RandomSuffix();
  {
    UniqueFd fd(::openat(dfd.get(), tmp.c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return SysFail(Code::kSandboxUnavailable, "create", dir + "/" + tmp);
    Status st = WriteAll(fd.get(), data, path);
    if (st && ::fsync(fd.get()) != 0) st = SysFail(Code::kSandboxUnavailable, "fsync", path);
    if (!st) {
      ::unlinkat(dfd.get(), tmp.c_str(), 0);
      return st;
    }
  }
  if (::renameat(dfd.get(), tmp.c_str(), dfd.get(), name.c_str()) != 0) {
    Status st = SysFail(Code::kSandboxUnavailable, "rename", path);
    ::unlinkat(dfd.get(), tmp.c_str(), 0);
    return st;
  }
  if (::fsync(dfd.get()) != 0) return SysFail(Code::kSandboxUnavailable, "fsync", dir);
  return {};
}

// What a stage's rules file holds (StageRulesFile).
struct StageCarry {
  CommitRules rules;
  StageOrigin origin;
  std::vector<std::string> masked;
};

constexpr int kRulesVersion = 1;

Result<StageCarry> ReadStageCarry(const std::string& dir) {
  const std::string path = StageRulesFile(dir);
  std::string text;
  {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return SysFail(Code::kInvalidInput, "open", path);
    char buf[65536];
    for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) != 0;) {
      if (n < 0) return SysFail(Code::kInvalidInput, "read", path);
      text.append(buf, static_cast<std::size_t>(n));
      if (text.size() > (64u << 20)) return Fail(Code::kInvalidInput, path + " is too large");
    }
  }
  const Json j = Json::parse(text, nullptr, false);
  const auto bad = [&](const std::string& why) {
    return Fail(Code::kInvalidInput, path + ": " + why);
  };
  if (!j.is_object()) return bad("not a JSON object (torn?)");
  // Never Json::value with a default: a field of another type would throw, at every start.
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<std::int64_t>() != kRulesVersion)
    return bad("not version " + std::to_string(kRulesVersion));
  StageCarry c;
  for (const char* key : {"session", "audit_log", "policy_sha256"}) {
    if (!j.contains(key) || !j[key].is_string()) return bad(std::string("no ") + key);
  }
  c.origin.session = j["session"].get<std::string>();
  c.origin.audit_log = j["audit_log"].get<std::string>();
  c.origin.policy_sha256 = j["policy_sha256"].get<std::string>();
  if (!j.contains("rules")) return bad("no rules");
  auto rules = CommitRulesFromJson(j["rules"]);
  if (!rules) return bad(rules.error().message);
  c.rules = std::move(*rules);
  if (!j.contains("masked") || !j["masked"].is_array()) return bad("no masked");
  for (const Json& m : j["masked"]) {
    auto name = NameFromJson(m);
    if (!name) return bad(name.error().message);
    c.masked.push_back(std::move(*name));
  }
  return c;
}

// Merges a later commit's changes of one path into an earlier one's: the first before, the last
// after (created then deleted is nothing at all).
void MergeChanges(std::vector<FileChange>& into, const std::vector<FileChange>& more) {
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < into.size(); ++i) at[into[i].path] = i;
  std::vector<bool> drop(into.size(), false);
  for (const auto& c : more) {
    auto it = at.find(c.path);
    if (it == at.end()) {
      at[c.path] = into.size();
      into.push_back(c);
      drop.push_back(false);
      continue;
    }
    FileChange& f = into[it->second];
    const std::string first = f.kind;
    const auto before = f.bytes_before;
    const auto sha_before = f.sha256_before;
    const auto mode_before = f.mode_before;
    const std::string image = f.before_image, image_error = f.before_image_error;
    f = c;
    f.bytes_before = before;
    f.sha256_before = sha_before;
    f.before_image = image;  // the first commit's before is the process's before
    f.before_image_error = image_error;
    if (mode_before) f.mode_before = mode_before;
    if (first == "created" && c.kind == "deleted") {
      drop[it->second] = true;
    } else if (first == "created") {
      f.kind = "created";
      drop[it->second] = false;
    } else if (first == "deleted" && c.kind != "deleted") {
      f.kind = "modified";
      drop[it->second] = false;
    }
  }
  std::vector<FileChange> kept;
  for (std::size_t i = 0; i < into.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(into[i]));
  }
  std::sort(kept.begin(), kept.end(),
            [](const FileChange& a, const FileChange& b) { return a.path < b.path; });
  into = std::move(kept);
}

void Merge(CommitOutcome& into, const CommitOutcome& more) {
  MergeChanges(into.changes, more.changes);
  into.refused.insert(into.refused.end(), more.refused.begin(), more.refused.end());
  for (const auto& c : more.conflicts) {
    if (std::find(into.conflicts.begin(), into.conflicts.end(), c) == into.conflicts.end())
      into.conflicts.push_back(c);
  }
  if (more.error && !into.error) into.error = more.error;
  into.not_done.insert(into.not_done.end(), more.not_done.begin(), more.not_done.end());
}

// Before a final commit (the overlay is gone, nothing else writes there): every directory of
// the upper layer gets u+rwx, so that an ordinary user's cordon can list it and rename entries
// out of it whatever modes the process left (chmod 000 / 555 inside); the modes the process
// set are kept in `modes` (root-relative path -> st_mode) and applied to the host tree instead.
void OpenUpUpper(int dir_fd, std::map<std::string, std::uint32_t>& modes) {
  WalkOptions opts;
  opts.max_depth = 1024;  // the listing refuses deeper (UpperLimits::max_depth)
  opts.too_deep = TooDeep::kSkip;
  opts.what = "the upper layer";
  WalkHooks hooks;
  hooks.visit = [&](const WalkEntry& e) -> Result<Visit> {
    if (e.type != DT_DIR && e.type != DT_UNKNOWN) return Visit::kNext;
    struct stat st {};
    if (::fstatat(e.dir_fd, e.name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
      return Visit::kNext;
    if ((st.st_mode & S_IRWXU) != S_IRWXU) {
      modes[*e.rel] = st.st_mode;
      // A directory (just checked), in cordon's own tree, and no process runs there any more.
      ::fchmodat(e.dir_fd, e.name, (st.st_mode & 07777) | S_IRWXU, 0);
    }
    return Visit::kDescend;
  };
  hooks.unopenable = [](const WalkEntry&, int) -> Result<UniqueFd> { return UniqueFd(); };
  (void)WalkTree(dir_fd, opts, hooks);
}

}  // namespace

std::string OverlayOptions(const StagedRoot& r) {
  return "lowerdir=" + EscapeOption(r.root) + ",upperdir=" + EscapeOption(r.upper) +
         ",workdir=" + EscapeOption(r.work) + ",userxattr";
}

std::string StagingRecordPath(const std::string& stage_dir, const std::string& root) {
  struct stat sd {
  }, rd{};
  if (::stat(stage_dir.c_str(), &sd) != 0 || ::stat(root.c_str(), &rd) != 0) return "";
  std::string boot;
  if (std::ifstream in("/proc/sys/kernel/random/boot_id"); in) std::getline(in, boot);
  if (boot.empty()) return "";
  // The namespaces cordon runs in and the seccomp filters on it: a record made on the host is not
  // believed inside a container's mount namespace or under a filter (docs/adr/0010-host-probe.md).
  std::string context;
  for (const char* ns : {"user", "mnt"}) {
    char buf[64];
    const ssize_t n = ::readlink((std::string("/proc/self/ns/") + ns).c_str(), buf, sizeof buf);
    context += (n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("?")) + "\n";
  }
  if (std::ifstream st("/proc/self/status"); st) {
    for (std::string line; std::getline(st, line);) {
      if (line.rfind("Seccomp", 0) == 0) context += line + "\n";
    }
  }
  // Not "probe-..." nor a pid: Recover leaves it alone.
  return stage_dir + "/available-" +
         Sha256Hex(boot + "\n" + std::to_string(::geteuid()) + "\n" + std::to_string(sd.st_dev) +
                   "\n" + std::to_string(rd.st_dev) + "\n" + std::to_string(rd.st_ino) + "\n" +
                   context)
             .substr(0, 32);
}

StageMountPlan PrepareStageMounts(const std::vector<StagedRoot>& roots, uid_t euid, gid_t egid) {
  StageMountPlan plan;
  plan.user_namespace = euid != 0;
  plan.uid_map = std::to_string(euid) + " " + std::to_string(euid) + " 1\n";
  plan.gid_map = std::to_string(egid) + " " + std::to_string(egid) + " 1\n";
  for (const auto& r : roots) {
    plan.targets.push_back(r.root);
    plan.options.push_back(OverlayOptions(r));
    if (std::string rec = StagingRecordPath(StagedWorkspace::StageRoot(), r.root); !rec.empty())
      plan.records.push_back(std::move(rec));
  }
  return plan;
}

namespace {

int MountStages(const StageMountPlan& plan, const char** step) {
  *step = "unshare";
  if (::unshare(plan.user_namespace ? CLONE_NEWUSER | CLONE_NEWNS : CLONE_NEWNS) != 0) return errno;
  if (plan.user_namespace) {
    *step = "write /proc/self/setgroups";
    if (!WriteSmall("/proc/self/setgroups", "deny")) return errno != 0 ? errno : EIO;
    *step = "write /proc/self/uid_map";
    if (!WriteSmall("/proc/self/uid_map", plan.uid_map)) return errno != 0 ? errno : EIO;
    *step = "write /proc/self/gid_map";
    if (!WriteSmall("/proc/self/gid_map", plan.gid_map)) return errno != 0 ? errno : EIO;
  }
  *step = "mount --make-rprivate /";
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  for (std::size_t i = 0; i < plan.targets.size(); ++i) {
    *step = "mount overlay";
    if (::mount("overlay", plan.targets[i].c_str(), "overlay", 0, plan.options[i].c_str()) != 0)
      return errno;
  }
  return 0;
}

}  // namespace

int MountStagesInChild(const StageMountPlan& plan, const char** step) {
  if (plan.empty()) return 0;
  const int err = MountStages(plan, step);
  // A record that says staging works here was wrong (a remount, another file system at the
  // same place): gone, so that the next session probes again. unlink is async-signal-safe.
  if (err != 0) {
    for (const auto& r : plan.records) ::unlink(r.c_str());
  }
  return err;
}

StagingSupport ProbeStaging(const std::string& stage_dir, const std::string& root) {
  StagingSupport out;
  if (Status st = MakeDirs(stage_dir, 0700); !st) {
    out.reason = st.error().message;
    return out;
  }
  // A probe that passed in this boot, for this user, these file systems and this root, is not
  // made again: it forks, makes a mount namespace and mounts an overlay, about a tenth of a
  // `cordon exec -- true`. Only a record this user owns and no one else can write is believed
  // (a false one could only make a launch fail, closed; that launch removes it).
  const std::string record = StagingRecordPath(stage_dir, root);
  if (struct stat st{}; !record.empty() && ::lstat(record.c_str(), &st) == 0 &&
                        S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
                        (st.st_mode & 022) == 0) {
    out.available = true;
    return out;
  }
  const std::string dir = stage_dir + "/probe-" + std::to_string(::getpid()) + "-" + RandomSuffix();
  for (const char* sub : {"", "/u", "/w", "/m"}) {
    if (Status st = MakeDir(dir + sub, 0700); !st) {
      out.reason = st.error().message;
      RemoveTree(dir);
      return out;
    }
  }
  StagedRoot r{root, dir + "/u", dir + "/w"};
  StageMountPlan plan = PrepareStageMounts({r}, ::geteuid(), ::getegid());
  plan.targets[0] = dir + "/m";  // the probe never mounts over the real tree
  plan.records.clear();          // this probe's record is written below, when it passes
  const std::string probe_file = dir + "/m/.cordon-stage-probe";
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    out.reason = std::string("pipe2: ") + std::strerror(errno);
    RemoveTree(dir);
    return out;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    const char* step = "";
    int err = MountStagesInChild(plan, &step);
    if (err == 0) {
      // The upper layer must take a new file (the work directory, user xattrs, d_type).
      step = "create a file in the overlay";
      int fd = ::open(probe_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0)
        err = errno;
      else
        ::close(fd);
    }
    if (err != 0) {
      (void)!::write(pipefd[1], step, std::strlen(step));
      (void)!::write(pipefd[1], ": ", 2);
      const char* e = ::strerror(err);
      (void)!::write(pipefd[1], e, std::strlen(e));
    }
    ::_exit(err == 0 ? 0 : 1);
  }
  ::close(pipefd[1]);
  std::string msg;
  if (pid > 0) {
    char buf[512];
    for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) msg.append(buf, n);
    int status = 0;
    ::waitpid(pid, &status, 0);
    out.available = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  } else {
    msg = std::string("fork: ") + std::strerror(errno);
  }
  ::close(pipefd[0]);
  if (!out.available) {
    out.reason = "an overlay of " + root + " with its upper layer in " + stage_dir +
                 " cannot be mounted (" + (msg.empty() ? "unknown" : msg) + ")";
  }
  RemoveTree(dir);
  if (out.available && !record.empty()) {
    UniqueFd made(::open(record.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  }
  return out;
}

// --- held entries (issue 34) ---

namespace {

std::int64_t RealtimeNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

constexpr int kHeldVersion = 1;

Json HeldEntryJson(const HeldEntry& h) {
  return {{"root", h.root},
          {"rel", NameJson(h.rel)},
          {"path", NameJson(h.path)},
          {"op", h.op},
          {"type", h.type},
          {"rule", h.rule},
          {"rule_source", NameJson(h.rule_source)}};
}

Json HeldManifestJson(const HeldManifest& m) {
  Json entries = Json::array();
  for (const HeldEntry& h : m.entries) entries.push_back(HeldEntryJson(h));
  Json j = {{"version", kHeldVersion},          {"held_at_ns", m.held_at_ns},
            {"expires_at_ns", m.expires_at_ns}, {"call", m.call},
            {"tool", NameJson(m.tool)},         {"owner", NameJson(m.owner)},
            {"entries", std::move(entries)}};
  if (m.answer) {
    j["answer"] = {{"approve", m.answer->approve},
                   {"approval", m.answer->approval},
                   {"deny_reason", m.deny_reason}};
  }
  return j;
}

// Reads at most `cap` bytes of the regular file `rel` beneath `dir_fd`, never through a symlink.
// False when there is no regular file there.
bool ReadBeneath(int dir_fd, const std::string& rel, std::size_t cap, std::string* out, bool* cut) {
  open_how how{};
  how.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  UniqueFd fd(static_cast<int>(::syscall(SYS_openat2, dir_fd, rel.c_str(), &how, sizeof how)));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  out->clear();
  char buf[16384];
  while (out->size() < cap) {
    const ssize_t n = ::read(fd.get(), buf, std::min(sizeof buf, cap - out->size()));
    if (n <= 0) break;
    out->append(buf, static_cast<std::size_t>(n));
  }
  *cut = static_cast<std::uint64_t>(st.st_size) > out->size();
  return true;
}

}  // namespace

Result<HeldManifest> ReadHeldManifest(const std::string& stage_dir) {
  const std::string path = stage_dir + "/held.json";
  const std::string text = ReadAll(path);
  const Json j = Json::parse(text, nullptr, false);
  const auto bad = [&](const std::string& why) {
    return Fail(Code::kInvalidInput, path + ": " + why);
  };
  if (!j.is_object()) return bad("not a JSON object (missing or torn)");
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<std::int64_t>() != kHeldVersion)
    return bad("not version " + std::to_string(kHeldVersion));
  for (const char* key : {"held_at_ns", "expires_at_ns", "call"}) {
    if (!j.contains(key) || !j[key].is_number_integer()) return bad(std::string("no ") + key);
  }
  if (!j.contains("entries") || !j["entries"].is_array() || !j.contains("tool") ||
      !j.contains("owner"))
    return bad("no entries");
  HeldManifest m;
  m.held_at_ns = j["held_at_ns"].get<std::int64_t>();
  m.expires_at_ns = j["expires_at_ns"].get<std::int64_t>();
  m.call = j["call"].get<std::uint64_t>();
  ASSIGN_OR_RETURN(m.tool, NameFromJson(j["tool"]));
  ASSIGN_OR_RETURN(m.owner, NameFromJson(j["owner"]));
  for (const Json& e : j["entries"]) {
    if (!e.is_object() || !e.contains("root") || !e["root"].is_number_unsigned() ||
        !e.contains("rel") || !e.contains("path") || !e.contains("op") || !e["op"].is_string() ||
        !e.contains("type") || !e["type"].is_string() || !e.contains("rule") ||
        !e["rule"].is_string() || !e.contains("rule_source"))
      return bad("an entry is malformed");
    HeldEntry h;
    h.root = e["root"].get<std::size_t>();
    ASSIGN_OR_RETURN(h.rel, NameFromJson(e["rel"]));
    ASSIGN_OR_RETURN(h.path, NameFromJson(e["path"]));
    h.op = e["op"].get<std::string>();
    h.type = e["type"].get<std::string>();
    h.rule = e["rule"].get<std::string>();
    ASSIGN_OR_RETURN(h.rule_source, NameFromJson(e["rule_source"]));
    m.entries.push_back(std::move(h));
  }
  if (j.contains("answer")) {
    const Json& a = j["answer"];
    if (!a.is_object() || !a.contains("approve") || !a["approve"].is_boolean() ||
        !a.contains("approval") || !a["approval"].is_string() || !a.contains("deny_reason") ||
        !a["deny_reason"].is_string())
      return bad("its answer is malformed");
    m.answer = HeldAnswer{.approve = a["approve"].get<bool>(),
                          .approval = a["approval"].get<std::string>()};
    m.deny_reason = a["deny_reason"].get<std::string>();
  }
  return m;
}

Status Stage::WriteHeld() {
  return WriteDurably(dir_ + "/held.json", DumpJson(HeldManifestJson(manifest_)) + "\n");
}

HeldQuestion Stage::Question() const {
  HeldQuestion q;
  q.stage = dir_;
  q.call = manifest_.call;
  q.tool = manifest_.tool;
  q.owner = manifest_.owner;
  q.entries = manifest_.entries;
  for (const HeldEntry& h : manifest_.entries) {
    if (q.contents.size() >= 20) break;
    if (h.type != "file" && h.type != "whiteout") continue;
    if (h.root >= state_.size()) continue;
    HeldQuestion::Content c;
    c.path = h.path;
    bool before =
        ReadBeneath(state_[h.root].root_fd.get(), h.rel, 64 << 10, &c.before, &c.before_cut);
    bool after = h.type == "file" && ReadBeneath(state_[h.root].upper_fd.get(), h.rel, 64 << 10,
                                                 &c.after, &c.after_cut);
    if (before || after) q.contents.push_back(std::move(c));
  }
  return q;
}

Result<std::unique_ptr<Stage>> Stage::Reopen(const std::string& dir, std::string quarantine,
                                             GitReader git_reader) {
  ASSIGN_OR_RETURN(StageCarry carry, ReadStageCarry(dir));
  const std::vector<std::string> roots = SplitNul(ReadAll(dir + "/roots"));
  if (roots.empty()) return Fail(Code::kInvalidInput, dir + "/roots names no root");
  std::unique_ptr<Stage> s(new Stage());
  s->dir_ = dir;
  s->rules_ = std::move(carry.rules);
  s->origin_ = carry.origin;
  s->masked_ = std::move(carry.masked);
  s->rules_written_ = true;
  s->git_reader_ = std::move(git_reader);
  s->quarantine_ = std::move(quarantine);
  const std::string phase = ReadAll(dir + "/phase");
  const std::size_t nl = phase.find('\n');
  s->t0_ns_ = nl == std::string::npos ? 0 : std::atoll(phase.c_str() + nl + 1);
  for (std::size_t i = 0; i < roots.size(); ++i) {
    StagedRoot r{roots[i], dir + "/u" + std::to_string(i), dir + "/w" + std::to_string(i)};
    ASSIGN_OR_RETURN(RootState st, OpenRoot(r, Code::kInvalidInput));
    s->roots_.push_back(std::move(r));
    s->state_.push_back(std::move(st));
  }
  if (::access((dir + "/held.json").c_str(), F_OK) == 0) {
    ASSIGN_OR_RETURN(s->manifest_, ReadHeldManifest(dir));
    s->holding_ = true;
  }
  return s;
}

// --- Stage ---

std::string StageRulesFile(const std::string& stage_dir) { return stage_dir + "/rules.json"; }

Result<Stage::RootState> Stage::OpenRoot(const StagedRoot& r, Code code) {
  RootState st;
  st.root_fd = UniqueFd(::open(r.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!st.root_fd.valid()) return SysFail(code, "open", r.root);
  st.upper_fd = UniqueFd(::open(r.upper.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!st.upper_fd.valid()) return SysFail(code, "open", r.upper);
  struct stat a {
  }, b{};
  st.same_fs = ::fstat(st.root_fd.get(), &a) == 0 && ::fstat(st.upper_fd.get(), &b) == 0 &&
               a.st_dev == b.st_dev;
  return st;
}

Result<std::unique_ptr<Stage>> Stage::Create(std::string dir, const std::vector<std::string>& roots,
                                             std::string quarantine, CommitRules rules,
                                             StageOrigin origin) {
  std::unique_ptr<Stage> s(new Stage());
  s->dir_ = std::move(dir);
  s->quarantine_ = std::move(quarantine);
  s->rules_ = std::move(rules);
  s->origin_ = std::move(origin);
  TRY(MakeDir(s->dir_, 0700));
  for (std::size_t i = 0; i < roots.size(); ++i) {
    StagedRoot r{roots[i], s->dir_ + "/u" + std::to_string(i), s->dir_ + "/w" + std::to_string(i)};
    TRY(MakeDir(r.upper, 0700));
    TRY(MakeDir(r.work, 0700));
    ASSIGN_OR_RETURN(RootState st, OpenRoot(r, Code::kSandboxUnavailable));
    s->roots_.push_back(std::move(r));
    s->state_.push_back(std::move(st));
  }
  // What recovery needs if cordon is killed: which root each upper layer belongs to.
  {
    std::ofstream out(s->dir_ + "/roots", std::ios::binary | std::ios::trunc);
    out << JoinNul(roots);
    if (!out) return Fail(Code::kSandboxUnavailable, "cannot write " + s->dir_ + "/roots");
  }
  s->WritePhase("running");
  return s;
}

Status Stage::WriteRules() {
  Json masked = Json::array();
  for (const auto& m : masked_) masked.push_back(NameJson(m));
  const Json j = {{"version", kRulesVersion},         {"session", origin_.session},
                  {"audit_log", origin_.audit_log},   {"policy_sha256", origin_.policy_sha256},
                  {"rules", CommitRulesJson(rules_)}, {"masked", std::move(masked)}};
  TRY(WriteDurably(StageRulesFile(dir_), DumpJson(j) + "\n"));
  rules_written_ = true;
  return {};
}

Stage::~Stage() {
  // A final commit that could not complete leaves its stage ("committing") for the next start
  // to finish: what the rules allow is never dropped. Held entries no one answered stay too.
  if (!dir_.empty() && !total_.error && !holding_) RemoveTree(dir_);
}

void Stage::WritePhase(const char* phase) {
  // Written in place: recovery reads "committing" as "finish me", anything else as "keep me".
  std::ofstream out(dir_ + "/phase", std::ios::binary | std::ios::trunc);
  out << phase << "\n" << t0_ns_ << "\n";
}

std::int64_t Stage::OpenWindow(bool wait) {
  std::lock_guard<std::mutex> lock(mu_);
  t0_ns_ = wait ? ChangeWindowStart() : ChangeWindowT0();
  WritePhase("running");
  return t0_ns_;
}

Status Stage::SetMasked(std::vector<std::string> paths) {
  std::lock_guard<std::mutex> lock(mu_);
  masked_ = std::move(paths);
  return WriteRules();
}

CommitOutcome Stage::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

bool Stage::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_.error.has_value();
}

CommitOutcome Stage::Commit(bool final) {
  std::unique_lock<std::mutex> lock(mu_);
  CommitOutcome all;
  ++commits_;
  // Held entries wait for their answer (Answer): nothing else commits this stage meanwhile.
  if (holding_) return all;
  // A commit whose upper layers are empty has nothing to commit: the phase file stays
  // "running" (a crash now quarantines what a live process writes later, as it would have before
  // this point; a final commit's stage holds nothing to quarantine). Rewriting it twice was most
  // of such a commit on a busy disk, paid at every `wrap` call boundary, every second of a live
  // process, and at the end of every call that wrote nothing.
  if (std::all_of(state_.begin(), state_.end(),
                  [](const RootState& st) { return DirIsEmpty(st.upper_fd.get()); }))
    return all;
  // The rules go to disk before the first commit (a launch writes them before its process starts,
  // SetMasked): one that cannot leaves a stage recovery quarantines whole, never installs.
  if (!rules_written_) (void)WriteRules();
  WritePhase("committing");
  std::vector<HeldEntry> held;
  all = CommitRoots(final, Pass::kFirst, &held, "", "");
  if (!all.error && !held.empty()) {
    // Held entries stay in the upper layer, named in the manifest, the phase `held`: a restart
    // keeps them held (never installs them) until they are answered.
    manifest_ = HeldManifest{};
    manifest_.entries = std::move(held);
    manifest_.held_at_ns = RealtimeNs();
    manifest_.expires_at_ns = manifest_.held_at_ns + held_days_ * 86400 * 1000000000LL;
    manifest_.call = call_;
    manifest_.tool = tool_;
    manifest_.owner = owner_;
    holding_ = true;
    if (Status st = WriteHeld(); !st) {
      // What is held cannot be named on disk: the commit fails closed, the entries stay in the
      // stage ("committing"), and a restart decides them again.
      all.error = st.error();
      for (const HeldEntry& h : manifest_.entries) all.not_done.push_back(h.path);
    } else {
      WritePhase("held");
      if (hold_asker_) {
        const HeldQuestion q = Question();
        const HoldAsker asker = hold_asker_;
        lock.unlock();
        const HeldAnswer answer = asker(q);
        lock.lock();
        Merge(all, AnswerLocked(answer, "approval_denied"));
      }
    }
  } else if (!all.error) {
    WritePhase("running");
  }
  CommitOutcome merged = all;
  if (!final) {
    // Tried again at the next point; only the final commit's failure is the stage's.
    merged.error.reset();
    merged.not_done.clear();
  }
  Merge(total_, merged);
  if (per_call_) MergeChanges(unreported_, merged.changes);
  return all;
}

CommitOutcome Stage::CommitRoots(bool final, Pass pass, std::vector<HeldEntry>* held,
                                 const std::string& approval, const std::string& deny_reason) {
  CommitOutcome all;
  for (std::size_t i = 0; i < roots_.size(); ++i) {
    RootState& st = state_[i];
    const std::string prefix = i == 0 ? "" : roots_[i].root + "/";
    std::map<std::string, std::uint32_t> modes;
    if (final) {
      struct stat top {};
      if (::fstat(st.upper_fd.get(), &top) == 0 && (top.st_mode & S_IRWXU) != S_IRWXU) {
        modes[""] = top.st_mode;
        ::fchmod(st.upper_fd.get(), (top.st_mode & 07777) | S_IRWXU);
      }
      OpenUpUpper(st.upper_fd.get(), modes);
    }
    auto listing = ListUpper(st.upper_fd.get());
    if (listing) {
      for (auto& e : *listing) {
        if (auto it = modes.find(e.rel); it != modes.end()) e.mode = it->second;
      }
    }
    CommitOutcome o;
    if (!listing) {
      o.error = listing.error();
      o.error->message =
          "the staged changes of " + roots_[i].root + " could not be listed: " + o.error->message;
      o.not_done.push_back(roots_[i].root);
      Merge(all, o);
      continue;
    }
    ReadHostFacts(st.root_fd.get(), *listing);
    CommitRules root_rules = rules_;
    for (const auto& m : masked_) {
      const std::string& root = roots_[i].root;
      if (m.size() > root.size() + 1 && m.compare(0, root.size(), root) == 0 &&
          (m[root.size()] == '/' || root == "/"))
        root_rules.masked.push_back(m.substr(root == "/" ? 1 : root.size() + 1));
    }
    FindRepositoryDirs(st.root_fd.get(), *listing, root_rules);
    MarkUnreadableHeads(st.upper_fd.get(), *listing, root_rules);
    {
      // What the host repositories around these paths execute (core.hooksPath, ...): protected
      // like .git/hooks (workspace/repo_config.h).
      std::vector<std::string> rels;
      rels.reserve(listing->size());
      for (const auto& e : *listing) rels.push_back(e.rel);
      root_rules.repo_protected = RepoProtectedPaths(st.root_fd.get(), rels);
    }
    if (i != 0) root_rules.approval_paths.clear();  // the rules' paths are the workspace's
    MarkHeldBelow(st.root_fd.get(), *listing, root_rules);
    std::vector<CommitDecision> decisions = PlanCommit(*listing, root_rules);
    if (pass == Pass::kFirst) {
      // Held for an answer (issue 34): out of this commit. A live process's wait for its final
      // commit; the final commit's go into the manifest and are asked about.
      std::size_t kept = 0;
      for (std::size_t k = 0; k < decisions.size(); ++k) {
        if (decisions[k].hold.empty()) {
          if (kept != k) decisions[kept] = std::move(decisions[k]);
          ++kept;
          continue;
        }
        if (!final || held == nullptr) continue;
        const CommitDecision& d = decisions[k];
        const UpperEntry& e = (*listing)[d.entry];
        HeldEntry h;
        h.root = i;
        h.rel = d.rel;
        h.path = prefix + d.rel;
        h.op = e.kind == UpperKind::kWhiteout          ? "deleted"
               : e.host == HostKind::kMissing          ? "created"
               : e.kind == UpperKind::kDir && e.opaque ? "replaced"
                                                       : "modified";
        h.type = UpperTypeName(e.kind);
        h.rule = d.hold;
        h.rule_source = d.hold_source;
        held->push_back(std::move(h));
      }
      decisions.resize(kept);
    } else {
      // An answer: the manifest's entries of this root, and the directories above them.
      std::set<std::string, std::less<>> mine, above;
      for (const HeldEntry& h : manifest_.entries) {
        if (h.root != i) continue;
        mine.insert(h.rel);
        for (std::string_view p = stage::ParentOf(h.rel); !p.empty(); p = stage::ParentOf(p))
          above.emplace(p);
      }
      std::size_t kept = 0;
      for (std::size_t k = 0; k < decisions.size(); ++k) {
        CommitDecision& d = decisions[k];
        if (mine.contains(d.rel)) {
          d.hold.clear();
          if (pass == Pass::kDeny) {
            d.action = CommitAction::kRefuse;
            d.reason = deny_reason;
          }
        } else if (above.contains(d.rel) && d.action != CommitAction::kRefuse) {
          // Made or kept by the first commit: only ensured (an opaque one's host children were
          // cleared then, and what it installed since is not the upper layer's any more).
          d.hold.clear();
          d.opaque = false;
          if (d.action == CommitAction::kChmod) d.action = CommitAction::kKeepDir;
        } else {
          continue;
        }
        if (kept != k) decisions[kept] = std::move(d);
        ++kept;
      }
      decisions.resize(kept);
    }
    // What would land git content (an index, a moved ref) is checked like the tree
    // (workspace/git_content.h). Only once the process is gone: while it runs, the upper layer
    // can change between the check and the install, so those entries wait for the final commit.
    std::map<std::string, Json> git_refusals;
    if (const std::vector<std::size_t> git = GitContentEntries(*listing, decisions, root_rules);
        !git.empty()) {
      if (!final) {
        std::vector<bool> wait(decisions.size(), false);
        for (std::size_t k : git) wait[k] = true;
        std::size_t kept = 0;
        for (std::size_t k = 0; k < decisions.size(); ++k) {
          if (!wait[k]) decisions[kept++] = std::move(decisions[k]);
        }
        decisions.resize(kept);
      } else {
        for (const GitContentFinding& f : CheckGitContent(
                 roots_[i].root, roots_[i].upper, dir_, decisions, git, root_rules, git_reader_)) {
          Json& list = git_refusals[f.entry];
          if (list.size() < 20) list.push_back(GitContentFindingJson(f));
        }
        // `git pack-refs` (git gc) moves loose refs into packed-refs and deletes the loose files:
        // with the packed-refs refused, those deletions would drop the host's refs.
        for (const auto& [entry, why] : std::map<std::string, Json>(git_refusals)) {
          if (stage::LeafOf(entry) != "packed-refs") continue;
          const std::string refs = std::string(stage::ParentOf(entry)) + "/refs/";
          for (const auto& d : decisions) {
            if (d.action == CommitAction::kDelete && d.rel.starts_with(refs))
              git_refusals[d.rel].push_back(
                  {{"ref", EscapePathBytes(d.rel.substr(refs.size() - 5))},
                   {"error", "deleted by a pack-refs whose packed-refs was refused"}});
          }
        }
        for (auto& d : decisions) {
          if (git_refusals.contains(d.rel)) {
            d.action = CommitAction::kRefuse;
            d.reason = "git_content";
          }
        }
      }
    }
    CommitOptions opts;
    opts.rename_from_upper = final && st.same_fs;
    opts.window_start_ns = t0_ns_;
    opts.rules = root_rules;
    opts.before_images = before_images_.get();
    opts.quarantine_dir = quarantine_ + "/" + dir_.substr(dir_.find_last_of('/') + 1) +
                          (i == 0 ? "" : "/root" + std::to_string(i));
    o = ApplyCommit(st.root_fd.get(), st.upper_fd.get(), *listing, decisions, opts, &st.ledger);
    for (auto& r : o.refused) {
      if (auto it = git_refusals.find(r.rel); it != git_refusals.end()) r.git = it->second;
      if (pass != Pass::kFirst) r.approval = approval;
    }
    if (pass == Pass::kApprove) {
      for (auto& c : o.changes) c.approval = approval;
    }
    if (!prefix.empty()) {
      for (auto& c : o.changes) {
        c.path = prefix + c.path;
        if (!c.from.empty()) c.from = prefix + c.from;
      }
      for (auto& r : o.refused) r.rel = prefix + r.rel;
      for (auto& c : o.conflicts) c = prefix + c;
      for (auto& n : o.not_done) n = prefix + n;
    }
    Merge(all, o);
  }
  return all;
}

CommitOutcome Stage::AnswerLocked(const HeldAnswer& answer, const std::string& deny_reason) {
  manifest_.answer = answer;
  manifest_.deny_reason = deny_reason;
  CommitOutcome o;
  if (Status st = WriteHeld(); !st) {
    o.error = st.error();
    for (const HeldEntry& h : manifest_.entries) o.not_done.push_back(h.path);
    return o;
  }
  WritePhase("committing");
  o = CommitRoots(true, answer.approve ? Pass::kApprove : Pass::kDeny, nullptr, answer.approval,
                  deny_reason);
  if (!o.error) {
    holding_ = false;
    ::unlink((dir_ + "/held.json").c_str());
    WritePhase("running");
  }
  return o;
}

CommitOutcome Stage::Answer(const HeldAnswer& answer, const std::string& deny_reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!holding_) return {};
  CommitOutcome o = AnswerLocked(answer, deny_reason);
  Merge(total_, o);
  return o;
}

void Stage::SetCaller(std::uint64_t call, std::string tool, std::string owner) {
  std::lock_guard<std::mutex> lock(mu_);
  call_ = call;
  tool_ = std::move(tool);
  owner_ = std::move(owner);
}

std::vector<HeldEntry> Stage::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return holding_ ? manifest_.entries : std::vector<HeldEntry>{};
}

std::vector<FileChange> Stage::TakeUnreported() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(unreported_, {});
}

// --- StagedWorkspace ---

std::string StagedWorkspace::StageRoot() { return CordonStateDir() + "/stage"; }

std::string StagedWorkspace::HeldRoot(const std::string& stage_root) {
  return std::filesystem::path(stage_root).parent_path().string() + "/held";
}

StagedWorkspace::StagedWorkspace(std::string quarantine, CommitRules rules, StageOrigin origin,
                                 Sink sink, const RecoverySink& recovered, GitReader git_reader)
    : quarantine_(std::move(quarantine)),
      rules_(std::move(rules)),
      origin_(std::move(origin)),
      sink_(std::move(sink)),
      git_reader_(std::move(git_reader)) {
  const std::string root = StageRoot();
  (void)MakeDirs(root, 0700);
  std::vector<StageRecovery> done = Recover(root, quarantine_, git_reader_);
  if (recovered && !done.empty()) recovered(std::move(done));
  dir_ = root + "/" + std::to_string(::getpid()) + "-" + RandomSuffix();
  timer_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(timer_mu_);
    while (!stop_) {
      timer_cv_.wait_for(lock, std::chrono::seconds(1));
      if (stop_) break;
      lock.unlock();
      CommitLive();
      lock.lock();
    }
  });
  reaper_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(reap_mu_);
    while (true) {
      reap_cv_.wait(lock, [this] { return reap_stop_ || !retired_.empty(); });
      if (retired_.empty()) break;  // stopped, and nothing is left to remove
      std::vector<std::shared_ptr<Stage>> batch;
      batch.swap(retired_);
      lock.unlock();
      batch.clear();  // ~Stage: the last owner removes each stage directory
      lock.lock();
    }
  });
}

StagedWorkspace::~StagedWorkspace() {
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    stop_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  {
    std::lock_guard<std::mutex> lock(reap_mu_);
    reap_stop_ = true;
  }
  reap_cv_.notify_all();
  if (reaper_.joinable()) reaper_.join();  // every retired stage is removed first
  RemoveTree(dir_);
}

void StagedWorkspace::Retire(std::shared_ptr<Stage> stage) {
  if (!stage) return;
  {
    std::lock_guard<std::mutex> lock(reap_mu_);
    retired_.push_back(std::move(stage));
  }
  reap_cv_.notify_one();
}

Result<std::shared_ptr<Stage>> StagedWorkspace::NewStage(const std::vector<std::string>& roots) {
  std::uint64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (poisoned_) return std::unexpected(*poisoned_);
    n = ++next_;
  }
  TRY(MakeDirs(dir_, 0700));
  ASSIGN_OR_RETURN(auto stage, Stage::Create(dir_ + "/" + std::to_string(n), roots, quarantine_,
                                             rules_, origin_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    stage->before_images_ = before_images_;
    stage->git_reader_ = git_reader_;
    stage->hold_asker_ = hold_asker_;
    stage->held_days_ = held_days_;
  }
  return std::shared_ptr<Stage>(std::move(stage));
}

Status StagedWorkspace::EnsureDir() { return MakeDirs(dir_, 0700); }

void StagedWorkspace::Watch(std::shared_ptr<Stage> stage, bool per_call) {
  {
    std::lock_guard<std::mutex> stage_lock(stage->mu_);
    stage->per_call_ = per_call;
  }
  std::lock_guard<std::mutex> lock(mu_);
  live_.push_back(std::move(stage));
}

void StagedWorkspace::Forget(const std::shared_ptr<Stage>& stage) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(std::remove(live_.begin(), live_.end(), stage), live_.end());
}

void StagedWorkspace::CommitLive(std::vector<FileChange>* per_call) {
  std::vector<std::shared_ptr<Stage>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live = live_;
  }
  for (const auto& s : live) {
    // A live commit that cannot complete now (a directory the process made unreadable, a file
    // being replaced) is tried again at the next point; the final commit, with the overlay gone,
    // is the one that fails closed.
    CommitOutcome o = s->Commit(false);
    o.error.reset();
    Report(o, *s, "commit");
    if (per_call != nullptr) MergeChanges(*per_call, s->TakeUnreported());
  }
}

CommitOutcome StagedWorkspace::CommitFinal(Stage& stage) {
  Report(stage.Commit(true), stage, "commit");
  return stage.total();
}

std::optional<Error> StagedWorkspace::poisoned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return poisoned_;
}

void StagedWorkspace::Report(const CommitOutcome& o, const Stage& stage, const char* when) {
  for (const auto& r : o.refused) {
    GuardEvent e;
    e.kind = GuardEvent::Kind::kProtectedRemoved;
    e.path = r.rel.empty() || r.rel[0] != '/' ? stage.roots()[0].root + "/" + r.rel : r.rel;
    e.entry_kind = r.type;
    e.quarantine = r.quarantine;
    e.when = when;
    e.reason = r.reason;
    e.git = r.git;
    if (sink_) sink_(e);
  }
  if (o.error) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!poisoned_) {
      std::string paths;
      for (std::size_t i = 0; i < o.not_done.size() && i < 20; ++i) paths += " " + o.not_done[i];
      poisoned_ = Error{Code::kSandboxUnavailable,
                        "a staged commit could not complete, so this session launches nothing "
                        "more: " +
                            o.error->message + (paths.empty() ? "" : "; not done:" + paths),
                        0,
                        {}};
    }
  }
}

namespace {

// The entries of a stage's upper layers, as a commit would name them (the first root's relative,
// the others' absolute): what recovery leaves out of the tree when it quarantines a stage whole.
std::vector<std::string> UpperPaths(const std::string& dir, const std::vector<std::string>& roots,
                                    std::string* error) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < std::max<std::size_t>(roots.size(), 1); ++i) {
    const std::string upper = dir + "/u" + std::to_string(i);
    UniqueFd fd(::open(upper.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) continue;  // a stage made before its upper layers: nothing in it
    // The upper layer as the process left it: directories it made unreadable are opened up
    // (the stage is cordon's, and nothing runs there any more).
    std::map<std::string, std::uint32_t> modes;
    OpenUpUpper(fd.get(), modes);
    auto listing = ListUpper(fd.get());
    if (!listing) {
      if (error->empty()) *error = "the upper layer " + upper + ": " + listing.error().message;
      continue;
    }
    const std::string prefix = i == 0 || i >= roots.size() ? "" : roots[i] + "/";
    for (const auto& e : *listing) out.push_back(prefix + e.rel);
  }
  return out;
}

}  // namespace

namespace {

// Moves a stage whose entries are held into the held store, as `id`.
bool MoveToHeld(const std::string& dir, const std::string& stage_root, const std::string& id,
                std::string* error) {
  const std::string store = StagedWorkspace::HeldRoot(stage_root);
  if (Status st = MakeDirs(store, 0700); !st) {
    *error = st.error().message;
    return false;
  }
  if (::rename(dir.c_str(), (store + "/" + id).c_str()) != 0) {
    *error = "rename " + dir + " to " + store + "/" + id + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

// The session directories of <state>/stage whose cordon is gone.
std::vector<std::string> GoneSessions(const std::string& stage_root) {
  std::vector<std::string> gone;
  DIR* d = ::opendir(stage_root.c_str());
  if (d == nullptr) return gone;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.rfind("probe-", 0) == 0) {
      const pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + 6));
      if (!PidAlive(pid)) gone.push_back(name);
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    if (pid > 0 && !PidAlive(pid)) gone.push_back(name);
  }
  ::closedir(d);
  return gone;
}

}  // namespace

std::vector<std::string> StagedWorkspace::CollectHeld(const std::string& stage_root) {
  std::vector<std::string> moved;
  for (const std::string& session : GoneSessions(stage_root)) {
    if (session.rfind("probe-", 0) == 0) continue;
    const std::string sdir = stage_root + "/" + session;
    DIR* sd = ::opendir(sdir.c_str());
    std::vector<std::string> stages;
    while (sd != nullptr) {
      dirent* e = ::readdir(sd);
      if (e == nullptr) break;
      if (e->d_name[0] != '.') stages.emplace_back(e->d_name);
    }
    if (sd != nullptr) ::closedir(sd);
    for (const std::string& n : stages) {
      const std::string dir = sdir + "/" + n;
      // Only a question the kill left open: an answer given, a commit not done or a recovery
      // under way is the next start's to finish.
      if (ReadAll(dir + "/phase").rfind("held", 0) != 0) continue;
      if (::access((dir + "/recovering").c_str(), F_OK) == 0) continue;
      auto m = ReadHeldManifest(dir);
      if (!m || m->answer) continue;
      std::string error;
      if (MoveToHeld(dir, stage_root, session + "-" + n, &error))
        moved.push_back(session + "-" + n);
    }
  }
  return moved;
}

std::vector<StagedWorkspace::HeldStage> StagedWorkspace::ListHeld(const std::string& stage_root) {
  (void)CollectHeld(stage_root);
  std::vector<HeldStage> out;
  const std::string store = HeldRoot(stage_root);
  if (DIR* hd = ::opendir(store.c_str())) {
    while (dirent* e = ::readdir(hd)) {
      if (e->d_name[0] == '.') continue;
      HeldStage h;
      h.id = e->d_name;
      h.dir = store + "/" + h.id;
      if (auto carry = ReadStageCarry(h.dir)) {
        h.origin = carry->origin;
      } else {
        h.error = carry.error().message;
      }
      if (auto m = ReadHeldManifest(h.dir)) {
        h.manifest = std::move(*m);
      } else if (h.error.empty()) {
        h.error = m.error().message;
      }
      out.push_back(std::move(h));
    }
    ::closedir(hd);
  }
  std::sort(out.begin(), out.end(),
            [](const HeldStage& a, const HeldStage& b) { return a.id < b.id; });
  return out;
}

std::vector<StageRecovery> StagedWorkspace::Recover(const std::string& stage_root,
                                                    const std::string& quarantine,
                                                    const GitReader& git_reader) {
  std::vector<StageRecovery> done;
  const std::vector<std::string> gone = GoneSessions(stage_root);
  for (const auto& session : gone) {
    const std::string sdir = stage_root + "/" + session;
    bool busy = false;  // a stage another cordon is recovering: its session directory stays
    if (session.rfind("probe-", 0) != 0) {
      DIR* sd = ::opendir(sdir.c_str());
      std::vector<std::string> stages;
      while (sd != nullptr) {
        dirent* e = ::readdir(sd);
        if (e == nullptr) break;
        if (e->d_name[0] != '.') stages.emplace_back(e->d_name);
      }
      if (sd != nullptr) ::closedir(sd);
      std::sort(stages.begin(), stages.end());
      for (const auto& n : stages) {
        const std::string dir = sdir + "/" + n;
        const std::string phase = ReadAll(dir + "/phase");
        const std::vector<std::string> roots = SplitNul(ReadAll(dir + "/roots"));
        // A recovery that itself died (a crash in the commit: its mark names a pid that is gone)
        // is not tried again: it would die at every start. What is left goes to the quarantine
        // whole, below. One another cordon is running now is left to it.
        const bool marked = ::access((dir + "/recovering").c_str(), F_OK) == 0;
        const pid_t recoverer = static_cast<pid_t>(std::atol(ReadAll(dir + "/recovering").c_str()));
        if (marked && recoverer != ::getpid() && PidAlive(recoverer)) {
          busy = true;
          continue;
        }
        StageRecovery rec;
        rec.stage = dir;
        rec.name = session + "-" + n;
        rec.roots = roots;
        // The rules the stage carries, and whose it is: the only rules it is committed by.
        Result<StageCarry> carry = ReadStageCarry(dir);
        if (carry) {
          rec.origin = carry->origin;
        } else {
          rec.rules_error = carry.error().message;
        }
        const bool committing = phase.rfind("committing", 0) == 0 && !marked;
        // Held entries (issue 34): an answer written before the kill is applied; without one
        // they go on waiting, in the held store (`cordon approvals`), never installed.
        if (!marked && carry && !roots.empty() &&
            ::access((dir + "/held.json").c_str(), F_OK) == 0) {
          auto s = Stage::Reopen(dir, quarantine + "/recovered-" + session, git_reader);
          if (s && (*s)->manifest_.answer) {
            rec.commit = (*s)->Answer(*(*s)->manifest_.answer, (*s)->manifest_.deny_reason);
            rec.quarantine = (*s)->quarantine_ + "/" + n;
            if (rec.commit.error) {
              rec.outcome = "kept";
              rec.error = rec.commit.error->message;
              (*s)->dir_.clear();
            } else {
              rec.outcome = "finished";
            }
            done.push_back(std::move(rec));
            continue;
          }
          if (s) {
            for (const HeldEntry& h : (*s)->manifest_.entries) rec.left.push_back(h.path);
            (*s)->dir_.clear();  // not removed: moved
            s->reset();
            if (std::string error; MoveToHeld(dir, stage_root, rec.name, &error)) {
              rec.outcome = "held";
              rec.held = rec.name;
              done.push_back(std::move(rec));
              continue;
            } else {
              rec.error = error;
            }
          } else {
            rec.rules_error = s.error().message;
          }
          rec.left.clear();
        }
        if (committing && !roots.empty() && carry) {
          if (FILE* mark = std::fopen((dir + "/recovering").c_str(), "w")) {
            std::fprintf(mark, "%d\n", static_cast<int>(::getpid()));
            std::fclose(mark);
          }
          // Finish it: the decisions are made again, by the stage's own rules, from what is left
          // in the upper layers, and installing is idempotent
          // (docs/adr/0006-staged-workspace.md, decision 4).
          std::unique_ptr<Stage> s(new Stage());
          s->dir_ = dir;
          s->rules_ = std::move(carry->rules);
          s->origin_ = carry->origin;
          s->masked_ = std::move(carry->masked);
          // Its git content is read as a live session's is: without a reader a legitimate
          // commit made before the kill would be refused with the rest of the index.
          s->git_reader_ = git_reader;
          s->quarantine_ = quarantine + "/recovered-" + session;
          const std::size_t nl = phase.find('\n');
          s->t0_ns_ = nl == std::string::npos ? 0 : std::atoll(phase.c_str() + nl + 1);
          bool ok = true;
          for (std::size_t i = 0; i < roots.size(); ++i) {
            StagedRoot r{roots[i], dir + "/u" + std::to_string(i), dir + "/w" + std::to_string(i)};
            Result<Stage::RootState> st = Stage::OpenRoot(r, Code::kInvalidInput);
            if (!st) {
              ok = false;  // quarantined whole, below
              break;
            }
            s->roots_.push_back(std::move(r));
            s->state_.push_back(std::move(*st));
          }
          if (ok) {
            rec.commit = s->Commit(true);
            rec.quarantine = s->quarantine_ + "/" + n;
            if (!rec.commit.error && s->holding_) {
              // Its path rules held entries and no one is here to ask: they wait in the store.
              for (const HeldEntry& h : s->manifest_.entries) rec.left.push_back(h.path);
              s->dir_.clear();
              s.reset();
              ::unlink((dir + "/recovering").c_str());
              if (std::string error; MoveToHeld(dir, stage_root, rec.name, &error)) {
                rec.outcome = "held";
                rec.held = rec.name;
              } else {
                rec.outcome = "kept";
                rec.error = error;
              }
              done.push_back(std::move(rec));
              continue;
            }
            if (rec.commit.error) {
              // Still cannot finish: kept as it is for the next start, and said.
              rec.outcome = "kept";
              rec.error = rec.commit.error->message;
              s->dir_.clear();  // not removed
              // It failed, it did not crash: the next start tries again.
              ::unlink((dir + "/recovering").c_str());
            } else {
              rec.outcome = "finished";  // ~Stage removes it
            }
            done.push_back(std::move(rec));
            continue;
          }
          s->dir_.clear();
        }
        // A process that never reached its commit, a recovery that died, or a stage that does
        // not carry readable rules (an older cordon's, or a torn file): what it wrote goes to the
        // quarantine whole, never into the tree.
        rec.outcome = "quarantined";
        rec.reason = marked                 ? "recovery_died"
                     : committing && !carry ? "rules_unreadable"
                                            : "never_committed";
        rec.left = UpperPaths(dir, roots, &rec.error);
        const std::string dest = quarantine + "/recovered-" + session + "-" + n;
        (void)MakeDirs(quarantine, 0700);
        rec.quarantine = dest;
        if (::rename(dir.c_str(), dest.c_str()) != 0) {
          rec.error = std::string("rename: ") + std::strerror(errno);
        }
        done.push_back(std::move(rec));
      }
    }
    if (!busy) RemoveTree(sdir);
  }
  // Held entries no one answered within approvals.held_days go to the quarantine, recorded.
  const std::string store = HeldRoot(stage_root);
  std::vector<std::string> held;
  if (DIR* hd = ::opendir(store.c_str())) {
    while (dirent* e = ::readdir(hd)) {
      if (e->d_name[0] != '.') held.emplace_back(e->d_name);
    }
    ::closedir(hd);
  }
  std::sort(held.begin(), held.end());
  for (const std::string& id : held) {
    const std::string dir = store + "/" + id;
    UniqueFd lock(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!lock.valid() || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;
    auto m = ReadHeldManifest(dir);
    if (!m || (!m->answer && m->expires_at_ns > RealtimeNs())) continue;
    auto s = Stage::Reopen(dir, quarantine + "/expired-" + id, git_reader);
    if (!s) continue;
    StageRecovery rec;
    rec.stage = dir;
    rec.name = id;
    rec.origin = (*s)->origin_;
    for (const auto& r : (*s)->roots_) rec.roots.push_back(r.root);
    // An answer given through `cordon approvals` whose commit did not finish is finished now.
    const HeldAnswer answer = m->answer ? *m->answer : HeldAnswer{};
    rec.commit = (*s)->Answer(answer, m->answer ? m->deny_reason : std::string("approval_expired"));
    rec.quarantine = (*s)->quarantine_ + "/" + id;
    if (rec.commit.error) {
      rec.outcome = "kept";
      rec.error = rec.commit.error->message;
      (*s)->dir_.clear();
    } else {
      rec.outcome = m->answer ? "finished" : "expired";
    }
    done.push_back(std::move(rec));
  }
  return done;
}

}  // namespace cordon
