package zk

import (
	"errors"
	"testing"

	gozk "github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/internal/zktest"
)

// TestWatchDeletedTopicIDs: the watch delivers nothing while the parent
// znode does not exist, then every id once deletion znodes appear (the
// parent created by the deletion itself), and follows their removal.
func TestWatchDeletedTopicIDs(t *testing.T) {
	srv := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, srv.Addr()+"/kafka")
	raw := rawConn(t, srv.Addr())
	ch, err := s.WatchDeletedTopicIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids := recv(t, ch, "initial ids"); len(ids) != 0 {
		t.Fatalf("initial ids %v", ids)
	}
	a, b := TopicID{1, 2}, TopicID{3, 4}
	for _, p := range []string{"/kafka/kbroker", "/kafka" + DeletedTopicsPath, "/kafka" + DeletedTopicPath(b), "/kafka" + DeletedTopicPath(a)} {
		if _, err := raw.Create(p, []byte(`{"version":1,"topic":"t","pending_replicas":[1]}`), 0, gozk.WorldACL(gozk.PermAll)); err != nil && !errors.Is(err, gozk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	ids := recvUntil(t, ch, "both ids", func(ids []TopicID) bool { return len(ids) == 2 })
	if ids[0] != a || ids[1] != b {
		t.Fatalf("ids %v, want [%v %v] (sorted)", ids, a, b)
	}
	if err := raw.Delete("/kafka"+DeletedTopicPath(a), -1); err != nil {
		t.Fatal(err)
	}
	ids = recvUntil(t, ch, "one id left", func(ids []TopicID) bool { return len(ids) == 1 })
	if ids[0] != b {
		t.Fatalf("ids %v, want [%v]", ids, b)
	}
}
