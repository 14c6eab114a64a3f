// Test helpers: temporary directories, file I/O and running the real cordon binary.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.h"

extern char** environ;

namespace cordon::testing {

// The shipped policy's redaction rules (policies.d/10-secrets.toml), compiled once.
inline std::shared_ptr<const RedactRules> ShippedRedactRules() {
  static const std::shared_ptr<const RedactRules> rules = [] {
    PolicySources sources;
    const char* dir = std::getenv("CORDON_TEST_POLICY_DIR");
    sources.dirs = {dir != nullptr && dir[0] != '\0' ? dir : CORDON_POLICY_DIR};
    auto p = LoadPolicy(sources);
    if (!p) {
      std::fprintf(stderr, "the shipped policy does not load: %s\n", p.error().message.c_str());
      std::abort();
    }
    return p->compiled_redact_rules;
  }();
  return rules;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cordon-test-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (p == nullptr) std::abort();
    path_ = std::filesystem::canonical(p).string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// The directory of a cordon's stages in <state>/cordon/stage as a cordon that is gone left it
// (workspace/staging.h): PID-test, PID that of a process that has exited.
inline std::string GoneCordonStages(const std::string& state) {
  const pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);
  return state + "/cordon/stage/" + std::to_string(dead) + "-test";
}

// A stage N there of `root`: its upper layer u0 and its phase file (`phase`: "running" or
// "committing"), and no rules file, as an older cordon left none. Returns the stage's directory;
// the caller writes what the process wrote into <stage>/u0.
inline std::string LeaveStage(const std::string& stages, const std::string& n,
                              const std::string& root, const std::string& phase) {
  const std::string stage = stages + "/" + n;
  std::filesystem::create_directories(stage + "/u0");
  std::filesystem::create_directories(stage + "/w0");
  WriteFile(stage + "/roots", root + std::string(1, '\0'));
  WriteFile(stage + "/phase", phase + "\n0\n");
  return stage;
}

struct RunResult {
  long max_rss_kb = 0;
  int exit_code = -1;
  int signal = 0;
  std::string out;
  std::string err;
};

// Runs argv with the given extra environment (NAME=VALUE) on top of the current one.
inline RunResult Run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                     const std::string& stdin_data = {}) {
  std::string dir = (std::filesystem::temp_directory_path() / "cordon-run-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) std::abort();
  std::string out_path = dir + "/out", err_path = dir + "/err", in_path = dir + "/in";
  WriteFile(in_path, stdin_data);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> envs;
  auto overridden = [&](std::string_view entry) {
    for (const auto& e : env) {
      if (entry.substr(0, entry.find('=') + 1) == e.substr(0, e.find('=') + 1)) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!overridden(*e)) envs.emplace_back(*e);
  }
  for (const auto& e : env) envs.push_back(e);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = -1;
  RunResult r;
  if (posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data()) == 0) {
    int status = 0;
    struct rusage ru {};
    while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    r.max_rss_kb = ru.ru_maxrss;
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&fa);
  r.out = ReadFile(out_path);
  r.err = ReadFile(err_path);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

// The environment may point the tests at a copy of the build (the unprivileged CI pass does).
inline std::string FromEnv(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : fallback;
}
// Whether user namespaces are enabled (bwrap needs them): user.max_user_namespaces > 0.
inline bool UserNamespacesEnabled() {
  std::ifstream userns("/proc/sys/user/max_user_namespaces");
  long max = 0;
  return (userns >> max) && max > 0;
}

// Whether the tests run in CI (.ci/run exports CI=true; so do GitHub Actions and GitLab CI).
inline bool InCi() {
  const char* v = std::getenv("CI");
  return v != nullptr && (std::string_view(v) == "true" || std::string_view(v) == "1");
}

inline std::string CordonBin() { return FromEnv("CORDON_TEST_BIN", CORDON_BIN); }
// Whether the cordon under test is built with AddressSanitizer: this executable is, or the binary
// CordonBin() names carries ASan's runtime (CI runs the Release build's escape tests against the
// sanitized binary, .ci/run). Its RSS and its start under RLIMIT_DATA are ASan's, not cordon's.
inline bool CordonSanitized() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#else
  static const bool sanitized = [] {
    std::ifstream f(CordonBin(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return bytes.find("__asan_init") != std::string::npos;
  }();
  return sanitized;
#endif
}
inline std::string ShippedPolicyDir() {
  return FromEnv("CORDON_TEST_POLICY_DIR", CORDON_POLICY_DIR);
}

// A child process driven line by line over pipes, for protocols where the order of both sides
// matters (the client must not hang up before the server has spoken).
class LinePeer {
 public:
  explicit LinePeer(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> a;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~LinePeer() {
    CloseInput();
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) Wait();
  }
  void Send(const std::string& line) {
    const std::string l = line + "\n";
    // A peer that stopped reading is a failed test, said at once.
    if (::write(to_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) std::abort();
  }
  void CloseInput() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  // The next line from the child, or "" after `secs` seconds or at EOF.
  std::string Line(int secs = 20) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(secs);
    while (true) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return "";
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[65536];
      ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n <= 0) return "";
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  // Waits for the child; its exit code, or 128 + the signal that ended it.
  int Wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buf_;
};

}  // namespace cordon::testing

// A security test that cannot run here because the sandbox is missing (no bwrap, no user
// namespaces, no Landlock): a loud skip on a developer's machine, and under CI=true a failure with
// the same reason, so that a runner without the sandbox cannot pass green with every escape test
// skipped. Used like GTEST_SKIP: SECURITY_SKIP("bwrap is not installed, ..." << detail). In a
// fixture's SetUp, a subclass checks IsSkipped() || HasFatalFailure() before going on.
#define SECURITY_SKIP(reason)                                                                  \
  do {                                                                                         \
    if (::cordon::testing::InCi()) {                                                           \
      GTEST_FAIL() << "SECURITY TEST CANNOT RUN, AND CI=true FORBIDS SKIPPING IT: " << reason; \
    } else {                                                                                   \
      GTEST_SKIP() << "SKIPPED SECURITY TEST: " << reason;                                     \
    }                                                                                          \
  } while (0)
