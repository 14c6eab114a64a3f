// Change records: snapshot entries, the path-and-inode diff, and the bounded hashing after.
#include "runner/changes.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_map>

#include "core/hash.h"
#include "core/unique_fd.h"

namespace cordon {
namespace {

const char* TypeName(std::uint32_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "dir";
  if (S_ISLNK(mode)) return "symlink";
  return "other";
}

bool Same(const SnapEntry& a, const SnapEntry& b) {
  return a.ino == b.ino && a.dev == b.dev && a.ctime_ns == b.ctime_ns && a.mtime_ns == b.mtime_ns &&
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

// Path order with '/' lowest, so that everything below a directory follows it directly.
bool PathLess(const FileChange& x, const FileChange& y) {
  return std::lexicographical_compare(
      x.path.begin(), x.path.end(), y.path.begin(), y.path.end(), [](char p, char q) {
        const auto rank = [](char c) { return c == '/' ? 0 : static_cast<unsigned char>(c) + 1; };
        return rank(p) < rank(q);
      });
}

bool ContentChanged(const SnapEntry& b, const SnapEntry& a) {
  // A directory's mtime is its entries': what changed in it is listed by name instead.
  if (S_ISDIR(a.mode)) return false;
  return b.size != a.size || b.mtime_ns != a.mtime_ns;
}

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
    if (S_ISREG(was->mode)) c.bytes_before = was->size;
  }
  if (now != nullptr) {
    c.now = *now;
    if (S_ISREG(now->mode)) c.bytes_after = now->size;
  }
  if (was != nullptr && now != nullptr && (was->mode & 07777) != (now->mode & 07777)) {
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

std::string Octal(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%o", static_cast<unsigned>(mode));
  return buf;
}

}  // namespace

bool SnapshotAdd(std::vector<SnapEntry>& out, int dir_fd, const char* name, std::string rel,
                 bool git) {
  struct statx sx {};
  // Only what the diff compares; AT_STATX_DONT_SYNC: no round trip on a network filesystem.
  constexpr unsigned kMask =
      STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_INO | STATX_SIZE | STATX_MTIME | STATX_CTIME;
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
  e.git = git;
  out.push_back(std::move(e));
  return true;
}

std::vector<FileChange> DiffRoot(const RootSnapshot& before, const RootSnapshot& after) {
  const auto& b = before.entries;
  const auto& a = after.entries;
  // The walk visits an unchanged tree in the same order: identical heads and tails are set
  // aside without a hash map, so a run that changed nothing costs one comparison per entry.
  std::size_t head = 0;
  while (head < b.size() && head < a.size() && Same(b[head], a[head])) ++head;
  std::size_t bend = b.size(), aend = a.size();
  while (bend > head && aend > head && Same(b[bend - 1], a[aend - 1])) {
    --bend;
    --aend;
  }
  std::vector<FileChange> out;
  if (head == bend && head == aend) return out;

  std::unordered_map<std::string_view, const SnapEntry*> apath;
  std::unordered_map<InodeKey, std::vector<const SnapEntry*>, InodeHash> ainode, binode;
  for (std::size_t i = head; i < aend; ++i) {
    apath.emplace(a[i].path, &a[i]);
    ainode[Inode(a[i])].push_back(&a[i]);
  }
  for (std::size_t i = head; i < bend; ++i) binode[Inode(b[i])].push_back(&b[i]);

  // 1. Directories that moved (same inode, another name): one rename each; what was below
  //    them is then looked for under the new name.
  std::unordered_map<std::string_view, std::string_view> dir_moves;  // old -> new
  for (std::size_t i = head; i < bend; ++i) {
    const SnapEntry& e = b[i];
    if (!S_ISDIR(e.mode)) continue;
    auto at = apath.find(e.path);
    if (at != apath.end() && at->second->ino == e.ino && at->second->dev == e.dev) continue;
    auto it = ainode.find(Inode(e));
    if (it == ainode.end()) continue;
    for (const SnapEntry* q : it->second) {
      if (S_ISDIR(q->mode) && q->path != e.path) {
        dir_moves.emplace(e.path, q->path);
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
  std::set<const SnapEntry*> matched;                          // after entries accounted for
  std::vector<std::pair<const SnapEntry*, std::string>> gone;  // old entries not found in place
  for (std::size_t i = head; i < bend; ++i) {
    const SnapEntry& e = b[i];
    std::string t = translate(e.path);
    auto at = apath.find(t);
    if (at == apath.end() || at->second->ino != e.ino || at->second->dev != e.dev) {
      gone.emplace_back(&e, std::move(t));
      continue;
    }
    const SnapEntry& n = *at->second;
    matched.insert(&n);
    const bool content = ContentChanged(e, n);
    const bool mode = (e.mode & 07777) != (n.mode & 07777);
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
  // The head and tail entries are unchanged: accounted for too.
  // 3. Old entries not in place: renamed (the inode under a new name), replaced (a new inode at
  //    the same name, e.g. sed -i's rename over it), or deleted.
  std::vector<FileChange> deleted;
  for (auto& [ep, t] : gone) {
    const SnapEntry& e = *ep;
    const SnapEntry* to = nullptr;
    if (auto it = ainode.find(Inode(e)); it != ainode.end()) {
      for (const SnapEntry* q : it->second) {
        if (!matched.count(q)) {
          to = q;
          break;
        }
      }
    }
    if (to != nullptr) {
      matched.insert(to);
      FileChange c = Change("renamed", &e, to);
      c.from = e.path;
      c.content = ContentChanged(e, *to);
      out.push_back(std::move(c));
      continue;
    }
    auto at = apath.find(t);
    if (at != apath.end() && !matched.count(at->second) && !binode.count(Inode(*at->second)) &&
        S_ISREG(e.mode) && S_ISREG(at->second->mode)) {
      matched.insert(at->second);
      FileChange c = Change("modified", &e, at->second);
      c.path = at->second->path;
      out.push_back(std::move(c));
      continue;
    }
    deleted.push_back(Change("deleted", &e, nullptr));
  }
  // A deleted directory carries what went with it.
  std::stable_sort(deleted.begin(), deleted.end(), PathLess);
  for (std::size_t i = 0; i < deleted.size();) {
    FileChange d = std::move(deleted[i]);
    std::size_t j = i + 1;
    if (d.type == "dir") {
      for (; j < deleted.size() && Under(deleted[j].path, d.path); ++j) {
        ++d.below;
        if (deleted[j].bytes_before)
          d.bytes_before = d.bytes_before.value_or(0) + *deleted[j].bytes_before;
      }
    }
    out.push_back(std::move(d));
    i = j;
  }
  // 4. New entries: another name of an inode that is still there (a hard link), or created.
  for (std::size_t i = head; i < aend; ++i) {
    const SnapEntry& n = a[i];
    if (matched.count(&n)) continue;
    auto it = binode.find(Inode(n));
    if (it != binode.end() && !S_ISDIR(n.mode)) {
      FileChange c = Change("linked", nullptr, &n);
      c.from = translate(it->second.front()->path);
      out.push_back(std::move(c));
    } else {
      out.push_back(Change("created", nullptr, &n));
    }
  }
  std::stable_sort(out.begin(), out.end(), PathLess);
  return out;
}

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
      unwalked.push_back(broot.root);  // the sweep could not walk it: nothing is known
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
      Json j = {
          {"kind", c.kind}, {"path", first ? c.path : broot.root + "/" + c.path}, {"type", c.type}};
      if (!c.from.empty()) j["from"] = first ? c.from : broot.root + "/" + c.from;
      if (c.bytes_before) j["bytes_before"] = *c.bytes_before;
      if (c.bytes_after) j["bytes_after"] = *c.bytes_after;
      if (c.mode_before) {
        j["mode_before"] = Octal(*c.mode_before);
        j["mode_after"] = Octal(*c.mode_after);
      }
      if (c.below > 0) j["below"] = c.below;
      if (c.kind == "renamed" && c.type == "file") j["content_changed"] = c.content;
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
