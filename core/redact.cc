// Secret redaction: exact values, then secret lines (hashes), then the policy's rules (RE2
// patterns, linear in the text, run only on the lines where one of their keywords occurs).
#include "core/redact.h"

#include <fcntl.h>
#include <malloc.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string_view>

#include "core/hash.h"
#include "core/unique_fd.h"

namespace cordon {

constexpr auto npos_sv = std::string_view::npos;

// --- compiled rules ---

// A run of token characters, with the classes it holds (kTokenClass bits).
struct TokenRun {
  std::size_t begin, end;
  unsigned mask;
};
using Runs = std::vector<TokenRun>;
void RuleSpans(const RedactRules::Impl& im, std::string_view s, std::vector<Redactor::Span>& out,
               std::size_t only, const Runs* runs = nullptr);

struct RedactRules::Impl {
  std::vector<RedactRule> rules;
  // Each rule's RE2 programs, built on the rule's first use (a set checked before is not
  // compiled up front: most rules never run in a short session, and compiling all of them was
  // most of a `cordon exec`'s own CPU time).
  struct Programs {
    std::unique_ptr<RE2> pattern;
    std::unique_ptr<RE2> ignore;  // null: none
    std::vector<std::unique_ptr<RE2>> allow;
  };
  mutable std::unique_ptr<std::once_flag[]> built;
  mutable std::vector<Programs> programs;
  const Programs& Get(std::size_t r) const;
  std::vector<unsigned> require_mask;  // 1 upper, 2 lower, 4 digit
  // The keyword prefilter: a bitmap over the (lower-cased) first two bytes of every keyword,
  // then the keywords that start with those two bytes, each with its rule.
  // Bits over a hash of the first three (lower-cased) bytes of every keyword (any third byte
  // for a two-byte keyword): almost every position of a text fails this one test.
  std::vector<std::uint64_t> triples = std::vector<std::uint64_t>(65536 / 64, 0);
  std::vector<std::vector<std::pair<std::string, std::size_t>>> by_pair =
      std::vector<std::vector<std::pair<std::string, std::size_t>>>(65536);
  std::vector<char> whole;          // rule runs over the whole text: no keywords, or (?s)
  std::vector<std::size_t> always;  // rules without keywords
};

RedactRules::~RedactRules() = default;
std::size_t RedactRules::size() const { return impl_->rules.size(); }
const std::vector<RedactRule>& RedactRules::rules() const { return impl_->rules; }

namespace {

RE2::Options ByteOptions() {
  RE2::Options o;
  o.set_encoding(RE2::Options::EncodingLatin1);
  o.set_log_errors(false);
  o.set_max_mem(32 << 20);
  return o;
}

double Entropy(std::string_view s) {
  if (s.empty()) return 0;
  std::array<std::size_t, 256> counts{};
  for (unsigned char c : s) ++counts[c];
  double h = 0;
  for (std::size_t n : counts) {
    if (n == 0) continue;
    const double p = static_cast<double>(n) / static_cast<double>(s.size());
    h -= p * std::log2(p);
  }
  return h;
}

unsigned ClassMask(std::string_view s) {
  unsigned m = 0;
  for (char c : s) {
    if (c >= 'A' && c <= 'Z')
      m |= 1;
    else if (c >= 'a' && c <= 'z')
      m |= 2;
    else if (c >= '0' && c <= '9')
      m |= 4;
  }
  return m;
}

// The prefilter's index of two bytes: OR 0x20 lower-cases letters (and maps a few punctuation
// bytes onto others: a false candidate, which the keyword's own comparison then rejects).
inline std::size_t KeywordPair(unsigned char a, unsigned char b) {
  return static_cast<std::size_t>((a | 0x20) | (b | 0x20) << 8);
}

inline std::size_t KeywordTriple(unsigned a, unsigned b, unsigned c) {
  const std::uint32_t v = (a | 0x20u) | (b | 0x20u) << 8 | (c | 0x20u) << 16;
  return (v * 0x9E3779B1u) >> 16;
}

// A marker's name: nothing a reader of "[REDACTED:<id>]" could take for its end or a space.
bool ValidId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
           c == ':';
  });
}

void BuildPrograms(const RedactRule& rule, RedactRules::Impl::Programs& p) {
  p.pattern = std::make_unique<RE2>(rule.pattern, ByteOptions());
  if (!rule.ignore.empty()) p.ignore = std::make_unique<RE2>(rule.ignore, ByteOptions());
  for (const auto& a : rule.allow) p.allow.push_back(std::make_unique<RE2>(a, ByteOptions()));
}

std::string RuleAt(const RedactRule& r) {
  return (r.where.empty() ? std::string("rule") : r.where) + ": redact rule \"" + r.id + "\": ";
}

