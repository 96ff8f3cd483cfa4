package integration

// Authorization mode: with KBROKER_TEST_AUTHZ=1 every broker the harness
// starts (StartBroker, startCluster, addBroker) runs Kafka's ACL authorizer
// with allow.everyone.if.no.acl.found=false, so that the same tests show
// what issue 14 asks: the suites pass with the authorizer on and the
// brokers authenticating as super users.
//
// Such a broker gets a second listener, SASL_PLAINTEXT with PLAIN, which
// is its inter-broker listener: brokers replicate, forward and send the
// controller's requests over it as User:broker, the only super user. The
// tests' clients keep the PLAINTEXT listener the test knows (Broker.Addr),
// as User:ANONYMOUS, which the harness grants, through the super user, as
// soon as the broker answers: everything on every topic, group and
// transactional id, and on the cluster what clients ask for (creating
// topics, idempotent producers, configs, admin operations) but not
// ClusterAction, the inter-broker operation. A request only a broker may
// send (a follower's Fetch, AlterPartition, UpdateMetadata, ...) is then
// refused unless it really comes from a broker.
//
// A broker whose test configured listeners, SASL, TLS or an authorizer
// itself (the security_*, authz_* and acls_* tests) is left as the test
// made it.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

const (
	// authzModeEnv switches authorization mode on when it is "1".
	authzModeEnv = "KBROKER_TEST_AUTHZ"
	// authzBrokerUser and its password are the brokers' PLAIN
	// credentials on their inter-broker listener; User:broker is the
	// super user.
	authzBrokerUser     = "broker"
	authzBrokerPassword = "broker-secret"
	// authzClientPrincipal is the tests' clients' principal on the
	// PLAINTEXT listener.
	authzClientPrincipal = "User:ANONYMOUS"
	// authzGrantWithin bounds how long a started broker may take to
	// apply the clients' ACLs (a cluster broker learns them from the
	// controller's view).
	authzGrantWithin = 30 * time.Second
)

// authzModeOn reports whether KBROKER_TEST_AUTHZ=1.
func authzModeOn() bool { return os.Getenv(authzModeEnv) == "1" }

// authzMode is what authorization mode added to one broker.
type authzMode struct {
	// saslAddr is the broker's SASL_PLAINTEXT (inter-broker) listener.
	saslAddr string
}

