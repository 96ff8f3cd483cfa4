#!/usr/bin/env bash
# Builds kbroker and kbench and runs the README benchmark set against a
# kbroker started by kbench (issue 18's setup):
#   1. 1 KiB records, 6 partitions, acks=1, as fast as possible: produce and
#      consume throughput, the broker's CPU seconds per GB moved (produced +
#      consumed, from /proc) and its peak RSS (VmHWM)
#   2. 1 KiB records, 6 partitions, acks=all (idempotent producer) at a fixed
#      20,000 records/s, for produce-ack latency (measured from each record's
#      scheduled send time: coordinated-omission safe)
#   3. idle connections: IDLE_CONNS (10,000) connections opened (one
#      ApiVersions each) and held idle; the broker's RSS per idle connection,
#      and the producer's latency at IDLE_RATE (5,000) records/s while they
#      are held against a run without them (issue 20's target: p99 within 1.5x)
# 1 and 2 are each compared with franz-go's kfake, which kbench starts per run
# in a process of its own (as it starts kbroker) and measures the same way;
# 3 with the same broker without the idle connections. Each pair runs RUNS
# times in alternating order (kbroker, kfake, kfake, kbroker, ...); kbench
# reports medians, the median of the paired runs' ratios and their range.
# After steps 1 and 2 the script checks issue 18's targets: produce >= 1.4x,
# consume >= 1.5x, broker CPU per GB <= 0.4x kfake's, kbroker peak RSS <=
# 64 MiB (largest of the runs), p99 at 20,000 records/s acks=all <= 0.5x
# kfake's (medians of the paired ratios).
#
# Environment: RUNS (default 5), RECORDS (default 400000), RATE (default
# 20000), LAT_RECORDS (default 200000: 10 s at RATE), IDLE_CONNS (default
# 10000), IDLE_RATE (default 5000), IDLE_RECORDS (default 50000: 10 s at
# IDLE_RATE), STEPS (default "1 2 3": which to run), JSON=1 for
# machine-readable output, KBROKER=path to use an already built broker
# binary instead of building ./cmd/kbroker, OUT=dir to keep each step's JSON
# report there. Extra arguments are passed to kbench (e.g. --compression
# zstd, or --profile-dir DIR to save CPU profiles of kbroker's produce and
# consume phases; profiling costs the broker some CPU).
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
RECORDS=${RECORDS:-400000}
RATE=${RATE:-20000}
LAT_RECORDS=${LAT_RECORDS:-200000}
IDLE_CONNS=${IDLE_CONNS:-10000}
IDLE_RATE=${IDLE_RATE:-5000}
IDLE_RECORDS=${IDLE_RECORDS:-50000}
STEPS=${STEPS:-1 2 3}

. scripts/bench-build.sh
out=${OUT:-$bin}
mkdir -p "$out"

common=(--kbroker "$kbroker" --runs "$RUNS" --record-size 1024 --partitions 6)
if [[ "${JSON:-0}" == 1 ]]; then
	common+=(--json)
fi

for step in $STEPS; do
	case $step in
	1)
		say "== 1. throughput: 1 KiB records, 6 partitions, acks=1, max speed (load average $(cut -d' ' -f1-3 /proc/loadavg))"
		"$bin/kbench" "${common[@]}" --acks 1 --vs-kfake --records "$RECORDS" --json-out "$out/step1.json" "$@"
		say
		;;
	2)
		say "== 2. latency: 1 KiB records, 6 partitions, acks=all, ${RATE} records/s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
		"$bin/kbench" "${common[@]}" --acks all --vs-kfake --records "$LAT_RECORDS" --rate "$RATE" --json-out "$out/step2.json" "$@"
		say
		;;
	3)
		say "== 3. idle connections: ${IDLE_CONNS} held; 1 KiB records, 6 partitions, acks=1, ${IDLE_RATE} records/s"
		"$bin/kbench" "${common[@]}" --acks 1 --records "$IDLE_RECORDS" --rate "$IDLE_RATE" --consume=false \
			--idle-conns "$IDLE_CONNS" --vs-variant "--idle-conns 0" --json-out "$out/step3.json" "$@"
		say
		;;
	*)
		echo "bench.sh: unknown step $step in STEPS" >&2
		exit 2
		;;
	esac
done

# Issue 18's targets, from the JSON reports of steps 1 and 2.
python3 - "$out" <<'PY' | while IFS= read -r line; do say "$line"; done
import json, os, sys
d = sys.argv[1]
def load(step):
    p = os.path.join(d, f"step{step}.json")
    return json.load(open(p)) if os.path.exists(p) else None
rows = []
def check(name, rep, metric, op, target, unit="x"):
    med = (rep.get("paired_ratio_median") or {}).get(metric)
    lo = (rep.get("paired_ratio_min") or {}).get(metric)
    hi = (rep.get("paired_ratio_max") or {}).get(metric)
    if med is None:
        rows.append(f"  {name:34s} unknown")
        return
    ok = med >= target if op == ">=" else med <= target
    rows.append(f"  {name:34s} {med:5.2f}x (pairs {lo:.2f}-{hi:.2f})  target {op} {target}{unit}: {'met' if ok else 'MISSED'}")
s1, s2 = load(1), load(2)
if s1:
    check("produce rec/s, kbroker/kfake", s1, "prod rec/s", ">=", 1.4)
    check("consume rec/s, kbroker/kfake", s1, "cons rec/s", ">=", 1.5)
    check("broker CPU s/GB, kbroker/kfake", s1, "cpu s/GB", "<=", 0.4)
    rss = [r["peak_rss_mib"] for r in s1["runs"] if r["target"] == "kbroker" and "peak_rss_mib" in r]
    if rss:
        rows.append(f"  {'kbroker peak RSS':34s} {max(rss):5.1f} MiB (runs {min(rss):.1f}-{max(rss):.1f})  target <= 64 MiB: {'met' if max(rss) <= 64 else 'MISSED'}")
if s2:
    check(f"p99 latency acks=all, kbroker/kfake", s2, "p99 ms", "<=", 0.5)
if rows:
    print("== issue 18's targets (medians of the paired ratios)")
    print("\n".join(rows))
PY
