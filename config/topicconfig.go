package config

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TopicConfigDef describes one per-topic config of Kafka 3.9 (LogConfig):
// its name, Kafka's type, Kafka's default, how values are checked, and the
// broker properties its default falls back to (Kafka's
// ServerTopicConfigSynonyms), most precise first.
type TopicConfigDef struct {
	Name string
	// Type is Kafka's ConfigDef type: BOOLEAN, STRING, INT, LONG, DOUBLE
	// or LIST.
	Type string
	// KafkaDefault is Kafka 3.9's default, used when no broker property
	// supplies the value.
	KafkaDefault string
	// Min and Max bound numbers ("" = unbounded), Kafka's Range.
	Min, Max string
	// OneOf lists the valid strings of a STRING, or of each item of a
	// LIST (Kafka's ValidString.in / ValidList.in).
	OneOf []string
	// Special names a validator beyond the above: "gzip-level",
	// "throttled-replicas", "message-format-version", "no-tiered-storage".
	Special string
	// BrokerSource is the broker property the default comes from ("" =
	// none), BrokerAliases the less precise properties for the same
	// setting (log.retention.minutes, log.retention.hours).
	BrokerSource  string
	BrokerAliases []string
	// Acted says whether kbroker acts on the config; accepted configs it
	// does not act on are stored, reported and validated only.
	Acted bool
	Doc   string
}

const longMax = "9223372036854775807"

