package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kbroker/kbroker/internal/acl"
)

// Default returns the configuration used when nothing is set: Kafka's
// defaults, except where a field comment says otherwise (an embedded
// single-node broker on 127.0.0.1:9092 storing under ./kbroker-data).
func Default() Config {
	return Config{
		BrokerID:                    0,
		Listeners:                   []string{"PLAINTEXT://127.0.0.1:9092"},
		ListenerSecurityProtocolMap: defaultSecurityProtocolMap(),
		InterBrokerListenerName:     "PLAINTEXT",
		LogDirs:                     []string{"./kbroker-data"},
		// Unset in a ZooKeeper cluster (Load).
		MetricsAddress: EmbeddedMetricsAddress,
		// The opening of a log is part disk waits, part CPU: a thread
		// per core, and two on one core (Kafka's default is 1).
		NumRecoveryThreadsPerDataDir: int32(max(2, runtime.GOMAXPROCS(0))),

		NumPartitions:            1,
		DefaultReplicationFactor: 1,
		AutoCreateTopics:         true,
		DeleteTopicEnable:        true,

		LogCleanupPolicy:      CleanupDelete,
		LogSegmentBytes:       1 << 30,
		LogRollMs:             168 * time.Hour,
		LogRetentionMs:        168 * time.Hour,
		LogRetentionBytes:     -1,
		LogRetentionCheck:     5 * time.Minute,
		LogIndexIntervalBytes: 4096,
		LogIndexSizeMaxBytes:  10 << 20,
		LogFlushIntervalMsgs:  math.MaxInt64,
		LogFlushIntervalMs:    0,
		LogMessageTimestamp:   TimestampCreateTime,

		LogCleanerEnable:              true,
		LogCleanerThreads:             1,
		LogCleanerDedupeBufferSize:    128 << 20,
		LogCleanerIOMaxBytesPerSecond: math.MaxFloat64,
		LogCleanerBackoff:             15 * time.Second,
		LogCleanerMinCleanableRatio:   0.5,
		LogCleanerDeleteRetention:     24 * time.Hour,
		LogCleanerMinCompactionLag:    0,
		LogCleanerMaxCompactionLag:    math.MaxInt64,

		MessageMaxBytes:           1048588,
		SocketRequestMaxBytes:     100 << 20,
		ConnectionsMaxIdle:        10 * time.Minute,
		Security:                  map[string]string{},
		MaxConnections:            math.MaxInt32,
		MaxConnectionsPerIP:       math.MaxInt32,
		MaxConnectionCreationRate: math.MaxInt32,
		QueuedMaxRequestBytes:     -1,
		QuotaWindowNum:            11,
		QuotaWindowSize:           time.Second,

		ZookeeperSessionTimeout:    18 * time.Second,
		ZookeeperConnectionTimeout: 18 * time.Second,

		ReplicaLagTimeMax:           10 * time.Second,
		ReplicaFetchWaitMax:         500 * time.Millisecond,
		MinInsyncReplicas:           1,
		UncleanLeaderElectionEnable: false,
		AutoLeaderRebalanceEnable:   true,
		LeaderImbalanceCheck:        300 * time.Second,

		OffsetsTopicNumPartitions:      50,
		OffsetsTopicReplicationFactor:  3,
		OffsetsTopicSegmentBytes:       100 << 20,
		OffsetsRetention:               7 * 24 * time.Hour,
		GroupInitialRebalanceDelay:     3 * time.Second,
		GroupMinSessionTimeout:         6 * time.Second,
		GroupMaxSessionTimeout:         30 * time.Minute,
		GroupConsumerSessionTimeout:    45 * time.Second,
		GroupConsumerHeartbeatInterval: 5 * time.Second,
		GroupConsumerAssignors:         []string{"uniform", "range"},
		GroupConsumerMaxSize:           math.MaxInt32,
		GroupShareSessionTimeout:       45 * time.Second,
		GroupShareHeartbeatInterval:    5 * time.Second,
		GroupShareMaxSize:              200,
		GroupShareRecordLockDuration:   30 * time.Second,
		GroupShareDeliveryCountLimit:   5,
		GroupSharePartitionMaxLocks:    2000,
		TransactionalIDExpiration:      7 * 24 * time.Hour,
		ProducerIDExpiration:           24 * time.Hour,

		TransactionStateLogNumPartitions:     50,
		TransactionStateLogReplicationFactor: 3,
		TransactionStateLogMinISR:            2,
		TransactionStateLogSegmentBytes:      100 << 20,
		TransactionMaxTimeout:                15 * time.Minute,
		TransactionAbortTimedOutInterval:     10 * time.Second,
		TransactionRemoveExpiredIDsInterval:  time.Hour,
		TransactionVersion:                   2,
	}
}

// ACLAuthorizerClasses are the authorizer.class.name values that turn on
// authorization: the class names of Kafka's ACL authorizer, ZooKeeper mode's
// first (the one kbroker follows), then KRaft mode's and the pre-2.4 name,
// so a Kafka server.properties with any of them keeps its meaning. Any
// other authorizer is refused at start rather than silently replaced.
func ACLAuthorizerClasses() []string {
	return []string{
		"kafka.security.authorizer.AclAuthorizer",
		"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"kafka.security.auth.SimpleAclAuthorizer",
	}
}

