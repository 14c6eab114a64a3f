// `cordon audit report`: the page for logs the real binary wrote, loaded in Debian's headless
// Chromium over the DevTools protocol (tests/report_browser.py): no console error or CSP
// violation, the known counts, the red banner for an edited log, hostile log values shown as
// text and never run, the same bytes for the same log.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "audit/report.h"
#include "core/text.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::RunResult;
using testing::TempDir;
using testing::WriteFile;

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= p.size();) {
    std::size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string cand = p.substr(start, end - start) + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

std::size_t Occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// The data block of a page, parsed (its \u escapes are JSON's own).
Json DataOf(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"cordon-audit-data\">";
  const std::size_t at = html.find(open);
  if (at == std::string::npos) return Json();
  const std::size_t end = html.find("</script>", at);
  return Json::parse(html.substr(at + open.size(), end - at - open.size()), nullptr, false);
}

// The hostile values a run puts into the log: each would set window.__cordonPwned if the page
// ever ran it as markup or script.
const std::string kScriptEnd = "</script><script>window.__cordonPwned=1</script>";
const std::string kBreakout = "\"><img src=x onerror=window.__cordonPwned=2>";
const std::string kJsUrl = "javascript:window.__cordonPwned=3";
const std::string kLineSep = "line\xE2\x80\xA8sep.txt";  // U+2028

// What the page says, read in the page: the counts, the banner, the text, what elements and
// attributes exist, the sentinel, and the timeline's filters driven as a user would.
constexpr const char* kProbe = R"JS((function () {
  const q = (s) => document.querySelector(s);
  const count = (k) => { const e = q('[data-count="' + k + '"]'); return e ? Number(e.textContent) : -1; };
  const shown = () => Number(q('#filter-shown').dataset.shown);
  const set = (id, v) => { const e = q('#' + id); if (e.type === 'checkbox') e.checked = v; else e.value = v;
    e.dispatchEvent(new Event(e.tagName === 'INPUT' && e.type !== 'checkbox' ? 'input' : 'change')); };
  let on = 0;
  for (const e of document.querySelectorAll('*')) for (const a of e.attributes) if (/^on/i.test(a.name)) on++;
  const out = { pwned: typeof window.__cordonPwned, status: q('#verdict') ? q('#verdict').dataset.status : '',
    banners: Array.from(document.querySelectorAll('.banner h2')).map((e) => e.textContent),
    text: document.body.textContent, on_attributes: on,
    elements: { img: document.querySelectorAll('img').length, a: document.querySelectorAll('a').length,
      iframe: document.querySelectorAll('iframe,object,embed').length,
      script: document.querySelectorAll('script').length, svg_rect: document.querySelectorAll('svg rect').length },
    counts: {}, filters: {} };
  for (const k of ['sessions', 'calls', 'commands', 'files', 'denials', 'network', 'errors']) out.counts[k] = count(k);
  if (q('#filter-shown')) {
    out.filters.all = shown();
    set('filter-denied', true); out.filters.denied = shown(); set('filter-denied', false);
    set('filter-errors', true); out.filters.errors = shown(); set('filter-errors', false);
    set('filter-changes', true); out.filters.changes = shown(); set('filter-changes', false);
    set('filter-type', 'process'); out.filters.process = shown(); set('filter-type', '');
    set('filter-tool', 'create_file'); out.filters.create_file = shown(); set('filter-tool', '');
    set('filter-path', 'made'); out.filters.path_made = shown(); set('filter-path', '');
  }
  return JSON.stringify(out);
})())JS";

class AuditReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    std::filesystem::create_directories(dir_ / "home");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "HOME=" + (dir_ / "home")};
  }
  RunResult Cordon(std::vector<std::string> args) {
    args.insert(args.begin(), testing::CordonBin());
    return testing::Run(args, env_);
  }
  std::string Log() const { return dir_ / "audit.jsonl"; }
  std::vector<std::string> Signing() const {
    return {"--audit-signing-key", dir_ / "k/audit-signing.key", "--audit-witness", Witness()};
  }
  std::string Witness() const { return dir_ / "witness.jsonl"; }
  std::string Pub() const { return dir_ / "k/audit-signing.pub"; }
  RunResult Call(const std::string& tool, const Json& args, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"call",        tool,  "--workspace", ws_,
                                  "--audit-log", Log(), "--json",      args.dump()};
    a.insert(a.end(), extra.begin(), extra.end());
    for (const auto& s : Signing()) a.push_back(s);
    return Cordon(a);
  }
  RunResult Exec(std::vector<std::string> cmd, std::vector<std::string> opts = {}) {
    std::vector<std::string> a = {"exec", "--workspace", ws_, "--audit-log", Log()};
    a.insert(a.end(), opts.begin(), opts.end());
    for (const auto& s : Signing()) a.push_back(s);
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return Cordon(a);
  }
  RunResult Report(const std::string& log, const std::string& out,
                   std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"audit", "report", log, "-o", out};
    a.insert(a.end(), extra.begin(), extra.end());
    return Cordon(a);
  }
  // The pages in one Chromium; the first is captured when `screenshot` is not empty.
  Json Browse(const std::vector<std::string>& pages, const std::string& screenshot = "") {
    std::vector<std::string> a = {FindOnPath("python3"),
                                  std::string(CORDON_SOURCE_DIR) + "/tests/report_browser.py",
                                  chromium_, kProbe};
    if (!screenshot.empty()) a.insert(a.end(), {"--screenshot", screenshot});
    a.insert(a.end(), pages.begin(), pages.end());
    RunResult r = testing::Run(a);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    Json j = Json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out << r.err;
    return j.is_object() ? j["pages"] : Json::array();
  }

  TempDir dir_;
  std::string ws_, chromium_;
  std::vector<std::string> env_;
};

TEST(ReportJson, EscapesWhatCouldEndOrBendTheScriptElement) {
  EXPECT_EQ(ReportJsonForScript(R"({"a":"</script><!--&"})"),
            R"({"a":"\u003c/script\u003e\u003c!--\u0026"})");
  EXPECT_EQ(ReportJsonForScript("\"a\xE2\x80\xA8"
                                "b\xE2\x80\xA9"
                                "c\xE2\x80\xAA\""),
            "\"a\\u2028b\\u2029c\xE2\x80\xAA\"");
  // Still the same JSON.
  const Json j = {{"k", "</script>\xE2\x80\xA8&<"}};
  EXPECT_EQ(Json::parse(ReportJsonForScript(j.dump())), j);
  EXPECT_EQ(CspSha256(""), "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='");
}

TEST_F(AuditReportTest, OutputIsRequiredAndDashIsStdout) {
  WriteFile(ws_ + "/hello.txt", "hello\n");
  ASSERT_EQ(Cordon({"call", "read_file_range", "--workspace", ws_, "--audit-log", Log(), "--json",
                    R"({"path":"hello.txt","start_line":1})"})
                .exit_code,
            0);
  auto none = Cordon({"audit", "report", Log()});
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("audit report needs -o FILE (or -o - for stdout)"), std::string::npos)
      << none.err;
  // A chain-only log: intact (verify's exit 0) but nothing proves it complete.
  auto file = Report(Log(), dir_ / "r.html");
  EXPECT_EQ(file.exit_code, 0) << file.out << file.err;
  // Private as the log is; written under another name and renamed: nothing else left behind.
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "r.html").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
  auto nowhere = Report(Log(), dir_ / "missing/r.html");
  EXPECT_EQ(nowhere.exit_code, 3) << nowhere.out << nowhere.err;
  EXPECT_NE(nowhere.err.find("missing/r.html.tmp."), std::string::npos) << nowhere.err;
  // Never over an input.
  const std::string before = ReadFile(Log());
  auto over = Report(Log(), Log());
  EXPECT_EQ(over.exit_code, 2) << over.out << over.err;
  EXPECT_NE(over.err.find("the report never replaces a log or the witness"), std::string::npos)
      << over.err;
  EXPECT_TRUE(ReadFile(Log()) == before) << "the report replaced the log";
  auto out = Report(Log(), "-");
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.out, ReadFile(dir_ / "r.html"));
  EXPECT_EQ(DataOf(out.out)["logs"][0]["status"], "not_proven");
  auto missing = Report(dir_ / "nope.jsonl", dir_ / "n.html");
  EXPECT_EQ(missing.exit_code, 3) << missing.out << missing.err;
  const Json n = DataOf(ReadFile(dir_ / "n.html"));
  EXPECT_EQ(n["logs"][0]["status"], "failed");
  EXPECT_EQ(n["logs"][0]["verification"]["verdict"], "unreadable");
}

