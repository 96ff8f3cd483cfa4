// Package verify is a Jepsen-style fault harness for kbroker clusters: it
// launches ZooKeeper and brokers behind fault-injecting TCP proxies, drives
// producers and consumers through real clients while a seeded schedule of
// faults (kill -9, SIGSTOP, network partitions, ZooKeeper restarts) runs,
// records every operation in a history, and checks that history for the
// anomalies named by Jepsen's Kafka workload (lost-write,
// inconsistent-offsets, duplicate, nonmonotonic-send, nonmonotonic-poll,
// poll-skip, aborted-read, unseen-after-healing), plus replica byte-equality
// and epoch monotonicity. A second topic is deleted and created again under
// the same name while the workload uses it; its own rule is that no record
// of an earlier incarnation is read after the re-creation. A third topic is
// compacted (cleanup.policy=compact, cleaned every second or so): keyed
// writes and tombstones, whose checker wants every key's latest
// acknowledged value (or a later one) after cleaning, no deleted key back,
// no tombstone left after delete.retention.ms, each key's records in the
// order they were written. A fourth topic is read by a share group
// (KIP-932): its checker wants every acknowledged write delivered, no
// record delivered again once its acceptance was acknowledged, and no
// record delivered that was never written.
//
// Files: history.go (events and the recorder), check.go (the checker),
// check_recreate.go (the checker for the re-created topic), compact.go and
// check_compact.go (the compacted topic's workload and checker), share.go
// and check_share.go (the share group's workload and checker), proxy.go (the
// TCP proxy), cluster.go (processes), faults.go (the schedule),
// recreate.go (the delete-and-recreate fault), workload.go (clients),
// observe.go (ZooKeeper epochs and replica logs), run.go (a whole run and
// its report).
package verify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Kind says what an Event records.
type Kind string

// Event kinds.
const (
	// KindSend is a completed write: Proc's Seq-th send of Value to
	// Partition, with Outcome (and Offset when ok).
	KindSend Kind = "send"
	// KindRead is one record a consumer (Proc) saw in poll number Poll.
	KindRead Kind = "read"
	// KindAssign says consumer Proc (re)started reading Partitions: offset
	// monotonicity is checked from here on. On the re-created topic it
	// also says which incarnation existed when the client started
	// (Incarnation), as does the one before its final read (Proc "final").
	KindAssign Kind = "assign"
	// KindFinal is one record of the final read of a partition after the
	// faults healed.
	KindFinal Kind = "final"
	// KindFinalDone closes the final read of Partition; Offset is the high
	// watermark it read up to.
	KindFinalDone Kind = "final-done"
	// KindFault is a fault starting (Phase "start") or healing ("end").
	KindFault Kind = "fault"
	// KindEpoch is an observation of ZooKeeper state: a partition's leader,
	// leader epoch and ISR, or (Partition -1) the controller epoch.
	KindEpoch Kind = "epoch"
	// KindReplica is the result of comparing a replica's log with the
	// leader's up to the high watermark (Outcome ok or fail).
	KindReplica Kind = "replica"
	// KindPhase marks the run's phases (Detail: workload-start, heal,
	// workload-end, ...).
	KindPhase Kind = "phase"

	// The transactional workload (txn_workload.go, checked by
	// check_txn.go) has kinds of its own; their events always name their
	// Topic, and Txn names the transaction a write belongs to.

	// KindTxnSend is one record produced inside transaction Txn by
	// producer Proc: its Seq-th record, Value to Topic/Partition, with
	// Outcome (and Offset when ok).
	KindTxnSend Kind = "txn-send"
	// KindTxnEnd is an attempt to end transaction Txn: Detail "commit" or
	// "abort"; Phase "start" is recorded before the request is made,
	// Phase "end" when it returned, with Outcome ok, fail (certainly not
	// done: the client did not send it) or info (unknown).
	KindTxnEnd Kind = "txn-end"
	// KindTxnRead is one record a read_committed consumer Proc saw in
	// poll number Poll.
	KindTxnRead Kind = "txn-read"
	// KindTxnAssign says consumer Proc (re)starts reading Partitions of
	// Topic from some position: its offsets are checked for monotonicity
	// and skips from here on.
	KindTxnAssign Kind = "txn-assign"
	// KindTxnFinal is one record of the read_committed final read after
	// healing, when every transaction had ended (the LSO had reached the
	// high watermark).
	KindTxnFinal Kind = "txn-final"
	// KindTxnFinalDone closes the final read of Topic/Partition; Offset is
	// the high watermark (= LSO) it read up to.
	KindTxnFinalDone Kind = "txn-final-done"
	// KindTxnOffsets is the consume-transform-produce group's committed
	// offset (Offset) of input Topic/Partition after it stopped.
	KindTxnOffsets Kind = "txn-offsets"

	// The share group workload (share.go, checked by check_share.go)
	// writes to ShareTopicName with KindSend events naming that Topic;
	// its consumers' events have kinds of their own.

	// KindShareDeliver is one record share group member Proc got in a
	// poll: Partition, Offset, Value, Deliveries (the broker's delivery
	// count), and Floor, a time (microseconds since the run started)
	// before which the broker cannot have acquired it for Proc.
	KindShareDeliver Kind = "share-deliver"
	// KindShareAck is member Proc's acknowledgement (accept) of a record
	// it was delivered: Outcome ok (the broker took it), fail (the broker
	// refused it) or info (unknown), recorded once the answer was in.
	KindShareAck Kind = "share-ack"
	// KindShareDrainDone closes the share group's drain of Partition after
	// healing; Offset is the partition's high watermark after the
	// producer stopped.
	KindShareDrainDone Kind = "share-drain-done"
)

