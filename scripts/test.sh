#!/usr/bin/env bash
# kbroker's whole test suite, for a developer machine or CI (as root on a
# fresh clone it installs what is missing first):
#
#   1. system packages: kcat, zookeeper, python3-kafka, python3-confluent-kafka
#      (librdkafka), node, chromium (apt-get, only when absent), and kafkajs for the
#      JavaScript tests (npm ci)
#   2. gofmt -l         (fails if any file needs formatting)
#   3. go vet ./...
#   4. unit tests       go test -race on every package but integration/
#   5. integration      go test -race on integration/ (builds ./cmd/kbroker with
#                       -race unless KBROKER_RACE=0, runs real broker
#                       processes and real clients)
#   5b. the consumer-group, cluster and replication integration tests again
#      with the ACL authorizer on (KBROKER_TEST_AUTHZ=1)
#   6. franz-go's own pkg/kgo test suite against a kbroker (scripts/kgo-suite.sh)
#   7. kverify short: faults on a 3-broker cluster, checked (cmd/kverify), plain
#      and transactional (--txn)
#   8. fuzz             FuzzParseRequest in ./protocol for $FUZZTIME
#
# Environment: FUZZTIME (default 20s; 0 skips the fuzz step), KBROKER_RACE
# (default 1), KBROKER_BIN (use a prebuilt broker in the integration tests),
# KBROKER_TOPIC_IDENTITY_LOOPS (default 2).
# Exit status is non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-20s}
export KBROKER_RACE=${KBROKER_RACE:-1}
# Each topic identity scenario (delete and re-create a topic under a paused,
# killed or controller broker) runs this many times; 20 for the long loop.
export KBROKER_TOPIC_IDENTITY_LOOPS=${KBROKER_TOPIC_IDENTITY_LOOPS:-2}

results=()
failure_tails=()
flaky=()
failed=0
passed=0
suite_start=$SECONDS

# step NAME COMMAND...: runs COMMAND, records PASS/FAIL and its duration;
# a failed step's summary line names the tests that failed or were running
# at a go test timeout (the summary is what CI shows of a long log).
step() {
	local name=$1
	shift
	local start=$SECONDS log out tee_pid rc
	log=$(mktemp)
	echo
	echo "=== ${name}: $*"
	# Not a pipeline: the command runs in this shell (it may add to flaky).
	exec {out}> >(tee "$log")
	tee_pid=$!
	"$@" >&"$out" 2>&1
	rc=$?
	exec {out}>&-
	# tee ends once it has written everything, unless a process the step
	# left behind still holds the pipe: give it 10 s, not forever.
	for _ in $(seq 100); do
		kill -0 "$tee_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$tee_pid" 2>/dev/null
	if [ "$rc" -eq 0 ]; then
		results+=("PASS  ${name} ($((SECONDS - start))s)")
		passed=$((passed + 1))
	else
		results+=("FAIL  ${name} ($((SECONDS - start))s)$(failed_test_names "$log")")
		failed=$((failed + 1))
		# Printed again just before the summary, where a CI log's tail
		# shows it.
		failure_tails+=("=== the end of \"${name}\":"$'\n'"$(tail -n 60 "$log")")
	fi
	rm -f "$log"
}

# failed_test_names LOG: ": A, B (timed out)" for the go tests LOG shows
# failing or running at a timeout; nothing when it shows none.
failed_test_names() {
	local names timed_out
	names=$(grep -oE -- '--- FAIL: [A-Za-z0-9_/]+' "$1" | awk '{print $3}' | sort -u | paste -sd, | sed 's/,/, /g')
	timed_out=$(awk '/^panic: test timed out/ {p=1; next} p && /^[[:space:]]+Test[^ ]* \(/ {print $1; next} p && !/running tests:/ {p=0}' "$1" |
		sort -u | paste -sd, | sed 's/,/, /g')
	if [ -n "$timed_out" ]; then
		names="${names:+$names; }running at a timeout: $timed_out"
	fi
	if [ -n "$names" ]; then
		echo ": $names"
	fi
}