TEST_F(AuditReportTest, OnlyAnIntactLogProvenCompleteIsOkAndTheExitCodeIsVerifys) {
  ASSERT_EQ(Cordon({"audit", "keygen", "--out", dir_ / "k"}).exit_code, 0);
  WriteFile(ws_ + "/hello.txt", "hello\n");
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(Call("read_file_range", {{"path", "hello.txt"}, {"start_line", 1}}).exit_code, 0);
  }
  // {extra arguments, the page's status, its verdict, the exit code}
  auto check = [&](const std::vector<std::string>& extra, const std::string& status,
                   const std::string& verdict, int code) {
    const std::string page = dir_ / "r.html";
    auto r = Report(Log(), page, extra);
    EXPECT_EQ(r.exit_code, code) << r.out << r.err;
    std::vector<std::string> v = {"audit", "verify", Log()};
    v.insert(v.end(), extra.begin(), extra.end());
    EXPECT_EQ(Cordon(v).exit_code, code) << "not verify's exit code";
    const Json d = DataOf(ReadFile(page));
    EXPECT_EQ(d["exit_code"], code);
    EXPECT_EQ(d["logs"][0]["status"], status) << ::testing::PrintToString(extra);
    EXPECT_EQ(d["logs"][0]["verification"]["verdict"], verdict) << ::testing::PrintToString(extra);
  };
  check({"--pubkey", Pub(), "--witness", Witness()}, "ok", "intact", 0);
  // Without the public key nothing proves the checkpoints: intact, not proven complete.
  check({}, "not_proven", "intact", 0);
  // The second session's session_finished and checkpoint cut off.
  auto lines = Lines(ReadFile(Log()));
  std::string cut;
  for (std::size_t i = 0; i + 2 < lines.size(); ++i) cut += lines[i] + "\n";
  WriteFile(Log(), cut);
  check({"--pubkey", Pub()}, "failed", "unproven_tail", 5);
  check({"--pubkey", Pub(), "--witness", Witness()}, "failed", "cut", 6);
}

// A directory of rotated files: the link from the newer file to the older is checked as verify
// checks it, and a cut older file fails the page and the exit code (6) as it fails verify.
TEST_F(AuditReportTest, RotationLinksAreCheckedAsVerifyChecksThem) {
  ASSERT_EQ(Cordon({"audit", "keygen", "--out", dir_ / "k"}).exit_code, 0);
  WriteFile(ws_ + "/hello.txt", "hello\n");
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(Call("read_file_range", {{"path", "hello.txt"}, {"start_line", 1}}).exit_code, 0);
  }
  ASSERT_EQ(Cordon({"audit", "rotate", Log(), "--audit-signing-key", dir_ / "k/audit-signing.key"})
                .exit_code,
            0);
  ASSERT_EQ(Call("read_file_range", {{"path", "hello.txt"}, {"start_line", 1}}).exit_code, 0);
  std::filesystem::create_directories(dir_ / "logs");
  std::filesystem::copy_file(Log() + ".1", dir_ / "logs/audit.jsonl.1");
  std::filesystem::copy_file(Log(), dir_ / "logs/audit.jsonl");
  const std::string page = dir_ / "r.html";
  auto whole = Report(dir_ / "logs", page, {"--pubkey", Pub()});
  EXPECT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  Json d = DataOf(ReadFile(page));
  ASSERT_EQ(d["logs"].size(), 2u);
  EXPECT_EQ(d["logs"][0]["path"], dir_ / "logs/audit.jsonl");  // sorted by name
  ASSERT_EQ(d["logs"][0]["links"].size(), 1u) << d["logs"][0]["links"];
  EXPECT_EQ(d["logs"][0]["links"][0]["ok"], true);
  EXPECT_EQ(d["logs"][0]["status"], "ok");
  // The older file cut after its first checkpoint: alone it verifies; the link catches it.
  const auto old_lines = Lines(ReadFile(dir_ / "logs/audit.jsonl.1"));
  std::string cut;
  for (const auto& l : old_lines) {
    cut += l + "\n";
    if (Json::parse(l)["type"] == "checkpoint") break;
  }
  WriteFile(dir_ / "logs/audit.jsonl.1", cut);
  auto r = Report(dir_ / "logs", page, {"--pubkey", Pub()});
  EXPECT_EQ(r.exit_code, 6) << r.out << r.err;
  EXPECT_EQ(Cordon({"audit", "verify", dir_ / "logs", "--pubkey", Pub()}).exit_code, 6);
  d = DataOf(ReadFile(page));
  EXPECT_EQ(d["exit_code"], 6);
  EXPECT_EQ(d["logs"][0]["links"][0]["ok"], false);
  EXPECT_EQ(d["logs"][0]["status"], "failed");
}

