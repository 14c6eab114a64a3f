// Issue 10, "Prove completeness": log_started, signed checkpoints, the witness, and what
// `cordon audit verify` says about cut, emptied, rebuilt and re-signed logs (real binary).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "core/hash.h"
#include "core/text.h"
#include "runner/host_probe.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string Join(const std::vector<std::string>& lines, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n && i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_ / "ws/hello.txt", "hello\nworld\n");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
  }
  testing::RunResult Cordon(std::vector<std::string> args) {
    args.insert(args.begin(), testing::CordonBin());
    return testing::Run(args, env_);
  }
  void Keygen(const std::string& name) {
    auto r = Cordon({"audit", "keygen", "--out", dir_ / name});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  std::string Key(const std::string& name) { return dir_ / (name + "/audit-signing.key"); }
  std::string Pub(const std::string& name) { return dir_ / (name + "/audit-signing.pub"); }
  // One `cordon call` session on the log, signed with `key` and witnessed.
  void SignedCall(const std::string& key, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"call",        "read_file_range",
                                     "--workspace", dir_ / "ws",
                                     "--audit-log", log(),
                                     "--json",      R"({"path":"hello.txt","start_line":1})"};
    if (!key.empty()) {
      args.push_back("--audit-signing-key");
      args.push_back(key);
    }
    args.push_back("--audit-witness");
    args.push_back(witness());
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = Cordon(args);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  testing::RunResult Verify(std::vector<std::string> extra) {
    std::vector<std::string> args = {"audit", "verify", log()};
    args.insert(args.end(), extra.begin(), extra.end());
    return Cordon(args);
  }
  std::string log() { return dir_ / "audit.jsonl"; }
  std::string witness() { return dir_ / "witness.jsonl"; }
  TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(CheckpointTest, EmptyLogIsNotIntact) {
  WriteFile(log(), "");
  auto r = Verify({});
  EXPECT_EQ(r.exit_code, 8) << r.out << r.err;
  EXPECT_NE(r.out.find("empty"), std::string::npos) << r.out;
}

TEST_F(CheckpointTest, SignedLogStartsWithLogStartedAndEndsEachSessionWithACheckpoint) {
  Keygen("k");
  SignedCall(Key("k"));
  SignedCall(Key("k"));
  auto lines = Lines(ReadFile(log()));
  ASSERT_GE(lines.size(), 4u);
  Json first = Json::parse(lines[0]);
  EXPECT_EQ(first["type"], "log_started");
  EXPECT_EQ(first["log_id"].get<std::string>().size(), 32u);
  EXPECT_EQ(first["chain"], "sha256");
  int checkpoints = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    Json rec = Json::parse(lines[i]);
    if (rec["type"] != "checkpoint") continue;
    ++checkpoints;
    EXPECT_EQ(Json::parse(lines[i - 1])["type"], "session_finished");
    EXPECT_EQ(rec["lines"], i);
    EXPECT_EQ(rec["log_id"], first["log_id"]);
    EXPECT_EQ(rec["head"], Sha256Hex(lines[i - 1]));
  }
  EXPECT_EQ(checkpoints, 2);
  EXPECT_EQ(Lines(ReadFile(witness())).size(), 2u);
  auto ok = Verify({"--pubkey", Pub("k"), "--witness", witness(), "--require", "signed"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("complete up to line " + std::to_string(lines.size())), std::string::npos)
      << ok.out;
}

TEST_F(CheckpointTest, CutRecordsAreAnUnprovenTailWithoutWitnessAndACutWithIt) {
  Keygen("k");
  SignedCall(Key("k"));
  SignedCall(Key("k"));
  const auto lines = Lines(ReadFile(log()));
  // Cut the second session's session_finished and checkpoint: its records are unproven, the
  // session has no end, and the witness knows a checkpoint the log lacks.
  WriteFile(log(), Join(lines, lines.size() - 2));
  auto plain = Verify({"--pubkey", Pub("k")});
  EXPECT_EQ(plain.exit_code, 5) << plain.out;
  EXPECT_NE(plain.out.find("unproven"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("unfinished: session"), std::string::npos) << plain.out;
  auto witnessed = Verify({"--pubkey", Pub("k"), "--witness", witness()});
  EXPECT_EQ(witnessed.exit_code, 6) << witnessed.out;
  EXPECT_NE(witnessed.out.find("cut"), std::string::npos) << witnessed.out;
  // Cut the whole second session, right after the first session's checkpoint: the log alone
  // cannot tell (see SECURITY.md); the witness can.
  std::size_t first_cp = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (Json::parse(lines[i])["type"] == "checkpoint") {
      first_cp = i;
      break;
    }
  }
  WriteFile(log(), Join(lines, first_cp + 1));
  EXPECT_EQ(Verify({"--pubkey", Pub("k")}).exit_code, 0);
  auto whole = Verify({"--pubkey", Pub("k"), "--witness", witness()});
  EXPECT_EQ(whole.exit_code, 6) << whole.out;
}

TEST_F(CheckpointTest, CutLeavingAPartialLineAfterACheckpoint) {
  Keygen("k");
  SignedCall(Key("k"));
  SignedCall(Key("k"));
  const std::string text = ReadFile(log());
  const auto lines = Lines(text);
  // Keep the first session and half of the second session's first line.
  std::size_t keep = 0, first_cp = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    keep += lines[i].size() + 1;
    if (Json::parse(lines[i])["type"] == "checkpoint") {
      first_cp = i;
      break;
    }
  }
  ASSERT_LT(first_cp + 1, lines.size()) << text;
  WriteFile(log(), text.substr(0, keep + lines[first_cp + 1].size() / 2));
  auto plain = Verify({"--pubkey", Pub("k")});
  EXPECT_EQ(plain.exit_code, 4) << plain.out;  // alone, a cut into a line looks like a crash
  auto witnessed = Verify({"--pubkey", Pub("k"), "--witness", witness()});
  EXPECT_EQ(witnessed.exit_code, 6) << witnessed.out;
}

