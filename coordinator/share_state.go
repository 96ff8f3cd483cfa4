package coordinator

// Durable share-partition state (KIP-932). Kafka keeps it in
// __share_group_state through a separate share coordinator; kbroker keeps
// it with the group, in the group's __consumer_offsets partition (RF 3 in a
// cluster, replayed on load, rewritten by snapshots, tombstoned with the
// group), so it fails over with the group coordinator. A partition leader
// reads it when it becomes leader and writes it before it answers the
// acknowledgements that changed it (server/85_share_group_state.go, over
// Kafka's ReadShareGroupState / WriteShareGroupState requests).
//
// Both requests carry the partition leader's epoch, and as in Kafka's
// share coordinator (readStateAndMaybeUpdateLeaderEpoch) a leader older
// than the newest one seen is refused (FENCED_LEADER_EPOCH): once a new
// leader has read the state, a deposed leader (paused past its ZooKeeper
// session) can no longer store an acknowledgement that the new leader's
// first write would then overwrite. A read that raises the newest epoch
// stores it (a leader epoch record) before it answers, so the fence holds
// across a coordinator failover too; only reads raise it, as in Kafka.
// The leader's first write right after its read also raises the stored
// state epoch, which fences older leaders' writes (FENCED_STATE_EPOCH).
//
// Record (kbroker's own key version, which Kafka's readers skip as an
// unknown version; no Kafka record has it):
//
//	key:   int16 version 0x4b53 ("KS"), string group, [16]byte topic id, int32 partition
//	value: int16 version 0, int32 state epoch, int64 start offset,
//	       int32 n, n x (int64 first, int64 last, int8 delivery state, int16 delivery count)
//
// A nil value is the tombstone. The newest leader epoch of a share
// partition is a record of its own, which older kbroker releases skip as
// an unknown key version (the state record's layout is unchanged):
//
//	key:   int16 version 0x4b4c ("KL"), then as the state record's key
//	value: int16 version 0, int32 leader epoch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	shareStateKeyVersion       int16 = 0x4b53
	shareLeaderEpochKeyVersion int16 = 0x4b4c
)

// ShareStateBatch is a run of in-flight records with one delivery state
// (Kafka's PersisterStateBatch: 0 available, 2 acknowledged, 4 archived).
type ShareStateBatch struct {
	First, Last   int64
	DeliveryState int8
	DeliveryCount int16
}

// ShareState is one share partition's stored state.
type ShareState struct {
	StateEpoch  int32
	StartOffset int64
	Batches     []ShareStateBatch
}

type shareStateKey struct {
	topicID   [16]byte
	partition int32
}

func shareStateRecordKey(group string, k shareStateKey) []byte {
	return shareRecordKey(shareStateKeyVersion, group, k)
}

func shareLeaderEpochRecordKey(group string, k shareStateKey) []byte {
	return shareRecordKey(shareLeaderEpochKeyVersion, group, k)
}

func shareRecordKey(version int16, group string, k shareStateKey) []byte {
	b := make([]byte, 0, 2+2+len(group)+16+4)
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint16(b, uint16(len(group)))
	b = append(b, group...)
	b = append(b, k.topicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.partition))
}

func shareStateRecordValue(st ShareState) []byte {
	b := make([]byte, 0, 2+4+8+4+len(st.Batches)*19)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(st.StateEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(st.StartOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(st.Batches)))
	for _, sb := range st.Batches {
		b = binary.BigEndian.AppendUint64(b, uint64(sb.First))
		b = binary.BigEndian.AppendUint64(b, uint64(sb.Last))
		b = append(b, byte(sb.DeliveryState))
		b = binary.BigEndian.AppendUint16(b, uint16(sb.DeliveryCount))
	}
	return b
}

func shareLeaderEpochRecordValue(leaderEpoch int32) []byte {
	b := make([]byte, 0, 6)
	b = binary.BigEndian.AppendUint16(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(leaderEpoch))
}

var errShortShareState = errors.New("short share state record")

func decodeShareStateKey(key []byte) (string, shareStateKey, error) {
	if len(key) < 4 {
		return "", shareStateKey{}, errShortShareState
	}
	n := int(binary.BigEndian.Uint16(key[2:]))
	if len(key) != 4+n+16+4 {
		return "", shareStateKey{}, fmt.Errorf("%w: key of %d bytes", errShortShareState, len(key))
	}
	group := string(key[4 : 4+n])
	var k shareStateKey
	copy(k.topicID[:], key[4+n:])
	k.partition = int32(binary.BigEndian.Uint32(key[4+n+16:]))
	return group, k, nil
}