// The checks of one rule that need no program; lower-cases its keywords and stopwords.
Status CheckFields(RedactRule& r, unsigned& mask) {
  const std::string at = RuleAt(r);
  if (!ValidId(r.id)) {
    return Fail(Code::kInvalidInput, at + "id must be 1 to 64 characters of a-z, 0-9, _, -, . "
                                          "and : (it names the marker)");
  }
  mask = 0;
  for (const auto& c : r.require) {
    if (c == "upper")
      mask |= 1;
    else if (c == "lower")
      mask |= 2;
    else if (c == "digit")
      mask |= 4;
    else
      return Fail(Code::kInvalidInput,
                  at + "require: \"" + c + "\" is not one of upper, lower, digit");
  }
  if (r.entropy < 0 || r.entropy > 8) {
    return Fail(Code::kInvalidInput, at + "entropy must be between 0 and 8 bits per byte");
  }
  for (auto& k : r.keywords) {
    if (k.size() < 2) {
      return Fail(Code::kInvalidInput, at + "a keyword must be at least 2 bytes: \"" + k + "\"");
    }
    for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (auto& w : r.stopwords) {
    if (w.empty()) return Fail(Code::kInvalidInput, at + "a stopword must not be empty");
    for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return {};
}

// The checks of one rule's compiled programs.
Status CheckPrograms(const RedactRule& r, const RedactRules::Impl::Programs& p) {
  const std::string at = RuleAt(r);
  if (!p.pattern->ok()) return Fail(Code::kInvalidInput, at + "pattern: " + p.pattern->error());
  if (r.group < -1 || r.group > p.pattern->NumberOfCapturingGroups()) {
    return Fail(Code::kInvalidInput, at + "group " + std::to_string(r.group) +
                                         " is not a capture group of the pattern (it has " +
                                         std::to_string(p.pattern->NumberOfCapturingGroups()) +
                                         ")");
  }
  if (p.ignore && !p.ignore->ok())
    return Fail(Code::kInvalidInput, at + "ignore: " + p.ignore->error());
  for (std::size_t a = 0; a < p.allow.size(); ++a) {
    if (!p.allow[a]->ok()) {
      return Fail(Code::kInvalidInput, at + "allow \"" + r.allow[a] + "\": " + p.allow[a]->error());
    }
  }
  return {};
}

}  // namespace

const RedactRules::Impl::Programs& RedactRules::Impl::Get(std::size_t r) const {
  std::call_once(built[r], [&] { BuildPrograms(rules[r], programs[r]); });
  return programs[r];
}

namespace {

// Every field of every rule but its file:line (RedactRules::digest).
std::string RulesDigest(const std::vector<RedactRule>& rules) {
  std::string all = "redact-checked-v1\n";
  auto field = [&all](std::string_view v) {
    all += std::to_string(v.size());
    all += ':';
    all += v;
  };
  for (const auto& r : rules) {
    field(r.id);
    field(r.pattern);
    field(std::to_string(r.keywords.size()));
    for (const auto& k : r.keywords) field(k);
    field(std::to_string(r.group));
    field(std::to_string(r.entropy));
    field(std::to_string(r.min_length));
    field(std::to_string(r.require.size()));
    for (const auto& c : r.require) field(c);
    field(r.ignore);
    field(r.token_runs ? "1" : "0");
    field(std::to_string(r.match.size()));
    for (const auto& m : r.match) field(m);
    field(std::to_string(r.not_match.size()));
    for (const auto& m : r.not_match) field(m);
    // Fields added later count only where set: a set without them keeps its digest.
    if (!r.allow.empty() || !r.stopwords.empty()) {
      field("allow");
      field(std::to_string(r.allow.size()));
      for (const auto& a : r.allow) field(a);
      field(std::to_string(r.stopwords.size()));
      for (const auto& w : r.stopwords) field(w);
    }
  }
  return Sha256Hex(all);
}

// What a check's verdict depends on: the rules' digest, and this very binary (its RE2
// and its matching code), named by its file's identity. "" when that cannot be read: the set
// is then checked as if new.
std::string CheckFingerprint(const std::string& rules_hash) {
  struct stat exe {};
  if (::stat("/proc/self/exe", &exe) != 0) return "";
  const std::string exe_id = std::to_string(exe.st_dev) + " " + std::to_string(exe.st_ino) + " " +
                             std::to_string(exe.st_size) + " " +
                             std::to_string(exe.st_mtim.tv_sec) + "." +
                             std::to_string(exe.st_mtim.tv_nsec);
  // The file is named by the rules; it holds the binary that checked them (a rebuild rewrites
  // it rather than adding one more file).
  return rules_hash + "\n" + exe_id + "\n";
}

// Only a record this user wrote, in a directory only this user can change, is believed: with
// no usable HOME the state directory is under /tmp, where another user could plant one that
// lets a rule set skip its checks.
bool CheckedBefore(const std::string& dir, const std::string& fingerprint) {
  const std::string name = fingerprint.substr(0, fingerprint.find('\n'));
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!d.valid() || ::fstat(d.get(), &st) != 0 || st.st_uid != ::geteuid() ||
      (st.st_mode & 022) != 0)
    return false;
  UniqueFd f(::openat(d.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!f.valid() || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)
    return false;
  char buf[512];
  const ssize_t n = ::read(f.get(), buf, sizeof buf);
  return n == static_cast<ssize_t>(fingerprint.size()) &&
         std::string_view(buf, static_cast<std::size_t>(n)) == fingerprint;
}

// Best effort: a record that cannot be written only means the next start checks again.
void RecordChecked(const std::string& dir, const std::string& fingerprint) {
  const std::string name = fingerprint.substr(0, fingerprint.find('\n'));
  // The state directory and what leads to it, each made 0700 where missing.
  for (std::size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string part = dir.substr(0, slash);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return;
    if (slash == std::string::npos) break;
  }
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!d.valid() || ::fstat(d.get(), &st) != 0 || st.st_uid != ::geteuid() ||
      (st.st_mode & 022) != 0)
    return;
  const std::string tmp = name + ".tmp." + std::to_string(::getpid());
  UniqueFd f(
      ::openat(d.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!f.valid()) return;
  const bool whole = ::write(f.get(), fingerprint.data(), fingerprint.size()) ==
                     static_cast<ssize_t>(fingerprint.size());
  if (!whole || ::renameat(d.get(), tmp.c_str(), d.get(), name.c_str()) != 0)
    ::unlinkat(d.get(), tmp.c_str(), 0);
}

}  // namespace

Status ExpandSecretWords(std::vector<RedactRule>& rules, const std::vector<std::string>& words) {
  static constexpr std::string_view kPlaceholder = "{secret_words}";
  std::string alternation;
  std::vector<std::string> spellings;
  for (const std::string& w : words) {
    const bool valid = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!valid || w.front() == '_' || w.back() == '_') {
      return Fail(Code::kInvalidInput,
                  "redact.secret_words: \"" + w + "\" is not a word of a-z, 0-9 and inner _");
    }
    if (!alternation.empty()) alternation += '|';
    std::string joined[4];  // "_", "-", ".", "" between the word's parts
    for (char c : w) {
      if (c == '_') {
        alternation += "[_.-]?";
        joined[0] += '_';
        joined[1] += '-';
        joined[2] += '.';
      } else {
        alternation += c;
        for (auto& j : joined) j += c;
      }
    }
    for (auto& j : joined) {
      if (j.size() >= 2 && std::find(spellings.begin(), spellings.end(), j) == spellings.end())
        spellings.push_back(j);
    }
  }
  for (RedactRule& r : rules) {
    const bool in_pattern = r.pattern.find(kPlaceholder) != std::string::npos;
    const bool in_keywords = std::any_of(r.keywords.begin(), r.keywords.end(), [](const auto& k) {
      return k.find(kPlaceholder) != std::string::npos;
    });
    if (!in_pattern && !in_keywords) continue;
    if (words.empty()) {
      return Fail(Code::kInvalidInput,
                  (r.where.empty() ? std::string("rule") : r.where) + ": redact rule \"" + r.id +
                      "\" names {secret_words}, and [redact] secret_words is empty");
    }
    for (std::size_t p = r.pattern.find(kPlaceholder); p != std::string::npos;
         p = r.pattern.find(kPlaceholder, p + alternation.size() + 4)) {
      r.pattern.replace(p, kPlaceholder.size(), "(?:" + alternation + ")");
    }
    std::vector<std::string> keywords;
    for (const std::string& k : r.keywords) {
      const std::size_t at = k.find(kPlaceholder);
      if (at == std::string::npos) {
        keywords.push_back(k);
        continue;
      }
      for (const std::string& w : spellings) {  // "-{secret_words}": "-password", "-token", ...
        keywords.push_back(k.substr(0, at) + w + k.substr(at + kPlaceholder.size()));
      }
    }
    r.keywords = std::move(keywords);
  }
  return {};
}

Result<std::shared_ptr<const RedactRules>> RedactRules::Compile(std::vector<RedactRule> rules,
                                                                const std::string& checked_dir) {
  auto impl = std::make_unique<Impl>();
  for (std::size_t i = 0; i < rules.size(); ++i) {
    RedactRule& r = rules[i];
    const std::string at = RuleAt(r);
    unsigned mask = 0;
    TRY(CheckFields(r, mask));
    for (std::size_t j = 0; j < i; ++j) {
      if (rules[j].id == r.id) {
        return Fail(Code::kInvalidInput,
                    at + "id is already used by the rule at " + rules[j].where);
      }
    }
    for (const auto& k : r.keywords) {
      const std::size_t pair =
          KeywordPair(static_cast<unsigned char>(k[0]), static_cast<unsigned char>(k[1]));
      for (unsigned c = 0; c < 256; ++c) {
        if (k.size() > 2 && c != static_cast<unsigned char>(k[2])) continue;
        const std::size_t t =
            KeywordTriple(static_cast<unsigned char>(k[0]), static_cast<unsigned char>(k[1]), c);
        impl->triples[t >> 6] |= std::uint64_t{1} << (t & 63);
      }
      impl->by_pair[pair].emplace_back(k, i);
    }
    if (r.keywords.empty()) impl->always.push_back(i);
    // A pattern that spans lines ((?s), a key block) runs over the whole text once a keyword
    // is seen; the others only over the lines that hold one.
    impl->whole.push_back(r.keywords.empty() || r.pattern.find("(?s") != std::string::npos);
    impl->require_mask.push_back(mask);
  }
  impl->built = std::make_unique<std::once_flag[]>(rules.size());
  impl->programs.resize(rules.size());
  impl->rules = std::move(rules);
  std::shared_ptr<RedactRules> set(new RedactRules());
  set->impl_ = std::move(impl);
  set->digest_ = RulesDigest(set->impl_->rules);
  const std::string fingerprint = checked_dir.empty() ? "" : CheckFingerprint(set->digest_);
  if (!fingerprint.empty() && CheckedBefore(checked_dir, fingerprint)) {
    set->checked_before_ = true;
    return std::shared_ptr<const RedactRules>(std::move(set));
  }
  for (std::size_t i = 0; i < set->impl_->rules.size(); ++i) {
    TRY(CheckPrograms(set->impl_->rules[i], set->impl_->Get(i)));
  }
  // The examples: each rule alone, so that one rule's example is not taken by another rule.
  for (std::size_t i = 0; i < set->impl_->rules.size(); ++i) {
    const RedactRule& r = set->impl_->rules[i];
    const std::string at = RuleAt(r);
    for (const auto& ex : r.match) {
      std::vector<Redactor::Span> spans;
      RuleSpans(*set->impl_, ex, spans, i);
      if (spans.empty()) return Fail(Code::kInvalidInput, at + "example does not match: " + ex);
    }
    for (const auto& ex : r.not_match) {
      std::vector<Redactor::Span> spans;
      RuleSpans(*set->impl_, ex, spans, i);
      for (const auto& sp : spans) {
        {
          return Fail(Code::kInvalidInput,
                      at + "not_match example matches: " + ex + " (hides \"" +
                          ex.substr(sp.hide_begin, sp.hide_end - sp.hide_begin) + "\")");
        }
      }
    }
  }
  if (!fingerprint.empty()) RecordChecked(checked_dir, fingerprint);
  // The examples filled each program's DFA cache with states of texts that are never seen again
  // (about 14 MiB for the shipped rules, held for the session): the programs are dropped and
  // built again on first use, as for a set checked before. Nothing else holds the set yet.
  set->impl_->programs = std::vector<Impl::Programs>(set->impl_->rules.size());
  set->impl_->built = std::make_unique<std::once_flag[]>(set->impl_->rules.size());
  // Their pages go back to the kernel: tens of thousands of small blocks, which the allocator
  // keeps otherwise (what serve holds for its whole life).
  malloc_trim(0);
  return std::shared_ptr<const RedactRules>(std::move(set));
}

