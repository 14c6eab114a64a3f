#!/usr/bin/env bash
# Builds the egress codecs' libFuzzer targets (tests/fuzz/*_fuzz.cc) with clang and runs each for
# SECONDS (default 30), starting from its seed corpus in tests/fuzz/corpus/TARGET/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      TARGET: http_wire, socks5 (default: both)
# The main build uses g++, whose -fsanitize has no fuzzer, so the codec sources and the core
# sources they need are compiled here directly with -fsanitize=fuzzer,address,undefined.
#
# Which clang: libstdc++ 12's <expected> needs __cpp_concepts >= 202002L, which no clang up to 18
# reports, and with the macro raised, clang 14 still cannot compile it (it lacks P0848,
# conditionally trivial special members: "~expected() = default" is deleted for a non-trivial
# error type). clang 16 (Debian 12's clang-16, scripts/install-deps.sh) compiles it with the macro
# raised, as below. CORDON_FUZZ_CXX picks another compiler.
#
# Output: the binaries in $CORDON_FUZZ_DIR (default build/fuzz), new corpus entries in a scratch
# directory there (the seed corpus in the tree is never written), a crash's input in
# $CORDON_FUZZ_DIR/crash-*. Exit status: 0 when every target ran clean, 1 when one crashed or could
# not be built, 77 when no suitable clang is installed (under CI=true that is 1: CI must fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds=${1:-30}
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(http_wire socks5)
out=${CORDON_FUZZ_DIR:-$root/build/fuzz}

find_cxx() {
  if [ -n "${CORDON_FUZZ_CXX:-}" ]; then
    echo "$CORDON_FUZZ_CXX"
    return
  fi
  for c in clang++-16 clang++-17 clang++-18 clang++-19; do
    if command -v "$c" >/dev/null 2>&1; then
      echo "$c"
      return
    fi
  done
}
cxx=$(find_cxx)
if [ -z "$cxx" ]; then
  echo "fuzz: no clang++ 16 or newer (apt-get install clang-16 libclang-rt-16-dev, or run" \
    "scripts/install-deps.sh)" >&2
  if [ "${CI:-}" = "true" ]; then exit 1; fi
  exit 77
fi

# The sources each target needs besides its own file: the codec and what it includes of core/.
declare -A sources=(
  [http_wire]="runner/http_wire.cc core/text.cc core/error.cc"
  [socks5]="runner/socks5.cc core/error.cc"
)
flags=(-std=c++2b -U__cpp_concepts -D__cpp_concepts=202002L -O1 -g
  "-fsanitize=fuzzer,address,undefined" -fno-sanitize-recover=all -fno-omit-frame-pointer
  -Wall -Wextra -Werror -I"$root")

mkdir -p "$out"
status=0
for t in "${targets[@]}"; do
  if [ -z "${sources[$t]+x}" ]; then
    echo "fuzz: no target $t (known: ${!sources[*]})" >&2
    exit 1
  fi
  bin="$out/${t}_fuzz"
  read -ra srcs <<<"tests/fuzz/${t}_fuzz.cc ${sources[$t]}"
  rebuild=0
  [ -x "$bin" ] || rebuild=1
  for s in "${srcs[@]}" runner/"$t".h core/error.h core/text.h tests/fuzz/fuzz_check.h "$0"; do
    [ "$s" -nt "$bin" ] && rebuild=1
  done
  if [ "$rebuild" = 1 ]; then
    echo "fuzz: building $t with $cxx"
    t0=$(date +%s)
    if ! "$cxx" "${flags[@]}" "${srcs[@]}" -o "$bin"; then
      echo "fuzz: $t did not build" >&2
      status=1
      continue
    fi
    echo "fuzz: built $t in $(($(date +%s) - t0)) s"
  fi
  scratch="$out/corpus-$t"
  mkdir -p "$scratch"
  echo "fuzz: running $t for $seconds s"
  log="$out/$t.log"
  set +e
  (cd "$out" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$bin" \
    -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=1024 \
    -max_len=20000 "$scratch" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1)
  rc=$?
  set -e
  grep -E "INFO: seed corpus|DONE|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb" "$log" || true
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$log"
    echo "fuzz: $t FAILED (exit $rc; the log is $log, the input $out/crash-*)" >&2
    status=1
  else
    echo "fuzz: $t clean"
  fi
done
exit $status
