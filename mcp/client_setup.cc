// cordon setup's edit of an MCP client's configuration file: JSON through an order-keeping parse
// and dump, Codex's TOML as text (toml++ drops comments), checked by parsing the result again.
#include "mcp/client_setup.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "policy/toml_parse.h"

namespace cordon::mcp {
namespace {

using OJson = nlohmann::ordered_json;

struct ClientInfo {
  Client client;
  std::string_view name;
};
constexpr std::array<ClientInfo, 5> kClients = {{
    {Client::kClaudeCode, "claude-code"},
    {Client::kClaudeDesktop, "claude-desktop"},
    {Client::kVsCode, "vscode"},
    {Client::kCursor, "cursor"},
    {Client::kCodex, "codex"},
}};

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }
// A command line for a message: the words with spaces between.
std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::string_view Basename(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Whether a server's command is cordon: "cordon" or a path ending in /cordon.
bool IsCordon(std::string_view command) { return Basename(command) == "cordon"; }

// What the client starts for an entry: (command, args), and how it goes through cordon.
std::vector<std::string> ServeArgs(const SetupRequest& r) {
  std::vector<std::string> out = {"serve", "--workspace", r.workspace};
  out.insert(out.end(), r.flags.begin(), r.flags.end());
  return out;
}
// Whether an entry runs `cordon serve`: one that setup wrote (or a person wrote the same way),
// which an add updates rather than refuses.
bool IsServe(std::string_view command, const std::vector<std::string>& args) {
  return IsCordon(command) && !args.empty() && args.front() == "serve";
}
// The egress preset a launcher that downloads its server as it starts needs (cordon wrap refuses
// it at once without network): npx and the like fetch from npm, uvx and pipx run from PyPI.
std::string SetupLauncherPreset(const std::string& command, const std::vector<std::string>& args) {
  const std::string_view tool = Basename(command);
  auto arg = [&](std::size_t i) { return i < args.size() ? args[i] : std::string(); };
  if (tool == "npx" || tool == "bunx" || (tool == "npm" && (arg(0) == "exec" || arg(0) == "x")) ||
      (tool == "bun" && arg(0) == "x") || ((tool == "pnpm" || tool == "yarn") && arg(0) == "dlx"))
    return "npm";
  if (tool == "uvx" || (tool == "uv" && arg(0) == "tool" && arg(1) == "run") ||
      (tool == "pipx" && arg(0) == "run"))
    return "pypi";
  return {};
}

// Whether `flags` (setup's checked flags, as written) hold FLAG followed by VALUE ("" : any).
bool HasFlag(const std::vector<std::string>& flags, std::string_view flag,
             std::string_view value = {}) {
  for (std::size_t i = 0; i + 1 < flags.size(); i += 2) {
    if (flags[i] == flag && (value.empty() || flags[i + 1] == value)) return true;
  }
  return false;
}
// cordon wrap's args for a server: the workspace, the caller's flags, and the server's own
// command after "--". A launcher that downloads its server as it starts gets its registry's
// preset, unless the caller chose the network (--network, or that preset) themselves.
std::vector<std::string> WrapArgs(const SetupRequest& r, const std::string& command,
                                  const std::vector<std::string>& args,
                                  std::vector<std::string>& notes) {
  std::vector<std::string> out = {"wrap", "--workspace", r.workspace};
  if (const std::string preset = SetupLauncherPreset(command, args); !preset.empty()) {
    const std::string launcher(Basename(command));
    if (!HasFlag(r.flags, "--network") && !HasFlag(r.flags, "--allow-preset", preset)) {
      out.insert(out.end(), {"--allow-preset", preset});
      notes.push_back(launcher + " downloads the server as it starts: --allow-preset " + preset +
                      " lets it reach that registry (and nothing else) through cordon's proxy; "
                      "install the server once and wrap the installed program to run it without "
                      "network");
    } else if (!HasFlag(r.flags, "--allow-preset", preset) &&
               !HasFlag(r.flags, "--network", "allow")) {
      notes.push_back(launcher +
                      " downloads the server as it starts, and the network given "
                      "does not include --allow-preset " +
                      preset +
                      ": unless the server is cached or another rule lets it reach the registry, "
                      "cordon wrap will refuse to start it and say so");
    }
  }
  out.insert(out.end(), r.flags.begin(), r.flags.end());
  out.push_back("--");
  out.push_back(command);
  out.insert(out.end(), args.begin(), args.end());
  return out;
}
bool IsWrapped(std::string_view command, const std::vector<std::string>& args) {
  return IsCordon(command) && !args.empty() && args.front() == "wrap";
}
// The wrapped server's own (command, args): what follows "--" in cordon wrap's args.
Result<std::pair<std::string, std::vector<std::string>>> Unwrapped(
    const std::vector<std::string>& args, const std::string& what) {
  auto dd = std::find(args.begin(), args.end(), "--");
  if (dd == args.end() || dd + 1 == args.end())
    return Fail(Code::kInvalidInput,
                what + " runs cordon wrap without a command after \"--\"; edit it by hand");
  return std::make_pair(*(dd + 1), std::vector<std::string>(dd + 2, args.end()));
}

// The args that wrap an entry's server, or none when the entry needs no change (edit.summary says
// why). An entry wrapped already stays as it is, unless this run gives flags: then its wrap's own
// arguments become this run's, the server's command after "--" kept, as a rerun of an add updates
// cordon serve's.
Result<std::optional<std::vector<std::string>>> WrapEntry(const SetupRequest& r,
                                                          const std::string& command,
                                                          const std::vector<std::string>& args,
                                                          const std::string& what,
                                                          SetupEdit& edit) {
  if (IsWrapped(command, args)) {
    if (r.flags.empty()) {
      edit.summary = what + " runs through cordon wrap already; nothing changed";
      return std::optional<std::vector<std::string>>();
    }
    ASSIGN_OR_RETURN(auto own, Unwrapped(args, what));
    std::vector<std::string> notes;
    std::vector<std::string> wrap = WrapArgs(r, own.first, own.second, notes);
    if (wrap == args) {
      edit.summary = what + " runs through cordon wrap with these flags already; nothing changed";
      return std::optional<std::vector<std::string>>();
    }
    edit.notes.insert(edit.notes.end(), notes.begin(), notes.end());
    edit.summary = "updated " + what + ": it runs cordon " + Joined(wrap);
    return std::optional(std::move(wrap));
  }
  if (IsCordon(command))
    return Fail(Code::kInvalidInput, what + " is cordon itself; there is nothing to wrap");
  edit.summary = "wrapped " + what + ": it runs through cordon wrap";
  return std::optional(WrapArgs(r, command, args, edit.notes));
}

std::string NoServer(const std::string& name, const std::string& source,
                     const std::vector<std::string>& names) {
  std::string msg = source + " has no server " + Quoted(name);
  if (names.empty()) return msg + " (it has no servers)";
  msg += " (its servers:";
  for (const auto& n : names) msg += " " + n;
  return msg + ")";
}

// --- JSON: Claude Code, Claude Desktop, Cursor ("mcpServers") and VS Code ("servers").

struct Indent {
  int width = 2;
  char ch = ' ';
};
// The indentation the file uses: that of its first indented line (2 spaces when none is).
Indent DetectIndent(std::string_view text) {
  for (std::size_t nl = text.find('\n'); nl != std::string_view::npos;
       nl = text.find('\n', nl + 1)) {
    std::size_t i = nl + 1;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i > nl + 1 && i < text.size() && text[i] != '\n' && text[i] != '\r')
      return {static_cast<int>(i - nl - 1), text[nl + 1]};
  }
  return {};
}

bool Blank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

Result<std::vector<std::string>> StringArray(const OJson& v, const std::string& what) {
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (!v.is_array()) return Fail(Code::kInvalidInput, what + ": \"args\" is not an array");
  for (const auto& a : v) {
    if (!a.is_string())
      return Fail(Code::kInvalidInput, what + ": \"args\" holds a value that is not a string");
    out.push_back(a.get<std::string>());
  }
  return out;
}

Result<OJson> ParseOrderedJsonFile(std::string_view text, const std::string& source) {
  if (Blank(text)) return OJson::object();
  OJson doc = OJson::parse(text, nullptr, false);
  if (!doc.is_discarded()) {
    if (!doc.is_object())
      return Fail(Code::kInvalidInput, source +
                                           ": the top level is not a JSON object; nothing "
                                           "written");
    return doc;
  }
  if (!OJson::parse(text, nullptr, false, /*ignore_comments=*/true).is_discarded())
    return Fail(Code::kInvalidInput,
                source +
                    " has comments, which cordon would not keep: nothing written; add the "
                    "entry by hand (--dry-run on a copy without comments prints it)");
  std::string why = "not JSON";
  try {
    const OJson strict = OJson::parse(text);
    (void)strict;
  } catch (const OJson::parse_error& e) {
    why = e.what();
  }
  return Fail(Code::kInvalidInput, source + " is not valid JSON (" + why +
                                       "): nothing written; fix it, or move it away to start anew");
}

Result<SetupEdit> EditJson(Client client, std::string_view text, const std::string& source,
                           const SetupRequest& r) {
  ASSIGN_OR_RETURN(OJson doc, ParseOrderedJsonFile(text, source));
  const std::string key = client == Client::kVsCode ? "servers" : "mcpServers";
  if (doc.contains(key) && !doc[key].is_object())
    return Fail(Code::kInvalidInput,
                source + ": \"" + key + "\" is not an object; nothing written");
  std::vector<std::string> names;
  if (doc.contains(key)) {
    for (const auto& [n, v] : doc[key].items()) names.push_back(n);
  }
  OJson* entry = doc.contains(key) && doc[key].contains(r.name) ? &doc[key][r.name] : nullptr;
  const std::string what = "server " + Quoted(r.name) + " in " + source;
  if (entry != nullptr && !entry->is_object())
    return Fail(Code::kInvalidInput, what + " is not an object; nothing written");
  SetupEdit edit;
  auto command_of = [&]() -> std::string {
    return entry->contains("command") && (*entry)["command"].is_string()
               ? (*entry)["command"].get<std::string>()
               : std::string();
  };
  switch (r.action) {
    case SetupAction::kAdd: {
      OJson want = OJson::object();
      if (client == Client::kVsCode) want["type"] = "stdio";
      want["command"] = r.cordon_command;
      want["args"] = ServeArgs(r);
      if (entry != nullptr && *entry == want) {
        edit.summary = what + " is already there; nothing changed";
        break;
      }
      auto args = entry != nullptr && entry->contains("args") ? StringArray((*entry)["args"], what)
                                                              : Result<std::vector<std::string>>();
      std::string extra;  // keys beyond what setup writes (env, cwd, envFile, ...)
      if (entry != nullptr && entry->is_object()) {
        for (const auto& [k, v] : entry->items()) {
          if (k != "type" && k != "command" && k != "args")
            extra += (extra.empty() ? "" : ", ") + k;
        }
      }
      if (entry != nullptr && args && IsServe(command_of(), *args)) {
        // cordon's own entry: its command and args follow this run; its other keys stay.
        OJson updated = *entry;
        for (const auto& [k, v] : want.items()) updated[k] = v;
        if (updated == *entry) {
          edit.summary = what + " is already there; nothing changed";
          break;
        }
        if (!extra.empty() && !r.force) {
          // A "cordon serve" entry this run did not write whole (a cloned project's .mcp.json
          // may carry one): its other keys are not adopted unseen.
          return Fail(Code::kAlreadyExists,
                      what + " runs cordon serve but also sets " + extra + " (" + entry->dump() +
                          "); check them, then --force updates its command and args and keeps "
                          "them");
        }
        *entry = std::move(updated);
        edit.summary = "updated " + what + ": it runs cordon " + Joined(ServeArgs(r));
        edit.changed = true;
        break;
      }
      if (entry != nullptr && !r.force)
        return Fail(Code::kAlreadyExists,
                    what + " has another definition (" + entry->dump() +
                        "); --force replaces it, --name NAME adds cordon under another name");
      edit.summary = (entry != nullptr ? "replaced " : "added ") + what;
      if (entry != nullptr) {
        *entry = want;
      } else {
        if (!doc.contains(key)) doc[key] = OJson::object();
        doc[key][r.name] = want;
      }
      edit.changed = true;
      break;
    }
    case SetupAction::kRemove: {
      if (entry == nullptr) {
        edit.summary = NoServer(r.name, source, names) + "; nothing changed";
        break;
      }
      if (!IsCordon(command_of()) && !r.force)
        return Fail(Code::kInvalidInput, what + " does not run cordon (command " +
                                             Quoted(command_of()) +
                                             "); --force removes it all the same");
      doc[key].erase(r.name);
      edit.summary = "removed " + what;
      edit.changed = true;
      break;
    }
    case SetupAction::kWrap:
    case SetupAction::kUnwrap: {
      if (entry == nullptr) return Fail(Code::kNotFound, NoServer(r.name, source, names));
      const std::string command = command_of();
      if (command.empty() ||
          (entry->contains("type") && (*entry)["type"] != "stdio" && (*entry)["type"] != ""))
        return Fail(Code::kInvalidInput,
                    what + " has no \"command\" (a URL server?): cordon wrap runs stdio servers");
      ASSIGN_OR_RETURN(auto args,
                       StringArray(entry->contains("args") ? (*entry)["args"] : OJson(), what));
      const bool wrapped = IsWrapped(command, args);
      if (r.action == SetupAction::kWrap) {
        ASSIGN_OR_RETURN(auto wrap, WrapEntry(r, command, args, what, edit));
        if (!wrap) break;
        (*entry)["command"] = r.cordon_command;
        (*entry)["args"] = std::move(*wrap);
      } else {
        if (!wrapped) {
          edit.summary = what + " does not run through cordon wrap; nothing changed";
          break;
        }
        ASSIGN_OR_RETURN(auto own, Unwrapped(args, what));
        (*entry)["command"] = own.first;
        (*entry)["args"] = own.second;
        edit.summary = "unwrapped " + what + ": it runs " + own.first + " again";
      }
      edit.changed = true;
      break;
    }
  }
  if (!edit.changed) {
    edit.text = std::string(text);
    return edit;
  }
  const Indent indent = DetectIndent(text);
  const bool newline = Blank(text) || text.back() == '\n';
  edit.text = doc.dump(indent.width, indent.ch) + (newline ? "\n" : "");
  return edit;
}

// --- TOML: Codex CLI's [mcp_servers.NAME] tables.

std::string TomlString(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string TomlKey(std::string_view k) {
  const bool bare = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return bare ? std::string(k) : TomlString(k);
}

// A value as TOML text, tables inline.
std::string TomlValue(const toml::node& n) {
  if (const auto* s = n.as_string()) return TomlString(s->get());
  if (const auto* a = n.as_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < a->size(); ++i) out += (i ? ", " : "") + TomlValue(*a->get(i));
    return out + "]";
  }
  if (const auto* t = n.as_table()) {
    if (t->empty()) return "{}";
    std::string out = "{ ";
    bool first = true;
    for (auto&& [k, v] : *t) {
      out += (first ? "" : ", ") + TomlKey(k.str()) + " = " + TomlValue(v);
      first = false;
    }
    return out + " }";
  }
  std::ostringstream os;
  n.visit([&](const auto& v) { os << v; });
  return os.str();
}

toml::array TomlStrings(const std::vector<std::string>& v) {
  toml::array a;
  for (const auto& s : v) a.push_back(s);
  return a;
}

Result<std::vector<std::string>> TomlStringArray(const toml::table& entry,
                                                 const std::string& what) {
  std::vector<std::string> out;
  const toml::node* n = entry.get("args");
  if (n == nullptr) return out;
  const toml::array* a = n->as_array();
  if (a == nullptr) return Fail(Code::kInvalidInput, what + ": args is not an array");
  for (const auto& x : *a) {
    if (!x.is_string())
      return Fail(Code::kInvalidInput, what + ": args holds a value that is not a string");
    out.push_back(*x.value<std::string>());
  }
  return out;
}

// The dotted key of a table header line ("[a.b]" or "[[a.b]]"), or nothing for any other line.
std::optional<std::vector<std::string>> HeaderKeys(std::string_view line) {
  std::size_t i = line.find_first_not_of(" \t");
  if (i == std::string_view::npos || line[i] != '[') return std::nullopt;
  const bool array = i + 1 < line.size() && line[i + 1] == '[';
  i += array ? 2 : 1;
  std::vector<std::string> keys;
  auto ws = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  };
  for (;;) {
    ws();
    if (i >= line.size()) return std::nullopt;
    std::string key;
    if (line[i] == '"' || line[i] == '\'') {
      const char q = line[i++];
      for (; i < line.size() && line[i] != q; ++i) {
        if (q == '"' && line[i] == '\\') {
          if (++i >= line.size()) return std::nullopt;
          const char e = line[i];
          key += e == 'n' ? '\n' : e == 't' ? '\t' : e;
          continue;
        }
        key += line[i];
      }
      if (i >= line.size()) return std::nullopt;
      ++i;
    } else {
      while (i < line.size() && line[i] != '.' && line[i] != ']' && line[i] != ' ' &&
             line[i] != '\t')
        key += line[i++];
      if (key.empty()) return std::nullopt;
    }
    keys.push_back(std::move(key));
    ws();
    if (i < line.size() && line[i] == '.') {
      ++i;
      continue;
    }
    if (i < line.size() && line[i] == ']') break;
    return std::nullopt;
  }
  i += array ? 2 : 1;
  ws();
  if (i < line.size() && line[i] != '#') return std::nullopt;
  return keys;
}

