package zk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// Sentinel errors; Store methods wrap them with context, test with errors.Is.
var (
	// ErrControllerMoved is Kafka's ControllerMovedException: the write was
	// fenced because /controller_epoch moved past the caller's epoch, or
	// the caller lost an election.
	ErrControllerMoved = errors.New("controller moved to another broker")
	// ErrTopicExists: the topic znode is already there.
	ErrTopicExists = errors.New("topic already exists")
	// ErrTopicNotFound: the topic znode is not there.
	ErrTopicNotFound = errors.New("topic does not exist")
	// ErrBrokerRegistered: another session holds /brokers/ids/<id>.
	ErrBrokerRegistered = errors.New("already registered by another broker")
	// ErrVersionConflict: a conditional write found the znode at another
	// version than expected (ZooKeeper BADVERSION): re-read and retry.
	ErrVersionConflict = errors.New("znode version conflict")
	// ErrNoNode: the znode to read or update does not exist.
	ErrNoNode = errors.New("znode does not exist")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("zookeeper store closed")
)

// Store reads and writes Kafka's ZooKeeper layout over one ZooKeeper
// session at a time. All methods are safe for concurrent use.
//
// Connection loss is retried (after waiting for the connection to come
// back, bounded by the caller's ctx), as Kafka's retryRequestsUntilConnected
// does; session expiry is not hidden: SessionExpired's channel closes, the
// connection gets a new session by itself, and the owner re-registers its
// ephemeral znodes (RegisterBroker, ElectController) after Reconnect.
type Store struct {
	conn    *gozk.Conn
	chroot  string // "" or "/path", prefixed to every znode path
	servers []string
	logger  *slog.Logger
	// sessionTimeout is the session's; bulk read sessions ask the same.
	sessionTimeout time.Duration
	// bulkServer, when set, is where bulk read sessions go instead of the
	// session's server (tests: a server that cannot multiRead).
	bulkServer string

	closeOnce sync.Once
	closed    chan struct{}
	eventsEnd chan struct{} // closed when handleEvents returns

	// mu guards the fields below.
	mu        sync.Mutex
	state     gozk.State
	stateCh   chan struct{} // closed and replaced on every state change
	session   *session      // current (or last) session; nil before the first
	ephemeral int64         // session id that last created one of our ephemerals

	requestStats RequestStats // latency of every request attempt (metrics.go)
	expiries     atomic.Int64 // sessions found expired (metrics.go)
}

// session is one ZooKeeper session of the Store.
type session struct {
	id      int64
	expired chan struct{} // closed when the session expires
	dead    bool          // expired is closed
}

// Connect opens a session with the ZooKeeper ensemble in connectString,
// host:port[,host:port...][/chroot] as Kafka's zookeeper.connect, creating
// the chroot if it is missing (as Kafka does), and Kafka's persistent
// top-level znodes. It fails after connectionTimeout if no server answers.
func Connect(ctx context.Context, connectString string, sessionTimeout, connectionTimeout time.Duration, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	servers, chroot, err := ParseConnectString(connectString)
	if err != nil {
		return nil, err
	}
	s := &Store{
		chroot:         chroot,
		servers:        servers,
		sessionTimeout: sessionTimeout,
		logger:         logger.With("zookeeper", connectString),
		closed:         make(chan struct{}),
		eventsEnd:      make(chan struct{}),
		stateCh:        make(chan struct{}),
		state:          gozk.StateDisconnected,
	}
	conn, events, err := gozk.Connect(servers, sessionTimeout,
		gozk.WithLogger(zkLogger{s.logger}), gozk.WithLogInfo(false),
		// Kafka's client reads up to 4 MB (jute.maxbuffer it sets); keep a
		// bound so a huge znode cannot exhaust memory.
		gozk.WithMaxBufferSize(4<<20))
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", connectString, err)
	}
	s.conn = conn
	go s.handleEvents(events)

	waitCtx, cancel := context.WithTimeout(ctx, connectionTimeout)
	defer cancel()
	if err := s.waitConnected(waitCtx); err != nil {
		s.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to ZooKeeper at %s: %w", connectString, ctx.Err())
		}
		return nil, fmt.Errorf("cannot reach ZooKeeper at %s within %v", strings.Join(servers, ","), connectionTimeout)
	}
	if err := s.ensurePaths(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.logger.Info("connected to ZooKeeper", "session", fmt.Sprintf("0x%x", s.SessionID()), "chroot", chroot)
	return s, nil
}

