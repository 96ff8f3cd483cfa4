package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	got, unknown, err := Load("", nil)
	if err != nil || len(unknown) != 0 {
		t.Fatalf("Load with nothing: %v %v", unknown, err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("Load(\"\", nil) = %+v\nwant Default() %+v", got, c)
	}
	// Spot checks of the documented defaults.
	if c.Listeners[0] != "PLAINTEXT://127.0.0.1:9092" || c.LogDirs[0] != "./kbroker-data" || c.BrokerID != 0 ||
		c.ReplicaLagTimeMax != 10*time.Second || c.MessageMaxBytes != 1048588 || c.LogRetentionMs != 168*time.Hour ||
		c.ZookeeperConnectionTimeout != c.ZookeeperSessionTimeout || c.LogMessageTimestamp != "CreateTime" {
		t.Errorf("defaults: %+v", c)
	}
	// Default hands out fresh maps: changing one copy leaves the next alone.
	c.ListenerSecurityProtocolMap["X"] = "PLAINTEXT"
	if _, ok := Default().ListenerSecurityProtocolMap["X"]; ok {
		t.Error("Default shares its map")
	}
}

// A stock Kafka 3.x server.properties loads; what kbroker does not use is
// reported, not rejected.
func TestLoadKafkaServerProperties(t *testing.T) {
	path := writeFile(t, `
# Licensed to the Apache Software Foundation (ASF) ...
broker.id=1
#listeners=PLAINTEXT://:9092
listeners=PLAINTEXT://:9093
advertised.listeners=PLAINTEXT://kafka-1.example:9093
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/var/lib/kafka/a,/var/lib/kafka/b
num.partitions=3
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=72
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=zk1:2181,zk2:2181/kafka
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
`)
	c, unknown, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantUnknown := []string{"num.io.threads", "num.network.threads",
		"socket.receive.buffer.bytes", "socket.send.buffer.bytes"}
	if !reflect.DeepEqual(unknown, wantUnknown) {
		t.Errorf("unknown = %q\nwant %q", unknown, wantUnknown)
	}
	if c.BrokerID != 1 || c.Listeners[0] != "PLAINTEXT://:9093" || c.AdvertisedListeners[0] != "PLAINTEXT://kafka-1.example:9093" ||
		!reflect.DeepEqual(c.LogDirs, []string{"/var/lib/kafka/a", "/var/lib/kafka/b"}) || c.NumPartitions != 3 ||
		c.LogRetentionMs != 72*time.Hour || c.ZookeeperConnect != "zk1:2181,zk2:2181/kafka" ||
		c.GroupInitialRebalanceDelay != 0 || c.OffsetsTopicReplicationFactor != 3 ||
		c.TransactionStateLogReplicationFactor != 1 || c.TransactionStateLogMinISR != 1 ||
		c.NumRecoveryThreadsPerDataDir != 1 {
		t.Errorf("loaded %+v", c)
	}
}

