// The write tools: create_file, replace_range and write_patch. Everything is validated against
// the original file before a byte is written; installation is atomic (runner/fs).
#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/hash.h"
#include "tools/registry.h"
#include "workspace/secret_files.h"

namespace cordon {
namespace {

Json WriteOutputProperties() {
  return {{"path", {{"type", "string"}}},
          {"op", {{"type", "string"}, {"enum", {"create", "replace", "edit"}}}},
          {"created", {{"type", "boolean"}}},
          {"edits_applied", {{"type", "integer"}}},
          {"bytes_before", {{"type", "integer"}}},
          {"bytes_after", {{"type", "integer"}}},
          {"sha256_before", {{"type", {"string", "null"}}}},
          {"sha256_after", {{"type", "string"}}}};
}
const Json kWriteRequired = {"path",         "op",          "created",       "edits_applied",
                             "bytes_before", "bytes_after", "sha256_before", "sha256_after"};

Json WriteResult(const std::string& rel, std::string_view op, const WriteOutcome& w,
                 std::int64_t edits) {
  return {{"path", rel},
          {"op", op},
          {"created", !w.existed},
          {"edits_applied", edits},
          {"bytes_before", w.bytes_before},
          {"bytes_after", w.bytes_after},
          {"sha256_before", w.existed ? Json(w.sha256_before) : Json(nullptr)},
          {"sha256_after", w.sha256_after}};
}

// Installs content and writes the file_write audit record, success or failure.
Result<Json> Install(ToolContext& ctx, const std::string& rel, std::string_view op,
                     std::string_view content, const FileContent* original, std::int64_t edits) {
  // An `ask` path rule is answered before the redactor learns the content or an image is kept.
  TRY(ctx.services.ApproveWrite(rel, op));
  const std::string before_sha = original != nullptr ? Sha256Hex(original->data) : "";
  // The secret lines of what the agent writes (a key body, a block scalar's value, a .env's
  // values) are known from now on, before the file exists: a line view of it (read_file_range,
  // grep -n, cat -n, diff) shows them apart from what made a rule find them.
  // Only lines that look like a secret's (no blank, eight or more distinct bytes) are learned:
  // the agent chooses what it writes, and a learned line is hidden wherever it occurs, in the
  // audit log too, so `API_TOKEN=Traceback (most` in a .env must not black out a traceback or
  // a command the auditor needs to read.
  if (ctx.redactor != nullptr) {
    const std::size_t slash = rel.find_last_of('/');
    std::vector<std::string> lines = SecretLinesOf(
        slash == std::string::npos ? rel : rel.substr(slash + 1), content, *ctx.redactor);
    std::erase_if(lines, [](const std::string& l) {
      bool seen[256] = {};
      int distinct = 0;
      for (unsigned char c : l) {
        if (c == ' ' || c == '\t') return true;
        distinct += seen[c] ? 0 : 1;
        seen[c] = true;
      }
      return distinct < 8;
    });
    ctx.redactor->Learn(lines);
  }
  std::optional<BeforeImageOutcome> before_image;
  if (original != nullptr && ctx.services.BeforeImages() != nullptr) {
    // Kept before the write, so a record that says `written` never names an image not yet
    // stored. A store failure is recorded; the write goes on.
    before_image = ctx.services.BeforeImages()->Put(original->data, before_sha);
  }
  Result<WriteOutcome> w = original == nullptr
                               ? ctx.workspace.CreateExclusive(rel, content)
                               : ctx.workspace.AtomicReplace(rel, content, *original);
  FileWriteReport report{.op = std::string(op), .path = rel, .before_image = before_image};
  if (original != nullptr) {
    report.sha256_before = before_sha;
    report.bytes_before = original->data.size();
  }
  if (w) {
    report.written = *w;
  } else {
    report.code = w.error().code;
  }
  ctx.services.RecordFileWrite(report);
  if (!w) return std::unexpected(w.error());
  return WriteResult(rel, op, *w, edits);
}

Status CheckSize(const ToolContext& ctx, std::size_t bytes, std::string_view what) {
  if (static_cast<std::int64_t>(bytes) > ctx.policy.limits.max_file_bytes) {
    return Fail(Code::kTooLarge, std::string(what) + " would be " + std::to_string(bytes) +
                                     " bytes; the limit is " +
                                     std::to_string(ctx.policy.limits.max_file_bytes));
  }
  return {};
}

Result<FileContent> ReadForEdit(const ToolContext& ctx, const std::string& rel) {
  ASSIGN_OR_RETURN(
      FileContent fc,
      ctx.workspace.ReadRegular(rel, static_cast<std::uint64_t>(ctx.policy.limits.max_file_bytes)));
  if (std::memchr(fc.data.data(), '\0', fc.data.size()) != nullptr) {
    return Fail(Code::kBinaryFile, rel + " contains NUL bytes; text edits are refused");
  }
  return fc;
}

// Finds the single occurrence of needle (overlapping occurrences count as more than one).
Result<std::size_t> FindUnique(std::string_view hay, std::string_view needle,
                               const std::string& what) {
  std::size_t first = hay.find(needle);
  if (first == std::string_view::npos) {
    return Fail(Code::kNotFound, what + ": old_string does not occur in the file");
  }
  std::size_t second = hay.find(needle, first + 1);
  if (second != std::string_view::npos) {
    std::size_t count = 1;
    for (std::size_t p = second; p != std::string_view::npos; p = hay.find(needle, p + 1)) ++count;
    return Fail(Code::kNotUnique, what + ": old_string occurs " + std::to_string(count) +
                                      " times; it must be unique");
  }
  return first;
}

Json PathProperty() {
  return {{"type", "string"},
          {"minLength", 1},
          {"maxLength", 4096},
          {"description", "File path, relative to the workspace (or absolute inside it)."}};
}

// ---- create_file ----

Result<Json> RunCreate(const Json& in, ToolContext& ctx) {
  ASSIGN_OR_RETURN(std::string rel, ResolveWritablePath(ctx, in["path"].get<std::string>()));
  const std::string& content = in["content"].get_ref<const std::string&>();
  TRY(CheckSize(ctx, content.size(), "content"));
  return Install(ctx, rel, "create", content, nullptr, 0);
}

// ---- replace_range ----

Result<Json> RunReplace(const Json& in, ToolContext& ctx) {
  ASSIGN_OR_RETURN(std::string rel, ResolveWritablePath(ctx, in["path"].get<std::string>()));
  ASSIGN_OR_RETURN(FileContent fc, ReadForEdit(ctx, rel));
  if (in.contains("expected_sha256")) {
    std::string want = in["expected_sha256"].get<std::string>();
    std::transform(want.begin(), want.end(), want.begin(), ::tolower);
    std::string have = Sha256Hex(fc.data);
    if (want != have) {
      return Fail(Code::kConflict, rel + " changed: its SHA-256 is " + have + ", not " + want);
    }
  }
  const std::string& old_s = in["old_string"].get_ref<const std::string&>();
  const std::string& new_s = in["new_string"].get_ref<const std::string&>();
  ASSIGN_OR_RETURN(std::size_t at, FindUnique(fc.data, old_s, rel));
  std::string next = fc.data;
  next.replace(at, old_s.size(), new_s);
  TRY(CheckSize(ctx, next.size(), rel));
  return Install(ctx, rel, "edit", next, &fc, 1);
}

// ---- write_patch ----

struct Edit {
  std::size_t at;
  std::size_t len;
  const std::string* replacement;
  std::size_t index;
};

Result<Json> RunPatch(const Json& in, ToolContext& ctx) {
  const Json& patches = in["patches"];
  const std::string first_op = patches[0]["op"].get<std::string>();
  if (first_op != "edit") {
    if (patches.size() != 1) {
      return Fail(Code::kInvalidInput,
                  "a create or replace operation must be the only entry in patches");
    }
    const Json& p = patches[0];
    if (!p.contains("content") || p.contains("old_string") || p.contains("new_string")) {
      return Fail(Code::kInvalidInput, "/patches/0: " + first_op + " takes path and content only");
    }
    ASSIGN_OR_RETURN(std::string rel, ResolveWritablePath(ctx, p["path"].get<std::string>()));
    const std::string& content = p["content"].get_ref<const std::string&>();
    TRY(CheckSize(ctx, content.size(), "content"));
    if (first_op == "create") return Install(ctx, rel, "create", content, nullptr, 0);
    ASSIGN_OR_RETURN(FileContent fc,
                     ctx.workspace.ReadRegular(
                         rel, static_cast<std::uint64_t>(ctx.policy.limits.max_file_bytes)));
    return Install(ctx, rel, "replace", content, &fc, 0);
  }
  std::string rel;
  for (std::size_t i = 0; i < patches.size(); ++i) {
    const Json& p = patches[i];
    std::string at = "/patches/" + std::to_string(i);
    if (p["op"] != "edit") {
      return Fail(Code::kInvalidInput, at + ": edits cannot be mixed with create or replace");
    }
    if (!p.contains("old_string") || !p.contains("new_string") || p.contains("content")) {
      return Fail(Code::kInvalidInput, at + ": edit takes path, old_string and new_string");
    }
    if (p["old_string"].get_ref<const std::string&>().empty()) {
      return Fail(Code::kInvalidInput, at + ": old_string must not be empty");
    }
    ASSIGN_OR_RETURN(std::string r, ResolveWritablePath(ctx, p["path"].get<std::string>()));
    if (i == 0) {
      rel = r;
    } else if (r != rel) {
      return Fail(Code::kInvalidInput,
                  at + ": every edit in one write_patch must target the same file (" + rel + ")");
    }
  }
  ASSIGN_OR_RETURN(FileContent fc, ReadForEdit(ctx, rel));
  std::vector<Edit> edits;
  for (std::size_t i = 0; i < patches.size(); ++i) {
    const std::string& old_s = patches[i]["old_string"].get_ref<const std::string&>();
    ASSIGN_OR_RETURN(std::size_t pos, FindUnique(fc.data, old_s, "/patches/" + std::to_string(i)));
    edits.push_back(
        {pos, old_s.size(), &patches[i]["new_string"].get_ref<const std::string&>(), i});
  }
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.at < b.at; });
  for (std::size_t i = 1; i < edits.size(); ++i) {
    if (edits[i].at < edits[i - 1].at + edits[i - 1].len) {
      return Fail(Code::kInvalidInput,
                  "/patches/" + std::to_string(edits[i].index) + " overlaps /patches/" +
                      std::to_string(edits[i - 1].index) + " in the original file");
    }
  }
  std::string next;
  std::size_t copied = 0;
  for (const Edit& e : edits) {
    next.append(fc.data, copied, e.at - copied);
    next += *e.replacement;
    copied = e.at + e.len;
  }
  next.append(fc.data, copied, std::string::npos);
  TRY(CheckSize(ctx, next.size(), rel));
  return Install(ctx, rel, "edit", next, &fc, static_cast<std::int64_t>(edits.size()));
}

}  // namespace