// topicConfigTable is Kafka 3.9's topic config list (LogConfig.CONFIG and
// TopicConfig), in name order.
var topicConfigTable = []TopicConfigDef{
	{Name: "cleanup.policy", Type: "LIST", KafkaDefault: "delete", OneOf: []string{"compact", "delete"}, BrokerSource: "log.cleanup.policy", Acted: true,
		Doc: "The retention policy of old log segments: \"delete\" (by time or size) and/or \"compact\"."},
	{Name: "compression.gzip.level", Type: "INT", KafkaDefault: "-1", Special: "gzip-level", BrokerSource: "compression.gzip.level",
		Doc: "The gzip level used when compression.type is gzip."},
	{Name: "compression.lz4.level", Type: "INT", KafkaDefault: "9", Min: "1", Max: "17", BrokerSource: "compression.lz4.level",
		Doc: "The lz4 level used when compression.type is lz4."},
	{Name: "compression.type", Type: "STRING", KafkaDefault: "producer", OneOf: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}, BrokerSource: "compression.type",
		Doc: "The compression of stored batches; \"producer\" keeps the producer's codec."},
	{Name: "compression.zstd.level", Type: "INT", KafkaDefault: "3", Min: "-131072", Max: "22", BrokerSource: "compression.zstd.level",
		Doc: "The zstd level used when compression.type is zstd."},
	{Name: "delete.retention.ms", Type: "LONG", KafkaDefault: "86400000", Min: "0", BrokerSource: "log.cleaner.delete.retention.ms",
		Doc: "How long tombstones are kept on a compacted topic."},
	{Name: "file.delete.delay.ms", Type: "LONG", KafkaDefault: "60000", Min: "0", BrokerSource: "log.segment.delete.delay.ms",
		Doc: "The time to wait before deleting a file from the filesystem."},
	{Name: "flush.messages", Type: "LONG", KafkaDefault: longMax, Min: "1", BrokerSource: "log.flush.interval.messages", Acted: true,
		Doc: "The number of records after which the log is fsynced."},
	{Name: "flush.ms", Type: "LONG", KafkaDefault: longMax, Min: "0", BrokerSource: "log.flush.interval.ms", BrokerAliases: []string{"log.flush.scheduler.interval.ms"}, Acted: true,
		Doc: "The time after which the log is fsynced."},
	{Name: "follower.replication.throttled.replicas", Type: "LIST", KafkaDefault: "", Special: "throttled-replicas",
		Doc: "Replicas whose log replication is throttled on the follower side: partitionId:brokerId,... or *."},
	{Name: "index.interval.bytes", Type: "INT", KafkaDefault: "4096", Min: "0", BrokerSource: "log.index.interval.bytes", Acted: true,
		Doc: "How many bytes of records lie between two offset index entries."},
	// Not Kafka's: kbroker's durable acknowledgements (Redpanda's
	// write.caching=false, inverted), per topic over the broker default.
	{Name: "kbroker.acks.fsync", Type: "BOOLEAN", KafkaDefault: "false", BrokerSource: "kbroker.acks.fsync", Acted: true,
		Doc: "Acknowledge a write only once it is fdatasynced: acks=1 on the leader, acks=all on the leader and every in-sync follower (group commit: concurrent writes share one fsync)."},
	{Name: "leader.replication.throttled.replicas", Type: "LIST", KafkaDefault: "", Special: "throttled-replicas",
		Doc: "Replicas whose log replication is throttled on the leader side: partitionId:brokerId,... or *."},
	{Name: "local.retention.bytes", Type: "LONG", KafkaDefault: "-2", Min: "-2", BrokerSource: "log.local.retention.bytes",
		Doc: "Local size retention with tiered storage (-2: retention.bytes)."},
	{Name: "local.retention.ms", Type: "LONG", KafkaDefault: "-2", Min: "-2", BrokerSource: "log.local.retention.ms",
		Doc: "Local time retention with tiered storage (-2: retention.ms)."},
	{Name: "max.compaction.lag.ms", Type: "LONG", KafkaDefault: longMax, Min: "1", BrokerSource: "log.cleaner.max.compaction.lag.ms",
		Doc: "The longest a record may stay uncompacted."},
	{Name: "max.message.bytes", Type: "INT", KafkaDefault: "1048588", Min: "0", BrokerSource: "message.max.bytes", Acted: true,
		Doc: "The largest record batch size accepted."},
	{Name: "message.downconversion.enable", Type: "BOOLEAN", KafkaDefault: "true", BrokerSource: "log.message.downconversion.enable",
		Doc: "Whether records are down-converted for old consumers."},
	{Name: "message.format.version", Type: "STRING", KafkaDefault: "3.0-IV1", Special: "message-format-version", BrokerSource: "log.message.format.version",
		Doc: "Deprecated: the message format version; ignored with inter.broker.protocol.version 3.0 or later."},
	{Name: "message.timestamp.after.max.ms", Type: "LONG", KafkaDefault: longMax, Min: "0", BrokerSource: "log.message.timestamp.after.max.ms", Acted: true,
		Doc: "How far a CreateTime timestamp may lie after the broker's time."},
	{Name: "message.timestamp.before.max.ms", Type: "LONG", KafkaDefault: longMax, Min: "0", BrokerSource: "log.message.timestamp.before.max.ms", Acted: true,
		Doc: "How far a CreateTime timestamp may lie before the broker's time."},
	{Name: "message.timestamp.difference.max.ms", Type: "LONG", KafkaDefault: longMax, Min: "0", BrokerSource: "log.message.timestamp.difference.max.ms", Acted: true,
		Doc: "Deprecated: how far a CreateTime timestamp may differ from the broker's time."},
	{Name: "message.timestamp.type", Type: "STRING", KafkaDefault: "CreateTime", OneOf: []string{"CreateTime", "LogAppendTime"}, BrokerSource: "log.message.timestamp.type", Acted: true,
		Doc: "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime)."},
	{Name: "min.cleanable.dirty.ratio", Type: "DOUBLE", KafkaDefault: "0.5", Min: "0", Max: "1", BrokerSource: "log.cleaner.min.cleanable.ratio",
		Doc: "The dirty share of a compacted log above which it is cleaned."},
	{Name: "min.compaction.lag.ms", Type: "LONG", KafkaDefault: "0", Min: "0", BrokerSource: "log.cleaner.min.compaction.lag.ms",
		Doc: "The least time a record stays uncompacted."},
	{Name: "min.insync.replicas", Type: "INT", KafkaDefault: "1", Min: "1", BrokerSource: "min.insync.replicas", Acted: true,
		Doc: "The minimum in-sync replicas an acks=all write needs."},
	{Name: "preallocate", Type: "BOOLEAN", KafkaDefault: "false", BrokerSource: "log.preallocate",
		Doc: "Whether segment files are preallocated."},
	{Name: "remote.log.copy.disable", Type: "BOOLEAN", KafkaDefault: "false",
		Doc: "Whether copying to tiered storage is stopped (kbroker has no tiered storage)."},
	{Name: "remote.log.delete.on.disable", Type: "BOOLEAN", KafkaDefault: "false",
		Doc: "Whether remote data is deleted when tiered storage is disabled (kbroker has no tiered storage)."},
	{Name: "remote.storage.enable", Type: "BOOLEAN", KafkaDefault: "false", Special: "no-tiered-storage",
		Doc: "Whether the topic uses tiered storage; kbroker has none, so only false is accepted."},
	{Name: "retention.bytes", Type: "LONG", KafkaDefault: "-1", BrokerSource: "log.retention.bytes", Acted: true,
		Doc: "The size a partition may grow to before old segments are deleted; -1 for no size limit."},
	{Name: "retention.ms", Type: "LONG", KafkaDefault: "604800000", Min: "-1", BrokerSource: "log.retention.ms", BrokerAliases: []string{"log.retention.minutes", "log.retention.hours"}, Acted: true,
		Doc: "How long a segment is kept before it may be deleted; -1 for no time limit."},
	{Name: "segment.bytes", Type: "INT", KafkaDefault: "1073741824", Min: "14", BrokerSource: "log.segment.bytes", Acted: true,
		Doc: "The size of one log segment file."},
	{Name: "segment.index.bytes", Type: "INT", KafkaDefault: "10485760", Min: "4", BrokerSource: "log.index.size.max.bytes", Acted: true,
		Doc: "The size of the offset index of a segment."},
	{Name: "segment.jitter.ms", Type: "LONG", KafkaDefault: "0", Min: "0", BrokerSource: "log.roll.jitter.ms", BrokerAliases: []string{"log.roll.jitter.hours"},
		Doc: "The largest random jitter subtracted from segment.ms."},
	{Name: "segment.ms", Type: "LONG", KafkaDefault: "604800000", Min: "1", BrokerSource: "log.roll.ms", BrokerAliases: []string{"log.roll.hours"}, Acted: true,
		Doc: "The time after which a segment is rolled even if it is not full."},
	{Name: "unclean.leader.election.enable", Type: "BOOLEAN", KafkaDefault: "false", BrokerSource: "unclean.leader.election.enable", Acted: true,
		Doc: "Whether a replica outside the ISR may become leader, at the cost of data loss."},
}

