// The workspace's secret files (secret_files.h): a bounded descriptor walk, a per-file cache.
#include "workspace/secret_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "core/fs.h"
#include "core/hash.h"
#include "core/unique_fd.h"
#include "core/walk.h"
#include "workspace/changes.h"
#include "workspace/credential_stores.h"

namespace cordon {
namespace {

// Directories the walk does not enter: other projects' code, caches, and git's object store
// (compressed: no line of it is text). .git/config is read on its own (a remote's URL may hold
// a token).
bool SkippedDir(std::string_view name) {
  return name == ".git" || name == "node_modules" || name == ".venv" || name == "venv" ||
         name == "__pycache__" || name == ".tox" || name == ".mypy_cache" || name == ".cache";
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '"' ||
                        s.front() == '\'' || s.front() == '+' || s.front() == '>')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' ||
                        s.back() == '"' || s.back() == '\'' || s.back() == ',')) {
    s.remove_suffix(1);
  }
  return s;
}

// Splits on newlines and on JSON's escaped "\n" (a key inside a service-account file).
template <typename F>
void ForEachLine(std::string_view text, F&& f) {
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const bool nl = i == text.size() || text[i] == '\n';
    const bool esc = !nl && text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n';
    if (!nl && !esc) continue;
    f(text.substr(start, i - start));
    if (esc) ++i;
    start = i + 1;
  }
}

bool Base64ish(std::string_view s) {
  for (char c : s) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
          c == '/' || c == '=' || c == '-' || c == '_')) {
      return false;
    }
  }
  return true;
}

// The body lines of a key block (the armour's BEGIN/END lines and headers are not secret).
void KeyBodyLines(std::string_view block, std::vector<std::string>& out) {
  ForEachLine(block, [&](std::string_view line) {
    line = Trim(line);
    if (line.size() < 16 || line.find("-----") != std::string_view::npos) return;
    if (line.find(':') != std::string_view::npos) return;  // Proc-Type:, Comment:, Version:
    out.emplace_back(line);
  });
}

// A file's identity: what changes when its content may have (device, inode, size, mtime, ctime).
struct ScanIdentity {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_s = 0, mtime_ns = 0, ctime_s = 0, ctime_ns = 0;
  static ScanIdentity Of(const struct stat& st) {
    return {static_cast<std::uint64_t>(st.st_dev),
            static_cast<std::uint64_t>(st.st_ino),
            static_cast<std::uint64_t>(st.st_size),
            st.st_mtim.tv_sec,
            st.st_mtim.tv_nsec,
            st.st_ctim.tv_sec,
            st.st_ctim.tv_nsec};
  }
  bool operator==(const ScanIdentity&) const = default;
  // "dev:ino:size:mtime.ns:ctime.ns", as the cache writes it.
  std::string Text() const {
    return std::to_string(dev) + ":" + std::to_string(ino) + ":" + std::to_string(size) + ":" +
           std::to_string(mtime_s) + "." + std::to_string(mtime_ns) + ":" +
           std::to_string(ctime_s) + "." + std::to_string(ctime_ns);
  }
};

std::string Hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The cache: one record per file, "<identity>\t<n>\t<path>\n" then n lines
// "<prefix hex> <hash hex> <length>\n", in the order the scan that wrote it walked the tree.
// Paths hold no newline (a name with one is not cached).
struct CachedFile {
  std::string_view path;  // into the cache's text, or a path this scan read
  ScanIdentity id;
  std::uint32_t first = 0;  // its entries: Cache::entries[first, first + count)
  std::uint32_t count = 0;
  bool seen = false;  // this scan found the file (an unseen one is dropped from the cache)
};

// What earlier scans found, in their walk order. A walk of an unchanged tree meets the files in
// that order again, so each lookup is the next record; a file added, gone or moved is found
// through an index built on the first miss. A warm scan of 50,000 files allocates little: the
// paths are views of the cache's text (mapped, not copied), the entries one array.
class Cache {
 public:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  Cache() = default;
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;
  ~Cache() {
    if (map_ != nullptr) ::munmap(map_, map_size_);
  }

