package integration

// Consumer-group members as separate processes, one per client library, so
// that a test can end a member either cleanly (SIGTERM: the member closes its
// consumer, which commits and sends LeaveGroup) or by SIGKILL (no commit, no
// LeaveGroup: the coordinator only notices through the session timeout). Every
// member writes one line per consumed record to stdout,
//
//	R <partition> <offset> <value>
//
// after which it may commit that record (it never commits a record before
// printing it, so a printed record is exactly a processed one). The Go
// clients (franz-go, sarama, segmentio/kafka-go) run in a re-exec of this
// test binary (TestGroupsMember); kcat, kafka-python and kafkajs run as
// their own programs.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Timeouts every member uses: short sessions so that a killed member is
// noticed within a few seconds (the broker runs with
// group.min.session.timeout.ms=1000).
const (
	groupsSessionTimeout   = 3 * time.Second
	groupsHeartbeat        = 500 * time.Millisecond
	groupsRebalanceTimeout = 10 * time.Second
	groupsCommitInterval   = 500 * time.Millisecond
	groupsFetchMaxWait     = 500 * time.Millisecond
)

// groupMemberEnv names the environment variable that turns a run of this
// test binary into a Go group member; its value is a JSON groupMemberSpec.
const groupMemberEnv = "KBROKER_GROUPS_MEMBER"

// groupMemberSpec is what a member process needs to know.
type groupMemberSpec struct {
	Client   string // franz-range, franz-coop, franz-848, sarama, kafka-go
	Addr     string
	Topic    string
	Group    string
	ClientID string
}

// groupRecord is one record a member printed, stamped when the test read it.
type groupRecord struct {
	at        time.Time
	member    string
	partition int32
	offset    int64
	value     string
}

// groupRecordLog collects the records of all members of one scenario.
type groupRecordLog struct {
	mu   sync.Mutex // guards recs
	recs []groupRecord
}

func (l *groupRecordLog) add(c groupRecord) {
	l.mu.Lock()
	l.recs = append(l.recs, c)
	l.mu.Unlock()
}

func (l *groupRecordLog) snapshot() []groupRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]groupRecord(nil), l.recs...)
}

// groupMember is one running member process.
type groupMember struct {
	name   string
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process exited and its output was read
	state  *os.ProcessState
	stderr *groupsTail
	closed bool // the member printed CLOSED (a clean close finished); read after done
}

// groupsTail keeps the last 32 KiB written to it.
type groupsTail struct {
	mu  sync.Mutex
	buf []byte
}

func (b *groupsTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 32<<10 {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-32<<10:]...)
	}
	return len(p), nil
}

func (b *groupsTail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// startGroupMember starts cmd as member name, feeding its records into log. The
// process is killed at test cleanup if still running.
func startGroupMember(t *testing.T, name string, cmd *exec.Cmd, log *groupRecordLog) *groupMember {
	t.Helper()
	m := &groupMember{name: name, cmd: cmd, done: make(chan struct{}), stderr: &groupsTail{}}
	cmd.Stderr = m.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("member %s: %v", name, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting member %s (%s): %v", name, cmd.Path, err)
	}
	var bad []string
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			now := time.Now()
			switch {
			case line == "CLOSED":
				m.closed = true
			case strings.HasPrefix(line, "R "):
				f := strings.SplitN(line, " ", 4)
				if len(f) != 4 {
					bad = append(bad, line)
					continue
				}
				p, err1 := strconv.ParseInt(f[1], 10, 32)
				o, err2 := strconv.ParseInt(f[2], 10, 64)
				if err1 != nil || err2 != nil {
					bad = append(bad, line)
					continue
				}
				log.add(groupRecord{at: now, member: name, partition: int32(p), offset: o, value: f[3]})
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		m.state = cmd.ProcessState
		if len(bad) > 0 {
			fmt.Fprintf(m.stderr, "\n[test] malformed record lines: %q\n", bad)
		}
		close(m.done)
	}()
	t.Cleanup(func() {
		m.kill()
		if t.Failed() {
			t.Logf("member %s (%s) stderr tail:\n%s", name, filepath.Base(cmd.Path), m.stderr.String())
		}
	})
	return m
}

func (m *groupMember) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *groupMember) kill() {
	if m.exited() {
		return
	}
	_ = m.cmd.Process.Kill()
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
	}
}

