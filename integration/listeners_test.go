package integration

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listenerView is what a client connected to one address is told: the
// brokers of Metadata, the partition leaders' addresses and the group
// coordinator of FindCoordinator.
type listenerView struct {
	brokers     map[int32]string
	coordinator string
}

// viewThrough asks the broker at addr, and only it, for Metadata of topic
// and the coordinator of group.
func viewThrough(t *testing.T, addr, topic, group string) listenerView {
	t.Helper()
	ctx := testContext(t, 20*time.Second)
	v := listenerView{brokers: map[int32]string{}}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, rt)
	mresp, err := rawRequest(ctx, addr, mreq)
	if err != nil {
		t.Fatalf("Metadata through %s: %v", addr, err)
	}
	for _, b := range mresp.(*kmsg.MetadataResponse).Brokers {
		v.brokers[b.NodeID] = b.Host + ":" + strconv.Itoa(int(b.Port))
	}
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		freq := kmsg.NewPtrFindCoordinatorRequest()
		freq.Version = 4
		freq.CoordinatorKeys = []string{group}
		fresp, err := rawRequest(ctx, addr, freq)
		if err != nil {
			return err
		}
		resp := fresp.(*kmsg.FindCoordinatorResponse)
		if len(resp.Coordinators) != 1 {
			return fmt.Errorf("FindCoordinator through %s: %d coordinators", addr, len(resp.Coordinators))
		}
		r := resp.Coordinators[0]
		if r.ErrorCode != 0 {
			return fmt.Errorf("FindCoordinator through %s: error %d", addr, r.ErrorCode)
		}
		v.coordinator = r.Host + ":" + strconv.Itoa(int(r.Port))
		return nil
	})
	return v
}

// rawRequest sends req, its version set, to addr itself (no
// metadata-driven routing).
func rawRequest(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	conn := kafkaconn.New(addr, "listeners-test")
	defer conn.Close()
	return conn.Request(ctx, req)
}

// groupRoundTrip produces n records to topic through addr and consumes
// them back in a consumer group, also through addr; the client follows
// whatever addresses the broker hands out.
func groupRoundTrip(t *testing.T, addr, topic, group string, n int) {
	t.Helper()
	ctx := testContext(t, 60*time.Second)
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(group + "-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce through %s: %v", addr, err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	mine := 0
	for mine < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("group %s through %s: %d of %d records after %v", group, addr, mine, n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d through %s: %v", tp, p, addr, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) > len(group) && string(r.Value[:len(group)+1]) == group+"-" {
				mine++
			}
		})
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit through %s: %v", addr, err)
	}
}

// TestTwoListenersDockerStyle is the Docker Compose set-up: one broker
// with a listener for other containers (advertised under a name only they
// resolve; "localhost" here) and one for the host. Each client is told only
// its own listener's address, in Metadata and FindCoordinator, and
// produces and consumes in a group through it.
func TestTwoListenersDockerStyle(t *testing.T) {
	hostPort := freePort(t)
	hostAddr := "127.0.0.1:" + strconv.Itoa(hostPort)
	b := StartBroker(t,
		"listeners=PLAINTEXT://{addr},PLAINTEXT_HOST://"+hostAddr,
		"advertised.listeners=PLAINTEXT://localhost:{port},PLAINTEXT_HOST://"+hostAddr,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"offsets.topic.num.partitions=1",
		"group.initial.rebalance.delay.ms=0")
	_, port, _ := net.SplitHostPort(b.Addr())
	internal := "localhost:" + port
	topic := "docker-style"
	createTopic(t, adminAt(t, hostAddr), topic, 2, nil)
	for _, tc := range []struct{ dial, want string }{
		{b.Addr(), internal},
		{hostAddr, hostAddr},
	} {
		v := viewThrough(t, tc.dial, topic, "g-"+tc.want)
		if len(v.brokers) != 1 || v.brokers[0] != tc.want {
			t.Errorf("Metadata through %s lists brokers %v, want only 0 at %s", tc.dial, v.brokers, tc.want)
		}
		if v.coordinator != tc.want {
			t.Errorf("FindCoordinator through %s names %s, want %s", tc.dial, v.coordinator, tc.want)
		}
	}
	groupRoundTrip(t, b.Addr(), topic, "containers", 20)
	groupRoundTrip(t, hostAddr, topic, "host", 20)
}

// TestClusterInterBrokerListener runs three brokers with two listeners
// each: BROKER for replication and the controller, CLIENT for clients.
// Clients are told only CLIENT addresses; followers fetch, and the
// controller's requests arrive, only on BROKER (Kafka's request metrics
// by listener show it).
func TestClusterInterBrokerListener(t *testing.T) {
	clientAddrs := map[int]string{}
	for id := 1; id <= 3; id++ {
		clientAddrs[id] = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second,
		extra: []string{
			"listener.security.protocol.map=BROKER:PLAINTEXT,CLIENT:PLAINTEXT",
			"inter.broker.listener.name=BROKER",
		},
		perBroker: func(id int) []string {
			return []string{"listeners=BROKER://{addr},CLIENT://" + clientAddrs[id]}
		},
	})
	topic := "two-listeners"
	ctx := testContext(t, 30*time.Second)
	if resp, err := adminAt(t, clientAddrs[1]).CreateTopic(ctx, 3, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, resp.Err)
	}
	v := viewThrough(t, clientAddrs[2], topic, "g")
	for id := int32(1); id <= 3; id++ {
		if v.brokers[id] != clientAddrs[int(id)] {
			t.Errorf("Metadata through CLIENT lists broker %d at %q, want its CLIENT address %s", id, v.brokers[id], clientAddrs[int(id)])
		}
	}
	if v.coordinator == "" || v.coordinator == c.broker(1).Addr() || v.coordinator == c.broker(2).Addr() || v.coordinator == c.broker(3).Addr() {
		t.Errorf("FindCoordinator through CLIENT names %q, a BROKER address", v.coordinator)
	}
	groupRoundTrip(t, clientAddrs[1], topic, "clients", 30)

	// Every partition has followers on two brokers: they must have
	// fetched through BROKER, and no follower fetch came through CLIENT.
	// The controller's views (UpdateMetadata) reach the other brokers
	// through BROKER too.
	var views float64
	for id := int32(1); id <= 3; id++ {
		checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			m, err := scrapeMetrics(c.metrics[id-1])
			if err != nil {
				return err
			}
			follower := m[metricKey("kbroker_requests_total", "listener", "BROKER", "request", "FetchFollower")]
			wrong := m[metricKey("kbroker_requests_total", "listener", "CLIENT", "request", "FetchFollower")]
			wrongViews := m[metricKey("kbroker_requests_total", "listener", "CLIENT", "request", "UpdateMetadata")]
			if follower == 0 || wrong != 0 || wrongViews != 0 {
				return fmt.Errorf("broker %d: FetchFollower on BROKER %v, on CLIENT %v; UpdateMetadata on CLIENT %v", id, follower, wrong, wrongViews)
			}
			views += m[metricKey("kbroker_requests_total", "listener", "BROKER", "request", "UpdateMetadata")]
			return nil
		})
	}
	if views == 0 {
		t.Errorf("no UpdateMetadata arrived on any broker's BROKER listener")
	}
}
