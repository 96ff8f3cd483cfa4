package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartition: v0-1 (inter-broker)
//
// Behaviour:
// * A partition leader asks the controller to change the ISR. Only the
//   controller answers (others: NOT_CONTROLLER); the change must come from
//   the current leader at the current leader epoch and partition epoch
//   (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION otherwise), so a deposed
//   leader cannot shrink the ISR to itself.
//
// * v2+ names topics by id: a request for a topic id the controller does
//   not know (the leader of a deleted topic whose name was reused) gets
//   UNKNOWN_TOPIC_ID, so it never changes the new topic's ISR.
// * Authorization: ClusterAction on the cluster (brokers), else
//   CLUSTER_AUTHORIZATION_FAILED at the top level and nothing changes.
//
// Version notes:
// * v1: leader recovery state
// * v2: topic ids instead of names

func init() { registerAPI(kmsg.AlterPartition.Int16(), 0, 2, handleAlterPartition) }

func handleAlterPartition(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if !b.authorizeCluster(rc, acl.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if !b.controller.IsController() {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	var changes []controller.ISRChange
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			changes = append(changes, controller.ISRChange{Topic: rt.Topic, TopicID: rt.TopicID, Partition: rp.Partition,
				LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch, ISR: rp.NewISR})
		}
	}
	// One step for the whole request: one write, one view.
	results, err := b.controller.AlterISRs(req.BrokerID, changes)
	if err != nil {
		resp.ErrorCode = protocol.ErrorCode(err)
		return resp, nil
	}
	i := 0
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.Topic, st.TopidID = rt.Topic, rt.TopicID // kmsg spells it TopidID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			res := results[i]
			i++
			if res.Err != nil {
				sp.ErrorCode = protocol.ErrorCode(res.Err)
			}
			ps := res.State
			sp.LeaderID, sp.LeaderEpoch, sp.ISR, sp.PartitionEpoch = ps.Leader, ps.LeaderEpoch, ps.ISR, ps.PartitionEpoch
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// isrWriter sends a leader's ISR changes to the controller, batched as
// Kafka's AlterPartitionManager: one request in flight at a time, and the
// changes that arrive meanwhile go together in the next one (directly to
// the controller core when this broker is the controller, else as one
// AlterPartition). A returning broker's thousands of partitions thus
// rejoin their ISRs in a few controller steps instead of one each.
type isrWriter struct {
	b *Broker

	// mu guards queue and sending.
	mu      sync.Mutex
	queue   []*isrItem
	sending bool
}

// isrItem is one queued change and where its outcome goes.
type isrItem struct {
	change controller.ISRChange
	done   chan controller.ISRResult // buffered: the sender never blocks
}

// isrBatchTimeout bounds one batch's round trip to the controller.
const isrBatchTimeout = 15 * time.Second

func (w *isrWriter) AlterISR(ctx context.Context, tp replica.TopicPartition, topicID [16]byte, leaderEpoch, partitionEpoch int32, isr []int32) ([]int32, int32, error) {
	it := &isrItem{change: controller.ISRChange{Topic: tp.Topic, TopicID: topicID, Partition: tp.Partition,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr}, done: make(chan controller.ISRResult, 1)}
	w.mu.Lock()
	w.queue = append(w.queue, it)
	start := !w.sending
	w.sending = true
	w.mu.Unlock()
	if start {
		go w.drain()
	}
	select {
	case res := <-it.done:
		if res.Err != nil {
			return nil, 0, res.Err
		}
		return res.State.ISR, res.State.PartitionEpoch, nil
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// drain sends the queue in batches until it is empty.
func (w *isrWriter) drain() {
	for {
		w.mu.Lock()
		batch := w.queue
		w.queue = nil
		if len(batch) == 0 {
			w.sending = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		changes := make([]controller.ISRChange, len(batch))
		for i, it := range batch {
			changes[i] = it.change
		}
		results := w.send(changes)
		for i, it := range batch {
			it.done <- results[i]
		}
	}
}

// send delivers one batch and returns one result per change (the same
// error for all when the batch as a whole failed).
func (w *isrWriter) send(changes []controller.ISRChange) []controller.ISRResult {
	b := w.b
	results := make([]controller.ISRResult, len(changes))
	failAll := func(err error) []controller.ISRResult {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	if b.controller.IsController() {
		res, err := b.controller.AlterISRs(b.self.ID, changes)
		if err != nil {
			return failAll(err)
		}
		return res
	}
	conn, _, err := b.controllerConn()
	if err != nil {
		return failAll(err)
	}
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 2
	req.BrokerID, req.BrokerEpoch = b.self.ID, -1
	byTopic := map[[16]byte]int{}
	for _, ch := range changes {
		ti, ok := byTopic[ch.TopicID]
		if !ok {
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.Topic, rt.TopicID = ch.Topic, ch.TopicID
			req.Topics = append(req.Topics, rt)
			ti = len(req.Topics) - 1
			byTopic[ch.TopicID] = ti
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = ch.Partition, ch.LeaderEpoch, ch.PartitionEpoch, ch.ISR
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), isrBatchTimeout)
	defer cancel()
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return failAll(err)
	}
	ar := resp.(*kmsg.AlterPartitionResponse)
	if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
		return failAll(err)
	}
	type key struct {
		id [16]byte
		p  int32
	}
	answered := map[key]controller.ISRResult{}
	for _, t := range ar.Topics {
		for _, p := range t.Partitions {
			r := controller.ISRResult{State: controller.PartitionState{Leader: p.LeaderID, LeaderEpoch: p.LeaderEpoch, ISR: p.ISR, PartitionEpoch: p.PartitionEpoch}}
			r.Err = kerr.ErrorForCode(p.ErrorCode)
			answered[key{t.TopidID, p.Partition}] = r
		}
	}
	for i, ch := range changes {
		r, ok := answered[key{ch.TopicID, ch.Partition}]
		if !ok {
			r.Err = errors.New("AlterPartition response without the partition")
		}
		results[i] = r
	}
	return results
}
