package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

func b64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The salt and password of RFC 7677's example; the expected keys were
// computed with Python's hashlib.pbkdf2_hmac and hmac, not with this
// package.
const (
	rfcSalt     = "W22ZaJ0SNY7soEsUEjb6gQ=="
	rfcPassword = "pencil"
)

func TestNewScramCredential(t *testing.T) {
	tests := []struct {
		mechanism                    string
		salted, storedKey, serverKey string
	}{
		{
			mechanism: ScramSHA256,
			salted:    "xKSVEDI6tPlSysH6mUQZOeeOp01r6B3fcJbodRPcYV0=",
			storedKey: "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=",
			serverKey: "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
		},
		{
			mechanism: ScramSHA512,
			salted:    "8W7+G+Z/HQlQLr1e2SYv3f+6Wjd6tPC2h+XtW6D1Boa4pK4WZHbairO5UdL6kji2OZj0VGG8M6RkgUlJzsljHQ==",
			storedKey: "6AAub3065EYRmyFpM2RNwqK+eGnrkYuEWbXn19LsEmBqzu8QaCXNc1FwpnX9NhH2hK/60dzj9DoO5DvVkOHbvg==",
			serverKey: "jZHbYjC1aHh0/hKbxyBuGFjDrgjgKTT1esA7awWiKcRZ0o/0b1yWEebBeSVkkCFewf91nLDfKF24mvD5nmE6rA==",
		},
	}
	for _, tt := range tests {
		t.Run(tt.mechanism, func(t *testing.T) {
			salt := b64(t, rfcSalt)
			salted, err := SaltPassword(tt.mechanism, rfcPassword, salt, 4096)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(salted, b64(t, tt.salted)) {
				t.Fatalf("SaltPassword = %x, want %x", salted, b64(t, tt.salted))
			}
			c, err := NewScramCredential(tt.mechanism, salt, salted, 4096)
			if err != nil {
				t.Fatal(err)
			}
			want := Credential{
				Mechanism:  tt.mechanism,
				Salt:       salt,
				StoredKey:  b64(t, tt.storedKey),
				ServerKey:  b64(t, tt.serverKey),
				Iterations: 4096,
			}
			if !credentialEqual(c, want) {
				t.Fatalf("NewScramCredential = %s, want %s", c.String(), want.String())
			}
			s := c.String()
			wantS := "salt=" + rfcSalt + ",stored_key=" + tt.storedKey + ",server_key=" + tt.serverKey + ",iterations=4096"
			if s != wantS {
				t.Fatalf("String = %s, want %s", s, wantS)
			}
			back, err := ParseCredential(tt.mechanism, s)
			if err != nil {
				t.Fatal(err)
			}
			if !credentialEqual(back, want) {
				t.Fatalf("ParseCredential(String()) = %s, want %s", back.String(), want.String())
			}
		})
	}
}

