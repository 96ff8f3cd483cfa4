package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/quota"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func quotaEntry(ops map[string]float64, parts ...string) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for i := 0; i+1 < len(parts); i += 2 {
		p := kmsg.NewAlterClientQuotasRequestEntryEntity()
		p.Type = parts[i]
		if name := parts[i+1]; name != "<null>" {
			p.Name = &name
		}
		e.Entity = append(e.Entity, p)
	}
	for k, v := range ops {
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value, op.Remove = k, v, v == -1 // -1: remove
		e.Ops = append(e.Ops, op)
	}
	return e
}

// entityString prints a described entity as "user=alice,client-id=<default>".
func entityString(parts []kmsg.DescribeClientQuotasResponseEntryEntity) string {
	var s []string
	for _, p := range parts {
		name := "<default>"
		if p.Name != nil {
			name = *p.Name
		}
		s = append(s, p.Type+"="+name)
	}
	return strings.Join(s, ",")
}

// AlterClientQuotas and DescribeClientQuotas on an embedded broker: every
// entity kind, Kafka's match semantics, and Kafka's errors.
func TestClientQuotaAPIs(t *testing.T) {
	b := newAdminTestBroker(t)
	alter := func(validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) []kmsg.AlterClientQuotasResponseEntry {
		t.Helper()
		req := kmsg.NewPtrAlterClientQuotasRequest()
		req.Entries, req.ValidateOnly = entries, validateOnly
		resp, err := handleAlterClientQuotas(context.Background(), b, &requestContext{}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.AlterClientQuotasResponse).Entries
	}
	type comp struct {
		typ   string
		match int8
		name  string
	}
	describe := func(strict bool, comps ...comp) (*kmsg.DescribeClientQuotasResponse, []string) {
		t.Helper()
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Strict = strict
		for _, c := range comps {
			rc := kmsg.NewDescribeClientQuotasRequestComponent()
			rc.EntityType, rc.MatchType = c.typ, kmsg.QuotasMatchType(c.match)
			if c.match == 0 {
				name := c.name
				rc.Match = &name
			}
			req.Components = append(req.Components, rc)
		}
		resp, err := handleDescribeClientQuotas(context.Background(), b, &requestContext{}, req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.DescribeClientQuotasResponse)
		var got []string
		for _, e := range r.Entries {
			var vals []string
			for _, v := range e.Values {
				vals = append(vals, fmt.Sprintf("%s=%v", v.Key, v.Value))
			}
			got = append(got, entityString(e.Entity)+":"+strings.Join(vals, ","))
		}
		return r, got
	}
	const user, client = controller.QuotaEntityUser, controller.QuotaEntityClientID
	p := controller.ProducerByteRate

	// validate_only writes nothing; errors are per entry.
	res := alter(true, quotaEntry(map[string]float64{p: 1024}, user, "alice"), quotaEntry(map[string]float64{"nope": 1}, user, "bob"))
	if res[0].ErrorCode != 0 || res[1].ErrorCode != kerr.InvalidRequest.Code || *res[1].ErrorMessage != "Invalid configuration key nope" {
		t.Fatalf("validate only: %+v", res)
	}
	if _, got := describe(false); len(got) != 0 {
		t.Fatalf("validate_only wrote %v", got)
	}
	res = alter(false,
		quotaEntry(map[string]float64{p: 1024}, user, "alice"),
		quotaEntry(map[string]float64{controller.ConsumerByteRate: 2048}, user, "<null>"),
		quotaEntry(map[string]float64{controller.RequestPercentage: 50}, client, "app"),
		quotaEntry(map[string]float64{p: 4096}, client, "<null>"),
		quotaEntry(map[string]float64{p: 1}, user, "alice", client, "app"),
		quotaEntry(map[string]float64{p: 2}, client, "<null>", user, "alice"),
		quotaEntry(map[string]float64{p: 3}, user, "<null>", client, "app"),
		quotaEntry(map[string]float64{p: 4}, user, "<null>", client, "<null>"),
		quotaEntry(map[string]float64{p: 0}, user, "zero"),
		quotaEntry(map[string]float64{p: 1.5}, user, "frac"),
		quotaEntry(map[string]float64{p: 1}, "ip", "127.0.0.1"),
		quotaEntry(map[string]float64{p: 1}),
	)
	wantErrs := []string{"", "", "", "", "", "", "", "",
		"Quota producer_byte_rate must be greater than 0", "producer_byte_rate cannot be a fractional value.",
		"kbroker does not support IP quotas (connection_creation_rate)", "Invalid empty client quota entity"}
	for i, r := range res {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		if msg != wantErrs[i] || (msg == "") != (r.ErrorCode == 0) || (msg != "" && r.ErrorCode != kerr.InvalidRequest.Code) {
			t.Errorf("entry %d: %d %q, want %q", i, r.ErrorCode, msg, wantErrs[i])
		}
	}
	// The entity is echoed as sent.
	if got := res[5].Entity; len(got) != 2 || got[0].Type != client || got[0].Name != nil || *got[1].Name != "alice" {
		t.Fatalf("echoed entity %+v", got)
	}
	// A user's SCRAM credential is not a quota.
	ups := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "scram-only", 1, 4096, []byte("s"), []byte("p")
	ups.Upsertions = append(ups.Upsertions, up)
	if _, err := handleAlterUserSCRAMCredentials(context.Background(), b, &requestContext{}, ups); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		strict bool
		comps  []comp
		want   []string
	}{
		{"everything", false, nil, []string{
			"client-id=<default>:producer_byte_rate=4096",
			"client-id=app:request_percentage=50",
			"user=<default>:consumer_byte_rate=2048",
			"user=<default>,client-id=<default>:producer_byte_rate=4",
			"user=<default>,client-id=app:producer_byte_rate=3",
			"user=alice:producer_byte_rate=1024",
			"user=alice,client-id=<default>:producer_byte_rate=2",
			"user=alice,client-id=app:producer_byte_rate=1",
		}},
		{"strict with nothing: nothing", true, nil, nil},
		{"exact user", false, []comp{{user, 0, "alice"}}, []string{
			"user=alice:producer_byte_rate=1024", "user=alice,client-id=<default>:producer_byte_rate=2", "user=alice,client-id=app:producer_byte_rate=1"}},
		{"exact user, strict", true, []comp{{user, 0, "alice"}}, []string{"user=alice:producer_byte_rate=1024"}},
		{"default user, strict", true, []comp{{user, 1, ""}}, []string{"user=<default>:consumer_byte_rate=2048"}},
		{"any user, strict", true, []comp{{user, 2, ""}}, []string{"user=<default>:consumer_byte_rate=2048", "user=alice:producer_byte_rate=1024"}},
		{"any client id", false, []comp{{client, 2, ""}}, []string{
			"client-id=<default>:producer_byte_rate=4096", "client-id=app:request_percentage=50",
			"user=<default>,client-id=<default>:producer_byte_rate=4", "user=<default>,client-id=app:producer_byte_rate=3",
			"user=alice,client-id=<default>:producer_byte_rate=2", "user=alice,client-id=app:producer_byte_rate=1"}},
		{"exact client id, strict", true, []comp{{client, 0, "app"}}, []string{"client-id=app:request_percentage=50"}},
		{"default user with exact client id", false, []comp{{user, 1, ""}, {client, 0, "app"}}, []string{"user=<default>,client-id=app:producer_byte_rate=3"}},
		{"any user with default client id", true, []comp{{user, 2, ""}, {client, 1, ""}}, []string{
			"user=<default>,client-id=<default>:producer_byte_rate=4", "user=alice,client-id=<default>:producer_byte_rate=2"}},
		{"an unknown user", false, []comp{{user, 0, "nobody"}}, nil},
		{"a user named <default> is not the default", true, []comp{{user, 0, "<default>"}}, nil},
		{"a user with SCRAM credentials only", false, []comp{{user, 0, "scram-only"}}, nil},
		{"ip: none kept", false, []comp{{"ip", 2, ""}}, nil},
	} {
		resp, got := describe(tc.strict, tc.comps...)
		if resp.ErrorCode != 0 || strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: %d\n%s\nwant\n%s", tc.name, resp.ErrorCode, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
	for _, tc := range []struct {
		name  string
		comps []comp
		code  *kerr.Error
		msg   string
	}{
		{"empty type", []comp{{"", 2, ""}}, kerr.InvalidRequest, "Unexpected empty filter component entity type"},
		{"duplicate type", []comp{{user, 2, ""}, {user, 1, ""}}, kerr.InvalidRequest, "Duplicate user filter component entity type"},
		{"custom type", []comp{{"group", 2, ""}}, kerr.UnsupportedVersion, "Custom entity type 'group' not supported"},
		{"ip with user", []comp{{"ip", 2, ""}, {user, 2, ""}}, kerr.InvalidRequest,
			"Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component."},
		{"unknown match type", []comp{{user, 7, ""}}, kerr.InvalidRequest, "Unexpected match type: 7"},
	} {
		resp, _ := describe(false, tc.comps...)
		if resp.ErrorCode != tc.code.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != tc.msg || resp.Entries != nil {
			t.Errorf("%s: %d %v %v, want %s %q", tc.name, resp.ErrorCode, resp.ErrorMessage, resp.Entries, tc.code.Message, tc.msg)
		}
	}

	// Removal: the entity goes when its last quota does.
	if res := alter(false, quotaEntry(map[string]float64{p: -1}, user, "alice", client, "app")); res[0].ErrorCode != 0 {
		t.Fatalf("removal: %+v", res)
	}
	if _, got := describe(true, comp{user, 0, "alice"}, comp{client, 0, "app"}); len(got) != 0 {
		t.Fatalf("after removal: %v", got)
	}
}

