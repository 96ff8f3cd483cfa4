#!/usr/bin/env bash
# Runs franz-go's own pkg/kgo integration tests (the franz-go version in
# go.mod) against a fresh embedded kbroker, and prints the pass/fail count;
# then a second pass runs the KIP-848 tests and variants and the KIP-932
# share group tests against a real ZooKeeper and 3 kbroker processes
# (KGO_TEST_RF=3, min.insync.replicas=2, internal topics at RF 3) and prints
# their counts. The exit status is non-zero if either pass fails.
# Usage: scripts/kgo-suite.sh [extra go test flags for the embedded pass, e.g. -test.run 'TestGroup']
# Environment: KGO_CLUSTER=0 skips the cluster pass; KGO_CLUSTER_TIMEOUT
# (default 5m) bounds each of its 3 test processes, above TestShareGroupETL's
# own 4-minute deadline, whose failure names the missing records (a process
# timeout first only dumps goroutines); KGO_CLUSTER_OUT / KGO_CLUSTER_LOGS
# name where its test output and broker logs are copied.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
broker_pid=
cluster_pids=()
cleanup() {
	kill "$broker_pid" 2>/dev/null || true
	wait "$broker_pid" 2>/dev/null || true
	for p in "${cluster_pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	for p in "${cluster_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

# timeout_report OUT: at a go test timeout in OUT, which tests were running
# and where the tests' own goroutines waited (the first few; the whole
# output is kept, see below).
timeout_report() {
	if grep -q '^panic: test timed out' "$1"; then
		awk '/^panic: test timed out/ {p=1} p {print} p && /^$/ {exit}' "$1"
		awk 'BEGIN {RS=""} /_test\.go/ && n < 6 {print; print ""; n++}' "$1"
	fi
}

# failure_report OUT: when OUT has failures, the failed tests' own messages
# (t.Errorf, t.Fatalf, t.Logf; the last 30 of each, without the topic
# clean-ups). go test -v streams a test's messages under "=== RUN/CONT/NAME"
# lines naming it, or prints them after its "--- FAIL" line.
failure_report() {
	grep -qE '^ *--- FAIL|^panic' "$1" || return 0
	local failed
	failed=$(grep -oE '^ *--- FAIL: [^ ]+' "$1" | awk '!seen[$3]++ {print $3}' | tr '\n' ' ')
	echo "messages of the failed tests in $1 (the last 30 of each):"
	awk -v failed="$failed" '
		function parent(t,   j) { for (j = 1; j <= n; j++) if (index(f[j], t "/") == 1) return 1; return 0 }
		BEGIN { n = split(failed, f, " "); for (i = 1; i <= n; i++) want[f[i]] = 1 }
		/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
		/^ *--- (FAIL|PASS|SKIP): / { cur = $3; next }
		/^[ \t]+/ && !/deleting topic/ && (cur in want) {
			k = cur SUBSEP (++count[cur]); line[k] = $0
		}
		END {
			for (i = 1; i <= n; i++) {
				t = f[i]; c = count[t] + 0
				if (c == 0 && parent(t)) continue # its failed subtests say it
				print "  " t ":" (c == 0 ? " (no messages)" : "")
				for (j = (c > 30 ? c - 29 : 1); j <= c; j++) print line[t SUBSEP j]
			}
		}' "$1"
	if grep -q '^panic' "$1"; then
		grep -m1 -A40 '^panic' "$1"
	fi
}

port=${KGO_PORT:-19092}
# A second listener, SASL_PLAINTEXT with SCRAM and OAUTHBEARER, for the
# suite's SCRAM tests (KGO_TEST_SCRAM_SEEDS; the user is created through the
# first) and TestOAuthAuth (KGO_TEST_OAUTH_SEEDS: unsecured tokens, an
# expired one refused with invalid_token).
scram_port=${KGO_SCRAM_PORT:-$((port + 1))}
go build -o "$work/kbroker" ./cmd/kbroker
go test -c -o "$work/kgo.test" github.com/twmb/franz-go/pkg/kgo
kgo_dir=$(go list -f '{{.Dir}}' github.com/twmb/franz-go/pkg/kgo)

"$work/kbroker" --override "listeners=PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$scram_port" \
	--override "log.dirs=$work/data" --override group.initial.rebalance.delay.ms=0 \
	--override sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER \
	--override 'listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;' \
	>"$work/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 100); do
	if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
	sleep 0.1
done

scram_password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
go run scripts/scram-user.go -broker "127.0.0.1:$port" -user kgo -password "$scram_password" -mechanism SCRAM-SHA-256

# Every test runs, the transactional ones (TestTxnEtl) and SCRAM ones included; KGO_SKIP
# takes a -test.skip pattern to leave some out. The KIP-848 variants (the .../848 subtests of
# TestGroupETL, TestTxnEtl and TestGroupSimple, Test848RegexBrokerResolves) need no switch:
# franz-go's tests run them whenever the broker advertises ConsumerGroupHeartbeat v1, as
# kbroker does. The share group tests (KIP-932: TestShareGroup*, TestConsumeRegexShareSkipsInternal)
# run whenever the broker advertises ShareFetch v2 and ShareAcknowledge v2, as kbroker does.
skip=${KGO_SKIP:-^$}
set +e
(cd "$kgo_dir" && KGO_SEEDS="127.0.0.1:$port" KGO_TEST_SCRAM_SEEDS="127.0.0.1:$scram_port" KGO_TEST_OAUTH_SEEDS="127.0.0.1:$scram_port" \
	KGO_TEST_SCRAM="kgo:$scram_password:256" KGO_TEST_RF=1 KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-10000} \
	"$work/kgo.test" -test.v -test.timeout "${KGO_TIMEOUT:-10m}" -test.skip "$skip" "$@") >"$work/kgo.out" 2>&1
rc=$?
set -e
grep -E '^(=== RUN|--- (PASS|FAIL|SKIP)|PASS|FAIL|ok|panic)' "$work/kgo.out" | grep -E '^--- |^panic' || true
timeout_report "$work/kgo.out"
failure_report "$work/kgo.out"
pass=$(grep -c '^--- PASS' "$work/kgo.out" || true)
fail=$(grep -c '^--- FAIL' "$work/kgo.out" || true)
skipped=$(grep -c '^--- SKIP' "$work/kgo.out" || true)
cp "$work/kgo.out" "${KGO_OUT:-/tmp/kgo-suite.out}"
cp "$work/broker.log" "${KGO_BROKER_LOG:-/tmp/kgo-suite-broker.log}"
pass848=$(grep -cE -- '--- PASS: [^ ]*848' "$work/kgo.out" || true)
fail848=$(grep -cE -- '--- FAIL: [^ ]*848' "$work/kgo.out" || true)
skip848=$(grep -cE -- '--- SKIP: [^ ]*848' "$work/kgo.out" || true)
echo "kgo suite: $pass passed, $fail failed, $skipped skipped (exit $rc; full output in ${KGO_OUT:-/tmp/kgo-suite.out})"
echo "KIP-848 (consumer group protocol) tests and variants: $pass848 passed, $fail848 failed, $skip848 skipped"
share_tests='(TestShareGroup[A-Za-z]*|TestConsumeRegexShareSkipsInternal) '
pass_share=$(grep -cE -- "^--- PASS: $share_tests" "$work/kgo.out" || true)
fail_share=$(grep -cE -- "^--- FAIL: $share_tests" "$work/kgo.out" || true)
skip_share=$(grep -cE -- "^--- SKIP: $share_tests" "$work/kgo.out" || true)
echo "KIP-932 (share group) tests: $pass_share passed, $fail_share failed, $skip_share skipped"

# The embedded broker is done: stop it before the cluster starts (2 cores).
kill "$broker_pid" 2>/dev/null || true
wait "$broker_pid" 2>/dev/null || true
broker_pid=
if [[ "${KGO_CLUSTER:-1}" == 0 ]]; then
	exit $rc
fi

# The cluster pass. go test's -run cannot tell TestGroupETL's classic
# "range" variant from the prefix of its "range/848" variant (a partial
# match runs), so that one classic variant runs too (not counted). A
# variant left out by -run never releases its slot of the suite's ETL
# semaphore (4 slots, shared by TestGroupETL and TestTxnEtl, which run in
# parallel): each leaves out 2, so TestTxnEtl runs in a process of its own.
# Test848RegexBrokerResolves runs on the embedded broker only: it stops
# polling once it has records of as many topics as it wants, counting
# __consumer_offsets (which the broker rightly assigns, as Kafka's does, and
# which it does not want), so on a cluster, where each topic's records come
# from another broker, it fails whenever an offsets partition's leader
# answers before its second topic's (2 of 25 runs alone, and a CI
# rehearsal on 2026-12-03). integration's TestKIP848RegexCluster covers broker-resolved
# regexes on a cluster instead.
# TestPauseIssueOct2023 (sequential, so it runs before the parallel tests
# start) is there for the suite's admin client: franz-go learns from its
# first ApiVersions whether the broker has KIP-848, and TestGroupSimple/848
# skipped itself when it checked before any other test had asked.
. scripts/lib-zk.sh
wait_port() {
	for _ in $(seq 200); do
		(echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "port $1 never opened" >&2
	return 1
}
start_zk "$work/zk" "$work/zk.log"
cluster_pids+=("$zk_pid")
wait_port "$zkport"
brokers=()
for id in 1 2 3; do
	bport=$(free_port)
	"$work/kbroker" --override broker.id=$id --override "listeners=PLAINTEXT://127.0.0.1:$bport" \
		--override "log.dirs=$work/cluster/b$id" --override "zookeeper.connect=127.0.0.1:$zkport" \
		--override zookeeper.session.timeout.ms=6000 --override min.insync.replicas=2 \
		--override offsets.topic.replication.factor=3 --override transaction.state.log.replication.factor=3 \
		--override transaction.state.log.min.isr=2 --override group.initial.rebalance.delay.ms=0 \
		>"$work/cluster-b$id.log" 2>&1 &
	cluster_pids+=($!)
	brokers+=("127.0.0.1:$bport")
done
for b in "${brokers[@]}"; do wait_port "${b##*:}"; done
seeds=$(IFS=,; echo "${brokers[*]}")
# Internal topics take the replication factor capped by the live brokers:
# the tests start once every broker is in the metadata.
for _ in $(seq 200); do
	[[ $(kcat -b "$seeds" -L 2>/dev/null | grep -cE '^ +broker [0-9]+ at') == 3 ]] && break
	sleep 0.1
done

cluster_runs=(
	'^TestTxnEtl$/^(range|sticky)$/^848$'
	'^TestPauseIssueOct2023$|^TestGroupETL$/^(range|sticky)$/^848$|^TestGroupSimple$/^848$|^TestShareGroup|^TestConsumeRegexShareSkipsInternal$'
)
if [[ -n "${KGO_CLUSTER_RUN:-}" ]]; then
	cluster_runs=("$KGO_CLUSTER_RUN")
fi
crc=0
: >"$work/kgo-cluster.out"
for run in "${cluster_runs[@]}"; do
	set +e
	(cd "$kgo_dir" && KGO_SEEDS="$seeds" KGO_TEST_RF=3 KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-10000} \
		"$work/kgo.test" -test.v -test.timeout "${KGO_CLUSTER_TIMEOUT:-5m}" -test.run "$run") >>"$work/kgo-cluster.out" 2>&1
	r=$?
	set -e
	if [[ $crc == 0 ]]; then
		crc=$r
	fi
done
grep -E '^ *--- (PASS|FAIL|SKIP)|^panic' "$work/kgo-cluster.out" || true
timeout_report "$work/kgo-cluster.out"
failure_report "$work/kgo-cluster.out"
cp "$work/kgo-cluster.out" "${KGO_CLUSTER_OUT:-/tmp/kgo-suite-cluster.out}"
logs=${KGO_CLUSTER_LOGS:-/tmp/kgo-suite-cluster-logs}
mkdir -p "$logs" && cp "$work"/cluster-b*.log "$work/zk.log" "$logs/"
# Subtests print indented result lines.
c848() { grep -cE -- "^ *--- $1: [^ ]*848" "$work/kgo-cluster.out" || true; }
cshare() { grep -cE -- "^ *--- $1: $share_tests" "$work/kgo-cluster.out" || true; }
echo "3-broker cluster (ZooKeeper, RF 3, min.insync.replicas=2; exit $crc; output in ${KGO_CLUSTER_OUT:-/tmp/kgo-suite-cluster.out}, broker logs in $logs):"
echo "  KIP-848 (consumer group protocol) tests and variants: $(c848 PASS) passed, $(c848 FAIL) failed, $(c848 SKIP) skipped"
echo "  KIP-932 (share group) tests: $(cshare PASS) passed, $(cshare FAIL) failed, $(cshare SKIP) skipped"
if [[ $rc == 0 ]]; then
	rc=$crc
fi
exit $rc
