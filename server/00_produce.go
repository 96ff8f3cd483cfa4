package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/replica"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce: v0-11
//
// Behaviour:
// * Only v2 record batches (magic 2) are stored; older message formats
//   (which clients send only with Produce v0-2) get
//   UNSUPPORTED_FOR_MESSAGE_FORMAT. v0 is advertised because librdkafka
//   before 2.11 disables compression unless it is.
// * Each batch is validated (length, CRC-32C, counts, max.message.bytes)
//   before anything is written; the broker sets only base offset and
//   partition leader epoch, so batches stay byte-for-byte as sent.
// * On a compacted topic (cleanup.policy has compact) every record needs a
//   key: a keyless one gets INVALID_RECORD (with the record indexes in
//   ErrorRecords, v8+) and nothing of the partition's batches is appended,
//   as Kafka's LogValidator.
// * Transactional batches: a batch that opens the producer's transaction on
//   a partition is appended only after the transaction coordinator confirms
//   the partition is in the ongoing transaction (KIP-890 part 1,
//   transaction verification; INVALID_TXN_STATE otherwise, NOT_ENOUGH_REPLICAS
//   while the coordinator cannot answer). Transactional batches without a
//   transactional id get TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and a
//   control batch from a client INVALID_RECORD, as Kafka.
// * Authorization (KafkaApis.handleProduceRequest): a request with
//   transactional batches needs Write on its transactional id, else every
//   partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs
//   Write, else its partitions get TOPIC_AUTHORIZATION_FAILED, before
//   anything else is looked at (whether the topic exists, acks). Kafka
//   never creates a topic for a produce; kbroker does when auto-creation
//   is on, but only for a principal Metadata would create it for (Create
//   on the cluster or the topic), else UNKNOWN_TOPIC_OR_PARTITION.
// * acks=-1 waits until the high watermark passes the batch or
//   TimeoutMillis passes; acks=0 gets no response at all. With
//   kbroker.acks.fsync (durable acknowledgements), acks=1 waits until the
//   leader has fdatasynced the batch, and the high watermark counts only
//   what every ISR member has fdatasynced.
//
// Version notes:
// * v2: LogAppendTime
// * v3: transactional id, record batch v2 only
// * v5: LogStartOffset
// * v8: record errors and error message
// * v9: flexible
// * v10-11: no change here (v11: TRANSACTION_ABORTABLE may be returned)
// * v12: transactions v2 (KIP-890 part 2): a transactional batch on a
//   partition not yet in its transaction adds it (the client sends no
//   AddPartitionsToTxn) instead of verifying it

func init() { registerAPI(kmsg.Produce.Int16(), 0, 12, handleProduce) }

// produceResponse is a Produce response that may still wait for
// replication: await completes it (acks=all), so that the connection can
// append the next produce request meanwhile.
type produceResponse struct {
	*kmsg.ProduceResponse
	await func()
}

