package server

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kbroker/kbroker/replica"
	"github.com/kbroker/kbroker/segment"
)

// partitionConfig turns a topic's overrides and the broker defaults into the
// settings a partition acts on.
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
	msDur := func(name string) time.Duration {
		n := num(name)
		if n < 0 {
			return -1
		}
		return time.Duration(n) * time.Millisecond
	}
	// flush.ms defaults to Long.MAX_VALUE: never flush by time.
	flushEvery := msDur("flush.ms")
	if num("flush.ms") == 1<<63-1 {
		flushEvery = 0
	}
	pc := replica.PartitionConfig{
		Log: segment.Config{
			SegmentBytes:       num("segment.bytes"),
			RollAfter:          msDur("segment.ms"),
			RetentionTime:      msDur("retention.ms"),
			RetentionBytes:     num("retention.bytes"),
			IndexIntervalBytes: int32(num("index.interval.bytes")),
			MaxIndexBytes:      int32(num("segment.index.bytes")),
			FlushMessages:      num("flush.messages"),
			FlushInterval:      flushEvery,
		},
		MinInsyncReplicas: int32(num("min.insync.replicas")),
		LogAppendTime:     eff["message.timestamp.type"] == "LogAppendTime",
		MaxMessageBytes:   int32(num("max.message.bytes")),
	}
	pc.UncleanLeaderElect = eff["unclean.leader.election.enable"] == "true"
	return pc, firstErr
}
