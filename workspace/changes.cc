// Change records: snapshot entries, the path-and-inode diff, and the bounded hashing after.
#include "workspace/changes.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "core/hash.h"
#include "core/signals.h"
#include "core/unique_fd.h"

namespace cordon {
namespace {

const char* TypeName(std::uint32_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "dir";
  if (S_ISLNK(mode)) return "symlink";
  return "other";
}

// Nothing is known of its state before: the pass beside the process came too late (lost), or
// never came (deferred: the diff decides it from the after side).
bool Unknown(const SnapEntry& e) { return e.lost || e.deferred; }

bool Same(const SnapEntry& a, const SnapEntry& b) {
  return !Unknown(a) && !Unknown(b) && a.ino == b.ino && a.dev == b.dev &&
         a.btime_ns == b.btime_ns && a.ctime_ns == b.ctime_ns && a.mtime_ns == b.mtime_ns &&
         a.size == b.size && a.mode == b.mode && a.nlink == b.nlink && a.path == b.path;
}

struct InodeKey {
  std::uint64_t dev, ino;
  bool operator==(const InodeKey&) const = default;
};
struct InodeHash {
  std::size_t operator()(const InodeKey& k) const {
    return std::hash<std::uint64_t>()(k.ino * 1000003u ^ k.dev);
  }
};

InodeKey Inode(const SnapEntry& e) { return {e.dev, e.ino}; }

std::int64_t BirthNs(const struct statx& sx) {
  if ((sx.stx_mask & STATX_BTIME) == 0) return 0;
  return sx.stx_btime.tv_sec * 1000000000LL + sx.stx_btime.tv_nsec;
}

// One inode, not a reused inode number: the birth time tells them apart where the filesystem
// keeps one (ext4, xfs, btrfs, tmpfs); and the type never changes.
bool SameInode(const SnapEntry& x, const SnapEntry& y) {
  return x.ino == y.ino && x.dev == y.dev && (x.mode & S_IFMT) == (y.mode & S_IFMT) &&
         (x.btime_ns == 0 || y.btime_ns == 0 || x.btime_ns == y.btime_ns);
}

bool ContentChanged(const SnapEntry& b, const SnapEntry& a) {
  // A directory's mtime is its entries': what changed in it is listed by name instead.
  if (S_ISDIR(a.mode)) return false;
  return Unknown(b) || b.size != a.size || b.mtime_ns != a.mtime_ns;
}

// Open addressing over entry indices, with no allocation per entry: the diff's maps by path and
// by inode. Entries sharing a key (an inode's names) are chained in insertion order.
template <class Key, class KeyOf, class Hash>
class FlatIndex {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  FlatIndex(std::size_t n_entries, std::size_t n_keys, KeyOf key_of)
      : key_of_(key_of), next_(n_entries, kNone) {
    std::size_t cap = 16;
    while (cap < n_keys * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
  }
  void Insert(std::uint32_t i) {
    Slot& s = SlotFor(key_of_(i));
    if (s.head == kNone) {
      s.head = s.tail = i;
    } else {
      next_[s.tail] = i;
      s.tail = i;
    }
  }
  std::uint32_t Find(const Key& k) const { return SlotFor(k).head; }
  std::uint32_t Next(std::uint32_t i) const { return next_[i]; }

 private:
  struct Slot {
    std::uint32_t head = kNone, tail = kNone;
  };
  Slot& SlotFor(const Key& k) {
    return const_cast<Slot&>(static_cast<const FlatIndex*>(this)->SlotFor(k));
  }
  const Slot& SlotFor(const Key& k) const {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t at = Hash()(k) & mask;; at = (at + 1) & mask) {
      const Slot& s = slots_[at];
      if (s.head == kNone || key_of_(s.head) == k) return s;
    }
  }
  KeyOf key_of_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> next_;
};

bool Under(std::string_view path, std::string_view dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

FileChange Change(std::string kind, const SnapEntry* was, const SnapEntry* now) {
  FileChange c;
  c.kind = std::move(kind);
  c.path = now != nullptr ? now->path : was->path;
  c.type = TypeName(now != nullptr ? now->mode : was->mode);
  c.git = (now != nullptr && now->git) || (was != nullptr && was->git);
  if (was != nullptr) {
    c.was = *was;
    if (S_ISREG(was->mode) && !Unknown(*was)) c.bytes_before = was->size;
    c.before_unknown = Unknown(*was);
  }
  if (now != nullptr) {
    c.now = *now;
    if (S_ISREG(now->mode)) c.bytes_after = now->size;
  }
  if (was != nullptr && now != nullptr && !Unknown(*was) &&
      (was->mode & 07777) != (now->mode & 07777)) {
    c.mode_before = was->mode & 07777;
    c.mode_after = now->mode & 07777;
  }
  return c;
}

// Opens `rel` below `root` without following any symlink; -1 when that is not possible.
UniqueFd OpenBelow(const std::string& root, const std::string& rel) {
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return UniqueFd();
  open_how how{};
  how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return UniqueFd(
      static_cast<int>(::syscall(SYS_openat2, root_fd.get(), rel.c_str(), &how, sizeof how)));
}

}  // namespace

bool SnapshotAdd(std::vector<SnapEntry>& out, int dir_fd, const char* name, std::string rel,
                 bool git) {
  struct statx sx {};
  // Only what the diff compares; AT_STATX_DONT_SYNC: no round trip on a network filesystem.
  constexpr unsigned kMask = STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_INO | STATX_SIZE |
                             STATX_MTIME | STATX_CTIME | STATX_BTIME;
  if (::statx(dir_fd, name, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, kMask, &sx) != 0)
    return false;
  SnapEntry e;
  e.path = std::move(rel);
  e.dev = (static_cast<std::uint64_t>(sx.stx_dev_major) << 32) | sx.stx_dev_minor;
  e.ino = sx.stx_ino;
  e.size = sx.stx_size;
  e.mtime_ns = sx.stx_mtime.tv_sec * 1000000000LL + sx.stx_mtime.tv_nsec;
  e.ctime_ns = sx.stx_ctime.tv_sec * 1000000000LL + sx.stx_ctime.tv_nsec;
  e.mode = sx.stx_mode;
  e.nlink = sx.stx_nlink;
  e.btime_ns = BirthNs(sx);
  e.git = git;
  out.push_back(std::move(e));
  return true;
}

std::string EscapeName(std::string_view name) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(name.size());
  const auto* p = reinterpret_cast<const unsigned char*>(name.data());
  const std::size_t n = name.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    // The length of a valid UTF-8 sequence at i (RFC 3629: no overlong forms, no surrogates,
    // nothing above U+10FFFF), or 0.
    std::size_t len = 0;
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
    }
    if (len > 1) {
      if (i + len > n) {
        len = 0;
      } else {
        const unsigned char c1 = p[i + 1];
        const unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        const unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (c1 < lo || c1 > hi) len = 0;
        for (std::size_t k = 2; len != 0 && k < len; ++k) {
          if ((p[i + k] & 0xC0) != 0x80) len = 0;
        }
      }
    }
    if (len == 0) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    } else if (c == '\\') {
      out += "\\\\";
      ++i;
    } else {
      out.append(name.substr(i, len));
      i += len;
    }
  }
  return out;
}

