// [audit] arguments = "hashed" (audit/arguments.h).
#include "audit/arguments.h"

#include <algorithm>

#include "core/hash.h"
#include "core/text.h"

namespace cordon {
namespace {

constexpr std::size_t kMinScrub = 4;            // shorter arguments are not searched for
constexpr std::size_t kMaxKept = 64 * 1024;     // an argument longer than this is not kept
constexpr std::size_t kMaxCallBytes = 1 << 20;  // the strings kept for one call, at most

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool IsAlnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// A key that reads as a schema's property name: a lower-case identifier of at most 32 bytes.
bool SchemaLikeKey(std::string_view k) {
  if (k.empty() || k.size() > 32 || !(k[0] >= 'a' && k[0] <= 'z')) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A file content the call pipeline already replaced by its size and digest.
bool IsContentDigest(const Json& j) {
  if (!j.is_object() || j.size() != 2 || !j.contains("bytes") || !j.contains("sha256"))
    return false;
  const Json& h = j["sha256"];
  if (!j["bytes"].is_number_unsigned() || !h.is_string()) return false;
  const auto& s = h.get_ref<const std::string&>();
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

void Collect(const Json& j, std::vector<std::string>& out, std::size_t& bytes) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s.size() >= kMinScrub && s.size() <= kMaxKept && bytes + s.size() <= kMaxCallBytes) {
      out.push_back(s);
      bytes += s.size();
    }
  } else if (j.is_object() && !IsContentDigest(j)) {
    for (const auto& [k, v] : j.items()) {
      if (!SchemaLikeKey(k)) Collect(Json(k), out, bytes);
      Collect(v, out, bytes);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) Collect(v, out, bytes);
  }
}

std::string Marker(std::string_view arg) {
  return "[ARGUMENT:" + Sha256Hex(arg).substr(0, 12) + "]";
}

void Scrub(std::string& s, const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a.size() > s.size()) continue;
    std::string marker;
    for (std::size_t at = s.find(a); at != std::string::npos; at = s.find(a, at)) {
      if (marker.empty()) marker = Marker(a);
      s.replace(at, a.size(), marker);
      at += marker.size();
    }
  }
}

// Fields that name what happened (ids, enums, the paths of what changed): never scrubbed.
bool Structural(std::string_view key) {
  static constexpr std::string_view kKeys[] = {
      "call",   "tool", "server", "server_tool", "method",  "status", "code",       "scope",
      "effect", "kind", "op",     "path",        "changes", "job",    "mcp_session"};
  return std::find(std::begin(kKeys), std::end(kKeys), key) != std::end(kKeys);
}

void ScrubFields(Json& j, const std::vector<std::string>& args) {
  if (j.is_string()) {
    Scrub(j.get_ref<std::string&>(), args);
  } else if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (!Structural(k)) ScrubFields(v, args);
    }
  } else if (j.is_array()) {
    for (auto& v : j) ScrubFields(v, args);
  }
}

}  // namespace

std::string_view ArgumentShape(std::string_view a) {
  if (a.empty()) return "empty";
  bool changed = false;
  (void)RepairUtf8(a, &changed);
  if (changed) return "binary";
  for (unsigned char c : a) {
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return "binary";
  }
  if (a[0] == '-') return "flag";
  if (a.find("://") != std::string_view::npos) return "url";
  if (a.find('/') != std::string_view::npos && a.find_first_of(" \t\n") == std::string_view::npos) {
    return "path";
  }
  if (std::all_of(a.begin(), a.end(), [](char c) { return c >= '0' && c <= '9'; })) return "number";
  if (a.size() >= 8 && std::all_of(a.begin(), a.end(), IsHex)) return "hex";
  const bool tokenish = std::all_of(a.begin(), a.end(), [](char c) {
    return IsAlnum(c) || c == '+' || c == '/' || c == '=' || c == '_' || c == '.' || c == '-';
  });
  const bool letters =
      std::any_of(a.begin(), a.end(), [](char c) { return IsAlnum(c) && !(c >= '0' && c <= '9'); });
  const bool digits = std::any_of(a.begin(), a.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (tokenish && a.size() >= 16 && letters && digits) return "token";
  if (std::all_of(a.begin(), a.end(), [](char c) {
        return IsAlnum(c) || c == '_' || c == '.' || c == ':' || c == '@' || c == '-';
      })) {
    return "word";
  }
  return "text";
}

Json HashedArgument(std::string_view arg) {
  return {{"sha256", Sha256Hex(arg)}, {"bytes", arg.size()}, {"shape", ArgumentShape(arg)}};
}

Json HashArguments(const Json& args) {
  if (args.is_string()) return HashedArgument(args.get_ref<const std::string&>());
  if (IsContentDigest(args)) return args;
  if (args.is_object()) {
    Json out = Json::object();
    // The agent chooses the keys too (an unknown field is refused only after tool_started): a
    // key that does not read as a property name is hashed like a value.
    for (const auto& [k, v] : args.items()) {
      out[SchemaLikeKey(k) ? k : "#" + Sha256Hex(k).substr(0, 12)] = HashArguments(v);
    }
    return out;
  }
  if (args.is_array()) {
    Json out = Json::array();
    for (const auto& v : args) out.push_back(HashArguments(v));
    return out;
  }
  return args;
}

namespace {

// Every "message" at any depth: the whole text, hashed.
void HashMessages(Json& j) {
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (k == "message" && v.is_string()) {
        v = "[MESSAGE:" + Sha256Hex(v.get_ref<const std::string&>()).substr(0, 12) + "]";
      } else {
        HashMessages(v);
      }
    }
  } else if (j.is_array()) {
    for (auto& v : j) HashMessages(v);
  }
}

}  // namespace

void ArgumentHasher::Apply(std::string_view type, Json& fields) {
  HashMessages(fields);
  if (auto cwd = fields.find("cwd"); type == "process" && cwd != fields.end() && cwd->is_string()) {
    const std::string c = cwd->get<std::string>();
    if (c != workspace_) {
      const bool below = !workspace_.empty() && c.rfind(workspace_ + "/", 0) == 0;
      *cwd = (below ? workspace_ + "/" : std::string()) +
             Marker(below ? std::string_view(c).substr(workspace_.size() + 1) : c);
    }
  }
  // The call's id (a number in cordon's records, a string in none yet): its JSON text.
  const std::string call =
      fields.contains("call") && !fields["call"].is_null() ? fields["call"].dump() : std::string();
  std::vector<std::string> args;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (type == "tool_started" && fields.contains("args")) {
      std::vector<std::string> mine;
      std::size_t bytes = 0;
      Collect(fields["args"], mine, bytes);
      fields["args"] = HashArguments(fields["args"]);
      if (!call.empty()) by_call_[call] = std::move(mine);
      return;
    }
    if (auto it = by_call_.find(call); !call.empty() && it != by_call_.end()) {
      args = it->second;
      if (type == "tool_finished") by_call_.erase(it);
    }
  }
  if (type == "process" && fields.contains("argv") && fields["argv"].is_array()) {
    fields["argv"] = HashArguments(fields["argv"]);
  }
  if (args.empty()) return;
  // The longest first: an argument that holds a shorter one is replaced whole.
  std::sort(args.begin(), args.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  ScrubFields(fields, args);
}

}  // namespace cordon
