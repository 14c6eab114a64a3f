#!/usr/bin/env python3
"""End-to-end cost of change records (docs/adr/0004-change-records.md): `cordon exec` with
audit.file_changes on and off, interleaved in the same run, on a 1k-file and a 100k-file
workspace, for `true`, a command that touches 1000 files, and a one-second "build" (1000 files
written, then one second of wall time). Prints median wall times, the difference and the ratio.
Usage: bench/changes.py [BUILD_DIR] [RUNS]"""
import os, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
big_runs = int(os.environ.get("BIG_RUNS", runs))  # runs on the 100k tree
cordon = os.path.abspath(os.path.join(build, "cordon"))
base = os.path.join(os.environ.get("TMPDIR", "/tmp"), "cordon-changes-bench")


def tree(name, dirs, files):
    root = os.path.join(base, name)
    if not os.path.isdir(root):
        for d in range(dirs):
            p = os.path.join(root, "src", "d%d" % d)
            os.makedirs(p)
            for f in range(files):
                with open(os.path.join(p, "f%d.c" % f), "w") as fh:
                    fh.write("int x%d;\n" % f)
    return root


state = tempfile.mkdtemp(prefix="cordon-changes-state-")
off = os.path.join(state, "off.toml")
with open(off, "w") as fh:
    fh.write("[audit]\nfile_changes = false\n")
env = dict(os.environ, XDG_STATE_HOME=state, XDG_CONFIG_HOME=state)
touch = "for d in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19; do touch src/d$d/f*.c; done"
commands = {
    "true": ["true"],
    "touch 1000": ["sh", "-c", touch],
    "1 s build, 1000 written": ["sh", "-c", touch + "; sleep 1"],
}


def once(ws, argv, on):
    log = os.path.join(state, "audit.jsonl")
    extra = [] if on else ["--policy", off]
    cmd = [cordon, "exec", "--workspace", ws, "--audit-log", log] + extra + ["--"] + argv
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return (time.perf_counter() - t0) * 1000


print("load before: %s" % open("/proc/loadavg").read().split()[:3])
for name, dirs in (("1k", 20), ("100k", 2000)):
    ws = tree(name, dirs, 50)
    for label, argv in commands.items():
        if name == "1k" and label.startswith("1 s"):
            continue
        once(ws, argv, True)  # warm
        t_on, t_off = [], []
        n = big_runs if name == "100k" else runs
        for _ in range(n):
            t_off.append(once(ws, argv, False))
            t_on.append(once(ws, argv, True))
        m_on, m_off = statistics.median(t_on), statistics.median(t_off)
        print("%-5s %-26s off %8.1f ms  on %8.1f ms  added %+7.1f ms  ratio %.3f  (min %.1f/%.1f, %d runs)"
              % (name, label, m_off, m_on, m_on - m_off, m_on / m_off, min(t_off), min(t_on), n))
print("load after: %s" % open("/proc/loadavg").read().split()[:3])
