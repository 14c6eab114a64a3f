// The workspace's secret files, known by their content: at session start a bounded walk (by
// descriptors, never following a symlink) reads the workspace's text files, and every file that
// holds a private key block or a secret a redaction rule finds, or that has a secret file's
// usual name (.env*, *.pem, *.key, id_*, service-account JSON), gives its secret lines: a key's
// body lines, a matched value, a .env file's secret-named values. They are kept only as hashes
// (core/redact.h SecretLines), so that any output holding one, however it was cut (grep -v,
// sed -n, cat -n, a range read, git diff), is redacted.
//
// What a file gave is cached by its identity (device, inode, size, mtime, ctime) and the rules'
// fingerprint in cordon's state directory, so a later session reads only what changed.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/redact.h"
#include "core/text.h"

namespace cordon {

struct SecretScanLimits {
  std::size_t max_entries = 100000;        // directory entries visited
  std::size_t max_file_bytes = 1 << 20;    // bytes read of one file (its head)
  std::size_t max_total_bytes = 64 << 20;  // bytes read in all (the cache's files are free)
  std::size_t cache_from_entries = 256;    // a smaller tree is read again, not cached
};

struct SecretScan {
  SecretLines lines;
  // Workspace-relative paths that gave secret lines, escaped as change records write them
  // (workspace/changes.h EscapeName: a byte that is not UTF-8 as \xHH).
  std::vector<std::string> files;
  std::size_t entries = 0;     // directory entries visited
  std::size_t read_files = 0;  // files read (not from the cache)
  std::size_t read_bytes = 0;
  std::size_t cached_files = 0;  // files whose lines came from the cache
  bool truncated = false;        // a limit stopped the walk or the reading: said in the record
  double ms = 0;
  Json ToJson() const;
};

// Scans the tree under the directory `root_fd` (the workspace). `shapes` supplies the rules
// (its exact values and lines are not used). `cache_file` ("" for none) is read and rewritten.
// `stop`, when given and set, ends the walk early (the session ended first): the scan is then
// `truncated`.
Result<SecretScan> ScanSecretFiles(int root_fd, const Redactor& shapes,
                                   const SecretScanLimits& limits, const std::string& cache_file,
                                   const std::atomic<bool>* stop = nullptr);

// Where the scan of the workspace at `root` keeps its cache (<state>/secret-files/).
std::string SecretScanCacheFile(const std::string& root);

// The secret lines of one file's content; `name` is its file name. Exposed for tests.
std::vector<std::string> SecretLinesOf(std::string_view name, std::string_view content,
                                       const Redactor& shapes);

// Whether a file name is one of the usual secret files' names.
bool IsSecretFileName(std::string_view name);
// Whether it names a file in a credential store's format (.pgpass, .my.cnf, settings.xml,
// NuGet.Config, htpasswd, .htpasswd, redis.conf, credentials.tfrc.json, .vault-token,
// master.key; any case): its values are read as the store reader reads them.
bool IsStoreFormatFileName(std::string_view name);

}  // namespace cordon
