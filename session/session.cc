// The dispatch path, in DESIGN.md's order; every call leaves tool_started and tool_finished.
#include "session/session.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/hash.h"
#include "core/version.h"
#include "runner/host_probe.h"
#include "tools/schema.h"

namespace cordon {
namespace {

// Summarizes tool arguments for the audit log: file contents never enter a record.
Json SummarizeArgs(const Json& args) {
  if (args.is_string()) {
    const auto& s = args.get_ref<const std::string&>();
    if (s.size() <= 256) return args;
    return {{"bytes", s.size()}, {"sha256", Sha256Hex(s)}};
  }
  if (args.is_array()) {
    Json out = Json::array();
    for (const auto& a : args) out.push_back(SummarizeArgs(a));
    return out;
  }
  if (args.is_object()) {
    Json out = Json::object();
    for (const auto& [k, v] : args.items()) {
      if ((k == "content" || k == "old_string" || k == "new_string") && v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        out[k] = {{"bytes", s.size()}, {"sha256", Sha256Hex(s)}};
      } else {
        out[k] = SummarizeArgs(v);
      }
    }
    return out;
  }
  return args;
}

// The writer's key: the shared reader, plus a minimum length a keyed chain needs.
Result<std::string> ReadAuditKey(const std::string& path) {
  ASSIGN_OR_RETURN(std::string key, ReadKeyFile(path));
  if (key.size() < 16) {
    return Fail(Code::kInvalidInput, "audit key file " + path + " holds fewer than 16 bytes");
  }
  return key;
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Start(const SessionOptions& options, char** envp) {
  auto s = std::unique_ptr<Session>(new Session());
  ASSIGN_OR_RETURN(s->workspace_, Workspace::Open(options.workspace));
  PolicySources sources = DefaultPolicySources(options.shipped_policy_dir, s->workspace_.root());
  sources.extra_files = options.policy_files;
  ASSIGN_OR_RETURN(s->policy_, LoadPolicy(sources));
  s->redactor_.AddSecretEnvironment(envp);
  for (const auto& v : s->policy_.redact_values) s->redactor_.AddValue("policy", v);
  for (const auto& name : s->policy_.redact_env_names) {
    for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      if (entry.size() > name.size() && entry.substr(0, name.size()) == name &&
          entry[name.size()] == '=') {
        s->redactor_.AddValue("env", std::string(entry.substr(name.size() + 1)));
      }
    }
  }
  std::optional<std::string> key;
  if (options.audit_key_file) {
    ASSIGN_OR_RETURN(key, ReadAuditKey(*options.audit_key_file));
  }
  const std::string session_id = NewSessionId();
  const std::string path =
      options.audit_log.empty() ? DefaultAuditLogPath(session_id) : options.audit_log;
  ASSIGN_OR_RETURN(AuditWriter writer, AuditWriter::Open(path, session_id, s->policy_.audit_fsync,
                                                         std::move(key), &s->redactor_));
  s->audit_.emplace(std::move(writer));
  Json files = Json::array();
  for (const auto& f : s->policy_.files) {
    files.push_back({{"path", f.path}, {"sha256", f.sha256}, {"layer", f.layer}});
  }
  Json fields = {{"cordon_version", kCordonVersion},
                 {"client", options.client},
                 {"workspace", s->workspace_.root()},
                 {"chain", s->audit_->keyed() ? "hmac-sha256" : "sha256"},
                 {"policy_sha256", s->policy_.Sha256()},
                 {"policy_files", files},
                 {"policy_notes", s->policy_.notes},
                 {"scopes", s->policy_.scopes},
                 {"confinement", ConfinementJson(ProbeConfinement())}};
  // The one host probe of the session: recorded here, then used for every process.
  auto host = PrepareSandboxHost(s->policy_, options.shim_path);
  fields["sandbox"] =
      host ? host->ToJson() : Json{{"available", false}, {"error", host.error().message}};
  s->Audit("session_started", std::move(fields), true);
  Session* raw = s.get();
  s->processes_ = std::make_unique<ProcessHost>(s->policy_, s->workspace_, std::move(host), envp,
                                                [raw](std::string_view type, Json f, bool durable) {
                                                  raw->Audit(type, std::move(f), durable);
                                                });
  return s;
}

Session::~Session() { Finish(); }

void Session::Finish() {
  if (finished_ || !audit_) return;
  finished_ = true;
  processes_.reset();  // cancels and reaps background jobs; their records come first
  Audit("session_finished", {{"calls", calls_.load()}, {"errors", errors_.load()}}, true);
  // The session's end makes every durable record durable: nothing is left in flight.
  if (auto st = audit_->Flush(); !st) {
    std::fprintf(stderr, "cordon: audit write failed: %s\n", st.error().ToString().c_str());
  }
}

void Session::Audit(std::string_view type, Json fields, bool durable) {
  AuditWriter::Record one{type, std::move(fields)};
  AuditAll(std::span<AuditWriter::Record>(&one, 1), durable);
}

void Session::AuditAll(std::span<AuditWriter::Record> records, bool durable) {
  if (!audit_) return;
  std::lock_guard<std::mutex> lock(audit_mu_);
  if (auto st = audit_->AppendAll(records, durable); !st) {
    // Losing the audit trail must be loud; the call result still reaches the caller.
    std::fprintf(stderr, "cordon: audit write failed: %s\n", st.error().ToString().c_str());
  }
}

std::vector<const ToolSpec*> Session::Catalog() const { return GrantedTools(policy_); }

Json Session::CallJsonText(const std::string& tool, std::string_view input_text) {
  ParseLimits limits;
  limits.max_bytes = static_cast<std::size_t>(policy_.limits.max_input_bytes);
  auto parsed = ParseJsonBounded(input_text, limits);
  if (!parsed) {
    ++calls_;
    ++errors_;
    Audit("tool_started", {{"tool", tool}, {"input_bytes", input_text.size()}}, false);
    Audit("tool_finished",
          {{"tool", tool},
           {"status", "error"},
           {"code", CodeName(parsed.error().code)},
           {"message", parsed.error().message},
           {"output_bytes", 0},
           {"truncated", false},
           {"elapsed_ms", 0}},
          true);
    return MakeErrorResult(parsed.error());
  }
  return Call(tool, *parsed);
}

bool CapToolResult(Json& result, std::size_t cap) {
  // The same output cap as built-in tools: each text item is cut at max_output_bytes, and a
  // structuredContent that is far larger than the cap is dropped (it cannot be cut and stay
  // valid against its schema).
  bool truncated = false;
  if (result.contains("content") && result["content"].is_array()) {
    for (auto& item : result["content"]) {
      if (item.is_object() && item.value("type", "") == "text" && item.contains("text") &&
          item["text"].is_string()) {
        std::string& text = item["text"].get_ref<std::string&>();
        if (text.size() > cap) {
          const std::size_t dropped = text.size() - cap;
          text = RepairUtf8(std::string_view(text).substr(0, cap)) +
                 "\n[cordon: " + std::to_string(dropped) + " bytes of output dropped]";
          truncated = true;
        }
      }
    }
  }
  if (result.contains("structuredContent") && result["structuredContent"].dump().size() > cap * 4) {
    result.erase("structuredContent");
    truncated = true;
  }
  return truncated;
}

Json Session::CallExternal(const std::string& tool, const Json& input, std::uint64_t call_id,
                           const std::atomic<bool>* cancel) {
  const auto t0 = std::chrono::steady_clock::now();
  Audit("tool_started",
        {{"call", call_id},
         {"tool", tool},
         {"scope", "mcp:call"},
         {"effect", "process"},
         {"args", SummarizeArgs(input)}},
        false);
  Json record;
  Result<Json> outcome = [&]() -> Result<Json> {
    if (!input.is_object()) return Fail(Code::kInvalidInput, "tool input must be a JSON object");
    if (!policy_.Grants("mcp:call")) {
      Audit("policy_denied",
            {{"call", call_id}, {"tool", tool}, {"scope", "mcp:call"}, {"rule", "scopes.grant"}},
            true);
      return Fail(Code::kDeniedByPolicy,
                  tool + " needs scope mcp:call, which the policy does not grant");
    }
    return external_->Call(tool, input, &record, cancel);
  }();
  Json result;
  std::size_t redactions = 0;
  bool truncated = false;
  if (outcome && outcome->is_object() && outcome->contains("content")) {
    result = std::move(*outcome);
    truncated = CapToolResult(result, static_cast<std::size_t>(policy_.limits.max_output_bytes));
    redactions = redactor_.RedactJson(result);
    if (!result.contains("isError")) result["isError"] = false;
  } else {
    Error e = outcome
                  ? Error{Code::kServerUnavailable, "the server returned no CallToolResult", 0, {}}
                  : outcome.error();
    redactions = redactor_.Redact(e.message);
    result = MakeErrorResult(e);
  }
  if (result["isError"].get<bool>()) ++errors_;
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  Json finished = {{"call", call_id},
                   {"tool", tool},
                   {"status", result["isError"].get<bool>() ? "error" : "ok"},
                   {"output_bytes", DumpJson(result).size()},
                   {"truncated", truncated},
                   {"elapsed_ms", static_cast<double>(elapsed) / 1000.0}};
  for (const auto& [k, v] : record.items()) finished[k] = v;
  if (result.contains("structuredContent") && result["structuredContent"].contains("error")) {
    finished["code"] = result["structuredContent"]["error"].value("code", "");
  }
  if (redactions > 0) finished["output_redactions"] = redactions;
  Audit("tool_finished", std::move(finished), true);
  return result;
}

Json Session::Call(const std::string& tool, const Json& input, const std::atomic<bool>* cancel) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t call_id = ++calls_;
  const ToolSpec* spec = FindTool(tool);
  if (spec == nullptr && external_ != nullptr && external_->Handles(tool)) {
    return CallExternal(tool, input, call_id, cancel);
  }
  Json started = {{"call", call_id}, {"tool", tool}, {"args", SummarizeArgs(input)}};
  if (spec != nullptr) {
    started["scope"] = spec->scope;
    started["effect"] = EffectName(spec->effect);
  }
  // A quick call without side effects (read_file_range) writes tool_started together with
  // tool_finished: one write instead of two, and nothing happened that a crash could hide.
  bool defer_started = spec != nullptr && spec->effect == Effect::kNone && spec->quick;
  auto emit_started = [&] {
    if (!defer_started) return;
    defer_started = false;
    Audit("tool_started", started, false);
  };
  if (!defer_started) Audit("tool_started", started, false);