install_packages() {
	local missing=()
	command -v kcat >/dev/null 2>&1 || missing+=(kcat)
	[ -e /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
	/usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || missing+=(python3-kafka)
	/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || missing+=(python3-confluent-kafka)
	command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
	command -v chromium >/dev/null 2>&1 || missing+=(chromium) # the console's browser tests (chromedp)
	if [ ${#missing[@]} -gt 0 ]; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "missing ${missing[*]} and not root: install them (apt-get install -y ${missing[*]})" >&2
			return 1
		fi
		echo "installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q && apt-get install -y -q "${missing[@]}" || return 1
	else
		echo "kcat, zookeeper, python3-kafka, node and chromium are installed"
	fi
	# kafkajs 2.2.4 for the JavaScript group tests, from the lock file.
	(cd integration/js && npm ci --no-audit --no-fund)
}

check_gofmt() {
	local out
	out=$(gofmt -l . 2>&1)
	if [ -n "$out" ]; then
		echo "gofmt -l lists files needing formatting (run gofmt -w):"
		echo "$out"
		return 1
	fi
}

unit_tests() {
	local pkgs
	pkgs=$(go list ./... | grep -v '/integration$') || return 1
	# shellcheck disable=SC2086
	KBROKER_REQUIRE_ZK=1 go test -race -count=1 -timeout 15m $pkgs
}

integration_tests() {
	go_test_retrying -timeout 25m ./integration/...
}

# The consumer-group, cluster and replication suites again with Kafka's ACL
# authorizer on every broker, allow.everyone.if.no.acl.found=false, brokers
# authenticating to each other as the only super user and the clients
# holding ACLs without ClusterAction (integration/authz_mode.go). The
# tests that secure their brokers themselves already ran above.
authz_integration_tests() {
	KBROKER_TEST_AUTHZ=1 go_test_retrying -timeout 10m ./integration \
		-run '^(TestGroups|TestKIP848|TestCluster|TestReplication|TestDynamicBrokerConfigsAndReplicationThrottle)' \
		-skip 'SASLSSL|Authorizer|InterBrokerListener'
}

# go_test_retrying ARGS...: go test -race -count=1 ARGS (with ZooKeeper-backed
# tests required, never skipped), and one more run of the tests that failed.
go_test_retrying() {
	local log
	log=$(mktemp)
	if KBROKER_REQUIRE_ZK=1 go test -race -count=1 "$@" 2>&1 | tee "$log"; then
		rm -f "$log"
		return 0
	fi
	# These tests kill, pause and partition real processes on a busy
	# 2-core machine. Failed tests get one more run, and a pass on the
	# retry is reported as FLAKY in the summary, never hidden.
	local failed_tests
	if grep -q '^panic: test timed out' "$log"; then
		# The tests after the one running at the timeout never ran: a
		# retry of the failed ones would hide that.
		echo "integration tests hit the go test timeout; the tests after it did not run" >&2
		rm -f "$log"
		return 1
	fi
	failed_tests=$(grep -oE '^--- FAIL: [A-Za-z0-9_]+' "$log" | awk '{print $3}' | sort -u | paste -sd'|')
	rm -f "$log"
	if [ -z "$failed_tests" ]; then
		return 1
	fi
	echo "=== retrying failed integration tests once: $failed_tests"
	# The later -timeout and -run win over the ones in ARGS.
	if KBROKER_REQUIRE_ZK=1 go test -race -count=1 "$@" -timeout 10m -run "^(${failed_tests})\$"; then
		flaky+=("${KBROKER_TEST_AUTHZ:+authz mode: }$failed_tests")
		return 0
	fi
	return 1
}

# The Jepsen-style fault run (short mode, fixed seed), and proof that its
# checker fails an unsafe configuration.
kverify_short() {
	go run ./cmd/kverify short &&
		go run ./cmd/kverify short --unsafe --expect-anomaly lost-write &&
		go run ./cmd/kverify short --txn
}

# franz-go's own pkg/kgo integration suite against a fresh kbroker.
kgo_suite() {
	KGO_TIMEOUT=8m scripts/kgo-suite.sh
}

fuzz() {
	if [ "$FUZZTIME" = 0 ]; then
		echo "FUZZTIME=0: skipped"
		return 0
	fi
	local list
	list=$(go test ./protocol -list '^FuzzParseRequest$') || {
		echo "$list"
		return 1
	}
	if ! grep -qx FuzzParseRequest <<<"$list"; then
		echo "no FuzzParseRequest in ./protocol: skipped"
		return 0
	fi
	go test ./protocol -run '^$' -fuzz '^FuzzParseRequest$' -fuzztime "$FUZZTIME"
}

step "packages" install_packages
step "gofmt" check_gofmt
step "go vet" go vet ./...
step "unit tests (-race)" unit_tests
step "integration tests (-race)" integration_tests
step "groups, cluster, replication with the ACL authorizer (-race)" authz_integration_tests
step "franz-go kgo suite" kgo_suite
step "kverify short (safe, unsafe must lose writes, transactional)" kverify_short
step "fuzz FuzzParseRequest" fuzz

for f in "${failure_tails[@]}"; do
	echo
	echo "$f"
done
echo
echo "=== summary ($((SECONDS - suite_start))s)"
for r in "${results[@]}"; do
	echo "  $r"
done
for f in "${flaky[@]}"; do
	echo "  FLAKY (failed, then passed on retry): $f"
done
echo "steps: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
