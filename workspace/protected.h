// The host paths a launch binds and the protected entries the workspace guard found: plain
// data shared by the workspace layer and the launch plan (runner/bwrap.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace cordon {

struct TreeSnapshot;  // workspace/changes.h

enum class PathKind { kMissing, kDir, kFile, kSymlink, kOther };

struct HostPath {
  std::string path;
  PathKind kind = PathKind::kMissing;
  std::string symlink_target;  // for kSymlink
};

// An existing protected entry, bound read-only onto itself. A missing one gets no mount point:
// nothing is ever created in the workspace for it (the workspace guard sweeps it instead).
struct ProtectedEntry {
  std::string path;  // absolute
  PathKind kind = PathKind::kMissing;
};

// The protected entries that exist in the writable roots, the directories to pin so that no
// ancestor of one can be renamed, and every git directory; made by ScanProtectedPaths
// (workspace/guard.h), a full walk.
struct ProtectedScan {
  std::vector<ProtectedEntry> protect;
  std::vector<std::string> pins;
  std::vector<std::string> git_dirs;  // absolute: every .git dir, and a .git file's target inside
  std::size_t scanned = 0;            // directory entries walked
  // The walk's metadata snapshot, when asked for (GuardOptions::snapshot): a change record's
  // before side (workspace/changes.h).
  std::shared_ptr<TreeSnapshot> snapshot;
};

}  // namespace cordon
