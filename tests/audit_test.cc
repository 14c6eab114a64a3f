// The audit chain: intact logs verify; edits, reorders, cuts, a missing head and a wrong key are
// caught at the right line; a torn tail is reported as such and recovered by the next writer.
#include "audit/audit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <variant>
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
  ASSERT_TRUE(w->Append(SessionStartedRecord{.chain = key ? "hmac-sha256" : "sha256"}));
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(calls); ++i) {
    ASSERT_TRUE(w->Append(ToolStartedRecord{.call = i, .tool = "read_file_range"}));
    ASSERT_TRUE(w->Append(ToolFinishedRecord{.tool = "read_file_range", .status = "ok"}));
  }
  ASSERT_TRUE(w->Append(SessionFinishedRecord{}));
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
  EXPECT_EQ(r->records, 1u + 8u + 6u);  // log_started, then the two sessions (issue 10)
  EXPECT_EQ(r->sessions, 2u);
}

TEST(Audit, TamperingIsCaughtAtTheFirstBadLine) {
  TempDir d;
  std::string log = d / "a.jsonl";
  WriteSession(log, 3);
  const auto lines = Lines(ReadFile(log));
  ASSERT_EQ(lines.size(), 9u);  // log_started first (issue 10)
  struct Case {
    std::string name;
    std::vector<std::string> lines;
    std::uint64_t bad_line;
  };
  auto edited = lines;
  edited[4].replace(edited[4].find("read_file_range"), 4, "rm -");
  auto swapped = lines;
  std::swap(swapped[3], swapped[4]);
  auto cut = lines;
  cut.erase(cut.begin() + 5);
  auto headless = std::vector<std::string>(lines.begin() + 1, lines.end());
  const Case cases[] = {
      {"edit", edited, 6},
      {"reorder", swapped, 4},
      {"cut in the middle", cut, 6},
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
  EXPECT_EQ(r->first_bad_line, 6u);
  EXPECT_EQ(r->records, 5u);
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
  Redactor red(testing::ShippedRedactRules());
  red.AddValue("policy", "super-secret-value");
  auto w = AuditWriter::Open(log, NewSessionId(), FsyncMode::kAlways, std::nullopt, &red);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Append(ToolStartedRecord{.tool = "read_file_range",
                                          .args = Json{{"path", "super-secret-value.txt"}}}));
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

TEST(Audit, AppendAllWritesInOrder) {
  TempDir d;
  std::string log = d / "a.jsonl";
  auto w = AuditWriter::Open(log, NewSessionId(), FsyncMode::kNever, std::nullopt, nullptr);
  ASSERT_TRUE(w);
  const AuditRecord recs[] = {ToolStartedRecord{.tool = "x"},
                              ToolFinishedRecord{.tool = "x", .status = "ok"}};
  ASSERT_TRUE(w->AppendAll(recs, true));
  auto lines = Lines(ReadFile(log));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(Json::parse(lines[0])["type"], "log_started");  // an empty file starts with it
  Json a = Json::parse(lines[1]), b = Json::parse(lines[2]);
  EXPECT_EQ(a["seq"], 2);
  EXPECT_EQ(a["type"], "tool_started");
  EXPECT_EQ(b["seq"], 3);
  EXPECT_EQ(b["type"], "tool_finished");
  auto r = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, VerifyReport::Verdict::kIntact) << r->problem;
}

