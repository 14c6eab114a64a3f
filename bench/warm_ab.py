#!/usr/bin/env python3
"""Two (or more) builds of cordon compared in one interleaved run (issue 20, ADR 0008): each round
spawns /bin/true bare from this driver (os.posix_spawn + waitpid), then calls
`run_shell {"program":"/bin/true"}` once in a warm `cordon serve` session of each build (stdio, one
10-file workspace shared by all, each session with its own state and config directories), rotating
the order. Per build: the median call, and the median over rounds of call / bare spawn of that
round (paired), and min/min. For a cut's effect on a loaded host, where absolute milliseconds
across runs mean little.

Usage: bench/warm_ab.py ROUNDS BUILD_DIR_A BUILD_DIR_B [...]"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time
rounds = int(sys.argv[1]); builds = sys.argv[2:]
work = tempfile.mkdtemp(prefix="cordon-warm-ab-")
ws = os.path.join(work, "ws"); os.makedirs(ws)
for i in range(10): open(os.path.join(ws, f"f{i}.txt"), "w").write(f"line {i}\n")
class S:
    def __init__(s, b, k):
        env = dict(os.environ, XDG_CONFIG_HOME=f"{work}/c{k}", XDG_STATE_HOME=f"{work}/s{k}")
        s.p = subprocess.Popen([os.path.abspath(b + "/cordon"), "serve", "--workspace", ws, "--audit-log", f"{work}/a{k}.jsonl"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ws)
        s.rid = 0; s.b = b
        s.req("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}})
        s.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'); s.p.stdin.flush()
    def req(s, m, params):
        s.rid += 1
        s.p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": s.rid, "method": m, "params": params}) + "\n").encode()); s.p.stdin.flush()
        while True:
            msg = json.loads(s.p.stdout.readline())
            if msg.get("id") == s.rid: return msg
    def true(s):
        t = time.perf_counter()
        r = s.req("tools/call", {"name": "run_shell", "arguments": {"program": "/bin/true"}})
        dt = (time.perf_counter() - t) * 1000
        assert r["result"]["structuredContent"]["exit_code"] == 0, r
        return dt
def bare():
    t = time.perf_counter(); pid = os.posix_spawn("/bin/true", ["/bin/true"], {}); os.waitpid(pid, 0)
    return (time.perf_counter() - t) * 1000
ss = [S(b, k) for k, b in enumerate(builds)]
for _ in range(10):
    for s in ss: s.true()
ratios = {s.b: [] for s in ss}; ms = {s.b: [] for s in ss}; bares = []
for i in range(rounds):
    b0 = bare(); bares.append(b0)
    for k in range(len(ss)):
        s = ss[(i + k) % len(ss)]; d = s.true(); ms[s.b].append(d); ratios[s.b].append(d / b0)
print("load", open("/proc/loadavg").read().split()[:3], "rounds", rounds, "bare median %.2f ms min %.2f" % (statistics.median(bares), min(bares)))
for s in ss:
    print("%-24s median %.2f ms  p25 %.2f  min %.2f  ratio median %.1fx  min/min %.1fx" % (s.b, statistics.median(ms[s.b]), sorted(ms[s.b])[len(ms[s.b])//4], min(ms[s.b]), statistics.median(ratios[s.b]), min(ms[s.b]) / min(bares)))
    s.p.stdin.close(); s.p.wait()
shutil.rmtree(work, ignore_errors=True)
