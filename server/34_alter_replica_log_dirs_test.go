package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func alterDirsRequest(moves ...partitionDir) *kmsg.AlterReplicaLogDirsRequest {
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	req.Version = 2
	for _, mv := range moves {
		d := kmsg.NewAlterReplicaLogDirsRequestDir()
		d.Dir = mv.dir
		rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
		rt.Topic, rt.Partitions = mv.tp.Topic, []int32{mv.tp.Partition}
		d.Topics = append(d.Topics, rt)
		req.Dirs = append(req.Dirs, d)
	}
	return req
}

// codesOf maps "topic-partition" to the answer's error code, failing on a
// partition answered twice.
func codesOf(t *testing.T, resp *kmsg.AlterReplicaLogDirsResponse) map[string]int16 {
	t.Helper()
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			k := fmt.Sprintf("%s-%d", rt.Topic, p.Partition)
			if _, dup := out[k]; dup {
				t.Errorf("%s answered twice", k)
			}
			out[k] = p.ErrorCode
		}
	}
	return out
}

func TestAlterReplicaLogDirs(t *testing.T) {
	b, dirs := jbodTestBroker(t)
	mustCreateTopic(t, b, "t", 2, nil)
	ctx := context.Background()
	tp0 := replica.TopicPartition{Topic: "t", Partition: 0}
	home := func(tp replica.TopicPartition) string { return filepath.Dir(b.replicas.PartitionDir(tp)) }
	logDirsWithin(t, 5*time.Second, func() error {
		if _, ok := b.replicas.Get(tp0); !ok {
			return errors.New("t-0 not open yet")
		}
		return nil
	})
	from := home(tp0)
	to := dirs[0]
	if from == dirs[0] {
		to = dirs[1]
	}
	alter := func(moves ...partitionDir) map[string]int16 {
		t.Helper()
		resp, err := handleAlterReplicaLogDirs(ctx, b, nil, alterDirsRequest(moves...))
		if err != nil {
			t.Fatal(err)
		}
		return codesOf(t, resp.(*kmsg.AlterReplicaLogDirsResponse))
	}
	got := alter(
		partitionDir{tp0, filepath.Join(filepath.Dir(dirs[0]), "d3")},
		partitionDir{replica.TopicPartition{Topic: "t", Partition: 7}, dirs[0]},
		partitionDir{replica.TopicPartition{Topic: "nope", Partition: 0}, dirs[0]},
	)
	want := map[string]int16{
		"t-0":    kerr.LogDirNotFound.Code,
		"t-7":    kerr.UnknownTopicOrPartition.Code,
		"nope-0": kerr.UnknownTopicOrPartition.Code,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bad input answered %v, want %v", got, want)
	}
	if home(tp0) != from {
		t.Fatalf("a refused move moved t-0 to %s", home(tp0))
	}
	// Its own dir: nothing to do.
	if got := alter(partitionDir{tp0, from}); got["t-0"] != 0 || home(tp0) != from {
		t.Fatalf("same dir: %v, now in %s", got, home(tp0))
	}
	// Named twice: the last dir counts, answered once.
	if got := alter(partitionDir{tp0, from}, partitionDir{tp0, to}); len(got) != 1 || got["t-0"] != 0 {
		t.Fatalf("move: %v", got)
	}
	logDirsWithin(t, 10*time.Second, func() error {
		if h := home(tp0); h != to {
			return fmt.Errorf("t-0 still in %s", h)
		}
		for _, d := range b.replicas.DescribeLogDirs() {
			for _, l := range d.Logs {
				if l.IsFuture {
					return fmt.Errorf("future replica of %s still listed", l.TopicPartition)
				}
			}
		}
		return nil
	})
}

func TestAlterLogDirErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err       error
		inCluster bool
		want      int16
	}{
		{replica.ErrReplicaNotHosted, true, kerr.ReplicaNotAvailable.Code},
		{replica.ErrReplicaNotHosted, false, kerr.UnknownTopicOrPartition.Code},
		{fmt.Errorf("x: %w", kerr.LogDirNotFound), true, kerr.LogDirNotFound.Code},
		{fmt.Errorf("x: %w", kerr.KafkaStorageError), true, kerr.KafkaStorageError.Code},
		{fmt.Errorf("x: %w", kerr.InvalidTopicException), false, kerr.InvalidTopicException.Code},
	} {
		if got := alterLogDirErrorCode(tc.err, func() bool { return tc.inCluster }); got != tc.want {
			t.Errorf("%v (in cluster %v): %d, want %d", tc.err, tc.inCluster, got, tc.want)
		}
	}
}

func TestAlterReplicaLogDirsNeedsAlterOnCluster(t *testing.T) {
	b := authzTestBroker(t)
	req := alterDirsRequest(partitionDir{replica.TopicPartition{Topic: "t", Partition: 0}, "/x"},
		partitionDir{replica.TopicPartition{Topic: "t", Partition: 0}, "/y"})
	resp, err := handleAlterReplicaLogDirs(context.Background(), b, &requestContext{principal: "User:alice", remote: "127.0.0.1:5"}, req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.AlterReplicaLogDirsResponse)
	if len(r.Topics) != 2 || r.Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code ||
		r.Topics[1].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("without Alter on the cluster: %+v", r.Topics)
	}
}
