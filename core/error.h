// Result<T> and Error: the one error type every module returns; codes are the stable tool codes.
#pragma once

#include <cerrno>
#include <cstring>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace cordon {

// Stable, documented error codes (docs/errors.md). Never renumber or rename one.
enum class Code {
  kInvalidInput,
  kNotFound,
  kOutsideWorkspace,
  kAlreadyExists,
  kNotUnique,
  kConflict,
  kTooLarge,
  kTimeout,
  kCancelled,
  kDeniedByPolicy,
  kSandboxUnavailable,
  kServerUnavailable,
  kBinaryFile,
  kUnsupportedFileType,
  kInternal,
  // --- failclosed: the audit log cannot take the record an act needs; the disk is full.
  kAuditUnavailable,
  kNoSpace,
  // --- serve: the client has not read the answers the session holds for it (issue 19).
  kOutputBacklog,
  // --- supervision (issue 23): stop_local_server's refusals.
  kNotOwned,
  kSharedGroup,
  kUnsupported,
  // --- approvals (issue 34): an `ask` rule matched and no one approved.
  kApprovalRequired,
};

std::string_view CodeName(Code code);

struct Error {
  Code code = Code::kInternal;
  std::string message;
  int err = 0;        // errno, when a syscall failed
  std::string where;  // the path or syscall that failed, if any

  std::string ToString() const;
};

template <typename T>
using Result = std::expected<T, Error>;
using Status = Result<void>;

inline std::unexpected<Error> Fail(Code code, std::string message, int err = 0,
                                   std::string where = {}) {
  return std::unexpected(Error{code, std::move(message), err, std::move(where)});
}

// An error for a failed syscall: the message names the call and errno text.
inline std::unexpected<Error> SysFail(Code code, std::string_view call, std::string where,
                                      int err = errno) {
  std::string msg = std::string(call) + ": " + std::strerror(err);
  if (!where.empty()) msg += " (" + where + ")";
  return std::unexpected(Error{code, std::move(msg), err, std::move(where)});
}

// The code of a failed write or sync: no_space when the filesystem is full or the quota is
// spent (ENOSPC, EDQUOT), too_large when the file size limit is hit (EFBIG), else `other`.
Code WriteErrorCode(int err, Code other = Code::kInternal);

}  // namespace cordon

#define CORDON_CONCAT_INNER(a, b) a##b
#define CORDON_CONCAT(a, b) CORDON_CONCAT_INNER(a, b)

// TRY(expr): return the error of a Result-returning expression.
#define TRY(expr)                                                    \
  do {                                                               \
    auto&& cordon_try_result_ = (expr);                              \
    if (!cordon_try_result_) {                                       \
      return std::unexpected(std::move(cordon_try_result_).error()); \
    }                                                                \
  } while (0)

#define CORDON_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)        \
  auto tmp = (expr);                                        \
  if (!tmp) return std::unexpected(std::move(tmp).error()); \
  lhs = std::move(*tmp)

// ASSIGN_OR_RETURN(auto x, expr): bind the value or return the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  CORDON_ASSIGN_OR_RETURN_IMPL(CORDON_CONCAT(cordon_aor_, __LINE__), lhs, expr)
