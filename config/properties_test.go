package config

import (
	"reflect"
	"testing"
)

func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want []property
	}{
		{"equals", "a=b", []property{{"a", "b", 1}}},
		{"colon", "a: b", []property{{"a", "b", 1}}},
		{"space", "a   b", []property{{"a", "b", 1}}},
		{"blanks around =", "  a \t=  b  ", []property{{"a", "b", 1}}},
		{"only first separator", "a==b:c", []property{{"a", "=b:c", 1}}},
		{"empty value", "a=\nb", []property{{"a", "", 1}, {"b", "", 2}}},
		{"comments", "# c\n! c\n  # indented\nk=v # not a comment", []property{{"k", "v # not a comment", 4}}},
		{"blank lines", "\n\n  \nk=v\n", []property{{"k", "v", 4}}},
		{"crlf and cr", "a=1\r\nb=2\rc=3", []property{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}}},
		{"continuation", "listeners=PLAINTEXT://a:1,\\\n    PLAINTEXT2://b:2\nx=y",
			[]property{{"listeners", "PLAINTEXT://a:1,PLAINTEXT2://b:2", 1}, {"x", "y", 3}}},
		{"continued line starting with #", "a=1\\\n#2", []property{{"a", "1#2", 1}}},
		{"escaped backslash is no continuation", "a=c:\\\\\nb=2", []property{{"a", `c:\`, 1}, {"b", "2", 2}}},
		{"continuation at eof", "a=1\\", []property{{"a", "1", 1}}},
		{"escapes", `a=x\ty\nz\u0041\=\:\\`, []property{{"a", "x\ty\nzA=:\\", 1}}},
		{"escaped separator in key", `a\=b\ c=d`, []property{{"a=b c", "d", 1}}},
		{"escaped trailing space kept", `a=x\ `, []property{{"a", "x ", 1}}},
		{"comment after continuation-looking comment", "# a\\\nb=1", []property{{"b", "1", 2}}},
		{"key only", "flag", []property{{"flag", "", 1}}},
	} {
		got, err := parseProperties(tc.text)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParsePropertiesBadEscape(t *testing.T) {
	for _, text := range []string{`a=\u12`, `a=\uzzzz`, "x=1\nb\\u0=2"} {
		if _, err := parseProperties(text); err == nil {
			t.Errorf("%q: no error", text)
		}
	}
}
