// The HTML report: each log's records (with their line, verification state, kinds and paths) and
// verdict as one inert JSON block, and the compiled-in script and style that render it, pinned by
// hash in the page's Content-Security-Policy.
#include "audit/report.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "audit/show.h"

namespace cordon {
namespace {

// ok: intact and proven complete by a verified signed checkpoint; not_proven: the chain is
// intact but nothing proves no record is missing (no key, or an HMAC key alone); failed: any
// other outcome (verify's exit code is not 0).
std::string StatusOf(const ReportLog& log) {
  if (!log.readable || log.verification.value("exit_code", Json(-1)) != Json(0)) return "failed";
  for (const auto& l : log.links) {
    if (l.value("checked", false) && !l.value("ok", false)) return "failed";
  }
  return log.report.signed_checked ? "ok" : "not_proven";
}

Result<Json> LogData(const ReportLog& log) {
  Json out = {{"path", log.path},         {"verification", log.verification},
              {"status", StatusOf(log)},  {"header", ""},
              {"records", Json::array()}, {"unreadable", Json::array()},
              {"links", log.links}};
  if (!log.readable) return out;
  out["header"] = ShowHeader(log.path, log.report);
  ASSIGN_OR_RETURN(std::string data, ReadAuditLogFile(log.path));
  const auto& states = log.report.line_states;
  std::uint64_t n = 0;
  for (std::size_t pos = 0; pos < data.size();) {
    std::size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) nl = data.size();
    const std::string_view line(data.data() + pos, nl - pos);
    pos = nl + 1;
    ++n;
    // A line the verifier did not see (the file grew since) is not proven.
    const std::string_view state =
        LineStateName(n - 1 < states.size() ? states[n - 1] : LineState::kAfterBreak);
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) {
      out["unreadable"].push_back({{"_line", n}, {"_verified", state}, {"bytes", line.size()}});
      continue;
    }
    const RecordKinds k = KindsOf(rec);
    Json kinds = Json::array();
    if (k.failed) kinds.push_back("errors");
    if (k.refused) kinds.push_back("denied");
    if (k.changed) kinds.push_back("changes");
    rec["_line"] = n;
    rec["_verified"] = state;
    rec["_kinds"] = std::move(kinds);
    rec["_paths"] = RecordPaths(rec);
    out["records"].push_back(std::move(rec));
  }
  return out;
}

bool ContainsNoCase(std::string_view text, std::string_view needle) {
  auto it = std::search(text.begin(), text.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
  return it != text.end();
}

}  // namespace

std::string ReportJsonForScript(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xE2' && i + 2 < json.size() && json[i + 1] == '\x80' &&
               (json[i + 2] == '\xA8' || json[i + 2] == '\xA9')) {
      // U+2028 and U+2029: line terminators to older JavaScript parsers.
      out += json[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string CspSha256(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  unsigned char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(b64, digest, static_cast<int>(len));
  return "'sha256-" + std::string(reinterpret_cast<const char*>(b64), static_cast<std::size_t>(n)) +
         "'";
}

Result<std::string> AuditReportHtml(const std::vector<ReportLog>& logs, int exit_code) {
  // The resources are this repository's files, but a stray end tag in them would end their
  // element early and run the rest as markup: refuse to build such a page.
  if (ContainsNoCase(kReportScript, "</script") || ContainsNoCase(kReportScript, "<!--") ||
      ContainsNoCase(kReportStyle, "</style")) {
    return Fail(Code::kInternal, "the report's compiled-in script or style holds an end tag");
  }
  Json data = {{"cordon_audit_report", 1}, {"exit_code", exit_code}, {"logs", Json::array()}};
  for (const auto& log : logs) {
    ASSIGN_OR_RETURN(Json j, LogData(log));
    data["logs"].push_back(std::move(j));
  }
  // nlohmann's json sorts object keys: the same logs give the same text.
  const std::string json = ReportJsonForScript(DumpJson(data));
  std::string html;
  html.reserve(json.size() + kReportScript.size() + kReportStyle.size() + 1024);
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src ";
  html += CspSha256(kReportScript);
  html += "; style-src ";
  html += CspSha256(kReportStyle);
  html += "; base-uri 'none'; form-action 'none'\">\n";
  html += "<meta name=\"referrer\" content=\"no-referrer\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>cordon audit report</title>\n<style>";
  html += kReportStyle;
  html += "</style>\n</head>\n<body>\n";
  html +=
      "<noscript>This report is drawn by its script; without it, the data is the JSON in the "
      "element cordon-audit-data, and `cordon audit show` prints the same logs.</noscript>\n";
  html += "<script type=\"application/json\" id=\"cordon-audit-data\">";
  html += json;
  html += "</script>\n<script>";
  html += kReportScript;
  html += "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace cordon
