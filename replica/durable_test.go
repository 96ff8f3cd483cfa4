package replica

import (
	"context"
	"testing"
	"time"
)

// With durable acknowledgements the high watermark never passes what the
// leader has fdatasynced, and acks=all and acks=1 are confirmed only once
// the records are durable; without them nothing waits for a sync.
func TestDurableAcks(t *testing.T) {
	for _, on := range []bool{true, false} {
		m, p := openLeader(t, t.TempDir())
		cfg := testConfig()
		cfg.AcksFsync = on
		p.SetConfig(cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)

		var last int64
		for i := range 20 {
			b, h := idempotentBatch(-1, -1, 3)
			acks := int16(-1)
			if i%2 == 1 {
				acks = 1
			}
			res, err := p.AppendAsLeader(b, h, acks, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if hw := p.State().HighWatermark; on && hw > p.Log().DurableEnd() {
				t.Fatalf("high watermark %d passed the durable end %d", hw, p.Log().DurableEnd())
			}
			wait := p.WaitForHighWatermark
			if acks == 1 {
				wait = p.WaitDurable
			}
			if err := wait(ctx, res); err != nil {
				t.Fatalf("on=%v acks=%d: %v", on, acks, err)
			}
			if d := p.Log().DurableEnd(); on && d <= res.LastOffset {
				t.Fatalf("acks=%d confirmed offset %d with the durable end at %d", acks, res.LastOffset, d)
			}
			last = res.LastOffset
		}
		if !on {
			if d := p.Log().DurableEnd(); d != 0 {
				t.Fatalf("durable acknowledgements off: something synced (durable end %d)", d)
			}
			if hw := p.State().HighWatermark; hw != last+1 {
				t.Fatalf("off: high watermark %d, want the log end %d", hw, last+1)
			}
		}
		if on && p.Log().SyncRounds() == 0 {
			t.Fatal("no sync round ran")
		}
		cancel()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// acks=0 writes are never waited on, yet with durable acknowledgements
// their records become visible to consumers (the high watermark moves)
// once the background sync has run.
func TestDurableAcksBackgroundSync(t *testing.T) {
	m, p := openLeader(t, t.TempDir())
	defer m.Close()
	cfg := testConfig()
	cfg.AcksFsync = true
	p.SetConfig(cfg)
	b, h := idempotentBatch(-1, -1, 5)
	if _, err := p.AppendAsLeader(b, h, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		ch := p.Changed()
		if p.State().HighWatermark == 5 {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("high watermark stuck at %d", p.State().HighWatermark)
		}
	}
	if d := p.Log().DurableEnd(); d != 5 {
		t.Fatalf("durable end %d, want 5", d)
	}
}
