#!/usr/bin/env python3
"""`serve --http` under a token-less flood (issue 19).

Starts `cordon serve --http` with a bearer token, then: 20 authenticated `initialize` POSTs
with no flood (baseline), and the same 20 while FLOOD local connections without the token are
held open (half idle, half having sent part of a request). Each POST has a 30 s deadline.
Printed: how many were answered 200, and their p50 and max latency.

Usage: bench/http_flood.py [BUILD_DIR] [FLOOD=1100]"""
import http.client, json, os, resource, signal, socket, statistics, subprocess, sys, tempfile
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
flood_n = int(sys.argv[2]) if len(sys.argv) > 2 else 1100
cordon = os.path.join(build, "cordon")
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, flood_n + 256)), hard))
work = tempfile.mkdtemp(prefix="cordon-flood-")
os.makedirs(os.path.join(work, "ws"))
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
           XDG_STATE_HOME=os.path.join(work, "state"))
token_file = os.path.join(work, "token")
p = subprocess.Popen([cordon, "serve", "--workspace", os.path.join(work, "ws"), "--audit-log",
                      os.path.join(work, "audit.jsonl"), "--http", f"127.0.0.1:{port}",
                      "--token-file", token_file], env=env, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "bench", "version": "1"}}})

def post(token):
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", "/mcp", INIT, {"Content-Type": "application/json",
                                         "Accept": "application/json, text/event-stream",
                                         "Authorization": f"Bearer {token}"})
        status = c.getresponse().status
        c.close()
    except Exception:
        status = 0
    return status, (time.monotonic() - t0) * 1000

def round_of(token, n=20):
    got = [post(token) for _ in range(n)]
    ok = [ms for st, ms in got if st == 200]
    lat = sorted(ms for _, ms in got)
    return (f"{len(ok)}/{n} answered 200, p50 {statistics.median(lat):.1f} ms, "
            f"max {lat[-1]:.1f} ms")

for _ in range(100):
    if os.path.exists(token_file) and post("x")[0] == 401:
        break
    time.sleep(0.1)
token = open(token_file).read().strip()
print(f"no flood:        {round_of(token)}")
flood = []
half = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 10\r\n".encode()
for i in range(flood_n):
    f = socket.socket()
    f.setblocking(False)
    try:
        f.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    flood.append(f)
time.sleep(0.5)
for i, f in enumerate(flood):
    if i % 2:
        try:
            f.send(half)
        except OSError:
            pass
print(f"{flood_n} flooding: {round_of(token)}")
for f in flood:
    f.close()
p.send_signal(signal.SIGTERM)
p.wait(timeout=30)
