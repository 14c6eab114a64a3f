#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test. This is the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-mcp-peers.sh
scripts/install-egress-clients.sh
# A unity build (CMake joins sources eight at a time): a first build compiles each header
# once per batch, not once per file.
scripts/build.sh -DCORDON_BUILD_TESTS=ON -DCMAKE_UNITY_BUILD=ON
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j3
