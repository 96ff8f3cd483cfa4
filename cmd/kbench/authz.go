package main

// --acls: the workload against a kbroker running Kafka's ACL authorizer
// with many ACLs loaded, none of which grants or denies the workload's
// principal anything, beside the few it needs.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

const (
	// noAuthorizer is --acls' default: the broker runs without an
	// authorizer.
	noAuthorizer = -1
	// maxACLs bounds --acls (a typo's 10^9 would take hours to create).
	maxACLs = 1_000_000
	// adminUser is the PLAIN user of the admin listener, and with --acls
	// the broker's only super user. The workload's principal is never a
	// super user: a super user skips the ACL lookup this measures.
	adminUser = "admin"
	// aclRequestsInFlight is how many CreateAcls requests kbench keeps in
	// flight while loading the ACLs.
	aclRequestsInFlight = 8
	// aclAuthorizerClass is the authorizer.class.name of Kafka's ZK-mode
	// ACL authorizer.
	aclAuthorizerClass = "kafka.security.authorizer.AclAuthorizer"
	// anonymous is the principal of a client without SASL or a client
	// certificate (PLAINTEXT, and SSL as kbench's clients use it).
	anonymous = "User:ANONYMOUS"
)

// admin is the SASL_PLAINTEXT listener of a started kbroker where kbench
// logs in with PLAIN as adminUser to set the broker up: create SCRAM users
// and ACLs, which the authorizer allows a super user only.
type admin struct {
	addr     string
	password string
}

// login is the kgo option that logs in as the admin user.
func (a *admin) login() kgo.Opt {
	return kgo.SASL(plain.Auth{User: adminUser, Pass: a.password}.AsMechanism())
}

// opts are the kgo options of a client of the admin listener.
func (a *admin) opts() []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(a.addr), a.login()} }

