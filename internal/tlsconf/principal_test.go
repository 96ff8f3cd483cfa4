package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
)

// The cases of Kafka's SslPrincipalMapperTest, testValidRules and
// testInvalidRules. Go raw strings hold what Java's string literals mean.
func TestParsePrincipalRulesValidity(t *testing.T) {
	for _, tc := range []struct {
		rules string
		valid bool
	}{
		{`DEFAULT`, true},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`, true},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT`, true},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/`, true},
		{`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L`, true},
		{`RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U`, true},
		{`RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/`, true},
		{`RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/`, true},

		{`default`, false},
		{`DEFAUL`, false},
		{`DEFAULT/L`, false},
		{`DEFAULT/U`, false},
		{`RULE:CN=(.*?),OU=ServiceUsers.*/$1`, false},
		{`rule:^CN=(.*?),OU=ServiceUsers.*$/$1/`, false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U`, false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/L`, false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/U`, false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/LU`, false},

		// Beyond Kafka's tests: what Go's regexp or Java's replacement
		// syntax refuses is refused when parsing.
		{`RULE:^CN=(?=x).*$/$1/`, false}, // lookahead
		{`RULE:^CN=.*$/$1/`, false},      // no group 1 (Java: IndexOutOfBoundsException)
		{`RULE:^CN=(.*)$/$/`, false},     // lone $
		{`RULE:^CN=(.*)$/a\\/`, true},    // an escaped backslash
		{`RULE:^CN=(?P<who>.*)$/${who}/`, true},
		{`RULE:^CN=(.*)$/${nobody}/`, false},
	} {
		_, err := ParsePrincipalRules(tc.rules)
		if (err == nil) != tc.valid {
			t.Errorf("ParsePrincipalRules(%q): err %v, want valid %v", tc.rules, err, tc.valid)
		}
	}
}

// Kafka's testSslPrincipalMapper and testCommaWithWhitespace, and the
// Java replaceAll behaviours the rules inherit.
func TestPrincipalRulesMap(t *testing.T) {
	kafkaRules := strings.Join([]string{
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L`,
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L`,
		`RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U`,
		`DEFAULT`,
	}, ", ")
	for _, tc := range []struct {
		rules, dn, want string
	}{
		{kafkaRules, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"},
		{kafkaRules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"},
		{kafkaRules, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"},
		{kafkaRules, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"},
		{kafkaRules, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"},
		{`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`, `Tkac\, Adam`},

		// Java's "x".replaceAll(".*", "y") is "yy": the empty match at the
		// end counts too.
		{`RULE:.*/admin/`, "CN=alice", "adminadmin"},
		// Anchored at the start, the empty match at the end is no match.
		{`RULE:^.*$/admin/`, "CN=alice", "admin"},
		{`RULE:^.*/admin/`, "CN=alice", "admin"},
		// A group the pattern lacks stays literal, as in Kafka; $12 with
		// one group is group 1 then "2".
		{`RULE:^CN=(\w+),OU=(\w+),O=(\w+)$/$1@$4/`, "CN=a,OU=b,O=c", "a@$4"},
		{`RULE:^CN=(\w+).*$/$12/`, "CN=a,O=c", "a2"},
		{`RULE:^CN=(\w+).*$/$0!/`, "CN=a,O=c", "CN=a,O=c!"},
		{`RULE:^CN=(\w+).*$/\$1 \\ $1/`, "CN=a,O=c", `$1 \ a`},
		{`RULE:^CN=(?P<who>\w+).*$/${who}/U`, "CN=bob,O=c", "BOB"},
		// Escaped slashes are part of pattern and replacement.
		{`RULE:^CN=(\w+)\/(\w+)$/$2\/$1/`, "CN=a/b", "b/a"},
		// First matching rule wins; DEFAULT always matches.
		{`RULE:^CN=x$/first/, RULE:^CN=.*$/second/, DEFAULT`, "CN=y", "second"},
		{`RULE:^CN=x$/first/, DEFAULT, RULE:^CN=.*$/second/`, "CN=y", "CN=y"},
	} {
		r, err := ParsePrincipalRules(tc.rules)
		if err != nil {
			t.Errorf("ParsePrincipalRules(%q): %v", tc.rules, err)
			continue
		}
		got, err := r.Map(tc.dn)
		if err != nil || got != tc.want {
			t.Errorf("rules %q on %q: %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
}

// replaceAll finds the matches Java's String.replaceAll finds, including
// the empty ones Go's FindAll skips; the expectations are Java 17's output.
func TestReplaceAllJavaMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, replacement, in, want string
	}{
		{`a*`, `X`, "baa", "XbXX"},
		{`\b`, `|`, "ab cd", "|ab| |cd|"},
		{`(?m)^`, `|`, "a\nb", "|a\n|b"},
		{`x*$`, `-`, "axx", "a--"},
		{``, `-`, "ab", "-a-b-"},
		{`(a)|b`, `<$1>`, "ab", "<a><>"},
		{`é*`, `-`, "aéb", "-a--b-"},
		{`(.*?)`, `[$1]`, "ab", "[]a[]b[]"},
	} {
		r, err := newPrincipalRule(tc.pattern, tc.replacement, "")
		if err != nil {
			t.Fatalf("rule %q/%q: %v", tc.pattern, tc.replacement, err)
		}
		if got := r.replaceAll(tc.in); got != tc.want {
			t.Errorf("%q.replaceAll(%q, %q) = %q, want %q", tc.in, tc.pattern, tc.replacement, got, tc.want)
		}
	}
}

// Kafka's testRulesSplitting: the rules as toString shows them.
func TestPrincipalRulesSplitting(t *testing.T) {
	for _, tc := range []struct {
		rules, want string
	}{
		{``, `[]`},
		{`DEFAULT`, `[DEFAULT]`},
		{`RULE://`, `[RULE:/]`},
		{`RULE:/.*/`, `[RULE:/.*]`},
		{`RULE:/.*/L`, `[RULE:/.*/L]`},
		{`RULE://,DEFAULT`, `[RULE:/, DEFAULT]`},
		{`  RULE:// ,  DEFAULT  `, `[RULE:/, DEFAULT]`},
		{`  RULE:   /     / ,  DEFAULT  `, `[RULE:   /     , DEFAULT]`},
		{`  RULE:  /     /U   ,DEFAULT  `, `[RULE:  /     /U, DEFAULT]`},
		{`  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  `, `[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]`},

		// empty rules are ignored
		{`,   , , ,      , , ,   `, `[]`},
		{`,,RULE://,,,DEFAULT,,`, `[RULE:/, DEFAULT]`},
		{`,  , RULE: /   /    ,,,   DEFAULT, ,   `, `[RULE: /   , DEFAULT]`},
		{`     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,`, `[RULE:   /  /U, DEFAULT]`},

		// escape sequences
		{`RULE:\/\\\(\)\n\t/\/\//`, `[RULE:\/\\\(\)\n\t/\/\/]`},
		{`RULE:\**\/+/*/L,RULE:\/*\**/**/`, `[RULE:\**\/+/*/L, RULE:\/*\**/**]`},

		// rules rule
		{
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
			`[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
		},
	} {
		r, err := ParsePrincipalRules(tc.rules)
		if err != nil {
			t.Errorf("ParsePrincipalRules(%q): %v", tc.rules, err)
			continue
		}
		if got := r.String(); got != tc.want {
			t.Errorf("ParsePrincipalRules(%q) = %s, want %s", tc.rules, got, tc.want)
		}
	}
}

// No rule applying is an error (Kafka fails the authentication); a
// connection without a verified client certificate is ANONYMOUS whatever
// the rules.
func TestPrincipalNoMatch(t *testing.T) {
	r, err := ParsePrincipalRules(`RULE:^CN=(\w+),O=acme$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Map("CN=eve,O=evil"); err == nil {
		t.Errorf("Map = %q, want an error", got)
	}
	if got, err := r.Principal(tls.ConnectionState{}); err != nil || got != "ANONYMOUS" {
		t.Errorf("Principal without certificate = %q, %v", got, err)
	}
	// Presented but not verified (as with tls.RequestClientCert): still
	// anonymous.
	unverified := tls.ConnectionState{PeerCertificates: []*x509.Certificate{{}}}
	if got, err := r.Principal(unverified); err != nil || got != "ANONYMOUS" {
		t.Errorf("Principal of an unverified certificate = %q, %v", got, err)
	}
	var zero PrincipalRules
	if _, err := zero.Map("CN=x"); err == nil {
		t.Error("the zero PrincipalRules mapped a name")
	}
}
