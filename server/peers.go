package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// peerConns are connections to other brokers for requests between them
// that are not replication (transaction markers to partition leaders,
// transaction verifications to coordinators): peerConnsPerBroker per
// broker id, used in turn, replaced when that broker's address changes.
// Requests on one connection are serialised, and a marker request waits
// for replication: several connections keep one slow request from
// holding up every transaction's markers to that broker.
type peerConns struct {
	b        *Broker
	clientID string
	// metadata gives the cluster view that addresses come from (the
	// controller's; tests substitute their own).
	metadata func() *controller.Metadata

	mu sync.Mutex
	// conns and next guarded by mu.
	conns  map[int32][]*kafkaconn.Conn
	next   map[int32]int
	closed bool
}

// peerConnsPerBroker is how many connections a peerConns keeps to each
// broker.
const peerConnsPerBroker = 4

func newPeerConns(b *Broker, clientID string) *peerConns {
	return &peerConns{b: b, clientID: clientID + "-" + strconv.Itoa(int(b.self.ID)), metadata: b.controller.Metadata,
		conns: make(map[int32][]*kafkaconn.Conn), next: make(map[int32]int)}
}

// get returns a connection to broker id at its current address, each call
// the next of its connections.
func (pc *peerConns) get(id int32) (*kafkaconn.Conn, error) {
	info, ok := pc.metadata().Broker(id)
	if !ok {
		return nil, fmt.Errorf("%w: broker %d is not live", kerr.NotLeaderForPartition, id)
	}
	addr := net.JoinHostPort(info.Host, strconv.Itoa(int(info.Port)))
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return nil, fmt.Errorf("%w: broker shutting down", kerr.BrokerNotAvailable)
	}
	conns := pc.conns[id]
	if len(conns) > 0 && conns[0].Addr() != addr {
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	i := pc.next[id] % peerConnsPerBroker
	pc.next[id] = i + 1
	if i >= len(conns) {
		conns = append(conns, kafkaconn.New(addr, pc.clientID).WithSecurity(pc.b.peerSecurity))
		i = len(conns) - 1
	}
	pc.conns[id] = conns
	return conns[i], nil
}

// request sends req to broker id on one of its connections. A failure to
// get an answer at all (not an error in the answer) most likely means the
// broker restarted, and every connection to it is as stale: they are all
// dropped, to be dialled afresh, and with retry the request goes once more
// on a fresh one (for requests safe to repeat).
func (pc *peerConns) request(ctx context.Context, id int32, req kmsg.Request, retry bool) (kmsg.Response, error) {
	for attempt := 0; ; attempt++ {
		conn, err := pc.get(id)
		if err != nil {
			return nil, err
		}
		resp, err := conn.Request(ctx, req)
		if err == nil {
			return resp, nil
		}
		pc.drop(id, conn.Addr())
		if !retry || attempt > 0 || ctx.Err() != nil {
			return nil, err
		}
	}
}

// drop forgets the connections to broker id at addr; they are closed in
// the background (a request in flight on one finishes or fails first).
func (pc *peerConns) drop(id int32, addr string) {
	pc.mu.Lock()
	conns := pc.conns[id]
	if len(conns) == 0 || conns[0].Addr() != addr {
		pc.mu.Unlock()
		return
	}
	delete(pc.conns, id)
	pc.mu.Unlock()
	go func() {
		for _, c := range conns {
			c.Close()
		}
	}()
}

// Close closes the connections; later gets fail.
func (pc *peerConns) Close() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.closed = true
	for id, conns := range pc.conns {
		for _, c := range conns {
			c.Close()
		}
		delete(pc.conns, id)
	}
}
