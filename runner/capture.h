// CappedStream: bounded capture of a process's output. Beyond the cap it keeps the head and the
// tail, counts what it dropped, and keeps the error-looking lines from the dropped middle. With a
// redactor, no cut splits a secret: each cut keeps Redactor::kWindow bytes beyond it, and a secret
// that straddles it falls whole into the dropped part.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/redact.h"
#include "core/text.h"

namespace cordon {

class CappedStream {
 public:
  explicit CappedStream(std::size_t cap) : cap_(cap < 64 ? 64 : cap) {}
  // The session's redactor (it outlives the stream); without one, cuts fall where they fall.
  void SetRedactor(const Redactor* redactor) { redactor_ = redactor; }
  void Append(std::string_view data);
  // Bytes the process wrote that went elsewhere (a RunHooks::on_stdout): counted, not kept.
  void CountPassedOn(std::size_t n) { total_ += n; }
  std::uint64_t total() const { return total_; }
  std::uint64_t dropped() const { return dropped_; }
  bool truncated() const { return dropped_ > 0; }
  // head, a marker with the dropped count and kept error lines, then the tail; valid UTF-8.
  std::string Text() const;
  // The last max_chars characters of the retained text (for process_output).
  std::string Tail(std::size_t max_chars) const;
  const std::vector<std::string>& error_lines() const { return error_lines_; }

 private:
  void Evict(std::string_view gone);
  std::size_t cap_;
  const Redactor* redactor_ = nullptr;
  std::string head_, tail_, partial_;
  // The carry-over windows: the first bytes after the head, and the last bytes evicted before
  // the tail (up to 2 * kWindow, trimmed in bulk).
  std::string head_window_, evicted_window_;
  std::uint64_t total_ = 0, dropped_ = 0;
  std::vector<std::string> error_lines_;
};

// Removes ANSI/VT escape sequences (CSI, OSC, two-byte ESC) and other C0 controls but \n and \t.
std::string StripEscapes(std::string_view text);

// The stdout and stderr tails of one process as one text (stderr after a "[stderr]" line), cut
// to its last `max_bytes` bytes; with a redactor the cut moves past a secret that straddles it.
std::string JoinTails(const std::string& out, const std::string& err, std::size_t max_bytes,
                      const Redactor* redactor);
// The first `max_bytes` of `text` for a message; with a redactor the cut moves back to the start
// of a secret that straddles it, so no part of it stays.
std::string Excerpt(std::string_view text, std::size_t max_bytes, const Redactor* redactor);

}  // namespace cordon