Status RedactRules::Check(const RedactRule& rule) {
  RedactRule r = rule;
  unsigned mask = 0;
  TRY(CheckFields(r, mask));
  Impl::Programs p;
  BuildPrograms(r, p);
  return CheckPrograms(r, p);
}

// --- secret lines ---

std::uint64_t SecretPrefixHash(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

std::uint64_t SecretLineHash(std::string_view s) {
  std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ (s.size() * 0x100000001b3ULL);
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t k;
    std::memcpy(&k, s.data() + i, 8);
    h = SecretPrefixHash(h ^ k) + 0x165667b19e3779f9ULL;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  return SecretPrefixHash(h ^ tail ^ (static_cast<std::uint64_t>(s.size() - i) << 56));
}

SecretLines::Entry SecretLines::Hash(std::string_view line) {
  Entry e;
  std::uint64_t k = 0;
  std::memcpy(&k, line.data(), std::min<std::size_t>(8, line.size()));
  e.prefix = SecretPrefixHash(k);
  e.hash = SecretLineHash(line);
  e.length = static_cast<std::uint32_t>(line.size());
  return e;
}

void SecretLines::Add(const Entry& e) {
  if (e.length < kMinLine) return;
  if (!full_.insert(Key(e.prefix, e.length, e.hash)).second) return;  // known already
  if (bitmap_.empty()) bitmap_.assign((std::size_t{1} << kBits) / 64, 0);
  entries_.push_back(e);
  ++count_;
  Bucket& b = by_prefix_[e.prefix];
  b.longest = std::max(b.longest, e.length);
  if (!b.overfull && std::find(b.lengths.begin(), b.lengths.end(), e.length) == b.lengths.end()) {
    if (b.bytes + e.length > kBucketBytes) {
      b.overfull = true;
    } else {
      b.lengths.insert(std::upper_bound(b.lengths.begin(), b.lengths.end(), e.length,
                                        std::greater<std::uint32_t>()),
                       e.length);
      b.bytes += e.length;
    }
  }
  const std::uint64_t bit = e.prefix >> (64 - kBits);
  bitmap_[bit >> 6] |= std::uint64_t{1} << (bit & 63);
}

std::vector<SecretLines::Entry> SecretLines::Entries() const {
  std::vector<Entry> out = entries_;
  std::sort(out.begin(), out.end());
  return out;
}

// --- the redactor ---

bool Redactor::IsSecretName(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* word : {"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD"}) {
    if (upper.find(word) != std::string::npos) return true;
  }
  // Words that name a secret only as a whole part of the name (DB_PASS, MYSQL_PWD, DB_PW,
  // SESSION_COOKIE, SIGNING_SALT): inside a word they are not (PASSENGER, BYPASS, COMPASS).
  // PWD and OLDPWD alone are the shell's directories.
  if (upper == "PWD" || upper == "OLDPWD") return false;
  std::size_t start = 0;
  while (start <= upper.size()) {
    std::size_t end = upper.find_first_of("_-.", start);
    if (end == std::string::npos) end = upper.size();
    const std::string_view part = std::string_view(upper).substr(start, end - start);
    for (std::string_view word : {"PASS", "PWD", "PW", "COOKIE", "SALT", "PASSPHRASE", "CREDENTIAL",
                                  "CREDENTIALS", "CREDS"}) {
      if (part == word) return true;
    }
    start = end + 1;
  }
  return false;
}

void Redactor::AddValue(std::string rule, std::string value) {
  const std::unique_lock<std::shared_mutex> w(*data_mu_);
  AddValueLocked(std::move(rule), std::move(value));
}

void Redactor::AddSecretLines(const SecretLines& lines) {
  const std::unique_lock<std::shared_mutex> w(*data_mu_);
  lines_ = lines;
}

std::size_t Redactor::credentials() const {
  const std::shared_lock<std::shared_mutex> r(*data_mu_);
  return credential_count_;
}

