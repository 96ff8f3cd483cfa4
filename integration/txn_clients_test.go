package integration

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions through each client library's own API: N transactions
// alternating commit and abort on a one-partition topic, then a
// read_committed consumer of the same library. The consumer must see
// exactly the committed records, in order.
const (
	clientTxns   = 5 // committed: 0, 2, 4
	clientPerTxn = 20
)

// committedValues is what a client run must read: transactions 0, 2, 4 ...
// of prefix, in order.
func committedValues(prefix string) []string {
	var out []string
	for i := 0; i < clientTxns; i += 2 {
		for j := 0; j < clientPerTxn; j++ {
			out = append(out, fmt.Sprintf("%s-%d-%d", prefix, i, j))
		}
	}
	return out
}

func txnClientBroker(t *testing.T, topic string) *Broker {
	b := StartBroker(t, "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
		"offsets.topic.replication.factor=1", "group.initial.rebalance.delay.ms=0")
	createTopic(t, b.Admin(t), topic, 1, nil)
	return b
}

// runTxnScript runs a client script and returns its "R <value>" lines and
// its other output lines.
func runTxnScript(t *testing.T, cmd *exec.Cmd) (values, lines []string) {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "R "); ok {
			values = append(values, v)
		} else {
			lines = append(lines, line)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\nstdout: %q\nstderr:\n%s", cmd.Path, err, lines, stderr.String())
	}
	if !slices.Contains(lines, "DONE") {
		t.Fatalf("%s ended without DONE: %q\nstderr:\n%s", cmd.Path, lines, stderr.String())
	}
	return values, lines
}

func TestTxnLibrdkafka(t *testing.T) {
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import confluent_kafka").Run() != nil {
		t.Skip("python3-confluent-kafka not installed (apt-get install -y python3-confluent-kafka)")
	}
	b := txnClientBroker(t, "txn-librdkafka")
	script, err := filepath.Abs(filepath.Join("py", "txn_confluent.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, py, "-u", script, b.Addr(), "txn-librdkafka", "tx-librdkafka",
		fmt.Sprint(clientTxns), fmt.Sprint(clientPerTxn), "g-librdkafka")
	got, _ := runTxnScript(t, cmd)
	if want := committedValues("lr"); !slices.Equal(got, want) {
		t.Fatalf("librdkafka read_committed read %d records, want %d committed in order (%s)", len(got), len(want), firstDiff(got, want))
	}
}

func TestTxnKafkajs(t *testing.T) {
	dir := groupsJSDir(t)
	b := txnClientBroker(t, "txn-kafkajs")
	ctx := testContext(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "txn_kafkajs.js"), b.Addr(), "txn-kafkajs", "tx-kafkajs",
		fmt.Sprint(clientTxns), fmt.Sprint(clientPerTxn), "g-kafkajs")
	got, lines := runTxnScript(t, cmd)
	if want := committedValues("js"); !slices.Equal(got, want) {
		t.Fatalf("kafkajs read_committed read %d records, want %d committed in order (%s)", len(got), len(want), firstDiff(got, want))
	}
	// sendOffsets of the last (committed) transaction is the group's
	// offset; the aborted ones never showed.
	if want := fmt.Sprintf("OFFSET %d", clientTxns); !slices.Contains(lines, want) {
		t.Fatalf("kafkajs output %q, want %q", lines, want)
	}
}

func TestTxnSarama(t *testing.T) {
	topic := "txn-sarama"
	b := txnClientBroker(t, topic)
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = "tx-sarama"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatalf("sarama transactional producer: %v", err)
	}
	defer func() { _ = bounded(10*time.Second, "sarama producer close", p.Close) }()
	for i := 0; i < clientTxns; i++ {
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn %d: %v", i, err)
		}
		for j := 0; j < clientPerTxn; j++ {
			v := fmt.Sprintf("sa-%d-%d", i, j)
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(v), Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("send in transaction %d: %v", i, err)
			}
		}
		if i%2 == 0 {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			t.Fatalf("ending transaction %d: %v", i, err)
		}
	}
	ccfg := saramaConfig()
	ccfg.Consumer.IsolationLevel = sarama.ReadCommitted
	c, err := sarama.NewConsumer([]string{b.Addr()}, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bounded(10*time.Second, "sarama consumer close", c.Close) }()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.AsyncClose()
	want := committedValues("sa")
	var got []string
	ctx := testContext(t, 60*time.Second)
	for len(got) < len(want) {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("sarama consumer: %v", err)
		case <-ctx.Done():
			t.Fatalf("sarama read %d of %d committed records", len(got), len(want))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sarama read_committed: %s", firstDiff(got, want))
	}
}

