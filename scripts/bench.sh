#!/usr/bin/env bash
# Builds kbroker and kbench and runs the README benchmark set against a
# kbroker started by kbench:
#   1. 1 KiB records, 6 partitions, acks=1, as fast as possible
#   2. the same at a fixed 20,000 records/s, for produce-ack latency
#      (measured from each record's scheduled send time: coordinated-omission safe)
#   3. idle connections: IDLE_CONNS (10,000) connections opened (one
#      ApiVersions each) and held idle; the broker's RSS per idle connection,
#      and the producer's latency at IDLE_RATE (5,000) records/s while they
#      are held against a run without them (issue 20's target: p99 within 1.5x)
# 1 and 2 are each compared with franz-go's in-process kfake (same client
# settings), 3 with the same broker without the idle connections;
# alternating order, median of RUNS runs.
#
# Environment: RUNS (default 3), RECORDS (default 200000), RATE (default 20000),
# IDLE_CONNS (default 10000), IDLE_RATE (default 5000), IDLE_RECORDS (default
# 50000: 10 s at IDLE_RATE), STEPS (default "1 2 3": which to run),
# JSON=1 for machine-readable output, KBROKER=path to use an already built
# broker binary instead of building ./cmd/kbroker. Extra arguments are passed
# to kbench (e.g. --compression zstd).
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
RECORDS=${RECORDS:-200000}
RATE=${RATE:-20000}
IDLE_CONNS=${IDLE_CONNS:-10000}
IDLE_RATE=${IDLE_RATE:-5000}
IDLE_RECORDS=${IDLE_RECORDS:-50000}
STEPS=${STEPS:-1 2 3}

. scripts/bench-build.sh

common=(--kbroker "$kbroker" --runs "$RUNS" --record-size 1024 --partitions 6 --acks 1)
if [[ "${JSON:-0}" == 1 ]]; then
	common+=(--json)
fi

for step in $STEPS; do
	case $step in
	1)
		say "== 1. throughput: 1 KiB records, 6 partitions, acks=1, max speed"
		"$bin/kbench" "${common[@]}" --vs-kfake --records "$RECORDS" "$@"
		say
		;;
	2)
		say "== 2. latency: 1 KiB records, 6 partitions, acks=1, ${RATE} records/s"
		"$bin/kbench" "${common[@]}" --vs-kfake --records "$RECORDS" --rate "$RATE" "$@"
		say
		;;
	3)
		say "== 3. idle connections: ${IDLE_CONNS} held; 1 KiB records, 6 partitions, acks=1, ${IDLE_RATE} records/s"
		"$bin/kbench" "${common[@]}" --records "$IDLE_RECORDS" --rate "$IDLE_RATE" --consume=false \
			--idle-conns "$IDLE_CONNS" --vs-variant "--idle-conns 0" "$@"
		say
		;;
	*)
		echo "bench.sh: unknown step $step in STEPS" >&2
		exit 2
		;;
	esac
done
