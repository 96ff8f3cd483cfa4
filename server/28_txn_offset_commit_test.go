package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/txn"
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
	b := newAdminTestBroker(t, func(c *config.Config) { c.TransactionStateLogNumPartitions = 1 })
	mustCreateTopic(t, b, offsetsTopic, 1, nil)
	mustCreateTopic(t, b, txn.TopicName, 1, nil)
	mustCreateTopic(t, b, "in", 2, nil)
	ctx := context.Background()

	// A transactional producer (the coordinators load in the background).
	txnID := "tx"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &txnID, 60000
	var pid int64
	var epoch int16
	retryWhileLoading(t, func() int16 {
		r, err := handleInitProducerID(ctx, b, &requestContext{version: init.Version}, init)
		if err != nil {
			t.Fatal(err)
		}
		ir := r.(*kmsg.InitProducerIDResponse)
		pid, epoch = ir.ProducerID, ir.ProducerEpoch
		return ir.ErrorCode
	})

	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group = txnID, "etl"
	req.ProducerID, req.ProducerEpoch = pid, epoch
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
	commit := func() *kmsg.TxnOffsetCommitResponse {
		var resp *kmsg.TxnOffsetCommitResponse
		retryWhileLoading(t, func() int16 {
			r, err := handleTxnOffsetCommit(ctx, b, nil, req)
			if err != nil {
				t.Fatal(err)
			}
			resp = r.(*kmsg.TxnOffsetCommitResponse)
			return resp.Topics[0].Partitions[0].ErrorCode
		})
		return resp
	}
	check := func(resp *kmsg.TxnOffsetCommitResponse, want [][]int16) {
		t.Helper()
		for i, rt := range resp.Topics {
			for j, rp := range rt.Partitions {
				if rp.ErrorCode != want[i][j] || rp.Partition != req.Topics[i].Partitions[j].Partition {
					t.Fatalf("answer %s, want codes %v", fmt.Sprint(resp.Topics), want)
				}
			}
		}
	}
	// KIP-890: the group's partition is not in the transaction yet.
	check(commit(), [][]int16{
		{kerr.InvalidTxnState.Code, kerr.InvalidTxnState.Code, kerr.UnknownTopicOrPartition.Code},
		{kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code},
	})
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, "etl"
	ar, err := handleAddOffsetsToTxn(ctx, b, &requestContext{version: add.Version}, add)
	if err != nil || ar.(*kmsg.AddOffsetsToTxnResponse).ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, ar)
	}
	check(commit(), [][]int16{
		{0, 0, kerr.UnknownTopicOrPartition.Code},
		{kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code},
	})

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
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, true
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

// retryWhileLoading calls do until it answers something other than the
// coordinator answers of a load in progress, within 10 s.
func retryWhileLoading(t *testing.T, do func() int16) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code := do()
		if code != kerr.NotCoordinator.Code && code != kerr.CoordinatorLoadInProgress.Code && code != kerr.CoordinatorNotAvailable.Code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %v after 10 s", kerr.ErrorForCode(code))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
