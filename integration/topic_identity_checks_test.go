package integration

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ---- the checks ----

// finish waits for the cluster to quiesce and checks everything issue 19
// asks of the new incarnation.
func (r *tiRun) finish() {
	r.t.Helper()
	start := time.Now()
	if err := pollUntil(tiQuiesce, 50*time.Millisecond, r.quiesced); err != nil {
		r.t.Errorf("%s: the new incarnation did not quiesce within %v: %v", r.topic, tiQuiesce, err)
	} else {
		r.t.Logf("%s: quiesced %v after the fault healed", r.topic, time.Since(start).Round(time.Millisecond))
	}
	r.checkRunning()
	r.checkLogs()
	r.checkDirs()
	r.checkConsumer()
}

// pollUntil calls fn every `every` until it returns nil or total passed,
// and returns fn's last error: checkFor that does not end the test, for
// waits after which the checks below give a more precise message.
func pollUntil(total, every time.Duration, fn func() error) error {
	deadline := time.Now().Add(total)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(every)
	}
}

// quiesced: every partition of the new topic has a leader and its whole
// assignment in the ISR, each replica's high watermark equals its log end,
// all replicas have the same log end and hold at least the acknowledged
// records, and every running broker's Metadata gives the new id and the
// leader ZooKeeper names.
func (r *tiRun) quiesced() error {
	want := map[int32]int64{}
	for _, a := range r.gen2 {
		want[a.Partition] = max(want[a.Partition], a.Offset+1)
	}
	states := map[int32]zkPartState{}
	for p, replicas := range r.newAssign {
		s, err := r.c.partState(r.topic, int32(p))
		if err != nil {
			return err
		}
		if s.Leader < 0 || len(s.ISR) != len(replicas) {
			return fmt.Errorf("%s-%d: state %s, want a leader and all of %v in sync", r.topic, p, s, replicas)
		}
		states[int32(p)] = s
		var end int64 = -1
		for _, id := range replicas {
			if !r.c.broker(id).Running() {
				return fmt.Errorf("broker %d (replica of %s-%d) is not running: %s", id, r.topic, p, r.c.broker(id).exitState())
			}
			hw, leo, err := r.c.partitionOffsets(id, r.topic, int32(p))
			if err != nil {
				return err
			}
			if hw != leo {
				return fmt.Errorf("broker %d: %s-%d high watermark %d, log end %d", id, r.topic, p, hw, leo)
			}
			if end >= 0 && leo != end {
				return fmt.Errorf("broker %d: %s-%d log end %d, another replica %d", id, r.topic, p, leo, end)
			}
			end = leo
		}
		if end < want[int32(p)] {
			return fmt.Errorf("%s-%d: replicas end at %d, the acknowledged records reach %d", r.topic, p, end, want[int32(p)])
		}
	}
	for i, b := range r.c.brokers {
		id := int32(i + 1)
		if !b.Running() {
			continue
		}
		got, parts, err := r.c.metadataTopicID(id, r.topic)
		if err != nil {
			return err
		}
		if got != r.newID || parts != len(r.newAssign) {
			return fmt.Errorf("broker %d's Metadata: %s id %s with %d partitions, want %s with %d", id, r.topic, got, parts, r.newID, len(r.newAssign))
		}
		md, err := r.c.mdLeaders(id, r.topic)
		if err != nil {
			return err
		}
		for p, s := range states {
			if m := md[p]; m.Leader != s.Leader || m.LeaderEpoch != s.LeaderEpoch {
				return fmt.Errorf("broker %d: %s-%d leader %d epoch %d, ZooKeeper says %s", id, r.topic, p, m.Leader, m.LeaderEpoch, s)
			}
		}
	}
	return nil
}

// checkRunning: no broker process exited.
func (r *tiRun) checkRunning() {
	r.t.Helper()
	for i, b := range r.c.brokers {
		if !b.Running() {
			r.t.Errorf("%s: broker %d exited: %s (see its log below)", r.topic, i+1, b.exitState())
		}
	}
}

// diskRecord is one record read from a segment file.
type diskRecord struct {
	offset int64
	epoch  int32 // the batch's partition leader epoch
	value  string
}

// diskBatch is one record batch of a partition's log.
type diskBatch struct {
	bytes   []byte
	base    int64
	last    int64
	epoch   int32
	records []diskRecord
	err     error // decoding the records
}

