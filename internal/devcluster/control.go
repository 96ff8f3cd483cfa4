package devcluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The control socket lets a second `kbroker dev-cluster --dir DIR --kill N`
// act on the running one, which owns the processes. It is a Linux
// abstract unix socket named after the directory: no file to go stale
// after a crash, no path length limit, and a second dev cluster on the
// same directory cannot start (its listen fails).
//
// Protocol: one line "kill N" | "stop N" | "restart N" | "status"; the
// answer is "ok" or "error", a space and the text, until the connection
// closes.

// controlTimeout bounds a control request (a restart waits for the broker
// to answer, and perhaps for its old session to expire first).
const controlTimeout = 2 * time.Minute

// controlAddr is the abstract socket name for dir (absolute).
func controlAddr(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return "@kbroker-dev-cluster-" + hex.EncodeToString(sum[:12])
}

// listenControl claims dir's control socket.
func listenControl(dir string) (net.Listener, error) {
	ln, err := net.Listen("unix", controlAddr(dir))
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("a dev cluster already runs in %s (use --status, --kill, --stop or --restart on it)", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// command is a parsed control request.
type command struct {
	verb string // kill, stop, restart, status
	id   int32
}

// parseCommand reads one request line.
func parseCommand(line string) (command, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return command{}, errors.New("empty command")
	}
	switch f[0] {
	case "status":
		if len(f) != 1 {
			return command{}, errors.New("status takes no argument")
		}
		return command{verb: "status"}, nil
	case "kill", "stop", "restart":
		if len(f) != 2 {
			return command{}, fmt.Errorf("%s takes one broker id", f[0])
		}
		id, err := strconv.ParseInt(f[1], 10, 32)
		if err != nil || id < 0 {
			return command{}, fmt.Errorf("%s: broker id %q is not a broker id", f[0], f[1])
		}
		return command{verb: f[0], id: int32(id)}, nil
	}
	return command{}, fmt.Errorf("unknown command %q (want kill, stop, restart or status)", f[0])
}

// ServeControl answers control requests on ln until ctx ends.
func (c *Cluster) ServeControl(ctx context.Context, ln net.Listener) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go c.handleControl(ctx, conn)
	}
}

func (c *Cluster) handleControl(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(controlTimeout))
	line, err := bufio.NewReader(io.LimitReader(conn, 256)).ReadString('\n')
	if err != nil {
		fmt.Fprintf(conn, "error reading the command: %v\n", err)
		return
	}
	cmd, err := parseCommand(line)
	if err != nil {
		fmt.Fprintf(conn, "error %v\n", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	var msg string
	switch cmd.verb {
	case "status":
		msg = c.Status()
	case "kill":
		msg, err = c.Kill(cmd.id)
	case "stop":
		msg, err = c.Stop(cmd.id)
	case "restart":
		msg, err = c.Restart(ctx, cmd.id)
	}
	if err != nil {
		fmt.Fprintf(conn, "error %v\n", err)
		return
	}
	fmt.Fprintf(conn, "ok %s\n", strings.TrimRight(msg, "\n"))
}

// Control sends one request to the dev cluster running in dir and returns
// its answer.
func Control(ctx context.Context, dir, request string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", controlAddr(abs))
	if err != nil {
		return "", fmt.Errorf("no dev cluster is running in %s (start one with: kbroker dev-cluster --dir %s): %w", abs, abs, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(controlTimeout)
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	if _, err := fmt.Fprintf(conn, "%s\n", request); err != nil {
		return "", fmt.Errorf("send %q: %w", request, err)
	}
	reply, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("read the answer to %q: %w", request, err)
	}
	text := strings.TrimRight(string(reply), "\n")
	if rest, ok := strings.CutPrefix(text, "ok "); ok {
		return rest, nil
	}
	if rest, ok := strings.CutPrefix(text, "error "); ok {
		return "", errors.New(rest)
	}
	return "", fmt.Errorf("unexpected answer to %q: %q", request, text)
}
