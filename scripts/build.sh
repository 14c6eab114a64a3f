#!/usr/bin/env bash
# Configures and builds cordon into ${BUILD_DIR:-build}. Extra arguments go to cmake, and so do
# the words of $CORDON_CMAKE_ARGS (CI sets -DCORDON_WERROR=ON there). $CORDON_TARGETS names the
# targets to build (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
# With ccache, paths under the clone are hashed relative to it: another build directory of the
# same sources (the package's, with the same flags) reuses the objects.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
fi
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja "${launcher[@]}" ${CORDON_CMAKE_ARGS:-} "$@" >/dev/null
# shellcheck disable=SC2086
ninja -C "$build" ${CORDON_TARGETS:-}
