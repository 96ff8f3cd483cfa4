package server

import (
	"slices"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/replica"
)

// replicaActionKind is what applying a cluster view does to one replica.
type replicaActionKind int

const (
	// actDelete stops the replica and deletes its data: its topic was
	// deleted, or the name now belongs to another topic (a new
	// incarnation), so its records must never be served or copied again;
	// or a reassignment moved the partition to other brokers.
	actDelete replicaActionKind = iota
	// actLead makes this broker the partition's leader.
	actLead
	// actFollow makes this broker a follower of the partition's leader.
	actFollow
	// actStop stops serving the partition and keeps its data: nobody
	// leads it, or the view does not name its topic (a damaged znode
	// must not cost data), or the replica's topic id is unknown.
	actStop
)

func (k replicaActionKind) String() string {
	return [...]string{"delete", "lead", "follow", "stop"}[k]
}

// replicaAction is one step of bringing this broker's replicas to a view.
type replicaAction struct {
	kind replicaActionKind
	tp   replica.TopicPartition
	// topic is the view's topic, for actLead and actFollow.
	topic *controller.Topic
	// reason says why a replica is deleted, for the log.
	reason string
}

// planReplicas decides, from one cluster view alone, what becomes of every
// replica this broker keeps (open or only on disk) and of every partition
// the view assigns it. It depends on nothing but the view and the replicas
// as they are, so a broker that missed views (paused, partitioned, a new
// controller) reaches the same state by applying the latest one as by
// applying them all. Deletions come first, so a partition of a new
// incarnation is never opened over the old one's files.
func planReplicas(self int32, md *controller.Metadata, kept []replica.Replica) []replicaAction {
	var deletes, roles, stops []replicaAction
	assigned := map[replica.TopicPartition]bool{}
	for _, t := range md.Topics {
		for i, ps := range t.Partitions {
			if slices.Contains(ps.Replicas, self) {
				assigned[replica.TopicPartition{Topic: t.Name, Partition: int32(i)}] = true
			}
		}
	}
	// A set: the view may name many pending deletions, and every kept
	// replica is looked up.
	deletedIDs := make(map[[16]byte]bool, len(md.DeletedTopicIDs))
	for _, id := range md.DeletedTopicIDs {
		deletedIDs[id] = true
	}
	deleted := map[replica.TopicPartition]bool{}
	for _, r := range kept {
		t := md.Topics[r.Topic]
		switch {
		case r.TopicID != ([16]byte{}) && deletedIDs[r.TopicID]:
			deletes = append(deletes, replicaAction{kind: actDelete, tp: r.TopicPartition, reason: "topic deleted"})
			deleted[r.TopicPartition] = true
		case t != nil && r.TopicID != ([16]byte{}) && t.ID != ([16]byte{}) && t.ID != r.TopicID:
			deletes = append(deletes, replicaAction{kind: actDelete, tp: r.TopicPartition, reason: "the topic name belongs to a new topic"})
			deleted[r.TopicPartition] = true
		case t != nil && r.TopicID != ([16]byte{}) && t.ID == r.TopicID && int(r.Partition) < len(t.Partitions) && !assigned[r.TopicPartition]:
			// The controller assigns this very topic's partition to
			// other brokers: a reassignment moved it away (completed
			// only once its new replicas were in sync), so this copy is
			// no longer needed, as Kafka's StopReplica with delete.
			deletes = append(deletes, replicaAction{kind: actDelete, tp: r.TopicPartition, reason: "reassigned to other brokers"})
			deleted[r.TopicPartition] = true
		case r.Open && !assigned[r.TopicPartition]:
			stops = append(stops, replicaAction{kind: actStop, tp: r.TopicPartition})
		}
	}
	open := map[replica.TopicPartition]bool{}
	for _, r := range kept {
		if r.Open && !deleted[r.TopicPartition] {
			open[r.TopicPartition] = true
		}
	}
	for _, t := range md.Topics {
		for i, ps := range t.Partitions {
			tp := replica.TopicPartition{Topic: t.Name, Partition: int32(i)}
			if !assigned[tp] {
				continue
			}
			_, leaderLive := md.Broker(ps.Leader)
			switch {
			case ps.Leader == self:
				roles = append(roles, replicaAction{kind: actLead, tp: tp, topic: t})
			case ps.Leader >= 0 && leaderLive:
				roles = append(roles, replicaAction{kind: actFollow, tp: tp, topic: t})
			case open[tp]:
				stops = append(stops, replicaAction{kind: actStop, tp: tp})
			}
		}
	}
	return slices.Concat(deletes, roles, stops)
}