void Redactor::AddValueLocked(std::string rule, std::string value) {
  if (value.size() < kMinExactValue) return;
  for (const auto& existing : values_) {
    if (existing.second == value) return;
  }
  values_.emplace_back(std::move(rule), std::move(value));
  std::stable_sort(values_.begin(), values_.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
}

namespace {

std::string Base64Of(std::string_view in, bool url) {
  static constexpr char kStd[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static constexpr char kUrl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const char* table = url ? kUrl : kStd;
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(table[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(table[(acc << (6 - bits)) & 63]);
  return out;  // unpadded: a prefix of the padded form
}

}  // namespace

void Redactor::AddCredential(std::string_view value) {
  if (value.size() < 8) return;
  const std::unique_lock<std::shared_mutex> w(*data_mu_);
  ++credential_count_;
  std::vector<std::string> forms = {std::string(value)};
  static constexpr char kLowerHex[] = "0123456789abcdef", kUpperHex[] = "0123456789ABCDEF";
  std::string lower, upper, url, json;
  for (unsigned char c : value) {
    lower += kLowerHex[c >> 4];
    lower += kLowerHex[c & 15];
    upper += kUpperHex[c >> 4];
    upper += kUpperHex[c & 15];
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      url += static_cast<char>(c);
    } else {
      url += '%';
      url += kUpperHex[c >> 4];
      url += kUpperHex[c & 15];
    }
    if (c == '"' || c == '\\') json += '\\';
    if (c == '\n') {
      json += "\\n";
    } else {
      json += static_cast<char>(c);
    }
  }
  forms.push_back(std::move(lower));
  forms.push_back(std::move(upper));
  forms.push_back(std::move(url));
  forms.push_back(std::move(json));
  // Inside a longer base64 text the value starts at one of three bit offsets: the characters
  // that only its own bytes decide are the same wherever it lies (k filler bytes before it;
  // the first ceil(8k/6) characters and the last partial one depend on its neighbours).
  for (bool url_safe : {false, true}) {
    for (std::size_t k = 0; k < 3; ++k) {
      const std::string enc = Base64Of(std::string(k, '\0') + std::string(value), url_safe);
      const std::size_t first = (8 * k + 5) / 6;
      const std::size_t last = 8 * (k + value.size()) / 6;  // one past the last whole character
      if (last > first) forms.push_back(enc.substr(first, last - first));
      if (k == 0) forms.push_back(enc);  // standalone: with its partial last character
    }
  }
  for (std::string& f : forms) {
    if (f.size() >= SecretLines::kMinLine) {
      credentials_.Add(f);
    } else {
      AddValueLocked("credential", std::move(f));
    }
  }
}

namespace {

std::string Hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string KnowledgeEntry(const SecretLines::Entry& e) {
  return std::to_string(e.length) + ":" + Hex16(e.prefix) + ":" + Hex16(e.hash);
}

bool ParseHex16(std::string_view s, std::uint64_t& v) {
  if (s.size() != 16) return false;
  v = 0;
  for (char c : s) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<unsigned>(d);
  }
  return true;
}

// "LEN:PREFIX:HASH" (Knowledge's form); false when it is not one.
bool ParseKnowledgeEntry(std::string_view s, SecretLines::Entry& e) {
  const std::size_t a = s.find(':');
  const std::size_t b = a == npos_sv ? npos_sv : s.find(':', a + 1);
  if (a == npos_sv || b == npos_sv || a == 0 || a > 9) return false;
  std::uint32_t len = 0;
  for (char c : s.substr(0, a)) {
    if (c < '0' || c > '9') return false;
    len = len * 10 + static_cast<std::uint32_t>(c - '0');
  }
  e.length = len;
  return len >= Redactor::kMinExactValue && ParseHex16(s.substr(a + 1, b - a - 1), e.prefix) &&
         ParseHex16(s.substr(b + 1), e.hash);
}

}  // namespace

struct Redactor::Learned {
  std::shared_mutex mu;
  SecretLines lines;
  std::atomic<std::size_t> count{0};
  // The scan's gate: kOpen, kHeld or kFailed; waiters sleep on gate_cv.
  enum Gate : int { kOpen = 0, kHeld = 1, kFailed = 2 };
  std::atomic<int> gate{kOpen};
  std::mutex gate_mu;
  std::condition_variable gate_cv;
};

std::shared_ptr<Redactor::Learned> Redactor::NewLearned() { return std::make_shared<Learned>(); }

void Redactor::Learn(const std::vector<std::string>& lines) const {
  if (lines.empty()) return;
  const std::unique_lock<std::shared_mutex> w(learned_->mu);
  for (const auto& line : lines) learned_->lines.Add(line);
  learned_->count.store(learned_->lines.size(), std::memory_order_release);
}

std::size_t Redactor::learned() const { return learned_->count.load(std::memory_order_acquire); }

void Redactor::Hold() const {
  const std::lock_guard<std::mutex> g(learned_->gate_mu);
  int open = Learned::kOpen;
  learned_->gate.compare_exchange_strong(open, Learned::kHeld);
}

void Redactor::Release(const SecretLines& lines) const {
  {
    const std::unique_lock<std::shared_mutex> w(learned_->mu);
    for (const auto& e : lines.Entries()) learned_->lines.Add(e);
    learned_->count.store(learned_->lines.size(), std::memory_order_release);
  }
  const std::lock_guard<std::mutex> g(learned_->gate_mu);
  int held = Learned::kHeld;
  learned_->gate.compare_exchange_strong(held, Learned::kOpen);
  learned_->gate_cv.notify_all();
}

void Redactor::ReleaseFailed() const {
  const std::lock_guard<std::mutex> g(learned_->gate_mu);
  learned_->gate.store(Learned::kFailed);
  learned_->gate_cv.notify_all();
}

bool Redactor::held() const { return learned_->gate.load() == Learned::kHeld; }

bool Redactor::AwaitGate() const {
  int g = learned_->gate.load(std::memory_order_acquire);
  if (g == Learned::kHeld) {
    std::unique_lock<std::mutex> lock(learned_->gate_mu);
    learned_->gate_cv.wait(lock, [&] { return learned_->gate.load() != Learned::kHeld; });
    g = learned_->gate.load();
  }
  return g != Learned::kFailed;
}

template <typename F>
void Redactor::ForEachLearned(std::string_view text, F&& f) const {
  if (learned_->count.load(std::memory_order_acquire) == 0) return;
  const std::shared_lock<std::shared_mutex> r(learned_->mu);
  learned_->lines.ForEach(text, f);
}

Json Redactor::Knowledge() const {
  (void)AwaitGate();  // the scan's lines are part of it (a failed scan adds none)
  const std::shared_lock<std::shared_mutex> data(*data_mu_);
  std::map<std::string, std::set<std::string>> by_rule;
  for (const auto& [rule, value] : values_)
    by_rule[rule].insert(KnowledgeEntry(SecretLines::Hash(value)));
  for (const auto& e : lines_.Entries()) by_rule["secret_file"].insert(KnowledgeEntry(e));
  {
    const std::shared_lock<std::shared_mutex> r(learned_->mu);
    for (const auto& e : learned_->lines.Entries())
      by_rule["secret_file"].insert(KnowledgeEntry(e));
  }
  for (const auto& e : credentials_.Entries()) by_rule["credential"].insert(KnowledgeEntry(e));
  for (const auto& [rule, lines] : hashed_) {
    for (const auto& e : lines.Entries()) by_rule[rule].insert(KnowledgeEntry(e));
  }
  for (const auto& [len, set] : short_hashed_) {
    for (const auto& [h, rule] : set) {
      by_rule[rule].insert(KnowledgeEntry(SecretLines::Entry{0, h, len}));
    }
  }
  Json hashes = Json::object();
  for (const auto& [rule, entries] : by_rule) hashes[rule] = entries;
  return Json{{"version", 1},
              {"rules_sha256", rules_ ? Json(rules_->digest()) : Json(nullptr)},
              {"hashes", std::move(hashes)}};
}

std::size_t Redactor::KnowledgeSize() const {
  std::size_t n = 0;
  for (const auto& [rule, entries] : Knowledge()["hashes"].items()) n += entries.size();
  return n;
}

Status Redactor::AddKnowledge(const Json& k) {
  if (!k.is_object() || k.value("version", 0) != 1 || !k.contains("hashes") ||
      !k["hashes"].is_object()) {
    return Fail(Code::kInvalidInput, "not a redaction knowledge object of version 1");
  }
  std::vector<std::pair<std::string, SecretLines::Entry>> parsed;
  for (const auto& [rule, entries] : k["hashes"].items()) {
    if (rule.empty() || rule.size() > 64 || !entries.is_array()) {
      return Fail(Code::kInvalidInput, "knowledge: a rule's hashes must be an array");
    }
    for (const auto& e : entries) {
      SecretLines::Entry entry;
      if (!e.is_string() || !ParseKnowledgeEntry(e.get<std::string>(), entry)) {
        return Fail(Code::kInvalidInput, "knowledge: malformed hash under " + rule);
      }
      parsed.emplace_back(rule, entry);
    }
  }
  const std::unique_lock<std::shared_mutex> w(*data_mu_);
  for (const auto& [rule, e] : parsed) {
    if (e.length >= SecretLines::kMinLine) {
      auto it = hashed_.find(rule);
      if (it == hashed_.end()) it = hashed_.emplace(rule, SecretLines()).first;
      it->second.Add(e);
    } else {
      short_hashed_[e.length].emplace(e.hash, rule);
    }
  }
  return {};
}

// The values known only by hash, each occurrence (overlaps are settled by the caller).
void Redactor::FindHashed(std::string_view s, std::vector<Span>& out) const {
  for (const auto& [rule, lines] : hashed_) {
    lines.ForEach(s, [&](std::size_t b, std::size_t e) { out.push_back(Span{b, e, b, e, rule}); });
  }
  for (const auto& [len, set] : short_hashed_) {
    for (std::size_t i = 0; i + len <= s.size(); ++i) {
      if (auto it = set.find(SecretLineHash(s.substr(i, len))); it != set.end()) {
        out.push_back(Span{i, i + len, i, i + len, it->second});
      }
    }
  }
}

void Redactor::AddSecretEnvironment(char** envp) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    if (IsSecretName(entry.substr(0, eq))) AddValue("env", std::string(entry.substr(eq + 1)));
  }
}

