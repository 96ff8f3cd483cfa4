#!/usr/bin/env bash
# Instructions per request on the broker's hot paths (issue 18), counted by
# callgrind, which a shared, noisy machine does not disturb:
# server.BenchmarkHotProduce (one produce request at a time, acks=1, one
# 1 KiB record for each of 6 partitions) and server.BenchmarkHotFetch (one
# incremental fetch-session request at a time, one such batch from each of 6
# partitions). Each benchmark runs twice under callgrind, N1 and N2 ops; the
# difference of the two totals over N2-N1 is the cost of one request, the
# set-up cancelled out (client side included: the same on both sides of a
# comparison). GOMAXPROCS=1, and no asynchronous preemption (callgrind aborts
# on Go's preemption signals). Then the same benchmarks natively, for ns/op
# and allocations per request.
#
# Usage: scripts/bench-hotpath.sh [commit-or-worktree-dir ...]
#   no argument: the working tree; several: one line each, to compare.
# Environment: N1 (default 500), N2 (default 1500), BENCH (default
# "BenchmarkHotProduce BenchmarkHotFetch").
set -euo pipefail
cd "$(dirname "$0")/.."
N1=${N1:-500}
N2=${N2:-1500}
BENCH=${BENCH:-BenchmarkHotProduce BenchmarkHotFetch}
command -v valgrind >/dev/null || { echo "bench-hotpath.sh: needs valgrind" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/kbench-hotpath.XXXXXX")
trap 'rm -rf "$work"' EXIT

ir() { # binary bench ops -> total instructions
	(cd "$work" && GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind \
		--callgrind-out-file="$work/cg.out" "$1" -test.run XXX -test.bench "^$2\$" -test.benchtime "$3x" >/dev/null 2>&1)
	awk '/^(summary|totals):/ {print $2; exit}' "$work/cg.out"
}

measure() { # label test-binary
	for b in $BENCH; do
		a=$(ir "$2" "$b" "$N1")
		z=$(ir "$2" "$b" "$N2")
		native=$("$2" -test.run XXX -test.bench "^$b\$" -test.benchtime 3000x -test.benchmem 2>/dev/null | awk '/^Benchmark/ {print $3, $4, $5, $6, $7, $8}')
		echo "$1 $b: $(((z - a) / (N2 - N1))) instructions/request; native $native"
	done
}

if [[ $# -eq 0 ]]; then
	go test -c -o "$work/server.test" ./server
	measure "working tree" "$work/server.test"
	exit 0
fi
for rev in "$@"; do
	if [[ -d "$rev" ]]; then
		(cd "$rev" && go test -c -o "$work/server.test" ./server)
	else
		git worktree add --detach "$work/src" "$rev" >/dev/null 2>&1
		(cd "$work/src" && go test -c -o "$work/server.test" ./server)
		git worktree remove --force "$work/src"
	fi
	measure "$rev" "$work/server.test"
done
