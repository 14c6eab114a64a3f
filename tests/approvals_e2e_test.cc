// Approvals (issue 34, part a) through the real binary: an `ask` rule asks the person at the
// terminal (a pseudo-terminal here: yes, no, end of input), is refused at once with no one to
// ask (CI=true, --non-interactive, no terminal), and every question leaves an approval record.
// The promise checked is what reaches the host: a command or a write that was not approved
// never happened there.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/text.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// The first executable `name` on PATH ("" when none).
std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= p.size();) {
    std::size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    const std::string candidate = p.substr(start, end - start) + "/" + name;
    start = end + 1;
    if (candidate[0] == '/' && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// What a run under a pseudo-terminal showed and how it ended.
struct PtyRun {
  std::string screen;
  int exit_code = -1;
};

class ApprovalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (OnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed");
    ws_ = dir_ / "ws";
    WriteFile(ws_ + "/src/keep.c", "int main(void) { return 0; }\n");
    // A rule on a harmless program, so that what the approval lets through is seen on the host.
    WriteFile(dir_ / "ask.toml", R"([[approvals.rules]]
id = "t-touch"
decision = "ask"
argv = ["touch"]
reason = "a test rule"
match = ["touch x", "sh -c 'touch x'"]
not_match = ["ls"]
)");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
  }

  std::vector<std::string> Args(std::vector<std::string> args) {
    args.insert(args.begin(), testing::CordonBin());
    return args;
  }
  // No one to ask: CI=true in cordon's environment, and no controlling terminal either.
  testing::RunResult InCi(std::vector<std::string> args) {
    std::vector<std::string> env = env_;
    env.push_back("CI=true");
    return testing::Run(Args(std::move(args)), env);
  }
  std::vector<Json> Records(const std::string& type) {
    std::vector<Json> out;
    for (const std::string& line : SplitLines(ReadFile(log()))) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == type) out.push_back(std::move(j));
    }
    return out;
  }
  static std::vector<std::string> SplitLines(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      lines.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    return lines;
  }

  // Runs cordon with a pseudo-terminal as its controlling terminal and CI cleared; once the
  // question is on the screen, types `answer` (a line, or "\x04" for end of input), or with
  // kKill sends cordon SIGKILL instead.
  static constexpr const char* kKill = "<kill -9>";
  PtyRun UnderPty(std::vector<std::string> args, const std::string& answer) {
    PtyRun run;
    std::vector<std::string> argv = Args(std::move(args));
    int master = -1;
    const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
    if (pid < 0) return run;
    if (pid == 0) {
      ::unsetenv("CI");
      for (const std::string& e : env_) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    bool answered = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{.fd = master, .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 200) > 0) {
        char buf[4096];
        const ssize_t n = ::read(master, buf, sizeof buf);
        if (n <= 0) break;  // the child closed the terminal: it has ended
        run.screen.append(buf, static_cast<std::size_t>(n));
      }
      if (!answered && run.screen.find("Allow it?") != std::string::npos) {
        if (answer == kKill) {
          ::kill(pid, SIGKILL);
        } else {
          (void)!::write(master, answer.data(), answer.size());
        }
        answered = true;
      }
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(master);
    if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
    return run;
  }

  std::string log() { return dir_ / "audit.jsonl"; }
  // The held store's entries as `cordon approvals list --json` shows them.
  Json Held() {
    auto r = testing::Run(Args({"approvals", "list", "--json"}), env_);
    Json j = Json::parse(r.out, nullptr, false);
    return j.is_object() ? j["held"] : Json(r.out + r.err);
  }
  // A staged exec of `script` in the workspace, with the shipped rules.
  std::vector<std::string> Staged(const std::string& script) {
    return {"exec", "--workspace", ws_, "--audit-log", log(), "--", "sh", "-c", script};
  }
  // The host tree the held-commit tests start from.
  void HostTree() {
    WriteFile(ws_ + "/deploy/old.yaml", "replicas: 1\n");
    WriteFile(ws_ + "/deploy/keep/x.yaml", "keep\n");
    WriteFile(ws_ + "/build/tmp.o", "obj\n");
    WriteFile(ws_ + "/vendor/lib/deploy/site.yaml", "site\n");
  }
  TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
};

