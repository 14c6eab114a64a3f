// search_text (rg --json), find_files (fd, falling back to find) and list_searchable_files
// (fd, rg --files, find). Each runs confined with the workspace read-only and no network; the
// agent's pattern always follows -e or --, so it is never read as an option.
#include <algorithm>

#include "runner/host_probe.h"
#include "runner/mask.h"
#include "runner/processes.h"
#include "tools/name_match.h"
#include "tools/registry.h"
#include "tools/rg_json.h"

namespace cordon {
namespace {

constexpr std::size_t kSearchCapture = 32u << 20;  // raw output of fd and find that cordon parses
// search_text reads rg's JSON as it arrives and never holds more than one line of it: a
// matching line whose record is longer than this is counted but not returned.
constexpr std::size_t kMaxRgLine = 8u << 20;
constexpr std::size_t kRgStderr = 64u << 10;  // rg's messages, for an error's text

// The first n bytes of a tool's stderr for an error message, cut where no secret is split.
std::string Clip(const ToolContext& ctx, const std::string& text, std::size_t n) {
  return text.substr(0, ctx.redactor != nullptr ? ctx.redactor->CutBefore(text, n) : n);
}

// CutLine, with the cut moved back before a secret it would split (which then goes whole).
bool CutLineBefore(std::string& line, std::size_t max_chars, const Redactor& redactor) {
  const std::size_t at = redactor.LineCut(line, max_chars);
  if (at == std::string::npos) return false;
  std::size_t dropped = 0;
  for (std::size_t i = at; i < line.size(); ++i) {
    dropped += (static_cast<unsigned char>(line[i]) & 0xc0) != 0x80;
  }
  line.resize(at);
  line += " [cordon: line cut, " + std::to_string(dropped) + " more characters]";
  return true;
}

// Runs `argv` confined, the workspace read-only and no network, as a foreground call (its
// `process` and change records as any). With `stream`, stdout goes to it as it arrives instead
// of to a capture, and a timeout is the caller's to report (what was read stands).
Result<std::unique_ptr<ConfinedProcess>> RunReadOnly(ToolContext& ctx, const std::string& tool,
                                                     std::vector<std::string> argv,
                                                     RgJsonStream* stream = nullptr) {
  if (ctx.services.Processes() == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  ProcessRequest req;
  req.argv = std::move(argv);
  req.cwd = ctx.workspace.root();
  req.tool = tool;
  req.workspace_writable = false;
  req.network = NetworkMode::kNone;
  req.max_output_bytes = stream != nullptr ? kRgStderr : kSearchCapture;
  std::unique_ptr<ConfinedProcess> proc;
  if (stream != nullptr) {
    RunHooks hooks;
    hooks.on_stdout = [stream](std::string_view data) { stream->Feed(data); };
    ASSIGN_OR_RETURN(proc, ctx.services.Processes()->RunWithHooks(req, hooks, ctx.cancel, nullptr));
    stream->Finish();
  } else {
    ASSIGN_OR_RETURN(proc, ctx.services.Processes()->RunForeground(req, ctx.cancel));
  }
  ProcessOutcome o = proc->outcome();
  if (o.error) return std::unexpected(*o.error);
  if (o.status == ProcessStatus::kTimeout && stream == nullptr)
    return Fail(Code::kTimeout, tool + " ran past its time limit");
  if (o.status == ProcessStatus::kCancelled)
    return Fail(Code::kCancelled, "the call was cancelled");
  return proc;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  return out;
}

std::string DecodeBase64(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  int bits = 0, acc = 0;
  for (char c : in) {
    int v = val(c);
    if (v < 0) continue;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

// obj[key] without a copy, or null when obj is not an object or lacks it.
const Json& Member(const Json& obj, const char* key) {
  static const Json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it != obj.end() ? *it : kNull;
}

// rg's {"text": …} or {"bytes": base64} value as valid UTF-8 (empty for anything else).
std::string RgText(const Json& v) {
  if (const Json& t = Member(v, "text"); t.is_string()) return t.get<std::string>();
  if (const Json& b = Member(v, "bytes"); b.is_string())
    return RepairUtf8(DecodeBase64(b.get_ref<const std::string&>()));
  return {};
}

std::string StripDotSlash(std::string p) {
  if (p.rfind("./", 0) == 0) p.erase(0, 2);
  return p;
}

std::int64_t ResultCap(const ToolContext& ctx, const std::string& tool, const Json& in) {
  std::int64_t cap = ctx.policy.LimitsFor(tool).max_results;
  if (in.contains("max_results")) cap = std::min(cap, in["max_results"].get<std::int64_t>());
  return cap;
}

Result<Json> SearchText(const Json& in, ToolContext& ctx) {
  std::string rg = FindOnPath("rg");
  if (rg.empty())
    return Fail(Code::kSandboxUnavailable,
                "ripgrep (rg) is not installed (apt-get install ripgrep)");
  std::vector<std::string> argv = {rg, "--json", "--no-config", "--no-follow"};
  if (in.value("case_insensitive", false)) argv.push_back("--ignore-case");
  if (in.value("fixed_strings", false)) argv.push_back("--fixed-strings");
  if (in.value("include_hidden", false)) argv.push_back("--hidden");
  if (in.contains("context_lines")) {
    argv.insert(argv.end(), {"--context", std::to_string(in["context_lines"].get<int>())});
  }
  if (in.contains("glob")) argv.insert(argv.end(), {"--glob", in["glob"].get<std::string>()});
  for (const auto& e : in.value("extensions", Json::array())) {
    argv.insert(argv.end(), {"--glob", "*." + e.get<std::string>()});
  }
  argv.insert(argv.end(), {"-e", in["pattern"].get<std::string>(), "--", "."});
  const std::int64_t cap = ResultCap(ctx, "search_text", in);
  const std::size_t max_chars =
      static_cast<std::size_t>(ctx.policy.LimitsFor("search_text").max_line_chars);
  const std::size_t max_bytes =
      static_cast<std::size_t>(ctx.policy.LimitsFor("search_text").max_output_bytes);
  // Only a masked root in the workspace, or at or above it, can hide a path rg reports; with
  // none (the usual case: cordon's own files live elsewhere) no begin record needs parsing.
  std::vector<std::string> masked = ToolMaskedRoots(ctx);
  const std::string& root = ctx.workspace.root();
  std::erase_if(masked,
                [&](const std::string& m) { return !PathUnder(m, root) && !PathUnder(root, m); });
  Json records = Json::array();
  std::size_t bytes = 0;
  RgJsonStream::Handler handler;
  // One begin record per file with a match: files_with_matches counts them all, and a file the
  // tools hide (masked in the sandbox) has its matches neither counted nor named.
  handler.begin = [&](std::string_view line) {
    if (masked.empty()) return true;
    const Json ev = Json::parse(line, nullptr, false);
    return !HiddenFromTools(ctx, masked, StripDotSlash(RgText(Member(Member(ev, "data"), "path"))));
  };
  // Every access below is type-checked: rg's output is read inside the process's pump, where
  // nothing may throw.
  handler.record = [&](std::string_view line, bool is_match) {
    if (static_cast<std::int64_t>(records.size()) >= cap || bytes > max_bytes) return false;
    const Json ev = Json::parse(line, nullptr, false);
    const Json& d = Member(ev, "data");
    if (!d.is_object()) return true;
    std::string path = StripDotSlash(RgText(Member(d, "path")));
    if (HiddenFromTools(ctx, masked, path)) return true;  // masked in the sandbox; never named
    std::string text = RgText(Member(d, "lines"));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    bool cut = ctx.redactor != nullptr ? CutLineBefore(text, max_chars, *ctx.redactor)
                                       : CutLine(text, max_chars);
    Json subs = Json::array();
    if (const Json& found = Member(d, "submatches"); found.is_array()) {
      for (const auto& s : found) {
        const Json& start = Member(s, "start");
        if (!start.is_number_integer()) continue;
        subs.push_back(
            {{"text", RgText(Member(s, "match"))}, {"start", start}, {"end", Member(s, "end")}});
      }
    }
    const Json& line_no = Member(d, "line_number");
    Json rec = {{"kind", is_match ? "match" : "context"},
                {"path", path},
                {"line", line_no.is_number_integer() ? line_no : Json(0)},
                {"column", subs.empty() ? Json(nullptr) : Json(subs[0]["start"].get<int>() + 1)},
                {"text", text},
                {"line_cut", cut},
                {"submatches", subs}};
    bytes += text.size() + path.size() + 64;
    records.push_back(std::move(rec));
    return true;
  };
  RgJsonStream stream(std::move(handler), kMaxRgLine);
  ASSIGN_OR_RETURN(auto proc, RunReadOnly(ctx, "search_text", argv, &stream));
  ProcessOutcome o = proc->outcome();
  // The tool's time limit ended rg: what it wrote until then is counted, and said to be a part.
  const bool lower_bound = o.status == ProcessStatus::kTimeout;
  const std::string err = proc->StderrText();
  if (!lower_bound) {
    if (o.exit_code && *o.exit_code == 2 && err.find("regex") != std::string::npos) {
      return Fail(Code::kInvalidInput, "invalid pattern: " + Clip(ctx, err, 800));
    }
    if (!o.exit_code || (*o.exit_code != 0 && *o.exit_code != 1 && *o.exit_code != 2)) {
      return Fail(Code::kInternal,
                  "rg failed (" + StatusName(o.status) + "): " + Clip(ctx, err, 800));
    }
  }
  Json out = {{"matches", records},
              {"total_matches", stream.matches()},
              {"total_is_lower_bound", lower_bound},
              {"files_with_matches", stream.files()},
              {"truncated", lower_bound || stream.not_returned() > 0 || stream.long_lines() > 0},
              {"tool", "rg"}};
  // rg's exit 2: some paths could not be searched (unreadable, vanished). What it found stands,
  // and what it could not read is said: a silent zero would read as "no match".
  // A path the sandbox masks (cordon's own files, denied paths) is never named, here either:
  // rg's "Permission denied" lines for them are left out, and with nothing else there is nothing
  // to say (they are hidden by design).
  if (o.exit_code && *o.exit_code == 2 && !lower_bound) {
    std::string shown;
    std::size_t dropped = 0;
    for (std::size_t pos = 0; pos < err.size();) {
      std::size_t nl = err.find('\n', pos);
      if (nl == std::string::npos) nl = err.size();
      const std::string line = err.substr(pos, nl - pos);
      pos = nl + 1;
      if (line.empty()) continue;
      const std::size_t colon = line.find(": ");
      if (colon != std::string::npos &&
          HiddenFromTools(ctx, ToolMaskedRoots(ctx), StripDotSlash(line.substr(0, colon)))) {
        ++dropped;
        continue;
      }
      shown += line + "\n";
    }
    if (!shown.empty())
      out["errors"] = Clip(ctx, shown, 800);
    else if (dropped == 0)
      out["errors"] = "rg exited 2 without a message";
  }
  return out;
}

Json FilesOutput(const ToolContext& ctx, std::vector<std::string> files, std::int64_t cap,
                 bool truncated, const std::string& tool) {
  // What the sandbox masks (cordon's own files, denied paths) is not listed, even by name.
  const std::vector<std::string> masked = ToolMaskedRoots(ctx);
  std::erase_if(files, [&](const std::string& p) { return HiddenFromTools(ctx, masked, p); });
  std::sort(files.begin(), files.end());
  if (static_cast<std::int64_t>(files.size()) > cap) {
    files.resize(static_cast<std::size_t>(cap));
    truncated = true;
  }
  return Json{{"files", files}, {"count", files.size()}, {"truncated", truncated}, {"tool", tool}};
}

std::string FdBinary() {
  std::string fd = FindOnPath("fd");
  return fd.empty() ? FindOnPath("fdfind") : fd;
}

bool HiddenComponent(const std::string& rel) {
  std::size_t pos = 0;
  while (pos < rel.size()) {
    if (rel[pos] == '.') return true;
    std::size_t slash = rel.find('/', pos);
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return false;
}

// Lists files with find (the fallback): hidden paths pruned unless asked for.
Result<std::vector<std::string>> FindFallback(ToolContext& ctx, const std::string& tool,
                                              bool hidden, std::optional<int> depth,
                                              bool files_only, bool* truncated) {
  std::vector<std::string> argv = {"find", "."};
  argv.insert(argv.end(), {"-mindepth", "1"});
  if (depth) argv.insert(argv.end(), {"-maxdepth", std::to_string(*depth)});
  if (files_only) argv.insert(argv.end(), {"-type", "f"});
  argv.push_back("-print");
  ASSIGN_OR_RETURN(auto proc, RunReadOnly(ctx, tool, argv));
  *truncated = proc->Counts().stdout_dropped_bytes > 0;
  std::vector<std::string> out;
  const std::string stdout_text = proc->StdoutText();
  for (auto line : Lines(stdout_text)) {
    std::string p = StripDotSlash(std::string(line));
    if (p.empty() || (!hidden && HiddenComponent(p))) continue;
    out.push_back(p);
  }
  return out;
}

Result<Json> FindFiles(const Json& in, ToolContext& ctx) {
  const bool hidden = in.value("include_hidden", false);
  std::optional<int> depth;
  if (in.contains("max_depth")) depth = in["max_depth"].get<int>();
  const std::string pattern = in.value("pattern", "");
  // Both are compiled before anything runs, so a bad pattern is invalid_input for fd and find
  // alike; both match in linear time (tools/name_match.h).
  std::optional<NameMatcher> re;
  if (!pattern.empty()) {
    ASSIGN_OR_RETURN(auto m, NameMatcher::Regex(pattern));
    re.emplace(std::move(m));
  }
  std::optional<NameMatcher> glob;
  if (in.contains("glob")) {
    ASSIGN_OR_RETURN(auto m, NameMatcher::Glob(in["glob"].get<std::string>()));
    glob.emplace(std::move(m));
  }
  const std::int64_t cap = ResultCap(ctx, "find_files", in);
  bool truncated = false;
  std::vector<std::string> raw;
  std::string used;
  const std::string fd = FdBinary();
  if (!fd.empty()) {
    used = "fd";
    std::vector<std::string> argv = {fd, "--color", "never", "--no-follow"};
    argv.back() = in.value("follow_symlinks", false) ? "--follow" : "--no-follow";
    if (hidden) argv.push_back("--hidden");
    if (depth) argv.insert(argv.end(), {"--max-depth", std::to_string(*depth)});
    for (const auto& e : in.value("extensions", Json::array())) {
      argv.insert(argv.end(), {"--extension", e.get<std::string>()});
    }
    if (in.contains("glob")) {
      argv.insert(argv.end(), {"--glob", "--", in["glob"].get<std::string>(), "."});
    } else {
      argv.insert(argv.end(), {"--", pattern, "."});
    }
    ASSIGN_OR_RETURN(auto proc, RunReadOnly(ctx, "find_files", argv));
    ProcessOutcome o = proc->outcome();
    if (o.exit_code.value_or(1) != 0) {
      return Fail(Code::kInvalidInput, "fd failed: " + Clip(ctx, proc->StderrText(), 800));
    }
    truncated = proc->Counts().stdout_dropped_bytes > 0;
    const std::string stdout_text = proc->StdoutText();
    for (auto line : Lines(stdout_text)) raw.push_back(StripDotSlash(std::string(line)));
  } else {
    used = "find";
    ASSIGN_OR_RETURN(raw, FindFallback(ctx, "find_files", hidden, depth, false, &truncated));
  }
  std::vector<std::string> files;
  for (auto& p : raw) {
    if (p.empty()) continue;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    std::string base = p.substr(p.find_last_of('/') + 1);
    if (glob && !glob->Matches(base) && !glob->Matches(p)) continue;
    if (re && (used == "find" || glob) && !re->Matches(base)) continue;
    if (used == "find" && in.contains("extensions")) {
      bool ok = false;
      for (const auto& e : in["extensions"])
        ok = ok || (base.size() > e.get<std::string>().size() + 1 &&
                    base.ends_with("." + e.get<std::string>()));
      if (!ok) continue;
    }
    files.push_back(std::move(p));
  }
  return FilesOutput(ctx, std::move(files), cap, truncated, used);
}

Result<Json> ListSearchable(const Json& in, ToolContext& ctx) {
  const bool hidden = in.value("include_hidden", false);
  const std::int64_t cap = ResultCap(ctx, "list_searchable_files", in);
  std::vector<std::string> argv;
  std::string used;
  if (std::string fd = FdBinary(); !fd.empty()) {
    used = "fd";
    argv = {fd, "--type", "file", "--color", "never"};
    if (hidden) argv.push_back("--hidden");
    if (in.contains("glob")) {
      argv.insert(argv.end(), {"--glob", "--", in["glob"].get<std::string>(), "."});
    } else {
      argv.insert(argv.end(), {"--", ".", "."});
    }
  } else if (std::string rg = FindOnPath("rg"); !rg.empty()) {
    used = "rg";
    argv = {rg, "--files", "--no-config"};
    if (hidden) argv.push_back("--hidden");
    if (in.contains("glob")) argv.insert(argv.end(), {"--glob", in["glob"].get<std::string>()});
    argv.insert(argv.end(), {"--", "."});
  }
  bool truncated = false;
  std::vector<std::string> files;
  if (used.empty()) {
    used = "find";
    ASSIGN_OR_RETURN(
        files, FindFallback(ctx, "list_searchable_files", hidden, std::nullopt, true, &truncated));
    if (in.contains("glob")) {
      ASSIGN_OR_RETURN(auto glob, NameMatcher::Glob(in["glob"].get<std::string>()));
      std::erase_if(files, [&](const std::string& p) { return !glob.Matches(p); });
    }
  } else {
    ASSIGN_OR_RETURN(auto proc, RunReadOnly(ctx, "list_searchable_files", argv));
    if (proc->outcome().exit_code.value_or(2) > 1) {
      return Fail(Code::kInvalidInput, used + " failed: " + Clip(ctx, proc->StderrText(), 800));
    }
    truncated = proc->Counts().stdout_dropped_bytes > 0;
    const std::string stdout_text = proc->StdoutText();
    for (auto line : Lines(stdout_text)) {
      if (!line.empty()) files.push_back(StripDotSlash(std::string(line)));
    }
  }
  return FilesOutput(ctx, std::move(files), cap, truncated, used);
}

Json ExtensionsSchema() {
  return {{"type", "array"},
          {"maxItems", 64},
          {"items", {{"type", "string"}, {"minLength", 1}, {"maxLength", 32}}},
          {"description", "File extensions without the dot, e.g. [\"rs\", \"toml\"]."}};
}

Json FilesProperties() {
  return {{"files", {{"type", "array"}, {"items", {{"type", "string"}}}}},
          {"count", {{"type", "integer"}}},
          {"truncated", {{"type", "boolean"}}},
          {"tool", {{"type", "string"}}}};
}

}  // namespace

ToolSpec MakeSearchTextTool() {
  ToolSpec t;
  t.name = "search_text";
  t.description =
      "Search file contents in the workspace with ripgrep, returning structured match records "
      "{path, line, column, text, submatches}. Hidden and ignored files are skipped unless asked "
      "for; no matches is an empty result, not an error.";
  t.scope = "fs:read";
  t.effect = Effect::kProcess;
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"pattern",
         {{"type", "string"},
          {"minLength", 1},
          {"maxLength", 4096},
          {"description", "A regular expression (or a literal with fixed_strings)."}}},
        {"glob", {{"type", "string"}, {"minLength", 1}, {"maxLength", 1024}}},
        {"extensions", ExtensionsSchema()},
        {"context_lines", {{"type", "integer"}, {"minimum", 0}, {"maximum", 20}}},
        {"include_hidden", {{"type", "boolean"}}},
        {"max_results", {{"type", "integer"}, {"minimum", 1}, {"maximum", 100000}}},
        {"case_insensitive", {{"type", "boolean"}}},
        {"fixed_strings", {{"type", "boolean"}}}}},
      {"required", {"pattern"}},
      {"additionalProperties", false}};
  SetOutputSchemas(t,
                   {{"matches", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                    {"total_matches", {{"type", "integer"}}},
                    {"total_is_lower_bound", {{"type", "boolean"}}},
                    {"files_with_matches", {{"type", "integer"}}},
                    {"truncated", {{"type", "boolean"}}},
                    {"errors", {{"type", "string"}}},
                    {"tool", {{"type", "string"}}}},
                   {"matches", "total_matches", "total_is_lower_bound", "files_with_matches",
                    "truncated", "tool"});
  t.example = {{"pattern", "fn main"}, {"extensions", {"rs"}}};
  t.example_files = {{"src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n"}};
  t.run = SearchText;
  return t;
}

ToolSpec MakeFindFilesTool() {
  ToolSpec t;
  t.name = "find_files";
  t.description =
      "Find paths in the workspace by name: pattern is a regular expression on the file name, "
      "glob a shell glob. Uses fd (ignore files respected), falling back to find. Hidden files "
      "are left out unless include_hidden.";
  t.scope = "fs:read";
  t.effect = Effect::kProcess;
  t.input_schema = {{"type", "object"},
                    {"properties",
                     {{"pattern", {{"type", "string"}, {"maxLength", 1024}}},
                      {"glob", {{"type", "string"}, {"minLength", 1}, {"maxLength", 1024}}},
                      {"extensions", ExtensionsSchema()},
                      {"max_depth", {{"type", "integer"}, {"minimum", 1}, {"maximum", 64}}},
                      {"include_hidden", {{"type", "boolean"}}},
                      {"follow_symlinks", {{"type", "boolean"}}},
                      {"max_results", {{"type", "integer"}, {"minimum", 1}, {"maximum", 100000}}}}},
                    {"additionalProperties", false}};
  SetOutputSchemas(t, FilesProperties(), {"files", "count", "truncated", "tool"});
  t.example = {{"pattern", "main"}, {"extensions", {"c"}}};
  t.example_files = {{"src/main.c", "int main(void) { return 0; }\n"}, {"src/util.c", "\n"}};
  t.run = FindFiles;
  return t;
}

ToolSpec MakeListSearchableFilesTool() {
  ToolSpec t;
  t.name = "list_searchable_files";
  t.description =
      "List the files that are reasonable candidates for content search (fd --type file, "
      "rg --files, or find, in that order); hidden and ignored files are left out by default.";
  t.scope = "fs:read";
  t.effect = Effect::kProcess;
  t.input_schema = {{"type", "object"},
                    {"properties",
                     {{"glob", {{"type", "string"}, {"minLength", 1}, {"maxLength", 1024}}},
                      {"include_hidden", {{"type", "boolean"}}},
                      {"max_results", {{"type", "integer"}, {"minimum", 1}, {"maximum", 100000}}}}},
                    {"additionalProperties", false}};
  SetOutputSchemas(t, FilesProperties(), {"files", "count", "truncated", "tool"});
  t.example = {{"glob", "*.md"}};
  t.example_files = {
      {"README.md", "# x\n"}, {"docs/guide.md", "guide\n"}, {"main.go", "package main\n"}};
  t.run = ListSearchable;
  return t;
}

}  // namespace cordon