// AuthorizerEnabled tells whether requests are checked against ACLs
// (authorizer.class.name is set).
func (c Config) AuthorizerEnabled() bool { return c.Authorizer != "" }

// Values of log.message.timestamp.type.
const (
	TimestampCreateTime    = "CreateTime"
	TimestampLogAppendTime = "LogAppendTime"
)

// RetainForever is the LogRetentionMs value for log.retention.ms=-1 (Kafka
// treats every negative retention as unlimited). Test with < 0.
const RetainForever = -time.Millisecond

func defaultSecurityProtocolMap() map[string]string {
	return map[string]string{
		"PLAINTEXT":      "PLAINTEXT",
		"SSL":            "SSL",
		"SASL_PLAINTEXT": "SASL_PLAINTEXT",
		"SASL_SSL":       "SASL_SSL",
	}
}

// ValueError reports a property with an unusable value.
type ValueError struct {
	Key    string
	Value  string
	Reason string
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("config: %s: invalid value %q: %s", e.Key, e.Value, e.Reason)
}

// Load reads the Java .properties file at path (none when path is ""), then
// applies overrides, each "key=value", in order; later settings win. It
// returns the configuration, the keys it does not know (sorted; the caller
// logs them once as ignored), or an error naming the key and value at
// fault.
//
// Where Kafka has several keys for one setting, the more precise wins
// whatever the order they were given in: log.dirs over log.dir,
// log.retention.ms over .minutes over .hours, log.roll.ms over
// log.roll.hours. zookeeper.connection.timeout.ms defaults to the session
// timeout.
func Load(path string, overrides []string) (Config, []string, error) {
	values := map[string]string{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, nil, fmt.Errorf("config: %w", err)
		}
		props, err := parseProperties(string(data))
		if err != nil {
			return Config{}, nil, fmt.Errorf("config: %s: %w", path, err)
		}
		for _, p := range props {
			values[p.key] = p.value
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return Config{}, nil, fmt.Errorf("config: override %q: want key=value", o)
		}
		values[k] = strings.TrimSpace(v)
	}

	table := properties()
	known := make(map[string]bool, len(table))
	for _, p := range table {
		known[p.name] = true
	}
	var unknown []string
	security := map[string]string{}
	for k, v := range values {
		switch {
		case known[k]:
		case isSecurityKey(k):
			security[k] = strings.TrimSpace(v)
		default:
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)

	c := Default()
	c.Security = security
	// The table lists a setting's less precise keys first, so applying it
	// in order lets the precise key win.
	for _, p := range table {
		v, ok := values[p.name]
		if !ok {
			continue
		}
		if err := p.set(&c, strings.TrimSpace(v)); err != nil {
			return Config{}, unknown, &ValueError{Key: p.name, Value: v, Reason: err.Error()}
		}
	}
	if _, ok := values["zookeeper.connection.timeout.ms"]; !ok {
		c.ZookeeperConnectionTimeout = c.ZookeeperSessionTimeout
	}
	if _, ok := values["kbroker.metrics.address"]; !ok && c.ZookeeperConnect != "" {
		// A cluster's brokers would contend for the embedded default.
		c.MetricsAddress = ""
	}
	if err := c.Validate(); err != nil {
		return Config{}, unknown, err
	}
	return c, unknown, nil
}

// Validate checks every setting's range and the rules that tie settings
// together (listener names, advertised listeners, session timeout bounds).
// Load calls it; call it too on a Config built in code.
func (c Config) Validate() error {
	// Each value goes back through its property's parser, so the ranges
	// are written once, in the table.
	var scratch Config
	scratch.ListenerSecurityProtocolMap = c.ListenerSecurityProtocolMap
	for _, p := range properties() {
		if p.get == nil {
			continue
		}
		v := p.get(c)
		if err := p.set(&scratch, v); err != nil {
			return &ValueError{Key: p.name, Value: v, Reason: err.Error()}
		}
	}

	if len(c.Listeners) == 0 {
		return &ValueError{Key: "listeners", Reason: "at least one listener is required"}
	}
	names := map[string]bool{}
	ports := map[int32]string{}
	for _, l := range c.Listeners {
		name, _, port, err := ParseListener(l)
		if err != nil {
			return &ValueError{Key: "listeners", Value: l, Reason: err.Error()}
		}
		if names[name] {
			return &ValueError{Key: "listeners", Value: strings.Join(c.Listeners, ","), Reason: fmt.Sprintf("listener name %s used twice; each listener needs its own name", name)}
		}
		names[name] = true
		if other, dup := ports[port]; dup && port != 0 {
			return &ValueError{Key: "listeners", Value: strings.Join(c.Listeners, ","), Reason: fmt.Sprintf("listeners %s and %s share port %d", other, name, port)}
		}
		ports[port] = name
		proto, ok := c.ListenerSecurityProtocolMap[name]
		if !ok {
			return &ValueError{Key: "listeners", Value: l, Reason: fmt.Sprintf("listener name %s is not in listener.security.protocol.map", name)}
		}
		_ = proto // TLS and SASL settings are checked when the broker builds the listener
	}
	for _, l := range c.AdvertisedListeners {
		name, host, _, err := ParseListener(l)
		if err != nil {
			return &ValueError{Key: "advertised.listeners", Value: l, Reason: err.Error()}
		}
		if !names[name] {
			return &ValueError{Key: "advertised.listeners", Value: l, Reason: fmt.Sprintf("listener name %s is not in listeners", name)}
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			return &ValueError{Key: "advertised.listeners", Value: l, Reason: "clients cannot connect to the meta-address " + host}
		}
	}
	if !names[strings.ToUpper(c.InterBrokerListenerName)] {
		return &ValueError{Key: "inter.broker.listener.name", Value: c.InterBrokerListenerName, Reason: "not the name of a listener in listeners"}
	}
	if len(c.LogDirs) == 0 {
		return &ValueError{Key: "log.dirs", Reason: "at least one log directory is required"}
	}
	if err := c.validateListenerConnectionLimits(); err != nil {
		return err
	}
	if c.GroupConsumerHeartbeatInterval >= c.GroupConsumerSessionTimeout {
		return &ValueError{Key: "group.consumer.heartbeat.interval.ms", Value: strconv.FormatInt(c.GroupConsumerHeartbeatInterval.Milliseconds(), 10),
			Reason: "must be below group.consumer.session.timeout.ms " + strconv.FormatInt(c.GroupConsumerSessionTimeout.Milliseconds(), 10)}
	}
	if c.GroupMinSessionTimeout > c.GroupMaxSessionTimeout {
		return &ValueError{Key: "group.min.session.timeout.ms", Value: strconv.FormatInt(c.GroupMinSessionTimeout.Milliseconds(), 10),
			Reason: "above group.max.session.timeout.ms " + strconv.FormatInt(c.GroupMaxSessionTimeout.Milliseconds(), 10)}
	}
	return nil
}

