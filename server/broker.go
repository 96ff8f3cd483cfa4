// Package server is kbroker's Kafka protocol edge: listeners, connections,
// one file per API handler, the metadata cache, and the Broker that
// assembles the replica layer, the controller and the group coordinator.
package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/coordinator"
	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/kbroker/kbroker/internal/quota"
	"github.com/kbroker/kbroker/replica"
	"github.com/kbroker/kbroker/txn"
)

// Broker is one kbroker process.
type Broker struct {
	cfg    config.Config
	logger *slog.Logger

	self     controller.BrokerInfo
	replicas *replica.Manager
	// replThrottle is the replication throttles of the latest view
	// (replication_throttle.go).
	replThrottle replicationThrottle
	controller   controlPlane
	groups       *coordinator.Coordinator
	shares       lazyShares    // KIP-932 share partitions led here (78_share_fetch.go)
	connIDs      atomic.Uint64 // the last connState.id given
	txns         *txn.Coordinator
	txnMarkers   *txnMarkerSender
	fetches      *fetchSessions

	// applyMu serialises applying metadata snapshots to the local replicas;
	// it guards viewChanged, closed and replaced after each one.
	applyMu     sync.Mutex
	viewChanged chan struct{}

	// ctrlConnMu guards ctrlConn, the connection to the controller.
	ctrlConnMu sync.Mutex
	ctrlConn   *kafkaconn.Conn

	// fatal receives the first error that makes the broker stop on its
	// own (no log dir left that can be written).
	fatal chan error
	// logDirReports carries failed log dirs to the controller
	// (logdir_failure.go).
	logDirReports logDirReports

	// connsMu guards conns, the open client connections (closed on
	// shutdown or when idle) and what is tracked of each.
	connsMu sync.Mutex
	conns   map[net.Conn]*connState
	// connsClosedIdle counts connections closed by connections.max.idle.ms,
	// connsRefused those closed by max.connections.per.ip.
	connsClosedIdle atomic.Int64
	connsRefused    atomic.Int64
	quotas          *connQuotas
	// clientQuotas enforces the quotas of the view (client_quotas.go).
	clientQuotas *clientQuotas
	// requests is the queued.max.request.bytes pool.
	requests *requestPool
	// listeners are the configured listeners by name.
	listeners map[string]*listener
	// peerSecurity is how connections to other brokers are secured and
	// authenticated (the inter-broker listener's protocol).
	peerSecurity kafkaconn.Security
	// tlsWriters pools the *bufio.Writer (tlsWriteBuffer bytes) that a
	// Fetch response over TLS is gathered in, and tlsBatches the buffers
	// its TLS records are gathered in (recordBatcher).
	tlsWriters sync.Pool
	tlsBatches sync.Pool
	// featuresEpoch is ApiVersions' FinalizedFeaturesEpoch: the broker's
	// start time in milliseconds, so that a client that keeps the features
	// of the highest epoch (the Java client) follows the broker restarted
	// last, also when kbroker.transaction.version went down.
	featuresEpoch int64
	// authz is the ACL authorizer (authorizer.class.name), nil for none.
	authz *authorization
	// ops counts request times and per-topic traffic (ops_metrics.go).
	ops *opsMetrics
}

// requestContext is what a handler knows about the request besides its body.
type requestContext struct {
	clientID      string
	correlationID int32
	version       int16
	// listener is the name of the listener the request arrived on
	// ("" in handler tests: the inter-broker listener).
	listener string
	// principal is the connection's authenticated principal (User:alice,
	// User:ANONYMOUS), remote the client's address.
	principal string
	remote    string
	// host is remote's IP address as ACLs name hosts, once computed
	// (clientIP).
	host string
	// auth is the connection's SASL state, for SaslHandshake and
	// SaslAuthenticate (nil in handler tests).
	auth *connAuth
	// closeAfter is set by a handler whose answer must be the
	// connection's last (a failed authentication).
	closeAfter bool
	// conn is the connection's id (connState.id; 0: none).
	conn uint64
}

