#!/usr/bin/env python3
"""What checking git content at the commit costs (issue 33 part 1, docs/adr/0014), on a
repository of 100,000 tracked files, each figure against its baseline in the same run,
interleaved:

1. `git add` of one edited file (the index changes: two `git ls-files` of 100k entries, the
   sandbox's index and the host's, run confined) vs the same call in the direct mode (no check)
   and vs a call that changes no git content (`touch` of the file);
2. `git commit` of it (the index and a moved ref: `rev-list` and `diff-tree` of one commit too);
3. bare `git ls-files --stage -z` of the index, outside cordon, for scale.

Usage: bench/git_content.py [BUILD_DIR] [RUNS]"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
cordon = os.path.abspath(os.path.join(build, "cordon"))
base = os.path.join(os.environ.get("TMPDIR", "/tmp"), "cordon-git-content-bench")
state = tempfile.mkdtemp(prefix="cordon-git-bench-state-")
env = dict(os.environ, XDG_STATE_HOME=state, XDG_CONFIG_HOME=state, GIT_CONFIG_NOSYSTEM="1",
           HOME=state)
direct = os.path.join(state, "direct.toml")
with open(direct, "w") as fh:
    fh.write('[sandbox]\nworkspace = "direct"\n')
GIT = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]


def repo():
    root = os.path.join(base, "100k")
    if os.path.isdir(os.path.join(root, ".git")):
        return root
    shutil.rmtree(root, ignore_errors=True)
    for d in range(1000):
        p = os.path.join(root, "src", "d%d" % d)
        os.makedirs(p)
        for f in range(100):
            with open(os.path.join(p, "f%d.c" % f), "w") as fh:
                fh.write("int x%d;\n" % f)
    subprocess.run(["git", "init", "-q", root], check=True)
    subprocess.run(["git", "-C", root, "add", "-A"], check=True)
    subprocess.run(GIT + ["-C", root, "commit", "-qm", "base"], check=True)
    return root


def timed(argv, extra=()):
    t0 = time.perf_counter()
    r = subprocess.run([cordon, "exec", "--workspace", ws, *extra, "--", "sh", "-c", argv],
                       env=env, capture_output=True, text=True)
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        sys.exit("cordon exec %s exited %d: %s" % (argv, r.returncode, r.stderr.strip()))
    return ms


ws = repo()
shell_git = "export HOME=/tmp GIT_CONFIG_NOSYSTEM=1; git -c user.name=b -c user.email=b@b "
results = {}
for i in range(runs):
    cases = (("touch_no_git_change", "touch src/d1/f1.c", ()),
             ("git_add_staged", "echo %d >> src/d1/f1.c && %s add src/d1/f1.c" % (i, shell_git), ()),
             ("git_add_direct", "echo %d >> src/d1/f2.c && %s add src/d1/f2.c" % (i, shell_git),
              ("--policy", direct)),
             ("git_commit_staged", shell_git + "commit -qm c%d" % i, ()))
    for name, argv, extra in cases:
        results.setdefault(name, []).append(timed(argv, extra))
    t0 = time.perf_counter()
    subprocess.run(["git", "-C", ws, "ls-files", "--stage", "-z"], stdout=subprocess.DEVNULL,
                   check=True)
    results.setdefault("bare_ls_files", []).append((time.perf_counter() - t0) * 1000)

out = {name: round(statistics.median(v), 1) for name, v in results.items()}
out["check_cost_ms_add"] = round(out["git_add_staged"] - out["touch_no_git_change"], 1)
out["ratio_add_staged_to_direct"] = round(out["git_add_staged"] / out["git_add_direct"], 2)
print(json.dumps(out, indent=1))
shutil.rmtree(state, ignore_errors=True)
