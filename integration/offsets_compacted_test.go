package integration

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kbroker/kbroker/internal/kafkahash"
)

// __consumer_offsets as an ordinary compacted topic (issue 11): the log
// cleaner, not the group coordinator, keeps it bounded, and a data
// directory written by the release before (whose coordinator rewrote its
// state in snapshots and moved the log start) loads and is compacted.

// offsetsFixture is a data directory written by kbroker at d0cd872, the
// release before __consumer_offsets was left to the cleaner, by
// TestGenerateOffsetsFixture (see there for what it holds and how it was
// made).
const offsetsFixture = "testdata/offsets-d0cd872.tar.gz"

// offsetsPartition is the __consumer_offsets partition of group (50
// partitions, Kafka's hash).
func offsetsPartition(group string) int32 { return kafkahash.PartitionFor(group, 50) }

// logShape reads partition p of topic from its log start to its end: the
// log start and the number of records. The log must end with a record
// (not a transaction marker, which a consumer is not shown).
func logShape(t *testing.T, b *Broker, topic string, p int32) (start int64, records int) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	adm := b.Admin(t)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	s, ok1 := starts.Lookup(topic, p)
	e, ok2 := ends.Lookup(topic, p)
	if !ok1 || !ok2 || s.Err != nil || e.Err != nil {
		t.Fatalf("offsets of %s-%d: %v %v", topic, p, s.Err, e.Err)
	}
	if s.Offset >= e.Offset {
		return s.Offset, 0
	}
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {p: kgo.NewOffset().At(s.Offset)}}))
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s-%d to %d: %v (%d records so far)", topic, p, e.Offset, err, records)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("reading %s-%d: %v", topic, p, fe.Err)
		}
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			records++
			last = r.Offset
		})
		if last >= e.Offset-1 {
			return s.Offset, records
		}
	}
}

// commitRounds commits offsets of topic's partitions 0..2 for group,
// rounds times: round r commits r, 2r and 3r.
func commitRounds(t *testing.T, adm *kadm.Client, group, topic string, from, to int64) {
	t.Helper()
	ctx := testContext(t, 2*time.Minute)
	for r := from; r < to; r++ {
		offsets := make(kadm.Offsets)
		for p := int32(0); p < 3; p++ {
			offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: r * int64(p+1), LeaderEpoch: -1})
		}
		resp, err := adm.CommitOffsets(ctx, group, offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit round %d of %s: %v", r, group, err)
		}
	}
}

// wantCommitted checks group's committed offsets of topic: want maps
// partition to offset, -1 for none.
func wantCommitted(t *testing.T, adm *kadm.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	resp, err := adm.FetchOffsets(testContext(t, 30*time.Second), group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	for p, w := range want {
		got := int64(-1)
		if o, ok := resp.Lookup(topic, p); ok {
			got = o.At
		}
		if got != w {
			t.Errorf("group %s %s-%d: committed %d, want %d", group, topic, p, got, w)
		}
	}
}

// waitCompacted waits until the cleaner has left at most limit records in
// partition p of topic, whose log start must stay at start (the
// coordinators moved it when they rewrote their state; now only the
// cleaner shrinks the log).
func waitCompacted(t *testing.T, b *Broker, topic string, p int32, start int64, limit int) int {
	t.Helper()
	var records int
	checkFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		var s int64
		s, records = logShape(t, b, topic, p)
		if s != start {
			t.Fatalf("%s-%d: log start moved %d -> %d", topic, p, start, s)
		}
		if records > limit {
			return fmt.Errorf("%s-%d holds %d records, want <= %d", topic, p, records, limit)
		}
		return nil
	})
	return records
}

// cleanerOverrides make the cleaner look for work often and roll
// __consumer_offsets' segments small, so that commits become cleanable.
var cleanerOverrides = []string{"log.cleaner.backoff.ms=100", "offsets.topic.segment.bytes=16384"}

// Offsets committed 3,000 times by one group, the cleaner compacts
// __consumer_offsets (its log start stays 0: the coordinator no longer
// rewrites its state), and the offsets survive a kill -9 and a restart.
func TestOffsetsTopicCompactedByCleaner(t *testing.T) {
	b := StartBroker(t, cleanerOverrides...)
	adm := b.Admin(t)
	ctx := testContext(t, 30*time.Second)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	const group = "compacted-offsets"
	const rounds = 3000
	commitRounds(t, adm, group, "orders", 0, rounds)
	want := map[int32]int64{0: rounds - 1, 1: 2 * (rounds - 1), 2: 3 * (rounds - 1)}
	wantCommitted(t, adm, group, "orders", want)

	p := offsetsPartition(group)
	records := waitCompacted(t, b, "__consumer_offsets", p, 0, rounds/3) // 9,000 written
	t.Logf("__consumer_offsets-%d: %d of %d records left after cleaning", p, records, 3*rounds)

	b.Kill()
	b.Restart()
	adm = b.Admin(t)
	wantCommitted(t, adm, group, "orders", want)
	if s, _ := logShape(t, b, "__consumer_offsets", p); s != 0 {
		t.Fatalf("log start %d after restart", s)
	}
}

