package server

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/replica"
)

func tpOf(topic string, p int32) replica.TopicPartition {
	return replica.TopicPartition{Topic: topic, Partition: p}
}

func TestPlanReplicas(t *testing.T) {
	oldID, newID, otherID := [16]byte{1}, [16]byte{2}, [16]byte{3}
	brokers := []controller.BrokerInfo{{ID: 1}, {ID: 2}, {ID: 3}}
	view := func(deleted [][16]byte, topics ...*controller.Topic) *controller.Metadata {
		md := &controller.Metadata{Brokers: brokers, Topics: map[string]*controller.Topic{}, DeletedTopicIDs: deleted}
		for _, t := range topics {
			md.Topics[t.Name] = t
		}
		return md
	}
	topic := func(name string, id [16]byte, parts ...controller.PartitionState) *controller.Topic {
		return &controller.Topic{Name: name, ID: id, Partitions: parts}
	}
	ps := func(leader int32, replicas ...int32) controller.PartitionState {
		return controller.PartitionState{Leader: leader, Replicas: replicas, ISR: replicas}
	}
	for _, tc := range []struct {
		name string
		md   *controller.Metadata
		kept []replica.Replica
		want []string
	}{
		{
			name: "new incarnation replaces an open replica: delete first, then follow",
			md:   view([][16]byte{oldID}, topic("t", newID, ps(2, 2, 1))),
			kept: []replica.Replica{{TopicPartition: tpOf("t", 0), TopicID: oldID, Open: true}},
			want: []string{"delete t-0", "follow t-0"},
		},
		{
			name: "new incarnation without the tombstone (dropped, or missed): the name decides",
			md:   view(nil, topic("t", newID, ps(1, 1, 2))),
			kept: []replica.Replica{{TopicPartition: tpOf("t", 0), TopicID: oldID, Open: true}},
			want: []string{"delete t-0", "lead t-0"},
		},
		{
			name: "recreated with fewer partitions and not here: every old replica deleted",
			md:   view([][16]byte{oldID}, topic("t", newID, ps(2, 2, 3))),
			kept: []replica.Replica{
				{TopicPartition: tpOf("t", 0), TopicID: oldID, Open: true},
				{TopicPartition: tpOf("t", 1), TopicID: oldID, Open: true},
				{TopicPartition: tpOf("t", 2), TopicID: oldID},
			},
			want: []string{"delete t-0", "delete t-1", "delete t-2"},
		},
		{
			name: "deleted topic only on disk (offline through the deletion)",
			md:   view([][16]byte{oldID}),
			kept: []replica.Replica{{TopicPartition: tpOf("t", 0), TopicID: oldID}},
			want: []string{"delete t-0"},
		},
		{
			name: "topic missing from the view but not deleted: stop serving, keep data",
			md:   view(nil),
			kept: []replica.Replica{{TopicPartition: tpOf("t", 0), TopicID: otherID, Open: true}, {TopicPartition: tpOf("u", 0), TopicID: otherID}},
			want: []string{"stop t-0"},
		},
		{
			name: "same incarnation: roles only; no live leader: stop",
			md:   view(nil, topic("t", oldID, ps(1, 1, 2), ps(2, 2, 1), ps(-1, 1, 2))),
			kept: []replica.Replica{{TopicPartition: tpOf("t", 2), TopicID: oldID, Open: true}},
			want: []string{"lead t-0", "follow t-1", "stop t-2"},
		},
		{
			name: "reassigned to other brokers: open or only on disk, deleted",
			md:   view(nil, topic("t", oldID, ps(2, 2, 3), ps(3, 3, 2))),
			kept: []replica.Replica{{TopicPartition: tpOf("t", 0), TopicID: oldID, Open: true}, {TopicPartition: tpOf("t", 1), TopicID: oldID}},
			want: []string{"delete t-0", "delete t-1"},
		},
		{
			name: "not assigned here and no recorded id: stop, keep data",
			md:   view(nil, topic("t", oldID, ps(2, 2, 3))),
			kept: []replica.Replica{{TopicPartition: tpOf("t", 0), Open: true}},
			want: []string{"stop t-0"},
		},
		{
			name: "a log without a recorded id is adopted, not deleted",
			md:   view(nil, topic("t", newID, ps(1, 1))),
			kept: []replica.Replica{{TopicPartition: tpOf("t", 0), Open: true}},
			want: []string{"lead t-0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range planReplicas(1, tc.md, tc.kept) {
				got = append(got, fmt.Sprintf("%v %v", a.kind, a.tp))
			}
			// Deletions come first; within a kind the order is free.
			sortWithinKind(got)
			want := slices.Clone(tc.want)
			sortWithinKind(want)
			if !slices.Equal(got, want) {
				t.Fatalf("plan = %q, want %q", got, want)
			}
			for i, a := range got {
				if i > 0 && a[:6] == "delete" && got[i-1][:6] != "delete" {
					t.Fatalf("a deletion after another action: %q", got)
				}
			}
		})
	}
}

