#!/usr/bin/env bash
# Change records' cost (issue 10): the parts (snapshot walks, diff, hashing) on a 1k and a 100k
# tree with build/bench/changes_walk, then end to end with bench/changes.py.
# Usage: bench/changes.sh [BUILD_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-15}
python3 bench/changes.py "$build" 1 >/dev/null  # makes the trees
base=${TMPDIR:-/tmp}/cordon-changes-bench
for t in 1k 100k; do
  cp -a "$base/$t" "$base/$t.scratch"  # changes_walk appends to files: a copy
  "$build/bench/changes_walk" "$base/$t.scratch" 10 1000
  rm -rf "$base/$t.scratch"
done
python3 bench/changes.py "$build" "$runs"
