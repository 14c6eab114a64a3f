// Redactor: deterministic removal of secrets from tool output and audit records.
//
// Three sources of secrets, in this order of precedence where they overlap:
//  1. exact values (the environment's secret-looking variables, [redact] values, keys);
//  2. lines known to be secret because a workspace file holds them (SecretLines: a private
//     key's body lines, a .env file's secret values), found wherever they occur, kept only as
//     hashes;
//  3. token shapes: the rules of the policy's [[redact.rules]] (policies.d/10-secrets.toml),
//     RE2 patterns behind a keyword prefilter.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/text.h"

namespace cordon {

struct TokenRun;  // a run of token characters (core/redact.cc)

// One detector, as a policy file writes it. Loaded by policy/, compiled here.
struct RedactRule {
  std::string id;       // the marker's name: [REDACTED:<id>]; [a-z0-9_.:-]+
  std::string pattern;  // RE2, matched over bytes (Latin-1): '.' and classes take any byte
  // Lower-case literals, one of which must occur (any case) before the pattern is tried. Empty:
  // the pattern runs on every text (slow: the loader's caller reports it).
  std::vector<std::string> keywords;
  // The capture group that is hidden; 0: the whole match; -1: the first group that matched
  // something, else the whole match (a gitleaks rule without secretGroup).
  int group = 0;
  double entropy = 0;          // minimum Shannon entropy (bits per byte) of the hidden part
  std::size_t min_length = 0;  // minimum length of the hidden part
  // Character classes the hidden part must hold each of: "upper", "lower", "digit".
  std::vector<std::string> require;
  std::string ignore;  // RE2: a hidden part it matches whole is not a secret (a variable name)
  // RE2 patterns: a hidden part one of them finds (anywhere in it) is not a secret (a gitleaks
  // allowlist's regexes).
  std::vector<std::string> allow;
  // Words: a hidden part that holds one (any case) is not a secret (a gitleaks allowlist's
  // stopwords). Lower-cased by the compiler.
  std::vector<std::string> stopwords;
  // A rule without keywords runs over the whole text, unless `token_runs`: then only from each
  // run of 20 or more token characters (letters, digits, + / - _) to 96 bytes past it; the
  // match must start in such a run (a token shape with no literal to look for).
  bool token_runs = false;
  // Examples the compiler checks: each `match` must be found (and something hidden), no
  // `not_match` may be.
  std::vector<std::string> match, not_match;
  std::string where;  // file:line of the rule, for errors
};

// The secret-naming words ([redact] secret_words: password, token, api_key, ...) written into
// the rules that name them: "{secret_words}" in a pattern becomes an alternation of the words
// (each "_" in a word matching "_", "-", "." or nothing: api_key, api-key, apikey), and a
// keyword that holds "{secret_words}" becomes one keyword per spelling ("-{secret_words}":
// "-password", "-api-key", ...). A word must be [a-z0-9_]+; a rule that
// names the list while it is empty is an error naming the rule. Called before Compile.
Status ExpandSecretWords(std::vector<RedactRule>& rules, const std::vector<std::string>& words);

// The compiled rule set, shared (immutable) by every redactor of a session.
class RedactRules {
 public:
  ~RedactRules();
  // Compiles and checks every rule: a bad pattern, a group the pattern lacks, an example that
  // does not do what the author meant, or an id used twice is an error naming the rule's where.
  // With `checked_dir` (cordon's state directory's redact-checked/), a set that passed is
  // recorded there, and a set recorded as passed by this same binary is not checked again: its
  // patterns are compiled one by one on first use, and its examples are not run.
  static Result<std::shared_ptr<const RedactRules>> Compile(std::vector<RedactRule> rules,
                                                            const std::string& checked_dir = "");
  // The checks Compile makes of one rule on its own (its id's alphabet, fields, and that its
  // patterns compile and have its group), without its examples: a loader that skips a bad rule
  // of a foreign rule file (policy/gitleaks.h) asks before it adds the rule.
  static Status Check(const RedactRule& rule);
  // Whether Compile found this set recorded as checked (and so skipped the checks).
  bool checked_before() const { return checked_before_; }
  // SHA-256 (hex) over every field of every rule but its file:line: two sets with the same
  // digest find the same shapes.
  const std::string& digest() const { return digest_; }
  std::size_t size() const;
  const std::vector<RedactRule>& rules() const;
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  RedactRules() = default;
  std::unique_ptr<Impl> impl_;
  bool checked_before_ = false;
  std::string digest_;
};

// Lines known to be secret, as hashes: a line of at least kMinLine bytes is found wherever it
// occurs in a text (contains, not equals), in one pass over the text.
class SecretLines {
 public:
  static constexpr std::size_t kMinLine = 12;
  struct Entry {
    std::uint64_t prefix = 0;  // hash of the first 8 bytes
    std::uint64_t hash = 0;    // hash of the whole line
    std::uint32_t length = 0;
    bool operator<(const Entry& o) const {
      return std::tie(prefix, length, hash) < std::tie(o.prefix, o.length, o.hash);
    }
    bool operator==(const Entry& o) const = default;
  };
  static Entry Hash(std::string_view line);
  void Add(const Entry& e);
  void Add(std::string_view line) {
    if (line.size() >= kMinLine) Add(Hash(line));
  }
  std::size_t size() const { return count_; }
  std::vector<Entry> Entries() const;  // sorted
  // Calls f(begin, end) for each occurrence, left to right, not overlapping.
  template <typename F>
  void ForEach(std::string_view text, F&& f) const;

