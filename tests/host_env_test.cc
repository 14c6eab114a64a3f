// Where agents run (issue 30): each restriction of a stricter host built here for real, without
// touching the host's own settings (cordon-test-restrict: Docker's seccomp profile, a container's
// masked /proc, user.max_user_namespaces=0 in a child user namespace, clone3 -> ENOSYS), and what
// reaches the user: doctor's one cause and remedy, exec's failure, the weaker mode's record, and
// the escape cases each weaker mode still promises. Runs as root and as an ordinary user.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <thread>

#include "core/text.h"
#include "runner/host_probe.h"
#include "runner/landlock.h"
#include "test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::RunResult;
using testing::WriteFile;

std::string RestrictBin() { return testing::FromEnv("CORDON_TEST_RESTRICT", CORDON_RESTRICT); }
std::string MobyProfile() {
  return testing::FromEnv("CORDON_TEST_DATA_DIR", CORDON_SOURCE_DIR "/tests/data") +
         "/moby-seccomp-default.json";
}
// The profile the .deb ships (moby's default plus what cordon needs); under the unprivileged CI
// pass it sits in the copied data directory.
std::string CordonProfile() {
  const std::string copied = testing::FromEnv("CORDON_TEST_DATA_DIR", "") + "/cordon-seccomp.json";
  if (std::getenv("CORDON_TEST_DATA_DIR") != nullptr && ::access(copied.c_str(), R_OK) == 0)
    return copied;
  return CORDON_SOURCE_DIR "/packaging/seccomp/cordon-seccomp.json";
}
std::string ProbeBin() { return testing::FromEnv("CORDON_TEST_PROBE", CORDON_PROBE); }

// The container cordon detects here (runner/host_capabilities.cc reads the same files): the
// remedies name its flags.
std::string Container() {
  if (::access("/run/.containerenv", F_OK) == 0) return "podman";
  if (::access("/.dockerenv", F_OK) == 0) return "docker";
  const char* c = std::getenv("container");
  return c != nullptr ? c : "";
}

// One restriction: the helper's flags, the cause doctor must name, the mode allow_weaker gives,
// and the remedy's texts for this environment.
struct Restriction {
  const char* name;
  std::vector<std::string> flags;
  const char* cause;
  const char* weaker_mode;
  std::vector<std::string> Remedy(bool kubernetes) const {
    const std::string c = Container();
    const std::string k = cause;
    if (k == "seccomp_userns") {
      if (kubernetes) return {"type: Localhost", "procMount: Unmasked"};
      if (c == "docker") return {"--security-opt seccomp=", "systempaths=unconfined"};
      if (c == "podman") return {"--security-opt seccomp=", "unmask=ALL"};
      return {"allow unshare, clone, mount"};
    }
    if (k == "masked_proc") {
      if (kubernetes) return {"procMount: Unmasked"};
      if (c == "docker") return {"systempaths=unconfined"};
      if (c == "podman") return {"unmask=ALL"};
      return {"unmount what covers /proc"};
    }
    return {"user.max_user_namespaces=15000"};
  }
};

const Restriction kSeccomp{"Docker's default seccomp profile",
                           {"--seccomp-profile", ""},  // the profile's path is filled in
                           "seccomp_userns",
                           "landlock-seccomp"};
const Restriction kMaskedProc{
    "a container's masked /proc", {"--masked-proc"}, "masked_proc", "bwrap-host-proc"};
const Restriction kNoUserns{
    "user.max_user_namespaces=0", {"--no-userns"}, "userns_disabled", "landlock-seccomp"};

// Every environment's remedy: only those of the cause and the environment may appear.
const std::vector<std::string> kEveryRemedy = {"user.max_user_namespaces=15000",
                                               "apparmor_restrict_unprivileged_userns=0",
                                               "allow unshare, clone, mount",
                                               "unmount what covers /proc",
                                               "procMount: Unmasked",
                                               "systempaths=unconfined",
                                               "--security-opt seccomp=",
                                               "unmask=ALL",
                                               "type: Localhost",
                                               "runc instead of runsc"};

class HostEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed");
    if (!testing::UserNamespacesEnabled()) SECURITY_SKIP("user namespaces are disabled here");
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    std::filesystem::create_directories(dir_ / "run");
    ::chmod((dir_ / "run").c_str(), 0700);
    std::filesystem::copy_file(ProbeBin(), ws_ + "/probe");
    ::chmod((ws_ + "/probe").c_str(), 0755);
    WriteFile(dir_ / "weaker.toml", "[sandbox]\nallow_weaker = true\n");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "XDG_RUNTIME_DIR=" + (dir_ / "run")};
  }
  std::vector<std::string> Flags(const Restriction& r) const {
    std::vector<std::string> f = r.flags;
    if (f.size() == 2 && f[0] == "--seccomp-profile") f[1] = MobyProfile();
    return f;
  }
  // cordon ARGS, under the restriction's flags (none: the host as it is).
  RunResult Cordon(const std::vector<std::string>& flags, std::vector<std::string> args,
                   std::vector<std::string> extra_env = {}) {
    std::vector<std::string> argv;
    if (!flags.empty()) {
      argv.push_back(RestrictBin());
      argv.insert(argv.end(), flags.begin(), flags.end());
      argv.push_back("--");
    }
    argv.push_back(testing::CordonBin());
    argv.insert(argv.end(), args.begin(), args.end());
    auto env = env_;
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    return testing::Run(argv, env);
  }
  RunResult Exec(const std::vector<std::string>& flags, std::vector<std::string> cmd,
                 bool weaker = false, std::vector<std::string> extra_env = {}) {
    std::vector<std::string> args = {"exec", "--workspace", ws_, "--audit-log", log_};
    if (weaker) args.insert(args.end(), {"--policy", dir_ / "weaker.toml"});
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    return Cordon(flags, args, std::move(extra_env));
  }
  Json Doctor(const std::vector<std::string>& flags, std::vector<std::string> extra_env = {}) {
    RunResult r = Cordon(flags, {"doctor", "--json"}, std::move(extra_env));
    auto j = Json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j.is_discarded() ? Json::object() : j;
  }
  static Json CheckNamed(const Json& report, const std::string& name) {
    for (const auto& c : report.value("checks", Json::array())) {
      if (c.value("name", "") == name) return c;
    }
    return Json();
  }
  // The process records of the log.
  std::vector<Json> Processes() const {
    std::vector<Json> out;
    std::istringstream in(ReadFile(log_));
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("type", "") == "process") out.push_back(j);
    }
    return out;
  }
  void ExpectRefused(const RunResult& r, const std::string& what) {
    EXPECT_EQ(r.exit_code, 1) << what << "\nstdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_NE(r.out.find("refused"), std::string::npos) << what << ": " << r.out << r.err;
    EXPECT_EQ(r.out.find("ESCAPED"), std::string::npos) << what;
  }
  // The escape cases every mode keeps: /etc/shadow, a write to a host directory outside every
  // writable root, TCP under network none, and the privileges the command runs with.
  void ExpectSandboxHolds(const std::vector<std::string>& f) {
    ExpectRefused(Exec(f, {ws_ + "/probe", "read", "/etc/shadow"}, true), "/etc/shadow");
    const std::string outside = "/var/tmp/cordon-hostenv-" + std::to_string(::getpid()) + ".txt";
    ExpectRefused(Exec(f, {ws_ + "/probe", "write", outside}, true),
                  "a write outside the workspace");
    EXPECT_FALSE(testing::Exists(outside));
    ExpectRefused(Exec(f, {ws_ + "/probe", "connect", "9"}, true),
                  "a TCP connection under network none");
    RunResult privs = Exec(f, {ws_ + "/probe", "privs"}, true);
    EXPECT_EQ(privs.exit_code, 0) << privs.err;
    EXPECT_EQ(privs.out, "no_new_privs=1 seccomp=2 cap_eff=0,0\n") << privs.err;
  }
  void ExpectCauseNamed(const Restriction& r, std::vector<std::string> extra_env = {}) {
    SCOPED_TRACE(r.name);
    const std::vector<std::string> want = r.Remedy(!extra_env.empty());
    const Json report = Doctor(Flags(r), extra_env);
    EXPECT_FALSE(report.value("ok", true)) << report.dump(2);
    const Json host = CheckNamed(report, "sandbox_host");
    ASSERT_TRUE(host.is_object()) << report.dump(2);
    EXPECT_FALSE(host.value("ok", true));
    EXPECT_NE(host.value("detail", "").find(std::string("[") + r.cause), std::string::npos)
        << host.dump(2);
    for (const auto& w : want)
      EXPECT_NE(host.value("remedy", "").find(w), std::string::npos) << w << "\n" << host.dump(2);
    // No other environment's remedy anywhere in the report.
    std::string remedies;
    for (const auto& c : report["checks"]) remedies += c.value("remedy", "") + "\n";
    for (const auto& text : kEveryRemedy) {
      if (std::find(want.begin(), want.end(), text) != want.end()) continue;
      EXPECT_EQ(remedies.find(text), std::string::npos)
          << "another environment's remedy (" << text << ") under " << r.name << ":\n"
          << remedies;
    }
    // exec: the same cause and remedy, exit 125, and a pointer to doctor; bwrap is not called.
    RunResult e = Exec(Flags(r), {"true"}, false, extra_env);
    EXPECT_EQ(e.exit_code, 125) << e.err;
    EXPECT_NE(e.err.find("sandbox_unavailable"), std::string::npos) << e.err;
    for (const auto& w : want) EXPECT_NE(e.err.find(w), std::string::npos) << w << "\n" << e.err;
    EXPECT_NE(e.err.find("cordon doctor"), std::string::npos) << e.err;
    EXPECT_EQ(e.err.find("bwrap exit"), std::string::npos)
        << "cordon called bwrap where the probe knew it would fail: " << e.err;
  }
  // A weaker mode runs the command, says so once on stderr, and records mode and losses.
  void ExpectWeakerRuns(const Restriction& r) {
    SCOPED_TRACE(r.name);
    RunResult e = Exec(Flags(r), {"sh", "-c", "echo ran"}, true);
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_EQ(e.out, "ran\n");
    EXPECT_NE(e.err.find(std::string("weaker mode ") + r.weaker_mode), std::string::npos) << e.err;
    const auto procs = Processes();
    ASSERT_FALSE(procs.empty());
    const Json& conf = procs.back()["confinement"];
    EXPECT_EQ(conf.value("mode", ""), r.weaker_mode) << conf.dump(2);
    EXPECT_TRUE(conf.contains("losses") && conf["losses"].is_array() && !conf["losses"].empty())
        << conf.dump(2);
    EXPECT_FALSE(conf.value("weaker_reason", "").empty()) << conf.dump(2);
  }

  testing::TempDir dir_;
  std::string ws_;
  std::string log_ = dir_ / "audit.jsonl";
  std::vector<std::string> env_;
};

