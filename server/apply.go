package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/replica"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// offsetsTopic is Kafka's internal topic for committed offsets and groups.
const offsetsTopic = "__consumer_offsets"

// applyMetadata makes the local replicas match a new snapshot. It is the
// controller's subscriber and runs before the change's caller is answered.
func (b *Broker) applyMetadata(md *controller.Metadata) {
	if err := b.applyMetadataErr(md); err != nil {
		b.logger.Error("applying cluster metadata failed", "err", err)
	}
}

func (b *Broker) applyMetadataErr(md *controller.Metadata) error {
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	defer b.viewChangedLocked()
	b.replThrottle.update(b.self.ID, md)
	var errs []error
	configs := map[string]replica.PartitionConfig{}
	badConfig := map[string]bool{}
	// topicConfig is t's partition config, read once per view; false
	// when it cannot be read (the error is reported once): its replicas
	// keep serving as before rather than act on a config we cannot read.
	topicConfig := func(t *controller.Topic) (replica.PartitionConfig, bool) {
		if pcfg, ok := configs[t.Name]; ok || badConfig[t.Name] {
			return pcfg, ok
		}
		pcfg, err := b.partitionConfig(t.Configs)
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", t.Name, err))
			badConfig[t.Name] = true
			return pcfg, false
		}
		configs[t.Name] = pcfg
		return pcfg, true
	}
	plan := planReplicas(b.self.ID, md, b.replicas.Replicas())
	// The deletions first (they come first in the plan): a new
	// incarnation is never opened over an old one's files.
	rest := plan
	for len(rest) > 0 && rest[0].kind == actDelete {
		act := rest[0]
		rest = rest[1:]
		if part, hosted := b.replicas.Get(act.tp); hosted && part.State().IsLeader {
			b.resignCoordinator(act.tp)
		}
		b.logger.Warn("deleting replica", "partition", act.tp.String(), "reason", act.reason)
		if err := b.replicas.Remove(act.tp, true); err != nil {
			errs = append(errs, err)
		}
	}
	// Then every other action, each as soon as its partition's log is
	// open: the logs open in parallel (openPlanned), and after a restart
	// each partition serves once its own log recovered, not once all did.
	for r := range b.openPlanned(rest, topicConfig) {
		if err := b.applyActionLocked(md, rest[r.index], r.openErr, topicConfig); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(withoutOfflineReplicaErrors(errs)...)
}

// applyActionLocked makes one partition's replica what act says (b.applyMu
// held); openErr is why its log could not be opened, if it could not.
func (b *Broker) applyActionLocked(md *controller.Metadata, act replicaAction, openErr error, topicConfig func(*controller.Topic) (replica.PartitionConfig, bool)) error {
	tp := act.tp
	part, hosted := b.replicas.Get(tp)
	wasLeader := hosted && part.State().IsLeader
	var ledEpoch int32 = -1
	if wasLeader {
		ledEpoch = part.State().LeaderEpoch
	}
	if act.kind != actLead && wasLeader {
		b.resignCoordinator(tp)
	}
	switch act.kind {
	case actStop:
		if hosted && (wasLeader || part.Following()) {
			if _, named := md.Topics[tp.Topic]; !named {
				b.logger.Warn("partition missing from the cluster view: no longer served, data kept", "partition", tp.String())
			}
		}
		b.replicas.StopLeading(tp)
	case actLead, actFollow:
		t := act.topic
		pcfg, ok := topicConfig(t)
		if !ok {
			return nil
		}
		if openErr != nil {
			return openErr
		}
		ps := t.Partitions[tp.Partition]
		if act.kind == actFollow {
			leader, _ := md.Broker(ps.Leader)
			addr := net.JoinHostPort(leader.Host, strconv.Itoa(int(leader.Port)))
			_, err := b.replicas.MakeFollower(tp, t.ID, ps.Leader, ps.LeaderEpoch, addr, pcfg)
			return err
		}
		if _, err := b.replicas.MakeLeader(tp, t.ID, ps.LeaderEpoch, ps.PartitionEpoch, ps.ISR, pcfg); err != nil {
			return err
		}
		if tp.Topic == offsetsTopic && !wasLeader {
			go b.becomeCoordinator(tp.Partition)
		}
		// The transaction coordinator's epoch is the leader epoch: a
		// new one (even without a leader change in between) reloads,
		// so markers carry the epoch partition leaders check.
		if tp.Topic == txn.TopicName && (!wasLeader || ledEpoch != ps.LeaderEpoch) {
			b.becomeTxnCoordinatorLocked(tp.Partition, ps.LeaderEpoch)
		}
	}
	return nil
}

