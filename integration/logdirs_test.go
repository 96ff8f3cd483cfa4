package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// JBOD: a broker with two log dirs spreads partitions over both, reports
// them with DescribeLogDirs (franz-go kadm, sarama), refuses a move to a
// dir it does not have, moves a replica between its dirs under load, and
// every acknowledged record stays readable, also across restarts.
func TestLogDirsJBOD(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "disk1"), filepath.Join(root, "disk2")}
	const brokerID = 3
	b := StartBroker(t, "log.dirs="+strings.Join(dirs, ","), fmt.Sprintf("broker.id=%d", brokerID))
	ctx := testContext(t, 3*time.Minute)
	adm := b.Admin(t)
	const topic, partitions = "jbod", 8
	if resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}

	// Spread: every partition's log is in exactly one dir, and the dirs
	// hold 4 each (new partitions go to the dir with the fewest).
	homes := partitionHomes(t, dirs, topic, partitions)
	perDir := map[string]int{}
	for _, d := range homes {
		perDir[d]++
	}
	if perDir[dirs[0]] != partitions/2 || perDir[dirs[1]] != partitions/2 {
		t.Fatalf("%d partitions over two dirs: %v, want %d each", partitions, perDir, partitions/2)
	}
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "meta.properties"))
		if err != nil || !strings.Contains(string(data), fmt.Sprintf("broker.id=%d\n", brokerID)) ||
			!strings.Contains(string(data), "version=0\n") || !strings.Contains(string(data), "cluster.id=") {
			t.Errorf("%s/meta.properties: %q %v", d, data, err)
		}
	}

	// DescribeLogDirs before any record: both dirs, every partition in
	// its home with size 0.
	described := describeLogDirs(t, ctx, adm, brokerID)
	checkDescribed(t, described, dirs, homes, topic)
	for p := range int32(partitions) {
		if dp, _ := described.Lookup(homes[p], topic, p); dp.Size != 0 {
			t.Errorf("partition %d: size %d before any record", p, dp.Size)
		}
	}

	// Records in every partition: sizes grow to what is on disk.
	cl := b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	acked := newAckedSet()
	produceN(t, ctx, cl, topic, partitions, 0, 400, acked)
	described = describeLogDirs(t, ctx, adm, brokerID)
	checkDescribed(t, described, dirs, homes, topic)
	for p := range int32(partitions) {
		dp, _ := described.Lookup(homes[p], topic, p)
		onDisk := segmentBytes(t, filepath.Join(homes[p], fmt.Sprintf("%s-%d", topic, p)))
		if dp.Size <= 0 || dp.Size != onDisk || dp.OffsetLag != 0 || dp.IsFuture {
			t.Errorf("partition %d: size %d (on disk %d), lag %d, future %v", p, dp.Size, onDisk, dp.OffsetLag, dp.IsFuture)
		}
	}
	for _, d := range dirs {
		dd := described[d]
		if dd.TotalBytes <= 0 || dd.UsableBytes <= 0 || dd.UsableBytes > dd.TotalBytes {
			t.Errorf("%s: total %d usable %d", d, dd.TotalBytes, dd.UsableBytes)
		}
	}

	// sarama's admin sees the same.
	checkSaramaLogDirs(t, b.Addr(), brokerID, dirs, described)

	// Bad input: a dir that is not configured, a partition that does not
	// exist. Nothing moves.
	bad := kadm.AlterReplicaLogDirsReq{}
	bad.Add(filepath.Join(root, "disk3"), kadm.TopicsSet{topic: {0: {}}})
	bad.Add(dirs[0], kadm.TopicsSet{"no-such-topic": {0: {}}})
	res, err := adm.AlterBrokerReplicaLogDirs(ctx, brokerID, bad)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]error{}
	res.Each(func(r kadm.AlterReplicaLogDirsResponse) { got[fmt.Sprintf("%s-%d", r.Topic, r.Partition)] = r.Err })
	if !errors.Is(got[topic+"-0"], kerr.LogDirNotFound) || !errors.Is(got["no-such-topic-0"], kerr.UnknownTopicOrPartition) {
		t.Fatalf("bad moves answered %v, want LOG_DIR_NOT_FOUND and UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	if now := partitionHomes(t, dirs, topic, partitions); !mapsEqual(now, homes) {
		t.Fatalf("a refused move changed the dirs: %v, was %v", now, homes)
	}
	if _, err := os.Stat(filepath.Join(root, "disk3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused move created the dir: %v", err)
	}

	// A move between the two dirs while a producer writes to the
	// partition: the answer comes at once, the replica shows up as a
	// future replica or is already moved, and ends in the other dir.
	moved := int32(0)
	from := homes[moved]
	to := dirs[0]
	if from == dirs[0] {
		to = dirs[1]
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			v := fmt.Sprintf("during-%d", i)
			r := &kgo.Record{Topic: topic, Partition: moved, Value: []byte(v)}
			if err := cl.ProduceSync(loadCtx, r).FirstErr(); err == nil {
				acked.add(moved, v)
			} else if loadCtx.Err() == nil {
				t.Errorf("produce during the move: %v", err)
				return
			}
		}
	}()
	move := kadm.AlterReplicaLogDirsReq{}
	move.Add(to, kadm.TopicsSet{topic: {moved: {}}})
	res, err = adm.AlterBrokerReplicaLogDirs(ctx, brokerID, move)
	if err != nil {
		t.Fatal(err)
	}
	res.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err != nil {
			t.Fatalf("move %s-%d to %s: %v", r.Topic, r.Partition, r.Dir, r.Err)
		}
	})
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		d := describeLogDirs(t, ctx, adm, brokerID)
		if dp, ok := d.Lookup(to, topic, moved); !ok || dp.IsFuture {
			return fmt.Errorf("not yet current in %s: %+v", to, dp)
		}
		if dp, ok := d.Lookup(from, topic, moved); ok {
			return fmt.Errorf("still in %s: %+v", from, dp)
		}
		return nil
	})
	// Some more records after the swap, then stop the load.
	before := acked.count(moved)
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if acked.count(moved) < before+20 {
			return fmt.Errorf("%d records acknowledged since the swap", acked.count(moved)-before)
		}
		return nil
	})
	stopLoad()
	wg.Wait()
	homes[moved] = to
	if now := partitionHomes(t, dirs, topic, partitions); !mapsEqual(now, homes) {
		t.Fatalf("after the move the dirs are %v, want %v", now, homes)
	}
	t.Logf("moved %s-%d from %s to %s under load: %d records acknowledged in it", topic, moved, from, to, acked.count(moved))
	checkAllRecords(t, ctx, b, topic, partitions, acked, "after the move")
	checkDescribed(t, describeLogDirs(t, ctx, adm, brokerID), dirs, homes, topic)

	// A clean restart, then a kill -9 and restart: everything where it
	// was and readable.
	b.Restart()
	checkAllRecords(t, ctx, b, topic, partitions, acked, "after a clean restart")
	if now := partitionHomes(t, dirs, topic, partitions); !mapsEqual(now, homes) {
		t.Fatalf("after a restart the dirs are %v, want %v", now, homes)
	}
	b.Kill()
	b.Restart()
	checkAllRecords(t, ctx, b, topic, partitions, acked, "after kill -9 and restart")
	checkDescribed(t, describeLogDirs(t, ctx, b.Admin(t), brokerID), dirs, homes, topic)
}