std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    lines.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

bool BlankLine(std::string_view l) { return l.find_first_not_of(" \t\r") == std::string::npos; }
bool CommentLine(std::string_view l) {
  const auto i = l.find_first_not_of(" \t");
  return i != std::string_view::npos && l[i] == '#';
}

// The lines of the table `[mcp_servers.NAME]` (main) and of its sub-tables, each from its header
// to the next header, less the blank and comment lines before that header.
struct TomlSpans {
  std::optional<std::pair<std::size_t, std::size_t>> main;
  std::vector<std::pair<std::size_t, std::size_t>> subs;
  bool main_has_comments = false;
};
TomlSpans FindEntrySpans(const std::vector<std::string>& lines, const std::string& name) {
  // Header lines, skipping those inside multi-line strings (a line with an odd count of """ or
  // ''' opens or closes one; the parse of the result checks what this cannot).
  std::vector<std::pair<std::size_t, std::vector<std::string>>> headers;
  bool in_string = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!in_string) {
      if (auto keys = HeaderKeys(lines[i])) headers.emplace_back(i, std::move(*keys));
    }
    std::size_t count = 0;
    for (std::size_t at = 0; (at = lines[i].find("\"\"\"", at)) != std::string::npos; at += 3)
      ++count;
    for (std::size_t at = 0; (at = lines[i].find("'''", at)) != std::string::npos; at += 3) ++count;
    if (count % 2 == 1) in_string = !in_string;
  }
  TomlSpans spans;
  for (std::size_t h = 0; h < headers.size(); ++h) {
    const auto& keys = headers[h].second;
    if (keys.size() < 2 || keys[0] != "mcp_servers" || keys[1] != name) continue;
    const std::size_t begin = headers[h].first;
    std::size_t end = h + 1 < headers.size() ? headers[h + 1].first : lines.size();
    while (end > begin + 1 && (BlankLine(lines[end - 1]) || CommentLine(lines[end - 1]))) --end;
    if (keys.size() == 2) {
      spans.main = {begin, end};
      for (std::size_t i = begin + 1; i < end; ++i)
        spans.main_has_comments |= CommentLine(lines[i]) || lines[i].find('#') != std::string::npos;
    } else {
      spans.subs.emplace_back(begin, end);
    }
  }
  return spans;
}

