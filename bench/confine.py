#!/usr/bin/env python3
"""Confinement overhead, each figure beside its baseline from the same run.

1. `cordon exec -- true`  vs  bare `true`  vs  `bwrap` alone with the same namespaces, and vs
   `bwrap` with cordon's own mounts (the argv of `cordon exec --plan`, running `true` in place
   of the shim): the gap between the last two is cordon's supervisor and shim.
2. confined `search_text` (cordon call)  vs  bare `rg --json` over a copy of /usr/include.

Usage: bench/confine.py [BUILD_DIR]   (default: build). Run it as an ordinary user too
(`runuser -u USER -- python3 bench/confine.py build`): root on this host pays for cgroup v1
moves that most users never make."""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
cordon = os.path.abspath(os.path.join(build, "cordon"))
bwrap = shutil.which("bwrap")
rg = shutil.which("rg")
work = tempfile.mkdtemp(prefix="cordon-bench-")
ws = os.path.join(work, "ws")
tree = os.path.join(ws, "include")
os.makedirs(ws)
shutil.copytree("/usr/include", tree, symlinks=True)
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tree) for f in fs
           if not os.path.islink(os.path.join(d, f)))
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"))
log = os.path.join(work, "audit.jsonl")

def timed(argv, runs, cwd=ws, capture=False):
    # warm-up, then the median wall time in ms. With capture, stdout goes to a pipe that is read,
    # as search_text reads rg's output (1.8 MB here): writing it to /dev/null costs rg less.
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        samples.append((time.perf_counter() - t) * 1000)
        if r.returncode not in (0, 1):
            sys.exit(f"{argv[:3]} failed with {r.returncode}")
    return statistics.median(samples)

# The same namespaces and mounts cordon asks bwrap for, without cordon or its shim.
bwrap_alone = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--unshare-net", "--die-with-parent", "--new-session",
               "--clearenv", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
               "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
               "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
               "--bind", ws, ws, "--chdir", ws, "--", "/usr/bin/true"]
# bwrap with exactly the mounts cordon asks for, in a workspace of its own (bwrap leaves the
# protected stubs it creates; cordon removes them after each call).
ws_plan = os.path.join(work, "ws-plan")
os.makedirs(ws_plan)
plan = json.loads(subprocess.run([cordon, "exec", "--plan", "--workspace", ws_plan, "--audit-log", log, "--", "true"],
                                 env=env, capture_output=True, text=True, check=True).stdout)
argv = plan["bwrap"]
i = argv.index("--json-status-fd")
del argv[i:i + 2]
bwrap_same = argv[:argv.index("--") + 1] + ["/usr/bin/true"]
N = 100
t_true = timed(["/usr/bin/true"], N)
t_bwrap = timed(bwrap_alone, N)
t_bwrap_same = timed(bwrap_same, N, cwd=ws_plan)
t_exec = timed([cordon, "exec", "--workspace", ws, "--audit-log", log, "--", "true"], N)
# The same exec with audit fsync off, to show what durability costs.
nofsync = os.path.join(work, "nofsync.toml")
open(nofsync, "w").write('[audit]\nfsync = "never"\n')
t_exec_nf = timed([cordon, "exec", "--workspace", ws, "--audit-log", log, "--policy", nofsync, "--", "true"], N)

pattern = "define.*MAX"
S = 15
t_rg = timed([rg, "--json", "--no-config", "-e", pattern, "--", "."], S, capture=True)
t_search = timed([cordon, "call", "search_text", "--workspace", ws, "--audit-log", log,
                  "--json", '{"pattern":"%s"}' % pattern], S, capture=True)
t_search_nf = timed([cordon, "call", "search_text", "--workspace", ws, "--audit-log", log, "--policy", nofsync,
                     "--json", '{"pattern":"%s"}' % pattern], S, capture=True)

print(f"| figure | time (median) | ratio |")
print(f"|---|---|---|")
print(f"| bare `true` | {t_true:.2f} ms | |")
print(f"| `bwrap` alone, same namespaces and mounts | {t_bwrap:.2f} ms | {t_bwrap / t_true:.1f}x bare |")
print(f"| `bwrap` with cordon's mounts (protected paths, masks, shim bind), running `true` | {t_bwrap_same:.2f} ms | {t_bwrap_same / t_bwrap:.2f}x bwrap alone |")
print(f"| `cordon exec -- true` (audit fsync per call) | {t_exec:.2f} ms | **{t_exec / t_bwrap:.2f}x bwrap alone**, {t_exec / t_bwrap_same:.2f}x bwrap with cordon's mounts |")
print(f"| `cordon exec -- true` (audit fsync never) | {t_exec_nf:.2f} ms | {t_exec_nf / t_bwrap:.2f}x bwrap alone |")
print(f"| bare `rg --json` over {size / 1e6:.0f} MB (/usr/include copy), output read from a pipe | {t_rg:.1f} ms | |")
print(f"| confined `search_text` (cordon call, fsync per call) | {t_search:.1f} ms | **{t_search / t_rg:.2f}x bare rg** |")
print(f"| confined `search_text` (fsync never) | {t_search_nf:.1f} ms | {t_search_nf / t_rg:.2f}x bare rg |")
print(f"\n{N} runs each for exec, {S} for search; {os.cpu_count()} CPUs; uid {os.getuid()}, cgroup {plan['confinement']['cgroup']}; {time.strftime('%Y-%m-%d')}")
shutil.rmtree(work)
