package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// previousReleaseState is a kbroker-cluster.json as the embedded controller
// of the previous release wrote it (before the controller core was shared):
// broker 0, topic "orders" with two partitions and an override, producer ids
// handed out up to 2000.
const previousReleaseState = `{
  "metadata": {
    "cluster_id": "q1Sh-9_ISia_zwGINzRvyQ",
    "controller_id": 0,
    "brokers": [{"id": 0, "host": "127.0.0.1", "port": 9092}],
    "topics": {
      "orders": {
        "name": "orders",
        "id": [1,2,3,4,5,6,71,8,137,10,11,12,13,14,15,16],
        "partitions": [
          {"replicas": [0], "leader": 0, "leader_epoch": 0, "isr": [0]},
          {"replicas": [0], "leader": 0, "leader_epoch": 2, "isr": [0]}
        ],
        "configs": {"retention.ms": "1000"}
      }
    },
    "deleted_topic_ids": [[9,9,9,9,9,9,73,9,137,9,9,9,9,9,9,9]]
  },
  "next_producer_id_block": 2000
}`

func writeState(t *testing.T, dir, state string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, localStateFile), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A data directory written by the previous release starts: the same
// cluster id, topics, ids, assignments, leader epochs and configs, and
// producer ids continue above what was handed out.
func TestEmbeddedReadsPreviousReleaseState(t *testing.T) {
	dir := t.TempDir()
	writeState(t, dir, previousReleaseState)
	c, err := NewEmbedded(dir, ClusterConfig{Self: BrokerInfo{ID: 0, Host: "127.0.0.1", Port: 9092}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	md := c.Metadata()
	if md.ClusterID != "q1Sh-9_ISia_zwGINzRvyQ" || md.ControllerID != 0 || !c.IsController() {
		t.Fatalf("cluster id %q, controller %d (is controller %v)", md.ClusterID, md.ControllerID, c.IsController())
	}
	o := md.Topics["orders"]
	if o == nil || o.ID != [16]byte{1, 2, 3, 4, 5, 6, 71, 8, 137, 10, 11, 12, 13, 14, 15, 16} || len(o.Partitions) != 2 || o.Configs["retention.ms"] != "1000" {
		t.Fatalf("orders = %+v", o)
	}
	if p := o.Partitions[1]; p.Leader != 0 || p.LeaderEpoch != 2 || !slices.Equal(p.ISR, []int32{0}) {
		t.Fatalf("orders-1 = %+v, want leader 0 at epoch 2", p)
	}
	// The deleted topic id it kept is a pending deletion: named by the
	// view (so the broker removes any log of it), then confirmed (no
	// replica here) and forgotten by the store.
	if !md.IsDeleted([16]byte{9, 9, 9, 9, 9, 9, 73, 9, 137, 9, 9, 9, 9, 9, 9, 9}) {
		t.Fatalf("deleted topic ids %x: the old release's deleted id is not pending", md.DeletedTopicIDs)
	}
	if pending, err := c.store.DeletedTopics(context.Background()); err != nil || len(pending) != 0 {
		t.Fatalf("pending deletions after confirmation: %+v, %v", pending, err)
	}
	id, err := c.AllocateProducerID()
	if err != nil || id < 2000 {
		t.Fatalf("producer id %d (%v): must not reuse ids below 2000", id, err)
	}
	// The new controller writes on: a topic is created and survives a
	// restart; the old one is deleted.
	if _, err := c.CreateTopic(CreateTopicRequest{Name: "new", NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = NewEmbedded(dir, ClusterConfig{Self: BrokerInfo{ID: 0, Host: "127.0.0.1", Port: 9092}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	md = c.Metadata()
	if md.Topics["new"] == nil || md.Topics["orders"] != nil {
		t.Fatalf("after restart: topics %v", md.Topics)
	}
	if id2, err := c.AllocateProducerID(); err != nil || id2 <= id {
		t.Fatalf("producer id after restart %d (%v), before %d", id2, err, id)
	}
}

// A changed broker.id takes over the single node's replicas (new leader
// epoch), as before.
func TestEmbeddedBrokerIDChange(t *testing.T) {
	dir := t.TempDir()
	writeState(t, dir, previousReleaseState)
	c, err := NewEmbedded(dir, ClusterConfig{Self: BrokerInfo{ID: 7, Host: "127.0.0.1", Port: 9092}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, p := range c.Metadata().Topics["orders"].Partitions {
		if p.Leader != 7 || !slices.Equal(p.Replicas, []int32{7}) || !slices.Equal(p.ISR, []int32{7}) {
			t.Fatalf("orders-%d = %+v, want broker 7", i, p)
		}
	}
	if p := c.Metadata().Topics["orders"].Partitions[1]; p.LeaderEpoch != 3 {
		t.Fatalf("leader epoch %d, want 3", p.LeaderEpoch)
	}
}

// The embedded node takes no view from another controller and has nowhere
// to move leadership in a controlled shutdown.
func TestEmbeddedInterBroker(t *testing.T) {
	c, err := NewEmbedded(t.TempDir(), ClusterConfig{Self: BrokerInfo{ID: 1}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.ApplyUpdate(5, &Metadata{}); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("ApplyUpdate: %v, want INVALID_REQUEST", err)
	}
	if _, err := c.CreateTopic(CreateTopicRequest{Name: "t", NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	if n, err := c.ControlledShutdown(1); err != nil || n != 3 {
		t.Fatalf("ControlledShutdown = %d, %v; want 3 partitions still led", n, err)
	}
	if _, err := c.CreateTopic(CreateTopicRequest{Name: "u", NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("a controlled shutdown request must not make the only broker ineligible: %v", err)
	}
	if _, err := c.CreateTopic(CreateTopicRequest{Name: "v", NumPartitions: 1, ReplicationFactor: 2}, false); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("RF 2 on one broker: %v", err)
	}
}
