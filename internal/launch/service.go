package launch

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// service is what Kbroker and ZooKeeper share: a port kept across runs,
// so that a restarted server is found where its clients expect it, and the
// latest run.
type service struct {
	name string // for errors: "kbroker", "ZooKeeper"

	mu   sync.Mutex // guards port and proc
	port int        // 0 until the first start picks one
	proc *Process   // the latest run; nil before the first
}

// Port is the listening port (0 before the first Start when none was
// given).
func (s *service) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// Addr is the listening address, 127.0.0.1:port.
func (s *service) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())) }

// Process is the latest run (nil before the first Start).
func (s *service) Process() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

func (s *service) setProcess(p *Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc = p
}

// start calls once (which starts a run, records it with setProcess and
// waits until it answers) on the service's port. Without a port yet it
// picks free ones, attempts in all, while once fails: a run that exited
// is simply replaced; one still running is killed first if killRunning,
// else kept, for the caller to inspect, and start gives up.
func (s *service) start(ctx context.Context, attempts int, killRunning bool, once func(ctx context.Context, addr string) error) error {
	if s.Process().Running() {
		return fmt.Errorf("%s already running on %s", s.name, s.Addr())
	}
	s.mu.Lock()
	pick := s.port == 0
	s.mu.Unlock()
	if !pick {
		attempts = 1
	}
	var err error
	for attempt := 0; attempt < max(attempts, 1); attempt++ {
		if p := s.Process(); attempt > 0 && p.Running() {
			if !killRunning {
				break
			}
			_ = p.Kill(KillWait)
		}
		if pick {
			port, perr := FreePort()
			if perr != nil {
				return perr
			}
			s.mu.Lock()
			s.port = port
			s.mu.Unlock()
		}
		if err = once(ctx, s.Addr()); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s on %s: %w", s.name, s.Addr(), err)
}
