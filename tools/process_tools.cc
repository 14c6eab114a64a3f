// run_shell and the jobs tools. run_shell takes an argv array only: cordon never adds a shell;
// `sh -c` runs only when the agent names it.
#include "runner/processes.h"
#include "tools/registry.h"

namespace cordon {
namespace {

Json ProcessResultProperties() {
  return {{"status", {{"type", "string"}}},
          {"id", {{"type", "string"}}},
          {"argv",
           {{"type", "array"},
            {"items", {{"type", "string"}}},
            {"description",
             "The argv as it ran; an argument longer than 256 bytes is shown as its first 200 "
             "characters and its size."}}},
          {"cwd", {{"type", "string"}}},
          {"exit_code", {{"type", {"integer", "null"}}}},
          {"signal", {{"type", {"integer", "null"}}}},
          {"signal_name", {{"type", {"string", "null"}}}},
          {"timed_out", {{"type", "boolean"}}},
          {"cancelled", {{"type", "boolean"}}},
          {"stdout", {{"type", "string"}}},
          {"stderr", {{"type", "string"}}},
          {"stdout_bytes", {{"type", "integer"}}},
          {"stderr_bytes", {{"type", "integer"}}},
          {"stdout_dropped_bytes", {{"type", "integer"}}},
          {"stderr_dropped_bytes", {{"type", "integer"}}},
          {"truncated", {{"type", "boolean"}}},
          {"elapsed_ms", {{"type", "number"}}},
          {"cpu_ms", {{"type", "number"}}},
          {"max_rss_kb", {{"type", "integer"}}},
          // A summary (mode, network, workspace, workspace_mode, and the reasons when weaker or
          // read-only); the whole object with verbose: true.
          {"confinement", {{"type", "object"}}},
          // The limit that ended the process (timeout, cpu, file_size, memory, pids), or null.
          {"limit", {{"type", {"object", "null"}}}},
          // The timeout the call asked for and the one it got (capped_by: the policy key).
          {"timeout", {{"type", "object"}}},
          // Present when the asked-for timeout was cut: what was asked, what applied, and the
          // policy key (and file:line) that decided.
          {"timeout_capped", {{"type", "string"}}},
          // The staged workspace's commit (docs/adr/0006-staged-workspace.md): mode, changed,
          // refused [{path, reason}], conflicts [paths].
          {"workspace", {{"type", "object"}}}};
}

// What a result says of its sandbox: the mode, the network and how the workspace was shown, and
// why it was weaker or read-only when it was. The full object (namespaces, rlimits, seccomp,
// grants, egress) stays in the process record, and in the result with verbose: true.
Json ConfinementSummary(const Json& full) {
  Json s = Json::object();
  for (const char* k : {"mode", "network", "workspace", "workspace_mode", "weaker_reason",
                        "workspace_read_only_reason"}) {
    if (full.contains(k)) s[k] = full[k];
  }
  return s;
}

Result<std::string> ResolveCwd(const ToolContext& ctx, const Json& in) {
  if (!in.contains("cwd")) return ctx.workspace.root();
  ASSIGN_OR_RETURN(std::string rel, ctx.workspace.Relative(in["cwd"].get<std::string>()));
  // The kernel checks it is a directory beneath the workspace, without following symlinks.
  auto probe = ctx.workspace.OpenRegular(rel);
  if (probe) return Fail(Code::kInvalidInput, "cwd " + rel + " is a file, not a directory");
  if (probe.error().code != Code::kUnsupportedFileType) return std::unexpected(probe.error());
  return rel == "." ? ctx.workspace.root() : ctx.workspace.root() + "/" + rel;
}

// The argv for the result: the agent wrote it, so a long argument comes back as its start and its
// size, never whole (a megabyte of arguments would otherwise be in the answer, and in every copy
// of it on the way out).
Json EchoArgv(const Argv& argv) {
  constexpr std::size_t kWhole = 256, kShown = 200;
  Json out = Json::array();
  for (const std::string& a : argv) {
    if (a.size() <= kWhole) {
      out.push_back(a);
      continue;
    }
    std::size_t at = 0;  // the byte where the character after the first kShown begins
    for (std::size_t chars = 0; at < a.size(); ++at) {
      if ((static_cast<unsigned char>(a[at]) & 0xc0) != 0x80 && chars++ == kShown) break;
    }
    out.push_back(a.substr(0, at) + "... [cordon: " + std::to_string(a.size()) + " bytes in all]");
  }
  return out;
}

Result<Json> RunShell(const Json& in, ToolContext& ctx) {
  if (ctx.services.Processes() == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  ProcessRequest req = ctx.services.ProcessTemplate() != nullptr ? *ctx.services.ProcessTemplate()
                                                                 : ProcessRequest{};
  // The arguments can be a megabyte: taken out of the input when the caller gave it up
  // (ctx.input), so that the process's argv is their one copy; read in place otherwise.
  std::vector<std::string> argv{in["program"].get<std::string>()};
  if (const auto args = in.find("args"); args != in.end()) {
    argv.reserve(1 + args->size());
    if (ctx.input == &in) {
      for (auto& a : (*ctx.input)["args"]) argv.push_back(std::move(a.get_ref<std::string&>()));
    } else {
      for (const auto& a : *args) argv.push_back(a.get<std::string>());
    }
  }
  req.argv = std::move(argv);
  for (const auto& a : req.argv) {
    if (a.find('\0') != std::string::npos)
      return Fail(Code::kInvalidInput, "argv contains a NUL byte");
  }
  ASSIGN_OR_RETURN(req.cwd, ResolveCwd(ctx, in));
  req.tool = "run_shell";
  req.owner = ctx.caller;
  req.call = ctx.call;
  req.max_output_bytes =
      static_cast<std::size_t>(ctx.policy.LimitsFor("run_shell").max_output_bytes);
  if (in.contains("timeout_secs")) req.timeout_secs = in["timeout_secs"].get<std::int64_t>();
  const bool verbose = in.value("verbose", false);
  if (in.value("background", false)) {
    req.kind = ProcessKind::kBackground;
    ASSIGN_OR_RETURN(Json started, ctx.services.Processes()->StartBackground(req));
    if (!verbose && started.contains("confinement"))
      started["confinement"] = ConfinementSummary(started["confinement"]);
    return started;
  }
  ASSIGN_OR_RETURN(auto proc, ctx.services.Processes()->RunForeground(req, ctx.cancel));
  ProcessOutcome o = proc->outcome();
  if (o.error) return std::unexpected(*o.error);
  std::string tail = proc->Tail(600);
  if (o.status == ProcessStatus::kTimeout) {
    std::string what = o.limit ? o.limit->Describe() : "its time limit";
    if (const auto& t = proc->timeout_decision(); t && t->capped) {
      what += "; the " + std::to_string(t->requested) + " s asked for were cut to " +
              std::to_string(t->applied) + " s by " + t->capped_by + " (" + t->decided_by + ")";
    }
    return Fail(Code::kTimeout, "the command ran past " + what +
                                    "; the sandbox was terminated. "
                                    "Last output:\n" +
                                    tail);
  }
  if (o.status == ProcessStatus::kCancelled)
    return Fail(Code::kCancelled, "the call was cancelled; the sandbox was terminated");
  Json out = ProcessHost::ResultJson(*proc);
  if (out.contains("workspace") && out["workspace"].contains("error")) {
    // The staged commit could not complete: the call fails, naming what was not done (the
    // process record has the whole list). Fail closed, never a silent partial.
    std::string not_done;
    for (const auto& p : out["workspace"].value("not_done", Json::array())) {
      if (not_done.size() > 2000) break;
      not_done += "\n  " + p.get<std::string>();
    }
    return Fail(Code::kInternal, "the command ran (exit " + out["exit_code"].dump() +
                                     ") but its changes could not all be installed: " +
                                     out["workspace"]["error"].get<std::string>() +
                                     (not_done.empty() ? "" : "; not done:" + not_done));
  }
  out["argv"] = EchoArgv(req.argv);
  out["cwd"] = req.cwd;
  out["confinement"] = verbose ? proc->confinement() : ConfinementSummary(proc->confinement());
  return out;
}

Result<Json> ProcessList(const Json&, ToolContext& ctx) {
  if (ctx.services.Processes() == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  return ctx.services.Processes()->List(ctx.caller);
}

Result<Json> ProcessOutput(const Json& in, ToolContext& ctx) {
  if (ctx.services.Processes() == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  return ctx.services.Processes()->Output(ctx.caller, in["id"].get<std::string>(),
                                          static_cast<std::size_t>(in.value("max_chars", 16000)));
}

Result<Json> ProcessCancel(const Json& in, ToolContext& ctx) {
  if (ctx.services.Processes() == nullptr)
    return Fail(Code::kSandboxUnavailable, "no process host in this session");
  return ctx.services.Processes()->Cancel(ctx.caller, in["id"].get<std::string>(),
                                          in.value("force", false));
}

Json IdSchema() {
  return {{"type", "string"},
          {"minLength", 1},
          {"maxLength", 64},
          {"description", "A job id from run_shell."}};
}

}  // namespace

ToolSpec MakeRunShellTool() {
  ToolSpec t;
  t.name = "run_shell";
  t.description =
      "Run one program with an argv array inside cordon's sandbox (no network by default, "
      "workspace writable, rest of the host read-only or absent). No shell is added: name sh "
      "and -c yourself if you need shell syntax. Foreground by default, with a timeout "
      "(the policy's, 10 minutes as shipped; timeout_secs may shorten it, and a longer one is "
      "capped, said in timeout_capped). background: true returns a job id at once: use it for "
      "anything that may take longer than a minute (test suites, installs, builds), since many "
      "MCP clients give up on a request after 60 s, and read it with process_output.";
  t.scope = "process:run";
  t.effect = Effect::kProcess;
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"program", {{"type", "string"}, {"minLength", 1}, {"maxLength", 4096}}},
        {"args",
         {{"type", "array"},
          {"maxItems", 4096},
          {"items", {{"type", "string"}, {"maxLength", 131072}}}}},
        {"cwd",
         {{"type", "string"},
          {"minLength", 1},
          {"maxLength", 4096},
          {"description", "Working directory inside the workspace (default: its root)."}}},
        {"timeout_secs",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", 86400},
          {"description",
           "At most the policy's timeout (10 minutes as shipped); a longer one is capped."}}},
        {"background", {{"type", "boolean"}}},
        {"verbose",
         {{"type", "boolean"},
          {"description",
           "Return the full confinement (namespaces, rlimits, seccomp, grants, egress) instead "
           "of its summary; the audit log's process record always has it."}}}}},
      {"required", {"program"}},
      {"additionalProperties", false}};
  SetOutputSchemas(t, ProcessResultProperties(), {"status"});
  t.example = {{"program", "sh"}, {"args", {"-c", "echo hello; echo oops >&2; exit 3"}}};
  t.run = RunShell;
  return t;
}

