#!/usr/bin/env node
// A client on the official TypeScript SDK (from $MCP_PEERS_DIR) that declares the elicitation
// capability and answers cordon's approval questions: one connection, one tools/call per line of
// stdin, in turn (as tests/data/sdk_session.mjs), with each elicitation/create answered by the
// next word of --answers:
//   once | session | deny   accept with that decision
//   decline | cancel        that action
//   never                   no answer at all (the question's timeout ends it)
//
//   node sdk_elicit.mjs [--answers once,decline,...] [--no-elicitation] -- CMD ARGS...
//
// stdout: {"connected": true}, then one line per call {ok, result, error, elapsed_ms}, and at EOF
// {"closed": true, "elicitations": [the params of each elicitation/create], "stderr"}.
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const peers = process.env.MCP_PEERS_DIR || "/tmp/mcp-peers";
const sdk = path.join(peers, "node_modules/@modelcontextprotocol/sdk/dist/esm");
const imp = p => import(pathToFileURL(path.join(sdk, p)).href);
const { Client } = await imp("client/index.js");
const { StdioClientTransport } = await imp("client/stdio.js");
const { ElicitRequestSchema } = await imp("types.js");

const argv = process.argv.slice(2);
let answers = [];
let elicitation = true;
while (argv.length && argv[0] !== "--") {
  const a = argv.shift();
  if (a === "--answers") answers = argv.shift().split(",");
  else if (a === "--no-elicitation") elicitation = false;
  else { console.error(`sdk_elicit: unknown option ${a}`); process.exit(2); }
}
if (argv[0] !== "--" || argv.length < 2) {
  console.error("usage: sdk_elicit.mjs [--answers A,B] [--no-elicitation] -- CMD ARGS...");
  process.exit(2);
}
const server = argv.slice(1);
const say = j => process.stdout.write(JSON.stringify(j) + "\n");

const transport = new StdioClientTransport({
  command: server[0], args: server.slice(1), env: { ...process.env }, stderr: "pipe" });
let stderr = "";
transport.stderr?.on("data", d => { stderr += d.toString(); });
const client = new Client({ name: "cordon-sdk-elicit", version: "1.0.0" },
                          { capabilities: elicitation ? { elicitation: {} } : {} });
const asked = [];
if (elicitation) {
  client.setRequestHandler(ElicitRequestSchema, async request => {
    asked.push(request.params);
    const a = answers.shift() ?? "deny";
    if (a === "never") return new Promise(() => {});
    if (a === "decline" || a === "cancel") return { action: a };
    return { action: "accept", content: { decision: a } };
  });
}
try {
  await client.connect(transport);
  say({ connected: true });
} catch (e) {
  say({ connected: false, error: String(e?.message ?? e), stderr });
  process.exit(1);
}
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const call = JSON.parse(line);
  const started = Date.now();
  const out = { ok: false, result: null, error: null };
  try {
    out.result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} },
                                       undefined, { timeout: call.timeout ?? 60000,
                                                    resetTimeoutOnProgress: true,
                                                    onprogress: () => {} });
    out.ok = true;
  } catch (e) {
    out.error = String(e?.message ?? e);
  }
  out.elapsed_ms = Date.now() - started;
  say(out);
}
try { await client.close(); } catch (e) { /* gone already */ }
say({ closed: true, elicitations: asked, stderr });