// The table's text: its header, command and args first, then its other values (tables inline);
// tables that have headers of their own in the file (`keep_headed`) are left to those.
std::vector<std::string> TomlEntryLines(const std::string& name, const toml::table& entry,
                                        bool keep_headed) {
  std::vector<std::string> out = {"[mcp_servers." + TomlKey(name) + "]"};
  for (const char* first : {"command", "args"}) {
    if (const toml::node* n = entry.get(first))
      out.push_back(std::string(first) + " = " + TomlValue(*n));
  }
  for (auto&& [k, v] : entry) {
    if (k.str() == "command" || k.str() == "args") continue;
    if (keep_headed && v.is_table() && !v.as_table()->is_inline()) continue;
    out.push_back(TomlKey(k.str()) + " = " + TomlValue(v));
  }
  return out;
}

toml::table WithoutEntry(toml::table t, const std::string& name) {
  if (toml::table* servers = t["mcp_servers"].as_table()) {
    servers->erase(name);
    if (servers->empty()) t.erase("mcp_servers");
  }
  return t;
}

Result<SetupEdit> EditToml(std::string_view text, const std::string& source,
                           const SetupRequest& r) {
  ASSIGN_OR_RETURN(toml::table before, ParseToml(text, source));
  const std::string what = "server " + Quoted(r.name) + " in " + source;
  const toml::node* servers_node = before.get("mcp_servers");
  if (servers_node != nullptr && !servers_node->is_table())
    return Fail(Code::kInvalidInput, source + ": mcp_servers is not a table; nothing written");
  const toml::table* servers = servers_node != nullptr ? servers_node->as_table() : nullptr;
  if (servers != nullptr && servers->is_inline())
    return Fail(Code::kInvalidInput, source +
                                         ": mcp_servers is an inline table, which cordon "
                                         "does not rewrite; edit it by hand");
  std::vector<std::string> names;
  if (servers != nullptr) {
    for (auto&& [k, v] : *servers) names.emplace_back(k.str());
  }
  const toml::node* entry_node = servers != nullptr ? servers->get(r.name) : nullptr;
  if (entry_node != nullptr && !entry_node->is_table())
    return Fail(Code::kInvalidInput, what + " is not a table; nothing written");
  const toml::table* entry = entry_node != nullptr ? entry_node->as_table() : nullptr;

  SetupEdit edit;
  edit.text = std::string(text);
  std::optional<toml::table> want;  // the entry after the edit; nothing: it goes
  bool keep_subtables = false;
  const std::string command = entry != nullptr
                                  ? entry->get("command") != nullptr
                                        ? entry->get("command")->value_or(std::string())
                                        : std::string()
                                  : std::string();
  switch (r.action) {
    case SetupAction::kAdd: {
      toml::table t;
      t.insert("command", r.cordon_command);
      t.insert("args", TomlStrings(ServeArgs(r)));
      if (entry != nullptr && *entry == t) {
        edit.summary = what + " is already there; nothing changed";
        return edit;
      }
      auto args =
          entry != nullptr ? TomlStringArray(*entry, what) : Result<std::vector<std::string>>();
      std::string extra;  // keys and sub-tables beyond what setup writes
      if (entry != nullptr) {
        for (const auto& [k, v] : *entry) {
          if (k.str() != "command" && k.str() != "args")
            extra += (extra.empty() ? "" : ", ") + std::string(k.str());
        }
      }
      if (entry != nullptr && args && IsServe(command, *args)) {
        // cordon's own entry: its command and args follow this run; its other keys (and
        // sub-tables) stay.
        toml::table updated = *entry;
        updated.insert_or_assign("command", r.cordon_command);
        updated.insert_or_assign("args", TomlStrings(ServeArgs(r)));
        if (updated == *entry) {
          edit.summary = what + " is already there; nothing changed";
          return edit;
        }
        if (!extra.empty() && !r.force) {
          return Fail(Code::kAlreadyExists,
                      what + " runs cordon serve but also sets " + extra +
                          "; check them, then --force updates its command and args and keeps "
                          "them");
        }
        edit.summary = "updated " + what + ": it runs cordon " + Joined(ServeArgs(r));
        want = std::move(updated);
        keep_subtables = true;
        break;
      }
      if (entry != nullptr && !r.force)
        return Fail(Code::kAlreadyExists,
                    what +
                        " has another definition; --force replaces it, --name NAME adds "
                        "cordon under another name");
      edit.summary = (entry != nullptr ? "replaced " : "added ") + what;
      want = std::move(t);
      break;
    }
    case SetupAction::kRemove:
      if (entry == nullptr) {
        edit.summary = NoServer(r.name, source, names) + "; nothing changed";
        return edit;
      }
      if (!IsCordon(command) && !r.force)
        return Fail(Code::kInvalidInput, what + " does not run cordon (command " + Quoted(command) +
                                             "); --force removes it all the same");
      edit.summary = "removed " + what;
      break;
    case SetupAction::kWrap:
    case SetupAction::kUnwrap: {
      if (entry == nullptr) return Fail(Code::kNotFound, NoServer(r.name, source, names));
      if (command.empty())
        return Fail(Code::kInvalidInput,
                    what + " has no command (a URL server?): cordon wrap runs stdio servers");
      ASSIGN_OR_RETURN(auto args, TomlStringArray(*entry, what));
      const bool wrapped = IsWrapped(command, args);
      toml::table t = *entry;
      if (r.action == SetupAction::kWrap) {
        ASSIGN_OR_RETURN(auto wrap, WrapEntry(r, command, args, what, edit));
        if (!wrap) return edit;
        t.insert_or_assign("command", r.cordon_command);
        t.insert_or_assign("args", TomlStrings(*wrap));
      } else {
        if (!wrapped) {
          edit.summary = what + " does not run through cordon wrap; nothing changed";
          return edit;
        }
        ASSIGN_OR_RETURN(auto own, Unwrapped(args, what));
        t.insert_or_assign("command", own.first);
        t.insert_or_assign("args", TomlStrings(own.second));
        edit.summary = "unwrapped " + what + ": it runs " + own.first + " again";
      }
      want = std::move(t);
      keep_subtables = true;
      break;
    }
  }

  std::vector<std::string> lines = SplitLines(text);
  const TomlSpans spans = FindEntrySpans(lines, r.name);
  if (entry != nullptr && !spans.main)
    return Fail(Code::kInvalidInput, what + " is not written as a [mcp_servers." + TomlKey(r.name) +
                                         "] table (dotted keys or an inline table), which cordon "
                                         "does not rewrite; edit it by hand");
  if (spans.main_has_comments && want)
    edit.notes.push_back("the comments inside [mcp_servers." + TomlKey(r.name) +
                         "] are not kept (the rest of the file is unchanged)");
  // Replace the main table in place (or drop it), drop the sub-tables unless they stay, and
  // append a new table at the end.
  std::vector<std::pair<std::size_t, std::size_t>> drop;
  if (spans.main) drop.push_back(*spans.main);
  if (!keep_subtables) drop.insert(drop.end(), spans.subs.begin(), spans.subs.end());
  std::sort(drop.begin(), drop.end());
  const std::vector<std::string> table =
      want ? TomlEntryLines(r.name, *want, keep_subtables) : std::vector<std::string>{};
  std::vector<std::string> out;
  std::size_t next = 0;
  for (const auto& [begin, end] : drop) {
    out.insert(out.end(), lines.begin() + static_cast<long>(next),
               lines.begin() + static_cast<long>(begin));
    if (spans.main && begin == spans.main->first) out.insert(out.end(), table.begin(), table.end());
    next = end;
    // A removed table leaves no double blank line behind.
    if (!(spans.main && begin == spans.main->first && want)) {
      while (next < lines.size() && BlankLine(lines[next]) &&
             (out.empty() || BlankLine(out.back())))
        ++next;
    }
  }
  out.insert(out.end(), lines.begin() + static_cast<long>(next), lines.end());
  if (want && !spans.main) {
    while (!out.empty() && BlankLine(out.back())) out.pop_back();
    if (!out.empty()) out.emplace_back();
    out.insert(out.end(), table.begin(), table.end());
  }
  while (!out.empty() && BlankLine(out.back())) out.pop_back();
  std::string result;
  for (const auto& l : out) result += l + "\n";

  // The result must say what was meant and nothing else: parsed again and compared.
  auto after = ParseToml(result, source);
  const toml::node* got = after ? after->at_path("mcp_servers").as_table() != nullptr
                                      ? after->at_path("mcp_servers").as_table()->get(r.name)
                                      : nullptr
                                : nullptr;
  const bool same_rest = after && WithoutEntry(before, r.name) == WithoutEntry(*after, r.name);
  const bool entry_right =
      after &&
      (want ? got != nullptr && got->is_table() && *got->as_table() == *want : got == nullptr);
  if (!same_rest || !entry_right)
    return Fail(Code::kInternal, "cordon cannot edit " + source +
                                     " as text without changing more than " + what +
                                     "; nothing written; edit it by hand");
  edit.text = std::move(result);
  edit.changed = true;
  return edit;
}

}  // namespace

