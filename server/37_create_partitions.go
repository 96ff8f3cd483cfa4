package server

import (
	"context"
	"fmt"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behaviour:
// * Grows a topic to Count partitions; a count that does not grow it is
//   INVALID_PARTITIONS. The new partitions get the topic's replication
//   factor, spread as at creation, or the explicit Assignment (one replica
//   list per new partition; a wrong count, an unknown or repeated broker is
//   INVALID_REPLICA_ASSIGNMENT).
// * Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; a topic named twice:
//   INVALID_REQUEST for each copy.
// * ValidateOnly checks everything and creates nothing.
// * The partitions exist (and are led) when the response is sent.
// * Authorization: Alter on the topic, else TOPIC_AUTHORIZATION_FAILED
//   "The topic authorization is failed." (after the duplicate check,
//   before the existence check), as Kafka.
//
// Version notes:
// * v1: same as v0 (throttle after the response)
// * v2: flexible versions
// * v3: same as v2

func init() { registerAPI(kmsg.CreatePartitions.Int16(), 0, 3, handleCreatePartitions) }

func handleCreatePartitions(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)

	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		var err error
		switch {
		case seen[rt.Topic] > 1:
			err = fmt.Errorf("%w: duplicate topic %q in request", kerr.InvalidRequest, rt.Topic)
		case !b.authorize(rc, acl.OpAlter, acl.ResourceTopic, rt.Topic):
			err = &refusal{kerr.TopicAuthorizationFailed, "The topic authorization is failed."}
		default:
			err = b.createPartitions(rt, req.ValidateOnly)
		}
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if err != nil {
			st.ErrorCode = protocol.ErrorCode(err)
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (b *Broker) createPartitions(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	var assignment [][]int32
	if rt.Assignment != nil {
		assignment = make([][]int32, len(rt.Assignment))
		for i, a := range rt.Assignment {
			if len(a.Replicas) == 0 {
				return fmt.Errorf("%w: new partition %d has an empty replica list", kerr.InvalidReplicaAssignment, i)
			}
			assignment[i] = a.Replicas
		}
		// The controller checks the count and the brokers; the
		// replication factor of the new partitions must also match
		// the topic's, as Kafka requires.
		t, ok := b.controller.Metadata().Topics[rt.Topic]
		if ok && len(t.Partitions) > 0 && int(rt.Count)-len(t.Partitions) == len(assignment) {
			rf := len(t.Partitions[0].Replicas)
			for i, replicas := range assignment {
				if len(replicas) != rf {
					return fmt.Errorf("%w: new partition %d has %d replicas, but the topic's replication factor is %d",
						kerr.InvalidReplicaAssignment, i, len(replicas), rf)
				}
			}
		}
	}
	return b.controller.CreatePartitions(rt.Topic, rt.Count, assignment, validateOnly)
}
