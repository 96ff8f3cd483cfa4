package replica

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestNextLogDir(t *testing.T) {
	dirs := []string{"/a", "/b", "/c"}
	for _, tc := range []struct {
		name    string
		counts  map[string]int
		offline []string
		want    string
	}{
		{"all empty: the first configured", nil, nil, "/a"},
		{"the fewest logs", map[string]int{"/a": 3, "/b": 1, "/c": 2}, nil, "/b"},
		{"a dir with none counts as zero", map[string]int{"/a": 1, "/b": 1}, nil, "/c"},
		{"tie: the first configured", map[string]int{"/a": 2, "/b": 1, "/c": 1}, nil, "/b"},
		{"offline dirs are skipped", map[string]int{"/a": 5, "/b": 0, "/c": 1}, []string{"/b"}, "/c"},
		{"every dir offline", nil, []string{"/a", "/b", "/c"}, ""},
		{"counts of unknown dirs are ignored", map[string]int{"/x": 0, "/a": 1, "/b": 1, "/c": 1}, nil, "/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usable := func(d string) bool { return !slices.Contains(tc.offline, d) }
			if got := nextLogDir(dirs, tc.counts, usable); got != tc.want {
				t.Errorf("nextLogDir = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResolveLogDirs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    []string
		wantErr string
	}{
		{"LogDirs in order", Config{LogDirs: []string{"/x/b", "/x/a/"}}, []string{"/x/b", "/x/a"}, ""},
		{"LogDir alone", Config{LogDir: "/x/only"}, []string{"/x/only"}, ""},
		{"relative made absolute", Config{LogDirs: []string{"data"}}, []string{filepath.Join(wd, "data")}, ""},
		{"duplicate refused", Config{LogDirs: []string{"/x/a", "/x/./a"}}, nil, "duplicate log directory"},
		{"empty name refused", Config{LogDirs: []string{"/x/a", " "}}, nil, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveLogDirs(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("resolveLogDirs = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseFutureDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		want TopicPartition
		ok   bool
	}{
		{"t-0.0123456789abcdef0123456789abcdef-future", TopicPartition{"t", 0}, true},
		{"my.topic-12.abc-future", TopicPartition{"my.topic", 12}, true},
		{"t-0", TopicPartition{}, false},
		{"t-0.abc-delete", TopicPartition{}, false},
		{"t-x.abc-future", TopicPartition{}, false},
		{".abc-future", TopicPartition{}, false},
		{"t-0.-future", TopicPartition{}, false},
	} {
		got, ok := parseFutureDir(tc.name)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseFutureDir(%q) = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// The name Kafka would refuse to create (KAFKA-4893).
	long := TopicPartition{Topic: strings.Repeat("x", 249), Partition: 0}
	if n := futureDirNameLength(long); n <= maxLogDirNameLength {
		t.Errorf("future dir name of a 249-character topic is %d long, want > %d", n, maxLogDirNameLength)
	}
	if n := futureDirNameLength(TopicPartition{"t", 0}); n != len("t-0.")+32+len("-future") {
		t.Errorf("future dir name length %d", n)
	}
}

func TestDecideFuture(t *testing.T) {
	for _, tc := range []struct {
		hasCurrent bool
		futures    int
		want       futureAction
	}{
		{true, 1, futureResume},
		{true, 2, futureResume},
		{false, 1, futurePromote},
		{false, 2, futureConflict},
	} {
		if got := decideFuture(tc.hasCurrent, tc.futures); got != tc.want {
			t.Errorf("decideFuture(%v, %d) = %v, want %v", tc.hasCurrent, tc.futures, got, tc.want)
		}
	}
}

func TestParseMetaProperties(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		want    metaProperties
		wantErr bool
	}{
		{"Kafka's ZooKeeper file", "#\n#Tue Mar 05 10:00:00 UTC 2024\ncluster.id=abcDEF-123\nversion=0\nbroker.id=3\n",
			metaProperties{Version: 0, BrokerID: 3, ClusterID: "abcDEF-123"}, false},
		{"colon and blank separators, comments", "! comment\n  version : 0\nbroker.id 7\n\ncluster.id=x\n",
			metaProperties{Version: 0, BrokerID: 7, ClusterID: "x"}, false},
		{"no version is version 0", "broker.id=1\n", metaProperties{BrokerID: 1}, false},
		{"KRaft node.id", "version=1\nnode.id=4\ncluster.id=c\n", metaProperties{Version: 1, BrokerID: 4, ClusterID: "c"}, false},
		{"empty file", "", metaProperties{BrokerID: -1}, false},
		{"bad broker id", "broker.id=abc\n", metaProperties{}, true},
		{"negative broker id", "broker.id=-1\n", metaProperties{}, true},
		{"bad version", "version=x\n", metaProperties{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMetaProperties(tc.data)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// What is written reads back.
	got, err := parseMetaProperties(string(formatMetaProperties(9, "cid", time.Now())))
	if err != nil || got != (metaProperties{Version: 0, BrokerID: 9, ClusterID: "cid"}) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

func TestCheckMetaProperties(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mp        metaProperties
		brokerID  int32
		clusterID string
		wantErr   []string
	}{
		{"same broker", metaProperties{BrokerID: 1, ClusterID: "c"}, 1, "c", nil},
		{"no broker id stored", metaProperties{BrokerID: -1}, 1, "c", nil},
		{"cluster id not known yet", metaProperties{BrokerID: 1, ClusterID: "c"}, 1, "", nil},
		{"another broker's dir", metaProperties{BrokerID: 2, ClusterID: "c"}, 1, "c", []string{"broker.id 1", "broker.id 2", "/d/meta.properties"}},
		{"another cluster's dir", metaProperties{BrokerID: 1, ClusterID: "other"}, 1, "c", []string{"c", "other", "wrong cluster"}},
		{"a KRaft file", metaProperties{Version: 1, BrokerID: 1}, 1, "c", []string{"version 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMetaProperties("/d/meta.properties", tc.mp, tc.brokerID, tc.clusterID)
			if (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr != nil)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// ---- the Manager over several dirs ----

func twoDirs(t *testing.T) []string {
	root := t.TempDir()
	return []string{filepath.Join(root, "d1"), filepath.Join(root, "d2")}
}

func openDirs(t *testing.T, dirs []string, mutate ...func(*Config)) *Manager {
	t.Helper()
	cfg := Config{LogDirs: dirs, BrokerID: 1}
	for _, f := range mutate {
		f(&cfg)
	}
	m, err := Open(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func lead(t *testing.T, m *Manager, tp TopicPartition) *Partition {
	t.Helper()
	p, err := m.MakeLeader(tp, [16]byte{7}, 0, 0, []int32{1}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func logDirOf(p *Partition) string { return filepath.Dir(p.log().Dir()) }

// readValues reads every record value of p from its log start.
func readValues(t *testing.T, p *Partition) []string {
	t.Helper()
	var out []string
	off := p.State().LogStartOffset
	for off < p.State().HighWatermark {
		rr, err := p.Read(off, 1<<20, true, -1, false)
		if err != nil {
			t.Fatal(err)
		}
		data, err := rr.Records.AppendTo(nil)
		rr.Records.Close()
		if err != nil {
			t.Fatal(err)
		}
		batches, hs, err := recordbatch.Split(data)
		if err != nil || len(batches) == 0 {
			t.Fatalf("read at %d: %d batches, %v", off, len(batches), err)
		}
		for i, b := range batches {
			if !hs[i].IsControl() {
				err := recordbatch.ForEachRecord(b, func(r kmsg.Record) error {
					out = append(out, string(r.Value))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			off = hs[i].NextOffset()
		}
	}
	return out
}

func appendValues(t *testing.T, p *Partition, values ...string) {
	t.Helper()
	recs := make([]recordbatch.Record, len(values))
	for i, v := range values {
		recs[i].Value = []byte(v)
	}
	b := recordbatch.Build(recordbatch.BatchSpec{ProducerID: -1, LeaderEpoch: -1}, recs)
	h, err := recordbatch.Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsLeader([][]byte{b}, []recordbatch.Header{h}, -1, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// waitMoved waits (bounded) until no move of tp is in progress.
func waitMoved(t *testing.T, m *Manager, tp TopicPartition) {
	t.Helper()
	m.mu.RLock()
	mv := m.moves[tp]
	m.mu.RUnlock()
	if mv == nil {
		return
	}
	select {
	case <-mv.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("move of %s not done after 20s", tp)
	}
}

func TestPartitionsSpreadOverLogDirsAndStayAfterRestart(t *testing.T) {
	dirs := twoDirs(t)
	m := openDirs(t, dirs)
	homes := map[TopicPartition]string{}
	for i := range int32(6) {
		tp := TopicPartition{"t", i}
		p := lead(t, m, tp)
		appendValues(t, p, "a", "b")
		homes[tp] = logDirOf(p)
	}
	per := map[string]int{}
	for _, d := range homes {
		per[d]++
	}
	if per[dirs[0]] != 3 || per[dirs[1]] != 3 {
		t.Fatalf("6 new partitions over 2 dirs: %v, want 3 each", per)
	}
	if err := m.WriteMetaProperties("cluster-1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		for _, f := range []string{cleanShutdownFile, hwCheckpointFile, metaPropertiesFile} {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				t.Errorf("%s has no %s: %v", d, f, err)
			}
		}
		hw, err := readHWCheckpoint(d)
		if err != nil || len(hw) != 3 {
			t.Errorf("HW checkpoint of %s: %v %v, want its 3 partitions", d, hw, err)
		}
		for tp := range hw {
			if homes[tp] != d {
				t.Errorf("HW of %s checkpointed in %s, its log is in %s", tp, d, homes[tp])
			}
		}
	}

	// A restart opens every partition where it is, and a new one goes
	// to the dir with fewer logs.
	m = openDirs(t, dirs)
	defer m.Close()
	for tp, home := range homes {
		p := lead(t, m, tp)
		if logDirOf(p) != home {
			t.Errorf("%s reopened in %s, was in %s", tp, logDirOf(p), home)
		}
		if got := readValues(t, p); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s after restart: %q", tp, got)
		}
	}
	q := lead(t, m, TopicPartition{"u", 0})
	r := lead(t, m, TopicPartition{"u", 1})
	if logDirOf(q) == logDirOf(r) {
		t.Errorf("two new partitions on balanced dirs both went to %s", logDirOf(q))
	}
	infos := m.DescribeLogDirs()
	if len(infos) != 2 || infos[0].Dir != dirs[0] || infos[1].Dir != dirs[1] {
		t.Fatalf("DescribeLogDirs dirs: %+v", infos)
	}
	for _, info := range infos {
		if len(info.Logs) != 4 || info.TotalBytes <= 0 || info.UsableBytes <= 0 || info.Err != nil {
			t.Errorf("%s: %d logs, total %d usable %d err %v", info.Dir, len(info.Logs), info.TotalBytes, info.UsableBytes, info.Err)
		}
		for _, l := range info.Logs {
			if l.Topic == "t" && (l.Size <= 0 || l.OffsetLag != 0 || l.IsFuture) {
				t.Errorf("%s in %s: %+v", l.TopicPartition, info.Dir, l)
			}
		}
	}
}

func TestLogDirsOfAnotherBroker(t *testing.T) {
	dirs := twoDirs(t)
	m := openDirs(t, dirs, func(c *Config) { c.BrokerID = 5 })
	lead(t, m, TopicPartition{"t", 0})
	if err := m.WriteMetaProperties("c1"); err != nil {
		t.Fatal(err)
	}
	m.Close()

	// A ZooKeeper broker with another id refuses the dirs, naming both
	// ids, and leaves the replica alone.
	_, err := Open(Config{LogDirs: dirs, BrokerID: 1, EnforceBrokerID: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "broker.id 1") || !strings.Contains(err.Error(), "broker.id 5") {
		t.Fatalf("Open as broker 1 of broker 5's dirs: %v", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, cleanShutdownFile)); err != nil {
			t.Errorf("the refused start changed %s: %v", d, err)
		}
	}
	// The right id, but another cluster.
	m = openDirs(t, dirs, func(c *Config) { c.BrokerID, c.EnforceBrokerID = 5, true })
	if err := m.WriteMetaProperties("c2"); err == nil || !strings.Contains(err.Error(), "c2") || !strings.Contains(err.Error(), "c1") {
		t.Fatalf("WriteMetaProperties of another cluster: %v", err)
	}
	m.Close()

	// The embedded single node takes the replicas over and rewrites the
	// files with its id.
	m = openDirs(t, dirs, func(c *Config) { c.BrokerID = 1 })
	defer m.Close()
	if err := m.WriteMetaProperties("c3"); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		mp, ok, err := readMetaProperties(d)
		if err != nil || !ok || mp.BrokerID != 1 || mp.ClusterID != "c3" {
			t.Errorf("%s: %+v %v %v", d, mp, ok, err)
		}
	}
	if reps := m.Replicas(); len(reps) != 1 {
		t.Errorf("replicas: %+v", reps)
	}
}

func TestAlterLogDirValidation(t *testing.T) {
	dirs := twoDirs(t)
	m := openDirs(t, dirs)
	defer m.Close()
	tp := TopicPartition{"t", 0}
	p := lead(t, m, tp)
	home := logDirOf(p)
	if err := m.AlterLogDir(tp, "/not/configured"); !errors.Is(err, kerr.LogDirNotFound) {
		t.Errorf("not configured: %v", err)
	}
	if err := m.AlterLogDir(tp, dirs[0]+"/"); !errors.Is(err, kerr.LogDirNotFound) {
		t.Errorf("not the exact path: %v", err)
	}
	if err := m.AlterLogDir(tp, home); err != nil {
		t.Errorf("same dir: %v", err)
	}
	if len(m.moves) != 0 || logDirOf(p) != home {
		t.Errorf("a no-op move started something: %v, %s", m.moves, logDirOf(p))
	}
	long := TopicPartition{strings.Repeat("x", 249), 0}
	if err := m.AlterLogDir(long, home); !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("topic too long: %v", err)
	}
	// A replica not here yet: remembered, and created there.
	other := dirs[0]
	if home == dirs[0] {
		other = dirs[1]
	}
	later := TopicPartition{"later", 0}
	if err := m.AlterLogDir(later, home); !errors.Is(err, ErrReplicaNotHosted) {
		t.Errorf("no replica: %v", err)
	}
	if q := lead(t, m, later); logDirOf(q) != home {
		t.Errorf("preferred dir %s, created in %s (fewest logs: %s)", home, logDirOf(q), other)
	}
}

// A replica with records, a transaction aborted and one committed, moved
// while appends go on: every record, the aborted transaction and the
// leader epochs are there after the move and after a restart.
func TestMoveReplicaBetweenLogDirs(t *testing.T) {
	dirs := twoDirs(t)
	m := openDirs(t, dirs)
	tp := TopicPartition{"t", 0}
	cfg := testConfig()
	cfg.Log.SegmentBytes = 2048 // several segments
	p, err := m.MakeLeader(tp, [16]byte{7}, 3, 0, []int32{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := logDirOf(p)
	dest := dirs[0]
	if src == dirs[0] {
		dest = dirs[1]
	}
	now := time.Now()
	var want []string
	for i := range 100 {
		v := strings.Repeat("x", 50) + string(rune('a'+i%26))
		appendValues(t, p, v)
		want = append(want, v)
	}
	b, h := txnBatch(9, 0, 0, 2)
	if _, err := p.AppendAsLeader(b, h, -1, now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendTxnMarker(9, 0, false, 0, false, now); err != nil {
		t.Fatal(err)
	}
	want = append(want, "v", "v") // read_uncommitted sees the aborted records
	epochsBefore := p.log().EpochEntries()
	_, rrBefore := readCommitted(t, p)

	if err := m.AlterLogDir(tp, dest); err != nil {
		t.Fatal(err)
	}
	// Appends go on during the move.
	for i := range 20 {
		v := "during-" + string(rune('a'+i))
		appendValues(t, p, v)
		want = append(want, v)
	}
	waitMoved(t, m, tp)
	if logDirOf(p) != dest {
		t.Fatalf("after the move the log is in %s, want %s", logDirOf(p), dest)
	}
	if _, err := os.Stat(filepath.Join(src, tp.String())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old log still there: %v", err)
	}
	appendValues(t, p, "after")
	want = append(want, "after")
	if got := readValues(t, p); !slices.Equal(got, want) {
		t.Fatalf("after the move read %d values, want %d:\n%q", len(got), len(want), got)
	}
	if _, rr := readCommitted(t, p); !slices.Equal(rr.AbortedTxns, rrBefore.AbortedTxns) || len(rr.AbortedTxns) != 1 {
		t.Errorf("aborted transactions after the move %+v, before %+v", rr.AbortedTxns, rrBefore.AbortedTxns)
	}
	if got := p.log().EpochEntries(); !slices.Equal(got, epochsBefore) {
		t.Errorf("leader epochs after the move %+v, before %+v", got, epochsBefore)
	}
	for _, info := range m.DescribeLogDirs() {
		for _, l := range info.Logs {
			if l.IsFuture || (l.TopicPartition == tp) != (info.Dir == dest) {
				t.Errorf("DescribeLogDirs after the move: %+v in %s", l, info.Dir)
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openDirs(t, dirs)
	defer m.Close()
	p, err = m.MakeLeader(tp, [16]byte{7}, 4, 0, []int32{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if logDirOf(p) != dest {
		t.Fatalf("after restart in %s, want %s", logDirOf(p), dest)
	}
	if got := readValues(t, p); !slices.Equal(got, want) {
		t.Fatalf("after restart read %d values, want %d", len(got), len(want))
	}
}

// The swap's crash points: a future log next to its current one (the move
// had not finished) is dropped and the move done again; a future log whose
// current one was already renamed for deletion is the partition's log.
func TestMoveCrashPoints(t *testing.T) {
	setup := func(t *testing.T) (dirs []string, src, dest string, want []string) {
		dirs = twoDirs(t)
		m := openDirs(t, dirs)
		p := lead(t, m, TopicPartition{"t", 0})
		for i := range 30 {
			v := "r" + string(rune('a'+i%26))
			appendValues(t, p, v)
			want = append(want, v)
		}
		src = logDirOf(p)
		dest = dirs[0]
		if src == dirs[0] {
			dest = dirs[1]
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		return dirs, src, dest, want
	}
	copyDir := func(t *testing.T, from, to string) {
		if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
	}
	tp := TopicPartition{"t", 0}
	future := futureDirName(tp, strings.Repeat("ab", 16))

	t.Run("future next to current: moved again", func(t *testing.T) {
		dirs, src, dest, want := setup(t)
		// A partial future log: its first segment only, truncated.
		if err := os.MkdirAll(filepath.Join(dest, future), 0o755); err != nil {
			t.Fatal(err)
		}
		m := openDirs(t, dirs)
		defer m.Close()
		if _, err := os.Stat(filepath.Join(dest, future)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("unfinished future log kept: %v", err)
		}
		p := lead(t, m, tp)
		waitMoved(t, m, tp)
		if logDirOf(p) != dest {
			t.Errorf("the interrupted move was not done again: log in %s, want %s", logDirOf(p), dest)
		}
		if _, err := os.Stat(filepath.Join(src, tp.String())); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("old log still there: %v", err)
		}
		if got := readValues(t, p); !slices.Equal(got, want) {
			t.Errorf("read %q, want %q", got, want)
		}
	})
	t.Run("current renamed for deletion: future promoted", func(t *testing.T) {
		dirs, src, dest, want := setup(t)
		copyDir(t, filepath.Join(src, tp.String()), filepath.Join(dest, future))
		if err := os.Rename(filepath.Join(src, tp.String()), filepath.Join(src, tp.String()+".0011-delete")); err != nil {
			t.Fatal(err)
		}
		m := openDirs(t, dirs)
		defer m.Close()
		p := lead(t, m, tp)
		if logDirOf(p) != dest {
			t.Errorf("log in %s, want %s", logDirOf(p), dest)
		}
		if got := readValues(t, p); !slices.Equal(got, want) {
			t.Errorf("read %q, want %q", got, want)
		}
		if ents, _ := os.ReadDir(src); len(ents) > 0 {
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), "-delete") {
					t.Errorf("deleted log left in %s: %s", src, e.Name())
				}
			}
		}
	})
	t.Run("the same partition current in both dirs: refused", func(t *testing.T) {
		dirs, src, dest, _ := setup(t)
		copyDir(t, filepath.Join(src, tp.String()), filepath.Join(dest, tp.String()))
		_, err := Open(Config{LogDirs: dirs}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil || !strings.Contains(err.Error(), "duplicate log directories") {
			t.Fatalf("Open with t-0 in both dirs: %v", err)
		}
	})
}