// ms formats a broker duration as a topic config's milliseconds: -1 when
// negative (forever), Long.MAX_VALUE for the largest Duration (what a
// broker value too large for a Duration is clamped to: "never").
func ms(d time.Duration) string {
	switch {
	case d < 0:
		return "-1"
	case d == math.MaxInt64:
		return strconv.FormatInt(math.MaxInt64, 10)
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// Cleanup policies, the items of cleanup.policy and log.cleanup.policy.
const (
	CleanupDelete  = "delete"
	CleanupCompact = "compact"
)

// validCleanupPolicy accepts a non-empty list of delete and compact.
func validCleanupPolicy(s string) error {
	items := SplitList(s)
	if len(items) == 0 {
		return fmt.Errorf("%q: want %s, %s or both", s, CleanupDelete, CleanupCompact)
	}
	for _, item := range items {
		if item != CleanupDelete && item != CleanupCompact {
			return fmt.Errorf("%q: %q is not %s or %s", s, item, CleanupDelete, CleanupCompact)
		}
	}
	return nil
}

// CleanupPolicyDeletes reports whether time and size retention (retention.ms,
// retention.bytes) may delete segments of a log with this cleanup.policy:
// only when "delete" is one of its items (Kafka's LogConfig.delete). A
// compacted log keeps every segment except those wholly below its log start
// offset (DeleteRecords, or a coordinator moving the start of
// __consumer_offsets).
func CleanupPolicyDeletes(policy string) bool {
	return slices.Contains(SplitList(policy), CleanupDelete)
}

// CleanupPolicyCompacts reports whether a log with this cleanup.policy is
// compacted (Kafka's LogConfig.compact): every record must then have a key.
func CleanupPolicyCompacts(policy string) bool {
	return slices.Contains(SplitList(policy), CleanupCompact)
}

// MillisDuration turns a topic config's milliseconds (retention.ms,
// segment.ms, flush.ms) into a Duration. ok is false when n is negative or
// too large for a Duration (beyond about 292 years, e.g. Long.MAX_VALUE,
// which Kafka users set to mean "forever"): the caller reads that as
// "never" (keep forever, never roll or flush by time). Multiplying without
// this check wraps to an arbitrary value, possibly zero or negative.
func MillisDuration(n int64) (d time.Duration, ok bool) {
	if n < 0 || n > int64(math.MaxInt64/time.Millisecond) {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

func itoa[T ~int16 | ~int32 | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

// brokerDefaults gives the default of the topic configs whose broker
// property kbroker has, from the broker config; the others default to
// Kafka's default.
var brokerDefaults = map[string]func(Config) string{
	"cleanup.policy":       func(c Config) string { return c.LogCleanupPolicy },
	"retention.ms":         func(c Config) string { return ms(c.LogRetentionMs) },
	"retention.bytes":      func(c Config) string { return itoa(c.LogRetentionBytes) },
	"segment.bytes":        func(c Config) string { return itoa(c.LogSegmentBytes) },
	"segment.ms":           func(c Config) string { return ms(c.LogRollMs) },
	"segment.index.bytes":  func(c Config) string { return itoa(c.LogIndexSizeMaxBytes) },
	"index.interval.bytes": func(c Config) string { return itoa(c.LogIndexIntervalBytes) },
	"flush.messages":       func(c Config) string { return itoa(c.LogFlushIntervalMsgs) },
	"kbroker.acks.fsync":   func(c Config) string { return strconv.FormatBool(c.AcksFsync) },
	"flush.ms": func(c Config) string {
		if c.LogFlushIntervalMs <= 0 {
			return longMax
		}
		return ms(c.LogFlushIntervalMs)
	},
	"max.message.bytes":              func(c Config) string { return itoa(c.MessageMaxBytes) },
	"min.cleanable.dirty.ratio":      func(c Config) string { return strconv.FormatFloat(c.LogCleanerMinCleanableRatio, 'g', -1, 64) },
	"delete.retention.ms":            func(c Config) string { return ms(c.LogCleanerDeleteRetention) },
	"min.compaction.lag.ms":          func(c Config) string { return ms(c.LogCleanerMinCompactionLag) },
	"max.compaction.lag.ms":          func(c Config) string { return ms(c.LogCleanerMaxCompactionLag) },
	"min.insync.replicas":            func(c Config) string { return itoa(c.MinInsyncReplicas) },
	"unclean.leader.election.enable": func(c Config) string { return strconv.FormatBool(c.UncleanLeaderElectionEnable) },
	"message.timestamp.type": func(c Config) string {
		if c.LogMessageTimestamp == "" {
			return TimestampCreateTime
		}
		return c.LogMessageTimestamp
	},
}

// Default is the config's value on a topic without an override: the
// broker property's when kbroker has it, else Kafka's default.
func (d TopicConfigDef) Default(c Config) string {
	if f, ok := brokerDefaults[d.Name]; ok {
		return f(c)
	}
	return d.KafkaDefault
}

// TopicConfigs lists Kafka 3.9's topic configs, in name order. A value set
// on a topic overrides the broker default.
func TopicConfigs() []TopicConfigDef {
	return slices.Clone(topicConfigTable)
}

// TopicConfigDefFor returns the definition of a topic config name.
func TopicConfigDefFor(name string) (TopicConfigDef, bool) {
	i := slices.IndexFunc(topicConfigTable, func(d TopicConfigDef) bool { return d.Name == name })
	if i < 0 {
		return TopicConfigDef{}, false
	}
	return topicConfigTable[i], true
}

// TopicConfigError is a refused topic config, with Kafka's message.
type TopicConfigError struct{ Message string }

func (e *TopicConfigError) Error() string { return e.Message }

// invalid is Kafka's ConfigException message.
func invalid(name, value, reason string) error {
	return &TopicConfigError{fmt.Sprintf("Invalid value %s for configuration %s: %s", value, name, reason)}
}

// Normalize checks a value as Kafka's ConfigDef parses and validates it
// and returns it in Kafka's canonical form (trimmed numbers, lower-case
// booleans, list items joined by commas without spaces).
func (d TopicConfigDef) Normalize(value string) (string, error) {
	trimmed := strings.TrimSpace(value)
	var out string
	var num float64
	switch d.Type {
	case "BOOLEAN":
		switch strings.ToLower(trimmed) {
		case "true", "false":
			out = strings.ToLower(trimmed)
		default:
			return "", invalid(d.Name, value, "Expected value to be either true or false")
		}
	case "INT", "LONG":
		bits := 32
		if d.Type == "LONG" {
			bits = 64
		}
		n, err := strconv.ParseInt(trimmed, 10, bits)
		if err != nil {
			return "", invalid(d.Name, value, "Not a number of type "+d.Type)
		}
		out, num = strconv.FormatInt(n, 10), float64(n)
		if d.Type == "LONG" && n > 1<<53 {
			// Compare longs exactly; no bound in the table is that large.
			num = 1 << 53
		}
	case "DOUBLE":
		f, err := strconv.ParseFloat(trimmed, 64)
		if err != nil || math.IsNaN(f) {
			return "", invalid(d.Name, value, "Not a number of type DOUBLE")
		}
		out, num = strconv.FormatFloat(f, 'f', -1, 64), f
		if !strings.ContainsAny(out, ".eE") && !math.IsInf(f, 0) {
			out += ".0" // Java's Double.toString
		}
	case "LIST":
		items := kafkaList(trimmed)
		for _, item := range items {
			if d.OneOf != nil && !slices.Contains(d.OneOf, item) {
				return "", invalid(d.Name, item, "String must be one of: "+strings.Join(d.OneOf, ", "))
			}
		}
		out = strings.Join(items, ",")
	default: // STRING: kept as given
		out = value
		if d.OneOf != nil && !slices.Contains(d.OneOf, value) {
			return "", invalid(d.Name, value, "String must be one of: "+strings.Join(d.OneOf, ", "))
		}
	}
	if d.Min != "" {
		if lo, _ := strconv.ParseFloat(d.Min, 64); num < lo {
			return "", invalid(d.Name, out, "Value must be at least "+d.Min)
		}
	}
	if d.Max != "" {
		if hi, _ := strconv.ParseFloat(d.Max, 64); num > hi {
			return "", invalid(d.Name, out, "Value must be no more than "+d.Max)
		}
	}
	if err := d.special(value, out); err != nil {
		return "", err
	}
	return out, nil
}

// special runs the validators that are not a range or a list of strings.
func (d TopicConfigDef) special(value, out string) error {
	switch d.Special {
	case "gzip-level":
		if n, _ := strconv.Atoi(out); n != -1 && (n < 1 || n > 9) {
			return invalid(d.Name, out, "Value must be between 1 and 9 or equal to -1")
		}
	case "throttled-replicas":
		items := kafkaList(out)
		if len(items) == 1 && items[0] == "*" {
			return nil
		}
		for _, item := range items {
			if !throttledReplica.MatchString(item) {
				return invalid(d.Name, "["+strings.Join(items, ", ")+"]", d.Name+" must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
			}
		}
	case "message-format-version":
		if !validMetadataVersion(out) {
			return invalid(d.Name, value, "Version `"+value+"` is not a valid version")
		}
	case "no-tiered-storage":
		if out == "true" {
			return &TopicConfigError{"Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage. (kbroker has no tiered storage: remote.storage.enable must be false)"}
		}
	}
	return nil
}

var throttledReplica = regexp.MustCompile(`^([0-9]+:[0-9]+)?$`)

// kafkaList splits a LIST value as Kafka's ConfigDef: nothing when empty,
// else the items around commas (with the spaces next to them), empty
// items kept.
func kafkaList(trimmed string) []string {
	if trimmed == "" {
		return nil
	}
	return listSep.Split(trimmed, -1)
}

var listSep = regexp.MustCompile(`\s*,\s*`)

// metadataVersions are the versions Kafka 3.9's MetadataVersion accepts
// (major.minor, or major.minor.patch before 1.0), for the deprecated
// message.format.version; "-IVn" forms of these are accepted too.
var metadataVersions = []string{
	"0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0",
	"1.0", "1.1", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8",
	"3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9",
}

// validMetadataVersion follows MetadataVersion.fromVersionString: the
// first three dot-separated parts before 1.0, two after, name a version
// (so "2.8.1" is "2.8"), or an exact "version-IVn".
func validMetadataVersion(v string) bool {
	if base, iv, ok := strings.Cut(v, "-IV"); ok {
		_, err := strconv.Atoi(iv)
		return err == nil && slices.Contains(metadataVersions, base)
	}
	parts := strings.Split(v, ".")
	n := 2
	if strings.HasPrefix(v, "0.") {
		n = 3
	}
	if len(parts) < n {
		return false
	}
	return slices.Contains(metadataVersions, strings.Join(parts[:n], "."))
}

// ValidateTopicConfig checks one topic config name and value.
func ValidateTopicConfig(name, value string) error {
	_, err := NormalizeTopicConfig(name, value)
	return err
}

// NormalizeTopicConfig checks one topic config name and value and returns
// the value in Kafka's canonical form.
func NormalizeTopicConfig(name, value string) (string, error) {
	d, ok := TopicConfigDefFor(name)
	if !ok {
		return "", &TopicConfigError{"Unknown topic config name: " + name}
	}
	return d.Normalize(value)
}

// NormalizeTopicOverrides checks a topic's overrides as Kafka's
// LogConfig.validate: each name and value (in name order, so the first
// error does not depend on map order), then the checks across configs on
// the values merged with the broker defaults. It returns the overrides in
// canonical form.
func (c Config) NormalizeTopicOverrides(overrides map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(overrides))
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		v, err := NormalizeTopicConfig(name, overrides[name])
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	eff := c.EffectiveTopicConfig(out)
	minLag, _ := strconv.ParseInt(eff["min.compaction.lag.ms"], 10, 64)
	maxLag, _ := strconv.ParseInt(eff["max.compaction.lag.ms"], 10, 64)
	if minLag > maxLag {
		return nil, &TopicConfigError{fmt.Sprintf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", minLag, maxLag)}
	}
	return out, nil
}

// EffectiveTopicConfig merges a topic's overrides over the broker defaults.
func (c Config) EffectiveTopicConfig(overrides map[string]string) map[string]string {
	out := make(map[string]string, len(topicConfigTable))
	for _, d := range topicConfigTable {
		out[d.Name] = d.Default(c)
	}
	for k, v := range overrides {
		out[k] = v
	}
	return out
}
