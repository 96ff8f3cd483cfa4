#!/usr/bin/env bash
# Log cleaner benchmark (issue 11). Not part of the test suite: it prints
# figures. The machine is usually shared; read them with that in mind
# (loadavg is printed at the start and the end).
#
# kcleanbench starts kbroker itself (embedded, one node, RF 1) and:
#   1. fills a compacted topic of one partition with MB MiB of RECORD_SIZE B
#      records over KEYS keys with the cleaner off, and keeps that data
#      directory as the snapshot every run starts from (a fresh copy);
#   2. reads the segment files as the cleaner does: buffered (page cache)
#      and O_DIRECT (device), for the MB/s to compare with;
#   3. cleans them (one cleaner thread), timed from its "log cleaned"
#      lines: MB/s of log cleaned, MB/s of I/O, records/s, rounds, bytes
#      written, peak RSS; with Kafka's default 128 MiB dedupe buffer, a
#      SMALL_BUFFER_MB one, and log.cleaner.io.max.bytes.per.second at
#      THROTTLE_MB MB/s (the I/O rate must stay at it);
#   4. produces (acks=all, the same keys) while the cleaner cleans the
#      snapshot's data, against the same with the cleaner off: p50/p99
#      produce-ack latency at RATE records/s (from each record's scheduled
#      time), then throughput, each for WINDOW; RUNS rounds, the arms'
#      order rotating; medians and ratios to the cleaner-off arm, and the
#      share of each window the cleaner was busy.
#
# Environment: MB (default 256), RECORD_SIZE (512), KEYS (200000),
# SEGMENT_MB (16), SMALL_BUFFER_MB (2), THROTTLE_MB (20), RATE (4000),
# WINDOW (8s), RUNS (3), KBROKER=path to an already built broker.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/bench-build.sh
go build -o "$bin/kcleanbench" ./cmd/kcleanbench

"$bin/kcleanbench" --kbroker "$kbroker" --mb "${MB:-256}" --record-size "${RECORD_SIZE:-512}" \
	--keys "${KEYS:-200000}" --segment-mb "${SEGMENT_MB:-16}" --small-buffer-mb "${SMALL_BUFFER_MB:-2}" \
	--throttle-mb "${THROTTLE_MB:-20}" --rate "${RATE:-4000}" --window "${WINDOW:-8s}" --runs "${RUNS:-3}" "$@"