// A producer over its byte rate is answered at once with Kafka's throttle
// and its connection muted for it; another client id is not; a request
// quota is charged the handler's time, and inter-broker APIs never.
func TestProduceAndRequestThrottling(t *testing.T) {
	b := newAdminTestBroker(t)
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = append(req.Entries,
		quotaEntry(map[string]float64{controller.ProducerByteRate: 1000}, controller.QuotaEntityClientID, "slow"),
		quotaEntry(map[string]float64{controller.RequestPercentage: 0.00001}, controller.QuotaEntityUser, "busy"))
	if resp, err := handleAlterClientQuotas(context.Background(), b, &requestContext{}, req); err != nil || resp.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode != 0 {
		t.Fatalf("alter: %+v, %v", resp, err)
	}
	produce := func(clientID, principal string, acks int16, size int) (*produceResponse, time.Time) {
		t.Helper()
		preq := kmsg.NewPtrProduceRequest()
		preq.Version, preq.Acks, preq.TimeoutMillis = 9, acks, 1000
		start := time.Now()
		resp, muted, err := b.handleWithQuotas(context.Background(), &requestContext{clientID: clientID, principal: principal}, preq, size)
		if err != nil {
			t.Fatal(err)
		}
		if muted.IsZero() {
			return nil, time.Time{}
		}
		if d := muted.Sub(start); d <= 0 || d > 20*time.Second {
			t.Fatalf("muted for %v", d)
		}
		pr, _ := resp.(*produceResponse)
		return pr, muted
	}
	// 5000 bytes over the minimum 10 s window: 500 B/s, within 1000.
	if _, muted := produce("slow", "User:ANONYMOUS", 1, 5000); !muted.IsZero() {
		t.Fatal("throttled within the quota")
	}
	// 15000 more: 2000 B/s, (2000-1000)/1000*10 s = 10 s.
	pr, muted := produce("slow", "User:ANONYMOUS", 1, 15000)
	if pr == nil || pr.ThrottleMillis < 9990 || pr.ThrottleMillis > 10000 || muted.IsZero() {
		t.Fatalf("over the quota: %+v until %v", pr, muted)
	}
	// acks=0: no answer, still muted.
	if _, muted := produce("slow", "User:ANONYMOUS", 0, 100); muted.IsZero() {
		t.Fatal("acks=0 produce over the quota not muted")
	}
	if _, muted := produce("fast", "User:ANONYMOUS", 1, 1<<20); !muted.IsZero() {
		t.Fatal("a client id without a quota was throttled")
	}
	// request_percentage 0.00001%: any handler time is too much, and its
	// throttle is at most one window.
	mreq := kmsg.NewPtrMetadataRequest()
	resp, muted, err := b.handleWithQuotas(context.Background(), &requestContext{clientID: "x", principal: "User:busy"}, mreq, 10)
	if err != nil || muted.IsZero() {
		t.Fatalf("request quota: %v, %v", muted, err)
	}
	if th := resp.(*kmsg.MetadataResponse).ThrottleMillis; th <= 0 || th > 1000 {
		t.Fatalf("request quota throttle %d ms, want within one window", th)
	}
	if _, muted, _ := b.handleWithQuotas(context.Background(), &requestContext{clientID: "x", principal: "User:busy"}, kmsg.NewPtrUpdateMetadataRequest(), 10); !muted.IsZero() {
		t.Fatal("an inter-broker request was charged to a request quota")
	}
	// The metrics see the rates and the throttles.
	var sawThrottle bool
	b.clientQuotas.mu.Lock()
	for k, s := range b.clientQuotas.sensors {
		if k.kind == produceQuota && k.entity.ClientID == "slow" && s.throttleMs >= 9990 && s.bound == 1000 {
			sawThrottle = true
		}
	}
	b.clientQuotas.mu.Unlock()
	if !sawThrottle {
		t.Fatal("no throttle recorded for client id slow")
	}
}

