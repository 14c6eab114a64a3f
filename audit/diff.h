// AuditSessionDiff: what one session changed, file by file, from its audit log: before and after
// hashes and, where the before content can be had and proven, a unified diff (redacted as it is
// made). Before content comes from the before-images store ([audit] before_images), else from
// the blob at session_started.git.head (git cat-file, under an empty global and system config);
// after content from the store or the file on disk, each used only when it hashes to the record's
// value. `cordon audit diff` prints it; the session_diff tool (issue 23) calls it on its own log.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/error.h"
#include "core/redact.h"
#include "core/text.h"

namespace cordon {

struct AuditDiffOptions {
  // The before-images store (BeforeImageStore::DefaultDir()); empty: not used.
  std::string store_dir;
  // Where git is looked for (an absolute directory list, as PATH); empty: HEAD is not used.
  std::string git_path = "/usr/local/bin:/usr/bin:/bin";
  // Every diff is redacted with it before it is returned. Null: not redacted (tests only).
  const Redactor* redactor = nullptr;
  // When set, called with the session's session_started and session_finished records (an
  // empty object for one the log lacks) before any diff is made; takes the place of
  // `redactor`. It returns the redactor for this session's diffs, or an error that withholds
  // every diff (the files and hashes are still listed; `withheld` says why). What it puts in
  // `about` is the output's `redaction`.
  std::function<Result<const Redactor*>(const Json& started, const Json& finished, Json& about)>
      redactor_for;
  std::uint64_t max_file_bytes = 16u << 20;  // a larger side is not read: hashes only
  std::size_t context = 3;
};

// The changes of the session whose id is `session` or starts with it (the one session; an
// ambiguous prefix is invalid_input naming the matches, an unknown one not_found naming the
// log's sessions), in log order:
// {session, workspace, git_head, files: [{line, record, tool, call?, op, path, from?,
//   sha256_before, sha256_after, bytes_before?, bytes_after?, before: {source, verified, note?},
//   after: {source, verified, note?}, diff?, binary?, redactions?}],
//  counts: {files, diffs, before: {store, git_head, git_head_unverified, new_file, none}},
//  redaction?: what redactor_for said, withheld?: why no diff is shown}
// before.source: store, git_head, new_file or none (hashes only); after.source: store, disk,
// deleted or none. A `note` says why a source was not used.
Result<Json> AuditSessionDiff(const std::string& log_path, const std::string& session,
                              const AuditDiffOptions& options);

// The text form: one block per file (its hashes, the sources, marks), then its diff. Control
// characters in paths and diffs (an escape sequence in a file) are shown as \xHH, never sent to
// the terminal.
std::string AuditSessionDiffText(const Json& diff);

}  // namespace cordon
