package txn

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Snapshots keep __transaction_state bounded, and a reload after them
// gives the states the coordinator had: every id's last state, expired ids
// still gone, an ongoing transaction still ongoing.
func TestSnapshotBoundsTheLogAndReloadsTheSameState(t *testing.T) {
	log := newMemLog()
	h := newHarnessWith(t, log, func(c *Config) { c.SnapshotBytes = 4 << 10 })
	h.leadAll()
	p := h.c.PartitionFor("a")
	// Ids that share partition p.
	var ids []string
	for i := 0; len(ids) < 4; i++ {
		if id := fmt.Sprintf("id-%d", i); h.c.PartitionFor(id) == p {
			ids = append(ids, id)
		}
	}
	h.mustInit(ids[3])
	h.clock.Advance(25 * time.Hour) // ids[3] idle past expiration
	written := 0
	for round := 0; round < 60; round++ {
		for _, id := range ids[:3] {
			pe := h.mustInit(id)
			wantErr(t, "add", h.add(id, pe, tpA, tpB), nil)
			wantErr(t, "end", h.end(id, pe, round%3 != 0), nil)
			h.settle()
			written += 4 // Empty, Ongoing, Prepare*, Complete*
		}
		if round == 30 {
			h.c.ExpireTransactionalIDs(context.Background())
		}
	}
	open := h.mustInit(ids[0])
	wantErr(t, "add", h.add(ids[0], open, tpA), nil)
	h.settle()
	log.mu.Lock()
	kept := len(log.batches[p])
	log.mu.Unlock()
	if kept >= written/2 {
		t.Fatalf("%d batches left of %d written: the log was not trimmed", kept, written)
	}
	// The previous producer id and epoch are kept in memory only (as in
	// Kafka 3.9), not in the record: a reload does not have them.
	stored := func(m Metadata) Metadata {
		m.LastProducerID, m.LastProducerEpoch = -1, -1
		return m
	}
	before := map[string]Metadata{}
	for _, id := range ids[:3] {
		before[id] = stored(h.state(id))
	}
	h.c.Close()

	h2 := newHarness(t, log)
	if err := h2.c.BecomeLeader(context.Background(), p, coordinatorEpoch); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:3] {
		if got := stored(h2.state(id)); fmt.Sprint(got) != fmt.Sprint(before[id]) {
			t.Fatalf("%s after reload: %+v, want %+v", id, got, before[id])
		}
	}
	if m := h2.state(ids[0]); m.State != Ongoing {
		t.Fatalf("ongoing transaction after reload: %+v", m)
	}
	_, err := h2.c.Describe(ids[3])
	wantErr(t, "expired id after reload", err, kerr.TransactionalIDNotFound)
}
