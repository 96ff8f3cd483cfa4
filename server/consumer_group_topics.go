package server

// The coordinator's view of the cluster's topics, for consumer (KIP-848)
// groups: built from the controller's current metadata snapshot and cached
// until the snapshot changes (snapshots are immutable, so pointer identity
// says when to rebuild).

import (
	"sync"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/coordinator"
)

// topicImageCache holds the last image and the metadata it was built from.
type topicImageCache struct {
	mu    sync.Mutex
	from  *controller.Metadata // guarded by mu
	image *coordinator.TopicImage
}

func (tc *topicImageCache) get(md *controller.Metadata) *coordinator.TopicImage {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if md == nil {
		return nil
	}
	if tc.from == md && tc.image != nil {
		return tc.image
	}
	topics := make(map[string]coordinator.TopicInfo, len(md.Topics))
	for name, t := range md.Topics {
		topics[name] = coordinator.TopicInfo{ID: t.ID, Partitions: int32(len(t.Partitions))}
	}
	tc.from, tc.image = md, coordinator.NewTopicImage(topics)
	return tc.image
}

// consumerGroupTopics returns the topic image for the group coordinator.
func (b *Broker) consumerGroupTopics() func() *coordinator.TopicImage {
	var cache topicImageCache
	return func() *coordinator.TopicImage {
		if b.controller == nil {
			return nil
		}
		return cache.get(b.controller.Metadata())
	}
}
