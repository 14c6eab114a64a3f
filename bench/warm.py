#!/usr/bin/env python3
"""The warm sandbox's targets (issue 20, docs/adr/0008-warm-sandbox.md), as ratios from one
interleaved run: `run_shell /bin/true` through one `cordon serve` session (stdio MCP), per call,
against a bare spawn of /bin/true from this same driver (os.posix_spawn + waitpid).

1. a workspace of 10 files, no repository (target <= 1.5x, stretch 1.2x);
2. bench/changes.py's 1k tree (20 directories of 50 files) as a git repository, change records
   on (target <= 3x, stretch 2x).

For each workspace the same session runs warm (the default), with `[sandbox] warm = "off"` (the
cold call, as before the warm sandbox), and warm with `[audit] fsync = "never"` (labelled: the
shipped policy syncs the records). Calls rotate between the sessions, so every call of a round
shares the host's load; the ratio is the median over rounds of (call / bare spawn of that round),
and min/min. Each session's audit log is read at the end: every warm row's `process` records
must say `launch.kind == "warm"` (a silent cold fallback fails the run) and the cold rows'
"cold"; the records' `changes.commit_ms` and `elapsed_ms` are summarised.

Usage: bench/warm.py [BUILD_DIR] [ROUNDS]   (default: build, 200). As an ordinary user:
`runuser -u USER -- python3 bench/warm.py BUILD` (TMPDIR, if set, must be that user's)."""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 200
warmup = 20
cordon = os.path.abspath(os.path.join(build, "cordon"))
if not os.access(cordon, os.X_OK):
    sys.exit(f"bench/warm.py: {cordon} is not an executable")
work = tempfile.mkdtemp(prefix="cordon-warm-bench-")
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
           XDG_STATE_HOME=os.path.join(work, "state"))
policies = {"warm": [], "cold": ['[sandbox]\nwarm = "off"\n'],
            "warm, fsync never": ['[audit]\nfsync = "never"\n']}


def small_ws():
    ws = os.path.join(work, "ws10")
    os.makedirs(ws)
    for i in range(10):
        with open(os.path.join(ws, f"f{i}.txt"), "w") as fh:
            fh.write(f"line {i}\n")
    return ws


def repo_1k():
    # bench/changes.py's 1k tree (1,021 entries), then `git init` and one commit of it.
    root = os.path.join(work, "1k")
    for d in range(20):
        p = os.path.join(root, "src", "d%d" % d)
        os.makedirs(p)
        for f in range(50):
            with open(os.path.join(p, "f%d.c" % f), "w") as fh:
                fh.write("int x%d;\n" % f)
    git = ["git", "-C", root, "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "1k"], check=True)
    return root


class Serve:
    """One `cordon serve` session over stdio; one request at a time."""

    def __init__(self, ws, label, policy_text):
        self.label = label
        self.log = os.path.join(work, "audit-%s-%s.jsonl" % (os.path.basename(ws),
                                                            label.replace(" ", "_").replace(",", "")))
        argv = [cordon, "serve", "--workspace", ws, "--audit-log", self.log]
        for i, text in enumerate(policy_text):
            path = self.log + ".%d.toml" % i
            with open(path, "w") as fh:
                fh.write(text)
            argv += ["--policy", path]
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, cwd=ws)
        self.next = 0
        self.calls = 0
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
                sys.exit("bench/warm.py: serve (%s) closed: %s" % (self.label, self.p.stderr.read().decode()[-2000:]))
            msg = json.loads(line)
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg
            if "method" in msg and "id" in msg:  # a server->client request: answer it
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})

    def true(self):
        t = time.perf_counter()
        r = self.request("tools/call", {"name": "run_shell", "arguments": {"program": "/bin/true"}})
        dt = (time.perf_counter() - t) * 1000
        res = r.get("result", {})
        sc = res.get("structuredContent", {})
        if "error" in r or res.get("isError") or sc.get("exit_code") != 0:
            sys.exit("bench/warm.py: run_shell /bin/true failed (%s): %s" % (self.label, json.dumps(r)[:2000]))
        self.calls += 1
        return dt

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)
        if self.p.returncode != 0:
            sys.exit("bench/warm.py: serve (%s) exited %d" % (self.label, self.p.returncode))
        with open(self.log) as fh:
            return [json.loads(l) for l in fh if l.strip()]