// sortWithinKind sorts plan lines, keeping deletions first.
func sortWithinKind(lines []string) {
	slices.SortStableFunc(lines, func(a, b string) int {
		da, db := a[:6] == "delete", b[:6] == "delete"
		switch {
		case da && !db:
			return -1
		case db && !da:
			return 1
		}
		if a < b {
			return -1
		}
		if a > b {
			return 1
		}
		return 0
	})
}

// modelReplica is the view-application model's replica: the topic id its
// data belongs to, whether it is open, and its role.
type modelReplica struct {
	id   [16]byte
	open bool
	role replicaActionKind // actLead, actFollow or actStop
}

// applyPlanToModel executes a plan the way applyMetadataErr drives the
// replica manager, except that opening a partition never replaces another
// incarnation by itself: the plan alone must delete it first.
func applyPlanToModel(state map[replica.TopicPartition]*modelReplica, plan []replicaAction) {
	for _, a := range plan {
		r := state[a.tp]
		switch a.kind {
		case actDelete:
			delete(state, a.tp)
		case actStop:
			if r != nil {
				r.role = actStop
			}
		case actLead, actFollow:
			if r == nil {
				r = &modelReplica{id: a.topic.ID}
				state[a.tp] = r
			}
			r.open, r.role = true, a.kind
		}
	}
}

func keptOf(state map[replica.TopicPartition]*modelReplica) []replica.Replica {
	var out []replica.Replica
	for tp, r := range state {
		out = append(out, replica.Replica{TopicPartition: tp, TopicID: r.id, Open: r.open})
	}
	return out
}

// viewHistory makes n views of a 3-broker cluster as a controller would:
// topics created, deleted and re-created under a few names with varying
// partition counts and replication factors, leaders moving, brokers dying
// and returning. Deleted topic ids stay in every later view (no broker
// confirms in this history).
func viewHistory(rng *rand.Rand, n int) []*controller.Metadata {
	names := []string{"a", "b", "c"}
	live := map[int32]bool{1: true, 2: true, 3: true}
	topics := map[string]*controller.Topic{}
	var deleted [][16]byte
	var nextID byte
	var views []*controller.Metadata
	for seq := 1; seq <= n; seq++ {
		name := names[rng.IntN(len(names))]
		switch op := rng.IntN(10); {
		case op < 3 && topics[name] == nil:
			nextID++
			t := &controller.Topic{Name: name, ID: [16]byte{nextID}}
			rf := 1 + rng.IntN(3)
			for p := 0; p < 1+rng.IntN(3); p++ {
				replicas := []int32{1, 2, 3}
				rng.Shuffle(3, func(i, j int) { replicas[i], replicas[j] = replicas[j], replicas[i] })
				replicas = replicas[:rf]
				t.Partitions = append(t.Partitions, controller.PartitionState{Replicas: replicas, Leader: replicas[0], ISR: replicas})
			}
			topics[name] = t
		case op < 5 && topics[name] != nil:
			deleted = append(deleted, topics[name].ID)
			delete(topics, name)
		case op < 8 && topics[name] != nil:
			t := topics[name]
			p := rng.IntN(len(t.Partitions))
			ps := t.Partitions[p]
			nt := &controller.Topic{Name: t.Name, ID: t.ID, Partitions: slices.Clone(t.Partitions)}
			if rng.IntN(4) == 0 {
				ps.Leader = -1
			} else {
				ps.Leader = ps.Replicas[rng.IntN(len(ps.Replicas))]
			}
			ps.LeaderEpoch++
			nt.Partitions[p] = ps
			topics[name] = nt
		case op < 9 && topics[name] != nil:
			// A reassignment completes: the partition's replicas change.
			t := topics[name]
			p := rng.IntN(len(t.Partitions))
			replicas := []int32{1, 2, 3}
			rng.Shuffle(3, func(i, j int) { replicas[i], replicas[j] = replicas[j], replicas[i] })
			replicas = replicas[:1+rng.IntN(3)]
			nt := &controller.Topic{Name: t.Name, ID: t.ID, Partitions: slices.Clone(t.Partitions)}
			nt.Partitions[p] = controller.PartitionState{Replicas: replicas, Leader: replicas[0], ISR: replicas, LeaderEpoch: t.Partitions[p].LeaderEpoch + 1}
			topics[name] = nt
		default:
			id := int32(2 + rng.IntN(2)) // broker 1 is the one under test
			live[id] = !live[id]
		}
		md := &controller.Metadata{Topics: map[string]*controller.Topic{}, DeletedTopicIDs: slices.Clone(deleted), Sequence: uint64(seq)}
		for id := int32(1); id <= 3; id++ {
			if live[id] {
				md.Brokers = append(md.Brokers, controller.BrokerInfo{ID: id})
			}
		}
		for k, v := range topics {
			md.Topics[k] = v
		}
		views = append(views, md)
	}
	return views
}

