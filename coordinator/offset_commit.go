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
//   - While the append runs, OffsetFetch with require_stable answers
//     UNSTABLE_OFFSET_COMMIT for the partitions written (Kafka's
//     pendingOffsetCommits).
//
// TxnOffsetCommit (txn_offsets.go) shares the path below (commitOffsets).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit serves an OffsetCommitRequest.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	in := commitInput{group: req.Group, generation: req.Generation, memberID: req.MemberID, version: req.Version}
	if req.Version == 0 {
		in.generation, in.memberID = -1, ""
	}
	if req.Version >= 7 {
		in.instanceID = req.InstanceID
	}
	for _, t := range req.Topics {
		ct := commitTopic{topic: t.Topic}
		for _, p := range t.Partitions {
			epoch := int32(-1)
			if req.Version >= 6 {
				epoch = p.LeaderEpoch
			}
			ct.partitions = append(ct.partitions, commitPartition{p.Partition, p.Offset, epoch, p.Metadata})
		}
		in.topics = append(in.topics, ct)
	}
	codes := c.commitOffsets(ctx, in)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for i, t := range req.Topics {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for j, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: codes[i][j]})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// commitInput is an OffsetCommit or TxnOffsetCommit, version neutral.
type commitInput struct {
	group      string
	version    int16 // of the OffsetCommit or TxnOffsetCommit
	generation int32 // the member epoch for consumer (KIP-848) groups
	memberID   string
	instanceID *string
	topics     []commitTopic
	// transactional: a TxnOffsetCommit of producerID at producerEpoch.
	transactional bool
	producerID    int64
	producerEpoch int16
}

type commitTopic struct {
	topic      string
	partitions []commitPartition
}

type commitPartition struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    *string
}

// commitOffsets validates and writes a commit; codes[i][j] answers
// in.topics[i].partitions[j]. A plain commit's offsets are visible once
// appended; a transactional one's are pending for its producer until
// CompleteTxn.
func (c *Coordinator) commitOffsets(ctx context.Context, in commitInput) (codes [][]int16) {
	codes = make([][]int16, len(in.topics))
	for i, t := range in.topics {
		codes[i] = make([]int16, len(t.partitions))
	}
	all := func(code int16) [][]int16 {
		for i := range codes {
			for j := range codes[i] {
				codes[i][j] = code
			}
		}
		return codes
	}

	var g *group
	var code int16
	switch {
	case in.transactional && in.group == "":
		// Kafka's isValidGroupId: only OffsetCommit allows the empty id.
		return all(errInvalidGroupID)
	case in.transactional:
		// Kafka creates the group for any TxnOffsetCommit, before
		// validating it (a consumer need not use group management).
		g, code = c.lookup(in.group, true)
	default:
		g, code = c.lookup(in.group, false)
		if code == 0 && g == nil {
			if in.generation >= 0 {
				// Kafka's new coordinator: GROUP_ID_NOT_FOUND from v9
				// (for both protocols), ILLEGAL_GENERATION before.
				if in.version >= 9 {
					return all(errGroupIDNotFound)
				}
				return all(errIllegalGeneration)
			}
			g, code = c.lookup(in.group, true)
		}
	}
	if code != 0 {
		return all(code)
	}

	// The write token keeps validation, append and apply of this group's
	// writes in log order.
	if err := g.acquireWrite(ctx); err != nil {
		return all(errCoordinatorNotAvailable)
	}
	defer g.releaseWrite()

	g.mu.Lock()
	if code := g.unloadCode; code != 0 {
		g.mu.Unlock()
		return all(code)
	}
	if g.cg != nil {
		if code := validateConsumerCommit(g.cg, in.memberID, in.instanceID, in.generation, in.transactional, in.version); code != 0 {
			g.mu.Unlock()
			return all(code)
		}
	} else if code := g.validateClassicCommitLocked(in); code != 0 {
		g.mu.Unlock()
		return all(code)
	}
	now := c.now()
	if m := g.members[in.memberID]; !in.transactional && m != nil && (g.state == stateStable || g.state == statePreparingRebalance) {
		g.scheduleHeartbeatLocked(m, now)
	}

	type commit struct {
		tp topicPartition
		o  offsetEntry
	}
	var commits []commit
	var records []record
	for i, t := range in.topics {
		for j, p := range t.partitions {
			md := ""
			if p.metadata != nil {
				md = *p.metadata
			}
			if len(md) > maxOffsetMetadataBytes {
				codes[i][j] = errOffsetMetadataTooLarge
				continue
			}
			cm := commit{
				tp: topicPartition{t.topic, p.partition},
				o:  offsetEntry{offset: p.offset, leaderEpoch: p.leaderEpoch, metadata: md, commitTime: now},
			}
			commits = append(commits, cm)
			records = append(records, offsetRecord(g.id, cm.tp, cm.o))
		}
	}
	if len(records) == 0 {
		g.mu.Unlock()
		return codes
	}
	for _, cm := range commits {
		g.inflight[cm.tp]++
	}
	g.mu.Unlock()

	batch := buildBatch(records, now.UnixMilli())
	if in.transactional {
		batch = buildTxnBatch(records, in.producerID, in.producerEpoch, now.UnixMilli())
	}
	var appendErr error
	c.writeGroupBatch(ctx, g, batch, func(base int64, err error) {
		appendErr = err
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, cm := range commits {
			if g.inflight[cm.tp]--; g.inflight[cm.tp] <= 0 {
				delete(g.inflight, cm.tp)
			}
		}
		if err != nil || g.state == stateDead {
			// A failed transactional write leaves what the producer
			// appended before in place (Kafka drops those partitions'
			// pending entries; the log still holds them, so a reload
			// would bring them back: keeping them agrees with the log).
			return
		}
		dst := g.offsets
		if in.transactional {
			txn := g.pendingTxn[in.producerID]
			if txn == nil {
				txn = &openTxn{first: base, offsets: map[topicPartition]offsetEntry{}}
				g.pendingTxn[in.producerID] = txn
			}
			dst = txn.offsets
			c.indexTxnGroup(g, in.producerID)
		}
		for _, cm := range commits {
			cm.o.appendOffset = base
			dst[cm.tp] = cm.o
		}
	})
	if appendErr != nil {
		code := appendErrorCode(appendErr, true)
		if in.transactional {
			code = txnAppendErrorCode(appendErr)
		}
		c.logger.Warn("failed to store offsets", "group", g.id, "transactional", in.transactional, "err", appendErr, "code", code)
		fillUnset(codes, code)
	}
	return codes
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

// validateClassicCommitLocked is validateCommit for a classic group.
func (g *group) validateClassicCommitLocked(in commitInput) int16 {
	memberCode := g.validateCurrentMemberLocked(in.memberID, in.instanceID)
	return validateCommit(commitCheck{
		state:         g.state,
		generation:    g.generation,
		isMember:      memberCode == 0,
		fenced:        memberCode == errFencedInstanceID,
		reqGen:        in.generation,
		reqMember:     in.memberID,
		reqStatic:     in.instanceID != nil,
		transactional: in.transactional,
	})
}
