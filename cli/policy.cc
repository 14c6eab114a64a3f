// cordon policy show: the effective policy and where each value came from.
#include <cstdio>
#include <iostream>

#include "cli/common.h"

namespace cordon::cli {
namespace {

int CmdPolicyShow(const SessionFlags& session, bool json) {
  auto policy = LoadEffectivePolicy(SessionOptionsFrom(session, "cli"));
  if (!policy) {
    std::fprintf(stderr, "cordon: policy: %s\n", policy.error().ToString().c_str());
    return kExitStart;
  }
  Json effective = Json::parse(policy->CanonicalJson());
  Json files = Json::array();
  for (const auto& f : policy->files) {
    files.push_back({{"path", f.path}, {"sha256", f.sha256}, {"layer", f.layer}});
  }
  if (json) {
    std::cout << DumpJson({{"effective", effective},
                           {"decided_by", policy->provenance},
                           {"files", files},
                           {"notes", policy->notes},
                           {"sha256", policy->Sha256()}},
                          2)
              << std::endl;
    return kExitOk;
  }
  std::cout << "# effective policy (sha256 " << policy->Sha256() << ")\n";
  for (const auto& [k, v] : effective["limits"].items()) {
    std::string key = "limits." + k;
    std::cout << key << " = " << v.dump() << "    # " << policy->provenance[key] << "\n";
  }
  std::cout << "scopes.grant = " << effective["scopes"].dump() << "    # "
            << policy->provenance["scopes.grant"] << "\n";
  std::cout << "audit.fsync = \"" << policy->audit_fsync << "\"    # "
            << policy->provenance["audit.fsync"] << "\n";
  std::cout << "redact.values = (" << policy->redact_values.size() << " values, not shown)\n";
  std::cout << "redact.env_names = " << Json(policy->redact_env_names).dump() << "\n";
  std::cout << "\n# files read, in order\n";
  for (const auto& f : policy->files) {
    std::cout << f.layer << "  " << f.path << "  sha256:" << f.sha256 << "\n";
  }
  for (const auto& n : policy->notes) std::cout << "note: " << n << "\n";
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
