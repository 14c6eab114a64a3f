// The user's git identity for confined processes: inside, HOME is the sandbox's own, so git
// would not find ~/.gitconfig and `git commit` would fail with "Author identity unknown".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/text.h"
#include "policy/policy.h"

namespace cordon {

struct GitIdentity {
  std::string name{};   // user.name, or empty when not configured
  std::string email{};  // user.email, or empty
  std::string error{};  // why it could not be read (git missing, ...), or empty
  bool empty() const { return name.empty() && email.empty(); }
};

// The user.name and user.email of the user's global git configuration (~/.gitconfig,
// $XDG_CONFIG_HOME/git/config), read by git itself: `git config --global --get-regexp` run
// outside any sandbox with `envp`, the user's environment, and nothing else of the config.
GitIdentity ReadGitIdentity(char** envp);

// GIT_AUTHOR_NAME, GIT_COMMITTER_NAME (from name) and GIT_AUTHOR_EMAIL, GIT_COMMITTER_EMAIL
// (from email), without those the policy's [env] sets or denies. Pure.
std::vector<std::pair<std::string, std::string>> GitIdentityVariables(const GitIdentity& id,
                                                                      const EnvPolicy& policy);

// What session_started records: where the identity came from, the values confined processes
// get, and the variables the policy's [env] decides instead.
Json GitIdentityJson(const GitIdentity& id, const EnvPolicy& policy);

}  // namespace cordon
