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
	if commit {
		applyTxnCommit(g.offsets, pending)
	}
	return len(pending)
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