// Kill SIGKILLs the member: it neither commits nor leaves the group.
func (m *groupMember) Kill(t *testing.T) {
	t.Helper()
	if m.exited() {
		t.Fatalf("member %s exited before it was killed (%v):\n%s", m.name, m.state, m.stderr.String())
	}
	m.kill()
	if !m.exited() {
		t.Fatalf("member %s still running 10s after SIGKILL", m.name)
	}
}

// Leave SIGTERMs the member and waits for its clean exit: the member closes
// its consumer (a final commit and LeaveGroup) and exits with status 0.
func (m *groupMember) Leave(t *testing.T, cleanExitLine bool) {
	t.Helper()
	if m.exited() {
		t.Fatalf("member %s exited before it was asked to leave (%v):\n%s", m.name, m.state, m.stderr.String())
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to member %s: %v", m.name, err)
	}
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("member %s did not exit within 30s of SIGTERM:\n%s", m.name, m.stderr.String())
	}
	if !m.state.Exited() || m.state.ExitCode() != 0 {
		t.Fatalf("member %s exited with %v after SIGTERM, want status 0:\n%s", m.name, m.state, m.stderr.String())
	}
	if cleanExitLine && !m.closed {
		t.Fatalf("member %s exited without printing CLOSED:\n%s", m.name, m.stderr.String())
	}
}

// goMemberCmd re-executes this test binary as a Go group member.
func goMemberCmd(t *testing.T, spec groupMemberSpec) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	js, _ := json.Marshal(spec)
	cmd := exec.Command(self, "-test.run=^TestGroupsMember$", "-test.count=1", "-test.timeout=10m")
	// KBROKER_BIN keeps the child's TestMain from building the broker again.
	cmd.Env = append(os.Environ(), groupMemberEnv+"="+string(js), "KBROKER_BIN="+brokerBin)
	return cmd
}

// kcatMemberCmd runs kcat's balanced consumer (librdkafka's group client).
// -u: unbuffered output, so a SIGKILL loses no printed line.
func kcatMemberCmd(t *testing.T, spec groupMemberSpec) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (scripts/test.sh installs it)")
	}
	return exec.Command("kcat", "-b", spec.Addr, "-G", spec.Group, "-u", "-q",
		"-f", `R %p %o %s\n`,
		"-X", "client.id="+spec.ClientID,
		"-X", "auto.offset.reset=earliest",
		"-X", "session.timeout.ms="+groupsMillis(groupsSessionTimeout),
		"-X", "heartbeat.interval.ms="+groupsMillis(groupsHeartbeat),
		"-X", "max.poll.interval.ms="+groupsMillis(groupsRebalanceTimeout),
		"-X", "auto.commit.interval.ms="+groupsMillis(groupsCommitInterval),
		"-X", "fetch.wait.max.ms="+groupsMillis(groupsFetchMaxWait),
		spec.Topic)
}

func groupsMillis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// pythonMember is kafka-python 2.0.2's KafkaConsumer in a group. poll()
// auto-commits the positions of records returned by earlier polls, which
// were printed (and flushed) before poll was called again.
const pythonMember = `
import signal, sys
from kafka import KafkaConsumer

addr, topic, group, client_id = sys.argv[1:5]
stop = False
def on_term(signum, frame):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)

c = KafkaConsumer(topic, bootstrap_servers=addr, group_id=group, client_id=client_id,
                  auto_offset_reset='earliest', enable_auto_commit=True,
                  auto_commit_interval_ms=int(sys.argv[5]), session_timeout_ms=int(sys.argv[6]),
                  heartbeat_interval_ms=int(sys.argv[7]), max_poll_interval_ms=int(sys.argv[8]),
                  fetch_max_wait_ms=int(sys.argv[9]))
out = sys.stdout
while not stop:
    batches = c.poll(timeout_ms=200)
    for tp, recs in batches.items():
        for r in recs:
            out.write('R %d %d %s\n' % (r.partition, r.offset, r.value.decode()))
    out.flush()
c.close(autocommit=True)
out.write('CLOSED\n')
out.flush()
`

