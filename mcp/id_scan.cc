// A byte-at-a-time JSON structure checker that remembers one thing besides the open brackets:
// the raw text of the top-level "id" value (bounded), decoded by the JSON parser at the end.
#include "mcp/id_scan.h"

namespace cordon::mcp {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Deeper than this the message is refused by the parser as well (kMaxMessageDepth); the scan
// stops earlier than memory would force it to, and the id is null.
constexpr std::size_t kMaxScanDepth = 1024;

}  // namespace

void IdScanner::Feed(std::string_view chunk) {
  bytes_ += chunk.size();
  if (bytes_ > max_bytes_) Fail();
  for (char c : chunk) {
    if (state_ == State::kInvalid) return;
    Step(c);
  }
}

void IdScanner::BeginValue(char c) {
  const bool is_id = next_value_is_id_;
  next_value_is_id_ = false;
  if (stack_.empty() && c != '{') return Fail();  // a JSON-RPC message is an object
  if (is_id && c != '"' && c != '-' && !IsDigit(c)) id_overflow_ = true;  // not string/integer
  switch (c) {
    case '{':
    case '[':
      if (stack_.size() >= kMaxScanDepth) return Fail();
      stack_.push_back(c);
      state_ = c == '{' ? State::kKeyOrEnd : State::kValueOrEnd;
      return;
    case '"':
      state_ = State::kString;
      string_is_key_ = false;
      if (is_id) {
        capturing_id_ = true;
        id_raw_ = "\"";
      }
      return;
    case 't':
      literal_ = "rue";
      state_ = State::kLiteral;
      return;
    case 'f':
      literal_ = "alse";
      state_ = State::kLiteral;
      return;
    case 'n':
      literal_ = "ull";
      state_ = State::kLiteral;
      return;
    default:
      break;
  }
  if (c == '-' || IsDigit(c)) {
    number_state_ = c == '-' ? 0 : (c == '0' ? 1 : 2);
    state_ = State::kNumber;
    if (is_id) {
      capturing_id_ = true;
      id_raw_.assign(1, c);
    }
    return;
  }
  Fail();
}

void IdScanner::EndValue() {
  capturing_id_ = false;
  state_ = stack_.empty() ? State::kDone : State::kAfterValue;
}

void IdScanner::Step(char c) {
  // A character that ends a number is looked at again in the state that follows the number.
  for (;;) {
    switch (state_) {
      case State::kInvalid:
        return;
      case State::kDone:
        if (!IsSpace(c)) Fail();
        return;
      case State::kValue:
        if (!IsSpace(c)) BeginValue(c);
        return;
      case State::kValueOrEnd:
        if (IsSpace(c)) return;
        if (c == ']') {
          stack_.pop_back();
          EndValue();
          return;
        }
        BeginValue(c);
        return;
      case State::kKeyOrEnd:
      case State::kKey:
        if (IsSpace(c)) return;
        if (c == '}' && state_ == State::kKeyOrEnd) {
          stack_.pop_back();
          EndValue();
          return;
        }
        if (c != '"') return Fail();
        state_ = State::kString;
        string_is_key_ = true;
        key_.clear();
        key_overflow_ = false;
        return;
      case State::kColon:
        if (IsSpace(c)) return;
        if (c != ':') return Fail();
        state_ = State::kValue;
        return;
      case State::kAfterValue:
        if (IsSpace(c)) return;
        if (c == ',') {
          state_ = stack_.back() == '{' ? State::kKey : State::kValue;
          return;
        }
        if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
          stack_.pop_back();
          EndValue();
          return;
        }
        return Fail();
      case State::kString:
      case State::kEscape:
      case State::kUnicode:
        if (state_ == State::kString) {
          if (static_cast<unsigned char>(c) < 0x20) return Fail();
          if (c == '"') {
            if (capturing_id_) {
              id_raw_ += c;
              EndValue();
              return;
            }
            if (!string_is_key_) {
              EndValue();
              return;
            }
            // A key: is it the top-level "id"? Escapes ("\u0069d") are decoded by the parser.
            if (Top() && !key_overflow_) {
              Json k = Json::parse("\"" + key_ + "\"", nullptr, /*allow_exceptions=*/false);
              if (k.is_string() && k.get_ref<const std::string&>() == "id") {
                ++ids_seen_;
                next_value_is_id_ = true;
              }
              if (k.is_string() && k.get_ref<const std::string&>() == "method") has_method_ = true;
            }
            state_ = State::kColon;
            return;
          }
          if (c == '\\') state_ = State::kEscape;
        } else if (state_ == State::kEscape) {
          if (c == 'u') {
            state_ = State::kUnicode;
            unicode_left_ = 4;
          } else if (std::string_view("\"\\/bfnrt").find(c) != std::string_view::npos) {
            state_ = State::kString;
          } else {
            return Fail();
          }
        } else {
          if (!IsHex(c)) return Fail();
          if (--unicode_left_ == 0) state_ = State::kString;
        }
        if (string_is_key_) {
          if (key_.size() < kMaxKeyBytes) {
            key_ += c;
          } else {
            key_overflow_ = true;
          }
        } else if (capturing_id_) {
          if (id_raw_.size() < kMaxIdBytes) {
            id_raw_ += c;
          } else {
            id_overflow_ = true;
          }
        }
        return;
      case State::kLiteral:
        if (c != *literal_) return Fail();
        if (*++literal_ == '\0') EndValue();
        return;
      case State::kNumber: {
        int next = -1;  // -1: the number ended before c
        switch (number_state_) {
          case 0:
            if (c == '0')
              next = 1;
            else if (IsDigit(c))
              next = 2;
            else
              return Fail();
            break;
          case 1:
          case 2:
          case 4:
            if (IsDigit(c) && number_state_ != 1)
              next = number_state_;
            else if (c == '.' && number_state_ != 4)
              next = 3;
            else if (c == 'e' || c == 'E')
              next = 5;
            break;
          case 3:
            if (!IsDigit(c)) return Fail();
            next = 4;
            break;
          case 5:
            if (c == '+' || c == '-')
              next = 6;
            else if (IsDigit(c))
              next = 7;
            else
              return Fail();
            break;
          case 6:
            if (!IsDigit(c)) return Fail();
            next = 7;
            break;
          case 7:
            if (IsDigit(c)) next = 7;
            break;
        }
        if (next >= 0) {
          number_state_ = next;
          if (capturing_id_) {
            if (id_raw_.size() < kMaxIdBytes) {
              id_raw_ += c;
            } else {
              id_overflow_ = true;
            }
          }
          return;
        }
        EndValue();
        continue;  // c belongs to what follows the number
      }
    }
  }
}

Json IdScanner::Id() const {
  if (state_ != State::kDone || ids_seen_ != 1 || id_overflow_ || id_raw_.empty()) return nullptr;
  try {
    Json id = Json::parse(id_raw_, nullptr, /*allow_exceptions=*/false);
    if (id.is_string() || id.is_number_integer()) return id;
  } catch (const Json::exception&) {
    // a number the parser cannot hold (1e400): no usable id
  }
  return nullptr;
}

Json ScanTopLevelId(std::string_view text, std::size_t max_bytes) {
  IdScanner scan(max_bytes);
  scan.Feed(text);
  return scan.Id();
}

}  // namespace cordon::mcp
