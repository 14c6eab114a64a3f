// Output capture with constant memory whatever a process floods.
#include "runner/capture.h"

#include <algorithm>
#include <cctype>

namespace cordon {
namespace {

constexpr std::size_t kMaxErrorLines = 50;
constexpr std::size_t kMaxErrorLineBytes = 400;

bool LooksLikeError(std::string_view line) {
  std::string lower(line);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : {"error", "fatal", "panic", "fail", "exception", "traceback", "assert"}) {
    if (lower.find(w) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

void CappedStream::Append(std::string_view data) {
  total_ += data.size();
  const std::size_t half = cap_ / 2;
  if (head_.size() < half) {
    std::size_t take = std::min(half - head_.size(), data.size());
    head_.append(data.substr(0, take));
    data.remove_prefix(take);
  }
  tail_.append(data);
  if (tail_.size() > 2 * (cap_ - half)) {
    std::size_t excess = tail_.size() - (cap_ - half);
    Evict(std::string_view(tail_).substr(0, excess));
    tail_.erase(0, excess);
  }
}

void CappedStream::Evict(std::string_view gone) {
  dropped_ += gone.size();
  while (!gone.empty()) {
    std::size_t nl = gone.find('\n');
    std::string_view piece = gone.substr(0, nl);
    if (partial_.size() < kMaxErrorLineBytes) {
      partial_.append(piece.substr(0, kMaxErrorLineBytes - partial_.size()));
    }
    if (nl == std::string_view::npos) break;
    if (error_lines_.size() < kMaxErrorLines && LooksLikeError(partial_)) {
      error_lines_.push_back(partial_);
    }
    partial_.clear();
    gone.remove_prefix(nl + 1);
  }
}

std::string CappedStream::Text() const {
  std::string tail = tail_;
  if (dropped_ == 0) return RepairUtf8(head_ + tail);
  const std::size_t keep = cap_ - cap_ / 2;
  if (tail.size() > keep) tail.erase(0, tail.size() - keep);
  std::uint64_t cut = total_ - head_.size() - tail.size();
  std::string out = head_;
  out += "\n[cordon: " + std::to_string(cut) + " bytes of output dropped";
  if (!error_lines_.empty()) {
    out += "; error lines from the dropped part:\n";
    for (const auto& l : error_lines_) out += "  " + l + "\n";
    out += "[cordon: end of kept error lines";
  }
  out += "]\n";
  out += tail;
  return RepairUtf8(out);
}

std::string CappedStream::Tail(std::size_t max_chars) const {
  std::string all = StripEscapes(dropped_ ? tail_ : head_ + tail_);
  all = RepairUtf8(all);
  std::size_t chars = 0, i = all.size();
  while (i > 0 && chars < max_chars) {
    --i;
    if ((static_cast<unsigned char>(all[i]) & 0xc0) != 0x80) ++chars;
  }
  return all.substr(i);
}

std::string StripEscapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0x1b && i + 1 < s.size()) {
      char n = s[i + 1];
      if (n == '[') {  // CSI: parameters, then a final byte 0x40-0x7e
        i += 2;
        while (i < s.size() && !(s[i] >= 0x40 && s[i] <= 0x7e)) ++i;
      } else if (n == ']') {  // OSC: until BEL or ESC backslash
        i += 2;
        while (i < s.size() && s[i] != '\a' &&
               !(s[i] == 0x1b && i + 1 < s.size() && s[i + 1] == '\\'))
          ++i;
        if (i < s.size() && s[i] == 0x1b) ++i;
      } else {
        ++i;
      }
      continue;
    }
    if (c < 0x20 && c != '\n' && c != '\t') continue;
    if (c == 0x7f) continue;
    out.push_back(static_cast<char>(c));
  }
  return out;
}

}  // namespace cordon
