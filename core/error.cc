// Names of the stable error codes, as tool results and audit records show them.
#include "core/error.h"

namespace cordon {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kInvalidInput:
      return "invalid_input";
    case Code::kNotFound:
      return "not_found";
    case Code::kOutsideWorkspace:
      return "outside_workspace";
    case Code::kAlreadyExists:
      return "already_exists";
    case Code::kNotUnique:
      return "not_unique";
    case Code::kConflict:
      return "conflict";
    case Code::kTooLarge:
      return "too_large";
    case Code::kTimeout:
      return "timeout";
    case Code::kCancelled:
      return "cancelled";
    case Code::kDeniedByPolicy:
      return "denied_by_policy";
    case Code::kSandboxUnavailable:
      return "sandbox_unavailable";
    case Code::kServerUnavailable:
      return "server_unavailable";
    case Code::kBinaryFile:
      return "binary_file";
    case Code::kUnsupportedFileType:
      return "unsupported_file_type";
    case Code::kInternal:
      return "internal";
    case Code::kAuditUnavailable:
      return "audit_unavailable";
    case Code::kNoSpace:
      return "no_space";
    case Code::kOutputBacklog:
      return "output_backlog";
    case Code::kNotOwned:
      return "not_owned";
    case Code::kSharedGroup:
      return "shared_group";
    case Code::kUnsupported:
      return "unsupported";
    case Code::kApprovalRequired:
      return "approval_required";
  }
  return "internal";
}

Code WriteErrorCode(int err, Code other) {
  if (err == ENOSPC || err == EDQUOT) return Code::kNoSpace;
  if (err == EFBIG) return Code::kTooLarge;
  return other;
}

std::string Error::ToString() const { return std::string(CodeName(code)) + ": " + message; }

}  // namespace cordon
