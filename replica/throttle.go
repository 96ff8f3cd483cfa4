package replica

import "slices"

// FollowerThrottle is this broker's follower-side replication throttle
// (Kafka's follower ReplicationQuotaManager, KIP-73): Hold tells whether a
// partition is left out of the next fetch (throttled, out of sync, and the
// rate over its bound); Record counts the bytes fetched for a throttled
// partition. Nil: nothing is throttled.
type FollowerThrottle interface {
	Hold(tp TopicPartition) bool
	Record(tp TopicPartition, bytes int)
}

// throttleRef holds a FollowerThrottle for atomic replacement.
type throttleRef struct{ t FollowerThrottle }

// SetFollowerThrottle installs the follower-side throttle every fetcher
// consults from its next fetch on.
func (m *Manager) SetFollowerThrottle(t FollowerThrottle) {
	m.fetchers.throttle.Store(&throttleRef{t})
}

// followerThrottle is the installed throttle, nil for none.
func (fm *fetcherManager) followerThrottle() FollowerThrottle {
	if ref := fm.throttle.Load(); ref != nil {
		return ref.t
	}
	return nil
}

// InSync reports whether replica id is in the partition's ISR as this
// broker knows it.
func (p *Partition) InSync(id int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.isr, id)
}
