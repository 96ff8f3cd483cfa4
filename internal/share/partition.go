// Package share holds KIP-932 share-partition state: which records of one
// topic partition a share group has delivered, to whom, how often, and which
// are done (Kafka's SharePartition). It is pure: no goroutines, no clock, no
// I/O; the server feeds it the partition's batch bounds and the time.
//
// A share partition covers [StartOffset, EndOffset) (Kafka's SPSO and
// SPEO): records below StartOffset are done for the group, records from
// EndOffset on were never delivered. Each record in between is in flight:
//
//	Available ──acquire──▶ Acquired ──accept──────────▶ Acknowledged
//	    ▲                      │      ──reject / gap───▶ Archived
//	    └──release / lock──────┘      (release or lock expiry when the
//	       expiry                      delivery count reached the limit
//	                                   also archives)
//
// StartOffset advances over every leading Acknowledged / Archived record,
// so the in-flight window only holds what still matters.
package share

import (
	"errors"
	"fmt"
	"time"
)

// RecordState is one in-flight record's state (Kafka's RecordState; the
// numbers are Kafka's persisted delivery states).
type RecordState int8

const (
	Available    RecordState = 0
	Acquired     RecordState = 1
	Acknowledged RecordState = 2
	Archived     RecordState = 4
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "AVAILABLE"
	case Acquired:
		return "ACQUIRED"
	case Acknowledged:
		return "ACKNOWLEDGED"
	case Archived:
		return "ARCHIVED"
	}
	return fmt.Sprintf("RecordState(%d)", int8(s))
}

// AckType is a client's acknowledgement of one record (the wire values of
// ShareFetch / ShareAcknowledge AcknowledgeTypes).
type AckType int8

const (
	AckGap     AckType = 0 // no record at this offset (compacted, control): archived
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
	AckRenew   AckType = 4 // KIP-1222: extend the acquisition lock
)

// Errors of acknowledgements; the server maps them to Kafka's codes.
var (
	// ErrInvalidRecordState: an acknowledgement for a record that is not
	// acquired by the acknowledging member (Kafka's INVALID_RECORD_STATE).
	ErrInvalidRecordState = errors.New("record not acquired by this member")
	// ErrInvalidRequest: malformed acknowledgement batch (INVALID_REQUEST).
	ErrInvalidRequest = errors.New("invalid acknowledgement batch")
)

// Config is the group's share settings.
type Config struct {
	LockDuration  time.Duration // group.share.record.lock.duration.ms (default 30 s)
	DeliveryLimit int16         // group.share.delivery.count.limit (default 5)
	MaxInFlight   int64         // group.share.partition.max.record.locks (default 2000)
	// ReadCommitted: the group's share.isolation.level is
	// read_committed, so the leader acquires records up to the last
	// stable offset only and archives aborted transactions' records.
	ReadCommitted bool
}

// record is one in-flight record's state.
type record struct {
	state      RecordState
	deliveries int16     // times acquired so far
	owner      string    // member holding the lock (Acquired only)
	lockUntil  time.Time // when the acquisition lock expires (Acquired only)
}

// Partition is one share partition's state. Not safe for concurrent use:
// the caller serialises calls.
type Partition struct {
	cfg   Config
	start int64    // SPSO
	recs  []record // recs[i] is offset start+i; len(recs) = SPEO - SPSO
}

// New returns a share partition starting at startOffset with nothing in
// flight.
func New(cfg Config, startOffset int64) *Partition {
	return &Partition{cfg: cfg, start: startOffset}
}

// StartOffset is the SPSO.
func (p *Partition) StartOffset() int64 { return p.start }

// EndOffset is the SPEO: the first offset never acquired.
func (p *Partition) EndOffset() int64 { return p.start + int64(len(p.recs)) }

// SetConfig changes the settings for later decisions (locks already
// taken keep their expiry).
func (p *Partition) SetConfig(cfg Config) { p.cfg = cfg }

// State returns offset's state and delivery count; offsets below the SPSO
// are Acknowledged-or-Archived (reported Acknowledged), from the SPEO on
// Available with no delivery.
func (p *Partition) State(offset int64) (RecordState, int16) {
	switch {
	case offset < p.start:
		return Acknowledged, 0
	case offset >= p.EndOffset():
		return Available, 0
	}
	r := p.recs[offset-p.start]
	return r.state, r.deliveries
}

// Owner returns the member holding offset's lock ("" unless Acquired).
func (p *Partition) Owner(offset int64) string {
	if offset < p.start || offset >= p.EndOffset() {
		return ""
	}
	return p.recs[offset-p.start].owner
}

// Batch is one record batch's offsets in the log, [First, Last]. Skip
// marks a batch with nothing to deliver: a control batch, or one of an
// aborted transaction read under share.isolation.level=read_committed
// (Kafka archives those records as its acquire finds them).
type Batch struct {
	First, Last int64
	Skip        bool
}

// Range is a run of acquired offsets with one delivery count (Kafka's
// AcquiredRecords entry).
type Range struct {
	First, Last int64
	Deliveries  int16
}

