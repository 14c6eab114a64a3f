#!/usr/bin/env python3
"""Launch cost of the git view (workspace/git_view.*), each figure beside its baseline.

1. `cordon exec -- true` in a workspace without a repository  vs  the same workspace with a
   small repository (one commit): the added cost of one view (list, mount points, HEAD/index
   copy, the binds, sync-out).
2. The same with 10,000 committed files: the tree without .git  vs  with it; the index is then
   ~1 MB and is copied into the view once per session.
3. The copy itself: the 10k-file index copied by temp file + rename (what sync does), alone.

Usage: bench/git_view.py [BUILD_DIR] [RUNS]   (default: build, 30). Samples are interleaved so
a busy host slows every variant alike; the wall-time median and minimum, and the median CPU
time of cordon and its children (less sensitive to a loaded host), are printed."""
import os, resource, shutil, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
cordon = os.path.abspath(os.path.join(build, "cordon"))
work = tempfile.mkdtemp(prefix="cordon-bench-git-")
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
           XDG_STATE_HOME=os.path.join(work, "state"), GIT_CONFIG_NOSYSTEM="1",
           GIT_CONFIG_GLOBAL="/dev/null", GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x",
           GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@x")

def git(repo, *args):
    subprocess.run(["git", "-C", repo, *args], env=env, check=True, stdout=subprocess.DEVNULL)

def make(name, files, repo):
    ws = os.path.join(work, name)
    os.makedirs(ws)
    for i in range(files):
        d = os.path.join(ws, "src", f"d{i // 100}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}.txt"), "w") as f:
            f.write(f"{i}\n")
    if repo:
        git(ws, "init", "-q", "-b", "main")
        git(ws, "add", "-A")
        git(ws, "commit", "-q", "--allow-empty", "-m", "base")
    return ws

cases = {
    "no repository": make("plain", 0, False),
    "small repository": make("small", 0, True),
    "10k files, no repository": make("tree", 10000, False),
    "10k files, repository": make("tree-repo", 10000, True),
}
samples = {k: [] for k in cases}
cpu = {k: [] for k in cases}
log = os.path.join(work, "audit.jsonl")
for ws in cases.values():  # warm-up
    subprocess.run([cordon, "exec", "--workspace", ws, "--audit-log", log, "--", "true"], env=env,
                   check=True, stdout=subprocess.DEVNULL)
for _ in range(runs):
    for name, ws in cases.items():
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([cordon, "exec", "--workspace", ws, "--audit-log", log, "--", "true"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        samples[name].append((time.perf_counter() - t) * 1000)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[name].append((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1000)
for name, s in samples.items():
    print(f"cordon exec -- true, {name:26s} wall median {statistics.median(s):7.1f} ms"
          f"  min {min(s):7.1f} ms   cpu (cordon+bwrap+shim) median "
          f"{statistics.median(cpu[name]):6.1f} ms")
index = os.path.join(cases["10k files, repository"], ".git", "index")
copy = []
dest = os.path.join(work, "copy")
os.makedirs(dest)
for _ in range(runs):
    t = time.perf_counter()
    tmp = os.path.join(dest, ".tmp")
    with open(index, "rb") as src, open(tmp, "wb") as dst:
        while chunk := src.read(1 << 16):
            dst.write(chunk)
    os.rename(tmp, os.path.join(dest, "index"))
    copy.append((time.perf_counter() - t) * 1000)
print(f"index of 10k files: {os.path.getsize(index)} bytes; copy + rename median "
      f"{statistics.median(copy):.2f} ms, min {min(copy):.2f} ms")
shutil.rmtree(work)
