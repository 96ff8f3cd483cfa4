package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/twmb/franz-go/pkg/kerr"
)

// deleteTopic deletes a topic. Its id stays in every view, and its deletion
// pending in the store, until every replica confirmed its data is gone.
func (a *active) deleteTopic(name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.md.Topics[name]
	if !ok {
		return fmt.Errorf("%w: %q", kerr.UnknownTopicOrPartition, name)
	}
	// Every replica must confirm its data is gone; until then the topic
	// id goes in every view (also to brokers that are down now).
	tombstone := zk.DeletedTopic{ID: zk.TopicID(t.ID), Topic: name}
	for _, ps := range t.Partitions {
		for _, id := range ps.Replicas {
			if !slices.Contains(tombstone.Pending, id) {
				tombstone.Pending = append(tombstone.Pending, id)
			}
		}
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	err := a.c.store.DeleteTopic(ctx, a.epochZkVersion, name, &tombstone)
	if errors.Is(err, zk.ErrTopicNotFound) {
		// Gone from the store already (an earlier attempt that failed
		// after its first transaction, which wrote the tombstone): finish
		// the deletion here.
		a.c.logger.Warn("deleted topic was already gone from the store", "topic", name)
		err = nil
	}
	if err != nil {
		return a.storeErr(err)
	}
	next := a.md.clone()
	delete(next.Topics, name)
	a.deleted[tombstone.ID] = &tombstone
	for tp := range a.zkVersions {
		if tp.Topic == name {
			delete(a.zkVersions, tp)
		}
	}
	a.publishLocked(next)
	a.c.logger.Info("deleted topic", "topic", name)
	return nil
}

// loadDeleted reads the deleted topics not yet confirmed by every replica
// into md and a.deleted, and finishes a deletion a previous controller
// began (its tombstone written, the topic's znodes not all removed).
func (a *active) loadDeleted(ctx context.Context, md *Metadata) error {
	deleted, err := a.c.store.DeletedTopics(ctx)
	if err != nil {
		return err
	}
	for _, d := range deleted {
		if t := md.Topics[d.Topic]; t != nil && t.ID == [16]byte(d.ID) {
			a.c.logger.Info("finishing the deletion of a topic", "topic", d.Topic)
			if err := a.c.store.DeleteTopic(ctx, a.epochZkVersion, d.Topic, nil); err != nil && !errors.Is(err, zk.ErrTopicNotFound) {
				return a.storeErr(err)
			}
			delete(md.Topics, d.Topic)
			for tp := range a.zkVersions {
				if tp.Topic == d.Topic {
					delete(a.zkVersions, tp)
				}
			}
		}
		a.deleted[[16]byte(d.ID)] = &d
	}
	return nil
}

// confirmDeletedLocked records that broker keeps no replica of the deleted
// topics ids (it acknowledged a view naming them, or is this controller
// and checked): a deleted topic no replica is pending for is forgotten.
func (a *active) confirmDeletedLocked(broker int32, ids [][16]byte) {
	for _, id := range ids {
		d := a.deleted[id]
		if d == nil || !slices.Contains(d.Pending, broker) {
			continue
		}
		next := *d
		next.Pending = slices.DeleteFunc(slices.Clone(d.Pending), func(b int32) bool { return b == broker })
		ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
		err := a.c.store.SetDeletedTopic(ctx, a.epochZkVersion, next)
		cancel()
		if err != nil {
			a.c.logger.Warn("recording a confirmed topic deletion failed; retried with the next view", "topic", d.Topic, "broker", broker, "err", err)
			continue
		}
		if len(next.Pending) == 0 {
			a.c.logger.Info("every replica of the deleted topic is gone", "topic", d.Topic, "topic_id", zk.TopicID(id).String())
			delete(a.deleted, id)
			continue
		}
		*d = next
	}
}

// viewAcked is told by a view sender that broker applied a view naming the
// deleted topics ids and keeps no replica of them.
func (a *active) viewAcked(broker int32, ids [][16]byte) {
	if len(ids) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx.Err() != nil {
		return
	}
	a.confirmDeletedLocked(broker, ids)
}