// The derived SHA-256 keys reproduce RFC 7677's exchange: the client proof
// it lists verifies against StoredKey and the server signature it lists
// comes out of ServerKey. This ties the credential to the RFC itself rather
// than to a second implementation.
func TestCredentialMatchesRFC7677(t *testing.T) {
	salted, err := SaltPassword(ScramSHA256, rfcPassword, b64(t, rfcSalt), 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewScramCredential(ScramSHA256, b64(t, rfcSalt), salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	const nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	authMessage := "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=" + nonce + ",s=" + rfcSalt + ",i=4096," +
		"c=biws,r=" + nonce
	proof := b64(t, "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	sig := hmac.New(sha256.New, c.StoredKey)
	sig.Write([]byte(authMessage))
	clientKey := sig.Sum(nil)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	if got := sha256.Sum256(clientKey); !bytes.Equal(got[:], c.StoredKey) {
		t.Fatal("RFC 7677 client proof does not verify against StoredKey")
	}
	srv := hmac.New(sha256.New, c.ServerKey)
	srv.Write([]byte(authMessage))
	if got, want := base64.StdEncoding.EncodeToString(srv.Sum(nil)), "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; got != want {
		t.Fatalf("server signature %s, want RFC 7677's %s", got, want)
	}
}

func credentialEqual(a, b Credential) bool {
	return a.Mechanism == b.Mechanism && a.Iterations == b.Iterations &&
		bytes.Equal(a.Salt, b.Salt) && bytes.Equal(a.StoredKey, b.StoredKey) &&
		bytes.Equal(a.ServerKey, b.ServerKey)
}

func TestParseCredential(t *testing.T) {
	const (
		key32 = "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
		// A value that must never show up in an error.
		secretish = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlYw=="
	)
	tests := []struct {
		name      string
		mechanism string
		in        string
		wantErr   string // substring; "" means success
	}{
		{"valid", ScramSHA256, "salt=" + rfcSalt + ",stored_key=" + key32 + ",server_key=" + key32 + ",iterations=4096", ""},
		{"any order", ScramSHA256, "iterations=8192,server_key=" + key32 + ",salt=" + rfcSalt + ",stored_key=" + key32, ""},
		{"unpadded base64", ScramSHA256, "salt=W22ZaJ0SNY7soEsUEjb6gQ,stored_key=" + key32 + ",server_key=" + key32 + ",iterations=4096", ""},
		{"below Kafka's minimum still parses", ScramSHA256, "salt=" + rfcSalt + ",stored_key=" + key32 + ",server_key=" + key32 + ",iterations=1", ""},
		{"not a SCRAM mechanism", Plain, "salt=" + rfcSalt, "not a SCRAM mechanism"},
		{"empty", ScramSHA256, "", "field 1 is not name=value"},
		{"no equals", ScramSHA256, strings.TrimRight(secretish, "="), "field 1 is not name=value"},
		{"empty name", ScramSHA256, "=" + secretish, "field 1 is not name=value"},
		{"missing iterations", ScramSHA256, "salt=" + rfcSalt + ",stored_key=" + key32 + ",server_key=" + key32, "missing field iterations"},
		{"duplicate", ScramSHA256, "salt=" + rfcSalt + ",salt=" + secretish, "field salt appears twice"},
		{"unknown field", ScramSHA256, "salt=" + rfcSalt + ",password=" + secretish, "field 2 has an unknown name"},
		{"mangled name", ScramSHA256, secretish, "field 1 has an unknown name"},
		{"bad base64", ScramSHA256, "salt=" + rfcSalt + ",stored_key=" + secretish + "!,server_key=" + key32 + ",iterations=4096", "field stored_key: illegal base64"},
		{"bad iterations", ScramSHA256, "salt=" + rfcSalt + ",stored_key=" + key32 + ",server_key=" + key32 + ",iterations=4096x", "field iterations: invalid syntax"},
		{"iterations overflow", ScramSHA256, "salt=" + rfcSalt + ",stored_key=" + key32 + ",server_key=" + key32 + ",iterations=4294967296", "field iterations: value out of range"},
		{"zero iterations", ScramSHA256, "salt=" + rfcSalt + ",stored_key=" + key32 + ",server_key=" + key32 + ",iterations=0", "field iterations: not positive"},
		{"empty salt", ScramSHA256, "salt=,stored_key=" + key32 + ",server_key=" + key32 + ",iterations=4096", "field salt: empty"},
		{"short stored key", ScramSHA256, "salt=" + rfcSalt + ",stored_key=" + rfcSalt + ",server_key=" + key32 + ",iterations=4096", "field stored_key: 16 bytes, want 32"},
		{"SHA-256 key for SHA-512", ScramSHA512, "salt=" + rfcSalt + ",stored_key=" + key32 + ",server_key=" + key32 + ",iterations=4096", "field stored_key: 32 bytes, want 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCredential(tt.mechanism, tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseCredential: %v", err)
				}
				if c.Mechanism != tt.mechanism {
					t.Fatalf("Mechanism = %q, want %q", c.Mechanism, tt.mechanism)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseCredential succeeded, want error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q, want it to contain %q", err, tt.wantErr)
			}
			for _, leak := range []string{strings.TrimRight(secretish, "="), strings.TrimRight(key32, "="), rfcSalt, "4294967296", "4096x"} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error %q echoes a value", err)
				}
			}
		})
	}
}

func TestNewScramCredentialErrors(t *testing.T) {
	tests := []struct {
		name       string
		mechanism  string
		salt       []byte
		salted     []byte
		iterations int32
		wantErr    string
	}{
		{"PLAIN", Plain, []byte("s"), []byte("p"), 4096, "not a SCRAM mechanism"},
		{"empty salt", ScramSHA256, nil, []byte("p"), 4096, "empty salt"},
		{"empty salted password", ScramSHA512, []byte("s"), nil, 4096, "empty salted password"},
		{"zero iterations", ScramSHA256, []byte("s"), []byte("p"), 0, "0 iterations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewScramCredential(tt.mechanism, tt.salt, tt.salted, tt.iterations)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	if _, err := SaltPassword("SCRAM-SHA-1", "pw", []byte("s"), 4096); err == nil {
		t.Fatal("SaltPassword accepted SCRAM-SHA-1")
	}
	if _, err := SaltPassword(ScramSHA256, "pw", []byte("s"), -1); err == nil {
		t.Fatal("SaltPassword accepted -1 iterations")
	}
}

// Printing a Credential through fmt, by accident or in a log line, shows
// no salt or key; String still gives the stored form.
func TestCredentialFormatRedacts(t *testing.T) {
	c := Credential{Mechanism: ScramSHA256, Salt: []byte("salty"), StoredKey: []byte("stored-key-bytes"), ServerKey: []byte("server-key-bytes"), Iterations: 4096}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		got := fmt.Sprintf(verb, c)
		for _, leak := range []string{"salty", "c2FsdHk", "stored-key", "c3RvcmVkLWtleS", "server-key", "c2VydmVyLWtleS", "73616c7479"} {
			if strings.Contains(got, leak) {
				t.Fatalf("Sprintf(%s) = %q shows key material", verb, got)
			}
		}
		if !strings.Contains(got, "SCRAM-SHA-256") {
			t.Fatalf("Sprintf(%s) = %q lacks the mechanism", verb, got)
		}
	}
	if !strings.HasPrefix(c.String(), "salt=c2FsdHk=,stored_key=") {
		t.Fatalf("String = %q", c.String())
	}
}