  // Maps `fd` (size `size`) as the text the paths point into; false if it cannot.
  bool Map(int fd, std::size_t size) {
    if (size == 0) return false;
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED) return false;
    map_ = m;
    map_size_ = size;
    return true;
  }
  std::string_view text() const {
    return map_ == nullptr ? std::string_view()
                           : std::string_view(static_cast<const char*>(map_), map_size_);
  }

  std::vector<CachedFile> files;
  std::vector<SecretLines::Entry> entries;

  std::size_t Find(std::string_view path) {
    if (cursor_ < files.size() && files[cursor_].path == path) return cursor_++;
    if (!indexed_) {
      index_.reserve(files.size());
      for (std::size_t i = 0; i < files.size(); ++i) index_.emplace(files[i].path, i);
      indexed_ = true;
    }
    auto it = index_.find(path);
    if (it == index_.end()) return kNone;
    cursor_ = it->second + 1;
    return it->second;
  }

  void Clear() {
    files.clear();
    entries.clear();
    index_.clear();
    indexed_ = false;
    cursor_ = 0;
  }

  // A path this scan read, kept as long as the cache (its files' views point into it).
  std::string_view Keep(std::string_view path) { return owned_.emplace_back(path); }

 private:
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::size_t cursor_ = 0;
  bool indexed_ = false;
  std::unordered_map<std::string_view, std::size_t> index_;
  std::deque<std::string> owned_;
};

// v2: identities compared as numbers, paths as their raw bytes.
constexpr std::string_view kCacheMagic = "cordon-secret-files v2 ";

template <typename T>
bool ParseNumber(std::string_view& t, T& out, int base = 10) {
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out, base);
  if (ec != std::errc() || p == t.data()) return false;
  t.remove_prefix(static_cast<std::size_t>(p - t.data()));
  return true;
}

bool Expect(std::string_view& t, char c) {
  if (t.empty() || t.front() != c) return false;
  t.remove_prefix(1);
  return true;
}

// "dev:ino:size:mtime.ns:ctime.ns"
bool ParseIdentity(std::string_view t, ScanIdentity& id) {
  return ParseNumber(t, id.dev) && Expect(t, ':') && ParseNumber(t, id.ino) && Expect(t, ':') &&
         ParseNumber(t, id.size) && Expect(t, ':') && ParseNumber(t, id.mtime_s) &&
         Expect(t, '.') && ParseNumber(t, id.mtime_ns) && Expect(t, ':') &&
         ParseNumber(t, id.ctime_s) && Expect(t, '.') && ParseNumber(t, id.ctime_ns) && t.empty();
}

// Parses the mapped text into `out`.
bool ParseCache(const std::string& fingerprint, Cache& out) {
  const std::string_view text = out.text();
  std::size_t pos = 0;
  auto line = [&]() -> std::optional<std::string_view> {
    if (pos >= text.size()) return std::nullopt;
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) return std::nullopt;  // a torn last line: stop
    std::string_view l = text.substr(pos, nl - pos);
    pos = nl + 1;
    return l;
  };
  auto head = line();
  if (!head || *head != std::string(kCacheMagic) + fingerprint) return false;
  out.files.reserve(text.size() / 48);
  while (auto rec = line()) {
    const std::size_t t1 = rec->find('\t');
    const std::size_t t2 = t1 == std::string_view::npos ? t1 : rec->find('\t', t1 + 1);
    if (t2 == std::string_view::npos) return false;
    CachedFile f;
    if (!ParseIdentity(rec->substr(0, t1), f.id)) return false;
    std::string_view count = rec->substr(t1 + 1, t2 - t1 - 1);
    std::size_t n = 0;
    if (!ParseNumber(count, n) || !count.empty() || n > text.size()) return false;
    f.first = static_cast<std::uint32_t>(out.entries.size());
    f.count = static_cast<std::uint32_t>(n);
    for (std::size_t k = 0; k < n; ++k) {
      auto e = line();
      if (!e) return false;
      std::string_view t = *e;
      SecretLines::Entry en;
      if (!ParseNumber(t, en.prefix, 16) || !Expect(t, ' ') || !ParseNumber(t, en.hash, 16) ||
          !Expect(t, ' ') || !ParseNumber(t, en.length) || !t.empty()) {
        return false;
      }
      out.entries.push_back(en);
    }
    f.path = rec->substr(t2 + 1);
    out.files.push_back(f);
  }
  return true;
}