func decodeShareStateValue(v []byte) (ShareState, error) {
	var st ShareState
	if len(v) < 18 {
		return st, errShortShareState
	}
	st.StateEpoch = int32(binary.BigEndian.Uint32(v[2:]))
	st.StartOffset = int64(binary.BigEndian.Uint64(v[6:]))
	n := int(binary.BigEndian.Uint32(v[14:]))
	rest := v[18:]
	if n < 0 || len(rest) != n*19 {
		return st, fmt.Errorf("%w: %d batches in %d bytes", errShortShareState, n, len(rest))
	}
	for i := 0; i < n; i++ {
		r := rest[i*19:]
		st.Batches = append(st.Batches, ShareStateBatch{
			First:         int64(binary.BigEndian.Uint64(r)),
			Last:          int64(binary.BigEndian.Uint64(r[8:])),
			DeliveryState: int8(r[16]),
			DeliveryCount: int16(binary.BigEndian.Uint16(r[17:])),
		})
	}
	return st, nil
}

// applyShareStateRecord replays one share state record into states.
func applyShareStateRecord(states map[string]map[shareStateKey]ShareState, key, value []byte) error {
	group, k, err := decodeShareStateKey(key)
	if err != nil {
		return err
	}
	if value == nil {
		delete(states[group], k)
		return nil
	}
	st, err := decodeShareStateValue(value)
	if err != nil {
		return err
	}
	if states[group] == nil {
		states[group] = map[shareStateKey]ShareState{}
	}
	states[group][k] = st
	return nil
}

// applyShareLeaderEpochRecord replays the leader epoch record of share
// partition k (value nil: its tombstone) into epochs.
func applyShareLeaderEpochRecord(epochs map[shareStateKey]int32, k shareStateKey, value []byte) (map[shareStateKey]int32, error) {
	if value == nil {
		delete(epochs, k)
		return epochs, nil
	}
	if len(value) != 6 {
		return epochs, fmt.Errorf("%w: leader epoch value of %d bytes", errShortShareState, len(value))
	}
	if epochs == nil {
		epochs = map[shareStateKey]int32{}
	}
	// The highest wins: reads append these without the group's write
	// token, so two raises may reach the log out of order.
	epoch := int32(binary.BigEndian.Uint32(value[2:]))
	if cur, ok := epochs[k]; !ok || epoch > cur {
		epochs[k] = epoch
	}
	return epochs, nil
}

// shareStateRecordsLocked are the records that restore g's share states
// and share leader epochs (snapshots).
func (g *group) shareStateRecordsLocked() []record {
	var out []record
	for k, st := range g.shareStates {
		out = append(out, record{key: shareStateRecordKey(g.id, k), value: shareStateRecordValue(st)})
	}
	for k, epoch := range g.shareLeaderEpochs {
		out = append(out, record{key: shareLeaderEpochRecordKey(g.id, k), value: shareLeaderEpochRecordValue(epoch)})
	}
	return out
}

// shareStateTombstonesLocked delete g's share states and share leader
// epochs (group deletion).
func (g *group) shareStateTombstonesLocked() []record {
	var out []record
	for k := range g.shareStates {
		out = append(out, record{key: shareStateRecordKey(g.id, k)})
	}
	for k := range g.shareLeaderEpochs {
		out = append(out, record{key: shareLeaderEpochRecordKey(g.id, k)})
	}
	return out
}

