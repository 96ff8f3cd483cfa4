package integration

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReplicationPipelinedProduce: produce requests sent back to back on
// one connection are appended in order while an earlier acks=all request
// still waits for its followers, and every answer comes back in request
// order once the followers catch up (a non-produce request after them is
// answered last).
func TestReplicationPipelinedProduce(t *testing.T) {
	const topic = "pipelined"
	// A long lag time: the paused followers stay in the ISR, so the
	// acks=all requests wait for them rather than for an ISR shrink.
	c := startCluster(t, clusterOpts{brokers: 3, session: isrSession, replicated: true, lag: 30 * time.Second})
	states := c.createTopic(topic, 1, nil)
	leader := states[0].Leader
	followers := otherThan(3, leader)
	rc := dialRaw(t, c.broker(leader).Addr())

	stopped := time.Now()
	for _, id := range followers {
		c.broker(id).Signal(syscall.SIGSTOP)
	}
	for _, id := range followers {
		waitStopped(t, c.broker(id), 5*time.Second) // or they could still copy the first request
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			for _, id := range followers {
				c.broker(id).Signal(syscall.SIGCONT)
			}
		}
	}
	defer resume()

	type sent struct {
		corr int32
		resp kmsg.Response
	}
	var reqs []sent
	for i, acks := range []int16{-1, -1, 1, -1} {
		req := produceRequest(7, acks, topic, rawBatch(i+1, 20))
		req.TimeoutMillis = 20000
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		reqs = append(reqs, sent{rc.send(req), resp})
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 7
	mdResp := md.ResponseKind()
	mdResp.SetVersion(md.GetVersion())
	reqs = append(reqs, sent{rc.send(md), mdResp})

	// All four produce requests (1+2+3+4 records) are in the leader's log
	// while the first still waits for the paused followers.
	checkFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		_, leo, err := c.partitionOffsets(leader, topic, 0)
		if err != nil {
			return err
		}
		if leo != 10 {
			return fmt.Errorf("leader log end %d, want 10", leo)
		}
		return nil
	})
	if paused := time.Since(stopped); paused > isrSession-2*time.Second {
		t.Fatalf("followers paused %v, too close to the session timeout %v for this test to mean anything", paused, isrSession)
	}
	rc.conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := rc.conn.Read(make([]byte, 1)); n != 0 {
		t.Fatal("an acks=all produce was answered while its followers were paused")
	}
	resume()

	wantBase := int64(0)
	for i, r := range reqs {
		rc.read(r.corr, r.resp)
		pr, ok := r.resp.(*kmsg.ProduceResponse)
		if !ok {
			if i != len(reqs)-1 {
				t.Fatalf("response %d is not a produce response", i)
			}
			continue
		}
		got := pr.Topics[0].Partitions[0]
		if got.ErrorCode != 0 || got.BaseOffset != wantBase {
			t.Errorf("produce %d: %s at base offset %d, want success at %d", i, errName(got.ErrorCode), got.BaseOffset, wantBase)
		}
		wantBase += int64(i + 1)
	}
	if end := c.waitInSyncEverywhere(20*time.Second, topic, 0); end != 10 {
		t.Errorf("every replica ends at %d, want 10 records", end)
	}
}

// TestReplicationNewPartitionsNotHeldByLongPoll: a follower whose fetch is
// parked at a leader (nothing new to copy, replica.fetch.wait.max.ms long)
// starts copying a partition it is given at once, instead of after the
// long poll runs out, so a new topic's first acks=all writes are not
// delayed by it.
func TestReplicationNewPartitionsNotHeldByLongPoll(t *testing.T) {
	const fetchWait = 6 * time.Second
	c := startCluster(t, clusterOpts{brokers: 3, session: isrSession, replicated: true, lag: 30 * time.Second,
		extra: []string{"replica.fetch.wait.max.ms=" + strconv.Itoa(int(fetchWait/time.Millisecond))}})
	// Every broker follows every other one for this idle topic, so each
	// follower has a fetch parked at each leader.
	c.createTopic("idle", 3, nil)
	const topic = "fresh"
	states := c.createTopic(topic, 3, nil)
	created := time.Now()
	for p := int32(0); p < 3; p++ {
		var code int16
		var err error
		for {
			code, err = c.rawProduce(states[p].Leader, topic, p, -1, 10*time.Second)
			if err == nil && code == 0 {
				break
			}
			if time.Since(created) > fetchWait+5*time.Second {
				t.Fatalf("acks=all produce to %s-%d: %s %v", topic, p, errName(code), err)
			}
			time.Sleep(20 * time.Millisecond) // the leader may still be applying its view
		}
		t.Logf("%s-%d: first acks=all write acknowledged %v after the topic settled", topic, p, time.Since(created).Round(time.Millisecond))
	}
	if took := time.Since(created); took > 2*time.Second {
		t.Errorf("the first acks=all writes to a new topic took %v; followers waited out their parked fetches (%v)", took, fetchWait)
	}
}