// readyAction is an action of openPlanned's list whose partition log is
// open (or could not be opened: openErr).
type readyAction struct {
	index   int
	openErr error
}

// openPlanned opens, in parallel (num.recovery.threads.per.data.dir per
// log dir), the logs of the partitions acts make this broker lead or
// follow that are not open yet, and yields the index of every action once
// it can be applied: at once for those that open nothing, as its log
// opened (or failed to) for the others. After a restart that is every
// partition, each recovered in turn otherwise. topicConfig is called from
// the caller's goroutine only.
func (b *Broker) openPlanned(acts []replicaAction, topicConfig func(*controller.Topic) (replica.PartitionConfig, bool)) <-chan readyAction {
	ready := make(chan readyAction, len(acts))
	var reqs []replica.OpenRequest
	var reqAction []int
	for i, act := range acts {
		needsOpen := false
		if act.kind == actLead || act.kind == actFollow {
			if _, hosted := b.replicas.Get(act.tp); !hosted {
				if pcfg, ok := topicConfig(act.topic); ok {
					reqs = append(reqs, replica.OpenRequest{TopicPartition: act.tp, TopicID: act.topic.ID, Config: pcfg})
					reqAction = append(reqAction, i)
					needsOpen = true
				}
			}
		}
		if !needsOpen {
			ready <- readyAction{index: i}
		}
	}
	if len(reqs) == 0 {
		close(ready)
		return ready
	}
	start := time.Now()
	go func() {
		var failed atomic.Int64
		b.replicas.OpenEach(context.Background(), reqs, func(j int, err error) {
			if err != nil {
				failed.Add(1)
			}
			ready <- readyAction{index: reqAction[j], openErr: err}
		})
		if len(reqs) > 1 {
			b.logger.Info("opened partition logs", "logs", len(reqs), "failed", failed.Load(), "elapsed", time.Since(start).Round(time.Millisecond))
		}
		close(ready)
	}()
	return ready
}

// viewChangedLocked wakes everyone waiting for the next cluster view.
func (b *Broker) viewChangedLocked() {
	close(b.viewChanged)
	b.viewChanged = make(chan struct{})
}

// nextView returns a channel closed when the next cluster view is applied.
func (b *Broker) nextView() <-chan struct{} {
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	return b.viewChanged
}

// becomeCoordinator loads the groups of one __consumer_offsets partition.
func (b *Broker) becomeCoordinator(partition int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := b.groups.BecomeLeader(ctx, partition); err != nil {
		b.logger.Error("loading group coordinator partition failed", "partition", partition, "err", err)
	}
}

// resignCoordinator tells the coordinator of an internal topic's partition
// that this broker no longer leads it.
func (b *Broker) resignCoordinator(tp replica.TopicPartition) {
	switch tp.Topic {
	case offsetsTopic:
		b.groups.Resign(tp.Partition)
	case txn.TopicName:
		b.txns.Resign(tp.Partition)
	}
}

