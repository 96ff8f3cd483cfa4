package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/recordbatch"
)

// memLog is an in-memory OffsetsLog standing in for the replica layer. It
// checks every appended batch the way the produce path would (v2, CRC),
// assigns offsets, and models the log start offset (DeleteBefore).
type memLog struct {
	mu       sync.Mutex
	parts    map[int32]*memPart
	failNext error         // returned (once) by the next Append
	readGate chan struct{} // when set, ReadAll waits for it to close
	// appendGate, when set, holds every Append until it closes; each
	// held Append first sends on appendHeld (when set).
	appendGate chan struct{}
	appendHeld chan struct{}
	// history holds every batch ever appended, whatever DeleteBefore did.
	history map[int32][][]byte
}

// memPart is one partition: the batches from the log start, the next
// offset, and the log start offset.
type memPart struct {
	batches []memBatch
	next    int64
	start   int64
}

type memBatch struct {
	base    int64
	records int64
	data    []byte
}

func newMemLog() *memLog {
	return &memLog{parts: map[int32]*memPart{}, history: map[int32][][]byte{}}
}

// fullHistory returns a new log holding every batch ever appended to l, as
// if DeleteBefore had never been called.
func (l *memLog) fullHistory() *memLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := newMemLog()
	for p, bs := range l.history {
		for _, b := range bs {
			if _, err := out.Append(context.Background(), p, b); err != nil {
				panic(err)
			}
		}
	}
	return out
}

func (l *memLog) partLocked(p int32) *memPart {
	mp := l.parts[p]
	if mp == nil {
		mp = &memPart{}
		l.parts[p] = mp
	}
	return mp
}

