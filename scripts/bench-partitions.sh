#!/usr/bin/env bash
# Many-partitions benchmark (issue 15). Not part of the test suite: it
# prints figures. The machine is usually shared; read them with that in
# mind (loadavg is printed).
#
# Embedded: one kbroker without ZooKeeper, a topic of N partitions (RF 1),
# RECORDS records in each, then:
#   creation time (CreateTopics answered / every partition led), disk used
#   per partition (du of the partition dirs: idle, then with the records),
#   open file descriptors (ls /proc/PID/fd | wc -l), RSS, threads;
#   a clean restart (SIGTERM) and a restart after kill -9, each timed from
#   the start of the new process until it listens and until a ListOffsets
#   over every partition answers all RECORDS records (kpartbench serving;
#   partitions serve as their logs open, so it also prints when the first
#   and half of them did).
#
# Cluster (CLUSTER=1, the default when ZooKeeper's jar is installed): a
# real ZooKeeper and 3 kbroker processes, a topic of N partitions (RF
# CLUSTER_RF, default 3):
#   creation time, Metadata latency over the topic, RSS/fds per broker,
#   controller failover (kill -9 the controller) until every partition is
#   led by a live broker, the killed broker's restart until every
#   partition's ISR is full again.
#
# Environment: N (default 10000), RECORDS (per partition, default 2),
# CLUSTER (1/0), EMBEDDED (1/0: skip the embedded part with 0),
# CLUSTER_N (default N), CLUSTER_RF (default 3),
# ZK_SESSION_MS (zookeeper.session.timeout.ms, default 6000: a kill -9 of
# the controller is noticed when its session expires, so the failover
# figure includes it),
# KBROKER=path to an already built broker, TIMEOUT (each wait, default 10m),
# KEEP=1 to keep the work directory, RESTARTS=0 to stop after the
# controller failover (skip the killed broker's restarts).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000}
RECORDS=${RECORDS:-2}
CLUSTER_N=${CLUSTER_N:-$N}
CLUSTER_RF=${CLUSTER_RF:-3}
ZK_SESSION_MS=${ZK_SESSION_MS:-6000}
TIMEOUT=${TIMEOUT:-10m}
if [[ -z "${CLUSTER:-}" ]]; then
	CLUSTER=0
	[[ -e /usr/share/java/zookeeper.jar ]] && command -v java >/dev/null && CLUSTER=1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kbench-partitions.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [[ "${KEEP:-0}" == 1 ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.3f}')" "$1"; }
. scripts/lib-zk.sh
# wait_port PORT PID: until PORT accepts (10 ms polls, at most 10 min), or
# the process PID exited.
wait_port() {
	for _ in $(seq 60000); do
		(echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		if [[ -n "${2:-}" ]] && ! kill -0 "$2" 2>/dev/null; then
			echo "process $2 exited before port $1 opened" >&2
			return 1
		fi
		sleep 0.01
	done
	echo "port $1 never opened" >&2
	return 1
}
# wait_exit PID: until PID is gone (at most 5 min).
wait_exit() {
	for _ in $(seq 30000); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.01
	done
	echo "process $1 did not exit" >&2
	return 1
}
rss_mib() { awk '/^VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }
threads() { awk '/^Threads/ {print $2}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
# goroutines PORT: the goroutine count of the broker serving pprof on PORT.
goroutines() {
	python3 -c 'import sys,urllib.request; print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/debug/pprof/goroutine?debug=1", timeout=10).readline().decode().split()[-1])' "$1"
}
# kib_per_partition DIR TOPIC: real disk blocks (du) of the topic's
# partition dirs, per partition, and the apparent size.
kib_per_partition() {
	local n
	n=$(find "$1" -maxdepth 1 -type d -name "$2-*" | wc -l)
	if [[ "$n" == 0 ]]; then echo "no partition dirs"; return; fi
	local real apparent
	real=$(find "$1" -maxdepth 1 -type d -name "$2-*" -print0 | du -sk --files0-from=- -c | tail -1 | cut -f1)
	apparent=$(find "$1" -maxdepth 1 -type d -name "$2-*" -print0 | du -sk --apparent-size --files0-from=- -c | tail -1 | cut -f1)
	echo "$((real / n)) KiB on disk, $((apparent / n)) KiB apparent (over $n partition dirs)"
}

if [[ -n "${KBROKER:-}" ]]; then
	cp "$KBROKER" "$work/kbroker"
else
	go build -o "$work/kbroker" ./cmd/kbroker
fi
go build -o "$work/kpartbench" ./cmd/kpartbench
kpb() { "$work/kpartbench" "$@" --timeout "$TIMEOUT"; }

echo "kbench-partitions: N=$N RECORDS=$RECORDS, $(nproc) cores, loadavg $(cut -d' ' -f1-3 /proc/loadavg) (shared machine: figures are noisy)"
echo "kbench-partitions: ulimit -n $(ulimit -n)"

# ---------------------------------------------------------------- embedded
if [[ "${EMBEDDED:-1}" == 1 ]]; then
port=$(free_port)
pport=$(free_port)
edata="$work/embedded"
start_embedded() {
	"$work/kbroker" --pprof-address "127.0.0.1:$pport" --override "listeners=PLAINTEXT://127.0.0.1:$port" --override "log.dirs=$edata" \
		--override num.partitions=1 >>"$work/embedded.log" 2>&1 &
	epid=$!
	pids+=("$epid")
	disown "$epid" # no "Killed" line from the shell for the kill -9
}
t0=$(now)
start_embedded
wait_port "$port" "$epid"
echo
echo "== embedded broker, $N partitions, RF 1"
echo "  empty start to listening: $(since "$t0") s"
r=$(kpb create --brokers "127.0.0.1:$port" --topic many --partitions "$N" --rf 1)
echo "  topic creation: $r"
echo "  idle partition (no record yet): $(kib_per_partition "$edata" many)"
echo "  idle broker: RSS $(rss_mib "$epid") MiB, $(fds "$epid") open fds, $(threads "$epid") threads, $(goroutines "$pport") goroutines"
r=$(kpb produce --brokers "127.0.0.1:$port" --topic many --partitions "$N" --records "$RECORDS")
echo "  write $RECORDS records to each partition: $r"
echo "  partition with $RECORDS records: $(kib_per_partition "$edata" many)"
echo "  loaded broker: RSS $(rss_mib "$epid") MiB, $(fds "$epid") open fds, $(threads "$epid") threads, $(goroutines "$pport") goroutines"

t0=$(now)
kill -TERM "$epid"
wait_exit "$epid"
echo "  clean shutdown (SIGTERM to exit): $(since "$t0") s"
t0=$(now)
start_embedded
wait_port "$port" "$epid"
listen=$(since "$t0")
r=$(kpb serving --brokers "127.0.0.1:$port" --topic many --partitions "$N" --records "$RECORDS" --since "$t0")
echo "  clean restart: listening after $listen s, $r (every partition's $RECORDS records listed)"
echo "  after clean restart: RSS $(rss_mib "$epid") MiB, $(fds "$epid") open fds"

kill -9 "$epid"
wait_exit "$epid"
t0=$(now)
start_embedded
wait_port "$port" "$epid"
listen=$(since "$t0")
r=$(kpb serving --brokers "127.0.0.1:$port" --topic many --partitions "$N" --records "$RECORDS" --since "$t0")
echo "  restart after kill -9: listening after $listen s, $r (every partition's $RECORDS records listed)"
echo "  after kill -9 restart: RSS $(rss_mib "$epid") MiB, $(fds "$epid") open fds, $(threads "$epid") threads"
echo "  partition after restarts: $(kib_per_partition "$edata" many)"
kill -9 "$epid"
wait_exit "$epid"
rm -rf "$edata"
fi

[[ "$CLUSTER" == 1 ]] || exit 0

# ----------------------------------------------------------------- cluster
start_zk "$work/zk" "$work/zk/log"
pids+=("$zk_pid")
wait_port "$zkport" "$zk_pid"

declare -A bport bpid
start_broker() {
	local id=$1
	"$work/kbroker" --override broker.id="$id" --override "listeners=PLAINTEXT://127.0.0.1:${bport[$id]}" \
		--override "log.dirs=$work/b$id" --override "zookeeper.connect=127.0.0.1:$zkport" \
		--override zookeeper.session.timeout.ms="$ZK_SESSION_MS" >>"$work/b$id.log" 2>&1 &
	bpid[$id]=$!
	pids+=("$!")
	disown "$!"
}
for id in 1 2 3; do
	bport[$id]=$(free_port)
	start_broker "$id"
done
for id in 1 2 3; do wait_port "${bport[$id]}" "${bpid[$id]}"; done
seeds="127.0.0.1:${bport[1]},127.0.0.1:${bport[2]},127.0.0.1:${bport[3]}"

echo
echo "== 3 brokers + ZooKeeper, $CLUSTER_N partitions, RF $CLUSTER_RF, zookeeper.session.timeout.ms=$ZK_SESSION_MS"
r=$(kpb create --brokers "$seeds" --topic many --partitions "$CLUSTER_N" --rf "$CLUSTER_RF")
echo "  topic creation: $r"
r=$(kpb in-sync --brokers "$seeds" --topic many --partitions "$CLUSTER_N" --rf "$CLUSTER_RF")
echo "  all in sync after creation: $r"
r=$(kpb produce --brokers "$seeds" --topic many --partitions "$CLUSTER_N" --records "$RECORDS")
echo "  write $RECORDS records to each partition: $r"
r=$(kpb metadata --brokers "$seeds" --topic many --partitions "$CLUSTER_N")
echo "  Metadata over the topic: $r"
for id in 1 2 3; do
	echo "  broker $id: RSS $(rss_mib "${bpid[$id]}") MiB, $(fds "${bpid[$id]}") open fds, $(threads "${bpid[$id]}") threads, $(kib_per_partition "$work/b$id" many)"
done

ctl=$(kpb controller --brokers "$seeds")
ctl=${ctl#controller=}
others=()
for id in 1 2 3; do [[ "$id" == "$ctl" ]] || others+=("127.0.0.1:${bport[$id]}"); done
live=$(IFS=,; echo "${others[*]}")
t0=$(now)
kill -9 "${bpid[$ctl]}"
r=$(kpb led --brokers "$live" --topic many --partitions "$CLUSTER_N" --not-leader "$ctl" --since "$t0")
echo "  controller failover (kill -9 broker $ctl, the controller) until every partition is led by a live broker: $r"
wait_exit "${bpid[$ctl]}"
r=$(kpb shrunk --brokers "$live" --topic many --partitions "$CLUSTER_N" --not-leader "$ctl" --since "$t0")
echo "  ... and until broker $ctl left every ISR: $r"
# The new controller's own account: when it won (the rest of the failover
# is ZooKeeper expiring the dead controller's session, 2/3 to 7/6 of
# ZK_SESSION_MS after its last heartbeat) and how long each step of its
# takeover took (its "now controller" line, logged once it is done).
takeover=""
for _ in $(seq 3000); do
	for id in 1 2 3; do
		[[ "$id" == "$ctl" ]] && continue
		takeover=$(grep -h 'msg="now controller"' "$work/b$id.log" | grep -v 'controller_epoch=1 ' | tail -1) || true
		[[ -n "$takeover" ]] && break 2
	done
	sleep 0.01
done
elected=$(grep -h 'msg="elected controller"' "$work"/b*.log | grep -v 'controller_epoch=1 ' | tail -1 | sed 's/^time=\([^ ]*\) .*/\1/')
if [[ -n "$elected" ]]; then
	echo "  new controller elected $(python3 -c "import sys,datetime; print(f'{datetime.datetime.fromisoformat(sys.argv[1].replace(\"Z\",\"+00:00\")).timestamp()-float(sys.argv[2]):.3f}')" "$elected" "$t0") s after the kill"
fi
echo "  ${takeover:-no takeover line from the new controller}"
[[ "${RESTARTS:-1}" == 1 ]] || exit 0
t0=$(now)
start_broker "$ctl"
wait_port "${bport[$ctl]}" "${bpid[$ctl]}"
listen=$(since "$t0")
r=$(kpb in-sync --brokers "$seeds" --topic many --partitions "$CLUSTER_N" --rf "$CLUSTER_RF" --since "$t0")
echo "  broker $ctl restart after kill -9: listening after $listen s, $r (every ISR full)"
t0=$(now)
kill -TERM "${bpid[$ctl]}"
wait_exit "${bpid[$ctl]}"
r=$(kpb shrunk --brokers "$live" --topic many --partitions "$CLUSTER_N" --not-leader "$ctl" --since "$t0")
echo "  broker $ctl clean (controlled) shutdown: $(since "$t0") s; until it left every ISR: $r"
t0=$(now)
start_broker "$ctl"
wait_port "${bport[$ctl]}" "${bpid[$ctl]}"
listen=$(since "$t0")
r=$(kpb in-sync --brokers "$seeds" --topic many --partitions "$CLUSTER_N" --rf "$CLUSTER_RF" --since "$t0")
echo "  broker $ctl clean restart: listening after $listen s, $r (every ISR full)"