// Outcome is how a send ended.
type Outcome string

// Send outcomes.
const (
	OK Outcome = "ok"
	// Fail is a definite failure: the record was certainly not written.
	Fail Outcome = "fail"
	// Info is an indefinite outcome: the record may or may not be written
	// (timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND, connection lost).
	Info Outcome = "info"
)

// Event is one line of a history.
type Event struct {
	// Time is microseconds since the run started.
	Time int64 `json:"t"`
	Kind Kind  `json:"kind"`
	// Topic is empty for the main topic (whose records live for the whole
	// run) and names the re-created topic (see recreate.go) on its sends,
	// reads, assignments, final reads and replica comparisons.
	Topic     string  `json:"topic,omitempty"`
	Proc      string  `json:"proc,omitempty"`
	Seq       int64   `json:"seq,omitempty"`
	Partition int32   `json:"p"`
	Offset    int64   `json:"o"`
	Value     string  `json:"v,omitempty"`
	Outcome   Outcome `json:"outcome,omitempty"`
	Err       string  `json:"err,omitempty"`
	Poll      int64   `json:"poll,omitempty"`
	Txn       string  `json:"txn,omitempty"`
	// Key and Tombstone are the record's key and whether its value is
	// null, on the compacted topic's sends and reads (compact.go), whose
	// Value is then the record's id (its "kverify" header).
	Key       string `json:"key,omitempty"`
	Tombstone bool   `json:"tomb,omitempty"`
	// Deliveries and Floor are a share group delivery's delivery count
	// and the earliest time its acquisition can have happened (see
	// KindShareDeliver).
	Deliveries int32 `json:"dc,omitempty"`
	Floor      int64 `json:"floor,omitempty"`

	Partitions      []int32 `json:"partitions,omitempty"`
	Leader          int32   `json:"leader,omitempty"`
	LeaderEpoch     int32   `json:"leader_epoch,omitempty"`
	ControllerEpoch int32   `json:"controller_epoch,omitempty"`
	ISR             []int32 `json:"isr,omitempty"`
	// Incarnation counts the re-created topic's incarnations from 1 (on
	// KindAssign and on the recreate fault's "create" event).
	Incarnation int32 `json:"inc,omitempty"`

	Fault  string `json:"fault,omitempty"`
	Phase  string `json:"phase,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Recorder appends events to memory and, when given a writer, to a JSON
// lines file as they happen (so a crashed run still leaves its history).
type Recorder struct {
	start time.Time

	// mu guards events, w and err.
	mu     sync.Mutex
	events []Event
	w      *bufio.Writer
	err    error
}

// NewRecorder starts a history at start; w may be nil.
func NewRecorder(start time.Time, w io.Writer) *Recorder {
	r := &Recorder{start: start}
	if w != nil {
		r.w = bufio.NewWriter(w)
	}
	return r
}

// Since is the event time of t.
func (r *Recorder) Since(t time.Time) int64 { return t.Sub(r.start).Microseconds() }

// Add stamps e with the current time (unless set) and records it.
func (r *Recorder) Add(e Event) {
	if e.Time == 0 {
		e.Time = r.Since(time.Now())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	if r.w != nil && r.err == nil {
		b, err := json.Marshal(e)
		if err == nil {
			b = append(b, '\n')
			_, err = r.w.Write(b)
		}
		r.err = err
	}
}

// Flush writes buffered events out.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil && r.err == nil {
		r.err = r.w.Flush()
	}
	return r.err
}

// Events returns a copy of the history so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// ReadHistory loads a JSON lines history written by a Recorder.
func ReadHistory(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
