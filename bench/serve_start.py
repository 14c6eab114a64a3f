#!/usr/bin/env python3
"""How long `cordon serve` takes to answer initialize and its first tools/call in a workspace,
against the same in an empty workspace (issue 32, part 5: the secret-file scan runs beside the
session; the first output that needs it waits). Usage: bench/serve_start.py CORDON WORKSPACE...
Prints, per workspace and run, the milliseconds from spawn to the initialize answer and to the
answer of a read_file_range call sent right after it."""
import json
import subprocess
import sys
import tempfile
import time


def run(cordon, ws):
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as log:
        t0 = time.monotonic()
        p = subprocess.Popen([cordon, "serve", "--workspace", ws, "--audit-log", log.name],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)

        def send(m):
            p.stdin.write((json.dumps(m) + "\n").encode())
            p.stdin.flush()

        def answer(i):
            while True:
                line = p.stdout.readline()
                if not line:
                    raise SystemExit("serve ended early")
                m = json.loads(line)
                if m.get("id") == i:
                    return m

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "bench", "version": "1"}}})
        answer(1)
        t_init = time.monotonic()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "read_file_range", "arguments": {"path": "a.txt"}}})
        answer(2)
        t_call = time.monotonic()
        p.stdin.close()
        p.wait()
        return (t_init - t0) * 1000, (t_call - t0) * 1000


def main():
    cordon = sys.argv[1]
    for ws in sys.argv[2:]:
        for i in range(4):
            init, call = run(cordon, ws)
            print(f"{ws:32} run {i}: initialize answered {init:6.0f} ms, first call {call:6.0f} ms")


main()
