#!/usr/bin/env bash
# Configures and builds cordon into ${BUILD_DIR:-build}. Extra arguments go to cmake, and so do
# the words of $CORDON_CMAKE_ARGS (CI sets -DCORDON_WERROR=ON there).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja ${CORDON_CMAKE_ARGS:-} "$@" >/dev/null
ninja -C "$build"