TEST_F(CheckpointTest, WitnessCatchesAReplacedLog) {
  Keygen("k");
  SignedCall(Key("k"));
  const std::string original = ReadFile(log());
  std::filesystem::remove(log());
  // A fresh log written by someone who holds the key, witness left as it was.
  auto r =
      Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(),
              "--audit-signing-key", Key("k"), "--json", R"({"path":"hello.txt","start_line":1})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Verify({"--pubkey", Pub("k")}).exit_code, 0);
  auto witnessed = Verify({"--pubkey", Pub("k"), "--witness", witness()});
  EXPECT_EQ(witnessed.exit_code, 6) << witnessed.out;
  EXPECT_NE(witnessed.out.find("replaced"), std::string::npos) << witnessed.out;
}

TEST_F(CheckpointTest, HmacLogRebuiltAsPlainFailsRequireHmac) {
  WriteFile(dir_ / "hmac.key", "0123456789abcdef0123456789abcdef\n");
  ASSERT_EQ(::chmod((dir_ / "hmac.key").c_str(), 0600), 0);  // a key others can read is refused
  Keygen("k");
  SignedCall(Key("k"), {"--audit-key-file", dir_ / "hmac.key"});
  EXPECT_EQ(Verify({"--key-file", dir_ / "hmac.key", "--require", "hmac"}).exit_code, 0);
  // Rebuild every line as a plain SHA-256 chain and drop the checkpoint, which the forger
  // cannot re-sign without the key.
  std::string rebuilt, prev(64, '0');
  for (const auto& l : Lines(ReadFile(log()))) {
    Json rec = Json::parse(l);
    if (rec["type"] == "checkpoint") continue;
    if (rec.contains("chain")) rec["chain"] = "sha256";
    rec["prev"] = prev;
    const std::string line = rec.dump();
    prev = Sha256Hex(line);
    rebuilt += line + "\n";
  }
  WriteFile(log(), rebuilt);
  auto v = Verify({});
  EXPECT_EQ(v.exit_code, 0) << v.out;  // a plain chain, and nobody asked for more
  auto hmac = Verify({"--require", "hmac"});
  EXPECT_EQ(hmac.exit_code, 7) << hmac.out;
  auto sig = Verify({"--require", "signed", "--pubkey", Pub("k")});
  EXPECT_EQ(sig.exit_code, 7) << sig.out;
}

TEST_F(CheckpointTest, ForgedSignatureAndWrongKeyAreBroken) {
  Keygen("k");
  Keygen("other");
  SignedCall(Key("k"));
  auto lines = Lines(ReadFile(log()));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(Verify({"--pubkey", Pub("other")}).exit_code, 1);
  auto wrong = Verify({"--pubkey", Pub("other")});
  EXPECT_NE(wrong.out.find("no --pubkey names"), std::string::npos) << wrong.out;
  // One byte of the last checkpoint's signature changed (the chain stays whole: it is the
  // last line).
  Json cp = Json::parse(lines.back());
  ASSERT_EQ(cp["type"], "checkpoint");
  std::string sig = cp["sig"];
  sig[10] = sig[10] == '0' ? '1' : '0';
  const std::size_t at = lines.back().find(cp["sig"].get<std::string>());
  ASSERT_NE(at, std::string::npos);
  lines.back().replace(at, sig.size(), sig);
  WriteFile(log(), Join(lines, lines.size()));
  auto forged = Verify({"--pubkey", Pub("k")});
  EXPECT_EQ(forged.exit_code, 1) << forged.out;
  EXPECT_NE(forged.out.find("does not verify"), std::string::npos) << forged.out;
}

