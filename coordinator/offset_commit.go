package coordinator

// OffsetCommit, versions 0-9 (GroupCoordinator.handleCommitOffsets).
//
//   - generation -1 with an empty member id is a simple (standalone) commit,
//     allowed only while the group is Empty or does not exist (it is then
//     created Empty, without a protocol type); otherwise the member and
//     generation must match (UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION), and a
//     group in CompletingRebalance answers REBALANCE_IN_PROGRESS. A
//     non-negative generation for a group that does not exist is
//     ILLEGAL_GENERATION.
//   - v0 carries no generation or member: always a simple commit.
//   - metadata longer than 4096 bytes: OFFSET_METADATA_TOO_LARGE for that
//     partition, the others are committed.
//   - v1 per-partition timestamps and v2-v4 retention times are ignored:
//     the commit time is now and expiry follows OffsetsRetention.
//   - v6+ leader epochs are stored; v7+ group.instance.id must map to the
//     member id (FENCED_INSTANCE_ID otherwise, UNKNOWN_MEMBER_ID when
//     unknown).
//   - Durable: the offsets are appended (acks=all) before they are visible
//     or acknowledged; a failed append answers Kafka's storeOffsets mapping
//     (see OffsetsLog). Topics are not checked against the metadata cache
//     here; the server may answer UNKNOWN_TOPIC_OR_PARTITION itself.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit serves an OffsetCommitRequest.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	// codes[i][j] is the answer for req.Topics[i].Partitions[j].
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	answer := func(all int16) *kmsg.OffsetCommitResponse {
		for i, t := range req.Topics {
			rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for j, p := range t.Partitions {
				code := codes[i][j]
				if all != 0 {
					code = all
				}
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}

	generation, memberID := req.Generation, req.MemberID
	if req.Version == 0 {
		generation, memberID = -1, ""
	}
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		return answer(code)
	}
	if g == nil {
		if generation >= 0 {
			return answer(errIllegalGeneration)
		}
		if g, code = c.lookup(req.Group, true); code != 0 {
			return answer(code)
		}
	}

	// The write token keeps validation, append and apply of this group's
	// writes in log order.
	if err := g.acquireWrite(ctx); err != nil {
		return answer(errCoordinatorNotAvailable)
	}
	defer g.releaseWrite()

	g.mu.Lock()
	if code := g.unloadCode; code != 0 {
		g.mu.Unlock()
		return answer(code)
	}
	m := g.members[memberID]
	instanceID := req.InstanceID
	if req.Version < 7 {
		instanceID = nil
	}
	memberCode := g.validateCurrentMemberLocked(memberID, instanceID)
	if code := validateCommit(commitCheck{
		state:      g.state,
		generation: g.generation,
		isMember:   memberCode == 0,
		fenced:     memberCode == errFencedInstanceID,
		reqGen:     generation,
		reqMember:  memberID,
		reqStatic:  instanceID != nil,
	}); code != 0 {
		g.mu.Unlock()
		return answer(code)
	}
	now := c.now()
	if m != nil && (g.state == stateStable || g.state == statePreparingRebalance) {
		g.scheduleHeartbeatLocked(m, now)
	}
	g.mu.Unlock()

	type commit struct {
		tp topicPartition
		o  offsetEntry
	}
	var commits []commit
	var records []record
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			if len(md) > maxOffsetMetadataBytes {
				codes[i][j] = errOffsetMetadataTooLarge
				continue
			}
			epoch := int32(-1)
			if req.Version >= 6 {
				epoch = p.LeaderEpoch
			}
			cm := commit{
				tp: topicPartition{t.Topic, p.Partition},
				o:  offsetEntry{offset: p.Offset, leaderEpoch: epoch, metadata: md, commitTime: now},
			}
			commits = append(commits, cm)
			records = append(records, offsetRecord(g.id, cm.tp, cm.o))
		}
	}
	if len(records) == 0 {
		return answer(0)
	}
	var appendErr error
	c.writeGroup(ctx, g, now, records, func(err error) {
		appendErr = err
		if err != nil {
			return
		}
		g.mu.Lock()
		for _, cm := range commits {
			g.offsets[cm.tp] = cm.o
		}
		g.mu.Unlock()
	})
	if appendErr != nil {
		code := appendErrorCode(appendErr, true)
		c.logger.Warn("failed to store offsets", "group", g.id, "err", appendErr, "code", code)
		fillUnset(codes, code)
	}
	return answer(0)
}

// fillUnset sets every per-partition error code still 0 (no error yet) to
// code: a failed write fails every partition it carried.
func fillUnset(codes [][]int16, code int16) {
	for i := range codes {
		for j := range codes[i] {
			if codes[i][j] == 0 {
				codes[i][j] = code
			}
		}
	}
}
