package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Disk full: a broker whose log dir fills up answers the producer with an
// error, stops with exit status 1 and a clear ERROR line (as Kafka halts on
// a failed log dir), and, restarted once space is free, still holds every
// record it acknowledged and takes new ones.

// diskFullValue is record i's value: unique, about 1 KiB, its index first.
func diskFullValue(i int) []byte {
	v := make([]byte, 0, 1024)
	v = fmt.Appendf(v, "diskfull-%08d-", i)
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	for len(v) < cap(v) {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v = append(v, alnum[x%uint64(len(alnum))])
	}
	return v
}

// mountTmpfs mounts a tmpfs of the given size (e.g. "6m") on a fresh
// directory and unmounts it at cleanup, after everything started later (a
// broker working in it) was stopped. It skips the test when not root.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -t tmpfs -o size=%s tmpfs %s: %v\n%s", size, dir, err, out)
	}
	// Registered before the broker's cleanup, so it runs after it.
	t.Cleanup(func() {
		var out []byte
		var err error
		for attempt := 0; attempt < 50; attempt++ {
			if out, err = exec.Command("umount", dir).CombinedOutput(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // a process still leaving it
		}
		t.Errorf("umount %s: %v\n%s", dir, err, out)
	})
	return dir
}

func remountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -o remount,size=%s %s: %v\n%s", size, dir, err, out)
	}
}