// A ZooKeeper broker refuses log dirs another broker id wrote, naming both
// ids, and leaves that broker's replicas alone (Kafka's
// InconsistentBrokerIdException).
func TestLogDirsOfAnotherBrokerRefused(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 1})
	ctx := testContext(t, time.Minute)
	adm := c.admin()
	if resp, err := adm.CreateTopic(ctx, 2, 1, nil, "owned"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	if err := c.client().ProduceSync(ctx, &kgo.Record{Topic: "owned", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b1 := c.broker(1)
	dir := b1.DataDir()
	b1.Stop()
	logs := partitionDirsIn(t, dir, "owned")
	if len(logs) != 2 {
		t.Fatalf("broker 1 has %v", logs)
	}
	code, _, out := runFailingBroker(t, 20*time.Second, "broker.id=2", "zookeeper.connect="+c.connect(), "log.dirs="+dir)
	t.Logf("broker 2 on broker 1's dir exited with status %d", code)
	for _, want := range []string{"broker.id 2", "broker.id 1", filepath.Join(dir, "meta.properties")} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if after := partitionDirsIn(t, dir, "owned"); !slices.Equal(after, logs) {
		t.Errorf("broker 1's replicas changed: %v, were %v", after, logs)
	}
}

// A 3-broker ZooKeeper cluster, two log dirs per broker: DescribeAllLogDirs
// answers for every broker, each replica in one dir of its broker; the
// replicas of a partition are moved to their brokers' other dirs (the
// leader's and the followers') under acks=all load, and every acknowledged
// record is read back.
func TestLogDirsCluster(t *testing.T) {
	root := t.TempDir()
	dirsOf := func(id int) []string {
		return []string{filepath.Join(root, fmt.Sprintf("b%d-disk1", id)), filepath.Join(root, fmt.Sprintf("b%d-disk2", id))}
	}
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second, perBroker: func(id int) []string {
		return []string{"log.dirs=" + strings.Join(dirsOf(id), ",")}
	}})
	ctx := testContext(t, 3*time.Minute)
	adm := c.admin()
	const topic, partitions = "jbod-rf3", 4
	if resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	acked := newAckedSet()
	produceN(t, ctx, cl, topic, partitions, 0, 200, acked)

	homes := map[int32]map[int32]string{} // broker -> partition -> dir
	for id := int32(1); id <= 3; id++ {
		homes[id] = partitionHomes(t, dirsOf(int(id)), topic, partitions)
	}
	var all kadm.DescribedAllLogDirs
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		var err error
		if all, err = adm.DescribeAllLogDirs(ctx, nil); err != nil {
			return err
		}
		for id := int32(1); id <= 3; id++ {
			for p := range int32(partitions) {
				dp, ok := all[id].Lookup(homes[id][p], topic, p)
				if !ok || dp.Size <= 0 || dp.OffsetLag != 0 {
					return fmt.Errorf("broker %d partition %d: %+v (listed %v)", id, p, dp, ok)
				}
			}
		}
		return nil
	})
	for id := int32(1); id <= 3; id++ {
		checkDescribed(t, all[id], dirsOf(int(id)), homes[id], topic)
	}

	// Move partition 0 on every broker, under load.
	const moved = int32(0)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			v := fmt.Sprintf("during-%d", i)
			if err := cl.ProduceSync(loadCtx, &kgo.Record{Topic: topic, Partition: moved, Value: []byte(v)}).FirstErr(); err == nil {
				acked.add(moved, v)
			} else if loadCtx.Err() == nil {
				t.Errorf("produce during the move: %v", err)
				return
			}
		}
	}()
	for id := int32(1); id <= 3; id++ {
		to := dirsOf(int(id))[0]
		if homes[id][moved] == to {
			to = dirsOf(int(id))[1]
		}
		req := kadm.AlterReplicaLogDirsReq{}
		req.Add(to, kadm.TopicsSet{topic: {moved: {}}})
		res, err := adm.AlterBrokerReplicaLogDirs(ctx, id, req)
		if err != nil {
			t.Fatal(err)
		}
		res.Each(func(r kadm.AlterReplicaLogDirsResponse) {
			if r.Err != nil {
				t.Fatalf("broker %d: move %s-%d to %s: %v", id, r.Topic, r.Partition, r.Dir, r.Err)
			}
		})
		homes[id][moved] = to
	}
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for id := int32(1); id <= 3; id++ {
			d, err := adm.DescribeBrokerLogDirs(ctx, id, kadm.TopicsSet{topic: {moved: {}}})
			if err != nil {
				return err
			}
			if dp, ok := d.Lookup(homes[id][moved], topic, moved); !ok || dp.IsFuture {
				return fmt.Errorf("broker %d: not yet current in %s: %+v", id, homes[id][moved], dp)
			}
			if n := len(d.SortedPartitions()); n != 1 {
				return fmt.Errorf("broker %d lists %d logs of the partition", id, n)
			}
		}
		return nil
	})
	before := acked.count(moved)
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if acked.count(moved) < before+20 {
			return fmt.Errorf("%d records acknowledged since the moves", acked.count(moved)-before)
		}
		return nil
	})
	stopLoad()
	wg.Wait()
	for id := int32(1); id <= 3; id++ {
		if now := partitionHomes(t, dirsOf(int(id)), topic, partitions); !mapsEqual(now, homes[id]) {
			t.Errorf("broker %d: dirs %v, want %v", id, now, homes[id])
		}
	}
	t.Logf("moved %s-%d on all 3 brokers under load: %d records acknowledged in it", topic, moved, acked.count(moved))
	checkAllRecordsFrom(t, ctx, c.client(), topic, partitions, acked, "after the moves")
}

