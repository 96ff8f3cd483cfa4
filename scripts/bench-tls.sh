#!/usr/bin/env bash
# TLS and SASL benchmark (issue "Listeners, TLS and SASL"). Builds kbroker
# and kbench and, in one invocation, runs two comparisons against a kbroker
# that kbench starts for each run (embedded single node, RF 1, acks=1, 1 KiB
# records, 6 partitions), each pair RUNS times, alternating which goes first:
#   1. SSL / PLAINTEXT: the producer and the consumer over TLS
#   2. SASL_SSL / PLAINTEXT: the same with SCRAM-SHA-512 on the connections
# Every broker of both comparisons, plaintext arm included, is started with
# PLAINTEXT, SSL and SASL_SSL listeners (a throwaway CA and certificates in
# the run's temp dir, a SCRAM-SHA-512 user created through PLAINTEXT), so the
# arms differ only in the listener their clients use. Each table gives the
# medians, each run's ratio (#N) and the median of the paired runs' ratios,
# which is the figure to read on a noisy machine; broker CPU seconds per GB
# of record values moved (from /proc, 10 ms resolution) and peak RSS stand
# beside throughput.
#
# Environment: RUNS (default 5), RECORDS (default 200000), JSON=1 for
# machine-readable output, KBROKER=path to use an already built broker
# binary instead of building ./cmd/kbroker. Extra arguments are passed to
# kbench.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
RECORDS=${RECORDS:-200000}

. scripts/bench-build.sh

common=(--kbroker "$kbroker" --runs "$RUNS" --records "$RECORDS" --record-size 1024
	--partitions 6 --acks 1)
if [[ "${JSON:-0}" == 1 ]]; then
	common+=(--json)
fi

say "== 1. produce and consume over SSL / PLAINTEXT"
"$bin/kbench" "${common[@]}" --security ssl --vs-variant "--security plaintext" "$@"
say
say "== 2. produce and consume over SASL_SSL (SCRAM-SHA-512) / PLAINTEXT"
"$bin/kbench" "${common[@]}" --security sasl_ssl --vs-variant "--security plaintext" "$@"
