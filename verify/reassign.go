package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// reassignWait bounds one step of the Reassign fault (a reassignment's
// completion, the copy included).
const reassignWait = 60 * time.Second

// reassign is the Reassign fault: under load, a partition's replicas are
// reassigned without its leader (RF 3 -> 2: leadership moves, the old
// leader's replica is deleted), then, after f.Duration, with it again (it
// copies the whole partition back as a new follower and rejoins the ISR).
// Acknowledged writes must survive both moves, and the returning replica
// must end byte for byte equal to the others (the final replica check).
func (n *Nemesis) reassign(ctx context.Context, f Fault) {
	cl, err := kgo.NewClient(n.C.ClientOpts(kgo.SeedBrokers(n.C.Seeds()...))...)
	if err != nil {
		n.record(f.Kind, "skip", err.Error())
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	replicas, err := n.replicasOf(ctx, adm, f.Partition)
	if err != nil {
		n.record(f.Kind, "skip", err.Error())
		return
	}
	s, err := n.ZK.State(n.Topic, f.Partition)
	if err != nil {
		n.record(f.Kind, "skip", fmt.Sprintf("partition %d's state: %v", f.Partition, err))
		return
	}
	without := slices.DeleteFunc(slices.Clone(replicas), func(id int32) bool { return id == s.Leader })
	if len(without) == len(replicas) || len(without) == 0 {
		n.record(f.Kind, "skip", fmt.Sprintf("partition %d: leader %d not among replicas %v", f.Partition, s.Leader, replicas))
		return
	}
	n.record(f.Kind, "start", fmt.Sprintf("partition %d: replicas %v -> %v (its leader b%d leaves)", f.Partition, replicas, without, s.Leader))
	if err := n.reassignTo(ctx, adm, f.Partition, without); err != nil {
		n.warn(fmt.Sprintf("%s: %v", f.Kind, err))
		return
	}
	n.record(f.Kind, "shrunk", fmt.Sprintf("partition %d on %v", f.Partition, without))
	sleepCtx(ctx, f.Duration)
	back := append(slices.Clone(without), s.Leader)
	if err := n.reassignTo(ctx, adm, f.Partition, back); err != nil {
		n.warn(fmt.Sprintf("%s: %v", f.Kind, err))
		return
	}
	n.record(f.Kind, "end", fmt.Sprintf("partition %d on %v again: b%d copied it back and is in the ISR", f.Partition, back, s.Leader))
}

// replicasOf is partition p's replica list in the cluster's metadata.
func (n *Nemesis) replicasOf(ctx context.Context, adm *kadm.Client, p int32) ([]int32, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(rctx, n.Topic)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", n.Topic, err)
	}
	t, ok := md.Topics[n.Topic]
	if !ok {
		return nil, fmt.Errorf("metadata lacks %s", n.Topic)
	}
	pd, ok := t.Partitions[p]
	if !ok {
		return nil, fmt.Errorf("metadata lacks %s-%d", n.Topic, p)
	}
	return pd.Replicas, nil
}

// reassignTo moves partition p's replicas to want and waits until the
// reassignment is over and every one of them is in the ISR.
func (n *Nemesis) reassignTo(ctx context.Context, adm *kadm.Client, p int32, want []int32) error {
	ctx, cancel := context.WithTimeout(ctx, reassignWait)
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(n.Topic, p, want)
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("reassigning %s-%d to %v: %w", n.Topic, p, want, err)
	}
	var last error
	for {
		last = n.reassigned(ctx, adm, p, want)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s-%d to %v not done within %v: %w", n.Topic, p, want, reassignWait, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reassigned tells whether p's reassignment to want is over.
func (n *Nemesis) reassigned(ctx context.Context, adm *kadm.Client, p int32, want []int32) error {
	ongoing, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{n.Topic: {p: {}}})
	if err != nil {
		return err
	}
	moving := false
	ongoing.Each(func(r kadm.ListPartitionReassignmentsResponse) { moving = moving || r.Partition == p })
	if moving {
		return errors.New("still reassigning")
	}
	replicas, err := n.replicasOf(ctx, adm, p)
	if err != nil {
		return err
	}
	if !slices.Equal(replicas, want) {
		return fmt.Errorf("replicas %v", replicas)
	}
	s, err := n.ZK.State(n.Topic, p)
	if err != nil {
		return err
	}
	for _, id := range want {
		if !slices.Contains(s.ISR, id) {
			return fmt.Errorf("ISR %v lacks b%d", s.ISR, id)
		}
	}
	return nil
}
