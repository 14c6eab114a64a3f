// Redaction: throughput of the rule set (policies.d/10-secrets.toml) beside the redactor it
// replaced (bench/redact_legacy.cc) and a copy+memchr floor, on ~100 MB of mixed build and test
// output, in 64 KiB pieces as a stream is redacted; then the false positives of the rule set on
// real code (every file under the given directories: none of them holds a secret).
//
//   redact_bench [--mb N] [--policy-dir DIR] [--policy FILE ...] [--each] [--fp DIR ...]
//                [--samples N]
//
// --policy adds a policy file after the policy directory's (as `cordon --policy FILE` does):
// more rules, e.g. bench/synthetic_rules.py's keyworded rules, to see how the rule count scales.
//
// CPU time of this thread (CLOCK_THREAD_CPUTIME_ID), the best of 3 runs of each.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/redact_legacy.h"
#include "core/redact.h"
#include "policy/policy.h"

namespace {

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string ReadSome(const std::string& path, std::size_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return {};
  std::string s(max, '\0');
  ssize_t n = ::read(fd, s.data(), max);
  ::close(fd);
  s.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return s;
}

void ListFiles(const std::string& dir, std::vector<std::string>& out, std::size_t limit) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    if (out.size() >= limit) return;
    const std::string p = dir + "/" + n;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      ListFiles(p, out, limit);
    } else if (S_ISREG(st.st_mode) && st.st_size > 0) {
      out.push_back(p);
    }
  }
}

// Mixed build and test output: compiler and test-runner lines, stack traces, JSON logs, code
// excerpts (real headers from /usr/include), and a secret every ~5,000 lines.
std::string MixedOutput(std::size_t bytes) {
  const char* lines[] = {
      "[ 42%] Building CXX object src/CMakeFiles/app.dir/main.cc.o\n",
      "GET https://example.com/api/v1/items?page=3 200 12ms\n",
      "commit 3f2a9c1e5b7d4f60a8c2e1b9d7f5a3c1e9b7d5f3 (HEAD -> main)\n",
      "warning: unused variable 'token_count' [-Wunused-variable] at src/a/b/c.cc:120:7\n",
      "[ RUN      ] AuthTest.RefreshesTheTokenBeforeItExpires\n",
      "[       OK ] AuthTest.RefreshesTheTokenBeforeItExpires (12 ms)\n",
      "    at Object.<anonymous> (/app/node_modules/jest-circus/build/utils.js:298:28)\n",
      "{\"level\":\"info\",\"ts\":1733011200.123,\"msg\":\"password reset mail "
      "queued\",\"user\":42}\n",
      "FAIL src/auth/session.test.ts > keeps the api_key header when retrying\n",
      "npm WARN deprecated inflight@1.0.6: This module is not supported, and leaks memory.\n",
      "Downloading https://files.pythonhosted.org/packages/sk-learn-1.3.2.tar.gz (7.5 MB)\n",
      "Bearer auth enabled; see docs at http://localhost:8080/docs\n",
      "added 312 packages, and audited 313 packages in 4s; integrity sha512-"
      "Vz6YSG4kZKM5dbMEmzw0s3t4l3CV1jQEgAAXM9jvbCIE0C0iZ0pd0YU3N6HjzXChxGPNwMmoAkAhwW4M1Gtbg==\n",
  };
  std::vector<std::string> headers;
  ListFiles("/usr/include", headers, 4000);
  std::string t;
  t.reserve(bytes + 65536);
  std::size_t h = 0;
  for (std::size_t i = 0; t.size() < bytes; ++i) {
    t += lines[i % std::size(lines)];
    if (i % 50 == 0 && !headers.empty()) t += ReadSome(headers[h++ % headers.size()], 4096);
    if (i % 5000 == 0) {
      t += "DATABASE_URL=postgres://app:Sup3rSecretPw@db:5432/app ";
      t += "OPENAI_API_KEY=sk-proj-AbCdEf0123456789GhIjKlMn ";
      t += "jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl\n";
    }
  }
  return t;
}