// EffectiveAdvertisedListeners returns advertised.listeners, or listeners
// when it is not set, as Kafka does.
func (c Config) EffectiveAdvertisedListeners() []string {
	if len(c.AdvertisedListeners) > 0 {
		return c.AdvertisedListeners
	}
	return c.Listeners
}

// Properties returns the effective broker configuration as Kafka property
// name -> value, for DescribeConfigs on the broker resource. Durations are
// in the unit the property name states; "" means unset (Kafka's null).
// Alias keys (log.dir, log.retention.hours, ...) are left out: the canonical
// key carries the effective value.
func (c Config) Properties() map[string]string {
	out := map[string]string{}
	for _, p := range properties() {
		if p.get != nil {
			out[p.name] = p.get(c)
		}
	}
	return out
}

// PropertyDoc describes one supported property, for --help.
type PropertyDoc struct {
	Name    string
	Default string // "" when unset by default
	Doc     string
}

// Docs lists the supported properties with their defaults, in a stable
// order that groups related settings.
func Docs() []PropertyDoc {
	def := Default()
	var out []PropertyDoc
	for _, p := range properties() {
		d := PropertyDoc{Name: p.name, Doc: p.doc}
		if p.get != nil {
			d.Default = p.get(def)
		}
		out = append(out, d)
	}
	return out
}

// prop describes one supported key: how to parse it into a Config, and how
// to read it back (get is nil for aliases of another key).
type prop struct {
	name string
	doc  string
	set  func(c *Config, v string) error
	get  func(c Config) string
}

