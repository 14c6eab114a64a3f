// The git view: listing a git directory into a view, the view's bwrap arguments, and syncing
// the allowed files between the view and the host (workspace/git_view.h).
#include "workspace/git_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "core/fs.h"
#include "core/unique_fd.h"
#include "policy/git_rules.h"
#include "workspace/stage_fs.h"

namespace cordon {
namespace {

constexpr int kMaxModuleDepth = 16;  // modules/<name with slashes>/...: git allows nesting

bool IsUnder(const std::string& path, const std::string& root) {
  return path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
         path[root.size()] == '/';
}

bool IsRealDir(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> DirNames(const std::string& dir) {
  std::vector<std::string> names;
  UniqueDir d = UniqueDir::Open(dir.c_str());
  if (!d.valid()) return names;
  while (dirent* e = d.Next()) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Every git directory reachable from `dir` through modules/* and worktrees/*.
void Expand(const std::string& dir, std::set<std::string>& out) {
  if (!IsRealDir(dir) || !out.insert(dir).second) return;
  for (const auto& n : DirNames(dir + "/worktrees")) Expand(dir + "/worktrees/" + n, out);
  std::function<void(const std::string&, int)> modules = [&](const std::string& m, int depth) {
    if (depth > kMaxModuleDepth) return;
    for (const auto& n : DirNames(m)) {
      const std::string child = m + "/" + n;
      if (!IsRealDir(child)) continue;
      if (Exists(child + "/HEAD")) {
        Expand(child, out);
      } else {
        modules(child, depth + 1);  // a submodule name with a slash: modules/libs/foo
      }
    }
  };
  modules(dir + "/modules", 1);
}

GitViewMount ListGitDir(const std::string& git_dir) {
  GitViewMount m;
  m.git_dir = git_dir;
  for (const auto& n : DirNames(git_dir)) {
    if (n.starts_with(".cordon-sync-")) continue;  // a sync of cordon's own, under way
    // A host git's lock (index.lock...) is gone in a moment: binding it could fail the launch,
    // and in the view the sandbox's git takes its own.
    if (n.ends_with(".lock")) continue;
    const std::string p = git_dir + "/" + n;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char buf[PATH_MAX];
      ssize_t len = ::readlink(p.c_str(), buf, sizeof buf - 1);
      if (len > 0) m.symlinks.emplace_back(n, std::string(buf, static_cast<std::size_t>(len)));
    } else if (S_ISDIR(st.st_mode) && n == "refs") {
      m.trees.push_back(n);  // each ref is a private copy, checked before it lands
    } else if (S_ISDIR(st.st_mode) && IsGitSharedDir(n)) {
      m.shared.push_back(n);
    } else if (S_ISREG(st.st_mode) && IsGitSyncedFile(n)) {
      m.copied.push_back(n);
    } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
      m.read_only.push_back(n);
    }
    // A socket or fifo at the top (fsmonitor--daemon.ipc) is not shown.
  }
  return m;
}

std::string SyncRandomHex() {
  unsigned char b[6] = {};
  if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) {
    static std::atomic<unsigned> n{0};
    unsigned v = ++n ^ static_cast<unsigned>(::getpid());
    std::memcpy(b, &v, sizeof v);
  }
  char out[13];
  for (int i = 0; i < 6; ++i) std::snprintf(out + 2 * i, 3, "%02x", b[i]);
  return out;
}

UniqueFd OpenDirNoFollow(const std::string& path) {
  return UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// Copies dir `from`/name over dir `to`/name by temp file + rename: a reader of `to` sees the
// old file or the new one, never a partial one. The source must be a regular file (the view is
// writable by the sandbox: a symlink or fifo planted there is not followed). With `git_lock`
// the temp file is git's own lock (NAME.lock, O_EXCL), waited for up to 2 s: a host git that
// read the file before cannot write its stale copy back over this one (git verifies the index
// it read is still on disk before writing), and one that holds the lock finishes first.
bool CopyAt(int from, int to, const std::string& name, bool git_lock = false) {
  UniqueFd src(::openat(from, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!src.valid() || ::fstat(src.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const std::string tmp =
      git_lock ? name + ".lock"
               : ".cordon-sync-" + std::to_string(::getpid()) + "-" + SyncRandomHex() + "-" + name;
  const mode_t mode = (st.st_mode & 0666) | 0600;
  UniqueFd dst;
  for (int tries = 0; tries < 100; ++tries) {
    dst = UniqueFd(
        ::openat(to, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (dst.valid() || errno != EEXIST || !git_lock) break;
    ::usleep(20000);  // a host git holds the lock: it renames or removes it when done
  }
  if (!dst.valid()) return false;
  bool ok = true;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(src.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    if (!WriteAll(dst.get(), {buf, static_cast<std::size_t>(n)}, name)) {
      ok = false;
      break;
    }
  }
  ok = ok && ::fchmod(dst.get(), mode) == 0;
  dst.Reset();
  if (ok && ::renameat(to, tmp.c_str(), to, name.c_str()) == 0) return true;
  ::unlinkat(to, tmp.c_str(), 0);
  return false;
}

constexpr int kMaxTreeDepth = 64;
constexpr std::size_t kMaxTreeFiles = 200000;

// The regular files below `tree` in `root_fd`, each directory opened from its parent without
// following a symlink, as paths relative to root_fd ("refs/heads/main"). git's lock files and
// cordon's own temporary files are left out.
void ListTree(int root_fd, const std::string& tree, std::vector<std::string>& out) {
  std::function<void(int, const std::string&, int)> walk = [&](int parent, const std::string& rel,
                                                               int depth) {
    if (depth > kMaxTreeDepth || out.size() >= kMaxTreeFiles) return;
    auto fd = stage::OpenDirBeneath(parent, stage::LeafOf(rel), rel);
    if (!fd) return;
    auto names = stage::ReadNames(fd->get(), rel);
    if (!names) return;
    for (const auto& n : *names) {
      if (n.ends_with(".lock") || n.starts_with(".cordon-sync-")) continue;
      auto st = stage::StatAt(fd->get(), n, rel + "/" + n);
      if (!st || !*st) continue;
      if (S_ISDIR((**st).stx_mode)) {
        walk(fd->get(), rel + "/" + n, depth + 1);
      } else if (S_ISREG((**st).stx_mode)) {
        out.push_back(rel + "/" + n);
      }
    }
  };
  walk(root_fd, tree, 0);
}

// What a file of a git directory lands as git content (workspace/git_content.h).
bool IsGitContentName(const std::string& n) {
  return n == "index" || n == "HEAD" || n == "packed-refs" || n.starts_with("refs/");
}

// The order a sync-out writes in: an index's shared part before the index that names it, the
// packed refs before the loose ones a pack-refs deletes, the refs before the index and HEAD
// that may name them, HEAD last.
int SyncRank(const std::string& n) {
  if (n.starts_with("sharedindex.")) return 0;
  if (n == "packed-refs") return 1;
  if (n.starts_with("refs/")) return 2;
  if (n == "index") return 3;
  if (n == "HEAD") return 5;
  return 4;
}

// Whether the view's HEAD (below `view_fd`, never through a symlink) is one git reads.
bool ReadsAsHead(int view_fd) {
  const std::optional<std::string> head = ReadSmallFileAt(view_fd, "HEAD", 511);
  return head && IsGitHeadContent(*head);
}

}  // namespace

void AppendGitViewArgs(const std::vector<GitViewMount>& views, std::vector<std::string>& a) {
  std::vector<const GitViewMount*> sorted;
  for (const auto& v : views) sorted.push_back(&v);
  // A parent's path sorts before its children's: a view's read-only modules/ is mounted before
  // the views of the submodules in it.
  std::sort(sorted.begin(), sorted.end(),
            [](const GitViewMount* x, const GitViewMount* y) { return x->git_dir < y->git_dir; });
  for (const GitViewMount* v : sorted) {
    a.insert(a.end(), {"--bind", v->view_dir, v->git_dir});
    for (const auto& n : v->shared) {
      const std::string p = v->git_dir + "/" + n;
      a.insert(a.end(), {"--bind", p, p});
    }
    for (const auto& n : v->read_only) {
      const std::string p = v->git_dir + "/" + n;
      a.insert(a.end(), {"--ro-bind", p, p});
    }
  }
}

std::vector<std::string> GitViewPins(const std::string& workspace,
                                     const std::vector<GitViewMount>& views) {
  std::set<std::string> pins;
  auto inside_a_view = [&](const std::string& p) {
    return std::any_of(views.begin(), views.end(), [&](const GitViewMount& v) {
      return p == v.git_dir || IsUnder(p, v.git_dir);
    });
  };
  for (const auto& v : views) {
    if (!IsUnder(v.git_dir, workspace)) continue;
    for (std::size_t pos = v.git_dir.find('/', workspace.size() + 1); pos != std::string::npos;
         pos = v.git_dir.find('/', pos + 1)) {
      const std::string a = v.git_dir.substr(0, pos);
      if (!inside_a_view(a)) pins.insert(a);
    }
  }
  return {pins.begin(), pins.end()};
}

Json GitViewsJson(const std::vector<GitViewMount>& views) {
  Json out = Json::array();
  for (const auto& v : views) {
    Json links = Json::object();
    for (const auto& [n, t] : v.symlinks) links[n] = t;
    out.push_back({{"git_dir", v.git_dir},
                   {"view", v.view_dir},
                   {"shared", v.shared},
                   {"read_only", v.read_only},
                   {"copied", v.copied},
                   {"trees", v.trees},
                   {"symlinks", links}});
  }
  return out;
}

GitViews::GitViews() {
  const std::string views = CordonStateDir() + "/views";
  RemoveStale(views);
  root_ = views + "/" + std::to_string(::getpid()) + "-" + SyncRandomHex();
}

GitViews::~GitViews() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<GitViewRefusal> refused;  // the last process's end already reported its own
  for (auto& [git_dir, v] : views_) {
    if (v.made) SyncOutLocked(git_dir, v, refused);
  }
  std::error_code ec;  // remove_all does not follow the symlinks a command left there
  std::filesystem::remove_all(root_, ec);
}

void GitViews::RemoveStale(const std::string& views_root) {
  for (const auto& n : DirNames(views_root)) {
    if (!NamesDeadProcess(n, "")) continue;
    std::error_code ec;
    std::filesystem::remove_all(views_root + "/" + n, ec);
  }
}

Result<std::vector<GitViewMount>> GitViews::Prepare(const std::vector<std::string>& git_dirs,
                                                    bool materialize) {
  std::set<std::string> all;
  for (const auto& d : git_dirs) Expand(d, all);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<GitViewMount> out;
  for (const auto& d : all) {
    auto [it, fresh] = views_.try_emplace(d);
    View& v = it->second;
    if (fresh) v.dir = root_ + "/" + std::to_string(views_.size());
    GitViewMount m = ListGitDir(d);
    m.view_dir = v.dir;
    if (materialize) TRY(Materialize(m, v));
    out.push_back(std::move(m));
  }
  return out;
}

GitViews::Sig GitViews::StatSig(int dfd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
    return {};
  }
  return {true,
          st.st_dev,
          st.st_ino,
          st.st_size,
          st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec};
}

Status GitViews::Materialize(const GitViewMount& m, View& v) {
  if (!v.made) {
    std::error_code ec;
    std::filesystem::create_directories(root_, ec);
    for (const std::string& d : {CordonStateDir(), CordonStateDir() + "/views", root_}) {
      ::chmod(d.c_str(), 0700);
    }
    if (::mkdir(v.dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return SysFail(Code::kSandboxUnavailable, "mkdir", v.dir);
    }
    v.made = true;
  }
  UniqueFd view = OpenDirNoFollow(v.dir);
  if (!view.valid()) return SysFail(Code::kSandboxUnavailable, "open", v.dir);
  UniqueFd host = OpenDirNoFollow(m.git_dir);
  if (!host.valid()) return SysFail(Code::kSandboxUnavailable, "open", m.git_dir);
  // Mount points for what is bound, of the kind bwrap needs; anything the sandbox left under
  // such a name in the view (private) gives way to the host's entry.
  std::set<std::string> points;
  auto ensure = [&](const std::string& n, bool dir) -> Status {
    points.insert(n);
    struct stat st {};
    if (::fstatat(view.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) return {};
      std::error_code ec;
      std::filesystem::remove_all(v.dir + "/" + n, ec);
    }
    if (dir ? ::mkdirat(view.get(), n.c_str(), 0700) != 0
            : UniqueFd(::openat(view.get(), n.c_str(),
                                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600))
                      .valid() == false) {
      return SysFail(Code::kSandboxUnavailable, "create mount point", v.dir + "/" + n);
    }
    return {};
  };
  for (const auto& n : m.shared) TRY(ensure(n, true));
  for (const auto& n : m.read_only) {
    struct stat st {};
    TRY(ensure(
        n, ::fstatat(host.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)));
  }
  for (const auto& n : v.mount_points) {
    if (points.count(n)) continue;
    // The host no longer has it: the empty mount point goes (a non-empty one is the sandbox's).
    if (::unlinkat(view.get(), n.c_str(), AT_REMOVEDIR) != 0) {
      struct stat st {};
      if (::fstatat(view.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
          st.st_size == 0) {
        ::unlinkat(view.get(), n.c_str(), 0);
      }
    }
  }
  v.mount_points = std::move(points);
  for (const auto& [n, target] : m.symlinks) {
    char buf[PATH_MAX];
    ssize_t len = ::readlinkat(view.get(), n.c_str(), buf, sizeof buf - 1);
    if (len >= 0 && std::string(buf, static_cast<std::size_t>(len)) == target) continue;
    std::error_code ec;
    std::filesystem::remove_all(v.dir + "/" + n, ec);
    if (::symlinkat(target.c_str(), view.get(), n.c_str()) != 0) {
      return SysFail(Code::kSandboxUnavailable, "symlink", v.dir + "/" + n);
    }
  }
  // Sync-in: a host file changed since the last sync replaces a view copy left unchanged.
  std::set<std::string> names(m.copied.begin(), m.copied.end());
  for (const auto& [n, s] : v.files) {
    if (n.find('/') == std::string::npos) names.insert(n);  // a tree's files: SyncInTree
  }
  // A split index's shared part first: the index names it, and the host's index must never name
  // a sharedindex.* the host does not have yet.
  std::vector<std::string> order(names.begin(), names.end());
  std::stable_partition(order.begin(), order.end(),
                        [](const std::string& n) { return n.starts_with("sharedindex."); });
  for (const auto& n : order) {
    if (v.mount_points.count(n)) continue;
    Synced& rec = v.files[n];
    const Sig host_sig = StatSig(host.get(), n);
    if (host_sig == rec.host) continue;
    if (StatSig(view.get(), n) == rec.view) {
      if (host_sig.exists) {
        if (!CopyAt(host.get(), view.get(), n)) {
          return SysFail(Code::kSandboxUnavailable, "copy into the git view", m.git_dir + "/" + n);
        }
      } else {
        ::unlinkat(view.get(), n.c_str(), 0);
      }
    }
    rec.host = host_sig;
    rec.view = StatSig(view.get(), n);
  }
  v.trees = m.trees;
  for (const auto& t : v.trees) SyncInTree(host.get(), view.get(), t, v);
  return {};
}

namespace {
// A file's signature below a chain's root, never through a symlink; none when it is not there.
template <class StatFn>
auto SigIn(stage::DirChain& chain, const std::string& rel, StatFn stat_sig) {
  auto dir = chain.Open(stage::ParentOf(rel));
  return dir ? stat_sig(*dir, std::string(stage::LeafOf(rel))) : decltype(stat_sig(0, rel)){};
}
}  // namespace

void GitViews::SyncInTree(int host_fd, int view_fd, const std::string& tree, View& v) {
  // The tree's own directory in the view (git takes a directory without refs/ for no repository).
  if (::mkdirat(view_fd, tree.c_str(), 0700) != 0 && errno != EEXIST) return;
  std::vector<std::string> host_files;
  ListTree(host_fd, tree, host_files);
  std::set<std::string> names(host_files.begin(), host_files.end());
  const std::string prefix = tree + "/";
  for (const auto& [n, s] : v.files) {
    if (n.starts_with(prefix)) names.insert(n);
  }
  stage::DirChain host_dirs(host_fd), view_dirs(view_fd);
  for (const auto& n : names) {
    Synced& rec = v.files[n];
    const Sig host_sig = SigIn(host_dirs, n, StatSig);
    if (host_sig == rec.host) continue;
    const std::string parent(stage::ParentOf(n)), leaf(stage::LeafOf(n));
    if (SigIn(view_dirs, n, StatSig) == rec.view) {
      if (host_sig.exists) {
        auto from = host_dirs.Open(parent);
        auto to = view_dirs.Open(parent, 0700);
        // A view whose tree the sandbox broke (a symlink for a directory) does not show this
        // ref; it is tried again at the next sync.
        if (!from || !to || !CopyAt(*from, *to, leaf)) continue;
      } else if (auto in = view_dirs.Open(parent)) {
        ::unlinkat(*in, leaf.c_str(), 0);
      }
    }
    rec.host = host_sig;
    rec.view = SigIn(view_dirs, n, StatSig);
  }
}

std::vector<GitViewRefusal> GitViews::SyncOut() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<GitViewRefusal> refused;
  for (auto& [git_dir, v] : views_) {
    if (v.made) SyncOutLocked(git_dir, v, refused);
  }
  return refused;
}

void GitViews::SyncOutLocked(const std::string& git_dir, View& v,
                             std::vector<GitViewRefusal>& refused) {
  UniqueFd view = OpenDirNoFollow(v.dir);
  UniqueFd host = OpenDirNoFollow(git_dir);
  if (!view.valid() || !host.valid()) return;
  stage::DirChain host_dirs(host.get()), view_dirs(view.get());
  struct Change {
    std::string name;
    bool install = false;  // false: deleted in the view
    Sig view_sig;
  };
  std::vector<Change> changes;
  std::set<std::string> names;
  for (const auto& [n, s] : v.files) names.insert(n);
  for (const auto& n : DirNames(v.dir)) {
    if (IsGitSyncedFile(n)) names.insert(n);
  }
  std::vector<std::string> tree_files;
  for (const auto& t : v.trees) ListTree(view.get(), t, tree_files);
  names.insert(tree_files.begin(), tree_files.end());
  for (const auto& n : names) {
    if (v.mount_points.count(n)) continue;
    Synced& rec = v.files[n];
    const Sig view_sig = SigIn(view_dirs, n, StatSig);
    if (view_sig.exists && view_sig != rec.view) {
      // A HEAD git cannot read makes host git take the directory for no repository and fall
      // through to a parent directory's: it stays in the view, as does a deleted one (below).
      if (n == "HEAD" && !ReadsAsHead(view.get())) continue;
      if (auto dir = host_dirs.Open(stage::ParentOf(n))) {
        struct stat st {};
        const std::string leaf(stage::LeafOf(n));
        if (::fstatat(*dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
          continue;  // the host has something else under this name: it is not replaced
      }
      changes.push_back({n, true, view_sig});
    } else if (!view_sig.exists && rec.view.exists) {
      changes.push_back({n, false, {}});
    }
  }
  // What would land as git content is checked first (docs/adr/0014).
  std::map<std::string, std::vector<GitContentFinding>> why;
  if (check_) {
    std::vector<std::string> content;
    for (const auto& c : changes) {
      if (c.install && IsGitContentName(c.name)) content.push_back(c.name);
    }
    if (!content.empty()) {
      for (auto& f : check_(git_dir, v.dir, content)) why[f.entry].push_back(std::move(f));
    }
    // `git pack-refs` (git gc) moves loose refs into packed-refs and deletes the loose files:
    // with the packed-refs refused, those deletions would drop the host's refs.
    if (why.count("packed-refs")) {
      for (const auto& c : changes) {
        if (!c.install && c.name.starts_with("refs/")) {
          why[c.name].push_back(
              {c.name, c.name, "", "", "", "deleted by a pack-refs whose packed-refs was refused"});
        }
      }
    }
  }
  std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    return SyncRank(a.name) < SyncRank(b.name);
  });
  for (const auto& c : changes) {
    Synced& rec = v.files[c.name];
    const std::string parent(stage::ParentOf(c.name)), leaf(stage::LeafOf(c.name));
    if (auto w = why.find(c.name); w != why.end()) {
      GitViewRefusal r{git_dir, c.name, "", std::move(w->second)};
      auto in_view = view_dirs.Open(parent, 0700);
      // The view's copy is kept in the quarantine (cordon's own directory)...
      if (c.install && in_view && !quarantine_.empty()) {
        const std::string q = quarantine_ + "/git-view-" + std::to_string(::getpid()) + "-" +
                              std::to_string(++quarantined_);
        std::error_code ec;
        std::filesystem::create_directories(q + (parent.empty() ? "" : "/" + parent), ec);
        UniqueFd qdir = OpenDirNoFollow(q + (parent.empty() ? "" : "/" + parent));
        if (!ec && qdir.valid() && CopyAt(*in_view, qdir.get(), leaf))
          r.quarantine = q + "/" + c.name;
      }
      // ...and the view holds the host's again, so that the sandbox's next git sees what the
      // host repository holds.
      if (in_view) {
        auto in_host = host_dirs.Open(parent);
        if (in_host && StatSig(*in_host, leaf).exists) {
          (void)CopyAt(*in_host, *in_view, leaf);
        } else {
          ::unlinkat(*in_view, leaf.c_str(), 0);
        }
      }
      rec.host = SigIn(host_dirs, c.name, StatSig);
      rec.view = SigIn(view_dirs, c.name, StatSig);
      refused.push_back(std::move(r));
      continue;
    }
    if (c.install) {
      auto from = view_dirs.Open(parent);
      auto to = host_dirs.Open(parent, 0777);  // a new branch's directory (refs/heads/topic/)
      if (!from || !to || !CopyAt(*from, *to, leaf, true)) continue;  // tried at the next sync
      rec.view = c.view_sig;
      rec.host = StatSig(*to, leaf);
    } else {
      // Deleted in the view (MERGE_HEAD after a commit, a deleted branch): deleted on the host
      // only if the host's is still the one last synced; HEAD never.
      if (c.name != "HEAD" && rec.host.exists) {
        if (auto dir = host_dirs.Open(parent); dir && StatSig(*dir, leaf) == rec.host)
          ::unlinkat(*dir, leaf.c_str(), 0);
      }
      rec.view = {};
      rec.host = SigIn(host_dirs, c.name, StatSig);
    }
  }
}

}  // namespace cordon
