package coordinator

// Consumer groups of the KIP-848 protocol ("consumer" group type): the
// state Kafka's modern/consumer/ConsumerGroup and ConsumerGroupMember hold.
//
// A group object (group.go) is either classic (cg == nil) or a consumer
// group (cg != nil). A consumer group's classic fields stay at their Empty
// defaults, so the classic handlers see a group without members and answer
// UNKNOWN_MEMBER_ID to classic members; JoinGroup converts an empty
// consumer group back to a classic one (consumer_convert.go).
//
// cgState is replaced, never mutated in place: a heartbeat computes the
// next state from a clone (consumer_heartbeat.go), appends its records, and
// only then publishes it, so what a request can observe is always durable.

import (
	"bytes"
	"regexp"
	"slices"
	"sort"
)

// memberState is Kafka's MemberState (the byte stored in the current
// assignment record).
type memberState int8

const (
	memberStable               memberState = 0
	memberUnrevokedPartitions  memberState = 1
	memberUnreleasedPartitions memberState = 2
	memberUnknown              memberState = 127
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "STABLE"
	case memberUnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	default:
		return "UNKNOWN"
	}
}

// Kafka's special member epochs.
const (
	leaveGroupMemberEpoch       int32 = -1
	leaveGroupStaticMemberEpoch int32 = -2
)

// tpSet is a set of partitions by topic id; each slice is sorted and
// duplicate free, and no slice is empty.
type tpSet map[[16]byte][]int32

func (s tpSet) clone() tpSet {
	out := make(tpSet, len(s))
	for id, ps := range s {
		out[id] = slices.Clone(ps)
	}
	return out
}

