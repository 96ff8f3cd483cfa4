package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kbroker/kbroker/segment"
)

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// ZKView reads cluster state straight from ZooKeeper (not through any
// proxy).
type ZKView struct {
	conn *zk.Conn
}

// NewZKView connects to ZooKeeper at addr.
func NewZKView(addr string) (*ZKView, error) {
	conn, _, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		return nil, err
	}
	return &ZKView{conn: conn}, nil
}

// Close ends the session.
func (v *ZKView) Close() { v.conn.Close() }

// PartitionState is /brokers/topics/<t>/partitions/<p>/state.
type PartitionState struct {
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ControllerEpoch int32   `json:"controller_epoch"`
	ISR             []int32 `json:"isr"`
}

// State reads one partition's state.
func (v *ZKView) State(topic string, p int32) (PartitionState, error) {
	var s PartitionState
	b, _, err := v.conn.Get(fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", topic, p))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// ControllerEpoch reads /controller_epoch.
func (v *ZKView) ControllerEpoch() (int32, error) {
	b, _, err := v.conn.Get("/controller_epoch")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return int32(n), err
}

// Controller reads the controller's broker id from /controller.
func (v *ZKView) Controller() (int32, error) {
	b, _, err := v.conn.Get("/controller")
	if err != nil {
		return -1, err
	}
	var c struct {
		BrokerID int32 `json:"brokerid"`
	}
	return c.BrokerID, json.Unmarshal(b, &c)
}

// Registered lists the broker ids in /brokers/ids.
func (v *ZKView) Registered() ([]int32, error) {
	kids, _, err := v.conn.Children("/brokers/ids")
	if err != nil {
		return nil, err
	}
	var out []int32
	for _, k := range kids {
		if n, err := strconv.Atoi(k); err == nil {
			out = append(out, int32(n))
		}
	}
	slices.Sort(out)
	return out, nil
}

// WatchEpochs polls partition states and the controller epoch every
// interval until ctx ends, recording every change it sees.
func (v *ZKView) WatchEpochs(ctx context.Context, rec *Recorder, topic string, partitions int32, interval time.Duration) {
	last := map[int32]string{}
	lastCE := int32(-1)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if ce, err := v.ControllerEpoch(); err == nil && ce != lastCE {
			rec.Add(Event{Kind: KindEpoch, Partition: -1, ControllerEpoch: ce})
			lastCE = ce
		}
		for p := int32(0); p < partitions; p++ {
			s, err := v.State(topic, p)
			if err != nil {
				continue
			}
			key := fmt.Sprint(s)
			if key == last[p] {
				continue
			}
			last[p] = key
			rec.Add(Event{Kind: KindEpoch, Partition: p, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, ControllerEpoch: s.ControllerEpoch, ISR: s.ISR})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ReplicaCheck compares, for one partition, the log of every ISR member
// with the leader's up to hw, byte for byte, reading the partition
// directories with the segment package (call it after the brokers
// stopped). It records one KindReplica event per ISR member, whose Topic is
// label (empty for the main topic).
func ReplicaCheck(rec *Recorder, c *Cluster, topic, label string, p int32, st PartitionState, hw int64) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	read := func(id int32) ([]byte, error) {
		dir := filepath.Join(c.Broker(id).LogDir, fmt.Sprintf("%s-%d", topic, p))
		l, err := segment.Open(dir, segment.Config{RetentionTime: -1, RetentionBytes: -1}, false, logger)
		if err != nil {
			return nil, err
		}
		defer l.Close()
		if l.EndOffset() < hw {
			return nil, fmt.Errorf("log ends at %d, below the high watermark %d", l.EndOffset(), hw)
		}
		if l.StartOffset() > 0 {
			return nil, fmt.Errorf("log starts at %d", l.StartOffset())
		}
		return l.Read(0, 1<<31-1, hw, true)
	}
	ref := st.Leader
	if !slices.Contains(st.ISR, ref) && len(st.ISR) > 0 {
		ref = st.ISR[0]
	}
	want, err := read(ref)
	if err != nil {
		rec.Add(Event{Kind: KindReplica, Topic: label, Proc: fmt.Sprintf("b%d", ref), Partition: p, Offset: hw, Outcome: Fail, Detail: fmt.Sprintf("reference replica b%d: %v", ref, err)})
		return
	}
	for _, id := range st.ISR {
		got, err := read(id)
		e := Event{Kind: KindReplica, Topic: label, Proc: fmt.Sprintf("b%d", id), Partition: p, Offset: hw, Outcome: OK,
			Detail: fmt.Sprintf("%d bytes up to HW %d identical to b%d", len(got), hw, ref)}
		switch {
		case err != nil:
			e.Outcome, e.Detail = Fail, err.Error()
		case !bytes.Equal(got, want):
			e.Outcome = Fail
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			e.Detail = fmt.Sprintf("log up to HW %d differs from b%d's: %d vs %d bytes, first difference at byte %d", hw, ref, len(got), len(want), i)
		}
		rec.Add(e)
	}
}
