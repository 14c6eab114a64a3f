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
  if (head_window_.size() < Redactor::kWindow) {
    head_window_.append(data.substr(0, Redactor::kWindow - head_window_.size()));
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
  // The bytes just before the tail, for a tail start that must not split a secret.
  if (gone.size() >= Redactor::kWindow) {
    evicted_window_.assign(gone.substr(gone.size() - Redactor::kWindow));
  } else {
    evicted_window_.append(gone);
    if (evicted_window_.size() > 2 * Redactor::kWindow) {
      evicted_window_.erase(0, evicted_window_.size() - Redactor::kWindow);
    }
  }
  // An error line is kept to kMaxErrorLineBytes, plus a window so that its cut splits no secret.
  const std::size_t line_room = kMaxErrorLineBytes + Redactor::kWindow;
  while (!gone.empty()) {
    std::size_t nl = gone.find('\n');
    std::string_view piece = gone.substr(0, nl);
    if (partial_.size() < line_room) {
      partial_.append(piece.substr(0, line_room - partial_.size()));
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
  if (dropped_ == 0) return RepairUtf8(head_ + tail_);
  const std::size_t keep = cap_ - cap_ / 2;
  // Where the head ends and the tail starts, each moved so that no secret is cut in two: the
  // secret then lies whole in the dropped part, and the count says so.
  std::size_t head_len = head_.size();
  if (redactor_ != nullptr) head_len = redactor_->CutBefore(head_ + head_window_, head_len);
  const std::string before = evicted_window_ + tail_;
  std::size_t start = before.size() - std::min(before.size(), keep);
  if (redactor_ != nullptr) start = redactor_->StartAfter(before, start);
  const std::string_view tail = std::string_view(before).substr(start);
  std::uint64_t cut = total_ - head_len - tail.size();
  std::string out = head_.substr(0, head_len);
  out += "\n[cordon: " + std::to_string(cut) + " bytes of output dropped";
  if (!error_lines_.empty()) {
    out += "; error lines from the dropped part:\n";
    for (const auto& l : error_lines_) {
      std::size_t len = std::min(l.size(), kMaxErrorLineBytes);
      if (redactor_ != nullptr && l.size() > len) len = redactor_->CutBefore(l, len);
      out += "  " + l.substr(0, len) + "\n";
    }
    out += "[cordon: end of kept error lines";
  }
  out += "]\n";
  out += tail;
  return RepairUtf8(out);
}

std::string CappedStream::Tail(std::size_t max_chars) const {
  // The text before the retained part (when some was dropped) is the window that tells whether
  // the tail's first bytes belong to a secret that began before them.
  const std::string before = dropped_ ? RepairUtf8(StripEscapes(evicted_window_)) : std::string();
  const std::string all = before + RepairUtf8(StripEscapes(dropped_ ? tail_ : head_ + tail_));
  std::size_t chars = 0, i = all.size();
  while (i > before.size() && chars < max_chars) {
    --i;
    if ((static_cast<unsigned char>(all[i]) & 0xc0) != 0x80) ++chars;
  }
  if (redactor_ != nullptr) i = redactor_->StartAfter(all, i);
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

std::string JoinTails(const std::string& out, const std::string& err, std::size_t max_bytes,
                      const Redactor* redactor) {
  std::string all =
      err.empty() ? out
                  : out + (out.empty() || out.back() == '\n' ? "" : "\n") + "[stderr]\n" + err;
  if (all.size() > max_bytes) {
    std::size_t start = all.size() - max_bytes;
    if (redactor != nullptr) start = redactor->StartAfter(all, start);
    all.erase(0, start);
  }
  return RepairUtf8(all);
}

std::string Excerpt(std::string_view text, std::size_t max_bytes, const Redactor* redactor) {
  if (text.size() <= max_bytes) return std::string(text);
  const std::size_t cut = redactor != nullptr ? redactor->CutBefore(text, max_bytes) : max_bytes;
  return RepairUtf8(text.substr(0, cut));
}

}  // namespace cordon
