package replica

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

func testConfig() PartitionConfig {
	return PartitionConfig{
		Log:               segment.Config{SegmentBytes: 1 << 20, RetentionTime: -1, RetentionBytes: -1, IndexIntervalBytes: 4096, MaxIndexBytes: 1 << 16},
		MinInsyncReplicas: 1,
		MaxMessageBytes:   1 << 20,
	}
}

func openLeader(t *testing.T, dir string) (*Manager, *Partition) {
	t.Helper()
	m, err := Open(Config{LogDir: dir}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.MakeLeader(TopicPartition{"t", 0}, [16]byte{1}, 0, 0, []int32{0}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return m, p
}

func idempotentBatch(pid int64, seq int32, n int) ([][]byte, []recordbatch.Header) {
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i].Value = []byte("v")
	}
	b := recordbatch.Build(recordbatch.BatchSpec{ProducerID: pid, BaseSequence: seq, LeaderEpoch: -1}, recs)
	h, _ := recordbatch.Validate(b)
	return [][]byte{b}, []recordbatch.Header{h}
}

func TestAppendReadAndDeduplicate(t *testing.T) {
	dir := t.TempDir()
	m, p := openLeader(t, dir)
	now := time.Now()
	for i := 0; i < 3; i++ {
		b, h := idempotentBatch(5, int32(i*2), 2)
		res, err := p.AppendAsLeader(b, h, -1, now)
		if err != nil || res.BaseOffset != int64(i*2) {
			t.Fatalf("append %d: %+v %v", i, res, err)
		}
	}
	if st := p.State(); st.HighWatermark != 6 || st.LogEndOffset != 6 {
		t.Fatalf("single-replica ISR: HW must follow the log end: %+v", st)
	}
	// A retry of the second batch is answered with its first offset and
	// not written again.
	b, h := idempotentBatch(5, 2, 2)
	res, err := p.AppendAsLeader(b, h, -1, now)
	if err != nil || res.BaseOffset != 2 || p.State().LogEndOffset != 6 {
		t.Fatalf("duplicate: %+v %v, LEO %d", res, err, p.State().LogEndOffset)
	}
	// A gap is refused.
	b, h = idempotentBatch(5, 9, 1)
	if _, err := p.AppendAsLeader(b, h, -1, now); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("gap: %v", err)
	}
	rr, err := p.Read(0, 1<<20, true, -1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Records.Close()
	recs, err := rr.Records.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, hs, err := recordbatch.Split(recs)
	if err != nil || len(hs) != 3 || hs[2].BaseOffset != 4 {
		t.Fatalf("read back %d batches: %v", len(hs), err)
	}

	// Producer state survives a restart: it is rebuilt from the log.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, p = openLeader(t, dir)
	defer m.Close()
	b, h = idempotentBatch(5, 4, 2)
	res, err = p.AppendAsLeader(b, h, -1, now)
	if err != nil || res.BaseOffset != 4 || p.State().LogEndOffset != 6 {
		t.Fatalf("duplicate after restart: %+v %v", res, err)
	}
}

func TestMinInsyncReplicas(t *testing.T) {
	m, p := openLeader(t, t.TempDir())
	defer m.Close()
	cfg := testConfig()
	cfg.MinInsyncReplicas = 2
	p.SetConfig(cfg)
	b, h := idempotentBatch(-1, -1, 1)
	if _, err := p.AppendAsLeader(b, h, -1, time.Now()); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with ISR below min.insync.replicas: %v", err)
	}
	if p.State().LogEndOffset != 0 {
		t.Fatal("nothing may be appended when the ISR is too small")
	}
	if _, err := p.AppendAsLeader(b, h, 1, time.Now()); err != nil {
		t.Fatalf("acks=1 ignores min.insync.replicas: %v", err)
	}
}

