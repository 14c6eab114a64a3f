// Failure hints from a server's stderr: pure text matching, plus one stat of the path named.
#include "mcp/diagnose.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "core/text.h"

namespace cordon::mcp {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The first absolute path on `line`: quoted ('/x', "/x") or a bare word that starts with '/'.
std::string PathOn(std::string_view line) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '/') continue;
    const bool quoted = i > 0 && (line[i - 1] == '\'' || line[i - 1] == '"');
    const bool word = i == 0 || line[i - 1] == ' ' || line[i - 1] == '(' || line[i - 1] == '=';
    if (!quoted && !word) continue;
    std::size_t end = i;
    const char close = quoted ? line[i - 1] : ' ';
    while (end < line.size() && line[end] != close && line[end] != '\n' &&
           (quoted || (line[end] != ':' && line[end] != ',' && line[end] != ')'))) {
      ++end;
    }
    if (end - i > 1) return std::string(line.substr(i, end - i));
  }
  return {};
}

// Whether `marker` occurs in `low` as whole words: not inside a longer word ("enotfound" is not
// inside "modulenotfounderror"; '_' counts as part of a word, as in "eai_again").
bool HasWord(std::string_view low, std::string_view marker) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  for (std::size_t at = low.find(marker); at != std::string_view::npos;
       at = low.find(marker, at + 1)) {
    const std::size_t after = at + marker.size();
    if ((at == 0 || !word(low[at - 1])) && (after == low.size() || !word(low[after]))) return true;
  }
  return false;
}

// The first quoted text on `line` ('x' or "x"), or "".
std::string QuotedOn(std::string_view line) {
  const std::size_t open = line.find_first_of("'\"");
  if (open == std::string_view::npos) return {};
  const std::size_t close = line.find(line[open], open + 1);
  if (close == std::string_view::npos) return {};
  return std::string(line.substr(open + 1, close - open - 1));
}

