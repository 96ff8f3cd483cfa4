package integration

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// finalizedTxnVersion is the transaction.version level the broker
// finalizes in ApiVersions v3 (0 when absent).
func finalizedTxnVersion(t *testing.T, cl *kgo.Client) int16 {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kbroker-test", "1"
	resp, err := req.RequestWith(testContext(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel
		}
	}
	return 0
}

// producerEpochOf is the transactional id's producer epoch as
// DescribeTransactions reports it.
func producerEpochOf(t *testing.T, adm *kadm.Client, id string) int16 {
	t.Helper()
	described, err := adm.DescribeTransactions(testContext(t, 10*time.Second), id)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := described[id]
	if !ok || d.Err != nil {
		t.Fatalf("describe %q: %+v", id, d)
	}
	return d.ProducerEpoch
}

// TestTxnV2 is transactions v2 (KIP-890 part 2) with franz-go, which uses
// them when the broker finalizes transaction.version 2 (the default): every
// EndTxn bumps the epoch (so the producer's epoch after n transactions is
// n), no AddPartitionsToTxn or AddOffsetsToTxn is needed, and
// read_committed readers see exactly the committed records. With
// kbroker.transaction.version=1 the same client stays on v1 (the epoch
// does not move) and gets the same records.
func TestTxnV2(t *testing.T) {
	for _, tc := range []struct {
		name      string
		level     string
		wantLevel int16
		wantEpoch func(txns int) int16
	}{
		{"v2", "2", 2, func(txns int) int16 { return int16(txns) }},
		{"v1", "1", 1, func(int) int16 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := StartBroker(t, "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
				"kbroker.transaction.version="+tc.level)
			topic := "txn-v" + tc.level
			createTopic(t, b.Admin(t), topic, 3, nil)
			if got := finalizedTxnVersion(t, b.Client(t)); got != tc.wantLevel {
				t.Fatalf("finalized transaction.version %d, want %d", got, tc.wantLevel)
			}
			seeds := []string{b.Addr()}
			const n, perTxn = 9, 20 // 5 committed, 4 aborted
			id := "tx-" + tc.name
			committed := txnProduce(t, seeds, id, topic, n, perTxn)
			got := consumeValues(t, seeds, topic, kgo.ReadCommitted(), len(committed))
			slices.Sort(got)
			slices.Sort(committed)
			if !slices.Equal(got, committed) {
				t.Fatalf("read_committed got %d records, want the %d committed ones (first difference: %s)",
					len(got), len(committed), firstDiff(got, committed))
			}
			if epoch := producerEpochOf(t, b.Admin(t), id); epoch != tc.wantEpoch(n) {
				t.Fatalf("producer epoch after %d transactions: %d, want %d", n, epoch, tc.wantEpoch(n))
			}
		})
	}
}

// TestTxnV2EndTxn is EndTxn v5 on the wire: an abort with no transaction
// succeeds and bumps the epoch; the retry of an answer that was lost (one
// epoch back) gets the same answer, and with the other outcome
// INVALID_TXN_STATE; an older epoch is fenced; a commit with no
// transaction is INVALID_TXN_STATE.
func TestTxnV2EndTxn(t *testing.T) {
	b := StartBroker(t, "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1")
	cl := b.Client(t)
	ctx := testContext(t, 30*time.Second)
	const id = "tx-v2-raw"
	waitTxnCoordinator(t, cl, id)
	init := kmsg.NewPtrInitProducerIDRequest()
	txnID := id
	init.TransactionalID, init.TransactionTimeoutMillis = &txnID, 10000
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, kerr.ErrorForCode(ir.ErrorCode))
	}
	pid := ir.ProducerID
	end := func(epoch int16, commit bool) (*kmsg.EndTxnResponse, error) {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 5
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version != 5 {
			t.Fatalf("EndTxn answered at v%d, want v5", resp.Version)
		}
		return resp, kerr.ErrorForCode(resp.ErrorCode)
	}
	e0 := ir.ProducerEpoch
	for _, step := range []struct {
		name      string
		epoch     int16
		commit    bool
		wantErr   error
		wantEpoch int16
	}{
		{"abort with no transaction", e0, false, nil, e0 + 1},
		{"its retry", e0, false, nil, e0 + 1},
		{"its retry as a commit", e0, true, kerr.InvalidTxnState, 0},
		{"commit with no transaction", e0 + 1, true, kerr.InvalidTxnState, 0},
		{"another empty abort", e0 + 1, false, nil, e0 + 2},
		{"two epochs back", e0, false, kerr.ProducerFenced, 0},
	} {
		resp, err := end(step.epoch, step.commit)
		if !errors.Is(err, step.wantErr) || (step.wantErr == nil && err != nil) {
			t.Fatalf("%s: %v, want %v", step.name, err, step.wantErr)
		}
		if err == nil && (resp.ProducerID != pid || resp.ProducerEpoch != step.wantEpoch) {
			t.Fatalf("%s: answered producer %d epoch %d, want %d epoch %d", step.name, resp.ProducerID, resp.ProducerEpoch, pid, step.wantEpoch)
		}
	}
}