func (b diskBatch) String() string {
	s := fmt.Sprintf("batch %d-%d (leader epoch %d, %d bytes", b.base, b.last, b.epoch, len(b.bytes))
	if len(b.records) > 0 {
		s += fmt.Sprintf(", first value %q", b.records[0].value)
	}
	if b.err != nil {
		s += fmt.Sprintf(", undecodable: %v", b.err)
	}
	return s + ")"
}

// partitionLog is a replica's log as its segment files hold it.
type partitionLog struct {
	segments []string // .log file names, by base offset
	data     []byte   // their concatenation
	batches  []diskBatch
	tail     int // bytes after the last whole batch
}

var segmentName = regexp.MustCompile(`^[0-9]{20}\.log$`)

// readPartitionLog reads every .log segment of dir, in base offset order.
func readPartitionLog(dir string) (*partitionLog, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if segmentName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names) // zero-padded: lexical order is offset order
	l := &partitionLog{segments: names}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		l.data = append(l.data, data...)
	}
	pos := 0
	for _, bi := range scanBatches(l.data) {
		raw := l.data[bi.pos : bi.pos+bi.size]
		db := diskBatch{bytes: raw, base: bi.baseOffset, last: bi.lastOffset}
		db.epoch = int32(binary.BigEndian.Uint32(raw[12:]))
		db.records, db.err = decodeBatchRecords(raw)
		l.batches = append(l.batches, db)
		pos = int(bi.pos + bi.size)
	}
	l.tail = len(l.data) - pos
	return l, nil
}

// decodeBatchRecords returns the records of one uncompressed v2 batch.
func decodeBatchRecords(raw []byte) ([]diskRecord, error) {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		return nil, fmt.Errorf("batch header: %w", err)
	}
	if codec := b.Attributes & 0x07; codec != 0 {
		return nil, fmt.Errorf("compressed batch (codec %d): the test writes uncompressed records", codec)
	}
	var out []diskRecord
	rest := b.Records
	for i := int32(0); i < b.NumRecords; i++ {
		length, n := binary.Varint(rest)
		if n <= 0 || length < 0 || int64(n)+length > int64(len(rest)) {
			return out, fmt.Errorf("record %d: bad length", i)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rest[:int64(n)+length]); err != nil {
			return out, fmt.Errorf("record %d: %w", i, err)
		}
		out = append(out, diskRecord{offset: b.FirstOffset + int64(rec.OffsetDelta), epoch: b.PartitionLeaderEpoch, value: string(rec.Value)})
		rest = rest[int64(n)+length:]
	}
	return out, nil
}

// checkLogs: for every partition of the new topic, the leader's log holds
// only second-incarnation records, dense from offset 0, with every
// acknowledged record where it was acknowledged; every other replica's
// log is byte-identical to the leader's.
func (r *tiRun) checkLogs() {
	r.t.Helper()
	for p, replicas := range r.newAssign {
		p := int32(p)
		s, err := r.c.partState(r.topic, p)
		if err != nil {
			r.t.Errorf("%s-%d: %v", r.topic, p, err)
			continue
		}
		leader := s.Leader
		if !slices.Contains(replicas, leader) {
			r.t.Errorf("%s-%d: leader %d is not one of the replicas %v (state %s)", r.topic, p, leader, replicas, s)
			continue
		}
		ref, err := readPartitionLog(r.c.broker(leader).PartitionDir(r.topic, p))
		if err != nil {
			r.t.Errorf("%s-%d: reading the leader's (broker %d) log: %v", r.topic, p, leader, err)
			continue
		}
		r.checkContent(leader, p, ref, true)
		r.t.Logf("%s-%d: leader %d's log: %d batches, offsets 0..%d, %d bytes in %v", r.topic, p, leader, len(ref.batches), nextOffset(ref.batches)-1, len(ref.data), ref.segments)
		for _, id := range replicas {
			if id == leader {
				continue
			}
			l, err := readPartitionLog(r.c.broker(id).PartitionDir(r.topic, p))
			if err != nil {
				r.t.Errorf("%s-%d: reading broker %d's log: %v", r.topic, p, id, err)
				continue
			}
			r.checkContent(id, p, l, false)
			if d := firstDifference(l, ref); d != "" {
				r.t.Errorf("%s-%d: broker %d's log is not byte-identical to the leader's (broker %d): %s", r.topic, p, id, leader, d)
			}
		}
	}
}