bool IsDirectory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ExistsOnHost(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

std::string StderrTail(std::string_view text, const Redactor& redactor, std::size_t max_bytes) {
  std::string tail(text);
  // Redacted before it is cut, so that a cut never leaves half a secret in view.
  redactor.Redact(tail);
  if (tail.size() > max_bytes) {
    std::size_t start = tail.size() - max_bytes;
    const std::size_t nl = tail.find('\n', start);
    if (nl != std::string::npos && nl + 1 < tail.size()) start = nl + 1;
    tail.erase(0, start);
  }
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  return RepairUtf8(tail);
}

std::vector<std::string> FailureHints(std::string_view tail, const FailureContext& ctx) {
  // Module errors first: a line that says one is about a package the interpreter cannot see,
  // whatever else it contains.
  static constexpr std::array<std::string_view, 6> kModuleMarkers = {
      "modulenotfounderror", "importerror",         "no module named",
      "cannot find module",  "cannot find package", "err_module_not_found"};
  static constexpr std::array<std::string_view, 6> kPathMarkers = {
      "enoent",          "no such file or directory", "eacces", "permission denied",
      "can't open file", "cannot access directory"};
  static constexpr std::array<std::string_view, 16> kNetworkMarkers = {
      "enetunreach",
      "eai_again",
      "enotfound",
      "getaddrinfo",
      "network is unreachable",
      "temporary failure in name resolution",
      "could not resolve host",
      "name or service not known",
      "econnrefused",
      "fetch failed",
      "npm error network",
      "eai_fail",
      "connect eperm",
      "socket: operation not permitted",
      "etimedout",
      "failed to establish a new connection"};
  std::vector<std::string> hints;
  const std::string grant_read =
      ctx.wrapped ? std::string("--read DIR (cordon wrap --read DIR -- ...)")
                  : "sandbox.read = [\"DIR\"] under [servers." + ctx.server + ".sandbox] in " +
                        (ctx.source.empty() ? std::string("its mcp.toml") : ctx.source);
  auto remedy_for = [&](const std::string& dir) {
    std::string remedy = grant_read;
    for (std::size_t at = remedy.find("DIR"); at != std::string::npos;
         at = remedy.find("DIR", at + dir.size()))
      remedy.replace(at, 3, dir);
    return remedy;
  };
  auto path_hint = [&](const std::string& path, bool names_directory) {
    const std::string dir = names_directory || IsDirectory(path)
                                ? path
                                : path.substr(0, std::max<std::size_t>(1, path.rfind('/')));
    std::string h = "the server could not open " + path + ": ";
    if (ExistsOnHost(path)) {
      h += "it exists on the host but lies outside what the sandbox shows; grant it with ";
    } else {
      h += "if it exists outside the sandbox (it is not on this host as named), grant its " +
           std::string(names_directory ? "path" : "directory") + " with ";
    }
    return h + remedy_for(dir);
  };
  bool path_said = false, network_said = false, module_said = false, module_seen = false;
  std::size_t start = 0;
  while (start < tail.size()) {
    std::size_t end = tail.find('\n', start);
    if (end == std::string_view::npos) end = tail.size();
    const std::string_view line = tail.substr(start, end - start);
    start = end + 1;
    const std::string low = Lower(line);
    auto has = [&](const auto& markers) {
      return std::any_of(markers.begin(), markers.end(),
                         [&](std::string_view m) { return HasWord(low, m); });
    };
    if (has(kModuleMarkers)) {
      if (module_said || path_said) continue;
      // The module as quoted on the line ('requests', 'express', '/abs/x.js'); a path names a
      // file the sandbox does not show, a name a package installed where the sandbox does not
      // look. Never the importer a line also names ("imported from /x/server.mjs").
      const std::string name = QuotedOn(line);
      if (!name.empty() && name[0] == '/') {
        path_said = true;
        hints.push_back(path_hint(name, false));
        continue;
      }
      module_seen = true;
      if (name.empty()) continue;  // Node's "throw new ERR_MODULE_NOT_FOUND(...)": the next line
      module_said = true;
      hints.push_back(
          "the server could not import " + name +
          ": the interpreter inside the sandbox does not see it. If it is installed outside the "
          "sandbox (a virtualenv, a pyenv or conda prefix, the user's site-packages, a "
          "node_modules directory), grant that directory with " +
          remedy_for("DIR") + "; the server's own package is read without a flag");
      continue;
    }
    if (!network_said && ctx.network != NetworkMode::kAllow && has(kNetworkMarkers)) {
      network_said = true;
      const std::string preset_flag =
          ctx.preset.empty() ? std::string(
                                   "--allow-preset PRESET for a package registry (npm, "
                                   "pypi, crates)")
                             : "--allow-preset " + ctx.preset;
      const std::string preset_key = ctx.preset.empty()
                                         ? std::string("sandbox.presets")
                                         : "sandbox.presets = [\"" + ctx.preset + "\"]";
      hints.push_back(
          "the server tried to reach the network, which this sandbox does not give it "
          "(network " +
          std::string(NetworkModeName(ctx.network)) + "): " +
          (ctx.network == NetworkMode::kProxy
               ? std::string("the proxy refused what its rules do not allow; the network "
                             "records of the audit log name each refused host (allow it with ") +
                     (ctx.wrapped ? "--allow-domain NAME" : "sandbox.allow_domains") + ")"
           : ctx.wrapped ? "pass " + preset_flag + " (or --allow-domain NAME) to cordon wrap"
                         : "set sandbox.network = \"proxy\" and " + preset_key +
                               " (or sandbox.allow_domains) under [servers." + ctx.server +
                               ".sandbox] in " + ctx.source));
    }
    if (!path_said) {
      for (auto m : kPathMarkers) {
        if (!HasWord(low, m)) continue;
        const std::string path = PathOn(line);
        if (path.empty()) continue;
        path_said = true;
        hints.push_back(path_hint(path, m == "cannot access directory"));
        break;
      }
    }
  }
  if (module_seen && !module_said && !path_said) {
    hints.push_back(
        "the server could not import a module: the interpreter inside the sandbox does not see "
        "it. If it is installed outside the sandbox, grant that directory with " +
        remedy_for("DIR"));
  }
  return hints;
}

std::string NetworkActivityNote(std::uint64_t accepted, std::uint64_t finished) {
  if (accepted == 0) return {};
  const std::uint64_t open = accepted > finished ? accepted - finished : 0;
  return "it is using the network: " + std::to_string(accepted) + " connection" +
         (accepted == 1 ? "" : "s") + " through the proxy so far, " + std::to_string(open) +
         " open now. A launcher such as npx or uvx downloads the server before it starts, "
         "which can take a minute; the network records of the audit log name each host. To "
         "start at once, install it once outside cordon and run it from there "
         "(docs/clients.md)";
}

std::string FailureDetail(std::string_view tail, const FailureContext& ctx) {
  if (tail.empty()) return "; the server wrote nothing to stderr";
  std::string out = "; the server's stderr ends with:\n" + std::string(tail);
  for (const auto& h : FailureHints(tail, ctx)) out += "\nhint: " + h;
  return out;
}

}  // namespace cordon::mcp