// Without any quota in the view nothing is recorded.
func TestNoQuotasNoSensors(t *testing.T) {
	b := newAdminTestBroker(t)
	preq := kmsg.NewPtrProduceRequest()
	preq.Version, preq.Acks = 9, 1
	if _, muted, err := b.handleWithQuotas(context.Background(), &requestContext{clientID: "p"}, preq, 1<<30); err != nil || !muted.IsZero() {
		t.Fatal(muted, err)
	}
	if n := len(b.clientQuotas.sensors); n != 0 {
		t.Fatalf("%d rates kept without quotas", n)
	}
}

// A consumer over consumer_byte_rate is answered empty with the throttle,
// its bytes not counted (Kafka's unrecord), and its fetch capped to what
// its quota allows in a window; followers and other clients are untouched.
func TestFetchThrottling(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 1, nil)
	batch := recordbatch.Build(recordbatch.NoProducer(), []recordbatch.Record{{Value: make([]byte, 100_000)}})
	if got := produceOne(t, b, 9, "t", batch); got.ErrorCode != 0 {
		t.Fatalf("produce: %+v", got)
	}
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = append(req.Entries, quotaEntry(map[string]float64{controller.ConsumerByteRate: 25_000}, controller.QuotaEntityClientID, "c"))
	if _, err := handleAlterClientQuotas(context.Background(), b, &requestContext{}, req); err != nil {
		t.Fatal(err)
	}
	fetch := func(clientID string, maxBytes int32) (*fetchResponse, time.Time) {
		t.Helper()
		freq := kmsg.NewPtrFetchRequest()
		freq.Version, freq.ReplicaID, freq.MaxBytes, freq.MaxWaitMillis = 12, -1, maxBytes, 0
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		freq.Topics = append(freq.Topics, ft)
		resp, muted, err := b.handleWithQuotas(context.Background(), &requestContext{clientID: clientID, principal: "User:ANONYMOUS"}, freq, 100)
		if err != nil {
			t.Fatal(err)
		}
		fr := resp.(*fetchResponse)
		t.Cleanup(fr.Close)
		return fr, muted
	}
	records := func(fr *fetchResponse) int {
		n := 0
		for _, ts := range fr.records {
			for _, cs := range ts {
				n += cs.Size()
			}
		}
		return n
	}
	// 100 KB (and a little) over the minimum 10 s: 10 KB/s, then 20 KB/s:
	// within 25000.
	for i := 0; i < 2; i++ {
		if fr, muted := fetch("c", 50<<20); records(fr) < 100_000 || !muted.IsZero() || fr.ThrottleMillis != 0 {
			t.Fatalf("fetch %d within the quota: %d bytes, throttle %d, muted %v", i, records(fr), fr.ThrottleMillis, muted)
		}
	}
	// 30 KB/s: throttled (30-25)/25*10 s = 2 s, answered empty.
	fr, muted := fetch("c", 50<<20)
	if records(fr) != 0 || len(fr.Topics) != 0 || fr.ThrottleMillis < 1900 || fr.ThrottleMillis > 2200 || muted.IsZero() {
		t.Fatalf("fetch over the quota: %d bytes in %d topics, throttle %d, muted %v", records(fr), len(fr.Topics), fr.ThrottleMillis, muted)
	}
	// Not counted: the rate is still at the quota, so the next one is
	// throttled by the same amount, not more.
	if fr, _ := fetch("c", 50<<20); fr.ThrottleMillis < 1900 || fr.ThrottleMillis > 2200 {
		t.Fatalf("a throttled fetch was counted: next throttle %d", fr.ThrottleMillis)
	}
	// Another client id reads freely.
	if fr, muted := fetch("other", 50<<20); records(fr) < 100_000 || !muted.IsZero() {
		t.Fatalf("another client: %d bytes, muted %v", records(fr), muted)
	}
	// The cap: 25000 B/s allows 250000 bytes in a window.
	rq := &quotaState{md: b.controller.Metadata(), user: "ANONYMOUS", clientID: "c"}
	rq.kinds = b.clientQuotas.kindsIn(rq.md)
	ctx := context.WithValue(context.Background(), requestQuotaKey{}, rq)
	if got := b.fetchQuotaMaxBytes(ctx, 50<<20); got != 250_000 {
		t.Fatalf("fetch capped to %d, want 250000", got)
	}
	if got := b.fetchQuotaMaxBytes(context.Background(), 50<<20); got != 50<<20 {
		t.Fatalf("without quotas: capped to %d", got)
	}
}

