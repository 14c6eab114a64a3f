// The user's interpreter: a version manager's shim is resolved by the manager itself and the
// interpreter it names runs, its prefix readable; a shim that cannot be resolved is an error
// naming the fix. The real-pyenv tests use the pyenv installed on the host (no stand-in): they
// skip, saying so, where there is none.
#include "runner/interpreter.h"

#include <gtest/gtest.h>

#include "runner/host_probe.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using cordon::testing::CordonBin;
using cordon::testing::ReadFile;
using cordon::testing::TempDir;
using cordon::testing::WriteFile;

TEST(VersionManagerShims, TheManagerIsKnownByItsShimsDirectory) {
  const auto managers = VersionManagers({"/h", "", "", "", ""});
  auto name = [&](const std::string& exe) {
    auto m = ShimManager(exe, managers);
    return m ? m->name : std::string("-");
  };
  EXPECT_EQ(name("/h/.pyenv/shims/python3"), "pyenv");
  EXPECT_EQ(name("/h/.asdf/shims/node"), "asdf");
  EXPECT_EQ(name("/h/.local/share/mise/shims/python"), "mise");
  EXPECT_EQ(name("/h/.local/share/rtx/shims/node"), "rtx");
  EXPECT_EQ(name("/h/.volta/bin/node"), "volta");
  EXPECT_EQ(name("/h/.volta/bin/volta"), "-") << "volta's own program is not a shim";
  EXPECT_EQ(name("/usr/bin/python3"), "-");
  EXPECT_EQ(name("/h/.pyenv/versions/3.11.7/bin/python3"), "-");
  EXPECT_EQ(name("/h/.pyenv/shims/sub/python3"), "-");
  const auto custom = VersionManagers({"/h", "/opt/pyenv", "/d/asdf", "", "/v"});
  EXPECT_EQ(ShimManager("/opt/pyenv/shims/python3", custom)->name, "pyenv");
  EXPECT_EQ(ShimManager("/d/asdf/shims/python3", custom)->name, "asdf");
  EXPECT_EQ(ShimManager("/v/bin/node", custom)->name, "volta");
  EXPECT_FALSE(ShimManager("/h/.pyenv/shims/python3", custom));
}

TEST(VersionManagerShims, AnInterpretersPrefixHoldsItsLib) {
  TempDir dir;
  WriteFile(dir / "envs/x/bin/python3.11", "");
  WriteFile(dir / "envs/x/lib/python3.11/os.py", "");
  WriteFile(dir / "nolib/bin/python3", "");
  WriteFile(dir / "tool/bin/rg", "");
  std::filesystem::create_directories(dir / "tool/lib");
  EXPECT_EQ(InterpreterPrefix(dir / "envs/x/bin/python3.11").value_or("-"), dir / "envs/x");
  EXPECT_FALSE(InterpreterPrefix(dir / "nolib/bin/python3"));
  EXPECT_FALSE(InterpreterPrefix(dir / "tool/bin/rg")) << "only interpreters";
  EXPECT_FALSE(InterpreterPrefix("/usr/bin/python3")) << "a system prefix";
  EXPECT_FALSE(InterpreterPrefix("/usr/local/bin/node"));
}

// The host's pyenv, as a person's shell would use it: python3 on the PATH is its shim.
class RealPyenv : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string python = FindOnPath("python3");
    const std::string pyenv = FindOnPath("pyenv");
    if (pyenv.empty() || python.find("/shims/") == std::string::npos)
      GTEST_SKIP() << "SKIPPED: no pyenv here (python3 on PATH is " << python
                   << "); these tests run the real pyenv";
    if (FindOnPath("bwrap").empty() || !cordon::testing::UserNamespacesEnabled())
      GTEST_SKIP() << "SKIPPED SANDBOX TEST: bwrap or user namespaces missing";
    auto which = cordon::testing::Run({pyenv, "which", "python3"});
    if (which.exit_code != 0) GTEST_SKIP() << "SKIPPED: pyenv which python3 fails: " << which.err;
    interpreter_ = std::filesystem::canonical(which.out.substr(0, which.out.find('\n')));
    prefix_ = std::filesystem::path(interpreter_).parent_path().parent_path().string();
    std::filesystem::create_directories(dir_ / "ws");
    WriteFile(dir_ / "ws/server.py", "import sys\nprint(sys.prefix)\n");
  }
  cordon::testing::RunResult Cordon(std::vector<std::string> args,
                                    std::vector<std::string> env = {}) {
    args.insert(args.begin(), CordonBin());
    env.push_back("XDG_STATE_HOME=" + (dir_ / "state"));
    return cordon::testing::Run(args, env);
  }
  TempDir dir_;
  std::string interpreter_, prefix_;
};