TEST_F(ApprovalsTest, WithNoOneToAskTheCommandNeverRunsAndTheRecordSaysWhy) {
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"CI=true"}, std::vector<std::string>{"--non-interactive"}}) {
    std::vector<std::string> args = {"exec",     "--workspace",    ws_, "--audit-log", log(),
                                     "--policy", dir_ / "ask.toml"};
    if (how[0] == "--non-interactive") args.push_back("--non-interactive");
    args.insert(args.end(), {"--", "touch", "made.txt"});
    std::vector<std::string> env = env_;
    if (how[0] == "CI=true") env.push_back("CI=true");
    auto r = testing::Run(Args(args), env);
    EXPECT_EQ(r.exit_code, 125) << how[0] << ": " << r.err;
    EXPECT_FALSE(testing::Exists(ws_ + "/made.txt")) << how[0];
    EXPECT_NE(r.err.find("approval_required"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("t-touch"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ask.toml:1"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("[approvals] remove = [\"t-touch\"]"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(how[0]), std::string::npos) << "names why no one was asked: " << r.err;
  }
  const auto approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 2u) << ReadFile(log());
  for (const Json& a : approvals) {
    EXPECT_EQ(a["answer"], "no_client");
    EXPECT_EQ(a["asked_via"], "none");
    EXPECT_EQ(a["kind"], "launch");
    EXPECT_EQ(a["rule"], "t-touch");
    EXPECT_EQ(a["argv"], Json({"touch", "made.txt"}));
  }
  EXPECT_TRUE(Records("process").empty()) << "nothing was launched";
  // audit summary counts the questions by rule and answer, and each refusal as a denial.
  auto summary = testing::Run(Args({"audit", "summary", log(), "--json"}), env_);
  Json sum = Json::parse(summary.out, nullptr, false);
  ASSERT_TRUE(sum.is_object()) << summary.out << summary.err;
  std::uint64_t questions = 0, denials = 0;
  for (const Json& file : sum["logs"]) {
    for (const Json& session : file["sessions"]) {
      questions += session["approvals"]["total"].get<std::uint64_t>();
      EXPECT_EQ(session["approvals"]["by_rule"]["t-touch"]["no_client"], 1) << session.dump();
      denials += session["denials"]["total"].get<std::uint64_t>();
    }
  }
  EXPECT_EQ(questions, 2u) << summary.out;
  EXPECT_EQ(denials, 2u) << summary.out;
  // Without CI and without a terminal (a new session, no controlling tty): the same at once.
  auto r = testing::Run({"/usr/bin/env", "-u", "CI", "/usr/bin/setsid", "-w", testing::CordonBin(),
                         "exec", "--workspace", ws_, "--audit-log", log(), "--policy",
                         dir_ / "ask.toml", "--", "touch", "made.txt"},
                        env_);
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("no terminal to ask on"), std::string::npos) << r.err;
  EXPECT_FALSE(testing::Exists(ws_ + "/made.txt"));
}

TEST_F(ApprovalsTest, ThePersonAtTheTerminalDecidesYesNoOrEndOfInput) {
  struct Case {
    std::string answer;
    bool runs;
    std::string recorded;
  };
  const Case cases[] = {{"y\r", true, "once"},
                        {"yes\r", true, "once"},
                        {"n\r", false, "deny"},
                        {"\r", false, "deny"},
                        {"\x04", false, "deny"}};
  int i = 0;
  for (const Case& c : cases) {
    const std::string made = "made" + std::to_string(i++) + ".txt";
    // The question goes to the terminal even when the command's stdin is something else.
    PtyRun run = UnderPty({"exec", "--workspace", ws_, "--audit-log", log(), "--policy",
                           dir_ / "ask.toml", "--", "sh", "-c", "touch " + made},
                          c.answer);
    EXPECT_NE(run.screen.find("t-touch"), std::string::npos) << run.screen;
    EXPECT_NE(run.screen.find("touch " + made), std::string::npos) << run.screen;
    EXPECT_EQ(testing::Exists(ws_ + "/" + made), c.runs) << Json(c.answer).dump() << "\n"
                                                         << run.screen;
    EXPECT_EQ(run.exit_code, c.runs ? 0 : 125) << run.screen;
  }
  // A command too long to show whole says so on the screen, and the record keeps the same.
  const std::string long_arg(9000, 'x');
  PtyRun run =
      UnderPty({"exec", "--workspace", ws_, "--audit-log", dir_ / "long.jsonl", "--policy",
                dir_ / "ask.toml", "--", "sh", "-c", "echo " + long_arg + "; touch hidden.txt"},
               "n\r");
  EXPECT_NE(run.screen.find("more bytes of this command are not shown"), std::string::npos)
      << run.screen.substr(0, 300);
  EXPECT_FALSE(testing::Exists(ws_ + "/hidden.txt"));
  const auto approvals = Records("approval");
  ASSERT_EQ(approvals.size(), std::size(cases)) << ReadFile(log());
  for (std::size_t k = 0; k < approvals.size(); ++k) {
    EXPECT_EQ(approvals[k]["answer"], cases[k].recorded) << approvals[k].dump();
    EXPECT_EQ(approvals[k]["asked_via"], "terminal");
    EXPECT_EQ(approvals[k]["client"], "terminal");
    EXPECT_EQ(approvals[k]["rule"], "t-touch");
    EXPECT_NE(approvals[k]["rule_source"].get<std::string>().find("ask.toml:1"), std::string::npos);
  }
}

