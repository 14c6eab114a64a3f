// The user's secrets by value: at session start cordon reads the credential stores that exist
// on the host for the user who runs it ([redact] credential_stores: ~/.aws, ~/.netrc,
// ~/.docker/config.json, ~/.kube/config, ~/.ssh, ...) and takes out the secret values they hold,
// whatever their shape: the redactor then finds each value, and its hex, URL-encoded and base64
// forms, as "[REDACTED:credential]" (core/redact.h AddCredential). A value below the floor (too
// short or too common to match safely, e.g. the password "postgres") is skipped and counted.
//
// Values are kept in memory only; what is recorded (session_started.redaction, doctor) is which
// stores were read and how many values each gave or skipped, never a value. Every store is also
// in [filesystem] deny (policy/policy.cc), so no sandbox reads it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/text.h"

namespace cordon {

struct CredentialStoreLimits {
  std::size_t max_file_bytes = 1 << 20;    // a larger file is read up to this
  std::size_t max_total_bytes = 32 << 20;  // bytes read over all stores
  std::size_t max_files = 2000;            // files read below a store that is a directory
  std::size_t max_depth = 6;               // directories below a store that is a directory
};

// The values of one store's file, by its format (JSON, PEM, INI/TOML/YAML/properties lines, XML,
// netrc, pgpass, git-credentials URLs, a bare token): the values under secret-naming keys, a
// private key's body lines, the password of a user:pass pair. `skipped` counts the values found
// under a secret-naming key that are below the floor.
struct StoreValues {
  std::vector<std::string> values;
  std::size_t skipped = 0;
};
StoreValues CredentialValuesOf(std::string_view file_name, std::string_view content);

// Whether a value is safe to match everywhere: at least 8 bytes, 5 distinct characters, not a
// placeholder, a variable reference or a common password.
bool UsableCredential(std::string_view value);

// Whether a key names a secret (password, token, secret, auth, key, credential, ...).
bool SecretNamingKey(std::string_view key);

struct StoreReport {
  std::string path;   // as configured ("~/.aws")
  std::string state;  // "read", "missing", "unreadable", "cut" (a limit stopped it)
  std::size_t files = 0;
  std::size_t values = 0;
  std::size_t skipped = 0;
};

struct CredentialScan {
  std::vector<std::string> values;  // distinct, never written anywhere
  std::vector<StoreReport> stores;
  double ms = 0;
  Json ToJson() const;  // counts per store, never a value
};

// Reads each store: `stores` as configured (~ allowed), `home` the home directory.
CredentialScan ReadCredentialStores(const std::vector<std::string>& stores, const std::string& home,
                                    const CredentialStoreLimits& limits = {});

}  // namespace cordon
