#!/usr/bin/env python3
"""The staged workspace's targets (issue 18, docs/adr/0006-staged-workspace.md), each as a ratio
against a baseline measured in the same run, interleaved:

1. `cordon exec -- true` in a 100k-entry tree with 41 nested repositories vs an empty workspace
   (target <= 1.2x), staged and, for comparison, direct.
2. a command writing 10k small files: cordon staged vs the same command under bwrap with a
   direct bind of the workspace (target <= 1.3x).
3. the commit after a call that changed one file in the 100k tree: the process record's
   `changes.commit_ms` (target <= 2 ms).
4. the change record on the 100k tree after `mv` of a directory, `rm -rf` of 50 files and 1,000
   edits: every change listed or counted, nothing else (0 missed, 0 false).

Usage: bench/stage.py [BUILD_DIR] [RUNS]"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 11
cordon = os.path.abspath(os.path.join(build, "cordon"))
base = os.path.join(os.environ.get("TMPDIR", "/tmp"), "cordon-stage-bench")
state = tempfile.mkdtemp(prefix="cordon-stage-state-")
env = dict(os.environ, XDG_STATE_HOME=state, XDG_CONFIG_HOME=state)
direct = os.path.join(state, "direct.toml")
with open(direct, "w") as fh:
    fh.write('[sandbox]\nworkspace = "direct"\n')
log = os.path.join(state, "audit.jsonl")


def big_tree():
    """100k entries: 2000 directories of 49 files, 41 of them nested git repositories."""
    root = os.path.join(base, "100k")
    if os.path.isdir(root):
        return root
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for d in range(2000):
        p = os.path.join(tmp, "src", "d%d" % d)
        os.makedirs(p)
        for f in range(49):
            with open(os.path.join(p, "f%d.c" % f), "w") as fh:
                fh.write("int x%d;\n" % f)
    for r in range(41):
        subprocess.run(["git", "init", "-q", os.path.join(tmp, "src", "d%d" % (r * 48))],
                       check=True)
    os.rename(tmp, root)
    return root


def cordon_exec(ws, argv, extra=()):
    cmd = [cordon, "exec", "--workspace", ws, "--audit-log", log, *extra, "--", *argv]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        sys.exit("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return ms


def last_process():
    last = None
    with open(log) as fh:
        for line in fh:
            j = json.loads(line)
            if j.get("type") == "process":
                last = j
    return last


def med(xs):
    return statistics.median(xs)


print("load before: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
big = big_tree()
empty = tempfile.mkdtemp(prefix="cordon-stage-empty-")

# 1. exec -- true, big tree vs empty workspace.
cordon_exec(big, ["true"])
mode = last_process()["confinement"].get("workspace_mode")
t = {"empty staged": [], "big staged": [], "empty direct": [], "big direct": []}
for _ in range(runs):
    t["empty staged"].append(cordon_exec(empty, ["true"]))
    t["big staged"].append(cordon_exec(big, ["true"]))
    t["empty direct"].append(cordon_exec(empty, ["true"], ["--policy", direct]))
    t["big direct"].append(cordon_exec(big, ["true"], ["--policy", direct]))
print("1. exec -- true (workspace_mode %s), median of %d:" % (mode, runs))
for k, v in t.items():
    print("   %-13s %7.1f ms" % (k, med(v)))
print("   staged: 100k tree / empty = %.2fx (target <= 1.2x); direct: %.2fx" %
      (med(t["big staged"]) / med(t["empty staged"]), med(t["big direct"]) / med(t["empty direct"])))

# 2. 10k small files: staged vs bwrap with a direct bind.
script = "i=0; while [ $i -lt 10000 ]; do echo $i > f$i; i=$((i+1)); done"
writes = {"cordon staged": [], "bwrap direct bind": []}
def settle():
    """The filesystem's writeback of the previous run (10k files made and removed) is not this
    run's cost: sync and let the journal settle before each measured run."""
    os.sync()
    time.sleep(1.0)


for _ in range(max(3, runs // 2)):
    ws = tempfile.mkdtemp(prefix="cordon-stage-w-")
    settle()
    writes["cordon staged"].append(cordon_exec(ws, ["/bin/sh", "-c", "cd %s && %s" % (ws, script)]))
    rec = last_process()
    writes.setdefault("  of which the command (elapsed_ms)", []).append(rec["elapsed_ms"])
    writes.setdefault("  of which the commit (commit_ms)", []).append(rec["changes"]["commit_ms"])
    shutil.rmtree(ws)
    ws = tempfile.mkdtemp(prefix="cordon-stage-w-")
    settle()
    t0 = time.perf_counter()
    subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                    "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                    "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
                    "--tmpfs", "/tmp", "--bind", ws, ws, "--chdir", ws, "/bin/sh", "-c", script],
                   check=True)
    writes["bwrap direct bind"].append((time.perf_counter() - t0) * 1000)
    shutil.rmtree(ws)
print("2. a command writing 10k small files, median:")
for k, v in writes.items():
    print("   %-18s %7.1f ms" % (k, med(v)))
print("   staged / direct bind = %.2fx (target <= 1.3x)" %
      (med(writes["cordon staged"]) / med(writes["bwrap direct bind"])))

# 3. the commit after one changed file in the 100k tree.
commits = []
for i in range(runs):
    cordon_exec(big, ["/bin/sh", "-c", "echo %d > %s/src/d7/f3.c" % (i, big)])
    commits.append(last_process()["changes"].get("commit_ms", float("nan")))
print("3. commit after one changed file in the 100k tree: median %.3f ms, max %.3f ms "
      "(target <= 2 ms)" % (med(commits), max(commits)))

# 4. the change record on the 100k tree: mv of a directory, rm -rf of 50 files, 1,000 edits.
work = os.path.join(base, "100k-record")
shutil.rmtree(work, ignore_errors=True)
shutil.copytree(big, work, symlinks=True)
edits = " ".join("src/d%d/f%d.c" % (100 + i // 49, i % 49) for i in range(1000))
cmd = ("cd %s && mv src/d5 src/d5-moved && rm -rf src/d6/*.c src/d7/f0.c && "
       "for f in %s; do echo edited >> $f; done" % (work, edits))
cordon_exec(work, ["/bin/sh", "-c", cmd])
ch = last_process()["changes"]
counts = ch["counts"]
touched = ("src/d5", "src/d6/", "src/d7/f0.c") + tuple("src/d%d/" % d for d in range(100, 121))
false = [e["path"] for e in ch["entries"] if not e["path"].startswith(touched)]
# Expected: 1000 modified; 50 files deleted (49 in d6, d7/f0.c) and the directory d5 (a lower
# directory renamed: overlayfs copies it, so d5 is deleted with its 49 files below and d5-moved
# created with 49 files).
print("4. change record on the 100k tree after mv dir, rm -rf 50 files, 1000 edits:")
print("   counts %s, omitted %s, refused %d" % (json.dumps(counts), ch.get("omitted"),
                                                 len(ch.get("refused", []))))
print("   modified %d (expected 1000); deleted %d (expected 100: 50 files, and d5 with the 49 below "
      "it: a lower directory renamed is copied); created %d (expected 50: d5-moved and its 49)" %
      (counts.get("modified", 0), counts.get("deleted", 0), counts.get("created", 0)))
print("   listed entries the command did not touch (false): %d %s" % (len(false), false[:5]))
shutil.rmtree(work, ignore_errors=True)
shutil.rmtree(empty, ignore_errors=True)
print("load after: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