bool ChangePathLess(const FileChange& x, const FileChange& y) {
  return std::lexicographical_compare(
      x.path.begin(), x.path.end(), y.path.begin(), y.path.end(), [](char p, char q) {
        const auto rank = [](char c) { return c == '/' ? 0 : static_cast<unsigned char>(c) + 1; };
        return rank(p) < rank(q);
      });
}

std::string OctalMode(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%o", static_cast<unsigned>(mode));
  return buf;
}

std::vector<FileChange> DiffRoot(const RootSnapshot& before, const RootSnapshot& after) {
  const auto& b = before.entries;
  const auto& a = after.entries;
  // An entry the pass beside the process never reached is unchanged when the after side shows
  // the same inode at the same name, untouched since the window opened (its ctime, which no
  // process can set back, is older); otherwise it changed, and what it was is unknown.
  // The same holds for an entry the pass reached too late (lost: its directory was moved, or it
  // was changed, before the pass got there): an inode untouched since the window opened is as it
  // was, whatever its name is now (a directory renamed above it changes no ctime of its own).
  const std::int64_t t0 = before.window_start_ns;
  auto settled = [t0](const SnapEntry& x, const SnapEntry& y) {
    return Unknown(x) && t0 > 0 && !Unknown(y) && y.ctime_ns < t0 && y.ino == x.ino &&
           y.dev == x.dev && (y.mode & S_IFMT) == (x.mode & S_IFMT);
  };
  auto unchanged = [&settled](const SnapEntry& x, const SnapEntry& y) {
    if (!Unknown(x)) return Same(x, y);
    return settled(x, y) && y.path == x.path;
  };
  // A settled entry's state before is its state after, under its old name.
  auto resolved = [](const SnapEntry& x, const SnapEntry& y) {
    SnapEntry r = y;
    r.path = x.path;
    r.git = x.git;
    return r;
  };
  // The walk visits an unchanged tree in the same order: identical heads and tails are set
  // aside without an index, so a run that changed nothing costs one comparison per entry.
  std::size_t head = 0;
  while (head < b.size() && head < a.size() && unchanged(b[head], a[head])) ++head;
  std::size_t bend = b.size(), aend = a.size();
  while (bend > head && aend > head && unchanged(b[bend - 1], a[aend - 1])) {
    --bend;
    --aend;
  }
  std::vector<FileChange> out;
  if (head == bend && head == aend) return out;

  using U32 = std::uint32_t;
  constexpr U32 kNone = UINT32_MAX;
  auto a_path = [&a](U32 i) { return std::string_view(a[i].path); };
  auto a_inode = [&a](U32 i) { return Inode(a[i]); };
  auto b_inode = [&b](U32 i) { return Inode(b[i]); };
  // Every after entry accounted for, by index.
  std::vector<char> matched(a.size(), 0);
  auto index_of = [&a](const SnapEntry* e) { return static_cast<std::size_t>(e - a.data()); };
  // Most of the middle is the same entry at the same name (a tree changed in a few places): the
  // two walks list it in the same order, so it is paired in step, re-synchronised by a short
  // look-ahead where entries were created or went. What this pairs unchanged is accounted for
  // here, and the indexes and the steps below see only the rest ("live"); what it fails to pair
  // stays live and is paired there. No other name can hold an unchanged entry's inode: a new link
  // or unlink would have changed its nlink and ctime.
  std::vector<U32> live_b, live_a;
  constexpr std::size_t kLookAhead = 32;
  // Where the look-ahead cannot re-synchronise (more than kLookAhead entries created or gone in
  // one place: an `rm -rf` of 50 files), every after name by path, built once, decides.
  std::optional<FlatIndex<std::string_view, decltype(a_path), std::hash<std::string_view>>> all_a;
  std::size_t bi = head, aj = head;
  while (bi < bend && aj < aend) {
    if (b[bi].path == a[aj].path) {
      if (unchanged(b[bi], a[aj])) {
        matched[aj] = 1;
      } else {
        live_b.push_back(static_cast<U32>(bi));
      }
      ++bi;
      ++aj;
      continue;
    }
    std::size_t k = aj + 1;  // entries created before b[bi]'s name?
    while (k < aend && k <= aj + kLookAhead && a[k].path != b[bi].path) ++k;
    if (k < aend && k <= aj + kLookAhead) {
      aj = k;  // a[aj..k) stay live
      continue;
    }
    std::size_t m = bi + 1;  // or entries gone before a[aj]'s name?
    while (m < bend && m <= bi + kLookAhead && b[m].path != a[aj].path) ++m;
    if (m < bend && m <= bi + kLookAhead) {
      for (; bi < m; ++bi) live_b.push_back(static_cast<U32>(bi));
      continue;
    }
    if (!all_a) {
      all_a.emplace(a.size(), aend - head, a_path);
      for (std::size_t q = head; q < aend; ++q) all_a->Insert(static_cast<U32>(q));
    }
    const U32 at = all_a->Find(b[bi].path);
    if (at != kNone && at > aj) {
      aj = at;  // a[aj..at) were created: they stay live
      continue;
    }
    // Gone, or met already out of order: paired by the indexes below.
    live_b.push_back(static_cast<U32>(bi++));
  }
  for (; bi < bend; ++bi) live_b.push_back(static_cast<U32>(bi));
  for (std::size_t q = head; q < aend; ++q) {
    if (!matched[q]) live_a.push_back(static_cast<U32>(q));
  }
  FlatIndex<std::string_view, decltype(a_path), std::hash<std::string_view>> apath(
      a.size(), live_a.size(), a_path);
  for (U32 q : live_a) apath.Insert(q);
  auto find_path = [&](std::string_view p) -> const SnapEntry* {
    const U32 q = apath.Find(p);
    return q == kNone ? nullptr : &a[q];
  };
  FlatIndex<InodeKey, decltype(a_inode), InodeHash> ainode(a.size(), live_a.size(), a_inode);
  for (U32 q : live_a) ainode.Insert(q);
  FlatIndex<InodeKey, decltype(b_inode), InodeHash> binode(b.size(), live_b.size(), b_inode);
  for (U32 q : live_b) binode.Insert(q);
  auto was_before = [&](const SnapEntry& n) {  // n's inode had a name before
    for (U32 q = binode.Find(Inode(n)); q != kNone; q = binode.Next(q)) {
      if (SameInode(b[q], n)) return true;
    }
    return false;
  };

  // 1. Directories that moved (same inode, another name): one rename each; what was below
  //    them is then looked for under the new name.
  std::unordered_map<std::string_view, std::string_view> dir_moves;  // old -> new
  for (U32 i : live_b) {
    const SnapEntry& e = b[i];
    if (!S_ISDIR(e.mode)) continue;
    const SnapEntry* at = find_path(e.path);
    if (at != nullptr && SameInode(*at, e)) continue;
    for (U32 q = ainode.Find(Inode(e)); q != kNone; q = ainode.Next(q)) {
      if (SameInode(a[q], e) && a[q].path != e.path) {
        dir_moves.emplace(e.path, a[q].path);
        break;
      }
    }
  }
  // The longest moved ancestor (or the entry itself, unless `ancestors_only`) decides its new
  // name.
  auto translate = [&](const std::string& path, bool ancestors_only = false) -> std::string {
    if (dir_moves.empty()) return path;
    std::size_t cut = path.size();
    if (ancestors_only) {
      cut = path.rfind('/');
      if (cut == std::string::npos) return path;
    }
    for (;;) {
      auto it = dir_moves.find(std::string_view(path).substr(0, cut));
      if (it != dir_moves.end()) return std::string(it->second) + path.substr(cut);
      if (cut == 0) break;
      const std::size_t slash = path.rfind('/', cut - 1);
      if (slash == std::string::npos) break;
      cut = slash;
    }
    return path;
  };

  // A directory that only moved with its parent (dir/sub under `mv dir dir2`) is no rename of
  // its own.
  std::vector<std::string_view> implied;
  for (const auto& [from, to] : dir_moves) {
    if (translate(std::string(from), true) == to) implied.push_back(from);
  }
  for (auto from : implied) dir_moves.erase(from);

  // 2. Each old entry at its (translated) name, same inode: compared in place.
  std::vector<std::pair<const SnapEntry*, std::string>> gone;  // old entries not found in place
  for (U32 i : live_b) {
    const SnapEntry& e = b[i];
    std::string t = translate(e.path);
    const SnapEntry* at = find_path(t);
    if (at == nullptr || !SameInode(*at, e)) {
      gone.emplace_back(&e, std::move(t));
      continue;
    }
    const SnapEntry& n = *at;
    matched[index_of(&n)] = 1;
    if (settled(e, n)) {
      // Untouched since the window opened: only a move of a directory above it, or nothing.
      if (dir_moves.count(e.path)) {
        const SnapEntry r = resolved(e, n);
        FileChange c = Change("renamed", &r, &n);
        c.from = e.path;
        out.push_back(std::move(c));
      }
      continue;
    }
    const bool content = ContentChanged(e, n);
    const bool mode = !Unknown(e) && (e.mode & 07777) != (n.mode & 07777);
    if (dir_moves.count(e.path)) {
      FileChange c = Change("renamed", &e, &n);
      c.from = e.path;
      out.push_back(std::move(c));
    } else if (content) {
      out.push_back(Change("modified", &e, &n));
    } else if (mode) {
      out.push_back(Change("mode_changed", &e, &n));
    } else if (S_ISREG(n.mode) && e.ctime_ns != n.ctime_ns && e.nlink == n.nlink) {
      // Same size and mtime, but the inode changed: a rewrite whose mtime was set back
      // (touch -d) shows only in ctime, which a process cannot set. Hashed like any other.
      out.push_back(Change("modified", &e, &n));
    }
  }
  // 3. Old entries not in place: renamed (the inode under a new name), replaced (a new inode at
  //    the same name, e.g. sed -i's rename over it), or deleted.
  std::vector<FileChange> deleted;
  for (auto& [ep, t] : gone) {
    const SnapEntry& e = *ep;
    const SnapEntry* to = nullptr;
    for (U32 q = ainode.Find(Inode(e)); q != kNone; q = ainode.Next(q)) {
      if (!matched[q] && SameInode(a[q], e)) {
        to = &a[q];
        break;
      }
    }
    if (to != nullptr) {
      matched[index_of(to)] = 1;
      const SnapEntry r = settled(e, *to) ? resolved(e, *to) : e;
      FileChange c = Change("renamed", &r, to);
      c.from = e.path;
      c.content = ContentChanged(r, *to);
      out.push_back(std::move(c));
      continue;
    }
    const SnapEntry* at = find_path(t);
    if (at != nullptr && !matched[index_of(at)] && !was_before(*at) && S_ISREG(e.mode) &&
        S_ISREG(at->mode)) {
      matched[index_of(at)] = 1;
      FileChange c = Change("modified", &e, at);
      c.path = at->path;
      out.push_back(std::move(c));
      continue;
    }
    deleted.push_back(Change("deleted", &e, nullptr));
  }
  // A deleted directory carries what went with it.
  std::stable_sort(deleted.begin(), deleted.end(), ChangePathLess);
  for (std::size_t i = 0; i < deleted.size();) {
    FileChange d = std::move(deleted[i]);
    std::size_t j = i + 1;
    if (d.type == "dir") {
      for (; j < deleted.size() && Under(deleted[j].path, d.path); ++j) {
        ++d.below;
        if (deleted[j].bytes_before)
          d.bytes_before = d.bytes_before.value_or(0) + *deleted[j].bytes_before;
        d.before_unknown = d.before_unknown || deleted[j].before_unknown;
      }
    }
    out.push_back(std::move(d));
    i = j;
  }
  // 4. New entries: another name of an inode that is still there (a hard link), or created.
  for (U32 i : live_a) {
    const SnapEntry& n = a[i];
    if (matched[i]) continue;
    const SnapEntry* first = nullptr;
    for (U32 q = binode.Find(Inode(n)); q != kNone && first == nullptr; q = binode.Next(q)) {
      if (SameInode(b[q], n)) first = &b[q];
    }
    if (first != nullptr && !S_ISDIR(n.mode)) {
      FileChange c = Change("linked", nullptr, &n);
      c.from = translate(first->path);
      out.push_back(std::move(c));
    } else {
      out.push_back(Change("created", nullptr, &n));
    }
  }
  std::stable_sort(out.begin(), out.end(), ChangePathLess);
  return out;
}

