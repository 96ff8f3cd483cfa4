package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
	"github.com/kbroker/kbroker/internal/sendfile"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The instant target (--instant) is a stand-in broker in its own process
// that does no work at all: it answers every Fetch at once with one batch
// held in memory (never copied: only its base offset differs per
// partition), for every partition asked. No broker serves a consumer faster, so its consume
// figure is the ceiling the client itself sets on this machine. It only
// serves ApiVersions, Metadata and Fetch: kbench skips topic creation and
// producing for it and measures consumption only.

// instantAPIs are the APIs and versions the stand-in answers (Fetch below
// v13, so that topics are named rather than given by id).
var instantAPIs = map[int16][2]int16{
	kmsg.ApiVersions.Int16(): {0, 3},
	kmsg.Metadata.Int16():    {0, 12},
	kmsg.Fetch.Int16():       {4, 12},
}

// instantBatch is one uncompressed batch of records of recordSize bytes,
// about batchBytes long (the size a producer going as fast as it can
// sends).
func instantBatch(pool *valuePool, recordSize, batchBytes int) []byte {
	n := max(1, batchBytes/(recordSize+16))
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i].Value = pool.value(i)
	}
	spec := recordbatch.NoProducer()
	spec.FirstTimestamp = time.Now().UnixMilli()
	return recordbatch.Build(spec, recs)
}

// serveInstant runs the stand-in on addr until the process is killed.
func serveInstant(addr string, partitions, recordSize, batchBytes int) error {
	pool, err := newValuePool(recordSize)
	if err != nil {
		return err
	}
	batch := instantBatch(pool, recordSize, batchBytes)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			if err := serveInstantConn(c, addr, int32(partitions), batch); !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "kbench instant:", err)
			}
		}()
	}
}

func serveInstantConn(c net.Conn, addr string, partitions int32, batch []byte) error {
	host, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	versions := func(key int16) (int16, int16, bool) {
		v, ok := instantAPIs[key]
		return v[0], v[1], ok
	}
	apiKeys := func() []kmsg.ApiVersionsResponseApiKey {
		var keys []kmsg.ApiVersionsResponseApiKey
		for k, v := range instantAPIs {
			keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: v[0], MaxVersion: v[1]})
		}
		return keys
	}
	r := bufio.NewReaderSize(c, 64<<10)
	var out []byte
	for {
		frame, err := protocol.ReadFrame(r, 100<<20, nil)
		if err != nil {
			return err
		}
		hdr, req, err := protocol.ParseRequest(frame, versions)
		var resp kmsg.Response
		switch q := req.(type) {
		case nil:
			if hdr.APIKey != kmsg.ApiVersions.Int16() {
				return fmt.Errorf("request %d v%d: %w", hdr.APIKey, hdr.APIVersion, err)
			}
			av := kmsg.NewPtrApiVersionsResponse() // v0, so the client downgrades
			av.ErrorCode, av.ApiKeys = 35, apiKeys()
			resp = av
		case *kmsg.ApiVersionsRequest:
			av := q.ResponseKind().(*kmsg.ApiVersionsResponse)
			av.ApiKeys = apiKeys()
			resp = av
		case *kmsg.MetadataRequest:
			md := q.ResponseKind().(*kmsg.MetadataResponse)
			md.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(port)}}
			for _, t := range q.Topics {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = t.Topic
				for p := int32(0); p < partitions; p++ {
					mp := kmsg.NewMetadataResponseTopicPartition()
					mp.Partition, mp.Replicas, mp.ISR = p, []int32{0}, []int32{0}
					mt.Partitions = append(mt.Partitions, mp)
				}
				md.Topics = append(md.Topics, mt)
			}
			resp = md
		case *kmsg.FetchRequest:
			// The batch is never copied: each partition's records are its
			// own 8-byte base offset followed by the shared rest of the
			// batch, written with writev.
			fr := q.ResponseKind().(*kmsg.FetchResponse)
			var records [][]sendfile.Chunks
			var size int
			for _, t := range q.Topics {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = t.Topic
				var recs []sendfile.Chunks
				for _, p := range t.Partitions {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition = p.Partition
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 1<<50, 1<<50, 0
					rp.RecordBatches = []byte{}
					var cs sendfile.Chunks
					if size+len(batch) <= int(q.MaxBytes) || size == 0 {
						base := binary.BigEndian.AppendUint64(nil, uint64(p.FetchOffset))
						cs = sendfile.Chunks{{Data: base}, {Data: batch[8:]}}
						size += len(batch)
					}
					rt.Partitions = append(rt.Partitions, rp)
					recs = append(recs, cs)
				}
				fr.Topics = append(fr.Topics, rt)
				records = append(records, recs)
			}
			chunks, grown, err := protocol.FetchResponseChunks(out[:0], hdr.CorrelationID, fr, records)
			out = grown
			if err != nil {
				return err
			}
			if _, err := sendfile.WriteTo(c, chunks); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("unexpected request %s", kmsg.NameForKey(hdr.APIKey))
		}
		out = protocol.AppendResponse(out[:0], hdr.CorrelationID, resp)
		if _, err := c.Write(out); err != nil {
			return err
		}
	}
}

// startInstant starts a stand-in (kbench's own binary, run with the
// hidden --serve-instant flag) and waits until it answers.
func startInstant(ctx context.Context, cfg *config) (*brokerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := launch.FreePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := launch.Start(launch.Spec{
		Path: self,
		Args: []string{"--serve-instant", addr, "--partitions", strconv.Itoa(cfg.partitions),
			"--record-size", strconv.Itoa(cfg.recordSize), "--batch-max-bytes", strconv.Itoa(cfg.batchMax)},
		Stderr: os.Stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("start the instant stand-in: %w", err)
	}
	b := &brokerProc{proc: p, addr: addr}
	wctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	if err := launch.WaitReady(wctx, p, probeEvery, func() error { return launch.KafkaPing(addr, probeTimeout) }); err != nil {
		b.stop()
		return nil, fmt.Errorf("instant stand-in not answering on %s: %w", addr, err)
	}
	return b, nil
}