// __transaction_state too: 300 transactions of one transactional id,
// committed and aborted in turn, are compacted to a few records with the
// log start still 0; after a kill -9 the coordinator loads the id from the
// cleaned partition: a new producer with the id fences the old epoch and
// commits, and read_committed readers see exactly the committed records.
func TestTxnStateCompactedByCleaner(t *testing.T) {
	b := StartBroker(t, "log.cleaner.backoff.ms=100", "transaction.state.log.segment.bytes=16384")
	if _, err := b.Admin(t).CreateTopic(testContext(t, 30*time.Second), 1, 1, nil, "txn-compacted"); err != nil {
		t.Fatal(err)
	}
	const id = "compacted-txn-id"
	seeds := []string{b.Addr()}
	committed := txnProduce(t, seeds, id, "txn-compacted", 300, 1)
	p := kafkahash.PartitionFor(id, 50)
	// Each transaction writes at least three records (Ongoing,
	// PrepareCommit/PrepareAbort, CompleteCommit/CompleteAbort): 900 or
	// more in all, of one key. What stays is the active segment's.
	records := waitCompacted(t, b, "__transaction_state", p, 0, 150)
	t.Logf("__transaction_state-%d: %d records left after cleaning", p, records)

	before := describeTxn(t, b, id)
	b.Kill()
	b.Restart()
	if after := describeTxn(t, b, id); after != before {
		t.Fatalf("transactional id loaded from the cleaned log: %s, before the restart %s", after, before)
	}
	committed = append(committed, txnProduce(t, seeds, id, "txn-compacted", 1, 1)...)
	got := consumeValues(t, seeds, "txn-compacted", kgo.ReadCommitted(), len(committed))
	if strings.Join(got, ",") != strings.Join(committed, ",") {
		t.Fatalf("read_committed after the restart: %d records, want %d (first difference %s)", len(got), len(committed), firstDiff(got, committed))
	}
	if s, _ := logShape(t, b, "__transaction_state", p); s != 0 {
		t.Fatalf("__transaction_state-%d: log start %d after the restart", p, s)
	}
}

// describeTxn is DescribeTransactions' producer id, epoch and state of id.
func describeTxn(t *testing.T, b *Broker, id string) string {
	t.Helper()
	var desc string
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		resp, err := b.Admin(t).DescribeTransactions(testContext(t, 10*time.Second), id)
		if err != nil {
			return err
		}
		d, ok := resp[id]
		if !ok || d.Err != nil {
			return fmt.Errorf("describe %s: %v", id, d.Err)
		}
		desc = fmt.Sprintf("producer %d epoch %d %s", d.ProducerID, d.ProducerEpoch, d.State)
		return nil
	})
	return desc
}

// A data directory written by the previous release (d0cd872), whose
// coordinator had rewritten __consumer_offsets in snapshots, loads: every
// group's offsets as they were, the deleted group and offset still
// deleted; new commits are compacted by the cleaner, and the state
// survives a kill -9 and a clean restart.
func TestOffsetsDataDirOfEarlierRelease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := untarGz(offsetsFixture, dir); err != nil {
		t.Fatal(err)
	}
	b := StartBrokerIn(t, dir, "log.cleaner.backoff.ms=100")
	adm := b.Admin(t)
	check := func(what string) {
		t.Helper()
		wantCommitted(t, adm, "live", "orders", map[int32]int64{0: 1999, 1: 3998, 2: 5997})
		wantCommitted(t, adm, "trimmed", "orders", map[int32]int64{0: 10, 1: -1, 2: 12})
		wantCommitted(t, adm, "doomed", "orders", map[int32]int64{0: -1, 1: -1, 2: -1})
		groups, err := adm.ListGroups(testContext(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := groups["doomed"]; ok {
			t.Errorf("%s: the deleted group is listed: %v", what, groups.Groups())
		}
		if t.Failed() {
			t.Fatalf("%s: state differs from the fixture's", what)
		}
	}
	check("loaded")

	p := offsetsPartition("live")
	start, before := logShape(t, b, "__consumer_offsets", p)
	if start == 0 {
		t.Fatalf("the fixture's __consumer_offsets-%d starts at 0: the old coordinator's snapshots are not in it", p)
	}
	// Small segments from now on, and enough commits to roll them.
	ctx := testContext(t, 30*time.Second)
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: kadm.StringPtr("16384")}}, "__consumer_offsets"); err != nil {
		t.Fatal(err)
	}
	commitRounds(t, adm, "live", "orders", 2000, 4000)
	records := waitCompacted(t, b, "__consumer_offsets", p, start, before+1000) // 6,000 written
	t.Logf("__consumer_offsets-%d: log start %d, %d records loaded, %d after 6,000 more and cleaning", p, start, before, records)
	final := map[int32]int64{0: 3999, 1: 7998, 2: 11997}
	wantCommitted(t, adm, "live", "orders", final)

	b.Kill()
	b.Restart()
	adm = b.Admin(t)
	wantCommitted(t, adm, "live", "orders", final)
	wantCommitted(t, adm, "trimmed", "orders", map[int32]int64{0: 10, 1: -1, 2: 12})
	b.Stop()
	b.Restart()
	adm = b.Admin(t)
	wantCommitted(t, adm, "live", "orders", final)
	wantCommitted(t, adm, "doomed", "orders", map[int32]int64{0: -1})
}

