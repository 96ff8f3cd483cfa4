package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	bs := []string{"--bootstrap-server", "h1:9092,h2:9092"}
	with := func(args ...string) []string { return append(slices.Clone(bs), args...) }
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, o *options)
		err   string // substring of the usage error; "" for none
	}{
		{name: "generate", args: with("--generate", "--brokers", "1,2,3,4", "--topics", "a,b", "--replication-factor", "3"),
			check: func(t *testing.T, o *options) {
				if o.action != actGenerate || !slices.Equal(o.brokers, []int32{1, 2, 3, 4}) || !slices.Equal(o.topics, []string{"a", "b"}) || o.rf != 3 {
					t.Errorf("%+v", o)
				}
				if !slices.Equal(o.bootstrap, []string{"h1:9092", "h2:9092"}) {
					t.Errorf("bootstrap %v", o.bootstrap)
				}
			}},
		{name: "generate with Kafka's --broker-list and = syntax", args: with("--generate", "--broker-list=5,6"),
			check: func(t *testing.T, o *options) {
				if !slices.Equal(o.brokers, []int32{5, 6}) {
					t.Errorf("brokers %v", o.brokers)
				}
			}},
		{name: "drain", args: with("--drain", "3"),
			check: func(t *testing.T, o *options) {
				if o.action != actDrain || o.drain != 3 || o.brokers != nil {
					t.Errorf("%+v", o)
				}
			}},
		{name: "execute and wait, timeout in Kafka's milliseconds", args: with("--execute", "--reassignment-json-file", "f.json", "--wait", "--timeout", "90000"),
			check: func(t *testing.T, o *options) {
				if o.action != actExecute || o.reassignmentFile != "f.json" || !o.wait || o.timeout != 90*time.Second {
					t.Errorf("%+v", o)
				}
			}},
		{name: "verify, timeout as a duration", args: with("--verify", "--reassignment-json-file", "f.json", "--wait", "--timeout", "2m", "--interval", "250ms"),
			check: func(t *testing.T, o *options) {
				if o.timeout != 2*time.Minute || o.interval != 250*time.Millisecond {
					t.Errorf("%+v", o)
				}
			}},
		{name: "list", args: with("--list"), check: func(t *testing.T, o *options) {
			if o.action != actList || o.timeout != defaultTimeout {
				t.Errorf("%+v", o)
			}
		}},
		{name: "execute with throttle", args: with("--execute", "--reassignment-json-file", "f", "--throttle", "1048576"), check: func(t *testing.T, o *options) {
			if o.action != actExecute || o.throttle != 1048576 || o.preserveThrottles {
				t.Errorf("%+v", o)
			}
		}},
		{name: "zero throttle", args: with("--execute", "--reassignment-json-file", "f", "--throttle", "0"), err: "positive number of bytes"},
		{name: "throttle with verify", args: with("--verify", "--reassignment-json-file", "f", "--throttle", "5"), err: `Option "--throttle" can't be used with action "--verify"`},
		{name: "no action", args: with(), err: "exactly one action"},
		{name: "two actions", args: with("--generate", "--execute", "--brokers", "1"), err: "exactly one action"},
		{name: "drain and generate", args: with("--generate", "--drain", "1", "--brokers", "1"), err: "exactly one action"},
		{name: "no bootstrap", args: []string{"--list"}, err: "--bootstrap-server"},
		{name: "generate without brokers", args: with("--generate"), err: `Missing required argument "[brokers/broker-list]"`},
		{name: "execute without file", args: with("--execute"), err: "reassignment-json-file"},
		{name: "wait with generate", args: with("--generate", "--brokers", "1", "--wait"), err: `Option "--wait" can't be used with action "--generate"`},
		{name: "rf with execute", args: with("--execute", "--reassignment-json-file", "f", "--replication-factor", "2"), err: "can't be used"},
		{name: "duplicate brokers", args: with("--generate", "--brokers", "1,2,1"), err: "Broker list contains duplicate entries: 1"},
		{name: "bad broker id", args: with("--generate", "--brokers", "1,x"), err: "not a broker id"},
		{name: "negative broker id", args: with("--generate", "--brokers", "-1"), err: "not a broker id"},
		{name: "duplicate topics", args: with("--generate", "--brokers", "1", "--topics", "a,a"), err: "duplicate entries: a"},
		{name: "rf zero", args: with("--generate", "--brokers", "1", "--replication-factor", "0"), err: "at least 1"},
		{name: "drained broker also listed", args: with("--drain", "2", "--brokers", "1,2"), err: "also in --brokers"},
		{name: "bad timeout", args: with("--list", "--timeout", "soon"), err: "not a duration"},
		{name: "zero timeout", args: with("--list", "--timeout", "0"), err: "must be positive"},
		{name: "stray argument", args: with("--list", "extra"), err: "unexpected arguments"},
		{name: "both broker flags", args: with("--generate", "--brokers", "1", "--broker-list", "2"), err: "not both"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := parseArgs(c.args, io.Discard)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, o)
		})
	}
}

func TestReadPropertiesAndSecurity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "client.properties")
	content := "# a comment\n! another\nsecurity.protocol = SASL_PLAINTEXT\nsasl.mechanism: SCRAM-SHA-512\n" +
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n" +
		"    username=\"alice\" password=\"s3cret\";\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	props, err := readProperties(path)
	if err != nil {
		t.Fatal(err)
	}
	if props["security.protocol"] != "SASL_PLAINTEXT" || props["sasl.mechanism"] != "SCRAM-SHA-512" ||
		!strings.Contains(props["sasl.jaas.config"], `username="alice"`) {
		t.Fatalf("properties %q", props)
	}
	if opts, err := securityOpts(props); err != nil || len(opts) != 1 {
		t.Fatalf("SASL_PLAINTEXT SCRAM: %d opts, %v", len(opts), err)
	}
	for _, c := range []struct {
		props map[string]string
		err   string
	}{
		{map[string]string{"security.protocol": "KERBEROS"}, "security.protocol"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": props["sasl.jaas.config"]}, "GSSAPI"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "broken"}, "sasl.jaas.config"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.location": filepath.Join(dir, "missing.p12")}, "ssl settings"},
	} {
		_, err := securityOpts(c.props)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: error %v, want %q", c.props, err, c.err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
	if opts, err := securityOpts(map[string]string{}); err != nil || len(opts) != 0 {
		t.Errorf("no properties: %d opts, %v", len(opts), err)
	}
}
