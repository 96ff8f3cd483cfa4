package coordinator

// The __consumer_offsets records of consumer (KIP-848) groups, byte for byte
// as Kafka 3.9 / 4.0 write them (group-coordinator/src/main/resources/
// common/message/ConsumerGroup*.json). Keys are not flexible: an int16
// key version followed by the fields; values are flexible version 0
// (compact strings and arrays, a tagged-field section after each struct).
//
//	key 3: ConsumerGroupMetadataKey               {group}          value {Epoch int32}
//	key 4: ConsumerGroupPartitionMetadataKey      {group}          value {Topics [{TopicId, TopicName, NumPartitions, PartitionMetadata []}]}
//	key 5: ConsumerGroupMemberMetadataKey         {group, member}  value {InstanceId?, RackId?, ClientId, ClientHost, SubscribedTopicNames, SubscribedTopicRegex?, RebalanceTimeoutMs, ServerAssignor?}
//	key 6: ConsumerGroupTargetAssignmentMetadataKey {group}        value {AssignmentEpoch int32}
//	key 7: ConsumerGroupTargetAssignmentMemberKey {group, member}  value {TopicPartitions [{TopicId, Partitions}]}
//	key 8: ConsumerGroupCurrentMemberAssignmentKey {group, member} value {MemberEpoch, PreviousMemberEpoch, State int8, AssignedPartitions, PartitionsPendingRevocation}
//
// A nil value is a tombstone. Tagged fields we do not know (the classic
// member metadata of key 5's value, tag 0, which kbroker never writes) are
// skipped on read.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Key versions of the consumer group records.
const (
	cgMetadataKeyVersion          int16 = 3
	cgPartitionMetadataKeyVersion int16 = 4
	cgMemberMetadataKeyVersion    int16 = 5
	cgTargetMetadataKeyVersion    int16 = 6
	cgTargetMemberKeyVersion      int16 = 7
	cgCurrentMemberKeyVersion     int16 = 8
)

// isConsumerGroupKeyVersion reports whether a __consumer_offsets key of this
// version is a consumer group record.
func isConsumerGroupKeyVersion(v int16) bool {
	return v >= cgMetadataKeyVersion && v <= cgCurrentMemberKeyVersion
}

// cgKey is a decoded consumer group record key; member is empty for the
// group-level keys (3, 4, 6).
type cgKey struct {
	version int16
	group   string
	member  string
}

func (k cgKey) bytes() []byte {
	b := kbin.AppendInt16(nil, k.version)
	b = kbin.AppendString(b, k.group)
	switch k.version {
	case cgMemberMetadataKeyVersion, cgTargetMemberKeyVersion, cgCurrentMemberKeyVersion:
		b = kbin.AppendString(b, k.member)
	}
	return b
}

func decodeCGKey(key []byte) (cgKey, error) {
	r := kbin.Reader{Src: key}
	k := cgKey{version: r.Int16()}
	k.group = r.String()
	switch k.version {
	case cgMemberMetadataKeyVersion, cgTargetMemberKeyVersion, cgCurrentMemberKeyVersion:
		k.member = r.String()
	}
	if err := r.Complete(); err != nil {
		return k, fmt.Errorf("consumer group key version %d: %w", k.version, err)
	}
	return k, nil
}

// appendEmptyTags closes a flexible struct with no tagged fields.
func appendEmptyTags(b []byte) []byte { return kbin.AppendUvarint(b, 0) }

// skipTags reads (and drops) a tagged-field section.
func skipTags(r *kbin.Reader) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint() // tag
		size := r.Uvarint()
		r.Span(int(size))
	}
}

func appendCompactStrings(b []byte, ss []string) []byte {
	b = kbin.AppendCompactArrayLen(b, len(ss))
	for _, s := range ss {
		b = kbin.AppendCompactString(b, s)
	}
	return b
}

func readCompactStrings(r *kbin.Reader) []string {
	n := r.CompactArrayLen()
	if n <= 0 {
		return nil
	}
	out := make([]string, 0, min(int(n), 1<<16))
	for i := int32(0); i < n && r.Ok(); i++ {
		out = append(out, r.CompactString())
	}
	return out
}

func appendCompactInt32s(b []byte, vs []int32) []byte {
	b = kbin.AppendCompactArrayLen(b, len(vs))
	for _, v := range vs {
		b = kbin.AppendInt32(b, v)
	}
	return b
}

func readCompactInt32s(r *kbin.Reader) []int32 {
	n := r.CompactArrayLen()
	if n <= 0 {
		return nil
	}
	out := make([]int32, 0, min(int(n), 1<<16))
	for i := int32(0); i < n && r.Ok(); i++ {
		out = append(out, r.Int32())
	}
	return out
}

// appendTopicPartitions writes a []TopicPartitions (TopicId uuid,
// Partitions []int32, tags) in topic id order.
func appendTopicPartitions(b []byte, s tpSet) []byte {
	ids := s.topicIDs()
	b = kbin.AppendCompactArrayLen(b, len(ids))
	for _, id := range ids {
		b = kbin.AppendUuid(b, id)
		b = appendCompactInt32s(b, s[id])
		b = appendEmptyTags(b)
	}
	return b
}