template <typename F>
double Best(F&& f) {
  double best = 1e9;
  for (int run = 0; run < 3; ++run) {
    const double t0 = CpuSeconds();
    f();
    best = std::min(best, CpuSeconds() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mb = 100;
  std::size_t samples = 3;
  std::vector<std::string> fp_dirs;
  bool each = false;
  std::string policy_dir = CORDON_POLICY_DIR;
  std::vector<std::string> extra_policies;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc) {
      mb = std::stoul(argv[++i]);
    } else if (a == "--fp" && i + 1 < argc) {
      fp_dirs.push_back(argv[++i]);
    } else if (a == "--policy-dir" && i + 1 < argc) {
      policy_dir = argv[++i];
    } else if (a == "--policy" && i + 1 < argc) {
      extra_policies.push_back(argv[++i]);
    } else if (a == "--each") {
      each = true;
    } else if (a == "--samples" && i + 1 < argc) {
      samples = std::stoul(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: redact_bench [--mb N] [--policy-dir DIR] [--policy FILE ...] [--each] "
                   "[--fp DIR ...] [--samples N]\n");
      return 2;
    }
  }
  cordon::PolicySources sources;
  sources.dirs = {policy_dir};
  sources.extra_files = extra_policies;
  auto policy = cordon::LoadPolicy(sources);
  if (!policy) {
    std::fprintf(stderr, "policy: %s\n", policy.error().message.c_str());
    return 1;
  }
  cordon::Redactor now(policy->compiled_redact_rules);
  cordon::legacy::Redactor before;
  for (const char* v :
       {"ghp-like-but-an-env-value-0123456789", "hunter2-very-secret", "project-codename-zebra"}) {
    now.AddValue("env", v);
    before.AddValue("env", v);
  }
  const std::string text = MixedOutput(mb << 20);
  constexpr std::size_t kPiece = 64 << 10;
  std::size_t found_now = 0, found_before = 0;
  const double floor_s = Best([&] {
    std::size_t lines = 0;
    for (std::size_t at = 0; at < text.size(); at += kPiece) {
      std::string piece = text.substr(at, kPiece);
      for (const char *p = piece.data(), *end = p + piece.size();
           (p = static_cast<const char*>(
                std::memchr(p, '\n', static_cast<std::size_t>(end - p)))) != nullptr;
           ++p) {
        ++lines;
      }
    }
    if (lines == 0) std::fprintf(stderr, "no lines?\n");
  });
  const double before_s = Best([&] {
    found_before = 0;
    for (std::size_t at = 0; at < text.size(); at += kPiece) {
      std::string piece = text.substr(at, kPiece);
      found_before += before.Redact(piece);
    }
  });
  std::map<std::string, std::size_t> by_rule;
  const double now_s = Best([&] {
    found_now = 0;
    by_rule.clear();
    for (std::size_t at = 0; at < text.size(); at += kPiece) {
      std::string piece = text.substr(at, kPiece);
      found_now += now.Redact(piece, &by_rule);
    }
  });
  const double mbs = static_cast<double>(text.size()) / (1 << 20);
  std::printf(
      "redaction of %.0f MB of mixed build and test output, 64 KiB pieces, CPU time, best "
      "of 3\n",
      mbs);
  std::printf("  copy + memchr floor            %7.1f ms  %7.0f MB/s\n", floor_s * 1e3,
              mbs / floor_s);
  std::printf("  before issue 19 (9 shapes)     %7.1f ms  %7.0f MB/s  %zu secrets\n",
              before_s * 1e3, mbs / before_s, found_before);
  std::printf(
      "  rule set (%zu rules)            %7.1f ms  %7.0f MB/s  %zu secrets  (%.2fx the "
      "time of before)\n",
      policy->compiled_redact_rules->size(), now_s * 1e3, mbs / now_s, found_now, now_s / before_s);
  for (const auto& [rule, n] : by_rule) std::printf("    %-24s %zu\n", rule.c_str(), n);
  if (each) {
    // Each rule alone (with the keyword pass it needs), and none (exact values, base64 runs).
    std::vector<std::vector<cordon::RedactRule>> sets = {{}};
    for (const auto& r : policy->redact_rules) sets.push_back({r});
    for (auto& set : sets) {
      const std::string name = set.empty() ? "(no rules)" : set[0].id;
      auto compiled = cordon::RedactRules::Compile(set);
      if (!compiled) continue;
      cordon::Redactor one(*compiled);
      const double t0 = CpuSeconds();
      for (std::size_t at = 0; at < text.size(); at += kPiece) {
        std::string piece = text.substr(at, kPiece);
        one.Redact(piece);
      }
      std::printf("    alone: %-24s %7.1f ms\n", name.c_str(), (CpuSeconds() - t0) * 1e3);
    }
  }

  for (const auto& dir : fp_dirs) {
    std::vector<std::string> files;
    ListFiles(dir, files, 2000000);
    std::size_t bytes = 0, spans = 0, files_with = 0, binary = 0;
    std::map<std::string, std::size_t> fp_by_rule;
    std::map<std::string, std::vector<std::string>> sample;
    for (const auto& f : files) {
      std::string content = ReadSome(f, 4 << 20);
      if (content.find('\0') != std::string::npos) {
        ++binary;
        continue;
      }
      bytes += content.size();
      auto found = now.FindShapes(content);
      if (found.empty()) continue;
      ++files_with;
      for (const auto& sp : found) {
        ++spans;
        const std::string rule(sp.rule);
        ++fp_by_rule[rule];
        if (sample[rule].size() < samples) {
          const std::size_t b = sp.begin > 40 ? sp.begin - 40 : 0;
          std::string ctx = content.substr(b, std::min<std::size_t>(sp.end - b + 20, 160));
          for (char& c : ctx) {
            if (c == '\n' || c == '\r' || c == '\t') c = ' ';
          }
          sample[rule].push_back(f.substr(dir.size()) + ": " + ctx);
        }
      }
    }
    std::printf(
        "\nfindings in %s: %zu files (%zu binary skipped), %.1f MB: %zu spans in %zu "
        "files\n",
        dir.c_str(), files.size(), binary, static_cast<double>(bytes) / (1 << 20), spans,
        files_with);
    for (const auto& [rule, n] : fp_by_rule) {
      std::printf("  %-24s %zu\n", rule.c_str(), n);
      for (const auto& s : sample[rule]) std::printf("      %s\n", s.c_str());
    }
  }
  return 0;
}
