package integration

import (
	"slices"
	"strings"
	"testing"

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
