#!/usr/bin/env bash
# Builds the Debian package (scripts/package.sh), installs it with apt-get, runs the installed
# /usr/bin/cordon (doctor; a confined exec; `wrap` around server-everything with the MCP SDK's
# client when the peers of scripts/install-mcp-peers.sh are there), then removes the package
# again, also when a step fails. Run as root or with sudo; it refuses to replace a cordon package
# that was installed before it started.
set -euo pipefail
trap 'echo "test-package: FAILED at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if dpkg-query -W -f='${Status}' cordon 2>/dev/null | grep -q "install ok installed"; then
  echo "test-package: a cordon package is already installed; remove it first (apt-get remove cordon)" >&2
  exit 1
fi
start=$(date +%s)
deb=$(scripts/package.sh)
echo "== package: $deb ($(( $(date +%s) - start ))s)"
dpkg-deb --info "$deb" | sed -n 's/^ \(Depends\|Recommends\|Installed-Size\):/  \1:/p'
dpkg-deb --contents "$deb" | awk '{print "  " $1 " " $6}'
tmp=$(mktemp -d /tmp/cordon-pkg-test-XXXXXX)
cleanup() {
  $SUDO apt-get remove -y -qq cordon >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
echo "== apt-get install $deb"
$SUDO apt-get install -y -qq "$deb" >/dev/null
test -x /usr/bin/cordon && test -x /usr/bin/cordon-shim
test -f /usr/share/cordon/policies.d/00-default.toml
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' /usr/share/cordon/cordon-seccomp.json
test -f /usr/share/cordon/LICENSE.moby
grep -q '^profile cordon /usr/bin/cordon flags=(unconfined)' /usr/share/cordon/apparmor/cordon
test -f /usr/share/bash-completion/completions/cordon
test -f /usr/share/man/man1/cordon.1
# The man page renders; the bash completion completes a subcommand.
man -l /usr/share/man/man1/cordon.1 2>/dev/null | grep -q "cordon exec \[OPTIONS\] -- CMD"
[ "$(bash -c 'source /usr/share/bash-completion/completions/cordon; COMP_WORDS=(cordon ex)
  COMP_CWORD=1; _cordon cordon ex cordon; echo "${COMPREPLY[*]}"')" = exec ]
echo "man cordon renders; bash completes 'cordon ex' to exec"

echo "== /usr/bin/cordon doctor"
# The state and config of this test only (XDG_*): nothing of the caller's cordon is touched.
export XDG_STATE_HOME="$tmp/state" XDG_CONFIG_HOME="$tmp/config" XDG_CACHE_HOME="$tmp/cache"
(cd "$tmp" && /usr/bin/cordon doctor) > "$tmp/doctor.txt" || { cat "$tmp/doctor.txt"; exit 1; }
grep -E "^(ok|warn|FAIL) +(cordon-shim|install|redaction|bwrap):" "$tmp/doctor.txt"
grep -q "^ok    install: cordon-shim /usr/bin/cordon-shim and the shipped policy /usr/share/cordon/policies.d" "$tmp/doctor.txt"
tail -1 "$tmp/doctor.txt"

echo "== /usr/bin/cordon exec -- true (confined)"
mkdir -p "$tmp/ws"
/usr/bin/cordon exec --workspace "$tmp/ws" --audit-log "$tmp/exec.jsonl" -- true
# The record says it ran confined under the shipped policy of the package.
/usr/bin/cordon audit verify "$tmp/exec.jsonl" >/dev/null
grep -Eq '"/usr/(bin/\.\./)?share/cordon/policies\.d/00-default\.toml"' "$tmp/exec.jsonl"
echo "exit 0; the audit log verifies and names /usr/share/cordon/policies.d"

peers=${MCP_PEERS_DIR:-/tmp/mcp-peers}
scripts=${CORDON_MCP_PEER_SCRIPTS:-../shared/mcp-peers}
everything=$peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js
if command -v node >/dev/null 2>&1 && [ -f "$everything" ] && [ -f "$scripts/sdk-client.mjs" ]; then
  echo "== /usr/bin/cordon wrap around server-everything, with the MCP SDK's client"
  MCP_PEERS_DIR=$peers node "$scripts/sdk-client.mjs" --call echo --args '{"message":"from the package"}' -- \
    /usr/bin/cordon wrap --workspace "$tmp/ws" --audit-log "$tmp/wrap.jsonl" -- \
    "$(command -v node)" "$everything" stdio > "$tmp/wrap.json"
  grep -q "from the package" "$tmp/wrap.json" || { cat "$tmp/wrap.json"; exit 1; }
  /usr/bin/cordon audit verify "$tmp/wrap.jsonl" >/dev/null
  echo "echo answered through the wrapped server; the audit log verifies"
else
  echo "== (skipped wrap: node, $everything or $scripts/sdk-client.mjs missing)"
fi

echo "== apt-get remove cordon"
$SUDO apt-get remove -y -qq cordon >/dev/null
test ! -e /usr/bin/cordon && test ! -e /usr/share/cordon/policies.d
test ! -e /usr/share/cordon/cordon-seccomp.json
test ! -e /usr/share/cordon/apparmor/cordon
trap 'rm -rf "$tmp"' EXIT
echo "== package test passed in $(( $(date +%s) - start ))s"