std::string_view ClientName(Client client) {
  for (const auto& c : kClients) {
    if (c.client == client) return c.name;
  }
  return "?";
}

std::optional<Client> ParseClient(std::string_view name) {
  for (const auto& c : kClients) {
    if (c.name == name) return c.client;
  }
  return std::nullopt;
}

std::vector<std::string> ClientNames() {
  std::vector<std::string> out;
  for (const auto& c : kClients) out.emplace_back(c.name);
  return out;
}

bool ClientUsesToml(Client client) { return client == Client::kCodex; }

Result<std::string> ClientConfigPath(Client client, ConfigScope scope,
                                     const std::string& project_dir, const ConfigDirs& dirs) {
  const bool project = scope == ConfigScope::kProject;
  if (!project && dirs.home.empty())
    return Fail(Code::kInvalidInput, "HOME is not set: cannot find " +
                                         std::string(ClientName(client)) +
                                         "'s user configuration (--file PATH names it)");
  const std::string config =
      !dirs.xdg_config_home.empty() ? dirs.xdg_config_home : dirs.home + "/.config";
  switch (client) {
    case Client::kClaudeCode:
      return project ? project_dir + "/.mcp.json" : dirs.home + "/.claude.json";
    case Client::kClaudeDesktop:
      if (project)
        return Fail(Code::kInvalidInput,
                    "claude-desktop has no project configuration: use --user (" + config +
                        "/Claude/claude_desktop_config.json)");
      return config + "/Claude/claude_desktop_config.json";
    case Client::kVsCode:
      return project ? project_dir + "/.vscode/mcp.json" : config + "/Code/User/mcp.json";
    case Client::kCursor:
      return project ? project_dir + "/.cursor/mcp.json" : dirs.home + "/.cursor/mcp.json";
    case Client::kCodex: {
      const std::string home = !dirs.codex_home.empty() ? dirs.codex_home : dirs.home + "/.codex";
      if (project)
        return Fail(Code::kInvalidInput, "codex keeps its MCP servers in the user's " + home +
                                             "/config.toml: use --user");
      return home + "/config.toml";
    }
  }
  return Fail(Code::kInternal, "unknown client");
}