std::string WriteCache(const Cache& cache, const std::vector<std::size_t>& order,
                       const std::string& fingerprint) {
  std::string out = std::string(kCacheMagic) + fingerprint + "\n";
  for (const std::size_t i : order) {
    const CachedFile& f = cache.files[i];
    if (f.path.find('\n') != std::string::npos) continue;
    out += f.id.Text() + "\t" + std::to_string(f.count) + "\t";
    out += f.path;
    out += "\n";
    for (std::uint32_t k = f.first; k < f.first + f.count; ++k) {
      const SecretLines::Entry& e = cache.entries[k];
      out += Hex64(e.prefix) + " " + Hex64(e.hash) + " " + std::to_string(e.length) + "\n";
    }
  }
  return out;
}

std::string RulesFingerprint(const Redactor& shapes) {
  // v2: the names in a credential store's format joined (IsStoreFormatFileName); a cache of v1
  // said such a file held nothing. v3: a file's lines are those of every span Redactor::Find
  // gives (folded blocks, base64, hex), not the rules' matches alone.
  std::string all = "secret-files-v3\n";
  if (shapes.rules() != nullptr) {
    for (const auto& r : shapes.rules()->rules()) {
      all += r.id + "\n" + r.pattern + "\n" + std::to_string(r.group) + "\n" + r.ignore + "\n" +
             std::to_string(r.entropy) + "\n" + std::to_string(r.min_length) + "\n";
      for (const auto& c : r.require) all += c + ",";
      all += "\n";
    }
  }
  return Sha256Hex(all);
}

// The walk lists directories on the calling thread and hands each file to a batch; a batch's
// files are stat'ed (and, when their identity is not the cached one, read) by up to four
// threads at once, then taken in walk order, so the result does not depend on the threads.
// A warm scan is a stat per file: on two cores about half the time of one thread doing them.
class SecretWalker {
 public:
  // `cache`: what earlier scans found (each file this scan meets is marked seen there, each
  // file it reads is added or updated).
  SecretWalker(const Redactor& shapes, const SecretScanLimits& limits, Cache& cache,
               const std::atomic<bool>* stop)
      : shapes_(shapes), limits_(limits), cache_(cache), known_(cache.files.size()), stop_(stop) {
    const unsigned hw = std::thread::hardware_concurrency();
    threads_ = std::clamp<unsigned>(hw == 0 ? 1 : hw, 1, 4);
  }

  // The whole workspace on one filesystem (as find -xdev: another mount under the workspace,
  // /proc and /sys under a workspace of /, a network share, is not walked, nor its files read);
  // deeper than 64 directories or past max_entries the scan says `truncated`.
  void Walk(int root_fd) {
    UniqueFd fd(::openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return;
    WalkOptions opts;
    opts.max_depth = 64;
    opts.too_deep = TooDeep::kSkip;
    opts.max_entries = limits_.max_entries;
    opts.too_many = TooDeep::kSkip;
    opts.xdev = true;
    opts.what = "the workspace";
    WalkHooks hooks;
    hooks.visit = [&](const WalkEntry& e) -> Result<Visit> {
      if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) {
        truncated_ = true;  // the session ended first: what was not reached is not known
        return Visit::kStop;
      }
      const std::string_view n = e.name;
      if (e.type == DT_DIR) {
        if (n == ".git") {
          Queue(e.dir_fd, ".git/config", *e.rel + "/config");
          return Visit::kNext;
        }
        return SkippedDir(n) ? Visit::kNext : Visit::kDescend;
      }
      if (e.type == DT_REG || e.type == DT_UNKNOWN) Queue(e.dir_fd, e.name, *e.rel);
      return Visit::kNext;
    };
    // The directory the entries come from changes on entering one and on leaving it (back to
    // its parent): the next file queued takes a descriptor of its own (a number WalkTree
    // closed may name another directory by then).
    hooks.enter = [&](const WalkEntry&, int) -> Status {
      dir_current_ = false;
      return {};
    };
    hooks.leave = [&](const WalkEntry&) -> Status {
      dir_current_ = false;
      return {};
    };
    // What cannot be opened is not read (this uid cannot read it, nor can the sandbox).
    hooks.unopenable = [](const WalkEntry&, int) -> Result<UniqueFd> { return UniqueFd(); };
    auto walked = WalkTree(fd.get(), opts, hooks);
    Flush();
    if (!walked || walked->truncated) truncated_ = true;
    if (walked) scan_.entries = walked->entries;
  }