ToolSpec MakeProcessListTool() {
  ToolSpec t;
  t.name = "process_list";
  t.description =
      "List this session's background jobs: argv, state, exit, elapsed_ms, cpu_ms and "
      "max_rss_kb. For a running job they are read live from /proc over every process in its "
      "sandbox (cpu_ms with what they reaped; max_rss_kb the largest peak of one; rss_kb their "
      "sum now; processes their count), null when unreadable. Under `serve --http` each MCP "
      "session sees only the jobs it started.";
  t.scope = "process:operate";
  t.input_schema = {
      {"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
  const Json job = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}}},
        {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}}},
        {"state", {{"type", "string"}}},
        {"exit_code", {{"type", {"integer", "null"}}}},
        {"signal", {{"type", {"integer", "null"}}}},
        {"elapsed_ms", {{"type", "number"}}},
        {"cpu_ms", {{"type", {"number", "null"}}}},
        {"max_rss_kb", {{"type", {"integer", "null"}}}},
        {"rss_kb", {{"type", {"integer", "null"}}}},
        {"processes", {{"type", "integer"}}},
        {"cancel_requested", {{"type", "boolean"}}}}},
      {"required",
       {"id", "argv", "state", "elapsed_ms", "cpu_ms", "max_rss_kb", "cancel_requested"}}};
  SetOutputSchemas(t, {{"jobs", {{"type", "array"}, {"items", job}}}}, {"jobs"});
  t.example = Json::object();
  t.example_setup = MakeProcessOutputTool().example_setup;
  t.run = ProcessList;
  return t;
}