// TestDiskFull: acks=all produces fill a 6 MiB log dir; the broker answers
// an error and exits with status 1 and a clear log line, not a crash;
// after the tmpfs grows, a restart recovers every acknowledged record, in
// order at its acknowledged offset, and new produces succeed.
func TestDiskFull(t *testing.T) {
	mnt := mountTmpfs(t, "6m")
	dataDir := filepath.Join(mnt, "data")
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := StartBrokerIn(t, dataDir, "log.segment.bytes=1048576", "log.index.size.max.bytes=65536")
	const topic = "diskfull"
	createTopic(t, b.Admin(t), topic, 1, nil)

	// Not idempotent: franz-go never fails an idempotent batch that was in
	// flight when the broker went away (failing it could break sequence
	// numbers), so ProduceSync would wait for the dead broker forever.
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(b.Addr()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(5*time.Second),
		kgo.RetryTimeout(3*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := bounded(20*time.Second, "kgo Close", func() error { cl.Close(); return nil }); err != nil {
			t.Error(err)
		}
	}()

	// Produce in chunks until a record fails or the broker is gone. Records
	// within a chunk go out in order on one partition, so acknowledged
	// offsets must rise with the record index.
	type ackedRec struct {
		index  int
		offset int64
	}
	var (
		acked    []ackedRec
		firstErr error
		next     int
	)
	ctx := testContext(t, 2*time.Minute)
	// Whatever the client does, stop waiting for it a little after the
	// broker is gone.
	ctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	go func() {
		for b.Running() && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			stopProducing()
		}
	}()
	began := time.Now()
	const chunk = 200
	for firstErr == nil && b.Running() && ctx.Err() == nil {
		rs := make([]*kgo.Record, chunk)
		for j := range rs {
			rs[j] = &kgo.Record{Value: diskFullValue(next + j)}
		}
		base := next
		next += chunk
		for j, r := range cl.ProduceSync(ctx, rs...) {
			if r.Err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("record %d: %w", base+j, r.Err)
				}
				continue
			}
			acked = append(acked, ackedRec{base + j, r.Record.Offset})
		}
	}
	t.Logf("%d of %d records acknowledged in %v; first error: %v", len(acked), next, time.Since(began).Round(time.Millisecond), firstErr)
	if firstErr == nil {
		t.Fatalf("no produce failed in %v although the broker is %s", time.Since(began), b.exitState())
	}
	if len(acked) < 1000 {
		t.Fatalf("only %d records acknowledged before the disk was full, want the ~5 MiB of the tmpfs (~5000)", len(acked))
	}
	for i := 1; i < len(acked); i++ {
		if acked[i].offset <= acked[i-1].offset {
			t.Fatalf("record %d acknowledged at offset %d, after record %d at %d", acked[i].index, acked[i].offset, acked[i-1].index, acked[i-1].offset)
		}
	}

	// The broker stops on its own, with status 1, not by a crash.
	st, err := b.Wait(30 * time.Second)
	if err != nil {
		t.Fatalf("broker did not stop after its disk filled: %v", err)
	}
	if !st.Exited() || st.ExitCode() != 1 {
		t.Fatalf("broker ended with %v after its disk filled, want exit status 1", st)
	}
	out, err := os.ReadFile(b.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"panic:", "SIGBUS", "fatal error"} {
		if bytes.Contains(out, []byte(bad)) {
			t.Errorf("broker output contains %q: a crash, not a clean stop", bad)
		}
	}
	var failLine string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, "log dir failed") && strings.Contains(l, "no space left on device") {
			failLine = l
			break
		}
	}
	if failLine == "" {
		t.Fatalf("no ERROR line 'log dir failed ... no space left on device' in the broker output %s", b.LogPath())
	}
	t.Logf("broker stopped: %v; %s", st, failLine)

	// Free space and restart on the same data.
	remountTmpfs(t, mnt, "64m")
	restarted := time.Now()
	b.Restart()
	t.Logf("broker restarted in %v", time.Since(restarted).Round(time.Millisecond))

	adm := b.Admin(t)
	ends := endOffsets(t, adm, topic)
	last := acked[len(acked)-1]
	if ends[0] <= last.offset {
		t.Fatalf("end offset %d after restart, but offset %d was acknowledged", ends[0], last.offset)
	}
	consumed := consumeKgo(t, b.Addr(), topic, nil, ends, time.Minute)
	byOffset := make(map[int64][]byte, len(consumed))
	for i, c := range consumed {
		if c.Offset != int64(i) {
			t.Fatalf("consumed offset %d at position %d: the log has a gap", c.Offset, i)
		}
		byOffset[c.Offset] = c.Value
	}
	seen := make(map[string]int64, len(consumed))
	for _, c := range consumed {
		if o, dup := seen[string(c.Value)]; dup {
			t.Errorf("value %.20q at offsets %d and %d", c.Value, o, c.Offset)
		}
		seen[string(c.Value)] = c.Offset
	}
	for _, a := range acked {
		got, ok := byOffset[a.offset]
		if !ok {
			t.Fatalf("acknowledged record %d at offset %d is missing after the restart (end offset %d)", a.index, a.offset, ends[0])
		}
		if want := diskFullValue(a.index); !bytes.Equal(got, want) {
			t.Fatalf("offset %d holds %.24q after the restart, want acknowledged record %d %.24q", a.offset, got, a.index, want)
		}
	}
	t.Logf("all %d acknowledged records read back in order (end offset %d, %d unacknowledged records kept)", len(acked), ends[0], ends[0]-int64(len(acked)))

	// New produces succeed and land after the old log.
	cl2 := b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var more []*kgo.Record
	for i := 0; i < 200; i++ {
		more = append(more, &kgo.Record{Value: diskFullValue(next + i)})
	}
	if err := cl2.ProduceSync(pctx, more...).FirstErr(); err != nil {
		t.Fatalf("producing after the restart: %v", err)
	}
	for i, r := range more {
		if r.Offset != ends[0]+int64(i) {
			t.Fatalf("new record %d at offset %d, want %d", i, r.Offset, ends[0]+int64(i))
		}
	}
	newEnds := endOffsets(t, adm, topic)
	got := consumeKgo(t, b.Addr(), topic, ends, newEnds, time.Minute)
	if len(got) != len(more) {
		t.Fatalf("read %d new records, want %d", len(got), len(more))
	}
	for i, g := range got {
		if !bytes.Equal(g.Value, more[i].Value) {
			t.Fatalf("new record %d reads back as %.24q", i, g.Value)
		}
	}
	b.Stop()
}
