package zktest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP relay in front of a ZooKeeper that a test can cut: while
// paused it drops every connection and refuses new ones, so the clients
// behind it lose ZooKeeper while the server keeps running. Paused for longer
// than a session timeout, their sessions expire on the server (ephemeral
// znodes vanish, watches end) exactly as after a real network partition.
type Proxy struct {
	target string
	ln     net.Listener

	// mu guards paused and conns.
	mu     sync.Mutex
	paused bool
	conns  map[net.Conn]struct{}

	wg sync.WaitGroup
}

// NewProxy relays 127.0.0.1:<free port> to target until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("zktest: proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

// Addr is the address clients should use instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pause drops every relayed connection and refuses new ones until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	for c := range p.conns {
		c.Close()
	}
}

// Resume relays new connections again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Pause()
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.relay(client)
	}
}

// track registers c unless the proxy is paused.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) relay(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		client.Close()
		return
	}
	defer p.untrack(client)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	// Either side ending ends both.
	client.Close()
	server.Close()
	<-done
}
