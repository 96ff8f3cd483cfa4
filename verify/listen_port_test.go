package verify

import (
	"net"
	"strconv"
	"testing"
)

// listenPort hands out distinct, bindable ports below the kernel's
// ephemeral range, which outgoing connections cannot take.
func TestListenPort(t *testing.T) {
	from, lo := listenPortRange()
	taken := map[int]bool{}
	seen := map[int]bool{}
	for range 50 {
		p, err := listenPort(taken)
		if err != nil {
			t.Fatal(err)
		}
		if lo-from >= 1000 && (p < from || p >= lo) {
			t.Fatalf("port %d is outside [%d, %d), below the ephemeral range", p, from, lo)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
	}
}