// properties is the table of supported keys. It is built on each call so
// that no mutable table is shared between callers. Keys for one setting
// are listed from least to most precise: Load applies them in this order.
func properties() []prop {
	return []prop{
		int32Prop("broker.id", "broker id, unique in the cluster", 0, math.MaxInt32, func(c *Config) *int32 { return &c.BrokerID }),
		listProp("listeners", "NAME://host:port,... to listen on; an empty host means all interfaces", func(c *Config) *[]string { return &c.Listeners }),
		listProp("advertised.listeners", "NAME://host:port,... given to clients and brokers (default: listeners)", func(c *Config) *[]string { return &c.AdvertisedListeners }),
		{
			name: "listener.security.protocol.map",
			doc:  "NAME:PROTOCOL,... with PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
			set: func(c *Config, v string) error {
				m, err := parseProtocolMap(v)
				c.ListenerSecurityProtocolMap = m
				return err
			},
			get: func(c Config) string { return formatProtocolMap(c.ListenerSecurityProtocolMap) },
		},
		// Kafka's older key: the listener named after the protocol. The
		// listener name, listed after it, wins when both are set.
		stringProp("security.inter.broker.protocol", "", func(c *Config) *string { return &c.InterBrokerListenerName }).
			alias("security protocol between brokers: the listener of that name (inter.broker.listener.name wins)"),
		stringProp("inter.broker.listener.name", "listener other brokers connect to", func(c *Config) *string { return &c.InterBrokerListenerName }),
		{
			name: "authorizer.class.name",
			doc:  "Kafka's ACL authorizer (" + ACLAuthorizerClasses()[0] + " or another of its class names) to check every request against the ACLs; empty allows everything",
			set: func(c *Config, v string) error {
				if v != "" && !slices.Contains(ACLAuthorizerClasses(), v) {
					return fmt.Errorf("kbroker implements only Kafka's ACL authorizer: set one of %s, or leave it empty for no authorization",
						strings.Join(ACLAuthorizerClasses(), ", "))
				}
				c.Authorizer = v
				return nil
			},
			get: func(c Config) string { return c.Authorizer },
		},
		{
			name: "super.users",
			doc:  "principals allowed everything by the ACL authorizer, separated by ';' (User:admin;User:broker)",
			set: func(c *Config, v string) error {
				users, err := acl.ParseSuperUsers(v)
				c.SuperUsers = users
				return err
			},
			get: func(c Config) string { return strings.Join(c.SuperUsers, ";") },
		},
		boolProp("allow.everyone.if.no.acl.found", "with the ACL authorizer, let everyone use a resource no ACL names (false: only super users)", func(c *Config) *bool { return &c.AllowEveryoneIfNoACLFound }),
		durationProp("connections.max.reauth.ms", "SASL session lifetime; clients re-authenticate before it ends (0: never)", time.Millisecond, 0, false, func(c *Config) *time.Duration { return &c.ConnectionsMaxReauth }),
		{
			name: "log.dir",
			doc:  "data directory, when log.dirs is not set",
			set: func(c *Config, v string) error {
				if v == "" {
					return errors.New("empty directory")
				}
				c.LogDirs = []string{v}
				return nil
			},
		},
		listProp("log.dirs", "data directories, comma-separated", func(c *Config) *[]string { return &c.LogDirs }),
		stringProp("broker.rack", "rack of this broker, for replica placement", func(c *Config) *string { return &c.BrokerRack }),
		int32Prop("num.recovery.threads.per.data.dir", "partition logs of one log dir opened (recovered) at a time at start, and closed at a time at shutdown (default max(2, GOMAXPROCS))", 1, math.MaxInt32, func(c *Config) *int32 { return &c.NumRecoveryThreadsPerDataDir }),

		int32Prop("num.partitions", "partitions of auto-created topics", 1, math.MaxInt32, func(c *Config) *int32 { return &c.NumPartitions }),
		int16Prop("default.replication.factor", "replication factor of auto-created topics", 1, func(c *Config) *int16 { return &c.DefaultReplicationFactor }),
		boolProp("auto.create.topics.enable", "create topics on first metadata request or produce", func(c *Config) *bool { return &c.AutoCreateTopics }),
		boolProp("delete.topic.enable", "allow DeleteTopics", func(c *Config) *bool { return &c.DeleteTopicEnable }),

		{
			name: "log.cleanup.policy",
			doc:  "default cleanup.policy of topics: delete (time and size retention), compact, or both",
			set: func(c *Config, v string) error {
				if err := validCleanupPolicy(v); err != nil {
					return err
				}
				c.LogCleanupPolicy = strings.Join(SplitList(v), ",")
				return nil
			},
			get: func(c Config) string { return c.LogCleanupPolicy },
		},
		int64Prop("log.segment.bytes", "segment file size before rolling", 14, math.MaxInt32, func(c *Config) *int64 { return &c.LogSegmentBytes }),
		durationProp("log.roll.hours", "", time.Hour, 1, false, func(c *Config) *time.Duration { return &c.LogRollMs }).alias("segment age before rolling, in hours (log.roll.ms wins)"),
		durationProp("log.roll.ms", "segment age before rolling", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.LogRollMs }),
		durationProp("log.retention.hours", "", time.Hour, math.MinInt64, true, func(c *Config) *time.Duration { return &c.LogRetentionMs }).alias("retention in hours (log.retention.ms and .minutes win)"),
		durationProp("log.retention.minutes", "", time.Minute, math.MinInt64, true, func(c *Config) *time.Duration { return &c.LogRetentionMs }).alias("retention in minutes (log.retention.ms wins)"),
		durationProp("log.retention.ms", "time to keep a segment; -1 keeps forever", time.Millisecond, math.MinInt64, true, func(c *Config) *time.Duration { return &c.LogRetentionMs }),
		int64Prop("log.retention.bytes", "partition size above which old segments go; -1 for no limit", math.MinInt64, math.MaxInt64, func(c *Config) *int64 { return &c.LogRetentionBytes }),
		durationProp("log.retention.check.interval.ms", "how often retention runs", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.LogRetentionCheck }),
		boolProp("log.cleaner.enable", "run the log cleaner that compacts topics with cleanup.policy=compact", func(c *Config) *bool { return &c.LogCleanerEnable }),
		int32Prop("log.cleaner.threads", "log cleaner threads", 0, math.MaxInt32, func(c *Config) *int32 { return &c.LogCleanerThreads }),
		int64Prop("log.cleaner.dedupe.buffer.size", "memory of the cleaners' key maps, shared by the threads (24 bytes per key at load factor 0.9)", 0, math.MaxInt64, func(c *Config) *int64 { return &c.LogCleanerDedupeBufferSize }),
		floatProp("log.cleaner.io.max.bytes.per.second", "cleaner read plus write rate limit", 0, math.MaxFloat64, func(c *Config) *float64 { return &c.LogCleanerIOMaxBytesPerSecond }),
		durationProp("log.cleaner.backoff.ms", "cleaner sleep when no log is cleanable", time.Millisecond, 0, false, func(c *Config) *time.Duration { return &c.LogCleanerBackoff }),
		floatProp("log.cleaner.min.cleanable.ratio", "default min.cleanable.dirty.ratio", 0, 1, func(c *Config) *float64 { return &c.LogCleanerMinCleanableRatio }),
		durationProp("log.cleaner.delete.retention.ms", "default delete.retention.ms: how long tombstones outlive a cleaning", time.Millisecond, 0, false, func(c *Config) *time.Duration { return &c.LogCleanerDeleteRetention }),
		durationProp("log.cleaner.min.compaction.lag.ms", "default min.compaction.lag.ms", time.Millisecond, 0, false, func(c *Config) *time.Duration { return &c.LogCleanerMinCompactionLag }),
		durationProp("log.cleaner.max.compaction.lag.ms", "default max.compaction.lag.ms", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.LogCleanerMaxCompactionLag }),
		int32Prop("log.index.interval.bytes", "bytes between offset index entries", 0, math.MaxInt32, func(c *Config) *int32 { return &c.LogIndexIntervalBytes }),
		int32Prop("log.index.size.max.bytes", "maximum size of an index file", 4, math.MaxInt32, func(c *Config) *int32 { return &c.LogIndexSizeMaxBytes }),
		int64Prop("log.flush.interval.messages", "messages between fsyncs", 1, math.MaxInt64, func(c *Config) *int64 { return &c.LogFlushIntervalMsgs }),
		durationProp("log.flush.interval.ms", "time between fsyncs; 0 never fsyncs by time", time.Millisecond, 0, false, func(c *Config) *time.Duration { return &c.LogFlushIntervalMs }),
		{
			name: "log.message.timestamp.type",
			doc:  "CreateTime or LogAppendTime",
			set: func(c *Config, v string) error {
				if v != TimestampCreateTime && v != TimestampLogAppendTime {
					return fmt.Errorf("want %s or %s", TimestampCreateTime, TimestampLogAppendTime)
				}
				c.LogMessageTimestamp = v
				return nil
			},
			get: func(c Config) string { return c.LogMessageTimestamp },
		},

		int32Prop("message.max.bytes", "largest record batch accepted", 1, math.MaxInt32, func(c *Config) *int32 { return &c.MessageMaxBytes }),
		int32Prop("socket.request.max.bytes", "largest request accepted", 1, math.MaxInt32, func(c *Config) *int32 { return &c.SocketRequestMaxBytes }),
		int32Prop("max.connections", "connections held at once; at the limit new ones wait (the inter-broker listener is exempt when there are several); listener.name.<l>.max.connections limits one listener", 0, math.MaxInt32, func(c *Config) *int32 { return &c.MaxConnections }),
		int32Prop("max.connection.creation.rate", "new connections accepted per second; over it accepting waits (the inter-broker listener is exempt when there are several); listener.name.<l>.max.connection.creation.rate limits one listener", 0, math.MaxInt32, func(c *Config) *int32 { return &c.MaxConnectionCreationRate }),
		int32Prop("max.connections.per.ip", "connections held at once from one address; more are closed at once", 0, math.MaxInt32, func(c *Config) *int32 { return &c.MaxConnectionsPerIP }),
		{
			name: "max.connections.per.ip.overrides",
			doc:  "host:count,host:count - per-address exceptions to max.connections.per.ip",
			set: func(c *Config, v string) error {
				m, err := ParseConnectionOverrides(v)
				c.MaxConnectionsPerIPOverrides = m
				return err
			},
			get: func(c Config) string { return FormatConnectionOverrides(c.MaxConnectionsPerIPOverrides) },
		},
		int32Prop("quota.window.num", "windows client quota rates are kept over", 1, math.MaxInt32, func(c *Config) *int32 { return &c.QuotaWindowNum }),
		durationProp("quota.window.size.seconds", "span of each client quota window", time.Second, 1, false, func(c *Config) *time.Duration { return &c.QuotaWindowSize }),
		int64Prop("queued.max.request.bytes", "bytes of requests read and not yet handled, all connections together; reading pauses at it; -1 no bound", -1, math.MaxInt64, func(c *Config) *int64 { return &c.QueuedMaxRequestBytes }),
		durationProp("connections.max.idle.ms", "close a connection idle this long; -1 never", time.Millisecond, math.MinInt64, true, func(c *Config) *time.Duration { return &c.ConnectionsMaxIdle }),

		stringProp("zookeeper.connect", "host:port,...[/chroot]; empty runs an embedded single node", func(c *Config) *string { return &c.ZookeeperConnect }),
		durationProp("zookeeper.session.timeout.ms", "ZooKeeper session timeout", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.ZookeeperSessionTimeout }),
		durationProp("zookeeper.connection.timeout.ms", "ZooKeeper connect timeout (default: session timeout)", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.ZookeeperConnectionTimeout }),

		durationProp("replica.lag.time.max.ms", "a follower not caught up for this long leaves the ISR", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.ReplicaLagTimeMax }),
		durationProp("replica.fetch.wait.max.ms", "how long a follower's fetch waits at the leader for new records", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.ReplicaFetchWaitMax }),
		int32Prop("min.insync.replicas", "ISR size needed for acks=all writes", 1, math.MaxInt32, func(c *Config) *int32 { return &c.MinInsyncReplicas }),
		boolProp("unclean.leader.election.enable", "let an out-of-sync replica lead (loses data)", func(c *Config) *bool { return &c.UncleanLeaderElectionEnable }),
		boolProp("auto.leader.rebalance.enable", "move leadership back to the preferred (first) replica when it is in sync", func(c *Config) *bool { return &c.AutoLeaderRebalanceEnable }),
		durationProp("leader.imbalance.check.interval.seconds", "how often the controller checks for preferred leaders", time.Second, 1, false, func(c *Config) *time.Duration { return &c.LeaderImbalanceCheck }),

		int32Prop("offsets.topic.num.partitions", "partitions of __consumer_offsets", 1, math.MaxInt32, func(c *Config) *int32 { return &c.OffsetsTopicNumPartitions }),
		int16Prop("offsets.topic.replication.factor", "replication factor of __consumer_offsets (capped by live brokers)", 1, func(c *Config) *int16 { return &c.OffsetsTopicReplicationFactor }),
		int64Prop("offsets.topic.segment.bytes", "segment size of __consumer_offsets (set when the topic is created)", 1, math.MaxInt32, func(c *Config) *int64 { return &c.OffsetsTopicSegmentBytes }),
		durationProp("offsets.retention.minutes", "how long committed offsets of empty groups are kept", time.Minute, 1, false, func(c *Config) *time.Duration { return &c.OffsetsRetention }),
		durationProp("group.initial.rebalance.delay.ms", "wait for more members before the first rebalance", time.Millisecond, 0, false, func(c *Config) *time.Duration { return &c.GroupInitialRebalanceDelay }),
		durationProp("group.min.session.timeout.ms", "smallest session timeout a member may ask for", time.Millisecond, 0, false, func(c *Config) *time.Duration { return &c.GroupMinSessionTimeout }),
		durationProp("group.max.session.timeout.ms", "largest session timeout a member may ask for", time.Millisecond, 0, false, func(c *Config) *time.Duration { return &c.GroupMaxSessionTimeout }),
		durationProp("group.consumer.session.timeout.ms", "a consumer (KIP-848) group member without a heartbeat for this long is removed", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.GroupConsumerSessionTimeout }),
		durationProp("group.consumer.heartbeat.interval.ms", "heartbeat interval told to consumer (KIP-848) group members", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.GroupConsumerHeartbeatInterval }),
		assignorsProp("group.consumer.assignors", "server-side assignors of consumer groups, the first the default: uniform, range (or Kafka's class names)", func(c *Config) *[]string { return &c.GroupConsumerAssignors }),
		int32Prop("group.consumer.max.size", "most members a consumer (KIP-848) group may have", 1, math.MaxInt32, func(c *Config) *int32 { return &c.GroupConsumerMaxSize }),
		durationProp("group.share.session.timeout.ms", "a share (KIP-932) group member without a heartbeat for this long is removed", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.GroupShareSessionTimeout }),
		durationProp("group.share.heartbeat.interval.ms", "heartbeat interval told to share group members", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.GroupShareHeartbeatInterval }),
		int32Prop("group.share.max.size", "most members a share group may have", 1, 1000, func(c *Config) *int32 { return &c.GroupShareMaxSize }),
		durationProp("group.share.record.lock.duration.ms", "how long a share group member holds the records it acquired before they are delivered again", time.Millisecond, 1000, false, func(c *Config) *time.Duration { return &c.GroupShareRecordLockDuration }),
		int32Prop("group.share.delivery.count.limit", "deliveries of a record to a share group before it is archived", 2, 10, func(c *Config) *int32 { return &c.GroupShareDeliveryCountLimit }),
		int32Prop("group.share.partition.max.record.locks", "most records of one share partition in flight at once", 100, 10000, func(c *Config) *int32 { return &c.GroupSharePartitionMaxLocks }),
		durationProp("transactional.id.expiration.ms", "idle time before a transactional id expires", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.TransactionalIDExpiration }),
		durationProp("producer.id.expiration.ms", "idle time before a producer id's state expires", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.ProducerIDExpiration }),
		int32Prop("transaction.state.log.num.partitions", "partitions of __transaction_state", 1, math.MaxInt32, func(c *Config) *int32 { return &c.TransactionStateLogNumPartitions }),
		int16Prop("transaction.state.log.replication.factor", "replication factor of __transaction_state (capped by live brokers)", 1, func(c *Config) *int16 { return &c.TransactionStateLogReplicationFactor }),
		int32Prop("transaction.state.log.min.isr", "min.insync.replicas of __transaction_state (capped by its replication factor)", 1, math.MaxInt32, func(c *Config) *int32 { return &c.TransactionStateLogMinISR }),
		int64Prop("transaction.state.log.segment.bytes", "segment size of __transaction_state", 1, math.MaxInt32, func(c *Config) *int64 { return &c.TransactionStateLogSegmentBytes }),
		durationProp("transaction.max.timeout.ms", "largest transaction timeout a producer may ask for", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.TransactionMaxTimeout }),
		durationProp("transaction.abort.timed.out.transaction.cleanup.interval.ms", "how often transactions past their timeout are aborted", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.TransactionAbortTimedOutInterval }),
		{
			name: "kbroker.transaction.version",
			doc:  "level of Kafka's transaction.version feature this broker finalizes in ApiVersions: 2 offers transactions v2 (KIP-890 part 2: no AddPartitionsToTxn round trips, the epoch bumped by every EndTxn) to clients that support it; 0 or 1 keeps every client on transactions v1. When a cluster of an earlier kbroker release (without transactions v2) is upgraded, run the new release at 1 until every broker runs it, then raise it to 2 (Kafka's procedure: roll, then kafka-features.sh upgrade)",
			set: func(c *Config, v string) error {
				n, err := parseInt(v, 0, 2)
				c.TransactionVersion = int16(n)
				return err
			},
			get: func(c Config) string { return strconv.FormatInt(int64(c.TransactionVersion), 10) },
		},
		durationProp("transaction.remove.expired.transaction.cleanup.interval.ms", "how often expired transactional ids are removed", time.Millisecond, 1, false, func(c *Config) *time.Duration { return &c.TransactionRemoveExpiredIDsInterval }),

		{
			name: "kbroker.metrics.address",
			doc:  "host:port for the Prometheus /metrics endpoint and the live console; empty disables them; unset on an embedded broker (no zookeeper.connect): " + EmbeddedMetricsAddress + ", or an ephemeral loopback port when that one is taken",
			set: func(c *Config, v string) error {
				if v != "" {
					if _, _, err := net.SplitHostPort(v); err != nil {
						return err
					}
				}
				c.MetricsAddress = v
				return nil
			},
			get: func(c Config) string { return c.MetricsAddress },
		},
		stringProp("kbroker.test.sync.journal", "TEST-ONLY, for the power-loss test: a file recording every fsync, truncation, creation, rename and removal of .log files, so a test can cut them to what a power cut would have left; empty (the default) records nothing", func(c *Config) *string { return &c.TestSyncJournal }),
		boolProp("kbroker.acks.fsync", "acknowledge writes only once fdatasynced (acks=1: the leader; acks=all: the leader and every in-sync follower), with group commit; the default of the topic config of the same name", func(c *Config) *bool { return &c.AcksFsync }),
		boolProp("kbroker.console.actions.enable", "let the live console elect preferred leaders and delete records (POST from its own page only; as User:ANONYMOUS under the authorizer)", func(c *Config) *bool { return &c.ConsoleActionsEnable }),
	}
}

