package zk

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/zktest"
)

func TestEventCodec(t *testing.T) {
	e := ClusterEvent{Seq: 99, Time: time.UnixMilli(1700000000123), Kind: "unclean_leader_elected", ControllerEpoch: 4, Broker: 3,
		Topic: "t", Partition: 2, Election: "unclean", OldLeader: 1, NewLeader: 3, LeaderEpoch: 7, OldISR: []int32{1}, NewISR: []int32{3},
		LeaderLogEnd: -1, Text: "x"}
	data := EncodeEvent(e)
	got, err := DecodeEvent(12, data)
	if err != nil {
		t.Fatal(err)
	}
	want := e
	want.Seq = 12 // the znode's name says it, not the content
	if got.Seq != want.Seq || !got.Time.Equal(want.Time) || got.Kind != want.Kind || got.ControllerEpoch != 4 || got.Broker != 3 ||
		got.Topic != "t" || got.Partition != 2 || got.Election != "unclean" || got.OldLeader != 1 || got.NewLeader != 3 ||
		got.LeaderEpoch != 7 || !slices.Equal(got.OldISR, []int32{1}) || !slices.Equal(got.NewISR, []int32{3}) || got.LeaderLogEnd != -1 || got.Text != "x" {
		t.Fatalf("round trip: %+v\nfrom %s", got, data)
	}
	for _, bad := range []string{``, `{`, `{"version":2,"kind":"x"}`, `{"version":1}`, `[]`} {
		if _, err := DecodeEvent(1, []byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want malformed", bad, err)
		}
	}
}

func TestEventNames(t *testing.T) {
	if got := EventPath(42); got != "/kbroker/events/event-0000000042" {
		t.Fatalf("path %s", got)
	}
	for name, want := range map[string]int64{"event-0000000042": 42, "event-0": 0} {
		if seq, ok := ParseEventName(name); !ok || seq != want {
			t.Errorf("%s: %d %v", name, seq, ok)
		}
	}
	for _, name := range []string{"event-", "event--1", "isr_change_0000000001", "event-x"} {
		if _, ok := ParseEventName(name); ok {
			t.Errorf("%s parsed", name)
		}
	}
	if got := sortedEventSeqs([]string{"event-0000000010", "other", "event-0000000002"}); !slices.Equal(got, []int64{2, 10}) {
		t.Errorf("sorted %v", got)
	}
}

// TestStoreEvents: appends get ZooKeeper's sequences, in order, fenced on
// the controller epoch; Events reads above a sequence and the newest
// limit, skipping a damaged znode; TrimEvents keeps the newest; the watch
// follows the newest sequence.
func TestStoreEvents(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, zk.Addr()+"/ev")
	watch, err := s.WatchEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newest := <-watch; newest != -1 {
		t.Fatalf("newest of none: %d", newest)
	}
	_, v := mustElect(t, ctx, s)
	var in []ClusterEvent
	for i := range 5 {
		in = append(in, ClusterEvent{Kind: "broker_joined", Broker: int32(i), Partition: -1, Time: time.UnixMilli(int64(i))})
	}
	out, err := s.AppendEvents(ctx, v, in)
	if err != nil || len(out) != 5 {
		t.Fatal(out, err)
	}
	for i := 1; i < len(out); i++ {
		if out[i].Seq != out[i-1].Seq+1 {
			t.Fatalf("sequences %d then %d", out[i-1].Seq, out[i].Seq)
		}
	}
	select {
	case newest := <-watch:
		if newest != out[4].Seq {
			t.Fatalf("watch says newest %d, want %d", newest, out[4].Seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	raw := rawConn(t, zk.Addr())
	if _, err := raw.Set("/ev"+EventPath(out[3].Seq), []byte("{damaged"), -1); err != nil {
		t.Fatal(err)
	}
	got, err := s.Events(ctx, out[0].Seq, 3)
	if err != nil || len(got) != 2 || got[0].Seq != out[2].Seq || got[0].Broker != 2 || got[1].Seq != out[4].Seq || !got[1].Time.Equal(time.UnixMilli(4)) {
		t.Fatalf("events above %d, newest 3 (one damaged): %+v %v", out[0].Seq, got, err)
	}
	if left, err := s.TrimEvents(ctx, v, 2); err != nil || left != 2 {
		t.Fatalf("trim: %d %v", left, err)
	}
	if got, _ := s.Events(ctx, -1, 0); len(got) != 1 || got[0].Seq != out[4].Seq { // the damaged one is kept but skipped
		t.Fatalf("after trim: %+v", got)
	}
	// Another controller: the old one's writes are fenced.
	if _, err := raw.Set("/ev"+ControllerEpochPath, []byte("9"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvents(ctx, v, in[:1]); !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("deposed append: %v", err)
	}
	if _, err := s.TrimEvents(ctx, v, 0); !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("deposed trim: %v", err)
	}
	// A broker's own observation is not a controller decision: it is
	// written whoever is controller, and read back with its fields.
	e, err := s.AppendBrokerEvent(ctx, ClusterEvent{Kind: "replica_truncated", Broker: 3, Topic: "t", Partition: 1,
		TruncatedFrom: 10, TruncatedTo: 20, CommittedLost: 4, Time: time.UnixMilli(99)})
	if err != nil || e.Seq <= out[4].Seq {
		t.Fatalf("broker event: %+v %v", e, err)
	}
	if got, err := s.Events(ctx, out[4].Seq, 0); err != nil || len(got) != 1 || got[0].Seq != e.Seq || got[0].TruncatedFrom != 10 ||
		got[0].TruncatedTo != 20 || got[0].CommittedLost != 4 || got[0].Topic != "t" {
		t.Fatalf("broker event read back: %+v %v", got, err)
	}
}
