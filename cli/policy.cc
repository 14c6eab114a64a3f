// cordon policy show: the effective policy and where each value came from.
#include <cstdio>
#include <iostream>

#include "cli/common.h"
#include "core/text.h"
#include "policy/policy_show.h"

namespace cordon::cli {
namespace {

int CmdPolicyShow(const SessionFlags& session, bool json) {
  auto policy = LoadEffectivePolicy(SessionOptionsFrom(session, "cli"));
  if (!policy) {
    std::fprintf(stderr, "cordon: policy: %s\n", TerminalSafe(policy.error().ToString()).c_str());
    return kExitStart;
  }
  if (json) {
    std::cout << DumpJson(PolicyShowJson(*policy), 2) << std::endl;
  } else {
    // A project's policy file is the repository's: its values are written out visibly.
    std::cout << TerminalSafe(PolicyShowText(*policy));
  }
  return kExitOk;
}

}  // namespace

void AddPolicyCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    SessionFlags session;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* policy = root.add_subcommand("policy", "the effective policy")
                         ->group("Commands")
                         ->require_subcommand(1);
  CLI::App* show = policy
                       ->add_subcommand("show",
                                        "print the effective policy and where each value came "
                                        "from")
                       ->group("Commands");
  show->add_flag("--json", f->json, "print JSON");
  AddSessionFlags(show, &f->session);
  ctx.run[show] = [f] { return CmdPolicyShow(f->session, f->json); };
}

}  // namespace cordon::cli