// EmbeddedMetricsAddress is where an embedded broker serves /metrics and
// the live console when kbroker.metrics.address is not set: loopback
// only, so nothing is exposed that was not asked for. When the port is
// taken (another broker on the machine) the broker serves them on an
// ephemeral loopback port instead and logs it.
const EmbeddedMetricsAddress = "127.0.0.1:9644"

// alias marks p as another name for a setting whose canonical key comes
// later in the table: it is parsed, but not reported by Properties.
func (p prop) alias(doc string) prop {
	p.doc = doc
	p.get = nil
	return p
}

func parseInt(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	switch {
	case n < lo:
		return 0, fmt.Errorf("must be at least %d", lo)
	case n > hi:
		return 0, fmt.Errorf("must be at most %d", hi)
	}
	return n, nil
}

func int64Prop(name, doc string, lo, hi int64, field func(*Config) *int64) prop {
	return prop{name: name, doc: doc,
		set: func(c *Config, v string) error {
			n, err := parseInt(v, lo, hi)
			*field(c) = n
			return err
		},
		get: func(c Config) string { return strconv.FormatInt(*field(&c), 10) },
	}
}

func int32Prop(name, doc string, lo, hi int64, field func(*Config) *int32) prop {
	return prop{name: name, doc: doc,
		set: func(c *Config, v string) error {
			n, err := parseInt(v, lo, hi)
			*field(c) = int32(n)
			return err
		},
		get: func(c Config) string { return strconv.FormatInt(int64(*field(&c)), 10) },
	}
}

