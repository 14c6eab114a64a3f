#!/usr/bin/env python3
"""What the staged workspace's rename supervisor costs (issue 33 part 2, docs/adr/0013), each
against the direct mode (the workspace bound as it is, renames done by the kernel alone) in the
same run, interleaved. Timed inside the sandbox, so a call's start is not in the figures.

1. 10,000 renames of one file back and forth: microseconds per rename.
2. a build's pattern: 5,000 files each written under a temporary name and renamed into place.
3. a directory of the host's tree (1,000 files in 10 directories) renamed by os.rename: the
   supervisor's copy in the staged mode against the kernel's rename in the direct mode, beside
   `mv` in the staged mode (what a program had to do before: copy).

Usage: bench/staged_renames.py [BUILD_DIR] [RUNS]"""
import json, os, shutil, statistics, subprocess, sys, tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
cordon = os.path.abspath(os.path.join(build, "cordon"))
state = tempfile.mkdtemp(prefix="cordon-rename-bench-")
env = dict(os.environ, XDG_STATE_HOME=state, XDG_CONFIG_HOME=state)
direct = os.path.join(state, "direct.toml")
with open(direct, "w") as fh:
    fh.write('[sandbox]\nworkspace = "direct"\n')

SWAP = r"""
import os, time
open("a", "w").close()
t = time.perf_counter()
for i in range(5000):
    os.rename("a", "b"); os.rename("b", "a")
print((time.perf_counter() - t) * 1e6 / 10000)
os.unlink("a")
"""
BUILD = r"""
import os, time
os.makedirs("out", exist_ok=True)
t = time.perf_counter()
for i in range(5000):
    with open("out/.f%d.tmp" % i, "w") as fh:
        fh.write("x")
    os.rename("out/.f%d.tmp" % i, "out/f%d" % i)
print((time.perf_counter() - t) * 1000)
"""
MOVE = r"""
import os, sys, time
t = time.perf_counter()
os.rename("tree", "moved")
print((time.perf_counter() - t) * 1000)
"""
MV = "import subprocess, time\nt = time.perf_counter()\n" \
     "subprocess.run(['mv', 'tree', 'moved'], check=True)\n" \
     "print((time.perf_counter() - t) * 1000)\n"


def workspace():
    ws = tempfile.mkdtemp(prefix="ws-", dir=state)
    for d in range(10):
        p = os.path.join(ws, "tree", "d%d" % d)
        os.makedirs(p)
        for f in range(100):
            with open(os.path.join(p, "f%d.c" % f), "w") as fh:
                fh.write("int x%d;\n" % f)
    return ws


def inside(ws, script, staged):
    extra = [] if staged else ["--policy", direct]
    r = subprocess.run([cordon, "exec", "--workspace", ws, *extra, "--", "python3", "-c", script],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("cordon exec exited %d: %s" % (r.returncode, r.stderr.strip()))
    return float(r.stdout.strip().splitlines()[-1])


results = {}
for _ in range(runs):
    for name, script, modes in (("rename_us", SWAP, ("staged", "direct")),
                                ("build_ms", BUILD, ("staged", "direct")),
                                ("dir_move_ms", MOVE, ("staged", "direct")),
                                ("dir_mv_ms", MV, ("staged",))):
        for mode in modes:
            ws = workspace()
            results.setdefault((name, mode), []).append(inside(ws, script, mode == "staged"))
            shutil.rmtree(ws, ignore_errors=True)

out = {}
for (name, mode), values in sorted(results.items()):
    out.setdefault(name, {})[mode] = round(statistics.median(values), 2)
for name, by_mode in out.items():
    if "direct" in by_mode and by_mode["direct"] > 0:
        by_mode["ratio_staged_to_direct"] = round(by_mode["staged"] / by_mode["direct"], 2)
print(json.dumps(out, indent=1))
shutil.rmtree(state, ignore_errors=True)
