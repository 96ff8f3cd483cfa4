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
// transaction verifications to coordinators): one per broker id, replaced
// when that broker's address changes. Requests on one connection are
// serialised.
type peerConns struct {
	b        *Broker
	clientID string

	mu sync.Mutex
	// conns guarded by mu.
	conns  map[int32]*kafkaconn.Conn
	closed bool
}

func newPeerConns(b *Broker, clientID string) *peerConns {
	return &peerConns{b: b, clientID: clientID + "-" + strconv.Itoa(int(b.self.ID)), conns: make(map[int32]*kafkaconn.Conn)}
}

// get returns the connection to broker id at its current address.
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
	c := pc.conns[id]
	if c == nil || c.Addr() != addr {
		if c != nil {
			c.Close()
		}
		c = kafkaconn.New(addr, pc.clientID)
		pc.conns[id] = c
	}
	return c, nil
}

// Close closes the connections; later gets fail.
func (pc *peerConns) Close() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.closed = true
	for id, c := range pc.conns {
		c.Close()
		delete(pc.conns, id)
	}
}
