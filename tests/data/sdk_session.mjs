#!/usr/bin/env node
// An agent's session through a real MCP client built on the official TypeScript SDK (from
// $MCP_PEERS_DIR): one connection, then one tools/call per line read from stdin, in turn, so that
// the test can look at the host between two calls.
//
//   node sdk_session.mjs [--elicitation] [--answers A,B,...] -- CMD ARGS...
//
// --elicitation declares the elicitation capability and answers each elicitation/create with the
// next word of --answers (default deny):
//   once | session | deny   accept with that decision
//   decline | cancel        that action
//   never                   no answer at all (the question's timeout ends it)
//
// stdin: one JSON object a line, {"name": TOOL, "arguments": {...}, "timeout": MS (default
// 60000, the SDK's)}. stdout: first {"connected": true} (or {"connected": false, "error"}), then
// one line per call, {ok, result, error, elapsed_ms}; at EOF on stdin the client closes, and the
// last line is {"closed": true, "elicitations": [the params of each elicitation/create],
// "stderr": the server's stderr}.
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
let elicitation = false;
while (argv.length && argv[0] !== "--") {
  const a = argv.shift();
  if (a === "--answers") answers = argv.shift().split(",");
  else if (a === "--elicitation") elicitation = true;
  else { console.error(`sdk_session: unknown option ${a}`); process.exit(2); }
}
if (argv[0] !== "--" || argv.length < 2) {
  console.error("usage: sdk_session.mjs [--elicitation] [--answers A,B] -- CMD ARGS...");
  process.exit(2);
}
const server = argv.slice(1);
const say = j => process.stdout.write(JSON.stringify(j) + "\n");

const transport = new StdioClientTransport({
  command: server[0], args: server.slice(1), env: { ...process.env }, stderr: "pipe" });
let stderr = "";
transport.stderr?.on("data", d => { stderr += d.toString(); });
const client = new Client({ name: "cordon-sdk-session", version: "1.0.0" },
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
                                       undefined, { timeout: call.timeout ?? 60000 });
    out.ok = true;
  } catch (e) {
    out.error = String(e?.message ?? e);
  }
  out.elapsed_ms = Date.now() - started;
  say(out);
}
try { await client.close(); } catch {}
say({ closed: true, elicitations: asked, stderr });
process.exit(0);
