#!/usr/bin/env bash
# Runs the escape tests a second time as an ordinary user (created if missing), against a copy
# of the build laid out as an install: bin/cordon, bin/cordon-shim, share/cordon/policies.d.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
user=${CORDON_TEST_USER:-cordon-ci}
if [ "$(id -u)" -ne 0 ]; then
  echo "test-unprivileged: needs root to create the test user; running as $(id -un) already"
  exec "$build/tests/escape_test"
fi
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"
dest=$(mktemp -d /tmp/cordon-unpriv-XXXXXX)
mkdir -p "$dest/bin" "$dest/share/cordon"
cp "$build/cordon" "$build/cordon-shim" "$build/tests/escape_test" "$build/tests/cordon-probe" \
  "$build/tests/egress_e2e_test" "$build/tests/staged_test" "$build/tests/workflows_test" \
  "$build/tests/direct_mode_test" "$build/tests/checkpoint_test" "$build/tests/leak_test" \
  "$build/tests/stop_test" "$build/tests/mcp_test" "$build/tests/mcp_client_test" \
  "$build/tests/warm_test" "$build/tests/supervise_test" "$dest/bin/"
cp -r policies.d "$dest/share/cordon/policies.d"
chmod -R a+rX "$dest"
home=$(getent passwd "$user" | cut -d: -f6)
rc=0
# CI passes through: under CI=true an escape test that cannot run fails instead of skipping.
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CI="${CI:-}" CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" \
  "$dest/bin/escape_test" "$@" || rc=$?
# The staged workspace's promises (issue 18), as the same ordinary user: its overlays are mounted
# in a user namespace of cordon's own there.
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CI="${CI:-}" CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" \
  "$dest/bin/staged_test" || rc=$?
# The warm sandbox's promises (issue 20): serve's calls in a fork server's own namespaces, as the
# same ordinary user (bwrap nests a user namespace there).
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CI="${CI:-}" CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" \
  "$dest/bin/warm_test" || rc=$?
# The direct mode's sweep (issue 18): its mode-bit and symlink attacks only bite an ordinary user.
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CI="${CI:-}" CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" \
  "$dest/bin/direct_mode_test" || rc=$?
# The record through rotation, truncation and witness loss, and key files others can read
# (issue 19), as the same ordinary user.
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CI="${CI:-}" CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" \
  "$dest/bin/checkpoint_test" || rc=$?
# The before-images store and audit diff (issue 22): the store masked from the sandbox, the
# staged commit's images, HEAD read by git, as the same ordinary user.
cp "$build/tests/audit_diff_test" "$dest/bin/" && chmod a+rx "$dest/bin/audit_diff_test"
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CI="${CI:-}" CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" \
  "$dest/bin/audit_diff_test" --gtest_filter='AuditDiffTest.*' || rc=$?
# The egress promises too (network mode proxy, issue 12), as the same ordinary user.
clients=${CORDON_EGRESS_CLIENTS_DIR:-/tmp/cordon-egress-clients}
[ -d "$clients" ] && chmod -R a+rX "$clients"
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CI="${CI:-}" CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" CORDON_EGRESS_CLIENTS_DIR="$clients" \
  "$dest/bin/egress_e2e_test" || rc=$?
# Agents' workflows with the staged workspace (git, npm, pytest, a wrapped server, a background
# job), as the same ordinary user; the MCP peer test reads the pinned peers from $MCP_PEERS_DIR.
peers=${MCP_PEERS_DIR:-/tmp/mcp-peers}
[ -d "$peers" ] && chmod -R a+rX "$peers"
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CI="${CI:-}" CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" MCP_PEERS_DIR="$peers" \
  "$dest/bin/workflows_test" || rc=$?
# Issue 19's leak matrix (every secret shape through every channel, real MCP peers), as the same
# ordinary user: the secret-file scan and its cache under an ordinary user's state directory.
cp -r tests/data "$dest/data" && chmod -R a+rX "$dest/data"
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CI="${CI:-}" CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" MCP_PEERS_DIR="$peers" \
  CORDON_TEST_DATA_DIR="$dest/data" "$dest/bin/leak_test" || rc=$?
# Issue 19's serve items as the same ordinary user: jobs stopped by a signal are cancelled, an
# over-deep request is answered under its id, the pending-output bound, the --http flood gate.
# Issue 23's supervision: each --http session's own jobs, and /proc read as that user.
for t in "stop_test:Signals/ServeJobStop.*" \
         "mcp_test:*OverDeep*:*PastTheBoundOfUnreadOutput*" \
         "mcp_client_test:*OverDeep*:*TokenlessFlood*" \
         "supervise_test:*"; do
  runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
    TMPDIR=/tmp CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
    CI="${CI:-}" CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" MCP_PEERS_DIR="$peers" \
    "$dest/bin/${t%%:*}" --gtest_filter="${t#*:}" || rc=$?
done
# Issue 30's restricted hosts (Docker's seccomp profile, a masked /proc, no user namespaces,
# clone3 refused), each built by cordon-test-restrict around the ordinary user's cordon.
cp "$build/tests/host_env_test" "$build/tests/cordon-test-restrict" "$dest/bin/"
cp packaging/seccomp/cordon-seccomp.json "$dest/data/" && chmod a+r "$dest/data/cordon-seccomp.json"
chmod a+rx "$dest/bin/host_env_test" "$dest/bin/cordon-test-restrict"
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
  TMPDIR=/tmp CORDON_TEST_BIN="$dest/bin/cordon" CORDON_TEST_PROBE="$dest/bin/cordon-probe" \
  CI="${CI:-}" CORDON_TEST_POLICY_DIR="$dest/share/cordon/policies.d" \
  CORDON_TEST_RESTRICT="$dest/bin/cordon-test-restrict" CORDON_TEST_DATA_DIR="$dest/data" \
  "$dest/bin/host_env_test" || rc=$?
rm -rf "$dest"
exit $rc
