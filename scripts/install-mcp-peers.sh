#!/usr/bin/env bash
# Installs Node.js (Debian's, only when no node is present) and the pinned third-party MCP peers
# from the npm registry into $MCP_PEERS_DIR (default /tmp/mcp-peers), for the MCP tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
peers=${CORDON_MCP_PEER_SCRIPTS:-../shared/mcp-peers}
if [ ! -f "$peers/install.sh" ]; then
  echo "install-mcp-peers: $peers/install.sh not found; MCP peer tests will skip" >&2
  exit 0
fi
bash "$peers/install.sh" >/dev/null
