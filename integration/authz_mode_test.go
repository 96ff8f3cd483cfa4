package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAuthzModeConfiguresSecurity(t *testing.T) {
	for _, tc := range []struct {
		overrides []string
		want      bool
	}{
		{nil, false},
		{[]string{"broker.id=1", "zookeeper.connect=127.0.0.1:2181", "min.insync.replicas=2"}, false},
		{[]string{"group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1"}, false},
		{[]string{"listeners=PLAINTEXT://{addr},CLIENT://127.0.0.1:9093"}, true},
		{[]string{"advertised.listeners=PLAINTEXT://kafka:9092"}, true},
		{[]string{"listener.security.protocol.map=BROKER:PLAINTEXT"}, true},
		{[]string{"listener.name.sasl_ssl.plain.sasl.jaas.config=x"}, true},
		{[]string{"inter.broker.listener.name=BROKER"}, true},
		{[]string{"sasl.enabled.mechanisms=PLAIN"}, true},
		{[]string{"ssl.keystore.type=PEM"}, true},
		{[]string{"authorizer.class.name=kafka.security.authorizer.AclAuthorizer"}, true},
		{[]string{"super.users=User:admin"}, true},
		{[]string{"allow.everyone.if.no.acl.found=true"}, true},
		// Names that merely start like a security key are not one.
		{[]string{"listenersx=1", "ssl_thing=1"}, false},
	} {
		if got := configuresSecurity(tc.overrides); got != tc.want {
			t.Errorf("configuresSecurity(%q) = %v, want %v", tc.overrides, got, tc.want)
		}
	}
}

// The clients' grants never include ClusterAction (nor All on the
// cluster, which would imply it): inter-broker requests must come from
// the super user.
func TestAuthzModeClientGrantsLeaveOutClusterAction(t *testing.T) {
	grants := authzClientGrants()
	var clusterOps []kmsg.ACLOperation
	for _, g := range grants {
		if g.Principal != authzClientPrincipal || g.PermissionType != kmsg.ACLPermissionTypeAllow {
			t.Errorf("grant %+v: want an ALLOW for %s", g, authzClientPrincipal)
		}
		if g.ResourceType == kmsg.ACLResourceTypeCluster {
			clusterOps = append(clusterOps, g.Operation)
		}
	}
	if len(clusterOps) == 0 {
		t.Fatal("no cluster grants")
	}
	for _, bad := range []kmsg.ACLOperation{kmsg.ACLOperationClusterAction, kmsg.ACLOperationAll} {
		if slices.Contains(clusterOps, bad) {
			t.Errorf("the clients' cluster grants include %v", bad)
		}
	}
	settings := strings.Join(authzModeSettings("127.0.0.1:1"), "\n")
	for _, want := range []string{"allow.everyone.if.no.acl.found=false", "super.users=User:broker", "inter.broker.listener.name=SASL_PLAINTEXT"} {
		if !strings.Contains(settings, want) {
			t.Errorf("authorization mode's settings lack %q", want)
		}
	}
}

// TestClusterAuthzModeBrokersAreSuperUsers shows, in authorization mode
// only, that the brokers of a cluster really authenticate as the super
// user: replication and the controller's views arrive on the SASL_PLAINTEXT
// inter-broker listener and never on the clients' PLAINTEXT one, and the
// requests only a broker may send are refused to the clients' principal,
// which has every grant but ClusterAction.
func TestClusterAuthzModeBrokersAreSuperUsers(t *testing.T) {
	if !authzModeOn() {
		t.Skipf("shows what %s=1 sets up; without it there is no authorizer", authzModeEnv)
	}
	const topic = "authz-mode"
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second})
	states := c.createTopic(topic, 3, nil)
	// acks=all with min.insync.replicas=2: the followers must fetch.
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	for i := range 30 {
		if err := cl.ProduceSync(testContext(t, 30*time.Second), kgo.StringRecord(fmt.Sprintf("r%d", i))).FirstErr(); err != nil {
			t.Fatalf("producing as %s: %v", authzClientPrincipal, err)
		}
	}
	for id := int32(1); id <= 3; id++ {
		checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			m, err := scrapeMetrics(c.metrics[id-1])
			if err != nil {
				return err
			}
			count := func(listener, request string) float64 {
				return m[metricKey("kbroker_requests_total", "listener", listener, "request", request)]
			}
			if n := count("SASL_PLAINTEXT", "FetchFollower"); n == 0 {
				return fmt.Errorf("broker %d: no follower fetch on SASL_PLAINTEXT", id)
			}
			for _, r := range []string{"FetchFollower", "UpdateMetadata", "AlterPartition", "LeaderAndIsr"} {
				if n := count("PLAINTEXT", r); n != 0 {
					t.Errorf("broker %d: %v %s requests on the clients' PLAINTEXT listener", id, n, r)
				}
			}
			return nil
		})
	}

	// What only a broker may send, sent by the clients' principal.
	leader := states[0].Leader
	md, err := c.metadataFrom(leader, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var topicID [16]byte
	for _, mt := range md.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			topicID = mt.TopicID
		}
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.ReplicaState.ID = leader%3+1, leader%3+1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = 0, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	resp, err := c.request(leader, 5*time.Second, fetch)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	refused := fr.ErrorCode == kerr.TopicAuthorizationFailed.Code || fr.ErrorCode == kerr.ClusterAuthorizationFailed.Code
	for _, rt := range fr.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode == kerr.TopicAuthorizationFailed.Code {
				refused = true
			} else if len(rp.RecordBatches) > 0 {
				t.Errorf("a follower fetch as %s got %d bytes of %s-%d", authzClientPrincipal, len(rp.RecordBatches), topic, rp.Partition)
			}
		}
	}
	if !refused {
		t.Errorf("a follower fetch as %s was not refused: %+v", authzClientPrincipal, fr)
	}

	update := kmsg.NewPtrUpdateMetadataRequest()
	update.ControllerID, update.ControllerEpoch, update.BrokerEpoch = 99, 0, -1
	shutdown := kmsg.NewPtrControlledShutdownRequest()
	shutdown.BrokerID, shutdown.BrokerEpoch = 99, -1
	alter := kmsg.NewPtrAlterPartitionRequest()
	alter.BrokerID, alter.BrokerEpoch = 99, -1
	for _, req := range []kmsg.Request{update, shutdown, alter} {
		r, err := c.request(leader, 5*time.Second, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		var code int16
		switch r := r.(type) {
		case *kmsg.UpdateMetadataResponse:
			code = r.ErrorCode
		case *kmsg.ControlledShutdownResponse:
			code = r.ErrorCode
		case *kmsg.AlterPartitionResponse:
			code = r.ErrorCode
		}
		if code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("%s as %s answered error code %d, want CLUSTER_AUTHORIZATION_FAILED", kmsg.NameForKey(req.Key()), authzClientPrincipal, code)
		}
	}
}