// One instance of every record type with every optional field set, in AuditRecord's order.
std::vector<AuditRecord> FullRecords() {
  return {
      SessionStartedRecord{.cordon_version = "1",
                           .client = "cli",
                           .workspace = "/w",
                           .chain = "sha256",
                           .policy_sha256 = "p",
                           .git = Json::object(),
                           .env = Json::object(),
                           .git_identity = Json::object(),
                           .redaction = Json::object(),
                           .tags = std::vector<std::string>{"t"}},
      ToolStartedRecord{.call = 1,
                        .tool = "t",
                        .scope = "s",
                        .effect = "none",
                        .args = Json::object(),
                        .input_bytes = 1,
                        .unvalidated = "why",
                        .server = "srv",
                        .args_bytes = 2,
                        .args_sha256 = "h",
                        .method = "resources/read",
                        .mcp_session = "mcp-1"},
      ToolFinishedRecord{.call = 1,
                         .tool = "t",
                         .status = "ok",
                         .code = "c",
                         .message = "m",
                         .output_bytes = 1,
                         .truncated = false,
                         .elapsed_ms = 1,
                         .server = "s",
                         .server_tool = "t",
                         .output_redactions = 1,
                         .output_redactions_by_rule = Json::object(),
                         .reason = "r",
                         .method = "prompts/get",
                         .changes = Json::object()},
      PolicyDeniedRecord{.call = 1, .tool = "t", .scope = "s", .rule = "r", .decided_by = "d"},
      FileWriteRecord{.call = 1,
                      .tool = "t",
                      .op = "create",
                      .path = "p",
                      .sha256_before = "b",
                      .bytes_before = 1,
                      .sha256_after = "a",
                      .bytes_after = 2,
                      .status = "written",
                      .code = "c",
                      .before_image = "failed",
                      .before_image_error = "e"},
      ProcessRecord{.argv = {"true"},
                    .cgroup = Json::object(),
                    .call = 1,
                    .io = Json::object(),
                    .job = "j",
                    .mcp_session = "mcp-1",
                    .cancel_requested = false,
                    .spec_sha256 = "h",
                    .launch = Json::object(),
                    .limit = Json::object(),
                    .timeout = Json::object(),
                    .error_code = "internal",
                    .error_message = "m",
                    .changes = Json::object(),
                    .stop_signal = 15,
                    .env = std::vector<std::string>{"A"}},
      McpDiagnosticRecord{.server = "s",
                          .reason = "r",
                          .source = "f",
                          .message = "m",
                          .method = "x",
                          .stderr_tail = "e",
                          .protocol_version = "v",
                          .bytes = 1,
                          .messages = 2,
                          .http_status = 500,
                          .curl = "c",
                          .body = "b",
                          .tools = std::vector<std::string>{"t"}},
      McpTrustRecord{.server = "s"},
      McpClientRecord{.client_info = Json::object(), .mcp_session = "mcp-1"},
      InstructionsRecord{.path = "AGENTS.md", .sha256 = "h"},
      SessionFinishedRecord{.git = Json::object(), .knowledge = Json::object()},
      LogRecoveredRecord{},
      ProtectedPathRemovedRecord{.path = "/ws/.envrc",
                                 .kind = "file",
                                 .quarantine = "/q/.envrc",
                                 .when = "process_end",
                                 .error = "e",
                                 .reason = "git_content",
                                 .git = Json::array({{{"ref", "refs/heads/main"},
                                                      {"commit", std::string(40, 'a')},
                                                      {"path", ".envrc"},
                                                      {"rule", "protected_path"}}})},
      SetuidStrippedRecord{.path = "/ws/tool",
                           .mode_before = "4755",
                           .mode_after = "755",
                           .when = "process_end",
                           .error = "e"},
      // --- failclosed
      GapRecord{.lost = 2, .types = {"process"}, .calls = {1}, .err = 28, .error = "e"},
      LogDetachedRecord{.reason = "replaced",
                        .path = "/l",
                        .previous_head = "h",
                        .where = "new_file",
                        .previous = Json::object()},
      // --- checkpoint ---
      LogStartedRecord{.key_id = "k", .previous = Json::object()},
      CheckpointRecord{.key_id = "k", .sig = "s"},
      // --- denials
      AccessDeniedRecord{.tool = "exec",
                         .kind = "foreground",
                         .job = "job-1",
                         .layer = "landlock",
                         .total = 1,
                         .complete = false,
                         .incomplete_reason = "r"},
      // --- egress
      NetworkRecord{.identity = "tool run_shell",
                    .protocol = "http",
                    .method = "GET",
                    .host = "api.example.test",
                    .port = 80,
                    .address = "203.0.113.7",
                    .decision = "allowed",
                    .rule = "api.example.test",
                    .rule_source = "--allow-domain",
                    .reason = "r",
                    .error = "e",
                    .http_status = 200},
      // --- supervision (issue 23)
      SessionTagRecord{.call = 1, .tag = "t", .tagged = true, .tags = {"t"}, .mcp_session = "m"},
      LocalServerStoppedRecord{.call = 2,
                               .job = "job-1",
                               .pid = 4321,
                               .port = 8000,
                               .comm = "python3",
                               .pgid = 4321,
                               .group_by_number = false,
                               .signals = {"SIGTERM"},
                               .stopped = true,
                               .elapsed_ms = 12.5,
                               .mcp_session = "m"},
      // --- recovery (issue 33)
      RecoveryRecord{.stage = "/state/stage/1-x/1",
                     .outcome = "quarantined",
                     .reason = "rules_unreadable",
                     .rules_error = "e",
                     .stage_session = "s",
                     .stage_log = "/logs/a.jsonl",
                     .stage_policy_sha256 = "h",
                     .recovered_by = "r",
                     .roots = {"/ws"},
                     .quarantine = "/q/recovered-1-x-1",
                     .changes = Json::object(),
                     .left = {"a.txt"},
                     .left_omitted = 0,
                     .left_escaped = false,
                     .error = "e",
                     .stage_log_error = "e",
                     .copy = "/q/recovery-1-x-1.json",
                     .held = "1-x-1"},
      // --- approvals (issue 34)
      ApprovalRecord{.id = "ap-1",
                     .call = 3,
                     .tool = "run_shell",
                     .kind = "launch",
                     .subject = "git push",
                     .argv = std::vector<std::string>{"git", "push"},
                     .paths = std::vector<std::string>{"deploy/a.yaml"},
                     .operation = "create",
                     .rule = "git-push",
                     .rule_source = "policies.d/20-approvals.toml:22",
                     .asked_via = "kept",
                     .answer = "session",
                     .client = "c",
                     .why_no_one = "w",
                     .kept_from = "ap-0",
                     .mcp_session = "m",
                     .wait_ms = 5},
  };
}