// ---- helpers ----

// partitionHomes finds the dir holding each partition's log, failing if
// one is in none or in both.
func partitionHomes(t *testing.T, dirs []string, topic string, partitions int) map[int32]string {
	t.Helper()
	homes := map[int32]string{}
	for _, d := range dirs {
		for _, name := range partitionDirsIn(t, d, topic) {
			var p int32
			if _, err := fmt.Sscanf(strings.TrimPrefix(name, topic+"-"), "%d", &p); err != nil {
				t.Fatalf("%s in %s: %v", name, d, err)
			}
			if prev, dup := homes[p]; dup {
				t.Fatalf("partition %d in both %s and %s", p, prev, d)
			}
			homes[p] = d
		}
	}
	if len(homes) != partitions {
		t.Fatalf("%d of %d partitions found in %v: %v", len(homes), partitions, dirs, homes)
	}
	return homes
}

// partitionDirsIn lists the partition logs of topic in dir (not future or
// deleted ones), sorted.
func partitionDirsIn(t *testing.T, dir, topic string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), topic+"-")
		if e.IsDir() && ok && !strings.ContainsAny(rest, ".-") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

func mapsEqual(a, b map[int32]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// segmentBytes is the size of a partition's .log files.
func segmentBytes(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += info.Size()
		}
	}
	return n
}

