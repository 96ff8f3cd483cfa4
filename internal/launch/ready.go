package launch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// WaitReady calls probe every `every` until it returns nil. It fails when
// p (if not nil) exits first, wrapping ErrExited, or when ctx ends, with
// probe's last error. Probes bound themselves; ctx bounds the whole wait.
func WaitReady(ctx context.Context, p *Process, every time.Duration, probe func() error) error {
	var done <-chan struct{}
	if p != nil {
		done = p.done
	}
	exited := func() error {
		err := fmt.Errorf("%w during startup (%s)", ErrExited, p.state)
		if p.spec.LogPath != "" {
			err = fmt.Errorf("%w; see %s", err, p.spec.LogPath)
		}
		return err
	}
	for {
		select {
		case <-done:
			return exited()
		default:
		}
		last := probe()
		if last == nil {
			return nil
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("not answering: %w (last: %v)", ctx.Err(), last)
		case <-done:
			t.Stop()
			return exited()
		case <-t.C:
		}
	}
}

// Accepts reports whether something accepts TCP connections at addr.
func Accepts(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	return c.Close()
}

// KafkaPing reports whether a Kafka broker answers at addr: once something
// accepts connections there, a fresh franz-go client's Ping (ApiVersions,
// then a Metadata request) must succeed within timeout.
func KafkaPing(addr string, timeout time.Duration) error {
	return kafkaPing(addr, timeout)
}

// KafkaPingWith is KafkaPing for a broker that needs more of its clients:
// TLS (kgo.DialTLSConfig), SASL (kgo.SASL).
func KafkaPingWith(opts ...kgo.Opt) func(addr string, timeout time.Duration) error {
	return func(addr string, timeout time.Duration) error { return kafkaPing(addr, timeout, opts...) }
}

func kafkaPing(addr string, timeout time.Duration, opts ...kgo.Opt) error {
	if err := Accepts(addr, timeout); err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.DialTimeout(timeout),
		kgo.RequestRetries(0),
		kgo.RetryTimeout(timeout),
	}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cl.Ping(ctx)
}

// Ruok asks the ZooKeeper at addr "ruok" and wants "imok" (the server is
// up, though perhaps not serving yet).
func Ruok(addr string, timeout time.Duration) error {
	reply, err := fourLetterWord(addr, "ruok", timeout)
	if err != nil {
		return err
	}
	if reply != "imok" {
		return fmt.Errorf("ruok answered %q", reply)
	}
	return nil
}

// Serving reports whether the ZooKeeper at addr serves clients: "ruok"
// says imok and "srvr" reports a mode (before its database is loaded it
// says it is "not currently serving requests").
func Serving(addr string, timeout time.Duration) error {
	if err := Ruok(addr, timeout); err != nil {
		return err
	}
	reply, err := fourLetterWord(addr, "srvr", timeout)
	if err != nil {
		return err
	}
	if !strings.Contains(reply, "Mode: ") {
		return fmt.Errorf("srvr answered %q", reply)
	}
	return nil
}

// fourLetterWord sends a ZooKeeper four-letter command and reads the whole
// reply (the server closes the connection after it).
func fourLetterWord(addr, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	reply, err := io.ReadAll(conn)
	if err != nil && len(reply) == 0 {
		return "", err
	}
	return string(reply), nil
}

// Tail returns the end of a log file: at most maxLines lines and maxBytes
// bytes (0: no limit), marked "...(truncated)..." when bytes were cut.
func Tail(path string, maxBytes, maxLines int) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	data = bytes.TrimRight(data, "\n")
	if maxLines > 0 {
		lines := bytes.Split(data, []byte("\n"))
		if len(lines) > maxLines {
			data = bytes.Join(lines[len(lines)-maxLines:], []byte("\n"))
		}
	}
	if maxBytes > 0 && len(data) > maxBytes {
		return "...(truncated)...\n" + string(data[len(data)-maxBytes:]), nil
	}
	return string(data), nil
}