// ReadShareState returns the stored state of group's share partition
// (found false: none). code is NOT_COORDINATOR and the like when this
// broker does not own the group.
//
// leaderEpoch is the reading partition leader's epoch (-1: an operator's
// read, which fences nothing). As Kafka's ReadShareGroupState, a read by
// a leader older than the newest seen is FENCED_LEADER_EPOCH, and a newer
// one becomes the fence at once (older leaders' writes are refused from
// then on, one still in flight once it is durable) and is stored before
// the state is returned, so a coordinator that takes the group over keeps
// the fence. The read does not wait for the group's other writes (a share
// fetch holds its partition's lock while it loads): records of one share
// partition's leader epoch only rise, so replay keeps the highest.
func (c *Coordinator) ReadShareState(ctx context.Context, group string, topicID [16]byte, partition int32, leaderEpoch int32) (st ShareState, found bool, code int16) {
	g, code := c.lookup(group, false)
	if code != 0 || g == nil {
		return st, false, code
	}
	k := shareStateKey{topicID, partition}
	g.mu.Lock()
	if code := g.statusLocked(); code != 0 {
		g.mu.Unlock()
		return st, false, code
	}
	code, newer := g.checkShareLeaderLocked(k, leaderEpoch)
	if code != 0 {
		g.mu.Unlock()
		return st, false, code
	}
	if !newer {
		st, found = g.shareStates[k]
		g.mu.Unlock()
		return st, found, 0
	}
	if g.shareLeaderEpochs == nil {
		g.shareLeaderEpochs = map[shareStateKey]int32{}
	}
	g.shareLeaderEpochs[k] = leaderEpoch
	g.mu.Unlock()

	c.writeGroup(ctx, g, c.now(), []record{{key: shareLeaderEpochRecordKey(group, k), value: shareLeaderEpochRecordValue(leaderEpoch)}}, func(err error) {
		if err != nil {
			code = appendErrorCode(err, false)
			c.logger.Warn("failed to store share partition leader epoch", "group", group, "partition", partition, "leader_epoch", leaderEpoch, "err", err, "code", code)
		}
	})
	if code != 0 {
		// The fence stays raised in memory: the epoch is real, and a
		// stricter fence only refuses leaders that are already deposed.
		return st, false, code
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if code := g.statusLocked(); code != 0 {
		return st, false, code
	}
	st, found = g.shareStates[k]
	return st, found, 0
}

// checkShareLeaderLocked refuses a share partition leader older than the
// newest one seen (FENCED_LEADER_EPOCH) and reports whether leaderEpoch is
// newer than it (a read then stores it); -1 (not a leader: an operator)
// passes and is never newer. Only reads raise the fence, as in Kafka.
func (g *group) checkShareLeaderLocked(k shareStateKey, leaderEpoch int32) (code int16, newer bool) {
	if leaderEpoch < 0 {
		return 0, false
	}
	newest, ok := g.shareLeaderEpochs[k]
	if ok && leaderEpoch < newest {
		return kerr.FencedLeaderEpoch.Code, false
	}
	return 0, !ok || leaderEpoch > newest
}

// WriteShareState stores the state of group's share partition and returns
// once it is durable in __consumer_offsets (0) or Kafka's error code.
// leaderEpoch is the writing partition leader's epoch (-1: not a leader,
// never fenced). A leader older than the newest that read the partition's
// state is refused (FENCED_LEADER_EPOCH), and so is a state epoch
// older than the stored one (FENCED_STATE_EPOCH): a deposed partition
// leader cannot overwrite its successor's state.
//
// The leader fence is checked again once the write is durable: a new
// leader that read the state while this write was in flight did not see
// it, and its first write replaces it, so the writer is answered
// FENCED_LEADER_EPOCH rather than told its acknowledgements are stored,
// and the read does not wait for this write (a share fetch holds its
// partition's lock while it loads).
func (c *Coordinator) WriteShareState(ctx context.Context, group string, topicID [16]byte, partition int32, st ShareState, leaderEpoch int32) int16 {
	g, code := c.lookup(group, true)
	if code != 0 {
		return code
	}
	if err := g.acquireWrite(ctx); err != nil {
		return errCoordinatorNotAvailable
	}
	defer g.releaseWrite()
	k := shareStateKey{topicID, partition}
	g.mu.Lock()
	if code := g.statusLocked(); code != 0 {
		g.mu.Unlock()
		return code
	}
	if code, _ := g.checkShareLeaderLocked(k, leaderEpoch); code != 0 {
		g.mu.Unlock()
		return code
	}
	if cur, ok := g.shareStates[k]; ok && st.StateEpoch < cur.StateEpoch {
		g.mu.Unlock()
		return kerr.FencedStateEpoch.Code
	}
	g.mu.Unlock()
	code = 0
	c.writeGroup(ctx, g, c.now(), []record{{key: shareStateRecordKey(group, k), value: shareStateRecordValue(st)}}, func(err error) {
		if err != nil {
			code = appendErrorCode(err, false)
			c.logger.Warn("failed to store share partition state", "group", group, "partition", partition, "err", err, "code", code)
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if code2, _ := g.checkShareLeaderLocked(k, leaderEpoch); code2 != 0 {
			code = code2
		}
		// Published even when fenced: it is in the log, and memory
		// follows the log (the new leader's first write replaces it).
		if g.shareStates == nil {
			g.shareStates = map[shareStateKey]ShareState{}
		}
		g.shareStates[k] = st
	})
	return code
}

// shareAdminGroupLocked checks that g may have its share offsets changed by
// an operator (Kafka's AlterShareGroupOffsets / DeleteShareGroupOffsets):
// a share group with no member, or an empty group that becomes one. It
// returns Kafka's group-level code.
func (g *group) shareAdminGroupLocked() int16 {
	if code := g.statusLocked(); code != 0 {
		return code
	}
	if g.sg == nil {
		if !g.isEmptyClassicLocked() || g.protocolType != "" || g.storedMeta != nil || len(g.offsets) > 0 {
			return errGroupIDNotFound
		}
		g.sg = &sgState{members: map[string]*sgMember{}, timers: map[string]*sgTimer{}}
	}
	if len(g.sg.members) > 0 {
		return errNonEmptyGroup
	}
	return 0
}

// ShareStartOffset is one partition of an AlterShareGroupOffsets.
type ShareStartOffset struct {
	TopicID     [16]byte
	Partition   int32
	StartOffset int64
}

// AlterShareOffsets sets share partitions' start offsets (their in-flight
// state is dropped), as Kafka's AlterShareGroupOffsets: the group must be
// a share group without members (NON_EMPTY_GROUP), and is made one if it
// does not exist. The stored state epoch moves on, so a leader holding the
// old state reloads it (its writes are fenced). It returns the group's
// code (0: every partition stored).
func (c *Coordinator) AlterShareOffsets(ctx context.Context, group string, offsets []ShareStartOffset) int16 {
	g, code := c.lookup(group, true)
	if code != 0 {
		return code
	}
	if err := g.acquireWrite(ctx); err != nil {
		return errCoordinatorNotAvailable
	}
	defer g.releaseWrite()
	g.mu.Lock()
	if code := g.shareAdminGroupLocked(); code != 0 {
		g.dropIfShellLocked()
		g.mu.Unlock()
		return code
	}
	next := make(map[shareStateKey]ShareState, len(offsets))
	var records []record
	for _, o := range offsets {
		k := shareStateKey{o.TopicID, o.Partition}
		st := ShareState{StateEpoch: g.shareStates[k].StateEpoch + 1, StartOffset: o.StartOffset}
		next[k] = st
		records = append(records, record{key: shareStateRecordKey(group, k), value: shareStateRecordValue(st)})
	}
	g.mu.Unlock()
	code = 0
	c.writeGroup(ctx, g, c.now(), records, func(err error) {
		if err != nil {
			code = appendErrorCode(err, false)
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.shareStates == nil {
			g.shareStates = map[shareStateKey]ShareState{}
		}
		for k, st := range next {
			g.shareStates[k] = st
		}
	})
	return code
}

// DeleteShareOffsets removes the share state of every partition of the
// given topics (Kafka's DeleteShareGroupOffsets; same group rules as
// AlterShareOffsets, but a group must exist: GROUP_ID_NOT_FOUND).
func (c *Coordinator) DeleteShareOffsets(ctx context.Context, group string, topicIDs [][16]byte) int16 {
	g, code := c.lookup(group, false)
	if code != 0 {
		return code
	}
	if g == nil {
		return errGroupIDNotFound
	}
	if err := g.acquireWrite(ctx); err != nil {
		return errCoordinatorNotAvailable
	}
	defer g.releaseWrite()
	g.mu.Lock()
	if code := g.shareAdminGroupLocked(); code != 0 {
		g.mu.Unlock()
		return code
	}
	drop := map[[16]byte]bool{}
	for _, id := range topicIDs {
		drop[id] = true
	}
	var gone []shareStateKey
	var records []record
	for k := range g.shareStates {
		if drop[k.topicID] {
			gone = append(gone, k)
			records = append(records, record{key: shareStateRecordKey(group, k)})
		}
	}
	g.mu.Unlock()
	if len(records) == 0 {
		return 0
	}
	code = 0
	c.writeGroup(ctx, g, c.now(), records, func(err error) {
		if err != nil {
			code = appendErrorCode(err, false)
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, k := range gone {
			delete(g.shareStates, k)
		}
	})
	return code
}

// ShareStartOffsets returns the stored start offset of every share
// partition of group (topic id -> partition -> SPSO), for
// DescribeShareGroupOffsets; code GROUP_ID_NOT_FOUND for a group that is
// not a share group and has no share state.
func (c *Coordinator) ShareStartOffsets(group string) (map[[16]byte]map[int32]int64, int16) {
	g, code := c.lookup(group, false)
	if code != 0 {
		return nil, code
	}
	if g == nil {
		return nil, errGroupIDNotFound
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if code := g.statusLocked(); code != 0 {
		return nil, code
	}
	if g.sg == nil && len(g.shareStates) == 0 {
		return nil, errGroupIDNotFound
	}
	out := map[[16]byte]map[int32]int64{}
	for k, st := range g.shareStates {
		if out[k.topicID] == nil {
			out[k.topicID] = map[int32]int64{}
		}
		out[k.topicID][k.partition] = st.StartOffset
	}
	return out, 0
}
