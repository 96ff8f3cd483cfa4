package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/internal/rebalance"
)

func TestFormatReassignmentIsKafkas(t *testing.T) {
	a := rebalance.Assignment{
		"b": {1: {3, 1}, 0: {2, 3}},
		"a": {0: {1, 2, 3}},
	}
	// Byte for byte what kafka-reassign-partitions.sh --generate prints
	// (Jackson, LinkedHashMap field order, sorted partitions).
	want := `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]},` +
		`{"topic":"b","partition":0,"replicas":[2,3],"log_dirs":["any","any"]},{"topic":"b","partition":1,"replicas":[3,1],"log_dirs":["any","any"]}]}`
	if got := formatReassignment(a); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := formatReassignment(rebalance.Assignment{}); got != `{"version":1,"partitions":[]}` {
		t.Errorf("empty: %s", got)
	}
}

func TestParseReassignmentRoundTrip(t *testing.T) {
	a := rebalance.Assignment{"t": {0: {1, 2, 3}, 1: {4, 1, 2}}, "u<&>": {7: {9}}}
	ts, err := parseReassignment([]byte(formatReassignment(a)))
	if err != nil {
		t.Fatal(err)
	}
	got := rebalance.Assignment{}
	for _, tg := range ts {
		if !slices.Equal(tg.LogDirs, slices.Repeat([]string{"any"}, len(tg.Replicas))) {
			t.Errorf("%s: log dirs %v", tg.name(), tg.LogDirs)
		}
		if got[tg.Topic] == nil {
			got[tg.Topic] = map[int32][]int32{}
		}
		got[tg.Topic][tg.Partition] = tg.Replicas
	}
	if len(rebalance.Diff(a, got)) != 0 || len(rebalance.Diff(got, a)) != 0 || got.Partitions() != 3 {
		t.Errorf("round trip: %v, want %v", got, a)
	}
}

func TestParseReassignmentKafkaFiles(t *testing.T) {
	// As Kafka's tool writes it (one line), as people edit it (pretty, no
	// log_dirs, no version), and a log dir named.
	files := map[string]string{
		"kafka": `{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}`,
		"hand-written": `{
  "partitions": [
    {"topic": "foo", "partition": 0, "replicas": [1, 2]},
    {"topic": "foo", "partition": 1, "replicas": [2, 3]}
  ]
}`,
	}
	for name, data := range files {
		ts, err := parseReassignment([]byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(ts) != 2 || ts[0].name() != "foo-0" || !slices.Equal(ts[0].Replicas, []int32{1, 2}) ||
			ts[1].name() != "foo-1" || !slices.Equal(ts[1].LogDirs, []string{"any", "any"}) {
			t.Errorf("%s: %+v", name, ts)
		}
		if err := validateForExecute(ts); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	ts, err := parseReassignment([]byte(`{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["/data/a","any"]}]}`))
	if err != nil || ts[0].LogDirs[0] != "/data/a" {
		t.Fatalf("log dir: %+v %v", ts, err)
	}
	if err := validateForExecute(ts); err == nil || !strings.Contains(err.Error(), "only \"any\"") {
		t.Errorf("a named log dir is executed without AlterReplicaLogDirs: %v", err)
	}
}

func TestParseReassignmentBadInput(t *testing.T) {
	cases := map[string]string{
		`{"version":2,"partitions":[]}`:                                                    "Not supported version field value 2",
		`{"partitions":[{"partition":0,"replicas":[1]}]}`:                                  `no "topic"`,
		`{"partitions":[{"topic":"a","replicas":[1]}]}`:                                    `no "partition"`,
		`{"partitions":[{"topic":"a","partition":0}]}`:                                     `no "replicas"`,
		`{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`: "Size of replicas list [1, 2] is different from size of log dirs list [any] for partition a-0",
		`{"partitions":[{"topic":"a","partition":"zero","replicas":[1]}]}`:                 "not valid",
		`{"partitions":[{"topic":"a","partition":0,"replicas":[1.5]}]}`:                    "not valid",
		`{"partitions":[{"topic":"a","partition":3000000000,"replicas":[1]}]}`:             "not valid",
		`not json`:             "not valid",
		`{"partitions":[]} {}`: "data after",
	}
	for data, want := range cases {
		_, err := parseReassignment([]byte(data))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", data, err, want)
		}
	}
	exec := map[string]string{
		`{"version":1,"partitions":[]}`: "Partition reassignment list cannot be empty",
		`{"version":1}`:                 "Partition reassignment list cannot be empty",
		`{"partitions":[{"topic":"a","partition":0,"replicas":[]}]}`:                                             "Partition replica list cannot be empty",
		`{"partitions":[{"topic":"a","partition":0,"replicas":[1]},{"topic":"a","partition":0,"replicas":[2]}]}`: "Partition reassignment contains duplicate topic partitions: a-0",
		`{"partitions":[{"topic":"a","partition":0,"replicas":[1,2,1]}]}`:                                        "Partition replica lists may not contain duplicate entries: a-0 contains multiple entries for 1",
	}
	for data, want := range exec {
		ts, err := parseReassignment([]byte(data))
		if err == nil {
			err = validateForExecute(ts)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", data, err, want)
		}
	}
}

func TestParseTopicsToMove(t *testing.T) {
	topics, err := parseTopicsToMove([]byte(`{"topics":[{"topic":"foo"},{"topic":"bar"}],"version":1}`))
	if err != nil || !slices.Equal(topics, []string{"foo", "bar"}) {
		t.Fatalf("%v %v", topics, err)
	}
	if _, err := parseTopicsToMove([]byte(`{"topics":[{"topic":"foo"},{"topic":"foo"}]}`)); err == nil {
		t.Error("duplicate topic accepted")
	}
}
