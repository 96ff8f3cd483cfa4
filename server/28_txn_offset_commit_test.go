package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTxnOffsetCommitCodeByVersion(t *testing.T) {
	for _, tc := range []struct {
		code, version, want int16
	}{
		{kerr.CoordinatorLoadInProgress.Code, 1, kerr.CoordinatorNotAvailable.Code},
		{kerr.CoordinatorLoadInProgress.Code, 2, kerr.CoordinatorLoadInProgress.Code},
		{kerr.ProducerFenced.Code, 2, kerr.InvalidProducerEpoch.Code},
		{kerr.ProducerFenced.Code, 3, kerr.ProducerFenced.Code},
		{kerr.IllegalGeneration.Code, 0, kerr.IllegalGeneration.Code},
		{0, 4, 0},
	} {
		if got := txnOffsetCommitCode(tc.code, tc.version); got != tc.want {
			t.Errorf("code %d v%d: %d, want %d", tc.code, tc.version, got, tc.want)
		}
	}
}

// TestTxnOffsetCommitHandler: unknown topics and partitions are answered
// here, the rest is pending until the commit marker lands on
// __consumer_offsets through WriteTxnMarkers.
func TestTxnOffsetCommitHandler(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, offsetsTopic, 1, nil)
	mustCreateTopic(t, b, "in", 2, nil)
	ctx := context.Background()

	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group = "tx", "etl"
	req.ProducerID, req.ProducerEpoch = 42, 0
	req.Generation = -1
	for _, topic := range []string{"in", "missing"} {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for _, p := range []int32{0, 1, 2} {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, int64(100+p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	var resp *kmsg.TxnOffsetCommitResponse
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := handleTxnOffsetCommit(ctx, b, nil, req)
		if err != nil {
			t.Fatal(err)
		}
		resp = r.(*kmsg.TxnOffsetCommitResponse)
		code := resp.Topics[0].Partitions[0].ErrorCode
		if code != kerr.NotCoordinator.Code && code != kerr.CoordinatorLoadInProgress.Code || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := fmt.Sprint(resp.Topics)
	want := [][]int16{
		{0, 0, kerr.UnknownTopicOrPartition.Code},
		{kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code},
	}
	for i, rt := range resp.Topics {
		for j, rp := range rt.Partitions {
			if rp.ErrorCode != want[i][j] || rp.Partition != req.Topics[i].Partitions[j].Partition {
				t.Fatalf("answer %s, want codes %v", got, want)
			}
		}
	}

	fetch := func() (int64, int16) {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = 7
		r.Group = "etl"
		r.RequireStable = true
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "in", Partitions: []int32{1}}}
		fr, err := handleOffsetFetch(ctx, b, nil, r)
		if err != nil {
			t.Fatal(err)
		}
		p := fr.(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	if o, code := fetch(); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("before the marker: offset %d code %d, want UNSTABLE_OFFSET_COMMIT", o, code)
	}

	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 42, 0, true
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: offsetsTopic, Partitions: []int32{0}}}
	wm.Markers = append(wm.Markers, m)
	mr, err := handleWriteTxnMarkers(ctx, b, nil, wm)
	if err != nil {
		t.Fatal(err)
	}
	if code := mr.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("marker: code %d", code)
	}
	if o, code := fetch(); code != 0 || o != 101 {
		t.Fatalf("after the commit marker: offset %d code %d, want 101", o, code)
	}
}
