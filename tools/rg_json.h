// RgJsonStream: `rg --json` output as it arrives, split into lines in bounded memory, for
// search_text. Whole lines go to the handler while it still wants records; past that, match
// records are counted by their prefix without being kept or parsed. Pure: no syscalls.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace cordon {

class RgJsonStream {
 public:
  struct Handler {
    // A begin record (one per file with a match), whole. Returns whether that file's records
    // count: false for a path the tools hide, whose matches are then neither counted nor kept.
    std::function<bool(std::string_view line)> begin;
    // A match or context record of a counted file, whole, while the handler wants records.
    // Returns false once its caps are reached: later records are only counted.
    std::function<bool(std::string_view line, bool is_match)> record;
  };
  // A line longer than max_line is never held whole: a begin of that size counts its file, a
  // match is counted but not returned (long_lines), a context line is dropped.
  RgJsonStream(Handler handler, std::size_t max_line);

  void Feed(std::string_view data);
  // The output ended: a last line without its newline is taken as it is.
  void Finish();

  std::uint64_t matches() const { return matches_; }        // match records of counted files
  std::uint64_t files() const { return files_; }            // begin records of counted files
  std::uint64_t not_returned() const { return skipped_; }   // counted, never given whole
  std::uint64_t long_lines() const { return long_lines_; }  // over max_line
  std::uint64_t bytes() const { return bytes_; }
  // The most this stream ever held of one line: never more than max_line.
  std::size_t peak_held() const { return peak_held_; }

 private:
  enum class Kind { kUnknown, kBegin, kMatch, kContext, kOther };
  static Kind Classify(std::string_view prefix, bool whole);
  // Whether a line of this kind is to be held whole (else it is counted now and skipped).
  bool Keep(Kind kind);
  void Whole(Kind kind, std::string_view line);
  void TooLong(Kind kind);

  Handler handler_;
  std::size_t max_line_;
  std::string partial_;  // the current line so far, while it is kept or not yet classified
  Kind kind_ = Kind::kUnknown;
  bool skipping_ = false;    // the current line is counted already; its rest is discarded
  bool wants_ = true;        // the handler still takes records
  bool file_counts_ = true;  // the current file's records count
  std::uint64_t matches_ = 0, files_ = 0, skipped_ = 0, long_lines_ = 0, bytes_ = 0;
  std::size_t peak_held_ = 0;
};

}  // namespace cordon
