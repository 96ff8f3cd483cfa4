#!/usr/bin/env bash
# Runs franz-go's own pkg/kgo integration tests (the franz-go version in
# go.mod) against a fresh embedded kbroker, and prints the pass/fail count.
# Usage: scripts/kgo-suite.sh [extra go test flags, e.g. -test.run 'TestGroup']
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

port=${KGO_PORT:-19092}
# A second listener, SASL_PLAINTEXT with SCRAM, for the suite's SCRAM tests
# (KGO_TEST_SCRAM_SEEDS); the user is created through the first.
scram_port=${KGO_SCRAM_PORT:-$((port + 1))}
go build -o "$work/kbroker" ./cmd/kbroker
go test -c -o "$work/kgo.test" github.com/twmb/franz-go/pkg/kgo
kgo_dir=$(go list -f '{{.Dir}}' github.com/twmb/franz-go/pkg/kgo)

"$work/kbroker" --override "listeners=PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$scram_port" \
	--override "log.dirs=$work/data" --override group.initial.rebalance.delay.ms=0 \
	--override sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512 >"$work/broker.log" 2>&1 &
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
(cd "$kgo_dir" && KGO_SEEDS="127.0.0.1:$port" KGO_TEST_SCRAM_SEEDS="127.0.0.1:$scram_port" \
	KGO_TEST_SCRAM="kgo:$scram_password:256" KGO_TEST_RF=1 KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-10000} \
	"$work/kgo.test" -test.v -test.timeout "${KGO_TIMEOUT:-10m}" -test.skip "$skip" "$@") >"$work/kgo.out" 2>&1
rc=$?
set -e
grep -E '^(=== RUN|--- (PASS|FAIL|SKIP)|PASS|FAIL|ok|panic)' "$work/kgo.out" | grep -E '^--- |^panic' || true
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
exit $rc
