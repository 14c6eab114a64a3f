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
  static constexpr std::array<std::string_view, 8> kPathMarkers = {
      "enoent",          "no such file or directory", "cannot find module",
      "eacces",          "permission denied",         "modulenotfounderror",
      "can't open file", "err_module_not_found"};
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
  bool path_said = false, network_said = false;
  std::size_t start = 0;
  while (start < tail.size()) {
    std::size_t end = tail.find('\n', start);
    if (end == std::string_view::npos) end = tail.size();
    const std::string_view line = tail.substr(start, end - start);
    start = end + 1;
    const std::string low = Lower(line);
    if (!network_said && ctx.network != NetworkMode::kAllow) {
      for (auto m : kNetworkMarkers) {
        if (low.find(m) == std::string::npos) continue;
        network_said = true;
        hints.push_back(
            "the server tried to reach the network, which this sandbox does not give it "
            "(network " +
            std::string(NetworkModeName(ctx.network)) + "): " +
            (ctx.network == NetworkMode::kProxy
                 ? std::string("the proxy refused what its rules do not allow; the network "
                               "records of the audit log name each refused host (allow it with ") +
                       (ctx.wrapped ? "--allow-domain NAME" : "sandbox.allow_domains") + ")"
             : ctx.wrapped
                 ? std::string("pass --allow-domain NAME (or --allow-preset npm) to cordon wrap")
                 : "set sandbox.network = \"proxy\" and sandbox.allow_domains under [servers." +
                       ctx.server + ".sandbox] in " + ctx.source));
        break;
      }
    }
    if (!path_said) {
      for (auto m : kPathMarkers) {
        if (low.find(m) == std::string::npos) continue;
        const std::string path = PathOn(line);
        if (path.empty()) continue;
        path_said = true;
        const std::string dir =
            IsDirectory(path) ? path : path.substr(0, std::max<std::size_t>(1, path.rfind('/')));
        std::string h = "the server could not open " + path + ": ";
        if (ExistsOnHost(path)) {
          h += "it exists on the host but lies outside what the sandbox shows; grant it with ";
        } else {
          h += "if it exists outside the sandbox (it is not on this host as named), grant its "
               "directory with ";
        }
        std::string remedy = grant_read;
        const std::size_t at = remedy.find("DIR");
        remedy.replace(at, 3, dir);
        if (const std::size_t again = remedy.find("DIR"); again != std::string::npos)
          remedy.replace(again, 3, dir);
        hints.push_back(h + remedy);
        break;
      }
    }
  }
  return hints;
}

std::string FailureDetail(std::string_view tail, const FailureContext& ctx) {
  if (tail.empty()) return "; the server wrote nothing to stderr";
  std::string out = "; the server's stderr ends with:\n" + std::string(tail);
  for (const auto& h : FailureHints(tail, ctx)) out += "\nhint: " + h;
  return out;
}

}  // namespace cordon::mcp
