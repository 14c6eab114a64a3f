#!/usr/bin/env python3
"""Egress proxy figures (issue 12), each beside its baseline from the same run.

1. Start cost: `cordon exec --network proxy --allow-domain X -- true` against `--network none`
   and `--network loopback`, runs interleaved, medians and the ratio (target: at most 1.2x).
2. Throughput: a 100 MB body from bench/paced_server.c (127.0.0.1, paced to 100 MB/s per
   connection) downloaded by curl on the host, by curl in `cordon exec --network allow`
   (the sandbox without the proxy), and by curl in `cordon exec --network proxy` both as
   absolute-form plain HTTP and through a CONNECT tunnel (`curl -p`); target at least 0.9x the
   host's throughput.
3. Time to first byte (`time_starttransfer - time_connect`, so the TCP connect to the proxy or
   the server is left out and the proxy's decision, its upstream connect and, for -p, the
   CONNECT exchange are in), median of small requests; target: at most 1 ms added.
4. CPU per GB: a 1 GB body from the same server unpaced, through the proxy; the CPU of every
   process of the sandbox's tree except the command (curl and its shell), i.e. cordon itself
   here, sampled from /proc when the command prints "start" and "done".

The same figures for srt (@anthropic-ai/sandbox-runtime) when it is installed: set SRT to its
dist/cli.js (default /work/.cache/srt/node_modules/@anthropic-ai/sandbox-runtime/dist/cli.js;
install it with `npm install --prefix DIR @anthropic-ai/sandbox-runtime`; it needs bwrap, socat
and rg). srt has no resolve map, so its allowlist names 127.0.0.1:PORT and curl asks for the
address (`--noproxy ''`: srt's NO_PROXY lists 127.0.0.1, which inside its sandbox is not the
host).

Usage: bench/egress.py [BUILD_DIR]   (default: build). Env: RUNS (start runs, default 30),
TPUT_RUNS (default 5), TTFB_REQS (default 30), CPU_RUNS (default 3), SRT (see above; empty
to skip). Only 127.0.0.1 is used; the servers are stopped at the end. Prints a Markdown table
and then the figures as JSON."""
import atexit, json, os, random, shutil, signal, statistics, subprocess, sys, tempfile, time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
cordon = os.path.join(build, "cordon")
here = os.path.dirname(os.path.abspath(__file__))
RUNS = int(os.environ.get("RUNS", "30"))
TPUT_RUNS = int(os.environ.get("TPUT_RUNS", "5"))
TTFB_REQS = int(os.environ.get("TTFB_REQS", "30"))
CPU_RUNS = int(os.environ.get("CPU_RUNS", "3"))
RATE = 100_000_000  # bytes per second, per connection
BODY = 100_000_000
BIG = 1_000_000_000
SMALL = 1000
NAME = "dl.example.test"
srt_default = "/work/.cache/srt/node_modules/@anthropic-ai/sandbox-runtime/dist/cli.js"
srt = os.environ.get("SRT", srt_default if os.path.exists(srt_default) else "")
curl = shutil.which("curl")
node = shutil.which("node")
if not os.path.exists(cordon) or not curl:
    sys.exit("bench/egress.py: needs BUILD_DIR/cordon and curl")
if srt and not (node and shutil.which("socat") and shutil.which("bwrap")):
    print("srt skipped: node, socat or bwrap missing", file=sys.stderr)
    srt = ""

work = tempfile.mkdtemp(prefix="cordon-egress-bench-")
ws = os.path.join(work, "ws")
os.makedirs(ws)
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
           XDG_STATE_HOME=os.path.join(work, "state"))
for k in list(env):
    if k.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        del env[k]  # the host's curl must go direct
log = os.path.join(work, "audit.jsonl")
server_bin = os.path.join(work, "paced_server")
subprocess.run(["cc", "-O2", "-o", server_bin, os.path.join(here, "paced_server.c")], check=True)

servers = []
def start_server(rate):
    p = subprocess.Popen([server_bin, "0", str(rate)], stdout=subprocess.PIPE, text=True)
    servers.append(p)
    line = p.stdout.readline().split()
    if len(line) != 2 or line[0] != "ready":
        sys.exit("paced_server did not start")
    return int(line[1])

def stop_servers():
    for p in servers:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=5)

def cleanup():
    stop_servers()
    shutil.rmtree(work, ignore_errors=True)

atexit.register(cleanup)  # also on sys.exit from a failed run: no server is left behind
paced = start_server(RATE)
fast = start_server(0)

def cordon_argv(mode, ports=()):
    argv = [cordon, "exec", "--workspace", ws, "--audit-log", log, "--network", mode]
    if mode == "proxy":
        for p in ports:
            argv += ["--allow-domain", f"{NAME}:{p}"]
        argv += ["--resolve", f"{NAME}=127.0.0.1"]
    return argv + ["--"]

