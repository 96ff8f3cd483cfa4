package server

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A view's partitions serve as their logs open, not once all did: with
// one partition's open held (as a long crash recovery holds it), the
// others lead and answer while the view is still being applied, and the
// held one answers NOT_LEADER_OR_FOLLOWER (retriable) until its log is
// open.
func TestApplyServesEachPartitionOnceOpen(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 4, nil)
	dir := b.cfg.LogDirs[0]
	if err := b.replicas.Close(); err != nil {
		t.Fatal(err)
	}
	held := replica.TopicPartition{Topic: "t", Partition: 3}
	release := make(chan struct{})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	b.replicas, err = replica.Open(replica.Config{LogDir: dir, RetentionCheck: time.Hour, BrokerID: b.cfg.BrokerID,
		OpenHook: func(tp replica.TopicPartition) {
			if tp == held {
				<-release
			}
		}}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.replicas.Close() })

	applied := make(chan error, 1)
	go func() { applied <- b.applyMetadataErr(b.controller.Metadata()) }()
	deadline := time.Now().Add(10 * time.Second)
	for p := range int32(3) {
		for {
			if _, err := b.localPartition("t", p); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("t-%d does not serve while t-3's open is held: %v", p, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, err := b.localPartition("t", 3); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("t-3, its open held: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	select {
	case err := <-applied:
		t.Fatalf("the view was applied (%v) while t-3's open is held", err)
	default:
	}
	close(release)
	select {
	case err := <-applied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the view is not applied 10 s after t-3's open was released")
	}
	if _, err := b.localPartition("t", 3); err != nil {
		t.Fatalf("t-3 after its open: %v", err)
	}
}