func (s tpSet) topicIDs() [][16]byte {
	ids := make([][16]byte, 0, len(s))
	for id := range s {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
	return ids
}

func (s tpSet) has(id [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(s[id], p)
	return ok
}

func (s tpSet) count() int {
	n := 0
	for _, ps := range s {
		n += len(ps)
	}
	return n
}

func (s tpSet) equal(o tpSet) bool {
	if len(s) != len(o) {
		return false
	}
	for id, ps := range s {
		if !slices.Equal(ps, o[id]) {
			return false
		}
	}
	return true
}

// add inserts p into topic id.
func (s tpSet) add(id [16]byte, p int32) {
	ps := s[id]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		s[id] = slices.Insert(ps, i, p)
	}
}

// normalizePartitions sorts ps and drops duplicates.
func normalizePartitions(ps []int32) []int32 {
	slices.Sort(ps)
	return slices.Compact(ps)
}

// topicMeta is one subscribed topic of ConsumerGroupPartitionMetadata.
type topicMeta struct {
	id         [16]byte
	partitions int32
}

// TopicInfo is one topic of the cluster as the coordinator needs it.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// TopicImage is the cluster's topics (Kafka's metadata image), immutable
// once built: the server builds a new one for every metadata change.
type TopicImage struct {
	byName map[string]TopicInfo
	byID   map[[16]byte]string
	names  []string // sorted
}

// NewTopicImage builds an image from topic name -> info.
func NewTopicImage(topics map[string]TopicInfo) *TopicImage {
	im := &TopicImage{byName: topics, byID: make(map[[16]byte]string, len(topics))}
	for name, ti := range topics {
		im.byID[ti.ID] = name
		im.names = append(im.names, name)
	}
	sort.Strings(im.names)
	return im
}

var emptyTopicImage = NewTopicImage(map[string]TopicInfo{})

// cgMember is a ConsumerGroupMember.
type cgMember struct {
	id                 string
	instanceID         *string
	rackID             *string
	clientID           string
	clientHost         string
	topics             []string // subscribed topic names, sorted
	regex              string   // subscribed topic regex, "" for none
	rebalanceTimeoutMs int32
	assignor           string // server assignor asked for, "" for none

	epoch     int32
	prevEpoch int32
	state     memberState
	assigned  tpSet
	revoking  tpSet // partitions pending revocation
}

func (m *cgMember) clone() *cgMember {
	c := *m
	c.topics = slices.Clone(m.topics)
	c.assigned = m.assigned.clone()
	c.revoking = m.revoking.clone()
	return &c
}

// sameMetadata reports whether the fields of the member metadata record are
// equal (whether a heartbeat must write a ConsumerGroupMemberMetadata record).
func (m *cgMember) sameMetadata(o *cgMember) bool {
	return m.id == o.id && eqStringPtr(m.instanceID, o.instanceID) && eqStringPtr(m.rackID, o.rackID) &&
		m.clientID == o.clientID && m.clientHost == o.clientHost && slices.Equal(m.topics, o.topics) &&
		m.regex == o.regex && m.rebalanceTimeoutMs == o.rebalanceTimeoutMs && m.assignor == o.assignor
}

// sameAssignmentState reports whether the fields of the current assignment
// record are equal.
func (m *cgMember) sameAssignmentState(o *cgMember) bool {
	return m.epoch == o.epoch && m.prevEpoch == o.prevEpoch && m.state == o.state &&
		m.assigned.equal(o.assigned) && m.revoking.equal(o.revoking)
}

// reconciledTo is ConsumerGroupMember.isReconciledTo.
func (m *cgMember) reconciledTo(epoch int32) bool {
	return m.state == memberStable && m.epoch == epoch
}

func eqStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// cgState is a ConsumerGroup.
type cgState struct {
	epoch           int32                // group epoch
	assignmentEpoch int32                // target assignment epoch
	subMeta         map[string]topicMeta // subscription metadata, by topic name
	members         map[string]*cgMember
	static          map[string]string // group.instance.id -> member id
	target          map[string]tpSet  // target assignment by member id
}

func newCGState() *cgState {
	return &cgState{
		subMeta: map[string]topicMeta{},
		members: map[string]*cgMember{},
		static:  map[string]string{},
		target:  map[string]tpSet{},
	}
}

// clone copies st deeply enough that changes to the copy (members replaced,
// maps edited) never reach st.
func (st *cgState) clone() *cgState {
	c := &cgState{
		epoch:           st.epoch,
		assignmentEpoch: st.assignmentEpoch,
		subMeta:         make(map[string]topicMeta, len(st.subMeta)),
		members:         make(map[string]*cgMember, len(st.members)),
		static:          make(map[string]string, len(st.static)),
		target:          make(map[string]tpSet, len(st.target)),
	}
	for k, v := range st.subMeta {
		c.subMeta[k] = v
	}
	for k, v := range st.members {
		c.members[k] = v.clone()
	}
	for k, v := range st.static {
		c.static[k] = v
	}
	for k, v := range st.target {
		c.target[k] = v.clone()
	}
	return c
}

func (st *cgState) memberIDs() []string { return sortedKeys(st.members) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Consumer group states (ConsumerGroup.ConsumerGroupState), as Kafka names
// them in ListGroups and ConsumerGroupDescribe.
const (
	cgStateEmpty       = "Empty"
	cgStateAssigning   = "Assigning"
	cgStateReconciling = "Reconciling"
	cgStateStable      = "Stable"
)

// stateName is ConsumerGroup.maybeUpdateGroupState's result.
func (st *cgState) stateName() string {
	switch {
	case len(st.members) == 0:
		return cgStateEmpty
	case st.epoch > st.assignmentEpoch:
		return cgStateAssigning
	}
	for _, m := range st.members {
		if !m.reconciledTo(st.assignmentEpoch) {
			return cgStateReconciling
		}
	}
	return cgStateStable
}

// compileSubscriptionRegex compiles a SubscribedTopicRegex as Kafka matches
// it: RE2 syntax (Go's regexp is RE2, as Kafka's RE2/J), matched against
// the whole topic name.
func compileSubscriptionRegex(re string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + re + `)$`)
}

// resolveRegex returns the topics of im whose whole name matches re
// (Kafka's TopicRegexResolver: internal topics included). An invalid regex
// matches nothing; heartbeats refuse one before it is stored.
func resolveRegex(re string, im *TopicImage) []string {
	rx, err := compileSubscriptionRegex(re)
	if err != nil {
		return nil
	}
	var out []string
	for _, name := range im.names {
		if rx.MatchString(name) {
			out = append(out, name)
		}
	}
	return out
}

// subscribedTopicsOf is a member's subscription: its topic names and the
// topics its regex resolves to (resolved: regex -> topics).
func subscribedTopicsOf(m *cgMember, resolved map[string][]string) map[string]struct{} {
	out := make(map[string]struct{}, len(m.topics))
	for _, t := range m.topics {
		out[t] = struct{}{}
	}
	if m.regex != "" {
		for _, t := range resolved[m.regex] {
			out[t] = struct{}{}
		}
	}
	return out
}

// resolveRegexes resolves every regex the members use.
func resolveRegexes(members map[string]*cgMember, im *TopicImage) map[string][]string {
	out := map[string][]string{}
	for _, m := range members {
		if m.regex == "" {
			continue
		}
		if _, ok := out[m.regex]; !ok {
			out[m.regex] = resolveRegex(m.regex, im)
		}
	}
	return out
}

// groupSubscribedTopics is the union of the members' subscriptions
// (ConsumerGroup.subscribedTopicNames, used by OffsetDelete and expiry).
func groupSubscribedTopics(members map[string]*cgMember, resolved map[string][]string) map[string]struct{} {
	out := map[string]struct{}{}
	for _, m := range members {
		for t := range subscribedTopicsOf(m, resolved) {
			out[t] = struct{}{}
		}
	}
	return out
}

// subscriptionMetadata is ConsumerGroup.computeSubscriptionMetadata: the
// subscribed topics that exist, with their ids and partition counts.
func subscriptionMetadata(topics map[string]struct{}, im *TopicImage) map[string]topicMeta {
	out := map[string]topicMeta{}
	for t := range topics {
		if ti, ok := im.byName[t]; ok {
			out[t] = topicMeta{id: ti.ID, partitions: ti.Partitions}
		}
	}
	return out
}

func sameSubscriptionMetadata(a, b map[string]topicMeta) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// partitionOwners maps every partition assigned to, or pending revocation
// from, a member other than except to that member's epoch (Kafka's
// ConsumerGroup.currentPartitionEpoch: -1, absent here, when free).
func partitionOwners(members map[string]*cgMember, except string) map[[16]byte]map[int32]int32 {
	out := map[[16]byte]map[int32]int32{}
	put := func(s tpSet, epoch int32) {
		for id, ps := range s {
			m := out[id]
			if m == nil {
				m = map[int32]int32{}
				out[id] = m
			}
			for _, p := range ps {
				m[p] = epoch
			}
		}
	}
	for id, m := range members {
		if id == except {
			continue
		}
		put(m.assigned, m.epoch)
		put(m.revoking, m.epoch)
	}
	return out
}