// becomeTxnCoordinatorLocked registers a __transaction_state partition
// this broker now leads at leaderEpoch with the transaction coordinator, in
// the order leadership changes are applied (applyMu held), and loads it in
// the background. A load that fails is tried again, with a growing pause,
// for as long as this broker still leads the partition at that epoch.
func (b *Broker) becomeTxnCoordinatorLocked(partition, leaderEpoch int32) {
	load, err := b.txns.BeginLoad(partition, leaderEpoch)
	if err != nil || load == nil {
		return
	}
	go func() {
		backoff := time.Second
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			err := load(ctx)
			cancel()
			if err == nil || txn.IsResigned(err) {
				return
			}
			b.logger.Error("loading transaction coordinator partition failed; retrying", "partition", partition,
				"leader_epoch", leaderEpoch, "retry_in", backoff, "err", err)
			select {
			case <-time.After(backoff):
			case <-b.txns.Done():
				return
			}
			backoff = min(2*backoff, 30*time.Second)
			if load = b.reloadTxnPartition(partition, leaderEpoch); load == nil {
				return
			}
		}
	}()
}

// reloadTxnPartition registers partition again for a retried load, if this
// broker still leads it at leaderEpoch (checked under applyMu, so no
// leadership change is applied in between).
func (b *Broker) reloadTxnPartition(partition, leaderEpoch int32) func(context.Context) error {
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	part, ok := b.replicas.Get(replica.TopicPartition{Topic: txn.TopicName, Partition: partition})
	if !ok {
		return nil
	}
	if st := part.State(); !st.IsLeader || st.LeaderEpoch != leaderEpoch {
		return nil
	}
	load, err := b.txns.BeginLoad(partition, leaderEpoch)
	if err != nil {
		return nil
	}
	return load
}

// internalLog stores a coordinator's records in its internal topic
// (__consumer_offsets, __transaction_state) through the replica layer, with
// acks=all.
type internalLog struct {
	b     *Broker
	topic string
}

func (o *internalLog) partition(p int32) (*replica.Partition, error) {
	part, ok := o.b.replicas.Get(replica.TopicPartition{Topic: o.topic, Partition: p})
	if !ok {
		return nil, fmt.Errorf("%w: %s-%d is not hosted here", kerr.NotLeaderForPartition, o.topic, p)
	}
	return part, nil
}

func (o *internalLog) Append(ctx context.Context, partition int32, batch []byte) (int64, error) {
	part, err := o.partition(partition)
	if err != nil {
		return -1, err
	}
	h, err := recordbatch.Validate(batch)
	if err != nil {
		return -1, fmt.Errorf("%s record batch: %w", o.topic, err)
	}
	var res replica.AppendResult
	if guard := txnVerificationFrom(ctx); guard != nil {
		// A transactional offset commit that opens its transaction on
		// this partition: appended only under its verification.
		res, err = part.AppendFromClient([][]byte{batch}, []recordbatch.Header{h}, -1, time.Now(), guard)
	} else {
		res, err = part.AppendAsLeader([][]byte{batch}, []recordbatch.Header{h}, -1, time.Now())
	}
	if err != nil {
		return -1, err
	}
	if err := part.WaitForHighWatermark(ctx, res); err != nil {
		return -1, err
	}
	return res.BaseOffset, nil
}

// DeleteBefore raises the log start offset, as DeleteRecords does, after a
// coordinator snapshot made the records below offset redundant.
func (o *internalLog) DeleteBefore(_ context.Context, partition int32, offset int64) error {
	part, err := o.partition(partition)
	if err != nil {
		return err
	}
	if _, err := part.DeleteRecordsBefore(offset); err != nil {
		return fmt.Errorf("delete %s-%d before %d: %w", o.topic, partition, offset, err)
	}
	return nil
}

func (o *internalLog) ReadAll(ctx context.Context, partition int32, fn func(batch []byte) error) error {
	part, err := o.partition(partition)
	if err != nil {
		return err
	}
	offset := part.State().LogStartOffset
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Up to the log end, not the high watermark, as Kafka's group
		// loading: right after an election the high watermark may still
		// lag (after a restart it starts at the log start).
		recs, err := part.ReadToLogEnd(offset, 1<<20)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		batches, headers, err := recordbatch.Split(recs)
		if err != nil {
			return fmt.Errorf("read %s-%d at %d: %w", o.topic, partition, offset, err)
		}
		for i, batch := range batches {
			if headers[i].NextOffset() <= offset {
				continue
			}
			if err := fn(batch); err != nil {
				return err
			}
			offset = headers[i].NextOffset()
		}
	}
}