  Result<Json> outcome = [&]() -> Result<Json> {
    if (spec == nullptr) {
      return Fail(Code::kInvalidInput, "unknown tool \"" + tool + "\"");
    }
    if (!input.is_object()) {
      return Fail(Code::kInvalidInput, "tool input must be a JSON object");
    }
    if (std::string err = ValidateAgainstSchema(spec->input_schema, input); !err.empty()) {
      return Fail(Code::kInvalidInput, "input does not match the " + tool + " schema: " + err);
    }
    if (!policy_.Grants(spec->scope)) {
      std::string decided = policy_.provenance.count("scopes.grant")
                                ? policy_.provenance.at("scopes.grant")
                                : "built-in default";
      emit_started();
      Audit("policy_denied",
            {{"call", call_id},
             {"tool", tool},
             {"scope", spec->scope},
             {"rule", "scopes.grant"},
             {"decided_by", decided}},
            true);
      return Fail(Code::kDeniedByPolicy,
                  tool + " needs scope " + spec->scope + ", which the policy does not grant");
    }
    ToolContext ctx{workspace_, policy_,
                    [&](Json rec) {
                      rec["call"] = call_id;
                      rec["tool"] = tool;
                      emit_started();
                      Audit("file_write", std::move(rec), true);
                    },
                    processes_.get(), cancel};
    try {
      return spec->run(input, ctx);
    } catch (const std::exception& e) {
      return Fail(Code::kInternal, std::string("internal error in ") + tool + ": " + e.what());
    }
  }();

