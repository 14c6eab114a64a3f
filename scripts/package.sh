#!/usr/bin/env bash
# Builds the Debian package: a Release build of cordon and cordon-shim only (no tests, no
# benchmarks: neither GoogleTest nor Google Benchmark is needed) into ${BUILD_DIR:-build-pkg},
# with the install prefix's paths compiled in, then `cpack -G DEB`. Prints the .deb's path.
# Extra arguments go to cmake, and so do the words of $CORDON_CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-pkg}
launcher=()
if command -v ccache >/dev/null 2>&1; then
  # Hashed relative to the clone: the objects of a Release build beside it are reused.
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
fi
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCORDON_BUILD_TESTS=OFF -DCORDON_BUILD_BENCH=OFF -DCORDON_INSTALLED_PATHS=ON \
  -DCORDON_ZSH_COMPLETION_DIR=share/zsh/vendor-completions "${launcher[@]}" \
  ${CORDON_CMAKE_ARGS:-} "$@" >/dev/null
ninja -C "$build" >&2
rm -f "$build"/cordon_*.deb
(cd "$build" && cpack -G DEB >&2)
ls "$PWD/$build"/cordon_*.deb
