// Workspace file operations: every path is resolved by the kernel beneath the workspace dirfd
// (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS); writes are atomic.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"

namespace cordon {

// Whether `name` is PREFIX, then a pid, then '-', with that pid gone (and not this process):
// how leftovers of a cordon killed with SIGKILL are told from a live one's.
bool NamesDeadProcess(std::string_view name, std::string_view prefix);

// Writes all of `data` to `fd`, retrying short writes and EINTR (ENOSPC/EDQUOT: no_space; EFBIG:
// too_large).
Status WriteAll(int fd, std::string_view data, const std::string& where);

// The content of the regular file `name` in `dir_fd` when it holds at most `max` bytes, read
// without following a symlink or blocking on a FIFO; nullopt when it is missing, not a regular
// file, unreadable or larger.
std::optional<std::string> ReadSmallFileAt(int dir_fd, const char* name, std::size_t max);

// --- keyfiles: the one reader of every secret cordon takes from a file (the audit HMAC key, the
// checkpoint signing key, serve --http's bearer token). The file's mode is read from the open
// descriptor (no window between the check and the read): one that group or others may access
// (mode & 077) is refused with denied_by_policy and one message for every kind of key, since
// whoever reads it can forge what it protects. A missing file is not_found. At most 1 MiB.
Result<std::string> ReadKeyFileChecked(const std::string& path);

// Lexically normalizes an agent-supplied path into a workspace-relative one ("." for the root).
// Rejects NUL bytes and empty paths (invalid_input), absolute paths outside `root` and ".."
// that climbs above the root (outside_workspace). The kernel still checks every component.
Result<std::string> NormalizeWorkspacePath(std::string_view root, std::string_view path);

struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  bool operator==(const FileIdentity&) const = default;
};
FileIdentity IdentityOf(const struct stat& st);

struct FileContent {
  std::string data;
  FileIdentity id;
};

struct WriteOutcome {
  bool existed = false;
  std::string sha256_before;  // empty when the file did not exist
  std::string sha256_after;
  std::uint64_t bytes_before = 0;
  std::uint64_t bytes_after = 0;
};

class Workspace {
 public:
  static Result<Workspace> Open(const std::string& dir);

  const std::string& root() const { return root_; }
  int fd() const { return fd_.get(); }

  // Normalizes `path` (see NormalizeWorkspacePath).
  Result<std::string> Relative(std::string_view path) const;

  // Opens a regular file for reading; FIFOs, devices, sockets and directories are refused
  // without ever being opened for I/O.
  Result<UniqueFd> OpenRegular(const std::string& rel) const;

  // The size of a regular file, by an O_PATH open: nothing is opened for I/O.
  Result<std::uint64_t> RegularSize(const std::string& rel) const;

  // Reads a whole regular file of at most max_bytes (too_large otherwise).
  Result<FileContent> ReadRegular(const std::string& rel, std::uint64_t max_bytes) const;

  // Opens the directory that holds `rel`, optionally creating missing parents inside the
  // workspace. Returns the dir fd; *leaf receives the last component.
  Result<UniqueFd> OpenParent(const std::string& rel, bool create_missing, std::string* leaf) const;

  // Creates `rel` with `content`; never clobbers a file that exists or appears meanwhile
  // (renameat2 RENAME_NOREPLACE, falling back to linkat).
  Result<WriteOutcome> CreateExclusive(const std::string& rel, std::string_view content) const;

  // Replaces an existing regular file atomically: same-directory temp file, fsync, rename,
  // fsync of the directory. Mode (and owner, when permitted) are preserved. When the file's
  // identity no longer matches `expected`, nothing is installed (conflict).
  Result<WriteOutcome> AtomicReplace(const std::string& rel, std::string_view content,
                                     const FileContent& expected) const;

 private:
  std::string root_;
  UniqueFd fd_;
};

// The workspace's AGENTS.md files, root first, then nested ones in path order: a bounded walk
// (depth, entries, at most 32 files) that never follows a symlink and skips hidden directories
// and node_modules, whose AGENTS.md files are other projects' business.
std::vector<std::string> FindAgentsFiles(const Workspace& ws);

// cordon's state directory: $XDG_STATE_HOME/cordon, ~/.local/state/cordon, or (no usable HOME)
// /tmp/cordon-state-UID. Git views and the quarantine live under it, never in a workspace.
std::string CordonStateDir();

// cordon's cache directory: $XDG_CACHE_HOME/cordon, ~/.cache/cordon, or (no usable HOME)
// /tmp/cordon-cache-UID. Not under the state directory, which every sandbox masks: the egress
// presets' caches live here (policy/egress.h PresetCacheDir) and are bound into sandboxes.
std::string CordonCacheDir();

}  // namespace cordon
