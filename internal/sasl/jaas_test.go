package sasl

import (
	"maps"
	"strings"
	"testing"
)

const (
	plainModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

func TestParseJAAS(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want JAAS
	}{
		{
			name: "Kafka's PLAIN broker example",
			in:   plainModule + ` required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{
				"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret",
			}},
		},
		{
			name: "Kafka's SCRAM example",
			in:   scramModule + ` required username="admin" password="admin-secret";`,
			want: JAAS{LoginModule: scramModule, Flag: "required", Options: map[string]string{"username": "admin", "password": "admin-secret"}},
		},
		{
			name: "no options",
			in:   scramModule + " optional;",
			want: JAAS{LoginModule: scramModule, Flag: "optional", Options: map[string]string{}},
		},
		{
			name: "flag in any case, newlines, tabs, space before ';'",
			in:   "\n\t" + plainModule + "\n  REQUIRED\n\tuser_bob=\"b\"\r\n ;\n",
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"user_bob": "b"}},
		},
		{
			name: "unquoted values",
			in:   plainModule + " sufficient username=admin password=s3cr3t!#$%&*+-.:<>?@[]^_`{|}~;",
			want: JAAS{LoginModule: plainModule, Flag: "sufficient", Options: map[string]string{"username": "admin", "password": "s3cr3t!#$%&*+-.:<>?@[]^_`{|}~"}},
		},
		{
			name: "no space around '=' or before ';'",
			in:   plainModule + " requisite a=1 b=\"2\";",
			want: JAAS{LoginModule: plainModule, Flag: "requisite", Options: map[string]string{"a": "1", "b": "2"}},
		},
		{
			name: "spaces around '='",
			in:   plainModule + " required a = \"x\" ;",
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"a": "x"}},
		},
		{
			name: "quoted values keep what words cannot hold",
			in:   plainModule + ` required a="with space" b="semi;colon=eq/slash" c='single "q"' d="";`,
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{
				"a": "with space", "b": "semi;colon=eq/slash", "c": `single "q"`, "d": "",
			}},
		},
		{
			name: "escapes",
			in:   plainModule + ` required a="q\"b\\s\'" b="\t\n\r\b\f\a\v" c="\101\0\1234\477\x" d='it\'s';`,
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{
				"a": `q"b\s'`, "b": "\t\n\r\b\f\a\v", "c": "A\x00S4'7x", "d": "it's",
			}},
		},
		{
			name: "escaped newline continues the value",
			in:   plainModule + " required a=\"x\\\ny\";",
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"a": "x\ny"}},
		},
		{
			name: "octal escape above 127 is the Latin-1 character",
			in:   plainModule + ` required a="caf\351";`,
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"a": "café"}},
		},
		{
			name: "non-ASCII words",
			in:   plainModule + " required user_josé=contraseña;",
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"user_josé": "contraseña"}},
		},
		{
			name: "comments",
			in:   "/* broker */ " + plainModule + " required // the flag\n a=\"1\" /* b=\"2\" */ c=3 / lone slash comment\n;",
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"a": "1", "c": "3"}},
		},
		{
			name: "unquoted value ends at a slash",
			in:   plainModule + " required a=x/y\n;",
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"a": "x"}},
		},
		{
			name: "quoted option name",
			in:   plainModule + ` required "user_with space"="pw";`,
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"user_with space": "pw"}},
		},
		{
			name: "repeated option keeps the last value",
			in:   plainModule + ` required user_alice="one" user_alice="two";`,
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"user_alice": "two"}},
		},
		{
			name: "open comment after the entry",
			in:   plainModule + " required a=1; /* trailing",
			want: JAAS{LoginModule: plainModule, Flag: "required", Options: map[string]string{"a": "1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseJAAS(tt.in)
			if err != nil {
				t.Fatalf("ParseJAAS: %v", err)
			}
			if got.LoginModule != tt.want.LoginModule || got.Flag != tt.want.Flag || !maps.Equal(got.Options, tt.want.Options) {
				t.Fatalf("ParseJAAS = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseJAASErrors(t *testing.T) {
	// Every value below contains "hunter2", which no error may repeat.
	const secret = "hunter2"
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"empty", "", "sasl.jaas.config: no login module"},
		{"only a comment", "// nothing", "sasl.jaas.config: no login module"},
		{"no flag", plainModule, "no control flag after login module " + plainModule},
		{"no flag before ';'", plainModule + ";", "no control flag after login module " + plainModule},
		{"bad flag", plainModule + " mandatory user_a=hunter2;", "control flag of login module " + plainModule + " must be required, requisite, sufficient or optional"},
		{"starts with ';'", "; " + plainModule + " required;", "expected a login module class name"},
		{"no ';' after options", plainModule + ` required user_admin="hunter2" user_alice="hunter2"`, "sasl.jaas.config: expected ';' after option user_alice"},
		{"no ';' after flag", plainModule + " required", "expected ';' after the control flag"},
		{"no ';', value cut by a comment", plainModule + ` required user_alice=hunter2 // ;`, "expected ';' after option user_alice"},
		{"unquoted password with a space", plainModule + " required user_alice=hunter2 hunter2;", "expected name=value or ';' after option user_alice"},
		{"unquoted password with a space, last", plainModule + " required user_alice=hunter hunter2", "expected name=value or ';' after option user_alice"},
		{"no value", plainModule + " required user_alice=;", "no value for option user_alice"},
		{"no value at end", plainModule + " required user_alice=", "no value for option user_alice"},
		{"'=' for value", plainModule + " required user_alice==hunter2;", "no value for option user_alice"},
		{"no name", plainModule + ` required ="hunter2";`, "expected name=value or ';' after the control flag"},
		{"unterminated quote", plainModule + ` required user_alice="hunter2;`, "value of option user_alice: unterminated quoted string"},
		{"quote cut by a newline", plainModule + " required user_alice=\"hunter2\n\";", "value of option user_alice: unterminated quoted string"},
		{"backslash at end", plainModule + ` required user_alice="hunter2\`, "value of option user_alice: unterminated quoted string"},
		{"two entries", plainModule + ` required user_a="hunter2"; ` + scramModule + ` required password="hunter2";`, "sasl.jaas.config: 2 login modules, want 1"},
		{"C1 control character", plainModule + " required user_a=\u0085hunter2;", "no value for option user_a"},
		{"invalid UTF-8", plainModule + " required user_a=\"hunter2\xff\";", "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseJAAS(tt.in)
			if err == nil {
				t.Fatalf("ParseJAAS = %+v, want an error containing %q", got, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "hunter") {
				t.Fatalf("error %q echoes a value", err)
			}
		})
	}
}

func TestJAASHelpers(t *testing.T) {
	j, err := ParseJAAS(plainModule + ` required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_="nobody" other="x";`)
	if err != nil {
		t.Fatal(err)
	}
	if j.Username() != "admin" || j.Password() != "admin-secret" {
		t.Fatalf("Username, Password = %q, %q", j.Username(), j.Password())
	}
	want := map[string]string{"admin": "admin-secret", "alice": "alice-secret"}
	if got := j.PlainUsers(); !maps.Equal(got, want) {
		t.Fatalf("PlainUsers = %v, want %v", got, want)
	}
	// The parsed users log in through a Server built from them.
	srv, err := NewServer(ServerConfig{Enabled: []string{Plain}, PlainUsers: j.PlainUsers()})
	if err != nil {
		t.Fatal(err)
	}
	if r := drive(t, srv, plainMech("", "alice", "alice-secret")); r.err != nil || r.principal != "alice" {
		t.Fatalf("login as alice: %+v", r)
	}
}