// ParseConnectString splits Kafka's zookeeper.connect into servers and a
// chroot ("" for none).
func ParseConnectString(cs string) (servers []string, chroot string, err error) {
	hosts := cs
	if i := strings.IndexByte(cs, '/'); i >= 0 {
		hosts, chroot = cs[:i], cs[i:]
		if chroot == "/" {
			chroot = ""
		}
		if strings.HasSuffix(chroot, "/") || strings.Contains(chroot, "//") {
			return nil, "", fmt.Errorf("zookeeper connect string %q: bad chroot path %q", cs, chroot)
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		servers = append(servers, h)
	}
	if len(servers) == 0 {
		return nil, "", fmt.Errorf("zookeeper connect string %q names no server", cs)
	}
	return gozk.FormatServers(servers), chroot, nil
}

// ensurePaths creates the chroot and Kafka's persistent paths.
func (s *Store) ensurePaths(ctx context.Context) error {
	if s.chroot != "" {
		if err := s.createParents(ctx, s.chroot+"/x"); err != nil {
			return fmt.Errorf("create ZooKeeper chroot %s: %w", s.chroot, err)
		}
	}
	for _, p := range append(slices.Clone(persistentPaths), DeletedTopicsPath, EventsPath) {
		if err := s.createParents(ctx, s.abs(p)+"/x"); err != nil {
			return fmt.Errorf("create %s: %w", s.abs(p), err)
		}
	}
	return nil
}

// createParents creates every missing ancestor of the absolute path p
// (not p itself), with no data, ignoring ones that exist.
func (s *Store) createParents(ctx context.Context, p string) error {
	for i := 1; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		dir := p[:i]
		err := s.retry(ctx, func() error {
			_, err := s.conn.Create(dir, nil, 0, acl)
			return err
		})
		if err != nil && !errors.Is(err, gozk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// acl is Kafka's ACL without zookeeper.set.acl: open to all.
var acl = gozk.WorldACL(gozk.PermAll)

// Close ends the session (ephemeral znodes go at once) and the connection.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.conn.Close()
		<-s.eventsEnd
		s.mu.Lock()
		if s.session != nil && !s.session.dead {
			// Closing ends the session: its ephemerals are gone.
			s.session.dead = true
			close(s.session.expired)
		}
		s.mu.Unlock()
	})
}

// Chroot is the chroot path, "" for none.
func (s *Store) Chroot() string { return s.chroot }

// SessionID is the current ZooKeeper session id (0 while there is none).
func (s *Store) SessionID() int64 { return s.conn.SessionID() }

// SessionExpired returns a channel closed when the current session expires
// (ZooKeeper then has deleted its ephemeral znodes: the broker registration
// and, for the controller, /controller) or the Store is closed. After it
// closes, call Reconnect, then re-register.
//
// Like Kafka's, this learns of expiry from the server, on reconnection: a
// broker cut off from ZooKeeper sees it only once it can reach it again.
func (s *Store) SessionExpired() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		// Cannot happen after Connect; answer "not expired yet".
		return make(chan struct{})
	}
	return s.session.expired
}

// Connected reports whether the Store has a live session right now.
func (s *Store) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == gozk.StateHasSession && s.session != nil && !s.session.dead
}

// Reconnect waits, bounded by ctx, until the Store has a live session again
// (the connection re-establishes one by itself after an expiry) and
// returns its id. Re-register ephemeral znodes afterwards.
func (s *Store) Reconnect(ctx context.Context) (int64, error) {
	if err := s.waitConnected(ctx); err != nil {
		return 0, fmt.Errorf("re-establish ZooKeeper session: %w", err)
	}
	return s.SessionID(), nil
}

