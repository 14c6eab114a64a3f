// Foundation benchmarks, each beside a bare baseline doing the least work the same job needs.
// bench/run.sh prints the ratios. Data lives in $CORDON_BENCH_DIR (default /tmp/cordon-bench).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "audit/audit.h"
#include "core/hash.h"
#include "core/redact.h"
#include "session/session.h"
#include "tools/html_text.h"

extern char** environ;

namespace cordon {
namespace {

std::string BenchDir() {
  const char* d = std::getenv("CORDON_BENCH_DIR");
  std::string dir = d != nullptr ? d : "/tmp/cordon-bench";
  std::filesystem::create_directories(dir + "/ws");
  return dir;
}

// 100 MB of 100-byte lines: 1,048,576 lines.
const std::string& BigFile() {
  static const std::string path = [] {
    std::string p = BenchDir() + "/ws/big.txt";
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || st.st_size != 100 * 1048576) {
      std::ofstream out(p, std::ios::binary | std::ios::trunc);
      std::string line(99, 'x');
      for (int i = 0; i < 1048576; ++i) {
        std::string num = std::to_string(i);
        std::memcpy(line.data(), num.data(), num.size());
        out << line << '\n';
      }
    }
    return p;
  }();
  return path;
}

std::unique_ptr<Session> StartSession(const std::string& log) {
  ::setenv("XDG_CONFIG_HOME", (BenchDir() + "/config").c_str(), 1);
  SessionOptions o;
  o.workspace = BenchDir() + "/ws";
  o.audit_log = BenchDir() + "/" + log;
  o.shipped_policy_dir = CORDON_POLICY_DIR;
  auto s = Session::Start(o, environ);
  if (!s) std::abort();
  return std::move(*s);
}

void BM_ReadFileRange_100MB(benchmark::State& state) {
  BigFile();
  auto s = StartSession("bench-read.jsonl");
  const Json input = {{"path", "big.txt"}, {"start_line", 700000}, {"end_line", 700099}};
  for (auto _ : state) {
    Json r = s->Call("read_file_range", input);
    if (r["isError"].get<bool>() || r["structuredContent"]["lines"].size() != 100) std::abort();
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ReadFileRange_100MB)->Unit(benchmark::kMillisecond);

// Baseline: read() + memchr over the whole file, copying the same 100 lines (no JSON, no audit).
void BM_Baseline_ScanLines_100MB(benchmark::State& state) {
  const std::string& path = BigFile();
  std::string buf(1 << 20, '\0');
  for (auto _ : state) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    long line = 1;
    std::string out, cur;
    ssize_t n;
    while ((n = ::read(fd, buf.data(), buf.size())) > 0) {
      const char* p = buf.data();
      const char* end = p + n;
      while (p < end) {
        const char* nl =
            static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
        const char* stop = nl ? nl : end;
        if (line >= 700000 && line <= 700099) out.append(p, stop);
        if (nl) ++line;
        p = nl ? nl + 1 : end;
      }
    }
    ::close(fd);
    benchmark::DoNotOptimize(out);
    benchmark::DoNotOptimize(line);
  }
}
BENCHMARK(BM_Baseline_ScanLines_100MB)->Unit(benchmark::kMillisecond);

void BM_ReplaceRange_Fsync(benchmark::State& state) {
  const std::string path = BenchDir() + "/ws/edit.txt";
  std::ofstream(path, std::ios::trunc) << std::string(4000, 'a') << "\nTOKEN_A\n";
  auto s = StartSession("bench-replace.jsonl");
  bool flip = false;
  for (auto _ : state) {
    Json r = s->Call("replace_range", {{"path", "edit.txt"},
                                       {"old_string", flip ? "TOKEN_B" : "TOKEN_A"},
                                       {"new_string", flip ? "TOKEN_A" : "TOKEN_B"}});
    if (r["isError"].get<bool>()) std::abort();
    flip = !flip;
  }
}
BENCHMARK(BM_ReplaceRange_Fsync)->Unit(benchmark::kMicrosecond);

// Baseline: the bare durable replace: write temp, fsync, rename, fsync dir (no read, no audit).
void BM_Baseline_WriteFsyncRename(benchmark::State& state) {
  const std::string dir = BenchDir() + "/ws";
  const std::string content = std::string(4000, 'a') + "\nTOKEN_A\n";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (auto _ : state) {
    int fd = ::openat(dfd, "base.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (::write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size()))
      std::abort();
    ::fsync(fd);
    ::close(fd);
    ::renameat(dfd, "base.tmp", dfd, "base.txt");
    ::fsync(dfd);
  }
  ::close(dfd);
}
BENCHMARK(BM_Baseline_WriteFsyncRename)->Unit(benchmark::kMicrosecond);

const AuditRecord kRecord = ToolFinishedRecord{.call = 12,
                                               .tool = "read_file_range",
                                               .status = "ok",
                                               .output_bytes = 4096,
                                               .truncated = false,
                                               .elapsed_ms = 0.42};

void BM_AuditAppend(benchmark::State& state, FsyncMode mode) {
  const std::string log = BenchDir() + "/bench-append.jsonl";
  std::filesystem::remove(log);
  auto w = AuditWriter::Open(log, NewSessionId(), mode, std::nullopt, nullptr);
  if (!w) std::abort();
  for (auto _ : state) {
    if (!w->Append(kRecord, true)) std::abort();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_AuditAppend, no_fsync, FsyncMode::kNever);
BENCHMARK_CAPTURE(BM_AuditAppend, fsync_each, FsyncMode::kAlways);

// Baseline: write() of a same-size line to an O_APPEND file (no hash, no JSON, no lock).
void BM_Baseline_AppendLine(benchmark::State& state) {
  const std::string log = BenchDir() + "/bench-append-base.jsonl";
  int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const std::string line(300, 'r');
  for (auto _ : state) {
    if (::write(fd, line.data(), line.size()) < 0) std::abort();
  }
  ::close(fd);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_AppendLine);

const std::string& VerifyLog() {
  static const std::string path = [] {
    std::string p = BenchDir() + "/bench-verify.jsonl";
    std::filesystem::remove(p);
    auto w = AuditWriter::Open(p, NewSessionId(), FsyncMode::kNever, std::nullopt, nullptr);
    if (!w) std::abort();
    for (int i = 0; i < 200000; ++i) {
      if (!w->Append(kRecord)) std::abort();
    }
    return p;
  }();
  return path;
}

void BM_AuditVerify(benchmark::State& state) {
  const std::string& log = VerifyLog();
  for (auto _ : state) {
    auto r = VerifyAuditLog(log, std::nullopt);
    if (!r || r->verdict != VerifyReport::Verdict::kIntact) std::abort();
    state.SetBytesProcessed(state.bytes_processed() + static_cast<std::int64_t>(r->bytes));
  }
}
BENCHMARK(BM_AuditVerify)->Unit(benchmark::kMillisecond);

// Baseline: SHA-256 of every line of the same file (what any chain check must at least do).
void BM_Baseline_Sha256Lines(benchmark::State& state) {
  std::ifstream in(VerifyLog(), std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (auto _ : state) {
    std::size_t pos = 0;
    while (pos < data.size()) {
      std::size_t nl = data.find('\n', pos);
      benchmark::DoNotOptimize(Sha256Hex(std::string_view(data).substr(pos, nl - pos)));
      pos = nl + 1;
    }
    state.SetBytesProcessed(state.bytes_processed() + static_cast<std::int64_t>(data.size()));
  }
}
BENCHMARK(BM_Baseline_Sha256Lines)->Unit(benchmark::kMillisecond);

// Redaction of 10 MB of process output: build-log lines with paths, URLs, hashes and numbers,
// and a few secrets, against the least any scan of it must do (memchr for newlines).
const std::string& TenMbOutput() {
  static const std::string text = [] {
    const std::string lines[] = {
        "[  42%] Building CXX object src/CMakeFiles/app.dir/main.cc.o\n",
        "GET https://example.com/api/v1/items?page=3 200 12ms\n",
        "commit 3f2a9c1e5b7d4f60a8c2e1b9d7f5a3c1e9b7d5f3 (HEAD -> main)\n",
        "warning: unused variable 'x' [-Wunused-variable] at src/a/b/c.cc:120:7\n",
        "token refresh scheduled in 3600 seconds for user alice@example.com\n",
        "sk-learn pipeline: StandardScaler -> LogisticRegression(C=1.0)\n",
        "Bearer auth enabled; see docs at http://localhost:8080/docs\n",
    };
    std::string t;
    t.reserve(10u << 20);
    for (std::size_t i = 0; t.size() < (10u << 20); ++i) {
      t += lines[i % std::size(lines)];
      if (i % 5000 == 0) {
        t += "DATABASE_URL=postgres://app:Sup3rSecretPw@db:5432/app ";
        t += "OPENAI_API_KEY=sk-proj-AbCdEf0123456789GhIjKlMn ";
        t += "jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl\n";
      }
    }
    return t;
  }();
  return text;
}

Redactor BenchRedactor() {
  Redactor r;
  r.AddValue("env", "ghp-like-but-an-env-value-0123456789");
  r.AddValue("env", "hunter2-very-secret");
  r.AddValue("policy", "project-codename-zebra");
  return r;
}

void BM_Redact_10MB(benchmark::State& state) {
  const Redactor r = BenchRedactor();
  const std::string& text = TenMbOutput();
  for (auto _ : state) {
    std::string copy = text;
    benchmark::DoNotOptimize(r.Redact(copy));
    state.SetBytesProcessed(state.bytes_processed() + static_cast<std::int64_t>(text.size()));
  }
}
BENCHMARK(BM_Redact_10MB)->Unit(benchmark::kMillisecond);

// Hostile output: every byte a possible start of a shape that does not complete.
void BM_Redact_Hostile_10MB(benchmark::State& state) {
  const Redactor r = BenchRedactor();
  static const std::string text = [] {
    const std::string unit = "-----BEGIN eyJabcdefghij.x sk-0 ://u:p Bearer x AKIA ghp_ xoxb- ";
    std::string t;
    while (t.size() < (10u << 20)) t += unit;
    return t;
  }();
  for (auto _ : state) {
    std::string copy = text;
    benchmark::DoNotOptimize(r.Redact(copy));
    state.SetBytesProcessed(state.bytes_processed() + static_cast<std::int64_t>(text.size()));
  }
}
BENCHMARK(BM_Redact_Hostile_10MB)->Unit(benchmark::kMillisecond);

// Baseline: a copy and a memchr scan for newlines over the same 10 MB.
void BM_Baseline_MemchrScan_10MB(benchmark::State& state) {
  const std::string& text = TenMbOutput();
  for (auto _ : state) {
    std::string copy = text;
    std::size_t lines = 0;
    for (const char *p = copy.data(), *end = p + copy.size();
         (p = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)))) !=
         nullptr;
         ++p) {
      ++lines;
    }
    benchmark::DoNotOptimize(lines);
    state.SetBytesProcessed(state.bytes_processed() + static_cast<std::int64_t>(text.size()));
  }
}
BENCHMARK(BM_Baseline_MemchrScan_10MB)->Unit(benchmark::kMillisecond);

// read_url's HTML to text (tools/html_text.h) over 10 MB: an ordinary page repeated, and the
// shapes that make a regex- or backtracking-based stripper quadratic (unclosed quotes and
// tags, `<` floods, script openers that never end, `&#` floods, deep nesting).
void BM_HtmlToText_10MB(benchmark::State& state) {
  static const std::string html = [] {
    const std::string unit =
        "<div class=\"post\"><h2>Heading &amp; more</h2><p>Some <a href=\"https://x.test/a\">"
        "linked</a> text, <b>bold</b> and <code>code</code>.</p><ul><li>one</li><li>two</li>"
        "</ul><script>var x = '<p>';</script><!-- note --></div>\n";
    std::string t;
    while (t.size() < (10u << 20)) t += unit;
    return t;
  }();
  HtmlTextOptions o;
  o.max_output_bytes = 16u << 20;  // the whole text: the pass is measured, not the cap
  for (auto _ : state) {
    benchmark::DoNotOptimize(HtmlToText(html, o));
    state.SetBytesProcessed(state.bytes_processed() + static_cast<std::int64_t>(html.size()));
  }
}
BENCHMARK(BM_HtmlToText_10MB)->Unit(benchmark::kMillisecond);

void BM_HtmlToText_Hostile_10MB(benchmark::State& state) {
  static const std::string html = [] {
    std::string t;
    while (t.size() < (2u << 20)) t += "<<<<<<<<&#&#&#<!-<!<?<scrip</scrip<div><ul><li>";
    while (t.size() < (4u << 20)) t += "<script>x</scrip";
    while (t.size() < (6u << 20)) t += "<p title='x <a href=\"y ";
    while (t.size() < (10u << 20)) t += "<b";
    return t;
  }();
  HtmlTextOptions o;
  o.max_output_bytes = 16u << 20;
  for (auto _ : state) {
    benchmark::DoNotOptimize(HtmlToText(html, o));
    state.SetBytesProcessed(state.bytes_processed() + static_cast<std::int64_t>(html.size()));
  }
}
BENCHMARK(BM_HtmlToText_Hostile_10MB)->Unit(benchmark::kMillisecond);

// --- approvals (issue 34): the shipped rules' path matchers over a 10,000-entry listing, beside
// the protected-path check every commit and file tool already runs per entry; and the argv
// matchers over everyday commands, beside splitting the same command text into words.
namespace {
const Policy& ShippedPolicy() {
  static const Policy policy = [] {
    PolicySources sources;
    sources.dirs.push_back(CORDON_POLICY_DIR);
    auto p = LoadPolicy(sources);
    if (!p) std::abort();
    return std::move(*p);
  }();
  return policy;
}
std::vector<std::string> Listing() {
  std::vector<std::string> out;
  const char* dirs[] = {"src", "src/net", "lib/util", "docs", "tests/unit", "deploy", "web/app"};
  for (int i = 0; i < 10000; ++i) {
    out.push_back(std::string(dirs[i % 7]) + "/file_" + std::to_string(i) +
                  (i % 3 == 0   ? ".c"
                   : i % 3 == 1 ? ".yaml"
                                : ".md"));
  }
  return out;
}
}  // namespace

static void BM_ApprovalPathRules_10k(benchmark::State& state) {
  const Policy& policy = ShippedPolicy();
  const auto paths = Listing();
  for (auto _ : state) {
    std::size_t asked = 0;
    for (const auto& p : paths) {
      asked += EvaluatePath(policy.approval_rules, p).rule != nullptr ? 1 : 0;
    }
    benchmark::DoNotOptimize(asked);
  }
}
BENCHMARK(BM_ApprovalPathRules_10k)->Unit(benchmark::kMicrosecond);

static void BM_Baseline_ProtectedPath_10k(benchmark::State& state) {
  const auto paths = Listing();
  for (auto _ : state) {
    std::size_t hit = 0;
    for (const auto& p : paths) hit += IsProtectedPath(p) ? 1 : 0;
    benchmark::DoNotOptimize(hit);
  }
}
BENCHMARK(BM_Baseline_ProtectedPath_10k)->Unit(benchmark::kMicrosecond);

namespace {
const std::vector<std::vector<std::string>>& Commands() {
  static const std::vector<std::vector<std::string>> commands = {
      {"git", "status"},
      {"npm", "test"},
      {"python3", "-m", "pytest", "-q", "tests/"},
      {"sh", "-c", "cd web && npm ci && npm run build && git add -A && git commit -m wip"},
      {"bash", "-lc", "make -j4 && ./run_tests --filter=unit 2>&1 | tail -50"},
      {"git", "-C", "sub", "push", "origin", "main"},
  };
  return commands;
}
}  // namespace

static void BM_ApprovalArgvRules_Commands(benchmark::State& state) {
  const Policy& policy = ShippedPolicy();
  for (auto _ : state) {
    std::size_t asked = 0;
    for (const auto& argv : Commands()) {
      asked += EvaluateArgv(policy.approval_rules, ArgvSubject{.argv = argv}).rule != nullptr;
    }
    benchmark::DoNotOptimize(asked);
  }
}
BENCHMARK(BM_ApprovalArgvRules_Commands)->Unit(benchmark::kMicrosecond);

static void BM_Baseline_SplitWords_Commands(benchmark::State& state) {
  for (auto _ : state) {
    std::size_t words = 0;
    for (const auto& argv : Commands()) {
      for (const auto& a : argv) words += SplitShellWords(a).words.size();
    }
    benchmark::DoNotOptimize(words);
  }
}
BENCHMARK(BM_Baseline_SplitWords_Commands)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace cordon

BENCHMARK_MAIN();
