package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want options
		err  string // substring; "" for success
	}{
		{"nothing", nil, options{}, ""},
		{"config flag", []string{"--config", "s.properties"}, options{configPath: "s.properties"}, ""},
		{"config flag with =", []string{"--config=s.properties"}, options{configPath: "s.properties"}, ""},
		{"single dash", []string{"-config", "s.properties"}, options{configPath: "s.properties"}, ""},
		{"kafka positional form", []string{"server.properties", "--override", "broker.id=1", "--override", "log.dirs=/d"},
			options{configPath: "server.properties", overrides: []string{"broker.id=1", "log.dirs=/d"}}, ""},
		{"flags before the file", []string{"--log-level", "debug", "server.properties", "--override=a=b"},
			options{configPath: "server.properties", overrides: []string{"a=b"}, logLevel: "debug"}, ""},
		{"overrides keep order", []string{"--override", "x=1", "--override", "x=2"},
			options{overrides: []string{"x=1", "x=2"}}, ""},
		{"version", []string{"--version"}, options{version: true}, ""},
		{"two files", []string{"a.properties", "b.properties"}, options{}, "only one properties file"},
		{"file twice", []string{"--config", "a", "b"}, options{}, "given twice"},
		{"unknown flag", []string{"--nope"}, options{}, "nope"},
		{"missing value", []string{"--override"}, options{}, "override"},
	} {
		got, err := parseArgs(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	for _, h := range []string{"-h", "--help", "-help"} {
		if _, err := parseArgs([]string{h}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: %v", h, err)
		}
	}
}

func noEnv(string) string { return "" }

func TestRunExitCodes(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.properties")
	if err := os.WriteFile(bad, []byte("num.partitions=many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		env    func(string) string
		code   int
		stdout string
		stderr string
	}{
		{"help", []string{"--help"}, noEnv, 0, "log.retention.ms", ""},
		{"version", []string{"--version"}, noEnv, 0, "kbroker ", ""},
		{"bad flag", []string{"--bogus"}, noEnv, 2, "", "--help"},
		{"bad value names the key", []string{"--override", "message.max.bytes=-5"}, noEnv, 2, "", "message.max.bytes"},
		{"bad file value names the key", []string{bad}, noEnv, 2, "", "num.partitions"},
		{"missing file", []string{"--config", "/nonexistent/kbroker.properties"}, noEnv, 2, "", "nonexistent"},
		{"bad log level flag", []string{"--log-level", "loud"}, noEnv, 2, "", "loud"},
		{"bad log level env", nil, func(k string) string {
			if k == "KBROKER_LOG_LEVEL" {
				return "loud"
			}
			return ""
		}, 2, "", "loud"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr, tc.env)
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%s: exit %d (want %d)\nstdout: %s\nstderr: %s", tc.name, code, tc.code, stdout.String(), stderr.String())
		}
	}
}

// The whole wiring: load, warn about unknown keys once, start the broker,
// stop it cleanly when the context ends.
func TestRunStartsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"--override", "listeners=PLAINTEXT://127.0.0.1:0",
			"--override", "log.dirs=" + t.TempDir(),
			"--override", "num.io.threads=8",
			"--override", "num.network.threads=3",
		}, &stdout, &stderr, noEnv)
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop within 30s of cancellation")
	}
	logs := stderr.String()
	if n := strings.Count(logs, "ignoring unknown properties"); n != 1 || !strings.Contains(logs, "num.io.threads,num.network.threads") {
		t.Errorf("want one warning listing the unknown keys:\n%s", logs)
	}
}
