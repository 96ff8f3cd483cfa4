package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnMarkerSender is the transaction coordinator's MarkerWriter: Kafka's
// TransactionMarkerChannelManager. It sends WriteTxnMarkers to each
// partition's leader (or writes directly when the leader is this broker)
// and retries what failed until every partition has its marker.
//
// It also holds the connections produce verifications use to reach
// transaction coordinators (txn_verify.go): apart from the markers', as a
// marker request may wait out a replication timeout and a verification
// must not queue behind it.
type txnMarkerSender struct {
	b           *Broker
	peers       *peerConns
	verifyPeers *peerConns
}

func newTxnMarkerSender(b *Broker) *txnMarkerSender {
	return &txnMarkerSender{b: b, peers: newPeerConns(b, "kbroker-txn-markers"), verifyPeers: newPeerConns(b, "kbroker-txn-verify")}
}

// Close closes the sender's connections; later sends fail.
func (s *txnMarkerSender) Close() {
	s.peers.Close()
	s.verifyPeers.Close()
}

// Marker retries back off from markerMinBackoff, doubling up to
// markerMaxBackoff: a leader that is moving is usually back within
// milliseconds, one that is down should not be hammered.
const (
	markerMinBackoff = 10 * time.Millisecond
	markerMaxBackoff = 500 * time.Millisecond
	// markerRequestTimeout bounds one WriteTxnMarkers round trip; the
	// leader waits up to markerWaitTimeout for replication.
	markerRequestTimeout = markerWaitTimeout + 5*time.Second
)

// errMarkerFenced says a leader refused a marker because the producer or
// the coordinator moved on: the transaction is someone else's now.
var errMarkerFenced = errors.New("transaction marker fenced")

// markerOutcome decides what one partition's answer means for a marker
// (Kafka's TransactionMarkerRequestCompletionHandler): done, retry, or
// fenced (stop sending the whole marker). A partition whose topic is gone
// is done: Kafka drops markers of deleted topics.
type markerOutcome int

const (
	markerRetry markerOutcome = iota
	markerDone
	markerStop
)

func decideMarker(err error, topicExists bool) markerOutcome {
	switch {
	case err == nil:
		return markerDone
	case !topicExists:
		return markerDone
	case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.TransactionCoordinatorFenced):
		return markerStop
	default:
		return markerRetry
	}
}

// WriteMarkers implements txn.MarkerWriter.
func (s *txnMarkerSender) WriteMarkers(ctx context.Context, m txn.Markers) error {
	pending := m.Partitions
	backoff := time.Duration(0)
	for len(pending) > 0 {
		md := s.b.controller.Metadata()
		byLeader := map[int32][]txn.TopicPartition{}
		var retry []txn.TopicPartition
		for _, tp := range pending {
			t, ok := md.Topics[tp.Topic]
			switch {
			case !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions):
				s.b.logger.Info("dropping transaction marker of a partition that no longer exists", "partition", fmt.Sprintf("%s-%d", tp.Topic, tp.Partition), "producer_id", m.ProducerID)
			case t.Partitions[tp.Partition].Leader < 0:
				retry = append(retry, tp)
			default:
				l := t.Partitions[tp.Partition].Leader
				byLeader[l] = append(byLeader[l], tp)
			}
		}
		type answer struct {
			results map[txn.TopicPartition]error
		}
		answers := make(chan answer, len(byLeader))
		for leader, tps := range byLeader {
			go func() {
				part := m
				part.Partitions = tps
				answers <- answer{s.send(ctx, leader, part)}
			}()
		}
		var stop error
		for range byLeader {
			a := <-answers
			md := s.b.controller.Metadata()
			for tp, err := range a.results {
				_, exists := md.Topics[tp.Topic]
				switch decideMarker(err, exists) {
				case markerRetry:
					retry = append(retry, tp)
				case markerStop:
					stop = fmt.Errorf("%w: %s-%d: %v", errMarkerFenced, tp.Topic, tp.Partition, err)
				}
			}
		}
		if stop != nil {
			return stop
		}
		pending = retry
		if len(pending) == 0 {
			return nil
		}
		backoff = min(max(2*backoff, markerMinBackoff), markerMaxBackoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return fmt.Errorf("transaction markers for producer %d: %d partitions left: %w", m.ProducerID, len(pending), ctx.Err())
		}
	}
	return nil
}

// send delivers m (whose partitions share one leader) and returns each
// partition's result; a failed round trip is an error for all of them.
func (s *txnMarkerSender) send(ctx context.Context, leader int32, m txn.Markers) map[txn.TopicPartition]error {
	results := make(map[txn.TopicPartition]error, len(m.Partitions))
	if leader == s.b.self.ID {
		return s.b.writeTxnMarkersLocally(ctx, m)
	}
	fail := func(err error) map[txn.TopicPartition]error {
		for _, tp := range m.Partitions {
			results[tp] = err
		}
		return results
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	if m.TxnV2 {
		// v2 carries the transaction version (KIP-1228); v0 otherwise,
		// which every earlier release serves.
		req.Version, rm.TransactionVersion = 2, 2
	}
	txn.ByTopic(m.Partitions, func(topic string, partitions []int32) {
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = topic, partitions
		rm.Topics = append(rm.Topics, rt)
	})
	req.Markers = append(req.Markers, rm)
	rctx, cancel := context.WithTimeout(ctx, markerRequestTimeout)
	defer cancel()
	// Not repeated here on failure: WriteMarkers retries the partitions
	// after a backoff, with the metadata of then.
	kresp, err := s.peers.request(rctx, leader, req, false)
	if err != nil {
		return fail(fmt.Errorf("WriteTxnMarkers to broker %d: %w", leader, err))
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	for _, sm := range resp.Markers {
		for _, st := range sm.Topics {
			for _, sp := range st.Partitions {
				results[txn.TopicPartition{Topic: st.Topic, Partition: sp.Partition}] = kerr.ErrorForCode(sp.ErrorCode)
			}
		}
	}
	for _, tp := range m.Partitions {
		if _, ok := results[tp]; !ok {
			results[tp] = fmt.Errorf("%w: broker %d did not answer for %s-%d", kerr.UnknownServerError, leader, tp.Topic, tp.Partition)
		}
	}
	return results
}

var _ txn.MarkerWriter = (*txnMarkerSender)(nil)
