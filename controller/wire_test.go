package controller

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestUpdateMetadataRoundTrip(t *testing.T) {
	md := &Metadata{
		ClusterID:    "abc",
		ControllerID: 2,
		Brokers: []BrokerInfo{
			// Every listener travels, the inter-broker one first.
			BrokerInfo{ID: 1, Rack: "r1"}.withEndpoints([]Endpoint{
				{Listener: "BROKER", SecurityProtocol: "SASL_SSL", Host: "127.0.0.1", Port: 9001},
				{Listener: "CLIENT", SecurityProtocol: "SSL", Host: "kafka", Port: 29001},
				{Listener: "HOST", SecurityProtocol: "SASL_PLAINTEXT", Host: "localhost", Port: 19001},
			}),
			BrokerInfo{ID: 2}.withEndpoints([]Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 9002}}),
		},
		Topics: map[string]*Topic{
			"a": {Name: "a", ID: [16]byte{1}, Configs: map[string]string{"retention.ms": "100"}, Partitions: []PartitionState{
				{Replicas: []int32{1, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1}},
				{Replicas: []int32{2}, Leader: 2, LeaderEpoch: 0, ISR: []int32{2}},
			}},
			"b": {Name: "b", ID: [16]byte{2}, Partitions: []PartitionState{{Replicas: []int32{3}, Leader: -1, LeaderEpoch: 1, ISR: []int32{3}}}},
		},
	}
	req := EncodeUpdateMetadata(md, 7)
	// Through the wire encoding, as a broker receives it.
	wire := req.AppendTo(nil)
	got := kmsg.NewPtrUpdateMetadataRequest()
	got.Version = req.Version
	if err := got.ReadFrom(wire); err != nil {
		t.Fatal(err)
	}
	if got.ControllerEpoch != 7 {
		t.Fatalf("controller epoch %d", got.ControllerEpoch)
	}
	back, err := DecodeUpdateMetadata(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, md) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", back, md)
	}
	if off := got.TopicStates[0].PartitionStates[0].OfflineReplicas; !reflect.DeepEqual(off, []int32{3}) {
		t.Fatalf("offline replicas %v", off)
	}
}

func TestDecodeUpdateMetadataRejectsBadInput(t *testing.T) {
	req := kmsg.NewPtrUpdateMetadataRequest()
	req.Version = 7
	ts := kmsg.NewUpdateMetadataRequestTopicState()
	ts.Topic = "x"
	ps := kmsg.NewUpdateMetadataRequestTopicPartition()
	ps.Partition = 5
	ts.PartitionStates = append(ts.PartitionStates, ps)
	req.TopicStates = append(req.TopicStates, ts)
	if _, err := DecodeUpdateMetadata(req); err == nil {
		t.Fatal("a partition outside the topic must be an error")
	}
	req.Version = 5
	if _, err := DecodeUpdateMetadata(req); err == nil {
		t.Fatal("old versions must be refused")
	}
}
