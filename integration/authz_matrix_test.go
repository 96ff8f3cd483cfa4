package integration

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/authz"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// The authorization matrix: a broker with Kafka's ACL authorizer,
// allow.everyone.if.no.acl.found=false, PLAIN users on a SASL_PLAINTEXT
// listener and the PLAINTEXT listener's ANONYMOUS as the only super user
// (it sets each case up). For every check internal/authz lists, generated
// from that table:
//
//   - alice holding every grant of a scenario is not refused (and sees what
//     the scenario shows);
//   - alice holding all of them but one check's is refused with that
//     check's error, or does not see the resource; for a check that any of
//     several grants passes, each alone passes;
//   - bob, with no ACL at all, gets the scenario's first refusal;
//   - in every answer, nothing is volunteered that the principal may not
//     see: no topic, group or transactional id it cannot Describe (the
//     run's own or anyone else's, such as a secret topic, group and
//     transaction made at the start).
//
// Each run uses fresh resource names, and alice's ACLs are removed after
// each, so runs do not help one another.

// azNames are one run's resources.
type azNames struct {
	topic    string // created by setup, one partition, one record
	topicID  [16]byte
	newTopic string // never created by setup
	anyTopic string // only ever named in an ACL (Write on "some topic")
	group    string // has a committed offset on topic and on the secret topic
	txn      string
	other    string // a principal or user name for ACL and SCRAM changes
}

const (
	azSecretTopic = "az-secret"
	azSecretGroup = "az-secret-group"
	azSecretTxn   = "az-secret-txn"
)

// azSeen is a resource an answer shows without the request naming it.
type azSeen struct {
	rt   kmsg.ACLResourceType
	name string
}

// azScenario is one request exercising some checks of an API's rule.
type azScenario struct {
	name   string
	key    int16
	checks []int // indexes into the rule's Checks, in the order Kafka asks
	// setup runs as the super user before the request; the default setup
	// always runs first.
	setup func(t *testing.T, e *azEnv, n *azNames)
	req   func(n *azNames) kmsg.Request
	// noTopic: the run's topic is not created (the request creates it).
	noTopic bool
	// seen lists what the answer volunteers; ops reads its authorized
	// operations field.
	seen func(resp kmsg.Response) []azSeen
	ops  func(resp kmsg.Response) int32
}

type azEnv struct {
	t          *testing.T
	addr       string // the PLAINTEXT listener, the super user's
	admin      *kgo.Client
	alice, bob *kconn
	run        int
	closers    []func()
}

func TestAuthorizationMatrix(t *testing.T) {
	saslAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := StartBroker(t,
		"listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://"+saslAddr,
		"sasl.enabled.mechanisms=PLAIN",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";`,
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"allow.everyone.if.no.acl.found=false",
		"super.users=User:ANONYMOUS",
		"offsets.topic.num.partitions=1",
		"transaction.state.log.num.partitions=1",
		"group.initial.rebalance.delay.ms=0")
	e := &azEnv{t: t, addr: b.Addr(), admin: b.Client(t)}
	t.Cleanup(func() {
		for _, c := range e.closers {
			c()
		}
	})
	e.alice = azLogin(t, saslAddr, "alice", "alice-secret")
	e.bob = azLogin(t, saslAddr, "bob", "bob-secret")
	e.setupSecrets()

	rules := map[int16]authz.Rule{}
	for _, r := range authz.Rules() {
		rules[r.Key] = r
	}
	covered := map[int16]map[int]bool{}
	runs := 0
	for _, sc := range azScenarios() {
		rule, ok := rules[sc.key]
		if !ok {
			t.Fatalf("%s: no rule for %s in internal/authz", sc.name, kmsg.NameForKey(sc.key))
		}
		if covered[sc.key] == nil {
			covered[sc.key] = map[int]bool{}
		}
		for _, i := range sc.checks {
			covered[sc.key][i] = true
		}
		t.Run(sc.name, func(t *testing.T) { runs += e.runScenario(t, sc, rule) })
	}
	// Every check of the table is exercised by some scenario.
	for _, r := range authz.Rules() {
		for i, c := range r.Checks {
			if !covered[r.Key][i] {
				t.Errorf("%s check %d (%v on %v, %s) has no scenario", kmsg.NameForKey(r.Key), i, c.AnyOf[0].Op, c.AnyOf[0].Resource, c.When)
			}
		}
	}
	t.Logf("%d scenarios, %d requests", len(azScenarios()), runs)
}