func TestLeaderEpochFencing(t *testing.T) {
	m, p := openLeader(t, t.TempDir())
	defer m.Close()
	if _, err := m.MakeLeader(TopicPartition{"t", 0}, [16]byte{1}, 3, 0, []int32{0}, testConfig()); err != nil {
		t.Fatal(err)
	}
	for epoch, want := range map[int32]error{-1: nil, 3: nil, 2: kerr.FencedLeaderEpoch, 4: kerr.UnknownLeaderEpoch} {
		if err := p.CheckLeaderEpoch(epoch); !errors.Is(err, want) {
			t.Errorf("client epoch %d: %v, want %v", epoch, err, want)
		}
	}
}

func TestWaitForHighWatermarkEndsOnLeadershipLoss(t *testing.T) {
	m, p := openLeader(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- p.WaitForHighWatermark(ctx, AppendResult{LastOffset: 10, LeaderEpoch: p.State().LeaderEpoch})
	}()
	if err := m.Remove(TopicPartition{"t", 0}, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, kerr.NotLeaderForPartition) {
			t.Fatalf("wait ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("waiter not woken by leadership loss")
	}
	m.Close()
}

// A log left by a deleted topic of the same name (another topic id) is not
// taken for the new topic's.
func TestStaleLogOfRecreatedTopicRemoved(t *testing.T) {
	dir := t.TempDir()
	m, p := openLeader(t, dir) // topic id {1}
	b, h := idempotentBatch(-1, -1, 3)
	if _, err := p.AppendAsLeader(b, h, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := Open(Config{LogDir: dir}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err = m.MakeLeader(TopicPartition{"t", 0}, [16]byte{2}, 0, 0, []int32{0}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if leo := p.State().LogEndOffset; leo != 0 {
		t.Fatalf("recreated topic sees the old log: LEO %d", leo)
	}
	if _, err := p.AppendAsLeader(b, h, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// The high watermark survives a restart (replication-offset-checkpoint):
// a leader whose followers have not reported yet still serves what was
// committed before.
func TestHighWatermarkCheckpoint(t *testing.T) {
	dir := t.TempDir()
	m, p := openLeader(t, dir)
	b, h := idempotentBatch(-1, -1, 3)
	if _, err := p.AppendAsLeader(b, h, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := Open(Config{LogDir: dir}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err = m.MakeLeader(TopicPartition{"t", 0}, [16]byte{1}, 1, 0, []int32{0, 1}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if hw := p.State().HighWatermark; hw != 3 {
		t.Fatalf("high watermark after restart %d, want 3 from the checkpoint", hw)
	}
}

// A write confirmed only after leadership changed hands (and came back
// here under a new epoch) is not reported as replicated: in between the
// log may have been truncated below it.
func TestWaitForHighWatermarkRequiresTheAppendEpoch(t *testing.T) {
	m, p := openLeader(t, t.TempDir())
	defer m.Close()
	b, h := idempotentBatch(7, 0, 1)
	res, err := p.AppendAsLeader(b, h, -1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.WaitForHighWatermark(ctx, res); err != nil {
		t.Fatalf("same epoch: %v", err)
	}
	if _, err := m.MakeLeader(TopicPartition{"t", 0}, [16]byte{1}, res.LeaderEpoch+1, 1, []int32{0}, testConfig()); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForHighWatermark(ctx, res); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append from epoch %d waited on under epoch %d: %v, want NOT_LEADER_OR_FOLLOWER", res.LeaderEpoch, res.LeaderEpoch+1, err)
	}
	b, h = idempotentBatch(7, 1, 1)
	res2, err := p.AppendAsLeader(b, h, -1, time.Now())
	if err != nil || res2.LeaderEpoch != res.LeaderEpoch+1 {
		t.Fatalf("append under the new epoch: %+v %v", res2, err)
	}
	if err := p.WaitForHighWatermark(ctx, res2); err != nil {
		t.Fatalf("new epoch: %v", err)
	}
}