  Json result;
  std::size_t redactions = 0;
  bool truncated = false;
  if (outcome) {
    Json structured = std::move(*outcome);
    redactions = redactor_.RedactJson(structured);
    truncated = structured.value("truncated", false);
    result = MakeCallToolResult(std::move(structured), false);
  } else {
    Error e = outcome.error();
    redactions = redactor_.Redact(e.message);
    ++errors_;
    result = MakeErrorResult(e);
  }
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  Json finished = {
      {"call", call_id},
      {"tool", tool},
      {"status", outcome ? "ok" : "error"},
      {"output_bytes", result["content"][0]["text"].get_ref<const std::string&>().size()},
      {"truncated", truncated},
      {"elapsed_ms", static_cast<double>(elapsed) / 1000.0}};
  if (!outcome) {
    finished["code"] = CodeName(outcome.error().code);
    finished["message"] = result["structuredContent"]["error"]["message"];
  }
  if (redactions > 0) finished["output_redactions"] = redactions;
  if (defer_started) {
    AuditWriter::Record both[] = {{"tool_started", std::move(started)},
                                  {"tool_finished", std::move(finished)}};
    AuditAll(both, true);
    return result;
  }
  Audit("tool_finished", std::move(finished), true);
  return result;
}

}  // namespace cordon
