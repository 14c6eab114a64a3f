#!/usr/bin/env bash
# Configures and builds cordon into ${BUILD_DIR:-build}. Extra arguments go to cmake, and so do
# the words of $CORDON_CMAKE_ARGS (CI sets -DCORDON_WERROR=ON there). $CORDON_TARGETS names the
# targets to build (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja ${CORDON_CMAKE_ARGS:-} "$@" >/dev/null
# shellcheck disable=SC2086
ninja -C "$build" ${CORDON_TARGETS:-}
