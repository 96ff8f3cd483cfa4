// Package launch starts and controls the processes kbroker's tests and
// tools run: kbroker brokers, ZooKeeper servers and helper commands. It
// picks free ports, keeps each process's output in a log file, waits
// (bounded) until the process answers, and stops, kills, pauses, resumes
// and signals it. It returns errors and never fails a test itself, so
// integration tests, kverify and kbench all use it.
//
// Every process runs in a process group of its own (signals go to the
// whole group, and a terminal's ^C reaches only the parent) and gets
// SIGKILL if the parent dies first.
package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// KillWait bounds how long Stop waits for the exit after its SIGKILL.
const KillWait = 15 * time.Second

var (
	// ErrExited is wrapped by errors about a process that is gone.
	ErrExited = errors.New("process exited")
	// ErrNotStarted is returned by the methods of a nil *Process.
	ErrNotStarted = errors.New("process not started")
)

// FreePort returns a 127.0.0.1 TCP port that was free a moment ago. Another
// process may take it before ours binds it: the starters here try another
// port when a process exits during startup.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Spec describes a process to start.
type Spec struct {
	Path string   // the binary (looked up in PATH when it has no slash)
	Args []string // its arguments
	Dir  string   // working directory; "" for ours
	// LogPath, if set, collects stdout and stderr. Each start appends a
	// header line (time and command line), so one file can hold every run
	// of a restarted process.
	LogPath string
	// Stderr receives stderr when LogPath is empty; stdout is then
	// discarded. Nil discards both.
	Stderr io.Writer
}

// Process is one run of a started process. Its methods may be called from
// any goroutine; those of a nil *Process report ErrNotStarted (or false,
// or "never started").
type Process struct {
	spec    Spec
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed once the process was reaped
	// Set before done is closed.
	state   *os.ProcessState
	waitErr error
}

// Start starts the process described by spec. It does not wait for
// anything: see WaitReady.
func Start(spec Spec) (*Process, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	var logFile *os.File
	if spec.LogPath != "" {
		f, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), spec.Path, strings.Join(spec.Args, " "))
		logFile = f
		cmd.Stdout, cmd.Stderr = f, f
	} else {
		cmd.Stderr = spec.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{spec: spec, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("start %s: %w", spec.Path, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		p.state = cmd.ProcessState
		if logFile != nil {
			logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id (also its process group id).
func (p *Process) Pid() int {
	if p == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Started is when Start was about to exec the process.
func (p *Process) Started() time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.started
}

// LogPath is the file collecting the process's output, or "".
func (p *Process) LogPath() string {
	if p == nil {
		return ""
	}
	return p.spec.LogPath
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} {
	if p == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	return p.done
}

// Running reports whether the process has not exited (a paused process
// runs).
func (p *Process) Running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// State is how the process ended, or nil while it runs.
func (p *Process) State() *os.ProcessState {
	if p == nil || p.Running() {
		return nil
	}
	return p.state
}

// Err is what waiting for the process returned (an *exec.ExitError for a
// non-zero status or a signal), or nil while it runs.
func (p *Process) Err() error {
	if p == nil || p.Running() {
		return nil
	}
	return p.waitErr
}

// ExitStatus describes how the process ended ("exit status 1", "signal:
// killed"), or says "running" or "never started".
func (p *Process) ExitStatus() string {
	switch {
	case p == nil:
		return "never started"
	case p.Running():
		return "running"
	default:
		return p.state.String()
	}
}

// Signal sends sig to the process's group. It fails with ErrExited once
// the process is gone.
func (p *Process) Signal(sig os.Signal) error {
	if p == nil {
		return ErrNotStarted
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("signal %v: not a syscall.Signal", sig)
	}
	if !p.Running() {
		return fmt.Errorf("signal %v to %s: %w (%s)", sig, p.spec.Path, ErrExited, p.state)
	}
	if err := syscall.Kill(-p.Pid(), s); err != nil {
		return fmt.Errorf("signal %v to %s: %w", sig, p.spec.Path, err)
	}
	return nil
}

// Pause stops the process with SIGSTOP.
func (p *Process) Pause() error { return p.Signal(syscall.SIGSTOP) }

// WaitPaused waits until every thread of the process is stopped (state T
// in /proc), polling every millisecond until ctx ends. kill(SIGSTOP) only
// queues the signal: the process stops once one of its threads has run to
// take it, and until then its other threads go on (on a loaded machine,
// long enough to send a request). Callers that need a paused process to do
// nothing from some point on wait for this after Pause.
func (p *Process) WaitPaused(ctx context.Context) error {
	if p == nil {
		return ErrNotStarted
	}
	for {
		if !p.Running() {
			return fmt.Errorf("%s: %w (%s)", p.spec.Path, ErrExited, p.state)
		}
		err := p.allStopped()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not paused: %w (last: %v)", p.spec.Path, ctx.Err(), err)
		case <-time.After(time.Millisecond):
		}
	}
}

// allStopped reports, as an error, a thread of the process that is not
// stopped.
func (p *Process) allStopped() error {
	pid := p.Pid()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread exited
		}
		if err != nil {
			return err
		}
		// "tid (comm) state ...": comm may hold spaces and ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			return fmt.Errorf("pid %d thread %s: unexpected stat %q", pid, task.Name(), stat)
		}
		if state := stat[i+2]; state != 'T' {
			return fmt.Errorf("pid %d thread %s is in state %c, not stopped yet", pid, task.Name(), state)
		}
	}
	return nil
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error { return p.Signal(syscall.SIGCONT) }

// Wait waits at most timeout for the process to exit and returns how it
// ended.
func (p *Process) Wait(timeout time.Duration) (*os.ProcessState, error) {
	if p == nil {
		return nil, ErrNotStarted
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.state, nil
	case <-t.C:
		return nil, fmt.Errorf("%s (pid %d) still running after %v", p.spec.Path, p.Pid(), timeout)
	}
}

// Kill sends SIGKILL (what a crash looks like) and waits at most timeout
// for the exit. Killing an exited process does nothing.
func (p *Process) Kill(timeout time.Duration) error {
	if p == nil {
		return nil
	}
	if err := p.Signal(syscall.SIGKILL); err != nil && p.Running() {
		return err
	}
	_, err := p.Wait(timeout)
	return err
}

// Stop asks the process to shut down: SIGCONT (in case it is paused) and
// SIGTERM, then waits at most timeout. If it is still running then, it is
// killed (waiting at most KillWait). Stop reports whether the process
// exited by itself; State tells how. Stopping an exited process reports
// true.
func (p *Process) Stop(timeout time.Duration) (bool, error) {
	if !p.Running() {
		return true, nil
	}
	_ = p.Signal(syscall.SIGCONT)
	_ = p.Signal(syscall.SIGTERM)
	if _, err := p.Wait(timeout); err == nil {
		return true, nil
	}
	return false, p.Kill(KillWait)
}
