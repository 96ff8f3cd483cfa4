#!/usr/bin/env bash
# Transactions benchmark (issue 12). Builds kbroker and kbench and, in one
# invocation, runs two comparisons against a kbroker that kbench starts for
# each run (embedded single node, RF 1, acks=all, idempotent producer, 1 KiB
# records, 6 partitions), each pair RUNS times, alternating which goes first:
#   1. produce: a franz-go transactional producer committing every
#      TXN_RECORDS records (the time includes every commit), against the
#      same records from the idempotent producer without transactions
#   2. consume: read_committed against read_uncommitted, each reading
#      transactionally written data (TXN_RECORDS per transaction)
# Each table gives the medians, each run's ratio (#N) and the median of the
# paired runs' ratios, which is the figure to read on a noisy machine; broker
# CPU seconds per GB of record values moved (from /proc, 10 ms resolution)
# and peak RSS stand beside throughput.
#
# Environment: RUNS (default 5), RECORDS (default 200000), TXN_RECORDS
# (default 100), JSON=1 for machine-readable output, KBROKER=path to use an
# already built broker binary instead of building ./cmd/kbroker. Extra
# arguments are passed to kbench.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
RECORDS=${RECORDS:-200000}
TXN_RECORDS=${TXN_RECORDS:-100}

. scripts/bench-build.sh

common=(--kbroker "$kbroker" --runs "$RUNS" --records "$RECORDS" --record-size 1024
	--partitions 6 --acks all --txn-records "$TXN_RECORDS")
if [[ "${JSON:-0}" == 1 ]]; then
	common+=(--json)
fi

say "== 1. produce: transactional ($TXN_RECORDS records per transaction) / idempotent without transactions"
"$bin/kbench" "${common[@]}" --consume=false --vs-variant "--txn-records 0" "$@"
say
say "== 2. produce: transactional ($TXN_RECORDS records per transaction) / idempotent flushed every $TXN_RECORDS records"
"$bin/kbench" "${common[@]}" --consume=false --vs-variant "--txn-records 0 --flush-every $TXN_RECORDS" "$@"
say
say "== 3. consume transactionally written data: read_committed / read_uncommitted"
"$bin/kbench" "${common[@]}" --isolation read_committed --vs-variant "--isolation read_uncommitted" "$@"
