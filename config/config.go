// Package config holds the broker's settings under Kafka's property names,
// parsed from a server.properties file and --override key=value pairs.
package config

import "time"

// Config is the broker's whole configuration. Field comments name the Kafka
// property each field comes from.
type Config struct {
	BrokerID            int32    // broker.id (default 0 in embedded mode)
	Listeners           []string // listeners, e.g. PLAINTEXT://127.0.0.1:9092 (default)
	AdvertisedListeners []string // advertised.listeners (default: listeners)
	// ListenerSecurityProtocolMap is listener.security.protocol.map: listener
	// name -> security protocol, PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// (default: each protocol maps to itself).
	ListenerSecurityProtocolMap map[string]string
	// Security holds the TLS and SASL properties as given: every ssl.* and
	// sasl.* key and every listener.name.<listener>.* override, resolved
	// per listener by ListenerSettings and checked when the broker builds
	// its listeners. Values may be passwords: never log them.
	Security map[string]string
	// ConnectionsMaxReauth is connections.max.reauth.ms (default 0: a
	// SASL session never expires, as Kafka's default).
	ConnectionsMaxReauth time.Duration
	// Authorizer is authorizer.class.name as given: "" (the default, as
	// Kafka's) authorizes nothing, every request is allowed; otherwise one
	// of ACLAuthorizerClasses, Kafka's ACL authorizer, checks every
	// request against the cluster's ACLs.
	Authorizer string
	// SuperUsers is super.users: principals ("User:admin") the ACL
	// authorizer allows everything, whatever the ACLs say.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found
	// (default false): with the ACL authorizer, a resource no ACL
	// matches is open to everyone rather than to super users only.
	AllowEveryoneIfNoACLFound bool
	// InterBrokerListenerName is inter.broker.listener.name: the listener
	// whose advertised address other brokers use (default PLAINTEXT).
	InterBrokerListenerName string
	LogDirs                 []string // log.dirs / log.dir (default ./kbroker-data)
	BrokerRack              string   // broker.rack
	// NumRecoveryThreadsPerDataDir is num.recovery.threads.per.data.dir:
	// how many partition logs of one log dir are opened (recovered after
	// a crash) at a time at start, and flushed and closed at a time at
	// shutdown. Default max(2, GOMAXPROCS), not Kafka's 1 (see
	// replica.DefaultRecoveryThreadsPerDataDir).
	NumRecoveryThreadsPerDataDir int32

	NumPartitions            int32 // num.partitions (default 1)
	DefaultReplicationFactor int16 // default.replication.factor (default 1)
	AutoCreateTopics         bool  // auto.create.topics.enable (default true)
	DeleteTopicEnable        bool  // delete.topic.enable (default true)

	// The "Ms" fields below are time.Durations named after their Kafka
	// properties; other packages already use these names, so the lint rule
	// against unit suffixes is silenced rather than the fields renamed.

	LogCleanupPolicy string // log.cleanup.policy: delete, compact or both, comma-separated (default delete)
	LogSegmentBytes  int64  // log.segment.bytes (default 1 GiB)
	//lint:ignore ST1011 named after log.roll.ms, see above
	LogRollMs time.Duration // log.roll.ms / log.roll.hours (default 168h)
	//lint:ignore ST1011 named after log.retention.ms, see above
	LogRetentionMs        time.Duration // log.retention.ms / .minutes / .hours (default 168h; negative = forever, see RetainForever)
	LogRetentionBytes     int64         // log.retention.bytes (default -1)
	LogRetentionCheck     time.Duration // log.retention.check.interval.ms (default 5m)
	LogIndexIntervalBytes int32         // log.index.interval.bytes (default 4096)
	LogIndexSizeMaxBytes  int32         // log.index.size.max.bytes (default 10 MiB)
	LogFlushIntervalMsgs  int64         // log.flush.interval.messages (default MaxInt64: leave it to the OS)
	//lint:ignore ST1011 named after log.flush.interval.ms, see above
	LogFlushIntervalMs  time.Duration // log.flush.interval.ms (default 0 = never by time)
	LogMessageTimestamp string        // log.message.timestamp.type (CreateTime | LogAppendTime)

	// The log cleaner of compacted topics (Kafka's log.cleaner.*).
	LogCleanerEnable              bool          // log.cleaner.enable (default true)
	LogCleanerThreads             int32         // log.cleaner.threads (default 1)
	LogCleanerDedupeBufferSize    int64         // log.cleaner.dedupe.buffer.size (default 128 MiB, shared by the threads)
	LogCleanerIOMaxBytesPerSecond float64       // log.cleaner.io.max.bytes.per.second (default Double.MAX_VALUE: no limit)
	LogCleanerBackoff             time.Duration // log.cleaner.backoff.ms (default 15 s)
	LogCleanerMinCleanableRatio   float64       // log.cleaner.min.cleanable.ratio (default 0.5): min.cleanable.dirty.ratio's default
	LogCleanerDeleteRetention     time.Duration // log.cleaner.delete.retention.ms (default 1 day): delete.retention.ms's default
	LogCleanerMinCompactionLag    time.Duration // log.cleaner.min.compaction.lag.ms (default 0)
	LogCleanerMaxCompactionLag    time.Duration // log.cleaner.max.compaction.lag.ms (default Long.MAX_VALUE: none)

	MessageMaxBytes       int32 // message.max.bytes (default 1048588)
	SocketRequestMaxBytes int32 // socket.request.max.bytes (default 100 MiB)

	// ConnectionsMaxIdle is connections.max.idle.ms (default 10 min): a
	// connection with no request in flight and none received for this
	// long is closed. Negative (-1) never closes one.
	ConnectionsMaxIdle time.Duration
	// MaxConnections is max.connections: connections the broker holds at
	// once (default MaxInt32). MaxConnectionsPerIP is
	// max.connections.per.ip (default MaxInt32), and
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides
	// ("host:count,host:count"), by host name or address as written.
	MaxConnections               int32
	MaxConnectionsPerIP          int32
	MaxConnectionsPerIPOverrides map[string]int32
	// MaxConnectionCreationRate is max.connection.creation.rate: new
	// connections per second the broker accepts (default MaxInt32); over
	// it the accept loop waits, as Kafka's acceptor is throttled.
	// max.connections and max.connection.creation.rate may also be set per
	// listener with the listener.name.<listener>. prefix (kept in
	// Security; see ListenerConnectionLimits).
	MaxConnectionCreationRate int32
	// QuotaWindowNum and QuotaWindowSize are quota.window.num (default 11)
	// and quota.window.size.seconds (default 1 s): client quota rates are
	// kept over QuotaWindowNum windows of QuotaWindowSize.
	QuotaWindowNum  int32
	QuotaWindowSize time.Duration
	// QueuedMaxRequestBytes is queued.max.request.bytes (default -1, no
	// bound): bytes of requests read and not yet handled, across every
	// connection; reading pauses at the bound.
	QueuedMaxRequestBytes int64

	ZookeeperConnect           string        // zookeeper.connect (empty = embedded single node)
	ZookeeperSessionTimeout    time.Duration // zookeeper.session.timeout.ms (default 18s)
	ZookeeperConnectionTimeout time.Duration // zookeeper.connection.timeout.ms (default: session timeout)

	ReplicaLagTimeMax           time.Duration // replica.lag.time.max.ms (default 30s in Kafka 3.x; 10s here as the mission states)
	ReplicaFetchWaitMax         time.Duration // replica.fetch.wait.max.ms
	MinInsyncReplicas           int32         // min.insync.replicas (default 1)
	UncleanLeaderElectionEnable bool          // unclean.leader.election.enable (default false)
	AutoLeaderRebalanceEnable   bool          // auto.leader.rebalance.enable (default true)
	LeaderImbalanceCheck        time.Duration // leader.imbalance.check.interval.seconds (default 300s)

	OffsetsTopicNumPartitions     int32         // offsets.topic.num.partitions (default 50)
	OffsetsTopicReplicationFactor int16         // offsets.topic.replication.factor (default 3, capped by live brokers)
	OffsetsTopicSegmentBytes      int64         // offsets.topic.segment.bytes (default 100 MiB)
	OffsetsRetention              time.Duration // offsets.retention.minutes (default 7 days)
	GroupInitialRebalanceDelay    time.Duration // group.initial.rebalance.delay.ms (default 3s)
	GroupMinSessionTimeout        time.Duration // group.min.session.timeout.ms (default 6s)
	GroupMaxSessionTimeout        time.Duration // group.max.session.timeout.ms (default 30m)
	// Consumer (KIP-848) groups.
	GroupConsumerSessionTimeout    time.Duration // group.consumer.session.timeout.ms (default 45s)
	GroupConsumerHeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms (default 5s)
	GroupConsumerAssignors         []string      // group.consumer.assignors (default uniform,range; Kafka's class names accepted)
	GroupConsumerMaxSize           int32         // group.consumer.max.size (default 2147483647)
	TransactionalIDExpiration      time.Duration // transactional.id.expiration.ms (default 7 days)
	ProducerIDExpiration           time.Duration // producer.id.expiration.ms (default 1 day)

	// Share (KIP-932) groups.
	GroupShareSessionTimeout     time.Duration // group.share.session.timeout.ms (default 45s)
	GroupShareHeartbeatInterval  time.Duration // group.share.heartbeat.interval.ms (default 5s)
	GroupShareMaxSize            int32         // group.share.max.size (default 200)
	GroupShareRecordLockDuration time.Duration // group.share.record.lock.duration.ms (default 30s)
	GroupShareDeliveryCountLimit int32         // group.share.delivery.count.limit (default 5)
	GroupSharePartitionMaxLocks  int32         // group.share.partition.max.record.locks (default 2000)

	TransactionStateLogNumPartitions     int32         // transaction.state.log.num.partitions (default 50)
	TransactionStateLogReplicationFactor int16         // transaction.state.log.replication.factor (default 3, capped by live brokers)
	TransactionStateLogMinISR            int32         // transaction.state.log.min.isr (default 2, capped by the replication factor)
	TransactionStateLogSegmentBytes      int64         // transaction.state.log.segment.bytes (default 100 MiB)
	TransactionMaxTimeout                time.Duration // transaction.max.timeout.ms (default 15 min)
	TransactionAbortTimedOutInterval     time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms (default 10 s)
	TransactionRemoveExpiredIDsInterval  time.Duration // transaction.remove.expired.transaction.cleanup.interval.ms (default 1 h)
	// TransactionVersion is kbroker.transaction.version, the level of
	// Kafka's transaction.version feature the broker finalizes (what
	// kafka-features.sh sets on a Kafka 4 cluster): 2 (the default)
	// offers transactions v2 (KIP-890 part 2) to clients that support it;
	// 0 or 1 keeps every client on the explicit AddPartitionsToTxn path.
	// The level only decides what clients are offered: a broker serves
	// the v2 request versions whatever its level.
	TransactionVersion int16

	MetricsAddress string // kbroker.metrics.address, host:port of the Prometheus /metrics endpoint and the live console (empty = none; default EmbeddedMetricsAddress on an embedded broker, none with zookeeper.connect)
	// ConsoleActionsEnable is kbroker.console.actions.enable: the console
	// offers preferred leader election and delete records (default false:
	// read-only).
	ConsoleActionsEnable bool
	// TestSyncJournal is kbroker.test.sync.journal (TEST-ONLY, default
	// empty: off): a file where every log records what of its .log files
	// reached stable storage, for the power-loss test (segment.SyncJournal).
	TestSyncJournal string
	// AcksFsync is kbroker.acks.fsync, the default of the topic config
	// of the same name: acknowledge writes only once fdatasynced
	// (default false, as Kafka, which leaves flushing to the OS).
	AcksFsync bool
}