// handleEvents follows the connection's session events until it closes.
func (s *Store) handleEvents(events <-chan gozk.Event) {
	defer close(s.eventsEnd)
	for ev := range events {
		if ev.Type != gozk.EventSession {
			continue
		}
		s.mu.Lock()
		prev := s.state
		s.state = ev.State
		close(s.stateCh)
		s.stateCh = make(chan struct{})
		switch ev.State {
		case gozk.StateHasSession:
			id := s.conn.SessionID()
			if s.session == nil || s.session.id != id {
				if s.session != nil && !s.session.dead {
					// A new id means the old session is gone.
					s.session.dead = true
					s.expiries.Add(1)
					close(s.session.expired)
				}
				if s.session != nil {
					s.logger.Info("new ZooKeeper session", "session", fmt.Sprintf("0x%x", id), "previous", fmt.Sprintf("0x%x", s.session.id))
				}
				s.session = &session{id: id, expired: make(chan struct{})}
			} else if prev != gozk.StateHasSession {
				s.logger.Info("reconnected to ZooKeeper", "session", fmt.Sprintf("0x%x", id), "server", ev.Server)
			}
		case gozk.StateExpired:
			if s.session != nil && !s.session.dead {
				s.logger.Warn("ZooKeeper session expired", "session", fmt.Sprintf("0x%x", s.session.id))
				s.session.dead = true
				s.expiries.Add(1)
				close(s.session.expired)
			}
		case gozk.StateDisconnected:
			if prev == gozk.StateHasSession {
				s.logger.Warn("disconnected from ZooKeeper", "server", ev.Server)
			}
		}
		s.mu.Unlock()
	}
}

// waitConnected waits until the connection has a live session.
func (s *Store) waitConnected(ctx context.Context) error {
	for {
		s.mu.Lock()
		ok := s.state == gozk.StateHasSession && s.session != nil && !s.session.dead
		ch := s.stateCh
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return ErrClosed
		}
	}
}

// isConnectionLoss reports errors after which the request may be retried
// on the same or a re-established connection (Kafka: CONNECTIONLOSS).
func isConnectionLoss(err error) bool {
	return errors.Is(err, gozk.ErrConnectionClosed) || errors.Is(err, gozk.ErrNoServer)
}

// retry runs fn until it succeeds or fails with something other than a
// lost connection, waiting for the connection in between.
//
// As in Kafka, a write retried after a lost connection may have been
// applied the first time: the retry then fails (NODEEXISTS, BADVERSION,
// NONODE) and the callers that care check what is there.
func (s *Store) retry(ctx context.Context, fn func() error) error {
	for {
		select {
		case <-s.closed:
			return ErrClosed
		default:
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		err := fn()
		s.requestStats.observe(time.Since(start))
		if errors.Is(err, gozk.ErrClosing) {
			return ErrClosed
		}
		if !isConnectionLoss(err) {
			return err
		}
		s.logger.Debug("ZooKeeper request lost with the connection; retrying", "err", err)
		if werr := s.waitConnected(ctx); werr != nil {
			return fmt.Errorf("%w (after %v)", werr, err)
		}
	}
}

// abs turns a chroot-relative path into the server's path.
func (s *Store) abs(p string) string { return s.chroot + p }

// rel turns a server path back into a chroot-relative one.
func (s *Store) rel(p string) string { return strings.TrimPrefix(p, s.chroot) }

// malformedAt adds the chroot to a decoding error's path.
func (s *Store) malformedAt(err error) error {
	var m *MalformedError
	if s.chroot != "" && errors.As(err, &m) {
		c := *m
		c.Path = s.chroot + m.Path
		return &c
	}
	return err
}

// get reads a znode (chroot-relative path).
func (s *Store) get(ctx context.Context, p string) ([]byte, *gozk.Stat, error) {
	var data []byte
	var stat *gozk.Stat
	err := s.retry(ctx, func() error {
		var err error
		data, stat, err = s.conn.Get(s.abs(p))
		return err
	})
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, nil, fmt.Errorf("read %s: %w", s.abs(p), ErrNoNode)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", s.abs(p), err)
	}
	return data, stat, nil
}

