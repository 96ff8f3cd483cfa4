package replica

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func testManager(t *testing.T, dir string, onStorageError func(error)) *Manager {
	t.Helper()
	m, err := Open(Config{LogDir: dir, OnStorageError: onStorageError}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A partition opened under one topic id and then named by a view under
// another (the topic deleted and re-created while this broker missed the
// deletion) starts empty: not one record of the old incarnation stays, and
// partition.metadata names the new id.
func TestNewIncarnationReplacesOpenPartition(t *testing.T) {
	dir := t.TempDir()
	var storageErrors []error
	m := testManager(t, dir, func(err error) { storageErrors = append(storageErrors, err) })
	tp := TopicPartition{"t", 0}
	oldID, newID := [16]byte{1}, [16]byte{2}
	old, err := m.MakeLeader(tp, oldID, 3, 0, []int32{0}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, h := idempotentBatch(7, 0, 5)
	if _, err := old.AppendAsLeader(b, h, -1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := m.writeHWCheckpoint(); err != nil {
		t.Fatal(err)
	}
	// The new incarnation starts over at leader epoch 0, below the old
	// one's: it must still be taken.
	p, err := m.MakeFollower(tp, newID, 1, 0, "127.0.0.1:1", testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if p == old {
		t.Fatal("the old incarnation's partition was reused")
	}
	if st := p.State(); st.LogEndOffset != 0 || st.LogStartOffset != 0 || st.HighWatermark != 0 {
		t.Fatalf("new incarnation state %+v, want an empty log", st)
	}
	// The old incarnation's high watermark is gone from the checkpoint at
	// once: after a crash the new one must not start from it.
	if hw, err := readHWCheckpoint(dir); err != nil || hw[tp] != 0 {
		t.Fatalf("checkpoint after the replacement: %v %v, want no high watermark 5 for %v", hw, err, tp)
	}
	if id, ok, err := readPartitionTopicID(m.PartitionDir(tp)); err != nil || !ok || id != newID {
		t.Fatalf("partition.metadata = %x %v %v, want %x", id, ok, err, newID)
	}
	// The old incarnation, still referenced by a request in flight,
	// answers a retriable error and stops nothing.
	b, h = idempotentBatch(7, 5, 1)
	if _, err := old.AppendAsLeader(b, h, -1, time.Now()); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append to the old incarnation: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if _, err := old.appendAsFollower(leaderRef{1, 3}, b[0], 10, 0); err != nil {
		t.Fatalf("a fetch answer for the old incarnation must be dropped: %v", err)
	}
	if _, err := old.Read(0, 1<<20, true, -1, false); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("read of the old incarnation: %v", err)
	}
	if len(storageErrors) != 0 {
		t.Fatalf("a replaced partition was reported as a storage failure: %v", storageErrors)
	}
	if rs := m.Replicas(); len(rs) != 1 || rs[0].TopicID != newID || !rs[0].Open {
		t.Fatalf("Replicas() = %+v", rs)
	}
}

// A log closed under a running append (the partition deleted meanwhile) is
// an ordinary event: NOT_LEADER_OR_FOLLOWER, not a storage failure that
// stops the broker.
func TestAppendToClosedLogIsNotAStorageFailure(t *testing.T) {
	var storageErrors []error
	m := testManager(t, t.TempDir(), func(err error) { storageErrors = append(storageErrors, err) })
	p, err := m.MakeLeader(TopicPartition{"t", 0}, [16]byte{1}, 0, 0, []int32{0}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.log().Close(); err != nil { // as a deletion racing the append would
		t.Fatal(err)
	}
	b, h := idempotentBatch(7, 0, 1)
	if _, err := p.AppendAsLeader(b, h, -1, time.Now()); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if len(storageErrors) != 0 {
		t.Fatalf("reported as a storage failure: %v", storageErrors)
	}
}

// Logs left in the log dir from an earlier run are listed with their topic
// ids before any view opens them, and can be deleted without being opened.
func TestStoredReplicas(t *testing.T) {
	dir := t.TempDir()
	m := testManager(t, dir, nil)
	a, b := TopicPartition{"a-b", 3}, TopicPartition{"c", 0}
	for i, tp := range []TopicPartition{a, b} {
		if _, err := m.MakeLeader(tp, [16]byte{byte(i + 1)}, 0, 0, []int32{0}, testConfig()); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, junk := range []string{"x-delete", "y-01", "z-1.tmp", "-1"} {
		if err := os.Mkdir(filepath.Join(dir, junk), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m = testManager(t, dir, nil)
	rs := m.Replicas()
	slices.SortFunc(rs, func(x, y Replica) int { return int(x.TopicID[0]) - int(y.TopicID[0]) })
	want := []Replica{{TopicPartition: a, TopicID: [16]byte{1}}, {TopicPartition: b, TopicID: [16]byte{2}}}
	if !slices.Equal(rs, want) {
		t.Fatalf("Replicas() = %+v, want %+v", rs, want)
	}
	if err := m.Remove(a, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.PartitionDir(a)); !os.IsNotExist(err) {
		t.Fatalf("stored log of a deleted topic still there: %v", err)
	}
	// Opening a stored log of another incarnation starts it empty.
	p, err := m.MakeLeader(b, [16]byte{9}, 0, 0, []int32{0}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if rs := m.Replicas(); len(rs) != 1 || rs[0].TopicID != [16]byte{9} || !rs[0].Open || p.State().LogEndOffset != 0 {
		t.Fatalf("Replicas() = %+v, LEO %d", rs, p.State().LogEndOffset)
	}
}

func TestParsePartitionDir(t *testing.T) {
	for name, want := range map[string]*TopicPartition{
		"t-0":                   {"t", 0},
		"my-topic-12":           {"my-topic", 12},
		"__consumer_offsets-49": {"__consumer_offsets", 49},
		"t-01":                  nil,
		"t-":                    nil,
		"-1":                    nil,
		"t-0.delete":            nil,
		"t-x":                   nil,
		"t/x-1":                 nil,
		"t-99999999999":         nil,
	} {
		got, ok := parsePartitionDir(name)
		if (want == nil) != !ok || (ok && got != *want) {
			t.Errorf("parsePartitionDir(%q) = %v %v, want %v", name, got, ok, want)
		}
	}
}
