// Approvals (issue 34, part a) through the real binary: an `ask` rule asks the person at the
// terminal (a pseudo-terminal here: yes, no, end of input), is refused at once with no one to
// ask (CI=true, --non-interactive, no terminal), and every question leaves an approval record.
// The promise checked is what reaches the host: a command or a write that was not approved
// never happened there.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
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
  // question is on the screen, types `answer` (a line, or "\x04" for end of input).
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
        (void)!::write(master, answer.data(), answer.size());
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

}  // namespace
}  // namespace cordon