ToolSpec MakeProcessOutputTool() {
  ToolSpec t;
  t.name = "process_output";
  t.description =
      "The tail of a background job's retained output, escape sequences stripped (default "
      "16000 characters, at most 64000). While the job runs, its unfinished last line is held "
      "back (held_bytes) until it ends.";
  t.scope = "process:operate";
  t.input_schema = {{"type", "object"},
                    {"properties",
                     {{"id", IdSchema()},
                      {"max_chars", {{"type", "integer"}, {"minimum", 1}, {"maximum", 64000}}}}},
                    {"required", {"id"}},
                    {"additionalProperties", false}};
  SetOutputSchemas(t,
                   {{"id", {{"type", "string"}}},
                    {"state", {{"type", "string"}}},
                    {"output", {{"type", "string"}}},
                    {"chars", {{"type", "integer"}}},
                    {"held_bytes", {{"type", "integer"}}}},
                   {"id", "state", "output", "chars"});
  t.example = {{"id", "job-1"}};
  t.example_setup = [](ToolContext& ctx) -> Status {
    ProcessRequest req;
    req.argv = {"sh", "-c", "echo started; sleep 30"};
    req.cwd = ctx.workspace.root();
    req.tool = "run_shell";
    req.kind = ProcessKind::kBackground;
    req.owner = ctx.caller;
    TRY(ctx.services.Processes()->StartBackground(req));
    return {};
  };
  t.run = ProcessOutput;
  return t;
}

ToolSpec MakeProcessCancelTool() {
  ToolSpec t;
  t.name = "process_cancel";
  t.description =
      "Cancel a background job of this session: SIGTERM to everything in its sandbox, then "
      "SIGKILL after a grace period (2 s), and wait for it to end. force: true skips the grace "
      "(SIGKILL at once: nothing can clean up). Ids of other sessions (other MCP sessions of "
      "the same `serve --http`) are not_found.";
  t.scope = "process:operate";
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"id", IdSchema()},
        {"force",
         {{"type", "boolean"},
          {"description", "SIGKILL at once instead of SIGTERM and a grace period."}}}}},
      {"required", {"id"}},
      {"additionalProperties", false}};
  SetOutputSchemas(t,
                   {{"id", {{"type", "string"}}},
                    {"was_running", {{"type", "boolean"}}},
                    {"state", {{"type", "string"}}},
                    {"forced", {{"type", "boolean"}}},
                    // The signal that ended the job's command, as its process record has it.
                    {"signal", {{"type", {"integer", "null"}}}}},
                   {"id", "was_running", "state", "forced"});
  t.example = {{"id", "job-1"}};
  t.example_setup = MakeProcessOutputTool().example_setup;
  t.run = ProcessCancel;
  return t;
}

}  // namespace cordon
