#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test. This is the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-mcp-peers.sh
scripts/install-egress-clients.sh
scripts/build.sh -DCORDON_BUILD_TESTS=ON
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j3
