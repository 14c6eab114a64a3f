#!/usr/bin/env python3
"""Runs ctest's tests of a label as an ordinary user (scripts/test-unprivileged.sh).

    run-as-user.py BUILD DEST USER [ctest selection args, e.g. -L escape]

Asks ctest which tests the selection names (ctest --show-only=json-v1: each test's command and
ENVIRONMENT), copies each program and file they name under BUILD or the source tree into DEST
(the copy of the build laid out as an install that test-unprivileged.sh made: DEST/bin/cordon,
DEST/bin/cordon-shim, DEST/share/cordon/policies.d), and runs them as USER with runuser. The
GoogleTest cases of one program with the same environment run in one process
(--gtest_filter=A.x:B.y; a program with more than CORDON_UNPRIV_CHUNK of them, default 16, in
several such runs), several runs at once (CORDON_UNPRIV_JOBS, default 3). Each run's
output is printed when it ends; the exit status is 1 when any run failed.
"""
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time


def main():
    build, dest, user = (os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3])
    selection = sys.argv[4:]
    source = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1", *selection],
                             check=True, capture_output=True, text=True).stdout
    tests = json.loads(listing).get("tests", [])
    if not tests:
        print("run-as-user: ctest selected no tests", selection, file=sys.stderr)
        return 1

    def place(arg):
        """A path under the build or source tree, copied into DEST where USER can read it."""
        path = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if not os.path.isabs(path) or not os.path.exists(path):
            return arg
        real = os.path.realpath(path)
        if real.startswith(build + "/"):
            to = os.path.join(dest, "bin", os.path.basename(real))
        elif real.startswith(source + "/"):
            to = os.path.join(dest, "src", os.path.relpath(real, source))
        else:
            return arg
        if not os.path.exists(to):
            os.makedirs(os.path.dirname(to), exist_ok=True)
            (shutil.copytree if os.path.isdir(real) else shutil.copy2)(real, to)
            subprocess.run(["chmod", "-R", "a+rX", to], check=True)
        return arg.replace(path, to)

    groups = {}  # (command without the case filter, environment) -> case names
    order = []
    for t in tests:
        cmd = list(t["command"])
        env = []
        disabled = False
        for p in t.get("properties", []):
            if p["name"] == "ENVIRONMENT":
                env = list(p["value"])
            if p["name"] == "DISABLED" and p["value"]:
                disabled = True
        if disabled:  # ctest does not run it either ("Not Run (Disabled)")
            continue
        case = None
        # A discovered GoogleTest case: PROGRAM --gtest_filter=Suite.Name [--gtest_also_run...].
        if len(cmd) >= 2 and cmd[1].startswith("--gtest_filter=") and not cmd[1].startswith(
                "--gtest_filter=-"):
            case = cmd[1][len("--gtest_filter="):]
            cmd = [cmd[0]] + cmd[2:]
        key = (tuple(place(a) for a in cmd), tuple(env))
        if key not in groups:
            groups[key] = []
            order.append(key)
        if case is not None:
            groups[key].append(case)

    base_env = [f"PATH=/usr/local/bin:/usr/bin:/bin", f"USER={user}", "TMPDIR=/tmp",
                f"HOME={os.path.expanduser('~' + user)}", f"CI={os.environ.get('CI', '')}"]
    for name in ("MCP_PEERS_DIR", "CORDON_EGRESS_CLIENTS_DIR", "CORDON_TEST_DATA_DIR",
                 "CORDON_TEST_RESTRICT", "ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if os.environ.get(name):
            base_env.append(f"{name}={os.environ[name]}")

    # CORDON_UNPRIV_PLAIN_DEST: a second install-like copy (test-unprivileged.sh makes it) whose
    # cordon the programs not matched by CORDON_UNPRIV_SANITIZED_PROGRAMS run against; without
    # it every program runs against DEST's.
    plain = os.environ.get("CORDON_UNPRIV_PLAIN_DEST")
    sanitized = re.compile(os.environ.get("CORDON_UNPRIV_SANITIZED_PROGRAMS", ".*"))

    def binaries(program):
        at = dest if not plain or sanitized.fullmatch(os.path.basename(program)) else plain
        return [f"CORDON_TEST_BIN={at}/bin/cordon", f"CORDON_TEST_PROBE={at}/bin/cordon-probe",
                f"CORDON_TEST_POLICY_DIR={at}/share/cordon/policies.d"]

    def run(item):
        key, cases = item
        cmd, env = list(key[0]), list(key[1])
        if cases:
            cmd.insert(1, "--gtest_filter=" + ":".join(cases))
        argv = ["runuser", "-u", user, "--", "env", "-i", *base_env, *binaries(cmd[0]), *env,
                *cmd]
        start = time.time()
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
        what = os.path.basename(cmd[0]) + (f" ({len(cases)} cases)" if cases else "") + (
            " " + " ".join(env) if env else "") + (
            "" if binaries(cmd[0])[0] == f"CORDON_TEST_BIN={dest}/bin/cordon" else " [plain cordon]")
        return p.returncode, what, time.time() - start, p.stdout

    # A program with many cases is split into runs of at most CHUNK cases, and the runs with the
    # most cases (or a whole program's run, such as a forced-fallback rerun) start first: one
    # long run (the escape suite's 62 cases took 322 s under the sanitizers) no longer decides
    # when the last worker is done.
    chunk = int(os.environ.get("CORDON_UNPRIV_CHUNK", "16"))
    runs = []
    for key in order:
        cases = groups[key]
        if len(cases) <= chunk:
            runs.append((key, cases))
            continue
        n = -(-len(cases) // chunk)
        for i in range(n):
            runs.append((key, cases[i::n]))
    runs.sort(key=lambda r: -len(r[1]) if r[1] else -10**6)  # a whole program: longest
    jobs = int(os.environ.get("CORDON_UNPRIV_JOBS", "3"))
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for rc, what, secs, out in pool.map(run, runs):
            status = "ok" if rc == 0 else f"FAILED (exit {rc})"
            print(f"== as {user}: {what}: {status} in {secs:.0f}s", flush=True)
            if rc != 0:
                print(out, flush=True)
                failed.append(what)
    if failed:
        print("run-as-user: failed as " + user + ": " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