// startHungProducer starts a librdkafka producer that leaves a transaction
// of n records open on topic, and returns it once the records are written.
func startHungProducer(t *testing.T, addr, topic, txnID string, n int, timeout time.Duration) *exec.Cmd {
	t.Helper()
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import confluent_kafka").Run() != nil {
		t.Skip("python3-confluent-kafka not installed (apt-get install -y python3-confluent-kafka)")
	}
	script, err := filepath.Abs(filepath.Join("py", "txn_hang.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-u", script, addr, topic, txnID, fmt.Sprint(n), fmt.Sprint(timeout.Milliseconds()))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if _, err := cmd.StdinPipe(); err != nil { // kept open: the script blocks on it
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	opened := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "OPEN" {
				opened <- true
				return
			}
		}
		opened <- false
	}()
	select {
	case ok := <-opened:
		if !ok {
			t.Fatalf("hung producer exited before opening its transaction:\n%s", stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("hung producer did not open its transaction within 60s:\n%s", stderr.String())
	}
	return cmd
}

// stableAndLatest are partition 0's last stable offset and high watermark.
func stableAndLatest(t *testing.T, b *Broker, topic string) (int64, int64) {
	t.Helper()
	return stableAndLatestVia(t, b.Admin(t), topic)
}

// stableAndLatestVia is stableAndLatest through a given admin client.
func stableAndLatestVia(t *testing.T, adm *kadm.Client, topic string) (int64, int64) {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	latest, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := stable.Lookup(topic, 0)
	l, _ := latest.Lookup(topic, 0)
	return s.Offset, l.Offset
}

// A producer killed with -9 inside a transaction: read_committed readers
// stop at its first record until the coordinator aborts it after
// transaction.timeout.ms; its records never show.
func TestTxnKilledProducerAbortedAfterTimeout(t *testing.T) {
	b := StartBroker(t, "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
	topic := "txn-killed"
	createTopic(t, b.Admin(t), topic, 1, nil)
	const timeout = 3 * time.Second
	cmd := startHungProducer(t, b.Addr(), topic, "tx-killed", 10, timeout)
	killedAt := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if stable, latest := stableAndLatest(t, b, topic); stable != 0 || latest != 10 {
		t.Fatalf("open transaction of 10 records: last stable offset %d, high watermark %d; want 0 and 10", stable, latest)
	}
	checkFor(t, timeout+15*time.Second, 50*time.Millisecond, func() error {
		if stable, latest := stableAndLatest(t, b, topic); stable != latest || latest != 11 {
			return fmt.Errorf("last stable offset %d, high watermark %d; want both 11 (abort marker)", stable, latest)
		}
		return nil
	})
	if waited := time.Since(killedAt); waited < timeout-time.Second {
		t.Fatalf("transaction aborted %v after the kill, before its %v timeout", waited, timeout)
	}
	committed := txnProduce(t, []string{b.Addr()}, "tx-after", topic, 1, 5)
	if got := consumeValues(t, []string{b.Addr()}, topic, kgo.ReadCommitted(), 5); !slices.Equal(got, committed) {
		t.Fatalf("read_committed after the abort: %q, want %q", got, committed)
	}
}

// A new producer with the killed producer's transactional id does not wait
// for the timeout: its InitProducerId fences the old one and aborts its
// transaction (Kafka answers CONCURRENT_TRANSACTIONS until the abort is
// done, which the client retries).
func TestTxnKilledProducerFencedByNewProducer(t *testing.T) {
	b := StartBroker(t, "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1")
	topic := "txn-fenced"
	createTopic(t, b.Admin(t), topic, 1, nil)
	cmd := startHungProducer(t, b.Addr(), topic, "tx-reused", 10, time.Minute)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	committed := txnProduce(t, []string{b.Addr()}, "tx-reused", topic, 1, 5)
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("new producer took %v: it waited for the old transaction's timeout", took)
	}
	if got := consumeValues(t, []string{b.Addr()}, topic, kgo.ReadCommitted(), 5); !slices.Equal(got, committed) {
		t.Fatalf("read_committed: %q, want only the new producer's %q", got, committed)
	}
	if stable, latest := stableAndLatest(t, b, topic); stable != latest {
		t.Fatalf("last stable offset %d, high watermark %d: a transaction is still open", stable, latest)
	}
}

// Transactions survive a kill -9 of the broker: after the restart a
// committed transaction is still visible, the open one still holds the
// last stable offset (producer state rebuilt from the log), and the
// coordinator, reloaded from __transaction_state, aborts it after its
// timeout.
func TestTxnSurviveBrokerKill(t *testing.T) {
	b := StartBroker(t, "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
	topic := "txn-restart"
	createTopic(t, b.Admin(t), topic, 1, nil)
	committed := txnProduce(t, []string{b.Addr()}, "tx-before", topic, 1, 5) // offsets 0-4, marker 5
	const timeout = 4 * time.Second
	hung := startHungProducer(t, b.Addr(), topic, "tx-open", 10, timeout) // offsets 6-15
	b.Kill()
	if err := hung.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	if stable, latest := stableAndLatest(t, b, topic); stable != 6 || latest != 16 {
		t.Fatalf("after restart: last stable offset %d, high watermark %d; want 6 (the open transaction) and 16", stable, latest)
	}
	checkFor(t, timeout+20*time.Second, 50*time.Millisecond, func() error {
		if stable, latest := stableAndLatest(t, b, topic); stable != latest || latest != 17 {
			return fmt.Errorf("last stable offset %d, high watermark %d; want both 17 (abort marker)", stable, latest)
		}
		return nil
	})
	after := txnProduce(t, []string{b.Addr()}, "tx-after", topic, 1, 5)
	want := append(committed, after...)
	if got := consumeValues(t, []string{b.Addr()}, topic, kgo.ReadCommitted(), len(want)); !slices.Equal(got, want) {
		t.Fatalf("read_committed after restart: %q, want %q", got, want)
	}
}
