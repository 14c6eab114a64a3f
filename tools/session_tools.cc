// session_tag (issue 23): the caller's tags of this session, each change a record.
#include "core/text.h"
#include "tools/registry.h"

namespace cordon {
namespace {

Result<Json> SessionTag(const Json& in, ToolContext& ctx) {
  if (!ctx.set_tag) return Fail(Code::kInvalidInput, "this session keeps no tags");
  ASSIGN_OR_RETURN(std::string tag, NormalizeSessionTag(in["tag"].get<std::string>()));
  ASSIGN_OR_RETURN(std::vector<std::string> tags, ctx.set_tag(tag, in["tagged"].get<bool>()));
  return Json{{"tag", tag}, {"tagged", in["tagged"].get<bool>()}, {"tags", tags}};
}

}  // namespace

Result<std::string> NormalizeSessionTag(std::string_view tag) {
  while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
  while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
  if (tag.empty()) return Fail(Code::kInvalidInput, "a tag must not be empty");
  std::size_t chars = 0;
  for (unsigned char c : tag) {
    if (c < 0x20 || c == 0x7f) {
      return Fail(Code::kInvalidInput,
                  "a tag is one line: no line break or other control character");
    }
    if ((c & 0xc0) != 0x80) ++chars;
  }
  if (chars > 64) return Fail(Code::kInvalidInput, "a tag is at most 64 characters");
  bool repaired = false;
  std::string out = RepairUtf8(tag, &repaired);
  if (repaired) return Fail(Code::kInvalidInput, "a tag must be UTF-8");
  return out;
}

ToolSpec MakeSessionTagTool() {
  ToolSpec t;
  t.name = "session_tag";
  t.description =
      "Add (tagged: true) or remove (tagged: false) a tag of this session (under `serve --http`, "
      "of this MCP session; the --tag tags of `cordon serve` are every session's to start "
      "with). A tag is trimmed, one line, at most 64 characters. Returns the tags; each change "
      "is a session_tag record (`cordon audit show --tag` is not there yet).";
  t.scope = "session:operate";
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"tag", {{"type", "string"}, {"maxLength", 1024}}}, {"tagged", {{"type", "boolean"}}}}},
      {"required", {"tag", "tagged"}},
      {"additionalProperties", false}};
  SetOutputSchemas(t,
                   {{"tag", {{"type", "string"}}},
                    {"tagged", {{"type", "boolean"}}},
                    {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}}},
                   {"tag", "tagged", "tags"});
  t.example = {{"tag", "refactor-auth"}, {"tagged", true}};
  t.run = SessionTag;
  return t;
}

}  // namespace cordon
