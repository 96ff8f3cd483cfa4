package server

import "testing"

// A peer gets peerConnsPerBroker connections, used in turn.
func TestPeerConnsTakeTurns(t *testing.T) {
	b := newAdminTestBroker(t)
	pc := newPeerConns(b, "test")
	defer pc.Close()
	seen := map[any]int{}
	var first any
	for i := 0; i < 2*peerConnsPerBroker; i++ {
		c, err := pc.get(b.self.ID)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = c
		}
		if i == peerConnsPerBroker && any(c) != first {
			t.Fatalf("call %d did not come back to the first connection", i)
		}
		seen[c]++
	}
	if len(seen) != peerConnsPerBroker {
		t.Fatalf("%d connections, want %d", len(seen), peerConnsPerBroker)
	}
	pc.Close()
	if _, err := pc.get(b.self.ID); err == nil {
		t.Fatal("get after Close: no error")
	}
}