namespace {

// 1 upper, 2 lower, 4 digit, 8 + / - _; 0: not a token (base64, base64url) character.
constexpr auto kTokenClass = [] {
  std::array<unsigned char, 256> t{};
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = 1;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = 2;
  for (int c = '0'; c <= '9'; ++c) t[c] = 4;
  for (unsigned char c : std::string_view("+/-_")) t[c] = 8;
  return t;
}();
constexpr std::size_t kMinRun = 20;    // a run of token characters a keyword-less rule looks at
constexpr std::size_t kRunReach = 96;  // ... and this far past it (a token's later parts)

constexpr auto kLower = [] {
  std::array<unsigned char, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[c] = static_cast<unsigned char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return t;
}();

// Whether a hidden part is a YAML block scalar's indicator: "|" or ">", then "-", "+" or an
// indentation digit.
bool IsBlockIndicator(std::string_view h) {
  if (h.empty() || (h[0] != '|' && h[0] != '>') || h.size() > 3) return false;
  return std::all_of(h.begin() + 1, h.end(),
                     [](char c) { return c == '-' || c == '+' || (c >= '1' && c <= '9'); });
}

// A hidden YAML block indicator ("|", ">-", "|2+") at [b, e) stands for the block scalar under
// it: the lines after its own that are blank or indented deeper than the key's line. Returns
// the block's text from its first to its last non-blank character, or {npos, npos} when the
// indicator does not end its line or no block follows.
std::pair<std::size_t, std::size_t> YamlBlock(std::string_view s, std::size_t b, std::size_t e) {
  constexpr std::pair<std::size_t, std::size_t> none{npos_sv, npos_sv};
  std::size_t i = e;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  if (i < s.size() && s[i] == '#') i = std::min(s.size(), s.find('\n', i));
  if (i < s.size() && s[i] == '\r') ++i;
  if (i >= s.size() || s[i] != '\n') return none;
  std::size_t line = b;
  while (line > 0 && s[line - 1] != '\n') --line;
  std::size_t key_indent = 0;
  while (line + key_indent < b && (s[line + key_indent] == ' ' || s[line + key_indent] == '\t'))
    ++key_indent;
  std::size_t first = npos_sv, last = npos_sv;
  for (std::size_t l = i + 1; l < s.size();) {
    std::size_t eol = s.find('\n', l);
    if (eol == npos_sv) eol = s.size();
    std::size_t k = l;
    while (k < eol && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) ++k;
    if (k < eol) {  // not blank
      if (k - l <= key_indent) break;
      if (first == npos_sv) first = k;
      last = eol;
      while (last > k && (s[last - 1] == '\r' || s[last - 1] == ' ' || s[last - 1] == '\t')) --last;
    }
    l = eol + 1;
  }
  if (first == npos_sv) return none;
  return {first, last};
}

// Whether a rule's allow patterns or stopwords say its hidden part is not a secret.
bool Allowed(const RedactRule& rule, const RedactRules::Impl::Programs& programs,
             std::string_view hidden) {
  const re2::StringPiece h(hidden.data(), hidden.size());
  for (const auto& a : programs.allow) {
    if (RE2::PartialMatch(h, *a)) return true;
  }
  if (rule.stopwords.empty()) return false;
  std::string lower(hidden);
  for (char& c : lower) c = static_cast<char>(kLower[static_cast<unsigned char>(c)]);
  return std::any_of(rule.stopwords.begin(), rule.stopwords.end(),
                     [&](const std::string& w) { return lower.find(w) != std::string::npos; });
}

// One rule's pattern over [from, to) of s (s is the context for ^, $ and \b).
void MatchRule(const RedactRules::Impl& im, std::size_t r, std::string_view s, std::size_t from,
               std::size_t to, std::vector<Redactor::Span>& out) {
  const RedactRule& rule = im.rules[r];
  const RedactRules::Impl::Programs& programs = im.Get(r);
  const RE2& re = *programs.pattern;
  const re2::StringPiece text(s.data(), s.size());
  std::array<re2::StringPiece, 10> groups;
  // Only a set recorded as checked is compiled here first; should its record have lied (a
  // pattern that does not compile, or lacks the group), the rule hides all it was run over:
  // fail closed.
  if (!re.ok() || rule.group < -1 || rule.group > re.NumberOfCapturingGroups() ||
      (programs.ignore && !programs.ignore->ok()) ||
      std::any_of(programs.allow.begin(), programs.allow.end(),
                  [](const auto& a) { return !a->ok(); })) {
    out.push_back(Redactor::Span{from, to, from, to, rule.id});
    return;
  }
  const int ngroups = std::min(static_cast<int>(groups.size()),
                               (rule.group < 0 ? re.NumberOfCapturingGroups() : rule.group) + 1);
  std::size_t pos = from;
  while (pos < to && re.Match(text, pos, to, RE2::UNANCHORED, groups.data(), ngroups)) {
    const re2::StringPiece m = groups[0];
    const std::size_t mb = static_cast<std::size_t>(m.data() - s.data());
    const std::size_t me = mb + m.size();
    pos = std::max(me, mb + 1);
    re2::StringPiece h = groups[static_cast<std::size_t>(std::max(rule.group, 0))];
    for (int g = 1; rule.group < 0 && g < ngroups; ++g) {
      if (!groups[static_cast<std::size_t>(g)].empty()) {
        h = groups[static_cast<std::size_t>(g)];
        break;
      }
    }
    if (h.data() == nullptr || h.empty()) continue;
    std::size_t span_end = me;
    if (IsBlockIndicator(std::string_view(h.data(), h.size()))) {  // its block is hidden
      const std::size_t ib = static_cast<std::size_t>(h.data() - s.data());
      const auto [bb, be] = YamlBlock(s, ib, ib + h.size());
      if (bb == npos_sv) continue;
      h = re2::StringPiece(s.data() + bb, be - bb);
      span_end = std::max(span_end, be);
    }
    const std::string_view hidden(h.data(), h.size());
    if (hidden.size() < rule.min_length) continue;
    if ((ClassMask(hidden) & im.require_mask[r]) != im.require_mask[r]) continue;
    if (rule.entropy > 0 && Entropy(hidden) < rule.entropy) continue;
    if (programs.ignore && RE2::FullMatch(h, *programs.ignore)) continue;
    if (Allowed(rule, programs, hidden)) continue;
    const std::size_t hb = static_cast<std::size_t>(h.data() - s.data());
    out.push_back(Redactor::Span{mb, span_end, hb, hb + hidden.size(), rule.id});
  }
}

}  // namespace

// RuleSpans' per-rule state, reused across calls on one thread: the windows' vectors keep
// their capacity, so a call allocates only when a rule gets more windows than ever before.
struct WindowScratch {
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> windows;
  std::vector<char> seen_whole;
  bool busy = false;
};

// Marks a scratch in use for one call and leaves it empty (capacity kept) for the next.
class ScratchHold {
 public:
  ScratchHold(WindowScratch& s, std::size_t nrules) : s_(s) {
    s_.busy = true;
    if (s_.windows.size() < nrules) s_.windows.resize(nrules);
    s_.seen_whole.assign(nrules, 0);
  }
  ~ScratchHold() {
    for (auto& w : s_.windows) w.clear();
    s_.busy = false;
  }
  ScratchHold(const ScratchHold&) = delete;
  ScratchHold& operator=(const ScratchHold&) = delete;

 private:
  WindowScratch& s_;
};

// The spans of every rule (or of rule `only`) in `s`, unordered, overlapping. A rule runs only
// where one of its keywords occurs: on that line (at most 4 KiB each side of the keyword), or,
// for a rule that spans lines, from that line to the end. Rules without keywords run on all.
void RuleSpans(const RedactRules::Impl& im, std::string_view s, std::vector<Redactor::Span>& out,
               std::size_t only, const Runs* runs) {
  if (s.empty()) return;
  if (only != npos_sv) {
    MatchRule(im, only, s, 0, s.size(), out);
    return;
  }
  const std::size_t n = s.size();
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  // Per rule: the windows still to run, merged as they are found (hits come in order), and
  // whether a keyword of a rule that spans lines was seen. Kept per thread and reused: a
  // stream is redacted piece by piece, and most pieces trigger few rules.
  constexpr std::size_t kReach = 4096;
  const std::size_t nrules = im.rules.size();
  thread_local WindowScratch scratch_of_thread;
  WindowScratch local;  // when this thread's is in use (a caller up the stack holds it)
  WindowScratch& scratch = scratch_of_thread.busy ? local : scratch_of_thread;
  const ScratchHold hold(scratch, nrules);
  auto& windows = scratch.windows;
  auto& seen_whole = scratch.seen_whole;
  const std::uint64_t* triples = im.triples.data();
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const std::size_t t = KeywordTriple(u[i], u[i + 1], i + 2 < n ? u[i + 2] : 0);
    if ((triples[t >> 6] >> (t & 63) & 1) == 0) continue;
    const std::size_t pair = KeywordPair(u[i], u[i + 1]);
    for (const auto& [kw, r] : im.by_pair[pair]) {
      if (n - i < kw.size()) continue;
      bool eq = true;
      for (std::size_t k = 2; k < kw.size() && eq; ++k)
        eq = kLower[u[i + k]] == static_cast<unsigned char>(kw[k]);
      if (!eq) continue;
      if (im.whole[r]) {
        seen_whole[r] = 1;
        continue;
      }
      auto& w = windows[r];
      const std::size_t hi = std::min(n, i + kw.size() + kReach);
      const void* nl_after = std::memchr(s.data() + i, '\n', hi - i);
      const std::size_t to =
          nl_after == nullptr
              ? hi
              : static_cast<std::size_t>(static_cast<const char*>(nl_after) - s.data());
      if (!w.empty() && i < w.back().second) {
        w.back().second = std::max(w.back().second, to);
        continue;
      }
      const std::size_t lo = i > kReach ? i - kReach : 0;
      const void* nl_before = ::memrchr(s.data() + lo, '\n', i - lo);
      const std::size_t from =
          nl_before == nullptr
              ? lo
              : static_cast<std::size_t>(static_cast<const char*>(nl_before) - s.data()) + 1;
      if (!w.empty() && from <= w.back().second) {
        w.back().second = std::max(w.back().second, to);
      } else {
        w.emplace_back(from, to);
      }
    }
  }
  for (std::size_t r = 0; r < im.rules.size(); ++r) {
    // A token_runs rule runs where a token is: from each run of kMinRun or more token
    // characters to kRunReach bytes past its end (runs given), else over the whole text. A run
    // that begins inside the window before it extends that window: each run lies whole in one
    // window, so a token is never cut at a window's edge (a window that started where the last
    // one ended missed every token that straddled it: two tokens within kRunReach bytes).
    if (im.rules[r].token_runs && im.rules[r].keywords.empty() && runs != nullptr) {
      std::size_t from = 0, to = 0;
      for (const TokenRun& run : *runs) {
        if (to > from && run.begin <= to) {
          to = std::max(to, std::min(n, run.end + kRunReach));
          continue;
        }
        if (to > from) MatchRule(im, r, s, from, to, out);
        from = run.begin;
        to = std::min(n, run.end + kRunReach);
      }
      if (to > from) MatchRule(im, r, s, from, to, out);
      continue;
    }
    if (im.rules[r].keywords.empty() || seen_whole[r] != 0) {
      MatchRule(im, r, s, 0, n, out);
      continue;
    }
    for (const auto& [from, to] : windows[r]) MatchRule(im, r, s, from, to, out);
  }
}