// checkContent checks one replica's records: only this run's
// second-incarnation values; for the leader also dense offsets from 0 and
// every acknowledged record at its offset.
func (r *tiRun) checkContent(id, p int32, l *partitionLog, isLeader bool) {
	r.t.Helper()
	role := "follower"
	if isLeader {
		role = "leader"
	}
	var old, foreign []diskRecord
	at := map[int64]string{}
	next := int64(0)
	gap := ""
	for _, b := range l.batches {
		if b.err != nil {
			r.t.Errorf("%s-%d on broker %d (%s): %s", r.topic, p, id, role, b)
		}
		for _, rec := range b.records {
			switch {
			case isOld(rec.value):
				old = append(old, rec)
			case !strings.HasPrefix(rec.value, r.genPrefix(2)):
				foreign = append(foreign, rec)
			}
			if rec.offset != next && gap == "" {
				gap = fmt.Sprintf("offset %d where %d was expected", rec.offset, next)
			}
			next = rec.offset + 1
			at[rec.offset] = rec.value
		}
	}
	if len(old) > 0 {
		r.t.Errorf("%s-%d on broker %d (%s): %d records of the deleted incarnation %s, offsets %d..%d, first %q (leader epoch %d)",
			r.topic, p, id, role, len(old), r.oldID, old[0].offset, old[len(old)-1].offset, old[0].value, old[0].epoch)
	}
	if len(foreign) > 0 {
		r.t.Errorf("%s-%d on broker %d (%s): %d records that are not this incarnation's, first at offset %d: %q",
			r.topic, p, id, role, len(foreign), foreign[0].offset, foreign[0].value)
	}
	if l.tail != 0 {
		r.t.Errorf("%s-%d on broker %d (%s): %d bytes after the last whole batch", r.topic, p, id, role, l.tail)
	}
	if !isLeader {
		return
	}
	if gap != "" {
		r.t.Errorf("%s-%d on the leader (broker %d): offsets not dense from 0: %s", r.topic, p, id, gap)
	}
	missing := 0
	for v, a := range r.gen2 {
		if a.Partition != p {
			continue
		}
		if got, ok := at[a.Offset]; !ok || got != v {
			if missing++; missing <= 3 {
				r.t.Errorf("%s-%d on the leader (broker %d): acknowledged %q at offset %d, the log has %q there", r.topic, p, id, v, a.Offset, got)
			}
		}
	}
	if missing > 3 {
		r.t.Errorf("%s-%d on the leader (broker %d): %d acknowledged records missing or moved in all", r.topic, p, id, missing)
	}
}

// firstDifference describes where l first differs from ref, "" if their
// bytes are equal.
func firstDifference(l, ref *partitionLog) string {
	if bytes.Equal(l.data, ref.data) {
		if !slices.Equal(l.segments, ref.segments) {
			return fmt.Sprintf("same bytes but segments %v, the leader's %v", l.segments, ref.segments)
		}
		return ""
	}
	for i := 0; ; i++ {
		switch {
		case i >= len(l.batches) && i >= len(ref.batches):
			return fmt.Sprintf("same batches, but %d trailing bytes here and %d on the leader", l.tail, ref.tail)
		case i >= len(l.batches):
			return fmt.Sprintf("ends after %d batches (next offset %d), the leader goes on with %s", i, nextOffset(l.batches), ref.batches[i])
		case i >= len(ref.batches):
			return fmt.Sprintf("the leader ends after %d batches (next offset %d), this replica goes on with %s", i, nextOffset(ref.batches), l.batches[i])
		case !bytes.Equal(l.batches[i].bytes, ref.batches[i].bytes):
			return fmt.Sprintf("first difference at offset %d (batch %d): this replica has %s, the leader %s",
				min(l.batches[i].base, ref.batches[i].base), i, l.batches[i], ref.batches[i])
		}
	}
}

func nextOffset(bs []diskBatch) int64 {
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1].last + 1
}

// readPartitionTopicIDFile returns the topic_id line of a partition
// directory's partition.metadata (Kafka's format: "version: 0\ntopic_id:
// <base64url uuid>\n").
func readPartitionTopicIDFile(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "partition.metadata"))
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "version: 0" || !strings.HasPrefix(lines[1], "topic_id: ") {
		return "", fmt.Errorf("partition.metadata is %q, want \"version: 0\\ntopic_id: <id>\\n\"", data)
	}
	return strings.TrimPrefix(lines[1], "topic_id: "), nil
}

