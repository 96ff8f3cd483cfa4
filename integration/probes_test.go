package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// probeSet is what the cluster harnesses share to talk to one broker, or
// to ZooKeeper, directly: one franz-go client per key (a broker address,
// or an address with client options), made on first use, and one
// ZooKeeper connection. closeProbes releases them.
type probeSet struct {
	mu      sync.Mutex // guards clients and zkc
	clients map[string]*kgo.Client
	zkc     *zk.Conn
	// security are the options every client needs (TLS, SASL) on a
	// cluster whose listeners require them; set before first use.
	security []kgo.Opt
}

// clientFor returns the client kept under key, making it with opts (after
// a seed of addr, a 1 s dial timeout and no retries) the first time.
func (s *probeSet) clientFor(key, addr string, opts ...kgo.Opt) (*kgo.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl := s.clients[key]; cl != nil {
		return cl, nil
	}
	base := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second), kgo.RequestRetries(0)}, s.security...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	if s.clients == nil {
		s.clients = map[string]*kgo.Client{}
	}
	s.clients[key] = cl
	return cl, nil
}

// probe returns a client whose seed broker is addr, for requests that must
// go to that broker and no other.
func (s *probeSet) probe(addr string) (*kgo.Client, error) { return s.clientFor(addr, addr) }

// requestTo sends req to the broker at addr itself.
func (s *probeSet) requestTo(addr string, timeout time.Duration, req kmsg.Request) (kmsg.Response, error) {
	cl, err := s.probe(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// zkConnTo returns the shared go-zookeeper connection to addr.
func (s *probeSet) zkConnTo(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.zkc == nil {
		conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZKLogger{}))
		if err != nil {
			t.Fatalf("zk.Connect: %v", err)
		}
		s.zkc = conn
	}
	return s.zkc
}

type quietZKLogger struct{}

func (quietZKLogger) Printf(string, ...any) {}

// closeProbes closes every client and the ZooKeeper connection.
func (s *probeSet) closeProbes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cl := range s.clients {
		cl.Close()
	}
	s.clients = nil
	if s.zkc != nil {
		s.zkc.Close()
		s.zkc = nil
	}
}