func handleProduce(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := &produceResponse{ProduceResponse: req.ResponseKind().(*kmsg.ProduceResponse), await: func() {}}
	now := time.Now()

	type pending struct {
		part   *replica.Partition
		append replica.AppendResult
		out    *kmsg.ProduceResponseTopicPartition
	}
	var waits []pending

	validAcks := req.Acks == -1 || req.Acks == 0 || req.Acks == 1
	// Kafka answers a request with transactional batches but no
	// transactional id, or one the principal may not write, as an
	// authorization failure, for every partition.
	var refuseTxn error
	if hasTransactionalBatches(req) {
		switch {
		case req.TransactionID == nil:
			refuseTxn = fmt.Errorf("%w: transactional records without a transactional id", kerr.TransactionalIDAuthorizationFailed)
		case !b.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID):
			refuseTxn = fmt.Errorf("%w: not authorized to write transactional id %s", kerr.TransactionalIDAuthorizationFailed, *req.TransactionID)
		}
	}
	writable := b.checksFor(rc, acl.OpWrite, acl.ResourceTopic)
	// Phase 1: validate every partition's batches; phase 2: verify the
	// transactions they open (KIP-890 part 1, one coordinator call); phase
	// 3: append.
	// One allocation each for every partition's target, batch and header
	// (a partition holds exactly one batch), not a few per partition.
	nParts := 0
	for _, rt := range req.Topics {
		nParts += len(rt.Partitions)
	}
	dests := make([]produceDest, 0, nParts)
	batchesOf := make([][]byte, nParts)
	headersOf := make([]recordbatch.Header, nParts)
	targets := make([]*produceDest, 0, nParts)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			setErr := func(err error) { setProduceError(sp, req.Version, err) } // does not escape: no allocation
			if refuseTxn != nil {
				setErr(refuseTxn)
				continue
			}
			if !writable.allowed(rt.Topic) {
				setErr(fmt.Errorf("%w: not authorized to write topic %s", kerr.TopicAuthorizationFailed, rt.Topic))
				continue
			}
			if !validAcks {
				setErr(kerr.InvalidRequiredAcks)
				continue
			}
			if isInternalTopic(rt.Topic) {
				// Kafka refuses client writes to its internal topics.
				setErr(fmt.Errorf("%w: cannot produce to internal topic %s", kerr.InvalidTopicException, rt.Topic))
				continue
			}
			part, err := b.produceTarget(rc, rt.Topic, rp.Partition)
			if err != nil {
				setErr(err)
				continue
			}
			h, err := protocol.ValidateProduceBatch(rp.Records, part.MaxMessageBytes())
			if err != nil {
				if errors.Is(err, kerr.MessageTooLarge) {
					b.ops.rejected(rt.Topic, len(rp.Records)) // Kafka's BytesRejectedPerSec
				}
				setErr(err)
				continue
			}
			i := len(dests)
			batchesOf[i], headersOf[i] = rp.Records, h
			batches, headers := batchesOf[i:i+1:i+1], headersOf[i:i+1:i+1]
			if part.Compacted() {
				if recordErrs, err := keylessRecords(batches, rt.Topic, rp.Partition); err != nil {
					setErr(err)
					if req.Version >= 8 {
						sp.ErrorRecords = recordErrs
					}
					continue
				}
			}
			if before, after, logAppend := part.TimestampBounds(); !logAppend && (before >= 0 || after >= 0) {
				if recordErrs, err := outOfRangeTimestamps(batches, now, before, after); err != nil {
					setErr(err)
					if req.Version >= 8 {
						sp.ErrorRecords = recordErrs
					}
					continue
				}
			}
			dests = append(dests, produceDest{part: part, batches: batches, headers: headers, out: sp, version: req.Version,
				txn: txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}})
			t := &dests[i] // dests never grows past its capacity: t stays put
			if h.IsTransactional() && req.TransactionID != nil {
				t.verified = part.StartTxnVerification(h.ProducerID, h.ProducerEpoch, txnV2(req.Version, 12))
			}
			targets = append(targets, t)
		}
	}
	var toVerify []txn.TopicPartition
	for _, t := range targets {
		if t.verified != nil {
			toVerify = append(toVerify, t.txn)
		}
	}
	if len(toVerify) > 0 {
		h := targets[0].headers[0]
		for _, t := range targets {
			if t.verified != nil {
				h = t.headers[0]
				break
			}
		}
		results := b.verifyTxnPartitions(ctx, *req.TransactionID, h.ProducerID, h.ProducerEpoch, toVerify, txnV2(req.Version, 12))
		kept := targets[:0]
		for _, t := range targets {
			if err := results[t.txn]; t.verified != nil && err != nil {
				t.part.DropTxnVerification(t.verified)
				t.setErr(err)
				continue
			}
			kept = append(kept, t)
		}
		targets = kept
	}
	for _, t := range targets {
		res, err := t.part.AppendFromClient(t.batches, t.headers, req.Acks, now, t.verified)
		if err != nil {
			t.setErr(err)
			continue
		}
		b.ops.produced(t.txn.Topic, t.batches, t.headers)
		t.out.BaseOffset = res.BaseOffset
		t.out.LogAppendTime = res.LogAppendTime
		t.out.LogStartOffset = res.LogStartOffset
		if req.Acks == -1 || (req.Acks == 1 && t.part.DurableAcks()) {
			waits = append(waits, pending{part: t.part, append: res, out: t.out})
		}
	}
	if req.Acks == 0 {
		// No answer; but on an error Kafka closes the connection, so the
		// client refreshes its metadata instead of writing on blindly.
		for _, st := range resp.Topics {
			for _, sp := range st.Partitions {
				if sp.ErrorCode != 0 {
					return nil, fmt.Errorf("acks=0 produce to %s[%d] failed: %w", st.Topic, sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
				}
			}
		}
		return nil, nil
	}
	if len(waits) > 0 {
		// The timeout counts from the request's arrival, not from when
		// the connection gets to waiting for it.
		deadline := now.Add(time.Duration(req.TimeoutMillis) * time.Millisecond)
		resp.await = func() {
			wctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			for _, w := range waits {
				wait := w.part.WaitForHighWatermark
				if req.Acks == 1 {
					wait = w.part.WaitDurable // kbroker.acks.fsync
				}
				if err := wait(wctx, w.append); err != nil {
					w.out.ErrorCode = protocol.ErrorCode(err)
					w.out.BaseOffset = -1
				}
			}
		}
	}
	return resp, nil
}

// produceDest is one partition's validated batch in a produce request, on
// its way to the log.
type produceDest struct {
	part     *replica.Partition
	batches  [][]byte
	headers  []recordbatch.Header
	out      *kmsg.ProduceResponseTopicPartition
	version  int16 // the request's
	txn      txn.TopicPartition
	verified *replica.TxnVerification
}

// setErr answers the partition with err.
func (t *produceDest) setErr(err error) { setProduceError(t.out, t.version, err) }