func (l *memLog) Append(ctx context.Context, partition int32, batch []byte) (int64, error) {
	h, err := recordbatch.Validate(batch)
	if err != nil {
		return -1, err
	}
	l.mu.Lock()
	gate, held := l.appendGate, l.appendHeld
	l.mu.Unlock()
	if gate != nil {
		if held != nil {
			select {
			case held <- struct{}{}:
			case <-ctx.Done():
				return -1, ctx.Err()
			}
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.failNext; err != nil {
		l.failNext = nil
		return -1, err
	}
	mp := l.partLocked(partition)
	base := mp.next
	n := int64(h.LastOffsetDelta) + 1
	data := append([]byte(nil), batch...)
	recordbatch.SetBaseOffset(data, base) // as the log does; outside the CRC
	mp.batches = append(mp.batches, memBatch{base: base, records: n, data: data})
	l.history[partition] = append(l.history[partition], mp.batches[len(mp.batches)-1].data)
	mp.next += n
	return base, ctx.Err()
}

func (l *memLog) DeleteBefore(_ context.Context, partition int32, offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	mp := l.partLocked(partition)
	if offset < mp.start || offset > mp.next {
		return fmt.Errorf("delete before %d: outside [%d, %d]", offset, mp.start, mp.next)
	}
	mp.start = offset
	i := 0
	for i < len(mp.batches) && mp.batches[i].base+mp.batches[i].records <= offset {
		i++
	}
	if i < len(mp.batches) && mp.batches[i].base < offset {
		return fmt.Errorf("delete before %d: inside the batch at %d", offset, mp.batches[i].base)
	}
	mp.batches = append([]memBatch(nil), mp.batches[i:]...)
	return nil
}

func (l *memLog) ReadAll(ctx context.Context, partition int32, fn func([]byte) error) error {
	l.mu.Lock()
	gate := l.readGate
	l.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	batches := append([]memBatch(nil), l.partLocked(partition).batches...)
	l.mu.Unlock()
	for _, b := range batches {
		if err := fn(b.data); err != nil {
			return err
		}
	}
	return nil
}

// batches is the number of batches retained in partition.
func (l *memLog) batches(partition int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.partLocked(partition).batches)
}

// retained returns the log start offset and the number of records retained
// from it.
func (l *memLog) retained(partition int32) (start, records int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mp := l.partLocked(partition)
	return mp.start, mp.next - mp.start
}

func testConfig() Config {
	return Config{
		NumPartitions:         4,
		OffsetsRetention:      time.Hour,
		InitialRebalanceDelay: 300 * time.Millisecond,
		MinSessionTimeout:     10 * time.Millisecond,
		MaxSessionTimeout:     time.Minute,
		MaxRecordBytes:        1 << 20,
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startCoordinator returns a coordinator leading every partition of log.
func startCoordinator(t *testing.T, cfg Config, log OffsetsLog) *Coordinator {
	t.Helper()
	c := New(cfg, log, quietLogger())
	t.Cleanup(c.Close)
	for p := int32(0); p < cfg.NumPartitions; p++ {
		if err := c.BecomeLeader(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// checkFor polls fn every 10ms until it returns nil or total passes.
func checkFor(t *testing.T, total time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", total, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func joinReq(group, memberID string, session time.Duration, topics ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 5
	r.Group = group
	r.MemberID = memberID
	r.SessionTimeoutMillis = int32(session / time.Millisecond)
	r.RebalanceTimeoutMillis = 10000
	r.ProtocolType = "consumer"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta(topics...)}}
	return r
}

// newMemberIDs performs the v4+ first join of n members and returns their ids.
func newMemberIDs(t *testing.T, c *Coordinator, group string, n int, session time.Duration, topics ...string) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		resp := c.JoinGroup(WithClientInfo(ctxT(t), ClientInfo{ClientID: "client", ClientHost: "/127.0.0.1"}), joinReq(group, "", session, topics...))
		if resp.ErrorCode != errMemberIDRequired || resp.MemberID == "" {
			t.Fatalf("first join: code %d member %q, want MEMBER_ID_REQUIRED with an id", resp.ErrorCode, resp.MemberID)
		}
		ids = append(ids, resp.MemberID)
	}
	return ids
}

// joinConcurrently rejoins every id at once and returns the responses by id.
func joinConcurrently(t *testing.T, c *Coordinator, group string, ids []string, session time.Duration, topics ...string) map[string]*kmsg.JoinGroupResponse {
	t.Helper()
	var mu sync.Mutex
	out := map[string]*kmsg.JoinGroupResponse{}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := c.JoinGroup(ctxT(t), joinReq(group, id, session, topics...))
			mu.Lock()
			out[id] = resp
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func syncReq(group, memberID string, gen int32, assignments map[string][]byte) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group = group
	r.MemberID = memberID
	r.Generation = gen
	r.ProtocolType = kmsg.StringPtr("consumer")
	r.Protocol = kmsg.StringPtr("range")
	for id, a := range assignments {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
	}
	return r
}

// syncConcurrently syncs every member at once; the leader sends assignments.
func syncConcurrently(t *testing.T, c *Coordinator, group string, joins map[string]*kmsg.JoinGroupResponse, assignments map[string][]byte) map[string]*kmsg.SyncGroupResponse {
	t.Helper()
	var mu sync.Mutex
	out := map[string]*kmsg.SyncGroupResponse{}
	var wg sync.WaitGroup
	for id, j := range joins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a map[string][]byte
			if j.LeaderID == id {
				a = assignments
			}
			resp := c.SyncGroup(ctxT(t), syncReq(group, id, j.Generation, a))
			mu.Lock()
			out[id] = resp
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func heartbeat(c *Coordinator, group, member string, gen int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, member, gen
	return c.Heartbeat(context.Background(), r).ErrorCode
}

func commitReq(version int16, group, member string, gen int32, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = version
	r.Group, r.MemberID, r.Generation = group, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rp.LeaderEpoch = 7
		rp.Metadata = kmsg.StringPtr("md")
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

// commitCodes returns the distinct error codes of a commit response.
func commitCodes(resp *kmsg.OffsetCommitResponse) map[int16]int {
	out := map[int16]int{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.ErrorCode]++
		}
	}
	return out
}

// fetchOffset fetches one partition's committed offset with OffsetFetch v5.
func fetchOffset(t *testing.T, c *Coordinator, group, topic string, partition int32) (int64, int16) {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 5
	r.Group = group
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp := c.OffsetFetch(context.Background(), r)
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer shape: %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

func describe(c *Coordinator, group string) kmsg.DescribeGroupsResponseGroup {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 5
	r.Groups = []string{group}
	return c.DescribeGroups(context.Background(), r).Groups[0]
}

// stableGroup brings n members to Stable and returns the join responses
// and the assignments delivered.
func stableGroup(t *testing.T, c *Coordinator, group string, n int, session time.Duration, topics ...string) (map[string]*kmsg.JoinGroupResponse, map[string]*kmsg.SyncGroupResponse) {
	t.Helper()
	ids := newMemberIDs(t, c, group, n, session, topics...)
	joins := joinConcurrently(t, c, group, ids, session, topics...)
	assign := map[string][]byte{}
	for id, j := range joins {
		if j.ErrorCode != 0 {
			t.Fatalf("join %s: code %d", id, j.ErrorCode)
		}
		assign[id] = []byte("assignment-of-" + id)
	}
	syncs := syncConcurrently(t, c, group, joins, assign)
	for id, s := range syncs {
		if s.ErrorCode != 0 {
			t.Fatalf("sync %s: code %d", id, s.ErrorCode)
		}
	}
	return joins, syncs
}

var errInjected = errors.New("injected")

// deleteGroup deletes group with DeleteGroups and fails the test unless
// it is deleted.
func deleteGroup(t *testing.T, c *Coordinator, group string) {
	t.Helper()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group}
	if code := c.DeleteGroups(ctxT(t), req).Groups[0].ErrorCode; code != 0 {
		t.Fatalf("delete group %s: %d", group, code)
	}
}