func readTopicPartitions(r *kbin.Reader) tpSet {
	n := r.CompactArrayLen()
	s := tpSet{}
	for i := int32(0); i < n && r.Ok(); i++ {
		id := r.Uuid()
		ps := readCompactInt32s(r)
		skipTags(r)
		if len(ps) > 0 {
			s[id] = normalizePartitions(append(s[id], ps...))
		}
	}
	return s
}

// record builders (GroupCoordinatorRecordHelpers).

func cgEpochRecord(group string, epoch int32) record {
	v := kbin.AppendInt32(nil, epoch)
	return record{key: cgKey{version: cgMetadataKeyVersion, group: group}.bytes(), value: appendEmptyTags(v)}
}

func cgSubscriptionMetadataRecord(group string, meta map[string]topicMeta) record {
	names := make([]string, 0, len(meta))
	for n := range meta {
		names = append(names, n)
	}
	sort.Strings(names)
	v := kbin.AppendCompactArrayLen(nil, len(names))
	for _, n := range names {
		tm := meta[n]
		v = kbin.AppendUuid(v, tm.id)
		v = kbin.AppendCompactString(v, n)
		v = kbin.AppendInt32(v, tm.partitions)
		v = kbin.AppendCompactArrayLen(v, 0) // no rack information
		v = appendEmptyTags(v)
	}
	return record{key: cgKey{version: cgPartitionMetadataKeyVersion, group: group}.bytes(), value: appendEmptyTags(v)}
}

func cgMemberMetadataRecord(group string, m *cgMember) record {
	v := kbin.AppendCompactNullableString(nil, m.instanceID)
	v = kbin.AppendCompactNullableString(v, m.rackID)
	v = kbin.AppendCompactString(v, m.clientID)
	v = kbin.AppendCompactString(v, m.clientHost)
	v = appendCompactStrings(v, m.topics)
	var regex *string
	if m.regex != "" {
		regex = &m.regex
	}
	v = kbin.AppendCompactNullableString(v, regex)
	v = kbin.AppendInt32(v, m.rebalanceTimeoutMs)
	var assignor *string
	if m.assignor != "" {
		assignor = &m.assignor
	}
	v = kbin.AppendCompactNullableString(v, assignor)
	return record{key: cgKey{version: cgMemberMetadataKeyVersion, group: group, member: m.id}.bytes(), value: appendEmptyTags(v)}
}

func cgTargetEpochRecord(group string, epoch int32) record {
	v := kbin.AppendInt32(nil, epoch)
	return record{key: cgKey{version: cgTargetMetadataKeyVersion, group: group}.bytes(), value: appendEmptyTags(v)}
}

func cgTargetMemberRecord(group, member string, target tpSet) record {
	v := appendTopicPartitions(nil, target)
	return record{key: cgKey{version: cgTargetMemberKeyVersion, group: group, member: member}.bytes(), value: appendEmptyTags(v)}
}

func cgCurrentAssignmentRecord(group string, m *cgMember) record {
	v := kbin.AppendInt32(nil, m.epoch)
	v = kbin.AppendInt32(v, m.prevEpoch)
	v = kbin.AppendInt8(v, int8(m.state))
	v = appendTopicPartitions(v, m.assigned)
	v = appendTopicPartitions(v, m.revoking)
	return record{key: cgKey{version: cgCurrentMemberKeyVersion, group: group, member: m.id}.bytes(), value: appendEmptyTags(v)}
}

func cgTombstone(version int16, group, member string) record {
	return record{key: cgKey{version: version, group: group, member: member}.bytes()}
}

// cgRemoveMemberRecords are Kafka's removeMember tombstones, in its order.
func cgRemoveMemberRecords(group, member string) []record {
	return []record{
		cgTombstone(cgCurrentMemberKeyVersion, group, member),
		cgTombstone(cgTargetMemberKeyVersion, group, member),
		cgTombstone(cgMemberMetadataKeyVersion, group, member),
	}
}

// cgDeleteGroupRecords are the tombstones that delete a consumer group
// (ConsumerGroup.createGroupTombstoneRecords): every member's records, then
// the target assignment epoch, the subscription metadata and the epoch.
func cgDeleteGroupRecords(group string, st *cgState) []record {
	var out []record
	for _, id := range st.memberIDs() {
		out = append(out, cgRemoveMemberRecords(group, id)...)
	}
	// Targets of members that are gone (none are kept, but a replayed log
	// could hold some): tombstoned all the same.
	for _, id := range sortedKeys(st.target) {
		if _, ok := st.members[id]; !ok {
			out = append(out, cgTombstone(cgTargetMemberKeyVersion, group, id))
		}
	}
	return append(out,
		cgTombstone(cgTargetMetadataKeyVersion, group, ""),
		cgTombstone(cgPartitionMetadataKeyVersion, group, ""),
		cgTombstone(cgMetadataKeyVersion, group, ""),
	)
}

