// ToolServices' defaults: what a session without the part gives.
#include "tools/context.h"

namespace cordon {

void ToolServices::RecordFileWrite(const FileWriteReport&) {}

Result<UniqueFd> ToolServices::ConnectEgress() {
  return Fail(Code::kDeniedByPolicy, "this session has no egress proxy");
}

Result<Json> ToolServices::ServerStatus(const std::optional<std::string>& name) {
  if (name) return Fail(Code::kNotFound, "no configured server is named \"" + *name + "\"");
  return Json{{"servers", Json::array()}};
}

Result<std::vector<std::string>> ToolServices::SetTag(const std::string&, bool) {
  return Fail(Code::kInvalidInput, "this session keeps no tags");
}

Result<Json> ToolServices::SessionDiff(std::uint64_t, std::uint64_t) {
  return Fail(Code::kInvalidInput, "this session has no audit log to read");
}

void ToolServices::RecordNetwork(const NetworkEvent&) {}

void ToolServices::RecordListenerStop(const std::string&, const ListenerStopOutcome&) {}

}  // namespace cordon
