// Validation of the JSON-RPC 2.0 envelope; every rejection has its standard error code.
#include "mcp/jsonrpc.h"

namespace cordon::mcp {

bool IsSupportedVersion(std::string_view version, Wire wire) {
  if (wire == Wire::kHttp && version == "2024-11-05") return false;
  for (const char* v : kSupportedVersions) {
    if (version == v) return true;
  }
  return false;
}

Json MakeResult(const Json& id, Json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json MakeError(const Json& id, int code, std::string message, Json data) {
  Json err = {{"code", code}, {"message", std::move(message)}};
  if (!data.is_null()) err["data"] = std::move(data);
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(err)}};
}

Json OversizedError(const Json& id, std::size_t bytes, std::size_t limit) {
  return MakeError(
      id, kInvalidRequest,
      "message is " + std::to_string(bytes) + " bytes; the limit is " + std::to_string(limit));
}

Json MakeNotification(std::string method, Json params) {
  Json n = {{"jsonrpc", "2.0"}, {"method", std::move(method)}};
  if (!params.is_null()) n["params"] = std::move(params);
  return n;
}

Json ProgressToken(const Json& params) {
  if (!params.is_object() || !params.contains("_meta") || !params["_meta"].is_object())
    return nullptr;
  return params["_meta"].value("progressToken", Json());
}

namespace {

std::variant<Message, Json> ParseEnvelope(Json& j) {
  if (j.is_array()) {
    return MakeError(nullptr, kInvalidRequest,
                     "JSON-RPC batches are accepted only when MCP 2025-03-26 was negotiated");
  }
  if (!j.is_object())
    return MakeError(nullptr, kInvalidRequest, "a JSON-RPC message must be an object");
  Json id = j.contains("id") ? j["id"] : Json(nullptr);
  if (j.contains("id") && !(id.is_string() || id.is_number_integer())) {
    return MakeError(nullptr, kInvalidRequest, "id must be a string or an integer");
  }
  if (!j.contains("jsonrpc") || j["jsonrpc"] != "2.0") {
    return MakeError(id, kInvalidRequest, "jsonrpc must be \"2.0\"");
  }
  Message m;
  m.id = id;
  if (j.contains("method")) {
    if (!j["method"].is_string() || j["method"].get_ref<const std::string&>().empty()) {
      return MakeError(id, kInvalidRequest, "method must be a non-empty string");
    }
    m.method = j["method"].get<std::string>();
    // Moved, never copied: params can hold a megabyte of a call's arguments. `j` is the
    // caller's parse, read no further.
    if (const auto it = j.find("params"); it != j.end()) m.params = std::move(*it);
    if (!m.params.is_null() && !m.params.is_object() && !m.params.is_array()) {
      return MakeError(id, kInvalidRequest, "params must be an object or an array");
    }
    m.kind = j.contains("id") ? Message::Kind::kRequest : Message::Kind::kNotification;
    return m;
  }
  if (j.contains("result") || j.contains("error")) {
    m.kind = Message::Kind::kResponse;
    if (const auto it = j.find("result"); it != j.end()) m.result = std::move(*it);
    if (const auto it = j.find("error"); it != j.end()) m.error = std::move(*it);
    return m;
  }
  return MakeError(id, kInvalidRequest, "not a request, notification or response");
}

}  // namespace

std::variant<Message, Json> ParseMessageJson(Json j) {
  try {
    return ParseEnvelope(j);
  } catch (const Json::exception& e) {
    return MakeError(nullptr, kInvalidRequest, std::string("unreadable message: ") + e.what());
  }
}

std::optional<std::vector<std::string_view>> SplitJsonArray(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const std::size_t open = text.find_first_not_of(kSpace);
  if (open == std::string_view::npos || text[open] != '[') return std::nullopt;
  auto trimmed = [&](std::size_t from, std::size_t to) {
    std::string_view part = text.substr(from, to - from);
    const std::size_t a = part.find_first_not_of(kSpace);
    if (a == std::string_view::npos) return std::string_view();
    return part.substr(a, part.find_last_not_of(kSpace) - a + 1);
  };
  std::vector<std::string_view> out;
  std::size_t depth = 0, start = open + 1;
  bool in_string = false, escaped = false;
  for (std::size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) {
        if (std::string_view last = trimmed(start, i); !last.empty()) out.push_back(last);
        if (text.find_first_not_of(kSpace, i + 1) != std::string_view::npos) return std::nullopt;
        return out;
      }
    } else if (c == ',' && depth == 1) {
      out.push_back(trimmed(start, i));
      start = i + 1;
    }
  }
  return std::nullopt;
}

std::optional<Message> ReadAroundOverflow(std::string_view line) {
  const std::string nulled = NullOverflowingNumbers(line);
  if (nulled == line) return std::nullopt;
  Json j = Json::parse(nulled, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  auto m = ParseEnvelope(j);
  if (!std::holds_alternative<Message>(m)) return std::nullopt;
  return std::get<Message>(std::move(m));
}

Json UnparsedRequestId(std::string_view line) {
  IdScanner scan;
  scan.Feed(line);
  return scan.has_method() ? scan.Id() : Json();
}

std::variant<Message, Json> ParseMessage(std::string_view line, std::size_t max_bytes,
                                         BigIntegers big) {
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.size() > max_bytes) {
    // Refused unread, but under its id when a bounded scan finds one, so that the sender of a
    // large tools/call is not left waiting.
    return OversizedError(ScanTopLevelId(line), line.size(), max_bytes);
  }
  ParseLimits limits;
  limits.max_bytes = max_bytes;
  limits.max_depth = kMaxMessageDepth;
  limits.allow_inexact_integers = true;  // checked below, where the id is known
  auto parsed = ParseJsonBounded(line, limits);
  if (!parsed) {
    const std::string& why = parsed.error().message;
    // Nested past the limit, or not JSON the parser takes (bad UTF-8, say), yet its envelope
    // may still be readable: a request is answered under the id the structure-only scan finds,
    // so that its sender is not left waiting for an answer to id null.
    if (why.find("nests") != std::string::npos)
      return MakeError(UnparsedRequestId(line), kInvalidRequest, why);
    if (why.starts_with("JSON number out of range")) {
      // Valid JSON with a number no double holds: refused, but answered under its id when the
      // rest of the message can be read, so that the sender is not left waiting.
      auto around = ReadAroundOverflow(line);
      const Json id = around && around->kind != Message::Kind::kNotification ? around->id : Json();
      return MakeError(
          id, kInvalidRequest,
          "the message holds a number out of range, which cordon cannot represent (" + why + ")");
    }
    return MakeError(UnparsedRequestId(line), kParseError, why);
  }
  try {
    auto m = ParseEnvelope(*parsed);
    if (big == BigIntegers::kRefuse && std::holds_alternative<Message>(m) &&
        !JsonIntegersExact(line)) {
      const Message& msg = std::get<Message>(m);
      return MakeError(msg.kind == Message::Kind::kNotification ? Json() : msg.id, kInvalidRequest,
                       "the message holds an integer beyond 64 bits, which cordon cannot carry "
                       "exactly; it is refused rather than altered");
    }
    return m;
  } catch (const Json::exception& e) {
    return MakeError(nullptr, kInvalidRequest, std::string("unreadable message: ") + e.what());
  }
}

}  // namespace cordon::mcp
