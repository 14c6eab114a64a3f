// The workspace's secret files (secret_files.h): a bounded descriptor walk, a per-file cache.
#include "workspace/secret_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
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
  static bool Parse(std::string_view t, ScanIdentity& out) {
    unsigned long long d = 0, i = 0, z = 0;
    long long ms = 0, mn = 0, cs = 0, cn = 0;
    const std::string text(t);
    if (std::sscanf(text.c_str(), "%llu:%llu:%llu:%lld.%lld:%lld.%lld", &d, &i, &z, &ms, &mn, &cs,
                    &cn) != 7) {
      return false;
    }
    out = {d, i, z, ms, mn, cs, cn};
    return true;
  }
};

std::string Hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The cache: one record per file, "<identity>\t<n>\t<path>\n" then n lines
// "<prefix hex> <hash hex> <length>\n". Paths hold no newline (a name with one is not cached).
struct CachedFile {
  ScanIdentity id;
  std::vector<SecretLines::Entry> entries;
  bool seen = false;  // this scan found the file (an unseen one is dropped from the cache)
};
using Cache = std::unordered_map<std::string, CachedFile>;

// v2: identities compared as numbers, paths as their raw bytes.
constexpr std::string_view kCacheMagic = "cordon-secret-files v2 ";

bool ParseCache(std::string_view text, const std::string& fingerprint, Cache& out) {
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
  while (auto rec = line()) {
    const std::size_t t1 = rec->find('\t');
    const std::size_t t2 = t1 == std::string_view::npos ? t1 : rec->find('\t', t1 + 1);
    if (t2 == std::string_view::npos) return false;
    CachedFile f;
    if (!ScanIdentity::Parse(rec->substr(0, t1), f.id)) return false;
    const std::size_t n =
        std::strtoul(std::string(rec->substr(t1 + 1, t2 - t1 - 1)).c_str(), nullptr, 10);
    for (std::size_t k = 0; k < n; ++k) {
      auto e = line();
      if (!e) return false;
      SecretLines::Entry en;
      unsigned long long a = 0, b = 0;
      unsigned len = 0;
      if (std::sscanf(std::string(*e).c_str(), "%llx %llx %u", &a, &b, &len) != 3) return false;
      en.prefix = a;
      en.hash = b;
      en.length = len;
      f.entries.push_back(en);
    }
    out[std::string(rec->substr(t2 + 1))] = std::move(f);
  }
  return true;
}

