#!/usr/bin/env python3
"""search_text through one warm `cordon serve` session vs bare `rg --json` read from a pipe.

One long-lived `cordon serve` (MCP over stdio, audit settings as shipped) answers many
search_text calls over a ~60 MB tree (the first entries of /usr/include, in name order, up to
64 MB); the baseline is rg with the very arguments search_text gives it, its output read from
a pipe and thrown away. Two patterns: few matches (EINVAL) and tens of thousands (\\bint\\b,
max_results 500); a third row runs EINVAL in an empty workspace (a second serve), which is the
fixed cost of a call. The rounds are interleaved (their order alternates), and the figures are
the median of the per-round ratios (paired) and min/min; the last column is the serve process's
own CPU time per call (/proc/PID/stat; its sandboxes are not in it), which load disturbs less.

Usage: bench/search.py [BUILD_DIR] [ROUNDS]   (default: build, 15). As an ordinary user:
`runuser -u cordon-ci -- python3 bench/search.py BUILD`."""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
cordon = os.path.join(build, "cordon")
rg = shutil.which("rg")
if not rg or not os.access(cordon, os.X_OK):
    sys.exit(f"bench/search.py: needs rg on PATH and {cordon}")
work = tempfile.mkdtemp(prefix="cordon-search-bench-")
ws = os.path.join(work, "ws")
tree = os.path.join(ws, "include")
os.makedirs(tree)
TARGET = 64 << 20

def tree_size(path):
    if os.path.islink(path) or not os.path.isdir(path):
        return 0 if os.path.islink(path) else os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
               if not os.path.islink(os.path.join(d, f)))

size = 0
for name in sorted(os.listdir("/usr/include")):
    src = os.path.join("/usr/include", name)
    n = tree_size(src)
    if size + n > TARGET:
        continue
    try:
        if os.path.isdir(src) and not os.path.islink(src):
            shutil.copytree(src, os.path.join(tree, name), symlinks=True)
        else:
            shutil.copy2(src, os.path.join(tree, name), follow_symlinks=False)
    except OSError:
        continue  # unreadable for this user: left out
    size += n
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"))


class Serve:
    """One `cordon serve` over stdio; calls are timed until their answer's line has arrived."""

    def __init__(self, root):
        self.p = subprocess.Popen([cordon, "serve", "--workspace", root, "--audit-log",
                                   os.path.join(work, "audit.jsonl")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, cwd=root)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()

    def request(self, method, params):
        self.next += 1
        rid = self.next
        msg = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        t = time.perf_counter()
        self.p.stdin.write((msg + "\n").encode())
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            ms = (time.perf_counter() - t) * 1000
            if not line:
                sys.exit("bench/search.py: cordon serve closed its output")
            reply = json.loads(line)
            if reply.get("id") == rid:
                return ms, reply

    def search(self, args):
        ms, reply = self.request("tools/call", {"name": "search_text", "arguments": args})
        result = reply.get("result", {})
        if "error" in reply or result.get("isError"):
            sys.exit(f"bench/search.py: search_text failed: {json.dumps(reply)[:500]}")
        return ms, result["structuredContent"]

    def cpu_ms(self):
        # cordon's own CPU (its threads; not the sandboxes, which are its children)
        fields = open(f"/proc/{self.p.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def rg_argv(pattern):
    # What search_text runs (tools/search_tools.cc), outside any sandbox.
    return [rg, "--json", "--no-config", "--no-follow", "-e", pattern, "--", "."]


def bare_rg(pattern, root, count=False):
    t = time.perf_counter()
    p = subprocess.Popen(rg_argv(pattern), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         cwd=root, env=env)
    fd = p.stdout.fileno()
    matches, carry = 0, b""
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        if count:
            lines = (carry + chunk).split(b"\n")
            carry = lines.pop()
            matches += sum(1 for l in lines if l.startswith(b'{"type":"match"'))
    rc = p.wait()
    ms = (time.perf_counter() - t) * 1000
    if rc not in (0, 1):
        sys.exit(f"bench/search.py: rg exited {rc}")
    return ms, matches + (1 if carry.startswith(b'{"type":"match"') else 0)


# The third row is the fixed cost of a call: the same search in an empty workspace.
empty = os.path.join(work, "empty")
os.makedirs(empty)
cases = [("few matches", "EINVAL", {}, ws),
         ("many matches", r"\bint\b", {"max_results": 500}, ws),
         ("fixed cost: an empty workspace", "EINVAL", {}, empty)]
serves = {ws: Serve(ws), empty: Serve(empty)}
results = {}
for label, pattern, extra, root in cases:
    serve = serves[root]
    args = dict(pattern=pattern, **extra)
    _, expected = bare_rg(pattern, root, count=True)
    _, sc = serve.search(args)  # warm-up, and the count must be rg's
    if sc["total_matches"] != expected or sc.get("total_is_lower_bound"):
        print(f"WARNING {label}: search_text counted {sc['total_matches']} "
              f"(lower bound: {sc.get('total_is_lower_bound')}), rg printed {expected} matches")
    for _ in range(2):
        bare_rg(pattern, root)
        serve.search(args)
    t_rg, t_serve = [], []
    cpu0 = serve.cpu_ms()
    for i in range(rounds):
        if i % 2 == 0:
            t_rg.append(bare_rg(pattern, root)[0])
            t_serve.append(serve.search(args)[0])
        else:
            t_serve.append(serve.search(args)[0])
            t_rg.append(bare_rg(pattern, root)[0])
    cpu = (serve.cpu_ms() - cpu0) / rounds
    paired = statistics.median(s / r for s, r in zip(t_serve, t_rg))
    results[label] = (pattern, extra, expected, sc, t_rg, t_serve, paired, cpu)
for serve in serves.values():
    serve.close()

uid = os.getuid()
print(f"| search_text via one warm `cordon serve` vs bare `rg --json` from a pipe, "
      f"{size / 1e6:.0f} MB tree | rg median | serve median | paired-median ratio | min/min "
      f"| cordon's own CPU per call |")
print("|---|---|---|---|---|---|")
for label, (pattern, extra, expected, sc, t_rg, t_serve, paired, cpu) in results.items():
    cap = f", max_results {extra['max_results']}" if extra else ""
    print(f"| {label}: `{pattern}`{cap} ({expected} matches, {sc['files_with_matches']} files) "
          f"| {statistics.median(t_rg):.1f} ms | {statistics.median(t_serve):.1f} ms "
          f"| **{paired:.2f}x** | {min(t_serve) / min(t_rg):.2f}x | {cpu:.1f} ms |")
load = os.getloadavg()
print(f"\n{rounds} interleaved rounds per pattern; uid {uid}; {os.cpu_count()} CPUs; "
      f"load {load[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M')}")
shutil.rmtree(work)
