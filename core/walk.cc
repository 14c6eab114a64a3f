#include "core/walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

namespace cordon {

namespace {

struct Dirent64 {
  std::uint64_t d_ino;
  std::int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

struct Name {
  std::string name;
  unsigned char type;
  bool operator<(const Name& o) const { return name < o.name; }
};

// One directory being walked: its fd, its names (read whole when it was opened, so that what
// the visitor does there cannot make getdents skip or repeat an entry), and where it stands.
struct Frame {
  UniqueFd fd;
  std::string rel;  // "" for the root
  std::size_t depth = 0;
  std::vector<Name> names;
  std::size_t next = 0;
  // The directory as an entry of its parent (for `leave`); empty for the root.
  std::string name;
  unsigned char type = DT_DIR;
};

std::string Shown(const std::string& what, const std::string& rel) {
  return rel.empty() ? what : rel;
}

}  // namespace

UniqueFd OpenSubdir(int dir_fd, const char* name) {
  return UniqueFd(::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

Result<WalkReport> WalkTree(int root_fd, const WalkOptions& o, const WalkHooks& hooks) {
  WalkReport report;
  struct stat root_st {};
  if (::fstat(root_fd, &root_st) != 0) return SysFail(Code::kInternal, "fstat", o.what);
  std::vector<char> buf(32768);
  std::vector<Frame> stack;
  bool stop = false;

  // Lists the frame's directory whole; false (report.truncated) or an error past max_entries.
  auto list = [&](Frame& f) -> Status {
    ++report.directories;
    while (true) {
      const long n = ::syscall(SYS_getdents64, f.fd.get(), buf.data(), buf.size());
      if (n < 0) return SysFail(Code::kInternal, "getdents64", Shown(o.what, f.rel));
      if (n == 0) break;
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const Dirent64*>(buf.data() + off);
        off += d->d_reclen;
        const char* nm = d->d_name;
        if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0))) continue;
        if (++report.entries > o.max_entries) {
          if (o.too_many == TooDeep::kSkip) {
            report.truncated = true;
            stop = true;
            return {};
          }
          return Fail(Code::kTooLarge,
                      o.what + " holds more than " + std::to_string(o.max_entries) + " entries", 0,
                      Shown(o.what, f.rel));
        }
        f.names.push_back({nm, d->d_type});
      }
    }
    if (o.sorted) std::sort(f.names.begin(), f.names.end());
    return {};
  };

  Frame root;
  // A description of its own (not a dup, which shares the caller's offset): the listing starts
  // at the beginning, and `root_fd` may be an O_PATH descriptor.
  root.fd = UniqueFd(::openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.fd.valid()) return SysFail(Code::kInternal, "open", o.what);
  stack.push_back(std::move(root));
  TRY(list(stack.back()));

  while (!stack.empty() && !stop) {
    Frame& f = stack.back();
    if (f.next == f.names.size()) {
      Frame done = std::move(stack.back());
      stack.pop_back();
      if (hooks.leave && !stack.empty()) {
        done.fd.Reset();  // closed before `leave`, which may remove the directory
        const WalkEntry e{stack.back().fd.get(), done.name.c_str(), &done.rel, done.type,
                          stack.back().depth};
        TRY(hooks.leave(e));
      }
      continue;
    }
    const Name& n = f.names[f.next++];
    std::string rel = f.rel.empty() ? n.name : f.rel + "/" + n.name;
    const WalkEntry e{f.fd.get(), n.name.c_str(), &rel, n.type, f.depth};
    ASSIGN_OR_RETURN(const Visit v, hooks.visit(e));
    if (v == Visit::kStop) break;
    if (v != Visit::kDescend) continue;
    if (f.depth + 1 > o.max_depth) {
      if (o.too_deep == TooDeep::kSkip) {
        report.truncated = true;
        continue;
      }
      return Fail(
          Code::kTooLarge,
          rel + " lies more than " + std::to_string(o.max_depth) + " directories deep in " + o.what,
          0, rel);
    }
    UniqueFd sub = OpenSubdir(f.fd.get(), n.name.c_str());
    if (!sub.valid()) {
      const int err = errno;
      if (!hooks.unopenable) {
        if (err == ENOENT || err == ENOTDIR || err == ELOOP) continue;  // changed meanwhile
        errno = err;
        return SysFail(err == EMFILE || err == ENFILE ? Code::kTooLarge : Code::kInternal,
                       "open (a directory in " + o.what + ")", rel);
      }
      ASSIGN_OR_RETURN(sub, hooks.unopenable(e, err));
      if (!sub.valid()) continue;
    }
    if (o.xdev) {
      struct stat st {};
      if (::fstat(sub.get(), &st) != 0) return SysFail(Code::kInternal, "fstat", rel);
      if (st.st_dev != root_st.st_dev) continue;
    }
    if (hooks.enter) TRY(hooks.enter(e, sub.get()));
    Frame child;
    child.fd = std::move(sub);
    child.rel = std::move(rel);
    child.depth = f.depth + 1;
    child.name = n.name;
    child.type = n.type;
    stack.push_back(std::move(child));  // `f` and `n` are invalid from here
    TRY(list(stack.back()));
  }
  return report;
}

}  // namespace cordon
