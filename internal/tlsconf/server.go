package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// checkEvery bounds how often the store files are looked at.
const checkEvery = time.Second

// Server is a TLS listener's configuration, re-read when its key or trust
// store file changes.
//
// Kafka reloads a listener's stores when a dynamic config update names them
// (kafka-configs --alter with the same ssl.keystore.location), if the file's
// modification time changed. This broker has no dynamic listener configs:
// it reloads when a store file's modification time or size changes. Files
// are looked at during TLS handshakes, at most once per checkEvery, so no
// goroutine is needed; a reload that fails (say, a file caught half
// written) is logged and the previous stores stay in use, and it is tried
// again on a later handshake. A session resumed after a reload is
// verified against the new truststore: crypto/tls checks a resumed client
// certificate against the current ClientCAs.
type Server struct {
	settings   Settings
	logger     *slog.Logger
	params     params
	clientAuth tls.ClientAuthType
	rules      PrincipalRules
	files      storeFiles
	config     *tls.Config
	now        func() time.Time

	current   atomic.Pointer[serverState]
	nextCheck atomic.Int64 // UnixNano before which files are not looked at

	reloadMu sync.Mutex
	failed   stamps // files as they were when a reload last failed; guarded by reloadMu
}

// serverState is one generation of loaded stores.
type serverState struct {
	config *tls.Config
	stamps stamps
}

// NewServer checks the settings and loads the stores now, so that a broken
// configuration stops the broker at start. A listener needs a keystore.
// Errors name the property and file, never a password. A nil logger
// discards.
func NewServer(s Settings, logger *slog.Logger) (*Server, error) {
	return newServer(s, logger, time.Now)
}

func newServer(s Settings, logger *slog.Logger, now func() time.Time) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s = maps.Clone(s) // the caller may reuse its map
	p, err := parseParams(s, false)
	if err != nil {
		return nil, err
	}
	auth, err := parseClientAuth(s)
	if err != nil {
		return nil, err
	}
	rulesText := s.get(PrincipalMappingRules)
	if rulesText == "" {
		rulesText = "DEFAULT"
	}
	rules, err := ParsePrincipalRules(rulesText)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: %s: %w", PrincipalMappingRules, err)
	}
	srv := &Server{
		settings:   s,
		logger:     logger,
		params:     p,
		clientAuth: auth,
		rules:      rules,
		files:      filesOf(s),
		now:        now,
	}
	st, err := srv.load()
	if err != nil {
		return nil, err
	}
	srv.current.Store(st)
	srv.nextCheck.Store(now().Add(checkEvery).UnixNano())
	srv.config = &tls.Config{GetConfigForClient: srv.configForClient}
	p.apply(srv.config)
	leaf := st.config.Certificates[0].Leaf
	logger.Info("loaded TLS keystore", "file", srv.files.keystore, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
	return srv, nil
}

// Config returns the configuration to serve with; each handshake gets the
// stores current at its start. It is shared: do not modify it.
func (s *Server) Config() *tls.Config { return s.config }

// Principal returns the principal name of a client of this listener, mapped
// by its ssl.principal.mapping.rules; see PrincipalRules.Principal.
func (s *Server) Principal(state tls.ConnectionState) (string, error) {
	return s.rules.Principal(state)
}

func (s *Server) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	s.maybeReload()
	return s.current.Load().config, nil
}

// load reads the stores into a new generation. The files are looked at
// before they are read, so a change made while reading is seen next time.
func (s *Server) load() (*serverState, error) {
	st := stampFiles(s.files)
	m, err := loadMaterial(s.settings)
	if err != nil {
		return nil, err
	}
	if m.cert == nil {
		return nil, fmt.Errorf("tlsconf: a TLS listener needs a keystore: set %s or %s", KeystoreLocation, KeystoreKey)
	}
	c := &tls.Config{
		Certificates: []tls.Certificate{*m.cert},
		ClientAuth:   s.clientAuth,
		ClientCAs:    m.roots,
		// A broker's responses are bulk transfers (Fetch): full-size
		// records from the first byte, rather than Go's small first
		// records meant for web pages' time to first paint.
		DynamicRecordSizingDisabled: true,
	}
	s.params.apply(c)
	return &serverState{config: c, stamps: st}, nil
}

// maybeReload reloads the stores if a file changed, at most once per
// checkEvery and by one handshake at a time; the others go on with the
// current stores.
func (s *Server) maybeReload() {
	now := s.now().UnixNano()
	next := s.nextCheck.Load()
	if now < next || !s.nextCheck.CompareAndSwap(next, now+int64(checkEvery)) {
		return
	}
	if !s.reloadMu.TryLock() {
		return
	}
	defer s.reloadMu.Unlock()
	cur := s.current.Load()
	seen := stampFiles(s.files)
	if seen == cur.stamps {
		return
	}
	st, err := s.load()
	if err != nil {
		if seen != s.failed {
			// Once per change of the files, not once per second.
			s.logger.Warn("reloading TLS stores failed; keeping the previous ones",
				"keystore", s.files.keystore, "truststore", s.files.truststore, "error", err)
			s.failed = seen
		}
		return
	}
	s.failed = stamps{}
	s.current.Store(st)
	if st.stamps.keystore != cur.stamps.keystore {
		leaf := st.config.Certificates[0].Leaf
		s.logger.Info("reloaded TLS keystore", "file", s.files.keystore, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
	}
	if st.stamps.truststore != cur.stamps.truststore {
		s.logger.Info("reloaded TLS truststore", "file", s.files.truststore)
	}
}

// stamp is what tells that a file changed.
type stamp struct {
	modTime int64 // UnixNano
	size    int64
	missing bool // a file being replaced may be briefly absent
}

type stamps struct {
	keystore, truststore stamp
}

func stampFiles(f storeFiles) stamps {
	return stamps{keystore: stampFile(f.keystore), truststore: stampFile(f.truststore)}
}

func stampFile(path string) stamp {
	if path == "" {
		return stamp{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return stamp{missing: true}
		}
		// Unreadable: a change all the same, and load will say why.
		return stamp{missing: true, size: -1}
	}
	return stamp{modTime: fi.ModTime().UnixNano(), size: fi.Size()}
}