func int16Prop(name, doc string, lo int64, field func(*Config) *int16) prop {
	return prop{name: name, doc: doc,
		set: func(c *Config, v string) error {
			n, err := parseInt(v, lo, math.MaxInt16)
			*field(c) = int16(n)
			return err
		},
		get: func(c Config) string { return strconv.FormatInt(int64(*field(&c)), 10) },
	}
}

func boolProp(name, doc string, field func(*Config) *bool) prop {
	return prop{name: name, doc: doc,
		set: func(c *Config, v string) error {
			// Kafka's ConfigDef accepts true/false in any case, nothing else.
			switch strings.ToLower(v) {
			case "true":
				*field(c) = true
			case "false":
				*field(c) = false
			default:
				return errors.New("want true or false")
			}
			return nil
		},
		get: func(c Config) string { return strconv.FormatBool(*field(&c)) },
	}
}

// floatProp parses a DOUBLE property within [lo, hi].
func floatProp(name, doc string, lo, hi float64, field func(*Config) *float64) prop {
	return prop{name: name, doc: doc,
		set: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			switch {
			case err != nil || math.IsNaN(f):
				return errors.New("want a number")
			case f < lo:
				return fmt.Errorf("must be at least %v", lo)
			case f > hi:
				return fmt.Errorf("must be at most %v", hi)
			}
			*field(c) = f
			return nil
		},
		get: func(c Config) string { return strconv.FormatFloat(*field(&c), 'g', -1, 64) },
	}
}