// NewBroker validates cfg and prepares a broker; nothing listens or opens
// until Run.
func NewBroker(cfg config.Config, logger *slog.Logger) (*Broker, error) {
	if len(cfg.Listeners) == 0 {
		return nil, errors.New("no listeners configured")
	}
	if len(cfg.LogDirs) == 0 {
		return nil, errors.New("no log.dirs configured")
	}
	endpoints, err := cfg.AdvertisedEndpoints()
	if err != nil {
		return nil, err
	}
	self := controller.BrokerInfo{ID: cfg.BrokerID, Rack: cfg.BrokerRack}
	for _, e := range endpoints {
		self.Endpoints = append(self.Endpoints, controller.Endpoint{Listener: e.Listener, SecurityProtocol: e.SecurityProtocol, Host: e.Host, Port: e.Port})
	}
	// Other brokers dial the first endpoint, the inter-broker listener's.
	self.Host, self.Port = self.Endpoints[0].Host, self.Endpoints[0].Port
	return &Broker{
		cfg:           cfg,
		logger:        logger,
		self:          self,
		featuresEpoch: time.Now().UnixMilli(),
		fetches:       newFetchSessions(),
		conns:         make(map[net.Conn]*connState),
		viewChanged:   make(chan struct{}),
		fatal:         make(chan error, 1),
		quotas:        newConnQuotas(cfg, logger),
		clientQuotas:  newClientQuotas(quota.Config{Samples: int(cfg.QuotaWindowNum), Window: cfg.QuotaWindowSize}, logger),
		requests:      newRequestPool(cfg.QueuedMaxRequestBytes, logger),
		tlsWriters:    sync.Pool{New: func() any { return bufio.NewWriterSize(nil, tlsWriteBuffer) }},
		tlsBatches: sync.Pool{New: func() any {
			// A buffer's records: the data and, per record of at most
			// 16 KiB, a header, a content type and a tag.
			buf := make([]byte, 0, tlsWriteBuffer+(tlsWriteBuffer/(16<<10)+1)*64)
			return &buf
		}},
		authz: newAuthorization(cfg, logger),
		ops:   newOpsMetrics(),
	}, nil
}

// truncationRecordTimeout bounds the write of one truncation event.
const truncationRecordTimeout = 10 * time.Second

// recordTruncation writes a follower's truncation to the cluster's event
// history (the console's timeline), off the replica's lock: after an
// unclean election it names the exact committed offsets lost.
func (b *Broker) recordTruncation(t replica.Truncation) {
	ctl, ok := b.controller.(interface {
		RecordTruncation(context.Context, controller.Truncation) error
	})
	if !ok {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), truncationRecordTimeout)
		defer cancel()
		err := ctl.RecordTruncation(ctx, controller.Truncation{Topic: t.Topic, Partition: t.Partition, From: t.From, To: t.To,
			HighWatermark: t.HighWatermark, Leader: t.Leader, LeaderEpoch: t.LeaderEpoch})
		if err != nil {
			b.logger.Warn("recording a truncation in the cluster's events failed", "partition", t.TopicPartition.String(), "err", err)
		}
	}()
}