template <std::size_t... I>
std::vector<AuditRecord> DefaultRecords(std::index_sequence<I...>) {
  return {AuditRecord(std::in_place_index<I>)...};
}

TEST(AuditCatalog, EveryRecordTypeHasOneEntryWithItsFields) {
  // The struct, its JSON form and the catalog table name the same fields: a full record emits
  // exactly the catalog's fields, and a default one at least the required ones.
  const auto full = FullRecords();
  const auto empty = DefaultRecords(std::make_index_sequence<std::variant_size_v<AuditRecord>>());
  const auto catalog = AuditRecordCatalog();
  ASSERT_EQ(full.size(), catalog.size());
  for (std::size_t i = 0; i < catalog.size(); ++i) {
    const AuditRecordInfo& info = catalog[i];
    ASSERT_EQ(full[i].index(), i);
    EXPECT_EQ(RecordType(full[i]), info.type);
    EXPECT_EQ(FindAuditRecordInfo(info.type), &info);
    std::set<std::string> want, got, required;
    for (const auto& f : info.fields) {
      EXPECT_TRUE(want.insert(std::string(f.name)).second) << info.type << ": twice " << f.name;
      if (f.required) required.insert(std::string(f.name));
      for (const auto& c : AuditCommonFields()) {
        EXPECT_NE(f.name, c.name) << info.type << " shadows a common field";
      }
    }
    const Json full_json = RecordFields(full[i]), empty_json = RecordFields(empty[i]);
    for (const auto& [k, v] : full_json.items()) got.insert(k);
    EXPECT_EQ(got, want) << info.type;
    std::set<std::string> minimal;
    for (const auto& [k, v] : empty_json.items()) minimal.insert(k);
    EXPECT_TRUE(std::includes(minimal.begin(), minimal.end(), required.begin(), required.end()))
        << info.type;
  }
  EXPECT_EQ(FindAuditRecordInfo("no_such_record"), nullptr);
}