// setProduceError answers a produce partition with err: its code, base
// offset -1, and from v8 its message.
func setProduceError(sp *kmsg.ProduceResponseTopicPartition, version int16, err error) {
	sp.ErrorCode = protocol.ErrorCode(err)
	sp.BaseOffset = -1
	if version >= 8 {
		msg := err.Error()
		sp.ErrorMessage = &msg
	}
}

// hasTransactionalBatches reports whether any batch of the request has the
// transactional bit (read from the raw bytes, before validation).
func hasTransactionalBatches(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			// Every batch, as Kafka's RequestUtils.hasTransactionalRecords.
			for recs := rp.Records; len(recs) > 0; {
				h, err := recordbatch.ParseHeader(recs)
				if err != nil || h.Size() <= 0 || h.Size() > len(recs) {
					break // malformed: validation answers it
				}
				if h.IsTransactional() {
					return true
				}
				recs = recs[h.Size():]
			}
		}
	}
	return false
}

// isInternalTopic reports Kafka's internal topics, which clients may not
// write to.
func isInternalTopic(topic string) bool { return topic == offsetsTopic || topic == txn.TopicName }

// keylessRecords checks that every record of batches has a key, as Kafka's
// LogValidator does for a compacted topic: a keyless record could never be
// compacted away. On failure nothing is appended and the answer is
// INVALID_RECORD with the offending records' indexes (Produce v8+).
func keylessRecords(batches [][]byte, topic string, partition int32) ([]kmsg.ProduceResponseTopicPartitionErrorRecord, error) {
	msg := fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", topic, partition)
	recordErrs, _, err := recordErrors(batches, func(_ recordbatch.Header, r kmsg.Record) string {
		if r.Key == nil {
			return msg
		}
		return ""
	})
	if err != nil || len(recordErrs) == 0 {
		return nil, err
	}
	return recordErrs, fmt.Errorf("%w: One or more records have been rejected due to %d record errors in total: %s", kerr.InvalidRecord, len(recordErrs), msg)
}

// outOfRangeTimestamps checks every record's CreateTime timestamp against
// the topic's bounds (negative: none), as Kafka's LogValidator with
// message.timestamp.before.max.ms / after.max.ms: a record stamped earlier
// than now-before or later than now+after fails the partition's batches
// with INVALID_TIMESTAMP and the offending records' indexes (Produce v8+);
// nothing is appended. Records without a timestamp (-1) pass.
func outOfRangeTimestamps(batches [][]byte, now time.Time, before, after time.Duration) ([]kmsg.ProduceResponseTopicPartitionErrorRecord, error) {
	nowMs := now.UnixMilli()
	lowest, highest := int64(math.MinInt64), int64(math.MaxInt64)
	if before >= 0 {
		lowest = nowMs - before.Milliseconds()
	}
	if after >= 0 {
		highest = nowMs + after.Milliseconds()
	}
	recordErrs, first, err := recordErrors(batches, func(h recordbatch.Header, r kmsg.Record) string {
		ts := h.BaseTimestamp + r.TimestampDelta64
		if ts == -1 || (ts >= lowest && ts <= highest) {
			return ""
		}
		return fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
			ts, h.BaseOffset+int64(r.OffsetDelta), lowest, highest)
	})
	if err != nil || len(recordErrs) == 0 {
		return nil, err
	}
	return recordErrs, fmt.Errorf("%w: One or more records have been rejected due to %d record errors in total, and only showing the first error: %s",
		kerr.InvalidTimestamp, len(recordErrs), first)
}

// recordErrors runs check on every record of batches (decoded, compressed
// or not) and collects a record error, indexed across the batches, for
// each it answers with a message; first is the first message.
func recordErrors(batches [][]byte, check func(h recordbatch.Header, r kmsg.Record) string) (errs []kmsg.ProduceResponseTopicPartitionErrorRecord, first string, err error) {
	index := int32(0)
	for _, batch := range batches {
		h, err := recordbatch.ParseHeader(batch)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
		}
		err = recordbatch.ForEachRecord(batch, func(r kmsg.Record) error {
			if msg := check(h, r); msg != "" {
				if first == "" {
					first = msg
				}
				re := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				re.RelativeOffset = index
				re.ErrorMessage = &msg
				errs = append(errs, re)
			}
			index++
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
		}
	}
	return errs, first, nil
}

// produceTarget finds the partition a produce goes to, creating the topic
// when auto creation is on.
func (b *Broker) produceTarget(rc *requestContext, topic string, partition int32) (*replica.Partition, error) {
	part, err := b.localPartition(topic, partition)
	// Kafka creates topics only for Metadata; a producer that may not
	// create the topic is answered as Kafka would answer it.
	if errors.Is(err, kerr.UnknownTopicOrPartition) && b.cfg.AutoCreateTopics && b.mayAutoCreate(rc, topic) {
		if _, exists := b.controller.Metadata().Topics[topic]; !exists {
			if _, cerr := b.autoCreateTopic(topic); cerr != nil {
				return nil, cerr
			}
			return b.localPartition(topic, partition)
		}
	}
	return part, err
}