// cgStateRecords are the records that restore st (a snapshot's rewrite).
func cgStateRecords(group string, st *cgState) []record {
	out := []record{cgEpochRecord(group, st.epoch), cgSubscriptionMetadataRecord(group, st.subMeta)}
	for _, id := range st.memberIDs() {
		out = append(out, cgMemberMetadataRecord(group, st.members[id]))
	}
	for _, id := range sortedKeys(st.target) {
		out = append(out, cgTargetMemberRecord(group, id, st.target[id]))
	}
	out = append(out, cgTargetEpochRecord(group, st.assignmentEpoch))
	for _, id := range st.memberIDs() {
		out = append(out, cgCurrentAssignmentRecord(group, st.members[id]))
	}
	return out
}

// loadedCG accumulates one consumer group's records during a replay.
type loadedCG struct {
	hasEpoch        bool
	epoch           int32
	assignmentEpoch int32
	subMeta         map[string]topicMeta
	members         map[string]*cgMember // from member metadata records
	current         map[string]*cgMember // assignment fields from current assignment records
	target          map[string]tpSet
}

func newLoadedCG() *loadedCG {
	return &loadedCG{
		subMeta: map[string]topicMeta{},
		members: map[string]*cgMember{},
		current: map[string]*cgMember{},
		target:  map[string]tpSet{},
	}
}

var errBadCGValue = errors.New("malformed consumer group record value")

// applyCGRecord replays one consumer group record (key k, value nil for a
// tombstone) onto lc, as Kafka's GroupMetadataManager.replay does.
func (lc *loadedCG) apply(k cgKey, value []byte) error {
	r := kbin.Reader{Src: value}
	switch k.version {
	case cgMetadataKeyVersion:
		if value == nil {
			*lc = *newLoadedCG()
			return nil
		}
		lc.hasEpoch, lc.epoch = true, r.Int32()
	case cgPartitionMetadataKeyVersion:
		lc.subMeta = map[string]topicMeta{}
		if value == nil {
			return nil
		}
		n := r.CompactArrayLen()
		for i := int32(0); i < n && r.Ok(); i++ {
			id := r.Uuid()
			name := r.CompactString()
			parts := r.Int32()
			pm := r.CompactArrayLen()
			for j := int32(0); j < pm && r.Ok(); j++ {
				r.Int32()
				readCompactStrings(&r)
				skipTags(&r)
			}
			skipTags(&r)
			lc.subMeta[name] = topicMeta{id: id, partitions: parts}
		}
	case cgMemberMetadataKeyVersion:
		if value == nil {
			delete(lc.members, k.member)
			return nil
		}
		m := &cgMember{id: k.member}
		m.instanceID = r.CompactNullableString()
		m.rackID = r.CompactNullableString()
		m.clientID = r.CompactString()
		m.clientHost = r.CompactString()
		m.topics = readCompactStrings(&r)
		if re := r.CompactNullableString(); re != nil {
			m.regex = *re
		}
		m.rebalanceTimeoutMs = r.Int32()
		if a := r.CompactNullableString(); a != nil {
			m.assignor = *a
		}
		lc.members[k.member] = m
	case cgTargetMetadataKeyVersion:
		if value == nil {
			lc.assignmentEpoch = 0
			return nil
		}
		lc.assignmentEpoch = r.Int32()
	case cgTargetMemberKeyVersion:
		if value == nil {
			delete(lc.target, k.member)
			return nil
		}
		lc.target[k.member] = readTopicPartitions(&r)
	case cgCurrentMemberKeyVersion:
		if value == nil {
			delete(lc.current, k.member)
			return nil
		}
		m := &cgMember{id: k.member}
		m.epoch = r.Int32()
		m.prevEpoch = r.Int32()
		m.state = memberState(r.Int8())
		m.assigned = readTopicPartitions(&r)
		m.revoking = readTopicPartitions(&r)
		lc.current[k.member] = m
	}
	if value != nil {
		skipTags(&r)
		if !r.Ok() {
			return fmt.Errorf("key version %d of group %q: %w", k.version, k.group, errBadCGValue)
		}
	}
	return nil
}

// state builds the group from the replayed records; nil when the group was
// deleted (or only tombstones remain).
func (lc *loadedCG) state() *cgState {
	if !lc.hasEpoch {
		return nil
	}
	st := newCGState()
	st.epoch = lc.epoch
	st.assignmentEpoch = lc.assignmentEpoch
	st.subMeta = lc.subMeta
	for id, m := range lc.members {
		if cur := lc.current[id]; cur != nil {
			m.epoch, m.prevEpoch, m.state = cur.epoch, cur.prevEpoch, cur.state
			m.assigned, m.revoking = cur.assigned, cur.revoking
		}
		if m.assigned == nil {
			m.assigned = tpSet{}
		}
		if m.revoking == nil {
			m.revoking = tpSet{}
		}
		st.members[id] = m
		if m.instanceID != nil {
			st.static[*m.instanceID] = id
		}
	}
	for id, t := range lc.target {
		st.target[id] = t
	}
	return st
}

// keyVersion is the version of a __consumer_offsets key.
func keyVersion(key []byte) int16 {
	if len(key) < 2 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(key))
}