// azLogin opens a connection authenticated with PLAIN.
func azLogin(t *testing.T, addr, user, pass string) *kconn {
	t.Helper()
	k, err := dialK(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	out, err := k.authenticateWith(plain.Auth{User: user, Pass: pass}.AsMechanism())
	if err != nil || out.code != 0 {
		t.Fatalf("login as %s: %v %+v", user, err, out)
	}
	return k
}

// runScenario runs sc for every combination of grants the matrix asks for
// and returns how many requests it sent.
func (e *azEnv) runScenario(t *testing.T, sc azScenario, rule authz.Rule) int {
	checks := make([]authz.Check, len(sc.checks))
	for i, ci := range sc.checks {
		checks[i] = rule.Checks[ci]
	}
	first := func(skip int) []authz.Grant {
		var gs []authz.Grant
		for i, c := range checks {
			if i != skip {
				gs = append(gs, c.AnyOf[0])
			}
		}
		return gs
	}
	runs := 0
	// Everything granted: nothing of the scenario is refused or hidden.
	out := e.runOnce(t, sc, e.alice, "User:alice", first(-1))
	runs++
	for _, c := range checks {
		e.expect(t, "all granted", sc, c, out, true)
	}
	for i, c := range checks {
		// All but this check: refused or hidden, unless what is left
		// implies it (Kafka: Read, Write, Delete and Alter imply
		// Describe).
		rest := first(i)
		if azImplied(rest, c.AnyOf) {
			t.Logf("check %d (%v) is implied by the other grants: not refused alone", sc.checks[i], c.AnyOf[0].Op)
		} else {
			out := e.runOnce(t, sc, e.alice, "User:alice", rest)
			runs++
			e.expect(t, fmt.Sprintf("without %v on %v", c.AnyOf[0].Op, c.AnyOf[0].Resource), sc, c, out, false)
		}
		// Each alternative passes alone.
		for _, alt := range c.AnyOf[1:] {
			out := e.runOnce(t, sc, e.alice, "User:alice", append(slices.Clone(rest), alt))
			runs++
			e.expect(t, fmt.Sprintf("with only %v on %v", alt.Op, alt.Resource), sc, c, out, true)
		}
	}
	// A principal without any ACL gets the first refusal.
	out = e.runOnce(t, sc, e.bob, "User:bob", nil)
	runs++
	if len(checks) > 0 {
		e.expect(t, "bob, no ACLs", sc, checks[0], out, false)
	}
	return runs
}

// azOutcome is what one run's answer showed.
type azOutcome struct {
	codes []int16
	seen  []azSeen
	ops   int32
	names *azNames
}

// runOnce sets a run up, grants principal grants on the run's resources,
// sends the request on k, checks that nothing invisible was volunteered,
// and removes the grants.
func (e *azEnv) runOnce(t *testing.T, sc azScenario, k *kconn, principal string, grants []authz.Grant) azOutcome {
	t.Helper()
	e.run++
	n := &azNames{
		topic:    fmt.Sprintf("az-%d-t", e.run),
		newTopic: fmt.Sprintf("az-%d-new", e.run),
		anyTopic: fmt.Sprintf("az-%d-any", e.run),
		group:    fmt.Sprintf("az-%d-g", e.run),
		txn:      fmt.Sprintf("az-%d-x", e.run),
		other:    fmt.Sprintf("az-%d-o", e.run),
	}
	e.setupDefault(t, n, !sc.noTopic)
	if sc.setup != nil {
		sc.setup(t, e, n)
	}
	e.grant(t, principal, grants, n)
	defer e.revoke(t, principal)
	req := sc.req(n)
	resp, err := k.roundTrip(req)
	if err != nil {
		t.Fatalf("%s as %s with %v: %v", kmsg.NameForKey(req.Key()), principal, grants, err)
	}
	out := azOutcome{codes: azErrorCodes(resp), names: n}
	if sc.seen != nil {
		out.seen = sc.seen(resp)
	}
	if sc.ops != nil {
		out.ops = sc.ops(resp)
	}
	for _, s := range out.seen {
		if !azVisible(grants, n, s) {
			t.Errorf("%s with %v shows %v %q, which %s may not describe", kmsg.NameForKey(req.Key()), grants, s.rt, s.name, principal)
		}
	}
	return out
}

// expect checks check c's effect on out: passed (allowed) or not.
func (e *azEnv) expect(t *testing.T, what string, sc azScenario, c authz.Check, out azOutcome, allowed bool) {
	t.Helper()
	switch c.Effect {
	case authz.Refused:
		if got := slices.Contains(out.codes, c.Error); got == allowed {
			t.Errorf("%s: %s in the answer: %v (codes %v)", what, azCodeName(c.Error), got, azCodeNames(out.codes))
		}
	case authz.LeftOut:
		name := azResourceName(out.names, c.AnyOf[0].Resource)
		shown := slices.Contains(out.seen, azSeen{c.AnyOf[0].Resource, name})
		if shown != allowed {
			t.Errorf("%s: %v %q shown: %v (answer shows %v)", what, c.AnyOf[0].Resource, name, shown, out.seen)
		}
	case authz.NoOperations:
		if (out.ops != 0) != allowed || out.ops == -2147483648 {
			t.Errorf("%s: authorized operations %b", what, out.ops)
		}
	}
}

func azCodeName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.(*kerr.Error).Message
	}
	return "NONE"
}

func azCodeNames(codes []int16) []string {
	var out []string
	for _, c := range codes {
		out = append(out, azCodeName(c))
	}
	return out
}