TEST_F(HostEnvTest, DockersSeccompProfileIsNamedWithItsRemedy) { ExpectCauseNamed(kSeccomp); }

TEST_F(HostEnvTest, AMaskedProcIsNamedWithItsRemedy) { ExpectCauseNamed(kMaskedProc); }

TEST_F(HostEnvTest, NoUserNamespacesIsNamedWithItsRemedy) { ExpectCauseNamed(kNoUserns); }

TEST_F(HostEnvTest, UnderKubernetesTheRemedyIsThePodsFields) {
  // The same seccomp refusal in a pod: the remedy is the manifest's fields, not docker's flags.
  ExpectCauseNamed(kSeccomp, {"KUBERNETES_SERVICE_HOST=10.0.0.1"});
}

TEST_F(HostEnvTest, ACachedProbeIsNotTrustedUnderAnotherEnvironment) {
  // A session on the host as it is caches "every step works"...
  RunResult ok = Exec({}, {"true"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  bool cached = false;
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "run/cordon"))
    cached |= e.path().filename().string().rfind("host-probe-", 0) == 0;
  ASSERT_TRUE(cached) << "no probe cache was written in $XDG_RUNTIME_DIR/cordon";
  // ...which a session under each restriction does not believe.
  for (const Restriction* r : {&kSeccomp, &kMaskedProc, &kNoUserns}) {
    SCOPED_TRACE(r->name);
    RunResult e = Exec(Flags(*r), {"true"});
    EXPECT_EQ(e.exit_code, 125) << e.err;
    EXPECT_NE(e.err.find(r->Remedy(false)[0]), std::string::npos) << e.err;
  }
  // Two seccomp filters look alike to the context (one filter each, the same namespaces): the
  // probe cached under clone3 -> ENOSYS, where the sandbox works, is not believed under Docker's.
  RunResult clone3 = Exec({"--clone3-enosys"}, {"true"});
  ASSERT_EQ(clone3.exit_code, 0) << clone3.err;
  RunResult moby = Exec(Flags(kSeccomp), {"true"});
  EXPECT_EQ(moby.exit_code, 125) << moby.err;
  EXPECT_NE(moby.err.find(kSeccomp.Remedy(false)[0]), std::string::npos) << moby.err;
  EXPECT_EQ(moby.err.find("bwrap exit"), std::string::npos) << moby.err;
  // And the host as it is still runs.
  EXPECT_EQ(Exec({}, {"true"}).exit_code, 0);
}

