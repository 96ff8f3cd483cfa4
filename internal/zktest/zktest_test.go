package zktest

import (
	"net"
	"testing"
	"time"
)

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if err := Ruok(s.Addr(), time.Second); err != nil {
		t.Fatalf("ruok after Start: %v", err)
	}
	s.Stop()
	if err := Ruok(s.Addr(), 200*time.Millisecond); err == nil {
		t.Fatal("server still answers after Stop")
	}
	s.Restart()
	if err := Ruok(s.Addr(), time.Second); err != nil {
		t.Fatalf("ruok after Restart: %v", err)
	}
}

func TestProxyPause(t *testing.T) {
	s := Start(t)
	p := NewProxy(t, s.Addr())
	if err := Ruok(p.Addr(), time.Second); err != nil {
		t.Fatalf("ruok through proxy: %v", err)
	}
	// A connection open across Pause is dropped.
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // let the relay register it
	p.Pause()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection survived Pause")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection was not closed by Pause")
	}
	if err := Ruok(p.Addr(), 300*time.Millisecond); err == nil {
		t.Fatal("paused proxy relayed ruok")
	}
	p.Resume()
	if err := Ruok(p.Addr(), time.Second); err != nil {
		t.Fatalf("ruok after Resume: %v", err)
	}
}