// writeAdminConfig writes the admin listener's JAAS entry (the admin
// user's password) to a 0600 properties file in dir for kbroker's --config,
// so that the password is not on the broker's command line, and returns
// its path. The password is hex, which needs no escaping in a .properties
// value or a JAAS option.
func writeAdminConfig(dir, password string) (string, error) {
	path := filepath.Join(dir, "kbench-admin.properties")
	line := "listener.name.sasl_plaintext.plain.sasl.jaas.config=" +
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_` + adminUser + `="` + password + `";` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// brokerPorts are the ports of the listeners a started kbroker serves
// besides PLAINTEXT on the address the launcher probes ({addr}); 0 for a
// listener it does not serve.
type brokerPorts struct {
	ssl, saslSSL int // --security ssl / sasl_ssl
	admin        int // SASL_PLAINTEXT, PLAIN, for --acls
}

// brokerOverrides are the kbroker settings of the listeners in ports (with
// the TLS settings tlsProps when SSL and SASL_SSL are served, and the
// admin's JAAS entry in the properties file adminConfig when the admin
// listener is) and, with authorizer, of Kafka's ACL authorizer: nothing is
// allowed that no ACL allows, and only the admin user is a super user.
// They hold no secret: the keystore is an unencrypted PEM file in the
// run's temp dir, the SCRAM user is created afterwards and the admin's
// password is in adminConfig.
func brokerOverrides(ports brokerPorts, tlsProps []string, adminConfig string, authorizer bool) []string {
	listeners := "listeners=PLAINTEXT://{addr}"
	if ports.ssl != 0 {
		listeners += ",SSL://127.0.0.1:" + strconv.Itoa(ports.ssl)
	}
	if ports.saslSSL != 0 {
		listeners += ",SASL_SSL://127.0.0.1:" + strconv.Itoa(ports.saslSSL)
	}
	if ports.admin != 0 {
		listeners += ",SASL_PLAINTEXT://127.0.0.1:" + strconv.Itoa(ports.admin)
	}
	kv := []string{listeners, "inter.broker.listener.name=PLAINTEXT"}
	if ports.saslSSL != 0 {
		kv = append(kv, "sasl.enabled.mechanisms=SCRAM-SHA-512")
	}
	if ports.admin != 0 {
		kv = append(kv, "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN")
	}
	if authorizer {
		kv = append(kv,
			"authorizer.class.name="+aclAuthorizerClass,
			"allow.everyone.if.no.acl.found=false",
			"super.users=User:"+adminUser)
	}
	kv = append(kv, tlsProps...)
	args := launch.Overrides(kv...)
	if adminConfig != "" {
		args = append(args, "--config", adminConfig)
	}
	return args
}

// workloadPrincipal is the principal the broker sees for the producer and
// the consumer of cfg.
func (c *config) workloadPrincipal() string {
	if c.security == secSASLSSL {
		return "User:" + scramUser
	}
	return anonymous
}

// aclBlock is the ACLs one kadm builder creates: one operation, allowed
// or denied to one principal from one host, on resources of one type and
// pattern type.
type aclBlock struct {
	rt        kmsg.ACLResourceType
	pattern   kadm.ACLPattern
	names     []string // for the cluster, its one name, "kafka-cluster"
	principal string
	host      string
	op        kadm.ACLOperation
	perm      kmsg.ACLPermissionType
}

const clusterName = "kafka-cluster"

func (b aclBlock) builder() *kadm.ACLBuilder {
	ab := kadm.NewACLs().ResourcePatternType(b.pattern).Operations(b.op)
	switch b.rt {
	case kmsg.ACLResourceTypeTopic:
		ab.Topics(b.names...)
	case kmsg.ACLResourceTypeGroup:
		ab.Groups(b.names...)
	case kmsg.ACLResourceTypeTransactionalId:
		ab.TransactionalIDs(b.names...)
	case kmsg.ACLResourceTypeCluster:
		ab.Clusters()
	}
	if b.perm == kmsg.ACLPermissionTypeDeny {
		return ab.Deny(b.principal).DenyHosts(b.host)
	}
	return ab.Allow(b.principal).AllowHosts(b.host)
}

func countACLs(blocks []aclBlock) int {
	n := 0
	for _, b := range blocks {
		n += len(b.names)
	}
	return n
}

// workloadACLs are the ACLs the workload of principal on topic needs, and
// no more, by internal/authz's table: CreateTopics (Create on the topic,
// DescribeConfigs for the created topic's configs), Metadata, ListOffsets
// and OffsetForLeaderEpoch (Describe), Produce (Write; with an idempotent
// producer InitProducerId passes with Write on any topic), Fetch (Read),
// DeleteTopics afterwards (Delete), and with txnID, the transactional
// producer's (Write and Describe on its transactional id). The consumer is
// not in a group.
func workloadACLs(principal, topic, txnID string) []aclBlock {
	var out []aclBlock
	for _, op := range []kadm.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationWrite, kmsg.ACLOperationRead, kmsg.ACLOperationDelete} {
		out = append(out, aclBlock{kmsg.ACLResourceTypeTopic, kadm.ACLPatternLiteral, []string{topic}, principal, "*", op, kmsg.ACLPermissionTypeAllow})
	}
	if txnID != "" {
		for _, op := range []kadm.ACLOperation{kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe} {
			out = append(out, aclBlock{kmsg.ACLResourceTypeTransactionalId, kadm.ACLPatternLiteral, []string{txnID}, principal, "*", op, kmsg.ACLPermissionTypeAllow})
		}
	}
	return out
}

// aclDomains name the tenants of fillerACLs; their lengths vary, so that
// the prefixed ACLs have prefixes of many lengths (one lookup each per
// check).
var aclDomains = []string{"payments", "ads", "search", "logistics", "fraud-detection", "crm", "inventory", "iot", "billing", "recommendations"}

// fillerACLs returns n ACLs (exactly) none of which grants or denies
// principal anything on the workload's resources (a topic and
// transactional id named kbench-..., the cluster): a mix a shared cluster
// may have.
//   - A monitoring principal's Describe (and DescribeConfigs) on every
//     topic, group and the cluster (literal "*", looked up for every
//     topic), and an auditor's Read on the topics prefixed "kbench-" (the
//     workload's namespace, another principal);
//   - then per tenant t of a domain d, 29 ACLs: producer, consumer and
//     analytics principals of their own on four topics d.t.events-j
//     (Write, Read and Describe), the prefix d.t. (analytics), a DENY of
//     Write to the consumer on two topics, a Read from one host only,
//     consumer groups d-t-cg-j and the prefix d-t-, transactional ids
//     prefixed d-t-txn-, IdempotentWrite on the cluster for the producer,
//     and one Read for principal itself on a topic d.t.audit (so that its
//     own entries are not only the workload's).
//
// The last block is cut short to make n.
func fillerACLs(n int, principal string) []aclBlock {
	const (
		topic   = kmsg.ACLResourceTypeTopic
		group   = kmsg.ACLResourceTypeGroup
		cluster = kmsg.ACLResourceTypeCluster
		txn     = kmsg.ACLResourceTypeTransactionalId
		literal = kadm.ACLPatternLiteral
		prefix  = kadm.ACLPatternPrefixed
		allow   = kmsg.ACLPermissionTypeAllow
		deny    = kmsg.ACLPermissionTypeDeny

		read            = kmsg.ACLOperationRead
		write           = kmsg.ACLOperationWrite
		describe        = kmsg.ACLOperationDescribe
		describeConfigs = kmsg.ACLOperationDescribeConfigs
		idempotentWrite = kmsg.ACLOperationIdempotentWrite
	)
	var out []aclBlock
	left := n
	add := func(rt kmsg.ACLResourceType, pattern kadm.ACLPattern, names []string, principal, host string, op kadm.ACLOperation, perm kmsg.ACLPermissionType) {
		if left <= 0 {
			return
		}
		names = names[:min(len(names), left)]
		left -= len(names)
		out = append(out, aclBlock{rt, pattern, names, principal, host, op, perm})
	}
	const monitoring = "User:monitoring"
	add(topic, literal, []string{"*"}, monitoring, "*", describe, allow)
	add(topic, literal, []string{"*"}, monitoring, "*", describeConfigs, allow)
	add(group, literal, []string{"*"}, monitoring, "*", describe, allow)
	add(cluster, literal, []string{clusterName}, monitoring, "*", describe, allow)
	add(topic, prefix, []string{"kbench-"}, "User:kbench-auditor", "*", read, allow)
	for t := 0; left > 0; t++ {
		d := aclDomains[t%len(aclDomains)]
		id := d + "-" + strconv.Itoa(t)
		dotted := d + "." + strconv.Itoa(t) + "."
		producer, consumer, analytics := "User:"+id+"-producer", "User:"+id+"-consumer", "User:"+id+"-analytics"
		topics := []string{dotted + "events-0", dotted + "events-1", dotted + "events-2", dotted + "events-3"}
		add(topic, literal, topics, producer, "*", write, allow)
		add(topic, literal, topics, producer, "*", describe, allow)
		add(topic, literal, topics, consumer, "*", read, allow)
		add(topic, literal, topics, consumer, "*", describe, allow)
		add(topic, prefix, []string{dotted}, analytics, "*", read, allow)
		add(topic, prefix, []string{dotted}, analytics, "*", describe, allow)
		add(topic, literal, topics[:2], consumer, "*", write, deny)
		add(topic, literal, topics[:1], consumer, fmt.Sprintf("10.%d.%d.7", t/250%250, t%250), read, allow)
		add(group, literal, []string{id + "-cg-0", id + "-cg-1"}, consumer, "*", read, allow)
		add(group, prefix, []string{id + "-"}, analytics, "*", read, allow)
		add(group, prefix, []string{id + "-"}, analytics, "*", describe, allow)
		add(txn, prefix, []string{id + "-txn-"}, producer, "*", write, allow)
		add(txn, prefix, []string{id + "-txn-"}, producer, "*", describe, allow)
		add(cluster, literal, []string{clusterName}, producer, "*", idempotentWrite, allow)
		add(topic, literal, []string{dotted + "audit"}, principal, "*", read, allow)
	}
	return out
}

// createACLs creates the ACLs of blocks through cl (a super user's
// client), one CreateAcls request per block, aclRequestsInFlight at a
// time, and then checks that the broker describes every ACL it has:
// total, those of blocks and any created before.
func createACLs(ctx context.Context, kcl *kgo.Client, blocks []aclBlock, total int) error {
	cl := kadm.NewClient(kcl)
	work := make(chan aclBlock)
	errs := make(chan error, aclRequestsInFlight)
	var wg sync.WaitGroup
	for range aclRequestsInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for b := range work {
				if first != nil {
					continue
				}
				res, err := cl.CreateACLs(ctx, b.builder())
				if err == nil {
					for _, r := range res {
						if r.Err != nil {
							err = fmt.Errorf("%s %s on %v %s: %w (%s)", r.Permission, r.Operation, r.Type, r.Name, r.Err, r.ErrMessage)
							break
						}
					}
				}
				first = err
			}
			errs <- first
		}()
	}
	for _, b := range blocks {
		work <- b
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("creating ACLs: %w", err)
		}
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, kcl)
	if err == nil {
		if err = kerr.ErrorForCode(resp.ErrorCode); err != nil && resp.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
	}
	if err != nil {
		return fmt.Errorf("describing ACLs: %w", err)
	}
	got := 0
	for _, r := range resp.Resources {
		got += len(r.ACLs)
	}
	if got != total {
		return fmt.Errorf("the broker describes %d ACLs, want %d", got, total)
	}
	return nil
}

// setupACLs loads the ACLs of an --acls run into the broker b: cfg.acls
// that do not match the workload, then those it needs as principal on
// topic. It returns how many it created in all.
func setupACLs(ctx context.Context, b *brokerProc, cfg *config, topic string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := kgo.NewClient(b.admin.opts()...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var txnID string
	if cfg.txnRecords > 0 {
		txnID = transactionalID(topic)
	}
	principal := cfg.workloadPrincipal()
	blocks := append(fillerACLs(cfg.acls, principal), workloadACLs(principal, topic, txnID)...)
	total := countACLs(blocks)
	return total, createACLs(ctx, cl, blocks, total)
}
