package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// TopicConfigDef describes one per-topic config: its Kafka name, the broker
// property that supplies its default, and how to check a value.
type TopicConfigDef struct {
	Name         string
	BrokerSource string // broker property the default comes from ("" = fixed default)
	Validate     func(string) error
	Default      func(Config) string
}

func validInt(minimum int64) func(string) error {
	return func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", s)
		}
		if n < minimum {
			return fmt.Errorf("%d is below the minimum %d", n, minimum)
		}
		return nil
	}
}

func validBool(s string) error {
	if _, err := strconv.ParseBool(s); err != nil {
		return fmt.Errorf("not a boolean: %q", s)
	}
	return nil
}

func validOneOf(values ...string) func(string) error {
	return func(s string) error {
		for _, v := range values {
			if s == v {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %v", s, values)
	}
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

// TopicConfigs lists the per-topic configs kbroker knows, in Kafka's names.
// A value set on a topic overrides the broker default.
func TopicConfigs() []TopicConfigDef {
	return []TopicConfigDef{
		{"cleanup.policy", "log.cleanup.policy", validCleanupPolicy, func(c Config) string { return c.LogCleanupPolicy }},
		{"compression.type", "compression.type", validOneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"), func(Config) string { return "producer" }},
		{"retention.ms", "log.retention.ms", validInt(-1), func(c Config) string { return ms(c.LogRetentionMs) }},
		{"retention.bytes", "log.retention.bytes", validInt(-1), func(c Config) string { return itoa(c.LogRetentionBytes) }},
		{"segment.bytes", "log.segment.bytes", validInt(14), func(c Config) string { return itoa(c.LogSegmentBytes) }},
		{"segment.ms", "log.roll.ms", validInt(1), func(c Config) string { return ms(c.LogRollMs) }},
		{"segment.index.bytes", "log.index.size.max.bytes", validInt(4), func(c Config) string { return itoa(c.LogIndexSizeMaxBytes) }},
		{"index.interval.bytes", "log.index.interval.bytes", validInt(0), func(c Config) string { return itoa(c.LogIndexIntervalBytes) }},
		{"flush.messages", "log.flush.interval.messages", validInt(1), func(c Config) string { return itoa(c.LogFlushIntervalMsgs) }},
		{"flush.ms", "log.flush.interval.ms", validInt(0), func(c Config) string {
			if c.LogFlushIntervalMs <= 0 {
				return "9223372036854775807"
			}
			return ms(c.LogFlushIntervalMs)
		}},
		{"max.message.bytes", "message.max.bytes", validInt(0), func(c Config) string { return itoa(c.MessageMaxBytes) }},
		{"min.insync.replicas", "min.insync.replicas", validInt(1), func(c Config) string { return itoa(c.MinInsyncReplicas) }},
		{"unclean.leader.election.enable", "unclean.leader.election.enable", validBool, func(c Config) string { return strconv.FormatBool(c.UncleanLeaderElectionEnable) }},
		{"message.timestamp.type", "log.message.timestamp.type", validOneOf("CreateTime", "LogAppendTime"), func(c Config) string {
			if c.LogMessageTimestamp == "" {
				return "CreateTime"
			}
			return c.LogMessageTimestamp
		}},
	}
}

// TopicConfigDefFor returns the definition of a topic config name.
func TopicConfigDefFor(name string) (TopicConfigDef, bool) {
	for _, d := range TopicConfigs() {
		if d.Name == name {
			return d, true
		}
	}
	return TopicConfigDef{}, false
}

// ValidateTopicConfig checks one topic config name and value.
func ValidateTopicConfig(name, value string) error {
	d, ok := TopicConfigDefFor(name)
	if !ok {
		return fmt.Errorf("unknown topic config %q", name)
	}
	if err := d.Validate(value); err != nil {
		return fmt.Errorf("topic config %s: %w", name, err)
	}
	return nil
}

// EffectiveTopicConfig merges a topic's overrides over the broker defaults.
func (c Config) EffectiveTopicConfig(overrides map[string]string) map[string]string {
	out := make(map[string]string)
	for _, d := range TopicConfigs() {
		out[d.Name] = d.Default(c)
	}
	for k, v := range overrides {
		out[k] = v
	}
	return out
}