srt_settings = os.path.join(work, "srt-settings.json")
with open(srt_settings, "w") as f:
    json.dump({"network": {"allowedDomains": [f"127.0.0.1:{paced}", f"127.0.0.1:{fast}"],
                           "deniedDomains": []},
               "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}, f)

def srt_argv():
    return [node, srt, "--settings", srt_settings]

# Each "where" says how to run a shell line and which URL the command asks for.
def url(where, port, size):
    host = "127.0.0.1" if where in ("host", "allow") or where.startswith("srt") else NAME
    return f"http://{host}:{port}/{size}"

def runner(where):
    if where == "host":
        return []
    if where == "allow":
        return cordon_argv("allow")
    if where.startswith("proxy"):
        return cordon_argv("proxy", (paced, fast))
    return srt_argv()

def curl_flags(where):
    f = ["-sS", "-o", "/dev/null"]
    if where.endswith("-connect"):
        f.append("-p")  # CONNECT tunnel to the proxy, plain HTTP inside it
    if where.startswith("srt"):
        f += ["--noproxy", ""]
    return f

def sh(argv):
    return " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)

def run_sh(where, script, timeout=120):
    argv = runner(where) + ["/bin/sh", "-c", script]
    r = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"{where}: exit {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout

# --- 1. start cost ------------------------------------------------------------------------
starts = {"none": cordon_argv("none") + ["true"], "loopback": cordon_argv("loopback") + ["true"],
          "proxy": cordon_argv("proxy", (paced,)) + ["true"]}
if srt:
    starts["srt"] = srt_argv() + ["true"]
def timed_start(k, argv):
    # Wall time, and the CPU of the whole start (the launcher and every process it reaped:
    # wait4's rusage), which other load on the host inflates far less than the wall time.
    t = time.perf_counter()
    p = subprocess.Popen(argv, cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - t) * 1000
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"start {k}: exit {p.returncode}: {subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True).stderr[-2000:]}")
    return wall, (ru.ru_utime + ru.ru_stime) * 1000

samples = {k: [] for k in starts}
cpu_samples = {k: [] for k in starts}
for k, argv in starts.items():  # warm-up
    timed_start(k, argv)
# cordon's three modes interleaved in a shuffled order each round; srt's starts after them, in
# a loop of their own: node and socat still wind down after srt returns, which would charge the
# start that follows one.
rng = random.Random(12)
cordon_modes = [k for k in starts if k != "srt"]
for _ in range(RUNS):
    rng.shuffle(cordon_modes)
    for k in cordon_modes:
        wall, c = timed_start(k, starts[k])
        samples[k].append(wall)
        cpu_samples[k].append(c)
for _ in range(RUNS if srt else 0):
    wall, c = timed_start("srt", starts["srt"])
    samples["srt"].append(wall)
    cpu_samples["srt"].append(c)
start_ms = {k: statistics.median(v) for k, v in samples.items()}
start_cpu_ms = {k: statistics.median(v) for k, v in cpu_samples.items()}

# --- 2. throughput, paced --------------------------------------------------------------------
wheres = ["host", "allow", "proxy-http", "proxy-connect"]
if srt:
    wheres += ["srt-http", "srt-connect"]
tput = {w: [] for w in wheres}
short = {}  # where -> how many transfers ended before the whole body
for _ in range(TPUT_RUNS):
    for w in wheres:
        out = run_sh(w, sh([curl] + curl_flags(w) + ["-w", "%{size_download} %{speed_download}\\n",
                                                     url(w, paced, BODY)]) + " || true")
        size, speed = out.split()
        if int(size) != BODY:
            short[w] = short.get(w, 0) + 1  # counted and reported, not a figure
            continue
        tput[w].append(float(speed) / 1e6)
tput_mbs = {w: statistics.median(v) if v else float("nan") for w, v in tput.items()}

# --- 3. time to first byte ------------------------------------------------------------------
ttfb = {}
for w in wheres:
    one = sh([curl] + curl_flags(w) + ["-w", "%{time_connect} %{time_starttransfer}\\n",
                                       url(w, fast, SMALL)])
    out = run_sh(w, f"i=0; while [ $i -lt {TTFB_REQS} ]; do {one}; i=$((i+1)); done")
    vals = [(float(b) - float(a)) * 1000 for a, b in (l.split() for l in out.splitlines())]
    if len(vals) != TTFB_REQS:
        sys.exit(f"{w}: {len(vals)} of {TTFB_REQS} requests answered")
    ttfb[w] = statistics.median(vals)

# --- 4. CPU per GB, unpaced -------------------------------------------------------------------
CLK = os.sysconf("SC_CLK_TCK")

def tree_cpu(root):
    """utime+stime (+ that of reaped children) of `root` and its descendants, in seconds,
    leaving out the command's own processes: the shell (whose reaped children are curl) and
    curl."""
    procs = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            s = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        comm = s[s.index("(") + 1:s.rindex(")")]
        f = s[s.rindex(")") + 2:].split()
        procs[int(d)] = (int(f[1]), comm, sum(int(x) for x in f[11:15]))
    keep, todo = set(), [root]
    while todo:
        p = todo.pop()
        keep.add(p)
        todo += [c for c, v in procs.items() if v[0] == p and c not in keep]
    return sum(procs[p][2] for p in keep if p in procs and procs[p][1] not in ("sh", "curl")) / CLK

def cpu_run(where):
    c = sh([curl] + curl_flags(where) + ["-w", "%{size_download} %{speed_download}\\n",
                                         url(where, fast, BIG)])
    p = subprocess.Popen(runner(where) + ["/bin/sh", "-c", f"echo start; {c}; echo done; read x"],
                         cwd=ws, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "start"
    before = tree_cpu(p.pid)
    size, speed = p.stdout.readline().split()
    assert p.stdout.readline().strip() == "done"
    after = tree_cpu(p.pid)
    p.stdin.write("\n")
    p.stdin.close()
    p.wait(timeout=30)
    if int(size) != BIG:
        short[where + " (1 GB)"] = short.get(where + " (1 GB)", 0) + 1
    return (after - before) / (int(size) / 1e9), float(speed) / 1e6

cpu_wheres = ["proxy-http", "proxy-connect"] + (["srt-http", "srt-connect"] if srt else [])
cpu = {w: [] for w in cpu_wheres}
fast_tput = {w: [] for w in ["host"] + cpu_wheres}
for _ in range(CPU_RUNS):
    out = run_sh("host", sh([curl] + curl_flags("host") + ["-w", "%{speed_download}\\n",
                                                           url("host", fast, BIG)]))
    fast_tput["host"].append(float(out) / 1e6)
    for w in cpu_wheres:
        s, mbs = cpu_run(w)
        cpu[w].append(s)
        fast_tput[w].append(mbs)
cpu_s = {w: statistics.median(v) for w, v in cpu.items()}
fast_mbs = {w: statistics.median(v) for w, v in fast_tput.items()}
cleanup()

# --- report ---------------------------------------------------------------------------------
label = {"host": "curl on the host", "allow": "curl in `cordon exec --network allow`",
         "proxy-http": "cordon proxy, plain HTTP (absolute form)",
         "proxy-connect": "cordon proxy, CONNECT tunnel (`curl -p`)",
         "srt-http": "srt proxy, plain HTTP", "srt-connect": "srt proxy, CONNECT tunnel"}
print("| figure | result | baseline | ratio / added |")
print("|---|---|---|---|")
base = start_ms["none"]
cb = start_cpu_ms["none"]
def startrow(text, k, strong=False):
    r = f"{start_ms[k] / base:.2f}x wall, {start_cpu_ms[k] / cb:.2f}x CPU"
    print(f"| {text} | {start_ms[k]:.1f} ms (CPU {start_cpu_ms[k]:.1f} ms) | none | {'**' + r + '**' if strong else r} |")
print(f"| `cordon exec --network none -- true` | {base:.1f} ms (CPU {cb:.1f} ms) | | |")
startrow("`--network loopback -- true`", "loopback")
startrow(f"`--network proxy --allow-domain {NAME}:PORT -- true` (target <= 1.2x)", "proxy", True)
if srt:
    startrow("`srt true` (allowlist of 2 entries)", "srt")
h = tput_mbs["host"]
for w in wheres[1:]:
    strong = w.startswith("proxy")
    r = f"{tput_mbs[w] / h:.2f}x"
    print(f"| 100 MB at 100 MB/s: {label[w]} | {tput_mbs[w]:.1f} MB/s | host {h:.1f} MB/s | {'**' + r + '**' if strong else r} |")
t0 = ttfb["host"]
print(f"| time to first byte (minus connect), curl on the host | {t0:.3f} ms | | |")
for w in wheres[1:]:
    d = f"+{ttfb[w] - t0:.3f} ms"
    print(f"| time to first byte: {label[w]} | {ttfb[w]:.3f} ms | host | {'**' + d + '**' if w.startswith('proxy') else d} |")
for w in cpu_wheres:
    print(f"| CPU per GB, unpaced: {label[w]} | {cpu_s[w]:.3f} s/GB ({fast_mbs[w]:.0f} MB/s) | host curl {fast_mbs['host']:.0f} MB/s | {fast_mbs[w] / fast_mbs['host']:.2f}x throughput |")
cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
note = (f"{RUNS} starts each (cordon's interleaved), {TPUT_RUNS} paced downloads, {TTFB_REQS} small requests, "
        f"{CPU_RUNS} x 1 GB per row; {os.cpu_count()} CPUs ({cpu_model}); load {os.getloadavg()[0]:.1f}; "
        f"uid {os.getuid()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
for w, n in short.items():
    print(f"\n{w}: {n} transfer(s) ended before the whole body (curl: transfer closed with bytes remaining)")
print(f"\n{note}\n")
print(json.dumps({"start_ms": start_ms, "start_cpu_ms": start_cpu_ms, "throughput_mb_s": tput_mbs, "ttfb_ms": ttfb,
                  "cpu_s_per_gb": cpu_s, "unpaced_mb_s": fast_mbs, "short_transfers": short,
                  "ratios": {"proxy_start_vs_none": start_ms["proxy"] / base,
                             **{f"{w}_throughput_vs_host": tput_mbs[w] / h for w in wheres[1:]},
                             **{f"{w}_ttfb_added_ms": ttfb[w] - t0 for w in wheres[1:]}},
                  "note": note}, indent=1))