func describeLogDirs(t *testing.T, ctx context.Context, adm *kadm.Client, brokerID int32) kadm.DescribedLogDirs {
	t.Helper()
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatalf("DescribeAllLogDirs: %v", err)
	}
	d, ok := all[brokerID]
	if !ok || len(all) != 1 {
		t.Fatalf("DescribeAllLogDirs answered for brokers %v, want only %d", slices.Sorted(func(yield func(int32) bool) {
			for id := range all {
				if !yield(id) {
					return
				}
			}
		}), brokerID)
	}
	return d
}

// checkDescribed asserts DescribeLogDirs lists exactly dirs, without
// errors, and every partition of topic in its home only.
func checkDescribed(t *testing.T, d kadm.DescribedLogDirs, dirs []string, homes map[int32]string, topic string) {
	t.Helper()
	if len(d) != len(dirs) {
		t.Fatalf("DescribeLogDirs lists %d dirs, want %v", len(d), dirs)
	}
	for _, dir := range dirs {
		dd, ok := d[dir]
		if !ok || dd.Err != nil {
			t.Fatalf("dir %s: listed %v, err %v", dir, ok, dd.Err)
		}
	}
	for p, home := range homes {
		for _, dir := range dirs {
			_, ok := d.Lookup(dir, topic, p)
			if ok != (dir == home) {
				t.Errorf("partition %d listed in %s: %v, its log is in %s", p, dir, ok, home)
			}
		}
	}
}

