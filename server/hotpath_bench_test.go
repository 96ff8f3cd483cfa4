package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The hot-path benchmarks drive one connection of a real broker (handlers,
// replica, segment files) over loopback TCP with what a producer or
// consumer at a fixed rate sends: many small requests, one in flight. They
// measure the broker's per-request cost (and, run under callgrind, its
// instructions per request, which a shared machine does not disturb).

const hotPartitions = 6

// hotConn is a client connection to a broker serving it with serveConn.
type hotConn struct {
	c    net.Conn
	r    *bufio.Reader
	corr int32
	out  []byte
	in   []byte
}

func newHotConn(tb testing.TB, topic string) (*Broker, *hotConn) {
	tb.Helper()
	b := newAdminTestBroker(tb)
	mustCreateTopic(tb, b, topic, hotPartitions, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer c.Close()
		b.serveConn(ctx, c, &connState{listener: "PLAINTEXT"}, &listener{name: "PLAINTEXT", protocol: "PLAINTEXT"})
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		cancel()
		<-done
	})
	return b, &hotConn{c: c, r: bufio.NewReaderSize(c, 1<<20)}
}

// roundTrip sends req (a non-flexible version: header v1) and returns the
// response body.
func (h *hotConn) roundTrip(req kmsg.Request) ([]byte, error) {
	h.corr++
	out := append(h.out[:0], 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint16(out, uint16(req.Key()))
	out = binary.BigEndian.AppendUint16(out, uint16(req.GetVersion()))
	out = binary.BigEndian.AppendUint32(out, uint32(h.corr))
	out = binary.BigEndian.AppendUint16(out, 5)
	out = append(out, "bench"...)
	out = req.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	h.out = out
	if _, err := h.c.Write(out); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(h.r, size[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(h.in) < n {
		h.in = make([]byte, n)
	}
	h.in = h.in[:n]
	if _, err := io.ReadFull(h.r, h.in); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(h.in)); corr != h.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, h.corr)
	}
	return h.in[4:], nil
}

// hotBatch is one batch of one 1 KiB record, as a producer at a fixed rate
// sends it.
func hotBatch() []byte {
	return recordbatch.Build(recordbatch.NoProducer(), []recordbatch.Record{{Value: make([]byte, 1024)}})
}

func hotProduceRequest(topic string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 8, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := range int32(hotPartitions) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, hotBatch()
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func checkProduce(body []byte) error {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 8
	if err := resp.ReadFrom(body); err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("produce %s[%d]: error %d", t.Topic, p.Partition, p.ErrorCode)
			}
		}
	}
	return nil
}

// BenchmarkHotProduce: one produce request per op, acks=1, one batch of one
// 1 KiB record for each of 6 partitions.
func BenchmarkHotProduce(b *testing.B) {
	_, h := newHotConn(b, "hot")
	req := hotProduceRequest("hot")
	body, err := h.roundTrip(req)
	if err == nil {
		err = checkProduce(body)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := h.roundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	body, err = h.roundTrip(req)
	if err == nil {
		err = checkProduce(body)
	}
	if err != nil {
		b.Fatal(err)
	}
}

// hotFetchBatches is how many batches BenchmarkHotFetch writes to each
// partition before it fetches them, over and over: the same whatever b.N,
// so that two runs' instruction counts differ by their ops only.
const hotFetchBatches = 2048

// BenchmarkHotFetch: one fetch request per op in an incremental fetch
// session (as franz-go fetches), each of 6 partitions asked from the next
// offset and answered with one batch of one 1 KiB record.
func BenchmarkHotFetch(b *testing.B) {
	_, h := newHotConn(b, "hot")
	req := hotProduceRequest("hot")
	for range hotFetchBatches {
		if _, err := h.roundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 11, -1, 500, 1, 50<<20
	fetch.SessionID, fetch.SessionEpoch = 0, 0 // a new session
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "hot"
	for p := range int32(hotPartitions) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.LogStartOffset, fp.CurrentLeaderEpoch = p, 0, 2000, -1, -1 // one batch
		ft.Partitions = append(ft.Partitions, fp)
	}
	fetch.Topics = append(fetch.Topics, ft)
	check := func(body []byte, offset int64) error {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 11
		if err := resp.ReadFrom(body); err != nil {
			return err
		}
		if resp.ErrorCode != 0 || resp.SessionID == 0 {
			return fmt.Errorf("fetch: error %d, session %d", resp.ErrorCode, resp.SessionID)
		}
		fetch.SessionID = resp.SessionID
		n := 0
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				h, err := recordbatch.ParseHeader(p.RecordBatches)
				if p.ErrorCode != 0 || err != nil || h.BaseOffset != offset {
					return fmt.Errorf("fetch %s[%d] at %d: error %d, batch %+v, %v", t.Topic, p.Partition, offset, p.ErrorCode, h, err)
				}
				n++
			}
		}
		if n != hotPartitions {
			return fmt.Errorf("fetch at %d: %d partitions answered", offset, n)
		}
		return nil
	}
	next := func(offset int64) {
		fetch.SessionEpoch++
		for i := range fetch.Topics[0].Partitions {
			fetch.Topics[0].Partitions[i].FetchOffset = offset
		}
	}
	body, err := h.roundTrip(fetch)
	if err == nil {
		err = check(body, 0)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		next(int64((i + 1) % hotFetchBatches))
		if _, err := h.roundTrip(fetch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	last := int64((b.N + 1) % hotFetchBatches)
	next(last)
	body, err = h.roundTrip(fetch)
	if err == nil {
		err = check(body, last)
	}
	if err != nil {
		b.Fatal(err)
	}
}
