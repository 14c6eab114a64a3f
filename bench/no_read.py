#!/usr/bin/env python3
"""The supervisor's memory when its MCP client does not read (issue 19).

`cordon serve` (stdio) gets N run_shell calls at once, each sleeping 1 s and then writing
1 MiB (the policy's output cap raised to 2 MiB, so that the whole MiB is each result); the client reads nothing more after initialize. Printed: cordon's resident memory
(VmRSS) before the calls and once every call has finished (its tool_finished record is in the
log), and the peak (VmHWM). Then one more call is sent, and the client reads everything: what
how many of the N calls were refused (output_backlog: past limits.max_pending_output_bytes, 64
MiB, counting each running call at 3 x its cap), and what the extra call got.

Usage: bench/no_read.py [BUILD_DIR] [N=30] [BOUND]   (BOUND: limits.max_pending_output_bytes,
e.g. 1073741824 to see answers held once with no call refused)"""
import json, os, subprocess, sys, tempfile, time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
bound = int(sys.argv[3]) if len(sys.argv) > 3 else 0
cordon = os.path.join(build, "cordon")
work = tempfile.mkdtemp(prefix="cordon-noread-")
ws = os.path.join(work, "ws")
os.makedirs(ws)
log = os.path.join(work, "audit.jsonl")
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
           XDG_STATE_HOME=os.path.join(work, "state"))
# Each call's whole 1 MiB is its result: the policy's output cap raised to 2 MiB.
os.makedirs(os.path.join(work, "config/cordon/policies.d"))
with open(os.path.join(work, "config/cordon/policies.d/50-bench.toml"), "w") as f:
    f.write("[limits]\nmax_output_bytes = 2097152\n")
    if bound:  # a build that has the key: limits.max_pending_output_bytes
        f.write(f"max_pending_output_bytes = {bound}\n")

def status(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0]) / 1024.0
    return out

def send(p, msg):
    p.stdin.write((json.dumps(msg) + "\n").encode())
    p.stdin.flush()

def finished():
    try:
        return sum(1 for l in open(log) if '"type":"tool_finished"' in l)
    except FileNotFoundError:
        return 0

p = subprocess.Popen([cordon, "serve", "--workspace", ws, "--audit-log", log],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                     env=env)
send(p, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"}}})
json.loads(p.stdout.readline())
send(p, {"jsonrpc": "2.0", "method": "notifications/initialized"})
time.sleep(0.5)
before = status(p.pid)
script = "sleep 1; head -c 786432 /dev/urandom | base64 -w 100"  # 1 MiB of text
for i in range(1, n + 1):
    send(p, {"jsonrpc": "2.0", "id": i, "method": "tools/call",
             "params": {"name": "run_shell",
                        "arguments": {"program": "sh", "args": ["-c", script]}}})
# Done when every call has finished, or none has for 5 s (the refused ones never run).
deadline, last, last_change = time.time() + 300, -1, time.time()
while finished() < n and time.time() < deadline and time.time() - last_change < 5:
    if finished() != last:
        last, last_change = finished(), time.time()
    time.sleep(0.2)
time.sleep(1)
after = status(p.pid)
print(f"calls finished: {finished()} of {n}, nothing read by the client")
print(f"cordon VmRSS before: {before['VmRSS']:.1f} MiB, after: {after['VmRSS']:.1f} MiB, "
      f"peak (VmHWM): {after['VmHWM']:.1f} MiB")
send(p, {"jsonrpc": "2.0", "id": "extra", "method": "tools/call",
         "params": {"name": "run_shell", "arguments": {"program": "true"}}})
p.stdin.close()
answers = {}
for line in p.stdout:
    m = json.loads(line)
    answers[m.get("id")] = m
p.wait(timeout=60)
def code(rid):
    r = answers.get(rid, {}).get("result", {})
    return ((r.get("structuredContent") or {}).get("error") or {}).get("code")
refused = sum(1 for i in range(1, n + 1) if code(i) == "output_backlog")
print(f"answers read afterwards: {len(answers)}; of the {n} calls {refused} refused "
      f"(output_backlog); the extra call: {'refused: ' + code('extra') if code('extra') else 'served'}")
