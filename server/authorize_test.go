package server

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJavaHostAddress(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"127.0.0.1:9092", "127.0.0.1"},
		{"10.1.2.3:1", "10.1.2.3"},
		{"[::1]:9092", "0:0:0:0:0:0:0:1"},
		{"[2001:db8::ff00:42:8329]:1", "2001:db8:0:0:0:ff00:42:8329"},
		{"[2001:DB8:0:0:8:800:200C:417A]:1", "2001:db8:0:0:8:800:200c:417a"},
		{"[::ffff:192.0.2.128]:1", "192.0.2.128"}, // Java's Inet4Address for a mapped one
		{"[fe80::1%eth0]:1", "fe80:0:0:0:0:0:0:1%eth0"},
		{"[::]:1", "0:0:0:0:0:0:0:0"},
		{"192.0.2.7", "192.0.2.7"}, // no port
		{"", ""},
		{"not-an-address:1", "not-an-address"},
	} {
		if got := javaHostAddress(tc.remote); got != tc.want {
			t.Errorf("javaHostAddress(%q) = %q, want %q", tc.remote, got, tc.want)
		}
	}
}

func TestSplitByName(t *testing.T) {
	id := func(s string) string { return s }
	for _, tc := range []struct {
		in, allowed, yes, no []string
	}{
		{in: nil, yes: nil, no: nil},
		{in: []string{"a", "b"}, allowed: []string{"a", "b"}, yes: []string{"a", "b"}},
		{in: []string{"a", "b", "c"}, allowed: []string{"a", "c"}, yes: []string{"a", "c"}, no: []string{"b"}},
		{in: []string{"a", "b"}, allowed: nil, yes: nil, no: []string{"a", "b"}},
		{in: []string{"b", "a"}, allowed: []string{"a"}, yes: []string{"a"}, no: []string{"b"}},
	} {
		yes, no := splitByName(tc.in, id, func(s string) bool { return slices.Contains(tc.allowed, s) })
		if !slices.Equal(yes, tc.yes) || !slices.Equal(no, tc.no) {
			t.Errorf("split %q by %q: %q %q, want %q %q", tc.in, tc.allowed, yes, no, tc.yes, tc.no)
		}
	}
}