func TestLoadPrecedenceAndOverrides(t *testing.T) {
	for _, tc := range []struct {
		name      string
		file      string
		overrides []string
		check     func(Config) bool
	}{
		{"retention ms beats minutes and hours, whatever the order",
			"log.retention.ms=1000\nlog.retention.minutes=5\nlog.retention.hours=1", nil,
			func(c Config) bool { return c.LogRetentionMs == time.Second }},
		{"retention minutes beat hours", "log.retention.hours=1\nlog.retention.minutes=5", nil,
			func(c Config) bool { return c.LogRetentionMs == 5*time.Minute }},
		{"retention hours alone", "log.retention.hours=2", nil,
			func(c Config) bool { return c.LogRetentionMs == 2*time.Hour }},
		{"override of hours loses to file ms", "log.retention.ms=1000", []string{"log.retention.hours=9"},
			func(c Config) bool { return c.LogRetentionMs == time.Second }},
		{"negative retention is forever", "log.retention.hours=-1", nil,
			func(c Config) bool { return c.LogRetentionMs < 0 && c.Properties()["log.retention.ms"] == "-1" }},
		{"retention -5 ms is forever too", "log.retention.ms=-5", nil,
			func(c Config) bool { return c.LogRetentionMs == RetainForever }},
		{"huge retention clamps", "log.retention.ms=9223372036854775807", nil,
			func(c Config) bool { return c.LogRetentionMs == math.MaxInt64 }},
		{"roll ms beats hours", "log.roll.ms=60000\nlog.roll.hours=5", nil,
			func(c Config) bool { return c.LogRollMs == time.Minute }},
		{"roll hours", "log.roll.hours=5", nil,
			func(c Config) bool { return c.LogRollMs == 5*time.Hour }},
		{"log.dirs beats log.dir", "log.dirs=/a,/b\nlog.dir=/c", nil,
			func(c Config) bool { return reflect.DeepEqual(c.LogDirs, []string{"/a", "/b"}) }},
		{"log.dir alone", "log.dir=/c", nil,
			func(c Config) bool { return reflect.DeepEqual(c.LogDirs, []string{"/c"}) }},
		{"override beats file", "num.partitions=3", []string{"num.partitions=5"},
			func(c Config) bool { return c.NumPartitions == 5 }},
		{"later override wins", "", []string{"num.partitions=5", "num.partitions=7"},
			func(c Config) bool { return c.NumPartitions == 7 }},
		{"override value may hold =", "", []string{"broker.rack=a=b"},
			func(c Config) bool { return c.BrokerRack == "a=b" }},
		{"later file line wins", "broker.id=1\nbroker.id=2", nil,
			func(c Config) bool { return c.BrokerID == 2 }},
		{"zk connection timeout follows session", "zookeeper.session.timeout.ms=9000", nil,
			func(c Config) bool { return c.ZookeeperConnectionTimeout == 9*time.Second }},
		{"zk connection timeout set", "zookeeper.session.timeout.ms=9000\nzookeeper.connection.timeout.ms=4000", nil,
			func(c Config) bool { return c.ZookeeperConnectionTimeout == 4*time.Second }},
		{"booleans any case", "auto.create.topics.enable=FALSE\nunclean.leader.election.enable=True", nil,
			func(c Config) bool { return !c.AutoCreateTopics && c.UncleanLeaderElectionEnable }},
		{"list items trimmed, empty dropped", "listeners= PLAINTEXT://:1 , ,", nil,
			func(c Config) bool { return reflect.DeepEqual(c.Listeners, []string{"PLAINTEXT://:1"}) }},
		{"docker-style named listeners",
			"listeners=PLAINTEXT://0.0.0.0:9092,PLAINTEXT_HOST://0.0.0.0:29092\n" +
				"advertised.listeners=PLAINTEXT://kafka:9092,PLAINTEXT_HOST://localhost:29092\n" +
				"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT\n" +
				"inter.broker.listener.name=PLAINTEXT", nil,
			func(c Config) bool {
				return len(c.Listeners) == 2 && c.ListenerSecurityProtocolMap["PLAINTEXT_HOST"] == "PLAINTEXT"
			}},
		{"timestamp type", "log.message.timestamp.type=LogAppendTime", nil,
			func(c Config) bool { return c.LogMessageTimestamp == TimestampLogAppendTime }},
		{"offsets retention in minutes", "offsets.retention.minutes=60", nil,
			func(c Config) bool { return c.OffsetsRetention == time.Hour }},
		{"metrics address", "", []string{"kbroker.metrics.address=:9100"},
			func(c Config) bool { return c.MetricsAddress == ":9100" }},
	} {
		path := ""
		if tc.file != "" {
			path = writeFile(t, tc.file)
		}
		c, _, err := Load(path, tc.overrides)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !tc.check(c) {
			t.Errorf("%s: got %+v", tc.name, c)
		}
	}
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides []string
		key       string // "" for errors that are not about one value
		inMessage string
	}{
		{"non-numeric", []string{"num.partitions=three"}, "num.partitions", "three"},
		{"negative", []string{"num.partitions=-1"}, "num.partitions", "at least 1"},
		{"out of int32", []string{"broker.id=3000000000"}, "broker.id", "3000000000"},
		{"negative broker id", []string{"broker.id=-1"}, "broker.id", "-1"},
		{"replication factor over int16", []string{"default.replication.factor=40000"}, "default.replication.factor", "40000"},
		{"message.max.bytes zero", []string{"message.max.bytes=0"}, "message.max.bytes", "0"},
		{"socket.request.max.bytes zero", []string{"socket.request.max.bytes=0"}, "socket.request.max.bytes", "0"},
		{"bad bool", []string{"delete.topic.enable=yes"}, "delete.topic.enable", "yes"},
		{"bad enum", []string{"log.message.timestamp.type=createtime"}, "log.message.timestamp.type", "CreateTime"},
		{"bad listener", []string{"listeners=localhost:9092"}, "listeners", "NAME://host:port"},
		{"bad listener port", []string{"listeners=PLAINTEXT://:http"}, "listeners", "port"},
		{"listener port too big", []string{"listeners=PLAINTEXT://:70000"}, "listeners", "70000"},
		{"no listener", []string{"listeners="}, "listeners", "at least one"},
		{"unknown protocol", []string{"listener.security.protocol.map=CLIENT:GSSAPI"}, "listener.security.protocol.map", "GSSAPI"},
		{"unmapped listener name", []string{"listeners=CLIENT://:9093"}, "listeners", "listener.security.protocol.map"},
		{"duplicate listener names", []string{"listeners=PLAINTEXT://:1,plaintext://:2"}, "listeners", "twice"},
		{"duplicate ports", []string{"listeners=PLAINTEXT://:1,B://:1", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,B:PLAINTEXT"}, "listeners", "port 1"},
		{"advertised unknown name", []string{"advertised.listeners=OTHER://h:1"}, "advertised.listeners", "not in listeners"},
		{"advertised meta-address", []string{"advertised.listeners=PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "meta-address"},
		{"inter-broker listener missing", []string{"inter.broker.listener.name=INTERNAL"}, "inter.broker.listener.name", "INTERNAL"},
		{"bad protocol map", []string{"listener.security.protocol.map=PLAINTEXT"}, "listener.security.protocol.map", "NAME:PROTOCOL"},
		{"unknown protocol in map", []string{"listener.security.protocol.map=PLAINTEXT:TLS"}, "listener.security.protocol.map", "TLS"},
		{"zero roll", []string{"log.roll.ms=0"}, "log.roll.ms", "0"},
		{"tiny segment", []string{"log.segment.bytes=10"}, "log.segment.bytes", "14"},
		{"segment over int32", []string{"log.segment.bytes=4294967296"}, "log.segment.bytes", "4294967296"},
		{"empty log.dirs", []string{"log.dirs= , "}, "log.dirs", "at least one"},
		{"empty log.dir", []string{"log.dir="}, "log.dir", "empty"},
		{"group session bounds", []string{"group.min.session.timeout.ms=60000", "group.max.session.timeout.ms=1000"}, "group.min.session.timeout.ms", "group.max.session.timeout.ms"},
		{"bad metrics address", []string{"kbroker.metrics.address=nocolon"}, "kbroker.metrics.address", "nocolon"},
		{"min isr zero", []string{"min.insync.replicas=0"}, "min.insync.replicas", "0"},
		{"no recovery threads", []string{"num.recovery.threads.per.data.dir=0"}, "num.recovery.threads.per.data.dir", "0"},
		{"recovery threads not a number", []string{"num.recovery.threads.per.data.dir=many"}, "num.recovery.threads.per.data.dir", "many"},
		{"override without =", []string{"num.partitions"}, "", "key=value"},
		{"override with empty key", []string{"=3"}, "", "key=value"},
	} {
		_, _, err := Load("", tc.overrides)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.key != "" {
			var ve *ValueError
			if !errors.As(err, &ve) || ve.Key != tc.key {
				t.Errorf("%s: %v does not name key %s", tc.name, err, tc.key)
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Errorf("%s: message %q lacks the key", tc.name, err)
			}
		}
		if !strings.Contains(err.Error(), tc.inMessage) {
			t.Errorf("%s: message %q lacks %q", tc.name, err, tc.inMessage)
		}
	}
}

func TestLoadFileErrors(t *testing.T) {
	if _, _, err := Load(filepath.Join(t.TempDir(), "missing.properties"), nil); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	path := writeFile(t, "a=1\nb=\\u12")
	if _, _, err := Load(path, nil); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad escape: %v", err)
	}
	path = writeFile(t, "num.partitions = x ")
	var ve *ValueError
	if _, _, err := Load(path, nil); !errors.As(err, &ve) || ve.Key != "num.partitions" || ve.Value != "x" {
		t.Errorf("bad value in file: %v", err)
	}
}

func TestValidateCodeBuiltConfig(t *testing.T) {
	c := Default()
	c.MessageMaxBytes = 0
	var ve *ValueError
	if err := c.Validate(); !errors.As(err, &ve) || ve.Key != "message.max.bytes" {
		t.Errorf("message.max.bytes=0: %v", err)
	}
	c = Default()
	c.Listeners = nil
	if err := c.Validate(); !errors.As(err, &ve) || ve.Key != "listeners" {
		t.Errorf("no listeners: %v", err)
	}
	c = Default()
	c.Listeners = []string{"PLAINTEXT://127.0.0.1:0"} // tests listen on a free port
	c.LogRetentionMs = RetainForever
	if err := c.Validate(); err != nil {
		t.Errorf("port 0, retention forever: %v", err)
	}
}

func TestProperties(t *testing.T) {
	c, _, err := Load("", []string{"log.retention.hours=2", "log.dir=/d", "advertised.listeners=PLAINTEXT://h:9092"})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Properties()
	for key, want := range map[string]string{
		"broker.id":                       "0",
		"listeners":                       "PLAINTEXT://127.0.0.1:9092",
		"advertised.listeners":            "PLAINTEXT://h:9092",
		"log.dirs":                        "/d",
		"log.retention.ms":                "7200000",
		"log.roll.ms":                     "604800000",
		"log.segment.bytes":               "1073741824",
		"message.max.bytes":               "1048588",
		"replica.lag.time.max.ms":         "10000",
		"offsets.retention.minutes":       "10080",
		"zookeeper.connection.timeout.ms": "18000",
		"zookeeper.connect":               "",
		"auto.create.topics.enable":       "true",
		"log.flush.interval.messages":     "9223372036854775807",
		"listener.security.protocol.map":  "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
	} {
		if p[key] != want {
			t.Errorf("Properties()[%q] = %q, want %q", key, p[key], want)
		}
	}
	for _, alias := range []string{"log.dir", "log.retention.hours", "log.retention.minutes", "log.roll.hours"} {
		if _, ok := p[alias]; ok {
			t.Errorf("alias %s reported", alias)
		}
	}
	// What Properties reports loads back to the same config.
	var overrides []string
	for k, v := range p {
		overrides = append(overrides, k+"="+v)
	}
	back, unknown, err := Load("", overrides)
	if err != nil || len(unknown) != 0 || !reflect.DeepEqual(back, c) {
		t.Errorf("round trip: %v %v\n%+v\n%+v", err, unknown, back, c)
	}
	if got := c.EffectiveAdvertisedListeners(); got[0] != "PLAINTEXT://h:9092" {
		t.Errorf("effective advertised %q", got)
	}
	if got := Default().EffectiveAdvertisedListeners(); got[0] != "PLAINTEXT://127.0.0.1:9092" {
		t.Errorf("effective advertised by default %q", got)
	}
}

func TestDocs(t *testing.T) {
	docs := Docs()
	seen := map[string]bool{}
	for _, d := range docs {
		if d.Doc == "" || seen[d.Name] {
			t.Errorf("doc entry %+v (dup %v)", d, seen[d.Name])
		}
		seen[d.Name] = true
	}
	if !seen["log.retention.hours"] || !seen["listeners"] {
		t.Error("missing entries")
	}
}

func TestListenerHostPort(t *testing.T) {
	for _, tc := range []struct {
		in   string
		name string
		host string
		port int32
		ok   bool
	}{
		{"PLAINTEXT://127.0.0.1:9092", "PLAINTEXT", "127.0.0.1", 9092, true},
		{"PLAINTEXT://:9092", "PLAINTEXT", "", 9092, true},
		{"plaintext://kafka-1.example.com:19092", "PLAINTEXT", "kafka-1.example.com", 19092, true},
		{"PLAINTEXT://[::1]:9092", "PLAINTEXT", "::1", 9092, true},
		{"PLAINTEXT://0.0.0.0:0", "PLAINTEXT", "0.0.0.0", 0, true},
		{" PLAINTEXT_HOST://localhost:29092 ", "PLAINTEXT_HOST", "localhost", 29092, true},
		{"localhost:9092", "", "", 0, false},
		{"://h:1", "", "", 0, false},
		{"PLAINTEXT://h", "", "", 0, false},
		{"PLAINTEXT://h:-1", "", "", 0, false},
		{"PLAINTEXT://h:65536", "", "", 0, false},
		{"PLAIN TEXT://h:1", "", "", 0, false},
		{"PLAINTEXT://::1:9092", "", "", 0, false},
	} {
		name, host, port, err := ParseListener(tc.in)
		if (err == nil) != tc.ok || name != tc.name || host != tc.host || port != tc.port {
			t.Errorf("ParseListener(%q) = %q %q %d %v", tc.in, name, host, port, err)
		}
		h, p, err2 := ListenerHostPort(tc.in)
		if h != host || p != port || (err2 == nil) != (err == nil) {
			t.Errorf("ListenerHostPort(%q) = %q %d %v", tc.in, h, p, err2)
		}
	}
}

// TestListenerSettings checks Kafka's per-listener rule: a
// listener.name.<listener>. key overrides the plain key for that listener
// only, and TLS/SASL keys are kept rather than reported as unknown.
func TestListenerSettings(t *testing.T) {
	c, unknown, err := Load("", []string{
		"listeners=CLIENT://127.0.0.1:1,BROKER://127.0.0.1:2",
		"listener.security.protocol.map=CLIENT:SASL_SSL,BROKER:SSL",
		"inter.broker.listener.name=BROKER",
		"ssl.client.auth=none",
		"ssl.keystore.location=/k/default.p12",
		"listener.name.broker.ssl.client.auth=required",
		"listener.name.client.scram-sha-512.sasl.jaas.config=x",
		"sasl.enabled.mechanisms=PLAIN",
	})
	if err != nil || len(unknown) != 0 {
		t.Fatalf("Load: %v, unknown %v", err, unknown)
	}
	for _, tc := range []struct {
		listener, key, want string
	}{
		{"BROKER", "ssl.client.auth", "required"},
		{"CLIENT", "ssl.client.auth", "none"},
		{"BROKER", "ssl.keystore.location", "/k/default.p12"},
		{"client", "scram-sha-512.sasl.jaas.config", "x"},
		{"BROKER", "scram-sha-512.sasl.jaas.config", ""},
		{"CLIENT", "sasl.enabled.mechanisms", "PLAIN"},
	} {
		if got := c.ListenerSettings(tc.listener)[tc.key]; got != tc.want {
			t.Errorf("ListenerSettings(%s)[%s] = %q, want %q", tc.listener, tc.key, got, tc.want)
		}
	}
	if got := c.ListenerProtocol("client"); got != "SASL_SSL" {
		t.Errorf("ListenerProtocol(client) = %q", got)
	}
}

// TestSecurityInterBrokerProtocol: Kafka's older key names the
// inter-broker listener by its protocol; inter.broker.listener.name wins.
func TestSecurityInterBrokerProtocol(t *testing.T) {
	for _, tc := range []struct {
		overrides []string
		want      string
	}{
		{[]string{"listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2", "security.inter.broker.protocol=SSL"}, "SSL"},
		{[]string{"listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2", "security.inter.broker.protocol=SSL", "inter.broker.listener.name=PLAINTEXT"}, "PLAINTEXT"},
	} {
		c, _, err := Load("", tc.overrides)
		if err != nil {
			t.Fatalf("Load(%v): %v", tc.overrides, err)
		}
		if c.InterBrokerListenerName != tc.want {
			t.Errorf("Load(%v): inter-broker listener %q, want %q", tc.overrides, c.InterBrokerListenerName, tc.want)
		}
	}
}

// num.recovery.threads.per.data.dir defaults to a thread per core, at
// least two, and an override wins.
func TestRecoveryThreadsDefault(t *testing.T) {
	if got, want := Default().NumRecoveryThreadsPerDataDir, int32(max(2, runtime.GOMAXPROCS(0))); got != want {
		t.Errorf("default num.recovery.threads.per.data.dir = %d, want %d", got, want)
	}
	c, _, err := Load("", []string{"num.recovery.threads.per.data.dir=16"})
	if err != nil {
		t.Fatal(err)
	}
	if c.NumRecoveryThreadsPerDataDir != 16 || c.Properties()["num.recovery.threads.per.data.dir"] != "16" {
		t.Errorf("override: %d %q", c.NumRecoveryThreadsPerDataDir, c.Properties()["num.recovery.threads.per.data.dir"])
	}
}
