package server

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestFetchSessionEpochs(t *testing.T) {
	f := newFetchSessions()
	now := time.Now()
	s := f.create(now)
	if s == nil || s.id <= 0 {
		t.Fatalf("create: %+v", s)
	}
	if _, err := f.get(s.id, 2, now); !errors.Is(err, kerr.InvalidFetchSessionEpoch) {
		t.Fatalf("skipping an epoch: %v", err)
	}
	for epoch := int32(1); epoch <= 3; epoch++ {
		if _, err := f.get(s.id, epoch, now); err != nil {
			t.Fatalf("epoch %d: %v", epoch, err)
		}
	}
	if _, err := f.get(s.id, 3, now); !errors.Is(err, kerr.InvalidFetchSessionEpoch) {
		t.Fatalf("replayed epoch: %v", err)
	}
	f.remove(s.id)
	if _, err := f.get(s.id, 4, now); !errors.Is(err, kerr.FetchSessionIDNotFound) {
		t.Fatalf("removed session: %v", err)
	}
	if other := f.create(now); other.id == s.id {
		t.Fatal("session ids must not be reused right away")
	}
}

func TestFetchSessionPartitions(t *testing.T) {
	s := newFetchSessions().create(time.Now())
	s.upsert(sessionPartition{topic: "a", partition: 0, fetchOffset: 5})
	s.upsert(sessionPartition{topic: "a", partition: 1, fetchOffset: 7})
	s.upsert(sessionPartition{topic: "a", partition: 0, fetchOffset: 9, maxBytes: 100})
	if len(s.order) != 2 || s.parts[sessionKey{"a", 0}].fetchOffset != 9 || s.parts[sessionKey{"a", 0}].sentHighWatermark != -1 {
		t.Fatalf("upsert: order %v, part %+v", s.order, s.parts[sessionKey{"a", 0}])
	}
	s.forget(sessionKey{"a", 0})
	if len(s.order) != 1 || s.order[0] != (sessionKey{"a", 1}) {
		t.Fatalf("forget: %v", s.order)
	}
}

func TestFetchSessionCacheBounded(t *testing.T) {
	f := newFetchSessions()
	now := time.Now()
	for i := 0; i < maxFetchSessions; i++ {
		if f.create(now) == nil {
			t.Fatalf("session %d refused below the limit", i)
		}
	}
	if f.create(now) != nil {
		t.Fatal("a full cache of active sessions must refuse new ones")
	}
	if f.create(now.Add(fetchSessionIdle+time.Second)) == nil {
		t.Fatal("idle sessions must be evicted for new ones")
	}
}