TEST_F(RealPyenv, WrapPlanRunsTheInterpreterPyenvSelectsAndGrantsItsPrefix) {
  auto r = Cordon({"wrap", "--plan", "--workspace", dir_ / "ws", "--", "python3", "server.py"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json plan = Json::parse(r.out);
  EXPECT_EQ(plan["contain"]["argv"][0], interpreter_) << plan["contain"].dump();
  bool granted = false;
  for (const auto& g : plan["confinement"].value("grants", Json::array())) {
    if (g["path"] == prefix_) {
      granted = true;
      EXPECT_EQ(g["access"], "read");
      EXPECT_EQ(g["from"], "pyenv which python3 -> " + interpreter_);
    }
  }
  EXPECT_TRUE(granted) << plan["confinement"].dump();
}

TEST_F(RealPyenv, ExecRunsPyenvsPythonConfinedAndTheRecordSaysSo) {
  auto r = Cordon({"exec", "--workspace", dir_ / "ws", "--audit-log", dir_ / "a.jsonl", "--",
                   "python3", "server.py"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, prefix_ + "\n") << "not the system python3";
  EXPECT_NE(ReadFile(dir_ / "a.jsonl").find("pyenv which python3 -> " + interpreter_),
            std::string::npos);
}

// pyenv's `which` falls back to the system's command when the selected version is missing and
// the system has one (python3 here): the shim runs that, and so does cordon. A shim only the
// missing version could provide is the case pyenv itself refuses.
TEST_F(RealPyenv, AShimPyenvCannotResolveIsAnErrorNamingTheFix) {
  std::string name;
  for (const char* n : {"idle3", "python3.13", "python3.12", "python3.10", "2to3"}) {
    const std::string shim = std::filesystem::path(FindOnPath("python3")).parent_path() / n;
    if (cordon::testing::Exists(shim) && !cordon::testing::Exists(std::string("/usr/bin/") + n) &&
        !cordon::testing::Exists(std::string("/usr/local/bin/") + n)) {
      name = n;
      break;
    }
  }
  if (name.empty()) GTEST_SKIP() << "SKIPPED: no pyenv shim here that the system lacks";
  const std::vector<std::string> env = {"PYENV_VERSION=0.0.1-not-installed"};
  auto w = Cordon({"wrap", "--workspace", dir_ / "ws", "--", name, "server.py"}, env);
  EXPECT_EQ(w.exit_code, 125) << w.err;
  for (const std::string& says :
       {name + " is a pyenv shim", "`pyenv which " + name + "`", std::string("0.0.1-not-installed"),
        std::string("give the interpreter's own path")})
    EXPECT_NE(w.err.find(says), std::string::npos) << says << " in: " << w.err;
  auto e = Cordon({"exec", "--workspace", dir_ / "ws", "--", name, "server.py"}, env);
  EXPECT_EQ(e.exit_code, 125) << "exec: cordon could not start it; " << e.err;
  EXPECT_NE(e.err.find(name + " is a pyenv shim"), std::string::npos) << e.err;
  EXPECT_EQ(e.err.find("outside what the sandbox can read"), std::string::npos) << e.err;
  EXPECT_TRUE(e.out.empty()) << "nothing ran: " << e.out;
}

// doctor's interpreter check goes through the same resolution: pyenv's Python, its prefix granted.
TEST_F(RealPyenv, DoctorChecksThePythonPyenvSelects) {
  auto d = Cordon({"doctor", "--json"});
  Json j = Json::parse(d.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << d.out << d.err;
  bool found = false;
  for (const auto& c : j["checks"]) {
    if (c.value("name", "") != "mcp_server_python3") continue;
    found = true;
    EXPECT_TRUE(c.value("ok", false)) << c.dump();
    EXPECT_NE(c.value("detail", "").find("its program files granted: " + prefix_),
              std::string::npos)
        << c.dump();
  }
  EXPECT_TRUE(found) << d.out;
}

}  // namespace
}  // namespace cordon
