// The top-level "id" of a JSON-RPC message too large to parse, found by a streaming scan that
// keeps no values: its memory grows with the nesting depth only, so a refusal of an oversized
// request can still carry the id its sender waits for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/text.h"

namespace cordon::mcp {

// Past this many bytes the scan stops and the id is null: a bound on the CPU a peer can make
// cordon spend on a message it refuses anyway.
inline constexpr std::size_t kMaxIdScanBytes = 64u << 20;

class IdScanner {
 public:
  explicit IdScanner(std::size_t max_bytes = kMaxIdScanBytes) : max_bytes_(max_bytes) {}
  // Feeds the next bytes of the message (without its line end).
  void Feed(std::string_view chunk);
  // The message's id when what was fed is one complete, well-formed JSON object (structure
  // only: UTF-8 is not checked) with exactly one top-level "id" member that is a string or an
  // integer; null otherwise: not JSON, not an object, no id or two, an id of another type,
  // nested "id" members only, or more than max_bytes fed.
  Json Id() const;
  std::size_t bytes() const { return bytes_; }
  // Whether the object has a top-level "method" member: a request (or notification) rather
  // than a response, which tells a proxy which side waits for the refusal.
  bool has_method() const { return has_method_; }

 private:
  enum class State : std::uint8_t {
    kValue,       // a value is expected (after ':' or '[' or ',' in an array, or at the start)
    kValueOrEnd,  // just after '[': a value or ']'
    kKey,         // a key string is expected (after ',' in an object)
    kKeyOrEnd,    // just after '{': a key or '}'
    kColon,       // after a key
    kAfterValue,  // after a value: ',' or the closing bracket
    kString,      // inside a string
    kEscape,      // after a backslash in a string
    kUnicode,     // inside \uXXXX
    kNumber,      // inside a number
    kLiteral,     // inside true/false/null
    kDone,        // the top-level value ended: only whitespace may follow
    kInvalid,
  };
  void Step(char c);
  void EndValue();
  void BeginValue(char c);
  void Fail() { state_ = State::kInvalid; }
  bool Top() const { return stack_.size() == 1 && stack_.back() == '{'; }

  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  State state_ = State::kValue;
  std::vector<char> stack_;  // '{' or '[' per open container: the only memory that grows
  bool string_is_key_ = false;
  int unicode_left_ = 0;
  // Number grammar: 0 sign, 1 leading zero, 2 int digits, 3 '.', 4 frac digits, 5 'e',
  // 6 exponent sign, 7 exponent digits.
  int number_state_ = 0;
  const char* literal_ = nullptr;  // the rest of true/false/null still expected
  // The raw text of a top-level key (up to 16 bytes: "\u0069\u0064" is 12) and of the id's
  // value (up to kMaxIdBytes), decoded by the JSON parser at the end.
  static constexpr std::size_t kMaxKeyBytes = 16;
  static constexpr std::size_t kMaxIdBytes = 1024;
  std::string key_;
  bool key_overflow_ = false;
  bool capturing_id_ = false;
  bool next_value_is_id_ = false;
  std::string id_raw_;
  bool id_overflow_ = false;
  int ids_seen_ = 0;
  bool has_method_ = false;
};

// IdScanner over a whole text at once.
Json ScanTopLevelId(std::string_view text, std::size_t max_bytes = kMaxIdScanBytes);

}  // namespace cordon::mcp
