package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReplicationKillLeaderUnderLoadAuthorizer is the leader-kill scenario
// on a SASL_SSL cluster with Kafka's ACL authorizer and
// allow.everyone.if.no.acl.found=false: the brokers' own requests
// (replication, the controller's views and elections, ISR changes,
// forwarding) pass because the inter-broker principal is a super user,
// and the test clients run as alice with ACLs on the topic alone.
func TestReplicationKillLeaderUnderLoadAuthorizer(t *testing.T) {
	sec := saslSSLSecurity(t)
	sec.overrides = append(sec.overrides,
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"allow.everyone.if.no.acl.found=false",
		"super.users=User:broker")
	sec.setup = func(t *testing.T, c *testCluster) {
		// What the scenario's producers, consumer and admin calls need
		// on its topic, and nothing else: Write also gets the idempotent
		// producer its producer id (Kafka's "may write some topic").
		req := kmsg.NewPtrCreateACLsRequest()
		req.Version = 3
		for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationWrite, kmsg.ACLOperationRead, kmsg.ACLOperationDescribe} {
			cr := kmsg.NewCreateACLsRequestCreation()
			cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, "kill-leader", kmsg.ACLResourcePatternTypeLiteral
			cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:alice", "*", op, kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, cr)
		}
		admin, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...), kgo.RetryTimeout(30 * time.Second)}, sec.brokerOpts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		resp, err := req.RequestWith(testContext(t, 30*time.Second), admin)
		if err != nil {
			t.Fatalf("creating alice's ACLs as the broker principal: %v", err)
		}
		for _, r := range resp.Results {
			if r.ErrorCode != 0 {
				t.Fatalf("creating alice's ACLs: %s", azCodeName(r.ErrorCode))
			}
		}
		// Every broker enforces the authorizer for alice: she may not
		// read the ACLs (no Describe on the cluster) anywhere.
		describe := kmsg.NewPtrDescribeACLsRequest()
		describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		for _, id := range c.running() {
			r, err := c.request(id, 5*time.Second, describe)
			if err != nil {
				t.Fatal(err)
			}
			if code := r.(*kmsg.DescribeACLsResponse).ErrorCode; code != 31 {
				t.Errorf("broker %d: alice's DescribeAcls answered %s, want CLUSTER_AUTHORIZATION_FAILED", id, azCodeName(code))
			}
		}
	}
	testKillLeaderUnderLoad(t, sec)
}
