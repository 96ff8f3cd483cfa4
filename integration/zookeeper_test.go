package integration

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestZooKeeperHarness: the helper's server takes writes, and they survive
// a restart on the same data directory.
func TestZooKeeperHarness(t *testing.T) {
	z := StartZooKeeper(t)
	connect := func() *zk.Conn {
		t.Helper()
		c, _, err := zk.Connect([]string{z.Addr()}, 6*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatalf("zk.Connect: %v", err)
		}
		t.Cleanup(c.Close)
		return c
	}
	c := connect()
	if _, err := c.Create("/kbroker-harness", []byte("v1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create: %v", err)
	}
	c.Close()
	z.Restart()
	c = connect()
	var data []byte
	checkFor(t, 15*time.Second, 100*time.Millisecond, func() error {
		var err error
		data, _, err = c.Get("/kbroker-harness")
		return err
	})
	if string(data) != "v1" {
		t.Errorf("znode after restart holds %q, want %q", data, "v1")
	}
	if out, err := fourLetter(z.Addr(), "srvr", 5*time.Second); err != nil || len(out) == 0 {
		t.Errorf("srvr: %q %v", out, err)
	}
}