 private:
  // --- failclosed: what one position of a text may cost. The lines that share an 8-byte
  // prefix are looked up by length: a hash of each distinct length, longest first. The agent
  // chooses lines (Redactor::Learn): thousands sharing a prefix, each of its own length, made
  // every position that starts with it hash them all (100 KB of output took 53.7 s). A prefix
  // keeps distinct lengths up to kBucketBytes in all (a longer line makes it so at once); past
  // that it is `overfull`, and a position with that prefix whose tracked lengths do not match
  // is hidden to the end of its line (at most its longest line): more is hidden, never less.
  static constexpr std::size_t kBucketBytes = 16384;
  struct Bucket {
    std::vector<std::uint32_t> lengths;  // distinct, longest first
    std::size_t bytes = 0;               // their sum
    std::uint32_t longest = 0;           // of every line with this prefix
    bool overfull = false;
  };
  static std::uint64_t Key(std::uint64_t prefix, std::uint32_t length, std::uint64_t hash) {
    return hash ^ (prefix * 0x9e3779b97f4a7c15ULL) ^ (std::uint64_t{length} << 40);
  }
  std::vector<std::uint64_t> bitmap_;  // 1 << kBits bits over the prefix hash
  std::unordered_map<std::uint64_t, Bucket> by_prefix_;
  std::unordered_set<std::uint64_t> full_;  // Key() of every line
  std::vector<Entry> entries_;              // every line, as added
  std::size_t count_ = 0;
  static constexpr unsigned kBits = 16;
};

class Redactor {
 public:
  // Values shorter than this are not redacted by exact match: a 2-character "secret" would
  // shred ordinary output. SECURITY.md says so.
  static constexpr std::size_t kMinExactValue = 6;
  // The carry-over window kept beyond each place where output is cut: the longest secret the
  // cut helpers promise to see whole (a PEM private key block runs to about 4 KiB).
  static constexpr std::size_t kWindow = 8192;

  // One secret found in a text: [begin, end) is all that its rule matched and must not be cut
  // in two; [hide_begin, hide_end) inside it becomes the marker.
  struct Span {
    std::size_t begin = 0, end = 0, hide_begin = 0, hide_end = 0;
    std::string_view rule;
  };

  Redactor() = default;
  explicit Redactor(std::shared_ptr<const RedactRules> rules) : rules_(std::move(rules)) {}
  void SetRules(std::shared_ptr<const RedactRules> rules) { rules_ = std::move(rules); }
  const RedactRules* rules() const { return rules_.get(); }

