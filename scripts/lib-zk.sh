# Sourced by the scripts that start a local ZooKeeper and brokers
# (kgo-suite.sh, bench-cluster.sh, bench-partitions.sh): the Debian
# zookeeper package's server, tickTime 500 ms so that sessions may be short.

# free_port prints a free loopback TCP port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_zk DIR LOG starts a standalone ZooKeeper with its config and data
# under DIR and its output in LOG, on a free port; it sets zkport and
# zk_pid (the caller waits for the port and kills the process).
start_zk() {
	zkport=$(free_port)
	mkdir -p "$1"
	cat >"$1/zoo.cfg" <<CFG
tickTime=500
dataDir=$1/data
clientPort=$zkport
clientPortAddress=127.0.0.1
admin.enableServer=false
CFG
	java -cp '/usr/share/java/zookeeper.jar:/usr/share/java/*' org.apache.zookeeper.server.ZooKeeperServerMain "$1/zoo.cfg" >"$2" 2>&1 &
	zk_pid=$!
}