// azErrorCodes collects every non-zero field named ...ErrorCode in a
// response, however deep.
func azErrorCodes(resp kmsg.Response) []int16 {
	var out []int16
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if f.Type.Kind() == reflect.Int16 && strings.HasSuffix(f.Name, "ErrorCode") {
					if code := int16(v.Field(i).Int()); code != 0 {
						out = append(out, code)
					}
					continue
				}
				walk(v.Field(i))
			}
		}
	}
	walk(reflect.ValueOf(resp))
	return out
}

// azResourceName is the run's resource of type rt.
func azResourceName(n *azNames, rt kmsg.ACLResourceType) string {
	switch rt {
	case kmsg.ACLResourceTypeTopic:
		return n.topic
	case kmsg.ACLResourceTypeGroup:
		return n.group
	case kmsg.ACLResourceTypeTransactionalId:
		return n.txn
	case kmsg.ACLResourceTypeCluster:
		return "kafka-cluster"
	}
	return ""
}

// azGrantsOp tells whether holding op allows want (Kafka's implications).
func azGrantsOp(op, want kmsg.ACLOperation) bool {
	switch {
	case op == want || op == kmsg.ACLOperationAll:
		return true
	case want == kmsg.ACLOperationDescribe:
		return op == kmsg.ACLOperationRead || op == kmsg.ACLOperationWrite || op == kmsg.ACLOperationDelete || op == kmsg.ACLOperationAlter
	case want == kmsg.ACLOperationDescribeConfigs:
		return op == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// azImplied tells whether grants pass a check that any of alts passes.
func azImplied(grants, alts []authz.Grant) bool {
	for _, g := range grants {
		for _, a := range alts {
			if g.Resource == a.Resource && g.AnyResource == a.AnyResource && azGrantsOp(g.Op, a.Op) {
				return true
			}
		}
	}
	return false
}

// azVisible tells whether a principal holding grants (on the run's
// resources) may see s: Describe on it, or for a group Describe on the
// cluster (ListGroups lists every group then).
func azVisible(grants []authz.Grant, n *azNames, s azSeen) bool {
	for _, g := range grants {
		if g.AnyResource {
			continue
		}
		if g.Resource == s.rt && azResourceName(n, g.Resource) == s.name && azGrantsOp(g.Op, kmsg.ACLOperationDescribe) {
			return true
		}
		if s.rt == kmsg.ACLResourceTypeGroup && g.Resource == kmsg.ACLResourceTypeCluster && azGrantsOp(g.Op, kmsg.ACLOperationDescribe) {
			return true
		}
	}
	return false
}

// ---- setup, as the super user ----

func (e *azEnv) ctx(t *testing.T) context.Context { return testContext(t, 30*time.Second) }

// setupSecrets makes what no test principal may ever see: a topic with a
// record, a group with an offset on it, an open transaction writing to it.
func (e *azEnv) setupSecrets() {
	t := e.t
	e.createTopic(t, azSecretTopic)
	e.commit(t, azSecretGroup, azSecretTopic)
	e.openTxn(t, azSecretTxn, azSecretTopic)
}

// setupDefault makes the run's topic (with a record) unless told not to,
// and its group (with offsets on the topic and on the secret topic).
func (e *azEnv) setupDefault(t *testing.T, n *azNames, topic bool) {
	if !topic {
		e.commit(t, n.group, azSecretTopic)
		return
	}
	n.topicID = e.createTopic(t, n.topic)
	e.commit(t, n.group, n.topic, azSecretTopic)
}

func (e *azEnv) createTopic(t *testing.T, topic string) [16]byte {
	t.Helper()
	ctx := e.ctx(t)
	resp, err := kadm.NewClient(e.admin).CreateTopic(ctx, 1, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := e.admin.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return resp.ID
}

func (e *azEnv) commit(t *testing.T, group string, topics ...string) {
	t.Helper()
	offsets := kadm.Offsets{}
	for _, topic := range topics {
		offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(e.admin).CommitOffsets(e.ctx(t), group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit for %s: %v", group, err)
	}
}

// openTxn leaves a transaction of id open, with a record in each topic.
func (e *azEnv) openTxn(t *testing.T, id string, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.TransactionalID(id),
		kgo.TransactionTimeout(2*time.Minute), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e.closers = append(e.closers, cl.Close)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		if err := cl.ProduceSync(e.ctx(t), &kgo.Record{Topic: topic, Value: []byte("txn")}).FirstErr(); err != nil {
			t.Fatalf("transactional produce to %s: %v", topic, err)
		}
	}
}

// grant gives principal each grant on the run's resources.
func (e *azEnv) grant(t *testing.T, principal string, grants []authz.Grant, n *azNames) {
	t.Helper()
	if len(grants) == 0 {
		return
	}
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = 3
	for _, g := range grants {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourcePatternType = g.Resource, kmsg.ACLResourcePatternTypeLiteral
		c.ResourceName = azResourceName(n, g.Resource)
		if g.AnyResource {
			c.ResourceName = n.anyTopic
		}
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", g.Op, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(e.ctx(t), e.admin)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("granting %+v: %s", grants[i], azCodeName(r.ErrorCode))
		}
	}
}

// revoke removes every ACL of principal.
func (e *azEnv) revoke(t *testing.T, principal string) {
	t.Helper()
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Version = 3
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Principal, f.Operation, f.PermissionType = &principal, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	req.Filters = append(req.Filters, f)
	resp, err := req.RequestWith(e.ctx(t), e.admin)
	if err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("revoking %s's ACLs: %v %+v", principal, err, resp)
	}
}

// ---- the scenarios ----

func azScenarios() []azScenario {
	topicSeen := func(names ...*string) []azSeen {
		var out []azSeen
		for _, n := range names {
			if n != nil {
				out = append(out, azSeen{kmsg.ACLResourceTypeTopic, *n})
			}
		}
		return out
	}
	oneTopic := func(n *azNames) []string { return []string{n.topic} }
	withTxn := func(t *testing.T, e *azEnv, n *azNames) { e.openTxn(t, n.txn, n.topic, azSecretTopic) }
	return []azScenario{
		{name: "Produce/transactional", key: kmsg.Produce.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			spec := recordbatch.BatchSpec{ProducerID: 4242, ProducerEpoch: 0, BaseSequence: 0, LeaderEpoch: -1,
				FirstTimestamp: time.Now().UnixMilli(), Attributes: recordbatch.TransactionalBit}
			req := produceRequest(9, -1, n.topic, recordbatch.Build(spec, []recordbatch.Record{{Value: []byte("v")}}))
			req.TransactionID = &n.txn
			return req
		}},
		{name: "Produce/plain", key: kmsg.Produce.Int16(), checks: []int{1}, req: func(n *azNames) kmsg.Request {
			spec := recordbatch.NoProducer()
			spec.FirstTimestamp = time.Now().UnixMilli()
			return produceRequest(9, 1, n.topic, recordbatch.Build(spec, []recordbatch.Record{{Value: []byte("v")}}))
		}},
		{name: "Fetch/follower", key: kmsg.Fetch.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			// No such topic: a permitted follower fetch moves no state.
			return azFetch(n.newTopic, 5)
		}},
		{name: "Fetch/consumer", key: kmsg.Fetch.Int16(), checks: []int{1}, req: func(n *azNames) kmsg.Request {
			return azFetch(n.topic, -1)
		}},
		{name: "ListOffsets", key: kmsg.ListOffsets.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrListOffsetsRequest()
			req.Version, req.ReplicaID = 7, -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = n.topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "Metadata/named", key: kmsg.Metadata.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			return azMetadata(12, false, n.topic)
		}},
		{name: "Metadata/all", key: kmsg.Metadata.Int16(), checks: []int{1}, req: func(*azNames) kmsg.Request {
			return azMetadata(12, false)
		}, seen: func(resp kmsg.Response) []azSeen {
			var out []azSeen
			for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
				out = append(out, topicSeen(mt.Topic)...)
			}
			return out
		}},
		{name: "Metadata/auto-create", key: kmsg.Metadata.Int16(), checks: []int{0, 2}, noTopic: true, req: func(n *azNames) kmsg.Request {
			return azMetadata(12, true, n.topic)
		}},
		{name: "Metadata/cluster operations", key: kmsg.Metadata.Int16(), checks: []int{3}, req: func(n *azNames) kmsg.Request {
			req := azMetadata(10, false, n.topic)
			req.(*kmsg.MetadataRequest).IncludeClusterAuthorizedOperations = true
			return req
		}, ops: func(resp kmsg.Response) int32 { return resp.(*kmsg.MetadataResponse).AuthorizedOperations }},
		{name: "UpdateMetadata", key: kmsg.UpdateMetadata.Int16(), checks: []int{0}, req: func(*azNames) kmsg.Request {
			req := kmsg.NewPtrUpdateMetadataRequest()
			req.Version, req.ControllerID, req.ControllerEpoch = 7, 99, 1
			return req
		}},
		{name: "ControlledShutdown", key: kmsg.ControlledShutdown.Int16(), checks: []int{0}, req: func(*azNames) kmsg.Request {
			req := kmsg.NewPtrControlledShutdownRequest()
			req.Version, req.BrokerID, req.BrokerEpoch = 3, 99, -1
			return req
		}},
		{name: "OffsetCommit", key: kmsg.OffsetCommit.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.Generation = 8, n.group, -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = n.topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "OffsetFetch/named", key: kmsg.OffsetFetch.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			return azOffsetFetch(n.group, oneTopic(n))
		}},
		{name: "OffsetFetch/all", key: kmsg.OffsetFetch.Int16(), checks: []int{0, 2}, req: func(n *azNames) kmsg.Request {
			return azOffsetFetch(n.group, nil)
		}, seen: func(resp kmsg.Response) []azSeen {
			var out []azSeen
			for _, g := range resp.(*kmsg.OffsetFetchResponse).Groups {
				for _, rt := range g.Topics {
					out = append(out, topicSeen(&rt.Topic)...)
				}
			}
			return out
		}},
		{name: "FindCoordinator/group", key: kmsg.FindCoordinator.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			return azFindCoordinator(0, n.group)
		}},
		{name: "FindCoordinator/transaction", key: kmsg.FindCoordinator.Int16(), checks: []int{1}, req: func(n *azNames) kmsg.Request {
			return azFindCoordinator(1, n.txn)
		}},
		{name: "JoinGroup", key: kmsg.JoinGroup.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version, req.Group, req.ProtocolType = 9, n.group, "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = "range", []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
			req.Protocols = append(req.Protocols, p)
			return req
		}},
		{name: "Heartbeat", key: kmsg.Heartbeat.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrHeartbeatRequest()
			req.Version, req.Group, req.Generation, req.MemberID = 4, n.group, 1, "m"
			return req
		}},
		{name: "LeaveGroup", key: kmsg.LeaveGroup.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Version, req.Group = 5, n.group
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "m"
			req.Members = append(req.Members, m)
			return req
		}},
		{name: "SyncGroup", key: kmsg.SyncGroup.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version, req.Group, req.Generation, req.MemberID = 5, n.group, 1, "m"
			req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
			return req
		}},
		{name: "ConsumerGroupHeartbeat", key: kmsg.ConsumerGroupHeartbeat.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, n.group, "az-member", 0
			req.RebalanceTimeoutMillis = 10000
			req.SubscribedTopicNames = []string{n.topic}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return req
		}},
		{name: "ConsumerGroupDescribe", key: kmsg.ConsumerGroupDescribe.Int16(), checks: []int{0, 1}, setup: func(t *testing.T, e *azEnv, n *azNames) {
			// An empty consumer group: one member joins and leaves.
			for _, epoch := range []int32{0, -1} {
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, n.group, "az-setup", epoch
				if epoch == 0 {
					req.RebalanceTimeoutMillis = 10000
					req.SubscribedTopicNames = []string{n.topic}
					req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				}
				resp, err := req.RequestWith(e.ctx(t), e.admin)
				if err != nil || resp.ErrorCode != 0 {
					t.Fatalf("consumer group setup (epoch %d): %v %v", epoch, err, resp)
				}
			}
		}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Version, req.Groups, req.IncludeAuthorizedOperations = 1, []string{n.group}, true
			return req
		}, ops: func(resp kmsg.Response) int32 {
			return resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].AuthorizedOperations
		}},
		{name: "ShareGroupHeartbeat", key: kmsg.ShareGroupHeartbeat.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.Version, req.GroupID, req.MemberID, req.MemberEpoch = 1, n.group, "az-member", 0
			req.SubscribedTopicNames = []string{n.topic}
			return req
		}},
		{name: "ShareGroupDescribe", key: kmsg.ShareGroupDescribe.Int16(), checks: []int{0, 1}, setup: func(t *testing.T, e *azEnv, n *azNames) {
			// The group becomes a share group: its offsets go first.
			del := kmsg.NewPtrDeleteGroupsRequest()
			del.Groups = []string{n.group}
			if dresp, err := del.RequestWith(e.ctx(t), e.admin); err != nil || dresp.Groups[0].ErrorCode != 0 {
				t.Fatalf("deleting the classic group: %v %v", err, dresp)
			}
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.Version, req.GroupID, req.MemberID, req.MemberEpoch = 1, n.group, "az-setup", 0
			req.SubscribedTopicNames = []string{n.topic}
			resp, err := req.RequestWith(e.ctx(t), e.admin)
			if err != nil || resp.ErrorCode != 0 {
				t.Fatalf("share group setup: %v %v", err, resp)
			}
		}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrShareGroupDescribeRequest()
			req.Version, req.GroupIDs, req.IncludeAuthorizedOperations = 1, []string{n.group}, true
			return req
		}, ops: func(resp kmsg.Response) int32 {
			return resp.(*kmsg.ShareGroupDescribeResponse).Groups[0].AuthorizedOperations
		}},
		{name: "ShareFetch", key: kmsg.ShareFetch.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrShareFetchRequest()
			req.Version, req.GroupID, req.MemberID = 2, kmsg.StringPtr(n.group), kmsg.StringPtr("az-member")
			req.MaxBytes, req.MaxRecords = 1<<20, 10
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = n.topicID
			rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "ShareAcknowledge", key: kmsg.ShareAcknowledge.Int16(), checks: []int{0, 1}, setup: func(t *testing.T, e *azEnv, n *azNames) {
			// The member's share session: opened by an empty fetch.
			req := kmsg.NewPtrShareFetchRequest()
			req.Version, req.GroupID, req.MemberID = 2, kmsg.StringPtr(n.group), kmsg.StringPtr("az-acker")
			resp, err := req.RequestWith(e.ctx(t), e.admin)
			if err != nil || resp.ErrorCode != 0 {
				t.Fatalf("share session setup: %v %v", err, resp)
			}
		}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrShareAcknowledgeRequest()
			req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 2, kmsg.StringPtr(n.group), kmsg.StringPtr("az-acker"), 1
			rt := kmsg.NewShareAcknowledgeRequestTopic()
			rt.TopicID = n.topicID
			rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
			rp.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "DescribeShareGroupOffsets", key: kmsg.DescribeShareGroupOffsets.Int16(), checks: []int{0, 1}, setup: func(t *testing.T, e *azEnv, n *azNames) {
			// The group becomes a share group with state on the topic.
			del := kmsg.NewPtrDeleteGroupsRequest()
			del.Groups = []string{n.group}
			if dresp, err := del.RequestWith(e.ctx(t), e.admin); err != nil || dresp.Groups[0].ErrorCode != 0 {
				t.Fatalf("deleting the classic group: %v %v", err, dresp)
			}
			req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
			req.GroupID = n.group
			rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			rt.Topic = n.topic
			rt.Partitions = []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}
			req.Topics = append(req.Topics, rt)
			if resp, err := req.RequestWith(e.ctx(t), e.admin); err != nil || resp.ErrorCode != 0 {
				t.Fatalf("share offsets setup: %v %v", err, resp)
			}
		}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
			rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
			rg.GroupID = n.group
			rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: n.topic, Partitions: []int32{0}}}
			req.Groups = append(req.Groups, rg)
			return req
		}},
		{name: "AlterShareGroupOffsets", key: kmsg.AlterShareGroupOffsets.Int16(), checks: []int{0, 1}, setup: func(t *testing.T, e *azEnv, n *azNames) {
			del := kmsg.NewPtrDeleteGroupsRequest()
			del.Groups = []string{n.group}
			if dresp, err := del.RequestWith(e.ctx(t), e.admin); err != nil || dresp.Groups[0].ErrorCode != 0 {
				t.Fatalf("deleting the classic group: %v %v", err, dresp)
			}
		}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
			req.GroupID = n.group
			rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			rt.Topic = n.topic
			rt.Partitions = []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "DeleteShareGroupOffsets", key: kmsg.DeleteShareGroupOffsets.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
			req.GroupID = n.group
			rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
			rt.Topic = n.topic
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "ReadShareGroupState", key: kmsg.ReadShareGroupState.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrReadShareGroupStateRequest()
			req.GroupID = n.group
			rt := kmsg.NewReadShareGroupStateRequestTopic()
			rt.TopicID = n.topicID
			rt.Partitions = []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: 0}}
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "WriteShareGroupState", key: kmsg.WriteShareGroupState.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrWriteShareGroupStateRequest()
			req.GroupID = n.group
			rt := kmsg.NewWriteShareGroupStateRequestTopic()
			rt.TopicID = n.topicID
			rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
			rp.StartOffset = 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "DescribeGroups", key: kmsg.DescribeGroups.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Version, req.Groups, req.IncludeAuthorizedOperations = 5, []string{n.group}, true
			return req
		}},
		{name: "ListGroups", key: kmsg.ListGroups.Int16(), checks: []int{0}, req: func(*azNames) kmsg.Request {
			req := kmsg.NewPtrListGroupsRequest()
			req.Version = 4
			return req
		}, seen: func(resp kmsg.Response) []azSeen {
			var out []azSeen
			for _, g := range resp.(*kmsg.ListGroupsResponse).Groups {
				out = append(out, azSeen{kmsg.ACLResourceTypeGroup, g.Group})
			}
			return out
		}},
		{name: "CreateTopics", key: kmsg.CreateTopics.Int16(), checks: []int{0, 1}, noTopic: true, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version, req.TimeoutMillis = 7, 10000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n.topic, 1, 1
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "DeleteTopics/by name", key: kmsg.DeleteTopics.Int16(), checks: []int{1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version, req.TimeoutMillis = 6, 10000
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = &n.topic
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "DeleteTopics/by id", key: kmsg.DeleteTopics.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version, req.TimeoutMillis = 6, 10000
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.TopicID = n.topicID
			req.Topics = append(req.Topics, rt)
			return req
		}, seen: func(resp kmsg.Response) []azSeen {
			var out []azSeen
			for _, rt := range resp.(*kmsg.DeleteTopicsResponse).Topics {
				out = append(out, topicSeen(rt.Topic)...)
			}
			return out
		}},
		{name: "DeleteRecords", key: kmsg.DeleteRecords.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDeleteRecordsRequest()
			req.Version, req.TimeoutMillis = 2, 10000
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = n.topic
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "InitProducerId/transactional", key: kmsg.InitProducerID.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &n.txn, 60000
			return req
		}},
		{name: "InitProducerId/idempotent", key: kmsg.InitProducerID.Int16(), checks: []int{1}, req: func(*azNames) kmsg.Request {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version = 4
			return req
		}},
		{name: "OffsetForLeaderEpoch", key: kmsg.OffsetForLeaderEpoch.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.Version, req.ReplicaID = 4, -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = n.topic
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "AddPartitionsToTxn/client", key: kmsg.AddPartitionsToTxn.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, n.txn, 4242, 0
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = n.topic, []int32{0}
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "AddPartitionsToTxn/broker", key: kmsg.AddPartitionsToTxn.Int16(), checks: []int{2}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.Version = 4
			tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = n.txn, 4242, 0, true
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic, rt.Partitions = n.topic, []int32{0}
			tr.Topics = append(tr.Topics, rt)
			req.Transactions = append(req.Transactions, tr)
			return req
		}},
		{name: "AddOffsetsToTxn", key: kmsg.AddOffsetsToTxn.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = 3, n.txn, 4242, 0, n.group
			return req
		}},
		{name: "EndTxn", key: kmsg.EndTxn.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrEndTxnRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, n.txn, 4242, 0
			return req
		}},
		{name: "WriteTxnMarkers", key: kmsg.WriteTxnMarkers.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			req.Version = 1
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch = 4242, 0
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			// A topic that does not exist: a permitted request changes nothing.
			rt.Topic, rt.Partitions = n.newTopic, []int32{0}
			m.Topics = append(m.Topics, rt)
			req.Markers = append(req.Markers, m)
			return req
		}},
		{name: "TxnOffsetCommit", key: kmsg.TxnOffsetCommit.Int16(), checks: []int{0, 1, 2}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = 3, n.txn, n.group, 4242, 0
			req.Generation = -1
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = n.topic
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "DescribeAcls", key: kmsg.DescribeACLs.Int16(), checks: []int{0}, req: func(*azNames) kmsg.Request {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.Version = 3
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return req
		}},
		{name: "CreateAcls", key: kmsg.CreateACLs.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrCreateACLsRequest()
			req.Version = 3
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, n.topic, kmsg.ACLResourcePatternTypeLiteral
			c.Principal, c.Host, c.Operation, c.PermissionType = "User:"+n.other, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, c)
			return req
		}},
		{name: "DeleteAcls", key: kmsg.DeleteACLs.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDeleteACLsRequest()
			req.Version = 3
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			f.Principal, f.Operation, f.PermissionType = kmsg.StringPtr("User:"+n.other), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			req.Filters = append(req.Filters, f)
			return req
		}},
		{name: "DescribeConfigs/topic", key: kmsg.DescribeConfigs.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			return azDescribeConfigs(kmsg.ConfigResourceTypeTopic, n.topic)
		}},
		{name: "DescribeConfigs/broker", key: kmsg.DescribeConfigs.Int16(), checks: []int{1}, req: func(*azNames) kmsg.Request {
			return azDescribeConfigs(kmsg.ConfigResourceTypeBroker, "0")
		}},
		{name: "DescribeConfigs/group", key: kmsg.DescribeConfigs.Int16(), checks: []int{2}, req: func(n *azNames) kmsg.Request {
			return azDescribeConfigs(kmsg.ConfigResourceTypeGroupConfig, n.group)
		}},
		{name: "AlterConfigs/topic", key: kmsg.AlterConfigs.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			return azAlterConfigs(kmsg.ConfigResourceTypeTopic, n.topic, "retention.ms", "3600000")
		}},
		{name: "AlterConfigs/broker", key: kmsg.AlterConfigs.Int16(), checks: []int{1}, req: func(*azNames) kmsg.Request {
			return azAlterConfigs(kmsg.ConfigResourceTypeBroker, "0", "", "")
		}},
		{name: "CreatePartitions", key: kmsg.CreatePartitions.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.Version, req.TimeoutMillis = 3, 10000
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = n.topic, 2
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "AlterReplicaLogDirs", key: kmsg.AlterReplicaLogDirs.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			// A dir that is not configured: granted, it answers
			// LOG_DIR_NOT_FOUND and moves nothing.
			req := kmsg.NewPtrAlterReplicaLogDirsRequest()
			req.Version = 2
			d := kmsg.NewAlterReplicaLogDirsRequestDir()
			d.Dir = "/kbroker-authz-no-such-log-dir"
			rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
			rt.Topic, rt.Partitions = n.topic, []int32{0}
			d.Topics = append(d.Topics, rt)
			req.Dirs = append(req.Dirs, d)
			return req
		}},
		{name: "DescribeLogDirs", key: kmsg.DescribeLogDirs.Int16(), checks: []int{0}, req: func(*azNames) kmsg.Request {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Version = 4 // v3+: the refusal has a top-level error code
			return req
		}},
		{name: "DeleteGroups", key: kmsg.DeleteGroups.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Version, req.Groups = 2, []string{n.group}
			return req
		}},
		{name: "ElectLeaders", key: kmsg.ElectLeaders.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrElectLeadersRequest()
			req.Version, req.TimeoutMillis = 2, 10000
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = n.topic, []int32{0}
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "IncrementalAlterConfigs/topic", key: kmsg.IncrementalAlterConfigs.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			return azIncrementalAlterConfigs(kmsg.ConfigResourceTypeTopic, n.topic, "retention.ms", "3600000")
		}},
		{name: "IncrementalAlterConfigs/broker", key: kmsg.IncrementalAlterConfigs.Int16(), checks: []int{1}, req: func(*azNames) kmsg.Request {
			return azIncrementalAlterConfigs(kmsg.ConfigResourceTypeBroker, "0", "", "")
		}},
		{name: "IncrementalAlterConfigs/group", key: kmsg.IncrementalAlterConfigs.Int16(), checks: []int{2}, req: func(n *azNames) kmsg.Request {
			return azIncrementalAlterConfigs(kmsg.ConfigResourceTypeGroupConfig, n.group, "share.auto.offset.reset", "earliest")
		}},
		{name: "OffsetDelete", key: kmsg.OffsetDelete.Int16(), checks: []int{0, 1}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = n.group
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = n.topic
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "AlterPartitionReassignments", key: kmsg.AlterPartitionAssignments.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			// A cancellation where nothing is ongoing: granted, it
			// answers NO_REASSIGNMENT_IN_PROGRESS and moves nothing.
			req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = n.topic
			rt.Partitions = append(rt.Partitions, kmsg.NewAlterPartitionAssignmentsRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "ListPartitionReassignments", key: kmsg.ListPartitionReassignments.Int16(), checks: []int{0}, req: func(*azNames) kmsg.Request {
			return kmsg.NewPtrListPartitionReassignmentsRequest()
		}},
		{name: "DescribeClientQuotas", key: kmsg.DescribeClientQuotas.Int16(), checks: []int{0}, req: func(*azNames) kmsg.Request {
			return kmsg.NewPtrDescribeClientQuotasRequest()
		}},
		{name: "AlterClientQuotas", key: kmsg.AlterClientQuotas.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrAlterClientQuotasRequest()
			e := kmsg.NewAlterClientQuotasRequestEntry()
			ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
			ent.Type, ent.Name = "user", kmsg.StringPtr(n.other)
			e.Entity = append(e.Entity, ent)
			op := kmsg.NewAlterClientQuotasRequestEntryOp()
			op.Key, op.Value = "producer_byte_rate", 1<<20
			e.Ops = append(e.Ops, op)
			req.Entries = append(req.Entries, e)
			return req
		}},
		{name: "DescribeUserScramCredentials", key: kmsg.DescribeUserSCRAMCredentials.Int16(), checks: []int{0}, req: func(*azNames) kmsg.Request {
			return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		}},
		{name: "AlterUserScramCredentials", key: kmsg.AlterUserSCRAMCredentials.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			u.Name, u.Mechanism, u.Iterations = n.other, 1, 4096
			u.Salt, u.SaltedPassword = []byte("salt-salt-salt"), make([]byte, 32)
			req.Upsertions = append(req.Upsertions, u)
			return req
		}},
		{name: "AlterPartition", key: kmsg.AlterPartition.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrAlterPartitionRequest()
			req.Version, req.BrokerID, req.BrokerEpoch = 1, 99, -1
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.Topic = n.newTopic // no such topic: a permitted request changes nothing
			rp := kmsg.NewAlterPartitionRequestTopicPartition()
			rp.NewISR = []int32{99}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "DescribeCluster", key: kmsg.DescribeCluster.Int16(), checks: []int{0}, req: func(*azNames) kmsg.Request {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.IncludeClusterAuthorizedOperations = true
			return req
		}, ops: func(resp kmsg.Response) int32 {
			return resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations
		}},
		{name: "DescribeProducers", key: kmsg.DescribeProducers.Int16(), checks: []int{0}, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDescribeProducersRequest()
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = n.topic, []int32{0}
			req.Topics = append(req.Topics, rt)
			return req
		}},
		{name: "DescribeTransactions", key: kmsg.DescribeTransactions.Int16(), checks: []int{0, 1}, setup: withTxn, req: func(n *azNames) kmsg.Request {
			req := kmsg.NewPtrDescribeTransactionsRequest()
			req.TransactionalIDs = []string{n.txn}
			return req
		}, seen: func(resp kmsg.Response) []azSeen {
			var out []azSeen
			for _, st := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
				for _, rt := range st.Topics {
					out = append(out, topicSeen(&rt.Topic)...)
				}
			}
			return out
		}},
		{name: "ListTransactions", key: kmsg.ListTransactions.Int16(), checks: []int{0}, setup: withTxn, req: func(*azNames) kmsg.Request {
			return kmsg.NewPtrListTransactionsRequest()
		}, seen: func(resp kmsg.Response) []azSeen {
			var out []azSeen
			for _, st := range resp.(*kmsg.ListTransactionsResponse).TransactionStates {
				out = append(out, azSeen{kmsg.ACLResourceTypeTransactionalId, st.TransactionalID})
			}
			return out
		}},
	}
}

func azFetch(topic string, replica int32) kmsg.Request {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = 11, replica, 1<<20, 0
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func azMetadata(version int16, autoCreate bool, topics ...string) kmsg.Request {
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = version, autoCreate
	if len(topics) > 0 {
		for _, topic := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
		}
	} else {
		req.Topics = nil // every topic
	}
	return req
}

func azOffsetFetch(group string, topics []string) kmsg.Request {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	for _, topic := range topics { // nil topics: every topic of the group
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	return req
}

func azFindCoordinator(keyType int8, key string) kmsg.Request {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, keyType, []string{key}
	return req
}

func azDescribeConfigs(rtype kmsg.ConfigResourceType, name string) kmsg.Request {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = rtype, name
	req.Resources = append(req.Resources, rr)
	return req
}

func azAlterConfigs(rtype kmsg.ConfigResourceType, name, key, value string) kmsg.Request {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Version = 2
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = rtype, name
	if key != "" {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = key, kmsg.StringPtr(value)
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	return req
}

func azIncrementalAlterConfigs(rtype kmsg.ConfigResourceType, name, key, value string) kmsg.Request {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = rtype, name
	if key != "" {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = key, kmsg.StringPtr(value)
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	return req
}
