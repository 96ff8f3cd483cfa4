package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// jbodTestBroker is newAdminTestBroker with its replicas over two log dirs.
func jbodTestBroker(t *testing.T) (*Broker, []string) {
	t.Helper()
	b := newAdminTestBroker(t)
	if err := b.replicas.Close(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "d1"), filepath.Join(root, "d2")}
	var err error
	b.replicas, err = replica.Open(replica.Config{LogDirs: dirs, RetentionCheck: time.Hour, BrokerID: b.cfg.BrokerID},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return b, dirs
}

// logDirsOf maps each partition of the answer to its dir.
func logDirsOf(t *testing.T, resp *kmsg.DescribeLogDirsResponse) map[string]map[int32]string {
	t.Helper()
	out := map[string]map[int32]string{}
	for _, d := range resp.Dirs {
		for _, rt := range d.Topics {
			if len(rt.Partitions) == 0 {
				t.Errorf("topic %s listed in %s without partitions", rt.Topic, d.Dir)
			}
			for _, p := range rt.Partitions {
				if out[rt.Topic] == nil {
					out[rt.Topic] = map[int32]string{}
				}
				if prev, dup := out[rt.Topic][p.Partition]; dup {
					t.Errorf("%s-%d listed in %s and %s", rt.Topic, p.Partition, prev, d.Dir)
				}
				out[rt.Topic][p.Partition] = d.Dir
			}
		}
	}
	return out
}

func TestDescribeLogDirs(t *testing.T) {
	b, dirs := jbodTestBroker(t)
	mustCreateTopic(t, b, "t", 4, nil)
	ctx := context.Background()
	describe := func(version int16, topics []kmsg.DescribeLogDirsRequestTopic) *kmsg.DescribeLogDirsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Version, req.Topics = version, topics
		resp, err := handleDescribeLogDirs(ctx, b, nil, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.DescribeLogDirsResponse)
	}
	var all *kmsg.DescribeLogDirsResponse
	logDirsWithin(t, 5*time.Second, func() error {
		all = describe(4, nil)
		if n := len(logDirsOf(t, all)["t"]); n != 4 {
			return fmt.Errorf("%d of 4 partitions listed", n)
		}
		return nil
	})
	if len(all.Dirs) != 2 || all.Dirs[0].Dir != dirs[0] || all.Dirs[1].Dir != dirs[1] || all.ErrorCode != 0 {
		t.Fatalf("dirs %+v", all.Dirs)
	}
	perDir := map[string]int{}
	for _, d := range logDirsOf(t, all)["t"] {
		perDir[d]++
	}
	if perDir[dirs[0]] != 2 || perDir[dirs[1]] != 2 {
		t.Errorf("partitions per dir %v, want 2 each", perDir)
	}
	for _, d := range all.Dirs {
		if d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.ErrorCode != 0 {
			t.Errorf("%s: %+v", d.Dir, d)
		}
	}

	// Named partitions only; unknown ones are simply absent.
	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{1, 9}
	other := kmsg.NewDescribeLogDirsRequestTopic()
	other.Topic, other.Partitions = "nope", []int32{0}
	some := describe(1, []kmsg.DescribeLogDirsRequestTopic{rt, other})
	got := logDirsOf(t, some)
	if len(got) != 1 || len(got["t"]) != 1 || got["t"][1] != logDirsOf(t, all)["t"][1] {
		t.Errorf("named partitions: %v", got)
	}
	if len(some.Dirs) != 2 {
		t.Errorf("every dir is listed even without a named partition: %+v", some.Dirs)
	}
	// Empty topics (not null): nothing.
	if got := logDirsOf(t, describe(2, []kmsg.DescribeLogDirsRequestTopic{})); len(got) != 0 {
		t.Errorf("empty topic list: %v", got)
	}
}

func TestDescribeLogDirsOfflineDir(t *testing.T) {
	dirs := []replica.LogDirInfo{
		{Dir: "/a", Err: kerr.KafkaStorageError, TotalBytes: -1, UsableBytes: -1},
		{Dir: "/b", TotalBytes: 100, UsableBytes: 40, Logs: []replica.LogInfo{
			{TopicPartition: replica.TopicPartition{Topic: "t", Partition: 0}, Size: 10},
			{TopicPartition: replica.TopicPartition{Topic: "t", Partition: 1}, Size: 5, OffsetLag: 3, IsFuture: true},
		}},
	}
	out := describeLogDirs(dirs, nil)
	if out[0].ErrorCode != kerr.KafkaStorageError.Code || len(out[0].Topics) != 0 || out[0].TotalBytes != -1 {
		t.Errorf("offline dir: %+v", out[0])
	}
	if out[1].ErrorCode != 0 || out[1].TotalBytes != 100 || out[1].UsableBytes != 40 || len(out[1].Topics) != 1 ||
		len(out[1].Topics[0].Partitions) != 2 || !out[1].Topics[0].Partitions[1].IsFuture || out[1].Topics[0].Partitions[1].OffsetLag != 3 {
		t.Errorf("online dir: %+v", out[1])
	}
}

func TestDescribeLogDirsNeedsDescribeOnCluster(t *testing.T) {
	b := authzTestBroker(t)
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Version = 3
	resp, err := handleDescribeLogDirs(context.Background(), b, &requestContext{principal: "User:alice", remote: "127.0.0.1:5"}, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.DescribeLogDirsResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Dirs) != 0 {
		t.Errorf("without Describe on the cluster: %+v", r)
	}
}

// logDirsWithin calls fn until it returns nil, failing the test with its
// last error after d.
func logDirsWithin(t *testing.T, d time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