TEST(AuditCatalog, ShowKeysComeFromTheCatalogInTheirFixedOrder) {
  const std::vector<std::string_view> want = {
      "tool",      "status",     "code",         "op",        "path",         "scope",
      "reason",    "elapsed_ms", "output_bytes", "truncated", "bytes_before", "bytes_after",
      "workspace", "redactions", "identity",     "decision",  "host",         "port",
      "error",     "bytes_down", "outcome"};
  EXPECT_EQ(AuditShowKeys(), want);
  TempDir d;
  std::string log = d / "a.jsonl";
  WriteSession(log, 1);
  auto text = ShowAuditLog(log);
  ASSERT_TRUE(text);
  EXPECT_NE(text->find("tool_finished  tool=\"read_file_range\"  status=\"ok\""), std::string::npos)
      << *text;
}

// Recomputes every prev link, as a forger without the key could.
std::vector<std::string> Rechain(std::vector<std::string> lines) {
  std::string prev(64, '0');
  for (auto& l : lines) {
    Json rec = Json::parse(l);
    rec["prev"] = prev;
    l = rec.dump();
    prev = Sha256Hex(l);
  }
  return lines;
}

TEST(AuditCatalog, VerifierChecksEachTypesRequiredFields) {
  TempDir d;
  std::string log = d / "a.jsonl";
  WriteSession(log, 2);
  auto lines = Lines(ReadFile(log));
  ASSERT_EQ(lines.size(), 7u);
  // A tool_finished without its status, chained correctly: the chain holds, the record does not.
  Json rec = Json::parse(lines[3]);
  ASSERT_EQ(rec["type"], "tool_finished");
  rec.erase("status");
  lines[3] = rec.dump();
  WriteFile(log, Join(Rechain(lines)));
  auto r = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, VerifyReport::Verdict::kBroken);
  EXPECT_EQ(r->first_bad_line, 4u);
  EXPECT_NE(r->problem.find("tool_finished record lacks its required field \"status\""),
            std::string::npos)
      << r->problem;
  // A type the catalog does not know (a newer writer's) is a warning, not a break.
  lines = Lines(ReadFile(log));
  rec = Json::parse(lines[3]);
  rec["type"] = "from_the_future";
  lines[3] = rec.dump();
  WriteFile(log, Join(Rechain(lines)));
  r = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, VerifyReport::Verdict::kIntact) << r->problem;
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("unknown record type from_the_future"), std::string::npos);
}

TEST(AuditCatalog, DocsTableIsGeneratedFromTheCatalog) {
  // docs/audit.md holds the table between two markers; CORDON_UPDATE_DOCS=1 rewrites it.
  const std::string path = std::string(CORDON_SOURCE_DIR) + "/docs/audit.md";
  const std::string begin = "<!-- records table: generated from audit/records.cc -->\n";
  const std::string end = "<!-- end of records table -->";
  std::string doc = ReadFile(path);
  std::size_t a = doc.find(begin), b = doc.find(end);
  ASSERT_NE(a, std::string::npos) << path;
  ASSERT_NE(b, std::string::npos) << path;
  const std::string table = AuditRecordTableMarkdown();
  if (const char* u = std::getenv("CORDON_UPDATE_DOCS"); u != nullptr && std::string(u) == "1") {
    doc = doc.substr(0, a + begin.size()) + table + doc.substr(b);
    WriteFile(path, doc);
    b = doc.find(end);
  }
  EXPECT_EQ(doc.substr(a + begin.size(), b - a - begin.size()), table)
      << "docs/audit.md is stale: run CORDON_UPDATE_DOCS=1 build/tests/audit_test "
         "--gtest_filter='*DocsTable*'";
}