// children lists a znode's children; a missing znode has none.
func (s *Store) children(ctx context.Context, p string) ([]string, error) {
	var names []string
	err := s.retry(ctx, func() error {
		var err error
		names, _, err = s.conn.Children(s.abs(p))
		return err
	})
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s.abs(p), err)
	}
	return names, nil
}

// Ops for multi: paths are chroot-relative.
func (s *Store) createOp(p string, data []byte, flags int32) *gozk.CreateRequest {
	return &gozk.CreateRequest{Path: s.abs(p), Data: data, Acl: acl, Flags: flags}
}

func (s *Store) setOp(p string, data []byte, version int32) *gozk.SetDataRequest {
	return &gozk.SetDataRequest{Path: s.abs(p), Data: data, Version: version}
}

func (s *Store) deleteOp(p string, version int32) *gozk.DeleteRequest {
	return &gozk.DeleteRequest{Path: s.abs(p), Version: version}
}

func (s *Store) checkOp(p string, version int32) *gozk.CheckVersionRequest {
	return &gozk.CheckVersionRequest{Path: s.abs(p), Version: version}
}

// MultiError says which operation of a failed transaction failed.
type MultiError struct {
	Index int    // of the failing op among the caller's ops (the epoch check excluded)
	Path  string // the failing op's znode
	Err   error  // ZooKeeper's error for it (gozk.ErrNodeExists, ...)
}

func (e *MultiError) Error() string {
	return fmt.Sprintf("transaction op %d on %s: %v", e.Index, e.Path, e.Err)
}

func (e *MultiError) Unwrap() error { return e.Err }

// fencedMulti runs ops in one transaction that first checks that
// /controller_epoch is still at epochZkVersion, the version the caller's
// election wrote (KafkaZkClient.wrapRequestWithControllerEpochCheck). A
// failed check is ErrControllerMoved; another failing op is a *MultiError.
// On success it returns the results of ops (without the check's).
func (s *Store) fencedMulti(ctx context.Context, epochZkVersion int32, ops ...any) ([]gozk.MultiResponse, error) {
	if epochZkVersion < 0 {
		return nil, fmt.Errorf("controller epoch zkVersion %d: %w", epochZkVersion, ErrControllerMoved)
	}
	all := append([]any{s.checkOp(ControllerEpochPath, epochZkVersion)}, ops...)
	res, err := s.multi(ctx, all...)
	if err != nil {
		var me *MultiError
		if errors.As(err, &me) {
			if me.Index == 0 {
				if errors.Is(me.Err, gozk.ErrBadVersion) || errors.Is(me.Err, gozk.ErrNoNode) {
					return nil, fmt.Errorf("controller epoch zkVersion check failed, expected zkVersion %d: %w", epochZkVersion, ErrControllerMoved)
				}
				return nil, err
			}
			me.Index--
		}
		return nil, err
	}
	return res[1:], nil
}

// multi runs ops in one transaction, retrying on connection loss. A failure
// of one op is a *MultiError naming it.
func (s *Store) multi(ctx context.Context, ops ...any) ([]gozk.MultiResponse, error) {
	var res []gozk.MultiResponse
	err := s.retry(ctx, func() error {
		var err error
		res, err = s.conn.Multi(ops...)
		return err
	})
	if err == nil {
		return res, nil
	}
	if errors.Is(err, ErrClosed) || isConnectionLoss(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	// ZooKeeper marks the failing op with its error, the ops before it
	// with OK and the ones after it with RUNTIMEINCONSISTENCY.
	for i, r := range res {
		if r.Error != nil && i < len(ops) {
			return nil, &MultiError{Index: i, Path: opPath(ops[i]), Err: r.Error}
		}
	}
	return nil, err
}

func opPath(op any) string {
	switch op := op.(type) {
	case *gozk.CreateRequest:
		return op.Path
	case *gozk.SetDataRequest:
		return op.Path
	case *gozk.DeleteRequest:
		return op.Path
	case *gozk.CheckVersionRequest:
		return op.Path
	}
	return "?"
}

// zkLogger sends go-zookeeper's log lines to slog at debug level; the
// Store logs the state changes that matter itself.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("go-zookeeper: " + fmt.Sprintf(format, args...))
}