TEST_F(CheckpointTest, KeysRotate) {
  Keygen("a");
  Keygen("b");
  SignedCall(Key("a"));
  SignedCall(Key("b"));
  std::set<std::string> ids;
  for (const auto& l : Lines(ReadFile(log()))) {
    Json rec = Json::parse(l);
    if (rec["type"] == "checkpoint") ids.insert(rec["key_id"].get<std::string>());
  }
  EXPECT_EQ(ids.size(), 2u);
  auto both = Verify({"--pubkey", Pub("a"), "--pubkey", Pub("b"), "--require", "signed"});
  EXPECT_EQ(both.exit_code, 0) << both.out;
  EXPECT_EQ(Verify({"--pubkey", Pub("a")}).exit_code, 1);
}

TEST_F(CheckpointTest, RotatedLogLinksThePreviousHead) {
  Keygen("k");
  SignedCall(Key("k"));
  auto rot = Cordon({"audit", "rotate", log(), "--audit-signing-key", Key("k")});
  ASSERT_EQ(rot.exit_code, 0) << rot.out << rot.err;
  const auto old_lines = Lines(ReadFile(log() + ".1"));
  ASSERT_FALSE(old_lines.empty());
  SignedCall(Key("k"));
  const auto lines = Lines(ReadFile(log()));
  ASSERT_FALSE(lines.empty());
  Json first = Json::parse(lines[0]);
  ASSERT_EQ(first["type"], "log_started");
  ASSERT_TRUE(first.contains("previous")) << lines[0];
  EXPECT_EQ(first["previous"]["head"], Sha256Hex(old_lines.back()));
  EXPECT_EQ(first["previous"]["lines"], old_lines.size());
  EXPECT_EQ(first["previous"]["log_id"], Json::parse(old_lines[0])["log_id"]);
  EXPECT_NE(first["log_id"], first["previous"]["log_id"]);
  EXPECT_EQ(Verify({"--pubkey", Pub("k")}).exit_code, 0);
  auto old = Cordon({"audit", "verify", log() + ".1", "--pubkey", Pub("k")});
  EXPECT_EQ(old.exit_code, 0) << old.out;
}

TEST_F(CheckpointTest, OldLogWithoutLogStartedStillVerifiesWithAWarning) {
  SignedCall("");
  auto lines = Lines(ReadFile(log()));
  ASSERT_FALSE(lines.empty());
  ASSERT_EQ(Json::parse(lines[0])["type"], "log_started");
  // Rebuild without the first line, as a log from before log_started: the session's records
  // are numbered from 1 again.
  const Json first = Json::parse(lines[0]);
  std::string rebuilt, prev(64, '0');
  for (std::size_t i = 1; i < lines.size(); ++i) {
    Json rec = Json::parse(lines[i]);
    if (rec["type"] == "checkpoint") continue;
    if (rec["session"] == first["session"]) rec["seq"] = rec["seq"].get<std::uint64_t>() - 1;
    rec["prev"] = prev;
    const std::string line = rec.dump();
    prev = Sha256Hex(line);
    rebuilt += line + "\n";
  }
  WriteFile(log(), rebuilt);
  auto v = Verify({});
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("no log_started: log id unknown, completeness cannot be proven"),
            std::string::npos)
      << v.out;
}

TEST_F(CheckpointTest, GitHeadIsRecordedAtStartAndEnd) {
  const std::string head = "0123456789abcdef0123456789abcdef01234567";
  WriteFile(dir_ / "ws/.git/HEAD", "ref: refs/heads/main\n");
  WriteFile(dir_ / "ws/.git/packed-refs",
            "# pack-refs with: peeled fully-peeled sorted\n" + head + " refs/heads/main\n");
  SignedCall("");
  Json started, finished;
  for (const auto& l : Lines(ReadFile(log()))) {
    Json rec = Json::parse(l);
    if (rec["type"] == "session_started") started = rec;
    if (rec["type"] == "session_finished") finished = rec;
  }
  EXPECT_EQ(started["git"], (Json{{"head", head}, {"branch", "main"}})) << started.dump();
  EXPECT_EQ(finished["git"], (Json{{"head", head}, {"branch", "main"}})) << finished.dump();
  // A loose ref wins over packed-refs; not a repository: no field.
  const std::string loose = "89abcdef0123456789abcdef0123456789abcdef";
  WriteFile(dir_ / "ws/.git/refs/heads/main", loose + "\n");
  std::filesystem::remove(log());
  SignedCall("");
  for (const auto& l : Lines(ReadFile(log()))) {
    Json rec = Json::parse(l);
    if (rec["type"] == "session_started") {
      EXPECT_EQ(rec["git"]["head"], loose);
    }
  }
  std::filesystem::remove_all(dir_ / "ws/.git");
  std::filesystem::remove(log());
  SignedCall("");
  for (const auto& l : Lines(ReadFile(log()))) {
    Json rec = Json::parse(l);
    if (rec["type"] == "session_started") {
      EXPECT_FALSE(rec.contains("git")) << l;
    }
  }
}