// TestGenerateOffsetsFixture writes offsetsFixture; it runs only with
// KBROKER_OFFSETS_FIXTURE=path/to/new.tar.gz, against the broker binary
// of KBROKER_BIN. The committed fixture was made by kbroker at d0cd872
// with one change, the coordinator's snapshot threshold lowered from
// 64 MiB to 64 KiB (coordinator.New's default SnapshotBytes), so that its
// snapshots (state rewritten, log start moved) fit in a small file:
//
//	git worktree add /tmp/old d0cd872 && cd /tmp/old &&
//	sed -i 's/cfg.SnapshotBytes = 64 << 20/cfg.SnapshotBytes = 64 << 10/' coordinator/coordinator.go &&
//	go build -o /tmp/kbroker-d0cd872 ./cmd/kbroker && cd - &&
//	KBROKER_BIN=/tmp/kbroker-d0cd872 KBROKER_OFFSETS_FIXTURE=$PWD/integration/testdata/offsets-d0cd872.tar.gz \
//	  go test ./integration -run TestGenerateOffsetsFixture -count=1
//
// It holds topic "orders" (3 partitions); group "live" committed 2,000
// times (round r: r, 2r, 3r); group "trimmed" with offset 1 deleted; group
// "doomed" deleted.
func TestGenerateOffsetsFixture(t *testing.T) {
	out := os.Getenv("KBROKER_OFFSETS_FIXTURE")
	if out == "" {
		t.Skip("set KBROKER_OFFSETS_FIXTURE to write the fixture")
	}
	dir := t.TempDir()
	b := StartBrokerIn(t, dir)
	adm := b.Admin(t)
	ctx := testContext(t, 30*time.Second)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	commitRounds(t, adm, "live", "orders", 0, 2000)
	commitRounds(t, adm, "trimmed", "orders", 10, 11) // 10, 20, 30
	trimmed := make(kadm.Offsets)
	trimmed.Add(kadm.Offset{Topic: "orders", Partition: 2, At: 12, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "trimmed", trimmed); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteOffsets(ctx, "trimmed", kadm.TopicsSet{"orders": {1: {}}}); err != nil {
		t.Fatal(err)
	}
	commitRounds(t, adm, "doomed", "orders", 5, 6)
	if _, err := adm.DeleteGroups(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	if s, _ := logShape(t, b, "__consumer_offsets", offsetsPartition("live")); s == 0 {
		t.Fatal("no snapshot moved the log start: is the broker the patched d0cd872 build?")
	}
	b.Stop()
	if err := tarGz(dir, out); err != nil {
		t.Fatal(err)
	}
}

// tarGz writes the regular files under dir to a gzipped tar at out, with
// paths relative to dir.
func tarGz(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = rel
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	return errors.Join(err, tw.Close(), zw.Close(), f.Close())
}

// untarGz extracts the gzipped tar at path into dir.
func untarGz(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if strings.Contains(h.Name, "..") || filepath.IsAbs(h.Name) {
			return fmt.Errorf("%s: unsafe path %q", path, h.Name)
		}
		dst := filepath.Join(dir, h.Name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
		if err != nil {
			return err
		}
		_, err = io.Copy(out, tr)
		if err := errors.Join(err, out.Close()); err != nil {
			return err
		}
	}
}