// authzModeFor returns overrides with authorization mode's settings in
// front (a fresh SASL_PLAINTEXT port, kept across restarts since the
// overrides are), and the mode; or overrides unchanged and nil when the
// mode is off or the test secures the broker itself (a probe of its own,
// or any listener, SASL, TLS or authorizer setting).
func authzModeFor(t testing.TB, probe func(string, time.Duration) error, overrides []string) ([]string, *authzMode) {
	t.Helper()
	if !authzModeOn() {
		return overrides, nil
	}
	if probe != nil || configuresSecurity(overrides) {
		t.Logf("%s=1: this broker's test configures its own listeners or authorizer; left as it is", authzModeEnv)
		return overrides, nil
	}
	m := &authzMode{saslAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	t.Logf("%s=1: ACL authorizer on, everyone refused without an ACL; inter-broker listener SASL_PLAINTEXT://%s as super user User:%s",
		authzModeEnv, m.saslAddr, authzBrokerUser)
	return append(authzModeSettings(m.saslAddr), overrides...), m
}

// authzModeSettings are a broker's settings in authorization mode, with
// its SASL_PLAINTEXT listener on saslAddr.
func authzModeSettings(saslAddr string) []string {
	return []string{
		"listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://" + saslAddr,
		"inter.broker.listener.name=SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=PLAIN",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		fmt.Sprintf(`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s" user_%s="%s";`,
			authzBrokerUser, authzBrokerPassword, authzBrokerUser, authzBrokerPassword),
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"allow.everyone.if.no.acl.found=false",
		"super.users=User:" + authzBrokerUser,
	}
}

// configuresSecurity reports whether any "key=value" override sets a
// listener, SASL, TLS or authorizer setting.
func configuresSecurity(overrides []string) bool {
	// The settings, or prefixes (ending in "."), by which a test secures
	// a broker itself.
	securityKeys := []string{
		"listeners", "advertised.listeners", "listener.", "inter.broker.listener.name",
		"security.inter.broker.protocol", "sasl.", "ssl.",
		"authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
	}
	for _, o := range overrides {
		key, _, _ := strings.Cut(o, "=")
		key = strings.TrimSpace(key)
		for _, k := range securityKeys {
			if key == k || (strings.HasSuffix(k, ".") && strings.HasPrefix(key, k)) {
				return true
			}
		}
	}
	return false
}

// authzClientGrants are the ACLs the tests' clients get: all operations
// on every topic, group and transactional id, and the cluster operations
// clients use, ClusterAction left out.
func authzClientGrants() []kmsg.CreateACLsRequestCreation {
	grant := func(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = authzClientPrincipal, "*", op, kmsg.ACLPermissionTypeAllow
		return c
	}
	grants := []kmsg.CreateACLsRequestCreation{
		grant(kmsg.ACLResourceTypeTopic, "*", kmsg.ACLOperationAll),
		grant(kmsg.ACLResourceTypeGroup, "*", kmsg.ACLOperationAll),
		grant(kmsg.ACLResourceTypeTransactionalId, "*", kmsg.ACLOperationAll),
	}
	for _, op := range []kmsg.ACLOperation{
		kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe, kmsg.ACLOperationAlter,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite,
	} {
		grants = append(grants, grant(kmsg.ACLResourceTypeCluster, "kafka-cluster", op))
	}
	return grants
}

// grantClients creates the clients' ACLs through the broker's super user
// (again, harmlessly, for every broker of a cluster) and waits until the
// broker at clientAddr applies them: its DescribeAcls, asked by a client
// on that listener, answers (the cluster Describe grant is in force) with
// all of them.
func (m *authzMode) grantClients(t testing.TB, clientAddr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), authzGrantWithin)
	defer cancel()
	super, err := kgo.NewClient(kgo.SeedBrokers(m.saslAddr), kgo.RetryTimeout(authzGrantWithin),
		kgo.SASL(plain.Auth{User: authzBrokerUser, Pass: authzBrokerPassword}.AsMechanism()))
	if err != nil {
		t.Fatalf("%s: super user client: %v", authzModeEnv, err)
	}
	defer super.Close()
	grants := authzClientGrants()
	create := kmsg.NewPtrCreateACLsRequest()
	create.Creations = grants
	// A cluster's first broker answers NOT_CONTROLLER until a
	// controller is elected: retriable errors are tried again.
	checkFor(t, authzGrantWithin, 50*time.Millisecond, func() error {
		resp, err := create.RequestWith(ctx, super)
		if err != nil {
			return fmt.Errorf("creating the clients' ACLs as User:%s on %s: %w", authzBrokerUser, m.saslAddr, err)
		}
		for i, r := range resp.Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				err = fmt.Errorf("creating %s's ACL %d (%v %v on %v %q): %w", authzClientPrincipal, i,
					grants[i].PermissionType, grants[i].Operation, grants[i].ResourceType, grants[i].ResourceName, err)
				if !kerr.IsRetriable(err) {
					t.Fatalf("%s: %v", authzModeEnv, err)
				}
				return err
			}
		}
		return nil
	})
	anon, err := kgo.NewClient(kgo.SeedBrokers(clientAddr), kgo.DialTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		t.Fatalf("%s: client: %v", authzModeEnv, err)
	}
	defer anon.Close()
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	describe.Principal = kmsg.StringPtr(authzClientPrincipal)
	checkFor(t, authzGrantWithin, 20*time.Millisecond, func() error {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		r, err := anon.SeedBrokers()[0].Request(rctx, describe)
		if err != nil {
			return err
		}
		dr := r.(*kmsg.DescribeACLsResponse)
		if dr.ErrorCode != 0 {
			return fmt.Errorf("%s's DescribeAcls on %s: error code %d", authzClientPrincipal, clientAddr, dr.ErrorCode)
		}
		n := 0
		for _, res := range dr.Resources {
			n += len(res.ACLs)
		}
		if n != len(grants) {
			return fmt.Errorf("broker %s lists %d of %s's %d ACLs", clientAddr, n, authzClientPrincipal, len(grants))
		}
		return nil
	})
}
