// JSON-RPC 2.0 framing for MCP: one message per line, bounded in size and depth. A bad message
// becomes the JSON-RPC error response to send back; the process never dies of its input.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/text.h"
#include "mcp/id_scan.h"

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
// longer than kMaxMessageBytes is not kept but scanned for its id (IdScanner, memory in the
// nesting depth only) up to its newline, and then reported once with its size and that id
// (null past kMaxIdScanBytes or when the line is no JSON-RPC object with one id): on_oversized
// gets the finished IdScanner.
class LineSplitter {
 public:
  template <typename OnLine, typename OnOversized>
  void Feed(std::string_view data, OnLine on_line, OnOversized on_oversized) {
    while (!data.empty()) {
      if (skipping_) {
        const std::size_t nl = data.find('\n');
        std::string_view part = data.substr(0, nl);
        if (nl == std::string_view::npos) {
          scan_.Feed(part);
          return;
        }
        if (!part.empty() && part.back() == '\r') part.remove_suffix(1);
        scan_.Feed(part);
        data.remove_prefix(nl + 1);
        on_oversized(static_cast<const IdScanner&>(scan_));
        skipping_ = false;
        scan_ = IdScanner();
        continue;
      }
      buf_.append(data);
      data = {};
      std::size_t start = 0;
      for (std::size_t nl; (nl = buf_.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view line(buf_.data() + start, nl - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.size() > kMaxMessageBytes) {  // whole in the buffer, but refused the same way
          IdScanner scan;
          scan.Feed(line);
          on_oversized(static_cast<const IdScanner&>(scan));
        } else if (!line.empty()) {
          on_line(line);
        }
      }
      buf_.erase(0, start);
      if (buf_.size() > kMaxMessageBytes) {
        skipping_ = true;
        scan_.Feed(buf_);
        buf_.clear();
        buf_.shrink_to_fit();  // the 8 MiB are not held while the rest of the line streams by
      }
    }
  }

 private:
  std::string buf_;
  bool skipping_ = false;
  IdScanner scan_;
};

// What ParseMessage does with an integer beyond 64 bits, which the parser holds as a double
// and a re-serialized copy would not carry exactly: refused (cordon would re-serialize the
// message), or accepted (the caller forwards the original line, or refuses it before it would
// re-serialize it).
enum class BigIntegers { kRefuse, kAccept };

// Parses one message; never throws. On failure returns the error response that the peer must
// receive: -32700 when the line is not JSON; -32600 for a message that is JSON but not a valid
// request, nests deeper than kMaxMessageDepth, or holds a number out of range (1e400). Each is
// under the request's id when it can be read (for a line the parser refused, by IdScanner: one
// well-formed object with one top-level id and a method), id null otherwise.
std::variant<Message, Json> ParseMessage(std::string_view line,
                                         std::size_t max_bytes = kMaxMessageBytes,
                                         BigIntegers big = BigIntegers::kRefuse);

// The id of a request the parser refused (too deep, bad UTF-8), read by IdScanner; null when
// the line is no well-formed object with one top-level id and a method (a response's id is not
// answered: its sender waits for nothing).
Json UnparsedRequestId(std::string_view line);

// The envelope of a line that ParseMessage refused for a number out of range, read with those
// numbers as null, so that the refusal can reach the request's sender or the response's
// waiter. Nullopt when the line is not readable even so.
std::optional<Message> ReadAroundOverflow(std::string_view line);

// The transport a version is offered on: Streamable HTTP came with 2025-03-26, and 2024-11-05's
// HTTP+SSE transport is not offered, so 2024-11-05 is a stdio version only.
enum class Wire { kStdio, kHttp };
inline constexpr const char* kSupportedVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                     "2024-11-05"};
bool IsSupportedVersion(std::string_view version, Wire wire = Wire::kStdio);
// JSON-RPC batches exist in MCP 2025-03-26 only (added then, removed by 2025-06-18).
inline bool VersionHasBatches(std::string_view version) { return version == "2025-03-26"; }

// The most elements a batch may hold: a larger one is refused whole (-32600), so that one line
// cannot make cordon track thousands of calls at once.
inline constexpr std::size_t kMaxBatchElements = 1000;

// The elements of a JSON array's text, each the exact bytes it had (whitespace around it
// trimmed), so that a proxy forwards them byte for byte; nullopt when `text` is no array.
// Meant for text that already parsed as JSON: it follows strings and nesting, no grammar.
std::optional<std::vector<std::string_view>> SplitJsonArray(std::string_view text);

// The envelope check of ParseMessage for a value already parsed (one element of a batch).
std::variant<Message, Json> ParseMessageJson(Json j);

Json MakeResult(const Json& id, Json result);
Json MakeError(const Json& id, int code, std::string message, Json data = nullptr);
Json MakeNotification(std::string method, Json params);
// The refusal of a message larger than `limit`, under `id` (from IdScanner; null if none).
Json OversizedError(const Json& id, std::size_t bytes, std::size_t limit = kMaxMessageBytes);
// A request's params._meta.progressToken, or null when the client asked for no progress.
Json ProgressToken(const Json& params);

}  // namespace cordon::mcp