// TestAuthorizationUpdate: the authorizer is rebuilt when the set of ACLs
// changes, and only then.
func TestAuthorizationUpdate(t *testing.T) {
	cfg := config.Default()
	if newAuthorization(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) != nil {
		t.Fatal("an authorizer without authorizer.class.name")
	}
	cfg.Authorizer = config.ACLAuthorizerClasses()[0]
	a := newAuthorization(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	readT := acl.Binding{Resource: acl.Resource{Type: acl.ResourceTopic, Name: "t", Pattern: acl.PatternLiteral},
		Entry: acl.Entry{Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}}
	first := a.current.Load()
	if first.Authorize("User:alice", "1.2.3.4", acl.OpRead, acl.ResourceTopic, "t") {
		t.Fatal("allowed before any ACL")
	}
	for i, step := range []struct {
		bindings []acl.Binding
		rebuilt  bool
	}{
		{nil, false},                                // no ACLs: the first authorizer stands
		{[]acl.Binding{}, false},                    // the same, spelled differently
		{[]acl.Binding{readT}, true},                // a new ACL
		{slices.Clone([]acl.Binding{readT}), false}, // a new view, the same ACLs
		{nil, true},                                 // deleted
	} {
		if got := a.update(step.bindings); got != step.rebuilt {
			t.Errorf("step %d: rebuilt %v, want %v", i, got, step.rebuilt)
		}
		want := len(step.bindings) > 0
		if got := a.current.Load().Authorize("User:alice", "1.2.3.4", acl.OpRead, acl.ResourceTopic, "t"); got != want {
			t.Errorf("step %d: Read on t allowed %v, want %v", i, got, want)
		}
	}
}

// TestEveryAPIHasAnAuthorizationRule keeps internal/authz's table in step
// with the APIs served: a new API must say what it checks.
func TestEveryAPIHasAnAuthorizationRule(t *testing.T) {
	ruled := map[int16]bool{}
	for _, r := range authz.Rules() {
		ruled[r.Key] = true
		if _, served := apis[r.Key]; !served {
			t.Errorf("authz lists %s, which the broker does not serve", kmsg.NameForKey(r.Key))
		}
	}
	for _, a := range supportedAPIs() {
		if !ruled[a.key] {
			t.Errorf("%s is served without an entry in internal/authz", kmsg.NameForKey(a.key))
		}
	}
}

func TestSupportedOperations(t *testing.T) {
	b := &Broker{}
	for rt, want := range map[kmsg.ACLResourceType]int32{
		acl.ResourceTopic:           1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11,
		acl.ResourceGroup:           1<<3 | 1<<6 | 1<<8,
		acl.ResourceCluster:         1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12,
		acl.ResourceTransactionalID: 1<<4 | 1<<8,
	} {
		// Without an authorizer every supported operation is allowed.
		if got := b.authorizedOperations(nil, rt, "x"); got != want {
			t.Errorf("%v: %b, want %b", rt, got, want)
		}
	}
}

// authzTestBroker is an embedded broker with the ACL authorizer on,
// User:admin a super user, and topics t and secret, groups g and hidden
// with offsets committed on both topics.
func authzTestBroker(t *testing.T) *Broker {
	t.Helper()
	b := newAdminTestBroker(t, func(c *config.Config) {
		c.Authorizer = "kafka.security.authorizer.AclAuthorizer"
		c.SuperUsers = []string{"User:admin"}
		c.TransactionStateLogNumPartitions = 1
	})
	b.watchACLs()
	mustCreateTopic(t, b, offsetsTopic, 1, nil)
	mustCreateTopic(t, b, "t", 1, nil)
	mustCreateTopic(t, b, "secret", 1, nil)
	admin := &requestContext{principal: "User:admin", remote: "127.0.0.1:1000"}
	for _, g := range []string{"g", "hidden"} {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, g, -1
		for _, topic := range []string{"t", "secret"} {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		retryWhileLoading(t, func() int16 {
			resp, err := handleOffsetCommit(context.Background(), b, admin, req)
			if err != nil {
				t.Fatal(err)
			}
			return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		})
	}
	return b
}

// allow is an ALLOW binding for principal from any host.
func allow(principal string, rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) acl.Binding {
	return acl.Binding{Resource: acl.Resource{Type: rt, Name: name, Pattern: acl.PatternLiteral},
		Entry: acl.Entry{Principal: principal, Host: "*", Operation: op, Permission: acl.PermissionAllow}}
}

func mustCreateACLs(t *testing.T, b *Broker, bindings ...acl.Binding) {
	t.Helper()
	for i, err := range b.controller.CreateACLs(bindings) {
		if err != nil {
			t.Fatalf("creating %v: %v", bindings[i], err)
		}
	}
}

// TestHandlersAuthorize checks the decisions of the handlers whose answer
// must not tell an unauthorized principal what it may not see, and the
// rules with alternatives, on an embedded broker. Each case has its own
// principal, so ACLs of one case do not help another.
func TestHandlersAuthorize(t *testing.T) {
	b := authzTestBroker(t)
	ctx := context.Background()
	topicNames := func(resp *kmsg.MetadataResponse) []string {
		var out []string
		for _, mt := range resp.Topics {
			if mt.Topic != nil {
				out = append(out, *mt.Topic)
			}
		}
		return out
	}
	metadata := func(rc *requestContext, version int16, topics ...string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = version
		req.AllowAutoTopicCreation = true
		req.IncludeClusterAuthorizedOperations = version <= 10
		req.IncludeTopicAuthorizedOperations = true
		if topics != nil {
			req.Topics = []kmsg.MetadataRequestTopic{}
			for _, topic := range topics {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(topic)
				req.Topics = append(req.Topics, rt)
			}
		}
		resp, err := handleMetadata(ctx, b, rc, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.MetadataResponse)
	}
	produce := func(rc *requestContext, topic string) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = adminTestBatch(1)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := handleProduce(ctx, b, rc, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*produceResponse).Topics[0].Partitions[0].ErrorCode
	}
	const (
		ok          = int16(0)
		topicAuth   = int16(29)
		groupAuth   = int16(30)
		clusterAuth = int16(31)
		txnAuth     = int16(53)
	)

	for _, tc := range []struct {
		name  string
		acls  func(p string) []acl.Binding
		check func(t *testing.T, rc *requestContext)
	}{
		{"metadata lists only describable topics", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceTopic, "t", acl.OpRead)}
		}, func(t *testing.T, rc *requestContext) {
			resp := metadata(rc, 12)
			if got := topicNames(resp); !slices.Equal(got, []string{"t"}) {
				t.Errorf("all topics: %q, want only t", got)
			}
			// Read implies Describe; the topic's operations say so.
			if ops := resp.Topics[0].AuthorizedOperations; ops != 1<<acl.OpRead|1<<acl.OpDescribe {
				t.Errorf("operations on t: %b", ops)
			}
		}},
		{"metadata names: unauthorized and missing look alike", nil, func(t *testing.T, rc *requestContext) {
			resp := metadata(rc, 12, "secret", "no-such-topic")
			for _, mt := range resp.Topics {
				if mt.ErrorCode != topicAuth || mt.TopicID != [16]byte{} || len(mt.Partitions) != 0 ||
					mt.AuthorizedOperations != unrequestedOperations {
					t.Errorf("%s: %+v, want TOPIC_AUTHORIZATION_FAILED and nothing else", *mt.Topic, mt)
				}
			}
			if _, created := b.controller.Metadata().Topics["no-such-topic"]; created {
				t.Error("a topic was created for a principal without Describe")
			}
		}},
		{"metadata by id keeps the id, not the name", nil, func(t *testing.T, rc *requestContext) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 12
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = b.controller.Metadata().Topics["secret"].ID
			req.Topics = append(req.Topics, rt)
			r, _ := handleMetadata(ctx, b, rc, req)
			mt := r.(*kmsg.MetadataResponse).Topics[0]
			if mt.ErrorCode != topicAuth || mt.Topic != nil || mt.TopicID != rt.TopicID {
				t.Errorf("%+v", mt)
			}
		}},
		{"auto-creation needs Create", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceTopic, "auto-a", acl.OpDescribe),
				allow(p, acl.ResourceTopic, "auto-b", acl.OpDescribe), allow(p, acl.ResourceTopic, "auto-b", acl.OpCreate)}
		}, func(t *testing.T, rc *requestContext) {
			resp := metadata(rc, 12, "auto-a", "auto-b")
			if resp.Topics[0].ErrorCode != topicAuth || resp.Topics[1].ErrorCode != ok {
				t.Errorf("codes %d %d, want %d 0", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode, topicAuth)
			}
			md := b.controller.Metadata()
			if _, a := md.Topics["auto-a"]; a {
				t.Error("auto-a created without Create")
			}
			if _, bb := md.Topics["auto-b"]; !bb {
				t.Error("auto-b not created")
			}
		}},
		{"cluster operations: 0 without Describe on the cluster", nil, func(t *testing.T, rc *requestContext) {
			if ops := metadata(rc, 10).AuthorizedOperations; ops != 0 {
				t.Errorf("cluster operations %b, want 0", ops)
			}
		}},
		{"cluster operations with Describe", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceCluster, acl.ClusterName, acl.OpDescribe),
				allow(p, acl.ResourceCluster, acl.ClusterName, acl.OpIdempotentWrite)}
		}, func(t *testing.T, rc *requestContext) {
			if ops := metadata(rc, 10).AuthorizedOperations; ops != 1<<acl.OpDescribe|1<<acl.OpIdempotentWrite {
				t.Errorf("cluster operations %b", ops)
			}
		}},
		{"produce needs Write, and Create to create", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceTopic, "t", acl.OpWrite), allow(p, acl.ResourceTopic, "new-by-produce", acl.OpWrite)}
		}, func(t *testing.T, rc *requestContext) {
			if code := produce(rc, "t"); code != ok {
				t.Errorf("produce to t: %d", code)
			}
			if code := produce(rc, "secret"); code != topicAuth {
				t.Errorf("produce to secret: %d", code)
			}
			if code := produce(rc, "new-by-produce"); code != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("produce to a missing topic without Create: %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
			}
		}},
		{"fetch: consumers need Read, followers ClusterAction", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceTopic, "t", acl.OpRead)}
		}, func(t *testing.T, rc *requestContext) {
			for _, tc := range []struct {
				replica int32
				topic   string
				want    int16
			}{{-1, "t", ok}, {-1, "secret", topicAuth}, {-1, "no-such-topic", topicAuth}, {7, "t", topicAuth}} {
				req := kmsg.NewPtrFetchRequest()
				req.Version, req.ReplicaID, req.MaxBytes = 11, tc.replica, 1<<20
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = tc.topic
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.PartitionMaxBytes = 1 << 20
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				r, err := handleFetch(ctx, b, rc, req)
				if err != nil {
					t.Fatal(err)
				}
				fr := r.(*fetchResponse)
				if code := fr.Topics[0].Partitions[0].ErrorCode; code != tc.want {
					t.Errorf("replica %d fetching %s: %d, want %d", tc.replica, tc.topic, code, tc.want)
				}
				fr.Close()
			}
		}},
		{"offset for leader epoch: ClusterAction or Describe", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceTopic, "t", acl.OpDescribe)}
		}, func(t *testing.T, rc *requestContext) {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.Version = 3
			for _, topic := range []string{"t", "secret"} {
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = topic
				rt.Partitions = append(rt.Partitions, kmsg.NewOffsetForLeaderEpochRequestTopicPartition())
				req.Topics = append(req.Topics, rt)
			}
			r, _ := handleOffsetForLeaderEpoch(ctx, b, rc, req)
			got := r.(*kmsg.OffsetForLeaderEpochResponse).Topics
			if got[0].Partitions[0].ErrorCode != ok || got[1].Partitions[0].ErrorCode != topicAuth || got[1].Partitions[0].EndOffset != -1 {
				t.Errorf("%+v", got)
			}
		}},
		{"groups: list and describe only what may be described", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceGroup, "g", acl.OpDescribe)}
		}, func(t *testing.T, rc *requestContext) {
			lr, _ := handleListGroups(ctx, b, rc, kmsg.NewPtrListGroupsRequest())
			var listed []string
			for _, g := range lr.(*kmsg.ListGroupsResponse).Groups {
				listed = append(listed, g.Group)
			}
			if !slices.Equal(listed, []string{"g"}) {
				t.Errorf("listed %q, want only g", listed)
			}
			dreq := kmsg.NewPtrDescribeGroupsRequest()
			dreq.Version, dreq.Groups, dreq.IncludeAuthorizedOperations = 5, []string{"hidden", "g"}, true
			dr, _ := handleDescribeGroups(ctx, b, rc, dreq)
			gs := dr.(*kmsg.DescribeGroupsResponse).Groups
			if gs[0].Group != "hidden" || gs[0].ErrorCode != groupAuth || gs[0].State != "" || gs[1].ErrorCode != ok ||
				gs[1].AuthorizedOperations != 1<<acl.OpDescribe {
				t.Errorf("described %+v", gs)
			}
		}},
		{"list groups with Describe on the cluster lists all", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceCluster, acl.ClusterName, acl.OpDescribe)}
		}, func(t *testing.T, rc *requestContext) {
			lr, _ := handleListGroups(ctx, b, rc, kmsg.NewPtrListGroupsRequest())
			if n := len(lr.(*kmsg.ListGroupsResponse).Groups); n != 2 {
				t.Errorf("%d groups listed, want 2", n)
			}
		}},
		{"offset fetch leaves out topics it may not describe", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceGroup, "g", acl.OpDescribe), allow(p, acl.ResourceTopic, "t", acl.OpDescribe)}
		}, func(t *testing.T, rc *requestContext) {
			for _, v := range []int16{7, 8} {
				req := kmsg.NewPtrOffsetFetchRequest()
				req.Version = v
				if v >= 8 {
					rg := kmsg.NewOffsetFetchRequestGroup()
					rg.Group = "g"
					hidden := kmsg.NewOffsetFetchRequestGroup()
					hidden.Group = "hidden"
					req.Groups = append(req.Groups, rg, hidden)
				} else {
					req.Group = "g"
				}
				r, _ := handleOffsetFetch(ctx, b, rc, req)
				resp := r.(*kmsg.OffsetFetchResponse)
				var topics []string
				if v >= 8 {
					for _, rt := range resp.Groups[0].Topics {
						topics = append(topics, rt.Topic)
					}
					if resp.Groups[1].ErrorCode != groupAuth || len(resp.Groups[1].Topics) != 0 {
						t.Errorf("v%d hidden group: %+v", v, resp.Groups[1])
					}
				} else {
					for _, rt := range resp.Topics {
						topics = append(topics, rt.Topic)
					}
				}
				if !slices.Equal(topics, []string{"t"}) {
					t.Errorf("v%d: all offsets of g show %q, want only t", v, topics)
				}
			}
			// Named: the undescribable topic is refused, not hidden.
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version, req.Group = 7, "g"
			for _, topic := range []string{"t", "secret"} {
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic, rt.Partitions = topic, []int32{0}
				req.Topics = append(req.Topics, rt)
			}
			r, _ := handleOffsetFetch(ctx, b, rc, req)
			resp := r.(*kmsg.OffsetFetchResponse)
			if len(resp.Topics) != 2 || resp.Topics[0].Partitions[0].Offset != 1 || resp.Topics[1].Partitions[0].ErrorCode != topicAuth ||
				resp.Topics[1].Partitions[0].Offset != -1 {
				t.Errorf("named: %+v", resp.Topics)
			}
		}},
		{"find coordinator", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceGroup, "g", acl.OpRead)}
		}, func(t *testing.T, rc *requestContext) {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorKeys = 4, []string{"g", "hidden"}
			r, _ := handleFindCoordinator(ctx, b, rc, req)
			cs := r.(*kmsg.FindCoordinatorResponse).Coordinators
			if cs[0].ErrorCode != ok || cs[1].ErrorCode != groupAuth || cs[1].NodeID != -1 {
				t.Errorf("%+v", cs)
			}
			req.CoordinatorType, req.CoordinatorKeys = 1, []string{"tx"}
			r, _ = handleFindCoordinator(ctx, b, rc, req)
			if c := r.(*kmsg.FindCoordinatorResponse).Coordinators[0]; c.ErrorCode != txnAuth {
				t.Errorf("transaction key: %+v", c)
			}
		}},
		{"create topics: Create, and DescribeConfigs to see what was created", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceTopic, "made", acl.OpCreate)}
		}, func(t *testing.T, rc *requestContext) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version = 7
			for _, name := range []string{"made", "not-made"} {
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, 1
				req.Topics = append(req.Topics, rt)
			}
			r, _ := handleCreateTopics(ctx, b, rc, req)
			ts := r.(*kmsg.CreateTopicsResponse).Topics
			if ts[0].ErrorCode != ok || ts[0].ConfigErrorCode != topicAuth || ts[0].NumPartitions != -1 || len(ts[0].Configs) != 0 ||
				ts[0].TopicID != [16]byte{} {
				t.Errorf("made: %+v", ts[0])
			}
			if ts[1].ErrorCode != topicAuth || ts[1].ErrorMessage == nil || *ts[1].ErrorMessage != "Authorization failed." {
				t.Errorf("not-made: %+v", ts[1])
			}
			if _, made := b.controller.Metadata().Topics["not-made"]; made {
				t.Error("not-made was created")
			}
		}},
		{"delete topics: no Delete looks like no topic", nil, func(t *testing.T, rc *requestContext) {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version = 6
			for _, id := range [][16]byte{b.controller.Metadata().Topics["secret"].ID} {
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.TopicID = id
				req.Topics = append(req.Topics, rt)
			}
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr("no-such-topic")
			req.Topics = append(req.Topics, rt)
			r, _ := handleDeleteTopics(ctx, b, rc, req)
			ts := r.(*kmsg.DeleteTopicsResponse).Topics
			if ts[0].ErrorCode != topicAuth || ts[0].Topic != nil || ts[1].ErrorCode != topicAuth {
				t.Errorf("%+v", ts)
			}
			if _, ok := b.controller.Metadata().Topics["secret"]; !ok {
				t.Error("secret deleted")
			}
		}},
		{"configs: topics by topic, brokers by cluster", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceTopic, "t", acl.OpAlterConfigs)}
		}, func(t *testing.T, rc *requestContext) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Version = 4
			for _, r := range []struct {
				typ  kmsg.ConfigResourceType
				name string
			}{{kmsg.ConfigResourceTypeTopic, "t"}, {kmsg.ConfigResourceTypeTopic, "no-such-topic"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = r.typ, r.name
				req.Resources = append(req.Resources, rr)
			}
			r, _ := handleDescribeConfigs(ctx, b, rc, req)
			rs := r.(*kmsg.DescribeConfigsResponse).Resources
			// AlterConfigs implies DescribeConfigs.
			if rs[0].ErrorCode != ok || len(rs[0].Configs) == 0 || rs[1].ErrorCode != topicAuth || rs[2].ErrorCode != clusterAuth ||
				len(rs[2].Configs) != 0 {
				t.Errorf("%+v", rs)
			}
			areq := kmsg.NewPtrIncrementalAlterConfigsRequest()
			for _, name := range []string{"t", "secret"} {
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, name
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("1000")
				rr.Configs = append(rr.Configs, c)
				areq.Resources = append(areq.Resources, rr)
			}
			ar, _ := handleIncrementalAlterConfigs(ctx, b, rc, areq)
			as := ar.(*kmsg.IncrementalAlterConfigsResponse).Resources
			if as[0].ErrorCode != ok || as[1].ErrorCode != topicAuth {
				t.Errorf("%+v", as)
			}
			if b.controller.Metadata().Topics["secret"].Configs["retention.ms"] != "" {
				t.Error("secret's config changed")
			}
		}},
		{"idempotent producers: IdempotentWrite or Write on some topic", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceTopic, "t", acl.OpWrite)}
		}, func(t *testing.T, rc *requestContext) {
			req := kmsg.NewPtrInitProducerIDRequest()
			r, _ := handleInitProducerID(ctx, b, rc, req)
			if code := r.(*kmsg.InitProducerIDResponse).ErrorCode; code != ok {
				t.Errorf("idempotent with Write on t: %d", code)
			}
			r, _ = handleInitProducerID(ctx, b, &requestContext{principal: "User:nobody", remote: rc.remote}, req)
			if code := r.(*kmsg.InitProducerIDResponse).ErrorCode; code != clusterAuth {
				t.Errorf("idempotent without ACLs: %d", code)
			}
			req.TransactionalID = kmsg.StringPtr("tx")
			r, _ = handleInitProducerID(ctx, b, rc, req)
			if code := r.(*kmsg.InitProducerIDResponse).ErrorCode; code != txnAuth {
				t.Errorf("transactional without Write on tx: %d", code)
			}
		}},
		{"add partitions: internal topics never, brokers need ClusterAction", func(p string) []acl.Binding {
			return []acl.Binding{allow(p, acl.ResourceTransactionalID, "tx", acl.OpWrite), allow(p, acl.ResourceTopic, "*", acl.OpAll)}
		}, func(t *testing.T, rc *requestContext) {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.Version, req.TransactionalID = 3, "tx"
			for _, topic := range []string{"t", offsetsTopic} {
				rt := kmsg.NewAddPartitionsToTxnRequestTopic()
				rt.Topic, rt.Partitions = topic, []int32{0}
				req.Topics = append(req.Topics, rt)
			}
			r, _ := handleAddPartitionsToTxn(ctx, b, rc, req)
			ts := r.(*kmsg.AddPartitionsToTxnResponse).Topics
			if ts[0].Partitions[0].ErrorCode != kerr.OperationNotAttempted.Code || ts[1].Partitions[0].ErrorCode != topicAuth {
				t.Errorf("%+v", ts)
			}
			req.Version = 4
			r, _ = handleAddPartitionsToTxn(ctx, b, rc, req)
			if resp := r.(*kmsg.AddPartitionsToTxnResponse); resp.ErrorCode != clusterAuth || len(resp.Transactions) != 0 {
				t.Errorf("v4: %+v", resp)
			}
		}},
		{"ACLs need the cluster", nil, func(t *testing.T, rc *requestContext) {
			r, _ := handleDescribeACLs(ctx, b, rc, kmsg.NewPtrDescribeACLsRequest())
			if resp := r.(*kmsg.DescribeACLsResponse); resp.ErrorCode != clusterAuth || len(resp.Resources) != 0 {
				t.Errorf("describe: %+v", resp)
			}
			creq := kmsg.NewPtrCreateACLsRequest()
			creq.Version = 3
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = acl.ResourceTopic, "secret", acl.PatternLiteral
			c.Principal, c.Host, c.Operation, c.PermissionType = rc.principal, "*", acl.OpAll, acl.PermissionAllow
			creq.Creations = append(creq.Creations, c)
			r, _ = handleCreateACLs(ctx, b, rc, creq)
			if res := r.(*kmsg.CreateACLsResponse).Results; len(res) != 1 || res[0].ErrorCode != clusterAuth {
				t.Errorf("create: %+v", res)
			}
			if b.authorize(rc, acl.OpRead, acl.ResourceTopic, "secret") {
				t.Error("a principal granted itself Read")
			}
		}},
		{"an ACL for another host does not apply", func(p string) []acl.Binding {
			bd := allow(p, acl.ResourceTopic, "t", acl.OpDescribe)
			bd.Host = "10.9.9.9"
			return []acl.Binding{bd}
		}, func(t *testing.T, rc *requestContext) {
			if got := topicNames(metadata(rc, 12)); len(got) != 0 {
				t.Errorf("listed %q from 127.0.0.1", got)
			}
			if got := topicNames(metadata(&requestContext{principal: rc.principal, remote: "10.9.9.9:5"}, 12)); !slices.Equal(got, []string{"t"}) {
				t.Errorf("listed %q from 10.9.9.9", got)
			}
		}},
		{"super users see everything", nil, func(t *testing.T, _ *requestContext) {
			rc := &requestContext{principal: "User:admin", remote: "127.0.0.1:1"}
			got := topicNames(metadata(rc, 12))
			if !slices.Contains(got, "secret") || !slices.Contains(got, offsetsTopic) {
				t.Errorf("super user sees %q", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			principal := "User:case-" + tc.name
			if tc.acls != nil {
				mustCreateACLs(t, b, tc.acls(principal)...)
			}
			tc.check(t, &requestContext{principal: principal, remote: "127.0.0.1:40000"})
		})
	}
}

// TestNoAuthorizerAllowsEverything: without authorizer.class.name nothing
// is refused, whatever ACLs exist.
func TestNoAuthorizerAllowsEverything(t *testing.T) {
	b := newAdminTestBroker(t)
	b.watchACLs()
	mustCreateTopic(t, b, "t", 1, nil)
	mustCreateACLs(t, b, acl.Binding{Resource: acl.Resource{Type: acl.ResourceTopic, Name: "t", Pattern: acl.PatternLiteral},
		Entry: acl.Entry{Principal: "User:*", Host: "*", Operation: acl.OpAll, Permission: acl.PermissionDeny}})
	rc := &requestContext{principal: "User:alice", remote: "127.0.0.1:1"}
	if !b.authorize(rc, acl.OpWrite, acl.ResourceTopic, "t") || !b.authorizeAnyResource(rc, acl.OpWrite, acl.ResourceTopic) {
		t.Error("refused without an authorizer")
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	r, _ := handleDescribeCluster(context.Background(), b, rc, req)
	if ops := r.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops != b.authorizedOperations(nil, acl.ResourceCluster, acl.ClusterName) || ops == 0 {
		t.Errorf("cluster operations %b", ops)
	}
}