ToolSpec MakeCreateFileTool() {
  ToolSpec t;
  t.name = "create_file";
  t.description =
      "Create a new file inside the workspace with the given content. Missing parent "
      "directories are created. Fails with already_exists rather than overwrite anything.";
  t.scope = "fs:write";
  t.effect = Effect::kFileWrite;
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"path", PathProperty()},
        {"content", {{"type", "string"}, {"description", "The whole file content."}}}}},
      {"required", {"path", "content"}},
      {"additionalProperties", false}};
  SetOutputSchemas(t, WriteOutputProperties(), kWriteRequired);
  t.example = {{"path", "notes/todo.txt"}, {"content", "write the tests\n"}};
  t.run = RunCreate;
  return t;
}

ToolSpec MakeReplaceRangeTool() {
  ToolSpec t;
  t.name = "replace_range";
  t.description =
      "Replace the single, exact occurrence of old_string in a workspace file with new_string. "
      "Zero matches is not_found, several is not_unique; the file is then left untouched. With "
      "expected_sha256, a file that changed since is a conflict.";
  t.scope = "fs:write";
  t.effect = Effect::kFileWrite;
  t.input_schema = {{"type", "object"},
                    {"properties",
                     {{"path", PathProperty()},
                      {"old_string", {{"type", "string"}, {"minLength", 1}}},
                      {"new_string", {{"type", "string"}}},
                      {"expected_sha256",
                       {{"type", "string"},
                        {"minLength", 64},
                        {"maxLength", 64},
                        {"description", "SHA-256 (hex) the file must still have."}}}}},
                    {"required", {"path", "old_string", "new_string"}},
                    {"additionalProperties", false}};
  SetOutputSchemas(t, WriteOutputProperties(), kWriteRequired);
  t.example = {{"path", "README.md"}, {"old_string", "Hello"}, {"new_string", "Goodbye"}};
  t.example_files = {{"README.md", "# Hello\nworld\n"}};
  t.run = RunReplace;
  return t;
}