// Run opens the logs, starts the listeners and serves until ctx is done,
// then shuts down cleanly. It returns nil after a clean shutdown.
func (b *Broker) Run(ctx context.Context) error {
	start := time.Now()
	logDir := b.cfg.LogDirs[0]
	var err error
	if b.peerSecurity, err = interBrokerSecurity(b.cfg); err != nil {
		return err
	}
	rcfg := replica.Config{
		LogDirs:           b.cfg.LogDirs,
		EnforceBrokerID:   b.cfg.ZookeeperConnect != "",
		RetentionCheck:    b.cfg.LogRetentionCheck,
		BrokerID:          b.cfg.BrokerID,
		ReplicaLagTimeMax: b.cfg.ReplicaLagTimeMax,
		ReplicaFetchWait:  b.cfg.ReplicaFetchWaitMax,
		// Logs opened and closed at a time per log dir.
		RecoveryThreadsPerDataDir: int(b.cfg.NumRecoveryThreadsPerDataDir),
		SyncJournalPath:           b.cfg.TestSyncJournal,
		// Checked with retention (log.retention.check.interval.ms).
		ProducerIDExpiration: b.cfg.ProducerIDExpiration,
		Cleaner: replica.CleanerConfig{
			Enable:              b.cfg.LogCleanerEnable && b.cfg.LogCleanerThreads > 0,
			Threads:             int(b.cfg.LogCleanerThreads),
			DedupeBufferSize:    b.cfg.LogCleanerDedupeBufferSize,
			IOMaxBytesPerSecond: b.cfg.LogCleanerIOMaxBytesPerSecond,
			Backoff:             b.cfg.LogCleanerBackoff,
			Hook:                cleanerKillHook(b.logger),
		},
	}
	rcfg.OnLogDirFailure = b.onLogDirFailure
	rcfg.OnTruncation = b.recordTruncation
	if b.cfg.ZookeeperConnect != "" {
		rcfg.ISRWriter = &isrWriter{b: b}
		clientID := "kbroker-replica-" + strconv.Itoa(int(b.cfg.BrokerID))
		rcfg.Dial = func(_ int32, addr string) replica.LeaderConn {
			return kafkaconn.New(addr, clientID).ReuseResponseBuffer().WithSecurity(b.peerSecurity)
		}
	}
	b.replicas, err = replica.Open(rcfg, b.logger)
	if err != nil {
		return err
	}
	b.replicas.SetFollowerThrottle(&b.replThrottle)
	b.checkOpenFileLimit()
	mode := "embedded single node"
	ccfg := controller.ClusterConfig{
		Self:                b.self,
		ZookeeperConnect:    b.cfg.ZookeeperConnect,
		SessionTimeout:      b.cfg.ZookeeperSessionTimeout,
		ConnectionTimeout:   b.cfg.ZookeeperConnectionTimeout,
		UncleanDefault:      b.cfg.UncleanLeaderElectionEnable,
		AutoLeaderRebalance: b.cfg.AutoLeaderRebalanceEnable,
		HoldsDeleted:        b.holdsDeleted,
		PeerSecurity:        b.peerSecurity,
		OnSessionLost: func() {
			b.logger.Warn("ZooKeeper session lost: serving no partition as leader until the controller's next view")
			for _, p := range b.replicas.All() {
				if !p.State().IsLeader {
					continue
				}
				b.resignCoordinator(p.TopicPartition())
				b.replicas.StopLeading(p.TopicPartition())
			}
		},
		LeaderImbalanceCheck: b.cfg.LeaderImbalanceCheck,
	}
	if b.cfg.ZookeeperConnect == "" {
		b.controller, err = controller.NewEmbedded(logDir, ccfg, b.logger.With("component", "controller"))
	} else {
		mode = "zookeeper cluster"
		b.controller, err = controller.NewCluster(ctx, ccfg, b.logger.With("component", "controller"))
	}
	if err != nil {
		b.replicas.Close()
		return err
	}
	// Before any view is applied (which may delete replicas): a log dir
	// of another cluster stops the start.
	if err := b.replicas.WriteMetaProperties(b.controller.Metadata().ClusterID); err != nil {
		b.shutdownStorage()
		return err
	}
	b.groups = coordinator.New(coordinator.Config{
		NumPartitions:         b.cfg.OffsetsTopicNumPartitions,
		OffsetsRetention:      b.cfg.OffsetsRetention,
		InitialRebalanceDelay: b.cfg.GroupInitialRebalanceDelay,
		MinSessionTimeout:     b.cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     b.cfg.GroupMaxSessionTimeout,
		MaxRecordBytes:        b.cfg.MessageMaxBytes,
		SnapshotBytes:         coordinatorSnapshotBytes(b.cfg.LogCleanerEnable),

		ConsumerSessionTimeout:    b.cfg.GroupConsumerSessionTimeout,
		ConsumerHeartbeatInterval: b.cfg.GroupConsumerHeartbeatInterval,
		ConsumerAssignors:         b.cfg.GroupConsumerAssignors,
		ConsumerMaxSize:           b.cfg.GroupConsumerMaxSize,
		ShareSessionTimeout:       b.cfg.GroupShareSessionTimeout,
		ShareHeartbeatInterval:    b.cfg.GroupShareHeartbeatInterval,
		ShareMaxSize:              b.cfg.GroupShareMaxSize,
		Topics:                    b.consumerGroupTopics(),
	}, &internalLog{b: b, topic: offsetsTopic}, b.logger.With("component", "groups"))
	b.txns = b.newTxnCoordinator()
	b.watchACLs()

	if b.listeners, err = newListeners(b.cfg, b.scramCredentials(), logDir, b.logger); err != nil {
		b.shutdownStorage()
		return err
	}
	listeners := make([]net.Listener, 0, len(b.cfg.Listeners))
	var metricsLn net.Listener
	for _, l := range b.cfg.Listeners {
		host, port, err := config.ListenerHostPort(l)
		if err != nil {
			return fmt.Errorf("listeners: %w", err)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil {
			for _, o := range listeners {
				o.Close()
			}
			b.shutdownStorage()
			return fmt.Errorf("listen on %s: %w", l, err)
		}
		listeners = append(listeners, ln)
	}
	if b.cfg.MetricsAddress != "" {
		mln, err := b.listenMetrics() // console.go: the embedded default falls back to an ephemeral port
		if err != nil {
			for _, o := range listeners {
				o.Close()
			}
			b.shutdownStorage()
			return fmt.Errorf("kbroker.metrics.address %s: %w", b.cfg.MetricsAddress, err)
		}
		metricsLn = mln
		b.logger.Info("serving Prometheus metrics and the live console", "metrics", "http://"+mln.Addr().String()+"/metrics", "console", "http://"+mln.Addr().String()+"/")
	}
	for _, ln := range listeners {
		b.logger.Info("kbroker listening", "addr", ln.Addr().String(), "data", logDir, "broker_id", b.cfg.BrokerID,
			"mode", mode, "startup", time.Since(start).Round(time.Microsecond).String())
	}

	serveCtx, cancelServe := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.replicas.RunRetention(serveCtx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.replicas.RunISRChecks(serveCtx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.replicas.RunCleaner(serveCtx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.replicas.RunHWCheckpoints(serveCtx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.closeIdleConns(serveCtx)
	}()
	b.runLogDirFailures(serveCtx, &wg)
	if metricsLn != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.serveMetrics(serveCtx, metricsLn)
		}()
	}
	for i, ln := range listeners {
		name, _, _, _ := config.ParseListener(b.cfg.Listeners[i])
		l := b.listeners[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.acceptLoop(serveCtx, ln, l, &wg)
		}()
	}
	// The first view once listening: each partition serves as soon as its
	// log is open (applyMetadataErr), while the others still recover;
	// until then requests for it answer NOT_LEADER_OR_FOLLOWER, which
	// clients retry.
	b.controller.Subscribe(b.applyMetadata)
	if err := b.applyMetadataErr(b.controller.Metadata()); err != nil {
		b.stopServing(listeners, cancelServe, &wg)
		b.shutdownStorage()
		return err
	}
	b.logger.Info("serving every partition", "partitions", len(b.replicas.All()), "startup", time.Since(start).Round(time.Microsecond).String())
	// Register only once listening: the controller connects to us.
	if err := b.controller.Start(ctx); err != nil {
		err = fmt.Errorf("joining the cluster: %w", err)
		b.logger.Error("cannot join the cluster", "err", err)
		b.stopServing(listeners, cancelServe, &wg)
		b.shutdownStorage()
		return err
	}

	var fatalErr error
	select {
	case <-ctx.Done():
		b.logger.Info("shutting down")
		b.controlledShutdown()
	case fatalErr = <-b.fatal:
		// As Kafka halts when all its log dirs failed: stop at once;
		// the other replicas take over, and a restart recovers the logs.
		b.logger.Error("every log dir failed (disk full?): stopping the broker", "data", logDir, "err", fatalErr)
	}
	b.stopServing(listeners, cancelServe, &wg)
	if fatalErr != nil {
		if err := b.shutdownStorage(); err != nil {
			b.logger.Error("closing logs after the failure", "err", err)
		}
		return fmt.Errorf("log dir %s failed: %w", logDir, fatalErr)
	}
	if err := b.shutdownStorage(); err != nil {
		return err
	}
	b.logger.Info("shut down cleanly")
	return nil
}

// stopServing leaves the cluster, closes listeners and connections, and
// waits for every connection and background goroutine to end.
func (b *Broker) stopServing(listeners []net.Listener, cancelServe context.CancelFunc, wg *sync.WaitGroup) {
	b.controller.Close()
	for _, ln := range listeners {
		ln.Close() // no new connections
	}
	cancelServe() // long polls and acks=all waits end now and answer
	b.ctrlConnMu.Lock()
	if b.ctrlConn != nil {
		b.ctrlConn.Close()
	}
	b.ctrlConnMu.Unlock()
	// Stop reading, but let each connection answer the request it is
	// handling: a client then sees a response (NOT_LEADER after the
	// controlled shutdown) rather than a connection cut mid-request.
	b.forEachConn(func(c net.Conn) {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseRead()
		} else {
			c.Close()
		}
	})
	b.groups.Close()
	b.closeTxnCoordinator()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		b.logger.Warn("connections still busy at shutdown; closing them", "grace", shutdownGrace)
		b.forEachConn(func(c net.Conn) { c.Close() })
		<-done
	}
}

// shutdownGrace bounds how long in-flight requests may take to answer when
// the broker stops.
const shutdownGrace = 5 * time.Second

func (b *Broker) forEachConn(fn func(net.Conn)) {
	b.connsMu.Lock()
	defer b.connsMu.Unlock()
	for c := range b.conns {
		fn(c)
	}
}

func (b *Broker) shutdownStorage() error {
	if err := b.replicas.Close(); err != nil {
		return fmt.Errorf("close logs: %w", err)
	}
	return nil
}
