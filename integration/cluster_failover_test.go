package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestClusterControllerKill: kill -9 of the controller. Within the session
// timeout (plus ZooKeeper's expiry tick) another broker is controller,
// /controller_epoch grew by exactly one and /controller names the new one;
// the dead broker's RF=1 partitions are offline (leader -1), the others
// keep their leaders; CreateTopics (franz-go retries NOT_CONTROLLER at the
// new controller) and Metadata keep working. The killed broker restarted
// on the same port and data dir is an ordinary broker, leads its
// partitions again and still has every record.
func TestClusterControllerKill(t *testing.T) {
	const partitions = 12
	c := startCluster(t, clusterOpts{brokers: 3})
	c.createTopicVia(t, 1, "before", partitions, nil)
	before := c.waitAgreed(t, clusterSettle, allLed("before", partitions))
	produced := produceToPartitions(t, "before", seq(partitions), 100, "before", c.broker(1).Addr())

	old := before.controller
	epoch := c.controllerEpoch()
	var survivors []string
	for id := int32(1); id <= 3; id++ {
		if id != old {
			survivors = append(survivors, c.broker(id).Addr())
		}
	}
	t.Logf("controller is broker %d at epoch %d; killing it", old, epoch)

	c.broker(old).Kill()
	killed := time.Now()
	// Poll until every survivor names a new controller.
	var after clusterView
	deadline := killed.Add(clusterSession + clusterSessionSlack + 5*time.Second)
	for {
		v, err := c.agreed(time.Second)
		if err == nil && v.controller >= 0 && v.controller != old && !v.hasBroker(old) {
			after = v
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new controller %v after killing broker %d: view %s, err %v", time.Since(killed), old, v.key(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(killed)
	t.Logf("broker %d is controller %v after the kill (session timeout %v)", after.controller, took.Round(time.Millisecond), clusterSession)
	if took > clusterSession+clusterSessionSlack {
		t.Errorf("new controller after %v, want within the session timeout %v (+%v for ZooKeeper's expiry tick)", took, clusterSession, clusterSessionSlack)
	}
	if got := c.controllerEpoch(); got != epoch+1 {
		t.Errorf("/controller_epoch is %d after one failover, want %d", got, epoch+1)
	}
	data, _, err := c.zkGet("/controller")
	if err != nil {
		t.Fatalf("reading /controller: %v", err)
	}
	var zc struct {
		BrokerID int32 `json:"brokerid"`
	}
	if err := json.Unmarshal(data, &zc); err != nil || zc.BrokerID != after.controller {
		t.Errorf("/controller holds %s (%v), want brokerid %d", data, err, after.controller)
	}
	// The dead broker's partitions are offline, the others keep their
	// leader.
	for p, l := range before.leaders["before"] {
		got := after.leaders["before"][p]
		switch {
		case l == old && got != -1:
			t.Errorf("partition %d led by the killed broker %d now has leader %d, want -1 (RF=1: offline)", p, old, got)
		case l != old && got != l:
			t.Errorf("partition %d led by live broker %d now has leader %d", p, l, got)
		}
	}

	// Admin and Metadata keep working, through the survivors only.
	adm := adminAt(t, survivors...)
	ctx := testContext(t, 30*time.Second)
	if resp, err := adm.CreateTopic(ctx, 4, 1, nil, "during"); err != nil || resp.Err != nil {
		t.Fatalf("CreateTopics after the failover: %v %v", err, resp.Err)
	}
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatalf("Metadata after the failover: %v", err)
	}
	if md.Controller != after.controller {
		t.Errorf("kadm Metadata names controller %d, want %d", md.Controller, after.controller)
	}
	c.waitAgreed(t, clusterSettle, allLed("during", 4))

	// Back on the same port and data dir: an ordinary broker that leads
	// its partitions again.
	c.broker(old).Restart()
	returned := time.Now()
	back := c.waitAgreed(t, clusterSettle, func(v clusterView) error {
		if !v.hasBroker(old) {
			return fmt.Errorf("broker %d not listed", old)
		}
		if err := allLed("before", partitions)(v); err != nil {
			return err
		}
		return allLed("during", 4)(v)
	})
	t.Logf("restarted broker %d serves again %v after its restart", old, time.Since(returned).Round(time.Millisecond))
	if back.controller != after.controller {
		t.Errorf("controller is %d after broker %d returned, want %d unchanged", back.controller, old, after.controller)
	}
	if back.controller == old {
		t.Errorf("the restarted broker %d became controller again", old)
	}
	if got := c.controllerEpoch(); got != epoch+1 {
		t.Errorf("/controller_epoch is %d after the restart, want %d (no new election)", got, epoch+1)
	}
	if !slices.Equal(back.leaders["before"], before.leaders["before"]) {
		// RF=1: the only replica is the only possible leader.
		t.Errorf("leaders after the return %v, want %v", back.leaders["before"], before.leaders["before"])
	}
	// Its data is all there: read every partition, through the restarted
	// broker itself.
	consumeAndCompare(t, c.broker(old).Addr(), "before", produced)
	// And it takes writes again.
	mine := partitionsLedBy(back, "before", old)
	if len(mine) == 0 {
		t.Fatalf("broker %d leads no partition of before", old)
	}
	produceToPartitions(t, "before", mine, 10, "after", c.broker(old).Addr())
	// Nobody else lost its session on the way.
	for id := int32(1); id <= 3; id++ {
		if logContains(c.broker(id), "ZooKeeper session expired") {
			t.Errorf("broker %d lost its ZooKeeper session during the test", id)
		}
	}
}

func seq(n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// partitionsLedBy lists the partitions of topic that broker id leads.
func partitionsLedBy(v clusterView, topic string, id int32) []int32 {
	var out []int32
	for p, l := range v.leaders[topic] {
		if l == id {
			out = append(out, int32(p))
		}
	}
	return out
}
