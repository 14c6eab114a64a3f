// Redactor: deterministic removal of secrets from tool output and audit records.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/text.h"

namespace cordon {

class Redactor {
 public:
  // Values shorter than this are not redacted by exact match: a 2-character "secret" would
  // shred ordinary output. SECURITY.md says so.
  static constexpr std::size_t kMinExactValue = 6;
  // The carry-over window kept beyond each place where output is cut: the longest secret the
  // cut helpers promise to see whole (a PEM private key block runs to about 4 KiB).
  static constexpr std::size_t kWindow = 8192;

  // One secret found in a text: [begin, end) is all that its rule matched, of which the first
  // `keep` bytes stay visible ("Bearer ", "scheme://user:"); the rest becomes the marker.
  struct Span {
    std::size_t begin = 0, end = 0, keep = 0;
    std::string_view rule;
  };

  // Adds exact values: each (rule, value) pair becomes "[REDACTED:rule]".
  void AddValue(std::string rule, std::string value);
  // Adds the values of environment variables whose names look secret
  // (*TOKEN*, *KEY*, *SECRET*, *PASSWORD*, *PASSWD*, case-insensitive).
  void AddSecretEnvironment(char** envp);
  static bool IsSecretName(std::string_view name);

  // The secrets in `text`, in order, not overlapping: exact values first, then token shapes
  // (private key blocks, AWS, GitHub, Slack, bearer, JWT, URL passwords, sk- keys) in the
  // gaps. Linear in the text for the shapes; one substring search per exact value.
  std::vector<Span> Find(std::string_view text) const;
  // Redacts `text` in place; returns how many secrets it replaced.
  std::size_t Redact(std::string& text) const;
  // Redacts every string value and every object key in `j`; returns the count. Two keys that
  // redact to the same text stay apart: the later ones get "#2", "#3", ... (in key order).
  std::size_t RedactJson(Json& j) const;

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
  std::vector<std::pair<std::string, std::string>> values_;  // rule, value; longest first
};

}  // namespace cordon
