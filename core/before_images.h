// The before-images store ([audit] before_images): the raw bytes a file held before a file tool
// or a staged commit replaced or deleted it, content-addressed by their SHA-256 under cordon's
// state directory (masked from every sandbox), so that `cordon audit diff` can show what changed.
// Written only through a descriptor of the store directory (O_NOFOLLOW, a temporary name, then
// an atomic rename); read back only when the bytes still hash to their name.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/unique_fd.h"

namespace cordon {

struct BeforeImageLimits {
  std::uint64_t max_file_bytes = 1u << 20;      // a larger before-image is not stored
  std::uint64_t max_session_bytes = 64u << 20;  // new bytes one session stores, at most
};

// What storing one before-image did, for the record that names it (file_write.before_image,
// process.changes.entries[].before_image): stored (now, or it was there already), over_file_cap,
// over_session_cap, failed (with `error`).
struct BeforeImageOutcome {
  std::string status;
  std::string error;  // failed: why, with the path of the store
};

// Whether `name` can be a store entry: 64 lowercase hex digits (never a path).
bool IsBeforeImageName(std::string_view name);

// One session's writer. Thread-safe: the file tools and the staged commits of a session's
// processes store through the same object. A failure is reported, never thrown: the call whose
// write it follows goes on, and its record says the image is missing and why.
class BeforeImageStore {
 public:
  BeforeImageStore(std::string dir, BeforeImageLimits limits);
  // <state>/before-images.
  static std::string DefaultDir();
  const std::string& dir() const { return dir_; }
  // Stores `content`, whose SHA-256 is `sha256` (checked).
  BeforeImageOutcome Put(std::string_view content, const std::string& sha256);
  // Stores the first `size` bytes of the open regular file `fd` (read from offset 0); the bytes
  // read must hash to `sha256`, or nothing is stored (failed: the file changed meanwhile).
  BeforeImageOutcome PutFd(int fd, std::uint64_t size, const std::string& sha256);
  std::uint64_t stored_bytes() const;

 private:
  // Opens (making it, 0700, with its missing parents) the store directory; refuses one that is
  // a symlink, not a directory, not ours, or open to others.
  Result<int> DirFd();
  // Reserves `size` bytes of the session's allowance, or says which cap refuses it.
  std::optional<BeforeImageOutcome> Reserve(std::uint64_t size);
  BeforeImageOutcome Install(std::string_view content, const std::string& sha256);
  std::string dir_;
  BeforeImageLimits limits_;
  mutable std::mutex mu_;
  UniqueFd dir_fd_;
  std::uint64_t stored_ = 0;
};

// Reads the store entry `sha256` from `dir`: not_found when absent, conflict when its bytes do
// not hash to its name (it was changed after it was stored), too_large past `max_bytes`,
// invalid_input for a name that is not 64 hex digits. The entry is opened with O_NOFOLLOW
// relative to the directory's descriptor.
Result<std::string> ReadBeforeImage(const std::string& dir, const std::string& sha256,
                                    std::uint64_t max_bytes);

}  // namespace cordon
