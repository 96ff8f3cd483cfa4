package server

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6
//
// Behaviour:
// * Deletes topics by name (v0-5) or by name or topic ID (v6+); the
//   controller removes them and every broker deletes their logs.
// * Unknown name: UNKNOWN_TOPIC_OR_PARTITION; unknown ID: UNKNOWN_TOPIC_ID.
//   A v6 entry with both a name and an ID fails the whole request with
//   INVALID_REQUEST, as Kafka.
// * delete.topic.enable=false: TOPIC_DELETION_DISABLED (v3+), or
//   INVALID_REQUEST before v3, as Kafka.
// * __consumer_offsets is refused with INVALID_REQUEST. Kafka lets it go and
//   loses every group's committed offsets; kbroker's group coordinator keeps
//   that topic open, so refusing is the safe answer.
// * The deletion is done when the response is sent: TimeoutMillis is not
//   needed for waiting.
// * Authorization (KafkaApis.handleDeleteTopicsRequest), after the
//   whole-request refusals above: Delete on the topic, else
//   TOPIC_AUTHORIZATION_FAILED whether or not it exists. A topic named by
//   id that the principal may not Describe is answered
//   TOPIC_AUTHORIZATION_FAILED without its name (an unknown id is
//   UNKNOWN_TOPIC_ID: ids are not secret, names are).
//
// Version notes:
// * v1: ThrottleMillis
// * v4: flexible versions
// * v5: ErrorMessage
// * v6: Topics with topic IDs instead of TopicNames

func init() { registerAPI(kmsg.DeleteTopics.Int16(), 0, 6, handleDeleteTopics) }

func handleDeleteTopics(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)

	topics := req.Topics
	if req.Version <= 5 {
		topics = make([]kmsg.DeleteTopicsRequestTopic, 0, len(req.TopicNames))
		for _, name := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			topics = append(topics, rt)
		}
	}

	answer := func(rt kmsg.DeleteTopicsRequestTopic, name *string, err error) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic = name
		st.TopicID = rt.TopicID
		if err != nil {
			st.ErrorCode = protocol.ErrorCode(err)
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}

	var whole error
	for _, rt := range topics {
		if rt.Topic != nil && rt.TopicID != ([16]byte{}) {
			whole = fmt.Errorf("%w: a topic name and a topic ID can not both be specified", kerr.InvalidRequest)
		}
	}
	if !b.cfg.DeleteTopicEnable {
		whole = fmt.Errorf("%w: topic deletion is disabled (delete.topic.enable=false)", kerr.TopicDeletionDisabled)
		if req.Version < 3 {
			whole = fmt.Errorf("%w: topic deletion is disabled (delete.topic.enable=false)", kerr.InvalidRequest)
		}
	}
	if whole != nil {
		for _, rt := range topics {
			answer(rt, rt.Topic, whole)
		}
		return resp, nil
	}

	for _, rt := range topics {
		name, err := b.deleteTopic(rc, rt)
		answer(rt, name, err)
	}
	return resp, nil
}

// deleteTopic deletes the topic rt names and returns its name for the
// response (nil for an unknown ID, or one the principal may not see).
func (b *Broker) deleteTopic(rc *requestContext, rt kmsg.DeleteTopicsRequestTopic) (*string, error) {
	var name string
	switch {
	case rt.Topic != nil:
		name = *rt.Topic
	case rt.TopicID != [16]byte{}:
		t, ok := b.controller.Metadata().TopicByID(rt.TopicID)
		if !ok {
			return nil, fmt.Errorf("%w: no topic has ID %s", kerr.UnknownTopicID, base64.RawURLEncoding.EncodeToString(rt.TopicID[:]))
		}
		name = t.Name
		if !b.authorize(rc, acl.OpDescribe, acl.ResourceTopic, name) {
			return nil, fmt.Errorf("%w: not authorized to describe the topic with ID %s", kerr.TopicAuthorizationFailed,
				base64.RawURLEncoding.EncodeToString(rt.TopicID[:]))
		}
	default:
		return nil, fmt.Errorf("%w: neither a topic name nor a topic ID given", kerr.InvalidRequest)
	}
	if !b.authorize(rc, acl.OpDelete, acl.ResourceTopic, name) {
		return &name, fmt.Errorf("%w: not authorized to delete topic %s", kerr.TopicAuthorizationFailed, name)
	}
	if name == offsetsTopic {
		return &name, fmt.Errorf("%w: the internal topic %s holds the groups' committed offsets and cannot be deleted", kerr.InvalidRequest, name)
	}
	return &name, b.controller.DeleteTopic(name)
}
