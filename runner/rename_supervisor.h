// Renames of directories that existed before the call, in the staged workspace (docs/adr/0013).
// overlayfs without redirect_dir answers rename(2) of a lower directory with EXDEV; `mv` copies
// then, but `git mv`, Node's fs.renameSync and Python's os.rename fail. The command's side
// installs a seccomp filter that hands rename, renameat and renameat2 to a listener; the shim,
// its parent, answers each one: it does the rename itself, and on EXDEV for a directory it
// copies the tree under the new name and removes the old one, as `mv` does.
//
// The supervisor acts with no more right than the command: the shim restricts itself with the
// command's Landlock ruleset before the fork (so the command's domain is nested in its own), has
// no capabilities, and never sets a set-user-ID or set-group-ID bit (the command's filter
// refuses them). What it cannot read (a caller whose memory it may not read, no /proc) it lets
// the kernel do as the caller asked.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/unique_fd.h"

namespace cordon {

// The filter the command's side loads after cordon's own: rename, renameat and renameat2 go to
// the listener; everything else is allowed (cordon's filter, loaded first, still refuses what it
// refuses: its errno wins over a notification). Compiled by cordon, loaded by the shim.
Result<std::string> CompileRenameNotifyFilter();

// seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER): the listener's descriptor.
// no_new_privs must already be set.
Result<UniqueFd> LoadSeccompListener(std::string_view program);

// What the supervisor did, for the shim's report.
struct RenameCounts {
  std::uint64_t renames = 0;          // done as asked
  std::uint64_t directory_moves = 0;  // lower directories moved by copy and removal
  std::uint64_t let_through = 0;      // left to the kernel (caller unreadable)
  std::uint64_t failed = 0;           // answered with an error
};

// Receives one notification from `listener` and answers it. False when the listener cannot be
// read any more (every task that used the filter has gone).
bool AnswerRenameNotification(int listener, RenameCounts& counts);

// The move of a directory by copy and removal, in the caller's terms: `old_dir`/`old_path` and
// `new_dir`/`new_path` as renameat2 takes them (flags: 0 or RENAME_NOREPLACE). Copies the tree
// (modes without set-ID bits, times, symlinks, fifos, hard links among the copied files) to a
// temporary name beside the target, renames it into place, then removes the source. A tree that
// holds a mount point, or a move to another mount, is refused with EXDEV. Returns 0 or the first
// errno; a partial copy is removed.
int MoveDirectoryByCopy(int old_dir, const std::string& old_path, int new_dir,
                        const std::string& new_path, unsigned flags);

}  // namespace cordon
