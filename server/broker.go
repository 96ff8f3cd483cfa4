// Package server is kbroker's Kafka protocol edge: listeners, connections,
// one file per API handler, the metadata cache, and the Broker that
// assembles the replica layer, the controller and the group coordinator.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/coordinator"
	"github.com/kbroker/kbroker/replica"
)

// Broker is one kbroker process.
type Broker struct {
	cfg    config.Config
	logger *slog.Logger

	self       controller.BrokerInfo
	replicas   *replica.Manager
	controller controlPlane
	groups     *coordinator.Coordinator
	fetches    *fetchSessions

	// applyMu serialises applying metadata snapshots to the local replicas.
	applyMu sync.Mutex

	// connsMu guards conns, the open client connections, closed on shutdown.
	connsMu sync.Mutex
	conns   map[net.Conn]struct{}
}

// requestContext is what a handler knows about the request besides its body.
type requestContext struct {
	clientID      string
	correlationID int32
	version       int16
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
	if cfg.ZookeeperConnect != "" {
		return nil, errors.New("zookeeper.connect is set, but cluster mode is not implemented yet: remove it to run the embedded single-node broker")
	}
	advertised := cfg.AdvertisedListeners
	if len(advertised) == 0 {
		advertised = cfg.Listeners
	}
	host, port, err := config.ListenerHostPort(advertised[0])
	if err != nil {
		return nil, fmt.Errorf("advertised.listeners: %w", err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return &Broker{
		cfg:     cfg,
		logger:  logger,
		self:    controller.BrokerInfo{ID: cfg.BrokerID, Host: host, Port: port, Rack: cfg.BrokerRack},
		fetches: newFetchSessions(),
		conns:   make(map[net.Conn]struct{}),
	}, nil
}

// Run opens the logs, starts the listeners and serves until ctx is done,
// then shuts down cleanly. It returns nil after a clean shutdown.
func (b *Broker) Run(ctx context.Context) error {
	start := time.Now()
	logDir := b.cfg.LogDirs[0]
	var err error
	b.replicas, err = replica.Open(replica.Config{LogDir: logDir, RetentionCheck: b.cfg.LogRetentionCheck}, b.logger)
	if err != nil {
		return err
	}
	b.controller, err = controller.NewLocal(logDir, b.self, b.logger.With("component", "controller"))
	if err != nil {
		b.replicas.Close()
		return err
	}
	b.groups = coordinator.New(coordinator.Config{
		NumPartitions:         b.cfg.OffsetsTopicNumPartitions,
		OffsetsRetention:      b.cfg.OffsetsRetention,
		InitialRebalanceDelay: b.cfg.GroupInitialRebalanceDelay,
		MinSessionTimeout:     b.cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     b.cfg.GroupMaxSessionTimeout,
		MaxRecordBytes:        b.cfg.MessageMaxBytes,
	}, &offsetsLog{b: b}, b.logger.With("component", "groups"))
	b.controller.Subscribe(b.applyMetadata)
	if err := b.applyMetadataErr(b.controller.Metadata()); err != nil {
		b.shutdownStorage()
		return err
	}

	listeners := make([]net.Listener, 0, len(b.cfg.Listeners))
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
	for _, ln := range listeners {
		b.logger.Info("kbroker listening", "addr", ln.Addr().String(), "data", logDir, "broker_id", b.cfg.BrokerID,
			"mode", "embedded single node", "startup", time.Since(start).Round(time.Microsecond).String())
	}

	serveCtx, cancelServe := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.replicas.RunRetention(serveCtx)
	}()
	b.loadCoordinatorPartitions(serveCtx)
	for _, ln := range listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.acceptLoop(serveCtx, ln, &wg)
		}()
	}

	<-ctx.Done()
	b.logger.Info("shutting down")
	for _, ln := range listeners {
		ln.Close()
	}
	cancelServe()
	b.connsMu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.connsMu.Unlock()
	b.groups.Close()
	wg.Wait()
	if err := b.shutdownStorage(); err != nil {
		return err
	}
	b.logger.Info("shut down cleanly")
	return nil
}

func (b *Broker) shutdownStorage() error {
	if err := b.replicas.Close(); err != nil {
		return fmt.Errorf("close logs: %w", err)
	}
	return nil
}

func (b *Broker) acceptLoop(ctx context.Context, ln net.Listener, wg *sync.WaitGroup) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			b.logger.Warn("accept failed", "err", err)
			continue
		}
		b.connsMu.Lock()
		b.conns[c] = struct{}{}
		b.connsMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				b.connsMu.Lock()
				delete(b.conns, c)
				b.connsMu.Unlock()
				c.Close()
			}()
			b.serveConn(ctx, c)
		}()
	}
}