// MoveStart moves the SPSO to offset when the log no longer holds records
// below it (retention, DeleteRecords) or an operator reset it: the records
// in between are dropped from flight. Moving backwards is ignored.
func (p *Partition) MoveStart(offset int64) {
	if offset <= p.start {
		return
	}
	if offset >= p.EndOffset() {
		p.start, p.recs = offset, nil
		return
	}
	p.recs = append([]record(nil), p.recs[offset-p.start:]...)
	p.start = offset
}

// ExpireLocks releases every acquisition lock that expired by now: the
// record becomes Available again, or Archived once it was delivered
// DeliveryLimit times. It reports whether anything changed.
func (p *Partition) ExpireLocks(now time.Time) bool {
	changed := false
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Acquired && !now.Before(r.lockUntil) {
			p.releaseLocked(r)
			changed = true
		}
	}
	if changed {
		p.advanceStart()
	}
	return changed
}

// NextLockExpiry is the earliest acquisition lock expiry (zero: none).
func (p *Partition) NextLockExpiry() time.Time {
	var next time.Time
	for _, r := range p.recs {
		if r.state == Acquired && (next.IsZero() || r.lockUntil.Before(next)) {
			next = r.lockUntil
		}
	}
	return next
}

// ReleaseMember makes every record member holds Available (or Archived at
// the delivery limit), as Kafka does when a member's share session closes.
func (p *Partition) ReleaseMember(member string) bool {
	changed := false
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Acquired && r.owner == member {
			p.releaseLocked(r)
			changed = true
		}
	}
	if changed {
		p.advanceStart()
	}
	return changed
}

func (p *Partition) releaseLocked(r *record) {
	r.owner, r.lockUntil = "", time.Time{}
	if r.deliveries >= p.cfg.DeliveryLimit {
		r.state = Archived
		return
	}
	r.state = Available
}

// FirstDeliverable is where a fetch for this partition reads from: the
// first Available in-flight record, else the SPEO.
func (p *Partition) FirstDeliverable() int64 {
	for i, r := range p.recs {
		if r.state == Available {
			return p.start + int64(i)
		}
	}
	return p.EndOffset()
}

// Acquire locks up to maxRecords records for member among the batches the
// server read from the log (their bounds, in order, below the high
// watermark), as Kafka's SharePartition.acquire: Available records already
// in flight (released or timed out) one by one, and new records from the
// SPEO a whole batch at a time (the last batch may exceed maxRecords, as
// Kafka returns whole batches) while fewer than MaxInFlight records are in
// flight. With strict (ShareFetch's record-limit acquire mode, KIP-1206)
// no more than maxRecords are taken, splitting a batch. Records Acquired,
// Acknowledged or Archived are skipped. A Skip batch's records are
// archived, new ones and Available ones in flight alike (Acquired ones
// stay with their member), so the SPSO moves past them. Expired locks
// must have been released with ExpireLocks first.
func (p *Partition) Acquire(member string, maxRecords int, strict bool, batches []Batch, now time.Time) []Range {
	var out []Range
	taken := 0
	lockUntil := now.Add(p.cfg.LockDuration)
	take := func(off int64, r *record) {
		r.state, r.owner, r.lockUntil = Acquired, member, lockUntil
		r.deliveries++
		if n := len(out); n > 0 && out[n-1].Last == off-1 && out[n-1].Deliveries == r.deliveries {
			out[n-1].Last = off
		} else {
			out = append(out, Range{First: off, Last: off, Deliveries: r.deliveries})
		}
		taken++
	}
	for _, b := range batches {
		if taken >= maxRecords {
			break
		}
		if b.Skip {
			p.archive(b)
			continue
		}
		// In flight: Available records one by one.
		for off := max(b.First, p.start); off <= b.Last && off < p.EndOffset() && taken < maxRecords; off++ {
			if r := &p.recs[off-p.start]; r.state == Available {
				take(off, r)
			}
		}
		end := p.EndOffset()
		if b.Last < end || taken >= maxRecords || int64(len(p.recs)) >= p.cfg.MaxInFlight {
			continue
		}
		if b.First > end {
			// A hole in the log (compaction, removed records):
			// nothing to deliver there, so it is archived in flight
			// and dropped by advanceStart.
			for off := end; off < b.First; off++ {
				p.recs = append(p.recs, record{state: Archived})
			}
		}
		for off := max(b.First, p.EndOffset()); off <= b.Last && (!strict || taken < maxRecords); off++ {
			p.recs = append(p.recs, record{})
			take(off, &p.recs[len(p.recs)-1])
		}
	}
	p.advanceStart()
	return out
}

// archive archives the records of b, a batch with nothing to deliver:
// Available ones in flight, and new ones up to b.Last (with any hole
// before it) while the in-flight bound allows.
func (p *Partition) archive(b Batch) {
	for off := max(b.First, p.start); off <= b.Last && off < p.EndOffset(); off++ {
		if r := &p.recs[off-p.start]; r.state == Available {
			r.state = Archived
		}
	}
	if b.Last < p.EndOffset() || int64(len(p.recs)) >= p.cfg.MaxInFlight {
		return
	}
	for off := p.EndOffset(); off <= b.Last; off++ {
		p.recs = append(p.recs, record{state: Archived})
	}
}

