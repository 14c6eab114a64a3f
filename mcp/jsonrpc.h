// JSON-RPC 2.0 framing for MCP: one message per line, bounded in size and depth. A bad message
// becomes the JSON-RPC error response to send back; the process never dies of its input.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "core/text.h"

namespace cordon::mcp {

enum RpcErrorCode : int {
  kParseError = -32700,
  kInvalidRequest = -32600,
  kMethodNotFound = -32601,
  kInvalidParams = -32602,
  kInternalError = -32603,
};

struct Message {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kRequest;
  Json id;  // string or integer; null for notifications
  std::string method;
  Json params;  // object, array or null
  Json result;  // responses
  Json error;   // responses
};

inline constexpr std::size_t kMaxMessageBytes = 8u << 20;
inline constexpr std::size_t kMaxMessageDepth = 64;

// Splits a byte stream into lines (a trailing CR dropped, empty lines skipped), bounded: a line
// longer than kMaxMessageBytes is reported once and skipped up to its newline.
class LineSplitter {
 public:
  template <typename OnLine, typename OnOversized>
  void Feed(std::string_view data, OnLine on_line, OnOversized on_oversized) {
    buf_.append(data);
    std::size_t start = 0;
    for (std::size_t nl; (nl = buf_.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (skipping_) {
        skipping_ = false;
        continue;
      }
      std::string_view line(buf_.data() + start, nl - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty()) on_line(line);
    }
    buf_.erase(0, start);
    if (buf_.size() > kMaxMessageBytes) {
      if (!skipping_) on_oversized(buf_.size());
      skipping_ = true;
      buf_.clear();
    }
  }

 private:
  std::string buf_;
  bool skipping_ = false;
};

// What ParseMessage does with an integer beyond 64 bits, which the parser holds as a double
// and a re-serialized copy would not carry exactly: refused (cordon would re-serialize the
// message), or accepted (the caller forwards the original line, or refuses it before it would
// re-serialize it).
enum class BigIntegers { kRefuse, kAccept };

// Parses one message; never throws. On failure returns the error response that the peer must
// receive: -32700 with id null when the line is not JSON; -32600 for a message that is JSON but
// not a valid request, or holds a number out of range (1e400), with its id when it could be read.
std::variant<Message, Json> ParseMessage(std::string_view line,
                                         std::size_t max_bytes = kMaxMessageBytes,
                                         BigIntegers big = BigIntegers::kRefuse);

// The envelope of a line that ParseMessage refused for a number out of range, read with those
// numbers as null, so that the refusal can reach the request's sender or the response's
// waiter. Nullopt when the line is not readable even so.
std::optional<Message> ReadAroundOverflow(std::string_view line);

inline constexpr const char* kSupportedVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};
bool IsSupportedVersion(std::string_view version);

Json MakeResult(const Json& id, Json result);
Json MakeError(const Json& id, int code, std::string message, Json data = nullptr);
Json MakeNotification(std::string method, Json params);
// A request's params._meta.progressToken, or null when the client asked for no progress.
Json ProgressToken(const Json& params);

}  // namespace cordon::mcp
