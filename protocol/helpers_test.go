package protocol

import (
	"encoding/binary"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// supportedAll advertises every key kmsg knows, at every version it knows.
func supportedAll(key int16) (int16, int16, bool) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return 0, 0, false
	}
	return 0, req.MaxVersion(), true
}

// encodeRequest builds a request frame by hand (size prefix excluded), with
// the header version Kafka uses, so the tests do not depend on kmsg's
// RequestFormatter to agree with the parser.
func encodeRequest(req kmsg.Request, correlationID int32, clientID *string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	hv := int16(1)
	if req.IsFlexible() {
		hv = 2
	}
	if req.Key() == 7 && req.GetVersion() == 0 {
		hv = 0
	}
	if hv >= 1 {
		if clientID == nil {
			b = binary.BigEndian.AppendUint16(b, 0xffff)
		} else {
			b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
			b = append(b, *clientID...)
		}
	}
	if hv >= 2 {
		b = append(b, 0) // no tagged fields
	}
	return req.AppendTo(b)
}

// makeBatch builds a valid, uncompressed v2 batch of n small records with a
// correct CRC, after letting mutate adjust the header first.
func makeBatch(n int, mutate func(*kmsg.RecordBatch)) []byte {
	var records []byte
	for i := range n {
		var rec []byte
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, int64(i)) // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, -1)       // null key
		rec = binary.AppendVarint(rec, 5)        // value length
		rec = append(rec, "value"...)            // value
		rec = binary.AppendVarint(rec, 0)        // no headers
		records = binary.AppendVarint(records, int64(len(rec)))
		records = append(records, rec...)
	}
	b := kmsg.RecordBatch{
		Magic:           2,
		LastOffsetDelta: int32(n - 1),
		FirstTimestamp:  1700000000000,
		MaxTimestamp:    1700000000000 + int64(n-1),
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(n),
		Records:         records,
	}
	if mutate != nil {
		mutate(&b)
	}
	b.Length = int32(recordbatch.HeaderSize - recordbatch.LogOverhead + len(b.Records))
	out := b.AppendTo(nil)
	if b.Magic == 2 {
		recordbatch.SetCRC(out)
	}
	return out
}

func strPtr(s string) *string { return &s }

// sampleRequests are real requests of several APIs, flexible and not, used
// by the parse tests, the truncation test and the fuzz seed corpus.
func sampleRequests() []kmsg.Request {
	var out []kmsg.Request

	av0 := kmsg.NewPtrApiVersionsRequest()
	out = append(out, av0)
	av3 := kmsg.NewPtrApiVersionsRequest()
	av3.Version = 3
	av3.ClientSoftwareName = "kgo"
	av3.ClientSoftwareVersion = "1.22.3"
	out = append(out, av3)

	md1 := kmsg.NewPtrMetadataRequest()
	md1.Version = 1
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = strPtr("orders")
	md1.Topics = append(md1.Topics, t)
	out = append(out, md1)
	md12 := kmsg.NewPtrMetadataRequest()
	md12.Version = 12
	md12.Topics = append(md12.Topics, t)
	md12.AllowAutoTopicCreation = true
	out = append(out, md12)

	for _, v := range []int16{3, 9} {
		p := kmsg.NewPtrProduceRequest()
		p.Version = v
		p.Acks = -1
		p.TimeoutMillis = 30000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "orders"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = 0
		pp.Records = makeBatch(2, nil)
		pt.Partitions = append(pt.Partitions, pp)
		p.Topics = append(p.Topics, pt)
		out = append(out, p)
	}

	for _, v := range []int16{4, 12} {
		f := kmsg.NewPtrFetchRequest()
		f.Version = v
		f.ReplicaID = -1
		f.MaxWaitMillis = 500
		f.MinBytes = 1
		f.MaxBytes = 50 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "orders"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = 0
		fp.FetchOffset = 42
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		out = append(out, f)
	}

	for _, v := range []int16{1, 7} {
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.Version = v
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "orders"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		lo.Topics = append(lo.Topics, lt)
		out = append(out, lo)
	}

	for _, v := range []int16{2, 5} {
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version = v
		ct.TimeoutMillis = 1000
		c := kmsg.NewCreateTopicsRequestTopic()
		c.Topic = "orders"
		c.NumPartitions = 3
		c.ReplicationFactor = 3
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name = "min.insync.replicas"
		cfg.Value = strPtr("2")
		c.Configs = append(c.Configs, cfg)
		ct.Topics = append(ct.Topics, c)
		out = append(out, ct)
	}

	for _, v := range []int16{2, 6} {
		jg := kmsg.NewPtrJoinGroupRequest()
		jg.Version = v
		jg.Group = "g"
		jg.SessionTimeoutMillis = 10000
		jg.RebalanceTimeoutMillis = 60000
		jg.ProtocolType = "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		p.Metadata = []byte{0, 1, 0, 0, 0, 1, 0, 6, 'o', 'r', 'd', 'e', 'r', 's', 0, 0, 0, 0}
		jg.Protocols = append(jg.Protocols, p)
		out = append(out, jg)
	}

	cs0 := kmsg.NewPtrControlledShutdownRequest()
	cs0.BrokerID = 2
	out = append(out, cs0)

	return out
}