// Acknowledge applies one acknowledgement batch [first, last] from member:
// types holds one type for the whole batch or one per offset. Every
// offset must be Acquired by member (Kafka's INVALID_RECORD_STATE
// otherwise); nothing changes unless the whole batch is valid.
func (p *Partition) Acknowledge(member string, first, last int64, types []AckType, now time.Time) error {
	if first > last || len(types) == 0 || (len(types) != 1 && int64(len(types)) != last-first+1) {
		return fmt.Errorf("%w: [%d, %d] with %d types", ErrInvalidRequest, first, last, len(types))
	}
	typeAt := func(off int64) AckType {
		if len(types) == 1 {
			return types[0]
		}
		return types[off-first]
	}
	for off := first; off <= last; off++ {
		t := typeAt(off)
		if t < AckGap || t > AckRenew {
			return fmt.Errorf("%w: acknowledge type %d", ErrInvalidRequest, t)
		}
		if off < p.start || off >= p.EndOffset() {
			return fmt.Errorf("%w: offset %d outside the in-flight window [%d, %d)", ErrInvalidRecordState, off, p.start, p.EndOffset())
		}
		r := p.recs[off-p.start]
		if r.state != Acquired || r.owner != member {
			return fmt.Errorf("%w: offset %d is %s", ErrInvalidRecordState, off, r.state)
		}
	}
	for off := first; off <= last; off++ {
		r := &p.recs[off-p.start]
		switch typeAt(off) {
		case AckAccept:
			r.state, r.owner, r.lockUntil = Acknowledged, "", time.Time{}
		case AckRelease:
			p.releaseLocked(r)
		case AckReject, AckGap:
			r.state, r.owner, r.lockUntil = Archived, "", time.Time{}
		case AckRenew:
			r.lockUntil = now.Add(p.cfg.LockDuration)
		}
	}
	p.advanceStart()
	return nil
}

// advanceStart moves the SPSO over leading finished records.
func (p *Partition) advanceStart() {
	n := 0
	for n < len(p.recs) && (p.recs[n].state == Acknowledged || p.recs[n].state == Archived) {
		n++
	}
	if n == 0 {
		return
	}
	p.start += int64(n)
	p.recs = append(p.recs[:0:0], p.recs[n:]...)
}

// Acquired counts the records in the Acquired state.
func (p *Partition) Acquired() int {
	n := 0
	for _, r := range p.recs {
		if r.state == Acquired {
			n++
		}
	}
	return n
}

// StateBatch is a run of in-flight records with one state and delivery
// count, as persisted (Kafka's PersisterStateBatch). Acquired records are
// persisted as Available: a lock does not survive a failover.
type StateBatch struct {
	First, Last int64
	State       RecordState
	Deliveries  int16
}

// Snapshot returns the durable form of the state: the SPSO and the
// in-flight records as runs.
func (p *Partition) Snapshot() (startOffset int64, batches []StateBatch) {
	for i, r := range p.recs {
		off := p.start + int64(i)
		st := r.state
		if st == Acquired {
			st = Available
		}
		if n := len(batches); n > 0 && batches[n-1].Last == off-1 && batches[n-1].State == st && batches[n-1].Deliveries == r.deliveries {
			batches[n-1].Last = off
			continue
		}
		batches = append(batches, StateBatch{First: off, Last: off, State: st, Deliveries: r.deliveries})
	}
	return p.start, batches
}

// Restore rebuilds a partition from a Snapshot: every record it lists
// keeps its state and delivery count (Available ones become deliverable
// again), offsets between runs are Available with no delivery.
func Restore(cfg Config, startOffset int64, batches []StateBatch) *Partition {
	p := New(cfg, startOffset)
	for _, b := range batches {
		if b.Last < p.start || b.First > b.Last {
			continue
		}
		for off := p.EndOffset(); off < b.First; off++ {
			p.recs = append(p.recs, record{})
		}
		for off := max(b.First, p.EndOffset()); off <= b.Last; off++ {
			st := b.State
			if st == Acquired {
				st = Available
			}
			p.recs = append(p.recs, record{state: st, deliveries: b.Deliveries})
		}
	}
	// Trailing Available records with no delivery are simply not in flight.
	for len(p.recs) > 0 {
		r := p.recs[len(p.recs)-1]
		if r.state != Available || r.deliveries != 0 {
			break
		}
		p.recs = p.recs[:len(p.recs)-1]
	}
	p.advanceStart()
	return p
}

// Clone returns an independent copy, so a change can be tried (and
// stored) before it is published.
func (p *Partition) Clone() *Partition {
	return &Partition{cfg: p.cfg, start: p.start, recs: append([]record(nil), p.recs...)}
}

// Replace makes p the state of next (a Clone of p, changed).
func (p *Partition) Replace(next *Partition) {
	p.cfg, p.start, p.recs = next.cfg, next.start, next.recs
}

// Config returns the partition's settings.
func (p *Partition) Config() Config { return p.cfg }