TEST_F(AuditReportTest, ARealLogInChromium) {
  if (::access("/usr/bin/bwrap", X_OK) != 0) SECURITY_SKIP("bwrap is not installed");
  chromium_ = FindOnPath("chromium");
  if (chromium_.empty()) {
    SECURITY_SKIP(
        "chromium is not installed (Debian: chromium; scripts/install-deps.sh): the "
        "report's script, CSP and escaping are untested in a browser");
  }
  if (FindOnPath("python3").empty()) SECURITY_SKIP("python3 is not installed");
  ASSERT_EQ(Cordon({"audit", "keygen", "--out", dir_ / "k"}).exit_code, 0);

  // A session of each kind, with hostile values in file names, argv and tool arguments.
  auto made = Call("create_file", {{"path", kBreakout}, {"content", "x\n"}});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  ASSERT_EQ(Call("create_file", {{"path", kJsUrl}, {"content", "x\n"}}).exit_code, 0);
  ASSERT_EQ(Call("create_file", {{"path", kLineSep}, {"content", "x\n"}}).exit_code, 0);
  // not_found; its arguments are recorded.
  Call("read_file_range", {{"path", kScriptEnd}, {"start_line", 1}});
  auto fail = Exec({"/bin/sh", "-c", "echo hi > made.txt; exit 3"});
  ASSERT_EQ(fail.exit_code, 3) << fail.out << fail.err;
  ASSERT_EQ(Exec({"/bin/echo", kScriptEnd, kLineSep}).exit_code, 0);
  WriteFile(dir_ / "ro.toml", "[scopes]\ngrant = [\"!process:run\"]\n");
  EXPECT_NE(
      Call("run_shell", {{"program", "touch"}, {"args", {"y.txt"}}}, {"--policy", dir_ / "ro.toml"})
          .exit_code,
      0);
  Exec({"/usr/bin/curl", "-sS", "--max-time", "20", "http://refused.example.test/"},
       {"--network", "proxy"});
  // An approval no one could give (issue 34), a hostile value in the command it asked about.
  EXPECT_EQ(Exec({"git", "push", kBreakout}, {"--non-interactive"}).exit_code, 125);

  const std::string good = dir_ / "good.html";
  const std::vector<std::string> verify = {"--pubkey", Pub(), "--witness", Witness()};
  auto r = Report(Log(), good, verify);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string html = ReadFile(good);
  // The same log gives the same bytes.
  ASSERT_EQ(Report(Log(), dir_ / "again.html", verify).exit_code, 0);
  EXPECT_EQ(ReadFile(dir_ / "again.html"), html) << "two reports of one log differ";
  // In the bytes: the data cannot end its element; U+2028 is escaped; nothing is fetched.
  EXPECT_EQ(Occurrences(html, "</script>"), 2u);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("\xE2\x80\xA8"), std::string::npos);
  EXPECT_NE(html.find("content=\"default-src 'none'; script-src 'sha256-"), std::string::npos);

  // Line 4 edited: the report still comes out, with verify's exit code.
  auto lines = Lines(ReadFile(Log()));
  // (the first create_file's file_write: its size edited, the JSON still whole)
  ASSERT_NE(lines[3].find("\"bytes_after\":2,"), std::string::npos) << lines[3];
  lines[3].replace(lines[3].find("\"bytes_after\":2,"), 16, "\"bytes_after\":3,");
  std::string edited;
  for (const auto& l : lines) edited += l + "\n";
  // And what no writer makes: fields of the wrong shape, and a line that is not JSON.
  edited += R"({"type":"process","argv":"sh","changes":{"entries":[null,5],"counts":"x"},)"
            R"("denials":[null],"error":"x","limit":3,"session":7,"ts":7,"_verified":"x"})"
            "\n<script>window.__cordonPwned=5</script>\n";
  WriteFile(dir_ / "edited.jsonl", edited);
  const std::string bad = dir_ / "edited.html";
  auto e = Report(dir_ / "edited.jsonl", bad, {"--pubkey", Pub()});
  EXPECT_EQ(e.exit_code, 1) << e.out << e.err;
  // A control: one byte of the page's script changed, so its hash no longer matches the CSP.
  // The browser must refuse it and say so, or "no console errors" below would prove nothing.
  std::string tampered = html;
  const std::size_t strict = tampered.rfind("'use strict';");
  ASSERT_NE(strict, std::string::npos);
  tampered.replace(strict, 13, "'use strict' ;");
  WriteFile(dir_ / "tampered.html", tampered);

  // The known numbers, from the log itself.
  std::size_t calls = 0, commands = 0, denied = 0, network = 0;
  for (const auto& l : Lines(ReadFile(Log()))) {
    Json j = Json::parse(l);
    const std::string type = j["type"];
    calls += type == "tool_started";
    commands += type == "process";
    denied += type == "policy_denied" || (type == "network" && j["decision"] == "denied") ||
              (type == "approval" && j["answer"] != "once" && j["answer"] != "session");
    network += type == "network";
  }
  EXPECT_EQ(commands, 3u);
  EXPECT_EQ(denied, 3u);

  const char* shot = std::getenv("CORDON_REPORT_SCREENSHOT");
  Json pages = Browse({good, bad, dir_ / "tampered.html"}, shot != nullptr ? shot : "");
  ASSERT_EQ(pages.size(), 3u);

  const Json& g = pages[0];
  EXPECT_TRUE(g["rendered"].get<bool>()) << g["console"].dump(2);
  for (const auto& c : g["console"]) {
    EXPECT_NE(c.value("level", ""), "error") << c.dump();
    EXPECT_NE(c.value("level", ""), "warning") << c.dump();
  }
  EXPECT_TRUE(g["exceptions"].empty()) << g["exceptions"].dump(2);
  EXPECT_EQ(g["requests"], Json::array({"file://" + good})) << g["requests"].dump();
  ASSERT_TRUE(g["result"].is_string()) << g["eval_exception"].dump(2);
  const Json p = Json::parse(g["result"].get<std::string>());
  EXPECT_EQ(p["status"], "ok") << p["banners"].dump();
  EXPECT_EQ(p["counts"]["calls"], calls);
  EXPECT_EQ(p["counts"]["commands"], 3);
  // The three created files, and made.txt.
  EXPECT_EQ(p["counts"]["files"], 4);
  EXPECT_EQ(p["counts"]["denials"], 3);
  EXPECT_EQ(p["counts"]["network"], network);
  EXPECT_EQ(p["pwned"], "undefined") << "a hostile value ran";
  EXPECT_EQ(p["on_attributes"], 0);
  EXPECT_EQ(p["elements"]["img"], 0);
  EXPECT_EQ(p["elements"]["a"], 0);
  EXPECT_EQ(p["elements"]["iframe"], 0);
  EXPECT_EQ(p["elements"]["script"], 2);
  EXPECT_GT(p["elements"]["svg_rect"], 0) << "no bar in the chart";
  const std::string text = p["text"];
  for (const std::string& hostile : {kScriptEnd, kBreakout, kJsUrl, kLineSep}) {
    EXPECT_NE(text.find(hostile), std::string::npos) << "not shown as text: " << hostile;
  }
  // The approvals table: the rule, how it was asked and the answer.
  EXPECT_NE(text.find("execlaunchgit push"), std::string::npos) << "no approvals row";
  EXPECT_NE(text.find("noneno_client"), std::string::npos) << "no approvals row";
  // The filters, on the timeline's rows (every record).
  EXPECT_EQ(p["filters"]["all"], lines.size());
  EXPECT_EQ(p["filters"]["denied"], 3);
  EXPECT_EQ(p["filters"]["process"], 3);
  EXPECT_EQ(p["filters"]["create_file"], 9);  // tool_started, file_write, tool_finished each
  EXPECT_EQ(p["filters"]["path_made"], 1);    // the process that wrote made.txt
  EXPECT_GE(p["filters"]["errors"], 3);       // exit 3, the not_found read, the denied call
  EXPECT_GE(p["filters"]["changes"], 4);

  const Json& b = pages[1];
  EXPECT_TRUE(b["rendered"].get<bool>()) << b["console"].dump(2);
  for (const auto& c : b["console"]) EXPECT_NE(c.value("level", ""), "error") << c.dump();
  EXPECT_TRUE(b["exceptions"].empty()) << b["exceptions"].dump(2);
  const Json pb = Json::parse(b["result"].get<std::string>());
  EXPECT_EQ(pb["pwned"], "undefined");
  EXPECT_NE(pb["text"].get<std::string>().find("not a record"), std::string::npos);
  EXPECT_EQ(pb["status"], "bad");
  ASSERT_GE(pb["banners"].size(), 2u);
  EXPECT_NE(pb["banners"][1].get<std::string>().find("FAILED: broken (exit code 1)"),
            std::string::npos)
      << pb["banners"].dump();
  EXPECT_NE(pb["text"].get<std::string>().find("line 4 and every line after it are marked !"),
            std::string::npos);

  const Json& t = pages[2];
  EXPECT_FALSE(t["rendered"].get<bool>()) << "a script whose hash is not in the CSP ran";
  bool refused = false;
  for (const auto& c : t["console"]) {
    refused = refused || (c.value("level", "") == "error" &&
                          c.value("text", "").find("Content Security Policy") != std::string::npos);
  }
  EXPECT_TRUE(refused) << t["console"].dump(2);
}

}  // namespace
}  // namespace cordon