std::size_t TreeSnapshot::Deferred() const {
  std::size_t n = 0;
  for (const auto& r : roots) {
    for (const auto& d : r.deferred) {
      for (std::size_t i = d.first; i < d.end; ++i) n += r.entries[i].deferred;
    }
  }
  return n;
}

void FillDeferred(TreeSnapshot& snap, std::optional<std::int64_t> t0_ns,
                  const std::atomic<bool>* stop) {
  constexpr unsigned kMask = STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_INO | STATX_SIZE |
                             STATX_MTIME | STATX_CTIME | STATX_BTIME;
  for (auto& r : snap.roots) {
    if (r.deferred.empty()) continue;
    UniqueFd root_fd(::open(r.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    bool dropped = false;
    auto lose = [&](SnapEntry& e) {
      e.deferred = false;
      if (!t0_ns) {  // before the launch: what is gone was never there for the process
        e.path.clear();
        dropped = true;
        return;
      }
      e.lost = true;
      e.size = 0;
      e.nlink = 0;
      e.mtime_ns = e.ctime_ns = -1;
    };
    for (const DeferredDir& d : r.deferred) {
      UniqueFd dir_fd;
      if (root_fd.valid()) {
        open_how how{};
        how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
        dir_fd = UniqueFd(static_cast<int>(::syscall(
            SYS_openat2, root_fd.get(), d.dir.empty() ? "." : d.dir.c_str(), &how, sizeof how)));
      }
      struct stat ds {};
      const bool same_dir =
          dir_fd.valid() && ::fstat(dir_fd.get(), &ds) == 0 && ds.st_ino == d.dir_ino &&
          ((static_cast<std::uint64_t>(major(ds.st_dev)) << 32) | minor(ds.st_dev)) == d.dir_dev;
      for (std::size_t i = d.first; i < d.end; ++i) {
        if (stop != nullptr && stop->load(std::memory_order_relaxed)) return;
        SnapEntry& e = r.entries[i];
        if (!e.deferred) continue;
        if (!same_dir) {  // moved, replaced or gone: not the directory the walk listed
          lose(e);
          continue;
        }
        const std::size_t slash = e.path.rfind('/');
        const char* name = e.path.c_str() + (slash == std::string::npos ? 0 : slash + 1);
        struct statx sx {};
        if (::statx(dir_fd.get(), name, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, kMask, &sx) !=
            0) {
          lose(e);
          continue;
        }
        const std::int64_t ctime = sx.stx_ctime.tv_sec * 1000000000LL + sx.stx_ctime.tv_nsec;
        // The root's own window start, cut to its filesystem's timestamp granularity.
        const std::int64_t t0 =
            t0_ns && r.window_start_ns > 0 ? r.window_start_ns : t0_ns.value_or(0);
        if (t0_ns && (ctime >= t0 || sx.stx_ino != e.ino)) {
          lose(e);
          continue;
        }
        e.dev = (static_cast<std::uint64_t>(sx.stx_dev_major) << 32) | sx.stx_dev_minor;
        e.ino = sx.stx_ino;
        e.size = sx.stx_size;
        e.mtime_ns = sx.stx_mtime.tv_sec * 1000000000LL + sx.stx_mtime.tv_nsec;
        e.ctime_ns = ctime;
        e.mode = sx.stx_mode;
        e.nlink = sx.stx_nlink;
        e.btime_ns = BirthNs(sx);
        e.deferred = false;
      }
    }
    r.deferred.clear();
    if (dropped) {
      std::erase_if(r.entries, [](const SnapEntry& e) { return e.path.empty(); });
    }
  }
}

std::int64_t ChangeWindowT0() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

std::int64_t ChangeWindowStart() {
  auto now = [](clockid_t clock) {
    timespec ts{};
    ::clock_gettime(clock, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
  };
  // An inode's timestamp is the coarse clock, or (multigrain timestamps, Linux 6.13) a
  // fine-grained reading or a floor raised by one, so it never runs ahead of the real time and
  // may run ahead of the coarse clock: read t0 on the fine clock, then wait for the coarse one to
  // reach it (at most a tick, 1-10 ms by CONFIG_HZ). Every later change is stamped at or after
  // t0, every earlier one before it. Give up after 50 ms (then only later changes are certain to
  // be at or after t0).
  const std::int64_t t0 = ChangeWindowT0();
  for (int i = 0; i < 250 && now(CLOCK_REALTIME_COARSE) < t0; ++i) {
    timespec pause{0, 200000};
    ::nanosleep(&pause, nullptr);
  }
  return t0;
}

std::int64_t TimestampGranularityNs(const RootSnapshot& root) {
  // The greatest common divisor of the ctimes the walk has: a filesystem keeping nanoseconds
  // gives a few ns at once; one keeping seconds (ext4 with 128-byte inodes, the mke2fs default
  // below 512 MiB; NFSv3 servers, FUSE) whole seconds; FAT two. Never finer than the truth, so
  // the window start cut to it is never later than the stamp of a change made in the window.
  // Per device (a filesystem mounted inside the root keeps its own), the coarsest of them.
  constexpr std::int64_t kCap = 2000000000LL;  // FAT's two seconds: the coarsest kept
  std::unordered_map<std::uint64_t, std::int64_t> per_dev;
  for (const SnapEntry& e : root.entries) {
    if (e.deferred || e.lost || e.ctime_ns <= 0) continue;
    std::int64_t& g = per_dev[e.dev];
    g = std::gcd(g, e.ctime_ns);
  }
  // Nothing seen (no entry stat-ed): the coarsest, which can only make more entries "changed".
  std::int64_t coarsest = per_dev.empty() ? kCap : 1;
  for (const auto& [dev, g] : per_dev) coarsest = std::max(coarsest, std::min(g, kCap));
  return coarsest;
}

SnapshotFill::SnapshotFill(std::shared_ptr<TreeSnapshot> snap) : snap_(std::move(snap)) {
  t0_ns_ = ChangeWindowStart();
  // A change in the window is stamped at or after t0 only on a filesystem that keeps
  // nanoseconds; one that keeps seconds stamps it with t0's second, earlier than t0. Cut t0 down
  // to each root's granularity: everything changed since is then "maybe changed" (an entry
  // changed just before the launch, in that second, is reported changed, its before unknown).
  for (auto& r : snap_->roots) {
    const std::int64_t g = TimestampGranularityNs(r);
    r.window_start_ns = t0_ns_ - t0_ns_ % g;
  }
}

void SnapshotFill::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    BlockTerminationSignals();
    // Only idle CPU: the confined command comes first. What the pass does not reach in time the
    // diff decides from the after side.
    sched_param idle{};
    (void)::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &idle);
    FillDeferred(*snap_, t0_ns_, &stop_);
  });
}