  // The scan, its files sorted; `order` the cache's files to keep, in walk order; `changed`
  // when that is not what the cache said (a file read, or one gone: the unseen are dropped).
  SecretScan Take(bool& changed, std::vector<std::size_t>& order) {
    scan_.truncated = truncated_ || cut_.load();
    scan_.read_bytes = got_bytes_.load();
    changed = changed_;
    if (scan_.truncated) {
      // --- failclosed: a scan a limit stopped (an agent can make one: 100,000 empty files) did
      // not reach every file. What earlier scans found in the files it did not reach still
      // counts, and stays cached: a flood never makes a known secret file's lines visible.
      for (std::size_t i = 0; i < known_; ++i) {
        if (cache_.files[i].seen) continue;
        Found(cache_.files[i]);
        order_.push_back(i);
      }
    } else {
      changed = changed || seen_ != known_;
    }
    order = std::move(order_);
    std::sort(scan_.files.begin(), scan_.files.end());
    return std::move(scan_);
  }

 private:
  enum class Outcome { kNone, kHit, kRead };
  struct Job {
    std::uint32_t dir = 0;                                       // in dirs_
    std::uint32_t name = 0, name_len = 0, rel = 0, rel_len = 0;  // in names_
    std::size_t cached = Cache::kNone;
    Outcome outcome = Outcome::kNone;
    ScanIdentity id;
    std::vector<SecretLines::Entry> entries;
  };
  static constexpr std::size_t kBatchFiles = 4096;
  static constexpr std::size_t kBatchDirs = 128;  // descriptors a batch holds open