// The Prometheus collector reports every rate kept: its throttle time,
// its current rate and its limit, by type, user and client id.
func TestClientQuotaMetrics(t *testing.T) {
	q := newClientQuotas(quota.DefaultConfig, slog.New(slog.NewTextHandler(io.Discard, nil)))
	md := &controller.Metadata{ClientConfigs: map[string]map[string]string{"<default>": {controller.ProducerByteRate: "100"}}}
	rq := &quotaState{md: md, user: "alice", clientID: "app"}
	now := time.Now()
	d, key := q.record(md, produceQuota, rq, 5000, now)
	if d <= 0 {
		t.Fatalf("no throttle for 5000 bytes under 100 B/s: %v", d)
	}
	q.noteThrottle(key, d)
	reg := prometheus.NewRegistry()
	reg.MustRegister(q)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["type"] != "Produce" || labels["user"] != "" || labels["client_id"] != "app" {
				t.Fatalf("%s labels %v", f.GetName(), labels)
			}
			got[f.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if got["kbroker_client_quota_throttle_time_ms_total"] != float64(d.Milliseconds()) || got["kbroker_client_quota_rate"] < 490 || got["kbroker_client_quota_rate"] > 500 || got["kbroker_client_quota_limit"] != 100 {
		t.Fatalf("metrics %v (throttle %v)", got, d)
	}
}
