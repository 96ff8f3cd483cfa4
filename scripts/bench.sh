#!/usr/bin/env bash
# Builds kbroker and kbench and runs the README benchmark set against a
# kbroker started by kbench, each compared with franz-go's in-process kfake
# (same client settings, alternating order, median of RUNS runs):
#   1. 1 KiB records, 6 partitions, acks=1, as fast as possible
#   2. the same at a fixed 20,000 records/s, for produce-ack latency
#      (measured from each record's scheduled send time: coordinated-omission safe)
#
# Environment: RUNS (default 3), RECORDS (default 200000), RATE (default 20000),
# JSON=1 for machine-readable output, KBROKER=path to use an already built
# broker binary instead of building ./cmd/kbroker. Extra arguments are passed
# to kbench (e.g. --compression zstd).
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
RECORDS=${RECORDS:-200000}
RATE=${RATE:-20000}

. scripts/bench-build.sh

common=(--kbroker "$kbroker" --vs-kfake --runs "$RUNS"
	--records "$RECORDS" --record-size 1024 --partitions 6 --acks 1)
if [[ "${JSON:-0}" == 1 ]]; then
	common+=(--json)
fi

say "== 1. throughput: 1 KiB records, 6 partitions, acks=1, max speed"
"$bin/kbench" "${common[@]}" "$@"
say
say "== 2. latency: 1 KiB records, 6 partitions, acks=1, ${RATE} records/s"
"$bin/kbench" "${common[@]}" --rate "$RATE" "$@"
