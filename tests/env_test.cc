// Environment (issue 11), against the real binary: --env NAME / NAME=VALUE on exec and wrap,
// the policy's [env] section (pass, deny, set) with the secret-scrubbing default and the
// tighten-only rule for project files, the command found on the caller's PATH as far as the
// sandbox can read it, a wrapped server getting its client's environment, secret values kept
// out of results and records, and the names (never the values) in the records.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "core/text.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::UserNamespacesEnabled())
      SECURITY_SKIP("(environment) user namespaces are disabled; bwrap cannot run");
    std::filesystem::create_directories(dir_ / "ws");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "PATH=/usr/bin:/bin"};
  }
  // `cordon exec [flags] -- sh -c SCRIPT` with `extra` in cordon's own environment.
  testing::RunResult Exec(const std::vector<std::string>& flags, const std::string& script,
                          const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {testing::CordonBin(), "exec",        "--workspace",
                                     dir_ / "ws",          "--audit-log", log()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    std::vector<std::string> env = env_;
    for (const auto& e : extra) {
      if (e.rfind("PATH=", 0) == 0) {
        env.back() = e;  // env_'s PATH is last: one PATH, as a shell would have it
      } else {
        env.push_back(e);
      }
    }
    return testing::Run(args, env);
  }
  void UserPolicy(const std::string& toml) {
    WriteFile(dir_ / "config/cordon/policies.d/50-env.toml", toml);
  }
  std::vector<Json> Records(const std::string& type) {
    std::vector<Json> out;
    std::istringstream lines(ReadFile(log()));
    for (std::string l; std::getline(lines, l);) {
      Json j = Json::parse(l);
      if (j["type"] == type) out.push_back(std::move(j));
    }
    return out;
  }
  std::string log() { return dir_ / "audit.jsonl"; }
  TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(EnvTest, ExecEnvFlagSetsAndPassesVariables) {
  auto r = Exec({"--env", "GREETING=hello there", "--env", "FROM_CALLER"},
                "echo \"$GREETING|$FROM_CALLER|$NOT_PASSED\"",
                {"FROM_CALLER=caller-value", "NOT_PASSED=x"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello there|caller-value|\n");
  // The process record names what it got, never the values.
  auto procs = Records("process");
  ASSERT_EQ(procs.size(), 1u);
  const Json names = procs[0]["env"];
  for (const char* n : {"FROM_CALLER", "GREETING"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n << " " << names.dump();
  }
  EXPECT_EQ(std::find(names.begin(), names.end(), "NOT_PASSED"), names.end()) << names.dump();
  EXPECT_EQ(ReadFile(log()).find("caller-value"), std::string::npos);
}

TEST_F(EnvTest, ExecEnvFlagRefusesABadNameAndSaysWhenAVariableIsUnset) {
  auto bad = Exec({"--env", "1BAD=x"}, "true");
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_NE(bad.err.find("not a variable name"), std::string::npos) << bad.err;
  // A value given with a bad name is not echoed: it may be the secret it was meant to carry.
  auto bad_value = Exec({"--env", "API-TOKEN=echo-leak-check-5d1e"}, "true");
  EXPECT_EQ(bad_value.exit_code, 125);
  EXPECT_NE(bad_value.err.find("\"API-TOKEN\" is not a variable name"), std::string::npos)
      << bad_value.err;
  EXPECT_EQ(bad_value.err.find("echo-leak-check-5d1e"), std::string::npos) << bad_value.err;
  auto unset = Exec({"--env", "SURELY_UNSET_VAR"}, "echo \"[${SURELY_UNSET_VAR-unset}]\"");
  EXPECT_EQ(unset.exit_code, 0) << unset.err;
  EXPECT_EQ(unset.out, "[unset]\n");
  EXPECT_NE(unset.err.find("SURELY_UNSET_VAR: not set"), std::string::npos) << unset.err;
}

TEST_F(EnvTest, PolicyPassKeepsSecretLookingNamesOutUnlessNamedExactly) {
  UserPolicy("[env]\npass = [\"MYAPP_*\", \"EXACT_TOKEN\"]\nset = {BUILD_MODE = \"release\"}\n");
  auto r = Exec({}, "echo \"$MYAPP_HOME|${MYAPP_TOKEN-none}|$EXACT_TOKEN|$BUILD_MODE\"",
                {"MYAPP_HOME=/h", "MYAPP_TOKEN=prefix-matched-secret", "EXACT_TOKEN=named-1234"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "/h|none|named-1234|release\n");
  auto started = Records("session_started");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]["env"]["pass"], Json({"MYAPP_*", "EXACT_TOKEN"})) << started[0].dump();
  EXPECT_EQ(started[0]["env"]["set"], Json({"BUILD_MODE"}));
  const std::string text = ReadFile(log());
  EXPECT_EQ(text.find("named-1234"), std::string::npos);
  EXPECT_EQ(text.find("release"), std::string::npos);
}

TEST_F(EnvTest, ProjectPolicyCanOnlyRemove) {
  UserPolicy("[env]\npass = [\"KEEP_ME\", \"DROP_ME\"]\n");
  WriteFile(dir_ / "ws/.cordon/policy.toml",
            "[env]\npass = [\"!DROP_ME\", \"ADDED_BY_REPO\"]\ndeny = [\"KEEP_*\"]\n"
            "set = {REPO_SET = \"x\"}\n");
  auto r = Exec({}, "echo \"${KEEP_ME-no}|${DROP_ME-no}|${ADDED_BY_REPO-no}|${REPO_SET-no}\"",
                {"KEEP_ME=1", "DROP_ME=2", "ADDED_BY_REPO=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "no|no|no|no\n");
  auto show =
      testing::Run({testing::CordonBin(), "policy", "show", "--workspace", dir_ / "ws"}, env_);
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("cannot add \"ADDED_BY_REPO\" to env.pass"), std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("cannot set env.set.REPO_SET"), std::string::npos) << show.out;
}

TEST_F(EnvTest, PolicyShowListsTheEnvSection) {
  UserPolicy(
      "[env]\npass = [\"CI\"]\ndeny = [\"AWS_*\"]\nset = {MODE = \"ci\", API_KEY = "
      "\"s3cr3t-value\"}\n");
  auto show =
      testing::Run({testing::CordonBin(), "policy", "show", "--workspace", dir_ / "ws"}, env_);
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("env.pass = ["), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("\"CI\""), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("env.deny = ["), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("env.set.MODE = \"ci\""), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("env.set.API_KEY = \"(value not shown)\""), std::string::npos)
      << show.out;
  EXPECT_EQ(show.out.find("s3cr3t-value"), std::string::npos) << show.out;
  UserPolicy("[env]\npass = [\"NOT A NAME\"]\n");
  auto bad =
      testing::Run({testing::CordonBin(), "policy", "show", "--workspace", dir_ / "ws"}, env_);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("must be a variable name"), std::string::npos) << bad.err;
}

TEST_F(EnvTest, CommandIsFoundOnTheCallersPathAsFarAsTheSandboxSeesIt) {
  // A tool in the workspace (visible) and one outside every bind (not visible), both first on
  // the caller's PATH: the first is found, the second's directory is left out.
  WriteFile(dir_ / "ws/tools/bin/ws-tool", "#!/bin/sh\necho ws-tool ran\n");
  ::chmod((dir_ / "ws/tools/bin/ws-tool").c_str(), 0755);
  WriteFile(dir_ / "outside/bin/python3", "#!/bin/sh\necho wrong python\n");
  ::chmod((dir_ / "outside/bin/python3").c_str(), 0755);
  const std::string path =
      "PATH=" + (dir_ / "outside/bin") + ":" + (dir_ / "ws/tools/bin") + ":/usr/bin:/bin";
  std::vector<std::string> args = {testing::CordonBin(), "exec", "--workspace", dir_ / "ws",
                                   "--audit-log",        log(),  "--",          "ws-tool"};
  std::vector<std::string> env = env_;
  env.back() = path;  // in place of env_'s PATH
  auto r = testing::Run(args, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ws-tool ran\n");
  // Found only outside: not found inside (127), and cordon says where it is on the host.
  WriteFile(dir_ / "outside/bin/only-outside", "#!/bin/sh\necho ran\n");
  ::chmod((dir_ / "outside/bin/only-outside").c_str(), 0755);
  args.back() = "only-outside";
  auto outside = testing::Run(args, env);
  EXPECT_EQ(outside.exit_code, 127) << outside.err;
  EXPECT_NE(outside.err.find(dir_ / "outside/bin/only-outside" + " on your PATH"),
            std::string::npos)
      << outside.err;
  auto p = Exec({}, "echo \"$PATH\"", {path});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.out, dir_ / "ws/tools/bin" + ":/usr/bin:/bin\n");
}

TEST_F(EnvTest, WrappedServerGetsItsClientsEnvironmentAndSecretsStayOutOfTheLog) {
  // The server answers one request with the variables it got; GITHUB_TOKEN came from the
  // client's config (cordon's own environment), MY_API_KEY from --env.
  const std::string server =
      "read line; printf '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"gh\":\"%s\",\"key\":\"%s\","
      "\"plain\":\"%s\",\"denied\":\"%s\"}}\\n' \"$GITHUB_TOKEN\" \"$MY_API_KEY\" "
      "\"$PLAIN_SETTING\" \"${DENIED_VAR-absent}\"";
  UserPolicy("[env]\ndeny = [\"DENIED_*\"]\n");
  std::vector<std::string> args = {testing::CordonBin(),
                                   "wrap",
                                   "--workspace",
                                   dir_ / "ws",
                                   "--audit-log",
                                   log(),
                                   "--env",
                                   "MY_API_KEY=key-value-98765",
                                   "--",
                                   "sh",
                                   "-c",
                                   server};
  std::vector<std::string> env = env_;
  env.insert(env.end(), {"GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                         "PLAIN_SETTING=plain-value", "DENIED_VAR=nope"});
  auto r = testing::Run(args, env,
                        R"({"jsonrpc":"2.0","id":1,"method":"ping"})"
                        "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json reply = Json::parse(r.out.substr(0, r.out.find('\n')));
  EXPECT_EQ(reply["result"]["plain"], "plain-value") << r.out;
  EXPECT_EQ(reply["result"]["denied"], "absent") << r.out;
  // The server got the secrets (non-empty), and the client sees them redacted.
  EXPECT_NE(reply["result"]["gh"], "") << r.out;
  EXPECT_NE(reply["result"]["gh"].get<std::string>().find("REDACTED"), std::string::npos) << r.out;
  EXPECT_NE(reply["result"]["key"].get<std::string>().find("REDACTED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("key-value-98765"), std::string::npos);
  const std::string text = ReadFile(log());
  EXPECT_EQ(text.find("ghp_abcdefghijklmnopqrstuvwxyz0123456789"), std::string::npos);
  EXPECT_EQ(text.find("key-value-98765"), std::string::npos);
  auto procs = Records("process");
  ASSERT_EQ(procs.size(), 1u);
  const Json names = procs[0]["env"];
  for (const char* n : {"GITHUB_TOKEN", "MY_API_KEY", "PLAIN_SETTING"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n << " " << names.dump();
  }
  EXPECT_EQ(std::find(names.begin(), names.end(), "DENIED_VAR"), names.end()) << names.dump();
}

// Any user on the host can read a process's argv: the values cordon hands bwrap (a wrapped
// server's GITHUB_TOKEN, an --env value) reach it through a memfd, never its argv.
// --plan is pasted into issues and CI logs: the values of secret-looking variables (an --env
// API_TOKEN=..., a wrapped server's GITHUB_TOKEN from its client) are not printed; their names
// are, and a plain value still is.
TEST_F(EnvTest, PlanOutputShowsNoSecretValue) {
  const std::string token = "ghp_PlanLeakCheck0123456789abcdefABCDEF";
  const std::string api = "plan-leak-api-value-41c7";
  auto exec =
      testing::Run({testing::CordonBin(), "exec", "--workspace", dir_ / "ws", "--plan", "--env",
                    "API_TOKEN=" + api, "--env", "MY_SETTING=plain-visible", "--", "true"},
                   env_);
  ASSERT_EQ(exec.exit_code, 0) << exec.err;
  EXPECT_EQ(exec.out.find(api), std::string::npos) << exec.out;
  EXPECT_NE(exec.out.find("API_TOKEN"), std::string::npos);
  EXPECT_NE(exec.out.find("plain-visible"), std::string::npos);
  std::vector<std::string> env = env_;
  env.push_back("GITHUB_TOKEN=" + token);
  auto wrap = testing::Run(
      {testing::CordonBin(), "wrap", "--workspace", dir_ / "ws", "--plan", "--", "true"}, env);
  ASSERT_EQ(wrap.exit_code, 0) << wrap.err;
  EXPECT_EQ(wrap.out.find(token), std::string::npos) << wrap.out;
  EXPECT_NE(wrap.out.find("GITHUB_TOKEN"), std::string::npos) << wrap.out;
}

TEST_F(EnvTest, ValuesNeverAppearInAnyProcessArgv) {
  const std::string secret = "argv-leak-check-7f3a9c";
  std::vector<std::string> args = {testing::CordonBin(), "exec", "--workspace", dir_ / "ws",
                                   "--audit-log", log(), "--env", "MY_SETTING=" + secret,
                                   // The marker must reach the host while the command runs: the
                                   // direct mode's bind (staged, it lands at the commit after).
                                   "--policy", dir_ / "direct.toml", "--", "sh", "-c",
                                   "echo x > started; sleep 3"};
  WriteFile(dir_ / "direct.toml", "[sandbox]\nworkspace = \"direct\"\n");
  std::vector<char*> a, e;
  for (auto& s : args) a.push_back(s.data());
  a.push_back(nullptr);
  std::vector<std::string> env = env_;
  for (auto& s : env) e.push_back(s.data());
  e.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, a[0], nullptr, nullptr, a.data(), e.data()), 0);
  for (int i = 0; i < 1500 && !testing::Exists(dir_ / "ws/started"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(testing::Exists(dir_ / "ws/started"));
  int seen = 0, leaked = 0;
  for (const auto& d : std::filesystem::directory_iterator("/proc")) {
    const std::string name = d.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadFile(d.path().string() + "/cmdline");
    if (cmdline.find("bwrap") != std::string::npos) ++seen;
    if (cmdline.find(secret) != std::string::npos && std::stoi(name) != pid) ++leaked;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_GT(seen, 0) << "bwrap was not running";
  EXPECT_EQ(leaked, 0) << "the value is in a process's argv";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace cordon