void Redactor::FindRuleSpans(std::string_view s, std::vector<Span>& out) const {
  if (rules_) RuleSpans(rules_->impl(), s, out, npos_sv);
}

namespace {

// Adds to `out` (sorted by hidden start, disjoint) those of `spans` whose hidden ranges overlap
// nothing already there nor one taken before: the earliest start wins, then the longest, then
// the first listed. O(n log n).
void TakeDisjoint(std::vector<Redactor::Span>& spans, std::vector<Redactor::Span>& out) {
  std::stable_sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
    return a.hide_begin != b.hide_begin ? a.hide_begin < b.hide_begin : a.hide_end > b.hide_end;
  });
  const std::size_t existing = out.size();
  std::size_t j = 0;
  std::size_t last_end = 0;
  bool any_new = false;
  for (const auto& sp : spans) {
    if (any_new && sp.hide_begin < last_end) continue;
    while (j < existing && out[j].hide_end <= sp.hide_begin) ++j;
    if (j < existing && out[j].hide_begin < sp.hide_end) continue;
    out.push_back(sp);
    last_end = sp.hide_end;
    any_new = true;
  }
  if (existing > 0 && any_new) {
    std::inplace_merge(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(existing), out.end(),
                       [](const auto& a, const auto& b) { return a.hide_begin < b.hide_begin; });
  }
}

}  // namespace

namespace {

int B64Value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// Decodes a run of base64 (standard or URL-safe, padding dropped); "" when what it gives is
// not mostly printable text (a hash, a path, random bytes: nothing a rule reads).
std::string DecodeTextual(std::string_view run) {
  std::string out;
  out.reserve(run.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t printable = 0;
  for (unsigned char c : run) {
    const int v = B64Value(c);
    if (v < 0) break;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      const char b = static_cast<char>((acc >> bits) & 0xff);
      out.push_back(b);
      if ((b >= 0x20 && b < 0x7f) || b == '\n' || b == '\t' || b == '\r') ++printable;
    }
  }
  if (out.empty() || printable * 10 < out.size() * 9) return {};
  return out;
}

}  // namespace

// Runs of kMinRun or more token characters.
static void TokenRuns(std::string_view s, std::vector<TokenRun>& out) {
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    while (i < n && kTokenClass[u[i]] == 0) ++i;
    const std::size_t start = i;
    unsigned mask = 0;
    while (i < n && kTokenClass[u[i]] != 0) mask |= kTokenClass[u[i++]];
    if (i - start >= kMinRun) out.push_back({start, i, mask});
  }
}

bool Redactor::HoldsSecret(std::string_view decoded, int depth) const {
  std::vector<Span> inner;
  std::vector<TokenRun> runs;
  TokenRuns(decoded, runs);
  if (rules_) RuleSpans(rules_->impl(), decoded, inner, npos_sv, &runs);
  if (!inner.empty()) return true;
  bool hit = false;
  lines_.ForEach(decoded, [&](std::size_t, std::size_t) { hit = true; });
  if (!hit) ForEachLearned(decoded, [&](std::size_t, std::size_t) { hit = true; });
  if (!hit) credentials_.ForEach(decoded, [&](std::size_t, std::size_t) { hit = true; });
  for (std::size_t v = 0; !hit && v < values_.size(); ++v) {
    hit = decoded.find(values_[v].second) != std::string::npos;
  }
  if (!hit) {
    FindHashed(decoded, inner);
    hit = !inner.empty();
  }
  // Two levels: base64 of base64, hex of base64, base64 of hex.
  if (!hit && depth == 0 && !runs.empty()) {
    FindBase64(decoded, runs, inner, depth + 1);
    if (inner.empty()) FindHex(decoded, runs, inner, depth + 1);
    hit = !inner.empty();
  }
  return hit;
}

// Base64 of a secret (an "auth" value, an encoded token, a token echoed through base64): a run
// of base64 characters, at least kMinB64 long, of upper, lower and digits, that decodes to text
// holding a secret a rule or a secret line finds is hidden whole as [REDACTED:base64].
void Redactor::FindBase64(std::string_view s, const std::vector<TokenRun>& runs,
                          std::vector<Span>& out, int depth) const {
  constexpr std::size_t kMinB64 = 24;
  for (const TokenRun& run : runs) {
    if (run.end - run.begin < kMinB64 || (run.mask & 7) != 7) continue;
    std::size_t end = run.end;
    while (end < s.size() && end - run.end < 2 && s[end] == '=') ++end;
    const std::string decoded = DecodeTextual(s.substr(run.begin, run.end - run.begin));
    if (decoded.empty()) continue;
    if (HoldsSecret(decoded, depth)) out.push_back(Span{run.begin, end, run.begin, end, "base64"});
  }
}

// Hex of a secret (xxd -p, a hex dump of a buffer, a value printed as bytes): a run of 16 or
// more hex digits (after an optional 0x), of even length, that decodes to mostly
// printable text holding a secret is hidden whole as [REDACTED:hex]. A hash (sha256sum, a git
// commit) decodes to bytes that are not text and is left alone.
void Redactor::FindHex(std::string_view s, const std::vector<TokenRun>& runs,
                       std::vector<Span>& out, int depth) const {
  auto is_hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  };
  for (const TokenRun& run : runs) {
    if ((run.mask & 4) == 0) continue;  // text's hex has digits
    // Each stretch of hex digits in the run: a dump's line cut by a prefix ("+0x..." in a diff,
    // "-" or "/" before it) is one, as is a run that is hex from end to end.
    for (std::size_t at = run.begin; at < run.end;) {
      while (at < run.end && !is_hex(s[at])) ++at;
      const std::size_t b = at;
      while (at < run.end && is_hex(s[at])) ++at;
      FindHexIn(s, b, at, out, depth);
    }
  }
}

void Redactor::FindHexIn(std::string_view s, std::size_t b, std::size_t end, std::vector<Span>& out,
                         int depth) const {
  constexpr std::size_t kMinHex = 16;
  {
    // "0x": the 0 would start the stretch; a stretch that starts "0" before an x is the prefix.
    const std::size_t begin = b >= 2 && s[b - 1] == 'x' && s[b - 2] == '0' ? b - 2 : b;
    const std::size_t n = end - b;
    if (n < kMinHex || n % 2 != 0) return;
    const TokenRun run{begin, end, 0};
    std::string decoded;
    decoded.reserve(n / 2);
    std::size_t printable = 0;
    bool hex = true;
    for (std::size_t i = b; i < run.end && hex; i += 2) {
      int v[2];
      for (int k = 0; k < 2; ++k) {
        const unsigned char c = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
        v[k] = c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
      }
      hex = v[0] >= 0 && v[1] >= 0;
      const char byte = static_cast<char>(v[0] << 4 | v[1]);
      decoded.push_back(byte);
      if ((byte >= 0x20 && byte < 0x7f) || byte == '\n' || byte == '\t' || byte == '\r')
        ++printable;
    }
    if (!hex || printable * 10 < decoded.size() * 9) return;
    if (HoldsSecret(decoded, depth))
      out.push_back(Span{run.begin, run.end, run.begin, run.end, "hex"});
  }
}

