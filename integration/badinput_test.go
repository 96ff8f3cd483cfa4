package integration

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Bad input over raw TCP: malformed frames close the connection, invalid
// requests get Kafka's error codes, and after each case the broker still
// serves a fresh client.

const rawTimeout = 10 * time.Second

// rawConn is one hand-driven Kafka connection.
type rawConn struct {
	t    testing.TB
	conn net.Conn
	corr int32
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, rawTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c}
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	rc.conn.SetWriteDeadline(time.Now().Add(rawTimeout))
	if _, err := rc.conn.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// frame encodes a request with a v1 header (v2 when the request version is
// flexible) behind its int32 size, the way a client does.
func frame(key, version int16, corr int32, flexible bool, body []byte) []byte {
	b := make([]byte, 4, 64+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	const clientID = "kbroker-badinput"
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if flexible {
		b = append(b, 0) // no tagged fields
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// send frames and writes req, returning its correlation id.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	rc.write(frame(req.Key(), req.GetVersion(), rc.corr, req.IsFlexible(), req.AppendTo(nil)))
	return rc.corr
}

// readFrame reads one response frame: correlation id and the rest.
func (rc *rawConn) readFrame() (int32, []byte, error) {
	rc.conn.SetReadDeadline(time.Now().Add(rawTimeout))
	var size [4]byte
	if _, err := io.ReadFull(rc.conn, size[:]); err != nil {
		return 0, nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 64<<20 {
		return 0, nil, fmt.Errorf("response frame size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(rc.conn, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// skipTags skips a tagged field section.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errors.New("bad tagged field count")
	}
	b = b[l:]
	for i := uint64(0); i < n; i++ {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[l+int(size):]
	}
	return b, nil
}

// read reads the response to the request with correlation id corr into
// resp, whose version must be set.
func (rc *rawConn) read(corr int32, resp kmsg.Response) {
	rc.t.Helper()
	got, body, err := rc.readFrame()
	if err != nil {
		rc.t.Fatalf("reading response to %s (correlation id %d): %v", kmsg.NameForKey(resp.Key()), corr, err)
	}
	if got != corr {
		rc.t.Fatalf("response correlation id %d, want %d (%s)", got, corr, kmsg.NameForKey(resp.Key()))
	}
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		if body, err = skipTags(body); err != nil {
			rc.t.Fatalf("%s response header: %v", kmsg.NameForKey(resp.Key()), err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
}

// roundTrip sends req and reads its response.
func (rc *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	corr := rc.send(req)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	rc.read(corr, resp)
	return resp
}

// expectClosed asserts that the broker closes the connection promptly,
// without answering.
func (rc *rawConn) expectClosed(within time.Duration) {
	rc.t.Helper()
	rc.conn.SetReadDeadline(time.Now().Add(within))
	start := time.Now()
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := rc.conn.Read(buf)
		got = append(got, buf[:n]...)
		if err == nil {
			continue
		}
		var ne net.Error
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			if len(got) > 0 {
				rc.t.Errorf("broker sent %d bytes before closing; want no response", len(got))
			}
			rc.t.Logf("connection closed by the broker after %v", time.Since(start).Round(time.Millisecond))
			return
		case errors.As(err, &ne) && ne.Timeout():
			rc.t.Fatalf("connection still open %v later (%d bytes received); want it closed", within, len(got))
		default:
			rc.t.Fatalf("reading: %v; want EOF or connection reset", err)
		}
	}
}

// brokerVersions asks the broker (ApiVersions v0) for its version ranges.
func brokerVersions(t testing.TB, addr string) map[int16][2]int16 {
	t.Helper()
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ApiVersions v0: %v", err)
	}
	out := make(map[int16][2]int16)
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	rc.conn.Close()
	return out
}

// pick returns min(preferred, the broker's max) for key.
func pick(t testing.TB, versions map[int16][2]int16, key kmsg.Key, preferred int16) int16 {
	t.Helper()
	r, ok := versions[key.Int16()]
	if !ok {
		t.Fatalf("broker does not advertise %s", kmsg.NameForKey(key.Int16()))
	}
	if preferred > r[1] {
		return r[1]
	}
	if preferred < r[0] {
		t.Fatalf("broker advertises %s v%d..v%d; the test needs v%d", kmsg.NameForKey(key.Int16()), r[0], r[1], preferred)
	}
	return preferred
}

// rawBatch builds an uncompressed v2 record batch of n records with
// valueSize-byte values and a correct CRC-32C.
func rawBatch(n, valueSize int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("raw-k%d", i)
		var r []byte
		r = append(r, 0)                     // attributes
		r = binary.AppendVarint(r, 0)        // timestamp delta
		r = binary.AppendVarint(r, int64(i)) // offset delta
		r = binary.AppendVarint(r, int64(len(key)))
		r = append(r, key...)
		r = binary.AppendVarint(r, int64(valueSize))
		r = append(r, bytes.Repeat([]byte{'v'}, valueSize)...)
		r = binary.AppendVarint(r, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	now := uint64(time.Now().UnixMilli())
	b := make([]byte, 0, 61+len(recs))
	b = binary.BigEndian.AppendUint64(b, 0)                    // base offset
	b = binary.BigEndian.AppendUint32(b, uint32(49+len(recs))) // batch length
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)           // partition leader epoch
	b = append(b, 2)                                           // magic
	b = binary.BigEndian.AppendUint32(b, 0)                    // crc, below
	b = binary.BigEndian.AppendUint16(b, 0)                    // attributes
	b = binary.BigEndian.AppendUint32(b, uint32(n-1))          // last offset delta
	b = binary.BigEndian.AppendUint64(b, now)                  // base timestamp
	b = binary.BigEndian.AppendUint64(b, now)                  // max timestamp
	b = binary.BigEndian.AppendUint64(b, 0xffffffffffffffff)   // producer id
	b = binary.BigEndian.AppendUint16(b, 0xffff)               // producer epoch
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)           // base sequence
	b = binary.BigEndian.AppendUint32(b, uint32(n))            // records count
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func produceRequest(version int16, acks int16, topic string, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// partitionErrors returns the error code of every partition in a produce
// response.
func partitionErrors(resp *kmsg.ProduceResponse) []int16 {
	var out []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

func TestBadInput(t *testing.T) {
	b := StartBroker(t, "message.max.bytes=10000", "auto.create.topics.enable=false")
	versions := brokerVersions(t, b.Addr())
	produceV := pick(t, versions, kmsg.Produce, 9)
	adm := b.Admin(t)

	run := func(name string, fn func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			fn(t)
			b.Ping(t) // the broker keeps serving other connections
		})
	}

	for _, size := range []uint32{0x7fffffff, 0xffffffff, 0x80000000} {
		size := size
		run(fmt.Sprintf("frame-size-%d", int32(size)), func(t *testing.T) {
			rc := dialRaw(t, b.Addr())
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], size)
			rc.write(append(hdr[:], frame(18, 0, 1, false, nil)[4:]...))
			rc.expectClosed(5 * time.Second)
		})
	}

	run("truncated-body", func(t *testing.T) {
		rc := dialRaw(t, b.Addr())
		req := produceRequest(produceV, -1, "truncated", rawBatch(10, 100))
		body := req.AppendTo(nil)
		rc.write(frame(req.Key(), req.Version, 1, req.IsFlexible(), body[:len(body)/2]))
		rc.expectClosed(5 * time.Second)
	})

	run("frame-cut-then-eof", func(t *testing.T) {
		rc := dialRaw(t, b.Addr())
		f := frame(3, 1, 1, false, []byte{0xff, 0xff, 0xff, 0xff})
		rc.write(f[:len(f)-3])
		if err := rc.conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		rc.expectClosed(5 * time.Second)
	})

	run("unknown-api-key-999", func(t *testing.T) {
		rc := dialRaw(t, b.Addr())
		rc.write(frame(999, 0, 1, false, []byte{0, 0, 0, 0}))
		rc.expectClosed(5 * time.Second)
	})

	run("api-versions-v99", func(t *testing.T) {
		rc := dialRaw(t, b.Addr())
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 99
		req.ClientSoftwareName = "kbroker-badinput"
		req.ClientSoftwareVersion = "1"
		corr := rc.send(req)
		// Whatever the request version, the answer is a v0 header and v0 body.
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		rc.read(corr, resp)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("error code %d, want %d UNSUPPORTED_VERSION", resp.ErrorCode, kerr.UnsupportedVersion.Code)
		}
		var apiVersions *kmsg.ApiVersionsResponseApiKey
		for i := range resp.ApiKeys {
			if resp.ApiKeys[i].ApiKey == kmsg.ApiVersions.Int16() {
				apiVersions = &resp.ApiKeys[i]
			}
		}
		if len(resp.ApiKeys) == 0 || apiVersions == nil {
			t.Errorf("UNSUPPORTED_VERSION answer lists %d API keys and no ApiVersions range; clients need it to downgrade", len(resp.ApiKeys))
		} else if apiVersions.MinVersion != 0 || apiVersions.MaxVersion < 3 {
			t.Errorf("ApiVersions advertised as v%d..v%d, want 0..>=3", apiVersions.MinVersion, apiVersions.MaxVersion)
		}
		// The client downgrades on the same connection.
		req0 := kmsg.NewPtrApiVersionsRequest()
		req0.Version = 0
		resp0 := rc.roundTrip(req0).(*kmsg.ApiVersionsResponse)
		if resp0.ErrorCode != 0 || len(resp0.ApiKeys) == 0 {
			t.Errorf("ApiVersions v0 after the downgrade: error code %d, %d keys", resp0.ErrorCode, len(resp0.ApiKeys))
		}
	})

	// endOffset of partition 0 of topic.
	endOffset := func(t *testing.T, topic string) int64 {
		t.Helper()
		return endOffsets(t, adm, topic)[0]
	}

	run("produce-bad-crc", func(t *testing.T) {
		const topic = "bad-crc"
		createTopic(t, adm, topic, 1, nil)
		rc := dialRaw(t, b.Addr())
		good := rc.roundTrip(produceRequest(produceV, -1, topic, rawBatch(3, 10))).(*kmsg.ProduceResponse)
		if codes := partitionErrors(good); len(codes) != 1 || codes[0] != 0 {
			t.Fatalf("valid hand-built batch: partition error codes %v, want [0]", codes)
		}
		bad := rawBatch(5, 10)
		bad[17] ^= 0xff // CRC
		resp := rc.roundTrip(produceRequest(produceV, -1, topic, bad)).(*kmsg.ProduceResponse)
		if codes := partitionErrors(resp); len(codes) != 1 || codes[0] != kerr.CorruptMessage.Code {
			t.Errorf("batch with a wrong CRC: partition error codes %v, want [%d] CORRUPT_MESSAGE", codes, kerr.CorruptMessage.Code)
		}
		bad = rawBatch(5, 10)
		bad[len(bad)-1] ^= 0x01 // a record byte under the CRC
		resp = rc.roundTrip(produceRequest(produceV, -1, topic, bad)).(*kmsg.ProduceResponse)
		if codes := partitionErrors(resp); len(codes) != 1 || codes[0] != kerr.CorruptMessage.Code {
			t.Errorf("batch with a changed record byte: partition error codes %v, want [%d] CORRUPT_MESSAGE", codes, kerr.CorruptMessage.Code)
		}
		if end := endOffset(t, topic); end != 3 {
			t.Errorf("end offset %d after corrupt batches, want 3 (only the valid batch)", end)
		}
	})

	run("message-too-large", func(t *testing.T) {
		const topic = "too-large"
		createTopic(t, adm, topic, 1, nil)
		rc := dialRaw(t, b.Addr())
		resp := rc.roundTrip(produceRequest(produceV, -1, topic, rawBatch(1, 20000))).(*kmsg.ProduceResponse)
		if codes := partitionErrors(resp); len(codes) != 1 || codes[0] != kerr.MessageTooLarge.Code {
			t.Errorf("20 kB batch with message.max.bytes=10000: partition error codes %v, want [%d] MESSAGE_TOO_LARGE", codes, kerr.MessageTooLarge.Code)
		}
		// Just under the limit is fine.
		resp = rc.roundTrip(produceRequest(produceV, -1, topic, rawBatch(1, 9000))).(*kmsg.ProduceResponse)
		if codes := partitionErrors(resp); len(codes) != 1 || codes[0] != 0 {
			t.Errorf("9 kB batch with message.max.bytes=10000: partition error codes %v, want [0]", codes)
		}
		if end := endOffset(t, topic); end != 1 {
			t.Errorf("end offset %d, want 1", end)
		}
	})

	run("invalid-acks", func(t *testing.T) {
		const topic = "bad-acks"
		createTopic(t, adm, topic, 1, nil)
		rc := dialRaw(t, b.Addr())
		resp := rc.roundTrip(produceRequest(produceV, 5, topic, rawBatch(2, 10))).(*kmsg.ProduceResponse)
		codes := partitionErrors(resp)
		if len(codes) == 0 {
			t.Errorf("acks=5: no partition in the response")
		}
		for _, c := range codes {
			if c != kerr.InvalidRequiredAcks.Code {
				t.Errorf("acks=5: partition error codes %v, want %d INVALID_REQUIRED_ACKS", codes, kerr.InvalidRequiredAcks.Code)
				break
			}
		}
		if end := endOffset(t, topic); end != 0 {
			t.Errorf("end offset %d after acks=5, want 0", end)
		}
	})

	run("unknown-topic-no-autocreate", func(t *testing.T) {
		const topic = "no-such-topic"
		rc := dialRaw(t, b.Addr())
		resp := rc.roundTrip(produceRequest(produceV, -1, topic, rawBatch(2, 10))).(*kmsg.ProduceResponse)
		if codes := partitionErrors(resp); len(codes) != 1 || codes[0] != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("produce to an unknown topic: partition error codes %v, want [%d] UNKNOWN_TOPIC_OR_PARTITION", codes, kerr.UnknownTopicOrPartition.Code)
		}
		// Metadata asking for auto-creation does not create it either.
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.Version = pick(t, versions, kmsg.Metadata, 9)
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mreq.Topics = append(mreq.Topics, mt)
		mreq.AllowAutoTopicCreation = true
		mresp := rc.roundTrip(mreq).(*kmsg.MetadataResponse)
		if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("metadata for an unknown topic with auto.create.topics.enable=false: %+v, want UNKNOWN_TOPIC_OR_PARTITION", mresp.Topics)
		}
	})

	run("create-topic-invalid-name", func(t *testing.T) {
		rc := dialRaw(t, b.Addr())
		for _, name := range []string{"bad/name", "..", "has space", strings.Repeat("a", 250)} {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version = pick(t, versions, kmsg.CreateTopics, 4)
			req.TimeoutMillis = 5000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = name
			rt.NumPartitions = 1
			rt.ReplicationFactor = 1
			req.Topics = append(req.Topics, rt)
			resp := rc.roundTrip(req).(*kmsg.CreateTopicsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
				t.Errorf("CreateTopics %.20q: %+v, want error %d INVALID_TOPIC_EXCEPTION", name, resp.Topics, kerr.InvalidTopicException.Code)
			}
		}
	})

	run("acks0-then-metadata", func(t *testing.T) {
		const topic = "acks-zero"
		createTopic(t, adm, topic, 1, nil)
		rc := dialRaw(t, b.Addr())
		rc.send(produceRequest(produceV, 0, topic, rawBatch(4, 10)))
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.Version = pick(t, versions, kmsg.Metadata, 9)
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mreq.Topics = append(mreq.Topics, mt)
		// The next frame must be the Metadata answer: no response for acks=0.
		mresp := rc.roundTrip(mreq).(*kmsg.MetadataResponse)
		if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
			t.Errorf("metadata after an acks=0 produce: %+v", mresp.Topics)
		}
		// And none arrives late either.
		areq := kmsg.NewPtrApiVersionsRequest()
		areq.Version = 0
		rc.roundTrip(areq)
		checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			if end := endOffset(t, topic); end != 4 {
				return fmt.Errorf("end offset %d, want 4 after the acks=0 produce", end)
			}
			return nil
		})
	})
}
