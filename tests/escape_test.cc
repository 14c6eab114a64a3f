// Escape attempts against the real cordon binary, the real kernel and real bwrap. Each test is
// one promise of SECURITY.md and fails when that promise breaks. Missing kernel features skip
// loudly, naming the feature.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "core/text.h"
#include "runner/host_probe.h"
#include "runner/landlock.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::string ProbeBin() { return testing::FromEnv("CORDON_TEST_PROBE", CORDON_PROBE); }

// How many processes on the host run `sleep SECONDS` (cmdline "sleep", NUL, SECONDS, NUL,
// spelled out so no octal escape can swallow the digits).
// A sleep's length that only this test process uses ("313.4711": 313 s, with this pid after the
// point): several escape_test processes run at once under ctest (the forced-fallback runs, the
// one under cordon's seccomp profile), and CountSleeps looks at every process of the host.
std::string OwnSleep(int seconds) {
  return std::to_string(seconds) + "." + std::to_string(::getpid());
}

int CountSleeps(const std::string& seconds) {
  const std::string wanted = std::string("sleep") + '\0' + seconds + '\0';
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid[0] >= '0' && pid[0] <= '9' && ReadFile(e.path().string() + "/cmdline") == wanted) ++n;
  }
  return n;
}

// Every file or directory under `root` (the root itself included) that carries a set-user-ID or
// set-group-ID bit, as the host sees it.
std::vector<std::string> SetIdFiles(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  auto check = [&](const std::string& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0) {
      char mode[16];
      std::snprintf(mode, sizeof mode, "%o", st.st_mode & 07777);
      out.push_back(p + " (" + mode + ")");
    }
  };
  check(root);
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    check(it->path().string());
  }
  return out;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

class EscapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindOnPath("bwrap").empty()) {
      SECURITY_SKIP(
          "bwrap is not installed, so cordon fails closed; "
          "install bubblewrap to run the escape tests");
    }
    if (!testing::UserNamespacesEnabled()) {
      SECURITY_SKIP("user namespaces are disabled (user.max_user_namespaces=0)");
    }
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_ + "/.git/hooks");
    std::filesystem::create_directories(ws_ + "/.git/objects");
    WriteFile(ws_ + "/.git/config", "[core]\n");
    WriteFile(ws_ + "/.git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    std::filesystem::copy_file(ProbeBin(), ws_ + "/probe");
    ::chmod((ws_ + "/probe").c_str(), 0755);
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
    // The escape suite again without bwrap (ctest's escape_test_no_bwrap sets
    // CORDON_TEST_NO_BWRAP=1, runner/host_capabilities.h): cordon fails closed there unless the
    // policy allows the weaker mode, as a user on such a host would allow it.
    if (const char* v = std::getenv("CORDON_TEST_NO_BWRAP"); v != nullptr && v[0] == '1') {
      std::filesystem::create_directories(dir_ / "config/cordon/policies.d");
      WriteFile(dir_ / "config/cordon/policies.d/30-weaker.toml",
                "[sandbox]\nallow_weaker = true\n");
    }
  }
  // The direct mode (docs/adr/0006-staged-workspace.md, the fallback): the tests of its read-only
  // binds, git views, pins and sweep run with it; the staged mode's are tests/staged_test.cc.
  void DirectMode() {
    std::filesystem::create_directories(dir_ / "config/cordon/policies.d");
    WriteFile(dir_ / "config/cordon/policies.d/40-direct.toml",
              "[sandbox]\nworkspace = \"direct\"\n");
  }
  testing::RunResult Exec(std::vector<std::string> cmd, std::vector<std::string> opts = {},
                          std::vector<std::string> extra_env = {}) {
    std::vector<std::string> argv = {
        testing::CordonBin(), "exec", "--workspace", ws_, "--audit-log", dir_ / "audit.jsonl"};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    auto env = env_;
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    return testing::Run(argv, env);
  }
  testing::RunResult Probe(std::vector<std::string> args, std::vector<std::string> opts = {}) {
    args.insert(args.begin(), ws_ + "/probe");
    return Exec(args, opts);
  }
  testing::RunResult Call(const std::string& tool, const Json& input) {
    return testing::Run({testing::CordonBin(), "call", tool, "--workspace", ws_, "--audit-log",
                         dir_ / "audit.jsonl", "--json", input.dump()},
                        env_);
  }
  void ExpectRefused(const testing::RunResult& r, const std::string& what) {
    EXPECT_EQ(r.exit_code, 1) << what << "\nstdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_NE(r.out.find("refused"), std::string::npos) << what << ": " << r.out << r.err;
    EXPECT_EQ(r.out.find("ESCAPED"), std::string::npos) << what;
  }
  // Starts `cordon exec -- sleep SECONDS` without waiting for it (its output discarded).
  pid_t SpawnSleepingExec(const std::string& log, const std::string& seconds) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execl(testing::CordonBin().c_str(), "cordon", "exec", "--workspace", ws_.c_str(),
              "--audit-log", log.c_str(), "--", "sleep", seconds.c_str(),
              static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }
  // --- git metadata (SECURITY.md "Git metadata (issue 9)") ---
  // Host git, with no global or system configuration of the machine running the tests.
  testing::RunResult HostGit(const std::string& repo, std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", repo});
    return testing::Run(args, GitEnv());
  }
  std::vector<std::string> GitEnv() {
    return {"HOME=" + (dir_ / "home"),          "GIT_CONFIG_NOSYSTEM=1",
            "GIT_CONFIG_GLOBAL=/dev/null",      "GIT_AUTHOR_NAME=t",
            "GIT_AUTHOR_EMAIL=t@example.org",   "GIT_COMMITTER_NAME=t",
            "GIT_COMMITTER_EMAIL=t@example.org"};
  }
  void InitRepo(const std::string& repo) {
    std::filesystem::create_directories(repo);
    for (std::vector<std::string> c : {std::vector<std::string>{"init", "-q", "-b", "main"},
                                       {"config", "user.name", "t"},
                                       {"config", "user.email", "t@example.org"},
                                       {"config", "commit.gpgsign", "false"},
                                       {"commit", "-q", "--allow-empty", "-m", "base"}}) {
      auto r = HostGit(repo, c);
      ASSERT_EQ(r.exit_code, 0) << c[0] << ": " << r.out << r.err;
    }
  }
  // An executable that leaves a marker when run: what core.fsmonitor or a hook would run.
  std::string Sentinel() {
    const std::string path = dir_ / "sentinel.sh";
    WriteFile(path, "#!/bin/sh\ntouch " + (dir_ / "SENTINEL_RAN") + "\nexit 1\n");
    ::chmod(path.c_str(), 0755);
    return path;
  }
  bool SentinelRan() { return testing::Exists(dir_ / "SENTINEL_RAN"); }
  // What a user does on the host: git status (in the repository and with -C) and a hook run.
  void HostGitUses(const std::string& repo) {
    HostGit(repo, {"status", "--porcelain"});
    testing::Run({"/bin/sh", "-c", "cd '" + repo + "' && /usr/bin/git status"}, GitEnv());
    HostGit(repo, {"hook", "run", "--ignore-missing", "pre-commit"});
    HostGit(repo, {"hook", "run", "--ignore-missing", "post-checkout"});
  }
  // Runs `plant` in a sandbox that stays alive; the host uses git in each repository while it
  // runs and after it ended. The sentinel must never run.
  void ExpectPlantHasNoHostEffect(const std::string& plant, const std::vector<std::string>& repos,
                                  const std::string& what) {
    const std::string ready = ws_ + "/.plant-ready";
    std::error_code ec;
    std::filesystem::remove(ready, ec);
    const std::string out = dir_ / "plant.out";
    std::vector<std::string> envs = env_;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (entry.rfind("XDG_CONFIG_HOME=", 0) != 0 && entry.rfind("XDG_STATE_HOME=", 0) != 0)
        envs.push_back(entry);
    }
    std::vector<char*> cenv;
    for (auto& e : envs) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      const std::string script = "cd '" + ws_ + "'; " + plant + "; touch '" + ready + "'; sleep 2";
      const std::string log = dir_ / "plant.jsonl";
      ::execle(testing::CordonBin().c_str(), "cordon", "exec", "--workspace", ws_.c_str(),
               "--audit-log", log.c_str(), "--", "/bin/sh", "-c", script.c_str(),
               static_cast<char*>(nullptr), cenv.data());
      _exit(127);
    }
    for (int i = 0; i < 300 && !testing::Exists(ready); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(testing::Exists(ready)) << what << ": the plant did not run: " << ReadFile(out);
    for (const auto& r : repos) HostGitUses(r);
    EXPECT_FALSE(SentinelRan()) << what << ": host git ran the planted command during the run";
    int status = 0;
    ::waitpid(pid, &status, 0);
    for (const auto& r : repos) HostGitUses(r);
    EXPECT_FALSE(SentinelRan()) << what << ": host git ran the planted command after the run\n"
                                << ReadFile(out);
    std::filesystem::remove(ready, ec);
  }
  // Files the plant copies from (the sandbox has its own /tmp: they live in the workspace).
  std::string Payload(const std::string& name) { return ws_ + "/payload/" + name; }
  std::string FsmonitorConfig() { return "[core]\n\tfsmonitor = " + Sentinel() + "\n"; }

  TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
};

// The fallback that a switch of ctest's escape_test_no_bwrap, _no_landlock and _no_overlay runs
// (tests/CMakeLists.txt; runner/host_capabilities.h) is the one in force, as the record's
// confinement says; without a switch, the full sandbox's bwrap with this host's Landlock.
TEST_F(EscapeTest, ForcedFallbackIsTheOneInForce) {
  auto on = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] == '1';
  };
  auto r = Exec({"true"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  Json conf;
  std::istringstream log(ReadFile(dir_ / "audit.jsonl"));
  std::function<void(const Json&)> find = [&](const Json& j) {
    if (!j.is_object()) return;
    if (j.contains("confinement") && j["confinement"].is_object()) conf = j["confinement"];
    for (const auto& [k, v] : j.items()) find(v);
  };
  for (std::string line; std::getline(log, line);) find(Json::parse(line, nullptr, false));
  ASSERT_TRUE(conf.is_object()) << "no confinement in the record";
  const bool no_bwrap = on("CORDON_TEST_NO_BWRAP");
  EXPECT_EQ(conf.value("mode", ""), no_bwrap ? "landlock-seccomp" : "bwrap") << conf.dump();
  if (on("CORDON_TEST_NO_LANDLOCK")) {
    EXPECT_EQ(conf.value("landlock_abi", -1), 0) << conf.dump();
  } else if (LandlockAbi() >= 1) {
    EXPECT_GE(conf.value("landlock_abi", 0), 1) << conf.dump();
  }
  if (no_bwrap || on("CORDON_TEST_NO_OVERLAY")) {
    EXPECT_EQ(conf.value("workspace_mode", ""), "direct") << conf.dump();
  }
}

TEST_F(EscapeTest, ShadowAndHostHomeAreUnreadable) {
  ExpectRefused(Probe({"read", "/etc/shadow"}), "/etc/shadow");
  ExpectRefused(Probe({"read", "/etc/gshadow"}), "/etc/gshadow");
  // A file in the invoking user's home, outside the workspace.
  const char* home = std::getenv("HOME");
  ASSERT_NE(home, nullptr);
  std::string secret = std::string(home) + "/.cordon-escape-test-" + std::to_string(::getpid());
  WriteFile(secret, "host home secret\n");
  auto r = Probe({"read", secret});
  std::filesystem::remove(secret);
  ExpectRefused(r, "host home file");
}

// The user's credential stores (issue 32) stay unreadable when the tools' directories are granted
// (`--read ~/.cargo`, `--read ~/.config`, ...; the home itself is never granted): every store's
// path is on the shipped deny list.
TEST_F(EscapeTest, CredentialStoresStayUnreadableUnderGrantsOfTheToolsDirectories) {
  const std::string home = dir_ / "home";
  const std::vector<std::string> stores = {".pgpass",
                                           ".my.cnf",
                                           ".git-credentials",
                                           ".npmrc",
                                           ".pypirc",
                                           ".netrc",
                                           ".vault-token",
                                           ".aws/credentials",
                                           ".aws/config",
                                           ".docker/config.json",
                                           ".kube/config",
                                           ".config/gh/hosts.yml",
                                           ".config/gcloud/application_default_credentials.json",
                                           ".azure/msal_token_cache.json",
                                           ".terraform.d/credentials.tfrc.json",
                                           ".cargo/credentials.toml",
                                           ".cargo/credentials",
                                           ".gem/credentials",
                                           ".m2/settings.xml",
                                           ".nuget/NuGet/NuGet.Config",
                                           ".ssh/id_ed25519"};
  std::string cat;
  for (std::size_t i = 0; i < stores.size(); ++i) {
    std::filesystem::create_directories(
        std::filesystem::path(home + "/" + stores[i]).parent_path());
    WriteFile(home + "/" + stores[i], "store-value-" + std::to_string(i) + "-Zq9\n");
    cat += " '" + home + "/" + stores[i] + "'";
  }
  WriteFile(home + "/.config/ordinary.txt", "an ordinary file of the home\n");
  std::vector<std::string> grants;
  for (const char* d : {".cargo", ".config", ".m2", ".gem", ".nuget", ".terraform.d", ".azure"})
    grants.insert(grants.end(), {"--read", home + "/" + d});
  auto r = Exec(
      {"/bin/sh", "-c", "cat '" + home + "/.config/ordinary.txt'" + cat + " 2>/dev/null; true"},
      grants, {"HOME=" + home});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("an ordinary file of the home"), std::string::npos)
      << "the grant of the home must hold: " << r.out << r.err;
  for (std::size_t i = 0; i < stores.size(); ++i)
    EXPECT_EQ(r.out.find("store-value-" + std::to_string(i) + "-"), std::string::npos)
        << stores[i] << " was readable under --read " << home;
}