def bare_true():
    t = time.perf_counter()
    pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
    _, status = os.waitpid(pid, 0)
    dt = (time.perf_counter() - t) * 1000
    assert os.waitstatus_to_exitcode(status) == 0
    return dt


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


load_before = open("/proc/loadavg").read().split()[:3]
results = []  # (workspace label, row label, samples, bare samples, records)
for ws_label, ws in (("10 files, no repository", small_ws()),
                     ("1k tree, git repository, change records on", repo_1k())):
    sessions = [Serve(ws, label, text) for label, text in policies.items()]
    for _ in range(warmup):
        bare_true()
        for s in sessions:
            s.true()
    bare, samples = [], {s.label: [] for s in sessions}
    for i in range(rounds):
        bare.append(bare_true())
        # Rotate the order so that no session always follows the bare spawn.
        for k in range(len(sessions)):
            s = sessions[(i + k) % len(sessions)]
            samples[s.label].append(s.true())
    for s in sessions:
        records = [r for r in s.close() if r.get("type") == "process"]
        if len(records) != s.calls:
            sys.exit("bench/warm.py: %s (%s): %d process records for %d calls"
                     % (ws_label, s.label, len(records), s.calls))
        want = "cold" if s.label == "cold" else "warm"
        kinds = {(r.get("launch") or {}).get("kind") for r in records}
        if kinds != {want}:
            reasons = {(r.get("launch") or {}).get("reason") for r in records}
            sys.exit("bench/warm.py: %s (%s): launch kinds %s, reasons %s; want only %r"
                     % (ws_label, s.label, kinds, reasons, want))
        results.append((ws_label, s.label, samples[s.label], bare, records))
load_after = open("/proc/loadavg").read().split()[:3]

print("| workspace | call | median | p90 | min | **paired median ratio** | min/min ratio |")
print("|---|---|---|---|---|---|---|")
shown = set()
for ws_label, label, xs, bare, records in results:
    if ws_label not in shown:
        shown.add(ws_label)
        print("| %s | bare posix_spawn + waitpid of /bin/true | %.3f ms | %.3f ms | %.3f ms | | |"
              % (ws_label, statistics.median(bare), pct(bare, 0.9), min(bare)))
    ratio = statistics.median(x / b for x, b in zip(xs, bare))
    name = "`run_shell /bin/true` via serve, " + label
    print("| %s | %s | %.3f ms | %.3f ms | %.3f ms | **%.2fx** | %.2fx |"
          % (ws_label, name, statistics.median(xs), pct(xs, 0.9), min(xs), ratio, min(xs) / min(bare)))
print()
for ws_label, label, xs, bare, records in results:
    el = [r["elapsed_ms"] for r in records[warmup:]]
    commits = [r["changes"]["commit_ms"] for r in records[warmup:]
               if isinstance(r.get("changes"), dict) and "commit_ms" in r["changes"]]
    launch = records[-1].get("launch")
    line = "%s, %s: process.elapsed_ms median %.2f" % (ws_label, label, statistics.median(el))
    if commits:
        line += ", changes.commit_ms median %.2f" % statistics.median(commits)
    print(line + "; last launch %s" % json.dumps(launch))
print("\n%d rounds after %d warm-up calls each; %d CPUs; uid %d; load %s -> %s; %s"
      % (rounds, warmup, os.cpu_count(), os.getuid(), " ".join(load_before), " ".join(load_after),
         time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
shutil.rmtree(work, ignore_errors=True)
