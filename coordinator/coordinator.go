// Package coordinator is Kafka's group coordinator: consumer groups and
// committed offsets, stored as records in __consumer_offsets.
package coordinator

// STUB: the coordinator helper replaces this with the real implementation.

import (
	"context"
	"log/slog"
	"time"
)

// Config holds the group settings (Kafka property names in comments).
type Config struct {
	NumPartitions         int32         // offsets.topic.num.partitions
	OffsetsRetention      time.Duration // offsets.retention.minutes
	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms
	MinSessionTimeout     time.Duration // group.min.session.timeout.ms
	MaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	MaxRecordBytes        int32         // message.max.bytes: bound on one stored record batch
}

// OffsetsLog is how the coordinator stores and loads its records in
// __consumer_offsets. The server implements it on the replica layer.
type OffsetsLog interface {
	// Append writes one v2 record batch (built by the coordinator, base
	// offset 0) to partition p of __consumer_offsets and returns once it is
	// committed (acks=all).
	Append(ctx context.Context, partition int32, batch []byte) error
	// ReadAll calls fn with every committed batch of partition p, in order.
	ReadAll(ctx context.Context, partition int32, fn func(batch []byte) error) error
}

// Coordinator owns all groups whose __consumer_offsets partition this broker leads.
type Coordinator struct {
	cfg    Config
	log    OffsetsLog
	logger *slog.Logger
}

// New returns a coordinator that owns no partition yet.
func New(cfg Config, log OffsetsLog, logger *slog.Logger) *Coordinator {
	return &Coordinator{cfg: cfg, log: log, logger: logger}
}

// PartitionFor is the __consumer_offsets partition of group, by Kafka's hash.
func (c *Coordinator) PartitionFor(group string) int32 { return 0 }

// BecomeLeader loads partition p's groups and offsets; until it returns,
// requests for those groups get COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) BecomeLeader(ctx context.Context, partition int32) error { return nil }

// Resign drops partition p's groups; requests for them get NOT_COORDINATOR.
func (c *Coordinator) Resign(partition int32) {}

// Close stops timers and waiting requests.
func (c *Coordinator) Close() {}