// checkSaramaLogDirs asserts sarama's ClusterAdmin.DescribeLogDirs gives
// the dirs and sizes kadm got.
func checkSaramaLogDirs(t *testing.T, addr string, brokerID int32, dirs []string, want kadm.DescribedLogDirs) {
	t.Helper()
	cfg := saramaConfig()
	cfg.Version = sarama.V3_3_0_0 // DescribeLogDirs v4: total and usable bytes
	var ca sarama.ClusterAdmin
	if err := bounded(30*time.Second, "sarama.NewClusterAdmin", func() (err error) {
		ca, err = sarama.NewClusterAdmin([]string{addr}, cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	var got map[int32][]sarama.DescribeLogDirsResponseDirMetadata
	if err := bounded(30*time.Second, "sarama DescribeLogDirs", func() (err error) {
		got, err = ca.DescribeLogDirs([]int32{brokerID})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, d := range got[brokerID] {
		paths = append(paths, d.Path)
		if d.ErrorCode != sarama.ErrNoError || d.TotalBytes <= 0 || d.UsableBytes <= 0 {
			t.Errorf("sarama: dir %s error %v total %d usable %d", d.Path, d.ErrorCode, d.TotalBytes, d.UsableBytes)
		}
		for _, tp := range d.Topics {
			for _, p := range tp.Partitions {
				w, ok := want.Lookup(d.Path, tp.Topic, p.PartitionID)
				if !ok || w.Size != p.Size || p.OffsetLag != 0 || p.IsTemporary {
					t.Errorf("sarama: %s-%d in %s size %d lag %d temporary %v; kadm: %+v (listed %v)",
						tp.Topic, p.PartitionID, d.Path, p.Size, p.OffsetLag, p.IsTemporary, w, ok)
				}
			}
		}
	}
	slices.Sort(paths)
	if !slices.Equal(paths, dirs) {
		t.Errorf("sarama lists dirs %v, want %v", paths, dirs)
	}
}

// ackedSet records the acknowledged values per partition.
type ackedSet struct {
	mu   sync.Mutex
	vals map[int32][]string
}

func newAckedSet() *ackedSet { return &ackedSet{vals: map[int32][]string{}} }

func (a *ackedSet) add(p int32, v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.vals[p] = append(a.vals[p], v)
}

func (a *ackedSet) count(p int32) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.vals[p])
}

func (a *ackedSet) of(p int32) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.vals[p])
}

// produceN produces n records per partition, acks=all, and records them.
func produceN(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions int, from, n int, acked *ackedSet) {
	t.Helper()
	for p := range int32(partitions) {
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("p%d-r%d-%s", p, i, strings.Repeat("x", 100)))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
		for _, r := range recs {
			acked.add(p, string(r.Value))
		}
	}
}

// checkAllRecords consumes every partition from the start with a fresh
// client and asserts it holds exactly the acknowledged values, in order.
func checkAllRecords(t *testing.T, ctx context.Context, b *Broker, topic string, partitions int, acked *ackedSet, when string) {
	t.Helper()
	checkAllRecordsFrom(t, ctx, b.Client(t), topic, partitions, acked, when)
}

// checkAllRecordsFrom is checkAllRecords with a client of cl's options
// (it consumes with a copy of them).
func checkAllRecordsFrom(t *testing.T, ctx context.Context, base *kgo.Client, topic string, partitions int, acked *ackedSet, when string) {
	t.Helper()
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range int32(partitions) {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(base.Opts(), kgo.ConsumePartitions(offsets))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]string{}
	want := 0
	for p := range int32(partitions) {
		want += acked.count(p)
	}
	n := 0
	for n < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: consumed %d of %d records: %v", when, n, want, ctx.Err())
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Errorf("%s: fetch %s-%d: %v", when, topic, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for p := range int32(partitions) {
		if w := acked.of(p); !slices.Equal(got[p], w) {
			t.Errorf("%s: partition %d has %d records, %d acknowledged (%s)", when, p, len(got[p]), len(w), firstDiff(got[p], w))
		}
	}
}
