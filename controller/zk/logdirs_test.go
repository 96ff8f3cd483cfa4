package zk

import (
	"errors"
	"slices"
	"testing"
)

func TestLogDirEventNotificationIsKafkas(t *testing.T) {
	// LogDirEventNotificationSequenceZNode.encode(2) in Kafka 3.x.
	if got, want := string(EncodeLogDirEventNotification(2)), `{"version":1,"broker":2,"event":1}`; got != want {
		t.Fatalf("notification %s, want %s", got, want)
	}
	id, err := DecodeLogDirEventNotification("/log_dir_event_notification/log_dir_event_0000000003", []byte(`{"version":1,"broker":7,"event":1}`))
	if err != nil || id != 7 {
		t.Fatalf("decoded broker %d, %v", id, err)
	}
	for _, bad := range []string{``, `{}`, `{"version":2,"broker":1,"event":1}`, `{"version":1,"event":1}`, `{"version":1,"broker":-1}`, `[1]`} {
		if _, err := DecodeLogDirEventNotification("/n", []byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want malformed", bad, err)
		}
	}
}

func TestLogDirFailuresRecord(t *testing.T) {
	f := LogDirFailures{BrokerEpoch: 4294967301, LogDirs: []string{"/data/2"},
		Partitions: []TopicPartition{{"b", 1}, {"a", 10}, {"a", 2}}}
	data := EncodeLogDirFailures(f)
	want := `{"version":1,"broker_epoch":4294967301,"log_dirs":["/data/2"],"partitions":[{"topic":"a","partition":2},{"topic":"a","partition":10},{"topic":"b","partition":1}]}`
	if string(data) != want {
		t.Fatalf("record %s, want %s", data, want)
	}
	back, err := DecodeLogDirFailures("/r", data)
	if err != nil || back.BrokerEpoch != f.BrokerEpoch || !slices.Equal(back.LogDirs, f.LogDirs) || len(back.Partitions) != 3 || back.Partitions[0] != (TopicPartition{"a", 2}) {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	if got := string(EncodeLogDirFailures(LogDirFailures{BrokerEpoch: 1})); got != `{"version":1,"broker_epoch":1,"log_dirs":[],"partitions":[]}` {
		t.Fatalf("empty record %s", got)
	}
	for _, bad := range []string{`{"version":1}`, `{"version":2,"broker_epoch":1}`, `nope`} {
		if _, err := DecodeLogDirFailures("/r", []byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want malformed", bad, err)
		}
	}
}