  // `name` is relative to dir_fd (".git/config" for a repository's config).
  void Queue(int dir_fd, std::string_view name, std::string_view rel) {
    if (!dir_current_ || dirs_.empty()) {
      if (dirs_.size() >= kBatchDirs) Flush();
      UniqueFd d(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
      if (!d.valid()) {
        Flush();  // out of descriptors: the batch's go back
        d = UniqueFd(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
        if (!d.valid()) {
          truncated_ = true;
          return;
        }
      }
      dirs_.push_back(std::move(d));
      dir_current_ = true;
    }
    Job& j = jobs_.emplace_back();
    j.dir = static_cast<std::uint32_t>(dirs_.size() - 1);
    j.name = static_cast<std::uint32_t>(names_.size());
    j.name_len = static_cast<std::uint32_t>(name.size());
    names_.append(name);
    names_.push_back('\0');
    j.rel = static_cast<std::uint32_t>(names_.size());
    j.rel_len = static_cast<std::uint32_t>(rel.size());
    names_.append(rel);
    names_.push_back('\0');
    j.cached = cache_.Find(rel);
    if (jobs_.size() >= kBatchFiles) Flush();
  }

  void Flush() {
    if (!jobs_.empty()) {
      std::atomic<std::size_t> next{0};
      auto work = [&] {
        for (;;) {
          const std::size_t b = next.fetch_add(64);
          if (b >= jobs_.size()) return;
          for (std::size_t i = b; i < std::min(b + 64, jobs_.size()); ++i) Stat(jobs_[i]);
        }
      };
      std::vector<std::thread> helpers;
      const std::size_t n = jobs_.size() < 256 ? 1 : threads_;
      for (std::size_t t = 1; t < n; ++t) {
        try {
          helpers.emplace_back(work);
        } catch (const std::system_error&) {
          break;  // no thread to spare: this one does it all
        }
      }
      work();
      for (auto& t : helpers) t.join();
      for (Job& j : jobs_) Take(j);
      jobs_.clear();
      names_.clear();
    }
    dirs_.clear();
    dir_current_ = false;
  }

  // On any of the batch's threads: touches only `j` and the atomics.
  void Stat(Job& j) {
    const int dir_fd = dirs_[j.dir].get();
    const char* name = names_.data() + j.name;
    struct stat st {};
    if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return;
    j.id = ScanIdentity::Of(st);
    if (j.cached != Cache::kNone && cache_.files[j.cached].id == j.id) {
      j.outcome = Outcome::kHit;
      return;
    }
    const std::string leaf = Leaf(std::string_view(name, j.name_len));
    const bool by_name = IsSecretFileName(leaf);
    if (st.st_size == 0) {
      j.outcome = Outcome::kRead;  // nothing to find: cached as such
      return;
    }
    // The total budget: what this file may read, taken before it reads.
    const std::size_t most =
        std::min<std::size_t>(static_cast<std::size_t>(st.st_size), limits_.max_file_bytes);
    const std::size_t before = budget_.fetch_add(most);
    if (before >= limits_.max_total_bytes) {
      cut_ = true;  // not read, so not cached: a later scan reads it
      return;
    }
    const std::size_t want = std::min(most, limits_.max_total_bytes - before);
    UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) return;
    struct stat again {};
    if (::fstat(fd.get(), &again) != 0 || !S_ISREG(again.st_mode) || again.st_ino != st.st_ino) {
      return;
    }
    std::string content(want, '\0');
    std::size_t got = 0;
    while (got < want) {
      const ssize_t r = ::read(fd.get(), content.data() + got, want - got);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    content.resize(got);
    got_bytes_ += got;
    if (static_cast<std::size_t>(st.st_size) > got && by_name) cut_ = true;
    // A binary file (a NUL in its head) has no lines to find in text output.
    std::vector<std::string> lines;
    if (content.find('\0') == std::string::npos || by_name) {
      lines = SecretLinesOf(leaf, content, shapes_);
    }
    for (const auto& l : lines) {
      if (l.size() >= SecretLines::kMinLine) j.entries.push_back(SecretLines::Hash(l));
    }
    std::sort(j.entries.begin(), j.entries.end());
    j.entries.erase(std::unique(j.entries.begin(), j.entries.end()), j.entries.end());
    j.outcome = Outcome::kRead;
  }

  // On the walking thread, in walk order.
  void Take(Job& j) {
    if (j.outcome == Outcome::kNone) return;
    std::size_t i = j.cached;
    if (i != Cache::kNone && i < known_ && !cache_.files[i].seen) ++seen_;
    if (j.outcome == Outcome::kHit) {
      ++scan_.cached_files;
    } else {
      ++scan_.read_files;
      changed_ = true;
      if (i == Cache::kNone) {
        i = cache_.files.size();
        CachedFile added;
        added.path = cache_.Keep(std::string_view(names_.data() + j.rel, j.rel_len));
        cache_.files.push_back(added);
      }
      CachedFile& f = cache_.files[i];
      f.id = j.id;
      f.first = static_cast<std::uint32_t>(cache_.entries.size());
      f.count = static_cast<std::uint32_t>(j.entries.size());
      cache_.entries.insert(cache_.entries.end(), j.entries.begin(), j.entries.end());
    }
    cache_.files[i].seen = true;
    Found(cache_.files[i]);
    order_.push_back(i);
  }

  static std::string Leaf(std::string_view rel) {
    const std::size_t slash = rel.rfind('/');
    return std::string(slash == std::string_view::npos ? rel : rel.substr(slash + 1));
  }

  void Found(const CachedFile& f) {
    if (f.count == 0) return;
    // The path as JSON can hold it (the record's paths): a name that is not UTF-8 (a byte
    // 0xff) would make the JSON writer throw; escaped, two names stay apart.
    scan_.files.push_back(EscapeName(f.path));
    for (std::uint32_t k = f.first; k < f.first + f.count; ++k) scan_.lines.Add(cache_.entries[k]);
  }

  const Redactor& shapes_;
  const SecretScanLimits& limits_;
  Cache& cache_;
  const std::size_t known_;  // the files the cache held before this scan
  const std::atomic<bool>* stop_;
  unsigned threads_ = 1;
  std::vector<UniqueFd> dirs_;
  bool dir_current_ = false;  // dirs_.back() is the directory of the entries being visited
  std::vector<Job> jobs_;
  std::string names_;               // the batch's names and paths, each ended by a NUL
  std::vector<std::size_t> order_;  // the cache's files this scan keeps, in walk order
  std::size_t seen_ = 0;            // files of the first known_ marked seen
  bool changed_ = false;
  bool truncated_ = false;
  std::atomic<bool> cut_{false};           // a byte limit left a file unread or a secret file cut
  std::atomic<std::size_t> budget_{0};     // bytes the files may read, taken before reading
  std::atomic<std::size_t> got_bytes_{0};  // bytes read
  SecretScan scan_;
};

}  // namespace

bool IsSecretFileName(std::string_view name) {
  if (name == ".env" || name.starts_with(".env.") || name.ends_with(".env")) {
    return !name.ends_with(".example") && !name.ends_with(".sample") &&
           !name.ends_with(".template");
  }
  if (name.starts_with("id_") && !name.ends_with(".pub")) return true;
  for (std::string_view ext : {".pem", ".key", ".p8", ".ppk", ".asc", ".gpg-key"}) {
    if (name.ends_with(ext)) return true;
  }
  if (IsStoreFormatFileName(name)) return true;
  return name == "credentials" || name == ".netrc" || name == ".npmrc" || name == ".pypirc" ||
         name == ".git-credentials" || name == "credentials.json" ||
         (name.find("service") != std::string_view::npos && name.ends_with(".json"));
}

bool IsStoreFormatFileName(std::string_view name) {
  const std::string lower = AsciiLower(name);
  static constexpr std::string_view kNames[] = {
      ".pgpass",   "pgpass",    ".my.cnf",    "settings.xml",          "nuget.config",
      "htpasswd",  ".htpasswd", "redis.conf", "credentials.tfrc.json", ".vault-token",
      "master.key"};
  return std::find(std::begin(kNames), std::end(kNames), lower) != std::end(kNames);
}

std::vector<std::string> SecretLinesOf(std::string_view name, std::string_view content,
                                       const Redactor& shapes) {
  std::vector<std::string> out;
  // Everything the redactor hides in the file, not only its rules' matches: a key body without
  // its armour or a JWT folded over lines (a folded block), a secret's base64 or hex. A line view
  // of the file shows each of its lines apart from what made it found.
  for (const auto& sp : shapes.Find(content)) {
    std::string_view hidden = content.substr(sp.hide_begin, sp.hide_end - sp.hide_begin);
    if (sp.rule == "private_key") {
      KeyBodyLines(hidden, out);
    } else {
      ForEachLine(hidden, [&](std::string_view l) {
        l = Trim(l);
        if (l.size() >= SecretLines::kMinLine) out.emplace_back(l);
      });
    }
  }
  if (!IsSecretFileName(name)) return out;
  // A file in a credential store's format (.pgpass, .my.cnf, settings.xml, NuGet.Config,
  // htpasswd, redis.conf, credentials.tfrc.json, .vault-token): the values its format holds,
  // read as the store reader reads them (workspace/credential_stores.h).
  if (IsStoreFormatFileName(name)) {
    for (auto& v : CredentialValuesOf(name, content).values) {
      if (v.size() >= SecretLines::kMinLine) out.push_back(std::move(v));
    }
    return out;
  }
  const bool env_like = name.find(".env") != std::string_view::npos || name == "credentials" ||
                        name == ".netrc" || name == ".npmrc" || name == ".pypirc";
  const bool key_like =
      !env_like && name.find("service") == std::string_view::npos && name != "credentials.json";
  ForEachLine(content, [&](std::string_view line) {
    std::string_view t = Trim(line);
    if (t.empty() || t[0] == '#') return;
    if (env_like) {
      // NAME=value, export NAME=value, name = value, "machine h login u password p".
      if (t.starts_with("export ")) t.remove_prefix(7);
      std::size_t eq = t.find('=');
      if (eq != std::string_view::npos) {
        std::string_view key = Trim(t.substr(0, eq));
        std::string_view value = Trim(t.substr(eq + 1));
        if (Redactor::IsSecretName(key) && value.size() >= SecretLines::kMinLine &&
            value[0] != '$') {
          out.emplace_back(value);
        }
      }
      for (std::string_view word : {"password ", "passwd "}) {
        std::size_t at = t.find(word);
        if (at == std::string_view::npos) continue;
        std::string_view rest = t.substr(at + word.size());
        rest = rest.substr(0, rest.find(' '));
        if (rest.size() >= SecretLines::kMinLine) out.emplace_back(rest);
      }
    } else if (key_like && t.size() >= 16 && Base64ish(t)) {
      out.emplace_back(t);  // a key file's body without armour
    }
  });
  return out;
}

Json SecretScan::ToJson() const {
  Json j = {{"files", files.size()},    {"lines", lines.size()},
            {"entries", entries},       {"read_files", read_files},
            {"read_bytes", read_bytes}, {"cached_files", cached_files},
            {"truncated", truncated},   {"ms", ms}};
  Json names = Json::array();
  for (std::size_t i = 0; i < files.size() && i < 32; ++i) names.push_back(files[i]);
  j["paths"] = std::move(names);
  return j;
}

namespace {

void PruneCaches(const std::string& dir, const std::string& keep) {
  UniqueDir d = UniqueDir::Open(dir.c_str());
  if (!d.valid()) return;
  const auto now = std::chrono::system_clock::now();
  const auto month = std::chrono::hours(24 * 30);
  while (dirent* e = d.Next()) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (path == keep || ::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto mtime = std::chrono::system_clock::from_time_t(st.st_mtime);
    if (now - mtime > month) ::unlink(path.c_str());
  }
}

}  // namespace

std::string SecretScanCacheFile(const std::string& root) {
  return CordonStateDir() + "/secret-files/" + Sha256Hex(root).substr(0, 32) + ".v1";
}

Result<SecretScan> ScanSecretFiles(int root_fd, const Redactor& shapes,
                                   const SecretScanLimits& limits, const std::string& cache_file,
                                   const std::atomic<bool>* stop) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string fingerprint = RulesFingerprint(shapes);
  Cache cache;
  bool have_cache = false;
  if (!cache_file.empty()) {
    UniqueFd fd(::open(cache_file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    // Only a cache this user wrote and no one else can change is believed: with no usable HOME
    // the state directory is under /tmp, where another user could plant a cache that says a
    // secret file holds nothing.
    if (fd.valid() && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_uid == ::geteuid() && (st.st_mode & 022) == 0 &&
        cache.Map(fd.get(), static_cast<std::size_t>(st.st_size))) {
      have_cache = ParseCache(fingerprint, cache);
      if (!have_cache) cache.Clear();  // another version's or a torn cache: scan afresh
    }
  }
  SecretWalker w(shapes, limits, cache, stop);
  w.Walk(root_fd);
  bool changed = false;
  std::vector<std::size_t> keep;
  SecretScan scan = w.Take(changed, keep);
  // A small tree is read again at no cost: no cache file for it (tests and scratch workspaces
  // would leave one each). Writing one prunes the caches of workspaces not seen for 30 days.
  if (!cache_file.empty() && changed && scan.entries >= limits.cache_from_entries) {
    PruneCaches(cache_file.substr(0, cache_file.rfind('/')), cache_file);
    // The cache holds hashes only; it is cordon's own state (0600, masked from every sandbox).
    const std::string dir = cache_file.substr(0, cache_file.rfind('/'));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    ::chmod(dir.c_str(), 0700);
    const std::string tmp = cache_file + ".tmp." + std::to_string(::getpid());
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.valid()) {
      const std::string text = WriteCache(cache, keep, fingerprint);
      if (!WriteAll(fd.get(), text, tmp) || ::rename(tmp.c_str(), cache_file.c_str()) != 0) {
        ::unlink(tmp.c_str());
      }
    }
  }
  scan.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return scan;
}

}  // namespace cordon
