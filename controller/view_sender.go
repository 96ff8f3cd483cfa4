package controller

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// viewSender delivers the newest view to one broker, retrying until it is
// acknowledged or a newer view replaces it.
type viewSender struct {
	a      *active
	id     int32
	addr   string
	conn   *kafkaconn.Conn
	wake   chan struct{}
	done   chan struct{}
	mu     sync.Mutex // guards latest and latestDeleted
	latest *kmsg.UpdateMetadataRequest
	// latestDeleted are the deleted topic ids latest names: an
	// acknowledgement confirms the broker keeps no replica of them.
	latestDeleted [][16]byte
}

func newViewSender(a *active, id int32, addr string) *viewSender {
	s := &viewSender{a: a, id: id, addr: addr, conn: kafkaconn.New(addr, "kbroker-controller-"+strconv.Itoa(int(a.c.cfg.Self.ID))).WithSecurity(a.c.cfg.PeerSecurity),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	a.wg.Add(1)
	go s.run()
	return s
}

func (s *viewSender) send(req *kmsg.UpdateMetadataRequest, deleted [][16]byte) {
	s.mu.Lock()
	s.latest, s.latestDeleted = req, deleted
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *viewSender) close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}

func (s *viewSender) run() {
	defer s.a.wg.Done()
	defer s.conn.Close()
	for {
		select {
		case <-s.done:
			return
		case <-s.a.ctx.Done():
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			req, deleted := s.latest, s.latestDeleted
			s.mu.Unlock()
			if req == nil {
				break
			}
			ctx, cancel := context.WithTimeout(s.a.ctx, 5*time.Second)
			resp, err := s.conn.Request(ctx, req)
			cancel()
			if err == nil {
				if code := resp.(*kmsg.UpdateMetadataResponse).ErrorCode; code != 0 {
					err = kerr.ErrorForCode(code)
				}
			}
			if err == nil {
				s.mu.Lock()
				if s.latest == req {
					s.latest = nil
				}
				s.mu.Unlock()
				s.a.viewAcked(s.id, deleted)
				continue
			}
			if errors.Is(err, kerr.StaleControllerEpoch) {
				s.a.c.logger.Warn("broker refused the view: a newer controller exists", "broker", s.id)
				return
			}
			select {
			case <-s.done:
				return
			case <-s.a.ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}
