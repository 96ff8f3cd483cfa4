package zk

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/zktest"
)

// multiReadAnswer encodes a multiRead answer body as ZooKeeper's
// MultiResponse.serialize does: per read a header (type, done, err) and
// its record, then the done header.
type multiReadAnswer struct{ e juteEncoder }

func (a *multiReadAnswer) data(data []byte, version int32) *multiReadAnswer {
	a.e.int32(opGetDataCode)
	a.e.bool(false)
	a.e.int32(0)
	a.e.buffer(data)
	for range 4 {
		a.e.int64(7) // czxid, mzxid, ctime, mtime
	}
	a.e.int32(version)
	a.e.int32(0)
	a.e.int32(0)
	a.e.int64(0)
	a.e.int32(int32(len(data)))
	a.e.int32(0)
	a.e.int64(9)
	return a
}

func (a *multiReadAnswer) children(names ...string) *multiReadAnswer {
	a.e.int32(opGetChildrenCode)
	a.e.bool(false)
	a.e.int32(0)
	a.e.int32(int32(len(names)))
	for _, n := range names {
		a.e.string(n)
	}
	return a
}

func (a *multiReadAnswer) failed(code int32) *multiReadAnswer {
	a.e.int32(opErrorCode)
	a.e.bool(false)
	a.e.int32(code)
	a.e.int32(code)
	return a
}

func (a *multiReadAnswer) done() []byte {
	a.e.int32(-1)
	a.e.bool(true)
	a.e.int32(-1)
	return a.e.frame()[4:]
}

func TestDecodeMultiRead(t *testing.T) {
	three := []readOp{{path: "/a"}, {path: "/b", children: true}, {path: "/c"}}
	full := (&multiReadAnswer{}).data([]byte(`{"leader":1}`), 4).children("0", "1").failed(zkErrNoNode).done()
	for _, tc := range []struct {
		name string
		body []byte
		ops  []readOp
		want []znodeRead
		err  string
	}{
		{name: "data, children, missing", body: full, ops: three, want: []znodeRead{
			{data: []byte(`{"leader":1}`), version: 4}, {children: []string{"0", "1"}}, {err: ErrNoNode}}},
		{name: "another error", body: (&multiReadAnswer{}).failed(-102).done(), ops: three[:1], want: []znodeRead{{err: &ServerError{Code: -102}}}},
		{name: "fewer answers than reads", body: (&multiReadAnswer{}).data(nil, 0).done(), ops: three, err: "answered 1 of 3"},
		{name: "more answers than reads", body: full, ops: three[:2], err: "more than the 2 reads"},
		{name: "children where data was asked", body: (&multiReadAnswer{}).children("x").done(), ops: three[:1], err: "answered type 8"},
		{name: "cut short", body: full[:len(full)-20], ops: three, err: "short ZooKeeper answer"},
		{name: "empty", body: nil, ops: three, err: "short ZooKeeper answer"},
		{name: "absurd child count", body: func() []byte {
			var e juteEncoder
			e.int32(opGetChildrenCode)
			e.bool(false)
			e.int32(0)
			e.int32(1 << 30)
			return e.frame()[4:]
		}(), ops: three[1:2], err: "children"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]znodeRead, len(tc.ops))
			err := decodeMultiRead(tc.body, tc.ops, out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range out {
				if !errors.Is(out[i].err, tc.want[i].err) && !reflect.DeepEqual(out[i].err, tc.want[i].err) {
					t.Fatalf("read %d: error %v, want %v", i, out[i].err, tc.want[i].err)
				}
				out[i].err, tc.want[i].err = nil, nil
			}
			if !reflect.DeepEqual(out, tc.want) {
				t.Fatalf("got %+v, want %+v", out, tc.want)
			}
		})
	}
}

