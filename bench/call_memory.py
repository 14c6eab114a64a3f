#!/usr/bin/env python3
"""What a call's arguments cost `cordon serve` in memory while it runs (issue 33, part 7).

`cordon serve` (stdio) gets N run_shell calls at once, each with 1 MiB of arguments (eight
131,000-byte strings) and sleeping 6 s. Printed: serve's resident memory (VmRSS, and its
anonymous part) before the calls, the most sampled while they are all in flight, and the peak
(VmHWM); then the growth per in-flight call against the 1 MiB each brought. The baseline in the
same run is N = 1.

Usage: bench/call_memory.py [BUILD_DIR] [N=30]
Set HEAPTRACK=FILE to run serve under heaptrack (its peak consumers: heaptrack_print -f FILE.zst
--print-peaks 1)."""
import json, os, subprocess, sys, tempfile, time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
cordon = os.path.join(build, "cordon")


def status(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM", "RssAnon"):
            out[k] = int(v.split()[0]) / 1024.0
    return out


def run(calls):
    work = tempfile.mkdtemp(prefix="cordon-callmem-")
    ws = os.path.join(work, "ws")
    os.makedirs(ws)
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
               XDG_STATE_HOME=os.path.join(work, "state"))
    wrap = ["heaptrack", "-o", os.environ["HEAPTRACK"]] if os.environ.get("HEAPTRACK") else []
    p = subprocess.Popen(wrap + [cordon, "serve", "--workspace", ws, "--audit-log",
                                 os.path.join(work, "audit.jsonl")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=env)

    def send(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "bench", "version": "1"}}})
    while not p.stdout.readline().startswith(b"{"):  # heaptrack writes its own lines first
        pass
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    time.sleep(0.5)
    before = status(p.pid)
    big = [chr(ord("a") + k) * 131000 for k in range(8)]
    for i in range(1, calls + 1):
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": "run_shell",
                         "arguments": {"program": "sh", "args": ["-c", "sleep 6", "x"] + big}}})
    most = 0.0
    t = time.time()
    while time.time() - t < 5:
        most = max(most, status(p.pid)["VmRSS"])
        time.sleep(0.1)
    peak = status(p.pid)["VmHWM"]
    p.stdin.close()
    answers = [json.loads(l) for l in p.stdout if l.startswith(b"{")]
    p.wait(timeout=120)
    ok = sum(1 for a in answers if a.get("id") not in (0, None)
             and not a.get("result", {}).get("isError"))
    return before, most, peak, ok


b1, m1, p1, ok1 = run(1)
b, m, p, ok = run(n)
print(f"1 call: VmRSS {b1['VmRSS']:.1f} MiB before (anonymous {b1['RssAnon']:.1f}), "
      f"{m1:.1f} in flight, peak {p1:.1f}; answered {ok1}")
print(f"{n} calls: VmRSS {b['VmRSS']:.1f} MiB before (anonymous {b['RssAnon']:.1f}), "
      f"{m:.1f} in flight, peak {p:.1f}; answered {ok}")
print(f"growth per in-flight call: {(m - b['VmRSS']) / n:.2f} MiB for 1.00 MiB of arguments")