TEST_F(HostEnvTest, TheWarmSandboxWorksWhereClone3IsRefused) {
  if (LandlockAbi() < 1) SECURITY_SKIP("Landlock is unavailable: there is no warm sandbox");
  const Json report = Doctor({"--clone3-enosys"});
  const Json host = CheckNamed(report, "sandbox_host");
  EXPECT_TRUE(host.value("ok", false)) << host.dump(2);
  const Json clone3 = CheckNamed(report, "clone3");
  EXPECT_FALSE(clone3.value("ok", true)) << clone3.dump(2);
  const Json warm = CheckNamed(report, "warm_sandbox");
  EXPECT_TRUE(warm.value("ok", false)) << warm.dump(2);
  EXPECT_TRUE(report.value("ok", false)) << report.dump(2);
}

TEST_F(HostEnvTest, WeakerModesRunWhereThePolicyAllowsThem) {
  if (LandlockAbi() < 1) SECURITY_SKIP("Landlock is unavailable: there is no weaker mode");
  ExpectWeakerRuns(kMaskedProc);
  ExpectWeakerRuns(kNoUserns);
  ExpectWeakerRuns(kSeccomp);
  // Doctor with the same policy passes: the cause is a warning that names the mode, and the
  // confined `true` runs. (For an ordinary user this restriction is a user namespace mapping only
  // that user, as rootless Podman's: root's files show the overflow uid, and the install check
  // takes them for root's.)
  RunResult d = Cordon(Flags(kNoUserns), {"doctor", "--json", "--policy", dir_ / "weaker.toml"});
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  const Json report = Json::parse(d.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << d.out << d.err;
  const Json host = CheckNamed(report, "sandbox_host");
  EXPECT_FALSE(host.value("ok", true)) << host.dump(2);
  EXPECT_FALSE(host.value("required", true)) << host.dump(2);
  EXPECT_NE(CheckNamed(report, "weaker_mode").value("detail", "").find("landlock-seccomp"),
            std::string::npos)
      << report.dump(2);
  EXPECT_TRUE(CheckNamed(report, "sandbox_smoke_test").value("ok", false)) << report.dump(2);
}

TEST_F(HostEnvTest, UnderCordonsSeccompProfileTheFullSandboxRuns) {
  // Docker's default rules plus cordon-seccomp.json's additions: doctor passes, and exec,
  // staging and the warm sandbox work with the full sandbox.
  if (LandlockAbi() < 1) SECURITY_SKIP("Landlock is unavailable: there is no warm sandbox");
  const std::vector<std::string> f = {"--seccomp-profile", CordonProfile()};
  const Json report = Doctor(f);
  for (const char* check :
       {"sandbox_host", "sandbox_smoke_test", "warm_sandbox", "workspace_staging"}) {
    EXPECT_TRUE(CheckNamed(report, check).value("ok", false)) << check << "\n" << report.dump(2);
  }
  EXPECT_TRUE(report.value("ok", false)) << report.dump(2);
  RunResult e = Exec(f, {"sh", "-c", "echo staged > made.txt"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(ReadFile(ws_ + "/made.txt"), "staged\n");
  const Json conf = Processes().back()["confinement"];
  EXPECT_EQ(conf.value("mode", ""), "bwrap") << conf.dump(2);
  EXPECT_EQ(conf.value("workspace_mode", ""), "staged") << conf.dump(2);
  ExpectRefused(Exec(f, {ws_ + "/probe", "read", "/etc/shadow"}), "/etc/shadow");
  ExpectRefused(Exec(f, {ws_ + "/probe", "unshare"}), "a user namespace inside");
}

// The escape cases the namespace-free mode (landlock-seccomp) still promises: the ctest label
// weaker-landlock-seccomp names them.
TEST_F(HostEnvTest, LandlockSeccompModeKeepsItsEscapeCases) {
  if (LandlockAbi() < 1) SECURITY_SKIP("Landlock is unavailable: there is no weaker mode");
  const auto f = Flags(kNoUserns);
  ExpectSandboxHolds(f);
  ExpectRefused(Exec(f, {ws_ + "/probe", "unshare"}, true), "a user namespace");
  ExpectRefused(Exec(f, {ws_ + "/probe", "read", "/proc/1/environ"}, true), "/proc of the host");
  EXPECT_EQ(Processes().back()["confinement"].value("mode", ""), "landlock-seccomp");
}

// The escape cases of the host-proc mode (bwrap-host-proc): the host's /proc is there, but no
// other process's environment can be read through it, cordon's own included.
TEST_F(HostEnvTest, HostProcModeKeepsOtherProcessesEnvironmentsUnreadable) {
  if (LandlockAbi() < 1) SECURITY_SKIP("Landlock is unavailable: the host-proc mode refuses");
  const auto f = Flags(kMaskedProc);
  // The user's other process, with a secret in its environment.
  const std::string marker = "HOSTPROC_MARKER_" + std::to_string(::getpid());
  const pid_t other = ::fork();
  if (other == 0) {
    ::setenv("OTHER_SECRET", marker.c_str(), 1);
    ::execlp("sleep", "sleep", "30", nullptr);
    ::_exit(127);
  }
  ASSERT_GT(other, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // cordon itself carries the marker in its own environment too.
  RunResult r = Exec(f,
                     {"sh", "-c",
                      "ls /proc | grep -c '^[0-9]' ; cat /proc/" + std::to_string(other) +
                          "/environ; for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null; done | "
                          "tr '\\0' '\\n' | grep -a " +
                          marker + "; true"},
                     true, {"CORDON_SIDE_SECRET=" + marker});
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(marker), std::string::npos) << "an environment leaked: " << r.out;
  EXPECT_NE(r.err.find("environ"), std::string::npos) << "the read was not refused: " << r.err;
  const auto procs = Processes();
  ASSERT_FALSE(procs.empty());
  EXPECT_EQ(procs.back()["confinement"].value("mode", ""), "bwrap-host-proc");
  // The rest of bwrap's sandbox holds.
  ExpectSandboxHolds(f);
  ExpectRefused(Exec(f, {ws_ + "/probe", "kill", std::to_string(other)}, true),
                "a signal to a host process");
  RunResult proc_write = Exec(f, {"sh", "-c", "echo 1 > /proc/sys/kernel/shmmax"}, true);
  EXPECT_NE(proc_write.exit_code, 0) << "the host's /proc is writable";
}

}  // namespace
}  // namespace cordon
