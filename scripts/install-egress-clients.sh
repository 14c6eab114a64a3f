#!/usr/bin/env bash
# Installs the pinned npm client the egress end-to-end tests use (tests/egress_e2e_test.cc):
# undici, whose EnvHttpProxyAgent makes Node's fetch honour HTTP(S)_PROXY (Node 18/20's built-in
# fetch ignores them). Into $CORDON_EGRESS_CLIENTS_DIR (default /tmp/cordon-egress-clients); the
# Node tests skip loudly when it is absent. Node itself comes from scripts/install-mcp-peers.sh.
set -euo pipefail
dir=${CORDON_EGRESS_CLIENTS_DIR:-/tmp/cordon-egress-clients}
if ! command -v npm >/dev/null 2>&1; then
  echo "install-egress-clients: npm not found; the undici tests will skip" >&2
  exit 0
fi
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{ "name": "cordon-egress-clients", "private": true }' > package.json
# undici 7 needs Node >= 20.18.1; undici has no dependencies of its own.
npm install --no-audit --no-fund --silent undici@7.30.2 >/dev/null
