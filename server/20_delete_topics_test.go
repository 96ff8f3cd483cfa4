package server

import (
	"context"
	"testing"

	"github.com/kbroker/kbroker/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func deleteTopics(t *testing.T, b *Broker, version int16, names ...string) *kmsg.DeleteTopicsResponse {
	t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = version
	if version <= 5 {
		req.TopicNames = names
	} else {
		for _, n := range names {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := handleDeleteTopics(context.Background(), b, &requestContext{version: version}, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.DeleteTopicsResponse)
}

func TestDeleteTopics(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "a", 2, nil)
	mustCreateTopic(t, b, "b", 1, nil)
	mustCreateTopic(t, b, offsetsTopic, 1, nil)

	resp := deleteTopics(t, b, 5, "a", "missing", offsetsTopic)
	want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code}
	for i, st := range resp.Topics {
		if st.ErrorCode != want[i] {
			t.Errorf("topic %s: error %d, want %d", *st.Topic, st.ErrorCode, want[i])
		}
	}
	if _, ok := b.controller.Metadata().Topics["a"]; ok {
		t.Fatal("topic a still in the metadata")
	}
	if _, err := b.localPartition("a", 0); err == nil {
		t.Fatal("partition a-0 still served")
	}

	// v6 by ID: the name comes back in the answer.
	id := b.controller.Metadata().Topics["b"].ID
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	for _, tid := range [][16]byte{id, {1, 2, 3}} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = tid
		req.Topics = append(req.Topics, rt)
	}
	r, err := handleDeleteTopics(context.Background(), b, &requestContext{version: 6}, req)
	if err != nil {
		t.Fatal(err)
	}
	got := r.(*kmsg.DeleteTopicsResponse).Topics
	if got[0].ErrorCode != 0 || got[0].Topic == nil || *got[0].Topic != "b" || got[0].TopicID != id {
		t.Errorf("delete by id: got %+v", got[0])
	}
	if got[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("unknown id: error %d, want UNKNOWN_TOPIC_ID", got[1].ErrorCode)
	}

	// v6 with both a name and an ID: the whole request is invalid.
	mustCreateTopic(t, b, "c", 1, nil)
	req = kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr("c")
	rt.TopicID = b.controller.Metadata().Topics["c"].ID
	req.Topics = append(req.Topics, rt)
	r, err = handleDeleteTopics(context.Background(), b, &requestContext{version: 6}, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Errorf("name and id: error %d, want INVALID_REQUEST", code)
	}
	if _, ok := b.controller.Metadata().Topics["c"]; !ok {
		t.Error("topic c deleted by an invalid request")
	}
}

func TestDeleteTopicsDisabled(t *testing.T) {
	b := newAdminTestBroker(t, func(c *config.Config) { c.DeleteTopicEnable = false })
	mustCreateTopic(t, b, "a", 1, nil)
	for version, want := range map[int16]int16{2: kerr.InvalidRequest.Code, 3: kerr.TopicDeletionDisabled.Code, 6: kerr.TopicDeletionDisabled.Code} {
		resp := deleteTopics(t, b, version, "a")
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != want {
			t.Errorf("v%d: got %+v, want error %d", version, resp.Topics, want)
		}
	}
	if _, ok := b.controller.Metadata().Topics["a"]; !ok {
		t.Fatal("topic deleted although deletion is disabled")
	}
}
