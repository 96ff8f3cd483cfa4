package integration

// Share partition state is durable (issue 17). On a 3-broker ZooKeeper
// cluster (RF 3 for the topic and __consumer_offsets), a raw member
// accepts part of a partition's records and holds others acquired but
// unacknowledged, then a broker is killed with -9; a franz-go share
// consumer then gets every record not accepted before (the held ones
// again: at-least-once) and no accepted record.
//
//   - TestShareGroupLeaderFailover: the partition's leader is killed; the
//     new leader loads the state from the group's coordinator.
//   - TestShareGroupCoordinatorFailover: the group's coordinator (a broker
//     that does not lead the partition) is killed; its
//     __consumer_offsets partition moves and is replayed; once the killed
//     broker is back in the ISR the partition leader is killed too, so
//     the next leader loads the state from the new coordinator.

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareAcceptAndHold has a raw member accept the records of every other
// fetch and hold the others until total records are acquired; it returns
// the offsets whose acceptance was answered (durable) and those held.
func shareAcceptAndHold(t *testing.T, cl *kgo.Client, group, topic, member string, total int) (accepted, held map[int64]bool, leader int32) {
	t.Helper()
	m := newShareRaw(t, cl, group, member, topic)
	m.maxRecords = 20
	accepted, held = map[int64]bool{}, map[int64]bool{}
	var pendingAck []int64
	for round := 0; len(accepted)+len(held)+len(pendingAck) < total*3 && round < 100; round++ {
		p, code := m.fetch(2*time.Second, pendingAck...)
		if code != 0 || p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
			t.Fatalf("round %d: fetch %v, partition %v, ack %v", round, kerr.ErrorForCode(code), kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(p.AcknowledgeErrorCode))
		}
		for i := 0; i < len(pendingAck); i += 3 { // the answer came: durable
			for o := pendingAck[i]; o <= pendingAck[i+1]; o++ {
				accepted[o] = true
			}
		}
		pendingAck = nil
		for _, r := range p.AcquiredRecords {
			if round%2 == 0 {
				pendingAck = append(pendingAck, r.FirstOffset, r.LastOffset, 1)
				continue
			}
			for o := r.FirstOffset; o <= r.LastOffset; o++ {
				held[o] = true
			}
		}
		if len(p.AcquiredRecords) == 0 && len(pendingAck) == 0 {
			break
		}
		if len(accepted)+len(held)+countAcks(pendingAck) >= total && len(pendingAck) == 0 {
			break
		}
	}
	for i := 0; i < len(pendingAck); i += 3 {
		if top, part := m.ack(m.epoch, pendingAck[i], pendingAck[i+1], 1); top != 0 || part != 0 {
			t.Fatalf("last ack: %d/%d", top, part)
		}
		for o := pendingAck[i]; o <= pendingAck[i+1]; o++ {
			accepted[o] = true
		}
	}
	if len(accepted) == 0 || len(held) == 0 || len(accepted)+len(held) != total {
		t.Fatalf("%d accepted, %d held of %d", len(accepted), len(held), total)
	}
	return accepted, held, m.leader
}

func countAcks(acks []int64) int {
	n := 0
	for i := 0; i+1 < len(acks); i += 3 {
		n += int(acks[i+1] - acks[i] + 1)
	}
	return n
}

// shareDrainAfterFailover consumes with a franz-go share consumer until the
// held offsets are all delivered, failing on any accepted one.
func shareDrainAfterFailover(t *testing.T, c *testCluster, group, topic string, accepted, held map[int64]bool) {
	t.Helper()
	sc := c.client(kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	defer sc.Close()
	got := map[int64]int{}
	ctx := testContext(t, 90*time.Second)
	for len(got) < len(held) && ctx.Err() == nil {
		fs := sc.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Offset]++
			if accepted[r.Offset] {
				t.Errorf("offset %d accepted before the failover was delivered again", r.Offset)
			}
		})
		sc.MarkAcks(kgo.AckAccept)
	}
	for o := range held {
		if got[o] == 0 {
			t.Errorf("held offset %d never delivered after the failover", o)
		}
	}
	if len(got) != len(held) {
		t.Fatalf("after the failover %d offsets delivered, want the %d held ones", len(got), len(held))
	}
	t.Logf("after the failover: the %d held records delivered again, none of the %d accepted ones", len(got), len(accepted))
}

