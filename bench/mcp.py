#!/usr/bin/env python3
"""MCP figures, each beside its baseline from the same run.

1. tools/call round trip (echo) through `cordon wrap` vs direct to server-everything: p50, p99.
2. read_file_range calls per second through `cordon serve` over stdio (audit fsync per call
   and never), one call at a time and with 32 in flight, driven by bench/mcp_load (C++, so the
   client's CPU stays out of the figure); server-everything's echo driven the same way is the
   baseline.

Usage: bench/mcp.py [BUILD_DIR]   needs node and the peers (scripts/install-mcp-peers.sh)."""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
cordon = os.path.join(build, "cordon")
peers = os.environ.get("MCP_PEERS_DIR", "/tmp/mcp-peers")
everything = os.path.join(peers, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
node = shutil.which("node")
if not node or not os.path.exists(everything):
    sys.exit("bench/mcp.py: node or server-everything missing; run scripts/install-mcp-peers.sh")
work = tempfile.mkdtemp(prefix="cordon-mcp-bench-")
ws = os.path.join(work, "ws")
os.makedirs(ws)
with open(os.path.join(ws, "a.txt"), "w") as f:
    f.write("".join(f"line {i}\n" for i in range(200)))
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"))
nofsync = os.path.join(work, "nofsync.toml")
open(nofsync, "w").write('[audit]\nfsync = "never"\n')

class Peer:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, cwd=ws)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method, params):
        self.next += 1
        rid = self.next
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("peer closed")
            msg = json.loads(line)
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg
            if "method" in msg and "id" in msg:  # a server->client request: answer it
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)

def round_trips(argv, n):
    peer = Peer(argv)
    for _ in range(20):
        peer.request("tools/call", {"name": "echo", "arguments": {"message": "warm"}})
    samples = []
    for i in range(n):
        t = time.perf_counter()
        r = peer.request("tools/call", {"name": "echo", "arguments": {"message": f"m{i}"}})
        samples.append((time.perf_counter() - t) * 1000)
        assert "result" in r, r
    peer.close()
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99)]

load = os.path.join(build, "bench", "mcp_load")

def calls_per_second(argv, params, n, window):
    out = subprocess.run([load, str(n), str(window), json.dumps(params), "--"] + argv, env=env, cwd=ws,
                         capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    assert r["errors"] == 0, r
    return r["calls_per_second"]

N = 500
direct = round_trips([node, everything, "stdio"], N)
wrapped = round_trips([cordon, "wrap", "--workspace", ws, "--audit-log", os.path.join(work, "w.jsonl"),
                       "--read", peers, "--", node, everything, "stdio"], N)
wrapped_nf = round_trips([cordon, "wrap", "--workspace", ws, "--audit-log", os.path.join(work, "w2.jsonl"),
                          "--policy", nofsync, "--read", peers, "--", node, everything, "stdio"], N)
C = 20000
read = {"name": "read_file_range", "arguments": {"path": "a.txt", "start_line": 1, "end_line": 20}}
echo = {"name": "echo", "arguments": {"message": "hello"}}
serve_argv = lambda log, *extra: [cordon, "serve", "--workspace", ws, "--audit-log", os.path.join(work, log), *extra]
rates = {}
for window in (1, 32):
    rates[("everything", window)] = calls_per_second([node, everything, "stdio"], echo, C // 4, window)
    rates[("per_call", window)] = calls_per_second(serve_argv(f"s{window}.jsonl"), read, C, window)
    rates[("never", window)] = calls_per_second(serve_argv(f"n{window}.jsonl", "--policy", nofsync), read, C, window)

print("| figure | p50 | p99 |")
print("|---|---|---|")
print(f"| echo round trip, direct to server-everything | {direct[0]:.3f} ms | {direct[1]:.3f} ms |")
print(f"| echo round trip through `cordon wrap` (audit fsync per call) | {wrapped[0]:.3f} ms (+{wrapped[0]-direct[0]:.3f}) | {wrapped[1]:.3f} ms (+{wrapped[1]-direct[1]:.3f}) |")
print(f"| echo round trip through `cordon wrap` (fsync never) | {wrapped_nf[0]:.3f} ms (+{wrapped_nf[0]-direct[0]:.3f}) | {wrapped_nf[1]:.3f} ms (+{wrapped_nf[1]-direct[1]:.3f}) |")
print()
print("| figure | calls/s, 1 in flight | calls/s, 32 in flight |")
print("|---|---|---|")
print(f"| baseline: echo of server-everything (Node), stdio | {rates[('everything', 1)]:,.0f} | {rates[('everything', 32)]:,.0f} |")
print(f"| read_file_range through `cordon serve` (stdio, audit fsync per call) | {rates[('per_call', 1)]:,.0f} | **{rates[('per_call', 32)]:,.0f}** ({rates[('per_call', 32)] / rates[('everything', 32)]:.1f}x the baseline) |")
print(f"| read_file_range through `cordon serve` (stdio, fsync never) | {rates[('never', 1)]:,.0f} | {rates[('never', 32)]:,.0f} |")
print(f"\n{N} round trips (a Python client over pipes); {C} calls per serve figure (bench/mcp_load); {os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d')}")
shutil.rmtree(work)
