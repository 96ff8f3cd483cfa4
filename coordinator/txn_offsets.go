package coordinator

// Offsets in transactions (Kafka's GroupMetadata.pendingTransactionalOffsetCommits,
// GroupMetadataManager.handleTxnCompletion).
//
// TxnOffsetCommit appends its offsets as one transactional batch (producer
// id and epoch of the client) and keeps them per producer id in
// group.pendingTxn: OffsetFetch does not see them. When the transaction's
// commit or abort marker is committed on this __consumer_offsets partition,
// the WriteTxnMarkers handler calls CompleteTxn: a commit makes the pending
// offsets of every group of the partition visible, each only if its batch is
// newer than the batch of the offset it would replace (Kafka compares
// appendedBatchOffset, so a plain commit appended after the transactional
// one wins); an abort drops them. Loading a partition replays the same rule
// from the log (load.go).
//
// TxnOffsetCommit, versions 0-4 (GroupCoordinator.handleTxnCommitOffsets):
//
//   - an empty group id is INVALID_GROUP_ID; NOT_COORDINATOR,
//     COORDINATOR_LOAD_IN_PROGRESS and COORDINATOR_NOT_AVAILABLE as for
//     every group request;
//   - a group that does not exist is created Empty (consumers that do not
//     use group management commit this way too);
//   - v3+ member id, generation and group.instance.id are checked as an
//     OffsetCommit's (validateCommit): FENCED_INSTANCE_ID,
//     UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION; without them (v0-v2, or -1 and
//     "") any group state is accepted, and no state answers
//     REBALANCE_IN_PROGRESS;
//   - metadata over 4096 bytes: OFFSET_METADATA_TOO_LARGE for that
//     partition;
//   - the append's errors map as an OffsetCommit's, except that the
//     producer's errors (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED,
//     INVALID_TXN_STATE, ...) pass through as Kafka's
//     maybeConvertOffsetCommitError lets them. The server maps them to the
//     request's version.
//   - KIP-890 verification (the broker asking the transaction coordinator
//     whether this partition is in the transaction) is not done here.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit serves a TxnOffsetCommitRequest: its offsets are
// appended as one transactional batch and stay pending for the producer
// until CompleteTxn.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	in := commitInput{
		group:         req.Group,
		generation:    -1,
		transactional: true,
		producerID:    req.ProducerID,
		producerEpoch: req.ProducerEpoch,
		version:       req.Version,
	}
	if req.Version >= 3 {
		in.generation, in.memberID, in.instanceID = req.Generation, req.MemberID, req.InstanceID
	}
	for _, t := range req.Topics {
		ct := commitTopic{topic: t.Topic}
		for _, p := range t.Partitions {
			epoch := int32(-1)
			if req.Version >= 2 {
				epoch = p.LeaderEpoch
			}
			ct.partitions = append(ct.partitions, commitPartition{p.Partition, p.Offset, epoch, p.Metadata})
		}
		in.topics = append(in.topics, ct)
	}
	codes := c.commitOffsets(ctx, in)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for i, t := range req.Topics {
		rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic}
		for j, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: codes[i][j]})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// openTxn is one producer's open transaction in one group.
type openTxn struct {
	// first is the offset of the transaction's first batch for this group
	// still in the log: snapshots never move the log start past it.
	first int64
	// offsets are the pending offsets; each appendOffset is set.
	offsets map[topicPartition]offsetEntry
}

// txnCompletion is one CompleteTxn call deferred while its partition loads.
type txnCompletion struct {
	producerID int64
	commit     bool
}

