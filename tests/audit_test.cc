// The audit chain: intact logs verify; edits, reorders, cuts, a missing head and a wrong key are
// caught at the right line; a torn tail is reported as such and recovered by the next writer.
#include "audit/audit.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/hash.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    out.push_back(text.substr(pos, nl - pos));
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

void WriteSession(const std::string& path, int calls, std::optional<std::string> key = {}) {
  auto w = AuditWriter::Open(path, NewSessionId(), FsyncMode::kNever, key, nullptr);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Append("session_started", {{"chain", key ? "hmac-sha256" : "sha256"}}));
  for (int i = 0; i < calls; ++i) {
    ASSERT_TRUE(w->Append("tool_started", {{"tool", "read_file_range"}, {"call", i}}));
    ASSERT_TRUE(w->Append("tool_finished", {{"tool", "read_file_range"}, {"status", "ok"}}));
  }
  ASSERT_TRUE(w->Append("session_finished", Json::object()));
}

TEST(Hash, KnownAnswers) {
  // FIPS 180-2 and RFC 4231 test vectors: the chain is only as good as these.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256Stream s;
  for (int i = 0; i < 1000; ++i) s.Update(std::string(1000, 'a'));
  EXPECT_EQ(s.FinishHex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Audit, IntactLogVerifiesAcrossSessions) {
  TempDir d;
  std::string log = d / "a.jsonl";
  WriteSession(log, 3);
  WriteSession(log, 2);
  auto r = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, VerifyReport::Verdict::kIntact) << r->problem;
  EXPECT_EQ(r->records, 8u + 6u);
  EXPECT_EQ(r->sessions, 2u);
}

TEST(Audit, TamperingIsCaughtAtTheFirstBadLine) {
  TempDir d;
  std::string log = d / "a.jsonl";
  WriteSession(log, 3);
  const auto lines = Lines(ReadFile(log));
  ASSERT_EQ(lines.size(), 8u);
  struct Case {
    std::string name;
    std::vector<std::string> lines;
    std::uint64_t bad_line;
  };
  auto edited = lines;
  edited[3].replace(edited[3].find("read_file_range"), 4, "rm -");
  auto swapped = lines;
  std::swap(swapped[2], swapped[3]);
  auto cut = lines;
  cut.erase(cut.begin() + 4);
  auto headless = std::vector<std::string>(lines.begin() + 1, lines.end());
  const Case cases[] = {
      {"edit", edited, 5},
      {"reorder", swapped, 3},
      {"cut in the middle", cut, 5},
      {"head cut off", headless, 1},
  };
  for (const auto& c : cases) {
    WriteFile(log, Join(c.lines));
    auto r = VerifyAuditLog(log, std::nullopt);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->verdict, VerifyReport::Verdict::kBroken) << c.name;
    EXPECT_EQ(r->first_bad_line, c.bad_line) << c.name << ": " << r->problem;
  }
}

TEST(Audit, TornTailIsReportedAndRecovered) {
  TempDir d;
  std::string log = d / "a.jsonl";
  WriteSession(log, 1);
  std::string text = ReadFile(log);
  WriteFile(log, text + "{\"v\":1,\"seq\":9,\"ts\":\"2026");  // a crash mid-write
  auto r = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, VerifyReport::Verdict::kTornTail);
  EXPECT_EQ(r->first_bad_line, 5u);
  EXPECT_EQ(r->records, 4u);
  // The next writer keeps the torn bytes as evidence and chains past them.
  WriteSession(log, 1);
  auto r2 = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->verdict, VerifyReport::Verdict::kIntact) << r2->problem;
  ASSERT_EQ(r2->warnings.size(), 1u);
  EXPECT_NE(r2->warnings[0].find("torn by a crash"), std::string::npos);
  EXPECT_NE(ReadFile(log).find("log_recovered"), std::string::npos);
}

