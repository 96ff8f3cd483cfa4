package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// phaseProfiler saves CPU profiles of a started kbroker, one per measured
// phase, through the profile endpoints it serves on --pprof-address
// (internal/profhttp): POST /debug/pprof/cpu/start when the phase begins,
// POST /debug/pprof/cpu/stop when it ends, whose answer is the profile.
type phaseProfiler struct {
	base   string // http://host:port/debug/pprof/cpu/
	dir    string
	prefix string // file name prefix: the arm and the run
}

// profileTimeout bounds each profile request (stopping serializes the
// profile, which takes a few ms).
const profileTimeout = 30 * time.Second

func newPhaseProfiler(addr, dir, arm string, run int) *phaseProfiler {
	return &phaseProfiler{
		base:   "http://" + addr + "/debug/pprof/cpu/",
		dir:    dir,
		prefix: fmt.Sprintf("%s-run%d", profileFileName(arm), run),
	}
}

// profileFileName turns an arm's name ("kbroker --security ssl") into a
// file name part ("kbroker_--security_ssl").
func profileFileName(arm string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, arm)
}

func (p *phaseProfiler) post(ctx context.Context, what string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, profileTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+what, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("CPU profile %s: %w", what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("CPU profile %s: %w", what, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("CPU profile %s: %s: %s", what, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

func (p *phaseProfiler) start(ctx context.Context) error {
	_, err := p.post(ctx, "start")
	return err
}

// stop ends the profile and saves it as <dir>/<arm>-run<N>-<phase>.pprof.
func (p *phaseProfiler) stop(ctx context.Context, phase string) (string, error) {
	// The phase's context may be done (a timed-out run): still stop the
	// profile, so that the next phase can start one.
	body, err := p.post(context.WithoutCancel(ctx), "stop")
	if err != nil {
		return "", err
	}
	path := filepath.Join(p.dir, p.prefix+"-"+phase+".pprof")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return "", fmt.Errorf("saving the %s profile: %w", phase, err)
	}
	return path, nil
}
