// The git view (docs/adr/0001-workspace-view.md, point 3): every git directory in a writable
// root is shown to the sandbox as a directory private to cordon, in which objects/ and logs/ are
// the host's own, the files git rewrites by lock + rename (and every ref below refs/) are
// private copies synced back (policy/git_rules.h decides which), and everything else is the
// host's, read-only. What the sandbox creates or changes anywhere else in it never reaches the
// host. What a sync-out would land as git content (the index, HEAD, packed-refs, a ref) is
// checked first like the tree (workspace/git_content.h, docs/adr/0014): what the check refuses
// stays out of the host repository.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/text.h"
#include "workspace/git_content.h"

namespace cordon {

// One git directory as the sandbox sees it: plain data the bwrap argv is built from.
struct GitViewMount {
  std::string git_dir;                 // host path, and the same path inside the sandbox
  std::string view_dir;                // cordon's private directory bound over it
  std::vector<std::string> shared;     // names bound read-write from the host (objects, refs, logs)
  std::vector<std::string> read_only;  // names bound read-only from the host
  std::vector<std::string> copied;     // names whose private copy is synced both ways
  // Symbolic links at the top, recreated in the view as they are (a bind would follow them).
  std::vector<std::pair<std::string, std::string>> symlinks;
  // Directories whose private copy is synced both ways file by file (refs): each ref lands, or
  // is refused, on its own.
  std::vector<std::string> trees{};
  bool operator==(const GitViewMount&) const = default;
};

// Pure: the bwrap arguments of the views, in order (each view before the views nested in it).
// Sources are host paths; bwrap resolves them outside the new root.
void AppendGitViewArgs(const std::vector<GitViewMount>& views, std::vector<std::string>& argv);
// Pure: the directories between `workspace` and each git directory, to be pinned (bound onto
// themselves) so that no ancestor of a viewed git directory can be renamed and replaced.
std::vector<std::string> GitViewPins(const std::string& workspace,
                                     const std::vector<GitViewMount>& views);
Json GitViewsJson(const std::vector<GitViewMount>& views);

// A private copy a sync-out did not write into the host git directory, because what it would
// land is refused (or could not be checked): the view's copy went to `quarantine` and the view
// holds the host's again.
struct GitViewRefusal {
  std::string git_dir;     // the host git directory
  std::string name;        // index, HEAD, packed-refs, refs/heads/x
  std::string quarantine;  // where the view's copy went; empty when it could not be kept
  std::vector<GitContentFinding> why;
};
// The check of what a sync-out would land: the host git directory, the view directory holding
// the changed copies under the same names, and their names. Each finding's `entry` is a name.
using GitViewCheck = std::function<std::vector<GitContentFinding>(
    const std::string& git_dir, const std::string& view_dir, const std::vector<std::string>&)>;

// The views of one session: one per git directory, shared by every sandbox of the session,
// removed with it. Thread-safe (background jobs sync from their own threads).
class GitViews {
 public:
  // Views live in <state>/views/<pid>-<random>/<n>; the views of cordon processes that are gone
  // are removed here.
  GitViews();
  ~GitViews();
  GitViews(const GitViews&) = delete;
  GitViews& operator=(const GitViews&) = delete;

  // Expands each git directory's modules/* and worktrees/* (recursively), then, when
  // `materialize`, makes or refreshes each view and syncs in the host's changes (a host file
  // changed since the last sync replaces a view copy the sandbox left unchanged). Without it
  // (`cordon exec --plan`) nothing is written: the views are only named.
  Result<std::vector<GitViewMount>> Prepare(const std::vector<std::string>& git_dirs,
                                            bool materialize);
  // How each sync-out checks the git content it would land, and where a refused copy goes.
  // Without one (the view's own unit tests), nothing is checked.
  void SetCheck(GitViewCheck check, std::string quarantine) {
    std::lock_guard<std::mutex> lock(mu_);
    check_ = std::move(check);
    quarantine_ = std::move(quarantine);
  }
  // Writes each synced file the sandbox changed into the host git directory (temp file +
  // rename), and deletes on the host one the sandbox deleted if the host's is the one last
  // synced: the packed refs, then the refs, the index, the rest, HEAD last. Git content the
  // check refuses is not written (nor a ref deletion of a pack-refs whose packed-refs is
  // refused); the returned list says what, and why. Called when a confined process ends and at
  // each tool-call boundary.
  std::vector<GitViewRefusal> SyncOut();
  // Removes <views>/<pid>-* whose pid is no longer running.
  static void RemoveStale(const std::string& views_root);

 private:
  struct Sig {
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    long long mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Sig&) const = default;
  };
  struct Synced {
    Sig host, view;  // as they were right after the last sync
  };
  struct View {
    std::string dir;
    bool made = false;
    std::map<std::string, Synced> files;  // top-level names, and each tree's files (refs/...)
    std::set<std::string> mount_points;
    std::vector<std::string> trees;  // GitViewMount::trees, as last prepared
  };
  static Sig StatSig(int dfd, const std::string& name);
  Status Materialize(const GitViewMount& m, View& v);
  // Sync-in of one tree (refs): a host ref changed since the last sync replaces a view copy the
  // sandbox left unchanged, and one the host deleted goes from the view likewise.
  void SyncInTree(int host_fd, int view_fd, const std::string& tree, View& v);
  void SyncOutLocked(const std::string& git_dir, View& v, std::vector<GitViewRefusal>& refused);
  std::mutex mu_;
  std::string root_;
  GitViewCheck check_;
  std::string quarantine_;
  std::uint64_t quarantined_ = 0;
  std::map<std::string, View> views_;  // by git directory
};

}  // namespace cordon