Result<SetupEdit> EditClientConfig(Client client, std::string_view text, const std::string& source,
                                   const SetupRequest& request) {
  if (request.name.empty()) return Fail(Code::kInvalidInput, "the server name is empty");
  if (ClientUsesToml(client)) return EditToml(text, source, request);
  return EditJson(client, text, source, request);
}

std::string UnifiedDiff(std::string_view before, std::string_view after, const std::string& path) {
  const std::vector<std::string> a = SplitLines(before), b = SplitLines(after);
  std::size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  std::size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix])
    ++suffix;
  if (prefix == a.size() && prefix == b.size()) return {};
  const std::size_t ctx = 3;
  const std::size_t start = prefix > ctx ? prefix - ctx : 0;
  const std::size_t tail = std::min(suffix, ctx);
  const std::size_t a_end = a.size() - suffix + tail, b_end = b.size() - suffix + tail;
  auto range = [](std::size_t from, std::size_t count) {
    return std::to_string(count == 0 ? from : from + 1) + "," + std::to_string(count);
  };
  std::string out = "--- " + (before.empty() ? std::string("/dev/null") : path) + "\n+++ " + path +
                    "\n@@ -" + range(start, a_end - start) + " +" + range(start, b_end - start) +
                    " @@\n";
  for (std::size_t i = start; i < prefix; ++i) out += " " + a[i] + "\n";
  for (std::size_t i = prefix; i < a.size() - suffix; ++i) out += "-" + a[i] + "\n";
  for (std::size_t i = prefix; i < b.size() - suffix; ++i) out += "+" + b[i] + "\n";
  for (std::size_t i = a.size() - suffix; i < a_end; ++i) out += " " + a[i] + "\n";
  return out;
}

}  // namespace cordon::mcp