  // Adds exact values: each (rule, value) pair becomes "[REDACTED:rule]".
  void AddValue(std::string rule, std::string value);
  // Adds the values of environment variables whose names look secret
  // (*TOKEN*, *KEY*, *SECRET*, *PASSWORD*, *PASSWD*, case-insensitive).
  void AddSecretEnvironment(char** envp);
  static bool IsSecretName(std::string_view name);
  // Lines a secret file of the workspace holds: found as "[REDACTED:secret_file]".
  void AddSecretLines(const SecretLines& lines);
  // A value the user's credential stores hold (workspace/credential_stores.h), whatever its
  // shape: found as "[REDACTED:credential]", and so are its hex (either case), URL-encoded,
  // JSON-escaped and base64 forms (standard and URL-safe, at each of the three alignments it
  // can have inside a longer base64 text). A value under 8 bytes is ignored.
  void AddCredential(std::string_view value);
  std::size_t credentials() const;
  const SecretLines& secret_lines() const { return lines_; }
  // Lines learned during the session: the secret lines of a file the agent writes through the
  // file tools (workspace/secret_files.h SecretLinesOf), found as "[REDACTED:secret_file]" from
  // then on, wherever they occur (a line view of the file: read_file_range, grep -n, cat -n,
  // diff). Shared by the copies of this redactor; safe beside concurrent redaction; the set only
  // grows. Lines under SecretLines::kMinLine bytes are skipped.
  void Learn(const std::vector<std::string>& lines) const;
  std::size_t learned() const;

  // --- failclosed: the secret-file scan run beside the session (session/session.cc). Hold()
  // closes a gate that every copy of this redactor shares: from then on each call that reads
  // what the redactor knows (Find and all that uses it: Redact, RedactJson, the cuts;
  // Knowledge) waits until Release() adds the scan's lines, which are found as
  // "[REDACTED:secret_file]" as learned lines are. After ReleaseFailed() (the scan could not
  // complete) every text is hidden whole as "[REDACTED:secret_scan_failed]": nothing passes
  // that the scan might have known.
  void Hold() const;
  void Release(const SecretLines& lines) const;
  void ReleaseFailed() const;
  // Whether the gate is closed now (a call would wait).
  bool held() const;

  // What this redactor knows by value, as hashes only (never a secret's text): every exact
  // value, secret line and credential form under its rule, and the rules' digest:
  // {"version": 1, "rules_sha256": HEX|null, "hashes": {RULE: ["LEN:PREFIX:HASH", ...]}}
  // (hex, sorted). A later reader of what the session saw (audit diff) gives it to
  // AddKnowledge and hides what the session hid. The hashes are 64-bit and not keyed: whoever
  // reads them can test guesses of a short value against them (SECURITY.md).
  Json Knowledge() const;
  // Adds a Knowledge()'s hashes: each is found as its rule's marker, wherever it occurs (as
  // exact values are). Malformed: invalid_input, nothing added.
  Status AddKnowledge(const Json& knowledge);
  // The hashes a Knowledge() would hold.
  std::size_t KnowledgeSize() const;

  // The secrets in `text`, ordered by hidden range, not overlapping there: exact values first,
  // then secret lines, then the rules' shapes in the gaps.
  std::vector<Span> Find(std::string_view text) const;
  // Only the rules' shapes (what a secret file scan looks for).
  std::vector<Span> FindShapes(std::string_view text) const;
  // Redacts `text` in place; returns how many secrets it replaced. `by_rule`, when given,
  // counts them by rule id.
  std::size_t Redact(std::string& text,
                     std::map<std::string, std::size_t>* by_rule = nullptr) const;
  // Redacts every string value and every object key in `j`; returns the count. Two keys that
  // redact to the same text stay apart: the later ones get "#2", "#3", ... (in key order).
  std::size_t RedactJson(Json& j, std::map<std::string, std::size_t>* by_rule = nullptr) const;

  // Cuts that split no secret. `text` holds kWindow bytes on each side of the cut where the
  // stream has them. CutBefore: the end of a head cut at `cut`, moved back to the start of a
  // secret that straddles it. StartAfter: the start of a tail that begins at `start`, moved
  // past a secret that straddles it (and past the end of a private key block whose BEGIN line
  // lies before the window). The secret then falls in the dropped part, whole.
  std::size_t CutBefore(std::string_view text, std::size_t cut) const;
  std::size_t StartAfter(std::string_view text, std::size_t start) const;
  // The byte offset where `line` is cut to keep max_chars characters (npos: it fits), moved
  // back so that no secret is cut in two.
  std::size_t LineCut(std::string_view line, std::size_t max_chars) const;