TEST_F(ApprovalsTest, TheShippedGitPushRuleSeesTheCommandAsItWillRun) {
  ASSERT_EQ(testing::Run({"/usr/bin/git", "init", "-q", ws_}).exit_code, 0);
  ::symlink(OnPath("git").c_str(), (ws_ + "/g").c_str());
  const std::vector<std::vector<std::string>> asked = {
      {"git", "push"},
      {"git", "-C", "src", "push"},
      {OnPath("git"), "push", "origin", "main"},
      {"./g", "push"},
      {"env", "git", "push"},
      {"sh", "-c", "git push"},
      {"bash", "-c", "cd src && git --no-pager push --force"},
      {"timeout", "5", "nice", "-n", "3", "git", "push"},
      {"git", "-c", "alias.p=push", "p"},
  };
  for (const auto& argv : asked) {
    std::vector<std::string> args = {"exec", "--workspace", ws_, "--audit-log", log(), "--"};
    args.insert(args.end(), argv.begin(), argv.end());
    auto r = InCi(args);
    EXPECT_EQ(r.exit_code, 125) << Json(argv).dump() << ": " << r.err;
    EXPECT_NE(r.err.find("git-push"), std::string::npos) << Json(argv).dump() << ": " << r.err;
  }
  EXPECT_TRUE(Records("process").empty()) << ReadFile(log());
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"git", "status"},
        std::vector<std::string>{"sh", "-c", "git log -1 || true"}}) {
    std::vector<std::string> args = {"exec", "--workspace", ws_, "--audit-log", log(), "--"};
    args.insert(args.end(), argv.begin(), argv.end());
    auto r = InCi(args);
    EXPECT_NE(r.exit_code, 125) << Json(argv).dump() << ": " << r.err;
    EXPECT_EQ(r.err.find("approval"), std::string::npos) << r.err;
  }
  EXPECT_EQ(Records("approval").size(), asked.size());
}

TEST_F(ApprovalsTest, AFileToolAsksBeforeWritingAPathARuleNames) {
  // The shipped rules ask before deploy/** and CI workflows change; other paths are written.
  auto call = [&](const std::string& tool, const std::string& json) {
    return InCi({"call", tool, "--workspace", ws_, "--audit-log", log(), "--json", json});
  };
  auto r = call("create_file", R"({"path":"deploy/app.yaml","content":"replicas: 3\n"})");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("approval_required"), std::string::npos) << r.out;
  EXPECT_FALSE(testing::Exists(ws_ + "/deploy/app.yaml"));
  WriteFile(ws_ + "/.github/workflows/ci.yml", "on: push\n");
  r = call(
      "replace_range",
      R"({"path":".github/workflows/ci.yml","old_string":"push","new_string":"pull_request_target"})");
  EXPECT_NE(r.out.find("approval_required"), std::string::npos) << r.out;
  EXPECT_EQ(ReadFile(ws_ + "/.github/workflows/ci.yml"), "on: push\n");
  r = call("write_patch",
           R"({"patches":[{"op":"create","path":"svc/Dockerfile","content":"FROM scratch\n"}]})");
  EXPECT_NE(r.out.find("approval_required"), std::string::npos) << r.out;
  EXPECT_FALSE(testing::Exists(ws_ + "/svc/Dockerfile"));
  // Other spellings of the same path are the same path.
  for (const std::string& spelled : {std::string("src/../deploy/b.yaml"),
                                     std::string("./deploy//b.yaml"), ws_ + "/deploy/b.yaml"}) {
    r = call("create_file", Json({{"path", spelled}, {"content", "x\n"}}).dump());
    EXPECT_NE(r.out.find("approval_required"), std::string::npos) << spelled << ": " << r.out;
  }
  EXPECT_FALSE(testing::Exists(ws_ + "/deploy/b.yaml"));
  r = call("create_file", R"({"path":"src/a.c","content":"int a;\n"})");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/src/a.c"), "int a;\n");
  const auto approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 6u) << ReadFile(log());
  EXPECT_EQ(approvals[0]["kind"], "write");
  EXPECT_EQ(approvals[0]["paths"], Json({"deploy/app.yaml"}));
  EXPECT_EQ(approvals[0]["operation"], "create");
  EXPECT_EQ(approvals[0]["rule"], "deploy");
  EXPECT_EQ(approvals[1]["rule"], "ci-workflows");
  EXPECT_EQ(approvals[2]["rule"], "dockerfiles");
  for (std::size_t k = 3; k < 6; ++k) EXPECT_EQ(approvals[k]["paths"], Json({"deploy/b.yaml"}));
  for (const Json& w : Records("file_write")) EXPECT_EQ(w["path"], "src/a.c") << w.dump();
}

