package share

import (
	"errors"
	"slices"
	"testing"
)

// CloseConn ends exactly the sessions the closed connection opened: not
// another connection's, and not a member's session that a later request
// on another connection replaced (epoch 0 again), nor one opened with no
// connection known.
func TestCloseConnEndsItsSessions(t *testing.T) {
	m := NewManager(10)
	tp := TP{Partition: 0}
	open := func(member string, conn uint64) {
		t.Helper()
		if _, _, err := m.OpenSession(SessionRequest{Group: "g", Member: member, Epoch: 0, Add: []TP{tp}, Conn: conn}); err != nil {
			t.Fatalf("open %s on %d: %v", member, conn, err)
		}
	}
	open("a", 1)
	open("b", 1)
	open("c", 2)
	open("d", 1)
	open("d", 3) // reconnected: the session now belongs to connection 3
	open("e", 0)

	var closed []string
	for _, s := range m.CloseConn(1) {
		closed = append(closed, s.Member)
		if !slices.Equal(s.Parts(), []TP{tp}) {
			t.Errorf("closed session of %s has partitions %v", s.Member, s.Parts())
		}
	}
	slices.Sort(closed)
	if !slices.Equal(closed, []string{"a", "b"}) {
		t.Fatalf("closing connection 1 ended the sessions of %v, want [a b]", closed)
	}
	if got := m.CloseConn(0); len(got) != 0 {
		t.Fatalf("closing connection 0 ended %d sessions", len(got))
	}
	for member, want := range map[string]error{"a": ErrSessionNotFound, "b": ErrSessionNotFound, "c": nil, "d": nil, "e": nil} {
		_, _, err := m.OpenSession(SessionRequest{Group: "g", Member: member, Epoch: 1})
		if !errors.Is(err, want) {
			t.Errorf("member %s's next request: %v, want %v", member, err, want)
		}
	}
}
