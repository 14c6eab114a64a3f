// Validation of the JSON-RPC 2.0 envelope; every rejection has its standard error code.
#include "mcp/jsonrpc.h"

namespace cordon::mcp {

bool IsSupportedVersion(std::string_view version) {
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

std::variant<Message, Json> ParseMessage(std::string_view line, std::size_t max_bytes) {
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.size() > max_bytes) {
    return MakeError(nullptr, kInvalidRequest,
                     "message is " + std::to_string(line.size()) + " bytes; the limit is " +
                         std::to_string(max_bytes));
  }
  ParseLimits limits;
  limits.max_bytes = max_bytes;
  limits.max_depth = kMaxMessageDepth;
  auto parsed = ParseJsonBounded(line, limits);
  if (!parsed) {
    const bool depth = parsed.error().message.find("nests") != std::string::npos;
    return MakeError(nullptr, depth ? kInvalidRequest : kParseError, parsed.error().message);
  }
  Json& j = *parsed;
  if (j.is_array()) {
    return MakeError(nullptr, kInvalidRequest, "JSON-RPC batches are not supported");
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
    m.params = j.contains("params") ? j["params"] : Json(nullptr);
    if (!m.params.is_null() && !m.params.is_object() && !m.params.is_array()) {
      return MakeError(id, kInvalidRequest, "params must be an object or an array");
    }
    m.kind = j.contains("id") ? Message::Kind::kRequest : Message::Kind::kNotification;
    return m;
  }
  if (j.contains("result") || j.contains("error")) {
    m.kind = Message::Kind::kResponse;
    m.result = j.contains("result") ? j["result"] : Json(nullptr);
    m.error = j.contains("error") ? j["error"] : Json(nullptr);
    return m;
  }
  return MakeError(id, kInvalidRequest, "not a request, notification or response");
}

}  // namespace cordon::mcp
