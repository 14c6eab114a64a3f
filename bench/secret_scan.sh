#!/usr/bin/env bash
# The session-start secret-file scan's cost (issue 32, part 5), against the walk-and-stat floor
# in the same run. Usage: bench/secret_scan.sh [CORDON] [DIR]
#   CORDON  the binary (default build/cordon); DIR where the trees are made (default /tmp/scan-bench)
# Makes an empty workspace and trees of 50,000 and 200,000 small files (2,500 and 10,000
# directories), then per tree: one cold `cordon call read_file_range` (its cache removed) and
# three warm ones, printing the call's wall time and session_started.redaction.secret_files
# (ms, entries, files from the cache, truncated); then `find -printf` of each file's inode,
# size, mtime and ctime (a stat per entry, what a scan that believes no file unchanged pays).
set -euo pipefail
bin=$(realpath "${1:-build/cordon}")
dir=${2:-/tmp/scan-bench}
mkdir -p "$dir/empty"
python3 - "$dir" <<'PY'
import os, random, sys
random.seed(7)
def make(root, n):
    if os.path.exists(root): return
    made = d = 0
    while made < n:
        dd = os.path.join(root, f"pkg{d // 50}", f"mod{d % 50}")
        os.makedirs(dd, exist_ok=True)
        for i in range(20):
            with open(os.path.join(dd, f"file{i}.py"), "w") as f:
                f.write(f"# module {d} {i}\n" + "def f():\n    return %d\n" % random.randint(0, 10**9) * 5)
            made += 1
        d += 1
make(os.path.join(sys.argv[1], "t50k"), 50000)
make(os.path.join(sys.argv[1], "t200k"), 200000)
PY
export XDG_STATE_HOME=$dir/state XDG_CONFIG_HOME=$dir/config
for t in "$dir/empty" "$dir/t50k" "$dir/t200k"; do
  [ -f "$t/a.txt" ] || echo hi > "$t/a.txt"
  rm -rf "$dir/state/cordon/secret-files"
  for run in cold warm1 warm2 warm3; do
    log=$(mktemp)
    s=$(date +%s%N)
    "$bin" call read_file_range --workspace "$t" --audit-log "$log" --json '{"path":"a.txt"}' \
      >/dev/null 2>&1
    e=$(date +%s%N)
    scan=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("type") == "session_started":
        s = r["redaction"]["secret_files"]
        print("scan %.0f ms, %d entries, %d from cache, truncated %s" %
              (s["ms"], s["entries"], s["cached_files"], s["truncated"]))' "$log")
    printf '%-6s %-6s call %5d ms  %s\n' "$(basename "$t")" "$run" $(( (e - s) / 1000000 )) "$scan"
    rm -f "$log"
  done
  for i in 1 2 3; do
    /usr/bin/time -f "$(basename "$t") find -printf (a stat per entry, first 100,000): %e s" \
      sh -c "find '$t' -printf '%i %s %T@ %C@\n' | head -100000 > /dev/null"
  done
done