// A bulk read (multiRead on its own session) finds what one getData per
// znode finds: assignments, configs, states with their versions, missing
// state znodes, a deleted topic, a damaged znode, under a chroot.
func TestReadTopicsBulkMatchesEach(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, zk.Addr()+"/kafka")
	raw := rawConn(t, zk.Addr())
	cepoch, v := mustElect(t, ctx, s)
	mk := func(name string, n int32, configs map[string]string) {
		id, _ := ParseTopicID(fmt.Sprintf("AAAAAAAAAAAAA7SrBWaJ%02d", n%100))
		nt := NewTopic{Name: name, ID: id, Assignment: map[int32][]int32{}, States: map[int32]PartitionState{}, Configs: configs}
		for p := range n {
			nt.Assignment[p] = []int32{p%3 + 1, (p+1)%3 + 1}
			nt.States[p] = PartitionState{Leader: p%3 + 1, ISR: []int32{p%3 + 1, (p+1)%3 + 1}, ControllerEpoch: cepoch}
		}
		if err := s.CreateTopic(ctx, v, nt); err != nil {
			t.Fatal(err)
		}
	}
	mk("big", 2500, nil) // three multiRead requests of states
	mk("small", 2, map[string]string{"retention.ms": "1000"})
	mk("damaged", 3, nil)
	// big's partition 17 moved on (version 1), partition 18 lost its state.
	st, err := s.PartitionState(ctx, "big", 17)
	if err != nil {
		t.Fatal(err)
	}
	st.LeaderEpoch = 3
	if res, err := s.SetPartitionStates(ctx, v, PartitionUpdate{TopicPartition{"big", 17}, st}); err != nil || res[0].Err != nil {
		t.Fatal(res, err)
	}
	if err := raw.Delete("/kafka"+PartitionStatePath("big", 18), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Set("/kafka"+PartitionStatePath("damaged", 1), []byte("{not json"), -1); err != nil {
		t.Fatal(err)
	}
	names := []string{"big", "small", "damaged", "gone"}

	start := time.Now()
	bulk, err := s.readTopicsBulk(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	bulkTook := time.Since(start)
	start = time.Now()
	each, err := s.readTopicsEach(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d partitions: bulk read %v, one getData each %v", 2505, bulkTook, time.Since(start))

	big := bulk["big"]
	if big.Err != nil || len(big.States) != 2499 || big.States[17].ZkVersion != 1 || big.States[17].LeaderEpoch != 3 ||
		big.States[16].ZkVersion != 0 || !slices.Equal(big.States[2499].ISR, []int32{1, 2}) || len(big.Assignment.Partitions) != 2500 {
		t.Fatalf("big: %v, %d states, 17: %+v, 16: %+v", big.Err, len(big.States), big.States[17], big.States[16])
	}
	if _, ok := big.States[18]; ok {
		t.Fatal("partition 18 has a state after its znode was deleted")
	}
	if small := bulk["small"]; small.Err != nil || small.Configs["retention.ms"] != "1000" || len(small.States) != 2 {
		t.Fatalf("small: %+v", small)
	}
	if d := bulk["damaged"]; !errors.Is(d.Err, ErrMalformed) || !strings.Contains(d.Err.Error(), "/kafka/brokers/topics/damaged/partitions/1/state") {
		t.Fatalf("damaged: %v", d.Err)
	}
	if g := bulk["gone"]; !errors.Is(g.Err, ErrTopicNotFound) {
		t.Fatalf("gone: %v", g.Err)
	}
	for _, n := range names {
		b, e := bulk[n], each[n]
		if (b.Err == nil) != (e.Err == nil) || (b.Err != nil && b.Err.Error() != e.Err.Error()) {
			t.Fatalf("%s: bulk error %v, each %v", n, b.Err, e.Err)
		}
		if b.Err != nil {
			continue
		}
		if !reflect.DeepEqual(b.Assignment, e.Assignment) || !maps.Equal(b.Configs, e.Configs) || !reflect.DeepEqual(b.States, e.States) {
			t.Fatalf("%s: bulk %+v, each %+v", n, b, e)
		}
	}
	// PartitionStates of a big topic goes the bulk way, same answer.
	states, err := s.PartitionStates(ctx, "big")
	if err != nil || !reflect.DeepEqual(states, each["big"].States) {
		t.Fatalf("PartitionStates: %d states, %v", len(states), err)
	}
}

// oldServer is a ZooKeeper server before 3.6 as a bulk read session sees
// it: it grants the session and answers sync, and either refuses multiRead
// (UNIMPLEMENTED) or drops the connection on it.
func oldServer(t *testing.T, dropOnMultiRead bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				b := &bulkReader{conn: conn, r: bufio.NewReader(conn)}
				if _, err := b.readFrame(); err != nil { // ConnectRequest
					return
				}
				var e juteEncoder
				e.int32(0)
				e.int32(3000)
				e.int64(1)
				e.buffer(make([]byte, 16))
				conn.Write(e.frame())
				for {
					frame, err := b.readFrame()
					if err != nil {
						return
					}
					d := juteDecoder{buf: frame}
					xid, op := d.int32(), d.int32()
					var r juteEncoder
					r.int32(xid)
					r.int64(5)
					switch op {
					case opSyncCode:
						r.int32(0)
						r.string("/")
					case opMultiReadCode:
						if dropOnMultiRead {
							return
						}
						r.int32(-6) // UNIMPLEMENTED
					default:
						r.int32(0)
					}
					conn.Write(r.frame())
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// Against a server that cannot multiRead, reads fall back to one getData
// per znode on the Store's session and find the same.
func TestBulkReadFallsBack(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, zk.Addr())
	cepoch, v := mustElect(t, ctx, s)
	id, _ := ParseTopicID("AAAAAAAAAAAAA7SrBWaJ7g")
	nt := NewTopic{Name: "t", ID: id, Assignment: map[int32][]int32{}, States: map[int32]PartitionState{}, Configs: map[string]string{"retention.ms": "5"}}
	for p := range int32(bulkReadMin + 10) {
		nt.Assignment[p] = []int32{1, 2}
		nt.States[p] = PartitionState{Leader: 2, ISR: []int32{2, 1}, ControllerEpoch: cepoch}
	}
	if err := s.CreateTopic(ctx, v, nt); err != nil {
		t.Fatal(err)
	}
	want, err := s.ReadTopics(ctx, []string{"t", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	for _, drop := range []bool{false, true} {
		s.bulkServer = oldServer(t, drop)
		if _, err := s.readTopicsBulk(ctx, []string{"t"}); err == nil {
			t.Fatalf("drop %v: a bulk read from a server without multiRead succeeded", drop)
		} else if !drop && !strings.Contains(err.Error(), "error code -6") {
			t.Fatalf("refused multiRead: %v", err)
		}
		got, err := s.ReadTopics(ctx, []string{"t", "gone"})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got["t"], want["t"]) || len(got["t"].States) != bulkReadMin+10 || !errors.Is(got["gone"].Err, ErrTopicNotFound) {
			t.Fatalf("drop %v: fallback read %d states, gone: %v", drop, len(got["t"].States), got["gone"].Err)
		}
		states, err := s.PartitionStates(ctx, "t")
		if err != nil || !reflect.DeepEqual(states, want["t"].States) {
			t.Fatalf("drop %v: PartitionStates fell back to %d states, %v", drop, len(states), err)
		}
	}
}