// groupsPythonBin is the interpreter Debian's python3-kafka is installed for.
func groupsPythonBin(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		bin, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if exec.Command(bin, "-c", "import kafka").Run() == nil {
			return bin
		}
	}
	t.Skip("no python3 with kafka-python (apt-get install -y python3-kafka)")
	return ""
}

func pythonMemberCmd(t *testing.T, spec groupMemberSpec) *exec.Cmd {
	t.Helper()
	bin := groupsPythonBin(t)
	script := filepath.Join(t.TempDir(), "groups_member.py")
	if err := os.WriteFile(script, []byte(pythonMember), 0o644); err != nil {
		t.Fatal(err)
	}
	return exec.Command(bin, "-u", script, spec.Addr, spec.Topic, spec.Group, spec.ClientID,
		groupsMillis(groupsCommitInterval), groupsMillis(groupsSessionTimeout), groupsMillis(groupsHeartbeat),
		groupsMillis(groupsRebalanceTimeout), groupsMillis(groupsFetchMaxWait))
}

var groupsNpmOnce struct {
	sync.Once
	err error
}

// groupsJSDir returns integration/js with its node_modules installed (npm ci
// from package-lock.json when missing); the test skips only when node is
// not installed.
func groupsJSDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	dir, err := filepath.Abs("js")
	if err != nil {
		t.Fatal(err)
	}
	groupsNpmOnce.Do(func() {
		if fileExists(filepath.Join(dir, "node_modules", "kafkajs", "package.json")) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			groupsNpmOnce.err = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	if groupsNpmOnce.err != nil {
		t.Fatal(groupsNpmOnce.err)
	}
	return dir
}

func nodeMemberCmd(t *testing.T, spec groupMemberSpec) *exec.Cmd {
	t.Helper()
	dir := groupsJSDir(t)
	cmd := exec.Command("node", filepath.Join(dir, "groups_member.js"), spec.Addr, spec.Topic, spec.Group, spec.ClientID,
		groupsMillis(groupsCommitInterval), groupsMillis(groupsSessionTimeout), groupsMillis(groupsHeartbeat),
		groupsMillis(groupsRebalanceTimeout), groupsMillis(groupsFetchMaxWait))
	cmd.Dir = dir
	return cmd
}

// TestGroupsMember is not a test: it is the Go group member that
// groups_test.go starts as a process (it skips unless KBROKER_GROUPS_MEMBER
// is set). It consumes until SIGTERM, then closes its consumer cleanly and
// prints CLOSED.
func TestGroupsMember(t *testing.T) {
	raw := os.Getenv(groupMemberEnv)
	if raw == "" {
		t.Skip("run by the groups tests as a member process")
	}
	var spec groupMemberSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatalf("%s: %v", groupMemberEnv, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	out := bufio.NewWriter(os.Stdout)
	emit := func(p int32, o int64, v []byte) {
		fmt.Fprintf(out, "R %d %d %s\n", p, o, v)
	}
	var err error
	switch spec.Client {
	case "franz-range", "franz-coop", "franz-848":
		err = runFranzMember(ctx, spec, out, emit)
	case "sarama":
		err = runSaramaMember(ctx, spec, out, emit)
	case "kafka-go":
		err = runKafkaGoMember(ctx, spec, out, emit)
	default:
		err = fmt.Errorf("unknown client %q", spec.Client)
	}
	if err != nil {
		t.Fatalf("member %s: %v", spec.ClientID, err)
	}
	fmt.Fprintln(out, "CLOSED")
	out.Flush()
}

// runFranzMember: franz-go with the eager range or the cooperative-sticky
// balancer. BlockRebalanceOnPoll keeps a rebalance from revoking partitions
// between a poll and the marking of its records; AutoCommitMarks commits
// only marked (printed) records, also when partitions are revoked and on
// close.
func runFranzMember(ctx context.Context, spec groupMemberSpec, out *bufio.Writer, emit func(int32, int64, []byte)) error {
	bal := kgo.RangeBalancer()
	var extra []kgo.Opt
	switch spec.Client {
	case "franz-coop":
		bal = kgo.CooperativeStickyBalancer()
	case "franz-848":
		// KIP-848: the broker assigns ("uniform" for the sticky balancer);
		// sessions are the broker's group.consumer.session.timeout.ms.
		bal = kgo.CooperativeStickyBalancer()
		extra = append(extra, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(append(extra,
		kgo.SeedBrokers(spec.Addr),
		kgo.ClientID(spec.ClientID),
		kgo.ConsumerGroup(spec.Group),
		kgo.ConsumeTopics(spec.Topic),
		kgo.Balancers(bal),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(groupsSessionTimeout),
		kgo.HeartbeatInterval(groupsHeartbeat),
		kgo.RebalanceTimeout(groupsRebalanceTimeout),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(groupsCommitInterval),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(groupsFetchMaxWait),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)),
	)...)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "fetch %s/%d: %v\n", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { emit(r.Partition, r.Offset, r.Value) })
		if err := out.Flush(); err != nil {
			return err
		}
		cl.MarkCommitRecords(fs.Records()...)
		cl.AllowRebalance()
	}
	cl.CloseAllowingRebalance()
	return nil
}