// topicDirs lists the partitions of topic that broker id has a directory
// for (named exactly <topic>-<partition>; Kafka's "-delete" directories
// waiting for removal do not count).
func (r *tiRun) topicDirs(id int32) ([]int32, error) {
	ents, err := os.ReadDir(r.c.broker(id).DataDir())
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(r.topic) + `-([0-9]+)$`)
	var out []int32
	for _, e := range ents {
		if m := re.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			p, _ := strconv.Atoi(m[1])
			out = append(out, int32(p))
		}
	}
	slices.Sort(out)
	return out, nil
}

// dirProblems lists, for every broker, partition directories of the
// topic it should not have (it hosts no replica of that partition of the
// new incarnation), directories it lacks, and partition.metadata files
// that do not name the new id.
func (r *tiRun) dirProblems() []string {
	var out []string
	for i := range r.c.brokers {
		id := int32(i + 1)
		have, err := r.topicDirs(id)
		if err != nil {
			out = append(out, fmt.Sprintf("broker %d: %v", id, err))
			continue
		}
		for p, replicas := range r.newAssign {
			if slices.Contains(replicas, id) && !slices.Contains(have, int32(p)) {
				out = append(out, fmt.Sprintf("broker %d is a replica of %s-%d but has no directory %s-%d", id, r.topic, p, r.topic, p))
			}
		}
		for _, p := range have {
			dir := r.c.broker(id).PartitionDir(r.topic, p)
			got, err := readPartitionTopicIDFile(dir)
			idNote := got
			if err != nil {
				idNote = err.Error()
			}
			if int(p) >= len(r.newAssign) || !slices.Contains(r.newAssign[p], id) {
				what := "a replica of the new incarnation"
				if got == r.oldID {
					what = "the deleted incarnation"
				}
				out = append(out, fmt.Sprintf("broker %d keeps directory %s-%d (partition.metadata: %s, %s) but hosts no replica of it in the new incarnation %s (assignment %v)",
					id, r.topic, p, idNote, what, r.newID, r.newAssign))
				continue
			}
			switch {
			case err != nil:
				out = append(out, fmt.Sprintf("broker %d, %s-%d: %v", id, r.topic, p, err))
			case got == r.oldID:
				out = append(out, fmt.Sprintf("broker %d, %s-%d/partition.metadata names the deleted incarnation's id %s, want the new %s", id, r.topic, p, got, r.newID))
			case got != r.newID:
				out = append(out, fmt.Sprintf("broker %d, %s-%d/partition.metadata names id %s, want the new %s (old %s)", id, r.topic, p, got, r.newID, r.oldID))
			}
		}
	}
	return out
}

// checkDirs: every partition.metadata of the topic names the new id, and
// no broker keeps a directory of a partition it does not host (allowing a
// bounded time for an asynchronous removal).
func (r *tiRun) checkDirs() {
	r.t.Helper()
	var problems []string
	_ = pollUntil(10*time.Second, 100*time.Millisecond, func() error {
		problems = r.dirProblems()
		if len(problems) > 0 {
			return errors.New(problems[0])
		}
		return nil
	})
	for _, p := range problems {
		r.t.Errorf("%s: %s", r.topic, p)
	}
}

// checkConsumer: the consumer that read the new topic from its start since
// its re-creation saw every acknowledged record and never an old one.
func (r *tiRun) checkConsumer() {
	r.t.Helper()
	c := r.consumer
	missing := func() []string {
		seen := map[string]bool{}
		for _, rec := range c.records() {
			seen[rec.Value] = true
		}
		var out []string
		for v := range r.gen2 {
			if !seen[v] {
				out = append(out, v)
			}
		}
		sort.Strings(out)
		return out
	}
	err := pollUntil(15*time.Second, 50*time.Millisecond, func() error {
		if m := missing(); len(m) > 0 {
			return fmt.Errorf("%d acknowledged records not read yet, e.g. %s", len(m), m[0])
		}
		return nil
	})
	c.stop()
	if err != nil {
		r.t.Errorf("%s: the consumer reading the new incarnation from its start: %v", r.topic, err)
	}
	var old []readRec
	for _, rec := range c.records() {
		if isOld(rec.Value) || !strings.HasPrefix(rec.Value, r.genPrefix(2)) {
			old = append(old, rec)
		}
	}
	if len(old) > 0 {
		var ex []string
		for _, rec := range old[:min(len(old), 5)] {
			ex = append(ex, fmt.Sprintf("p%d@%d %q", rec.Partition, rec.Offset, rec.Value))
		}
		r.t.Errorf("%s: the consumer of the new incarnation %s read %d records that are not its own (deleted incarnation %s), e.g. %s",
			r.topic, r.newID, len(old), r.oldID, strings.Join(ex, ", "))
	}
}