TEST(Audit, HmacChainNeedsTheRightKey) {
  TempDir d;
  std::string log = d / "a.jsonl";
  WriteSession(log, 2, std::string("0123456789abcdef-key"));
  auto good = VerifyAuditLog(log, std::string("0123456789abcdef-key"));
  ASSERT_TRUE(good);
  EXPECT_EQ(good->verdict, VerifyReport::Verdict::kIntact) << good->problem;
  auto wrong = VerifyAuditLog(log, std::string("another-key-entirely"));
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->verdict, VerifyReport::Verdict::kBroken);
  EXPECT_EQ(wrong->first_bad_line, 2u);
  auto none = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->verdict, VerifyReport::Verdict::kBroken);
  // Recomputing plain SHA-256 links after an edit does not fool a keyed verifier.
}

TEST(Audit, RecordsAreRedactedAndCounted) {
  TempDir d;
  std::string log = d / "a.jsonl";
  Redactor red;
  red.AddValue("policy", "super-secret-value");
  auto w = AuditWriter::Open(log, NewSessionId(), FsyncMode::kAlways, std::nullopt, &red);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Append("tool_started", {{"args", {{"path", "super-secret-value.txt"}}}}));
  std::string text = ReadFile(log);
  EXPECT_EQ(text.find("super-secret-value"), std::string::npos);
  EXPECT_NE(text.find("[REDACTED:policy]"), std::string::npos);
  EXPECT_NE(text.find("\"redactions\":1"), std::string::npos);
}

TEST(Audit, LogFileIsPrivate) {
  TempDir d;
  std::string log = d / "sub/dir/a.jsonl";
  WriteSession(log, 0);
  struct stat st {};
  ASSERT_EQ(::stat(log.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Audit, MissingLogIsNotFound) {
  auto r = VerifyAuditLog("/nonexistent/cordon.jsonl", std::nullopt);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kNotFound);
}

TEST(Audit, AppendAllWritesInOrderAndCommonFieldsAreNotShadowed) {
  TempDir d;
  std::string log = d / "a.jsonl";
  auto w = AuditWriter::Open(log, NewSessionId(), FsyncMode::kNever, std::nullopt, nullptr);
  ASSERT_TRUE(w);
  AuditWriter::Record recs[] = {
      {"tool_started", {{"tool", "x"}}},
      {"tool_finished", {{"tool", "x"}, {"type", "forged"}, {"seq", 99}}}};
  ASSERT_TRUE(w->AppendAll(recs, true));
  auto lines = Lines(ReadFile(log));
  ASSERT_EQ(lines.size(), 2u);
  Json a = Json::parse(lines[0]), b = Json::parse(lines[1]);
  EXPECT_EQ(a["seq"], 1);
  EXPECT_EQ(b["seq"], 2);
  EXPECT_EQ(b["type"], "tool_finished");
  EXPECT_EQ(lines[1].find("forged"), std::string::npos);
  auto r = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, VerifyReport::Verdict::kIntact) << r->problem;
}

TEST(Audit, PerCallFlusherKeepsTheChainUnderConcurrentWriters) {
  // Durable records under per_call go to the background flusher; Flush waits for it. Two
  // writers (two sessions) in threads share one file: the chain stays intact.
  TempDir d;
  std::string log = d / "a.jsonl";
  auto run = [&] {
    auto w = AuditWriter::Open(log, NewSessionId(), FsyncMode::kPerCall, std::nullopt, nullptr);
    ASSERT_TRUE(w);
    for (int i = 0; i < 300; ++i) ASSERT_TRUE(w->Append("tool_finished", {{"call", i}}, true));
    ASSERT_TRUE(w->Flush());
  };
  std::thread t1(run), t2(run);
  t1.join();
  t2.join();
  auto r = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, VerifyReport::Verdict::kIntact) << r->problem;
  EXPECT_EQ(r->records, 600u);
  EXPECT_EQ(r->sessions, 2u);
}

}  // namespace
}  // namespace cordon