// TestPlanReplicasAnySubsequence: whichever views a broker gets, dropped,
// late or reordered (an older view is ignored, as Cluster.ApplyUpdate does),
// and across restarts (open replicas become logs on disk), it ends in the
// state of the newest view it applied: it serves exactly the partitions
// that view assigns it, in that view's roles, and keeps no data of any
// other topic id.
func TestPlanReplicasAnySubsequence(t *testing.T) {
	const self = 1
	for seed := uint64(1); seed <= 3000; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		views := viewHistory(rng, 5+rng.IntN(40))
		var got []*controller.Metadata
		for _, v := range views {
			if rng.IntN(2) == 0 {
				got = append(got, v)
			}
		}
		for i := range got { // some arrive late
			if j := i + rng.IntN(3); j < len(got) {
				got[i], got[j] = got[j], got[i]
			}
		}
		state := map[replica.TopicPartition]*modelReplica{}
		var last *controller.Metadata
		for _, v := range got {
			if rng.IntN(10) == 0 { // a restart: nothing open, the logs stay, any view is news
				for _, r := range state {
					r.open, r.role = false, actStop
				}
				last = nil
			}
			if last != nil && v.Sequence <= last.Sequence {
				continue
			}
			last = v
			applyPlanToModel(state, planReplicas(self, v, keptOf(state)))
		}
		if last == nil {
			continue
		}
		for tp, r := range state {
			lt := last.Topics[tp.Topic]
			if lt == nil && !last.IsDeleted(r.id) && r.role == actStop {
				continue // a topic this view does not know of: kept, not served
			}
			if lt == nil || lt.ID != r.id {
				t.Fatalf("seed %d: %v keeps data of topic id %x; the newest view (seq %d) has %+v", seed, tp, r.id[0], last.Sequence, lt)
			}
		}
		for _, lt := range last.Topics {
			for p, ps := range lt.Partitions {
				tp := tpOf(lt.Name, int32(p))
				r := state[tp]
				_, leaderLive := last.Broker(ps.Leader)
				var want replicaActionKind = -1
				switch {
				case !slices.Contains(ps.Replicas, self):
					if r != nil {
						t.Fatalf("seed %d: %v kept (%+v) though the newest view assigns it to %v", seed, tp, r, ps.Replicas)
					}
					continue
				case ps.Leader == self:
					want = actLead
				case ps.Leader >= 0 && leaderLive:
					want = actFollow
				}
				if want < 0 {
					if r != nil && r.open && r.role != actStop {
						t.Fatalf("seed %d: %v served (%v) with no live leader", seed, tp, r.role)
					}
					continue
				}
				if r == nil || !r.open || r.role != want || r.id != lt.ID {
					t.Fatalf("seed %d: %v = %+v, want %v of topic id %x", seed, tp, r, want, lt.ID[0])
				}
			}
		}
	}
}