// Every field of every record and nested shape has a JSON type (docs/audit-schema.json is made
// from them): a field added without one fails here.
TEST(AuditCatalog, EveryFieldHasAType) {
  std::vector<std::pair<std::string, std::span<const AuditFieldInfo>>> tables = {
      {"(every record)", AuditCommonFields()}};
  for (const auto& info : AuditRecordCatalog()) tables.emplace_back(info.type, info.fields);
  std::set<std::string> shapes;
  for (const AuditShape* shape : AuditShapes()) {
    EXPECT_TRUE(shapes.insert(std::string(shape->name)).second) << "twice " << shape->name;
    EXPECT_EQ(FindAuditRecordInfo(shape->name), nullptr) << shape->name << " names a record";
    tables.emplace_back("shape " + std::string(shape->name), shape->fields);
  }
  for (const auto& [table, fields] : tables) {
    for (const auto& f : fields) {
      EXPECT_NE(f.type.kind, AuditKind::kUnset) << table << "." << f.name << " has no type";
      if (f.type.kind == AuditKind::kArray) {
        EXPECT_NE(f.type.items, AuditKind::kUnset) << table << "." << f.name << ": array of what";
      }
      if (f.type.shape != nullptr) {
        EXPECT_TRUE(shapes.count(std::string(f.type.shape->name)))
            << table << "." << f.name << " names a shape AuditShapes() lacks";
      }
    }
  }
  // The check itself: a field without a type is caught.
  const AuditFieldInfo untyped{"x", true, {}, "no type"};
  EXPECT_EQ(untyped.type.kind, AuditKind::kUnset);
  EXPECT_EQ(AuditTypeName(untyped.type), "(no type)");
}

TEST(AuditCatalog, SchemaFileIsGeneratedFromTheCatalog) {
  // docs/audit-schema.json is AuditRecordSchema(); CORDON_UPDATE_DOCS=1 rewrites it.
  const std::string path = std::string(CORDON_SOURCE_DIR) + "/docs/audit-schema.json";
  const std::string want = AuditRecordSchema().dump(2) + "\n";
  if (const char* u = std::getenv("CORDON_UPDATE_DOCS"); u != nullptr && std::string(u) == "1") {
    WriteFile(path, want);
  }
  EXPECT_EQ(ReadFile(path), want) << "docs/audit-schema.json is stale: run CORDON_UPDATE_DOCS=1 "
                                     "build/tests/audit_test --gtest_filter='*SchemaFile*'";
  const Json schema = AuditRecordSchema();
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
  EXPECT_EQ(schema["oneOf"].size(), AuditRecordCatalog().size());
  for (const auto& info : AuditRecordCatalog()) {
    const Json& def = schema["$defs"][std::string(info.type)];
    EXPECT_EQ(def["additionalProperties"], false) << info.type;
    EXPECT_EQ(def["properties"]["v"]["const"], 1) << info.type;
    EXPECT_EQ(def["properties"]["type"]["const"], info.type) << info.type;
  }
  for (const AuditShape* shape : AuditShapes()) {
    EXPECT_EQ(schema["$defs"][std::string(shape->name)]["additionalProperties"], false);
  }
  EXPECT_EQ(schema["$defs"]["process"]["properties"]["exit_code"]["type"],
            Json::array({"integer", "null"}));
  EXPECT_EQ(schema["$defs"]["process"]["properties"]["changes"]["$ref"], "#/$defs/changes");
}

TEST(Audit, PerCallFlusherKeepsTheChainUnderConcurrentWriters) {
  // Durable records under per_call go to the background flusher; Flush waits for it. Two
  // writers (two sessions) in threads share one file: the chain stays intact.
  TempDir d;
  std::string log = d / "a.jsonl";
  auto run = [&] {
    auto w = AuditWriter::Open(log, NewSessionId(), FsyncMode::kPerCall, std::nullopt, nullptr);
    ASSERT_TRUE(w);
    for (std::uint64_t i = 0; i < 300; ++i) {
      ASSERT_TRUE(w->Append(ToolFinishedRecord{.call = i, .tool = "t", .status = "ok"}, true));
    }
    ASSERT_TRUE(w->Flush());
  };
  std::thread t1(run), t2(run);
  t1.join();
  t2.join();
  auto r = VerifyAuditLog(log, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdict, VerifyReport::Verdict::kIntact) << r->problem;
  EXPECT_EQ(r->records, 601u);  // and the log_started of whichever opened the file first
  EXPECT_EQ(r->sessions, 2u);
}

}  // namespace
}  // namespace cordon
