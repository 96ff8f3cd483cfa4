package verify

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// listenPort hands out distinct, bindable ports below the kernel's
// ephemeral range, which outgoing connections cannot take.
func TestListenPort(t *testing.T) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, _ = strconv.Atoi(f[0])
		}
	}
	taken := map[int]bool{}
	seen := map[int]bool{}
	for range 50 {
		p, err := listenPort(taken)
		if err != nil {
			t.Fatal(err)
		}
		if lo-max(lo/2, 1024) >= 1000 && p >= lo {
			t.Fatalf("port %d is in the ephemeral range (from %d)", p, lo)
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
