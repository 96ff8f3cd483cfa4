package zk

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The JSON below is Kafka's own: from its tests (BrokerEndPointTest), from
// what ZkData.scala's encoders write, and from `zkCli.sh get` on Kafka
// 2.x/3.x clusters.

func TestDecodeBrokerInfoKafkaFixtures(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		want BrokerInfo
	}{
		{"v1", `{"jmx_port":-1,"timestamp":"1420485325400","host":"172.16.8.243","version":1,"port":9091}`,
			BrokerInfo{ID: 1, Version: 1, JMXPort: -1, Timestamp: 1420485325400,
				Endpoints: []Endpoint{{"PLAINTEXT", "PLAINTEXT", "172.16.8.243", 9091}}}},
		{"v2", `{
      "version":2,
      "host":"localhost",
      "port":9092,
      "jmx_port":9999,
      "timestamp":"1416974968782",
      "endpoints":["PLAINTEXT://localhost:9092"]
    }`, BrokerInfo{ID: 1, Version: 2, JMXPort: 9999, Timestamp: 1416974968782,
			Endpoints: []Endpoint{{"PLAINTEXT", "PLAINTEXT", "localhost", 9092}}}},
		{"v3", `{
      "version":3,
      "host":"localhost",
      "port":9092,
      "jmx_port":9999,
      "timestamp":"2233345666",
      "endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"],
      "rack":"dc1"
    }`, BrokerInfo{ID: 1, Version: 3, JMXPort: 9999, Timestamp: 2233345666, Rack: "dc1",
			Endpoints: []Endpoint{{"PLAINTEXT", "PLAINTEXT", "host1", 9092}, {"SSL", "SSL", "host1", 9093}}}},
		{"v4 null rack", `{
      "version":4,
      "host":"localhost",
      "port":9092,
      "jmx_port":9999,
      "timestamp":"2233345666",
      "endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],
      "listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},
      "rack":null
    }`, BrokerInfo{ID: 1, Version: 4, JMXPort: 9999, Timestamp: 2233345666,
			Endpoints: []Endpoint{{"CLIENT", "SSL", "host1", 9092}, {"REPLICATION", "PLAINTEXT", "host1", 9093}}}},
		{"v4", `{
      "version":4,
      "host":"localhost",
      "port":9092,
      "jmx_port":9999,
      "timestamp":"2233345666",
      "endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],
      "listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},
      "rack":"dc1"
    }`, BrokerInfo{ID: 1, Version: 4, JMXPort: 9999, Timestamp: 2233345666, Rack: "dc1",
			Endpoints: []Endpoint{{"CLIENT", "SSL", "host1", 9092}, {"REPLICATION", "PLAINTEXT", "host1", 9093}}}},
		{"v5", `{
      "version":5,
      "host":"localhost",
      "port":9092,
      "jmx_port":9999,
      "timestamp":"2233345666",
      "endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],
      "listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},
      "rack":"dc1",
      "features": {"feature1": {"min_version": 1, "max_version": 2}, "feature2": {"min_version": 2, "max_version": 4}}
    }`, BrokerInfo{ID: 1, Version: 5, JMXPort: 9999, Timestamp: 2233345666, Rack: "dc1",
			Endpoints: []Endpoint{{"CLIENT", "SSL", "host1", 9092}, {"REPLICATION", "PLAINTEXT", "host1", 9093}},
			Features:  map[string]VersionRange{"feature1": {1, 2}, "feature2": {2, 4}}}},
		{"v5 as a Kafka 3.x broker writes it", `{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,"host":"localhost","version":5,"timestamp":"1700000000000"}`,
			BrokerInfo{ID: 1, Version: 5, JMXPort: -1, Timestamp: 1700000000000,
				Endpoints: []Endpoint{{"PLAINTEXT", "PLAINTEXT", "localhost", 9092}}}},
		{"IPv6 and null host", `{"version":5,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://[::1]:9092","INTERNAL://:9093"],"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","INTERNAL":"SASL_PLAINTEXT"},"features":{}}`,
			BrokerInfo{ID: 1, Version: 5, JMXPort: -1, Timestamp: 1,
				Endpoints: []Endpoint{{"PLAINTEXT", "PLAINTEXT", "::1", 9092}, {"INTERNAL", "SASL_PLAINTEXT", "", 9093}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeBrokerInfo(1, []byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestEncodeBrokerInfo(t *testing.T) {
	b := BrokerInfo{ID: 3, JMXPort: -1, Timestamp: 1700000000000,
		Endpoints: []Endpoint{{"PLAINTEXT", "PLAINTEXT", "localhost", 9092}}}
	got, err := EncodeBrokerInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,"host":"localhost","version":5,"timestamp":"1700000000000"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	// No PLAINTEXT listener: Kafka writes host null and port -1.
	b = BrokerInfo{ID: 3, Version: 4, JMXPort: 9999, Timestamp: 5, Rack: "r1",
		Endpoints: []Endpoint{{"CLIENT", "SSL", "::1", 9093}}}
	got, err = EncodeBrokerInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"listener_security_protocol_map":{"CLIENT":"SSL"},"endpoints":["CLIENT://[::1]:9093"],"rack":"r1","jmx_port":9999,"port":-1,"host":null,"version":4,"timestamp":"5"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	// Round trip.
	b = BrokerInfo{ID: 7, Version: 5, JMXPort: -1, Timestamp: 42, Rack: "a",
		Endpoints: []Endpoint{{"PLAINTEXT", "PLAINTEXT", "h", 1}, {"SSL", "SSL", "h", 2}},
		Features:  map[string]VersionRange{"metadata.version": {1, 20}}}
	data, err := EncodeBrokerInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeBrokerInfo(7, data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, b) {
		t.Fatalf("round trip: got %+v want %+v", back, b)
	}

	for _, bad := range []BrokerInfo{
		{ID: 1, Version: 3, Endpoints: b.Endpoints},
		{ID: 1},
		{ID: 1, Endpoints: []Endpoint{{"X", "TLS", "h", 1}}},
		{ID: 1, Endpoints: []Endpoint{{"X", "SSL", "h", 1}, {"X", "SSL", "h", 2}}},
	} {
		if _, err := EncodeBrokerInfo(bad); err == nil {
			t.Errorf("EncodeBrokerInfo(%+v) succeeded", bad)
		}
	}
}

func TestControllerZNodes(t *testing.T) {
	if got, want := string(EncodeController(1, 1700000000000)), `{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}`; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	for _, tc := range []struct {
		json string
		want ControllerInfo
	}{
		{`{"version":1,"brokerid":2,"timestamp":"1507026745429"}`, ControllerInfo{Version: 1, BrokerID: 2, Timestamp: 1507026745429, KRaftControllerEpoch: -1}},
		{`{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}`, ControllerInfo{Version: 2, BrokerID: 1, Timestamp: 1700000000000, KRaftControllerEpoch: -1}},
		{`{"version":2,"brokerid":3000,"timestamp":"1","kraftControllerEpoch":7}`, ControllerInfo{Version: 2, BrokerID: 3000, Timestamp: 1, KRaftControllerEpoch: 7}},
	} {
		got, err := DecodeController([]byte(tc.json))
		if err != nil || got != tc.want {
			t.Errorf("DecodeController(%s) = %+v, %v; want %+v", tc.json, got, err, tc.want)
		}
	}
	if got := string(EncodeControllerEpoch(12)); got != "12" {
		t.Fatalf("EncodeControllerEpoch = %q", got)
	}
	if e, err := DecodeControllerEpoch([]byte("12")); err != nil || e != 12 {
		t.Fatalf("DecodeControllerEpoch = %d, %v", e, err)
	}
}

func TestTopicID(t *testing.T) {
	// Kafka's Uuid.ONE_UUID and an id from Kafka's KRaftClusterTest.
	one := TopicID{15: 1}
	if got := one.String(); got != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Fatalf("ONE_UUID = %s", got)
	}
	for _, s := range []string{"AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAA7SrBWaJ7g", "AAAAAAAAAAAAA7SrBWaJ7g=="} {
		id, err := ParseTopicID(s)
		if err != nil {
			t.Fatalf("ParseTopicID(%s): %v", s, err)
		}
		if got := id.String(); got != strings.TrimRight(s, "=") {
			t.Fatalf("round trip %s -> %s", s, got)
		}
	}
	for _, s := range []string{"", "AAAA", "not base64 at all!!!!!", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		if _, err := ParseTopicID(s); err == nil {
			t.Errorf("ParseTopicID(%q) succeeded", s)
		}
	}
}

func TestTopicAssignmentZNode(t *testing.T) {
	id, _ := ParseTopicID("AAAAAAAAAAAAA7SrBWaJ7g")
	a := TopicAssignment{ID: id, Partitions: map[int32][]int32{0: {1, 2}, 1: {2, 3}, 10: {3, 1}, 2: {3, 1}}}
	want := `{"partitions":{"0":[1,2],"1":[2,3],"2":[3,1],"10":[3,1]},"topic_id":"AAAAAAAAAAAAA7SrBWaJ7g","adding_replicas":{},"removing_replicas":{},"version":3}`
	if got := string(EncodeTopicAssignment(a)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	for _, tc := range []struct {
		name, json string
		want       TopicAssignment
	}{
		{"v1 (Kafka < 2.4)", `{"version":1,"partitions":{"0":[0],"1":[1,0]}}`,
			TopicAssignment{Partitions: map[int32][]int32{0: {0}, 1: {1, 0}}, AddingReplicas: map[int32][]int32{}, RemovingReplicas: map[int32][]int32{}}},
		{"v2 reassigning", `{"version":2,"partitions":{"0":[1,2,3]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}`,
			TopicAssignment{Partitions: map[int32][]int32{0: {1, 2, 3}}, AddingReplicas: map[int32][]int32{0: {3}}, RemovingReplicas: map[int32][]int32{0: {1}}}},
		{"v3", `{"version":3,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{},"topic_id":"AAAAAAAAAAAAA7SrBWaJ7g"}`,
			TopicAssignment{ID: id, Partitions: map[int32][]int32{0: {1, 2}}, AddingReplicas: map[int32][]int32{}, RemovingReplicas: map[int32][]int32{}}},
		{"empty znode", ``,
			TopicAssignment{Partitions: map[int32][]int32{}, AddingReplicas: map[int32][]int32{}, RemovingReplicas: map[int32][]int32{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeTopicAssignment("t", []byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v want %+v", got, tc.want)
			}
		})
	}
	back, err := DecodeTopicAssignment("t", []byte(want))
	if err != nil || !reflect.DeepEqual(back.Partitions, a.Partitions) || back.ID != id {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func TestPartitionStateZNode(t *testing.T) {
	s := PartitionState{ControllerEpoch: 1, Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2, 3}}
	want := `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`
	if got := string(EncodePartitionState(s)); got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	got, err := DecodePartitionState("t", 0, []byte(want), 4)
	s.ZkVersion = 4
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	// Unclean election in progress (KIP-704), and an empty ISR: [] not null.
	s = PartitionState{ControllerEpoch: 9, Leader: -1, LeaderEpoch: 7, LeaderRecoveryState: LeaderRecovering}
	want = `{"controller_epoch":9,"leader":-1,"version":1,"leader_epoch":7,"isr":[],"leader_recovery_state":1}`
	if got := string(EncodePartitionState(s)); got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	got, err = DecodePartitionState("t", 0, []byte(want), 0)
	if err != nil || got.LeaderRecoveryState != LeaderRecovering || got.Leader != -1 || len(got.ISR) != 0 {
		t.Fatalf("decode: %+v, %v", got, err)
	}
}

func TestOtherZNodes(t *testing.T) {
	cfg := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact", "x": "a<b&c"}
	want := `{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000","x":"a<b&c"}}`
	if got := string(EncodeTopicConfig(cfg)); got != want {
		t.Fatalf("config: got %s want %s", got, want)
	}
	if got := string(EncodeTopicConfig(nil)); got != `{"version":1,"config":{}}` {
		t.Fatalf("empty config: %s", got)
	}
	if back, err := DecodeTopicConfig("t", []byte(want)); err != nil || !reflect.DeepEqual(back, cfg) {
		t.Fatalf("config decode: %v, %v", back, err)
	}

	tps := []TopicPartition{{"a", 0}, {"b", 3}}
	want = `{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":3}]}`
	if got := string(EncodeISRChangeNotification(tps)); got != want {
		t.Fatalf("isr change: got %s want %s", got, want)
	}
	if back, err := DecodeISRChangeNotification("/isr_change_notification/isr_change_0000000000", []byte(want)); err != nil || !reflect.DeepEqual(back, tps) {
		t.Fatalf("isr change decode: %v, %v", back, err)
	}

	want = `{"version":"1","id":"Rsx4VqXvRNuWzTg7rZ7I2Q"}`
	if got := string(EncodeClusterID("Rsx4VqXvRNuWzTg7rZ7I2Q")); got != want {
		t.Fatalf("cluster id: got %s want %s", got, want)
	}
	if id, err := DecodeClusterID([]byte(want)); err != nil || id != "Rsx4VqXvRNuWzTg7rZ7I2Q" {
		t.Fatalf("cluster id decode: %v, %v", id, err)
	}

	b := ProducerIDBlock{Broker: 1, First: 1000, Last: 1999}
	want = `{"version":1,"broker":1,"block_start":"1000","block_end":"1999"}`
	if got := string(EncodeProducerIDBlock(b)); got != want {
		t.Fatalf("producer id block: got %s want %s", got, want)
	}
	if back, err := DecodeProducerIDBlock([]byte(want)); err != nil || back != b {
		t.Fatalf("producer id block decode: %v, %v", back, err)
	}
}

func TestMalformedZNodes(t *testing.T) {
	for _, tc := range []struct {
		name, path, json string
		decode           func([]byte) error
	}{
		{"broker not json", "/brokers/ids/1", `{"version":5,`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker empty", "/brokers/ids/1", ``, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker array", "/brokers/ids/1", `[1,2]`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker no version", "/brokers/ids/1", `{"endpoints":["PLAINTEXT://h:1"]}`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker version 0", "/brokers/ids/1", `{"version":0,"endpoints":["PLAINTEXT://h:1"]}`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker no endpoints", "/brokers/ids/1", `{"version":5,"jmx_port":-1}`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker bad endpoint", "/brokers/ids/1", `{"version":5,"endpoints":["PLAINTEXT:/h:1"]}`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker bad port", "/brokers/ids/1", `{"version":5,"endpoints":["PLAINTEXT://h:x"]}`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker unknown listener", "/brokers/ids/1", `{"version":5,"endpoints":["FOO://h:1"],"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"}}`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker bad protocol", "/brokers/ids/1", `{"version":5,"endpoints":["FOO://h:1"],"listener_security_protocol_map":{"FOO":"TLS"}}`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker port string", "/brokers/ids/1", `{"version":1,"host":"h","port":"9092"}`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"broker bad timestamp", "/brokers/ids/1", `{"version":5,"endpoints":["PLAINTEXT://h:1"],"timestamp":"soon"}`, func(b []byte) error { _, err := DecodeBrokerInfo(1, b); return err }},
		{"controller no brokerid", "/controller", `{"version":2}`, func(b []byte) error { _, err := DecodeController(b); return err }},
		{"controller brokerid string", "/controller", `{"version":2,"brokerid":"1"}`, func(b []byte) error { _, err := DecodeController(b); return err }},
		{"controller epoch text", "/controller_epoch", `one`, func(b []byte) error { _, err := DecodeControllerEpoch(b); return err }},
		{"controller epoch overflow", "/controller_epoch", `4294967296`, func(b []byte) error { _, err := DecodeControllerEpoch(b); return err }},
		{"topic bad id", "/brokers/topics/t", `{"version":3,"partitions":{"0":[1]},"topic_id":"xyz"}`, func(b []byte) error { _, err := DecodeTopicAssignment("t", b); return err }},
		{"topic bad partition", "/brokers/topics/t", `{"version":3,"partitions":{"zero":[1]}}`, func(b []byte) error { _, err := DecodeTopicAssignment("t", b); return err }},
		{"topic negative partition", "/brokers/topics/t", `{"version":3,"partitions":{"-1":[1]}}`, func(b []byte) error { _, err := DecodeTopicAssignment("t", b); return err }},
		{"topic no replicas", "/brokers/topics/t", `{"version":3,"partitions":{"0":[]}}`, func(b []byte) error { _, err := DecodeTopicAssignment("t", b); return err }},
		{"topic replicas not ints", "/brokers/topics/t", `{"version":3,"partitions":{"0":["a"]}}`, func(b []byte) error { _, err := DecodeTopicAssignment("t", b); return err }},
		{"state no leader", "/brokers/topics/t/partitions/2/state", `{"controller_epoch":1,"version":1,"leader_epoch":0,"isr":[1]}`, func(b []byte) error { _, err := DecodePartitionState("t", 2, b, 0); return err }},
		{"state no isr", "/brokers/topics/t/partitions/2/state", `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0}`, func(b []byte) error { _, err := DecodePartitionState("t", 2, b, 0); return err }},
		{"state empty", "/brokers/topics/t/partitions/2/state", ``, func(b []byte) error { _, err := DecodePartitionState("t", 2, b, 0); return err }},
		{"state bad recovery", "/brokers/topics/t/partitions/2/state", `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"leader_recovery_state":5}`, func(b []byte) error { _, err := DecodePartitionState("t", 2, b, 0); return err }},
		{"config not strings", "/config/topics/t", `{"version":1,"config":{"retention.ms":1000}}`, func(b []byte) error { _, err := DecodeTopicConfig("t", b); return err }},
		{"config null value", "/config/topics/t", `{"version":1,"config":{"retention.ms":null}}`, func(b []byte) error { _, err := DecodeTopicConfig("t", b); return err }},
		{"isr change no partitions", "/isr_change_notification/isr_change_1", `{"version":1}`, func(b []byte) error {
			_, err := DecodeISRChangeNotification("/isr_change_notification/isr_change_1", b)
			return err
		}},
		{"isr change no topic", "/isr_change_notification/isr_change_1", `{"version":1,"partitions":[{"partition":1}]}`, func(b []byte) error {
			_, err := DecodeISRChangeNotification("/isr_change_notification/isr_change_1", b)
			return err
		}},
		{"cluster id missing", "/cluster/id", `{"version":"1"}`, func(b []byte) error { _, err := DecodeClusterID(b); return err }},
		{"pid block not numbers", "/latest_producer_id_block", `{"version":1,"broker":1,"block_start":"a","block_end":"b"}`, func(b []byte) error { _, err := DecodeProducerIDBlock(b); return err }},
		{"pid block ints not strings", "/latest_producer_id_block", `{"version":1,"broker":1,"block_start":0,"block_end":999}`, func(b []byte) error { _, err := DecodeProducerIDBlock(b); return err }},
		{"pid block reversed", "/latest_producer_id_block", `{"version":1,"broker":1,"block_start":"999","block_end":"0"}`, func(b []byte) error { _, err := DecodeProducerIDBlock(b); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode([]byte(tc.json))
			if err == nil {
				t.Fatal("decoded without error")
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), "malformed znode "+tc.path+":") {
				t.Fatalf("error %q does not name %s", err, tc.path)
			}
		})
	}
}

// FuzzDecoders checks that no content makes a decoder panic.
func FuzzDecoders(f *testing.F) {
	for _, s := range []string{
		`{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,"host":"localhost","version":5,"timestamp":"1"}`,
		`{"version":3,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{},"topic_id":"AAAAAAAAAAAAA7SrBWaJ7g"}`,
		`{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`,
		`{"version":1,"broker":1,"block_start":"0","block_end":"999"}`,
		`{"version":1,"brokerid":1}`, `7`, ``, `null`, `{"version":1,"partitions":[{"topic":"a","partition":0}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeBrokerInfo(1, b)
		_, _ = DecodeController(b)
		_, _ = DecodeControllerEpoch(b)
		_, _ = DecodeTopicAssignment("t", b)
		_, _ = DecodePartitionState("t", 0, b, 0)
		_, _ = DecodeTopicConfig("t", b)
		_, _ = DecodeISRChangeNotification("/x", b)
		_, _ = DecodeClusterID(b)
		_, _ = DecodeProducerIDBlock(b)
	})
}
