package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/kbroker/kbroker/internal/tlsconf"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// readProperties reads a Java properties file of the simple kind Kafka
// client configs are: key=value or key: value lines, # and ! comments,
// a trailing backslash continuing a line.
func readProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pending string
	for sc.Scan() {
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if pending == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending += strings.TrimSuffix(line, `\`)
			continue
		}
		line, pending = pending+line, ""
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			props[strings.TrimSpace(line)] = ""
			continue
		}
		props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return props, nil
}

// securityOpts turns Kafka client properties into franz-go options:
// security.protocol PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; ssl.*
// stores as the broker reads them (PKCS#12 or PEM); sasl.mechanism PLAIN,
// SCRAM-SHA-256 or SCRAM-SHA-512 with the username and password of
// sasl.jaas.config. Nothing of the properties is ever printed.
func securityOpts(props map[string]string) ([]kgo.Opt, error) {
	protocol := strings.ToUpper(strings.TrimSpace(props["security.protocol"]))
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	var opts []kgo.Opt
	switch protocol {
	case "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		settings := tlsconf.Settings{}
		for k, v := range props {
			if strings.HasPrefix(k, "ssl.") {
				settings[k] = v
			}
		}
		// kgo sets ServerName to each broker's host when it is empty.
		cfg, err := tlsconf.NewClient(settings, "")
		if err != nil {
			return nil, fmt.Errorf("ssl settings: %w", err)
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	default:
		return nil, fmt.Errorf("security.protocol %q: not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", protocol)
	}
	if !strings.HasPrefix(protocol, "SASL_") {
		return opts, nil
	}
	mechanism := strings.TrimSpace(props["sasl.mechanism"])
	if mechanism == "" {
		mechanism = "GSSAPI" // Kafka's default, which kreassign cannot speak
	}
	jaas, err := sasl.ParseJAAS(props["sasl.jaas.config"])
	if err != nil {
		return nil, err // names options, never values
	}
	user, pass := jaas.Username(), jaas.Password()
	if user == "" {
		return nil, errors.New("sasl.jaas.config has no username")
	}
	switch mechanism {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("sasl.mechanism %q: kreassign speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", mechanism)
	}
	return opts, nil
}
