#!/usr/bin/env python3
"""Accuracy of change records on a large tree (the deferred before side, more than 4,096
entries; docs/adr/0004-change-records.md): `cordon exec` on a 100k-entry workspace runs one
`mv` of a directory, an `rm -rf` of 50 files and 1,000 edits, and the process record's counts
must be exactly those: 0 missed, 0 false. Each run makes a fresh tree.
Usage: bench/changes_accuracy.py [BUILD_DIR] [RUNS]"""
import json, os, shutil, subprocess, sys, tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
cordon = os.path.abspath(os.path.join(build, "cordon"))
script = (
    "mv src/d5 src/d5-moved && "
    "for i in $(seq 0 49); do rm -rf src/d7/f$i.c; done && "
    "for d in 10 11 12 13 14 15 16 17 18 19; do for f in src/d$d/f*.c; do echo y >> $f; done; done && "
    "for i in $(seq 0 9); do echo y >> src/d20/f$i.c; done"  # 990 + 10 edits
)
want = {"renamed": 1, "deleted": 50, "modified": 1000}
failed = 0
for run in range(runs):
    base = tempfile.mkdtemp(prefix="cordon-changes-accuracy-")
    ws = os.path.join(base, "ws")
    for d in range(1000):  # 1,000 directories of 99 files: 100,000 entries
        p = os.path.join(ws, "src", "d%d" % d)
        os.makedirs(p)
        for f in range(99):
            with open(os.path.join(p, "f%d.c" % f), "w") as fh:
                fh.write("int x%d;\n" % f)
    log = os.path.join(base, "audit.jsonl")
    env = dict(os.environ, XDG_STATE_HOME=base, XDG_CONFIG_HOME=base)
    r = subprocess.run([cordon, "exec", "--workspace", ws, "--audit-log", log, "--", "sh", "-c",
                        script], env=env, capture_output=True, text=True)
    changes = None
    with open(log) as fh:
        for line in fh:
            rec = json.loads(line)
            if rec.get("type") == "process":
                changes = rec.get("changes")
    counts = {k: v for k, v in (changes or {}).get("counts", {}).items() if v}
    missed = sum(max(0, n - counts.get(k, 0)) for k, n in want.items())
    false = sum(max(0, n - want.get(k, 0)) for k, n in counts.items())
    ok = r.returncode == 0 and missed == 0 and false == 0
    failed += not ok
    print("run %d: exit %d, counts %s, listed %d, omitted %s: %d missed, %d false%s" %
          (run, r.returncode, json.dumps(counts, sort_keys=True),
           len((changes or {}).get("entries", [])), (changes or {}).get("omitted"), missed, false,
           "" if ok else "  <-- WRONG"))
    if r.returncode != 0:
        print("  stderr: " + r.stderr.strip()[:2000])
    shutil.rmtree(base, ignore_errors=True)
sys.exit(1 if failed else 0)
