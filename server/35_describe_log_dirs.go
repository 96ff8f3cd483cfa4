package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs: v0-4
//
// Behaviour:
// * Every configured log dir (absolute path), with the partition logs in
//   it: size (bytes of the segment files), offset lag (for the current
//   replica how far its log end is below the high watermark, 0 for a
//   leader; for a future replica, one being moved into the dir, how far
//   it is behind the current one; -1 for a log no view has opened) and
//   whether it is a future replica. Null topics: every log; else the
//   named partitions only, topics with none left out (Kafka's
//   ReplicaManager.describeLogDirs).
// * An offline dir answers KAFKA_STORAGE_ERROR and nothing else.
// * Authorization: Describe on the cluster, else no dirs and (v3+)
//   CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// * v1: same as v0
// * v2: flexible
// * v3: top-level error code
// * v4: total and usable bytes of each dir's file system

func init() { registerAPI(kmsg.DescribeLogDirs.Int16(), 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !b.authorizeCluster(rc, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	var wanted map[replica.TopicPartition]bool
	if req.Topics != nil {
		wanted = map[replica.TopicPartition]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				wanted[replica.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	resp.Dirs = describeLogDirs(b.replicas.DescribeLogDirs(), wanted)
	return resp, nil
}

// describeLogDirs turns the replica layer's dirs into the response's,
// keeping only the wanted partitions (nil: all).
func describeLogDirs(dirs []replica.LogDirInfo, wanted map[replica.TopicPartition]bool) []kmsg.DescribeLogDirsResponseDir {
	out := make([]kmsg.DescribeLogDirsResponseDir, 0, len(dirs))
	for _, d := range dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d.Dir
		if d.Err != nil {
			rd.ErrorCode = kerr.KafkaStorageError.Code
			out = append(out, rd)
			continue
		}
		rd.TotalBytes, rd.UsableBytes = d.TotalBytes, d.UsableBytes
		byTopic := map[string]int{}
		for _, l := range d.Logs {
			if wanted != nil && !wanted[l.TopicPartition] {
				continue
			}
			i, ok := byTopic[l.Topic]
			if !ok {
				rt := kmsg.NewDescribeLogDirsResponseDirTopic()
				rt.Topic = l.Topic
				rd.Topics = append(rd.Topics, rt)
				i = len(rd.Topics) - 1
				byTopic[l.Topic] = i
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.OffsetLag, rp.IsFuture = l.Partition, l.Size, l.OffsetLag, l.IsFuture
			rd.Topics[i].Partitions = append(rd.Topics[i].Partitions, rp)
		}
		out = append(out, rd)
	}
	return out
}