TEST_F(ApprovalsTest, ToolRulesAskOrDenyACallAndAProjectCannotAllow) {
  WriteFile(dir_ / "tools.toml", R"([[approvals.rules]]
id = "no-search"
decision = "deny"
tool = "search_*"
match = ["search_text"]
not_match = ["read_file_range"]

[[approvals.rules]]
id = "ask-read"
decision = "ask"
tool = "read_file_range"
match = ["read_file_range"]
)");
  // The project file (written by the agent) tries to allow git push: a note, never applied.
  WriteFile(ws_ + "/.cordon/policy.toml", R"([[approvals.rules]]
id = "let-me-push"
decision = "allow"
argv = ["git", "push"]
match = ["git push"]
)");
  auto call = [&](const std::string& tool, const std::string& json) {
    return InCi({"call", tool, "--workspace", ws_, "--audit-log", log(), "--policy",
                 dir_ / "tools.toml", "--json", json});
  };
  auto r = call("search_text", R"({"pattern":"main"})");
  EXPECT_NE(r.out.find("denied_by_policy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-search"), std::string::npos) << r.out;
  r = call("read_file_range", R"({"path":"src/keep.c","start_line":1})");
  EXPECT_NE(r.out.find("approval_required"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("int main"), std::string::npos) << "nothing was read: " << r.out;
  auto shown = testing::Run(Args({"policy", "show", "--workspace", ws_}), env_);
  EXPECT_NE(shown.out.find("a project file cannot allow (approval rule \"let-me-push\""),
            std::string::npos)
      << shown.out;
  r = InCi({"exec", "--workspace", ws_, "--audit-log", log(), "--", "git", "push"});
  EXPECT_EQ(r.exit_code, 125) << "the shipped rule still asks: " << r.err;
}

TEST_F(ApprovalsTest, ARuleWhoseExampleFailsRefusesItsFileAndAUserLayerReplacesByIdOrRemoves) {
  WriteFile(dir_ / "bad.toml", R"(
[[approvals.rules]]
id = "pushy"
decision = "ask"
argv = ["git", "push"]
match = ["git pull"]
)");
  auto r = testing::Run(Args({"policy", "show", "--policy", dir_ / "bad.toml"}), env_);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("bad.toml:2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("git pull"), std::string::npos) << r.err;
  // Replaced by id (now a deny), or removed: git push is then refused at once, or runs.
  WriteFile(dir_ / "deny.toml", R"([[approvals.rules]]
id = "git-push"
decision = "deny"
argv = ["git", "push"]
match = ["git push"]
)");
  ASSERT_EQ(testing::Run({"/usr/bin/git", "init", "-q", ws_}).exit_code, 0);
  r = InCi({"exec", "--workspace", ws_, "--audit-log", log(), "--policy", dir_ / "deny.toml", "--",
            "git", "push"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("denied_by_policy"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("deny.toml:1"), std::string::npos) << r.err;
  WriteFile(dir_ / "remove.toml", "[approvals]\nremove = [\"git-push\"]\n");
  r = InCi({"exec", "--workspace", ws_, "--audit-log", log(), "--policy", dir_ / "remove.toml",
            "--", "git", "push"});
  EXPECT_NE(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("No configured push destination"), std::string::npos)
      << "git itself ran: " << r.err;
}

// --- part (b): what a process changed is held at its commit ---

TEST_F(ApprovalsTest, AProcessChangeToAHeldPathNeverReachesTheHostWithNoOneToAsk) {
  HostTree();
  // One command changes held paths (created, modified, deleted, a new nested workflow, a
  // Dockerfile at depth) and others; `rm -rf vendor` would take a held path below it with it.
  auto r = InCi(
      Staged("echo x > deploy/app.yaml; echo y > src/a.c; echo 'replicas: 9' > deploy/old.yaml; "
             "mkdir -p .github/workflows && echo w > .github/workflows/ci.yml; "
             "mkdir -p svc && echo FROM > svc/Dockerfile.dev; rm -rf build vendor; "
             "mv deploy/keep moved"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // What no rule holds is on the host when the command returns.
  EXPECT_EQ(ReadFile(ws_ + "/src/a.c"), "y\n");
  EXPECT_FALSE(testing::Exists(ws_ + "/build"));
  EXPECT_EQ(ReadFile(ws_ + "/moved/x.yaml"), "keep\n");
  // What a rule holds is not, and no one could be asked: it stayed out.
  EXPECT_FALSE(testing::Exists(ws_ + "/deploy/app.yaml"));
  EXPECT_EQ(ReadFile(ws_ + "/deploy/old.yaml"), "replicas: 1\n");
  EXPECT_EQ(ReadFile(ws_ + "/deploy/keep/x.yaml"), "keep\n");
  EXPECT_FALSE(testing::Exists(ws_ + "/.github/workflows/ci.yml"));
  EXPECT_FALSE(testing::Exists(ws_ + "/svc/Dockerfile.dev"));
  EXPECT_EQ(ReadFile(ws_ + "/vendor/lib/deploy/site.yaml"), "site\n");
  EXPECT_NE(r.err.find("approval_denied"), std::string::npos) << r.err;
  // One question for the commit, answered no_client, naming every held path.
  const auto approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 1u) << ReadFile(log());
  const Json& a = approvals[0];
  EXPECT_EQ(a["kind"], "commit");
  EXPECT_EQ(a["answer"], "no_client");
  for (const char* p : {"deploy/app.yaml", "deploy/old.yaml", "deploy/keep",
                        ".github/workflows/ci.yml", "svc/Dockerfile.dev", "vendor"}) {
    EXPECT_NE(std::find(a["paths"].begin(), a["paths"].end(), Json(p)), a["paths"].end())
        << p << " in " << a.dump();
  }
  // Each one's content went to the quarantine with a record naming the approval.
  const auto removed = Records("protected_path_removed");
  bool app_kept = false;
  for (const Json& rm : removed) {
    EXPECT_EQ(rm["reason"], "approval_denied") << rm.dump();
    if (rm["path"] == ws_ + "/deploy/app.yaml")
      app_kept = ReadFile(rm["quarantine"].get<std::string>()) == "x\n";
  }
  EXPECT_TRUE(app_kept) << ReadFile(log());
  const auto processes = Records("process");
  ASSERT_EQ(processes.size(), 1u);
  for (const Json& refused : processes[0]["changes"]["refused"])
    EXPECT_EQ(refused["approval"], a["id"]) << refused.dump();
  EXPECT_TRUE(Held().empty()) << Held().dump();
  auto verify = testing::Run(Args({"audit", "verify", log()}), env_);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

// What the adversarial review of part (b) found: a link, a directory's mode and git's own
// objects are other ways to the same paths.
TEST_F(ApprovalsTest, ALinkAModeOrAGitCommitCannotCarryAHeldPathPastTheQuestion) {
  HostTree();
  ASSERT_EQ(testing::Run({"/bin/sh", "-c",
                          "cd '" + ws_ +
                              "' && git init -q . && git -c user.email=a@b -c user.name=a "
                              "commit -q --allow-empty -m init && mkdir -p .github && chmod 755 "
                              "deploy"})
                .exit_code,
            0);
  auto r = InCi(
      Staged("mkdir ci && ln -s ../ci .github/workflows && echo 'on: push' > ci/evil.yml; "
             "mkdir elsewhere && ln -s elsewhere infra-deploy && ln -s elsewhere svc-deploy; "
             "rm -rf vendor && ln -s elsewhere vendor; chmod 777 deploy; "
             "echo evil > deploy/app.yaml && git add -A && git -c user.email=a@b -c user.name=a "
             "commit -qm evil"));
  // The workflow directory as a link, a directory that held a held path replaced by a link, and
  // a held directory's new mode stayed out.
  struct stat st {};
  EXPECT_NE(::lstat((ws_ + "/.github/workflows").c_str(), &st), 0) << r.err;
  ASSERT_EQ(::lstat((ws_ + "/vendor").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode)) << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/vendor/lib/deploy/site.yaml"), "site\n");
  ASSERT_EQ(::stat((ws_ + "/deploy").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u) << r.err;
  // Links that lead nowhere a rule names land (names are not rules).
  EXPECT_EQ(::lstat((ws_ + "/infra-deploy").c_str(), &st), 0) << r.err;
  // git's index and the commit would land deploy/app.yaml: they stayed out (exit 123).
  EXPECT_EQ(r.exit_code, 123) << r.err;
  auto git_log = testing::Run({"/usr/bin/git", "-C", ws_, "log", "--format=%s"});
  EXPECT_EQ(git_log.out, "init\n") << git_log.out << git_log.err;
  auto files = testing::Run({"/usr/bin/git", "-C", ws_, "ls-files"});
  EXPECT_EQ(files.out.find("deploy/app.yaml"), std::string::npos) << files.out;
  bool git_named = false;
  for (const Json& rm : Records("protected_path_removed")) {
    git_named = git_named || rm.dump().find("approval_path") != std::string::npos;
  }
  EXPECT_TRUE(git_named) << ReadFile(log());
}

TEST_F(ApprovalsTest, ThePersonAtTheTerminalSeesTheRedactedDiffAndDecidesWhatLands) {
  HostTree();
  const std::string token = "ghp_" + std::string(36, 'Q');
  PtyRun run = UnderPty(Staged("echo 'image: v2' > deploy/app.yaml; echo 'replicas: 3' > "
                               "deploy/old.yaml; echo 'token: " +
                               token +
                               "' >> deploy/old.yaml; echo y > src/a.c; "
                               "echo n > \"deploy/$(printf 'n\\n+forged')\""),
                        "y\r");
  // A name cannot draw a line of the diff: its newline is shown escaped.
  EXPECT_EQ(run.screen.find("| +forged"), std::string::npos) << run.screen;
  EXPECT_NE(run.screen.find("\\u{000A}+forged"), std::string::npos) << run.screen;
  EXPECT_EQ(run.exit_code, 0) << run.screen;
  EXPECT_NE(run.screen.find("deploy/app.yaml (created)"), std::string::npos) << run.screen;
  EXPECT_NE(run.screen.find("+image: v2"), std::string::npos) << run.screen;
  EXPECT_NE(run.screen.find("-replicas: 1"), std::string::npos) << run.screen;
  EXPECT_EQ(run.screen.find(token), std::string::npos) << "a secret is never shown: " << run.screen;
  EXPECT_EQ(ReadFile(ws_ + "/deploy/app.yaml"), "image: v2\n");
  EXPECT_EQ(ReadFile(ws_ + "/deploy/old.yaml"), "replicas: 3\ntoken: " + token + "\n");
  auto approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 1u) << ReadFile(log());
  EXPECT_EQ(approvals[0]["answer"], "once");
  EXPECT_EQ(approvals[0]["asked_via"], "terminal");
  // The commit record's entries installed on that answer name it.
  const auto processes = Records("process");
  ASSERT_EQ(processes.size(), 1u);
  std::size_t named = 0;
  for (const Json& e : processes[0]["changes"]["entries"]) {
    if (e["path"].get<std::string>().starts_with("deploy/")) {
      EXPECT_EQ(e["approval"], approvals[0]["id"]) << e.dump();
      ++named;
    } else {
      EXPECT_FALSE(e.contains("approval")) << e.dump();
    }
  }
  EXPECT_EQ(named, 3u) << processes[0].dump();
  // No: the held change goes to the quarantine; the rest lands.
  run = UnderPty(Staged("echo 'image: v3' > deploy/app.yaml; echo z > src/b.c"), "n\r");
  EXPECT_EQ(ReadFile(ws_ + "/deploy/app.yaml"), "image: v2\n") << run.screen;
  EXPECT_EQ(ReadFile(ws_ + "/src/b.c"), "z\n");
  approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 2u);
  EXPECT_EQ(approvals[1]["answer"], "deny");
}

TEST_F(ApprovalsTest, AKillWhileTheQuestionIsOpenLeavesTheChangeHeldUntilAnsweredElsewhere) {
  HostTree();
  const std::string script =
      "echo x > deploy/app.yaml; echo 'replicas: 5' > deploy/old.yaml; echo y > src/a.c";
  PtyRun run = UnderPty(Staged(script), kKill);
  EXPECT_NE(run.screen.find("Allow it?"), std::string::npos) << run.screen;
  // The rest was installed before the question; the held change is in neither tree.
  EXPECT_EQ(ReadFile(ws_ + "/src/a.c"), "y\n");
  EXPECT_FALSE(testing::Exists(ws_ + "/deploy/app.yaml"));
  EXPECT_EQ(ReadFile(ws_ + "/deploy/old.yaml"), "replicas: 1\n");
  // A later start (another session, no one to ask) keeps it held and says so, in the log of
  // the session that staged it.
  auto later =
      InCi({"exec", "--workspace", ws_, "--audit-log", dir_ / "later.jsonl", "--", "true"});
  EXPECT_EQ(later.exit_code, 0) << later.err;
  EXPECT_NE(later.err.find("wait for an answer"), std::string::npos) << later.err;
  EXPECT_FALSE(testing::Exists(ws_ + "/deploy/app.yaml"));
  Json held = Held();
  ASSERT_EQ(held.size(), 1u) << held.dump();
  const std::string id = held[0]["id"];
  EXPECT_EQ(held[0]["entries"].size(), 2u) << held.dump();
  bool said_held = false;
  for (const Json& rec : Records("recovery")) said_held = said_held || rec.value("held", "") == id;
  EXPECT_TRUE(said_held) << ReadFile(log());
  auto show = testing::Run(Args({"approvals", "show", id}), env_);
  EXPECT_NE(show.out.find("+x"), std::string::npos) << show.out << show.err;
  // The host edits a held path meanwhile: on approval the host's version is kept.
  WriteFile(ws_ + "/deploy/old.yaml", "replicas: 2 (by hand)\n");
  auto approve = testing::Run(Args({"approvals", "approve", id}), env_);
  EXPECT_EQ(approve.exit_code, 0) << approve.out << approve.err;
  EXPECT_EQ(ReadFile(ws_ + "/deploy/app.yaml"), "x\n");
  EXPECT_EQ(ReadFile(ws_ + "/deploy/old.yaml"), "replicas: 2 (by hand)\n");
  EXPECT_NE(approve.out.find("conflict"), std::string::npos) << approve.out;
  EXPECT_TRUE(Held().empty());
  // Recorded in the log of the session that staged it: the approval, then what it installed.
  // (The question the kill interrupted has no record: it was never answered.)
  const auto approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 1u) << ReadFile(log());
  EXPECT_EQ(approvals[0]["asked_via"], "command");
  EXPECT_EQ(approvals[0]["answer"], "once");
  bool installed = false;
  for (const Json& rec : Records("recovery")) {
    for (const Json& e : rec.value("changes", Json::object()).value("entries", Json::array())) {
      if (e["path"] == "deploy/app.yaml") installed = e["approval"] == approvals[0]["id"];
    }
  }
  EXPECT_TRUE(installed) << ReadFile(log());
  auto verify = testing::Run(Args({"audit", "verify", log()}), env_);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  // Denied from elsewhere: quarantined, never installed.
  run = UnderPty(Staged("echo bad > deploy/app.yaml"), kKill);
  held = Held();
  ASSERT_EQ(held.size(), 1u) << held.dump();
  auto deny = testing::Run(Args({"approvals", "deny", held[0]["id"]}), env_);
  EXPECT_EQ(deny.exit_code, 0) << deny.out << deny.err;
  EXPECT_EQ(ReadFile(ws_ + "/deploy/app.yaml"), "x\n");
  EXPECT_TRUE(Held().empty());
  auto unknown = testing::Run(Args({"approvals", "approve", "no-such-id"}), env_);
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("no held change has the id"), std::string::npos) << unknown.err;
}

TEST_F(ApprovalsTest, AHeldChangeNoOneAnswersGoesToTheQuarantineAfterHeldDays) {
  HostTree();
  PtyRun run = UnderPty(Staged("echo x > deploy/app.yaml"), kKill);
  Json held = Held();
  ASSERT_EQ(held.size(), 1u) << held.dump() << run.screen;
  // Time passes: the manifest's expiry is moved into the past (as held_days would).
  const std::string manifest = held[0]["dir"].get<std::string>() + "/held.json";
  Json m = Json::parse(ReadFile(manifest));
  m["expires_at_ns"] = 1;
  WriteFile(manifest, m.dump());
  auto later =
      InCi({"exec", "--workspace", ws_, "--audit-log", dir_ / "later.jsonl", "--", "true"});
  EXPECT_EQ(later.exit_code, 0) << later.err;
  EXPECT_TRUE(Held().empty());
  EXPECT_FALSE(testing::Exists(ws_ + "/deploy/app.yaml"));
  bool expired = false;
  for (const Json& rec : Records("recovery")) {
    if (rec["outcome"] != "expired") continue;
    for (const Json& e : rec["changes"]["refused"]) {
      expired = e["reason"] == "approval_expired" &&
                ReadFile(e["quarantine"].get<std::string>()) == "x\n";
    }
  }
  EXPECT_TRUE(expired) << ReadFile(log());
}

// --- part (c): serve asks its MCP client (elicitation), with the real TypeScript SDK client ---

class ApprovalsElicitationTest : public ApprovalsTest {
 protected:
  void SetUp() override {
    ApprovalsTest::SetUp();
    if (IsSkipped()) return;
    peers_ = testing::FromEnv("MCP_PEERS_DIR", "/tmp/mcp-peers");
    if (OnPath("node").empty() ||
        !testing::Exists(peers_ + "/node_modules/@modelcontextprotocol/sdk/package.json")) {
      if (testing::InCi()) FAIL() << "CI=true, and node or the MCP SDK is missing";
      GTEST_SKIP() << "SKIPPED ELICITATION TEST: node or the MCP SDK is missing; run "
                      "scripts/install-mcp-peers.sh";
    }
  }
  // tests/data/sdk_session.mjs around `cordon serve` (CI cleared, so that someone may be asked):
  // one call per entry of `calls`, each question answered by the next of `answers`. The lines
  // it printed: {"connected"}, one per call, then {"closed", "elicitations"}.
  std::vector<Json> Serve(const std::vector<Json>& calls, const std::string& answers,
                          const std::vector<std::string>& serve_flags = {},
                          bool elicitation = true) {
    std::vector<std::string> argv = {"/usr/bin/env", "-u", "CI", OnPath("node"),
                                     CORDON_SOURCE_DIR "/tests/data/sdk_session.mjs"};
    if (!answers.empty()) argv.insert(argv.end(), {"--answers", answers});
    if (elicitation) argv.push_back("--elicitation");
    argv.insert(argv.end(),
                {"--", testing::CordonBin(), "serve", "--workspace", ws_, "--audit-log", log()});
    argv.insert(argv.end(), serve_flags.begin(), serve_flags.end());
    std::string in;
    for (const Json& c : calls) in += c.dump() + "\n";
    std::vector<std::string> env = env_;
    env.push_back("MCP_PEERS_DIR=" + peers_);
    auto r = testing::Run(argv, env, in);
    std::vector<Json> out;
    for (const std::string& line : SplitLines(r.out)) {
      Json j = Json::parse(line, nullptr, false);
      if (!j.is_discarded()) out.push_back(std::move(j));
    }
    EXPECT_EQ(out.size(), calls.size() + 2) << r.out << r.err;
    return out;
  }
  static Json Shell(const std::string& script) {
    return {{"name", "run_shell"}, {"arguments", {{"program", "sh"}, {"args", {"-c", script}}}}};
  }
  // The text of a call's result (its error message, when it is one).
  static std::string Text(const Json& line) {
    if (!line.contains("result") || !line["result"].is_object()) return line.dump();
    return line["result"]["content"][0].value("text", "");
  }
  std::string peers_;
};

TEST_F(ApprovalsElicitationTest, TheClientIsAskedAndItsAnswerDecides) {
  const std::vector<std::string> flags = {"--policy", dir_ / "ask.toml"};
  // once, then session (the next matching call is not asked again), then decline, then cancel.
  auto out = Serve({Shell("touch once.txt"), Shell("touch s1.txt"), Shell("touch s2.txt")},
                   "once,session", flags);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_TRUE(testing::Exists(ws_ + "/once.txt")) << Text(out[1]);
  EXPECT_TRUE(testing::Exists(ws_ + "/s1.txt")) << Text(out[2]);
  EXPECT_TRUE(testing::Exists(ws_ + "/s2.txt")) << Text(out[3]);
  const Json& asked = out.back()["elicitations"];
  ASSERT_EQ(asked.size(), 2u) << out.back().dump();
  EXPECT_EQ(asked[0]["mode"], "form") << "the SDK speaks 2025-11-25";
  EXPECT_NE(asked[0]["message"].get<std::string>().find("t-touch"), std::string::npos);
  EXPECT_NE(asked[0]["message"].get<std::string>().find("ask.toml:1"), std::string::npos);
  EXPECT_NE(asked[0]["message"].get<std::string>().find("touch once.txt"), std::string::npos);
  EXPECT_EQ(asked[0]["requestedSchema"]["properties"]["decision"]["enum"],
            Json({"once", "session", "deny"}));
  auto approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 3u) << ReadFile(log());
  EXPECT_EQ(approvals[0]["asked_via"], "elicitation");
  EXPECT_EQ(approvals[0]["answer"], "once");
  EXPECT_EQ(approvals[0]["client"], "cordon-sdk-session");
  EXPECT_EQ(approvals[1]["answer"], "session");
  EXPECT_EQ(approvals[2]["asked_via"], "kept");
  EXPECT_EQ(approvals[2]["kept_from"], approvals[1]["id"]);
  out = Serve({Shell("touch declined.txt"), Shell("touch cancelled.txt")}, "decline,cancel", flags);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_FALSE(testing::Exists(ws_ + "/declined.txt"));
  EXPECT_FALSE(testing::Exists(ws_ + "/cancelled.txt"));
  EXPECT_NE(Text(out[1]).find("denied_by_policy"), std::string::npos) << Text(out[1]);
  EXPECT_NE(Text(out[2]).find("cancelled"), std::string::npos) << Text(out[2]);
  approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 5u);
  EXPECT_EQ(approvals[3]["answer"], "declined");
  EXPECT_EQ(approvals[4]["answer"], "cancelled");
}

TEST_F(ApprovalsElicitationTest, NoAnswerTimesOutAndAClientWithoutElicitationIsRefusedAtOnce) {
  WriteFile(dir_ / "short.toml", "[approvals]\ntimeout_secs = 2\n");
  const std::vector<std::string> flags = {"--policy", dir_ / "ask.toml", "--policy",
                                          dir_ / "short.toml"};
  // No answer: the call waits the question's timeout (progress keeps the client waiting), then
  // is refused; nothing ran.
  auto out = Serve({Shell("touch late.txt")}, "never", flags);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_NE(Text(out[1]).find("approval_required"), std::string::npos) << Text(out[1]);
  EXPECT_GE(out[1]["elapsed_ms"].get<int>(), 2000) << out[1].dump();
  EXPECT_FALSE(testing::Exists(ws_ + "/late.txt"));
  // A client that did not declare elicitation: refused at once, saying so.
  out = Serve({Shell("touch never.txt")}, "", flags, /*elicitation=*/false);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_NE(Text(out[1]).find("approval_required"), std::string::npos) << Text(out[1]);
  EXPECT_NE(Text(out[1]).find("did not declare the elicitation capability"), std::string::npos)
      << Text(out[1]);
  EXPECT_TRUE(out.back()["elicitations"].empty());
  EXPECT_FALSE(testing::Exists(ws_ + "/never.txt"));
  const auto approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 2u) << ReadFile(log());
  EXPECT_EQ(approvals[0]["answer"], "timeout");
  EXPECT_EQ(approvals[1]["answer"], "no_client");
}

