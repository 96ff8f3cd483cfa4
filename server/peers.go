package server

import (
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/twmb/franz-go/pkg/kerr"
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
	return &peerConns{b: b, clientID: clientID + "-" + strconv.Itoa(int(b.self.ID)),
		conns: make(map[int32][]*kafkaconn.Conn), next: make(map[int32]int)}
}

// get returns a connection to broker id at its current address, each call
// the next of its connections.
func (pc *peerConns) get(id int32) (*kafkaconn.Conn, error) {
	md := pc.b.controller.Metadata()
	info, ok := md.Broker(id)
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
		conns = append(conns, kafkaconn.New(addr, pc.clientID))
		i = len(conns) - 1
	}
	pc.conns[id] = conns
	return conns[i], nil
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
