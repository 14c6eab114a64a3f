// The user's git identity for confined processes (runner/git_identity.h).
#include "runner/git_identity.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/unique_fd.h"
#include "runner/host_probe.h"

namespace cordon {
namespace {

// A configured value longer than this is not an identity: left out.
constexpr std::size_t kMaxValueBytes = 1024;

bool Denied(const EnvPolicy& policy, const std::string& name) {
  for (const auto& e : policy.deny) {
    if (EnvEntryMatches(e, name)) return true;
  }
  return false;
}

}  // namespace

GitIdentity ReadGitIdentity(char** envp) {
  GitIdentity id;
  if (envp == nullptr) {
    id.error = "no environment to find the user's configuration with";
    return id;
  }
  const std::string git = FindOnPath("git");
  if (git.empty()) {
    id.error = "git is not on PATH";
    return id;
  }
  Pipe p = MakePipe();
  UniqueFd null_fd(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!p.valid() || !null_fd.valid()) {
    id.error = std::string("cannot run git: ") + std::strerror(errno);
    return id;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, null_fd.get(), 0);
  posix_spawn_file_actions_adddup2(&fa, p.write.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, null_fd.get(), 2);
  // -z: each entry is "key\nvalue\0", whatever the value holds. Only user.name and user.email
  // of the global file are asked for; git itself finds the file as the user's shell would.
  std::vector<std::string> argv = {git,  "config",       "--global",
                                   "-z", "--get-regexp", "^user\\.(name|email)$"};
  std::vector<char*> a;
  for (auto& s : argv) a.push_back(s.data());
  a.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, git.c_str(), &fa, nullptr, a.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  p.write.Reset();
  if (rc != 0) {
    id.error = "cannot run " + git + ": " + std::strerror(rc);
    return id;
  }
  // Bounded: a git that hangs (a global config on a stalled network file system) costs the
  // session its identity, not its start.
  std::string out;
  char buf[4096];
  bool hung = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    pollfd pf{p.read.get(), POLLIN, 0};
    const int r = left > 0 ? ::poll(&pf, 1, static_cast<int>(left)) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      hung = r == 0;
      break;
    }
    const ssize_t n = ::read(p.read.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < 64 * 1024) out.append(buf, static_cast<std::size_t>(n));
  }
  if (hung) ::kill(pid, SIGKILL);  // the git this function started, by its pid
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (hung) {
    id.error = "git config --global did not answer in 3 s";
    return id;
  }
  // Exit 1: neither key is set, which is no error.
  if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 1)) {
    id.error = WIFEXITED(status)
                   ? "git config --global exited " + std::to_string(WEXITSTATUS(status))
                   : "git config --global was ended by signal " + std::to_string(WTERMSIG(status));
    return id;
  }
  std::size_t start = 0;
  while (start < out.size()) {
    std::size_t end = out.find('\0', start);
    if (end == std::string::npos) end = out.size();
    const std::string entry = out.substr(start, end - start);
    start = end + 1;
    const std::size_t nl = entry.find('\n');
    if (nl == std::string::npos) continue;
    const std::string key = entry.substr(0, nl);
    std::string value = entry.substr(nl + 1);
    if (value.empty() || value.size() > kMaxValueBytes || value.find('\n') != std::string::npos)
      continue;
    // As `git config --get`: the last value wins.
    if (key == "user.name") id.name = std::move(value);
    if (key == "user.email") id.email = std::move(value);
  }
  return id;
}

std::vector<std::pair<std::string, std::string>> GitIdentityVariables(const GitIdentity& id,
                                                                      const EnvPolicy& policy) {
  std::vector<std::pair<std::string, std::string>> vars;
  for (const auto& [name, value] :
       {std::pair<std::string, const std::string*>{"GIT_AUTHOR_NAME", &id.name},
        {"GIT_AUTHOR_EMAIL", &id.email},
        {"GIT_COMMITTER_NAME", &id.name},
        {"GIT_COMMITTER_EMAIL", &id.email}}) {
    if (value->empty() || policy.set.contains(name) || Denied(policy, name)) continue;
    vars.emplace_back(name, *value);
  }
  return vars;
}

Json GitIdentityJson(const GitIdentity& id, const EnvPolicy& policy) {
  Json j = {{"source", id.empty() ? "none" : "git config --global"}};
  if (!id.name.empty()) j["name"] = id.name;
  if (!id.email.empty()) j["email"] = id.email;
  if (!id.error.empty()) j["error"] = id.error;
  Json policy_decides = Json::array();
  for (const char* name :
       {"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}) {
    if (policy.set.contains(name) || Denied(policy, name)) policy_decides.push_back(name);
  }
  if (!policy_decides.empty()) j["policy_env"] = std::move(policy_decides);
  return j;
}

}  // namespace cordon
