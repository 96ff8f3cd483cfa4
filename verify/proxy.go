package verify

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Proxy is an in-process TCP relay in front of one listener. Every
// connection is labelled with its source (a broker id such as "b2", or
// "client" for anything else, as told by an identify function); Cut
// partitions the listener from chosen sources: their relayed connections
// are closed and new ones are accepted but black-holed (bytes read and
// dropped, nothing answered) until Heal, as a real partition would look to
// the peer's timeouts.
type Proxy struct {
	name     string
	target   string
	ln       net.Listener
	identify func(net.Conn) string

	// mu guards cut, links and closed.
	mu     sync.Mutex
	cut    map[string]bool // sources cut off; "*" cuts everyone
	links  map[*link]struct{}
	closed bool

	wg sync.WaitGroup
}

type link struct {
	src    string
	client net.Conn
	server net.Conn // nil for a black-holed connection
}

func (l *link) close() {
	l.client.Close()
	if l.server != nil {
		l.server.Close()
	}
}

// NewProxy listens on 127.0.0.1:port (0 for any free port) and relays to
// target. identify may be nil (every source is "client").
func NewProxy(name string, port int, target string, identify func(net.Conn) string) (*Proxy, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", name, err)
	}
	p := &Proxy{name: name, target: target, ln: ln, identify: identify, cut: map[string]bool{}, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's listening port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Cut partitions the target from the given sources ("*" for all).
func (p *Proxy) Cut(sources ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range sources {
		p.cut[s] = true
	}
	for l := range p.links {
		if p.isCutLocked(l.src) {
			l.close()
			delete(p.links, l)
		}
	}
}

// Heal lifts every cut; black-holed connections are closed so their peers
// reconnect.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = map[string]bool{}
	p.closeHealedLocked()
}

// HealFrom lifts the cuts of the given sources only (another fault's cuts
// of other sources stay); their black-holed connections are closed so
// their peers reconnect.
func (p *Proxy) HealFrom(sources ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range sources {
		delete(p.cut, s)
	}
	p.closeHealedLocked()
}

// closeHealedLocked closes the black-holed connections whose source is no
// longer cut, so their peers reconnect.
func (p *Proxy) closeHealedLocked() {
	for l := range p.links {
		if l.server == nil && !p.isCutLocked(l.src) {
			l.close()
			delete(p.links, l)
		}
	}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for l := range p.links {
		l.close()
	}
	p.links = map[*link]struct{}{}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) isCutLocked(src string) bool { return p.cut["*"] || p.cut[src] }

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	src := "client"
	if p.identify != nil {
		src = p.identify(client)
	}
	l := &link{src: src, client: client}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		client.Close()
		return
	}
	if p.isCutLocked(src) {
		// Black hole: swallow what the peer sends until healed.
		p.links[l] = struct{}{}
		p.mu.Unlock()
		_, _ = io.Copy(io.Discard, client)
		p.drop(l)
		return
	}
	p.mu.Unlock()
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		client.Close()
		return
	}
	l.server = server
	p.mu.Lock()
	if p.closed || p.isCutLocked(src) {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	l.close()
	<-done
	p.drop(l)
}

func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}

// socketOwner finds which of pids owns the client end of conn, a TCP
// connection accepted on 127.0.0.1: it finds the socket inode of the peer's
// end in /proc/net/tcp and looks for it among each pid's open files. It
// returns -1 if none of them does.
func socketOwner(conn net.Conn, pids map[int]int) int {
	remote, ok1 := conn.RemoteAddr().(*net.TCPAddr)
	local, ok2 := conn.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || len(pids) == 0 {
		return -1
	}
	for attempt := 0; attempt < 3; attempt++ {
		inode := peerInode(remote.Port, local.Port)
		if inode != "" {
			target := "socket:[" + inode + "]"
			for pid, id := range pids {
				if ownsFile(pid, target) {
					return id
				}
			}
			return -1
		}
		time.Sleep(5 * time.Millisecond)
	}
	return -1
}

// peerInode is the inode of the socket whose local port is localPort and
// remote port remotePort, from /proc/net/tcp.
func peerInode(localPort, remotePort int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	want1 := fmt.Sprintf(":%04X", localPort)
	want2 := fmt.Sprintf(":%04X", remotePort)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		if strings.HasSuffix(fields[1], want1) && strings.HasSuffix(fields[2], want2) {
			return fields[9]
		}
	}
	return ""
}

func ownsFile(pid int, target string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == target {
			return true
		}
	}
	return false
}
