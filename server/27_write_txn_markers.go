package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/replica"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteTxnMarkers: v0-1
//
// Behaviour:
// * Sent by transaction coordinators to partition leaders: each marker
//   appends a commit or abort control batch for the producer to each
//   named partition this broker leads, and is answered once the batch is
//   replicated (acks=all), so the last stable offset can pass it.
// * A marker of an older producer epoch gets INVALID_PRODUCER_EPOCH, one
//   from an older coordinator epoch TRANSACTION_COORDINATOR_FENCED (the
//   coordinator then stops sending it); a partition led elsewhere
//   NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION.
// * On __consumer_offsets partitions the group coordinator then makes the
//   transaction's offsets visible (commit) or drops them (abort).
// * Authorization: Alter or ClusterAction on the cluster (brokers), else
//   every partition gets CLUSTER_AUTHORIZATION_FAILED and nothing is
//   written.
//
// Version notes:
// * v1: flexible
// * v2: the transaction version of each marker (KIP-1228): a transactions
//   v2 marker is refused (INVALID_PRODUCER_EPOCH) where it would end a
//   transaction opened at its own epoch (a stale copy of the previous one)

func init() { registerAPI(kmsg.WriteTxnMarkers.Int16(), 0, 2, handleWriteTxnMarkers) }

// markerWaitTimeout bounds a marker's replication wait, as Kafka's request
// timeout does for the coordinator's append.
const markerWaitTimeout = 30 * time.Second

func handleWriteTxnMarkers(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	allowed := b.authorizeCluster(rc, acl.OpAlter) || b.authorizeCluster(rc, acl.OpClusterAction)
	for _, rm := range req.Markers {
		m := txn.Markers{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch, Commit: rm.Committed, CoordinatorEpoch: rm.CoordinatorEpoch,
			TxnV2: req.Version >= 2 && rm.TransactionVersion >= 2}
		for _, rt := range rm.Topics {
			for _, p := range rt.Partitions {
				m.Partitions = append(m.Partitions, txn.TopicPartition{Topic: rt.Topic, Partition: p})
			}
		}
		var results map[txn.TopicPartition]error
		if allowed {
			results = b.writeTxnMarkersLocally(ctx, m)
		}
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = rm.ProducerID
		for _, rt := range rm.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = p
				sp.ErrorCode = protocol.ErrorCode(results[txn.TopicPartition{Topic: rt.Topic, Partition: p}])
				if !allowed {
					sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	return resp, nil
}

// writeTxnMarkersLocally appends m's marker to each of its partitions led
// here and waits for them to replicate; the result holds each partition's
// error (nil: written). Appends go first and waits after, so the
// partitions replicate in parallel.
func (b *Broker) writeTxnMarkersLocally(ctx context.Context, m txn.Markers) map[txn.TopicPartition]error {
	results := make(map[txn.TopicPartition]error, len(m.Partitions))
	type appended struct {
		tp   txn.TopicPartition
		part *replica.Partition
		res  replica.AppendResult
	}
	var waits []appended
	now := time.Now()
	for _, tp := range m.Partitions {
		part, err := b.localPartition(tp.Topic, tp.Partition)
		if err == nil {
			var res replica.AppendResult
			res, err = part.AppendTxnMarker(m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch, m.TxnV2, now)
			if err == nil {
				waits = append(waits, appended{tp, part, res})
			}
		}
		results[tp] = err
	}
	wctx, cancel := context.WithTimeout(ctx, markerWaitTimeout)
	defer cancel()
	for _, w := range waits {
		err := w.part.WaitForHighWatermark(wctx, w.res)
		if errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
			// Kafka appends markers with acks=all; a marker in the log
			// but short of min.insync.replicas is retried by the
			// coordinator, which is harmless: a second marker for a
			// closed transaction changes nothing.
			err = fmt.Errorf("marker for %s-%d: %w", w.tp.Topic, w.tp.Partition, err)
		}
		results[w.tp] = err
		if err == nil && w.tp.Topic == offsetsTopic {
			b.groups.CompleteTxn(w.tp.Partition, m.ProducerID, m.Commit)
		}
	}
	return results
}
