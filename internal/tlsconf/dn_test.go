package tlsconf

import (
	"bytes"
	"encoding/asn1"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidC      = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	oidOther  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}
)

// av is one attribute of a test subject.
func av(oid asn1.ObjectIdentifier, tag int, value string) attributeTypeAndValue {
	return attributeTypeAndValue{Type: oid, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: []byte(value)}}
}

// subject encodes RDNs given most general first, as certificates hold them.
func subject(t *testing.T, rdns ...[]attributeTypeAndValue) []byte {
	t.Helper()
	seq := make([]relativeDistinguishedNameSET, len(rdns))
	for i, r := range rdns {
		seq[i] = r
	}
	der, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func one(a attributeTypeAndValue) []attributeTypeAndValue { return []attributeTypeAndValue{a} }

const (
	utf8T      = asn1.TagUTF8String
	printableT = asn1.TagPrintableString
	ia5T       = asn1.TagIA5String
)

type dnCase struct {
	name string
	der  []byte
	want string
}

func dnCases(t *testing.T) []dnCase {
	return []dnCase{
		{"usual", subject(t, one(av(oidC, printableT, "US")), one(av(oidO, printableT, "acme")), one(av(oidOU, printableT, "eng")), one(av(oidCN, printableT, "alice"))),
			"CN=alice,OU=eng,O=acme,C=US"},
		{"specials", subject(t, one(av(oidCN, utf8T, `a,b+c=d<e>f#g;h"i\j`))), `CN=a\,b\+c\=d\<e\>f\#g\;h\"i\\j`},
		{"spaces", subject(t, one(av(oidCN, utf8T, "  x y  "))), `CN=\ \ x y\ \ `},
		{"only spaces", subject(t, one(av(oidCN, utf8T, "   "))), `CN=\ \ \ `},
		{"leading hash", subject(t, one(av(oidCN, utf8T, "#x"))), `CN=\#x`},
		{"carriage return", subject(t, one(av(oidCN, utf8T, "\rx\r"))), "CN=\\\rx\\\r"},
		{"nul", subject(t, one(av(oidCN, utf8T, "a\x00b"))), `CN=a\00b`},
		{"unescaped", subject(t, one(av(oidCN, utf8T, "a@b_c*d&e!f"))), "CN=a@b_c*d&e!f"},
		{"non-ascii", subject(t, one(av(oidCN, utf8T, "Müller 日本"))), "CN=Müller 日本"},
		{"dc uid ia5", subject(t, one(av(oidDC, ia5T, "com")), one(av(oidDC, ia5T, "example")), one(av(oidUID, utf8T, "u1"))),
			"UID=u1,DC=example,DC=com"},
		{"email as oid", subject(t, one(av(oidEmail, ia5T, "a@b.c")), one(av(oidCN, utf8T, "x"))),
			"CN=x,1.2.840.113549.1.9.1=#1605614062" + "2e63"},
		{"serialNumber as oid", subject(t, one(av(oidSerial, printableT, "123"))), "2.5.4.5=#1303313233"},
		{"unknown oid", subject(t, one(av(oidOther, utf8T, "v"))), "1.3.6.1.4.1.99999.1=#0c0176"},
		{"non-string value", subject(t, []attributeTypeAndValue{{Type: oidCN, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagInteger, Bytes: []byte{5}}}}),
			"CN=#020105"},
		{"multi-valued", subject(t, one(av(oidO, utf8T, "acme")), []attributeTypeAndValue{av(oidCN, utf8T, "a"), av(oidOU, utf8T, "b")}),
			"CN=a+OU=b,O=acme"},
		// Java reads the raw bytes of any string type as UTF-8, so a
		// BMPString's zero bytes show as NULs and Latin-1 as U+FFFD.
		{"bmp string", subject(t, one(av(oidCN, asn1.TagBMPString, "\x00a\x00b"))), `CN=\00a\00b`},
		{"latin-1 t61", subject(t, one(av(oidCN, asn1.TagT61String, "caf\xe9"))), "CN=caf\uFFFD"},
		{"empty", subject(t), ""},
	}
}

func TestSubjectDN(t *testing.T) {
	for _, tc := range dnCases(t) {
		got, err := formatDN(tc.der)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// The same subjects through Java's X500Principal.getName(), where a JDK is
// installed: the names must agree to the character, since Kafka users'
// mapping rules were written against Java's.
func TestSubjectDNAgreesWithJava(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java on PATH")
	}
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	src := filepath.Join(t.TempDir(), "Dn.java")
	prog := `import javax.security.auth.x500.X500Principal;
import java.util.HexFormat;
public class Dn {
  public static void main(String[] args) {
    for (String a : args) {
      String name = new X500Principal(HexFormat.of().parseHex(a)).getName();
      System.out.println(HexFormat.of().formatHex(name.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
    }
  }
}
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := dnCases(t)
	args := []string{src}
	for _, tc := range cases {
		args = append(args, hex.EncodeToString(tc.der))
	}
	cmd := exec.Command(java, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(cases) {
		// The empty name prints as an empty line, which TrimRight took
		// if it was last.
		for len(lines) < len(cases) {
			lines = append(lines, "")
		}
	}
	for i, tc := range cases {
		b, err := hex.DecodeString(lines[i])
		if err != nil {
			t.Fatalf("java output %q: %v", lines[i], err)
		}
		got, _ := formatDN(tc.der)
		if string(b) != got {
			t.Errorf("%s: Java %q, SubjectDN %q", tc.name, b, got)
		}
	}
}
