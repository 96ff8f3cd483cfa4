package zk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	gozk "github.com/go-zookeeper/zk"
)

// Deleted topics. Kafka's ZooKeeper controller keeps /admin/delete_topics/<t>
// until every replica has confirmed the deletion (StopReplica), and refuses
// the name meanwhile. kbroker lets the name be reused at once and keeps, per
// deleted topic id, the replicas that have not yet confirmed:
//
//	/kbroker/deleted_topics/<topic id>   {"version":1,"topic":"t","pending_replicas":[1,2,3]}
//
// Every cluster view carries the ids of these topics; a broker deletes any
// replica of them it keeps (open or only on disk, also after being offline
// or paused through the deletion) and confirms by acknowledging the view.
// The znode goes when no replica is pending. It lives outside Kafka's layout
// (Kafka has nothing equivalent), so Kafka tools ignore it.

// DeletedTopicsPath is the parent of the deleted topic znodes.
const DeletedTopicsPath = "/kbroker/deleted_topics"

// DeletedTopicPath is /kbroker/deleted_topics/<topic id>.
func DeletedTopicPath(id TopicID) string { return DeletedTopicsPath + "/" + id.String() }

// DeletedTopic is a deleted topic whose replicas have not all confirmed
// their data is gone.
type DeletedTopic struct {
	ID    TopicID
	Topic string
	// Pending are the brokers that held a replica and have not confirmed.
	Pending []int32
}

// EncodeDeletedTopic encodes a deleted topic znode.
func EncodeDeletedTopic(d DeletedTopic) []byte {
	pending := slices.Clone(d.Pending)
	slices.Sort(pending)
	var o object
	o.add("version", 1).add("topic", d.Topic).addRaw("pending_replicas", int32List(pending))
	return o.bytes()
}

// DecodeDeletedTopic decodes the znode of topic id.
func DecodeDeletedTopic(id TopicID, data []byte) (DeletedTopic, error) {
	path := DeletedTopicPath(id)
	var raw struct {
		Version *int    `json:"version"`
		Topic   string  `json:"topic"`
		Pending []int32 `json:"pending_replicas"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return DeletedTopic{}, err
	}
	if raw.Version == nil || *raw.Version != 1 {
		return DeletedTopic{}, malformed(path, data, "unsupported version")
	}
	return DeletedTopic{ID: id, Topic: raw.Topic, Pending: raw.Pending}, nil
}

// DeletedTopics reads every deleted topic still pending.
func (s *Store) DeletedTopics(ctx context.Context) ([]DeletedTopic, error) {
	names, err := s.children(ctx, DeletedTopicsPath)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []DeletedTopic
	for _, name := range names {
		id, err := ParseTopicID(name)
		if err != nil {
			s.logger.Warn("ignoring a deleted topic znode that names no topic id", "znode", DeletedTopicsPath+"/"+name)
			continue
		}
		data, _, err := s.get(ctx, DeletedTopicPath(id))
		if errors.Is(err, ErrNoNode) || errors.Is(err, gozk.ErrNoNode) {
			continue // confirmed meanwhile
		}
		if err != nil {
			return nil, err
		}
		d, err := DecodeDeletedTopic(id, data)
		if err != nil {
			// A damaged znode must not fail a controller's takeover;
			// the name check (a name's new topic id) still removes the
			// old replicas wherever the name is reused.
			s.logger.Error("ignoring a malformed deleted topic znode", "err", err)
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// SetDeletedTopic records which replicas of a deleted topic are still
// pending, removing the znode when none is; fenced on the controller epoch.
func (s *Store) SetDeletedTopic(ctx context.Context, epochZkVersion int32, d DeletedTopic) error {
	p := DeletedTopicPath(d.ID)
	var op any
	if len(d.Pending) == 0 {
		op = s.deleteOp(p, -1)
	} else {
		op = s.setOp(p, EncodeDeletedTopic(d), -1)
	}
	if _, err := s.fencedMulti(ctx, epochZkVersion, op); err != nil {
		var me *MultiError
		if errors.As(err, &me) && errors.Is(me.Err, gozk.ErrNoNode) {
			return nil // already gone
		}
		return fmt.Errorf("update deleted topic %s (%s): %w", d.Topic, d.ID, err)
	}
	return nil
}

// WatchDeletedTopicIDs delivers the ids under /kbroker/deleted_topics now
// and after every change, until ctx ends. A broker drops those topics from
// its view at once: it may be cut off from the controller, whose view
// saying so would not reach it, while its ZooKeeper session lives on.
func (s *Store) WatchDeletedTopicIDs(ctx context.Context) (<-chan []TopicID, error) {
	return watchLoop(ctx, s, func() ([]TopicID, <-chan gozk.Event, error) {
		names, _, ev, err := s.conn.ChildrenW(s.abs(DeletedTopicsPath))
		if errors.Is(err, gozk.ErrNoNode) {
			// No deletion yet: watch for the parent's creation.
			var exists bool
			exists, _, ev, err = s.conn.ExistsW(s.abs(DeletedTopicsPath))
			if err == nil && exists {
				// Created in between: read again at once.
				closed := make(chan gozk.Event)
				close(closed)
				return nil, closed, nil
			}
			return nil, ev, err
		}
		if err != nil {
			return nil, nil, err
		}
		ids := make([]TopicID, 0, len(names))
		for _, name := range names {
			if id, err := ParseTopicID(name); err == nil {
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
		return ids, ev, nil
	}, slices.Equal)
}
