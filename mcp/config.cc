// mcp.toml / .mcp.json loading with thndrs' keys, ${NAME} expansion and trust records.
#include "mcp/config.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/hash.h"
#include "core/redact.h"
#include "policy/toml_parse.h"

namespace cordon::mcp {

Result<Json> ParseJsonFile(std::string_view text, const std::string& path) {
  auto parsed = ParseJsonBounded(text);
  if (parsed) return parsed;
  // Name the file, and the line and column where the parser stopped, as a compiler would:
  // "malformed JSON" alone leaves the user to guess which config it was and where.
  Error e = parsed.error();
  std::string where = path;
  try {
    Json unused = Json::parse(text);  // only for the exception's byte offset
  } catch (const Json::parse_error& pe) {
    std::size_t line = 1, column = 1;
    const std::size_t end = std::min<std::size_t>(pe.byte > 0 ? pe.byte - 1 : 0, text.size());
    for (std::size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    where += ":" + std::to_string(line) + ":" + std::to_string(column);
    // nlohmann's own "[json.exception.parse_error.101] parse error at line L, column C: "
    // prefix says again what the location above says.
    const std::string what = pe.what();
    const std::size_t colon = what.find(": ", what.find("parse error"));
    e.message = "malformed JSON: " + (colon == std::string::npos ? what : what.substr(colon + 2));
  } catch (const Json::exception&) {
    // not a syntax error (a number out of range...): the bounded parser's message says it
  }
  e.message = where + ": " + e.message;
  if (e.where.empty()) e.where = path;
  return std::unexpected(e);
}

namespace {

std::string ReadText(const std::string& path, bool* exists) {
  std::ifstream in(path, std::ios::binary);
  *exists = static_cast<bool>(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Home() {
  const char* h = std::getenv("HOME");
  return h != nullptr ? h : "/nonexistent";
}

Json DefinitionJson(const ServerConfig& s) {
  Json j = {{"transport", s.transport},
            {"command", s.command},
            {"args", s.args},
            {"env", s.env},
            {"url", s.url},
            {"headers", s.headers},
            {"timeout_secs", s.timeout_secs},
            {"network", s.network ? Json(NetworkModeName(*s.network)) : Json(nullptr)},
            {"read", s.read}};
  // Only when set: a definition without it keeps the hash it was trusted under.
  if (!s.write.empty()) j["write"] = s.write;
  auto rules = [](const std::vector<DomainRule>& v) {
    std::vector<std::string> out;
    for (const auto& r : v) out.push_back(r.text);
    return out;
  };
  if (!s.egress.allow.empty()) j["allow_domains"] = rules(s.egress.allow);
  if (!s.egress.deny.empty()) j["deny_domains"] = rules(s.egress.deny);
  if (!s.egress.presets.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, from] : s.egress.presets) names.push_back(name);
    j["presets"] = names;
  }
  return j;
}

Result<std::vector<ServerConfig>> ParseServersToml(const std::string& text,
                                                   const std::string& source) {
  ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
  std::vector<ServerConfig> out;
  for (auto&& [k, node] : root) {
    if (k.str() != "servers") {
      return Fail(Code::kInvalidInput, source + ":" + std::to_string(node.source().begin.line) +
                                           ": unknown key \"" + std::string(k.str()) + "\"");
    }
    const toml::table* servers = node.as_table();
    if (servers == nullptr)
      return Fail(Code::kInvalidInput, source + ": [servers] must be a table");
    for (auto&& [name, def] : *servers) {
      const toml::table* t = def.as_table();
      const std::string where = source + ":" + std::to_string(def.source().begin.line);
      if (t == nullptr)
        return Fail(Code::kInvalidInput,
                    where + ": [servers." + std::string(name.str()) + "] must be a table");
      ServerConfig s;
      s.name = std::string(name.str());
      s.source = source;
      for (auto&& [key, v] : *t) {
        const std::string kk(key.str());
        const std::string w = source + ":" + std::to_string(v.source().begin.line);
        auto str = [&]() -> Result<std::string> {
          auto x = v.value<std::string>();
          if (!v.is_string() || !x)
            return Fail(Code::kInvalidInput, w + ": " + kk + " must be a string");
          return *x;
        };
        auto strmap = [&](std::map<std::string, std::string>& m) -> Status {
          const toml::table* mt = v.as_table();
          if (mt == nullptr)
            return Fail(Code::kInvalidInput, w + ": " + kk + " must be a table of strings");
          for (auto&& [mk, mv] : *mt) {
            auto x = mv.value<std::string>();
            if (!mv.is_string() || !x)
              return Fail(Code::kInvalidInput, w + ": " + kk + " values must be strings");
            m[std::string(mk.str())] = *x;
          }
          return {};
        };
        if (kk == "transport") {
          ASSIGN_OR_RETURN(std::string transport_name, str());
          auto parsed = ParseName(kTransportNames, transport_name, "transport");
          if (!parsed) return Fail(Code::kInvalidInput, w + ": " + parsed.error().message);
          s.transport = *parsed;
        } else if (kk == "command") {
          ASSIGN_OR_RETURN(s.command, str());
        } else if (kk == "url") {
          ASSIGN_OR_RETURN(s.url, str());
        } else if (kk == "args") {
          const toml::array* a = v.as_array();
          if (a == nullptr)
            return Fail(Code::kInvalidInput, w + ": args must be an array of strings");
          for (const auto& item : *a) {
            auto x = item.value<std::string>();
            if (!item.is_string() || !x)
              return Fail(Code::kInvalidInput, w + ": args must be strings");
            s.args.push_back(*x);
          }
        } else if (kk == "env") {
          TRY(strmap(s.env));
        } else if (kk == "headers") {
          TRY(strmap(s.headers));
        } else if (kk == "enabled") {
          auto x = v.value<bool>();
          if (!v.is_boolean() || !x)
            return Fail(Code::kInvalidInput, w + ": enabled must be true or false");
          s.enabled = *x;
        } else if (kk == "timeout_secs") {
          auto x = v.value<std::int64_t>();
          if (!v.is_integer() || !x || *x <= 0)
            return Fail(Code::kInvalidInput, w + ": timeout_secs must be a positive integer");
          s.timeout_secs = *x;
        } else if (kk == "sandbox") {
          const toml::table* sb = v.as_table();
          if (sb == nullptr) return Fail(Code::kInvalidInput, w + ": sandbox must be a table");
          for (auto&& [sk, sv] : *sb) {
            const std::string sw = source + ":" + std::to_string(sv.source().begin.line);
            if (sk.str() == "network") {
              auto mode = ParseNetworkMode(sv.value<std::string>().value_or(""));
              if (!mode)
                return Fail(Code::kInvalidInput, sw + ": sandbox.network: " + mode.error().message);
              s.network = *mode;
            } else if (sk.str() == "allow_domains" || sk.str() == "deny_domains" ||
                       sk.str() == "presets") {
              const std::string skey = "sandbox." + std::string(sk.str());
              const toml::array* a = sv.as_array();
              if (a == nullptr)
                return Fail(Code::kInvalidInput, sw + ": " + skey + " must be an array of strings");
              for (const auto& item : *a) {
                const std::string iw = source + ":" + std::to_string(item.source().begin.line);
                auto x = item.value<std::string>();
                if (!item.is_string() || !x)
                  return Fail(Code::kInvalidInput, iw + ": " + skey + " entries must be strings");
                const std::string from = "servers." + s.name + ".sandbox (" + iw + ")";
                if (sk.str() == "presets") {
                  if (FindEgressPreset(*x) == nullptr)
                    return Fail(Code::kInvalidInput,
                                iw + ": " + skey + " entry \"" + *x + "\" is not a preset");
                  s.egress.presets.emplace_back(*x, from);
                  continue;
                }
                auto rule = ParseDomainRule(*x, from);
                if (!rule)
                  return Fail(Code::kInvalidInput, iw + ": " + skey + ": " + rule.error().message);
                (sk.str() == "allow_domains" ? s.egress.allow : s.egress.deny)
                    .push_back(std::move(*rule));
              }
            } else if (sk.str() == "read" || sk.str() == "write") {
              const std::string skey = "sandbox." + std::string(sk.str());
              const toml::array* a = sv.as_array();
              if (a == nullptr)
                return Fail(Code::kInvalidInput, sw + ": " + skey + " must be an array of paths");
              for (const auto& item : *a) {
                auto x = item.value<std::string>();
                if (!item.is_string() || !x || x->empty())
                  return Fail(Code::kInvalidInput, sw + ": " + skey + " entries must be paths");
                (sk.str() == "read" ? s.read : s.write).push_back(*x);
              }
            } else {
              return Fail(Code::kInvalidInput,
                          sw + ": unknown key \"sandbox." + std::string(sk.str()) + "\"");
            }
          }
        } else {
          return Fail(Code::kInvalidInput, w + ": unknown key \"" + kk + "\"");
        }
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

// A repository's server may narrow its egress (deny_domains), never widen it: its allow_domains
// and presets are dropped, each with a diagnostic naming where it was written (recorded as an
// mcp_diagnostic record, printed by `mcp list`), as its network mode and its grants outside the
// workspace are (mcp/client.cc). Trust does not change this: trusting a server lets it run, not
// reach the network past the user's own configuration.
void DropProjectEgressGrants(ServerConfig& s, std::vector<Json>& diagnostics) {
  auto drop = [&](const std::string& what, const std::string& from) {
    diagnostics.push_back(
        {{"server", s.name},
         {"source", s.source},
         {"reason", "a project's configuration cannot add egress: " + what + " from " + from +
                        " was dropped; define the server in ~/.cordon/mcp.toml to allow it"}});
  };
  for (const DomainRule& r : s.egress.allow) drop("allow_domains \"" + r.text + "\"", r.source);
  for (const auto& [name, from] : s.egress.presets) drop("presets \"" + name + "\"", from);
  s.egress.allow.clear();
  s.egress.presets.clear();
}

Result<std::vector<ServerConfig>> ParseMcpJson(const std::string& text, const std::string& source) {
  ASSIGN_OR_RETURN(Json j, ParseJsonFile(text, source));
  std::vector<ServerConfig> out;
  if (!j.is_object() || !j.contains("mcpServers") || !j["mcpServers"].is_object()) return out;
  for (const auto& [name, def] : j["mcpServers"].items()) {
    if (!def.is_object())
      return Fail(Code::kInvalidInput, source + ": mcpServers." + name + " must be an object");
    ServerConfig s;
    s.name = name;
    s.source = source;
    try {
      if (def.contains("url")) {
        s.transport = Transport::kStreamableHttp;
        s.url = def["url"].get<std::string>();
        if (def.contains("headers"))
          s.headers = def["headers"].get<std::map<std::string, std::string>>();
      }
      if (def.contains("command")) s.command = def["command"].get<std::string>();
      if (def.contains("args")) s.args = def["args"].get<std::vector<std::string>>();
      if (def.contains("env")) s.env = def["env"].get<std::map<std::string, std::string>>();
      if (def.contains("disabled")) s.enabled = !def["disabled"].get<bool>();
    } catch (const std::exception& e) {
      return Fail(Code::kInvalidInput, source + ": mcpServers." + name + ": " + e.what());
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

bool IsValidServerName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

std::optional<std::string> ExpandVars(std::string_view in, const std::string& workspace,
                                      std::string* missing) {
  std::string out;
  for (std::size_t i = 0; i < in.size();) {
    if (in.compare(i, 2, "${") == 0) {
      std::size_t end = in.find('}', i + 2);
      if (end != std::string_view::npos) {
        std::string name(in.substr(i + 2, end - i - 2));
        if (name == "CORDON_WORKSPACE" || name == "THNDRS_WORKSPACE") {
          out += workspace;
        } else if (const char* v = std::getenv(name.c_str()); v != nullptr) {
          out += v;
        } else {
          if (missing != nullptr) *missing = name;
          return std::nullopt;
        }
        i = end + 1;
        continue;
      }
    }
    out += in[i++];
  }
  return out;
}

ConfigSources DefaultConfigSources(const std::string& workspace) {
  ConfigSources s;
  const std::string home = Home();
  s.files = {{home + "/.thndrs/mcp.toml", false},
             {home + "/.cordon/mcp.toml", false},
             {workspace + "/.mcp.json", true},
             {workspace + "/.thndrs/mcp.toml", true},
             {workspace + "/.cordon/mcp.toml", true}};
  return s;
}

Result<McpConfig> LoadMcpConfig(const ConfigSources& sources, const std::string& workspace) {
  std::map<std::string, ServerConfig> by_name;
  McpConfig cfg;
  for (const auto& [path, project] : sources.files) {
    bool exists = false;
    std::string text = ReadText(path, &exists);
    if (!exists) continue;
    const bool is_json = path.size() > 5 && path.substr(path.size() - 5) == ".json";
    auto parsed = is_json ? ParseMcpJson(text, path) : ParseServersToml(text, path);
    if (!parsed) return std::unexpected(parsed.error());
    for (auto& s : *parsed) {
      s.project = project;
      if (project) DropProjectEgressGrants(s, cfg.diagnostics);
      if (!IsValidServerName(s.name)) {
        cfg.diagnostics.push_back(
            {{"server", s.name},
             {"source", path},
             {"reason", "invalid name (ASCII letters, digits, _ and - only)"}});
        continue;
      }
      by_name[s.name] = std::move(s);
    }
  }
  for (auto& [name, s] : by_name) {
    if (!s.enabled) {
      cfg.diagnostics.push_back({{"server", name}, {"source", s.source}, {"reason", "disabled"}});
      continue;
    }
    std::string missing;
    bool ok = true;
    auto expand = [&](std::string& v) {
      if (!ok) return;
      auto e = ExpandVars(v, workspace, &missing);
      if (e)
        v = *e;
      else
        ok = false;
    };
    expand(s.command);
    expand(s.url);
    for (auto& a : s.args) expand(a);
    for (auto& [k, v] : s.env) expand(v);
    for (auto& [k, v] : s.headers) expand(v);
    for (auto& r : s.read) expand(r);
    for (auto& w : s.write) expand(w);
    if (!ok) {
      cfg.diagnostics.push_back(
          {{"server", name},
           {"source", s.source},
           {"reason", "environment variable " + missing + " is not set; server skipped"}});
      continue;
    }
    if (s.transport == Transport::kStdio && s.command.empty()) {
      cfg.diagnostics.push_back(
          {{"server", name}, {"source", s.source}, {"reason", "stdio server without command"}});
      continue;
    }
    // A client's entry for cordon (`cordon serve`, or a server under `cordon wrap`, as cordon
    // setup writes into a project's .mcp.json) is for the client: cordon never starts itself.
    if (s.transport == Transport::kStdio &&
        (s.command == "cordon" || s.command.ends_with("/cordon"))) {
      cfg.diagnostics.push_back({{"server", name},
                                 {"source", s.source},
                                 {"reason",
                                  "runs cordon itself (an entry for an MCP client); "
                                  "skipped: cordon does not start cordon"}});
      continue;
    }
    s.definition_sha256 = Sha256Hex(DefinitionJson(s).dump());
    cfg.servers.push_back(std::move(s));
  }
  return cfg;
}

std::string TrustStorePath() {
  std::string base;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/') {
    base = x;
  } else {
    base = Home() + "/.local/state";
  }
  return base + "/cordon/trust.json";
}

namespace {

Json LoadTrust() {
  bool exists = false;
  std::string text = ReadText(TrustStorePath(), &exists);
  Json j = exists ? Json::parse(text, nullptr, false) : Json::object();
  return j.is_object() ? j : Json::object();
}

}  // namespace

bool IsTrusted(const std::string& workspace, const ServerConfig& server) {
  if (!server.project) return true;  // the user's own configuration
  Json t = LoadTrust();
  return t.contains(workspace) && t[workspace].contains(server.name) &&
         t[workspace][server.name].value("definition_sha256", "") == server.definition_sha256;
}

std::string ToolHash(const Json& tool) {
  Json pinned = {{"name", tool.value("name", "")},
                 {"description", tool.value("description", "")},
                 {"inputSchema", tool.value("inputSchema", Json())},
                 {"outputSchema", tool.value("outputSchema", Json())}};
  return Sha256Hex(pinned.dump());
}

std::map<std::string, std::string> PinnedTools(const std::string& workspace,
                                               const std::string& server) {
  Json t = LoadTrust();
  std::map<std::string, std::string> out;
  if (t.contains(workspace) && t[workspace].contains(server) &&
      t[workspace][server].contains("tools")) {
    for (const auto& [k, v] : t[workspace][server]["tools"].items()) {
      if (v.is_string()) out[k] = v.get<std::string>();
    }
  }
  return out;
}

Status Trust(const std::string& workspace, const ServerConfig& server, const Json& tools) {
  // A trust store that does not parse is reported, never replaced: rewriting it would drop
  // every other workspace's trust without a word.
  bool exists = false;
  const std::string text = ReadText(TrustStorePath(), &exists);
  if (exists) {
    ASSIGN_OR_RETURN(Json stored, ParseJsonFile(text, TrustStorePath()));
    if (!stored.is_object()) {
      return Fail(Code::kInvalidInput,
                  TrustStorePath() + ": the trust store must be a JSON object");
    }
  }
  Json t = LoadTrust();
  Json pins = Json::object();
  for (const auto& tool : tools) pins[tool.value("name", "")] = ToolHash(tool);
  t[workspace][server.name] = {
      {"definition_sha256", server.definition_sha256}, {"source", server.source}, {"tools", pins}};
  const std::string path = TrustStorePath();
  std::string dir = path.substr(0, path.find_last_of('/'));
  for (std::size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0700);
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << t.dump(2) << "\n";
    if (!out) return Fail(Code::kInternal, "cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return SysFail(Code::kInternal, "rename", path);
  return {};
}

}  // namespace cordon::mcp
