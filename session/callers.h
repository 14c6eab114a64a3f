// Who makes a session's calls, and what the session keeps for each: its tags, its calls' usage,
// and whether it has ended. The label is the MCP session under `serve --http` (tool_started's
// mcp_session), empty for the one caller of stdio serve, call, exec and wrap. Later issues add
// the client's capabilities and its approvals here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "tools/context.h"

namespace cordon {

class Caller {
 public:
  Caller(std::string label, std::vector<std::string> tags)
      : label_(std::move(label)), tags_(std::move(tags)) {}
  const std::string& label() const { return label_; }
  bool ended() const;
  // Changes one call's figures (made on first use); nothing once the caller has ended: an
  // ended MCP session's figures are freed and none is kept for it again.
  void UpdateUsage(std::uint64_t call, const std::function<void(CallUsage&)>& change);
  std::map<std::uint64_t, CallUsage> Usage() const;
  std::set<std::uint64_t> CallNumbers() const;
  // session_tag: the tags after adding (tagged) or removing `tag`. `commit` writes the record
  // with the new set, under the caller's lock; the change holds only when it succeeds (a tag
  // the log does not have is not set). At most kMaxTags.
  static constexpr std::size_t kMaxTags = 32;
  Result<std::vector<std::string>> ChangeTags(
      const std::string& tag, bool tagged,
      const std::function<Status(const std::vector<std::string>& tags)>& commit);
  // Frees what was kept; every later change is refused or ignored.
  void End();

 private:
  const std::string label_;
  mutable std::mutex mu_;
  std::vector<std::string> tags_;
  std::map<std::uint64_t, CallUsage> usage_;
  bool ended_ = false;
};

// The session's callers by label, each made on first use with the session's start tags.
class Callers {
 public:
  explicit Callers(std::vector<std::string> start_tags) : start_tags_(std::move(start_tags)) {}
  std::shared_ptr<Caller> Get(const std::string& label);
  // The caller ended (its MCP session closed): what was kept for it is freed, and a later Get
  // of the label returns it ended.
  void End(const std::string& label);

 private:
  std::mutex mu_;
  std::vector<std::string> start_tags_;
  std::map<std::string, std::shared_ptr<Caller>> callers_;
};

}  // namespace cordon
