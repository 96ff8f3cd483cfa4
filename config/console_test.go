package config

import "testing"

// The metrics (and console) address: on by default on an embedded broker,
// off by default in a ZooKeeper cluster, and an explicit value (empty
// included) always wins.
func TestMetricsAddressDefault(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides []string
		want      string
	}{
		{"embedded, unset", nil, EmbeddedMetricsAddress},
		{"embedded, explicitly empty", []string{"kbroker.metrics.address="}, ""},
		{"embedded, set", []string{"kbroker.metrics.address=0.0.0.0:8080"}, "0.0.0.0:8080"},
		{"zookeeper, unset", []string{"zookeeper.connect=zk:2181"}, ""},
		{"zookeeper, set", []string{"zookeeper.connect=zk:2181", "kbroker.metrics.address=127.0.0.1:8081"}, "127.0.0.1:8081"},
	} {
		c, _, err := Load("", tc.overrides)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.MetricsAddress != tc.want {
			t.Errorf("%s: metrics address %q, want %q", tc.name, c.MetricsAddress, tc.want)
		}
		if got := c.Properties()["kbroker.metrics.address"]; got != tc.want {
			t.Errorf("%s: DescribeConfigs value %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestConsoleActionsFlag(t *testing.T) {
	if Default().ConsoleActionsEnable {
		t.Error("console actions on by default")
	}
	c, _, err := Load("", []string{"kbroker.console.actions.enable=true"})
	if err != nil || !c.ConsoleActionsEnable || c.Properties()["kbroker.console.actions.enable"] != "true" {
		t.Errorf("kbroker.console.actions.enable=true: %v %v", err, c.ConsoleActionsEnable)
	}
	if _, _, err := Load("", []string{"kbroker.console.actions.enable=yes"}); err == nil {
		t.Error("kbroker.console.actions.enable=yes accepted")
	}
}