 private:
  void FindRuleSpans(std::string_view text, std::vector<Span>& out) const;
  void FindBase64(std::string_view text, const std::vector<TokenRun>& runs, std::vector<Span>& out,
                  int depth = 0) const;
  // Runs of hex digits that decode to text holding a secret: [REDACTED:hex].
  void FindHex(std::string_view text, const std::vector<TokenRun>& runs, std::vector<Span>& out,
               int depth = 0) const;
  // One stretch [begin, end) of hex digits (a "0x" before it joins the span).
  void FindHexIn(std::string_view text, std::size_t begin, std::size_t end, std::vector<Span>& out,
                 int depth) const;
  // Base64 folded over lines at one width (a JWT: anywhere), or over JSON's "\n": the lines
  // joined hold a secret that crosses a fold (a known key body line re-wrapped, a key body
  // without its armour, a JWT): the whole block is hidden.
  void FindFolded(std::string_view text, std::vector<Span>& out) const;
  // Whether decoded text (base64, hex) holds a secret: a rule's shape, a secret line, a
  // credential, an exact value, a known hash; at depth 0 its own encodings too (two levels).
  bool HoldsSecret(std::string_view decoded, int depth) const;
  // Calls f(begin, end) for each learned line in `text` (none learned: no lock, no scan).
  template <typename F>
  void ForEachLearned(std::string_view text, F&& f) const;
  // Waits while the gate is held; false when the scan failed.
  bool AwaitGate() const;
  void AddValueLocked(std::string rule, std::string value);
  // What the Add* calls change (values_, lines_, credentials_, hashed_, short_hashed_): shared
  // by the public readers (Find, Knowledge), exclusive for the writers, so a value added while
  // another thread redacts (a server's header at a session's start, beside the scan's thread
  // writing session_started) is safe. Copies share it.
  std::shared_ptr<std::shared_mutex> data_mu_ = std::make_shared<std::shared_mutex>();
  std::shared_ptr<const RedactRules> rules_;
  SecretLines lines_;
  struct Learned;
  static std::shared_ptr<Learned> NewLearned();
  std::shared_ptr<Learned> learned_ = NewLearned();
  SecretLines credentials_;  // the forms of 12 bytes or more; shorter ones are in values_
  std::size_t credential_count_ = 0;
  std::vector<std::pair<std::string, std::string>> values_;  // rule, value; longest first
  // Values known only by hash (AddKnowledge): by rule, those of kMinLine bytes or more; the
  // shorter ones by length, then hash.
  std::map<std::string, SecretLines, std::less<>> hashed_;
  std::map<std::uint32_t, std::unordered_map<std::uint64_t, std::string>> short_hashed_;
  void FindHashed(std::string_view text, std::vector<Span>& out) const;
};

// --- SecretLines::ForEach: a rolling look at every 8-byte window, a bitmap probe, and a full
// hash only where the bitmap says a line may start.
std::uint64_t SecretPrefixHash(std::uint64_t eight_bytes);
std::uint64_t SecretLineHash(std::string_view line);

template <typename F>
void SecretLines::ForEach(std::string_view text, F&& f) const {
  if (count_ == 0 || text.size() < kMinLine) return;
  const std::size_t n = text.size();
  for (std::size_t i = 0; i + kMinLine <= n;) {
    std::uint64_t k;
    __builtin_memcpy(&k, text.data() + i, 8);
    const std::uint64_t h = SecretPrefixHash(k);
    const std::uint64_t bit = h >> (64 - kBits);
    if ((bitmap_[bit >> 6] >> (bit & 63) & 1) == 0) {
      ++i;
      continue;
    }
    std::size_t found = 0;
    if (auto it = by_prefix_.find(h); it != by_prefix_.end()) {
      const Bucket& b = it->second;
      for (const std::uint32_t len : b.lengths) {  // longest first
        if (i + len <= n && full_.count(Key(h, len, SecretLineHash(text.substr(i, len)))) != 0) {
          found = len;
          break;
        }
      }
      if (found == 0 && b.overfull) {
        std::size_t end = std::min(n, i + b.longest);
        const std::size_t nl = text.find('\n', i);
        if (nl != std::string_view::npos && nl < end) end = nl;
        found = std::max<std::size_t>(end - i, 8);
      }
    }
    if (found == 0) {
      ++i;
      continue;
    }
    f(i, i + found);
    i += found;
  }
}

}  // namespace cordon