ToolSpec MakeWritePatchTool() {
  ToolSpec t;
  t.name = "write_patch";
  t.description =
      "Apply one create or replace operation, or one or more edits to the same file. Every "
      "edit's old_string must occur exactly once in the original file, edits must not overlap, "
      "and everything is validated before the result is installed atomically.";
  t.scope = "fs:write";
  t.effect = Effect::kFileWrite;
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"patches",
         {{"type", "array"},
          {"minItems", 1},
          {"maxItems", 256},
          {"items",
           {{"type", "object"},
            {"properties",
             {{"op", {{"type", "string"}, {"enum", {"create", "replace", "edit"}}}},
              {"path", PathProperty()},
              {"content", {{"type", "string"}, {"description", "create/replace: whole content."}}},
              {"old_string", {{"type", "string"}, {"description", "edit: exact text to replace."}}},
              {"new_string", {{"type", "string"}, {"description", "edit: replacement text."}}}}},
            {"required", {"op", "path"}},
            {"additionalProperties", false}}}}}}},
      {"required", {"patches"}},
      {"additionalProperties", false}};
  SetOutputSchemas(t, WriteOutputProperties(), kWriteRequired);
  t.example = {
      {"patches",
       {{{"op", "edit"}, {"path", "app.py"}, {"old_string", "x = 1"}, {"new_string", "x = 2"}},
        {{"op", "edit"}, {"path", "app.py"}, {"old_string", "y = 1"}, {"new_string", "y = 3"}}}}};
  t.example_files = {{"app.py", "x = 1\ny = 1\n"}};
  t.run = RunPatch;
  return t;
}

}  // namespace cordon
