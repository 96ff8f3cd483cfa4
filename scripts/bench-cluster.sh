#!/usr/bin/env bash
# Replication benchmark (issue 5): a real ZooKeeper and 3 kbroker processes
# on this machine, a replication-factor-3 topic, acks=all, 1 KiB records,
# 6 partitions; then, in the same run for the ratios, one embedded kbroker
# (RF 1, acks=1) and franz-go's in-process kfake:
#   1. throughput, RF 3 acks=all vs RF 1 acks=1
#   2. produce latency at a fixed RATE (default 20,000 records/s), RF 3
#      acks=all vs kfake
# Environment: RECORDS (default 200000), RATE (default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${RECORDS:-200000}
RATE=${RATE:-20000}

work=$(mktemp -d "${TMPDIR:-/tmp}/kbench-cluster.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	for _ in $(seq 200); do
		(echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "port $1 never opened" >&2
	return 1
}

go build -o "$work/kbroker" ./cmd/kbroker
go build -o "$work/kbench" ./cmd/kbench

zkport=$(free_port)
mkdir -p "$work/zk"
cat >"$work/zk/zoo.cfg" <<CFG
tickTime=500
dataDir=$work/zk/data
clientPort=$zkport
clientPortAddress=127.0.0.1
admin.enableServer=false
CFG
java -cp '/usr/share/java/zookeeper.jar:/usr/share/java/*' org.apache.zookeeper.server.ZooKeeperServerMain "$work/zk/zoo.cfg" >"$work/zk/log" 2>&1 &
pids+=($!)
wait_port "$zkport"

brokers=()
for id in 1 2 3; do
	port=$(free_port)
	"$work/kbroker" --override broker.id=$id --override "listeners=PLAINTEXT://127.0.0.1:$port" \
		--override "log.dirs=$work/b$id" --override "zookeeper.connect=127.0.0.1:$zkport" \
		--override zookeeper.session.timeout.ms=6000 --override min.insync.replicas=2 \
		--override offsets.topic.replication.factor=3 >"$work/b$id.log" 2>&1 &
	pids+=($!)
	brokers+=("127.0.0.1:$port")
done
for b in "${brokers[@]}"; do wait_port "${b##*:}"; done
seeds=$(IFS=,; echo "${brokers[*]}")

echo "== 1. throughput: RF 3 acks=all (3 brokers) vs RF 1 acks=1 (embedded), 1 KiB x $RECORDS, 6 partitions"
"$work/kbench" --brokers "$seeds" --replication-factor 3 --acks all --records "$RECORDS" --partitions 6
"$work/kbench" --kbroker "$work/kbroker" --acks 1 --records "$RECORDS" --partitions 6
echo
echo "== 2. latency at $RATE records/s: RF 3 acks=all (3 brokers) vs kfake (one in-memory broker: RF 1, acks=all)"
"$work/kbench" --brokers "$seeds" --replication-factor 3 --acks all --records "$RECORDS" --partitions 6 --rate "$RATE"
"$work/kbench" --kfake --acks all --records "$RECORDS" --partitions 6 --rate "$RATE"
