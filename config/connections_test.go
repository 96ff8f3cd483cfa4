package config

import (
	"reflect"
	"testing"
)

func TestParseConnectionOverrides(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    map[string]int32
		wantErr bool
	}{
		{"", nil, false},
		{"127.0.0.1:50", map[string]int32{"127.0.0.1": 50}, false},
		{" hostA:10 , 10.0.0.2:0 ", map[string]int32{"hostA": 10, "10.0.0.2": 0}, false},
		{"::1:7", map[string]int32{"::1": 7}, false},
		{"[::1]:7", map[string]int32{"::1": 7}, false},
		{"host", nil, true},
		{"host:x", nil, true},
		{"host:-1", nil, true},
		{":5", nil, true},
	} {
		got, err := ParseConnectionOverrides(tc.in)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseConnectionOverrides(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if s := FormatConnectionOverrides(map[string]int32{"b": 2, "a": 1}); s != "a:1,b:2" {
		t.Errorf("FormatConnectionOverrides = %q", s)
	}
}

func TestConnectionPropertiesLoad(t *testing.T) {
	c, unknown, err := Load("", []string{"max.connections=100", "max.connections.per.ip=50",
		"max.connections.per.ip.overrides=127.0.0.2:5", "connections.max.idle.ms=2000"})
	if err != nil || len(unknown) != 0 {
		t.Fatalf("Load: %v %v", unknown, err)
	}
	if c.MaxConnections != 100 || c.MaxConnectionsPerIP != 50 || c.MaxConnectionsPerIPOverrides["127.0.0.2"] != 5 ||
		c.ConnectionsMaxIdle.Milliseconds() != 2000 {
		t.Fatalf("loaded %+v", c)
	}
}