TEST_F(ApprovalsElicitationTest, AHeldCommitIsAskedThroughTheClientWithItsDiff) {
  WriteFile(ws_ + "/deploy/old.yaml", "replicas: 1\n");
  auto out = Serve({Shell("echo 'replicas: 4' > deploy/old.yaml; echo y > src/a.c"),
                    Shell("echo bad > deploy/new.yaml")},
                   "once,deny");
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(ReadFile(ws_ + "/deploy/old.yaml"), "replicas: 4\n") << Text(out[1]);
  EXPECT_EQ(ReadFile(ws_ + "/src/a.c"), "y\n");
  EXPECT_FALSE(testing::Exists(ws_ + "/deploy/new.yaml")) << Text(out[2]);
  const Json& asked = out.back()["elicitations"];
  ASSERT_EQ(asked.size(), 2u) << out.back().dump();
  EXPECT_NE(asked[0]["message"].get<std::string>().find("+replicas: 4"), std::string::npos)
      << asked[0].dump();
  const auto approvals = Records("approval");
  ASSERT_EQ(approvals.size(), 2u);
  EXPECT_EQ(approvals[0]["kind"], "commit");
  EXPECT_EQ(approvals[0]["asked_via"], "elicitation");
  EXPECT_EQ(approvals[1]["answer"], "deny");
}

}  // namespace
}  // namespace cordon
