#!/usr/bin/env bash
# The workspace guard's walk on trees of 100k files (issue 9): makes them under $TMPDIR (once)
# and runs build/bench/workspace_walk on each, warm. Usage: bench/workspace_walk.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin="$build/bench/workspace_walk"
base=${TMPDIR:-/tmp}/cordon-walk-bench
# flat: 2000 dirs x 50 files. deep: 100k files in a node_modules-like tree 8 levels deep, with a
# nested repository at the bottom.
if [ ! -d "$base/flat" ]; then
  mkdir -p "$base/flat"
  for d in $(seq 1 2000); do mkdir "$base/flat/d$d"; (cd "$base/flat/d$d" && touch $(seq -f 'f%g' 1 50)); done
fi
if [ ! -d "$base/deep" ]; then
  mkdir -p "$base/deep"
  for a in $(seq 1 10); do for b in $(seq 1 10); do for c in $(seq 1 20); do
    p="$base/deep/node_modules/p$a/lib/x$b/y/z/w$c"
    mkdir -p "$p" && (cd "$p" && touch $(seq -f 'f%g' 1 50))
  done; done; done
  mkdir -p "$base/deep/node_modules/p3/lib/x2/y/z/w7/.git/hooks"
fi
for t in flat deep; do "$bin" "$base/$t" 10; done