namespace {

// Characters of a folded block: token characters (base64, both alphabets), '=' padding and the
// dots of a JWT.
inline bool IsFoldChar(unsigned char c) { return kTokenClass[c] != 0 || c == '.' || c == '='; }

// The length of the fold at s[i] (a line break and the next line's indentation, or JSON's
// escaped "\n" / "\r\n"), 0 when there is none.
std::size_t FoldAt(std::string_view s, std::size_t i) {
  std::size_t j = i;
  if (j < s.size() && s[j] == '\r') ++j;
  if (j < s.size() && s[j] == '\n') {
    ++j;
  } else if (s.substr(i, 4) == "\\r\\n") {
    j = i + 4;
  } else if (s.substr(i, 2) == "\\n") {
    j = i + 2;
  } else {
    return 0;
  }
  while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
  return j - i;
}

}  // namespace

void Redactor::FindFolded(std::string_view s, std::vector<Span>& out) const {
  constexpr std::size_t kMinPiece = 16;  // every piece of a block but its last
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::string joined;
  std::vector<std::size_t> folds;     // offsets in `joined` where a fold was
  std::vector<std::size_t> fold_src;  // ... and in `s`, where each fold began
  // The block from `i` (the start of a run of fold characters): its pieces and folds, and what
  // its joined text holds. Returns where it ends.
  auto block = [&](std::size_t i) {
    const std::size_t block_begin = i;
    joined.clear();
    folds.clear();
    fold_src.clear();
    std::size_t piece = 0;
    while (i < n) {
      if (IsFoldChar(u[i])) {
        joined.push_back(s[i++]);
        ++piece;
        continue;
      }
      if (s[i] == '\\' && i + 1 < n && s[i + 1] == '/') {  // JSON's escaped "/"
        joined.push_back('/');
        i += 2;
        ++piece;
        continue;
      }
      const std::size_t fold = piece >= kMinPiece ? FoldAt(s, i) : 0;
      if (fold == 0 || i + fold >= n || !IsFoldChar(u[i + fold])) break;
      folds.push_back(joined.size());
      fold_src.push_back(i);
      i += fold;
      piece = 0;
    }
    if (folds.empty()) return i;
    // Wrapped text has one width: the pieces between the first and the last are equally long,
    // and the first no longer (a listing of names, one a line, is not a block). A JWT may be
    // folded anywhere (at its dots).
    bool wrapped = folds.size() < 2 || folds[0] <= folds[1] - folds[0];
    for (std::size_t f = 2; wrapped && f < folds.size(); ++f)
      wrapped = folds[f] - folds[f - 1] == folds[1] - folds[0];
    if (!wrapped) {
      // A piece shorter than the width ends a wrapped block (its tail): a line after it that
      // starts with base64's characters is another text's (a key body, then a token). The
      // block is its pieces up to that one; the outer scan goes on from there.
      std::size_t k = 1;
      if (folds[0] <= folds[1] - folds[0]) {
        k = 2;
        while (k < folds.size() && folds[k] - folds[k - 1] == folds[1] - folds[0]) ++k;
      }
      const std::size_t width = k == 1 ? folds[0] : folds[1] - folds[0];
      if (k < folds.size() && folds[k] - folds[k - 1] < width) {
        i = fold_src[k];
        joined.resize(folds[k]);
        folds.resize(k);
        fold_src.resize(k);
        wrapped = true;
      }
    }
    if (!wrapped && joined.find("eyJ") == std::string::npos) return i;
    std::vector<Span> inner;
    std::vector<TokenRun> runs;
    TokenRuns(joined, runs);
    if (rules_) RuleSpans(rules_->impl(), joined, inner, npos_sv, &runs);
    auto crosses = [&](std::size_t b, std::size_t e) {
      return std::any_of(folds.begin(), folds.end(), [&](std::size_t f) { return b < f && f < e; });
    };
    std::string_view rule;
    for (const Span& sp : inner) {
      if (crosses(sp.hide_begin, sp.hide_end)) rule = sp.rule;
    }
    auto take = [&](std::string_view id) {
      return [&, id](std::size_t b, std::size_t e) {
        if (rule.empty() && crosses(b, e)) rule = id;
      };
    };
    if (rule.empty()) lines_.ForEach(joined, take("secret_file"));
    if (rule.empty()) ForEachLearned(joined, take("secret_file"));
    if (rule.empty()) credentials_.ForEach(joined, take("credential"));
    // The last piece joins the block whatever its length (the tail of a wrapped body).
    if (!rule.empty()) out.push_back(Span{block_begin, i, block_begin, i, rule});
    return i;
  };
  // Only where a fold can be: a line break or JSON's "\n" after kMinPiece fold characters
  // (found by memchr; almost every line of ordinary text ends otherwise).
  std::size_t done = 0;                        // the text before this is scanned
  auto find = [&](char c, std::size_t from) {  // n: none
    const void* f = std::memchr(s.data() + from, c, n - from);
    return f == nullptr ? n : static_cast<std::size_t>(static_cast<const char*>(f) - s.data());
  };
  std::size_t next_nl = find('\n', 0), next_bs = find('\\', 0);
  for (std::size_t p = 0; p < n;) {
    if (next_nl < p) next_nl = find('\n', p);
    if (next_bs < p) next_bs = find('\\', p);
    const std::size_t at = std::min(next_nl, next_bs);
    if (at >= n) break;
    p = at + 1;
    if (s[at] == '\\' && (at + 1 >= n || (s[at + 1] != 'n' && s[at + 1] != 'r'))) continue;
    std::size_t fold_at = at > 0 && s[at] == '\n' && s[at - 1] == '\r' ? at - 1 : at;
    if (fold_at < done + kMinPiece || !IsFoldChar(u[fold_at - 1])) continue;
    // A block goes on after the fold (most lines are followed by one that starts otherwise).
    const std::size_t fold = FoldAt(s, fold_at);
    if (fold == 0 || fold_at + fold >= n || !IsFoldChar(u[fold_at + fold])) continue;
    // Back over the piece before it ("\/" counts as one character), to the block's start.
    std::size_t k = fold_at, count = 0;
    unsigned mask = 0;
    while (k > done) {
      if (IsFoldChar(u[k - 1])) {
        mask |= kTokenClass[u[--k]];
        ++count;
      } else if (u[k - 1] == '\\' && u[k] == '/' && count > 0) {
        --k;
      } else {
        break;
      }
    }
    // A piece of base64 or of a JWT holds upper case, lower case and digits; a path, a word or
    // a version at a line's end (most lines that end in these characters) does not.
    if (count < kMinPiece || (mask & 7) != 7) continue;
    if (!IsFoldChar(u[k])) ++k;  // not a block start: a "\" before "/"
    done = block(k);
    p = std::max(p, done);
  }
}

std::vector<Redactor::Span> Redactor::FindShapes(std::string_view s) const {
  std::vector<Span> shapes;
  FindRuleSpans(s, shapes);
  std::vector<Span> out;
  TakeDisjoint(shapes, out);
  return out;
}