// runSaramaMember: IBM/sarama's ConsumerGroup with the range strategy;
// each message is printed, then marked; the offset manager auto-commits
// marks and flushes them when a session ends and on Close.
func runSaramaMember(ctx context.Context, spec groupMemberSpec, out *bufio.Writer, emit func(int32, int64, []byte)) error {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.ClientID = spec.ClientID
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = groupsCommitInterval
	cfg.Consumer.MaxWaitTime = groupsFetchMaxWait
	cfg.Consumer.Group.Session.Timeout = groupsSessionTimeout
	cfg.Consumer.Group.Heartbeat.Interval = groupsHeartbeat
	cfg.Consumer.Group.Rebalance.Timeout = groupsRebalanceTimeout
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	cg, err := sarama.NewConsumerGroup([]string{spec.Addr}, spec.Group, cfg)
	if err != nil {
		return err
	}
	go func() {
		for err := range cg.Errors() {
			fmt.Fprintf(os.Stderr, "sarama group error: %v\n", err)
		}
	}()
	h := &groupsSaramaHandler{out: out, emit: emit}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{spec.Topic}, h); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "sarama Consume: %v\n", err)
			select { // client retry backoff, not test synchronisation
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return cg.Close()
}

type groupsSaramaHandler struct {
	mu   sync.Mutex // guards out: claims run in parallel goroutines
	out  *bufio.Writer
	emit func(int32, int64, []byte)
}

func (h *groupsSaramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	fmt.Fprintf(os.Stderr, "sarama setup generation %d claims %v\n", s.GenerationID(), s.Claims())
	return nil
}

func (h *groupsSaramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupsSaramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-s.Context().Done():
			return nil
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			h.mu.Lock()
			h.emit(m.Partition, m.Offset, m.Value)
			err := h.out.Flush()
			h.mu.Unlock()
			if err != nil {
				return err
			}
			s.MarkMessage(m, "")
		}
	}
}

// runKafkaGoMember: segmentio/kafka-go's Reader with a GroupID; each
// message is fetched, printed, then handed to CommitMessages (committed
// asynchronously every CommitInterval, and at generation end and Close).
func runKafkaGoMember(ctx context.Context, spec groupMemberSpec, out *bufio.Writer, emit func(int32, int64, []byte)) error {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{spec.Addr},
		GroupID:           spec.Group,
		Topic:             spec.Topic,
		Dialer:            &kafka.Dialer{ClientID: spec.ClientID, Timeout: 10 * time.Second, DualStack: true},
		StartOffset:       kafka.FirstOffset,
		CommitInterval:    groupsCommitInterval,
		SessionTimeout:    groupsSessionTimeout,
		HeartbeatInterval: groupsHeartbeat,
		RebalanceTimeout:  groupsRebalanceTimeout,
		MaxWait:           groupsFetchMaxWait,
		ErrorLogger:       log.New(os.Stderr, "[kafka-go] ", log.LstdFlags|log.Lmicroseconds),
	})
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(os.Stderr, "kafka-go FetchMessage: %v\n", err)
			continue
		}
		emit(int32(m.Partition), m.Offset, m.Value)
		if err := out.Flush(); err != nil {
			return err
		}
		if err := r.CommitMessages(context.Background(), m); err != nil {
			fmt.Fprintf(os.Stderr, "kafka-go CommitMessages: %v\n", err)
		}
	}
	return r.Close()
}
