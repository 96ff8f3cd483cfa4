#!/usr/bin/env bash
# Replication benchmark (issue 5): a real ZooKeeper and 3 kbroker processes
# on this machine, a replication-factor-3 topic, acks=all, 1 KiB records,
# 6 partitions; then, in the same run for the ratios, one embedded kbroker
# (its own RF 1, with the same acks=all idempotent producer: only the
# replication differs) and franz-go's kfake (in a process of its own):
#   1. throughput, RF 3 acks=all vs own RF 1 acks=all (issue 18's target:
#      >= 0.8x)
#   2. produce latency at a fixed RATE (default 20,000 records/s), RF 3
#      acks=all vs kfake
#   3. durable acknowledgements (kbroker.acks.fsync) on against off on the
#      same cluster, RF 3 acks=all: throughput and latency at RATE
# Each pair runs RUNS times, alternating which goes first, and the summary
# gives medians, the median of the paired runs' ratios and their range (the
# machine is small and noisy: read the ratios).
# Environment: RECORDS (default 400000), RATE (default 20000), RUNS
# (default 5), KBROKER=path to use an already built broker binary,
# BASE=0 to skip steps 1 and 2, DURABLE=0 to skip step 3.
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${RECORDS:-400000}
RATE=${RATE:-20000}
RUNS=${RUNS:-5}

work=$(mktemp -d "${TMPDIR:-/tmp}/kbench-cluster.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

. scripts/lib-zk.sh
wait_port() {
	for _ in $(seq 200); do
		(echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "port $1 never opened" >&2
	return 1
}

if [[ -n "${KBROKER:-}" ]]; then
	cp "$KBROKER" "$work/kbroker"
else
	go build -o "$work/kbroker" ./cmd/kbroker
fi
go build -o "$work/kbench" ./cmd/kbench

start_zk "$work/zk" "$work/zk/log"
pids+=("$zk_pid")
wait_port "$zkport"

brokers=()
for id in 1 2 3; do
	port=$(free_port)
	"$work/kbroker" --override broker.id=$id --override "listeners=PLAINTEXT://127.0.0.1:$port" \
		--override "log.dirs=$work/b$id" --override "zookeeper.connect=127.0.0.1:$zkport" \
		--override zookeeper.session.timeout.ms=6000 --override min.insync.replicas=2 \
		--override offsets.topic.replication.factor=3 >"$work/b$id.log" 2>&1 &
	pids+=($!)
	brokers+=("127.0.0.1:$port")
done
for b in "${brokers[@]}"; do wait_port "${b##*:}"; done
seeds=$(IFS=,; echo "${brokers[*]}")

cluster=(--brokers "$seeds" --replication-factor 3 --acks all --records "$RECORDS" --partitions 6 --json)
single=(--kbroker "$work/kbroker" --acks all --records "$RECORDS" --partitions 6 --json)
kfake=(--kfake --acks all --records "$RECORDS" --partitions 6 --rate "$RATE" --json)
mkdir -p "$work/results"
if [[ "${BASE:-1}" == 1 ]]; then
for run in $(seq "$RUNS"); do
	echo "== run $run of $RUNS (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	if ((run % 2)); then
		"$work/kbench" "${cluster[@]}" >"$work/results/throughput-rf3-$run.json"
		"$work/kbench" "${single[@]}" >"$work/results/throughput-rf1-$run.json"
		"$work/kbench" "${cluster[@]}" --rate "$RATE" >"$work/results/latency-rf3-$run.json"
		"$work/kbench" "${kfake[@]}" >"$work/results/latency-kfake-$run.json"
	else
		"$work/kbench" "${single[@]}" >"$work/results/throughput-rf1-$run.json"
		"$work/kbench" "${cluster[@]}" >"$work/results/throughput-rf3-$run.json"
		"$work/kbench" "${kfake[@]}" >"$work/results/latency-kfake-$run.json"
		"$work/kbench" "${cluster[@]}" --rate "$RATE" >"$work/results/latency-rf3-$run.json"
	fi
done

python3 - "$work/results" "$RUNS" "$RECORDS" "$RATE" <<'PY'
import json, statistics, sys
d, runs, records, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def med(name, key):
    vals = []
    for i in range(1, runs + 1):
        with open(f"{d}/{name}-{i}.json") as f:
            vals += [r[key] for r in json.load(f)["runs"]]
    return statistics.median(vals), vals
def show(vals, fmt):
    return " ".join(fmt.format(v) for v in vals)
print(f"1 KiB x {records} records, 6 partitions; medians of {runs} alternating runs")
print()
rf3, rf3v = med("throughput-rf3", "produce_records_per_sec")
rf1, rf1v = med("throughput-rf1", "produce_records_per_sec")
print("== 1. produce throughput, as fast as possible")
print(f"  RF 3 acks=all (3 brokers, idempotent): {rf3:10,.0f} records/s  (runs: {show(rf3v, '{:,.0f}')})")
print(f"  RF 1 acks=all (embedded broker, idem.): {rf1:9,.0f} records/s  (runs: {show(rf1v, '{:,.0f}')})")
pairs = [a / b for a, b in zip(rf3v, rf1v)]
pm = statistics.median(pairs)
print(f"  ratio RF 3 / own RF 1, median of the {runs} paired runs: {pm:.2f}x  (runs: {show(pairs, '{:.2f}')}; issue 18's target >= 0.8x: {'met' if pm >= 0.8 else 'MISSED'})")
c3, _ = med("throughput-rf3", "consume_records_per_sec")
print(f"  consume from the RF 3 cluster: {c3:,.0f} records/s")
print()
print(f"== 2. produce latency at {rate} records/s (ms)")
for name, label in (("latency-rf3", "RF 3 acks=all (3 brokers)"), ("latency-kfake", "kfake (one in-memory broker, acks=all)")):
    p50, _ = med(name, "latency_p50_ms")
    p99, _ = med(name, "latency_p99_ms")
    p999, _ = med(name, "latency_p999_ms")
    print(f"  {label:40s} p50 {p50:7.2f}  p99 {p99:7.2f}  p99.9 {p999:7.2f}")
r99 = med("latency-rf3", "latency_p99_ms")[0] / med("latency-kfake", "latency_p99_ms")[0]
p99pairs = [a / b for a, b in zip(med("latency-rf3", "latency_p99_ms")[1], med("latency-kfake", "latency_p99_ms")[1])]
print(f"  ratio p99 RF 3 / kfake: {r99:.2f}x of the medians, {statistics.median(p99pairs):.2f}x median of the paired runs (runs: {show(p99pairs, '{:.2f}')})")
PY
fi

# 3. Durable acknowledgements (kbroker.acks.fsync) on against off, on the
# same cluster (a topic config: each run's fresh topic gets it or not), RF 3
# acks=all, alternating, paired ratios from kbench (issue 18's targets:
# throughput >= 0.7x off, p99 at RATE records/s <= 10 ms). DURABLE=0 skips it.
if [[ "${DURABLE:-1}" == 1 ]]; then
	durable=(--brokers "$seeds" --replication-factor 3 --acks all --records "$RECORDS" --partitions 6 --runs "$RUNS"
		--vs-variant "--topic-config kbroker.acks.fsync=true")
	echo
	echo "== 3. durable acknowledgements: kbroker.acks.fsync=true (the variant) against off, RF 3 acks=all"
	echo "  throughput, as fast as possible:"
	"$work/kbench" "${durable[@]}"
	echo "  latency at $RATE records/s:"
	"$work/kbench" "${durable[@]}" --rate "$RATE" --consume=false
fi
