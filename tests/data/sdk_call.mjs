#!/usr/bin/env node
// A real MCP client built on the official TypeScript SDK (from $MCP_PEERS_DIR), for testing
// cordon serve: one tools/call, with a progress handler and, with --reset-on-progress, the SDK's
// request timeout restarted by each progress notification (resetTimeoutOnProgress).
//
//   node sdk_call.mjs --tool NAME [--args JSON] [--timeout MS] [--reset-on-progress] -- CMD ARGS...
//
// Prints one JSON document: {ok, result, progress (notifications seen), error}. Exit code 0 when
// the call returned (isError or not), 1 when the request failed (a timeout, a closed server).
import path from "node:path";
import { pathToFileURL } from "node:url";

const peers = process.env.MCP_PEERS_DIR || "/tmp/mcp-peers";
const sdk = path.join(peers, "node_modules/@modelcontextprotocol/sdk/dist/esm");
const imp = p => import(pathToFileURL(path.join(sdk, p)).href);
const { Client } = await imp("client/index.js");
const { StdioClientTransport } = await imp("client/stdio.js");

const argv = process.argv.slice(2);
const opt = { tool: null, args: {}, timeout: 60000, reset: false };
let server = [];
while (argv.length) {
  const a = argv.shift();
  if (a === "--") { server = argv.splice(0); break; }
  else if (a === "--tool") opt.tool = argv.shift();
  else if (a === "--args") opt.args = JSON.parse(argv.shift());
  else if (a === "--timeout") opt.timeout = Number(argv.shift());
  else if (a === "--reset-on-progress") opt.reset = true;
  else { console.error(`sdk_call: unknown option ${a}`); process.exit(2); }
}
if (!opt.tool || !server.length) { console.error("usage: sdk_call.mjs --tool NAME ... -- CMD"); process.exit(2); }

const transport = new StdioClientTransport({
  command: server[0], args: server.slice(1), env: { ...process.env }, stderr: "pipe" });
let stderr = "";
transport.stderr?.on("data", d => { stderr += d.toString(); });
const client = new Client({ name: "cordon-sdk-call", version: "1.0.0" }, { capabilities: {} });
const out = { ok: false, result: null, progress: 0, error: null };
let code = 0;
try {
  await client.connect(transport);
  out.result = await client.callTool({ name: opt.tool, arguments: opt.args }, undefined, {
    timeout: opt.timeout,
    resetTimeoutOnProgress: opt.reset,
    onprogress: () => { out.progress++; },
  });
  out.ok = true;
} catch (e) {
  out.error = String(e?.message ?? e);
  code = 1;
} finally {
  try { await client.close(); } catch {}
}
out.stderr = stderr;
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(code);