std::vector<Redactor::Span> Redactor::Find(std::string_view s) const {
  if (!AwaitGate()) {
    if (s.empty()) return {};
    return {Span{0, s.size(), 0, s.size(), "secret_scan_failed"}};
  }
  const std::shared_lock<std::shared_mutex> data(*data_mu_);
  std::vector<Span> first;         // exact values and secret lines: they take precedence
  std::vector<Span> shapes_early;  // folded blocks a rule found
  for (const auto& [rule, value] : values_) {
    for (std::size_t pos = s.find(value); pos != std::string_view::npos;
         pos = s.find(value, pos + value.size())) {
      first.push_back(Span{pos, pos + value.size(), pos, pos + value.size(), rule});
    }
  }
  lines_.ForEach(s, [&](std::size_t b, std::size_t e) {
    first.push_back(Span{b, e, b, e, "secret_file"});
  });
  ForEachLearned(s, [&](std::size_t b, std::size_t e) {
    first.push_back(Span{b, e, b, e, "secret_file"});
  });
  credentials_.ForEach(s, [&](std::size_t b, std::size_t e) {
    first.push_back(Span{b, e, b, e, "credential"});
  });
  FindHashed(s, first);
  // A known line or credential folded over lines is known too: its block takes precedence
  // over the pieces of it that lie whole inside one line.
  std::vector<Span> folded;
  FindFolded(s, folded);
  for (const Span& sp : folded) {
    (sp.rule == "secret_file" || sp.rule == "credential" ? first : shapes_early).push_back(sp);
  }
  std::vector<Span> out = std::move(first);
  std::vector<Span> shapes = std::move(shapes_early);
  std::vector<TokenRun> token_runs;
  TokenRuns(s, token_runs);
  if (rules_) RuleSpans(rules_->impl(), s, shapes, npos_sv, &token_runs);
  FindBase64(s, token_runs, shapes);
  FindHex(s, token_runs, shapes);
  if (out.empty() && shapes.empty()) return out;
  // Every hidden range stays hidden: where spans overlap, the hidden range is their union (a
  // known line inside a key block re-wrapped at another width hid that line only, and the rest
  // of the block was dropped as overlapping it; so was the part of a later shape past an earlier
  // one's end). The union keeps the marker of its first span in precedence: exact values and
  // secret lines before the rules' shapes, then the earliest, then the longest.
  std::vector<std::pair<Span, std::size_t>> all;  // span, precedence
  all.reserve(out.size() + shapes.size());
  std::stable_sort(out.begin(), out.end(), [](const Span& a, const Span& b) {
    return a.hide_begin != b.hide_begin ? a.hide_begin < b.hide_begin : a.hide_end > b.hide_end;
  });
  // Among known values: the exact ones, then the user's credentials, then secret-file lines
  // (a credential a workspace file also holds keeps its name).
  for (const Span& sp : out)
    all.push_back({sp, sp.rule == "secret_file" ? 2u : sp.rule == "credential" ? 1u : 0u});
  std::stable_sort(shapes.begin(), shapes.end(), [](const Span& a, const Span& b) {
    return a.hide_begin != b.hide_begin ? a.hide_begin < b.hide_begin : a.hide_end > b.hide_end;
  });
  for (const Span& sp : shapes) all.push_back({sp, 3});
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first.hide_begin != b.first.hide_begin ? a.first.hide_begin < b.first.hide_begin
                                                    : a.second < b.second;
  });
  std::vector<Span> merged;
  std::size_t rank = 0;
  for (const auto& [sp, precedence] : all) {
    if (sp.hide_end <= sp.hide_begin) continue;
    if (merged.empty() || sp.hide_begin >= merged.back().hide_end) {
      merged.push_back(sp);
      rank = precedence;
      continue;
    }
    Span& m = merged.back();
    // Hidden already (a shape that finds a known value again): it changes nothing, not even
    // where a cut may fall.
    if (sp.hide_end <= m.hide_end) continue;
    m.begin = std::min(m.begin, sp.begin);
    m.end = std::max(m.end, sp.end);
    m.hide_end = std::max(m.hide_end, sp.hide_end);
    if (precedence < rank) {
      m.rule = sp.rule;
      rank = precedence;
    }
  }
  return merged;
}

std::size_t Redactor::Redact(std::string& text, std::map<std::string, std::size_t>* by_rule) const {
  const std::vector<Span> spans = Find(text);
  if (spans.empty()) return 0;
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;
  for (const Span& sp : spans) {
    out.append(text, copied, sp.hide_begin - copied);
    out += "[REDACTED:";
    out += sp.rule;
    out += ']';
    copied = sp.hide_end;
    if (by_rule != nullptr) ++(*by_rule)[std::string(sp.rule)];
  }
  out.append(text, copied, std::string::npos);
  text = std::move(out);
  return spans.size();
}

std::size_t Redactor::CutBefore(std::string_view text, std::size_t cut) const {
  if (cut >= text.size()) return cut;
  const std::size_t lo = cut > kWindow ? cut - kWindow : 0;
  const std::size_t hi = std::min(text.size(), cut + kWindow);
  std::size_t best = cut;
  for (const Span& sp : Find(text.substr(lo, hi - lo))) {
    // The whole match, context included (the '@' after a URL password, the key before a
    // value): a cut inside it would leave the secret unrecognisable on one side.
    if (lo + sp.begin < cut && lo + sp.end > cut) best = std::min(best, lo + sp.begin);
  }
  return best;
}

std::size_t Redactor::StartAfter(std::string_view text, std::size_t start) const {
  if (start == 0 || start >= text.size()) return start;
  const std::size_t lo = start > kWindow ? start - kWindow : 0;
  const std::size_t hi = std::min(text.size(), start + kWindow);
  std::size_t moved = start;
  for (const Span& sp : Find(text.substr(lo, hi - lo))) {
    if (lo + sp.begin < start && lo + sp.end > start) moved = std::max(moved, lo + sp.end);
  }
  start = moved;
  // The end of a private key block whose BEGIN line lies before the window: the window shows
  // base64 lines, then the END line. All of it up to the END line goes.
  std::string_view ahead = text.substr(start, hi > start ? hi - start : 0);
  std::size_t end = ahead.find("-----END ");
  if (end != std::string_view::npos && ahead.substr(0, end).find("-----BEGIN ") == npos_sv) {
    std::size_t dashes = ahead.find("-----", end + 9);
    std::size_t eol = ahead.find('\n', end);
    std::string_view line = ahead.substr(end, std::min(eol, ahead.size()) - end);
    if (dashes != std::string_view::npos && line.find("PRIVATE KEY") != npos_sv) {
      start += dashes + 5;
    }
  }
  return start;
}

std::size_t Redactor::LineCut(std::string_view line, std::size_t max_chars) const {
  std::size_t chars = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xc0) != 0x80 && chars++ == max_chars) {
      return CutBefore(line, i);
    }
  }
  return std::string_view::npos;
}

std::size_t Redactor::RedactJson(Json& j, std::map<std::string, std::size_t>* by_rule) const {
  std::size_t count = 0;
  if (j.is_string()) {
    count += Redact(j.get_ref<std::string&>(), by_rule);
  } else if (j.is_array()) {
    // A private key block split over consecutive strings (lines of a file) is redacted whole:
    // after an unterminated BEGIN, every string up to the END line is redacted.
    bool in_key_block = false;
    for (auto& item : j) {
      if (in_key_block && item.is_string()) {
        std::string& s = item.get_ref<std::string&>();
        bool ends = s.find("-----END ") != std::string::npos;
        s = "[REDACTED:private_key]";
        ++count;
        if (by_rule != nullptr) ++(*by_rule)["private_key"];
        in_key_block = !ends;
        continue;
      }
      if (item.is_string()) {
        const std::string& before = item.get_ref<const std::string&>();
        std::size_t begin = before.find("-----BEGIN ");
        in_key_block = begin != std::string::npos &&
                       before.find("PRIVATE KEY", begin) != std::string::npos &&
                       before.find("-----END ", begin) == std::string::npos;
      }
      count += RedactJson(item, by_rule);
    }
  } else if (j.is_object()) {
    // Keys are text the agent or a server chose: a secret used as a key is redacted too.
    std::vector<std::pair<std::string, std::string>> renames;  // old key, redacted key
    for (auto it = j.begin(); it != j.end(); ++it) {
      count += RedactJson(it.value(), by_rule);
      std::string key = it.key();
      if (std::size_t n = Redact(key, by_rule); n > 0) {
        count += n;
        renames.emplace_back(it.key(), std::move(key));
      }
    }
    for (auto& [old_key, key] : renames) {
      Json value = std::move(j[old_key]);
      j.erase(old_key);
      // Two secrets that redact alike must not overwrite each other: nothing is lost silently.
      std::string name = key;
      for (int n = 2; j.contains(name); ++n) name = key + "#" + std::to_string(n);
      j[name] = std::move(value);
    }
  }
  return count;
}

}  // namespace cordon