TEST_F(CheckpointTest, SigningKeyIsUnreadableInsideAndNeverInTheLog) {
  // The key sits in the workspace, where a confined process could otherwise read it.
  auto kg = Cordon({"audit", "keygen", "--private", dir_ / "ws/k.key", "--public", dir_ / "k.pub"});
  ASSERT_EQ(kg.exit_code, 0) << kg.err;
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "ws/k.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string pem = ReadFile(dir_ / "ws/k.key");
  ASSERT_GE(Lines(pem).size(), 3u);
  const std::string body = Lines(pem)[1];
  auto cat = Cordon({"exec", "--workspace", dir_ / "ws", "--audit-log", log(),
                     "--audit-signing-key", dir_ / "ws/k.key", "--", "cat", dir_ / "ws/k.key"});
  EXPECT_NE(cat.exit_code, 0) << cat.out;
  EXPECT_EQ(cat.out.find(body), std::string::npos);
  auto tool = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(),
                      "--audit-signing-key", dir_ / "ws/k.key", "--json",
                      Json{{"path", "k.key"}, {"start_line", 1}}.dump()});
  EXPECT_EQ(tool.out.find(body), std::string::npos) << tool.out;
  // A call whose arguments carry the key text: the record is redacted.
  Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(),
          "--audit-signing-key", dir_ / "ws/k.key", "--json",
          Json{{"path", body}, {"start_line", 1}}.dump()});
  const std::string text = ReadFile(log());
  EXPECT_EQ(text.find(body), std::string::npos);
  EXPECT_NE(text.find("\"type\":\"checkpoint\""), std::string::npos);
  EXPECT_EQ(Cordon({"audit", "verify", log(), "--pubkey", dir_ / "k.pub"}).exit_code, 0);
}

// A torn last line does not hide a failed requirement: an unsigned log (rebuilt without the
// key) with a torn tail fails --require signed (7), not "intact but for a crash" (4).
TEST_F(CheckpointTest, TornTailDoesNotHideAWeakerMode) {
  Keygen("k");
  SignedCall("");  // no signing key: unsigned checkpoints only (the witness is configured)
  WriteFile(log(), ReadFile(log()) + "{\"v\":1,\"seq\":9,\"ty");
  auto v = Verify({"--pubkey", Pub("k"), "--require", "signed"});
  EXPECT_EQ(v.exit_code, 7) << v.out;
  EXPECT_NE(v.out.find("torn"), std::string::npos) << v.out;
}

// cordon masks its own files by path: a second name (hard link) of the log or the signing key
// could sit in the workspace, so start refuses one; and a signing key other users can read
// lets them re-sign a cut log, so start refuses that too.
TEST_F(CheckpointTest, HardLinkedOwnFilesAndAnOpenSigningKeyAreRefusedAtStart) {
  Keygen("k");
  SignedCall(Key("k"));
  const std::string other = dir_ / "ws/notes.txt";
  ASSERT_EQ(::link(log().c_str(), other.c_str()), 0);
  auto r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(),
                   "--json", R"({"path":"hello.txt","start_line":1})"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("hard links"), std::string::npos) << r.err;
  ::unlink(other.c_str());
  const std::string key_link = dir_ / "ws/k.txt";
  ASSERT_EQ(::link(Key("k").c_str(), key_link.c_str()), 0);
  r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(),
              "--audit-signing-key", Key("k"), "--json", R"({"path":"hello.txt","start_line":1})"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("hard links"), std::string::npos) << r.err;
  ::unlink(key_link.c_str());
  ASSERT_EQ(::chmod(Key("k").c_str(), 0644), 0);
  r = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(),
              "--audit-signing-key", Key("k"), "--json", R"({"path":"hello.txt","start_line":1})"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
}