func stringProp(name, doc string, field func(*Config) *string) prop {
	return prop{name: name, doc: doc,
		set: func(c *Config, v string) error {
			*field(c) = v
			return nil
		},
		get: func(c Config) string { return *field(&c) },
	}
}

// listProp parses a comma-separated list; blanks around items and empty
// items are dropped, as Kafka's LIST type does.
func listProp(name, doc string, field func(*Config) *[]string) prop {
	return prop{name: name, doc: doc,
		set: func(c *Config, v string) error {
			*field(c) = SplitList(v)
			return nil
		},
		get: func(c Config) string { return strings.Join(*field(&c), ",") },
	}
}

// consumerAssignorNames maps Kafka's assignor class names to the names
// ConsumerGroupHeartbeat uses.
var consumerAssignorNames = map[string]string{
	"uniform": "uniform",
	"range":   "range",
	"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
	"org.apache.kafka.coordinator.group.assignor.RangeAssignor":   "range",
}

// assignorsProp reads group.consumer.assignors: a non-empty list of known
// assignors, stored by their short names.
func assignorsProp(name, doc string, field func(*Config) *[]string) prop {
	return prop{name: name, doc: doc,
		set: func(c *Config, v string) error {
			var out []string
			for _, item := range SplitList(v) {
				short, ok := consumerAssignorNames[item]
				if !ok {
					return fmt.Errorf("unknown assignor %q (known: uniform, range)", item)
				}
				out = append(out, short)
			}
			if len(out) == 0 {
				return errors.New("at least one assignor is required")
			}
			*field(c) = out
			return nil
		},
		get: func(c Config) string { return strings.Join(*field(&c), ",") },
	}
}

