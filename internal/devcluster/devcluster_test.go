package devcluster

import (
	"context"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestParseCLI(t *testing.T) {
	tests := []struct {
		args    []string
		want    cliOptions
		wantErr string
	}{
		{args: nil, want: cliOptions{brokers: 3, dir: DefaultDir}},
		{args: []string{"--brokers", "5", "--dir", "/x"}, want: cliOptions{brokers: 5, dir: "/x"}},
		{args: []string{"--override", "a=1", "--override", "b=2"}, want: cliOptions{brokers: 3, dir: DefaultDir, overrides: []string{"a=1", "b=2"}}},
		{args: []string{"--dir", "d", "--kill", "2"}, want: cliOptions{brokers: 3, dir: "d", request: "kill 2"}},
		{args: []string{"--restart", "1"}, want: cliOptions{brokers: 3, dir: DefaultDir, request: "restart 1"}},
		{args: []string{"--stop", "3"}, want: cliOptions{brokers: 3, dir: DefaultDir, request: "stop 3"}},
		{args: []string{"--status"}, want: cliOptions{brokers: 3, dir: DefaultDir, request: "status"}},
		{args: []string{"--kill", "1", "--restart", "2"}, wantErr: "only one of"},
		{args: []string{"--kill", "x"}, wantErr: "want a broker id"},
		{args: []string{"--kill", "-1"}, wantErr: "want a broker id"},
		{args: []string{"--brokers", "0"}, wantErr: "at least 1"},
		{args: []string{"--dir", ""}, wantErr: "must not be empty"},
		{args: []string{"extra"}, wantErr: "unexpected argument"},
		{args: []string{"--nope"}, wantErr: "not defined"},
	}
	for _, tc := range tests {
		got, err := parseCLI(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseCLI(%q) = %+v, %v; want error containing %q", tc.args, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.brokers != tc.want.brokers || got.dir != tc.want.dir || got.request != tc.want.request || !slices.Equal(got.overrides, tc.want.overrides) {
			t.Errorf("parseCLI(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	if _, err := parseCLI([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v, want flag.ErrHelp", err)
	}
}

func TestParseCommand(t *testing.T) {
	tests := []struct {
		line    string
		want    command
		wantErr bool
	}{
		{"status\n", command{verb: "status"}, false},
		{"kill 2\n", command{verb: "kill", id: 2}, false},
		{"restart 10", command{verb: "restart", id: 10}, false},
		{"stop 1", command{verb: "stop", id: 1}, false},
		{"", command{}, true},
		{"kill", command{}, true},
		{"kill x", command{}, true},
		{"kill 1 2", command{}, true},
		{"status 1", command{}, true},
		{"rm -rf /", command{}, true},
	}
	for _, tc := range tests {
		got, err := parseCommand(tc.line)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseCommand(%q) = %+v, %v; want %+v, error %v", tc.line, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestCompleteLayoutKeepsSavedPorts(t *testing.T) {
	next := 1000
	free := func() (int, error) { next++; return next, nil }
	saved := layout{ZooKeeperPort: 2181, Brokers: []brokerLayout{{ID: 2, Port: 9092, MetricsPort: 8080}, {ID: 7, Port: 9097, MetricsPort: 8087}}}
	got, err := completeLayout(saved, 3, free)
	if err != nil {
		t.Fatal(err)
	}
	want := layout{ZooKeeperPort: 2181, Brokers: []brokerLayout{
		{ID: 2, Port: 9092, MetricsPort: 8080},
		{ID: 7, Port: 9097, MetricsPort: 8087}, // kept, not started
		{ID: 1, Port: 1001, MetricsPort: 1002},
		{ID: 3, Port: 1003, MetricsPort: 1004},
	}}
	if got.ZooKeeperPort != want.ZooKeeperPort || !slices.Equal(got.Brokers, want.Brokers) {
		t.Errorf("completeLayout = %+v, want %+v", got, want)
	}
	again, err := completeLayout(got, 3, free)
	if err != nil || !slices.Equal(again.Brokers, got.Brokers) {
		t.Errorf("a complete layout changed: %+v, %v", again, err)
	}
	if len(saved.Brokers) != 2 {
		t.Errorf("completeLayout changed its argument: %+v", saved)
	}
}

func TestLayoutRoundTrip(t *testing.T) {
	dir := t.TempDir()
	empty, err := readLayout(dir)
	if err != nil || empty.ZooKeeperPort != 0 || len(empty.Brokers) != 0 {
		t.Fatalf("readLayout of a new dir = %+v, %v", empty, err)
	}
	l := layout{ZooKeeperPort: 1, Brokers: []brokerLayout{{ID: 1, Port: 2, MetricsPort: 3}}}
	if err := writeLayout(dir, l); err != nil {
		t.Fatal(err)
	}
	got, err := readLayout(dir)
	if err != nil || got.ZooKeeperPort != 1 || !slices.Equal(got.Brokers, l.Brokers) {
		t.Errorf("readLayout = %+v, %v; want %+v", got, err, l)
	}
}

func TestBrokerOverridesCapReplicationByBrokers(t *testing.T) {
	ov := brokerOverrides(2, 1, "127.0.0.1:2181", "127.0.0.1:8080", []string{"min.insync.replicas=1"})
	for _, want := range []string{"broker.id=2", "zookeeper.connect=127.0.0.1:2181", "kbroker.metrics.address=127.0.0.1:8080", "default.replication.factor=1", "min.insync.replicas=1"} {
		if !slices.Contains(ov, want) {
			t.Errorf("overrides %q lack %q", ov, want)
		}
	}
	if ov[len(ov)-1] != "min.insync.replicas=1" {
		t.Errorf("extra overrides must come last (later ones win): %q", ov)
	}
	three := brokerOverrides(1, 3, "z", "m", nil)
	for _, want := range []string{"default.replication.factor=3", "min.insync.replicas=2", "offsets.topic.replication.factor=3", "transaction.state.log.min.isr=2"} {
		if !slices.Contains(three, want) {
			t.Errorf("overrides %q lack %q", three, want)
		}
	}
}

func TestControlWithoutCluster(t *testing.T) {
	_, err := Control(context.Background(), t.TempDir(), "status")
	if err == nil || !strings.Contains(err.Error(), "no dev cluster is running") {
		t.Errorf("Control on an empty dir: %v", err)
	}
}

func TestControlSocketIsExclusive(t *testing.T) {
	dir := t.TempDir()
	ln, err := listenControl(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := listenControl(dir); err == nil || !strings.Contains(err.Error(), "already runs") {
		t.Errorf("second listenControl: %v, want 'already runs'", err)
	}
	if other, err := listenControl(t.TempDir()); err != nil {
		t.Errorf("another dir's socket: %v", err)
	} else {
		other.Close()
	}
}
