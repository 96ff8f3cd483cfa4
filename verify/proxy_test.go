package verify

import (
	"bufio"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// echoServer answers each line with the same line.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write([]byte(sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "ping" {
		return net.UnknownNetworkError(line)
	}
	return nil
}

func TestProxyIdentifiesAndCuts(t *testing.T) {
	target := echoServer(t)
	// This test process plays broker 7.
	p, err := NewProxy("test", 0, target, func(c net.Conn) string {
		if socketOwner(c, map[int]int{os.Getpid(): 7}) == 7 {
			return "b7"
		}
		return "client"
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("relay: %v", err)
	}
	p.Cut("client")
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("cutting clients cut broker 7: %v", err)
	}
	p.Cut("b7")
	if err := roundTrip(p.Addr()); err == nil {
		t.Fatal("cut b7 still relays")
	}
	p.Heal()
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	p.Cut("*")
	if err := roundTrip(p.Addr()); err == nil {
		t.Fatal("cut * still relays")
	}
}