// shareCoordinatorOf asks broker via for group's coordinator.
func shareCoordinatorOf(t *testing.T, c *testCluster, via int32, group string) int32 {
	t.Helper()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
	var coord int32 = -1
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		resp, err := c.request(via, 5*time.Second, fc)
		if err != nil {
			return err
		}
		fr := resp.(*kmsg.FindCoordinatorResponse)
		if len(fr.Coordinators) == 1 {
			fr.NodeID, fr.ErrorCode = fr.Coordinators[0].NodeID, fr.Coordinators[0].ErrorCode
		}
		if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
			return err
		}
		coord = fr.NodeID
		return nil
	})
	return coord
}

func TestShareGroupLeaderFailover(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second,
		extra: []string{"group.share.record.lock.duration.ms=60000"}})
	topic, group := "share-failover", "sg-failover"
	c.createTopic(topic, 1, nil)
	cl := c.client()
	defer cl.Close()
	initShareGroup(t, cl, group, topic)
	const total = 300
	produceShare(t, cl, topic, 0, total)
	accepted, held, leader := shareAcceptAndHold(t, cl, group, topic, "before", total)
	coord := shareCoordinatorOf(t, c, leader, group)
	t.Logf("killing partition leader %d (group coordinator %d): %d records accepted, %d held unacknowledged", leader, coord, len(accepted), len(held))
	c.broker(leader).Kill()
	shareDrainAfterFailover(t, c, group, topic, accepted, held)
}

func TestShareGroupCoordinatorFailover(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second,
		extra: []string{"group.share.record.lock.duration.ms=60000"}})
	topic := "share-coord-failover"
	c.createTopic(topic, 1, nil)
	cl := c.client()
	defer cl.Close()
	leader := c.mustPartState(topic, 0).Leader
	// A group whose coordinator is not the partition's leader.
	group := ""
	var coord int32
	for i := 0; i < 50 && group == ""; i++ {
		g := fmt.Sprintf("sg-coord-%d", i)
		if co := shareCoordinatorOf(t, c, leader, g); co != leader {
			group, coord = g, co
		}
	}
	if group == "" {
		t.Fatal("no group name with a coordinator other than the partition leader")
	}
	// Group configs set and described through the partition leader, which
	// does not coordinate the group: both are forwarded to the coordinator.
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.Version = 1
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.heartbeat.interval.ms", Value: kmsg.StringPtr("1500")}}
	alter.Resources = append(alter.Resources, res)
	if resp, err := c.request(leader, 10*time.Second, alter); err != nil || resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode != 0 {
		t.Fatalf("group config through a non-coordinator: %v %+v", err, resp)
	}
	desc := kmsg.NewPtrDescribeConfigsRequest()
	desc.Version = 4
	desc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: group, ConfigNames: []string{"share.heartbeat.interval.ms"}}}
	dresp, err := c.request(leader, 10*time.Second, desc)
	if err != nil {
		t.Fatal(err)
	}
	if rs := dresp.(*kmsg.DescribeConfigsResponse).Resources; len(rs) != 1 || len(rs[0].Configs) != 1 || rs[0].Configs[0].Value == nil ||
		*rs[0].Configs[0].Value != "1500" || rs[0].Configs[0].Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("group config described through a non-coordinator: %+v", rs)
	}
	initShareGroup(t, cl, group, topic)
	const total = 200
	produceShare(t, cl, topic, 0, total)
	accepted, held, _ := shareAcceptAndHold(t, cl, group, topic, "before", total)
	t.Logf("killing group coordinator %d (partition leader %d): %d records accepted, %d held", coord, leader, len(accepted), len(held))
	c.killAndRestart(coord)
	if next := shareCoordinatorOf(t, c, leader, group); next == coord {
		t.Logf("coordinator %d is back and leads the group again", next)
	} else {
		t.Logf("coordinator moved to %d", next)
	}
	// Every replica back in sync, then the partition leader goes: the next
	// leader has only the (failed-over) coordinator's state.
	c.waitPartState(60*time.Second, topic, 0, fullISR(3))
	for p := int32(0); p < 3; p++ {
		c.waitPartState(60*time.Second, "__consumer_offsets", p, fullISR(3))
	}
	c.broker(leader).Kill()
	shareDrainAfterFailover(t, c, group, topic, accepted, held)
}
