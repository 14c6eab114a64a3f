#include "session/callers.h"

#include <algorithm>

namespace cordon {

bool Caller::ended() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_;
}

void Caller::UpdateUsage(std::uint64_t call, const std::function<void(CallUsage&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ended_) change(usage_[call]);
}

std::map<std::uint64_t, CallUsage> Caller::Usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  return usage_;
}

std::set<std::uint64_t> Caller::CallNumbers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::uint64_t> out;
  for (const auto& [call, u] : usage_) out.insert(call);
  return out;
}

Result<std::vector<std::string>> Caller::ChangeTags(
    const std::string& tag, bool tagged,
    const std::function<Status(const std::vector<std::string>& tags)>& commit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ended_) return Fail(Code::kCancelled, "the MCP session ended");
  std::vector<std::string> tags = tags_;
  auto at = std::find(tags.begin(), tags.end(), tag);
  // Bounded: every session_tag record carries the whole set, so an unbounded set would grow the
  // log with the square of the calls.
  if (tagged && at == tags.end() && tags.size() >= kMaxTags) {
    return Fail(Code::kInvalidInput, "a session holds at most " + std::to_string(kMaxTags) +
                                         " tags; remove one first (tagged: false)");
  }
  if (tagged && at == tags.end()) tags.push_back(tag);
  if (!tagged && at != tags.end()) tags.erase(at);
  TRY(commit(tags));
  tags_ = std::move(tags);
  return tags_;
}

void Caller::End() {
  std::lock_guard<std::mutex> lock(mu_);
  ended_ = true;
  usage_.clear();
  tags_.clear();
}

std::shared_ptr<Caller> Callers::Get(const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = callers_.try_emplace(label);
  if (fresh) it->second = std::make_shared<Caller>(label, start_tags_);
  return it->second;
}

void Callers::End(const std::string& label) {
  std::shared_ptr<Caller> caller = Get(label);
  caller->End();
}

}  // namespace cordon
