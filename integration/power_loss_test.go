package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The power-loss test of issue 18. A 3-broker cluster (RF 3,
// min.insync.replicas=2) takes an idempotent acks=all producer's writes;
// at randomized moments every broker is killed with SIGKILL at once, each
// .log file is cut to what its broker's sync journal says was on stable
// storage (powerCut: what a power cut would have left), and the brokers
// start again on the same directories. Every acknowledged record must then
// be read back at the offset it was acknowledged with, with its value.
//
//   - kbroker.acks.fsync=true: no acknowledged record may be lost.
//   - kbroker.acks.fsync=false (Kafka's default, which acknowledges what
//     is in the page cache and leaves flushing to the OS): records are
//     lost, and the test asserts that some are. This is the trade-off the
//     setting buys back: Kafka relies on replication across machines that
//     do not lose power together; a power cut of every replica at once
//     loses what none of them had flushed.
//
// KBROKER_POWERLOSS_CRASHES sets the crash points of the fsync=true run
// (default 5; issue 18 asks for 20), KBROKER_POWERLOSS_SEED the seed of the
// crash delays (default: from the clock; logged either way).

const (
	powerLossTopic      = "power-loss"
	powerLossPartitions = 3
)

func TestPowerLossDurableAcks(t *testing.T) {
	crashes := envInt(t, "KBROKER_POWERLOSS_CRASHES", 5)
	r := runPowerLoss(t, true, crashes)
	if r.lost > 0 {
		t.Errorf("kbroker.acks.fsync=true lost %d of %d acknowledged records over %d crash points", r.lost, r.acked, crashes)
	}
}

func TestPowerLossDefaultAcks(t *testing.T) {
	// Two crash points suffice: nothing is fsynced before a roll or a
	// clean shutdown, so the first cut loses what was acknowledged.
	r := runPowerLoss(t, false, 2)
	if r.lost == 0 {
		t.Errorf("kbroker.acks.fsync=false lost none of %d acknowledged records over 2 power cuts: the test does not see what reached the disk", r.acked)
	}
	t.Logf("trade-off: with kbroker.acks.fsync=false (Kafka's default) a power cut of every replica lost %d of %d acknowledged records", r.lost, r.acked)
}

type powerLossResult struct {
	acked, lost int
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func runPowerLoss(t *testing.T, fsync bool, crashes int) powerLossResult {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("KBROKER_POWERLOSS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("KBROKER_POWERLOSS_SEED=%q: %v", v, err)
		}
	}
	t.Logf("kbroker.acks.fsync=%v, %d crash points, seed %d (KBROKER_POWERLOSS_SEED=%d repeats the delays)", fsync, crashes, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	journals := make([]string, 3)
	for i := range journals {
		journals[i] = filepath.Join(t.TempDir(), "sync.journal")
	}
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second,
		perBroker: func(id int) []string { return []string{"kbroker.test.sync.journal=" + journals[id-1]} }})
	on := strconv.FormatBool(fsync)
	c.createTopic(powerLossTopic, powerLossPartitions, map[string]*string{"kbroker.acks.fsync": &on})

	var res powerLossResult
	expected := map[string]ackPos{} // acknowledged and not yet found lost
	for crash := 1; crash <= crashes; crash++ {
		load := startPowerLossLoad(c, fmt.Sprintf("c%02d", crash))
		load.waitAcked(t, 50, 60*time.Second)
		delay := time.Duration(100+rng.IntN(1400)) * time.Millisecond
		time.Sleep(delay) // the crash point under test: a random moment under load
		c.powerCutAll(t, journals, crash)
		acked := load.stop()
		res.acked += len(acked)
		for v, a := range acked {
			expected[v] = a
		}

		lost := c.checkPowerLoss(t, expected, crash, journals)
		res.lost += len(lost)
		for _, v := range lost {
			delete(expected, v)
		}
		t.Logf("crash point %d (after %v under load): %d records acknowledged in this round, %d acknowledged records lost (%d so far of %d)",
			crash, delay, len(acked), len(lost), res.lost, res.acked)
		if fsync && len(lost) > 0 {
			break // the evidence is logged; later rounds would bury it
		}
	}
	return res
}

// powerLossLoad produces distinct values to every partition of the topic
// with an idempotent acks=all producer until stopped, and records where
// each acknowledged value landed.
type powerLossLoad struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acked  map[string]ackPos
}

func startPowerLossLoad(c *testCluster, prefix string) *powerLossLoad {
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(2000),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithCancel(context.Background())
	l := &powerLossLoad{cl: cl, cancel: cancel, done: make(chan struct{}), acked: map[string]ackPos{}}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for n := 0; ctx.Err() == nil; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// About 5,000 records/s: enough to keep every partition
			// busy, little enough to read back after every crash point.
			for range 5 {
				v := fmt.Sprintf("%s-%07d", prefix, n)
				n++
				cl.Produce(ctx, &kgo.Record{Topic: powerLossTopic, Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err != nil {
						return
					}
					l.mu.Lock()
					l.acked[string(r.Value)] = ackPos{r.Partition, r.Offset}
					l.mu.Unlock()
				})
			}
		}
	}()
	return l
}