// CompleteTxn applies the end of producerID's transaction to the groups of
// __consumer_offsets partition: commit makes their pending transactional
// offsets visible, abort drops them. The caller has committed the marker on
// that partition (high watermark past it) and must call this before it
// answers WriteTxnMarkers, so the producer cannot start a new transaction
// whose offsets this call would complete. It never blocks on the log.
//
// A partition not led here is ignored: its next leader replays the marker
// from the log. A call that arrives while the partition loads is applied
// when the load ends (the replay may have read the log before the marker
// was appended; applying a completion whose marker was replayed finds
// nothing pending and does nothing).
func (c *Coordinator) CompleteTxn(partition int32, producerID int64, commit bool) {
	c.mu.Lock()
	ps := c.partitions[partition]
	if c.closed || ps == nil {
		c.mu.Unlock()
		return
	}
	if ps.loading {
		ps.completedDuringLoad = append(ps.completedDuringLoad, txnCompletion{producerID, commit})
		c.mu.Unlock()
		return
	}
	var groups []*group
	for id := range ps.txnGroups[producerID] {
		if g := ps.groups[id]; g != nil {
			groups = append(groups, g)
		}
	}
	delete(ps.txnGroups, producerID)
	c.mu.Unlock()

	for _, g := range groups {
		g.mu.Lock()
		if g.unloadCode == 0 && g.state != stateDead {
			n := g.completeTxnLocked(producerID, commit)
			if n > 0 {
				c.logger.Debug("completed transactional offsets", "group", g.id, "producer_id", producerID,
					"commit", commit, "offsets", n)
			}
		}
		g.mu.Unlock()
	}
}

// completeTxnLocked is GroupMetadata.completePendingTxnOffsetCommit: the
// pending offsets of producerID become visible (commit) or are dropped
// (abort). It returns how many were pending. Called with g.mu held, or on a
// group not yet published.
func (g *group) completeTxnLocked(producerID int64, commit bool) int {
	pending := g.pendingTxn[producerID]
	delete(g.pendingTxn, producerID)
	if pending == nil {
		return 0
	}
	if commit {
		applyTxnCommit(g.offsets, pending.offsets)
	}
	return len(pending.offsets)
}

// applyTxnCommit moves committed transactional offsets into offsets: each
// replaces the current one only if its batch was appended later (Kafka's
// CommitRecordMetadataAndOffset.olderThan).
func applyTxnCommit(offsets, pending map[topicPartition]offsetEntry) {
	for tp, o := range pending {
		if cur, ok := offsets[tp]; !ok || cur.appendOffset < o.appendOffset {
			offsets[tp] = o
		}
	}
}

// indexTxnGroup records that group has pending offsets of producerID.
func indexTxnGroup(index map[int64]map[string]struct{}, producerID int64, group string) {
	ids := index[producerID]
	if ids == nil {
		ids = map[string]struct{}{}
		index[producerID] = ids
	}
	ids[group] = struct{}{}
}

// indexTxnGroup records in g's partition that g has pending offsets of
// producerID. Called with g.mu held (lock order group.mu -> Coordinator.mu).
func (c *Coordinator) indexTxnGroup(g *group, producerID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps := c.partitions[g.partition]; ps != nil && ps.groups[g.id] == g {
		if ps.txnGroups == nil {
			ps.txnGroups = map[int64]map[string]struct{}{}
		}
		indexTxnGroup(ps.txnGroups, producerID, g.id)
	}
}

// unstableLocked is GroupMetadata.hasPendingOffsetCommitsForTopicPartition:
// a commit of tp is being written, or an open transaction holds one.
func (g *group) unstableLocked(tp topicPartition) bool {
	if g.inflight[tp] > 0 {
		return true
	}
	for _, txn := range g.pendingTxn {
		if _, ok := txn.offsets[tp]; ok {
			return true
		}
	}
	return false
}

// dropPendingLocked removes tps from every open transaction of g, as
// Kafka's GroupMetadata.removeOffsets does when offsets are deleted.
func (g *group) dropPendingLocked(tps []topicPartition) {
	for pid, txn := range g.pendingTxn {
		for _, tp := range tps {
			delete(txn.offsets, tp)
		}
		if len(txn.offsets) == 0 {
			delete(g.pendingTxn, pid)
		}
	}
}
