package server

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/replica"
	"github.com/kbroker/kbroker/segment"
)

// partitionConfig turns a topic's overrides and the broker defaults into the
// settings a partition acts on.
//
// Millisecond configs too large for a Duration (Long.MAX_VALUE is common)
// mean "never": keep forever, never roll or flush by time. Time and size
// retention apply only when cleanup.policy holds "delete"; a compacted log
// loses segments only below its log start offset.
func (b *Broker) partitionConfig(overrides map[string]string) (replica.PartitionConfig, error) {
	eff := b.cfg.EffectiveTopicConfig(overrides)
	var firstErr error
	num := func(name string) int64 {
		n, err := strconv.ParseInt(eff[name], 10, 64)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("config %s=%q: %w", name, eff[name], err)
		}
		return n
	}
	// msDur reads a millisecond config; never is the setting's value for
	// "not by time".
	msDur := func(name string, never time.Duration) time.Duration {
		if d, ok := config.MillisDuration(num(name)); ok {
			return d
		}
		return never
	}
	retentionTime, retentionBytes := msDur("retention.ms", -1), num("retention.bytes")
	if !config.CleanupPolicyDeletes(eff["cleanup.policy"]) {
		retentionTime, retentionBytes = -1, -1
	}
	pc := replica.PartitionConfig{
		Log: segment.Config{
			SegmentBytes:       num("segment.bytes"),
			RollAfter:          msDur("segment.ms", 0),
			RetentionTime:      retentionTime,
			RetentionBytes:     retentionBytes,
			IndexIntervalBytes: int32(num("index.interval.bytes")),
			MaxIndexBytes:      int32(num("segment.index.bytes")),
			FlushMessages:      num("flush.messages"),
			FlushInterval:      msDur("flush.ms", 0),
		},
		MinInsyncReplicas: int32(num("min.insync.replicas")),
		LogAppendTime:     eff["message.timestamp.type"] == "LogAppendTime",
		MaxMessageBytes:   int32(num("max.message.bytes")),
		AcksFsync:         eff["kbroker.acks.fsync"] == "true",
	}
	// KIP-937: before/after.max.ms, each falling back to the deprecated
	// difference.max.ms while left at its default (Long.MAX_VALUE).
	difference := msDur("message.timestamp.difference.max.ms", -1)
	pc.TimestampBeforeMax, pc.TimestampAfterMax = difference, difference
	if d := msDur("message.timestamp.before.max.ms", -1); d >= 0 {
		pc.TimestampBeforeMax = d
	}
	if d := msDur("message.timestamp.after.max.ms", -1); d >= 0 {
		pc.TimestampAfterMax = d
	}
	pc.UncleanLeaderElect = eff["unclean.leader.election.enable"] == "true"
	pc.Compacted = config.CleanupPolicyCompacts(eff["cleanup.policy"])
	if pc.Compacted {
		ratio, err := strconv.ParseFloat(eff["min.cleanable.dirty.ratio"], 64)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("config min.cleanable.dirty.ratio=%q: %w", eff["min.cleanable.dirty.ratio"], err)
		}
		pc.MinCleanableRatio = ratio
		pc.DeleteRetention = msDur("delete.retention.ms", time.Duration(math.MaxInt64))
		pc.MinCompactionLag = msDur("min.compaction.lag.ms", 0)
		pc.MaxCompactionLag = msDur("max.compaction.lag.ms", 0) // too large for a Duration: no lag bound
	}
	return pc, firstErr
}
