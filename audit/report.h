// AuditReportHtml: one or more verified logs as one self-contained HTML file (`audit report`):
// the data as inert JSON, rendered by the page's own script under a hash-pinned CSP.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "audit/verify.h"
#include "core/error.h"
#include "core/text.h"

namespace cordon {

// One log as the report shows it: its path as given, the verifier's per-line report, and the
// CLI's verdict object (verdict, exit_code, problem, ... as `audit verify --json` prints it).
// A file that could not be read at all has no lines (`readable` false) and its verdict says why.
struct ReportLog {
  std::string path;
  bool readable = true;
  VerifyReport report;
  Json verification = Json::object();
  // The links this file holds to the files it continues (`audit rotate`, a writer's
  // log_detached), as verify checks them among the files given: [{previous_log_id, checked,
  // previous_file, ok, problem}]. A link that does not hold fails the page, as it fails verify.
  Json links = Json::array();
};

// The page: deterministic (the same logs give the same bytes: no clock, no random ids, keys
// sorted), no network and no external resource. The data sits in a
// <script type="application/json"> block (ReportJsonForScript); the page's script and style are
// compiled-in resources (audit/report/) pinned by their SHA-256 in the CSP meta. `exit_code` is
// the command's (verify's, the worst of the logs).
Result<std::string> AuditReportHtml(const std::vector<ReportLog>& logs, int exit_code);

// JSON text made safe inside a <script> element: <, >, &, U+2028 and U+2029 as \u escapes (the
// JSON means the same; no "</script>" or "<!--" can end or bend the element).
std::string ReportJsonForScript(std::string_view json);

// The CSP source of an inline element's text: "'sha256-BASE64'".
std::string CspSha256(std::string_view text);

// The compiled-in resources (audit/report/report.js and report.css, embedded at build time).
extern const std::string_view kReportScript;
extern const std::string_view kReportStyle;

}  // namespace cordon
