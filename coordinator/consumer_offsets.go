package coordinator

// Offsets of consumer (KIP-848) groups: the member checks Kafka 4.0's
// ConsumerGroup.validateOffsetCommit / validateOffsetFetch make, as pure
// functions (table-tested in consumer_offsets_test.go).
//
//   - OffsetCommit: a member epoch < 0 is a simple commit, allowed only
//     while the group has no member; otherwise the member id must name a
//     member (UNKNOWN_MEMBER_ID), a consumer-protocol member must use
//     OffsetCommit v9+ (UNSUPPORTED_VERSION), and the epoch (the request's
//     generation field) must be the member's current one
//     (STALE_MEMBER_EPOCH).
//   - TxnOffsetCommit: the same, except that a commit without member id,
//     epoch and instance id is accepted, and a wrong epoch answers
//     ILLEGAL_GENERATION (TxnOffsetCommit has no STALE_MEMBER_EPOCH).
//   - OffsetFetch v9+: a request with a member id or an epoch >= 0 must
//     name a member (UNKNOWN_MEMBER_ID) at its current epoch
//     (STALE_MEMBER_EPOCH); without either (admin clients) it is accepted.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
)

func validateConsumerCommit(st *cgState, memberID string, instanceID *string, epoch int32, transactional bool, version int16) int16 {
	if epoch < 0 && len(st.members) == 0 {
		return 0
	}
	if transactional && epoch == -1 && memberID == "" && instanceID == nil {
		return 0
	}
	m := st.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if !transactional && version < 9 {
		return kerr.UnsupportedVersion.Code
	}
	if epoch != m.epoch {
		if transactional {
			return kerr.IllegalGeneration.Code
		}
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

func validateConsumerFetch(st *cgState, memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	var m *cgMember
	if memberID != nil {
		m = st.members[*memberID]
	}
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if epoch != m.epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// convertEmptyConsumerGroup turns g back into a classic group for a
// JoinGroup when it is an empty consumer group, tombstoning its consumer
// group records (its offsets stay), as Kafka's maybeDeleteEmptyConsumerGroup.
// A consumer group with members answers INCONSISTENT_GROUP_PROTOCOL:
// classic members inside a consumer group (Kafka's mixed groups) are not
// served.
func (c *Coordinator) convertEmptyConsumerGroup(ctx context.Context, g *group) int16 {
	if err := g.acquireWrite(ctx); err != nil {
		return errCoordinatorNotAvailable
	}
	defer g.releaseWrite()
	g.mu.Lock()
	if code := g.statusLocked(); code != 0 {
		g.mu.Unlock()
		return code
	}
	if g.sg != nil {
		// A share group's id is not the classic protocol's.
		g.mu.Unlock()
		return errInconsistentGroupProtocol
	}
	if g.cg == nil {
		g.mu.Unlock()
		return 0
	}
	if len(g.cg.members) > 0 {
		g.mu.Unlock()
		return errInconsistentGroupProtocol
	}
	records := cgDeleteGroupRecords(g.id, g.cg)
	g.mu.Unlock()
	code := int16(0)
	c.writeGroup(ctx, g, c.now(), records, func(err error) {
		if err != nil {
			code = appendErrorCode(err, false)
			return
		}
		g.mu.Lock()
		g.stopAllCGTimersLocked()
		g.cg = nil
		g.mu.Unlock()
		c.logger.Info("converted empty consumer group to a classic group", "group", g.id)
	})
	return code
}