// A deny entry inside a denied directory (a user's "~/.aws/credentials" beside the shipped
// "~/.aws"; a credential store the redactor reads inside a denied directory) neither fails the
// launch (bwrap cannot make a mount point in the tmpfs that masks the directory: before, every
// launch failed with "Can't create file ... Read-only file system") nor shows the file.
TEST_F(EscapeTest, DenyEntriesInsideADeniedDirectoryNeitherFailTheLaunchNorShowTheFile) {
  const std::string home = dir_ / "home";
  WriteFile(home + "/.aws/credentials", "nested-deny-value-Qz7\n");
  WriteFile(home + "/work/keys/inner.key", "inner-deny-value-Wx4\n");
  WriteFile(home + "/work/notes.txt", "visible notes\n");
  WriteFile(dir_ / "nested.toml",
            "[filesystem]\ndeny = [\"~/.aws/credentials\", \"~/work/keys/inner.key\", "
            "\"~/work/keys\", \"~/work/keys\"]\n");
  auto r =
      Exec({"/bin/sh", "-c",
            "cat '" + home + "/.aws/credentials' '" + home + "/work/keys/inner.key' '" + home +
                "/work/notes.txt' 2>/dev/null; true"},
           {"--policy", dir_ / "nested.toml", "--read", home + "/.aws", "--read", home + "/work"},
           {"HOME=" + home});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("visible notes"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("nested-deny-value"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("inner-deny-value"), std::string::npos) << r.out;
}

TEST_F(EscapeTest, WritesOutsideTheWritableRootsFailAndTheHostIsUnchanged) {
  TempDir outside;
  WriteFile(outside / "victim.txt", "original\n");
  ExpectRefused(Probe({"write", outside / "victim.txt"}), "file outside the workspace");
  ExpectRefused(Probe({"write", "/etc/cordon-escape"}), "/etc");
  ExpectRefused(Probe({"write", "/usr/bin/cordon-escape"}), "/usr/bin");
  EXPECT_EQ(ReadFile(outside / "victim.txt"), "original\n");
  EXPECT_FALSE(testing::Exists("/etc/cordon-escape"));
  // The sandbox's /tmp is private: a write there never reaches the host's /tmp.
  std::string name = "/tmp/cordon-escape-" + std::to_string(::getpid());
  auto r = Probe({"write", name});
  EXPECT_FALSE(testing::Exists(name)) << r.out;
  // And the workspace itself is writable.
  auto ok = Probe({"write", ws_ + "/allowed.txt"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(ReadFile(ws_ + "/allowed.txt"), "pwned\n");
}

TEST_F(EscapeTest, SymlinkInTheWorkspaceCannotWriteOutside) {
  TempDir outside;
  WriteFile(outside / "target.txt", "original\n");
  ASSERT_EQ(::symlink(outside.path().c_str(), (ws_ + "/out").c_str()), 0);
  ASSERT_EQ(::symlink((outside / "target.txt").c_str(), (ws_ + "/file-link").c_str()), 0);
  ExpectRefused(Probe({"write", ws_ + "/out/new.txt"}), "through a directory symlink");
  ExpectRefused(Probe({"write", ws_ + "/file-link"}), "through a file symlink");
  EXPECT_EQ(ReadFile(outside / "target.txt"), "original\n");
  EXPECT_FALSE(testing::Exists(outside / "new.txt"));
}

TEST_F(EscapeTest, GitHooksAndConfigAreReadOnlyButObjectsAreWritable) {
  DirectMode();  // what the sweep and the direct binds promise
  ExpectRefused(Probe({"write", ws_ + "/.git/hooks/pre-commit"}), ".git/hooks/pre-commit");
  ExpectRefused(Probe({"write", ws_ + "/.git/hooks/post-checkout"}), "new hook");
  ExpectRefused(Probe({"write", ws_ + "/.git/config"}), ".git/config");
  auto ok = Probe({"write", ws_ + "/.git/objects/ab"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(ReadFile(ws_ + "/.git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
  EXPECT_EQ(ReadFile(ws_ + "/.git/config"), "[core]\n");
  // Nested repositories too.
  std::filesystem::create_directories(ws_ + "/vendor/lib/.git/hooks");
  WriteFile(ws_ + "/vendor/lib/.git/config", "[core]\n");
  ExpectRefused(Probe({"write", ws_ + "/vendor/lib/.git/hooks/pre-commit"}), "nested hook");
  ExpectRefused(Probe({"write", ws_ + "/vendor/lib/.git/config"}), "nested config");
  // The rest of the top of a git directory is the sandbox's private view: a write there may
  // succeed inside, and never reaches the host (issue 9).
  for (const char* p : {"/.git/commondir", "/.git/config.worktree", "/vendor/lib/.git/commondir"}) {
    Probe({"write", ws_ + p});
    EXPECT_FALSE(testing::Exists(ws_ + p)) << p << " reached the host";
  }
  // What a commit writes at the top (HEAD, index) goes through when git reads it; an index git
  // cannot read (the probe writes "pwned") is git content no check can read, and stays out
  // (issue 33: fail closed, exec exits 123), as a HEAD git cannot read stays in the view: host
  // git would take .git for no repository.
  const std::string index_before = ReadFile(ws_ + "/.git/index");
  auto index = Probe({"write", ws_ + "/.git/index"});
  EXPECT_EQ(index.exit_code, 123) << index.out << index.err;
  EXPECT_EQ(ReadFile(ws_ + "/.git/index"), index_before);
  Probe({"write", ws_ + "/.git/HEAD"});
  EXPECT_FALSE(testing::Exists(ws_ + "/.git/HEAD"));
}

// rm .git/HEAD reached the host (issue 33): host git then takes the workspace for no repository
// and falls through to a parent directory's. A repository's HEAD is never deleted nor replaced
// by one git cannot read, in either workspace mode; staged, its objects/ and refs/ are never
// deleted or emptied either (the direct mode shares those two with the host, SECURITY.md).
TEST_F(EscapeTest, ARepositoryKeepsItsHeadObjectsAndRefs) {
  InitRepo(dir_.path());  // the parent repository git would fall through to
  InitRepo(ws_);
  const std::string head = ReadFile(ws_ + "/.git/HEAD");
  ASSERT_EQ(head, "ref: refs/heads/main\n");
  struct Case {
    std::string script;
    bool direct;  // tried in the direct mode too
  };
  const std::string g = ws_ + "/.git";
  const std::vector<Case> cases = {
      {"rm " + g + "/HEAD", true},
      {"printf 'not a head' > " + g + "/HEAD", true},
      {"printf 'ref: ../../x\\n' > " + g + "/HEAD", true},
      {"rm " + g + "/HEAD && mkdir " + g + "/HEAD", true},
      {"rm -rf " + g + "/refs", false},
      {"rm -rf " + g + "/refs && mkdir " + g + "/refs", false},
      {"rm -rf " + g + "/objects && mkdir " + g + "/objects", false},
      // Found by the adversarial pass: what an ordinary user's git cannot read or search.
      {"chmod 000 " + g + "/objects " + g + "/refs", false},
      {"chmod 000 " + g + "/HEAD; chmod 0 " + g, false}};
  // Which mode the first pass runs in: staged where this host (and the run's forced fallback,
  // escape_test_no_overlay) allows it. Only the staged mode keeps objects/ and refs/.
  Exec({"/bin/true"});
  std::string first_mode;
  {
    std::istringstream log(ReadFile(dir_ / "audit.jsonl"));
    for (std::string line; std::getline(log, line);) {
      const Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == "process" && j.contains("confinement"))
        first_mode = j["confinement"].value("workspace_mode", "");
    }
  }
  ASSERT_FALSE(first_mode.empty()) << "no process record";
  for (const bool direct : {false, true}) {
    if (direct) DirectMode();
    for (const Case& c : cases) {
      if ((direct || first_mode != "staged") && !c.direct) continue;
      const std::string what = c.script + (direct ? " (direct mode)" : "");
      Exec({"/bin/sh", "-c", c.script});
      auto top = HostGit(ws_, {"rev-parse", "--absolute-git-dir"});
      EXPECT_EQ(top.out, g + "\n") << what << ": " << top.err;
      EXPECT_EQ(ReadFile(g + "/HEAD"), head) << what;
      auto log = HostGit(ws_, {"log", "-1", "--format=%s"});
      EXPECT_EQ(log.out, "base\n") << what << ": " << log.err;
      // What its owner's git needs (root's reads past any mode): the directories searchable,
      // HEAD readable.
      for (const std::string& d : {g, g + "/objects", g + "/refs"}) {
        struct stat st {};
        EXPECT_EQ(::stat(d.c_str(), &st), 0) << d;
        EXPECT_EQ(st.st_mode & 0700, 0700u) << what << ": " << d;
      }
      struct stat hs {};
      EXPECT_EQ(::stat((g + "/HEAD").c_str(), &hs), 0);
      EXPECT_NE(hs.st_mode & 0400, 0u) << what << ": HEAD unreadable";
    }
  }
  // A hard link between a workspace name and git's own file lands as two files: a later write
  // through the workspace name (an editor, the direct mode) never reaches .git/HEAD.
  if (first_mode == "staged") {
    std::filesystem::remove(dir_ / "config/cordon/policies.d/40-direct.toml");
    Exec({"/bin/sh", "-c", "ln " + g + "/HEAD " + ws_ + "/h && ln " + g + "/index " + ws_ + "/i"});
    struct stat head_st {
    }, h_st{};
    ASSERT_EQ(::stat((g + "/HEAD").c_str(), &head_st), 0);
    if (::stat((ws_ + "/h").c_str(), &h_st) == 0) {
      EXPECT_NE(head_st.st_ino, h_st.st_ino) << "h is .git/HEAD on the host";
    }
    struct stat i_st {
    }, index_st{};
    if (::stat((ws_ + "/i").c_str(), &i_st) == 0 &&
        ::stat((g + "/index").c_str(), &index_st) == 0) {
      EXPECT_NE(i_st.st_ino, index_st.st_ino) << "i is .git/index on the host";
    }
  }
  // A HEAD git reads still lands: a branch switch.
  auto sw = Exec({"/bin/sh", "-c", "cd " + ws_ + " && git checkout -q -b other"}, {}, GitEnv());
  EXPECT_EQ(sw.exit_code, 0) << sw.out << sw.err;
  EXPECT_EQ(ReadFile(g + "/HEAD"), "ref: refs/heads/other\n");
}

TEST_F(EscapeTest, GitCommondirPlantedByExecNeverReachesHostGit) {
  InitRepo(ws_);
  const std::string cfg = FsmonitorConfig();
  // commondir sends git to a directory the agent controls for its config and hooks.
  WriteFile(Payload("evil.config"), cfg);
  ExpectPlantHasNoHostEffect(
      "mkdir -p evil/objects evil/refs evil/hooks; cp '" + Payload("evil.config") +
          "' evil/config; cp .git/HEAD evil/HEAD; echo ../evil > .git/commondir",
      {ws_}, ".git/commondir from exec");
  EXPECT_FALSE(testing::Exists(ws_ + "/.git/commondir"));
}

TEST_F(EscapeTest, EmbeddedBareRepositoriesNeverReachHostGit) {
  // git takes any directory holding HEAD, objects/ and refs/ for a bare repository when it runs
  // there, and reads its config: a hook path set there runs on the host's `git hook run`.
  InitRepo(ws_);
  const std::string hooks_cfg = "[core]\n\thooksPath = " + (dir_ / "evilhooks") + "\n";
  std::filesystem::create_directories(dir_ / "evilhooks");
  WriteFile(dir_ / "evilhooks/pre-commit", "#!/bin/sh\ntouch " + (dir_ / "SENTINEL_RAN") + "\n");
  ::chmod((dir_ / "evilhooks/pre-commit").c_str(), 0755);
  WriteFile(Payload("bare.config"), FsmonitorConfig() + hooks_cfg);
  // 1. An existing bare repository (a test fixture): its config and hooks stay read-only.
  auto init = HostGit(ws_, {"init", "-q", "--bare", "fixture.git"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const std::string fixture_cfg = ReadFile(ws_ + "/fixture.git/config");
  ExpectPlantHasNoHostEffect("cp '" + Payload("bare.config") + "' fixture.git/config; cp '" +
                                 Payload("bare.config") +
                                 "' fixture.git/config.worktree; echo x > fixture.git/commondir",
                             {ws_, ws_ + "/fixture.git"}, "an existing bare repository");
  EXPECT_EQ(ReadFile(ws_ + "/fixture.git/config"), fixture_cfg);
  EXPECT_FALSE(testing::Exists(ws_ + "/fixture.git/commondir"));
  // 2. A new one, in a subdirectory: after the run git no longer takes it for a repository.
  auto r = Exec({"/bin/sh", "-c",
                 "mkdir -p sub/objects sub/refs && echo 'ref: refs/heads/main' > sub/HEAD && cp '" +
                     Payload("bare.config") + "' sub/config"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(testing::Exists(ws_ + "/sub/HEAD")) << "HEAD is swept into quarantine";
  EXPECT_FALSE(testing::Exists(ws_ + "/sub/config")) << "its config goes with it";
  EXPECT_TRUE(testing::Exists(ws_ + "/sub/objects")) << "the rest of what the agent wrote stays";
  auto top = HostGit(ws_ + "/sub", {"rev-parse", "--absolute-git-dir"});
  EXPECT_EQ(top.out, ws_ + "/.git\n") << "git must find the workspace's own repository";
  HostGitUses(ws_ + "/sub");
  EXPECT_FALSE(SentinelRan()) << "host git ran what a planted bare repository configured";
}

TEST_F(EscapeTest, HiddenAndLooseRepositoriesAreFoundToo) {
  // git's own test for a repository is looser than "HEAD file + objects/ + refs/": HEAD may be a
  // symlink, objects/ and refs/ may be symlinks, or a commondir file stands in for both; and
  // the sandbox writes inside .git/objects. Each such plant loses its HEAD at the sweep.
  InitRepo(ws_);
  auto r = Exec({"/bin/sh", "-c",
                 "set -e; git init -q --bare a; rm a/HEAD; ln -s refs/heads/main a/HEAD; "
                 "mkdir -p b/.o b/refs c/x; ln -s .o b/objects; echo 'ref: refs/heads/main' > "
                 "b/HEAD; echo 'ref: refs/heads/main' > c/HEAD; echo ../b > c/commondir; "
                 "git init -q --bare .git/objects/r"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* head : {"a/HEAD", "b/HEAD", "c/HEAD", ".git/objects/r/HEAD"}) {
    struct stat st {};
    EXPECT_NE(::lstat((ws_ + "/" + head).c_str(), &st), 0) << head << " survived the sweep";
  }
  for (const char* dir : {"a", "b", "c"}) {
    auto top = HostGit(ws_ + "/" + dir, {"rev-parse", "--absolute-git-dir"});
    EXPECT_EQ(top.out, ws_ + "/.git\n") << dir << ": git still takes it for a repository";
  }
  // The file tools never write the names that make a repository, outside a .git directory.
  for (const char* p : {"w/HEAD", "w/commondir", "w/gitdir"}) {
    auto w = Call("create_file", {{"path", p}, {"content", "ref: refs/heads/main\n"}});
    EXPECT_NE(w.out.find("denied_by_policy"), std::string::npos) << p << ": " << w.out << w.err;
  }
}

TEST_F(EscapeTest, ADeepOrUnreadableTreeCannotStopTheSweep) {
  DirectMode();  // what the sweep and the direct binds promise
  // A tree 600 levels deep once crashed cordon in its recursive walk (stack exhaustion), and a
  // directory made unreadable once stopped the sweep: either left the planted names in place.
  auto r = Exec({"/bin/sh", "-c",
                 "mkdir .vscode d && touch d/.envrc && chmod 000 d && p=deep && i=0 && "
                 "while [ $i -lt 600 ]; do p=$p/a; i=$((i+1)); done && mkdir -p $p && "
                 "mkdir -p $p/.git"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(testing::Exists(ws_ + "/.vscode")) << "the sweep did not run to its end";
  EXPECT_FALSE(testing::Exists(ws_ + "/d/.envrc"));
  std::string deep = ws_ + "/deep";
  for (int i = 0; i < 300; ++i) deep += "/a";
  EXPECT_FALSE(testing::Exists(deep)) << "a subtree deeper than the walk goes to quarantine";
  // The workspace stays usable.
  auto next = Exec({"true"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
}

bool NoCgroupRunIsSkippedHere();

TEST_F(EscapeTest, TmpfileInUnsizedTmpfsIsRefusedWithoutACgroup) {
  if (NoCgroupRunIsSkippedHere()) GTEST_SKIP() << "the sanitizer build's shim cannot run here";
  // bwrap's /dev is an unsized tmpfs, and Landlock does not see O_TMPFILE: without a memory
  // cgroup O_TMPFILE answers EOPNOTSUPP, so no unnamed file can pin memory there.
  auto r = Exec({"python3", "-c",
                 "import os,errno\n"
                 "for d in ('/dev', '/dev/shm', '/tmp'):\n"
                 "  try:\n"
                 "    os.open(d, os.O_TMPFILE | os.O_RDWR); print(d, 'opened')\n"
                 "  except OSError as e:\n"
                 "    print(d, errno.errorcode[e.errno])\n"},
                {}, {"CORDON_TEST_NO_CGROUP=1"});
  EXPECT_EQ(r.out.find("opened"), std::string::npos) << r.out << r.err;
  // EOPNOTSUPP and ENOTSUP are one errno on Linux; Python names it ENOTSUP.
  EXPECT_TRUE(r.out.find("/dev EOPNOTSUPP") != std::string::npos ||
              r.out.find("/dev ENOTSUP") != std::string::npos)
      << r.out << r.err;
}

TEST_F(EscapeTest, GitCommondirPlantedByTheFileToolsIsRefused) {
  InitRepo(ws_);
  std::filesystem::create_directories(ws_ + "/evil/objects");
  std::filesystem::create_directories(ws_ + "/evil/refs");
  WriteFile(ws_ + "/evil/config", FsmonitorConfig());
  auto r = Call("create_file", {{"path", ".git/commondir"}, {"content", "../evil\n"}});
  EXPECT_NE(r.out.find("denied_by_policy"), std::string::npos) << r.out << r.err;
  EXPECT_FALSE(testing::Exists(ws_ + "/.git/commondir"));
  for (const char* p : {".git/config", ".git/hooks/pre-commit", ".git/info/exclude",
                        ".git/modules/x/config", ".git/worktrees/x/commondir"}) {
    auto w = Call("create_file", {{"path", p}, {"content", "x\n"}});
    EXPECT_NE(w.out.find("denied_by_policy"), std::string::npos) << p << ": " << w.out << w.err;
  }
  // A repository cannot be started by writing into a .git that does not exist.
  auto fresh = Call("create_file", {{"path", "newrepo/.git/HEAD"}, {"content", "ref: x\n"}});
  EXPECT_NE(fresh.out.find("denied_by_policy"), std::string::npos) << fresh.out << fresh.err;
  EXPECT_FALSE(testing::Exists(ws_ + "/newrepo/.git"));
  // Git content is git's to write, in a sandbox, where what it names is checked (issue 33): a
  // ref the file tools wrote would move a branch to a commit nobody checked.
  const std::string head = testing::ReadFile(ws_ + "/.git/HEAD");
  for (const char* p : {".git/refs/heads/by-tool", ".git/refs/heads/main", ".git/HEAD",
                        ".git/packed-refs", ".git/index", ".git/refs/heads/main.lock"}) {
    auto w = Call("create_file",
                  {{"path", p}, {"content", "0123456789012345678901234567890123456789\n"}});
    EXPECT_NE(w.out.find("git content"), std::string::npos) << p << ": " << w.out << w.err;
  }
  EXPECT_FALSE(testing::Exists(ws_ + "/.git/refs/heads/by-tool"));
  EXPECT_EQ(testing::ReadFile(ws_ + "/.git/HEAD"), head);
  // What else a commit writes stays writable for the file tools.
  auto ok = Call("create_file", {{"path", ".git/COMMIT_EDITMSG"}, {"content", "x\n"}});
  EXPECT_EQ(ok.out.find("denied_by_policy"), std::string::npos) << ok.out << ok.err;
  HostGitUses(ws_);
  EXPECT_FALSE(SentinelRan());
}

TEST_F(EscapeTest, LinkedWorktreeCommondirCannotBeRedirected) {
  InitRepo(ws_);
  const std::string wt = dir_ / "linked";
  auto add = HostGit(ws_, {"worktree", "add", "-q", "-b", "wtb", wt});
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  WriteFile(Payload("evil.config"), FsmonitorConfig());
  const std::string before = ReadFile(ws_ + "/.git/worktrees/linked/commondir");
  ExpectPlantHasNoHostEffect("mkdir -p evil/objects evil/refs; cp '" + Payload("evil.config") +
                                 "' evil/config; echo " + ws_ +
                                 "/evil > .git/worktrees/linked/commondir; "
                                 "cp '" +
                                 Payload("evil.config") + "' .git/worktrees/linked/config.worktree",
                             {wt, ws_}, ".git/worktrees/<name>/commondir");
  EXPECT_EQ(ReadFile(ws_ + "/.git/worktrees/linked/commondir"), before);
}

TEST_F(EscapeTest, SubmoduleConfigAndHooksAreReadOnly) {
  InitRepo(dir_ / "subsrc");
  InitRepo(ws_);
  auto add = HostGit(
      ws_, {"-c", "protocol.file.allow=always", "submodule", "add", "-q", dir_ / "subsrc", "sub"});
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  ASSERT_TRUE(testing::Exists(ws_ + "/.git/modules/sub/config"));
  WriteFile(Payload("evil.config"), FsmonitorConfig());
  WriteFile(Payload("evil.hook"), "#!/bin/sh\nexec " + Sentinel() + "\n");
  const std::string m = ".git/modules/sub";
  ExpectPlantHasNoHostEffect("cat '" + Payload("evil.config") + "' >> " + m + "/config; cp '" +
                                 Payload("evil.config") + "' " + m + "/config.new; mv -f " + m +
                                 "/config.new " + m + "/config; cp '" + Payload("evil.hook") +
                                 "' " + m + "/hooks/pre-commit; chmod +x " + m +
                                 "/hooks/pre-commit",
                             {ws_ + "/sub", ws_}, ".git/modules/<name>/config and hooks");
  EXPECT_FALSE(testing::Exists(ws_ + "/" + m + "/hooks/pre-commit"));
  EXPECT_EQ(ReadFile(ws_ + "/" + m + "/config").find("fsmonitor"), std::string::npos);
}

TEST_F(EscapeTest, GitConfigRenameHooksAndInfoNeverReachTheHost) {
  InitRepo(ws_);
  WriteFile(Payload("evil.config"), FsmonitorConfig());
  WriteFile(Payload("evil.hook"), "#!/bin/sh\nexec " + Sentinel() + "\n");
  const std::string config = ReadFile(ws_ + "/.git/config");
  ExpectPlantHasNoHostEffect("cp '" + Payload("evil.config") +
                                 "' .git/config.new; mv -f .git/config.new .git/config; "
                                 "cp '" +
                                 Payload("evil.config") +
                                 "' .git/config; "
                                 "rm -rf .git/hooks; mkdir -p .git/hooks; cp '" +
                                 Payload("evil.hook") + "' .git/hooks/pre-commit; cp '" +
                                 Payload("evil.hook") +
                                 "' .git/hooks/post-checkout; chmod +x .git/hooks/*; "
                                 "mkdir -p .git/info; echo '* filter=evil' > .git/info/attributes; "
                                 "echo '*' > .git/info/exclude",
                             {ws_}, ".git/config via rename, .git/hooks/*, .git/info/*");
  EXPECT_EQ(ReadFile(ws_ + "/.git/config"), config);
  EXPECT_EQ(ReadFile(ws_ + "/.git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
  EXPECT_FALSE(testing::Exists(ws_ + "/.git/hooks/post-checkout"));
  EXPECT_FALSE(testing::Exists(ws_ + "/.git/info/attributes"));
  EXPECT_NE(ReadFile(ws_ + "/.git/info/exclude"), "*\n");
}

// Issue 18: with core.hooksPath=.husky (husky, lefthook) the user's next `git commit` runs
// .husky/pre-commit. A process cannot leave one behind, an existing path the config executes
// (core.fsmonitor's script) is read-only inside, and the file tools refuse both, naming the key.
TEST_F(EscapeTest, PathsTheRepositorysConfigExecutesCannotBePlanted) {
  DirectMode();  // the read-only bind of tools/fsm.sh; staged: StagedTest
  if (FindOnPath("git").empty()) SECURITY_SKIP("git is not installed");
  InitRepo(ws_);
  ASSERT_EQ(HostGit(ws_, {"config", "core.hooksPath", ".husky"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws_, {"config", "core.fsmonitor", "tools/fsm.sh"}).exit_code, 0);
  WriteFile(ws_ + "/tools/fsm.sh", "#!/bin/sh\nexit 1\n");
  auto r = Exec({"sh", "-c",
                 "mkdir -p .husky && echo 'touch " + (dir_ / "SENTINEL_RAN") +
                     "' > .husky/pre-commit && chmod +x .husky/pre-commit; "
                     "echo evil > tools/fsm.sh && echo WROTE"});
  EXPECT_EQ(r.out.find("WROTE"), std::string::npos) << "tools/fsm.sh is read-only: " << r.out;
  EXPECT_EQ(ReadFile(ws_ + "/tools/fsm.sh"), "#!/bin/sh\nexit 1\n");
  EXPECT_FALSE(testing::Exists(ws_ + "/.husky")) << ".husky was planted and kept";
  const std::string log = ReadFile(dir_ / "audit.jsonl");
  EXPECT_NE(log.find("\"path\":\"" + ws_ + "/.husky\""), std::string::npos) << "no record";
  HostGit(ws_, {"hook", "run", "--ignore-missing", "pre-commit"});
  EXPECT_FALSE(SentinelRan());
  auto c = Call("create_file", {{"path", ".husky/pre-commit"}, {"content", "x\n"}});
  EXPECT_NE(c.out.find("denied_by_policy"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("core.hooksPath"), std::string::npos) << c.out;
  c = Call("replace_range",
           {{"path", "tools/fsm.sh"}, {"old_string", "exit 1"}, {"new_string", "exit 0"}});
  EXPECT_NE(c.out.find("core.fsmonitor"), std::string::npos) << c.out;
}

// Issue 18: `git update-index --split-index` inside writes sharedindex.<hash>, which the index
// then names; the host's git must still read the index afterwards.
TEST_F(EscapeTest, ASplitIndexMadeInsideIsReadableByHostGit) {
  if (FindOnPath("git").empty()) SECURITY_SKIP("git is not installed");
  InitRepo(ws_);
  WriteFile(ws_ + "/a.txt", "a\n");
  ASSERT_EQ(HostGit(ws_, {"add", "a.txt"}).exit_code, 0);
  auto r = Exec({"sh", "-c",
                 "export GIT_CONFIG_NOSYSTEM=1; git update-index --split-index && "
                 "echo b > b.txt && git add b.txt && git ls-files"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  bool shared = false;
  for (const auto& e : std::filesystem::directory_iterator(ws_ + "/.git")) {
    shared = shared || e.path().filename().string().rfind("sharedindex.", 0) == 0;
  }
  EXPECT_TRUE(shared) << "the shared index stayed in the sandbox";
  auto status = HostGit(ws_, {"status", "--porcelain"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  auto files = HostGit(ws_, {"ls-files"});
  EXPECT_EQ(files.out, "a.txt\nb.txt\n") << files.err;
}

TEST_F(EscapeTest, GitCommitCheckoutStashAndRebaseWorkInsideAndReachTheHost) {
  // The git view's promise: host git runs beside the sandbox's. Staged, a host `git status`
  // holding index.lock is seen inside (the lower layer is live), and the sandbox's git can fail
  // with "index.lock exists" meanwhile (SECURITY.md, "What staging does not promise"); the staged
  // git workflow is StagedTest.GitCommitReachesTheHostAndGitConfigurationDoesNot and
  // WorkflowsTest.GitCommitCheckoutStashRebaseAndResetReachTheHost.
  DirectMode();
  InitRepo(ws_);
  WriteFile(ws_ + "/a.txt", "a\n");
  ASSERT_EQ(HostGit(ws_, {"add", "a.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws_, {"commit", "-q", "-m", "host"}).exit_code, 0);
  // Inside: a branch with a commit, a commit on main, a stash round trip, a rebase onto main.
  const std::string script =
      "set -e; export GIT_CONFIG_NOSYSTEM=1; "
      "git checkout -q -b feature; echo f > f.txt; git add f.txt; git commit -q -m feat; "
      "git checkout -q main; echo m > m.txt; git add m.txt; git commit -q -m onmain; "
      "git checkout -q feature; echo dirty >> a.txt; git stash -q; "
      "test \"$(cat a.txt)\" = a; git stash pop -q; grep -q dirty a.txt; "
      "git commit -q -am stashed; git rebase -q main; git log --format=%s";
  // The host uses git while the sandbox runs.
  std::atomic<bool> done{false};
  int host_status_failures = 0, host_status_runs = 0;
  std::thread host([&] {
    while (!done.load()) {
      auto st = HostGit(ws_, {"status", "--porcelain"});
      ++host_status_runs;
      if (st.exit_code != 0) ++host_status_failures;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto r = Exec({"/bin/sh", "-c", script});
  done = true;
  host.join();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_GT(host_status_runs, 0);
  EXPECT_EQ(host_status_failures, 0) << "host git status failed during the sandbox run";
  // The host repository has it all: branch, commits in rebased order, HEAD on feature.
  auto log = HostGit(ws_, {"log", "--format=%s", "feature"});
  EXPECT_EQ(log.out, "stashed\nfeat\nonmain\nhost\nbase\n") << log.err;
  EXPECT_EQ(HostGit(ws_, {"rev-parse", "--abbrev-ref", "HEAD"}).out, "feature\n");
  EXPECT_EQ(HostGit(ws_, {"log", "--format=%s", "-1", "main"}).out, "onmain\n");
  auto status = HostGit(ws_, {"status", "--porcelain"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.out, "?? probe\n") << "the host index matches the sandbox's commits";
  EXPECT_EQ(HostGit(ws_, {"stash", "list"}).out, "");
  EXPECT_FALSE(testing::Exists(ws_ + "/.git/rebase-merge"));
  auto fsck = HostGit(ws_, {"fsck", "--no-progress"});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
}

TEST_F(EscapeTest, MissingProtectedPathsCreatedInsideAreSweptIntoQuarantine) {
  // Issue 9: no placeholder holds a missing protected name any more. Whatever a process makes
  // under one is moved out of the workspace into cordon's quarantine when it ends, and recorded.
  const std::vector<std::string> names = {".gitmodules",
                                          ".vscode/tasks.json",
                                          ".devcontainer/devcontainer.json",
                                          ".idea/workspace.xml",
                                          ".cursor/rules",
                                          ".claude/settings.json",
                                          ".cordon/policy.toml",
                                          ".thndrs/mcp.toml",
                                          ".mcp.json",
                                          ".envrc",
                                          "sub/.vscode/tasks.json",
                                          "sub/.envrc",
                                          "sub/.bashrc",
                                          "a/b/c/d/.idea/x",
                                          "lib/.extra-protected",
                                          "sub/.gitmodules"};
  WriteFile(dir_ / "names.toml", "[filesystem]\nprotected_names = [\".extra-protected\"]\n");
  std::string script = "set -e; git init -q sub; git init -q a/b/c/d/e/f; ";
  for (const auto& n : names) {
    script += "mkdir -p \"$(dirname " + n + ")\"; echo planted > " + n + "; ";
  }
  auto r = Exec({"sh", "-c", script}, {"--policy", dir_ / "names.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string log = ReadFile(dir_ / "audit.jsonl");
  const std::string state = dir_ / "state/cordon/quarantine";
  auto quarantined = [&](const std::string& rel) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(state)) {
      const std::string p = e.path().string();
      if (p.size() > rel.size() &&
          p.compare(p.size() - rel.size() - 1, std::string::npos, "/" + rel) == 0) {
        return true;
      }
    }
    return false;
  };
  for (const std::string rel :
       {".gitmodules", ".vscode", ".devcontainer", ".idea", ".cursor", ".claude", ".cordon",
        ".thndrs", ".mcp.json", ".envrc", "sub/.vscode", "sub/.envrc", "sub/.bashrc",
        "a/b/c/d/.idea", "lib/.extra-protected", "sub/.gitmodules", "sub/.git",
        "a/b/c/d/e/f/.git"}) {
    EXPECT_FALSE(testing::Exists(ws_ + "/" + rel)) << rel << " is still in the workspace";
    EXPECT_TRUE(quarantined(rel)) << rel << " is not in " << state;
    EXPECT_NE(log.find("\"path\":\"" + ws_ + "/" + rel + "\""), std::string::npos)
        << rel << " has no record";
  }
  EXPECT_NE(log.find("\"type\":\"protected_path_removed\""), std::string::npos);
  // What was there before stays: the workspace's own repository, and ordinary files.
  EXPECT_EQ(ReadFile(ws_ + "/.git/config"), "[core]\n");
  EXPECT_TRUE(testing::Exists(ws_ + "/sub"));
  // A workspace without a repository does not keep one planted.
  TempDir plain;
  std::filesystem::create_directories(plain / "src");
  auto p = testing::Run(
      {testing::CordonBin(), "exec", "--workspace", plain.path(), "--audit-log", dir_ / "a2.jsonl",
       "--", "sh", "-c", "mkdir -p .git/hooks && echo x > .git/hooks/pre-commit"},
      env_);
  EXPECT_FALSE(testing::Exists(plain / ".git")) << p.out << p.err;
}

TEST_F(EscapeTest, FileToolsAndProcessesAgreeOnProtectedNames) {
  // One definition (IsProtectedPath + a .git the workspace does not have): what a file tool
  // refuses, a process may create only until the sweep at its end, which removes it.
  for (const std::string rel :
       {".envrc", "sub/.vscode/settings.json", ".devcontainer/devcontainer.json", ".gitmodules",
        ".idea/x.xml", ".cursor/rules", "deep/er/.git/HEAD", "x/.git",
        // Issue 18: editors and agents that run project configuration when it opens.
        ".devcontainer.json", ".gemini/settings.json", ".zed/tasks.json", ".helix/languages.toml",
        "sub/.nvim.lua", ".exrc", ".lazy.lua", ".aider.conf.yml"}) {
    auto c = Call("create_file", {{"path", rel}, {"content", "x\n"}});
    EXPECT_NE(c.out.find("denied_by_policy"), std::string::npos) << rel << ": " << c.out;
    auto e = Exec({"sh", "-c", "mkdir -p \"$(dirname " + rel + ")\" && echo x > " + rel});
    EXPECT_FALSE(testing::Exists(ws_ + "/" + rel)) << rel << " was created by a process and kept";
  }
}

// `inode path` of every entry below root, sorted: what a host reader of the workspace sees.
// The index is left out: the test's own `git status` on the host rewrites it.
std::vector<std::string> InodeListing(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path() == root + "/.git/index") continue;
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    out.push_back(std::to_string(st.st_ino) + " " + e.path().string().substr(root.size()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Diff(const std::vector<std::string>& before, const std::vector<std::string>& after) {
  std::string d;
  for (const auto& x : after) {
    if (!std::binary_search(before.begin(), before.end(), x)) d += "+ " + x + "\n";
  }
  for (const auto& x : before) {
    if (!std::binary_search(after.begin(), after.end(), x)) d += "- " + x + "\n";
  }
  return d;
}

class PlaceholderTest : public EscapeTest {
 protected:
  void SetUp() override {
    EscapeTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (FindOnPath("git").empty()) SECURITY_SKIP("git is not installed");
    repo_ = dir_ / "repo";
    std::filesystem::create_directories(repo_ + "/src");
    WriteFile(repo_ + "/src/main.c", "int main(void) { return 0; }\n");
    Git({"init", "-q"});
    Git({"add", "."});
    Git({"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init"});
    ASSERT_EQ(Git({"status", "--porcelain"}), "");
  }
  std::string Git(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/env", "git", "-C", repo_});
    auto r = testing::Run(args, {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (dir_ / "home")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  // Starts cordon with ARGS, its stdin a pipe (returned in *in) and its output discarded.
  pid_t Spawn(const std::vector<std::string>& args, int* in) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return -1;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(p[0], 0);
      int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      for (const auto& e : env_) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
    ::close(p[0]);
    *in = p[1];
    return pid;
  }
  static bool WaitForSleeps(const std::string& seconds, bool running) {
    // Up to 60 s: a loaded CI machine once took more than 10 s to start one sandbox.
    for (int i = 0; i < 2400; ++i) {
      if ((CountSleeps(seconds) > 0) == running) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }
  // Runs a sandboxed `sleep SECONDS` (by `cordon exec`, or as a background run_shell job of
  // `cordon serve`), checks the workspace from the host while it runs, ends cordon with SIG,
  // and checks again; then a next cordon start, and again.
  void RunAndSignal(bool serve, int sig, const std::string& seconds) {
    SCOPED_TRACE(std::string(serve ? "serve" : "exec") + " + " + ::sigabbrev_np(sig));
    const auto before = InodeListing(repo_);
    int in = -1;
    const std::string log = dir_ / ("log-" + seconds + ".jsonl");
    pid_t pid =
        serve
            ? Spawn({testing::CordonBin(), "serve", "--workspace", repo_, "--audit-log", log}, &in)
            : Spawn({testing::CordonBin(), "exec", "--workspace", repo_, "--audit-log", log, "--",
                     "sleep", seconds},
                    &in);
    ASSERT_GT(pid, 0);
    if (serve) {
      const std::string msgs =
          R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
          "\n"
          R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
          "\n"
          R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_shell","arguments":{"program":"sleep","args":[")" +
          seconds + R"("],"background":true}}})" + "\n";
      ASSERT_EQ(::write(in, msgs.data(), msgs.size()), static_cast<ssize_t>(msgs.size()));
    }
    if (!WaitForSleeps(seconds, true)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      FAIL() << "the sandboxed sleep never started; the log says:\n" << ReadFile(log);
    }
    // A host reader during the run sees exactly the workspace it had: no placeholder.
    EXPECT_EQ(Diff(before, InodeListing(repo_)), "") << "visible on the host during the run";
    ::kill(pid, sig);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(in);
    EXPECT_TRUE(WaitForSleeps(seconds, false)) << "the sandbox outlived cordon";
    EXPECT_EQ(Diff(before, InodeListing(repo_)), "") << "left in the workspace after the signal";
    EXPECT_EQ(Git({"status", "--porcelain"}), "");
    // The next cordon start leaves nothing behind either.
    auto next = testing::Run({testing::CordonBin(), "exec", "--workspace", repo_, "--audit-log",
                              dir_ / "next.jsonl", "--", "true"},
                             env_);
    EXPECT_EQ(next.exit_code, 0) << next.err;
    EXPECT_EQ(Diff(before, InodeListing(repo_)), "") << "left after the next cordon start";
    EXPECT_EQ(Git({"status", "--porcelain"}), "");
  }
  std::string repo_;
};

TEST_F(PlaceholderTest, NothingAppearsInTheWorkspaceWhenExecIsSignalled) {
  int n = 81;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGKILL}) RunAndSignal(false, sig, OwnSleep(n++));
}

TEST_F(PlaceholderTest, NothingAppearsInTheWorkspaceWhenServeWithABackgroundJobIsSignalled) {
  int n = 91;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGKILL}) RunAndSignal(true, sig, OwnSleep(n++));
}

TEST_F(PlaceholderTest, ABackgroundJobsProtectedNameIsSweptAtTheNextCallBoundary) {
  DirectMode();  // what the sweep and the direct binds promise
  // While a long-lived process runs, the sweep runs at each tool-call boundary: a .vscode/ a
  // background job made is gone after the next call, while the job still runs.
  const std::string s77 = OwnSleep(77);
  int in = -1;
  pid_t pid = Spawn(
      {testing::CordonBin(), "serve", "--workspace", repo_, "--audit-log", dir_ / "boundary.jsonl"},
      &in);
  ASSERT_GT(pid, 0);
  const std::string first =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
      "\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      "\n"
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_shell","arguments":{"program":"sh","args":["-c","mkdir -p .vscode && echo x > .vscode/tasks.json && exec sleep )" +
      s77 +
      R"("],"background":true}}})"
      "\n";
  ASSERT_EQ(::write(in, first.data(), first.size()), static_cast<ssize_t>(first.size()));
  ASSERT_TRUE(WaitForSleeps(s77, true));
  ASSERT_TRUE(testing::Exists(repo_ + "/.vscode/tasks.json")) << "the window: it exists meanwhile";
  const std::string second =
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file_range","arguments":{"path":"src/main.c"}}})"
      "\n";
  ASSERT_EQ(::write(in, second.data(), second.size()), static_cast<ssize_t>(second.size()));
  bool gone = false;
  for (int i = 0; i < 400 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    gone = !testing::Exists(repo_ + "/.vscode");
  }
  EXPECT_TRUE(gone) << ".vscode/ outlived the next call boundary";
  EXPECT_GT(CountSleeps(s77), 0) << "the job should still run";
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  ::close(in);
  EXPECT_TRUE(WaitForSleeps(s77, false));
  const std::string log = ReadFile(dir_ / "boundary.jsonl");
  EXPECT_NE(log.find("\"when\":\"call_boundary\""), std::string::npos) << log;
}

TEST_F(EscapeTest, EveryNestedRepositoryIsFoundAndProtected) {
  DirectMode();  // what the sweep and the direct binds promise
  // Deeper than the old bounded scan (depth 3), inside node_modules, and behind more than its
  // 5000 entries: each repository's git dir is in the plan and its hooks are read-only.
  std::filesystem::create_directories(ws_ + "/aaa-big");
  for (int i = 0; i < 6000; ++i) WriteFile(ws_ + "/aaa-big/f" + std::to_string(i), "");
  const std::vector<std::string> repos = {"a/b/c/d/e/lib", "node_modules/pkg", "target/x",
                                          ".venv/lib/site", "zzz/after-the-big-dir"};
  for (const auto& r : repos) {
    std::filesystem::create_directories(ws_ + "/" + r + "/.git/hooks");
    WriteFile(ws_ + "/" + r + "/.git/config", "[core]\n");
  }
  auto plan = Exec({"true"}, {"--plan"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  Json j = Json::parse(plan.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << plan.out.substr(0, 400);
  for (const auto& r : repos) {
    const std::string git = ws_ + "/" + r + "/.git";
    EXPECT_NE(std::find(j["git_dirs"].begin(), j["git_dirs"].end(), Json(git)), j["git_dirs"].end())
        << git << " is not among the plan's git dirs";
    ExpectRefused(Probe({"write", git + "/hooks/pre-commit"}), git + "/hooks");
    ExpectRefused(Probe({"write", git + "/config"}), git + "/config");
    EXPECT_EQ(ReadFile(git + "/config"), "[core]\n");
  }
}

TEST_F(EscapeTest, AWorkspaceBeyondTheWalkCapIsRefusedNotPassedThrough) {
  DirectMode();  // what the sweep and the direct binds promise
  for (int i = 0; i < 300; ++i) WriteFile(ws_ + "/f" + std::to_string(i), "");
  WriteFile(dir_ / "cap.toml", "[sandbox]\nmax_scan_entries = 100\n");
  auto r = Exec({"true"}, {"--policy", dir_ / "cap.toml"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("sandbox_unavailable"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sandbox.max_scan_entries"), std::string::npos) << r.err;
}

TEST_F(EscapeTest, SymlinkReplacementOfAProtectedDirectoryFails) {
  TempDir evil;
  auto r = Exec(
      {"sh", "-c",
       "rm -rf .git/hooks; ln -s " + evil.path() + " .git/hooks; echo x > .git/hooks/pre-commit"});
  struct stat st {};
  ASSERT_EQ(::lstat((ws_ + "/.git/hooks").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode)) << ".git/hooks was replaced on the host";
  EXPECT_EQ(ReadFile(ws_ + "/.git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
  EXPECT_FALSE(testing::Exists(evil / "pre-commit"));
}

TEST_F(EscapeTest, RenamingAnAncestorOfAProtectedPathFails) {
  DirectMode();  // what the sweep and the direct binds promise
  ExpectRefused(Probe({"rename", ws_ + "/.git", ws_ + "/.git2"}), "rename .git");
  ExpectRefused(Probe({"rename", ws_ + "/.git/hooks", ws_ + "/.git/h2"}), "rename .git/hooks");
  std::filesystem::create_directories(ws_ + "/sub/.git/hooks");
  ExpectRefused(Probe({"rename", ws_ + "/sub", ws_ + "/sub2"}), "rename a nested repo's parent");
  EXPECT_TRUE(testing::Exists(ws_ + "/.git/hooks/pre-commit"));
  EXPECT_TRUE(testing::Exists(ws_ + "/sub/.git/hooks"));
  // Then recreate-and-write is impossible too.
  auto r =
      Exec({"sh", "-c", "mv .git .git2; mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit"});
  EXPECT_EQ(ReadFile(ws_ + "/.git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
  EXPECT_FALSE(testing::Exists(ws_ + "/.git2"));
}

TEST_F(EscapeTest, NoNetworkReachesAHostLoopbackListener) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(s, 16), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  ExpectRefused(Probe({"connect", port}), "connect with network none");
  auto bash = Exec({"bash", "-c", "echo hi > /dev/tcp/127.0.0.1/" + port});
  EXPECT_NE(bash.exit_code, 0);
  if (!FindOnPath("curl").empty()) {
    auto curl = Exec({"curl", "-sS", "--max-time", "3", "http://127.0.0.1:" + port + "/"});
    EXPECT_NE(curl.exit_code, 0);
  }
  // loopback mode is a loopback of the sandbox's own, not the host's.
  ExpectRefused(Probe({"connect", port}, {"--network", "loopback"}),
                "connect with network loopback");
  EXPECT_LT(::accept(s, nullptr, nullptr), 0) << "a connection reached the host listener";
  ::close(s);
}

TEST_F(EscapeTest, ProcStatusShowsNoNewPrivsSeccompAndNoCapabilities) {
  auto r = Exec({"cat", "/proc/self/status"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NoNewPrivs:\t1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Seccomp:\t2"), std::string::npos) << r.out;
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_NE(r.out.find(std::string(set) + ":\t0000000000000000"), std::string::npos)
        << set << "\n"
        << r.out;
  }
}

TEST_F(EscapeTest, UnshareCloneNamespacesAndPtraceFail) {
  ExpectRefused(Probe({"unshare"}), "unshare(CLONE_NEWUSER)");
  ExpectRefused(Probe({"clone-newns"}), "clone(CLONE_NEWNS)");
  auto u = Exec({"unshare", "-r", "true"});
  EXPECT_NE(u.exit_code, 0) << u.out << u.err;
  // ptrace of the sandbox's own init, of a sibling, and of a host pid.
  ExpectRefused(Probe({"ptrace", "1"}), "ptrace pid 1");
  auto sib = Exec({"sh", "-c", "sleep 5 & exec " + ws_ + "/probe ptrace $!"});
  ExpectRefused(sib, "ptrace a sibling");
}

TEST_F(EscapeTest, HostPidsAreInvisible) {
  const std::string me = std::to_string(::getpid());
  ExpectRefused(Probe({"kill", me}), "signal a host pid");
  auto ps = Exec({"sh", "-c", "ls /proc | grep -c '^[0-9]'"});
  ASSERT_EQ(ps.exit_code, 0) << ps.err;
  EXPECT_LT(std::stoi(ps.out), 10) << "the sandbox sees host processes";
}

TEST_F(EscapeTest, TiocstiIsFilteredIncludingTheHighBitVariant) {
  ExpectRefused(Probe({"tiocsti"}), "TIOCSTI");
  ExpectRefused(Probe({"tiocsti-high"}), "TIOCSTI | 1<<32 (CVE-2019-10063)");
}

TEST_F(EscapeTest, ForkFloodIsStoppedByThePidsLimitAndTheHostIsUnharmed) {
  WriteFile(dir_ / "pids.toml", "[limits]\npids = 64\ntimeout_secs = 60\n");
  auto r = Probe({"fork-flood"}, {"--policy", dir_ / "pids.toml"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  int forked = -1;
  std::sscanf(r.out.c_str(), "forked %d", &forked);
  EXPECT_GE(forked, 0) << r.out;
  EXPECT_LT(forked, 64) << r.out;
  // The host still forks, and none of the flood survived.
  auto after = testing::Run({"/bin/true"});
  EXPECT_EQ(after.exit_code, 0);
  std::string log = ReadFile(dir_ / "audit.jsonl");
  EXPECT_NE(log.find("\"type\":\"process\""), std::string::npos);
}

TEST_F(EscapeTest, KillingCordonWhileItLaunchesLeavesNoSandboxBehind) {
  // kill -9 at any moment of a launch, including before bwrap has armed --die-with-parent:
  // no confined process outlives cordon.
  const std::string s67 = OwnSleep(67);
  for (int delay_us : {0, 500, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 8000, 10000, 15000}) {
    pid_t pid = SpawnSleepingExec(dir_ / "early.jsonl", s67);
    ASSERT_GE(pid, 0);
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  // A launch cut short may still reach its command a moment later: wait, then look for
  // survivors, giving the kernel time to deliver what ends them.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  int survivors = CountSleeps(s67);
  for (int i = 0; i < 100 && survivors > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    survivors = CountSleeps(s67);
  }
  EXPECT_EQ(survivors, 0) << "a sandboxed sleep outlived a killed cordon";
}

TEST_F(EscapeTest, CgroupsOfAKilledCordonAreSweptByTheNext) {
  // kill -9 of cordon mid-call: bwrap dies with its parent, the pid namespace goes with it, and
  // the per-call cgroups are left empty. The next cordon removes them.
  auto first = Exec({"true"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string log = ReadFile(dir_ / "audit.jsonl");
  if (log.find("\"cgroup\":\"none\"") != std::string::npos) {
    GTEST_SKIP() << "SKIPPED SECURITY TEST: no cgroup is available to this user, so none can leak";
  }
  pid_t pid = SpawnSleepingExec(dir_ / "killed.jsonl", "60");
  ASSERT_GE(pid, 0);
  // The job's cgroup is cordon-PID-1 beside cordon's own: find it from cordon's /proc entry.
  std::vector<std::string> jobs;
  for (int i = 0; i < 200 && jobs.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    std::ifstream cg("/proc/" + std::to_string(pid) + "/cgroup");
    std::string line;
    while (std::getline(cg, line)) {
      std::size_t a = line.find(':'), b = line.find(':', a + 1);
      std::string ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
      std::string mount = ctrl.empty() ? "/sys/fs/cgroup" : "/sys/fs/cgroup/" + ctrl;
      if (path.ends_with("/cordon-supervisor")) path.resize(path.size() - 18);
      std::string job = mount + (path == "/" ? "" : path) + "/cordon-" + std::to_string(pid) + "-1";
      if ((ctrl.empty() || ctrl == "pids" || ctrl == "memory") && testing::Exists(job))
        jobs.push_back(job);
    }
  }
  ASSERT_FALSE(jobs.empty()) << "the running call's cgroup was not found";
  // Kill cordon while the command runs (bwrap, its init, the shim and sleep are in the group).
  for (int i = 0; i < 400; ++i) {
    const std::string procs = ReadFile(jobs[0] + "/cgroup.procs");
    if (std::count(procs.begin(), procs.end(), '\n') >= 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  for (const auto& job : jobs) {
    for (int i = 0; i < 200 && !ReadFile(job + "/cgroup.procs").empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    EXPECT_TRUE(ReadFile(job + "/cgroup.procs").empty())
        << "the sandbox outlived a killed cordon: " << job;
    // The empty group stays until a cordon starts; under ctest -j2 another test's cordon may be
    // that start, so a group already gone was swept, not leaked.
  }
  auto next = Exec({"true"});
  ASSERT_EQ(next.exit_code, 0) << next.err;
  for (const auto& job : jobs) EXPECT_FALSE(testing::Exists(job)) << "stale cgroup left: " << job;
}

TEST_F(EscapeTest, WeakerModeKeepsLandlockSeccompAndKeepsTheHostOut) {
  // A PATH without bwrap (cordon looks it up there), with the few programs the test runs.
  const std::string bin = dir_ / "nobwrap-bin";
  std::filesystem::create_directories(bin);
  for (const char* tool : {"cat", "sh", "true"}) {
    std::filesystem::create_symlink(FindOnPath(tool), bin + "/" + tool);
  }
  const std::string path = "PATH=" + bin;
  auto closed = Exec({"true"}, {}, {path});
  EXPECT_EQ(closed.exit_code, 125) << closed.out << closed.err;
  EXPECT_NE(closed.err.find("bwrap is not installed"), std::string::npos) << closed.err;
  EXPECT_NE(closed.err.find("allow_weaker"), std::string::npos)
      << "the remedy is named: " << closed.err;

  if (LandlockAbi() < 1) SECURITY_SKIP("Landlock is unavailable, so there is no weaker mode");
  WriteFile(dir_ / "weaker.toml", "[sandbox]\nallow_weaker = true\n");
  const std::vector<std::string> weaker = {"--policy", dir_ / "weaker.toml"};
  // Landlock + seccomp + no_new_privs + no capabilities, without namespaces.
  auto privs = Exec({ws_ + "/probe", "privs"}, weaker, {path});
  ASSERT_EQ(privs.exit_code, 0) << privs.err;
  EXPECT_EQ(privs.out, "no_new_privs=1 seccomp=2 cap_eff=0,0\n");
  // The host's /proc, /tmp and raw devices are not granted (there is no private copy of them).
  ExpectRefused(Exec({ws_ + "/probe", "read", "/proc/1/environ"}, weaker, {path}),
                "/proc of the host, weaker mode");
  for (const auto& e : std::filesystem::directory_iterator("/dev")) {
    if (e.is_block_file()) {
      ExpectRefused(Exec({ws_ + "/probe", "read", e.path().string()}, weaker, {path}),
                    "a block device, weaker mode");
      break;
    }
  }
  auto tmp = Exec({"sh", "-c", "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo \"$TMPDIR\""},
                  weaker, {path});
  ASSERT_EQ(tmp.out.rfind("t\n", 0), 0u)
      << "the call's own TMPDIR is writable: " << tmp.out << tmp.err;
  const std::string private_tmp = tmp.out.substr(2, tmp.out.size() - 3);
  ASSERT_FALSE(private_tmp.empty());
  EXPECT_NE(private_tmp, "/tmp") << "TMPDIR is the host's /tmp";
  EXPECT_FALSE(testing::Exists(private_tmp))
      << "the private TMPDIR outlived the call: " << private_tmp;
  // No pid namespace: the command's process group ends with it, and it cannot leave the group.
  std::filesystem::create_symlink(FindOnPath("sleep"), bin + "/sleep");
  std::filesystem::create_symlink(FindOnPath("setsid"), bin + "/setsid");
  auto bg = Exec(
      {"sh", "-c",
       "sleep " + OwnSleep(271) + " & setsid sleep " + OwnSleep(272) + " & sleep 0.3; echo done"},
      weaker, {path});
  EXPECT_NE(bg.out.find("done"), std::string::npos) << bg.out << bg.err;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (const std::string& n : {OwnSleep(271), OwnSleep(272)})
    EXPECT_EQ(CountSleeps(n), 0) << "sleep " << n << " survived the call";
  ExpectRefused(Exec({ws_ + "/probe", "read", "/etc/shadow"}, weaker, {path}),
                "/etc/shadow in the weaker mode");
  TempDir outside;
  WriteFile(outside / "victim.txt", "original\n");
  ExpectRefused(Exec({ws_ + "/probe", "write", outside / "victim.txt"}, weaker, {path}),
                "write outside, weaker mode");
  EXPECT_EQ(ReadFile(outside / "victim.txt"), "original\n");
  auto inside = Exec({"sh", "-c", "echo ok > made-here.txt"}, weaker, {path});
  EXPECT_EQ(inside.exit_code, 0) << inside.err;
  EXPECT_EQ(ReadFile(ws_ + "/made-here.txt"), "ok\n");
  // Every session and process record says the sandbox was the weaker one.
  const std::string log = ReadFile(dir_ / "audit.jsonl");
  EXPECT_NE(log.find("\"weaker\":true"), std::string::npos) << log.substr(0, 2000);
  EXPECT_NE(log.find("\"mode\":\"landlock-seccomp\""), std::string::npos) << log.substr(0, 2000);
}

TEST_F(EscapeTest, OutputFloodIsCappedAndCordonMemoryStaysBounded) {
  auto r = Call(
      "run_shell",
      {{"program", "sh"},
       {"args", {"-c", "head -c 300000000 /dev/zero | tr '\\0' a; echo; echo fatal: the end >&2"}},
       {"timeout_secs", 120}});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 500);
  Json j = Json::parse(r.out);
  const Json& sc = j["structuredContent"];
  EXPECT_TRUE(sc["truncated"].get<bool>());
  EXPECT_EQ(sc["stdout_bytes"], 300000001);
  EXPECT_GT(sc["stdout_dropped_bytes"].get<std::uint64_t>(), 299000000u);
  EXPECT_LT(sc["stdout"].get<std::string>().size(), 70000u);
  EXPECT_NE(sc["stderr"].get<std::string>().find("fatal: the end"), std::string::npos);
  // ASan's shadow memory and quarantine make RSS meaningless; the release build checks it.
  if (!testing::CordonSanitized()) {
    EXPECT_LT(r.max_rss_kb, 150 * 1024) << "cordon's peak RSS grew with the flood";
  }
}

TEST_F(EscapeTest, TimeoutLeavesNoProcessBehind) {
  const std::string s = OwnSleep(313);
  auto r = Call(
      "run_shell",
      {{"program", "sh"},
       {"args", {"-c", "sleep " + s + " & sleep " + s + " & (sleep " + s + " &) ; sleep " + s}},
       {"timeout_secs", 1}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("\"code\":\"timeout\""), std::string::npos) << r.out;
  EXPECT_EQ(CountSleeps(s), 0);
}

TEST_F(EscapeTest, HostEnvironmentSecretsAreAbsentInside) {
  const std::string token = "ghp_" + std::string(36, 'Q');
  auto r = Exec({"env"}, {},
                {"GITHUB_TOKEN=" + token, "MY_DB_PASSWORD=hunter2-hunter2",
                 "AWS_SECRET_ACCESS_KEY=abcdEFGHijklMNOP", "UNRELATED_VAR=visible-or-not"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(token), std::string::npos);
  EXPECT_EQ(r.out.find("hunter2-hunter2"), std::string::npos);
  EXPECT_EQ(r.out.find("abcdEFGHijklMNOP"), std::string::npos);
  EXPECT_EQ(r.out.find("UNRELATED_VAR"), std::string::npos) << "the environment is an allowlist";
  EXPECT_NE(r.out.find("CORDON_SANDBOX=1"), std::string::npos);
}

TEST_F(EscapeTest, OptionInjectionIntoSearchToolsIsText) {
  WriteFile(ws_ + "/notes.txt", "look: --pre=/bin/sh here\n");
  auto r = Call("search_text", {{"pattern", "--pre=/bin/sh"}});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["structuredContent"]["total_matches"], 1);
  std::string marker = dir_ / "pwned";
  auto f = Call("find_files", {{"pattern", "--exec=touch " + marker}});
  EXPECT_FALSE(testing::Exists(marker));
  Json fj = Json::parse(f.out);
  EXPECT_FALSE(fj["isError"].get<bool>()) << f.out;
}

TEST_F(EscapeTest, NoSyscallLeavesASetIdBitInTheWorkspace) {
  // Each syscall that takes a mode, by its own number, with S_ISUID or S_ISGID: EPERM, and the
  // host sees no such bit afterwards. openat2 hides its mode in memory: ENOSYS (callers fall
  // back to openat). The sandbox's /tmp is checked too, from inside.
  ASSERT_TRUE(SetIdFiles(ws_).empty()) << Joined(SetIdFiles(ws_));
  const std::vector<std::string> eperm = {"chmod-suid", "chmod-sgid", "fchmod", "fchmodat",
                                          "fchmodat2",  "open",       "openat", "creat",
                                          "mknod",      "mknodat",    "mkdir",  "mkdirat"};
  std::string script;
  for (const auto& how : eperm) script += "./probe setid " + how + " made-by-" + how + "; ";
  script += "./probe setid openat2 made-by-openat2; ./probe setid openat /tmp/in-tmp; ";
  script += "find /tmp -perm /6000 | sed 's/^/tmp-setid: /'";
  auto r = Exec({"sh", "-c", script});
  for (const auto& how : eperm) {
    EXPECT_NE(r.out.find("refused: setid " + how + ": errno=" + std::to_string(EPERM) + " "),
              std::string::npos)
        << how << " was not refused with EPERM:\n"
        << r.out << r.err;
  }
  EXPECT_NE(r.out.find("refused: setid openat2: errno=" + std::to_string(ENOSYS) + " "),
            std::string::npos)
      << "openat2 was not refused with ENOSYS:\n"
      << r.out << r.err;
  EXPECT_NE(r.out.find("refused: setid openat: errno=1 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ESCAPED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tmp-setid"), std::string::npos) << r.out;
  EXPECT_TRUE(SetIdFiles(ws_).empty()) << Joined(SetIdFiles(ws_));
  // io_uring could open with a mode that no filter sees: it stays refused.
  ExpectRefused(Probe({"io_uring"}), "io_uring_setup");
}

TEST_F(EscapeTest, ShellToolsCannotMakeASetIdFile) {
  // The tools an agent would reach for: chmod, install -m, cp -p of a set-user-ID binary (the
  // system's and one made here), each told "Operation not permitted", nothing set on the host.
  std::string suid_src = dir_ / "suid-src";
  std::filesystem::create_directories(suid_src);
  std::filesystem::copy_file(FindOnPath("true"), suid_src + "/own-suid");
  std::filesystem::copy_file(FindOnPath("true"), suid_src + "/own-sgid");
  ASSERT_EQ(::chmod((suid_src + "/own-suid").c_str(), 04755), 0);
  ASSERT_EQ(::chmod((suid_src + "/own-sgid").c_str(), 02755), 0);
  ::chmod(dir_.path().c_str(), 0755);  // the sandbox reads suid-src through a policy read path
  WriteFile(dir_ / "read.toml", "[filesystem]\nread = [\"" + suid_src + "\"]\n");
  const std::vector<std::string> opts = {"--policy", dir_ / "read.toml"};
  std::vector<std::pair<std::string, std::string>> attempts = {
      {"chmod 4755", "touch a && chmod 4755 a"},
      {"chmod u+s", "touch b && chmod u+s b"},
      {"chmod g+s", "touch c && chmod g+s c"},
      {"chmod g+s on a directory", "mkdir d && chmod g+s d"},
      {"install -m 4755", "install -m 4755 /bin/true installed"},
      {"install -m 2755", "install -m 2755 /bin/true installed-g"},
      {"cp -p of our own setuid copy", "cp -p " + suid_src + "/own-suid own-suid-copy"},
      {"cp -p of our own setgid copy", "cp -p " + suid_src + "/own-sgid own-sgid-copy"},
      {"mkdir -m 2755", "mkdir -m 2755 gdir"},
  };
  for (const auto& [what, cmd] : attempts) {
    auto r = Exec({"sh", "-c", cmd}, opts);
    EXPECT_NE(r.exit_code, 0) << what << " succeeded\n" << r.out << r.err;
    EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos)
        << what << ": the caller was not told EPERM\n"
        << r.err;
  }
  struct stat passwd {};
  if (::stat("/usr/bin/passwd", &passwd) == 0 && (passwd.st_mode & S_ISUID) != 0) {
    // Root's cp keeps the owner (root) and then asks for the bit: EPERM. An ordinary user's cp
    // cannot keep root as the owner and drops the bits itself, so only the result is checked.
    auto r = Exec({"sh", "-c", "cp -p /usr/bin/passwd passwd-copy"}, opts);
    if (::geteuid() == 0) {
      EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.out << r.err;
    }
    EXPECT_TRUE(testing::Exists(ws_ + "/passwd-copy")) << r.out << r.err;
  }
  EXPECT_TRUE(SetIdFiles(ws_).empty()) << Joined(SetIdFiles(ws_));
  // The copies exist, without the bits: cp still does the rest of its work.
  EXPECT_TRUE(testing::Exists(ws_ + "/own-suid-copy"));
}

TEST_F(EscapeTest, FileCapabilitiesCannotBeSet) {
  ExpectRefused(Probe({"setcap", ws_ + "/capped"}), "setxattr security.capability");
  char buf[64];
  EXPECT_LT(::getxattr((ws_ + "/capped").c_str(), "security.capability", buf, sizeof buf), 0)
      << "a file capability reached the host";
}

// The RAM a sandbox can pin without a cgroup: its /tmp, memfds and SysV shared memory are each
// bounded by the policy's memory limit. Run with the cgroup turned off (CORDON_TEST_NO_CGROUP,
// as on a host without a delegated cgroup) and, where the host offers one, with it: the cgroup
// then ends the attempt instead.
// In a sanitizer build the shim is ASan-built too, and ASan cannot map its shadow memory under the
// RLIMIT_DATA the no-cgroup mode sets (the shadow is private writable memory): those runs are
// left to the release build and the unprivileged pass of CI, and say so.
bool NoCgroupRunIsSkippedHere() {
  if (!testing::CordonSanitized()) return false;
  std::fprintf(
      stderr,
      "SKIPPED SECURITY TEST (sanitizer build): the no-cgroup mode sets RLIMIT_DATA, under "
      "which the ASan-built shim cannot start; the release build runs this\n");
  return true;
}

class PinnedMemoryTest : public EscapeTest {
 protected:
  static constexpr long long kLimit = 128ll << 20;
  void SetUp() override {
    EscapeTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    WriteFile(dir_ / "mem.toml",
              "[limits]\nmemory_bytes = " + std::to_string(kLimit) + "\ntimeout_secs = 120\n");
  }
  testing::RunResult Pin(std::vector<std::string> args, bool cgroup) {
    args.insert(args.begin(), ws_ + "/probe");
    std::vector<std::string> env;
    if (!cgroup) env.push_back("CORDON_TEST_NO_CGROUP=1");
    return Exec(args, {"--policy", dir_ / "mem.toml"}, env);
  }
  // Whether this host gives cordon a per-call cgroup (root here; not an ordinary user).
  bool HostHasCgroup() {
    auto r = testing::Run({testing::CordonBin(), "exec", "--workspace", ws_, "--audit-log",
                           dir_ / "cgroup-probe.jsonl", "--", "true"},
                          env_);
    return r.exit_code == 0 &&
           ReadFile(dir_ / "cgroup-probe.jsonl").find("\"cgroup\":\"none\"") == std::string::npos;
  }
  // Refused by the bound: exit 1 with one of `errnos`. Under a cgroup the cgroup may end the
  // attempt first (its OOM killer picks a process of the sandbox): then any failure will do.
  void ExpectBounded(const testing::RunResult& r, bool cgroup, std::vector<int> errnos,
                     const std::string& what) {
    EXPECT_EQ(r.out.find("ESCAPED"), std::string::npos) << what << "\n" << r.out << r.err;
    EXPECT_NE(r.exit_code, 0) << what << "\n" << r.out << r.err;
    if (cgroup && r.exit_code != 1) return;
    EXPECT_EQ(r.exit_code, 1) << what << "\n" << r.out << r.err;
    bool seen = false;
    for (int e : errnos) {
      seen = seen || r.out.find("errno=" + std::to_string(e) + " ") != std::string::npos;
    }
    EXPECT_TRUE(seen) << what << ": unexpected errno\n" << r.out << r.err;
  }
};

TEST_F(PinnedMemoryTest, PrivateTmpHoldsNoMoreThanTheMemoryLimit) {
  for (bool cgroup : {false, true}) {
    if (cgroup && !HostHasCgroup()) continue;
    if (!cgroup && NoCgroupRunIsSkippedHere()) continue;
    auto r = Pin({"fill", "/tmp/fill", std::to_string(2 * kLimit)}, cgroup);
    ExpectBounded(r, cgroup, {ENOSPC, EFBIG}, std::string("/tmp, cgroup=") + (cgroup ? "1" : "0"));
    long long wrote = -1;
    if (auto at = r.out.find("fill: wrote "); at != std::string::npos) {
      wrote = std::atoll(r.out.c_str() + at + 12);
      EXPECT_LE(wrote, kLimit) << r.out;
    }
    // The host is unharmed: cordon reported the call and the host still runs commands.
    EXPECT_EQ(testing::Run({"/bin/true"}).exit_code, 0);
  }
  auto df =
      Exec({"sh", "-c", "df -B1 --output=size /tmp | tail -1"}, {"--policy", dir_ / "mem.toml"});
  EXPECT_LE(std::atoll(df.out.c_str()), kLimit) << "the private /tmp is larger: " << df.out;
}

TEST_F(PinnedMemoryTest, MemfdPagesAreBounded) {
  for (bool cgroup : {false, true}) {
    if (cgroup && !HostHasCgroup()) continue;
    if (!cgroup && NoCgroupRunIsSkippedHere()) continue;
    const std::string tag = std::string(", cgroup=") + (cgroup ? "1" : "0");
    // Without a cgroup nothing would count memfd pages: memfd_create answers ENOSYS, as an old
    // kernel would, and callers fall back to the bounded /tmp.
    ExpectBounded(Pin({"memfd", std::to_string(2 * kLimit)}, cgroup), cgroup, {ENOSYS, ENOMEM},
                  "one memfd written past the limit" + tag);
    ExpectBounded(Pin({"memfd", std::to_string(2 * kLimit), "1", "ftruncate"}, cgroup), cgroup,
                  {ENOSYS, ENOMEM, EFBIG}, "one memfd grown with ftruncate" + tag);
    ExpectBounded(Pin({"memfd", std::to_string(16ll << 20), "16"}, cgroup), cgroup,
                  {ENOSYS, ENOMEM}, "sixteen memfds of 16 MiB" + tag);
  }
}

TEST_F(PinnedMemoryTest, SysvSharedMemoryIsBounded) {
  for (bool cgroup : {false, true}) {
    if (cgroup && !HostHasCgroup()) continue;
    if (!cgroup && NoCgroupRunIsSkippedHere()) continue;
    const std::string tag = std::string(", cgroup=") + (cgroup ? "1" : "0");
    // One segment larger than the limit: shmmax refuses it.
    ExpectBounded(Pin({"shm", std::to_string(2 * kLimit)}, cgroup), cgroup, {EINVAL},
                  "one segment past the limit" + tag);
    // Many segments, each within shmmax, kept after detaching: shmall ends them at the limit.
    auto r = Pin({"shm", std::to_string(32ll << 20), "8"}, cgroup);
    ExpectBounded(r, cgroup, {ENOSPC}, "eight segments of 32 MiB" + tag);
    if (auto at = r.out.find("shm: made "); at != std::string::npos) {
      EXPECT_LE(std::atoll(r.out.c_str() + at + 10), kLimit) << r.out;
    }
  }
}

// --- Limits that end a process (issue 11): each is named, with its configured value, in the
// tool result, the process record and exec's message; the memory fallback without a cgroup is
// RLIMIT_DATA, which bounds a real balloon and leaves address-space reservations alone.
class LimitsTest : public PinnedMemoryTest {
 protected:
  Json LastProcess(const std::string& log) {
    Json last;
    std::istringstream in(ReadFile(log));
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == "process") last = j;
    }
    return last;
  }
  testing::RunResult ExecWith(const std::string& policy, std::vector<std::string> cmd, bool cgroup,
                              const std::string& log) {
    WriteFile(dir_ / "limits.toml", policy);
    std::vector<std::string> argv = {
        testing::CordonBin(), "exec", "--workspace", ws_, "--audit-log", log, "--policy",
        dir_ / "limits.toml", "--"};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    auto env = env_;
    if (!cgroup) env.push_back("CORDON_TEST_NO_CGROUP=1");
    return testing::Run(argv, env);
  }
};

TEST_F(LimitsTest, WebAssemblyMemoryWorksWithoutACgroup) {
  if (NoCgroupRunIsSkippedHere()) return;
  if (!testing::Exists("/usr/bin/node")) {
    GTEST_SKIP() << "SKIPPED: /usr/bin/node is not installed; this test reserves a WebAssembly "
                    "memory with it";
  }
  // The default 4 GiB memory limit: V8 reserves (PROT_NONE) far more address space than that
  // for a memory of 65536 pages, which RLIMIT_AS refused.
  const std::string log = dir_ / "wasm.jsonl";
  auto r = ExecWith("[limits]\ntimeout_secs = 60\n",
                    {"/usr/bin/node", "-e",
                     "const m = new WebAssembly.Memory({initial: 1, maximum: 65536});"
                     "new Uint8Array(m.buffer)[0] = 1; m.grow(15);"
                     "console.log('wasm ok ' + m.buffer.byteLength)"},
                    false, log);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("wasm ok 1048576"), std::string::npos) << r.out << r.err;
  const Json rec = LastProcess(log);
  EXPECT_EQ(rec["confinement"]["cgroup"], "none") << rec.dump();
  EXPECT_NE(rec["confinement"]["rlimits"].dump().find("RLIMIT_DATA"), std::string::npos);
  EXPECT_EQ(rec["confinement"]["rlimits"].dump().find("RLIMIT_AS"), std::string::npos);
  EXPECT_FALSE(rec.contains("limit")) << rec.dump();
}

TEST_F(LimitsTest, ABalloonIsStoppedAndTheMemoryLimitNamed) {
  for (bool cgroup : {false, true}) {
    if (cgroup && !HostHasCgroup()) continue;
    if (!cgroup && NoCgroupRunIsSkippedHere()) continue;
    const std::string tag = std::string("cgroup=") + (cgroup ? "1" : "0");
    const std::string log = dir_ / ("balloon-" + tag + ".jsonl");
    auto r =
        ExecWith("[limits]\nmemory_bytes = " + std::to_string(kLimit) + "\ntimeout_secs = 120\n",
                 {ws_ + "/probe", "balloon", std::to_string(4 * kLimit)}, cgroup, log);
    EXPECT_EQ(r.out.find("ESCAPED"), std::string::npos) << tag << r.out << r.err;
    EXPECT_NE(r.exit_code, 0) << tag << r.out << r.err;
    if (auto at = r.out.find("balloon: touched "); at != std::string::npos) {
      EXPECT_LE(std::atoll(r.out.c_str() + at + 17), kLimit) << tag << r.out;
    }
    const Json rec = LastProcess(log);
    ASSERT_TRUE(rec.contains("limit")) << tag << ": no limit named\n" << rec.dump() << r.err;
    EXPECT_EQ(rec["limit"]["name"], "memory") << tag << rec.dump();
    EXPECT_EQ(rec["limit"]["value"], kLimit) << tag;
    EXPECT_EQ(rec["limit"]["policy_key"], "limits.memory_bytes") << tag;
    EXPECT_EQ(rec["limit"]["enforcer"], cgroup ? "cgroup memory" : "RLIMIT_DATA") << tag;
    EXPECT_NE(r.err.find("cordon: the command was ended by the memory limit (" +
                         std::to_string(kLimit) + " bytes, limits.memory_bytes"),
              std::string::npos)
        << tag << r.err;
  }
}

TEST_F(LimitsTest, SharedAnonymousMemoryIsRefusedWithoutACgroup) {
  if (NoCgroupRunIsSkippedHere()) return;
  // RLIMIT_DATA does not count a shared mapping; without a cgroup nothing would.
  auto r = ExecWith("[limits]\nmemory_bytes = " + std::to_string(kLimit) + "\n",
                    {ws_ + "/probe", "shared-anon", std::to_string(2 * kLimit)}, false,
                    dir_ / "shared.jsonl");
  ExpectRefused(r, "mmap(MAP_SHARED|MAP_ANONYMOUS) without a cgroup");
  EXPECT_NE(r.out.find("errno=" + std::to_string(ENOMEM) + " "), std::string::npos) << r.out;
}

TEST_F(LimitsTest, CpuFileSizeAndTimeoutLimitsAreNamed) {
  struct Case {
    std::string what, policy;
    std::vector<std::string> cmd, opts;
    int exit_code;
    std::string limit, key, message;
  };
  const std::vector<Case> cases = {
      {"cpu",
       "[limits]\ncpu_secs = 1\ntimeout_secs = 60\n",
       {ws_ + "/probe", "spin"},
       {},
       128 + SIGXCPU,
       "cpu",
       "limits.cpu_secs",
       "cordon: the command was ended by the cpu limit (1 seconds, limits.cpu_secs; RLIMIT_CPU: "
       "SIGXCPU"},
      {"file_size",
       "[limits]\nfile_size_bytes = 1048576\n",
       {ws_ + "/probe", "fill", ws_ + "/big", "4194304"},
       {},
       128 + SIGXFSZ,
       "file_size",
       "limits.file_size_bytes",
       "cordon: the command was ended by the file_size limit (1048576 bytes, "
       "limits.file_size_bytes; RLIMIT_FSIZE: SIGXFSZ)"},
      {"timeout",
       "[tools.exec]\ntimeout_secs = 1\n",
       {"sleep", "30"},
       {},
       124,
       "timeout",
       "tools.exec.timeout_secs",
       "cordon: timed out: the timeout limit (1 seconds, tools.exec.timeout_secs; cordon's timer"},
  };
  for (const Case& c : cases) {
    const std::string log = dir_ / (c.what + ".jsonl");
    auto r = ExecWith(c.policy, c.cmd, true, log);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.what << r.out << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.what << "\n" << r.err;
    const Json rec = LastProcess(log);
    ASSERT_TRUE(rec.contains("limit")) << c.what << rec.dump();
    EXPECT_EQ(rec["limit"]["name"], c.limit) << c.what;
    EXPECT_EQ(rec["limit"]["policy_key"], c.key) << c.what;
  }
}

// run_shell's result names the limit too, and says when the timeout it asked for was cut.
TEST_F(LimitsTest, RunShellSaysWhichLimitEndedItAndWhenItsTimeoutWasCut) {
  WriteFile(dir_ / "config/cordon/policies.d/50-t.toml",
            "[limits]\ncpu_secs = 1\n[tools.run_shell]\ntimeout_secs = 20\n");
  auto r =
      Call("run_shell", {{"program", ws_ + "/probe"}, {"args", {"spin"}}, {"timeout_secs", 500}});
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  const Json& sc = j["structuredContent"];
  EXPECT_EQ(sc["signal"], SIGXCPU) << sc.dump();
  EXPECT_EQ(sc["limit"]["name"], "cpu") << sc.dump();
  EXPECT_EQ(sc["limit"]["value"], 1);
  EXPECT_EQ(sc["timeout"]["requested"], 500) << sc.dump();
  EXPECT_EQ(sc["timeout"]["applied"], 20);
  EXPECT_EQ(sc["timeout"]["capped"], true);
  EXPECT_EQ(sc["timeout"]["capped_by"], "tools.run_shell.timeout_secs");
  EXPECT_EQ(sc["timeout"]["decided_by"], (dir_ / "config/cordon/policies.d/50-t.toml") + ":4");
  const Json rec = LastProcess(dir_ / "audit.jsonl");
  EXPECT_EQ(rec["limit"]["name"], "cpu") << rec.dump();
  EXPECT_EQ(rec["timeout"], sc["timeout"]) << rec.dump();
  // A timeout within the cap is reported as asked for, not capped; the timeout that then ends
  // the call is named in its error.
  auto t = Call("run_shell", {{"program", "sleep"}, {"args", {"30"}}, {"timeout_secs", 1}});
  Json tj = Json::parse(t.out, nullptr, false);
  ASSERT_TRUE(tj.is_object()) << t.out << t.err;
  EXPECT_EQ(tj["structuredContent"]["error"]["code"], "timeout") << t.out;
  EXPECT_NE(tj["structuredContent"]["error"]["message"].get<std::string>().find(
                "the timeout limit (1 seconds, the call's timeout_secs"),
            std::string::npos)
      << t.out;
  const Json trec = LastProcess(dir_ / "audit.jsonl");
  EXPECT_EQ(trec["limit"]["name"], "timeout") << trec.dump();
  EXPECT_EQ(trec["timeout"], (Json{{"requested", 1}, {"applied", 1}, {"capped", false}}));
}

// A workspace the user running cordon cannot write: run_shell runs with it read-only and says
// so, rather than failing with sandbox_unavailable.
TEST_F(EscapeTest, RunShellInAWorkspaceOnAReadOnlyMountRunsReadOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a private mount namespace (unshare -m)";
  WriteFile(ws_ + "/f", "hi\n");
  const Json input = {{"program", "sh"}, {"args", {"-c", "cat f; touch g"}}};
  const std::string script =
      "mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\" && "
      "exec \"$2\" call run_shell --workspace \"$1\" --audit-log \"$3\" "
      "--json \"$4\"";
  auto r = testing::Run({"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                         script, "sh", ws_, testing::CordonBin(), dir_ / "ro.jsonl", input.dump()},
                        env_);
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  const Json& sc = j["structuredContent"];
  EXPECT_FALSE(j["isError"].get<bool>()) << r.out;
  EXPECT_EQ(sc["stdout"], "hi\n") << sc.dump();
  EXPECT_EQ(sc["exit_code"], 1) << "touch must fail on the read-only workspace: " << sc.dump();
  EXPECT_EQ(sc["confinement"]["workspace"], "read-only") << sc.dump();
  EXPECT_EQ(sc["confinement"]["workspace_read_only_reason"],
            "the workspace is on a read-only mount");
  EXPECT_FALSE(testing::Exists(ws_ + "/g"));
  EXPECT_NE(ReadFile(dir_ / "ro.jsonl").find("\"workspace_read_only_reason\""), std::string::npos);
}

TEST_F(EscapeTest, RunShellInAWorkspaceTheUserCannotWriteRunsReadOnly) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "root writes a 0555 directory anyway; scripts/test-unprivileged.sh runs this";
  }
  WriteFile(ws_ + "/f", "hi\n");
  ASSERT_EQ(::chmod(ws_.c_str(), 0555), 0);
  auto r = Call("run_shell", {{"program", "sh"}, {"args", {"-c", "cat f; touch g"}}});
  ::chmod(ws_.c_str(), 0755);
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  const Json& sc = j["structuredContent"];
  EXPECT_FALSE(j["isError"].get<bool>()) << r.out;
  EXPECT_EQ(sc["stdout"], "hi\n") << sc.dump();
  EXPECT_EQ(sc["confinement"]["workspace"], "read-only") << sc.dump();
  EXPECT_NE(sc["confinement"].value("workspace_read_only_reason", "").find("cannot write"),
            std::string::npos)
      << sc.dump();
  EXPECT_FALSE(testing::Exists(ws_ + "/g"));
  // A directory another user owns (root's /usr/share): it failed with sandbox_unavailable.
  auto other =
      testing::Run({testing::CordonBin(), "call", "run_shell", "--workspace", "/usr/share",
                    "--audit-log", dir_ / "other.jsonl", "--json",
                    Json{{"program", "sh"}, {"args", {"-c", "test -d . && echo here"}}}.dump()},
                   env_);
  Json o = Json::parse(other.out, nullptr, false);
  ASSERT_TRUE(o.is_object()) << other.out << other.err;
  EXPECT_FALSE(o["isError"].get<bool>()) << other.out;
  EXPECT_EQ(o["structuredContent"]["stdout"], "here\n") << other.out;
  EXPECT_EQ(o["structuredContent"]["confinement"]["workspace"], "read-only") << other.out;
}

TEST_F(EscapeTest, WithoutBwrapCordonFailsClosed) {
  TempDir empty_path;
  auto r = testing::Run({testing::CordonBin(), "exec", "--workspace", ws_, "--audit-log",
                         dir_ / "audit.jsonl", "--", "true"},
                        {"PATH=" + empty_path.path(), "XDG_CONFIG_HOME=" + (dir_ / "config")});
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  EXPECT_NE(r.err.find("sandbox_unavailable"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bwrap"), std::string::npos) << r.err;
}

// cordon's own files, laid out in a simulated home inside the workspace: HOME points there,
// the XDG variables are unset (so the defaults below HOME apply), and the options name an audit
// log, an audit key and a policy layer there too.
class OwnFilesTest : public EscapeTest {
 protected:
  void SetUp() override {
    EscapeTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    home_ = ws_ + "/home";
    std::filesystem::create_directories(home_ + "/.config/cordon/policies.d");
    WriteFile(home_ + "/.config/cordon/policies.d/50-user.toml", "[limits]\ntimeout_secs = 60\n");
    std::filesystem::create_directories(home_ + "/.local/state/cordon");
    WriteFile(home_ + "/.local/state/cordon/trust.json", "{}\n");
    std::filesystem::create_directories(home_ + "/keys");
    WriteFile(home_ + "/keys/audit.key", "own-file-secret-0123456789abcdef\n");
    ::chmod((home_ + "/keys/audit.key").c_str(), 0600);  // a key others can read is refused
    WriteFile(home_ + "/keys/extra.toml", "[limits]\ntimeout_secs = 50\n");
    std::filesystem::create_directories(home_ + "/logs");
    env_ = {"HOME=" + home_, "XDG_CONFIG_HOME=", "XDG_STATE_HOME=", "XDG_RUNTIME_DIR="};
  }
  std::vector<std::string> SessionOpts() {
    return {"--workspace",      ws_,
            "--audit-log",      home_ + "/logs/audit.jsonl",
            "--audit-key-file", home_ + "/keys/audit.key",
            "--policy",         home_ + "/keys/extra.toml"};
  }
  testing::RunResult ExecOwn(std::vector<std::string> cmd, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {testing::CordonBin(), "exec"};
    for (auto& o : SessionOpts()) argv.push_back(o);
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return testing::Run(argv, env_);
  }
  testing::RunResult CallOwn(const std::string& tool, const Json& input) {
    std::vector<std::string> argv = {testing::CordonBin(), "call", tool};
    for (auto& o : SessionOpts()) argv.push_back(o);
    argv.insert(argv.end(), {"--json", input.dump()});
    return testing::Run(argv, env_);
  }
  // Every own file, as the workspace-relative path and the absolute one.
  std::vector<std::string> OwnFiles() {
    return {home_ + "/.config/cordon/policies.d/50-user.toml",
            home_ + "/.local/state/cordon/trust.json", home_ + "/keys/audit.key",
            home_ + "/keys/extra.toml", home_ + "/logs/audit.jsonl"};
  }
  std::string home_;
};

TEST_F(OwnFilesTest, OwnFilesAreNeitherReadableNorWritableFromExec) {
  // The audit log exists once a session has run.
  ASSERT_EQ(ExecOwn({"true"}).exit_code, 0);
  const std::string key_before = ReadFile(home_ + "/keys/audit.key");
  for (const auto& f : OwnFiles()) {
    auto read = ExecOwn({ws_ + "/probe", "read", f});
    ExpectRefused(read, "read " + f);
    auto write = ExecOwn({ws_ + "/probe", "write", f});
    ExpectRefused(write, "write " + f);
  }
  // A new policy layer cannot be planted, nor the directories renamed aside and recreated.
  auto plant =
      ExecOwn({"sh", "-c",
               "echo '[network]' > " + home_ + "/.config/cordon/policies.d/90-evil.toml; mv " +
                   home_ + "/.config " + home_ + "/.config-aside; mkdir -p " + home_ +
                   "/.config/cordon/policies.d && echo x > " + home_ +
                   "/.config/cordon/policies.d/90-evil.toml; rm -f " + home_ +
                   "/logs/audit.jsonl " + home_ + "/.local/state/cordon/trust.json"});
  EXPECT_FALSE(testing::Exists(home_ + "/.config/cordon/policies.d/90-evil.toml")) << plant.err;
  EXPECT_FALSE(testing::Exists(home_ + "/.config-aside"));
  EXPECT_TRUE(testing::Exists(home_ + "/.local/state/cordon/trust.json"));
  EXPECT_EQ(ReadFile(home_ + "/keys/audit.key"), key_before);
  // The log survived every attempt, whole: its chain (keyed) still verifies.
  auto verify = testing::Run({testing::CordonBin(), "audit", "verify", home_ + "/logs/audit.jsonl",
                              "--key-file", home_ + "/keys/audit.key"},
                             env_);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST_F(OwnFilesTest, MissingOwnDirectoriesCannotBeCreatedFromExec) {
  // No configuration or state directory yet: a command must not be able to create one.
  std::filesystem::remove_all(home_ + "/.config");
  std::filesystem::remove_all(home_ + "/.local");
  auto r = ExecOwn({"sh", "-c",
                    "mkdir -p " + home_ + "/.config/cordon/policies.d " + home_ +
                        "/.local/state/cordon; echo x > " + home_ +
                        "/.config/cordon/policies.d/90-evil.toml; echo '{}' > " + home_ +
                        "/.local/state/cordon/trust.json"});
  EXPECT_FALSE(testing::Exists(home_ + "/.config/cordon/policies.d/90-evil.toml")) << r.err;
  EXPECT_FALSE(testing::Exists(home_ + "/.local/state/cordon/trust.json")) << r.err;
  // cordon made its own directories (0700) before the launch, and masked them: no placeholder,
  // and nothing the command wrote is in them.
  struct stat st {};
  ASSERT_EQ(::stat((home_ + "/.config/cordon").c_str(), &st), 0) << r.err;
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_FALSE(testing::Exists(home_ + "/.config/cordon/policies.d")) << r.err;
}

TEST_F(OwnFilesTest, ReadGrantsDoNotShowOwnFiles) {
  // The configuration outside the workspace, and a policy layer granting read on it.
  TempDir xdg;
  std::filesystem::create_directories(xdg / "cordon/policies.d");
  WriteFile(xdg / "cordon/policies.d/50-user.toml", "[limits]\ntimeout_secs = 60\n");
  WriteFile(home_ + "/keys/extra.toml",
            "[filesystem]\nread = [\"" + xdg.path() + "\", \"" + home_ + "/keys\"]\n");
  std::replace(env_.begin(), env_.end(), std::string("XDG_CONFIG_HOME="),
               "XDG_CONFIG_HOME=" + xdg.path());
  ExpectRefused(ExecOwn({ws_ + "/probe", "read", xdg / "cordon/policies.d/50-user.toml"}),
                "a read grant over the configuration directory");
  ExpectRefused(ExecOwn({ws_ + "/probe", "read", home_ + "/keys/audit.key"}),
                "a read grant over the key");
}

TEST_F(OwnFilesTest, FileToolsRefuseOwnFilesAndNeverListThem) {
  ASSERT_EQ(ExecOwn({"true"}).exit_code, 0);
  for (const auto& f : OwnFiles()) {
    const std::string rel = f.substr(ws_.size() + 1);
    auto read = CallOwn("read_file_range", {{"path", rel}, {"start_line", 1}});
    EXPECT_NE(read.out.find("denied_by_policy"), std::string::npos) << rel << ": " << read.out;
    EXPECT_EQ(read.out.find("own-file-secret"), std::string::npos) << rel;
    auto write =
        CallOwn("replace_range", {{"path", rel}, {"old_string", "a"}, {"new_string", "b"}});
    EXPECT_NE(write.out.find("denied_by_policy"), std::string::npos) << rel << ": " << write.out;
  }
  auto plant = CallOwn("create_file", {{"path", "home/.config/cordon/policies.d/90-evil.toml"},
                                       {"content", "[network]\nmode = \"allow\"\n"}});
  EXPECT_NE(plant.out.find("denied_by_policy"), std::string::npos) << plant.out;
  EXPECT_FALSE(testing::Exists(home_ + "/.config/cordon/policies.d/90-evil.toml"));
  auto found = CallOwn("find_files", {{"include_hidden", true}});
  EXPECT_EQ(found.exit_code, 0) << found.out << found.err;
  EXPECT_NE(found.out.find("probe"), std::string::npos) << found.out;
  for (const char* name : {"audit.key", "50-user.toml", "trust.json", "audit.jsonl", "extra.toml"})
    EXPECT_EQ(found.out.find(name), std::string::npos) << name << " listed: " << found.out;
  auto listed = CallOwn("list_searchable_files", {{"include_hidden", true}});
  for (const char* name : {"audit.key", "50-user.toml", "trust.json", "audit.jsonl", "extra.toml"})
    EXPECT_EQ(listed.out.find(name), std::string::npos) << name << " listed: " << listed.out;
  if (!FindOnPath("rg").empty()) {
    auto search =
        CallOwn("search_text", {{"pattern", "own-file-secret"}, {"include_hidden", true}});
    EXPECT_EQ(search.exit_code, 0) << search.out << search.err;
    EXPECT_EQ(search.out.find("audit.key"), std::string::npos) << search.out;
    EXPECT_EQ(search.out.find("own-file-secret-0123"), std::string::npos) << search.out;
  }
}

TEST_F(EscapeTest, RootAndHomeAreRefusedAsWritableWorkspaces) {
  const std::string home = dir_ / "home";
  std::filesystem::create_directories(home);
  WriteFile(home + "/notes.txt", "hello\n");
  std::filesystem::create_symlink(home, dir_ / "home-link");
  std::vector<std::string> env = {"HOME=" + home};
  auto exec = [&](const std::string& ws, std::vector<std::string> extra) {
    std::vector<std::string> argv = {testing::CordonBin(), "exec", "--workspace", ws, "--audit-log",
                                     dir_ / "audit.jsonl"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    // Refused before anything runs; were it not, `/` would only run `true`.
    if (ws == "/") {
      argv.insert(argv.end(), {"--", "true"});
    } else {
      argv.insert(argv.end(), {"--", "sh", "-c", "echo x > " + ws + "/planted"});
    }
    return testing::Run(argv, env);
  };
  for (const std::string& ws : {std::string("/"), home, dir_ / "home-link"}) {
    auto r = exec(ws, {});
    EXPECT_EQ(r.exit_code, 125) << ws << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("denied_by_policy"), std::string::npos) << ws << ": " << r.err;
    EXPECT_NE(r.err.find("--allow-dangerous-workspace"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(testing::Exists(home + "/planted"));
  auto call = [&](const std::string& tool, const Json& in, std::vector<std::string> extra) {
    std::vector<std::string> argv = {testing::CordonBin(), "call",   tool,
                                     "--workspace",        home,     "--audit-log",
                                     dir_ / "audit.jsonl", "--json", in.dump()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::Run(argv, env);
  };
  auto write = call("create_file", {{"path", "planted"}, {"content", "x\n"}}, {});
  EXPECT_NE(write.out.find("denied_by_policy"), std::string::npos) << write.out;
  EXPECT_FALSE(testing::Exists(home + "/planted"));
  // Read-only use still works.
  auto read = call("read_file_range", {{"path", "notes.txt"}, {"start_line", 1}}, {});
  EXPECT_EQ(read.exit_code, 0) << read.out << read.err;
  EXPECT_NE(read.out.find("hello"), std::string::npos) << read.out;
  auto found = call("find_files", {{"pattern", "notes"}}, {});
  EXPECT_EQ(found.exit_code, 0) << found.out << found.err;
  // The flag names the risk, and then the home directory is writable.
  auto allowed = exec(home, {"--allow-dangerous-workspace"});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.out << allowed.err;
  EXPECT_TRUE(testing::Exists(home + "/planted"));
}

// The first entry under /etc that "others" may not read and the policy does not deny: what an
// ordinary user's sandbox must not read either (the kernel refuses it).
std::string ExistingRootOnlyFile() {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(
           "/etc", std::filesystem::directory_options::skip_permission_denied, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const std::string p = it->path().string();
    if ((st.st_mode & S_IROTH) == 0 && p.find("shadow") == std::string::npos &&
        p.find("sudoers") == std::string::npos && p.find("/ssl/private") == std::string::npos &&
        p.find("/ssh/") == std::string::npos)
      return p;
  }
  return {};
}

TEST_F(EscapeTest, FilesOrdinaryUsersCannotReadAreUnreadableInside) {
  if (::geteuid() != 0) {
    // As an ordinary user the sandbox runs with the same uid: the kernel refuses it already.
    const std::string existing = ExistingRootOnlyFile();
    if (existing.empty()) {
      GTEST_SKIP() << "SKIPPED SECURITY TEST: not root, and no file under /etc denies "
                      "others read to assert that the kernel refuses it";
    }
    ExpectRefused(Probe({"read", existing}), existing);
    return;
  }
  // Fresh root-only entries under two read binds, made here and removed after.
  char file_tmpl[] = "/etc/cordon-test-XXXXXX";
  const int fd = ::mkstemp(file_tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "root-only-secret\n", 17), 17);
  ::close(fd);
  ASSERT_EQ(::chmod(file_tmpl, 0600), 0);
  std::filesystem::create_directories("/opt");
  char dir_tmpl[] = "/opt/cordon-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_tmpl), nullptr);
  ASSERT_EQ(::chmod(dir_tmpl, 0700), 0);
  const std::string inner = std::string(dir_tmpl) + "/readable-inside.txt";
  WriteFile(inner, "root-only-secret\n");
  ::chmod(inner.c_str(), 0644);
  auto file = Probe({"read", file_tmpl});
  auto dir = Probe({"read", inner});
  auto list = Exec({"ls", dir_tmpl});
  // Named by the policy, the file is readable again.
  WriteFile(dir_ / "named.toml", std::string("[filesystem]\nread = [\"") + file_tmpl + "\"]\n");
  auto named = Probe({"read", file_tmpl}, {"--policy", dir_ / "named.toml"});
  ::unlink(file_tmpl);
  std::filesystem::remove_all(dir_tmpl);
  ExpectRefused(file, "a fresh 0600 root-owned file under /etc");
  ExpectRefused(dir, "a file inside a fresh 0700 root-owned directory under /opt");
  EXPECT_EQ(list.out.find("readable-inside"), std::string::npos) << list.out;
  EXPECT_EQ(named.exit_code, 0) << named.out << named.err;
}

}  // namespace
}  // namespace cordon