// SplitList splits a LIST value at commas; blanks around items and empty
// items are dropped, as Kafka's LIST type does.
func SplitList(v string) []string {
	var items []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// durationProp parses an integer count of unit. With negativeForever,
// every negative value means "forever" (RetainForever), as Kafka reads
// log.retention.*. Values too large for a time.Duration (about 292 years)
// are clamped to the largest one: they mean "never" either way, and the
// largest one reads back as Long.MAX_VALUE.
func durationProp(name, doc string, unit time.Duration, lo int64, negativeForever bool, field func(*Config) *time.Duration) prop {
	return prop{name: name, doc: doc,
		set: func(c *Config, v string) error {
			n, err := parseInt(v, lo, math.MaxInt64)
			if err != nil {
				return err
			}
			switch {
			case negativeForever && n < 0:
				*field(c) = RetainForever
			case n > int64(math.MaxInt64/unit):
				*field(c) = math.MaxInt64
			default:
				*field(c) = time.Duration(n) * unit
			}
			return nil
		},
		get: func(c Config) string {
			d := *field(&c)
			switch {
			case negativeForever && d < 0:
				return "-1"
			case d == math.MaxInt64:
				return strconv.FormatInt(math.MaxInt64, 10)
			}
			return strconv.FormatInt(int64(d/unit), 10)
		},
	}
}

// parseProtocolMap parses listener.security.protocol.map, NAME:PROTOCOL,...
// Names are upper-cased as Kafka normalises them.
func parseProtocolMap(v string) (map[string]string, error) {
	m := map[string]string{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("entry %q: want NAME:PROTOCOL", item)
		}
		switch proto {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			return nil, fmt.Errorf("entry %q: unknown security protocol %s", item, proto)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener name %s mapped twice", name)
		}
		m[name] = proto
	}
	return m, nil
}

func formatProtocolMap(m map[string]string) string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		names[i] = name + ":" + m[name]
	}
	return strings.Join(names, ",")
}

// ParseConnectionOverrides parses max.connections.per.ip.overrides,
// Kafka's "host:count,host:count" (a host is a name or an address; an IPv6
// address is written bare, the count after its last colon). Empty is none.
func ParseConnectionOverrides(v string) (map[string]int32, error) {
	items := SplitList(v)
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[string]int32, len(items))
	for _, item := range items {
		i := strings.LastIndexByte(item, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q: want host:count", item)
		}
		host := strings.Trim(strings.TrimSpace(item[:i]), "[]")
		n, err := strconv.ParseInt(strings.TrimSpace(item[i+1:]), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: count: want 0..%d", item, math.MaxInt32)
		}
		out[host] = int32(n)
	}
	return out, nil
}

// FormatConnectionOverrides is the inverse of ParseConnectionOverrides, in
// host order.
func FormatConnectionOverrides(m map[string]int32) string {
	hosts := make([]string, 0, len(m))
	for h := range m {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		parts[i] = h + ":" + strconv.Itoa(int(m[h]))
	}
	return strings.Join(parts, ",")
}

// isSecurityKey reports whether key is a TLS or SASL property, kept in
// Config.Security: Kafka's ssl.* and sasl.* keys and per-listener
// listener.name.<listener>.* overrides.
func isSecurityKey(key string) bool {
	return strings.HasPrefix(key, "ssl.") || strings.HasPrefix(key, "sasl.") || strings.HasPrefix(key, "listener.name.")
}

// ListenerSettings returns the TLS and SASL settings of the named
// listener, by Kafka's rule: listener.name.<name in lower case>.<key>
// overrides <key>. SASL mechanism settings keep their mechanism prefix
// (listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config becomes
// scram-sha-256.sasl.jaas.config).
func (c Config) ListenerSettings(listener string) map[string]string {
	prefix := "listener.name." + strings.ToLower(listener) + "."
	out := map[string]string{}
	for k, v := range c.Security {
		if !strings.HasPrefix(k, "listener.name.") {
			out[k] = v
		}
	}
	for k, v := range c.Security {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}

// ListenerProtocol returns the security protocol of the named listener.
func (c Config) ListenerProtocol(listener string) string {
	return c.ListenerSecurityProtocolMap[strings.ToUpper(listener)]
}
