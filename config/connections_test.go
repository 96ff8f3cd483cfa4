package config

import (
	"errors"
	"math"
	"reflect"
	"slices"
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
		"max.connections.per.ip.overrides=127.0.0.2:5", "connections.max.idle.ms=2000", "max.connection.creation.rate=30"})
	if err != nil || len(unknown) != 0 {
		t.Fatalf("Load: %v %v", unknown, err)
	}
	if c.MaxConnections != 100 || c.MaxConnectionsPerIP != 50 || c.MaxConnectionsPerIPOverrides["127.0.0.2"] != 5 ||
		c.ConnectionsMaxIdle.Milliseconds() != 2000 || c.MaxConnectionCreationRate != 30 {
		t.Fatalf("loaded %+v", c)
	}
}

func TestListenerConnectionLimits(t *testing.T) {
	listeners := []string{"listeners=BROKER://127.0.0.1:9092,CLIENT://127.0.0.1:9093",
		"listener.security.protocol.map=BROKER:PLAINTEXT,CLIENT:PLAINTEXT", "inter.broker.listener.name=BROKER"}
	for _, tc := range []struct {
		name      string
		props     []string
		broker    ListenerConnectionLimits
		client    ListenerConnectionLimits
		wantErrOn string // the key a refusal names
	}{
		{name: "defaults", broker: ListenerConnectionLimits{math.MaxInt32, math.MaxInt32}, client: ListenerConnectionLimits{math.MaxInt32, math.MaxInt32}},
		{name: "broker-wide values are every listener's default",
			props:  []string{"max.connections=100", "max.connection.creation.rate=20"},
			broker: ListenerConnectionLimits{100, 20}, client: ListenerConnectionLimits{100, 20}},
		{name: "a listener's own values win, lower-case prefix",
			props:  []string{"max.connections=100", "max.connection.creation.rate=20", "listener.name.client.max.connections=5", "listener.name.client.max.connection.creation.rate=3"},
			broker: ListenerConnectionLimits{100, 20}, client: ListenerConnectionLimits{5, 3}},
		{name: "another listener's prefix does not apply",
			props:  []string{"listener.name.broker.max.connections=7"},
			broker: ListenerConnectionLimits{7, math.MaxInt32}, client: ListenerConnectionLimits{math.MaxInt32, math.MaxInt32}},
		{name: "not a number", props: []string{"listener.name.client.max.connections=many"}, wantErrOn: "listener.name.client.max.connections"},
		{name: "negative rate", props: []string{"listener.name.client.max.connection.creation.rate=-1"}, wantErrOn: "listener.name.client.max.connection.creation.rate"},
		{name: "negative broker rate", props: []string{"max.connection.creation.rate=-1"}, wantErrOn: "max.connection.creation.rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, unknown, err := Load("", append(slices.Clone(listeners), tc.props...))
			if tc.wantErrOn != "" {
				var ve *ValueError
				if !errors.As(err, &ve) || ve.Key != tc.wantErrOn {
					t.Fatalf("Load = %v, want a ValueError on %s", err, tc.wantErrOn)
				}
				return
			}
			if err != nil || len(unknown) != 0 {
				t.Fatalf("Load: %v (unknown %v)", err, unknown)
			}
			if got := c.ListenerConnectionLimits("BROKER"); got != tc.broker {
				t.Errorf("BROKER limits %+v, want %+v", got, tc.broker)
			}
			if got := c.ListenerConnectionLimits("CLIENT"); got != tc.client {
				t.Errorf("CLIENT limits %+v, want %+v", got, tc.client)
			}
		})
	}
}