func (l *powerLossLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *powerLossLoad) waitAcked(t *testing.T, n int, within time.Duration) {
	t.Helper()
	checkFor(t, within, 10*time.Millisecond, func() error {
		if got := l.count(); got < n {
			return fmt.Errorf("%d records acknowledged, waiting for %d", got, n)
		}
		return nil
	})
}

// stop ends the load (its brokers are gone: nothing buffered can be
// acknowledged any more) and returns what was acknowledged.
func (l *powerLossLoad) stop() map[string]ackPos {
	l.cancel()
	<-l.done
	l.cl.Close() // fails what is still buffered
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked
}

// powerCutAll kills every broker at once, applies each one's sync journal
// to its log dir, and starts them all again on the same directories.
func (c *testCluster) powerCutAll(t *testing.T, journals []string, crash int) {
	t.Helper()
	for _, b := range c.brokers {
		b.Signal(syscall.SIGKILL)
	}
	for id, b := range c.brokers {
		if _, err := b.Wait(stopTimeout); err != nil {
			t.Fatalf("broker %d did not die of SIGKILL: %v", id+1, err)
		}
	}
	for id, b := range c.brokers {
		// Kept for the evidence of a loss: the journal is replaced by a
		// baseline below.
		keep := fmt.Sprintf("%s.crash%02d", journals[id], crash)
		if data, err := os.ReadFile(journals[id]); err == nil {
			_ = os.WriteFile(keep, data, 0o644)
		}
		cuts, err := powerCut(journals[id], b.DataDir())
		if err != nil {
			t.Fatalf("broker %d: %v", id+1, err)
		}
		logPowerCut(t, fmt.Sprintf("crash %d broker %d", crash, id+1), cuts)
	}
	for id := range c.brokers {
		c.waitUnregistered(int32(id + 1))
	}
	for _, b := range c.brokers {
		b.Restart()
	}
}

// checkPowerLoss waits until every partition is led and fully replicated
// again, reads the topic back, and returns the expected values that are
// not at their acknowledged partition and offset. It logs the evidence of
// each: where the value is (if anywhere), what is at its offset, and the
// journal lines of the partition's files.
func (c *testCluster) checkPowerLoss(t *testing.T, expected map[string]ackPos, crash int, journals []string) []string {
	t.Helper()
	c.waitSettled(60*time.Second, powerLossTopic, powerLossPartitions, 3)
	for p := int32(0); p < powerLossPartitions; p++ {
		c.waitInSyncEverywhere(60*time.Second, powerLossTopic, p)
	}
	read := c.readTopic(powerLossTopic, 60*time.Second)
	at := map[ackPos]string{}
	for p, rs := range read {
		for _, r := range rs {
			at[ackPos{p, r.Offset}] = r.Value
		}
	}
	var lost []string
	for v, a := range expected {
		if at[a] != v {
			lost = append(lost, v)
		}
	}
	slices.SortFunc(lost, func(x, y string) int {
		a, b := expected[x], expected[y]
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	if len(lost) == 0 {
		return nil
	}
	// Summarise per partition: the range of lost offsets and the log end
	// read back.
	type span struct{ first, last, n int64 }
	spans := map[int32]*span{}
	for _, v := range lost {
		a := expected[v]
		s := spans[a.Partition]
		if s == nil {
			s = &span{first: a.Offset, last: a.Offset}
			spans[a.Partition] = s
		}
		s.first, s.last, s.n = min(s.first, a.Offset), max(s.last, a.Offset), s.n+1
	}
	for p, s := range spans {
		end := int64(0)
		if rs := read[p]; len(rs) > 0 {
			end = rs[len(rs)-1].Offset + 1
		}
		t.Logf("crash %d: partition %d lost %d acknowledged records at offsets %d..%d; read back up to offset %d", crash, p, s.n, s.first, s.last, end)
	}
	for i, v := range lost {
		if i == 5 {
			break
		}
		a := expected[v]
		t.Logf("crash %d: acknowledged %s at p%d@%d; read there: %q", crash, v, a.Partition, a.Offset, at[a])
	}
	for id, j := range journals {
		data, err := os.ReadFile(fmt.Sprintf("%s.crash%02d", j, crash))
		if err != nil {
			continue
		}
		var lines []string
		for _, line := range strings.Split(string(data), "\n") {
			for p := range spans {
				if strings.Contains(line, fmt.Sprintf("/%s-%d/", powerLossTopic, p)) {
					lines = append(lines, line)
				}
			}
		}
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		t.Logf("crash %d: broker %d journal (%s.crash%02d), last lines of the lossy partitions:\n%s", crash, id+1, j, crash, strings.Join(lines, "\n"))
	}
	return lost
}
