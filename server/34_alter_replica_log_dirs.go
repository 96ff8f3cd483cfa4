package server

import (
	"context"
	"errors"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterReplicaLogDirs: v0-2
//
// Behaviour:
// * Moves each named partition's replica on this broker to the named log
//   dir, online, as Kafka's future replicas: the log is copied into the
//   dir while the partition serves, then swapped in under the partition's
//   lock (replica.Manager.AlterLogDir). The answer comes when the move has
//   started; DescribeLogDirs shows the future replica until it is done.
// * A dir that is not configured (its absolute path exactly, as
//   DescribeLogDirs names it): LOG_DIR_NOT_FOUND; an offline dir:
//   KAFKA_STORAGE_ERROR; a topic name too long for a future log's
//   directory name: INVALID_TOPIC_EXCEPTION; a partition of the cluster
//   with no replica here: REPLICA_NOT_AVAILABLE (the dir is remembered
//   for when one is created); a partition the cluster does not have:
//   UNKNOWN_TOPIC_OR_PARTITION. The replica's own dir: nothing to do.
// * A partition named under several dirs: the last one counts, answered
//   once (Kafka's partitionDirs map).
// * Authorization: Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//   for every partition named, before anything moves.
//
// Version notes:
// * v1: same as v0
// * v2: flexible

func init() { registerAPI(kmsg.AlterReplicaLogDirs.Int16(), 0, 2, handleAlterReplicaLogDirs) }

func handleAlterReplicaLogDirs(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	if !b.authorizeCluster(rc, acl.OpAlter) {
		for _, d := range req.Dirs {
			for _, t := range d.Topics {
				rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		return resp, nil
	}
	moves := partitionDirs(req)
	md := b.controller.Metadata()
	byTopic := map[string]int{}
	for _, mv := range moves {
		code := int16(0)
		if err := b.replicas.AlterLogDir(mv.tp, mv.dir); err != nil {
			code = alterLogDirErrorCode(err, func() bool {
				t, ok := md.Topics[mv.tp.Topic]
				return ok && mv.tp.Partition >= 0 && int(mv.tp.Partition) < len(t.Partitions)
			})
			b.logger.Warn("unable to alter log dir", "partition", mv.tp.String(), "dir", mv.dir, "err", err)
		}
		i, ok := byTopic[mv.tp.Topic]
		if !ok {
			rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
			rt.Topic = mv.tp.Topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[mv.tp.Topic] = i
		}
		rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
		rp.Partition, rp.ErrorCode = mv.tp.Partition, code
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp, nil
}

// partitionDir is one partition and the log dir it should move to.
type partitionDir struct {
	tp  replica.TopicPartition
	dir string
}

// partitionDirs is Kafka's AlterReplicaLogDirsRequest.partitionDirs: each
// partition once, with the last dir naming it, in order of first mention.
func partitionDirs(req *kmsg.AlterReplicaLogDirsRequest) []partitionDir {
	var out []partitionDir
	at := map[replica.TopicPartition]int{}
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				tp := replica.TopicPartition{Topic: t.Topic, Partition: p}
				if i, ok := at[tp]; ok {
					out[i].dir = d.Dir
					continue
				}
				at[tp] = len(out)
				out = append(out, partitionDir{tp: tp, dir: d.Dir})
			}
		}
	}
	return out
}

// alterLogDirErrorCode is the answer to a failed AlterLogDir: a replica not
// here is REPLICA_NOT_AVAILABLE when the cluster has the partition
// (Kafka's NOT_LEADER_OR_FOLLOWER, kept as REPLICA_NOT_AVAILABLE for this
// API), else UNKNOWN_TOPIC_OR_PARTITION.
func alterLogDirErrorCode(err error, inCluster func() bool) int16 {
	if errors.Is(err, replica.ErrReplicaNotHosted) {
		if inCluster() {
			return kerr.ReplicaNotAvailable.Code
		}
		return kerr.UnknownTopicOrPartition.Code
	}
	return protocol.ErrorCode(err)
}