std::string WriteCache(const Cache& cache, const std::string& fingerprint) {
  std::string out = std::string(kCacheMagic) + fingerprint + "\n";
  for (const auto& [path, f] : cache) {
    if (path.find('\n') != std::string::npos) continue;
    out += f.id.Text() + "\t" + std::to_string(f.entries.size()) + "\t" + path + "\n";
    for (const auto& e : f.entries) {
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

class SecretWalker {
 public:
  // `cache`: what earlier scans found, by path (updated in place: each file this scan finds is
  // marked seen, each file it reads replaces its entry).
  SecretWalker(const Redactor& shapes, const SecretScanLimits& limits, Cache& cache)
      : shapes_(shapes), limits_(limits), cache_(cache) {}

  // The whole workspace, sorted, on one filesystem (as find -xdev: another mount under the
  // workspace, /proc and /sys under a workspace of /, a network share, is not walked, nor its
  // files read); deeper than 64 directories or past max_entries the scan says `truncated`.
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
      const std::string_view n = e.name;
      if (e.type == DT_DIR) {
        if (n == ".git") {
          File(e.dir_fd, ".git/config", *e.rel + "/config");
          return Visit::kNext;
        }
        return SkippedDir(n) ? Visit::kNext : Visit::kDescend;
      }
      if (e.type == DT_REG || e.type == DT_UNKNOWN) File(e.dir_fd, e.name, *e.rel);
      return Visit::kNext;
    };
    // What cannot be opened is not read (this uid cannot read it, nor can the sandbox).
    hooks.unopenable = [](const WalkEntry&, int) -> Result<UniqueFd> { return UniqueFd(); };
    auto walked = WalkTree(fd.get(), opts, hooks);
    if (!walked || walked->truncated) scan_.truncated = true;
    if (walked) scan_.entries = walked->entries;
  }

  // The scan, its files sorted; `changed` when the cache no longer says what this scan found
  // (a file read, or one gone: the unseen entries are dropped).
  SecretScan Take(bool& changed) {
    if (scan_.truncated) {
      // --- failclosed: a scan a limit stopped (an agent can make one: 100,000 empty files) did
      // not reach every file. What earlier scans found in the files it did not reach still
      // counts, and stays cached: a flood never makes a known secret file's lines visible.
      for (const auto& [path, f] : cache_) {
        if (!f.seen) Found(path, f.entries);
      }
      changed = changed_;
      std::sort(scan_.files.begin(), scan_.files.end());
      return std::move(scan_);
    }
    changed = changed_ || seen_ != cache_.size();
    if (changed) std::erase_if(cache_, [](const auto& kv) { return !kv.second.seen; });
    std::sort(scan_.files.begin(), scan_.files.end());
    return std::move(scan_);
  }

 private:
  static std::string Leaf(const std::string& rel) {
    const std::size_t slash = rel.rfind('/');
    return slash == std::string::npos ? rel : rel.substr(slash + 1);
  }

  // `name` is relative to dir_fd (".git/config" for a repository's config).
  void File(int dir_fd, const std::string& name, const std::string& rel) {
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      return;
    }
    const ScanIdentity id = ScanIdentity::Of(st);
    const std::string& key = rel;
    if (auto it = cache_.find(key); it != cache_.end() && it->second.id == id) {
      ++scan_.cached_files;
      if (!it->second.seen) ++seen_;
      it->second.seen = true;
      Found(key, it->second.entries);
      return;
    }
    changed_ = true;
    const std::string leaf = Leaf(name);
    const bool by_name = IsSecretFileName(leaf);
    if (st.st_size == 0) return;
    if (scan_.read_bytes >= limits_.max_total_bytes) {
      scan_.truncated = true;
      return;
    }
    UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) return;
    struct stat again {};
    if (::fstat(fd.get(), &again) != 0 || !S_ISREG(again.st_mode) || again.st_ino != st.st_ino) {
      return;
    }
    const std::size_t want =
        std::min<std::size_t>({static_cast<std::size_t>(st.st_size), limits_.max_file_bytes,
                               limits_.max_total_bytes - scan_.read_bytes});
    std::string content(want, '\0');
    std::size_t got = 0;
    while (got < want) {
      const ssize_t n = ::read(fd.get(), content.data() + got, want - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    content.resize(got);
    ++scan_.read_files;
    scan_.read_bytes += got;
    if (static_cast<std::size_t>(st.st_size) > got) scan_.truncated = scan_.truncated || by_name;
    // A binary file (a NUL in its head) has no lines to find in text output.
    std::vector<std::string> lines;
    if (content.find('\0') == std::string::npos || by_name) {
      lines = SecretLinesOf(leaf, content, shapes_);
    }
    std::vector<SecretLines::Entry> entries;
    for (const auto& l : lines) {
      if (l.size() >= SecretLines::kMinLine) entries.push_back(SecretLines::Hash(l));
    }
    std::sort(entries.begin(), entries.end());
    entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
    Add(key, std::move(entries), id);
  }

  void Add(const std::string& rel, std::vector<SecretLines::Entry> entries,
           const ScanIdentity& id) {
    CachedFile& f = cache_[rel];
    if (!f.seen) ++seen_;
    f = CachedFile{id, std::move(entries), true};
    Found(rel, f.entries);
  }

  void Found(const std::string& rel, const std::vector<SecretLines::Entry>& entries) {
    if (entries.empty()) return;
    // The path as JSON can hold it (the record's paths): a name that is not UTF-8 (a byte
    // 0xff) would make the JSON writer throw; escaped, two names stay apart.
    scan_.files.push_back(EscapeName(rel));
    for (const auto& e : entries) scan_.lines.Add(e);
  }

  const Redactor& shapes_;
  const SecretScanLimits& limits_;
  Cache& cache_;
  std::size_t seen_ = 0;  // entries of cache_ marked seen
  bool changed_ = false;
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
                                   const SecretScanLimits& limits, const std::string& cache_file) {
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
        st.st_uid == ::geteuid() && (st.st_mode & 022) == 0) {
      std::string text(static_cast<std::size_t>(st.st_size), '\0');
      std::size_t got = 0;
      while (got < text.size()) {
        const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
      }
      text.resize(got);
      have_cache = ParseCache(text, fingerprint, cache);
      if (!have_cache) cache.clear();  // another version's or a torn cache: scan afresh
    }
  }
  SecretWalker w(shapes, limits, cache);
  w.Walk(root_fd);
  bool changed = false;
  SecretScan scan = w.Take(changed);
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
      const std::string text = WriteCache(cache, fingerprint);
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