void SnapshotFill::Finish() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

SnapshotFill::~SnapshotFill() { Finish(); }

std::optional<std::string> ChangeRecorder::Cached(const SnapEntry& e) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(KeyOf(e));
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

void ChangeRecorder::Remember(const SnapEntry& e, const std::string& sha) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_.size() >= limits_.cache_entries) cache_.clear();
  cache_[KeyOf(e)] = sha;
}

Json ChangeRecorder::Record(const TreeSnapshot& before, const TreeSnapshot& after, bool concurrent,
                            const std::vector<std::string>& exclude) {
  static constexpr const char* kKinds[] = {"created", "modified",     "touched", "deleted",
                                           "renamed", "mode_changed", "linked"};
  Json counts = Json::object(), git = Json::object();
  for (const char* k : kKinds) counts[k] = 0;
  Json entries = Json::array(), unwalked = Json::array();
  std::size_t listed = 0, omitted = 0;
  std::uint64_t hashed = 0;
  for (const auto& broot : before.roots) {
    const RootSnapshot* aroot = nullptr;
    for (const auto& r : after.roots) {
      if (r.root == broot.root) aroot = &r;
    }
    if (aroot == nullptr) {
      unwalked.push_back(EscapeName(broot.root));  // the sweep could not walk it: nothing known
      continue;
    }
    const bool first = &broot == &before.roots.front();
    for (FileChange& c : DiffRoot(broot, *aroot)) {
      const std::uint64_t n = 1 + c.below;
      const std::string abs = broot.root + "/" + c.path;
      if (std::any_of(exclude.begin(), exclude.end(), [&](const std::string& x) {
            return abs == x || Under(abs, x) ||
                   (!c.from.empty() &&
                    (broot.root + "/" + c.from == x || Under(broot.root + "/" + c.from, x)));
          })) {
        continue;
      }
      if (c.git) {
        git[c.kind] = git.value(c.kind, std::uint64_t{0}) + n;
        continue;
      }
      // sha256 after (bounded), before (only from the cache), for a regular file with content.
      std::optional<std::string> sha_before, sha_after;
      std::string skipped;
      const bool wants_hash =
          listed < limits_.max_entries && c.type == "file" && c.now &&
          (c.kind == "created" || c.kind == "modified" || (c.kind == "renamed" && c.content));
      if (wants_hash) {
        if (c.was) sha_before = Cached(*c.was);
        if (c.now->size > limits_.hash_cap) {
          skipped = "over_cap";
        } else if (hashed + c.now->size > limits_.hash_budget) {
          skipped = "budget";
        } else if (auto cached = Cached(*c.now)) {
          sha_after = cached;
        } else {
          UniqueFd fd = OpenBelow(broot.root, c.path);
          struct stat st {};
          if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || st.st_ino != c.now->ino ||
              !S_ISREG(st.st_mode)) {
            skipped = "gone";
          } else {
            Sha256Stream h;
            char buf[65536];
            std::uint64_t total = 0;
            for (ssize_t r; total < limits_.hash_cap && (r = ::read(fd.get(), buf, sizeof buf)) > 0;
                 total += static_cast<std::uint64_t>(r)) {
              h.Update(std::string_view(buf, static_cast<std::size_t>(r)));
            }
            hashed += total;
            struct stat st2 {};
            const bool steady = ::fstat(fd.get(), &st2) == 0 &&
                                st2.st_ctim.tv_sec == st.st_ctim.tv_sec &&
                                st2.st_ctim.tv_nsec == st.st_ctim.tv_nsec &&
                                static_cast<std::uint64_t>(st2.st_size) == total;
            const std::int64_t ctime = st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
            if (!steady) {
              skipped = "changing";
            } else {
              sha_after = h.FinishHex();
              // The snapshot's identity, when the file is still that one: a later record's
              // sha256_before.
              if (ctime == c.now->ctime_ns && total == c.now->size) Remember(*c.now, *sha_after);
            }
          }
        }
        if (c.kind == "modified" && sha_before && sha_after && *sha_before == *sha_after)
          c.kind = "touched";
      }
      counts[c.kind] = counts[c.kind].get<std::uint64_t>() + n;
      if (listed >= limits_.max_entries) {
        omitted += n;
        continue;
      }
      ++listed;
      Json j = {{"kind", c.kind},
                {"path", EscapeName(first ? c.path : broot.root + "/" + c.path)},
                {"type", c.type}};
      if (!c.from.empty()) j["from"] = EscapeName(first ? c.from : broot.root + "/" + c.from);
      if (c.bytes_before) j["bytes_before"] = *c.bytes_before;
      if (c.bytes_after) j["bytes_after"] = *c.bytes_after;
      if (c.mode_before) {
        j["mode_before"] = OctalMode(*c.mode_before);
        j["mode_after"] = OctalMode(*c.mode_after);
      }
      if (c.below > 0) j["below"] = c.below;
      if (c.kind == "renamed" && c.type == "file") j["content_changed"] = c.content;
      if (c.before_unknown) j["before_unknown"] = true;
      if (sha_before) j["sha256_before"] = *sha_before;
      if (sha_after) j["sha256_after"] = *sha_after;
      if (!skipped.empty()) j["hash_skipped"] = skipped;
      entries.push_back(std::move(j));
    }
  }
  Json out = {{"entries", std::move(entries)},
              {"counts", std::move(counts)},
              {"omitted", omitted},
              {"concurrent", concurrent}};
  if (!git.empty()) out["git"] = std::move(git);
  if (!unwalked.empty()) out["unwalked"] = std::move(unwalked);
  return out;
}

}  // namespace cordon
