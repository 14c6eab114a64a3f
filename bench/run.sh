#!/usr/bin/env bash
# Builds cordon (Release) and runs the benchmarks; prints each figure beside its baseline from
# the same run, as a ratio. Usage: bench/run.sh [extra google-benchmark flags]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CORDON_BENCH_BUILD:-build-bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$build" cordon_bench >/dev/null
mkdir -p bench/results
out=bench/results/foundation.json
"$build/bench/cordon_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out" --benchmark_out_format=json "$@" >/dev/null
python3 - "$out" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
med = {b["run_name"]: b for b in data["benchmarks"] if b.get("aggregate_name") == "median"}
def t(name):
    b = med[name]
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale  # milliseconds
rows = [
    ("read_file_range, 100 lines at line 700k of a 100 MB file", "BM_ReadFileRange_100MB", "BM_Baseline_ScanLines_100MB", "read()+memchr scan"),
    ("replace_range with fsync (4 KB file, audited)", "BM_ReplaceRange_Fsync", "BM_Baseline_WriteFsyncRename", "write+fsync+rename+fsync dir"),
    ("redaction of 10 MB of process output", "BM_Redact_10MB", "BM_Baseline_MemchrScan_10MB", "copy+memchr scan"),
    ("redaction of 10 MB of hostile near-secrets", "BM_Redact_Hostile_10MB", "BM_Baseline_MemchrScan_10MB", "copy+memchr scan"),
    ("read_url's HTML to text, 10 MB page", "BM_HtmlToText_10MB", "BM_Baseline_MemchrScan_10MB", "copy+memchr scan"),
    ("read_url's HTML to text, 10 MB hostile", "BM_HtmlToText_Hostile_10MB", "BM_Baseline_MemchrScan_10MB", "copy+memchr scan"),
]
print("| figure | cordon | baseline | ratio |")
print("|---|---|---|---|")
for label, a, b, base in rows:
    print(f"| {label} | {t(a):.2f} ms | {t(b):.2f} ms ({base}) | {t(a)/t(b):.2f}x |")
for name, label in [("BM_AuditAppend/no_fsync", "audit appends/s, no fsync"),
                    ("BM_AuditAppend/fsync_each", "audit appends/s, fsync each record")]:
    ips = med[name]["items_per_second"]
    base = med["BM_Baseline_AppendLine"]["items_per_second"]
    print(f"| {label} | {ips:,.0f}/s | {base:,.0f}/s (bare O_APPEND write) | {base/ips:.1f}x slower |")
v = med["BM_AuditVerify"]["bytes_per_second"] / 1e6
s = med["BM_Baseline_Sha256Lines"]["bytes_per_second"] / 1e6
print(f"| audit verify throughput | {v:.0f} MB/s | {s:.0f} MB/s (SHA-256 of each line) | {s/v:.1f}x slower |")
ctx = data["context"]
print(f"\n{ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz, {ctx.get('date')}")
PY
