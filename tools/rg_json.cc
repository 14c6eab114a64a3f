// RgJsonStream (tools/rg_json.h): line splitting, prefix classification and counting.
#include "tools/rg_json.h"

#include <algorithm>

namespace cordon {
namespace {

// rg writes each message's "type" first; the longest prefix told apart is the context one.
constexpr std::string_view kBeginPrefix = R"({"type":"begin")";
constexpr std::string_view kMatchPrefix = R"({"type":"match")";
constexpr std::string_view kContextPrefix = R"({"type":"context")";
constexpr std::size_t kClassifyBytes = kContextPrefix.size();

}  // namespace

RgJsonStream::RgJsonStream(Handler handler, std::size_t max_line)
    : handler_(std::move(handler)), max_line_(std::max<std::size_t>(max_line, kClassifyBytes)) {}

RgJsonStream::Kind RgJsonStream::Classify(std::string_view prefix, bool whole) {
  if (prefix.size() < kClassifyBytes && !whole) return Kind::kUnknown;
  if (prefix.starts_with(kMatchPrefix)) return Kind::kMatch;
  if (prefix.starts_with(kBeginPrefix)) return Kind::kBegin;
  if (prefix.starts_with(kContextPrefix)) return Kind::kContext;
  return Kind::kOther;  // end, summary, anything else: never needed
}

bool RgJsonStream::Keep(Kind kind) {
  switch (kind) {
    case Kind::kBegin:
      return true;  // its path decides whether the file's records count
    case Kind::kMatch:
      if (!file_counts_) return false;
      if (wants_) return true;
      ++matches_;  // past the handler's caps: counted here, by its prefix alone
      ++skipped_;
      return false;
    case Kind::kContext:
      return file_counts_ && wants_;
    default:
      return false;
  }
}

void RgJsonStream::Whole(Kind kind, std::string_view line) {
  switch (kind) {
    case Kind::kBegin:
      file_counts_ = handler_.begin(line);
      files_ += file_counts_ ? 1 : 0;
      break;
    case Kind::kMatch:
      ++matches_;
      if (!handler_.record(line, true)) {
        wants_ = false;
        ++skipped_;
      }
      break;
    case Kind::kContext:
      if (!handler_.record(line, false)) wants_ = false;
      break;
    default:
      break;
  }
}

void RgJsonStream::TooLong(Kind kind) {
  ++long_lines_;
  if (kind == Kind::kBegin) {
    // No real path is this long (PATH_MAX is 4096 bytes, escaped at most 6x): its file counts.
    file_counts_ = true;
    ++files_;
  } else if (kind == Kind::kMatch) {
    ++matches_;
    ++skipped_;
  }
}

void RgJsonStream::Feed(std::string_view data) {
  bytes_ += data.size();
  while (!data.empty()) {
    const std::size_t nl = data.find('\n');
    const bool ends = nl != std::string_view::npos;
    const std::string_view piece = data.substr(0, ends ? nl : data.size());
    data.remove_prefix(ends ? nl + 1 : data.size());
    if (skipping_) {
      skipping_ = !ends;
      continue;
    }
    if (kind_ == Kind::kUnknown && partial_.empty() && ends) {
      // The common case: the whole line is in this read, and nothing is copied.
      const Kind kind = Classify(piece, true);
      if (!Keep(kind)) continue;
      if (piece.size() > max_line_) {
        TooLong(kind);
      } else {
        Whole(kind, piece);
      }
      continue;
    }
    std::string_view rest = piece;
    if (kind_ == Kind::kUnknown) {
      // The line started in an earlier read or goes on in a later one: its first bytes decide.
      const std::size_t take = std::min(rest.size(), kClassifyBytes - partial_.size());
      partial_.append(rest.substr(0, take));
      rest.remove_prefix(take);
      peak_held_ = std::max(peak_held_, partial_.size());
      const Kind kind = Classify(partial_, ends && rest.empty());
      if (kind == Kind::kUnknown) continue;  // too few bytes yet; this read is used up
      if (!Keep(kind)) {
        partial_.clear();
        skipping_ = !ends;
        continue;
      }
      kind_ = kind;
    }
    if (partial_.size() + rest.size() > max_line_) {
      TooLong(kind_);
      kind_ = Kind::kUnknown;
      std::string().swap(partial_);  // the memory goes too
      skipping_ = !ends;
      continue;
    }
    partial_.append(rest);
    peak_held_ = std::max(peak_held_, partial_.size());
    if (!ends) continue;
    const Kind kind = kind_;
    kind_ = Kind::kUnknown;
    Whole(kind, partial_);
    partial_.clear();
  }
}

void RgJsonStream::Finish() {
  if (skipping_) {
    skipping_ = false;
    return;
  }
  if (partial_.empty() && kind_ == Kind::kUnknown) return;
  // A last line without its newline (rg stopped mid-line): a newline ends it.
  const std::uint64_t bytes = bytes_;
  Feed("\n");
  bytes_ = bytes;
}

}  // namespace cordon