// `audit verify` given both files of a rotation (or their directory) checks the link: the newer
// file's log_started.previous against the older file's prefix. A cut older file is a cut (6),
// though on its own it verifies (cut after its last checkpoint).
TEST_F(CheckpointTest, VerifyChecksRotationLinksBetweenFiles) {
  Keygen("k");
  SignedCall(Key("k"));
  SignedCall(Key("k"));
  ASSERT_EQ(Cordon({"audit", "rotate", log(), "--audit-signing-key", Key("k")}).exit_code, 0);
  SignedCall(Key("k"));
  const std::string old_log = log() + ".1";
  auto both = Cordon({"audit", "verify", old_log, log(), "--pubkey", Pub("k")});
  EXPECT_EQ(both.exit_code, 0) << both.out << both.err;
  EXPECT_NE(both.out.find("ok: " + log() + " continues " + old_log), std::string::npos) << both.out;
  // The older file cut after its first session's checkpoint: alone it verifies (a shorter,
  // complete-looking log); with the newer file it is caught.
  const auto old_lines = Lines(ReadFile(old_log));
  std::size_t first_cp = 0;
  for (std::size_t i = 0; i < old_lines.size(); ++i) {
    if (Json::parse(old_lines[i])["type"] == "checkpoint") {
      first_cp = i;
      break;
    }
  }
  ASSERT_GT(first_cp, 0u);
  ASSERT_LT(first_cp + 1, old_lines.size());
  WriteFile(old_log, Join(old_lines, first_cp + 1));
  EXPECT_EQ(Cordon({"audit", "verify", old_log, "--pubkey", Pub("k")}).exit_code, 0);
  auto cut = Cordon({"audit", "verify", old_log, log(), "--pubkey", Pub("k")});
  EXPECT_EQ(cut.exit_code, 6) << cut.out << cut.err;
  EXPECT_NE(cut.out.find("it was cut"), std::string::npos) << cut.out;
  // The directory form finds both files (and leaves the witness beside them out).
  std::filesystem::create_directories(dir_ / "logs");
  std::filesystem::copy_file(old_log, dir_ / "logs/audit.jsonl.1");
  std::filesystem::copy_file(log(), dir_ / "logs/audit.jsonl");
  std::filesystem::copy_file(witness(), dir_ / "logs/witness.jsonl");
  auto dir = Cordon({"audit", "verify", dir_ / "logs", "--pubkey", Pub("k"), "--witness",
                     dir_ / "logs/witness.jsonl", "--json"});
  EXPECT_EQ(dir.exit_code, 6) << dir.out << dir.err;
  Json j = Json::parse(dir.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << dir.out;
  EXPECT_EQ(j["files"].size(), 2u) << dir.out;
  ASSERT_EQ(j["links"].size(), 1u) << dir.out;
  EXPECT_EQ(j["links"][0]["ok"], false) << dir.out;
}

// A witness line torn by a crash or a full disk is a warning, not skipped in silence.
TEST_F(CheckpointTest, TornWitnessLineIsAWarning) {
  Keygen("k");
  SignedCall(Key("k"));
  SignedCall(Key("k"));
  const auto w = Lines(ReadFile(witness()));
  ASSERT_EQ(w.size(), 2u);
  WriteFile(witness(), w[0] + "\n" + w[1].substr(0, w[1].size() / 2));
  auto r = Verify({"--pubkey", Pub("k"), "--witness", witness(), "--json"});
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_NE(j["warnings"].dump().find("witness line 2 is torn"), std::string::npos) << r.out;
  EXPECT_EQ(j["witness_checkpoints"], 1) << r.out;
  auto text = Verify({"--pubkey", Pub("k"), "--witness", witness()});
  EXPECT_NE(text.out.find("warning: witness line 2 is torn"), std::string::npos) << text.out;
}

// A command that creates more entries than sandbox.max_scan_entries leaves its process record
// with `changes.unwalked`: what it changed there is unknown, and verify says so.
TEST_F(CheckpointTest, VerifyFlagsAProcessWhoseChangesAreUnwalked) {
  if (FindOnPath("bwrap").empty()) GTEST_SKIP() << "SKIPPED: bwrap is not installed";
  // The direct mode's sweep (staged, nothing is walked): past its cap the call fails closed
  // (exit 125, issue 18), and the record says its changes are unwalked.
  WriteFile(dir_ / "scan.toml", "[sandbox]\nmax_scan_entries = 50\nworkspace = \"direct\"\n");
  auto r = Cordon({"exec", "--workspace", dir_ / "ws", "--audit-log", log(), "--policy",
                   dir_ / "scan.toml", "--", "sh", "-c",
                   "mkdir many && cd many && i=0; while [ $i -lt 200 ]; do : > f$i; "
                   "i=$((i+1)); done"});
  ASSERT_EQ(r.exit_code, 125) << r.out << r.err;
  ASSERT_NE(ReadFile(log()).find("\"unwalked\""), std::string::npos) << ReadFile(log());
  auto v = Verify({"--json"});
  EXPECT_EQ(v.exit_code, 0) << v.out;
  Json j = Json::parse(v.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << v.out;
  EXPECT_EQ(j["unwalked"], 1) << v.out;
  EXPECT_NE(j["warnings"].dump().find("changes are unknown"), std::string::npos) << v.out;
  auto text = Verify({});
  EXPECT_NE(text.out.find("warning: line "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("changes are unknown"), std::string::npos) << text.out;
}

// --- failclosed: the record through rotation, deletion, truncation and witness loss (issue 19).
// A `cordon serve` session on stdio, signed and witnessed, whose log or witness is rotated,
// deleted or cut while it runs: every later call still works, the writer continues in the file
// at the path with a link record, and `audit verify` follows the link (and still calls a cut a
// cut).
class LiveLogTest : public CheckpointTest {
 protected:
  void SetUp() override {
    CheckpointTest::SetUp();
    Keygen("k");
  }
  void Serve(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        testing::CordonBin(),  "serve",  "--workspace",     dir_ / "ws", "--audit-log", log(),
        "--audit-signing-key", Key("k"), "--audit-witness", witness()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    serve_ = std::make_unique<testing::LinePeer>(argv, env_);
    serve_->Send(
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
    ASSERT_TRUE(Json::parse(serve_->Line(), nullptr, false).contains("result"));
    serve_->Send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }
  // A create_file call; its error code, or "ok".
  std::string Create(const std::string& name) {
    serve_->Send(Json{
        {"jsonrpc", "2.0"},
        {"id", ++id_},
        {"method", "tools/call"},
        {"params", {{"name", "create_file"}, {"arguments", {{"path", name}, {"content", name}}}}}}
                     .dump());
    Json j = Json::parse(serve_->Line(), nullptr, false);
    if (!j.is_object() || !j.contains("result")) return "no answer: " + j.dump();
    if (!j["result"].value("isError", false)) return "ok";
    return j["result"]["structuredContent"]["error"].value("code", "?") + ": " +
           j["result"]["structuredContent"]["error"].value("message", "");
  }
  int Stop() {
    serve_->CloseInput();
    return serve_->Wait();
  }
  std::vector<Json> Records(const std::string& path) {
    std::vector<Json> out;
    for (const auto& l : Lines(ReadFile(path))) out.push_back(Json::parse(l, nullptr, false));
    return out;
  }
  std::unique_ptr<testing::LinePeer> serve_;
  int id_ = 1;
};

// `audit rotate` under a live session: the session's next calls work; the old file ends with
// log_detached and a checkpoint, the new one carries the writer's link record; the set
// verifies (signed, witnessed), each file verifies alone, and a cut of the old file is caught.
TEST_F(LiveLogTest, RotateUnderALiveSessionContinuesWithALink) {
  Serve();
  ASSERT_EQ(Create("one.txt"), "ok");
  auto rot = Cordon({"audit", "rotate", log(), "--audit-signing-key", Key("k")});
  ASSERT_EQ(rot.exit_code, 0) << rot.out << rot.err;
  EXPECT_EQ(Create("two.txt"), "ok");
  EXPECT_EQ(Create("three.txt"), "ok");
  EXPECT_EQ(Stop(), 0);
  EXPECT_TRUE(testing::Exists(dir_ / "ws/three.txt"));
  const std::string old_log = log() + ".1";
  auto old_recs = Records(old_log);
  ASSERT_GE(old_recs.size(), 2u);
  EXPECT_EQ(old_recs[old_recs.size() - 2]["type"], "log_detached") << ReadFile(old_log);
  EXPECT_EQ(old_recs.back()["type"], "checkpoint") << ReadFile(old_log);
  auto recs = Records(log());
  ASSERT_GE(recs.size(), 2u);
  EXPECT_EQ(recs[0]["type"], "log_started");
  EXPECT_EQ(recs[1]["type"], "log_detached") << ReadFile(log());
  EXPECT_EQ(recs[1]["reason"], "replaced");
  EXPECT_EQ(recs[1]["previous"]["log_id"], old_recs[0]["log_id"]) << recs[1].dump();
  EXPECT_EQ(recs.back()["type"], "checkpoint");
  const std::vector<std::string> proof = {"--pubkey", Pub("k"),    "--witness",
                                          witness(),  "--require", "signed"};
  auto args = [&](std::vector<std::string> files) {
    std::vector<std::string> a = {"audit", "verify"};
    a.insert(a.end(), files.begin(), files.end());
    a.insert(a.end(), proof.begin(), proof.end());
    return a;
  };
  auto both = Cordon(args({old_log, log()}));
  EXPECT_EQ(both.exit_code, 0) << both.out << both.err;
  EXPECT_NE(both.out.find("ok: " + log() + " continues " + old_log), std::string::npos) << both.out;
  EXPECT_EQ(Cordon(args({old_log})).exit_code, 0) << Cordon(args({old_log})).out;
  EXPECT_EQ(Cordon(args({log()})).exit_code, 0) << Cordon(args({log()})).out;
  // The old file cut back to the rotation's end: the writer's link no longer holds.
  const auto old_lines = Lines(ReadFile(old_log));
  WriteFile(old_log, Join(old_lines, old_lines.size() - 2));
  auto cut = Cordon({"audit", "verify", old_log, log(), "--pubkey", Pub("k")});
  EXPECT_EQ(cut.exit_code, 6) << cut.out << cut.err;
}

// The log deleted under a live session: the writer starts the file at the path with a
// log_started whose `previous` links the deleted file's end; the calls go on; verify finds the
// new file whole and reports the deleted one as cut.
TEST_F(LiveLogTest, DeletedLogContinuesInANewFileStartedWithTheLink) {
  Serve();
  ASSERT_EQ(Create("one.txt"), "ok");
  const std::string old_id = Records(log())[0]["log_id"];
  ASSERT_EQ(::unlink(log().c_str()), 0);
  EXPECT_EQ(Create("two.txt"), "ok");
  EXPECT_EQ(Stop(), 0);
  auto recs = Records(log());
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs[0]["type"], "log_started") << ReadFile(log());
  EXPECT_EQ(recs[0]["previous"]["log_id"], old_id) << recs[0].dump();
  EXPECT_EQ(recs[0]["previous"]["reason"], "deleted") << recs[0].dump();
  EXPECT_NE(recs[0]["log_id"], old_id);
  EXPECT_NE(ReadFile(log()).find("two.txt"), std::string::npos);
  // What the deleted file held is gone: the new file verifies in itself, and verify says the
  // log it continues was deleted under its writer (a cut, exit 6), with or without the witness.
  auto v = Verify({"--pubkey", Pub("k"), "--witness", witness(), "--require", "signed"});
  EXPECT_EQ(v.exit_code, 6) << v.out << v.err;
  EXPECT_NE(v.out.find("found log " + old_id + " deleted under it"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("checkpoints: 1 signed"), std::string::npos) << v.out;
}

// A log truncated in place (to nothing, or into its middle) under a live session: the writer
// notices by size, continues with a link record, and verify calls the log cut, with or without
// the witness.
TEST_F(LiveLogTest, LogTruncatedInPlaceIsNoticedAndIsACut) {
  for (const bool to_zero : {false, true}) {
    SCOPED_TRACE(to_zero ? "truncated to 0" : "truncated to half");
    std::filesystem::remove(log());
    std::filesystem::remove(witness());
    Serve();
    ASSERT_EQ(Create(std::string("a") + (to_zero ? "0" : "1")), "ok");
    ASSERT_EQ(Create(std::string("b") + (to_zero ? "0" : "1")), "ok");
    const auto size = std::filesystem::file_size(log());
    ASSERT_EQ(::truncate(log().c_str(), to_zero ? 0 : static_cast<off_t>(size / 2)), 0);
    EXPECT_EQ(Create(std::string("c") + (to_zero ? "0" : "1")), "ok");
    EXPECT_EQ(Stop(), 0);
    const std::string text = ReadFile(log());
    EXPECT_NE(text.find("\"reason\":\"truncated\""), std::string::npos) << text;
    auto alone = Verify({"--pubkey", Pub("k")});
    EXPECT_EQ(alone.exit_code, 6) << alone.out;
    EXPECT_NE(alone.out.find("truncated"), std::string::npos) << alone.out;
    EXPECT_EQ(Verify({"--pubkey", Pub("k"), "--witness", witness()}).exit_code, 6);
  }
}

// The witness deleted, or truncated, under a live session: the next checkpoint goes to the
// file at the path, after the last one the writer gave the lost witness, marked `restarted`;
// verify with it passes with a warning that names the loss.
TEST_F(LiveLogTest, WitnessDeletedOrTruncatedMidSessionIsNoticed) {
  WriteFile(dir_ / "every.toml", "[audit]\ncheckpoint_records = 1\n");
  for (const bool deleted : {true, false}) {
    SCOPED_TRACE(deleted ? "deleted" : "truncated");
    std::filesystem::remove(log());
    std::filesystem::remove(witness());
    Serve({"--policy", dir_ / "every.toml"});
    ASSERT_EQ(Create(std::string("w") + (deleted ? "d" : "t")), "ok");
    ASSERT_TRUE(testing::Exists(witness()));
    ASSERT_FALSE(ReadFile(witness()).empty()) << "a checkpoint every record";
    if (deleted) {
      ASSERT_EQ(::unlink(witness().c_str()), 0);
    } else {
      ASSERT_EQ(::truncate(witness().c_str(), 0), 0);
    }
    EXPECT_EQ(Create(std::string("x") + (deleted ? "d" : "t")), "ok");
    EXPECT_EQ(Stop(), 0);
    const std::string w = ReadFile(witness());
    EXPECT_NE(w.find(std::string("\"restarted\":{\"bytes\":")), std::string::npos) << w;
    EXPECT_NE(w.find(deleted ? "\"reason\":\"deleted\"" : "\"reason\":\"truncated\""),
              std::string::npos)
        << w;
    auto v = Verify({"--pubkey", Pub("k"), "--witness", witness()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    EXPECT_NE(v.out.find(deleted ? "the witness was deleted" : "the witness was truncated"),
              std::string::npos)
        << v.out;
  }
}

// --witness that proves nothing (empty, no checkpoint line, missing) is an error, not a pass.
TEST_F(CheckpointTest, EmptyOrMissingWitnessIsAnError) {
  Keygen("k");
  SignedCall(Key("k"));
  ASSERT_EQ(Verify({"--pubkey", Pub("k"), "--witness", witness()}).exit_code, 0);
  WriteFile(dir_ / "empty.jsonl", "");
  auto empty = Verify({"--pubkey", Pub("k"), "--witness", dir_ / "empty.jsonl"});
  EXPECT_EQ(empty.exit_code, 3) << empty.out << empty.err;
  EXPECT_NE(empty.err.find("holds no checkpoint"), std::string::npos) << empty.err;
  WriteFile(dir_ / "noise.txt", "Dec 01 host sshd[1]: something else\n");
  EXPECT_EQ(Verify({"--witness", dir_ / "noise.txt"}).exit_code, 3);
  auto missing = Verify({"--pubkey", Pub("k"), "--witness", dir_ / "missing.jsonl"});
  EXPECT_EQ(missing.exit_code, 3) << missing.out << missing.err;
}

// Every key cordon reads (the HMAC chain key, the signing key, serve --http's token) is refused
// when group or others can read it, with one message and one code.
TEST_F(CheckpointTest, EveryKeyOthersCanReadIsRefusedAlike) {
  Keygen("k");
  WriteFile(dir_ / "hmac.key", "0123456789abcdef0123456789abcdef\n");
  WriteFile(dir_ / "token", "a-bearer-token-0123456789\n");
  for (const std::string& f : {dir_ / "hmac.key", Key("k"), dir_ / "token"}) {
    ASSERT_EQ(::chmod(f.c_str(), 0640), 0);
  }
  const std::string read = R"({"path":"hello.txt","start_line":1})";
  auto expect_refused = [&](const testing::RunResult& r, const std::string& file) {
    EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
    EXPECT_NE(r.err.find("denied_by_policy: key file " + file +
                         " can be read or written by group or other users (mode 640): whoever "
                         "reads a key can forge what it protects; chmod 600 it"),
              std::string::npos)
        << r.err;
  };
  expect_refused(Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log",
                         log(), "--audit-key-file", dir_ / "hmac.key", "--json", read}),
                 dir_ / "hmac.key");
  EXPECT_FALSE(testing::Exists(log())) << "refused before the log was opened";
  expect_refused(Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log",
                         log(), "--audit-signing-key", Key("k"), "--json", read}),
                 Key("k"));
  expect_refused(Cordon({"serve", "--workspace", dir_ / "ws", "--http", "127.0.0.1:9",
                         "--token-file", dir_ / "token"}),
                 dir_ / "token");
  WriteFile(log(), "");
  expect_refused(Cordon({"audit", "verify", log(), "--key-file", dir_ / "hmac.key"}),
                 dir_ / "hmac.key");
  expect_refused(Cordon({"audit", "rotate", log(), "--audit-signing-key", Key("k")}), Key("k"));
  // At 0600 each is taken.
  for (const std::string& f : {dir_ / "hmac.key", Key("k")}) ASSERT_EQ(::chmod(f.c_str(), 0600), 0);
  std::filesystem::remove(log());
  auto ok = Cordon({"call", "read_file_range", "--workspace", dir_ / "ws", "--audit-log", log(),
                    "--audit-key-file", dir_ / "hmac.key", "--audit-signing-key", Key("k"),
                    "--json", read});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

}  // namespace
}  // namespace cordon
