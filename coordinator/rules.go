package coordinator

// Pure rules of the group protocol, table-tested in rules_test.go. They read
// their inputs and the time they are given; none touches locks or clocks.

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// selectProtocol is GroupMetadata.selectProtocol: among the protocols every
// member supports, each member votes for the first one in its own
// preference order; most votes wins. Ties go to the candidate the earliest
// member prefers most, so the choice is deterministic. ms must be non-empty
// and in join order; "" means no common protocol.
func selectProtocol(ms []*member) string {
	if len(ms) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range ms[0].protocols {
		all := true
		for _, m := range ms[1:] {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	isCandidate := func(name string) bool {
		for _, c := range candidates {
			if c == name {
				return true
			}
		}
		return false
	}
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			if isCandidate(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, c := range candidates[1:] {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// subscribedTopics is GroupMetadata.computeSubscribedTopics: for "consumer"
// groups, the union of the members' subscribed topics decoded from their
// metadata for the selected protocol. known is false when the group is not
// a consumer group or some member's metadata does not decode.
func subscribedTopics(protocolType, protocol string, members map[string]*member) (topics map[string]struct{}, known bool) {
	if protocolType != "consumer" || protocol == "" || len(members) == 0 {
		return nil, false
	}
	topics = map[string]struct{}{}
	for _, m := range members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(protocol)); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			topics[t] = struct{}{}
		}
	}
	return topics, true
}

// validSessionTimeout checks a JoinGroup's session timeout against
// group.min/max.session.timeout.ms.
func validSessionTimeout(ms int32, minTimeout, maxTimeout time.Duration) bool {
	d := time.Duration(ms) * time.Millisecond
	return d >= minTimeout && d <= maxTimeout
}

// commitCheck is what validateCommit looks at.
type commitCheck struct {
	state         groupState
	generation    int32
	isMember      bool   // memberID is a current member
	fenced        bool   // the instance id maps to another member
	reqGen        int32  // request's generation (-1: simple commit)
	reqMember     string // request's member id
	reqStatic     bool   // request carries a group.instance.id
	transactional bool   // TxnOffsetCommit, not OffsetCommit
}

// validateCommit is Kafka 3.9's GroupCoordinator.validateOffsetCommit plus,
// for plain commits, the state switch of doCommitOffsets: the code a commit
// gets before anything is written, 0 to go ahead.
//
//   - generation < 0 on an Empty group: allowed whatever the member id (the
//     admin client, or a consumer without group management);
//   - otherwise a generation, member id or instance id must name the current
//     member (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID) and generation
//     (ILLEGAL_GENERATION);
//   - a plain commit without any of them to a non-Empty group is
//     UNKNOWN_MEMBER_ID; a transactional one is allowed (TxnOffsetCommit
//     before v3 carries no member or generation);
//   - a plain commit in CompletingRebalance is REBALANCE_IN_PROGRESS;
//     Kafka's doTxnCommitOffsets has no state switch.
func validateCommit(c commitCheck) int16 {
	switch {
	case c.state == stateDead:
		return errCoordinatorNotAvailable
	case c.reqGen < 0 && c.state == stateEmpty:
		return 0
	case c.reqGen >= 0 || c.reqMember != "" || c.reqStatic:
		switch {
		case c.fenced:
			return errFencedInstanceID
		case !c.isMember:
			return errUnknownMemberID
		case c.reqGen != c.generation:
			return errIllegalGeneration
		}
	case !c.transactional && c.state != stateEmpty:
		// Only members may commit for a group that has members.
		return errUnknownMemberID
	}
	if !c.transactional && c.state == stateCompletingRebalance {
		return errRebalanceInProgress
	}
	return 0
}

// expiryInput is what offset expiry looks at for one group.
type expiryInput struct {
	state        groupState
	protocolType string
	stateTime    time.Time
	subscribed   map[string]struct{}
	subsKnown    bool
	offsets      map[topicPartition]offsetEntry
	// consumerGroup: a consumer (KIP-848) group, subscribed its members'
	// topics.
	consumerGroup bool
}

// expiredOffsets is GroupMetadata.removeExpiredOffsets' selection (KIP-211)
// and, for consumer (KIP-848) groups, ConsumerGroup's:
//   - a consumer group: offsets of topics no member subscribes to,
//     retention after their commit;
//   - an Empty group that had members: all offsets, once retention has
//     passed since the group became Empty;
//   - a Stable consumer group: offsets of topics no member subscribes to,
//     retention after their commit;
//   - a simple group (no protocol type): each offset retention after its
//     commit.
//
// An offset with an explicit expire time (old v1 values) expires then.
// The result is sorted.
func expiredOffsets(in expiryInput, now time.Time, retention time.Duration) []topicPartition {
	if retention <= 0 {
		return nil
	}
	var base func(o offsetEntry) time.Time
	var eligible func(tp topicPartition) bool = func(topicPartition) bool { return true }
	switch {
	case in.consumerGroup:
		// ConsumerGroup.offsetExpirationCondition: retention after the
		// commit, for topics no member subscribes to.
		base = func(o offsetEntry) time.Time { return o.commitTime }
		eligible = func(tp topicPartition) bool { _, sub := in.subscribed[tp.topic]; return !sub }
	case in.protocolType != "" && in.state == stateEmpty:
		base = func(o offsetEntry) time.Time {
			if in.stateTime.IsZero() {
				return o.commitTime
			}
			return in.stateTime
		}
	case in.protocolType == "consumer" && in.subsKnown && in.state == stateStable:
		base = func(o offsetEntry) time.Time { return o.commitTime }
		eligible = func(tp topicPartition) bool { _, sub := in.subscribed[tp.topic]; return !sub }
	case in.protocolType == "":
		base = func(o offsetEntry) time.Time { return o.commitTime }
	default:
		return nil
	}
	var out []topicPartition
	for tp, o := range in.offsets {
		if !eligible(tp) {
			continue
		}
		expired := false
		if !o.expireTime.IsZero() {
			expired = !now.Before(o.expireTime)
		} else {
			expired = !now.Before(base(o).Add(retention))
		}
		if expired {
			out = append(out, tp)
		}
	}
	sortTopicPartitions(out)
	return out
}

// sortedPartitions returns the partitions of offsets, sorted.
func sortedPartitions(offsets map[topicPartition]offsetEntry) []topicPartition {
	tps := make([]topicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	sortTopicPartitions(tps)
	return tps
}

func sortTopicPartitions(tps []topicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].topic != tps[j].topic {
			return tps[i].topic < tps[j].topic
		}
		return tps[i].partition < tps[j].partition
	})
}

// sweepInterval is how often expiry runs: Kafka's
// offsets.retention.check.interval.ms default (10 minutes), or the
// retention itself when shorter (but at least a second).
func sweepInterval(retention time.Duration) time.Duration {
	return max(min(10*time.Minute, retention), time.Second)
}
